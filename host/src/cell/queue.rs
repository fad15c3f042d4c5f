//! A cell's queue operations: its policy at the start, appends and
//! requeues from the host, and the guest's `process` and selector calls.

use crate::bindings::processor::QueueMode as WitQueueMode;
use crate::bindings::queue::Event as WitEvent;
use crate::bindings::types::Failure;
use crate::clock::now_ms;
use crate::config::MAX_RESULT_BYTES;
use crate::error::Error;
use crate::instance::Mode;
use crate::instance::output::failure_text;
use crate::storage::{
    AfterFailure, AppendError, HostTables, NewEvent, QueueMode, QueuePolicy, QueuedEvent,
    retry_delay,
};

use super::Cell;
use super::savepoints::{Item, Rules};

impl Cell {
    /// Records the guest's queue policy unless one is recorded already
    /// (a database created before its actor had a queue gets it at its
    /// next start), and notes whether the instance has a queue.
    pub(super) async fn snapshot_policy(&mut self) -> Result<(), Error> {
        if self.exports.processor.is_none() {
            self.store.data_mut().set_has_queue(false);
            return Ok(());
        }
        let recorded = self
            .db()
            .conn
            .queue()
            .policy()
            .map_err(|e| self.storage_error(e))?;
        let policy = match recorded {
            Some(policy) => Some(policy),
            None => {
                let offered = self
                    .call(
                        Mode::Hook("policy"),
                        "processor policy",
                        async |exports, store| {
                            let processor = exports.processor.as_ref().expect("checked above");
                            processor.call_policy(store).await
                        },
                    )
                    .await?;
                match offered {
                    None => None,
                    Some(offered) => {
                        let policy = QueuePolicy {
                            mode: match offered.mode {
                                WitQueueMode::Fifo => QueueMode::Fifo,
                                WitQueueMode::Lifo => QueueMode::Lifo,
                                WitQueueMode::Random => QueueMode::Random,
                                WitQueueMode::Custom => QueueMode::Custom,
                            },
                            concurrency: offered.concurrency,
                        };
                        if policy.concurrency == Some(0) {
                            return Err(self.failed(
                                "processor policy",
                                "invalid-policy",
                                "the queue policy's concurrency is 0; it must be at least 1, \
                                 or none for unlimited"
                                    .into(),
                            ));
                        }
                        self.db()
                            .conn
                            .queue()
                            .record_policy(&policy)
                            .map_err(|e| self.storage_error(e))?;
                        Some(policy)
                    }
                }
            }
        };
        self.store.data_mut().set_has_queue(policy.is_some());
        Ok(())
    }

    /// Appends `event` in its own transaction; `before_commit` learns its
    /// id before the transaction commits.
    pub(crate) fn append(
        &mut self,
        event: &NewEvent,
        before_commit: impl FnOnce(i64),
    ) -> Result<i64, Error> {
        self.begin()?;
        let result = self.append_event(event);
        if let Ok(id) = result {
            before_commit(id);
        }
        self.finish(result)
    }

    pub(super) fn append_event(&mut self, event: &NewEvent) -> Result<i64, Error> {
        if !self.has_queue() {
            return Err(Error::NoQueue(self.name().actor.to_string()));
        }
        let limit = self.store.data().queue_limits().max_pending;
        match self.db().conn.queue().append(event, now_ms(), limit) {
            Ok(id) => {
                self.store.data_mut().note_appended();
                Ok(id)
            }
            Err(AppendError::Full(limit)) => Err(Error::QueueFull {
                actor: self.name().actor.to_string(),
                key: self.name().key.to_string(),
                limit,
            }),
            Err(AppendError::Sqlite(e)) => Err(self.storage_error(e)),
        }
    }

    /// Moves dead letter `id` back into the queue.
    pub(crate) fn requeue(&mut self, id: i64) -> Result<bool, Error> {
        self.begin()?;
        let result = self
            .db()
            .conn
            .queue()
            .requeue(id)
            .map_err(|e| self.storage_error(e));
        if let Ok(true) = result {
            self.store.data_mut().note_appended();
        }
        self.finish(result)
    }

    /// Processes `event` in one transaction that also deletes it; returns
    /// `process`'s result (JSON text).
    pub(crate) async fn process(&mut self, event: &QueuedEvent) -> Result<String, Error> {
        self.begin()?;
        let result = self.run_process(event).await;
        self.finish(result)
    }

