//! Running one event: on the awake instance when it is free, else on a
//! worker, each call in its own transaction. A conflict is not an attempt
//! and the event is picked again; only a failure of the guest's own
//! `process` is recorded against the event, and the senders waiting for
//! it are answered once it is processed or dead-lettered.

use std::sync::Arc;

use super::Run;
use crate::address::Address;
use crate::background::Background;
use crate::background::waiters::EventOutcome;
use crate::cell::{Cell, Origin};
use crate::config::BACKGROUND_CONFLICT_PAUSE;
use crate::definition::ActorDefinition;
use crate::error::Error;
use crate::runtime::ConflictRetry;
use crate::storage::queue::{AfterFailure, QueuedEvent};

/// Who runs a `process` call.
enum Runner {
    /// The instance's awake wasm instance, through its slot.
    Main,
    /// A worker of this pump.
    Worker(Box<Cell>),
}

/// How one event's processing ended.
enum Finished {
    Processed(String),
    Failed(String, AfterFailure),
    /// Met a concurrent call; not an attempt. The event is picked again.
    Conflict,
    /// The instance is gone (destroyed), cannot start, or the host failed
    /// (overloaded, storage): not an attempt. The pump ends and tries
    /// again after the retry wait.
    Stuck(Error),
}

pub(super) struct Done {
    id: i64,
    runner: Runner,
    finished: Finished,
}

impl Run {
    /// Starts processing `event` on the awake instance if it is free, or
    /// on a worker.
    pub(super) async fn dispatch(&mut self, event: QueuedEvent) {
        let runner = if !self.main_busy {
            self.main_busy = true;
            Runner::Main
        } else if let Some(worker) = self.workers.pop() {
            Runner::Worker(Box::new(worker))
        } else {
            match self.start_worker().await {
                Ok(worker) => Runner::Worker(Box::new(worker)),
                Err(e) => {
                    tracing::warn!(actor = self.actor(), key = self.key(), error = %e, "cannot start a queue worker");
                    return;
                }
            }
        };
        self.in_flight
            .insert(event.id, event.group.clone().unwrap_or_default());
        let work = self.work.clone();
        let def = self.def.clone();
        let address = self.address.clone();
        self.tasks
            .spawn(async move { process(work, def, address, runner, event).await });
    }

    /// Starts a worker; a start that meets concurrent writes is tried
    /// again until the actor's call timeout has passed.
    async fn start_worker(&mut self) -> Result<Cell, Error> {
        let (work, def, address) = (&self.work, &self.def, &self.address);
        ConflictRetry::run(def.options.call_timeout, || async {
            let mut cell = work
                .core
                .start_cell(def, address, Origin::MustExist)
                .await?;
            cell.commit_creation()?;
            Ok(cell)
        })
        .await
    }

    pub(super) fn finished(&mut self, done: Done) -> Result<(), Error> {
        self.in_flight.remove(&done.id);
        match done.runner {
            Runner::Main => self.main_busy = false,
            // A worker that trapped is dropped; another starts when needed.
            Runner::Worker(worker) if !worker.is_broken() => self.workers.push(*worker),
            Runner::Worker(_) => {}
        }
        let waiters = &self.work.waiters;
        let (actor, key) = (&self.address.actor, &self.address.key);
        match done.finished {
            Finished::Processed(result) => {
                waiters.answer(actor, key, done.id, EventOutcome::Processed(result));
            }
            Finished::Failed(error, AfterFailure::DeadLettered) => {
                tracing::warn!(actor = &**actor, key = &**key, event = done.id, %error, "event dead-lettered");
                waiters.answer(actor, key, done.id, EventOutcome::DeadLettered(error));
            }
            Finished::Failed(error, _) => {
                tracing::info!(actor = &**actor, key = &**key, event = done.id, %error, "event failed; it will be retried");
            }
            Finished::Conflict => {}
            Finished::Stuck(e) => return Err(e),
        }
        Ok(())
    }
}

