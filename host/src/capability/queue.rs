//! `burrow:actor/queue`: appends to the instance's own queue, inside the
//! current call's transaction.

use crate::bindings::queue::{AppendOptions, Host, QueueError};
use crate::clock::now_ms;
use crate::config::MAX_EVENT_NAME_BYTES;
use crate::instance::{InstanceState, QueueLimits, storage_trap};
use crate::storage::{AppendError, HostTables, NewEvent};

impl Host for InstanceState {
    fn append(
        &mut self,
        event_type: String,
        payload: String,
        options: AppendOptions,
    ) -> wasmtime::Result<Result<u64, QueueError>> {
        if let Err(refusal) = self.check_write("queue.append") {
            return Ok(Err(refusal.into()));
        }
        if !self.has_queue() {
            return Ok(Err(QueueError::NotAllowed(format!(
                "queue.append: actor `{}` has no queue (its component does not export \
                 burrow:actor/processor with a policy)",
                self.name().actor
            ))));
        }
        let event = NewEvent {
            event_type,
            payload,
            priority: options.priority,
            // An empty group name is the default group, as for a sender.
            group: options.group.filter(|g| !g.is_empty()),
        };
        match check_event(&event, self.queue_limits()) {
            Ok(()) => {}
            Err(BadEvent::TooLarge(limit)) => return Ok(Err(QueueError::TooLarge(limit as u64))),
            Err(BadEvent::Invalid(why)) => return Ok(Err(QueueError::Invalid(why))),
        }
        match self
            .db()
            .conn
            .queue()
            .append(&event, now_ms(), self.queue_limits().max_pending)
        {
            Ok(id) => {
                self.note_appended();
                Ok(Ok(id as u64))
            }
            Err(AppendError::Full(limit)) => Ok(Err(QueueError::Full(limit))),
            Err(AppendError::Sqlite(e)) => {
                let error = storage_trap(e);
                self.check_transaction("queue.append")?;
                Err(error)
            }
        }
    }
}

/// What is wrong with an event.
pub(crate) enum BadEvent {
    /// The payload is over this many bytes.
    TooLarge(usize),
    /// The type, group or payload is not acceptable; says why.
    Invalid(String),
}

/// Checks an event before it is appended, from a guest or from a sender.
pub(crate) fn check_event(event: &NewEvent, limits: QueueLimits) -> Result<(), BadEvent> {
    if event.event_type.is_empty() || event.event_type.len() > MAX_EVENT_NAME_BYTES {
        return Err(BadEvent::Invalid(format!(
            "the event type must be 1 to {MAX_EVENT_NAME_BYTES} bytes; it is {}",
            event.event_type.len()
        )));
    }
    if let Some(group) = &event.group
        && group.len() > MAX_EVENT_NAME_BYTES
    {
        return Err(BadEvent::Invalid(format!(
            "the group name is {} bytes; the limit is {MAX_EVENT_NAME_BYTES}",
            group.len()
        )));
    }
    if event.payload.len() > limits.max_payload {
        return Err(BadEvent::TooLarge(limits.max_payload));
    }
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&event.payload) {
        return Err(BadEvent::Invalid(format!(
            "the payload is not valid JSON: {e}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::Mode;
    use crate::instance::testing::instance;

    fn options() -> AppendOptions {
        AppendOptions {
            priority: 0,
            group: None,
        }
    }

    #[test]
    fn an_append_needs_a_queue_and_a_writing_mode() {
        let (mut state, _dir) = instance();
        let e = state.append("t".into(), "1".into(), options()).unwrap();
        assert!(matches!(e, Err(QueueError::NotAllowed(m)) if m.contains("has no queue")));
        state.set_has_queue(true);
        let id = state.append("t".into(), "1".into(), options()).unwrap();
        assert_eq!(id.unwrap(), 1);
        assert!(state.effects().appended);
        state.set_mode(Mode::Select);
        let e = state.append("t".into(), "1".into(), options()).unwrap();
        assert!(matches!(e, Err(QueueError::NotAllowed(m)) if m.contains("may only read")));
        state.set_mode(Mode::Idle);
        let e = state.append("t".into(), "1".into(), options()).unwrap();
        assert!(matches!(e, Err(QueueError::NotAllowed(m)) if m.contains("queue.append")));
    }

    #[test]
    fn bad_events_and_a_full_queue_are_refused_by_name() {
        let (mut state, _dir) = instance();
        state.set_has_queue(true);
        state.set_queue_limits(QueueLimits {
            max_pending: 1,
            max_payload: 8,
        });
        let mut append = |t: &str, p: &str| state.append(t.into(), p.into(), options()).unwrap();
        assert!(matches!(append("", "1"), Err(QueueError::Invalid(m)) if m.contains("event type")));
        assert!(
            matches!(append("t", "{oops"), Err(QueueError::Invalid(m)) if m.contains("not valid JSON"))
        );
        assert!(matches!(
            append("t", "\"123456789\""),
            Err(QueueError::TooLarge(8))
        ));
        append("t", "1").unwrap();
        assert!(matches!(append("t", "2"), Err(QueueError::Full(1))));
    }
}
