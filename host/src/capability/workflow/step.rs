//! A step's attempts. `begin-step` replays a step that finished (its
//! output or its terminal failure) or opens a savepoint for the next
//! attempt, once a retry's backoff is over; `end-step` keeps the attempt
//! with the step's history entry, or rolls it back to the savepoint and
//! records a retry or a terminal failure.
//!
//! Consecutive steps of a run share one transaction (the run's
//! [`StepBatch`]): the first begins it, each keeps its writes from its own
//! savepoint, and they commit together, with their effects, once the batch
//! is full or old, or after a step that reached another instance (the
//! bounds of every batch: [`BatchSize`](crate::instance::batch::BatchSize)),
//! and when the run stops. Nothing of a step leaves the instance before its
//! commit. A step that would reach another instance from inside a batch
//! stops the run instead
//! ([`InstanceState::check_reaching_outside`]): the steps before it
//! commit, and the run starts again with every step alone, so that a call
//! never goes out before the steps it follows are durable.

use std::time::Duration;

use super::history::new_entry;
use crate::bindings::types::Failure;
use crate::bindings::workflow::{
    FailureKind, Interrupt, StepFailure, StepOptions, StepOutcome, StepStart,
};
use crate::clock::now_ms;
use crate::config::{MAX_RESULT_BYTES, MAX_STEP_TIMEOUT};
use crate::error::TRANSACTION_ROLLED_BACK;
use crate::instance::commit::CommitError;
use crate::instance::output::failure_text;
use crate::instance::workflow_run::{OpenStep, StepBatch};
use crate::instance::{InstanceState, Mode, commit_trap, storage_trap};
use crate::storage::{
    EntryKind, EntryStatus, HistoryEntry, HostTables, Savepoint, StepRequestRow, retry_delay,
};

pub(super) fn begin_step(
    instance: &mut InstanceState,
    name: String,
    options: StepOptions,
) -> wasmtime::Result<Result<StepStart, Interrupt>> {
    let (location, recorded) =
        match instance.replay("workflow.begin-step", EntryKind::Step, &name)? {
            Ok(found) => found,
            Err(interrupt) => return Ok(Err(interrupt)),
        };
    let now = now_ms();
    let attempt = match recorded {
        Some(e) => match e.status {
            EntryStatus::Done => {
                return Ok(Ok(StepStart::Done(
                    e.output.unwrap_or_else(|| "null".into()),
                )));
            }
            EntryStatus::Failed => return Ok(Ok(StepStart::Failed(step_failure(&e)))),
            // A check runs no step body: a step to retry is where it stops.
            _ if instance.run().checking => return Ok(Err(Interrupt::Suspend)),
            _ => {
                if let Some(at) = e.wake_at.filter(|at| *at > now) {
                    instance
                        .run()
                        .wait_until(at, format!("the retry of step `{name}`"));
                    return Ok(Err(Interrupt::Suspend));
                }
                e.attempts as u32 + 1
            }
        },
        None => 1,
    };
    let timeout = match step_timeout(options.timeout_ms, instance.call_timeout()) {
        Ok(timeout) => timeout,
        Err(refusal) => {
            return Ok(Err(Interrupt::Invalid(format!("step `{name}`: {refusal}"))));
        }
    };
    // A batch past its time (orchestration code ran long since its last
    // step) commits before the next step joins it.
    let run = instance.run();
    let old = run.batch.as_ref().is_some_and(|b| b.size.is_old());
    if run.steps_alone || old {
        instance.commit_steps().map_err(commit_trap)?;
    }
    let batched = instance.run().batch.is_some();
    if !batched {
        instance.db().begin().map_err(storage_trap)?;
        instance.run().batch = Some(StepBatch::new());
    }
    instance.db().enter(Savepoint::Step).map_err(storage_trap)?;
    instance.discard_effects();
    instance.http_context().step_requests.clear();
    instance.deadline().start(timeout);
    instance.set_mode(Mode::Step);
    instance.run().open = Some(OpenStep {
        location,
        name,
        attempt,
        options,
        timeout,
        batched,
    });
    Ok(Ok(StepStart::Run(attempt)))
}

