//! The welcome-email job queue, without the loss.
//!
//! `enqueue(email)` appends a job to the instance's durable queue; it exists
//! once the call returns. `process` sends one welcome email and records it
//! in the `sent` table in the same transaction that deletes the job, so a
//! crash at any point neither loses a job nor records a send twice. (Burrow
//! actors have no network: "sending" writes to the `sent` table, which a
//! delivery service would read.) Jobs still waiting show in
//! `burrow queue mailer KEY`.

use burrow_sdk::queue::{self, Event, Policy};
use burrow_sdk::{Result, db, log};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Welcome {
    email: String,
}

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS sent (
             id INTEGER PRIMARY KEY AUTOINCREMENT,
             job INTEGER NOT NULL UNIQUE,
             email TEXT NOT NULL,
             attempt INTEGER NOT NULL
         );",
    )?;
    Ok(())
}

/// Queues a welcome email; returns the job's id.
fn enqueue(email: String) -> Result<u64> {
    queue::append("welcome", &Welcome { email })
}

/// Queues a welcome email for each address, in one transaction.
fn enqueue_many(emails: Vec<String>) -> Result<usize> {
    for email in &emails {
        queue::append(
            "welcome",
            &Welcome {
                email: email.clone(),
            },
        )?;
    }
    Ok(emails.len())
}

fn process(event: Event) -> Result<String> {
    let job: Welcome = event.payload()?;
    log::info(format!("sending welcome email to {}", job.email));
    db::execute(
        "INSERT INTO sent (job, email, attempt) VALUES (?, ?, ?)",
        (event.id as i64, job.email.as_str(), event.attempt),
    )?;
    Ok(format!("sent to {}", job.email))
}

/// Emails sent so far, in order.
fn sent() -> Result<Vec<String>> {
    db::query("SELECT email FROM sent ORDER BY id", ())?
        .iter()
        .map(|row| row.get(0))
        .collect()
}

burrow_sdk::actor! {
    migrate: migrate,
    queue: { policy: Policy::fifo(), process: process },
    actions: [enqueue, enqueue_many, sent],
}
