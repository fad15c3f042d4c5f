//! Events for the clients connected to this instance, and the hooks that
//! hear about connections.
//!
//! Clients connect over a WebSocket (`GET /actors/{actor}/{key}/connect`,
//! or `burrow watch ACTOR KEY`). [`broadcast`] sends an event to all of
//! them once the current call commits; nothing is sent if it rolls back.
//! An instance with live connections stays awake.
//!
//! ```no_run
//! use burrow_sdk::{events, Result};
//!
//! /// `--params '{"name": "ada"}'`
//! #[derive(serde::Deserialize)]
//! struct Join {
//!     name: String,
//! }
//!
//! fn on_connect(id: u64, params: Option<Join>) -> Result<()> {
//!     let Some(Join { name }) = params else {
//!         return Err(burrow_sdk::Error::new("no-name", "connect with a name"));
//!     };
//!     events::broadcast("joined", &(id, name))
//! }
//!
//! fn on_disconnect(id: u64) -> Result<()> {
//!     events::broadcast("left", &id)
//! }
//!
//! fn post(text: String) -> Result<()> {
//!     events::broadcast("message", &text)
//! }
//!
//! burrow_sdk::actor! {
//!     connect: on_connect,
//!     disconnect: on_disconnect,
//!     actions: [post],
//! }
//! ```
//!
//! `connect` gets the connection's id and its parameters (decoded from
//! JSON; `null` when the client sent none); an error refuses the
//! connection and the client gets the error's code and message. Both hooks
//! run in a transaction of their own, like actions.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::wit::burrow::actor::events as wit;
use crate::wit::burrow::actor::types::Failure;
use crate::{Error, Result};

/// Why an event was refused, as reported by the host.
pub type EventError = wit::EventError;

/// Sends the event `name` with `payload` (serialized as JSON) to every
/// connected client once the current call commits.
pub fn broadcast<T: Serialize + ?Sized>(name: &str, payload: &T) -> Result<()> {
    let payload = serde_json::to_string(payload)?;
    Ok(wit::broadcast(name, &payload)?)
}

impl From<EventError> for Error {
    fn from(e: EventError) -> Self {
        match e {
            EventError::NotInStep(m) => Error::new("not-in-step", m),
            EventError::Invalid(m) | EventError::NotAllowed(m) => Error::new("events", m),
        }
    }
}

#[doc(hidden)]
pub fn __connect<P: DeserializeOwned>(
    f: impl Fn(u64, P) -> Result<()>,
    id: u64,
    params: &str,
) -> std::result::Result<(), Failure> {
    let params = serde_json::from_str(params).map_err(|e| {
        Failure::from(Error::new(
            "invalid-params",
            format!("the connection parameters do not decode: {e}"),
        ))
    })?;
    f(id, params).map_err(Failure::from)
}

#[doc(hidden)]
pub fn __disconnect(f: impl Fn(u64) -> Result<()>, id: u64) -> std::result::Result<(), Failure> {
    f(id).map_err(Failure::from)
}
