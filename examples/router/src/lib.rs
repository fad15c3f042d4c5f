//! The router: incoming messages go into per-topic inboxes, strictly in the
//! order they arrived (`fifo`, one at a time).
//!
//! ```text
//! burrow send router main message '{"topic": "billing", "text": "refund #12"}'
//! burrow call router main inbox '["billing"]'
//! ```

use burrow_sdk::queue::{Event, Policy};
use burrow_sdk::{Error, Result, db};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Message {
    topic: String,
    text: String,
}

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS inbox (
             seq INTEGER PRIMARY KEY AUTOINCREMENT,
             topic TEXT NOT NULL,
             text TEXT NOT NULL
         );
         CREATE INDEX IF NOT EXISTS inbox_topic ON inbox (topic, seq);",
    )?;
    Ok(())
}

fn process(event: Event) -> Result<i64> {
    if event.event_type != "message" {
        return Err(Error::new(
            "unknown-event",
            format!(
                "the router takes `message` events, not `{}`",
                event.event_type
            ),
        ));
    }
    let message: Message = event.payload()?;
    if message.topic.is_empty() {
        return Err(Error::new("invalid-message", "the topic is empty"));
    }
    let changed = db::query(
        "INSERT INTO inbox (topic, text) VALUES (?, ?) RETURNING seq",
        (message.topic, message.text),
    )?;
    changed.first().map_or(Ok(0), |row| row.get(0))
}

/// The messages of `topic`, oldest first.
fn inbox(topic: String) -> Result<Vec<String>> {
    db::query(
        "SELECT text FROM inbox WHERE topic = ? ORDER BY seq",
        [topic],
    )?
    .iter()
    .map(|row| row.get(0))
    .collect()
}

burrow_sdk::actor! {
    migrate: migrate,
    queue: { policy: Policy::fifo().concurrency(1), process: process },
    actions: [inbox],
}
