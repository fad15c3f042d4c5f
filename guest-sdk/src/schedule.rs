//! Actions to run later.
//!
//! A schedule is written in the current call's transaction (it exists once
//! that call commits, and not at all if it rolls back) and runs its action
//! once, in a transaction of its own, at or after its time: across sleep,
//! eviction, restarts and crashes. A schedule due while the host was down
//! runs once the host is back.
//!
//! ```no_run
//! use burrow_sdk::{schedule, Result};
//!
//! fn remind(text: String, delay_ms: u64) -> Result<u64> {
//!     schedule::after(delay_ms, "fire", &(text,))
//! }
//!
//! fn fire(text: String) -> Result<()> {
//!     burrow_sdk::log::info(format!("reminder: {text}"));
//!     Ok(())
//! }
//!
//! burrow_sdk::actor! { actions: [remind, fire] }
//! ```
//!
//! If the action fails, it is not run again: its error goes to the host's
//! log and the schedule is gone. A recurring schedule ([`every`]) runs at
//! each interval until it is cancelled, whether its runs succeed or fail.

use serde::Serialize;

use crate::wit::burrow::actor::schedule as wit;
use crate::{Error, Result};

/// Why a schedule was refused, as reported by the host.
pub type ScheduleError = wit::ScheduleError;

/// A pending schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled {
    /// Unique within the instance.
    pub id: u64,
    /// The action it runs.
    pub action: String,
    /// The action's arguments, a JSON array as text.
    pub args: String,
    /// When it is due (next), in milliseconds since the Unix epoch.
    pub at: i64,
    /// For a recurring schedule, its interval in milliseconds.
    pub every_ms: Option<u64>,
}

/// Runs `action` with `args` (serialized as a JSON array: a tuple such as
/// `&(1, "a")`, or `&()` for none) `delay_ms` milliseconds from now;
/// returns the schedule's id.
pub fn after<A: Serialize + ?Sized>(delay_ms: u64, action: &str, args: &A) -> Result<u64> {
    let args = encode_args(args)?;
    Ok(wit::after(delay_ms, action, &args)?)
}

/// Runs `action` with `args` at `at_ms` (milliseconds since the Unix
/// epoch); a time in the past runs as soon as possible.
pub fn at<A: Serialize + ?Sized>(at_ms: i64, action: &str, args: &A) -> Result<u64> {
    let args = encode_args(args)?;
    Ok(wit::at(at_ms, action, &args)?)
}

/// Runs `action` with `args` every `interval_ms` milliseconds (at least
/// 100), the first time `interval_ms` from now, until [`cancel`]led; returns
/// the schedule's id. Each run is a transaction of its own; runs missed
/// while the host was down collapse into one, and the times keep their
/// phase.
pub fn every<A: Serialize + ?Sized>(interval_ms: u64, action: &str, args: &A) -> Result<u64> {
    let args = encode_args(args)?;
    Ok(wit::every(interval_ms, action, &args)?)
}

/// The pending schedules, soonest first.
pub fn list() -> Result<Vec<Scheduled>> {
    Ok(wit::pending()?
        .into_iter()
        .map(|s| Scheduled {
            id: s.id,
            action: s.action,
            args: s.args,
            at: s.at,
            every_ms: s.every_ms,
        })
        .collect())
}

/// Cancels schedule `id`; returns whether it was pending.
pub fn cancel(id: u64) -> Result<bool> {
    Ok(wit::cancel(id)?)
}

/// Encodes action arguments: a tuple or a sequence becomes a JSON array,
/// and `()` becomes the empty array.
pub(crate) fn encode_args<A: Serialize + ?Sized>(args: &A) -> Result<String> {
    match serde_json::to_value(args)? {
        serde_json::Value::Null => Ok("[]".into()),
        value @ serde_json::Value::Array(_) => Ok(value.to_string()),
        _ => Err(Error::new(
            "invalid-arguments",
            "action arguments must serialize as a JSON array: pass a tuple such as `&(1,)`",
        )),
    }
}

impl From<ScheduleError> for Error {
    fn from(e: ScheduleError) -> Self {
        let message = match e {
            ScheduleError::NotInStep(m) => return Error::new("not-in-step", m),
            ScheduleError::Full(limit) => {
                format!("the instance has {limit} pending schedules, the most it may have")
            }
            ScheduleError::Invalid(m) | ScheduleError::NotAllowed(m) => m,
        };
        Error::new("schedule", message)
    }
}
