//! `burrow:actor/state`: one value per instance in `_burrow_state`,
//! written inside the current call's transaction.

use crate::bindings::state::{Host, StateError};
use crate::config::MAX_STATE_BYTES;
use crate::instance::{InstanceState, storage_trap};

impl Host for InstanceState {
    fn get(&mut self) -> wasmtime::Result<Result<Option<Vec<u8>>, StateError>> {
        if let Err(refusal) = self.check_mode("state.get") {
            return Ok(Err(refusal.into()));
        }
        self.db().read_state().map(Ok).map_err(storage_trap)
    }

    fn set(&mut self, value: Vec<u8>) -> wasmtime::Result<Result<(), StateError>> {
        if let Err(refusal) = self.check_write("state.set") {
            return Ok(Err(refusal.into()));
        }
        if value.len() > MAX_STATE_BYTES {
            return Ok(Err(StateError::TooLarge(MAX_STATE_BYTES as u64)));
        }
        self.db().write_state(&value).map_err(storage_trap)?;
        Ok(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::testing::instance;

    #[test]
    fn the_state_is_written_and_read_back() {
        let (mut state, _dir) = instance();
        assert_eq!(state.get().unwrap().unwrap(), None);
        state.set(b"{\"n\":1}".to_vec()).unwrap().unwrap();
        state.set(b"{\"n\":2}".to_vec()).unwrap().unwrap();
        assert_eq!(
            state.get().unwrap().unwrap().as_deref(),
            Some(&b"{\"n\":2}"[..])
        );
    }

    #[test]
    fn a_state_past_the_limit_is_refused() {
        let (mut state, _dir) = instance();
        let e = state
            .set(vec![0; MAX_STATE_BYTES + 1])
            .unwrap()
            .unwrap_err();
        assert!(matches!(e, StateError::TooLarge(limit) if limit == MAX_STATE_BYTES as u64));
        assert_eq!(state.get().unwrap().unwrap(), None);
    }

    #[test]
    fn outside_a_call_the_state_is_refused() {
        let (mut state, _dir) = instance();
        state.set_mode(crate::instance::Mode::Idle);
        assert!(
            matches!(state.set(vec![1]).unwrap(), Err(StateError::NotAllowed(m)) if m.contains("state.set"))
        );
        assert!(matches!(
            state.get().unwrap(),
            Err(StateError::NotAllowed(_))
        ));
    }

    #[test]
    fn orchestration_code_gets_not_in_step() {
        let (mut state, _dir) = instance();
        state.set_mode(crate::instance::Mode::Orchestration);
        for error in [
            state.set(vec![1]).unwrap().unwrap_err(),
            state.get().unwrap().unwrap_err(),
        ] {
            assert!(
                matches!(&error, StateError::NotInStep(m) if m.contains("outside a step")),
                "{error:?}"
            );
        }
    }
}
