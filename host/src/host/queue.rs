//! The host's public queue API: send (and wait), look, requeue, drop.

use std::sync::Mutex;

use crate::background::waiters::EventOutcome;
use crate::capability::queue::{BadEvent, check_event};
use crate::cell::Origin;
use crate::error::Error;
use crate::inspect::{self, QueueView};
use crate::instance::QueueLimits;
use crate::runtime::ConflictRetry;
use crate::storage::{HostTables, NewEvent};

use super::Host;
use super::route::Hop;

/// How to send an event (one type for the host and its client).
pub use burrow_client::SendOptions;

/// What a send achieved (one type for the host and its client): the
/// result of a processed event is its JSON text.
pub type SendOutcome = burrow_client::SendOutcome<String>;

impl Host {
    /// Appends an event of `event_type` with `payload` (JSON text) to the
    /// queue of (`actor`, `key`), creating the instance if needed. Returns
    /// once the append has committed, or with `options.wait`, once the
    /// event's processing has committed (or the wait ended).
    pub async fn send(
        &self,
        actor: &str,
        key: &str,
        event_type: &str,
        payload: &str,
        options: SendOptions,
    ) -> Result<SendOutcome, Error> {
        self.send_from(Hop::Origin, actor, key, event_type, payload, options)
            .await
    }

    /// [`Host::send`] for a request that came `hop`: here, or at the host
    /// that serves the instance.
    pub async fn send_from(
        &self,
        hop: Hop,
        actor: &str,
        key: &str,
        event_type: &str,
        payload: &str,
        options: SendOptions,
    ) -> Result<SendOutcome, Error> {
        let options = &options;
        let here = move || async move {
            self.send_here(actor, key, event_type, payload, options.clone())
                .await
        };
        let there = move |base: String| async move {
            self.forward_send(&base, actor, key, event_type, payload, options)
                .await
        };
        self.route(hop, actor, key, here, there).await
    }

    async fn send_here(
        &self,
        actor: &str,
        key: &str,
        event_type: &str,
        payload: &str,
        options: SendOptions,
    ) -> Result<SendOutcome, Error> {
        let def = self.core.resolve_ready(actor, key).await?;
        if !def.pre.has_processor() {
            return Err(Error::NoQueue(actor.into()));
        }
        let event = NewEvent {
            event_type: event_type.into(),
            payload: payload.into(),
            priority: options.priority,
            group: options.group.filter(|g| !g.is_empty()),
        };
        let limits = QueueLimits {
            max_pending: def.options.queue_max_pending,
            max_payload: def.options.queue_max_payload,
        };
        check_event(&event, limits).map_err(|e| match e {
            BadEvent::TooLarge(limit) => Error::PayloadTooLarge {
                actor: actor.into(),
                size: payload.len(),
                limit,
            },
            BadEvent::Invalid(message) => Error::InvalidEvent {
                actor: actor.into(),
                message,
            },
        })?;
        let address = self.core.address(&def, key);
        let waiters = &self.work.waiters;
        // The waiter is registered before the append commits: the event
        // cannot be processed earlier.
        let waiting = Mutex::new(None);
        let id = ConflictRetry::run(def.options.call_timeout, || {
            self.core
                .with_cell(actor, key, Origin::CreateIfMissing("null"), async |cell| {
                    if options.wait.is_some() && cell.is_workflow() {
                        return Err(Error::InvalidEvent {
                            actor: actor.into(),
                            message: "a workflow takes its queue's events with queue waits, and \
                                  nothing answers a sender that waits: send without waiting"
                                .into(),
                        });
                    }
                    let mut registered = None;
                    let appended = cell.append(&event, |id| {
                        if options.wait.is_some() {
                            registered = Some(id);
                            let receiver = waiters.register(&address.actor, &address.key, id);
                            *waiting.lock().unwrap() = Some(receiver);
                        }
                    });
                    if appended.is_err()
                        && let Some(id) = registered
                    {
                        waiters.forget(&address.actor, &address.key, id);
                        *waiting.lock().unwrap() = None;
                    }
                    appended
                })
        })
        .await?;
        let waiting = waiting.into_inner().unwrap();
        let (Some(wait), Some(outcome)) = (options.wait, waiting) else {
            return Ok(SendOutcome::Queued { id });
        };
        match tokio::time::timeout(wait, outcome).await {
            Ok(Ok(EventOutcome::Processed(result))) => Ok(SendOutcome::Processed { id, result }),
            Ok(Ok(EventOutcome::DeadLettered(error))) => {
                Ok(SendOutcome::DeadLettered { id, error })
            }
            Ok(Err(_)) => Err(Error::no_such_instance(actor, key)),
            Err(_) => {
                waiters.forget(&address.actor, &address.key, id);
                Ok(SendOutcome::TimedOut { id })
            }
        }
    }

    /// The queue of (`actor`, `key`): policy, pending events, dead letters,
    /// and what keeps it from being processed, if anything. Read-only: the
    /// instance is not woken.
    pub fn queue(&self, actor: &str, key: &str) -> Result<QueueView, Error> {
        let spec = self.core.listed(actor, key)?;
        let view = inspect::queue_view(self.data_dir(), actor, key)?;
        let mut view = view.ok_or_else(|| Error::NoQueue(actor.into()))?;
        view.error = self.work.pump_error(&self.core.address_of(&spec, key));
        Ok(view)
    }

    /// Moves dead letter `id` of (`actor`, `key`) back into its queue,
    /// with its attempts reset and at its old place in the order.
    pub async fn requeue(&self, actor: &str, key: &str, id: i64) -> Result<(), Error> {
        let found = ConflictRetry::run(self.core.call_timeout(actor), || {
            self.core
                .with_cell(actor, key, Origin::MustExist, async |cell| cell.requeue(id))
        })
        .await?;
        if found {
            Ok(())
        } else {
            Err(no_such_event(actor, key, id))
        }
    }

    /// Deletes dead letter `id` of (`actor`, `key`) for good (`burrow
    /// discard`, `DELETE /actors/{actor}/{key}/queue/dead-letters/{id}`).
    pub async fn discard(&self, actor: &str, key: &str, id: i64) -> Result<(), Error> {
        let found = ConflictRetry::run(self.core.call_timeout(actor), || {
            self.core
                .with_cell(actor, key, Origin::MustExist, async |cell| {
                    cell.host_transaction(|db| db.conn.queue().discard(id))
                })
        })
        .await?;
        if found {
            Ok(())
        } else {
            Err(no_such_event(actor, key, id))
        }
    }

    /// The former name of [`Host::discard`].
    #[deprecated(note = "renamed to `Host::discard`")]
    pub async fn drop_dead_letter(&self, actor: &str, key: &str, id: i64) -> Result<(), Error> {
        self.discard(actor, key, id).await
    }
}

fn no_such_event(actor: &str, key: &str, id: i64) -> Error {
    Error::NoSuchEvent {
        actor: actor.into(),
        key: key.into(),
        id,
    }
}
