//! W4: the queue. Uses the manifest's `mailer` actor.
//!
//! - End to end: 10,000 jobs sent one by one (each send commits on its
//!   own), processed while they arrive; jobs/s from the first send until
//!   the last job's processing committed.
//! - Drain: 10,000 jobs appended in one transaction, then drained; the
//!   time per processed event, to compare with one action call (W1).
//! - Send and wait: one job at a time on an idle queue, the sender waiting
//!   for its processing: append, processing and answer.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::{Latencies, micros, timed};
use burrow::SendOptions;
use burrow::config::HostConfig;
use burrow::host::Host;
use burrow::manifest::ActorSpec;

const ACTOR: &str = "mailer";

fn payload(i: usize) -> String {
    json!({ "email": format!("user{i}@example.com") }).to_string()
}

/// Waits until the queue of `key` is empty.
async fn drained(host: &Host, key: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    while host.queue(ACTOR, key)?.pending_count > 0 {
        if Instant::now() > deadline {
            bail!("the queue of {ACTOR}/{key} did not drain within 10 minutes");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

pub(super) async fn run(config: HostConfig, spec: &ActorSpec, jobs: usize) -> Result<Value> {
    let host = Host::start(config, std::slice::from_ref(spec)).await?;
    let wait = SendOptions {
        wait: Some(Duration::from_secs(600)),
        ..SendOptions::default()
    };

    // End to end: one send per job, processed as they come.
    host.send(ACTOR, "w4", "welcome", &payload(0), wait.clone())
        .await?;
    let begun = Instant::now();
    for i in 1..jobs {
        host.send(ACTOR, "w4", "welcome", &payload(i), SendOptions::default())
            .await?;
    }
    let sent = begun.elapsed();
    host.send(ACTOR, "w4", "welcome", &payload(jobs), wait.clone())
        .await?;
    let total = begun.elapsed();

    // Drain: all jobs appended in one transaction, then processed.
    let emails: Vec<String> = (0..jobs).map(|i| format!("user{i}@example.com")).collect();
    let args = json!([emails]).to_string();
    host.call(ACTOR, "w4-drain", "sent", "[]").await?;
    let appended = Instant::now();
    host.call(ACTOR, "w4-drain", "enqueue_many", &args).await?;
    let append_time = appended.elapsed();
    let draining = Instant::now();
    drained(&host, "w4-drain").await?;
    let drain = draining.elapsed();

    // One job at a time, the sender waiting.
    let round_trips: Latencies = timed(1000, async |i| {
        host.send(ACTOR, "w4-wait", "welcome", &payload(i), wait.clone())
            .await?;
        Ok(())
    })
    .await?;
    host.shutdown().await;

    let per_sec = |n: usize, d: Duration| (n as f64 / d.as_secs_f64()).round();
    Ok(json!({
        "jobs": jobs,
        "end_to_end_jobs_per_sec": per_sec(jobs, total),
        "sends_per_sec": per_sec(jobs, sent),
        "batch_append_ms": micros(append_time) / 1000.0,
        "drain_jobs_per_sec": per_sec(jobs, drain),
        "process_us_per_event": micros(drain / jobs as u32),
        "send_and_wait": round_trips.to_json(),
    }))
}
