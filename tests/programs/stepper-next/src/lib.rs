//! The next version of `examples/stepper`, for the deploy tests: the same
//! steps, but the step after the rest adds 100 (so a test sees which code
//! ran it), an action `version` that says 2, and, for an input with
//! `"rename": true` (which the stepper ignores), the rest renamed `pause`:
//! a workflow that slept as `rest` under the stepper diverges here.

use std::time::Duration;

use burrow_sdk::workflow::{self, Ctx};
use burrow_sdk::{Result, db};
use serde::Deserialize;

#[derive(Deserialize)]
struct Plan {
    steps: u32,
    #[serde(default)]
    then_sleep_ms: Option<u64>,
    #[serde(default)]
    rename: bool,
}

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
         INSERT OR IGNORE INTO counter VALUES (1, 0);",
    )?;
    Ok(())
}

fn add(amount: i64) -> Result<i64> {
    db::execute(
        "UPDATE counter SET value = value + ? WHERE id = 1",
        [amount],
    )?;
    count()
}

fn run(ctx: &mut Ctx, plan: Plan) -> workflow::Result<i64> {
    let mut last = 0;
    for i in 0..plan.steps {
        last = ctx.step(&format!("step-{i}"), || add(1))?;
    }
    if let Some(ms) = plan.then_sleep_ms {
        let rest = if plan.rename { "pause" } else { "rest" };
        ctx.sleep(rest, Duration::from_millis(ms))?;
        last = ctx.step("after-rest", || add(100))?;
    }
    Ok(last)
}

fn count() -> Result<i64> {
    db::query_one("SELECT value FROM counter WHERE id = 1", ())?.get(0)
}

fn version() -> Result<i64> {
    Ok(2)
}

burrow_sdk::actor! {
    migrate: migrate,
    workflow: run,
    actions: [count, version],
}
