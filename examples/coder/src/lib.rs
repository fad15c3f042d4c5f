//! The coder: works through tasks one at a time, in the order they came
//! (`fifo`, concurrency 1, which keeps its transcript in order), and keeps
//! a transcript of what it did.
//!
//! ```text
//! burrow send coder main task '{"title": "add login", "files": ["auth.rs", "main.rs"]}' --wait
//! burrow call coder main transcript
//! ```

use burrow_sdk::queue::{Event, Policy};
use burrow_sdk::{Result, db};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Task {
    title: String,
    #[serde(default)]
    files: Vec<String>,
}

#[derive(Serialize)]
struct Done {
    step: i64,
    summary: String,
}

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS transcript (
             step INTEGER PRIMARY KEY AUTOINCREMENT,
             task INTEGER NOT NULL,
             summary TEXT NOT NULL
         );",
    )?;
    Ok(())
}

fn process(event: Event) -> Result<Done> {
    let task: Task = event.payload()?;
    let summary = match task.files.len() {
        0 => format!("planned `{}`", task.title),
        n => format!(
            "worked on `{}` across {n} file(s): {}",
            task.title,
            task.files.join(", ")
        ),
    };
    let step = db::query_one(
        "INSERT INTO transcript (task, summary) VALUES (?, ?) RETURNING step",
        (event.id as i64, summary.as_str()),
    )?
    .get(0)?;
    Ok(Done { step, summary })
}

/// Every step so far, in order.
fn transcript() -> Result<Vec<String>> {
    db::query("SELECT summary FROM transcript ORDER BY step", ())?
        .iter()
        .map(|row| row.get(0))
        .collect()
}

burrow_sdk::actor! {
    migrate: migrate,
    queue: { policy: Policy::fifo().concurrency(1), process: process },
    actions: [transcript],
}
