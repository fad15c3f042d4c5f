//! Alerts: lower priority values go first, and a custom selector prefers
//! the alert type this instance was created for, whatever its priority.
//! The selector is the actor's own code, so it works the same after a
//! restart.
//!
//! ```text
//! burrow create alerts ops '{"prefer": "disk.full"}'
//! burrow send alerts ops cpu.high '{"host": "a"}' --priority 5
//! burrow send alerts ops disk.full '{"host": "b"}' --priority 9
//! burrow call alerts ops raise '[[{"type": "cpu.high", "priority": 1}, {"type": "disk.full", "priority": 9}]]'
//! burrow call alerts ops handled
//! ```

use burrow_sdk::queue::{self, Event, Options, Policy};
use burrow_sdk::{Result, db, state};
use serde::{Deserialize, Serialize};

#[derive(Default, Serialize, Deserialize)]
struct Config {
    /// The alert type handled before any other.
    prefer: Option<String>,
}

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS handled (
             seq INTEGER PRIMARY KEY AUTOINCREMENT,
             type TEXT NOT NULL,
             priority INTEGER NOT NULL,
             payload TEXT NOT NULL
         );",
    )?;
    Ok(())
}

fn create(config: Option<Config>) -> Result<()> {
    state::set(&config.unwrap_or_default())
}

/// Picks the oldest alert of the preferred type; otherwise the first of the
/// pending alerts, which come in priority order.
fn select(pending: &[Event]) -> Vec<u64> {
    let config: Config = state::get_or_default().unwrap_or_default();
    let preferred = config
        .prefer
        .as_deref()
        .and_then(|kind| pending.iter().find(|e| e.event_type == kind));
    preferred
        .or(pending.first())
        .map(|e| e.id)
        .into_iter()
        .collect()
}

fn process(event: Event) -> Result<()> {
    db::execute(
        "INSERT INTO handled (type, priority, payload) VALUES (?, ?, ?)",
        (
            event.event_type.as_str(),
            event.priority,
            event.payload_json.as_str(),
        ),
    )?;
    Ok(())
}

/// An alert to raise.
#[derive(Serialize, Deserialize)]
struct Alert {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    priority: i32,
    #[serde(default)]
    details: burrow_sdk::Json,
}

/// Raises several alerts at once (they are queued together, in one
/// transaction); returns their ids.
fn raise(alerts: Vec<Alert>) -> Result<Vec<u64>> {
    alerts
        .into_iter()
        .map(|alert| {
            let options = Options {
                priority: alert.priority,
                group: None,
            };
            queue::append_with(&alert.kind, &alert.details, options)
        })
        .collect()
}

/// The alert types handled so far, in order.
fn handled() -> Result<Vec<String>> {
    db::query("SELECT type FROM handled ORDER BY seq", ())?
        .iter()
        .map(|row| row.get(0))
        .collect()
}

burrow_sdk::actor! {
    migrate: migrate,
    create: create,
    queue: { policy: Policy::custom(), process: process, select: select },
    actions: [raise, handled],
}
