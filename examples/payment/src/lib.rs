//! The payment workflow: charge the card with `try_step` (3 retries), then
//! record the outcome in a second step. A charge that fails for good is
//! data, not a crash: the order goes to manual review with the reason.
//!
//! The create input names the order, and (this being an example without a
//! network) whether its card is declined:
//! `burrow create payment order-123 '{"order": "order-123", "declined": false}'`.
//! `get_state` reads the outcome while the workflow runs and after.

use std::time::Duration;

use burrow_sdk::workflow::{self, Ctx, StepOptions};
use burrow_sdk::{Error, Result, state};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct Order {
    order: String,
    #[serde(default)]
    declined: bool,
}

#[derive(Default, Serialize, Deserialize)]
struct Payment {
    /// `pending`, `paid` or `manual-review`.
    status: String,
    reason: Option<String>,
    charge: Option<String>,
}

/// Runs once, before the workflow starts: the order is pending.
fn create(_order: Order) -> Result<()> {
    state::set(&Payment {
        status: "pending".into(),
        ..Payment::default()
    })
}

fn run(ctx: &mut Ctx, order: Order) -> workflow::Result<String> {
    let retries = StepOptions::default()
        .retries(3)
        .backoff(Duration::from_millis(200), Duration::from_secs(5));
    let charge = ctx.try_step_with("charge-card", retries, || {
        charge_card(&order.order, order.declined)
    })?;
    let status = ctx.step("store-charge-result", || {
        let payment = match &charge {
            Ok(id) => Payment {
                status: "paid".into(),
                reason: None,
                charge: Some(id.clone()),
            },
            Err(failure) => Payment {
                status: "manual-review".into(),
                reason: Some(failure.message.clone()),
                charge: None,
            },
        };
        state::set(&payment)?;
        Ok(payment.status)
    })?;
    Ok(status)
}

/// Stands in for a payment provider.
fn charge_card(order: &str, declined: bool) -> Result<String> {
    if declined {
        return Err(Error::new(
            "card-declined",
            format!("the card for {order} was declined"),
        ));
    }
    Ok(format!("charge-{order}"))
}

fn get_state() -> Result<Payment> {
    state::get_or_default()
}

burrow_sdk::actor! {
    create: create,
    workflow: run,
    actions: [get_state],
}
