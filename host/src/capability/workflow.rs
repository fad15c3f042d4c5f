//! `burrow:actor/workflow`: steps, durable sleeps, recorded times, loops,
//! joins and races, and queue waits for a workflow's orchestration code.
//!
//! Every call takes the run's next location (see `storage::workflow`). A
//! location the history already holds replays its entry; a different kind
//! or name there is a divergence, and the run stops without touching the
//! history. A step runs in its own transaction, opened by `begin-step` and
//! committed by `end-step` together with the step's history entry; a queue
//! wait deletes the events it takes in the transaction that records them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::bindings::queue::Event as WitEvent;
use crate::bindings::types::Failure;
use crate::bindings::workflow::{
    FailureKind, Host, Interrupt, LoopIteration, LoopStart, StepFailure, StepOptions, StepOutcome,
    StepStart,
};
use crate::config::{MAX_QUEUE_BATCH, MAX_RESULT_BYTES, MAX_STEP_TIMEOUT};
use crate::instance::output::failure_text;
use crate::instance::workflow_run::{OpenStep, RunState, Scope, ScopeKind};
use crate::instance::{InstanceState, Mode, storage_trap};
use crate::storage::instance_db::now_ms;
use crate::storage::queue as queue_db;
use crate::storage::queue::retry_delay;
use crate::storage::workflow::{self as workflow_db, EntryKind, EntryStatus, HistoryEntry};

