//! Senders waiting for the outcome of the event they appended.
//!
//! A waiter is registered before the append commits (the pump cannot see
//! the event earlier), and answered by the pump when the event's
//! processing commits or the event is dead-lettered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// What became of a waited-for event.
#[derive(Debug, Clone, PartialEq)]
pub enum EventOutcome {
    /// `process` succeeded and committed; its result, JSON text.
    Processed(String),
    /// The event failed too often and moved to the dead-letter table.
    DeadLettered(String),
}

type WaiterKey = (Arc<str>, Arc<str>, i64);

#[derive(Default)]
pub(crate) struct Waiters {
    waiting: Mutex<HashMap<WaiterKey, oneshot::Sender<EventOutcome>>>,
}

impl Waiters {
    pub(crate) fn register(
        &self,
        actor: &Arc<str>,
        key: &Arc<str>,
        id: i64,
    ) -> oneshot::Receiver<EventOutcome> {
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap()
            .insert((actor.clone(), key.clone(), id), tx);
        rx
    }

    pub(crate) fn forget(&self, actor: &Arc<str>, key: &Arc<str>, id: i64) {
        self.waiting
            .lock()
            .unwrap()
            .remove(&(actor.clone(), key.clone(), id));
    }

    pub(crate) fn answer(&self, actor: &Arc<str>, key: &Arc<str>, id: i64, outcome: EventOutcome) {
        let waiter = self
            .waiting
            .lock()
            .unwrap()
            .remove(&(actor.clone(), key.clone(), id));
        if let Some(tx) = waiter {
            let _ = tx.send(outcome);
        }
    }

    /// Drops the waiters of a destroyed instance (they learn it by a
    /// closed channel).
    pub(crate) fn forget_instance(&self, actor: &str, key: &str) {
        self.waiting
            .lock()
            .unwrap()
            .retain(|(a, k, _), _| !(&**a == actor && &**k == key));
    }
}
