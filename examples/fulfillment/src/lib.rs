//! An order workflow with a join and a race. It asks two carriers for a
//! quote at once (a join: both steps must finish), keeps the cheaper one,
//! then races an `approve` event on the instance's queue against a
//! deadline: approved orders ship, the others are cancelled. Whichever
//! branch finishes first wins; the winner is recorded, so a replay after a
//! crash takes the same path, and the losing branch's wait is dropped.
//!
//! `burrow create fulfillment order-7 '{"weight_kg": 3, "approval_ms": 60000}'`,
//! then `burrow send fulfillment order-7 approve` (or let the deadline pass).

use std::time::Duration;

use burrow_sdk::workflow::{self, Branch, Ctx};
use burrow_sdk::{Result, db, state};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct Order {
    weight_kg: i64,
    /// How long to wait for an approval.
    approval_ms: u64,
}

#[derive(Clone, Serialize, Deserialize)]
struct Quote {
    carrier: String,
    cents: i64,
}

#[derive(Default, Serialize, Deserialize)]
struct Status {
    status: String,
    carrier: Option<String>,
    cents: Option<i64>,
}

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS quotes (carrier TEXT PRIMARY KEY, cents INTEGER NOT NULL);",
    )?;
    Ok(())
}

/// Stands in for a carrier's price list.
fn quote(carrier: &str, per_kg: i64, weight_kg: i64) -> Result<Quote> {
    let quote = Quote {
        carrier: carrier.into(),
        cents: 500 + per_kg * weight_kg,
    };
    db::execute(
        "INSERT OR REPLACE INTO quotes (carrier, cents) VALUES (?, ?)",
        (quote.carrier.as_str(), quote.cents),
    )?;
    Ok(quote)
}

fn run(ctx: &mut Ctx, order: Order) -> workflow::Result<Status> {
    let weight = order.weight_kg;
    let quotes = ctx.join(
        "quotes",
        vec![
            Box::new(move |ctx: &mut Ctx| ctx.step("quote-rail", || quote("rail", 120, weight)))
                as Branch<'_, Quote>,
            Box::new(move |ctx: &mut Ctx| ctx.step("quote-road", || quote("road", 150, weight))),
        ],
    )?;
    let best = quotes
        .into_iter()
        .min_by_key(|q| q.cents)
        .expect("two quotes");
    ctx.step("await-approval", || {
        state::set(&Status {
            status: "awaiting-approval".into(),
            carrier: Some(best.carrier.clone()),
            cents: Some(best.cents),
        })
    })?;
    let deadline = Duration::from_millis(order.approval_ms);
    let (_, approved) = ctx.race(
        "approval",
        vec![
            Box::new(|ctx: &mut Ctx| {
                ctx.next_event("approval", &["approve"], None)?;
                Ok(true)
            }) as Branch<'_, bool>,
            Box::new(move |ctx: &mut Ctx| {
                ctx.sleep("approval-deadline", deadline)?;
                Ok(false)
            }),
        ],
    )?;
    let status = ctx.step("finish", || {
        let status = Status {
            status: if approved { "shipped" } else { "cancelled" }.into(),
            carrier: Some(best.carrier.clone()),
            cents: Some(best.cents),
        };
        state::set(&status)?;
        Ok(status)
    })?;
    Ok(status)
}

fn get_state() -> Result<Status> {
    state::get_or_default()
}

burrow_sdk::actor! {
    migrate: migrate,
    workflow: run,
    actions: [get_state],
}
