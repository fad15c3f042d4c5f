//! # Burrow
//!
//! A host for sandboxed, durable actors. An actor is a WebAssembly
//! component that exports `burrow:actor/guest` (and `burrow:actor/processor`
//! for an actor with a queue, `burrow:actor/workflow-runner` for one with a
//! workflow); every instance of it (an actor name plus a
//! key) gets its own SQLite database, kept outside the sandbox, and every
//! call into it runs in one transaction of that database.
//!
//! # Layout
//!
//! - [`host`]: the public API ([`Host`]): start, call, create, destroy, inspect.
//! - `directory` and `cell`: live instances, one call at a time each; the
//!   transaction around every call into a guest.
//! - `definition`, `engine`, `cache`: components loaded once, pre-instantiated,
//!   compiled once and cached on disk.
//! - `capability/*`: the host side of each WIT interface (`state`, `db`, `log`,
//!   `schedule`, `actors`, `events`, `queue`, `workflow`), and WASI's clocks
//!   and random guarded for workflows.
//! - `connections`: client connections and the events published to them.
//! - `queue/*`: the durable queue: sending (and waiting), the pump that
//!   processes an instance's events, waiting senders.
//! - [`workflow`]: durable workflows: the driver that runs each instance's
//!   workflow until it finishes, and the view of its history.
//! - `storage/*`: the data directory, instance databases, their SQL sandbox,
//!   the queue's and the workflow's tables, and the index `host.sqlite`.
//! - [`manifest`], [`config`]: `burrow.toml` and the limits.
//! - [`http`] and [`client`]: the HTTP API and a client for it.
//! - [`cli`]: the `burrow` command; [`bench`]: the benchmark workloads.
//!
//! # Example
//!
//! ```no_run
//! # async fn run() -> anyhow::Result<()> {
//! use burrow::{Host, HostConfig, manifest::ActorSpec};
//!
//! let actors = [ActorSpec::new("counter", "target/wasm32-wasip2/guest/counter.wasm")];
//! let host = Host::start(HostConfig::default(), &actors).await?;
//! let value = host.call("counter", "my-counter", "increment", "[5]").await?;
//! assert_eq!(value, "5");
//! host.shutdown().await;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod address;
mod background;
pub mod bench;
mod bindings;
mod blocking;
mod cache;
mod capability;
mod cell;
pub mod cli;
pub mod client;
pub mod config;
mod connections;
mod deadline;
mod definition;
mod directory;
mod engine;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod host;
pub mod http;
mod inspect;
mod instance;
#[cfg(test)]
mod layers;
pub mod manifest;
mod presence;
pub mod queue;
mod runtime;
mod storage;
mod watchdog;
pub mod workflow;

pub use config::{ActorOptions, HostConfig, Synchronous};
pub use definition::LoadError;
pub use error::Error;
pub use host::Host;
pub use host::{SendOptions, SendOutcome};
pub use inspect::{Inspection, QueueView, TableDump, inspect as inspect_instance};
pub use queue::EventOutcome;
pub use storage::{instance_path, validate_actor_name, validate_key};
