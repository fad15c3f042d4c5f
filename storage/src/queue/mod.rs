//! The queue's data: its events and policies as the host and its API see
//! them, and (in `sql`) the tables of an instance database that hold them.
//!
//! `_burrow_queue` holds pending events (an event in flight is still
//! pending: it is deleted by the transaction that commits its processing).
//! `_burrow_dead_letter` holds events that failed too often.
//! `_burrow_queue_policy` holds the policy recorded at creation.

mod sql;

use std::time::Duration;

use serde::Serialize;

pub use sql::*;

/// How an instance picks its next events. Every mode takes lower priority
/// values first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueMode {
    /// Oldest first.
    Fifo,
    /// Newest first.
    Lifo,
    /// At random.
    Random,
    /// The guest's `select` export picks.
    Custom,
}

impl QueueMode {
    pub fn as_str(self) -> &'static str {
        match self {
            QueueMode::Fifo => "fifo",
            QueueMode::Lifo => "lifo",
            QueueMode::Random => "random",
            QueueMode::Custom => "custom",
        }
    }

    pub fn parse(text: &str) -> Option<QueueMode> {
        Some(match text {
            "fifo" => QueueMode::Fifo,
            "lifo" => QueueMode::Lifo,
            "random" => QueueMode::Random,
            "custom" => QueueMode::Custom,
            _ => return None,
        })
    }
}

/// An instance's queue policy, recorded when it was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QueuePolicy {
    /// How events are picked.
    pub mode: QueueMode,
    /// Most `process` calls in flight per group; `None` is unlimited.
    pub concurrency: Option<u32>,
}

impl QueuePolicy {
    /// How many events of one group may be in flight at once.
    pub fn per_group(&self) -> usize {
        self.concurrency.map_or(usize::MAX, |n| n as usize)
    }
}

/// An event waiting in a queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueuedEvent {
    /// Unique within the instance.
    pub id: i64,
    /// The sender's event type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// The payload, JSON text.
    #[serde(serialize_with = "burrow_client::EventResult::write_json")]
    pub payload: String,
    /// Lower values first.
    pub priority: i32,
    /// The group, `None` for the default group.
    pub group: Option<String>,
    /// When it was appended, ms since the Unix epoch.
    pub created_at: i64,
    /// Failed attempts so far.
    pub attempts: u32,
    /// Not processed before this time (ms since the Unix epoch); 0 for a
    /// new event.
    pub not_before: i64,
    /// The error of the last failed attempt.
    pub last_error: Option<String>,
}

/// An event that failed too many times.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeadLetter {
    /// The event's id, kept from the queue.
    pub id: i64,
    /// The sender's event type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// The payload, JSON text.
    #[serde(serialize_with = "burrow_client::EventResult::write_json")]
    pub payload: String,
    /// Its priority.
    pub priority: i32,
    /// Its group.
    pub group: Option<String>,
    /// When it was appended.
    pub created_at: i64,
    /// Failed attempts.
    pub attempts: u32,
    /// When it was dead-lettered.
    pub failed_at: i64,
    /// The error of the last attempt.
    pub error: String,
}

/// An event to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// The event type: 1 to 256 bytes.
    pub event_type: String,
    /// The payload, JSON text.
    pub payload: String,
    /// Lower values first.
    pub priority: i32,
    /// The group; `None` (or an empty name) is the default group.
    pub group: Option<String>,
}

/// The wait before attempt `failed + 1`, after `failed` failed attempts:
/// `base * 2^(failed - 1)`, at most `cap`.
pub fn retry_delay(base: Duration, cap: Duration, failed: u32) -> Duration {
    let doublings = failed.saturating_sub(1).min(32);
    base.saturating_mul(1u32 << doublings.min(31)).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_exponentially_up_to_the_cap() {
        let (base, cap) = (Duration::from_secs(1), Duration::from_secs(60));
        let delays: Vec<u64> = (1..=9)
            .map(|n| retry_delay(base, cap, n).as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(retry_delay(base, cap, 1000), cap);
    }

    #[test]
    fn modes_round_trip_through_their_names() {
        for mode in [
            QueueMode::Fifo,
            QueueMode::Lifo,
            QueueMode::Random,
            QueueMode::Custom,
        ] {
            assert_eq!(QueueMode::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(QueueMode::parse("stack"), None);
    }
}