pub(super) fn end_step(
    instance: &mut InstanceState,
    outcome: StepOutcome,
) -> wasmtime::Result<Result<Option<StepFailure>, Interrupt>> {
    let open = match (instance.mode(), instance.workflow_run_mut()) {
        (Mode::Step, Some(run)) => run.open.take(),
        _ => None,
    };
    let Some(open) = open else {
        return Ok(Err(Interrupt::Invalid(
            "workflow.end-step was called with no step open".into(),
        )));
    };
    instance.set_mode(Mode::Orchestration);
    instance.deadline().start(instance.call_timeout());
    let lost = instance.take_lost_transaction();
    let (kind, failure) = match outcome {
        StepOutcome::Ok(output) if output.len() > MAX_RESULT_BYTES => (
            Some(FailureKind::Critical),
            Failure {
                code: "limit-exceeded".into(),
                message: format!(
                    "the step's output is {} bytes; the limit is {MAX_RESULT_BYTES} bytes",
                    output.len()
                ),
            },
        ),
        StepOutcome::Ok(output) => match &lost {
            Some(cause) => (
                None,
                Failure {
                    code: TRANSACTION_ROLLED_BACK.into(),
                    message: format!("SQLite rolled the step's transaction back after {cause}"),
                },
            ),
            None => {
                instance.keep_step(&open, output)?;
                return Ok(Ok(None));
            }
        },
        StepOutcome::Error(f) => (None, f),
        StepOutcome::Critical(f) => (Some(FailureKind::Critical), f),
        StepOutcome::Rollback(f) => (Some(FailureKind::Rollback), f),
    };
    let batch_lost = instance.undo_step(lost.is_some());
    let recorded = instance.record_step_failure(&open, kind, &failure.code, &failure.message)?;
    if batch_lost && open.batched {
        // The steps before this one went with the transaction, after the
        // orchestration code saw their outputs: the run replays them now.
        let what = format!("the steps before `{}`, rolled back by SQLite", open.name);
        instance.run().wait_until(now_ms(), what);
        return Ok(Err(Interrupt::Suspend));
    }
    match recorded {
        Some(terminal) => Ok(Ok(Some(terminal))),
        None => Ok(Err(Interrupt::Suspend)),
    }
}

impl InstanceState {
    /// Keeps the open step's writes with its history entry in the run's
    /// batch, and commits the batch if it is due.
    fn keep_step(&mut self, open: &OpenStep, output: String) -> wasmtime::Result<()> {
        if self.db().conn.is_autocommit() {
            // Never record a step whose writes are gone.
            return Err(wasmtime::Error::msg(format!(
                "the transaction of step `{}` ended before the step did",
                open.name
            )));
        }
        let mut entry = new_entry(
            open.location.clone(),
            EntryKind::Step,
            &open.name,
            EntryStatus::Done,
        );
        entry.output = Some(output);
        entry.attempts = open.attempt as i64;
        self.put(&entry)?;
        self.record_step_requests(open, entry.updated_at)?;
        self.db().keep(Savepoint::Step).map_err(storage_trap)?;
        let effects = self.take_effects();
        let run = self.run();
        let steps_alone = run.steps_alone;
        let Some(batch) = run.batch.as_mut() else {
            return Err(wasmtime::Error::msg(format!(
                "step `{}` ended outside the run's transaction",
                open.name
            )));
        };
        batch.size.add(0);
        batch.effects.absorb(effects);
        let due = steps_alone || batch.size.is_full(&batch.effects);
        if due {
            self.commit_steps().map_err(commit_trap)?;
        }
        Ok(())
    }

    /// Rolls the open step back to its savepoint, with its effects. Returns
    /// whether the whole transaction went instead (`lost`: SQLite rolled it
    /// back already), and with it the run's batch.
    pub(crate) fn undo_step(&mut self, lost: bool) -> bool {
        self.discard_effects();
        self.take_lost_transaction();
        let undone =
            !lost && !self.db().conn.is_autocommit() && self.db().undo(Savepoint::Step).is_ok();
        if undone {
            return false;
        }
        self.db().rollback();
        if let Some(run) = self.workflow_run_mut() {
            run.batch = None;
        }
        true
    }

    /// Commits the run's batch of steps, if it has one, with their
    /// effects. A failed commit rolls the batch back.
    pub(crate) fn commit_steps(&mut self) -> Result<(), CommitError> {
        let Some(batch) = self.workflow_run_mut().and_then(|run| run.batch.take()) else {
            return Ok(());
        };
        match self.commit_with(batch.effects) {
            Ok(committed) => {
                if let Some(run) = self.workflow_run_mut() {
                    run.committed_appends |= committed.appended;
                }
                Ok(())
            }
            Err(e) => {
                self.db().rollback();
                Err(e)
            }
        }
    }

    /// Before a call or send of a step reaches another instance: a step
    /// that began inside a batch may not, since the steps and entries
    /// before it have not committed. The run stops with a trap, and its
    /// driver runs it again with every step alone
    /// ([`RunState::steps_alone`](crate::instance::workflow_run::RunState)).
    pub(crate) fn check_reaching_outside(&mut self, call: &str) -> wasmtime::Result<()> {
        let in_step = self.mode() == Mode::Step;
        let Some(run) = self.workflow_run_mut() else {
            return Ok(());
        };
        match &run.open {
            Some(open) if in_step && open.batched => {
                run.restart_alone = true;
                Err(wasmtime::Error::msg(format!(
                    "{call} in step `{}`: the steps before it commit first, and the run \
                     starts again with its steps alone",
                    open.name
                )))
            }
            _ => Ok(()),
        }
    }

