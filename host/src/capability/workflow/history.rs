//! The run's history as the imports meet it. Every import that takes a
//! location passes the replay guard first: it runs only in orchestration
//! code, and at a location the history already holds it replays that
//! entry, or stops the run as diverged if the entry is of another kind or
//! name; at a new location it runs and records its entry. Recorded times
//! (`now`) and versions (`version`, `removed`) are here too.

use crate::bindings::workflow::Interrupt;
use crate::clock::now_ms;
use crate::instance::commit::CommitError;
use crate::instance::workflow_run::RunState;
use crate::instance::{InstanceState, Mode, commit_trap, storage_trap};
use crate::storage::{EntryKind, EntryStatus, HistoryEntry, HostTables, Savepoint};

impl InstanceState {
    pub(super) fn run(&mut self) -> &mut RunState {
        self.workflow_run_mut()
            .expect("checked by check_orchestration")
    }

    /// Refuses `call` unless orchestration code of a run is running (no
    /// step open).
    pub(super) fn check_orchestration(&self, call: &str) -> Result<(), Interrupt> {
        match (self.mode(), self.workflow_run()) {
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
        let recorded = self
            .db()
            .conn
            .workflow()
            .entry(&location)
            .map_err(storage_trap)?;
        Ok((location, recorded))
    }

    pub(super) fn put(&self, entry: &HistoryEntry) -> wasmtime::Result<()> {
        self.db()
            .conn
            .workflow()
            .put_entry(entry)
            .map_err(storage_trap)
    }

    /// Runs host statements of orchestration code together: in a
    /// savepoint of the run's batch of steps if it has one (they commit
    /// with it), else in a transaction of their own.
    pub(super) fn in_transaction(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<()>,
    ) -> wasmtime::Result<()> {
        if self.workflow_run().is_some_and(|run| run.batch.is_some()) {
            self.db().enter(Savepoint::Step).map_err(storage_trap)?;
            return match f(&self.db().conn) {
                Ok(()) => self.db().keep(Savepoint::Step).map_err(storage_trap),
                Err(e) => {
                    let _ = self.db().undo(Savepoint::Step);
                    Err(storage_trap(e))
                }
            };
        }
        self.db().begin().map_err(storage_trap)?;
        let committed = f(&self.db().conn)
            .map_err(CommitError::from)
            .and_then(|()| self.commit_with(Default::default()));
        match committed {
            Ok(_) => Ok(()),
            Err(e) => {
                self.db().rollback();
                Err(commit_trap(e))
            }
        }
    }

    /// The replay guard of an import that takes the run's next location
    /// (a step, a sleep, a recorded time, a loop, a join, a queue wait):
    /// refuses `call` unless orchestration code of a run is running, then
    /// takes the location as [`Self::replay_next`] does. `Ok(Err(_))` is
    /// the interrupt the import returns.
    pub(super) fn replay(
        &mut self,
        call: &str,
        kind: EntryKind,
        name: &str,
    ) -> wasmtime::Result<Result<(String, Option<HistoryEntry>), Interrupt>> {
        if let Err(interrupt) = self.check_orchestration(call) {
            return Ok(Err(interrupt));
        }
        self.replay_next(kind, name)
    }

    /// Takes the run's next location for the import of `kind` named
    /// `name`, with the entry history holds there to replay (`None`: the
    /// import runs anew and records its entry). An entry of another kind
    /// or name is a divergence, and the interrupt is `Ok(Err(_))`.
    pub(super) fn replay_next(
        &mut self,
        kind: EntryKind,
        name: &str,
    ) -> wasmtime::Result<Result<(String, Option<HistoryEntry>), Interrupt>> {
        let (location, recorded) = self.next_location()?;
        if recorded.is_none() && self.run().checking {
            // A check stops where the history ends: the rest is new code.
            return Ok(Err(Interrupt::Suspend));
        }
        match recorded {
            Some(e) if e.kind != kind || e.name != name => Ok(Err(self.diverge(&e, kind, name))),
            recorded => Ok(Ok((location, recorded))),
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
}

pub(super) fn new_entry(
    location: String,
    kind: EntryKind,
    name: &str,
    status: EntryStatus,
) -> HistoryEntry {
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

pub(super) fn now(instance: &mut InstanceState) -> wasmtime::Result<Result<i64, Interrupt>> {
    let (location, recorded) = match instance.replay("workflow.now", EntryKind::Now, "now")? {
        Ok(found) => found,
        Err(interrupt) => return Ok(Err(interrupt)),
    };
    match recorded {
        Some(e) => Ok(Ok(e
            .output
            .and_then(|o| o.parse().ok())
            .unwrap_or_default())),
        None => {
            let now = now_ms();
            let mut entry = new_entry(location, EntryKind::Now, "now", EntryStatus::Done);
            entry.output = Some(now.to_string());
            instance.put(&entry)?;
            Ok(Ok(now))
        }
    }
}

pub(super) fn version(
    instance: &mut InstanceState,
    name: String,
    latest: u32,
) -> wasmtime::Result<Result<u32, Interrupt>> {
    if let Err(interrupt) = instance.check_orchestration("workflow.version") {
        return Ok(Err(interrupt));
    }
    let location = instance.run().peek_location();
    match instance
        .db()
        .conn
        .workflow()
        .entry(&location)
        .map_err(storage_trap)?
    {
        Some(e) if e.kind == EntryKind::Version && e.name == name => {
            instance.run().take_location();
            Ok(Ok(e
                .output
                .and_then(|o| o.parse().ok())
                .unwrap_or_default()))
        }
        // History from before this version existed.
        Some(_) => Ok(Ok(0)),
        None => {
            instance.run().take_location();
            let mut entry = new_entry(location, EntryKind::Version, &name, EntryStatus::Done);
            entry.output = Some(latest.to_string());
            instance.put(&entry)?;
            Ok(Ok(latest))
        }
    }
}

pub(super) fn removed(
    instance: &mut InstanceState,
    name: String,
) -> wasmtime::Result<Result<(), Interrupt>> {
    if let Err(interrupt) = instance.check_orchestration("workflow.removed") {
        return Ok(Err(interrupt));
    }
    let location = instance.run().peek_location();
    let recorded = instance
        .db()
        .conn
        .workflow()
        .entry(&location)
        .map_err(storage_trap)?;
    if recorded.is_some_and(|e| e.kind == EntryKind::Step && e.name == name) {
        instance.run().take_location();
    }
    Ok(Ok(()))
}
