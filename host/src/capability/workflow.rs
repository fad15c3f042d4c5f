//! `burrow:actor/workflow`: steps, durable sleeps and recorded times for a
//! workflow's orchestration code.
//!
//! Every call takes the run's next position. A position the history
//! already holds replays its entry; a different kind or name there is a
//! divergence, and the run stops without touching the history. A step runs
//! in its own transaction, opened by `begin-step` and committed by
//! `end-step` together with the step's history entry.

use std::time::Duration;

use crate::bindings::types::Failure;
use crate::bindings::workflow::{
    FailureKind, Host, Interrupt, StepFailure, StepOptions, StepOutcome, StepStart,
};
use crate::config::MAX_RESULT_BYTES;
use crate::instance_state::{InstanceState, Mode, storage_trap};
use crate::queue::retry_delay;
use crate::storage::instance_db::now_ms;
use crate::storage::workflow::{self as workflow_db, EntryKind, EntryStatus, HistoryEntry};
use crate::workflow::run::OpenStep;

impl Host for InstanceState {
    fn begin_step(
        &mut self,
        name: String,
        options: StepOptions,
    ) -> wasmtime::Result<Result<StepStart, Interrupt>> {
        if let Err(interrupt) = self.check_orchestration("workflow.begin-step") {
            return Ok(Err(interrupt));
        }
        let (position, recorded) = self.next_position()?;
        let now = now_ms();
        let attempt = match recorded {
            Some(e) if e.kind != EntryKind::Step || e.name != name => {
                return Ok(Err(self.diverge(&e, EntryKind::Step, &name)));
            }
            Some(e) => match e.status {
                EntryStatus::Done => {
                    return Ok(Ok(StepStart::Done(
                        e.output.unwrap_or_else(|| "null".into()),
                    )));
                }
                EntryStatus::Failed => return Ok(Ok(StepStart::Failed(step_failure(&e)))),
                EntryStatus::Retrying | EntryStatus::Sleeping => {
                    if let Some(at) = e.wake_at.filter(|at| *at > now) {
                        self.wait_until(at, format!("the retry of step `{name}`"));
                        return Ok(Err(Interrupt::Suspend));
                    }
                    e.attempts as u32 + 1
                }
            },
            None => 1,
        };
        self.db.begin().map_err(storage_trap)?;
        let timeout = options
            .timeout_ms
            .map_or(self.call_timeout, Duration::from_millis);
        self.deadline.start(timeout);
        self.mode = Mode::Step;
        self.run_state().open = Some(OpenStep {
            position,
            name,
            attempt,
            options,
            timeout,
        });
        Ok(Ok(StepStart::Run(attempt)))
    }

    fn end_step(
        &mut self,
        outcome: StepOutcome,
    ) -> wasmtime::Result<Result<Option<StepFailure>, Interrupt>> {
        let open = match (self.mode, self.workflow.as_mut()) {
            (Mode::Step, Some(run)) => run.open.take(),
            _ => None,
        };
        let Some(open) = open else {
            return Ok(Err(Interrupt::Invalid(
                "workflow.end-step was called with no step open".into(),
            )));
        };
        self.mode = Mode::Orchestration;
        self.deadline.start(self.call_timeout);
        let failure = match outcome {
            StepOutcome::Ok(output) if output.len() > MAX_RESULT_BYTES => Some((
                Some(FailureKind::Critical),
                Failure {
                    code: "limit-exceeded".into(),
                    message: format!(
                        "the step's output is {} bytes; the limit is {MAX_RESULT_BYTES} bytes",
                        output.len()
                    ),
                },
            )),
            StepOutcome::Ok(output) => match self.transaction_lost.take() {
                Some(cause) => Some((
                    None,
                    Failure {
                        code: "transaction-rolled-back".into(),
                        message: format!("SQLite rolled the step's transaction back after {cause}"),
                    },
                )),
                None => {
                    self.commit_step(&open, output)?;
                    return Ok(Ok(None));
                }
            },
            StepOutcome::Error(f) => Some((None, f)),
            StepOutcome::Critical(f) => Some((Some(FailureKind::Critical), f)),
        };
        let (kind, failure) = failure.expect("every other outcome returned");
        self.db.rollback();
        self.appended = false;
        self.transaction_lost = None;
        match self.record_step_failure(&open, kind, &failure.code, &failure.message)? {
            Some(terminal) => Ok(Ok(Some(terminal))),
            None => Ok(Err(Interrupt::Suspend)),
        }
    }

