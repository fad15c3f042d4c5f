//! What an instance's guest code may ask of the host around it: calls and
//! sends to other instances.
//!
//! The trait is defined here, below the capabilities that use it, and
//! implemented by the public host: the instance layer never names the
//! layers above it (as wasmtime's wasi-http takes its outgoing requests
//! through a hook the embedder implements).

use std::future::Future;
use std::pin::Pin;

use crate::address::Address;
use crate::error::Error;

/// A future that an [`OtherActors`] method returns.
pub(crate) type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

/// Calls and sends from guest code to other instances.
pub(crate) trait OtherActors: Send + Sync {
    /// Calls `action` with `args` (a JSON array) on (`actor`, `key`) for
    /// guest code; `chain` holds the instances waiting on this call,
    /// outermost first. Returns the JSON result.
    fn call<'a>(
        &'a self,
        chain: Vec<Address>,
        actor: &'a str,
        key: &'a str,
        action: &'a str,
        args: &'a str,
    ) -> Pending<'a, String>;

    /// Appends an event to the queue of (`actor`, `key`) without waiting
    /// for it to be processed. Returns its id.
    fn send<'a>(
        &'a self,
        actor: &'a str,
        key: &'a str,
        event_type: &'a str,
        payload: &'a str,
        priority: i32,
        group: Option<String>,
    ) -> Pending<'a, i64>;
}
