//! A checkpoint-friendly payment loop. Each iteration takes up to 10
//! queued `payment` events (waiting at most 30 s), sets a rollback
//! checkpoint, builds a plan in one step and applies it in another. The
//! events leave the queue in the transaction that records them in the
//! workflow's history, and the plan's effects commit with their step, so a
//! crash anywhere neither loses a payment nor applies one twice. Finished
//! iterations are pruned from the history, so the loop can run forever.
//!
//! Send payments with
//! `burrow send payment-loop main payment '{"id": "p-1", "amount": 250}'`;
//! `get_state` shows the totals.

use std::time::Duration;

use burrow_sdk::workflow::{self, Ctx, Loop};
use burrow_sdk::{Json, Result, state};
use serde::{Deserialize, Serialize};

#[derive(Clone, Serialize, Deserialize)]
struct Payment {
    id: String,
    amount: i64,
}

#[derive(Default, Serialize, Deserialize)]
struct Totals {
    applied_count: u64,
    total_amount: i64,
    last_payment_id: Option<String>,
}

fn run(ctx: &mut Ctx, _input: Json) -> workflow::Result<()> {
    ctx.repeat("payment-loop", (), |ctx, ()| {
        let batch = ctx.next_batch(
            "wait-payment",
            &["payment"],
            10,
            Some(Duration::from_secs(30)),
        )?;
        if batch.is_empty() {
            return Ok(Loop::Continue(()));
        }
        ctx.rollback_checkpoint("apply-payment-checkpoint");
        let plan: Vec<Payment> = ctx.step("build-plan", || {
            batch
                .iter()
                .map(|event| event.payload::<Payment>())
                .collect()
        })?;
        ctx.step("apply-side-effects", || {
            state::update(|totals: &mut Totals| {
                for payment in &plan {
                    totals.applied_count += 1;
                    totals.total_amount += payment.amount;
                    totals.last_payment_id = Some(payment.id.clone());
                }
            })
        })?;
        Ok(Loop::<(), ()>::Continue(()))
    })
}

fn get_state() -> Result<Totals> {
    state::get_or_default()
}

burrow_sdk::actor! {
    workflow: run,
    actions: [get_state],
}
