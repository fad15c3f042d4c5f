//! Loops, joins and races: the scopes of a run's locations. A loop's
//! entry carries its state from one iteration to the next, and each
//! iteration's history is pruned when it ends; a join's branches each have
//! locations of their own, and a decided race keeps only its winner's.

use super::history::new_entry;
use crate::bindings::workflow::{Interrupt, LoopIteration, LoopStart};
use crate::clock::now_ms;
use crate::instance::workflow_run::{Scope, ScopeKind};
use crate::instance::{InstanceState, storage_trap};
use crate::storage::{EntryKind, EntryStatus, HostTables};

pub(super) fn loop_enter(
    instance: &mut InstanceState,
    name: String,
    state: String,
) -> wasmtime::Result<Result<LoopStart, Interrupt>> {
    let (location, recorded) =
        match instance.replay("workflow.loop-enter", EntryKind::Loop, &name)? {
            Ok(found) => found,
            Err(interrupt) => return Ok(Err(interrupt)),
        };
    let (iteration, state) = match recorded {
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
            instance.put(&entry)?;
            (0, state)
        }
    };
    instance.run().scopes.push(Scope {
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

pub(super) fn loop_leave(instance: &mut InstanceState) -> wasmtime::Result<Result<(), Interrupt>> {
    if let Err(interrupt) = instance.check_orchestration("workflow.loop-leave") {
        return Ok(Err(interrupt));
    }
    let run = instance.run();
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

pub(super) fn join_enter(
    instance: &mut InstanceState,
    name: String,
    race: bool,
) -> wasmtime::Result<Result<Option<u32>, Interrupt>> {
    let kind = if race {
        EntryKind::Race
    } else {
        EntryKind::Join
    };
    let (location, recorded) = match instance.replay("workflow.join-enter", kind, &name)? {
        Ok(found) => found,
        Err(interrupt) => return Ok(Err(interrupt)),
    };
    let winner = match recorded {
        Some(e) => e.output.and_then(|o| o.parse().ok()),
        None => {
            let entry = new_entry(location.clone(), kind, &name, EntryStatus::Running);
            instance.put(&entry)?;
            None
        }
    };
    let run = instance.run();
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

pub(super) fn branch(
    instance: &mut InstanceState,
    index: u32,
) -> wasmtime::Result<Result<(), Interrupt>> {
    if let Err(interrupt) = instance.check_orchestration("workflow.branch") {
        return Ok(Err(interrupt));
    }
    let scope = instance.run().scopes.last_mut().expect("never empty");
    let ScopeKind::Join { location, .. } = &scope.kind else {
        return Ok(Err(Interrupt::Invalid(
            "workflow.branch was called outside a join".into(),
        )));
    };
    scope.prefix = format!("{location}/{index}/");
    scope.next = 0;
    Ok(Ok(()))
}

pub(super) fn join_exit(
    instance: &mut InstanceState,
    winner: Option<u32>,
) -> wasmtime::Result<Result<Option<u32>, Interrupt>> {
    if let Err(interrupt) = instance.check_orchestration("workflow.join-exit") {
        return Ok(Err(interrupt));
    }
    let run = instance.run();
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
        if !race {
            record_join_end(instance, &location)?;
        }
        return Ok(Ok(None));
    };
    let recorded = instance
        .db()
        .conn
        .workflow()
        .entry(&location)
        .map_err(storage_trap)?;
    if let Some(won) = recorded
        .as_ref()
        .and_then(|e| e.output.as_deref())
        .and_then(|o| o.parse().ok())
    {
        return Ok(Ok(Some(won)));
    }
    // The race is decided: record the winner and drop the losers'
    // history and waits, in one transaction.
    let mut entry = recorded
        .unwrap_or_else(|| new_entry(location.clone(), EntryKind::Race, "race", EntryStatus::Done));
    entry.status = EntryStatus::Done;
    entry.output = Some(winner.to_string());
    entry.updated_at = now_ms();
    instance.in_transaction(|conn| {
        conn.workflow().put_entry(&entry)?;
        conn.workflow().delete_under(
            &format!("{location}/"),
            Some(&format!("{location}/{winner}/")),
        )?;
        Ok(())
    })?;
    let run = instance.run();
    run.wait = saved_wait;
    run.waits_for_queue = saved_queue;
    Ok(Ok(Some(winner)))
}

/// Records at the exit of the join at `location` whether it is over: it
/// is once none of its branches waits, that is, once nothing under it
/// sleeps, retries or runs. A run that replays the join records it again,
/// so the entry follows its branches.
fn record_join_end(instance: &mut InstanceState, location: &str) -> wasmtime::Result<()> {
    let conn = &instance.db().conn;
    let waiting = conn
        .workflow()
        .unfinished_under(&format!("{location}/"))
        .map_err(storage_trap)?;
    let status = if waiting {
        EntryStatus::Running
    } else {
        EntryStatus::Done
    };
    let Some(mut entry) = conn.workflow().entry(location).map_err(storage_trap)? else {
        return Ok(());
    };
    if entry.status == status {
        return Ok(());
    }
    entry.status = status;
    entry.updated_at = now_ms();
    instance.in_transaction(|conn| conn.workflow().put_entry(&entry))
}

impl InstanceState {
    /// Ends the current loop iteration: carries `state` to the next one, or
    /// ends the loop with `output`; prunes the iteration's history. One
    /// transaction.
    pub(super) fn end_iteration(
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
        let mut entry = self
            .db()
            .conn
            .workflow()
            .entry(&location)
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
            conn.workflow().put_entry(&entry)?;
            conn.workflow()
                .delete_under(&format!("{location}/{iteration}/"), None)?;
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
}
