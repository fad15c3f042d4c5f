//! What every layer of Burrow stands on, and names nothing above it: an
//! instance's address, the host's configuration and limits, its errors,
//! the call's deadline and the watchdog that enforces it in SQLite, the
//! clock, the hand-off of blocking work, the outgoing HTTP address rules
//! and the escaping of outside text.
//!
//! The library `burrow` (crate `burrow-host`) shows `config`, `outbound`
//! and the errors as its own public modules; storage (crate
//! `burrow-storage`) stands on this crate alone.

pub mod address;
pub mod blocking;
pub mod clock;
pub mod config;
pub mod deadline;
pub mod error;
pub mod outbound;
pub mod text;
pub mod watchdog;
