//! A cell's workflow: noting and starting it, and one run of its
//! orchestration code with the steps it commits.

use crate::bindings::types::Failure;
use crate::bindings::workflow::FailureKind;
use crate::bindings::workflow_runner::RunOutcome;
use crate::clock::now_ms;
use crate::config::MAX_RESULT_BYTES;
use crate::error::Error;
use crate::instance::Mode;
use crate::instance::commit::CommitError;
use crate::instance::output::failure_text;
use crate::instance::workflow_run::RunState;
use crate::storage::{HostTables, WorkflowStatus};

use super::{Cell, storage_error};

impl Cell {
    /// At a wake: notes whether the instance has a workflow (its queue then
    /// feeds the workflow's queue waits).
    pub(super) fn note_workflow(&mut self) -> rusqlite::Result<()> {
        if self.exports.runner.is_none() || !self.db().conn.workflow().has_schema()? {
            return Ok(());
        }
        let has_queue = self.db().conn.queue().has_schema()?;
        self.store.data_mut().note_workflow(has_queue);
        Ok(())
    }

    /// Whether the creation started a workflow, once, after it committed.
    pub(crate) fn take_workflow_started(&mut self) -> bool {
        self.starting.is_none() && std::mem::take(&mut self.workflow_started)
    }

    /// Asks the guest whether it has a workflow; if it does, records the
    /// workflow with the create `input` in the creation's transaction, and
    /// sets the workflow mark before that transaction commits (so that a
    /// crash right after the commit still finds the workflow).
    pub(super) async fn start_workflow(&mut self, input: &str, now: i64) -> Result<(), Error> {
        if self.exports.runner.is_none() {
            return Ok(());
        }
        let has_workflow = self
            .call(
                Mode::Hook("has-workflow"),
                "workflow-runner has-workflow",
                async |exports, store| {
                    let runner = exports.runner.as_ref().expect("checked above");
                    runner.call_has_workflow(store).await
                },
            )
            .await?;
        if !has_workflow {
            return Ok(());
        }
        let name = self.name().clone();
        let storage = |e| storage_error(&name, e);
        self.db().ensure_workflow_schema().map_err(storage)?;
        // The workflow's queue waits read the instance's queue.
        self.db().ensure_queue_schema().map_err(storage)?;
        self.store.data_mut().note_workflow(true);
        self.db()
            .conn
            .workflow()
            .start(input, now)
            .map_err(storage)?;
        // The commit that creates the instance sets its workflow mark.
        self.store.data_mut().note_workflow_started(now);
        self.workflow_started = true;
        Ok(())
    }

