//! The actor's state: one serde value, committed with the call that wrote it.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::wit::burrow::actor::state as wit;
use crate::{Error, Result};

/// Why the state could not be written, as reported by the host.
pub type StateError = wit::StateError;

/// The state, or `None` if it was never set.
pub fn get<T: DeserializeOwned>() -> Result<Option<T>> {
    match wit::get()? {
        None => Ok(None),
        Some(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::new("state", format!("the stored state does not decode: {e}"))),
    }
}

/// The state, or `T::default()` if it was never set.
pub fn get_or_default<T: DeserializeOwned + Default>() -> Result<T> {
    Ok(get()?.unwrap_or_default())
}

/// Replaces the state.
pub fn set<T: Serialize>(value: &T) -> Result<()> {
    let bytes = serde_json::to_vec(value)?;
    wit::set(&bytes)?;
    Ok(())
}

/// Reads the state (or its default), lets `f` change it, writes it back and
/// returns what `f` returned.
pub fn update<T, R>(f: impl FnOnce(&mut T) -> R) -> Result<R>
where
    T: Serialize + DeserializeOwned + Default,
{
    let mut value = get_or_default()?;
    let result = f(&mut value);
    set(&value)?;
    Ok(result)
}