    /// Writes the requests the attempt of `open` sent, with its entry:
    /// the inspector's timeline shows them.
    fn record_step_requests(&mut self, open: &OpenStep, at: i64) -> wasmtime::Result<()> {
        let rows: Vec<StepRequestRow> = self
            .http_context()
            .step_requests
            .drain(..)
            .map(|request| {
                let r = request.lock().unwrap_or_else(|e| e.into_inner());
                StepRequestRow {
                    attempt: open.attempt as i64,
                    method: r.method.clone(),
                    authority: r.authority.clone(),
                    status: r.status.map(i64::from),
                    outcome: r.outcome.to_owned(),
                    duration_ms: r.duration_ms.map(|ms| ms as i64),
                    at,
                }
            })
            .collect();
        self.db()
            .conn
            .workflow()
            .record_requests(&open.location, &rows)
            .map_err(storage_trap)
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
        let kind = kind.or_else(|| {
            (open.attempt > open.options.max_retries).then_some(FailureKind::Exhausted)
        });
        let status = if kind.is_some() {
            EntryStatus::Failed
        } else {
            EntryStatus::Retrying
        };
        let mut entry = new_entry(open.location.clone(), EntryKind::Step, &open.name, status);
        if kind.is_none() {
            let delay = retry_delay(
                Duration::from_millis(open.options.backoff_base_ms),
                Duration::from_millis(open.options.backoff_cap_ms),
                open.attempt,
            );
            entry.wake_at = Some(entry.updated_at.saturating_add(delay.as_millis() as i64));
        }
        entry.failure_kind = kind.map(|k| failure_kind_name(k).to_owned());
        entry.error_code = Some(failure_text(code));
        entry.error = Some(failure_text(message));
        entry.attempts = open.attempt as i64;
        self.put(&entry)?;
        self.record_step_requests(open, entry.updated_at)?;
        if let (Some(at), Some(run)) = (entry.wake_at, self.workflow_run_mut()) {
            run.wait_until(at, format!("the retry of step `{}`", open.name));
        }
        Ok(kind.map(|_| step_failure(&entry)))
    }
}

fn failure_kind_name(kind: FailureKind) -> &'static str {
    match kind {
        FailureKind::Critical => "critical",
        FailureKind::Timeout => "timeout",
        FailureKind::Exhausted => "exhausted",
        FailureKind::Rollback => "rollback",
    }
}

/// The timeout of a step attempt: the step's own `timeout_ms`, or the
/// actor's `call_timeout`. A step may ask for at most [`MAX_STEP_TIMEOUT`]
/// (or the `call_timeout`, if that is longer); a longer timeout is refused
/// rather than cut, so the step never runs under a deadline shorter than
/// the one it asked for.
fn step_timeout(timeout_ms: Option<u64>, call_timeout: Duration) -> Result<Duration, String> {
    let Some(ms) = timeout_ms else {
        return Ok(call_timeout);
    };
    let longest = MAX_STEP_TIMEOUT.max(call_timeout);
    let timeout = Duration::from_millis(ms);
    if timeout > longest {
        return Err(format!(
            "the step asks for a timeout of {ms} ms; the longest a step may ask for is {} ms \
             (MAX_STEP_TIMEOUT, or the actor's call_timeout if longer)",
            longest.as_millis()
        ));
    }
    Ok(timeout)
}

fn step_failure(e: &HistoryEntry) -> StepFailure {
    StepFailure {
        kind: match e.failure_kind.as_deref() {
            Some("critical") => FailureKind::Critical,
            Some("timeout") => FailureKind::Timeout,
            Some("rollback") => FailureKind::Rollback,
            _ => FailureKind::Exhausted,
        },
        code: e.error_code.clone().unwrap_or_default(),
        message: e.error.clone().unwrap_or_default(),
        attempts: e.attempts as u32,
    }
}

/// The open step's idempotency key (see `step-key` in the WIT): a digest
/// of the instance (actor, key and creation time, so that a re-created
/// instance gets new keys), the step's location and its name.
pub(super) fn step_key(instance: &mut InstanceState) -> wasmtime::Result<Option<String>> {
    use sha2::{Digest, Sha256};
    let open = match (instance.mode(), instance.workflow_run()) {
        (Mode::Step, Some(run)) => match &run.open {
            Some(open) => (open.location.clone(), open.name.clone()),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    let created_at = instance
        .db()
        .created_at()
        .and_then(|at| at.ok_or(rusqlite::Error::QueryReturnedNoRows))
        .map_err(storage_trap)?;
    let mut digest = Sha256::new();
    for part in [
        instance.name().actor.as_bytes(),
        instance.name().key.as_bytes(),
        &created_at.to_le_bytes(),
        open.0.as_bytes(),
        open.1.as_bytes(),
    ] {
        digest.update((part.len() as u64).to_le_bytes());
        digest.update(part);
    }
    Ok(Some(hex::encode(&digest.finalize()[..16])))
}