impl Host for InstanceState {
    fn begin_step(
        &mut self,
        name: String,
        options: StepOptions,
    ) -> wasmtime::Result<Result<StepStart, Interrupt>> {
        if let Err(interrupt) = self.check_orchestration("workflow.begin-step") {
            return Ok(Err(interrupt));
        }
        let (location, recorded) = self.next_location()?;
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
                _ => {
                    if let Some(at) = e.wake_at.filter(|at| *at > now) {
                        self.run()
                            .wait_until(at, format!("the retry of step `{name}`"));
                        return Ok(Err(Interrupt::Suspend));
                    }
                    e.attempts as u32 + 1
                }
            },
            None => 1,
        };
        let timeout = match step_timeout(options.timeout_ms, self.call_timeout) {
            Ok(timeout) => timeout,
            Err(refusal) => {
                return Ok(Err(Interrupt::Invalid(format!("step `{name}`: {refusal}"))));
            }
        };
        self.db.begin().map_err(storage_trap)?;
        self.discard_effects();
        self.deadline.start(timeout);
        self.mode = Mode::Step;
        self.run().open = Some(OpenStep {
            location,
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
            StepOutcome::Ok(output) => match self.transaction_lost.take() {
                Some(cause) => (
                    None,
                    Failure {
                        code: "transaction-rolled-back".into(),
                        message: format!("SQLite rolled the step's transaction back after {cause}"),
                    },
                ),
                None => {
                    self.commit_step(&open, output)?;
                    return Ok(Ok(None));
                }
            },
            StepOutcome::Error(f) => (None, f),
            StepOutcome::Critical(f) => (Some(FailureKind::Critical), f),
            StepOutcome::Rollback(f) => (Some(FailureKind::Rollback), f),
        };
        self.db.rollback();
        self.discard_effects();
        self.transaction_lost = None;
        match self.record_step_failure(&open, kind, &failure.code, &failure.message)? {
            Some(terminal) => Ok(Ok(Some(terminal))),
            None => Ok(Err(Interrupt::Suspend)),
        }
    }

    fn sleep(&mut self, name: String, duration_ms: u64) -> wasmtime::Result<Result<(), Interrupt>> {
        let now = now_ms();
        let at = now.saturating_add(duration_ms.min(i64::MAX as u64) as i64);
        self.durable_sleep(name, "workflow.sleep", at)
    }

    fn sleep_until(&mut self, name: String, at_ms: i64) -> wasmtime::Result<Result<(), Interrupt>> {
        self.durable_sleep(name, "workflow.sleep-until", at_ms)
    }

    fn now(&mut self) -> wasmtime::Result<Result<i64, Interrupt>> {
        if let Err(interrupt) = self.check_orchestration("workflow.now") {
            return Ok(Err(interrupt));
        }
        let (location, recorded) = self.next_location()?;
        match recorded {
            Some(e) if e.kind != EntryKind::Now => Ok(Err(self.diverge(&e, EntryKind::Now, "now"))),
            Some(e) => Ok(Ok(e
                .output
                .and_then(|o| o.parse().ok())
                .unwrap_or_default())),
            None => {
                let now = now_ms();
                let mut entry = new_entry(location, EntryKind::Now, "now", EntryStatus::Done);
                entry.output = Some(now.to_string());
                self.put(&entry)?;
                Ok(Ok(now))
            }
        }
    }

    fn loop_enter(
        &mut self,
        name: String,
        state: String,
    ) -> wasmtime::Result<Result<LoopStart, Interrupt>> {
        if let Err(interrupt) = self.check_orchestration("workflow.loop-enter") {
            return Ok(Err(interrupt));
        }
        let (location, recorded) = self.next_location()?;
        let (iteration, state) = match recorded {
            Some(e) if e.kind != EntryKind::Loop || e.name != name => {
                return Ok(Err(self.diverge(&e, EntryKind::Loop, &name)));
            }
            Some(e) if e.status == EntryStatus::Done => {
                return Ok(Ok(LoopStart::Done(
                    e.output.unwrap_or_else(|| "null".into()),
                )));
            }
            Some(e) => (e.attempts, e.output.unwrap_or(state)),
            None => {
                let mut entry = new_entry(
                    location.clone(),
                    EntryKind::Loop,
                    &name,
                    EntryStatus::Running,
                );
                entry.output = Some(state.clone());
                self.put(&entry)?;
                (0, state)
            }
        };
        self.run().scopes.push(Scope {
            prefix: format!("{location}/{iteration}/"),
            next: 0,
            kind: ScopeKind::Loop {
                location,
                iteration,
            },
        });
        Ok(Ok(LoopStart::Run(LoopIteration {
            index: iteration as u32,
            state,
        })))
    }

    fn loop_continue(&mut self, state: String) -> wasmtime::Result<Result<(), Interrupt>> {
        self.end_iteration("workflow.loop-continue", Some(state), None)
    }

    fn loop_break(&mut self, output: String) -> wasmtime::Result<Result<(), Interrupt>> {
        self.end_iteration("workflow.loop-break", None, Some(output))
    }

    fn loop_leave(&mut self) -> wasmtime::Result<Result<(), Interrupt>> {
        if let Err(interrupt) = self.check_orchestration("workflow.loop-leave") {
            return Ok(Err(interrupt));
        }
        let run = self.run();
        if !matches!(
            run.scopes.last().map(|s| &s.kind),
            Some(ScopeKind::Loop { .. })
        ) {
            return Ok(Err(Interrupt::Invalid(
                "workflow.loop-leave was called outside a loop".into(),
            )));
        }
        run.scopes.pop();
        Ok(Ok(()))
    }

    fn join_enter(
        &mut self,
        name: String,
        race: bool,
    ) -> wasmtime::Result<Result<Option<u32>, Interrupt>> {
        if let Err(interrupt) = self.check_orchestration("workflow.join-enter") {
            return Ok(Err(interrupt));
        }
        let kind = if race {
            EntryKind::Race
        } else {
            EntryKind::Join
        };
        let (location, recorded) = self.next_location()?;
        let winner = match recorded {
            Some(e) if e.kind != kind || e.name != name => {
                return Ok(Err(self.diverge(&e, kind, &name)));
            }
            Some(e) => e.output.and_then(|o| o.parse().ok()),
            None => {
                let entry = new_entry(location.clone(), kind, &name, EntryStatus::Running);
                self.put(&entry)?;
                None
            }
        };
        let run = self.run();
        let (saved_wait, saved_queue) = (run.wait.clone(), run.waits_for_queue.clone());
        run.scopes.push(Scope {
            prefix: format!("{location}/0/"),
            next: 0,
            kind: ScopeKind::Join {
                location,
                race,
                saved_wait,
                saved_queue,
            },
        });
        Ok(Ok(winner))
    }

    fn branch(&mut self, index: u32) -> wasmtime::Result<Result<(), Interrupt>> {
        if let Err(interrupt) = self.check_orchestration("workflow.branch") {
            return Ok(Err(interrupt));
        }
        let scope = self.run().scopes.last_mut().expect("never empty");
        let ScopeKind::Join { location, .. } = &scope.kind else {
            return Ok(Err(Interrupt::Invalid(
                "workflow.branch was called outside a join".into(),
            )));
        };
        scope.prefix = format!("{location}/{index}/");
        scope.next = 0;
        Ok(Ok(()))
    }

    fn join_exit(
        &mut self,
        winner: Option<u32>,
    ) -> wasmtime::Result<Result<Option<u32>, Interrupt>> {
        if let Err(interrupt) = self.check_orchestration("workflow.join-exit") {
            return Ok(Err(interrupt));
        }
        let run = self.run();
        if !matches!(
            run.scopes.last().map(|s| &s.kind),
            Some(ScopeKind::Join { .. })
        ) {
            return Ok(Err(Interrupt::Invalid(
                "workflow.join-exit was called outside a join".into(),
            )));
        }
        let scope = run.scopes.pop().expect("checked");
        let ScopeKind::Join {
            location,
            race,
            saved_wait,
            saved_queue,
        } = scope.kind
        else {
            unreachable!("checked above")
        };
        let Some(winner) = winner.filter(|_| race) else {
            return Ok(Ok(None));
        };
        let recorded = workflow_db::entry(&self.db.conn, &location).map_err(storage_trap)?;
        if let Some(won) = recorded
            .as_ref()
            .and_then(|e| e.output.as_deref())
            .and_then(|o| o.parse().ok())
        {
            return Ok(Ok(Some(won)));
        }
        // The race is decided: record the winner and drop the losers'
        // history and waits, in one transaction.
        let mut entry = recorded.unwrap_or_else(|| {
            new_entry(location.clone(), EntryKind::Race, "race", EntryStatus::Done)
        });
        entry.status = EntryStatus::Done;
        entry.output = Some(winner.to_string());
        entry.updated_at = now_ms();
        self.in_transaction(|conn| {
            workflow_db::put_entry(conn, &entry)?;
            workflow_db::delete_under(
                conn,
                &format!("{location}/"),
                Some(&format!("{location}/{winner}/")),
            )?;
            Ok(())
        })?;
        let run = self.run();
        run.wait = saved_wait;
        run.waits_for_queue = saved_queue;
        Ok(Ok(Some(winner)))
    }

    fn queue_next(
        &mut self,
        name: String,
        event_types: Vec<String>,
        count: u32,
        timeout_ms: Option<u64>,
    ) -> wasmtime::Result<Result<Vec<WitEvent>, Interrupt>> {
        if let Err(interrupt) = self.check_orchestration("workflow.queue-next") {
            return Ok(Err(interrupt));
        }
        if !self.has_queue {
            return Ok(Err(Interrupt::Invalid(
                "workflow.queue-next: this instance has no queue".into(),
            )));
        }
        let (location, recorded) = self.next_location()?;
        let now = now_ms();
        let deadline = match &recorded {
            Some(e) if e.kind != EntryKind::Queue || e.name != name => {
                return Ok(Err(self.diverge(e, EntryKind::Queue, &name)));
            }
            Some(e) if e.status == EntryStatus::Done => {
                let recorded: Vec<RecordedEvent> = e
                    .output
                    .as_deref()
                    .and_then(|o| serde_json::from_str(o).ok())
                    .unwrap_or_default();
                return Ok(Ok(recorded
                    .into_iter()
                    .map(RecordedEvent::into_wit)
                    .collect()));
            }
            Some(e) => e.wake_at,
            None => timeout_ms.map(|t| now.saturating_add(t.min(i64::MAX as u64) as i64)),
        };
        let count = count.clamp(1, MAX_QUEUE_BATCH) as usize;
        let events =
            queue_db::pending_of_types(&self.db.conn, &event_types, count).map_err(storage_trap)?;
        let timed_out = deadline.is_some_and(|at| at <= now);
        if events.is_empty() && !timed_out {
            if recorded.is_none() {
                let mut entry = new_entry(location, EntryKind::Queue, &name, EntryStatus::Sleeping);
                entry.wake_at = deadline;
                self.put(&entry)?;
            }
            let what = format!("queue wait `{name}`");
            let run = self.run();
            if let Some(at) = deadline {
                run.wait_until(at, what.clone());
            }
            run.waits_for_queue.get_or_insert(what);
            return Ok(Err(Interrupt::Suspend));
        }
        let taken: Vec<RecordedEvent> = events.iter().map(RecordedEvent::from).collect();
        let mut entry = new_entry(location, EntryKind::Queue, &name, EntryStatus::Done);
        entry.output = Some(serde_json::to_string(&taken).unwrap_or_else(|_| "[]".into()));
        entry.wake_at = deadline;
        self.in_transaction(|conn| {
            for event in &events {
                queue_db::delete(conn, event.id)?;
            }
            workflow_db::put_entry(conn, &entry)
        })?;
        Ok(Ok(taken.into_iter().map(RecordedEvent::into_wit).collect()))
    }

    fn version(&mut self, name: String, latest: u32) -> wasmtime::Result<Result<u32, Interrupt>> {
        if let Err(interrupt) = self.check_orchestration("workflow.version") {
            return Ok(Err(interrupt));
        }
        let location = self.run().peek_location();
        match workflow_db::entry(&self.db.conn, &location).map_err(storage_trap)? {
            Some(e) if e.kind == EntryKind::Version && e.name == name => {
                self.run().take_location();
                Ok(Ok(e
                    .output
                    .and_then(|o| o.parse().ok())
                    .unwrap_or_default()))
            }
            // History from before this version existed.
            Some(_) => Ok(Ok(0)),
            None => {
                self.run().take_location();
                let mut entry = new_entry(location, EntryKind::Version, &name, EntryStatus::Done);
                entry.output = Some(latest.to_string());
                self.put(&entry)?;
                Ok(Ok(latest))
            }
        }
    }

    fn removed(&mut self, name: String) -> wasmtime::Result<Result<(), Interrupt>> {
        if let Err(interrupt) = self.check_orchestration("workflow.removed") {
            return Ok(Err(interrupt));
        }
        let location = self.run().peek_location();
        let recorded = workflow_db::entry(&self.db.conn, &location).map_err(storage_trap)?;
        if recorded.is_some_and(|e| e.kind == EntryKind::Step && e.name == name) {
            self.run().take_location();
        }
        Ok(Ok(()))
    }
}

