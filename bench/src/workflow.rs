//! W5: workflows. Uses the manifest's `stepper` actor (and, for the
//! languages side by side, `stepper-py` and `stepper-js`).
//!
//! - Steps: one workflow of N sequential steps (1,000 by default), each
//!   incrementing a counter in the instance's database and committing with
//!   its history entry; steps/s and µs per step, from the creation until
//!   the workflow completed, to compare with one action call (W1).
//! - Resume: the same workflow, then a durable sleep; the host stops while
//!   it sleeps and starts again once the sleep is over. Time from the start
//!   of the new host until the workflow completed: waking the instance and
//!   replaying its N recorded steps, then one more step.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::{Value, json};

use burrow::config::HostConfig;
use burrow::host::Host;
use burrow::manifest::ActorSpec;
use burrow::workflow::WorkflowStatus;

/// Waits until the workflow of `key` finished; fails unless it completed.
pub(super) async fn completed(host: &Host, actor: &str, key: &str) -> Result<()> {
    let begun = Instant::now();
    let deadline = begun + Duration::from_secs(600);
    loop {
        // The record alone, off the async workers that run the instances.
        let record = {
            let (host, actor, key) = (host.clone(), actor.to_owned(), key.to_owned());
            let read = move || anyhow::Ok(host.workflow_record(&actor, &key)?);
            tokio::task::spawn_blocking(read).await??
        };
        match record.status {
            WorkflowStatus::Completed => return Ok(()),
            status if status.is_final() => {
                bail!(
                    "the workflow of {actor}/{key} ended as {status:?}: {:?}",
                    record.error
                )
            }
            _ => {}
        }
        if Instant::now() > deadline {
            bail!("the workflow of {actor}/{key} did not finish within 10 minutes");
        }
        // Each look opens a read-only connection, and takes the two cores'
        // time from the workflows: every 2 ms, or a hundredth of the time
        // waited so far (at most 1% more than the workflow took).
        let pause =
            (begun.elapsed() / 100).clamp(Duration::from_millis(2), Duration::from_millis(50));
        tokio::time::sleep(pause).await;
    }
}

/// Runs W5 on the stepper `spec` (an actor of `examples/stepper`'s plan).
pub(super) async fn run(config: HostConfig, spec: &ActorSpec, steps: usize) -> Result<Value> {
    let actor = spec.name.as_str();
    let host = Host::start(config.clone(), std::slice::from_ref(spec)).await?;
    // Warm up: compile and load the component once.
    host.create(actor, "warm-up", &json!({"steps": 1}).to_string())
        .await?;
    completed(&host, actor, "warm-up").await?;

    let begun = Instant::now();
    host.create(actor, "w5", &json!({"steps": steps}).to_string())
        .await?;
    completed(&host, actor, "w5").await?;
    let elapsed = begun.elapsed();

    // Resume after a restart, with `steps` recorded steps to replay.
    let rest = Duration::from_millis(300);
    let plan = json!({"steps": steps, "then_sleep_ms": rest.as_millis() as u64});
    host.create(actor, "w5-resume", &plan.to_string()).await?;
    let deadline = Instant::now() + Duration::from_secs(600);
    while host.workflow(actor, "w5-resume")?.record.status != WorkflowStatus::Waiting {
        if Instant::now() > deadline {
            bail!("the resume workflow did not reach its sleep");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    host.shutdown().await;
    drop(host);
    tokio::time::sleep(rest).await;
    let restarted = Instant::now();
    let host = Host::start(config, std::slice::from_ref(spec)).await?;
    completed(&host, actor, "w5-resume").await?;
    let resume = restarted.elapsed();
    let count = host.call(actor, "w5-resume", "count", "[]").await?;
    host.shutdown().await;
    if count != (steps + 1).to_string() {
        bail!("the resumed workflow counted {count}, not {}", steps + 1);
    }

    let per_step = elapsed / steps as u32;
    Ok(json!({
        "steps": steps,
        "steps_per_sec": (steps as f64 / elapsed.as_secs_f64()).round(),
        "us_per_step": (per_step.as_secs_f64() * 1e7).round() / 10.0,
        "resume_ms_with_recorded_steps": (resume.as_secs_f64() * 1e4).round() / 10.0,
    }))
}