    fn sleep(&mut self, name: String, duration_ms: u64) -> wasmtime::Result<Result<(), Interrupt>> {
        let now = now_ms();
        self.durable_sleep(name, "workflow.sleep", |_| {
            now.saturating_add(duration_ms.min(i64::MAX as u64) as i64)
        })
    }

    fn sleep_until(&mut self, name: String, at_ms: i64) -> wasmtime::Result<Result<(), Interrupt>> {
        self.durable_sleep(name, "workflow.sleep-until", |_| at_ms)
    }

    fn now(&mut self) -> wasmtime::Result<Result<i64, Interrupt>> {
        if let Err(interrupt) = self.check_orchestration("workflow.now") {
            return Ok(Err(interrupt));
        }
        let (position, recorded) = self.next_position()?;
        match recorded {
            Some(e) if e.kind != EntryKind::Now => Ok(Err(self.diverge(&e, EntryKind::Now, "now"))),
            Some(e) => Ok(Ok(e
                .output
                .and_then(|o| o.parse().ok())
                .unwrap_or_default())),
            None => {
                let now = now_ms();
                let entry = HistoryEntry {
                    position,
                    kind: EntryKind::Now,
                    name: "now".into(),
                    status: EntryStatus::Done,
                    output: Some(now.to_string()),
                    failure_kind: None,
                    error_code: None,
                    error: None,
                    attempts: 0,
                    wake_at: None,
                    updated_at: now,
                };
                workflow_db::put_entry(&self.db.conn, &entry).map_err(storage_trap)?;
                Ok(Ok(now))
            }
        }
    }
}

impl InstanceState {
    fn run_state(&mut self) -> &mut crate::workflow::run::RunState {
        self.workflow
            .as_mut()
            .expect("checked by check_orchestration")
    }

    /// Refuses `call` unless orchestration code of a run is running (no
    /// step open).
    fn check_orchestration(&self, call: &str) -> Result<(), Interrupt> {
        match (self.mode, &self.workflow) {
            (Mode::Orchestration, Some(_)) => Ok(()),
            (Mode::Step, Some(run)) => Err(Interrupt::Invalid(format!(
                "{call} was called inside step `{}`; steps do not nest, and sleeps belong \
                 to orchestration code",
                run.open.as_ref().map_or("?", |o| o.name.as_str())
            ))),
            _ => Err(Interrupt::Invalid(format!(
                "{call} is only for a workflow's run"
            ))),
        }
    }

    /// Takes the run's next position and reads what history holds there.
    fn next_position(&mut self) -> wasmtime::Result<(i64, Option<HistoryEntry>)> {
        let run = self.run_state();
        let position = run.next_position;
        run.next_position += 1;
        let recorded = workflow_db::entry(&self.db.conn, position).map_err(storage_trap)?;
        Ok((position, recorded))
    }

    fn wait_until(&mut self, at: i64, what: String) {
        let run = self.run_state();
        if run.wait.as_ref().is_none_or(|(earliest, _)| at < *earliest) {
            run.wait = Some((at, what));
        }
    }

    fn diverge(&mut self, recorded: &HistoryEntry, kind: EntryKind, name: &str) -> Interrupt {
        let message = format!(
            "the history diverged at position {}: it recorded {} `{}`, and the code now reaches {} `{}`",
            recorded.position,
            recorded.kind.as_str(),
            recorded.name,
            kind.as_str(),
            name
        );
        self.run_state().diverged = Some(message.clone());
        Interrupt::Diverged(message)
    }

