//! Calls to other actor instances.
//!
//! A call wakes (or creates) the other instance and runs its action in that
//! instance's own transaction, which commits before the call returns: it is
//! not undone if the calling action fails afterwards. The same holds for
//! [`send`]. Calls on one chain must not come back to an instance that is
//! waiting on the chain: A calling B calling A gets a `cycle` error
//! instead of a deadlock.
//!
//! ```no_run
//! use burrow_sdk::{actors, Result};
//!
//! fn add_to_total(amount: i64) -> Result<i64> {
//!     actors::call("counter", "total", "increment", &(amount,))
//! }
//!
//! burrow_sdk::actor! { actions: [add_to_total] }
//! ```
//!
//! Inside a workflow, calls and sends are side effects: they are allowed
//! only in a step.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::queue::Options;
use crate::wit::burrow::actor::actors as wit;
use crate::{Error, Result};

/// Why a call to another instance failed, as reported by the host.
pub type CallError = wit::CallError;

/// Calls `action` on the instance (`actor`, `key`) with `args` (a tuple,
/// serialized as a JSON array) and decodes its result.
///
/// The callee's own error keeps its code and message; the other failures
/// get the codes `cycle`, `invalid`, `unavailable`, `not-allowed` and
/// `not-in-step`.
pub fn call<A, R>(actor: &str, key: &str, action: &str, args: &A) -> Result<R>
where
    A: Serialize + ?Sized,
    R: DeserializeOwned,
{
    let args = crate::schedule::encode_args(args)?;
    let result = wit::call(actor, key, action, &args)?;
    serde_json::from_str(&result).map_err(|e| {
        Error::new(
            "json",
            format!("the result of {actor}/{key} {action} does not decode: {e}"),
        )
    })
}

/// Appends an event to the queue of the instance (`actor`, `key`) with
/// priority 0 in the default group; returns the event's id.
pub fn send<T: Serialize + ?Sized>(
    actor: &str,
    key: &str,
    event_type: &str,
    payload: &T,
) -> Result<u64> {
    send_with(actor, key, event_type, payload, Options::default())
}

/// Appends an event with a priority and a group to another instance's queue.
pub fn send_with<T: Serialize + ?Sized>(
    actor: &str,
    key: &str,
    event_type: &str,
    payload: &T,
    options: Options,
) -> Result<u64> {
    let payload = serde_json::to_string(payload)?;
    let options = wit::SendOptions {
        priority: options.priority,
        group: options.group,
    };
    Ok(wit::send(actor, key, event_type, &payload, &options)?)
}

impl From<CallError> for Error {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Failed(f) => Error::new(f.code, f.message),
            CallError::Unavailable(f) => {
                Error::new("unavailable", format!("{}: {}", f.code, f.message))
            }
            CallError::Cycle(m) => Error::new("cycle", m),
            CallError::Invalid(m) => Error::new("invalid", m),
            CallError::NotAllowed(m) => Error::new("not-allowed", m),
            CallError::NotInStep(m) => Error::new("not-in-step", m),
        }
    }
}
