//! A step's attempts. `begin-step` replays a step that finished (its
//! output or its terminal failure) or opens a transaction for the next
//! attempt, once a retry's backoff is over; `end-step` commits the attempt
//! with the step's history entry, or rolls it back and records a retry or
//! a terminal failure.

use std::time::Duration;

use super::history::new_entry;
use crate::bindings::types::Failure;
use crate::bindings::workflow::{
    FailureKind, Interrupt, StepFailure, StepOptions, StepOutcome, StepStart,
};
use crate::config::{MAX_RESULT_BYTES, MAX_STEP_TIMEOUT};
use crate::instance::output::failure_text;
use crate::instance::workflow_run::OpenStep;
use crate::instance::{InstanceState, Mode, storage_trap};
use crate::storage::instance_db::now_ms;
use crate::storage::queue::retry_delay;
use crate::storage::workflow::{EntryKind, EntryStatus, HistoryEntry};

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
    let timeout = match step_timeout(options.timeout_ms, instance.call_timeout) {
        Ok(timeout) => timeout,
        Err(refusal) => {
            return Ok(Err(Interrupt::Invalid(format!("step `{name}`: {refusal}"))));
        }
    };
    instance.db.begin().map_err(storage_trap)?;
    instance.discard_effects();
    instance.deadline.start(timeout);
    instance.mode = Mode::Step;
    instance.run().open = Some(OpenStep {
        location,
        name,
        attempt,
        options,
        timeout,
    });
    Ok(Ok(StepStart::Run(attempt)))
}

pub(super) fn end_step(
    instance: &mut InstanceState,
    outcome: StepOutcome,
) -> wasmtime::Result<Result<Option<StepFailure>, Interrupt>> {
    let open = match (instance.mode, instance.workflow.as_mut()) {
        (Mode::Step, Some(run)) => run.open.take(),
        _ => None,
    };
    let Some(open) = open else {
        return Ok(Err(Interrupt::Invalid(
            "workflow.end-step was called with no step open".into(),
        )));
    };
    instance.mode = Mode::Orchestration;
    instance.deadline.start(instance.call_timeout);
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
        StepOutcome::Ok(output) => match instance.transaction_lost.take() {
            Some(cause) => (
                None,
                Failure {
                    code: "transaction-rolled-back".into(),
                    message: format!("SQLite rolled the step's transaction back after {cause}"),
                },
            ),
            None => {
                instance.commit_step(&open, output)?;
                return Ok(Ok(None));
            }
        },
        StepOutcome::Error(f) => (None, f),
        StepOutcome::Critical(f) => (Some(FailureKind::Critical), f),
        StepOutcome::Rollback(f) => (Some(FailureKind::Rollback), f),
    };
    instance.db.rollback();
    instance.discard_effects();
    instance.transaction_lost = None;
    match instance.record_step_failure(&open, kind, &failure.code, &failure.message)? {
        Some(terminal) => Ok(Ok(Some(terminal))),
        None => Ok(Err(Interrupt::Suspend)),
    }
}

impl InstanceState {
    /// Commits the open step's transaction with its history entry.
    fn commit_step(&mut self, open: &OpenStep, output: String) -> wasmtime::Result<()> {
        let mut entry = new_entry(
            open.location.clone(),
            EntryKind::Step,
            &open.name,
            EntryStatus::Done,
        );
        entry.output = Some(output);
        entry.attempts = open.attempt as i64;
        self.put(&entry)?;
        let appended = self.commit_transaction().map_err(storage_trap)?.appended;
        self.run().committed_appends |= appended;
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
        if let (Some(at), Some(run)) = (entry.wake_at, self.workflow.as_mut()) {
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