    /// Runs the instance's workflow once, from the start (replaying its
    /// history), until it completes, fails, diverges or must wait. Its
    /// steps commit in batches (`capability/workflow/step.rs`), or each
    /// on its own with `steps_alone`; whatever the run's batch holds when
    /// it stops commits before its end is recorded.
    pub(crate) async fn run_workflow(&mut self, steps_alone: bool) -> Result<RunEnd, Error> {
        // Commit the start's transaction (migrate, wake) first, if the
        // instance just woke; the run itself holds no transaction.
        if self.starting.is_some() {
            self.begin()?;
            self.finish(Ok(()))?;
        }
        if self.exports.runner.is_none() {
            return Ok(RunEnd::Finished);
        }
        if self.is_paused()? {
            return Ok(RunEnd::Paused);
        }
        let record = self
            .db()
            .conn
            .workflow()
            .record()
            .map_err(|e| self.storage_error(e))?;
        let Some(record) = record else {
            return Ok(RunEnd::Finished);
        };
        if record.status.is_final() {
            return Ok(RunEnd::Finished);
        }
        self.metrics().workflow_run(&self.name().key);
        self.store
            .data_mut()
            .begin_run(RunState::alone(steps_alone));
        let input = record.input;
        let result = self
            .call(
                Mode::Orchestration,
                "workflow run",
                async |exports, store| {
                    let runner = exports.runner.as_ref().expect("checked above");
                    runner.call_run(store, &input).await
                },
            )
            .await;
        let state = self.store.data_mut();
        // A step still open (a trap, or a guest that returned without
        // ending it) is rolled back to its savepoint; the steps before it
        // commit.
        if state.workflow_run().is_some_and(|run| run.open.is_some()) {
            let lost = state.lost_transaction().is_some();
            state.undo_step(lost);
        }
        state.discard_effects();
        state.take_lost_transaction();
        let committed = state.commit_steps();
        // Nothing else of the run stays open.
        state.db().rollback();
        let run = state.end_run().unwrap_or_default();
        state.set_mode(Mode::Idle);
        self.queue_grew |= run.committed_appends;
        committed.map_err(|e| match e {
            CommitError::Sqlite(e) => self.storage_error(e),
            CommitError::NotReplicated(e) => {
                self.broken = true;
                self.not_replicated(e)
            }
            e @ CommitError::LogNotSynced(_) => self.not_synced(e),
        })?;
        if run.restart_alone {
            return Ok(RunEnd::AgainAlone);
        }
        let now = now_ms();
        let (status, output, error, wait) = match result {
            Err(Error::Conflict { .. }) => return Ok(RunEnd::Conflict),
            Err(e) => match &run.open {
                Some(open) => {
                    // The attempt of the open step failed: record it, and
                    // let the next run see a retry or a terminal failure.
                    let (kind, code, message) = match &e {
                        Error::Timeout { .. } => (
                            Some(FailureKind::Timeout),
                            "timeout",
                            format!(
                                "step `{}` ran past its timeout of {} ms",
                                open.name,
                                open.timeout.as_millis()
                            ),
                        ),
                        other => (None, "trapped", failure_text(&other.to_string())),
                    };
                    let recorded = self
                        .store
                        .data_mut()
                        .record_step_failure(open, kind, code, &message);
                    recorded.map_err(|e| {
                        Error::storage(&self.name().actor, &self.name().key, e.to_string())
                    })?;
                    return Ok(RunEnd::Again);
                }
                None => (
                    WorkflowStatus::Failed,
                    None,
                    Some(failure_text(&e.to_string())),
                    None,
                ),
            },
            Ok(_) if run.diverged.is_some() => (
                WorkflowStatus::Diverged,
                None,
                run.diverged.as_deref().map(failure_text),
                None,
            ),
            Ok(RunOutcome::Completed(output)) if output.len() > MAX_RESULT_BYTES => (
                WorkflowStatus::Failed,
                None,
                Some(format!(
                    "limit-exceeded: the workflow's output is {} bytes; the limit is {MAX_RESULT_BYTES} bytes",
                    output.len()
                )),
                None,
            ),
            Ok(RunOutcome::Completed(output)) => {
                (WorkflowStatus::Completed, Some(output), None, None)
            }
            Ok(RunOutcome::Failed(Failure { code, message })) => (
                WorkflowStatus::Failed,
                None,
                Some(failure_text(&format!("{code}: {message}"))),
                None,
            ),
            Ok(RunOutcome::Interrupted) => match (&run.wait, &run.waits_for_queue) {
                (Some((at, what)), _) => (
                    WorkflowStatus::Waiting,
                    None,
                    None,
                    Some((Some(*at), what.as_str())),
                ),
                (None, Some(what)) => (
                    WorkflowStatus::Waiting,
                    None,
                    None,
                    Some((None, what.as_str())),
                ),
                (None, None) => (
                    WorkflowStatus::Failed,
                    None,
                    Some("the run stopped at an interrupt that was not a wait".into()),
                    None,
                ),
            },
        };
        self.host_transaction(|db| {
            db.conn
                .workflow()
                .set_status(status, output.as_deref(), error.as_deref(), wait, now)
        })?;
        let key = &self.name().key;
        if status.is_final() {
            self.metrics().workflow_finished(key, status.as_str());
        } else {
            self.metrics().workflow_waits(key);
        }
        Ok(match wait {
            Some((Some(at), _)) => RunEnd::Wait(at),
            Some((None, _)) => RunEnd::Idle,
            None => RunEnd::Finished,
        })
    }

    /// Replays the instance's workflow against this cell's code without
    /// keeping anything (a deploy's check; the cell was started as a dry
    /// run): the run stops where its history ends or a step would run.
    /// `Some(message)` says where the code and the history part.
    pub(crate) async fn check_workflow(&mut self) -> Result<Option<String>, Error> {
        if self.exports.runner.is_none() {
            return Ok(None);
        }
        let record = self
            .db()
            .conn
            .workflow()
            .record()
            .map_err(|e| self.storage_error(e))?;
        let Some(record) = record.filter(|r| !r.status.is_final()) else {
            return Ok(None);
        };
        self.store.data_mut().begin_run(RunState::checking());
        let input = record.input;
        let result = self
            .call(
                Mode::Orchestration,
                "workflow run (deploy check)",
                async |exports, store| {
                    let runner = exports.runner.as_ref().expect("checked above");
                    runner.call_run(store, &input).await
                },
            )
            .await;
        let state = self.store.data_mut();
        state.roll_back();
        let run = state.end_run().unwrap_or_default();
        state.set_mode(Mode::Idle);
        // The cell is never used again.
        self.broken = true;
        if let Some(diverged) = run.diverged {
            return Ok(Some(diverged));
        }
        match result {
            // Replaying what the old code recorded, the new code fails the
            // workflow (its input no longer fits, say): its next run would.
            Ok(RunOutcome::Failed(Failure { code, message })) => Ok(Some(format!(
                "the replay of its history fails the workflow: {}",
                failure_text(&format!("{code}: {message}"))
            ))),
            Ok(_) => Ok(None),
            // The replay of recorded steps trapped before the history ended:
            // the new code would not get past it either.
            Err(e) => Ok(Some(format!("the replay failed: {e}"))),
        }
    }
}

/// How one run of a workflow ended, for its driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunEnd {
    /// Nothing more to run: completed, failed, diverged, or no workflow.
    Finished,
    /// Run again at this time (ms since the Unix epoch), or sooner when
    /// the queue grows.
    Wait(i64),
    /// Run again when the queue grows (a queue wait without a timeout).
    Idle,
    /// Run again now (a step's attempt failed by a trap and was recorded).
    Again,
    /// Run again now, and from now on with every step alone: a step in a
    /// batch reached for another instance (the batch before it committed).
    AgainAlone,
    /// A step met a concurrent call of the instance; run again shortly.
    Conflict,
    /// Not run: the instance is paused (`pause.rs`); its resume drives
    /// the workflow again.
    Paused,
}
