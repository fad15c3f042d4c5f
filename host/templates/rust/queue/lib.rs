//! A job queue: `enqueue(text)` appends a job to the instance's durable
//! queue and returns at once; `process` does one job in the transaction
//! that deletes it, so a crash neither loses a job nor does one twice;
//! `processed()` counts the jobs done.
//!
//! `burrow send {{name}} my-key job '{"text": "hello"}' --wait`, and
//! `burrow queue {{name}} my-key` for what waits.

use burrow_sdk::queue::{self, Event, Policy};
use burrow_sdk::{Result, db, log};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Job {
    text: String,
}

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS done (
             job INTEGER PRIMARY KEY,
             result TEXT NOT NULL
         );",
    )?;
    Ok(())
}

/// Queues a job; returns its id.
fn enqueue(text: String) -> Result<u64> {
    queue::append("job", &Job { text })
}

fn process(event: Event) -> Result<String> {
    let job: Job = event.payload()?;
    log::info(format!("doing job {}", event.id));
    let result = job.text.to_uppercase();
    db::execute(
        "INSERT INTO done (job, result) VALUES (?, ?)",
        (event.id as i64, result.as_str()),
    )?;
    Ok(result)
}

/// How many jobs were done.
fn processed() -> Result<i64> {
    db::query_one("SELECT count(*) FROM done", ())?.get(0)
}

burrow_sdk::actor! {
    migrate: migrate,
    queue: { policy: Policy::fifo(), process: process },
    actions: [enqueue, processed],
}
