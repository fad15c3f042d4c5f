//! The durable queue: events appended to an instance, picked by the
//! instance's policy, processed one transaction each, deleted only when
//! their processing commits, retried with backoff, and dead-lettered after
//! too many failures.
//!
//! The queue's data (its events, policies and their SQL) lives in
//! [`crate::storage::queue`]; [`pump`] drives the processing of one
//! instance; [`waiters`] holds the senders that wait for their event's
//! outcome.

pub(crate) mod api;
pub(crate) mod pump;
pub(crate) mod waiters;

pub use crate::storage::queue::{DeadLetter, NewEvent, QueueMode, QueuePolicy, QueuedEvent};
