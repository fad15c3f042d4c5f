//! The instance's durable queue: append events, and process them one
//! transaction each.
//!
//! An actor with a queue declares its policy and its `process` function in
//! [`actor!`](crate::actor):
//!
//! ```no_run
//! use burrow_sdk::queue::{Event, Policy};
//! use burrow_sdk::Result;
//!
//! fn process(event: Event) -> Result<()> {
//!     let email: String = event.payload()?;
//!     burrow_sdk::log::info(format!("welcome, {email}"));
//!     Ok(())
//! }
//!
//! fn enqueue(email: String) -> Result<u64> {
//!     burrow_sdk::queue::append("welcome", &email)
//! }
//!
//! burrow_sdk::actor! {
//!     queue: { policy: Policy::fifo(), process: process },
//!     actions: [enqueue],
//! }
//! ```
//!
//! `process` runs in one transaction that also deletes the event: if it
//! returns `Ok`, its writes and the deletion commit together; if it returns
//! an error (or panics), everything is rolled back and the event is retried
//! later, with backoff, until the host moves it to the dead-letter table.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::wit::burrow::actor::queue as wit;
use crate::wit::exports::burrow::actor::processor::{QueueMode, QueuePolicy};
use crate::{Error, Result};

/// Why an event could not be appended, as reported by the host.
pub type QueueError = wit::QueueError;

/// One queued event, as `process` and `select` see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Unique within the instance.
    pub id: u64,
    /// The sender's event type.
    pub event_type: String,
    /// The payload as JSON text; see [`Event::payload`].
    pub payload_json: String,
    /// Lower values are processed first.
    pub priority: i32,
    /// The event's group, `None` for the default group.
    pub group: Option<String>,
    /// When it was appended, in milliseconds since the Unix epoch.
    pub created_at: i64,
    /// 1 for the first attempt, 2 for the first retry, and so on.
    pub attempt: u32,
}

impl Event {
    /// Decodes the payload.
    pub fn payload<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_str(&self.payload_json).map_err(|e| {
            Error::new(
                "invalid-payload",
                format!("the payload of event {} does not decode: {e}", self.id),
            )
        })
    }
}

impl From<wit::Event> for Event {
    fn from(e: wit::Event) -> Self {
        Event {
            id: e.id,
            event_type: e.event_type,
            payload_json: e.payload,
            priority: e.priority,
            group: e.group,
            created_at: e.created_at,
            attempt: e.attempt,
        }
    }
}

/// How to append an event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Lower values are processed first.
    pub priority: i32,
    /// The event's group; events of one group share the policy's
    /// concurrency. `None` is the default group.
    pub group: Option<String>,
}

/// Appends an event to this instance's queue with priority 0 in the
/// default group; returns its id. The event exists once the current call
/// commits.
pub fn append<T: Serialize + ?Sized>(event_type: &str, payload: &T) -> Result<u64> {
    append_with(event_type, payload, Options::default())
}

/// Appends an event with a priority and a group; returns its id.
pub fn append_with<T: Serialize + ?Sized>(
    event_type: &str,
    payload: &T,
    options: Options,
) -> Result<u64> {
    let payload = serde_json::to_string(payload)?;
    let options = wit::AppendOptions {
        priority: options.priority,
        group: options.group,
    };
    Ok(wit::append(event_type, &payload, &options)?)
}

impl From<QueueError> for Error {
    fn from(e: QueueError) -> Self {
        let message = match e {
            QueueError::NotInStep(m) => return Error::new("not-in-step", m),
            QueueError::TooLarge(limit) => {
                format!("the payload is over the limit of {limit} bytes")
            }
            QueueError::Full(limit) => format!("the queue is full ({limit} pending events)"),
            QueueError::Invalid(m) | QueueError::NotAllowed(m) => m,
        };
        Error::new("queue", message)
    }
}

/// How pending events are picked, and how many are processed at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    mode: QueueMode,
    concurrency: Option<u32>,
}

impl Policy {
    fn new(mode: QueueMode) -> Self {
        Policy {
            mode,
            concurrency: Some(1),
        }
    }

    /// Lowest priority value first, then oldest first. One at a time.
    pub fn fifo() -> Self {
        Policy::new(QueueMode::Fifo)
    }

    /// Lowest priority value first, then newest first. One at a time.
    pub fn lifo() -> Self {
        Policy::new(QueueMode::Lifo)
    }

    /// Lowest priority value first, then at random. One at a time.
    pub fn random() -> Self {
        Policy::new(QueueMode::Random)
    }

    /// The actor's `select` function picks among the pending events.
    pub fn custom() -> Self {
        Policy::new(QueueMode::Custom)
    }

    /// At most `n` (at least 1) `process` calls in flight per group.
    pub fn concurrency(self, n: u32) -> Self {
        Policy {
            concurrency: Some(n),
            ..self
        }
    }

    /// No limit of `process` calls in flight per group (the host still
    /// caps calls per instance).
    pub fn unlimited(self) -> Self {
        Policy {
            concurrency: None,
            ..self
        }
    }
}

#[doc(hidden)]
pub fn __policy(policy: Policy) -> QueuePolicy {
    QueuePolicy {
        mode: policy.mode,
        concurrency: policy.concurrency,
    }
}

#[doc(hidden)]
pub fn __process<R: Serialize>(
    f: impl Fn(Event) -> Result<R>,
    event: wit::Event,
) -> std::result::Result<String, crate::wit::burrow::actor::types::Failure> {
    let result = f(event.into()).map_err(crate::wit::burrow::actor::types::Failure::from)?;
    serde_json::to_string(&result).map_err(|e| {
        Error::new(
            "json",
            format!("the result could not be encoded as JSON: {e}"),
        )
        .into()
    })
}

#[doc(hidden)]
pub fn __select(f: impl Fn(&[Event]) -> Vec<u64>, events: Vec<wit::Event>) -> Vec<u64> {
    let events: Vec<Event> = events.into_iter().map(Event::from).collect();
    f(&events)
}