    /// Processes a run of `events` (in this order) back to back in one
    /// transaction, each inside its own savepoint with its deletion, and
    /// commits once; the first failure ends the run (the events after it
    /// stay pending, as they would behind a failed event processed one at
    /// a time). Returns how each event ended, for the events it reached.
    ///
    /// The first operation after a start processes one event alone, in the
    /// start's transaction.
    pub(crate) async fn process_run(
        &mut self,
        events: &[QueuedEvent],
    ) -> Vec<Result<String, Error>> {
        let Some(first) = events.first() else {
            return Vec::new();
        };
        if self.starting.is_some() {
            return vec![self.process(first).await];
        }
        let rules = Rules {
            stop_at_failure: true,
        };
        let mut events = events.iter();
        let batched = self.run_batched(rules, || events.next()).await;
        let mut failed = batched.failed.into_iter().map(|(_, e)| Err(e));
        if batched.lost {
            // The events before it are pending again: not reached.
            return failed.next_back().into_iter().collect();
        }
        let committed = match batched.kept.is_empty() {
            true => Ok(()),
            false => self.finish(Ok(())),
        };
        let kept = batched
            .kept
            .into_iter()
            .map(|(_, result)| match &committed {
                Ok(()) => Ok(result),
                Err(e) => Err(e.clone()),
            });
        kept.chain(failed).collect()
    }

    pub(super) async fn run_process(&mut self, event: &QueuedEvent) -> Result<String, Error> {
        let during = process_during(event.id);
        let wit_event = wit_event(event);
        let outcome = self
            .call(Mode::Process, &during, async |exports, store| {
                let Some(processor) = exports.processor.as_ref() else {
                    wasmtime::bail!("the component does not export burrow:actor/processor");
                };
                processor.call_process(store, &wit_event).await
            })
            .await?;
        let result = match outcome {
            Ok(result) if result.len() > MAX_RESULT_BYTES => {
                return Err(self.failed(
                    &during,
                    "limit-exceeded",
                    format!(
                        "the result is {} bytes; the limit is {MAX_RESULT_BYTES} bytes",
                        result.len()
                    ),
                ));
            }
            Ok(result) => result,
            Err(Failure { code, message }) => return Err(self.failed(&during, &code, message)),
        };
        let deleted = self
            .db()
            .conn
            .queue()
            .delete(event.id)
            .map_err(|e| self.storage_error(e))?;
        if !deleted {
            // Processed (or destroyed) meanwhile by another runner: this
            // processing is rolled back whole.
            tracing::warn!(
                actor = &*self.name().actor,
                key = &*self.name().key,
                event = event.id,
                "the event was no longer pending when its processing ended; rolled back"
            );
            return Err(Error::conflict(&self.name().actor, &self.name().key));
        }
        Ok(result)
    }

    /// Asks the guest's selector which of `pending` to process now.
    pub(crate) async fn select(&mut self, pending: &[QueuedEvent]) -> Result<Vec<i64>, Error> {
        self.begin()?;
        let events: Vec<WitEvent> = pending.iter().map(wit_event).collect();
        let result = self
            .call(Mode::Select, "queue selector", async |exports, store| {
                let Some(processor) = exports.processor.as_ref() else {
                    wasmtime::bail!("the component does not export burrow:actor/processor");
                };
                processor.call_select(store, &events).await
            })
            .await
            .map(|ids| ids.into_iter().map(|id| id as i64).collect());
        self.finish(result)
    }

    /// Records a failed attempt of event `id`: a retry later, or the dead
    /// letter after the actor's `queue_max_attempts`.
    pub(crate) fn record_failure(
        &mut self,
        id: i64,
        error: &str,
        options: &crate::config::ActorOptions,
    ) -> Result<AfterFailure, Error> {
        let now = now_ms();
        let (base, cap) = (options.queue_retry_base, options.queue_retry_cap);
        let max_attempts = options.queue_max_attempts;
        let error = failure_text(error);
        self.host_transaction(|db| {
            db.conn
                .queue()
                .record_failure(id, &error, now, max_attempts, |failed| {
                    now + retry_delay(base, cap, failed).as_millis() as i64
                })
        })
    }
}

/// What a failure of the `process` call of event `id` names as its
/// `during`.
pub(crate) fn process_during(id: i64) -> String {
    format!("process of event {id}")
}

fn wit_event(event: &QueuedEvent) -> WitEvent {
    WitEvent {
        id: event.id as u64,
        event_type: event.event_type.clone(),
        payload: event.payload.clone(),
        priority: event.priority,
        group: event.group.clone(),
        created_at: event.created_at,
        attempt: event.attempts.saturating_add(1),
    }
}

impl Item for &QueuedEvent {
    type Output = String;

    fn size(&self) -> usize {
        self.payload.len()
    }

    async fn run(&self, cell: &mut Cell) -> Result<String, Error> {
        cell.run_process(self).await
    }
}