/// A queue event as a queue wait records it.
#[derive(Serialize, Deserialize)]
struct RecordedEvent {
    id: i64,
    #[serde(rename = "type")]
    event_type: String,
    /// JSON text.
    payload: String,
    priority: i32,
    group: Option<String>,
    created_at: i64,
}

impl From<&crate::storage::queue::QueuedEvent> for RecordedEvent {
    fn from(e: &crate::storage::queue::QueuedEvent) -> Self {
        RecordedEvent {
            id: e.id,
            event_type: e.event_type.clone(),
            payload: e.payload.clone(),
            priority: e.priority,
            group: e.group.clone(),
            created_at: e.created_at,
        }
    }
}

impl RecordedEvent {
    fn into_wit(self) -> WitEvent {
        WitEvent {
            id: self.id as u64,
            event_type: self.event_type,
            payload: self.payload,
            priority: self.priority,
            group: self.group,
            created_at: self.created_at,
            attempt: 1,
        }
    }
}

fn new_entry(location: String, kind: EntryKind, name: &str, status: EntryStatus) -> HistoryEntry {
    HistoryEntry {
        location,
        kind,
        name: name.to_owned(),
        status,
        output: None,
        failure_kind: None,
        error_code: None,
        error: None,
        attempts: 0,
        wake_at: None,
        updated_at: now_ms(),
    }
}