/// Processes one event on `runner`, then records a failure with the same
/// runner. A conflict is retried here, after a pause.
async fn process(
    work: Arc<Background>,
    def: Arc<ActorDefinition>,
    address: Address,
    runner: Runner,
    event: QueuedEvent,
) -> Done {
    let id = event.id;
    let (actor, key) = (&*address.actor, &*address.key);
    match runner {
        Runner::Main => {
            let processed = work
                .core
                .with_cell(actor, key, Origin::MustExist, async |cell| {
                    cell.process(&event).await
                })
                .await;
            let finished = match processed {
                Ok(result) => Finished::Processed(result),
                Err(Error::Conflict { .. }) => {
                    tokio::time::sleep(BACKGROUND_CONFLICT_PAUSE).await;
                    Finished::Conflict
                }
                Err(e) if !is_attempt(&e, id) => Finished::Stuck(e),
                Err(e) => {
                    let error = e.to_string();
                    match work
                        .core
                        .with_cell(actor, key, Origin::MustExist, async |cell| {
                            cell.record_failure(id, &error, &def.options)
                        })
                        .await
                    {
                        Ok(after) => Finished::Failed(error, after),
                        Err(e) => Finished::Stuck(e),
                    }
                }
            };
            Done {
                id,
                runner: Runner::Main,
                finished,
            }
        }
        Runner::Worker(mut cell) => {
            let finished = match cell.process(&event).await {
                Ok(result) => Finished::Processed(result),
                Err(Error::Conflict { .. }) => {
                    tokio::time::sleep(BACKGROUND_CONFLICT_PAUSE).await;
                    Finished::Conflict
                }
                Err(e) if !is_attempt(&e, id) => Finished::Stuck(e),
                Err(e) => {
                    let error = e.to_string();
                    let mut recorded = cell.record_failure(id, &error, &def.options);
                    while let Err(Error::Conflict { .. }) = recorded {
                        tokio::time::sleep(BACKGROUND_CONFLICT_PAUSE).await;
                        recorded = cell.record_failure(id, &error, &def.options);
                    }
                    match recorded {
                        Ok(after) => Finished::Failed(error, after),
                        Err(e) => Finished::Stuck(e),
                    }
                }
            };
            Done {
                id,
                runner: Runner::Worker(cell),
                finished,
            }
        }
    }
}

/// Whether `e`, the failure of processing event `id`, is a failed attempt
/// of the event: a failure of the guest's own `process` (an error, a trap,
/// its deadline). The host's own failures (overloaded, the instance cannot
/// start, storage, a conflict) are not: the event never ran.
fn is_attempt(e: &Error, id: i64) -> bool {
    match e {
        Error::Failed { during, .. }
        | Error::Trapped { during, .. }
        | Error::Timeout { during, .. } => *during == crate::cell::process_during(id),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_failures_of_the_events_own_process_are_attempts() {
        let (actor, key) = (String::from("a"), String::from("k"));
        let failed = |during: String| Error::Failed {
            actor: actor.clone(),
            key: key.clone(),
            during,
            code: "planned".into(),
            message: String::new(),
        };
        assert!(is_attempt(&failed(crate::cell::process_during(7)), 7));
        let timeout = Error::Timeout {
            actor: actor.clone(),
            key: key.clone(),
            during: crate::cell::process_during(7),
            timeout_ms: 10,
        };
        assert!(is_attempt(&timeout, 7));
        // The instance's start failed: `process` never ran.
        assert!(!is_attempt(&failed("hook wake".into()), 7));
        assert!(!is_attempt(&failed(crate::cell::process_during(8)), 7));
        let host_own = [
            Error::Overloaded("all 1 awake instances are busy".into()),
            Error::Conflict {
                actor: actor.clone(),
                key: key.clone(),
            },
            Error::Storage {
                actor: actor.clone(),
                key: key.clone(),
                message: "disk I/O error".into(),
            },
            Error::Trapped {
                actor: actor.clone(),
                key: key.clone(),
                during: "instantiation".into(),
                message: "maximum concurrent limit reached".into(),
            },
        ];
        for e in host_own {
            assert!(!is_attempt(&e, 7), "{e}");
        }
    }
}
