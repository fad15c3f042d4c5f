//! The durable queue: events appended to an instance, picked by the
//! instance's policy, processed one transaction each, deleted only when
//! their processing commits, retried with backoff, and dead-lettered after
//! too many failures.
//!
//! This module names what the public API shows of it. The queue's data
//! (its events, policies and their SQL) lives in `storage`
//! (`HostTables`); the pump that processes an instance's events and the
//! senders waiting for an outcome in `background`; sending in `host`.

pub use crate::background::waiters::EventOutcome;
pub use crate::storage::{DeadLetter, NewEvent, QueueMode, QueuePolicy, QueuedEvent};