impl InstanceState {
    fn run(&mut self) -> &mut RunState {
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
                "{call} was called inside step `{}`; steps do not nest, and waits belong \
                 to orchestration code",
                run.open.as_ref().map_or("?", |o| o.name.as_str())
            ))),
            _ => Err(Interrupt::Invalid(format!(
                "{call} is only for a workflow's run"
            ))),
        }
    }

    /// Takes the run's next location and reads what history holds there.
    fn next_location(&mut self) -> wasmtime::Result<(String, Option<HistoryEntry>)> {
        let location = self.run().take_location();
        let recorded = workflow_db::entry(&self.db.conn, &location).map_err(storage_trap)?;
        Ok((location, recorded))
    }

    fn put(&self, entry: &HistoryEntry) -> wasmtime::Result<()> {
        workflow_db::put_entry(&self.db.conn, entry).map_err(storage_trap)
    }

    /// Runs host statements of orchestration code in one transaction.
    fn in_transaction(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<()>,
    ) -> wasmtime::Result<()> {
        self.db.begin().map_err(storage_trap)?;
        let committed = f(&self.db.conn).and_then(|()| {
            self.commit_stage
                .commit(&self.name, &self.db, Default::default())
        });
        match committed {
            Ok(_) => Ok(()),
            Err(e) => {
                self.db.rollback();
                Err(storage_trap(e))
            }
        }
    }

    fn diverge(&mut self, recorded: &HistoryEntry, kind: EntryKind, name: &str) -> Interrupt {
        let message = format!(
            "the history diverged at position {}: it recorded {} `{}`, and the code now reaches {} `{}`",
            recorded.location,
            recorded.kind.as_str(),
            recorded.name,
            kind.as_str(),
            name
        );
        self.run().diverged = Some(message.clone());
        Interrupt::Diverged(message)
    }

    fn durable_sleep(
        &mut self,
        name: String,
        call: &str,
        wake_at: i64,
    ) -> wasmtime::Result<Result<(), Interrupt>> {
        if let Err(interrupt) = self.check_orchestration(call) {
            return Ok(Err(interrupt));
        }
        let (location, recorded) = self.next_location()?;
        let now = now_ms();
        let at = match recorded {
            Some(e) if e.kind != EntryKind::Sleep || e.name != name => {
                return Ok(Err(self.diverge(&e, EntryKind::Sleep, &name)));
            }
            Some(e) if e.status == EntryStatus::Done => return Ok(Ok(())),
            Some(e) => e.wake_at.unwrap_or(now),
            None => wake_at,
        };
        let status = if at <= now {
            EntryStatus::Done
        } else {
            EntryStatus::Sleeping
        };
        let mut entry = new_entry(location, EntryKind::Sleep, &name, status);
        entry.wake_at = Some(at);
        self.put(&entry)?;
        if at <= now {
            return Ok(Ok(()));
        }
        self.run().wait_until(at, format!("sleep `{name}`"));
        Ok(Err(Interrupt::Suspend))
    }

    /// Ends the current loop iteration: carries `state` to the next one, or
    /// ends the loop with `output`; prunes the iteration's history. One
    /// transaction.
    fn end_iteration(
        &mut self,
        call: &str,
        state: Option<String>,
        output: Option<String>,
    ) -> wasmtime::Result<Result<(), Interrupt>> {
        if let Err(interrupt) = self.check_orchestration(call) {
            return Ok(Err(interrupt));
        }
        let run = self.run();
        let Some(Scope {
            kind:
                ScopeKind::Loop {
                    location,
                    iteration,
                },
            ..
        }) = run.scopes.last()
        else {
            return Ok(Err(Interrupt::Invalid(format!(
                "{call} was called outside a loop"
            ))));
        };
        let (location, iteration) = (location.clone(), *iteration);
        let mut entry = workflow_db::entry(&self.db.conn, &location)
            .map_err(storage_trap)?
            .unwrap_or_else(|| {
                new_entry(
                    location.clone(),
                    EntryKind::Loop,
                    "loop",
                    EntryStatus::Running,
                )
            });
        entry.updated_at = now_ms();
        match (&state, &output) {
            (Some(state), _) => {
                entry.attempts = iteration + 1;
                entry.output = Some(state.clone());
            }
            (None, output) => {
                entry.status = EntryStatus::Done;
                entry.output = output.clone();
            }
        }
        self.in_transaction(|conn| {
            workflow_db::put_entry(conn, &entry)?;
            workflow_db::delete_under(conn, &format!("{location}/{iteration}/"), None)?;
            Ok(())
        })?;
        let run = self.run();
        if state.is_some() {
            let scope = run.scopes.last_mut().expect("checked above");
            scope.prefix = format!("{location}/{}/", iteration + 1);
            scope.next = 0;
            scope.kind = ScopeKind::Loop {
                location,
                iteration: iteration + 1,
            };
        } else {
            run.scopes.pop();
        }
        Ok(Ok(()))
    }

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
