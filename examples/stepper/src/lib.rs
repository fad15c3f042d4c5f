//! The smallest workflow: it counts to `steps`, one step per increment,
//! each committing its row and its history entry together, then (if asked)
//! sleeps durably and counts once more. Kill the host at any point: after a
//! restart it resumes by itself and the count ends exactly at `steps` (+1).
//!
//! With `post`, each step first POSTs its number to that URL (with the
//! step's idempotency key) and counts only once it is answered with 2xx:
//! the manifest must list the URL's authority in the actor's `http`.
//!
//! `burrow create stepper demo '{"steps": 100}'`, then
//! `burrow inspect stepper demo --history` and `burrow call stepper demo count`.
//! The benchmarks W5 and W8 use it.

use std::time::Duration;

use burrow_sdk::workflow::{self, Ctx};
use burrow_sdk::{Error, Result, db, http};
use serde::Deserialize;

#[derive(Deserialize)]
struct Plan {
    steps: u32,
    /// A durable sleep after the steps, then one more step.
    #[serde(default)]
    then_sleep_ms: Option<u64>,
    /// A URL each step POSTs to before it counts.
    #[serde(default)]
    post: Option<String>,
}

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
         INSERT OR IGNORE INTO counter VALUES (1, 0);",
    )?;
    Ok(())
}

fn increment() -> Result<i64> {
    db::execute("UPDATE counter SET value = value + 1 WHERE id = 1", ())?;
    count()
}

/// POSTs `i` to `url` with the step's key, then counts.
fn post_and_increment(url: &str, i: u32) -> Result<i64> {
    let key = workflow::step_key().unwrap_or_default();
    let answer = http::post(url)
        .idempotency_key(&key)
        .body(i.to_string())
        .send()?;
    if !answer.is_success() {
        return Err(Error::new(
            "declined",
            format!("{url} answered {}", answer.status),
        ));
    }
    increment()
}

fn run(ctx: &mut Ctx, plan: Plan) -> workflow::Result<i64> {
    let mut last = 0;
    for i in 0..plan.steps {
        let name = format!("step-{i}");
        last = match &plan.post {
            Some(url) => ctx.step(&name, || post_and_increment(url, i))?,
            None => ctx.step(&name, increment)?,
        };
    }
    if let Some(ms) = plan.then_sleep_ms {
        ctx.sleep("rest", Duration::from_millis(ms))?;
        last = ctx.step("after-rest", increment)?;
    }
    Ok(last)
}

/// The counter, readable while the workflow runs.
fn count() -> Result<i64> {
    db::query_one("SELECT value FROM counter WHERE id = 1", ())?.get(0)
}

burrow_sdk::actor! {
    migrate: migrate,
    workflow: run,
    actions: [count],
}
