//! Running events: on the awake instance when it is free (a run of events
//! of one group in one transaction, for a policy that runs one at a time
//! per group), else one on a worker. A conflict is not an attempt
//! and the event is picked again; only a failure of the guest's own
//! `process` is recorded against the event, and the senders waiting for
//! it are answered once it is processed or dead-lettered.

use std::sync::Arc;

use tracing::Instrument;

use super::Run;
use crate::address::Address;
use crate::background::Background;
use crate::background::waiters::EventOutcome;
use crate::cell::{Cell, Origin};
use crate::config::{BACKGROUND_CONFLICT_PAUSE, MAX_BATCH_CALLS};
use crate::definition::ActorDefinition;
use crate::error::Error;
use crate::runtime::ConflictRetry;
use crate::storage::{AfterFailure, HostTables, QueueMode, QueuePolicy, QueuedEvent};
use crate::text::escaped;

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
    runner: Runner,
    /// How each event the runner reached ended, in the run's order.
    finished: Vec<(i64, Finished)>,
    /// Events of the run it did not reach: still pending, picked again.
    not_reached: Vec<i64>,
}

impl Run {
    /// Starts processing `event` on the awake instance if it is free, or
    /// on a worker. On the awake instance, a policy that runs one event at
    /// a time per group gets a run: `event` and the events of its group
    /// due after it, processed back to back in one commit
    /// ([`Cell::process_run`]).
    pub(super) async fn dispatch(&mut self, event: QueuedEvent, policy: &QueuePolicy, now: i64) {
        // After a deploy, events run on the new code: idle workers of the
        // old one go (the awake instance is replaced by its slot).
        if let Some(def) = self.work.core.definition(&self.address.actor)
            && def.version != self.def.version
        {
            self.def = def;
            self.workers.clear();
        }
        let runner = if !self.main_busy {
            self.main_busy = true;
            Runner::Main
        } else if let Some(worker) = self.workers.pop() {
            Runner::Worker(Box::new(worker))
        } else {
            match self.start_worker().await {
                Ok(worker) => Runner::Worker(Box::new(worker)),
                Err(e) => {
                    tracing::warn!(actor = self.actor(), key = self.key(), error = %escaped(&e), "cannot start a queue worker");
                    return;
                }
            }
        };
        let mut run = vec![event];
        if let Runner::Main = runner
            && policy.per_group() == 1
            && policy.mode != QueueMode::Custom
        {
            let followers = self.followers(&run[0], policy, now);
            run.extend(followers);
        }
        for event in &run {
            self.in_flight
                .insert(event.id, event.group.clone().unwrap_or_default());
        }
        let work = self.work.clone();
        let def = self.def.clone();
        let address = self.address.clone();
        let span = tracing::debug_span!(
            "process",
            actor = &*address.actor,
            key = &*address.key,
            first = run[0].id,
            events = run.len()
        );
        self.tasks
            .spawn(async move { process(work, def, address, runner, run).await }.instrument(span));
    }

