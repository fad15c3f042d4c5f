//! When a pump could next pick an event, read from the committed queue
//! through the pump's reader: what the run loop waits for, and the queue
//! mark a pump leaves when it ends.

use std::time::Duration;

use rusqlite::Connection;

use super::Run;
use crate::error::Error;
use crate::storage::HostTables;

impl Run {
    /// When an event could next be picked, with nothing in flight and
    /// nothing started: `None` when the queue is empty; else the earliest
    /// retry (a group whose event waits for its retry holds its other
    /// events back), or a retry wait from now when due events were there
    /// but not taken (a custom selector declined them, picking failed).
    pub(super) fn next_pick_time(&self, now: i64) -> Result<Option<i64>, Error> {
        let retry_base = self.def.options.queue_retry_base;
        next_pick_time(self.reader(), now, Some(retry_base)).map_err(|e| self.storage(e))
    }
}

/// When an event of the queue read through `reader` could next be picked,
/// with nothing in flight: `None` for an empty queue or a paused instance
/// (its resume notes the queue again); the earliest event's
/// due time if it is in the future; else `now`, or, when due events were
/// not taken (`declined`, with the retry wait), the earliest retry or
/// `now + retry wait`, whichever comes first.
pub(super) fn next_pick_time(
    reader: &Connection,
    now: i64,
    declined: Option<Duration>,
) -> rusqlite::Result<Option<i64>> {
    if reader.pause().is_paused()? {
        return Ok(None);
    }
    let Some(due) = reader.queue().next_due()? else {
        return Ok(None);
    };
    if due > now {
        return Ok(Some(due));
    }
    let Some(retry_base) = declined else {
        return Ok(Some(now));
    };
    let later = now + retry_base.as_millis() as i64;
    let retry = retry_time_after(reader, now)?;
    Ok(Some(retry.map_or(later, |r| r.min(later))))
}

/// The earliest retry time after `now`, if any event waits for one.
fn retry_time_after(reader: &Connection, now: i64) -> rusqlite::Result<Option<i64>> {
    reader
        .prepare_cached("SELECT min(not_before) FROM main._burrow_queue WHERE not_before > ?")?
        .query_row([now], |r| r.get(0))
}
