//! `burrow:actor/state`: one value per instance in `_burrow_state`,
//! written inside the current call's transaction.

use crate::bindings::state::{Host, StateError};
use crate::config::MAX_STATE_BYTES;
use crate::instance_state::InstanceState;

impl Host for InstanceState {
    fn get(&mut self) -> wasmtime::Result<Option<Vec<u8>>> {
        if let Err(reason) = self.check_mode("state.get") {
            wasmtime::bail!(reason);
        }
        Ok(self.db.read_state()?)
    }

    fn set(&mut self, value: Vec<u8>) -> wasmtime::Result<Result<(), StateError>> {
        if let Err(reason) = self.check_mode("state.set") {
            return Ok(Err(StateError::NotAllowed(reason)));
        }
        if value.len() > MAX_STATE_BYTES {
            return Ok(Err(StateError::TooLarge(MAX_STATE_BYTES as u64)));
        }
        self.db.write_state(&value)?;
        Ok(Ok(()))
    }
}