    fn durable_sleep(
        &mut self,
        name: String,
        call: &str,
        wake_at: impl FnOnce(i64) -> i64,
    ) -> wasmtime::Result<Result<(), Interrupt>> {
        if let Err(interrupt) = self.check_orchestration(call) {
            return Ok(Err(interrupt));
        }
        let (position, recorded) = self.next_position()?;
        let now = now_ms();
        let at = match recorded {
            Some(e) if e.kind != EntryKind::Sleep || e.name != name => {
                return Ok(Err(self.diverge(&e, EntryKind::Sleep, &name)));
            }
            Some(e) if e.status == EntryStatus::Done => return Ok(Ok(())),
            Some(e) => e.wake_at.unwrap_or(now),
            None => wake_at(now),
        };
        let entry = HistoryEntry {
            position,
            kind: EntryKind::Sleep,
            name: name.clone(),
            status: if at <= now {
                EntryStatus::Done
            } else {
                EntryStatus::Sleeping
            },
            output: None,
            failure_kind: None,
            error_code: None,
            error: None,
            attempts: 0,
            wake_at: Some(at),
            updated_at: now,
        };
        workflow_db::put_entry(&self.db.conn, &entry).map_err(storage_trap)?;
        if at <= now {
            return Ok(Ok(()));
        }
        self.wait_until(at, format!("sleep `{name}`"));
        Ok(Err(Interrupt::Suspend))
    }

    /// Commits the open step's transaction with its history entry.
    fn commit_step(&mut self, open: &OpenStep, output: String) -> wasmtime::Result<()> {
        let now = now_ms();
        let entry = HistoryEntry {
            position: open.position,
            kind: EntryKind::Step,
            name: open.name.clone(),
            status: EntryStatus::Done,
            output: Some(output),
            failure_kind: None,
            error_code: None,
            error: None,
            attempts: open.attempt as i64,
            wake_at: None,
            updated_at: now,
        };
        workflow_db::put_entry(&self.db.conn, &entry).map_err(storage_trap)?;
        let appended = std::mem::take(&mut self.appended);
        let committed = match (&self.index, appended) {
            (Some(index), true) => index
                .lower_mark_around(&self.name.actor, &self.name.key, now, || self.db.commit())
                .and_then(|r| r),
            _ => self.db.commit(),
        };
        committed.map_err(storage_trap)?;
        self.run_state().committed_appends |= appended;
        Ok(())
    }

    /// Records a failed attempt of `open` (its transaction rolled back
    /// already): a retry after the step's backoff, or a terminal failure,
    /// which it returns.
    pub(crate) fn record_step_failure(
        &mut self,
        open: &OpenStep,
        kind: Option<FailureKind>,
        code: &str,
        message: &str,
    ) -> wasmtime::Result<Option<StepFailure>> {
        let now = now_ms();
        let kind = kind.or_else(|| {
            (open.attempt > open.options.max_retries).then_some(FailureKind::Exhausted)
        });
        let wake_at = match kind {
            Some(_) => None,
            None => {
                let delay = retry_delay(
                    Duration::from_millis(open.options.backoff_base_ms),
                    Duration::from_millis(open.options.backoff_cap_ms),
                    open.attempt,
                );
                Some(now.saturating_add(delay.as_millis() as i64))
            }
        };
        let entry = HistoryEntry {
            position: open.position,
            kind: EntryKind::Step,
            name: open.name.clone(),
            status: if kind.is_some() {
                EntryStatus::Failed
            } else {
                EntryStatus::Retrying
            },
            output: None,
            failure_kind: kind.map(|k| failure_kind_name(k).to_owned()),
            error_code: Some(code.to_owned()),
            error: Some(message.to_owned()),
            attempts: open.attempt as i64,
            wake_at,
            updated_at: now,
        };
        workflow_db::put_entry(&self.db.conn, &entry).map_err(storage_trap)?;
        if let Some(at) = wake_at {
            self.wait_until(at, format!("the retry of step `{}`", open.name));
        }
        Ok(kind.map(|_| step_failure(&entry)))
    }
}

fn failure_kind_name(kind: FailureKind) -> &'static str {
    match kind {
        FailureKind::Critical => "critical",
        FailureKind::Timeout => "timeout",
        FailureKind::Exhausted => "exhausted",
    }
}

fn step_failure(e: &HistoryEntry) -> StepFailure {
    StepFailure {
        kind: match e.failure_kind.as_deref() {
            Some("critical") => FailureKind::Critical,
            Some("timeout") => FailureKind::Timeout,
            _ => FailureKind::Exhausted,
        },
        code: e.error_code.clone().unwrap_or_default(),
        message: e.error.clone().unwrap_or_default(),
        attempts: e.attempts as u32,
    }
}
