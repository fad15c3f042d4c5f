//! `burrow:actor/events`: events for connected clients, published when the
//! current call commits (see `connections`).

use crate::bindings::events::{EventError, Host};
use crate::config::{MAX_BROADCAST_BYTES, MAX_BROADCASTS_PER_CALL, MAX_EVENT_NAME_BYTES};
use crate::connections::PendingEvent;
use crate::instance::InstanceState;

impl Host for InstanceState {
    fn broadcast(
        &mut self,
        name: String,
        payload: String,
    ) -> wasmtime::Result<Result<(), EventError>> {
        if let Err(refusal) = self.check_write("events.broadcast") {
            return Ok(Err(refusal.into()));
        }
        let invalid =
            |why: String| Ok(Err(EventError::Invalid(format!("events.broadcast: {why}"))));
        if name.is_empty() || name.len() > MAX_EVENT_NAME_BYTES {
            return invalid(format!(
                "the event name must be 1 to {MAX_EVENT_NAME_BYTES} bytes; it is {}",
                name.len()
            ));
        }
        if payload.len() > MAX_BROADCAST_BYTES {
            return invalid(format!(
                "the payload is {} bytes; the limit is {MAX_BROADCAST_BYTES} bytes",
                payload.len()
            ));
        }
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&payload) {
            return invalid(format!("the payload is not valid JSON: {e}"));
        }
        if self.effects().events.len() >= MAX_BROADCASTS_PER_CALL {
            return invalid(format!(
                "a call may broadcast at most {MAX_BROADCASTS_PER_CALL} events"
            ));
        }
        self.note_event(PendingEvent { name, payload });
        Ok(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::Mode;
    use crate::instance::testing::instance;

    #[test]
    fn broadcasts_are_checked_and_kept_until_the_commit() {
        let (mut state, _dir) = instance();
        let broadcast = |state: &mut InstanceState, name: &str, payload: &str| {
            state.broadcast(name.into(), payload.into()).unwrap()
        };
        assert!(
            matches!(broadcast(&mut state, "", "1"), Err(EventError::Invalid(m)) if m.contains("event name"))
        );
        assert!(
            matches!(broadcast(&mut state, "e", "{x"), Err(EventError::Invalid(m)) if m.contains("not valid JSON"))
        );
        let big = format!("\"{}\"", "x".repeat(MAX_BROADCAST_BYTES));
        assert!(
            matches!(broadcast(&mut state, "e", &big), Err(EventError::Invalid(m)) if m.contains("limit"))
        );
        broadcast(&mut state, "e", "{\"a\":1}").unwrap();
        assert_eq!(state.effects().events.len(), 1);
        for _ in 1..MAX_BROADCASTS_PER_CALL {
            broadcast(&mut state, "e", "1").unwrap();
        }
        assert!(
            matches!(broadcast(&mut state, "e", "1"), Err(EventError::Invalid(m)) if m.contains("at most"))
        );
        state.discard_effects();
        assert!(state.effects().events.is_empty());
        state.set_mode(Mode::Select);
        assert!(matches!(
            broadcast(&mut state, "e", "1"),
            Err(EventError::NotAllowed(_))
        ));
        state.set_mode(Mode::Orchestration);
        assert!(
            matches!(broadcast(&mut state, "e", "1"), Err(EventError::NotInStep(m)) if m.contains("events.broadcast"))
        );
    }
}
