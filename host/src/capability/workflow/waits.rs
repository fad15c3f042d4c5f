//! Durable sleeps and queue waits: what a run waits for survives a
//! restart in its history entry (the time to wake, the queue wait's
//! deadline), and a queue wait's events are recorded in the transaction
//! that deletes them from the queue.

use serde::{Deserialize, Serialize};

use super::history::new_entry;
use crate::bindings::queue::Event as WitEvent;
use crate::bindings::workflow::Interrupt;
use crate::clock::now_ms;
use crate::config::MAX_QUEUE_BATCH;
use crate::instance::{InstanceState, storage_trap};
use crate::storage::{EntryKind, EntryStatus, HostTables};

pub(super) fn queue_next(
    instance: &mut InstanceState,
    name: String,
    event_types: Vec<String>,
    count: u32,
    timeout_ms: Option<u64>,
) -> wasmtime::Result<Result<Vec<WitEvent>, Interrupt>> {
    if let Err(interrupt) = instance.check_orchestration("workflow.queue-next") {
        return Ok(Err(interrupt));
    }
    if !instance.has_queue() {
        return Ok(Err(Interrupt::Invalid(
            "workflow.queue-next: this instance has no queue".into(),
        )));
    }
    let (location, recorded) = match instance.replay_next(EntryKind::Queue, &name)? {
        Ok(found) => found,
        Err(interrupt) => return Ok(Err(interrupt)),
    };
    let now = now_ms();
    let deadline = match &recorded {
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
    let events = instance
        .db()
        .conn
        .queue()
        .pending_of_types(&event_types, count)
        .map_err(storage_trap)?;
    let timed_out = deadline.is_some_and(|at| at <= now);
    if events.is_empty() && !timed_out {
        if recorded.is_none() {
            let mut entry = new_entry(location, EntryKind::Queue, &name, EntryStatus::Sleeping);
            entry.wake_at = deadline;
            instance.put(&entry)?;
        }
        let what = format!("queue wait `{name}`");
        let run = instance.run();
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
    instance.in_transaction(|conn| {
        for event in &events {
            conn.queue().delete(event.id)?;
        }
        conn.workflow().put_entry(&entry)
    })?;
    Ok(Ok(taken.into_iter().map(RecordedEvent::into_wit).collect()))
}

impl InstanceState {
    pub(super) fn durable_sleep(
        &mut self,
        name: String,
        call: &str,
        wake_at: i64,
    ) -> wasmtime::Result<Result<(), Interrupt>> {
        let (location, recorded) = match self.replay(call, EntryKind::Sleep, &name)? {
            Ok(found) => found,
            Err(interrupt) => return Ok(Err(interrupt)),
        };
        let now = now_ms();
        let at = match recorded {
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

impl From<&crate::storage::QueuedEvent> for RecordedEvent {
    fn from(e: &crate::storage::QueuedEvent) -> Self {
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
