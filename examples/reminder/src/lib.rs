//! Reminders by schedule.
//!
//! `remind(text, delay_ms)` and `remind_at(text, at_ms)` schedule the
//! action `fire` with the text and the due time as its arguments; the
//! schedule exists once the call commits. At or after its time the host
//! runs `fire` and deletes the schedule in one transaction, so a reminder
//! that fired is recorded in the `fired` table exactly once, even if the
//! host was down when it fell due (it then fires once the host is back).
//! `pending` lists the reminders still to come (from the schedules
//! themselves), `cancel` drops one, and each firing is broadcast as the
//! event `reminder` to the connected clients (`burrow watch reminder KEY`).
//! `fire` is internal: only the schedules (and the actor's own code) may
//! run it; a client or another actor that calls it is answered as for an
//! action the actor does not have.

use std::time::{SystemTime, UNIX_EPOCH};

use burrow_sdk::{Error, Result, db, events, schedule};
use serde::Serialize;
use serde_json::json;

/// The scheduled action.
const FIRE: &str = "fire";

/// A reminder still to come.
#[derive(Serialize)]
struct Pending {
    /// The schedule's id, for `cancel`.
    id: u64,
    text: String,
    /// When it is due, in milliseconds since the Unix epoch.
    at: i64,
}

/// A reminder that fired.
#[derive(Serialize)]
struct Fired {
    text: String,
    /// When it was due, in milliseconds since the Unix epoch.
    due: i64,
    /// When it fired, in milliseconds since the Unix epoch.
    fired_at: i64,
}

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS fired (
             id INTEGER PRIMARY KEY,
             text TEXT NOT NULL,
             due INTEGER NOT NULL,
             fired_at INTEGER NOT NULL
         );",
    )?;
    Ok(())
}

/// Reminds of `text` in `delay_ms` milliseconds; returns the reminder's id.
fn remind(text: String, delay_ms: u64) -> Result<u64> {
    let delay = i64::try_from(delay_ms).unwrap_or(i64::MAX);
    remind_at(text, now_ms()?.saturating_add(delay))
}

/// Reminds of `text` at `at_ms` (milliseconds since the Unix epoch; a time
/// in the past fires as soon as possible); returns the reminder's id.
fn remind_at(text: String, at_ms: i64) -> Result<u64> {
    check_text(&text)?;
    schedule::at(at_ms, FIRE, &(text, at_ms))
}

/// The reminders still to come, soonest first.
fn pending() -> Result<Vec<Pending>> {
    schedule::list()?
        .into_iter()
        .filter(|s| s.action == FIRE)
        .map(|s| {
            let (text, _due): (String, i64) = serde_json::from_str(&s.args)?;
            Ok(Pending {
                id: s.id,
                text,
                at: s.at,
            })
        })
        .collect()
}

/// Cancels reminder `id`; returns whether it was still to come.
fn cancel(id: u64) -> Result<bool> {
    schedule::cancel(id)
}

/// The reminders that fired, oldest first.
fn fired() -> Result<Vec<Fired>> {
    db::query("SELECT text, due, fired_at FROM fired ORDER BY id", ())?
        .iter()
        .map(|row| {
            Ok(Fired {
                text: row.get(0)?,
                due: row.get(1)?,
                fired_at: row.get(2)?,
            })
        })
        .collect()
}

/// The scheduled action: records the reminder and tells the connected
/// clients. Its write and the deletion of its schedule commit together.
fn fire(text: String, due: i64) -> Result<()> {
    check_text(&text)?;
    db::execute(
        "INSERT INTO fired (text, due, fired_at) VALUES (?, ?, ?)",
        (text.as_str(), due, now_ms()?),
    )?;
    events::broadcast("reminder", &json!({ "text": text, "due": due }))
}

fn check_text(text: &str) -> Result<()> {
    if text.trim().is_empty() {
        return Err(Error::new("empty-reminder", "the reminder has no text"));
    }
    Ok(())
}

fn now_ms() -> Result<i64> {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| Error::new("clock", format!("the clock is before 1970: {e}")))?;
    i64::try_from(since_epoch.as_millis())
        .map_err(|_| Error::new("clock", "the clock is out of range"))
}

burrow_sdk::actor! {
    migrate: migrate,
    actions: [remind, remind_at, pending, cancel, fired, fire],
    internal(from_actors = false): [fire],
}