    /// The events of `head`'s group due now that the policy would pick
    /// after it, one by one, in its order.
    fn followers(&self, head: &QueuedEvent, policy: &QueuePolicy, now: i64) -> Vec<QueuedEvent> {
        let mut skip_ids: Vec<i64> = self.in_flight.keys().copied().collect();
        skip_ids.push(head.id);
        let group = head.group.as_deref().unwrap_or_default();
        let limit = MAX_BATCH_CALLS - 1;
        match self
            .reader()
            .queue()
            .group_head(policy.mode, group, now, &skip_ids, limit)
        {
            Ok(events) => events.into_iter().map(|(event, _)| event).collect(),
            Err(e) => {
                tracing::warn!(actor = self.actor(), key = self.key(), error = %escaped(&e), "cannot pick queue events");
                Vec::new()
            }
        }
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
        for id in done
            .finished
            .iter()
            .map(|(id, _)| id)
            .chain(&done.not_reached)
        {
            self.in_flight.remove(id);
        }
        match done.runner {
            Runner::Main => self.main_busy = false,
            // A worker that trapped is dropped; another starts when needed.
            Runner::Worker(worker) if !worker.is_broken() && !worker.is_outdated(&self.def) => {
                self.workers.push(*worker)
            }
            Runner::Worker(_) => {}
        }
        let waiters = &self.work.waiters;
        let (actor, key) = (&self.address.actor, &self.address.key);
        let mut stuck = None;
        for (id, finished) in done.finished {
            match finished {
                Finished::Processed(result) => {
                    self.metrics.event_processed();
                    waiters.answer(actor, key, id, EventOutcome::Processed(result));
                }
                Finished::Failed(error, AfterFailure::DeadLettered) => {
                    self.metrics.event_failed(true);
                    tracing::warn!(actor = &**actor, key = &**key, event = id, error = %escaped(&error), "event dead-lettered");
                    waiters.answer(actor, key, id, EventOutcome::DeadLettered(error));
                }
                Finished::Failed(error, _) => {
                    self.metrics.event_failed(false);
                    tracing::info!(actor = &**actor, key = &**key, event = id, error = %escaped(&error), "event failed; it will be retried");
                }
                Finished::Conflict => {}
                Finished::Stuck(e) => stuck = stuck.or(Some(e)),
            }
        }
        stuck.map_or(Ok(()), Err)
    }
}

/// Processes `run` (one event on a worker) on `runner`, then records a
/// failure with the same runner. A conflict is retried by picking the
/// event again, after a pause.
async fn process(
    work: Arc<Background>,
    def: Arc<ActorDefinition>,
    address: Address,
    mut runner: Runner,
    run: Vec<QueuedEvent>,
) -> Done {
    let (actor, key) = (&*address.actor, &*address.key);
    let mut results = match runner {
        Runner::Main => work
            .core
            .with_cell(actor, key, Origin::MustExist, async |cell| {
                Ok(cell.process_run(&run).await)
            })
            .await
            .unwrap_or_else(|e| vec![Err(e)]),
        Runner::Worker(ref mut cell) => vec![cell.process(&run[0]).await],
    };
    let reached = results.len();
    let mut finished = Vec::new();
    let mut paused = false;
    for (event, result) in run.iter().zip(results.drain(..)) {
        let id = event.id;
        let outcome = match result {
            Ok(result) => Finished::Processed(result),
            Err(Error::Conflict { .. }) => {
                // Once for the run, however many of its events met it.
                if !std::mem::replace(&mut paused, true) {
                    tokio::time::sleep(BACKGROUND_CONFLICT_PAUSE).await;
                }
                Finished::Conflict
            }
            Err(e) if !is_attempt(&e, id) => Finished::Stuck(e),
            Err(e) => {
                let error = e.to_string();
                match record_failure(&work, &def, &address, &mut runner, id, &error).await {
                    Ok(after) => Finished::Failed(error, after),
                    Err(e) => Finished::Stuck(e),
                }
            }
        };
        finished.push((id, outcome));
    }
    Done {
        runner,
        finished,
        not_reached: run[reached..].iter().map(|event| event.id).collect(),
    }
}

/// Records a failed attempt of event `id` with `runner`.
async fn record_failure(
    work: &Background,
    def: &ActorDefinition,
    address: &Address,
    runner: &mut Runner,
    id: i64,
    error: &str,
) -> Result<AfterFailure, Error> {
    match runner {
        Runner::Main => {
            work.core
                .with_cell(
                    &address.actor,
                    &address.key,
                    Origin::MustExist,
                    async |cell| cell.record_failure(id, error, &def.options),
                )
                .await
        }
        Runner::Worker(cell) => {
            let mut recorded = cell.record_failure(id, error, &def.options);
            while let Err(Error::Conflict { .. }) = recorded {
                tokio::time::sleep(BACKGROUND_CONFLICT_PAUSE).await;
                recorded = cell.record_failure(id, error, &def.options);
            }
            recorded
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
