//! A workflow: created with `{"steps": N}`, it counts to N, one durable step
//! per increment (each commits its row and its history entry together),
//! sleeps a moment durably, then counts once more. Kill the host at any
//! point: it resumes where it was, and the count ends at exactly N + 1.
//!
//! `burrow create {{name}} my-key '{"steps": 3}'`, then
//! `burrow inspect {{name}} my-key --history` and `burrow call {{name}} my-key count`.

use std::time::Duration;

use burrow_sdk::workflow::{self, Ctx};
use burrow_sdk::{Result, db};
use serde::Deserialize;

#[derive(Deserialize)]
struct Plan {
    steps: u32,
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

fn run(ctx: &mut Ctx, plan: Plan) -> workflow::Result<i64> {
    for i in 0..plan.steps {
        ctx.step(&format!("count-{i}"), increment)?;
    }
    ctx.sleep("rest", Duration::from_millis(100))?;
    ctx.step("after-rest", increment)
}

/// The count so far, readable while the workflow runs.
fn count() -> Result<i64> {
    db::query_one("SELECT value FROM counter WHERE id = 1", ())?.get(0)
}

burrow_sdk::actor! {
    migrate: migrate,
    workflow: run,
    actions: [count],
}
