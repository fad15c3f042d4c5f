//! The timer: one task that starts, at every turn, the background work
//! that has come due by the index's marks (queue pumps, workflow drivers,
//! schedule runs), a bounded number of each kind.

use std::collections::HashSet;
use std::sync::Weak;
use std::time::Duration;

use crate::address::Address;
use crate::clock::now_ms;
use crate::storage::{Mark, MarkError};

use super::Background;

/// How often the host looks for queues whose next event has come due.
const QUEUE_TIMER_INTERVAL: Duration = Duration::from_millis(100);

/// How many instances of each kind (queues, workflows, schedules) the
/// timer starts at one turn: half of `max_awake`, and at least one, so
/// that background work makes progress at any `max_awake` while callers
/// keep room to wake instances.
pub(crate) fn timer_budget(max_awake: usize) -> usize {
    (max_awake / 2).max(1)
}

/// Starts the pumps of queues whose next event has come due, the drivers
/// of workflows whose wait is over, and the runs of due schedules: at
/// start (what a previous run left), and after retry backoffs and sleeps.
///
/// At every turn it starts, of each kind, up to [`timer_budget`] of the
/// instances due longest, leaving out those whose work of that kind is
/// running already, those of actors not in the manifest (their marks
/// wait for the actor to come back) and those of actors whose component
/// is still compiling or failed to load (their marks stay due until it
/// is ready). Whatever else runs, each due
/// instance thus gets its turn in order of its due time; a run that
/// cannot start or fails moves its mark later, so it holds nobody back.
pub(super) async fn wake_due(background: Weak<Background>) {
    loop {
        let Some(work) = background.upgrade() else {
            return;
        };
        if work.core.is_shutting_down() {
            return;
        }
        let budget = timer_budget(work.core.max_awake());
        let actors = work.core.ready_actor_names();
        let now = now_ms();
        let marks = work.core.store.marks().clone();
        for mark in Mark::ALL {
            let running = work.running(mark);
            let due = marks.due(mark, now, &actors, budget + running.len()).await;
            for address in work.due_addresses(due, &running, budget, mark) {
                work.start(mark, address);
            }
        }
        drop(work);
        tokio::time::sleep(QUEUE_TIMER_INTERVAL).await;
    }
}

impl Background {
    /// The instances whose work of the kind `mark` stands for runs now.
    fn running(&self, mark: Mark) -> HashSet<Address> {
        match mark {
            Mark::Queue => self.pumps.lock().unwrap().keys().cloned().collect(),
            Mark::Workflow => self.drivers.running(),
            Mark::Schedule => self.schedule_runs.lock().unwrap().clone(),
        }
    }

    /// Starts the work of the kind `mark` stands for on `address`.
    fn start(&self, mark: Mark, address: Address) {
        match mark {
            Mark::Queue => {
                let def = self
                    .core
                    .definition(&address.actor)
                    .expect("ready actors only: one stays ready");
                self.kick(&def, &address);
            }
            Mark::Workflow => self.drive_workflow(address),
            Mark::Schedule => self.run_schedules(address),
        }
    }

    /// The first `budget` of `due` (as the index gave them, earliest
    /// first) that are not `running`.
    fn due_addresses(
        &self,
        due: Result<Vec<(String, String)>, MarkError>,
        running: &HashSet<Address>,
        budget: usize,
        mark: Mark,
    ) -> Vec<Address> {
        let due = match due {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the {} marks", mark.name());
                return Vec::new();
            }
        };
        due.into_iter()
            .filter_map(|(actor, key)| {
                let def = self.core.definition(&actor)?;
                Some(Address {
                    actor: def.name.clone(),
                    key: key.into(),
                })
            })
            .filter(|address| !running.contains(address))
            .take(budget)
            .collect()
    }
}
