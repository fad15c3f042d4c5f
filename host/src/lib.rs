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
//! Layers, bottom up; a module uses only what stands below it (checked by
//! a unit test, `layers.rs`; ARCHITECTURE.md draws the picture):
//!
//! - leaves: `caller` ([`Caller`]), `bindings`, `engine`, `cache`,
//!   `metrics`, and those of the crate `burrow-base`: `address`,
//!   [`config`], `error`, `deadline`, `watchdog`, `blocking`, `clock`,
//!   [`outbound`], `text` (outside text escaped for logs);
//! - data: `storage`, the crate `burrow-storage` (the instance store, the
//!   index of marks, instance databases, their tables and SQL sandbox),
//!   which stands on `burrow-base` alone, `inspect` (read-only
//!   views), `connections` (client connections and their events),
//!   `presence` (leases of background work), [`manifest`];
//! - the instance: `instance/*`, the store's data, modes, guest output and
//!   the commit stage every transaction ends in;
//! - capabilities: `capability/*`, the host side of each WIT interface, and
//!   `definition`, components loaded and pre-instantiated;
//! - cells: `cell/*`, an awake instance and the transaction around every
//!   call into it, and `directory`, live instances, one call at a time each;
//! - the runtime core: `runtime/*`, running an operation in a cell, making
//!   room, the reaper, conflict retries;
//! - background work: `background/*`, queue pumps, workflow drivers,
//!   schedule runs, waiting senders, the timer;
//! - the public host: [`host`] ([`Host`]), with [`queue`] and [`workflow`]
//!   naming what its API shows;
//! - front ends: [`http`], [`client`], [`cli`], and `fuzzing` (with the
//!   `fuzzing` feature, for the fuzz targets).
//!
//! The benchmark workloads of `burrow bench` are not part of the library:
//! they are the crate `burrow-bench` (`bench/` at the root of the
//! repository), which reaches Burrow through this public API alone, and the
//! `burrow` binary (`cli/`) links both.
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

// The layers below this crate, under the names the modules here use: the
// leaves of crate `burrow-base` and the data layer, crate `burrow-storage`.
use burrow_base::{address, blocking, clock, deadline, error, text, watchdog};
pub use burrow_base::{config, outbound};
use burrow_storage as storage;

mod background;
mod bindings;
mod cache;
mod caller;
mod capability;
mod cell;
pub mod cli;
pub mod client;
mod connections;
mod definition;
mod directory;
mod engine;
pub mod export;
#[doc(hidden)]
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub mod host;
pub mod http;
mod inspect;
mod instance;
#[cfg(test)]
mod layers;
pub mod manifest;
mod metrics;
mod presence;
pub mod queue;
mod runtime;
pub mod tokens;
pub mod workflow;

pub use address::{validate_actor_name, validate_key};
pub use caller::{Caller, Identity, Role};
pub use config::{ActorOptions, HostConfig, Synchronous};
pub use definition::LoadError;
pub use error::{Divergence, Error};
pub use host::Host;
pub use host::{LogSyncs, SendOptions, SendOutcome};
pub use inspect::{Inspection, QueueView, TableDump, inspect as inspect_instance};
pub use queue::EventOutcome;
pub use runtime::{Deployed, Readiness, WorkflowCheck};
pub use storage::instance_path;
