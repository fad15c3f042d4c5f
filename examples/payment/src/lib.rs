//! The payment workflow: charge the card at a payment provider over HTTP
//! with `try_step` (3 retries, the same idempotency key in every attempt),
//! then record the outcome in a second step. A charge that fails for good
//! is data, not a crash: the order goes to manual review with the reason.
//!
//! The provider is `scripts/provider.py` (on 127.0.0.1:9300, which the
//! manifest lets the actor reach): the card `4000 0000 0000 0002` is
//! declined, any other is charged.
//!
//! `burrow create payment order-1 '{"order": "order-1"}'`, then
//! `burrow call payment order-1 get_state`.
//!
//! **The webhook.** With a `callback` URL in the input (this instance's
//! own HTTP handler: `http://127.0.0.1:7878/actors/payment/<key>/http/settled`),
//! the provider answers `pending` and settles later by calling it back.
//! The handler checks the provider's signature and puts the settlement on
//! the instance's queue, where the workflow waits for it.

use std::time::Duration;

use burrow_sdk::workflow::{self, Ctx, StepOptions};
use burrow_sdk::{Error, Json, Result, http, queue, state};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::Sha256;

/// The key the provider signs its callbacks with (`scripts/provider.py
/// --secret`).
const WEBHOOK_SECRET: &[u8] = b"whsec_burrow_example";
/// How long the workflow waits for the provider's settlement.
const SETTLEMENT_TIMEOUT: Duration = Duration::from_secs(60);

fn default_provider() -> String {
    "http://127.0.0.1:9300".into()
}

fn default_card() -> String {
    "4242 4242 4242 4242".into()
}

fn default_amount() -> u64 {
    1200
}

#[derive(Deserialize)]
struct Order {
    order: String,
    #[serde(default = "default_card")]
    card: String,
    #[serde(default = "default_amount")]
    amount: u64,
    #[serde(default = "default_provider")]
    provider: String,
    /// Where the provider calls back when the charge settles.
    #[serde(default)]
    callback: Option<String>,
}

/// What the provider answered a charge.
#[derive(Serialize, Deserialize)]
struct Charge {
    id: String,
    /// `paid`, or `pending` until the settlement calls back.
    status: String,
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
    let charge = ctx.try_step_with("charge-card", retries, || charge_card(&order))?;
    // A pending charge is paid once the provider's settlement arrives.
    let outcome = match charge {
        Ok(charge) if charge.status == "pending" => {
            match ctx.next_event("settlement", &["settled"], Some(SETTLEMENT_TIMEOUT))? {
                Some(_) => Ok(charge.id),
                None => Err(format!("no settlement of {} came", charge.id)),
            }
        }
        Ok(charge) => Ok(charge.id),
        Err(failure) => Err(failure.message),
    };
    let status = ctx.step("store-charge-result", || {
        let payment = match &outcome {
            Ok(id) => Payment {
                status: "paid".into(),
                reason: None,
                charge: Some(id.clone()),
            },
            Err(reason) => Payment {
                status: "manual-review".into(),
                reason: Some(reason.clone()),
                charge: None,
            },
        };
        state::set(&payment)?;
        Ok(payment.status)
    })?;
    Ok(status)
}

/// Charges the card at the provider, with the step's idempotency key: a
/// retry (or a retry after a crash) is the same charge to the provider.
fn charge_card(order: &Order) -> Result<Charge> {
    let key = workflow::step_key().unwrap_or_default();
    let answer = http::post(&format!("{}/charges", order.provider))
        .idempotency_key(&key)
        .json(&json!({
            "order": order.order,
            "amount": order.amount,
            "card": order.card,
            "callback": order.callback,
        }))?
        .timeout_ms(5_000)
        .send()?;
    match answer.status {
        200 => answer.json(),
        402 => {
            let refusal: Json = answer.json()?;
            Err(Error::new(
                "card-declined",
                refusal["message"].as_str().unwrap_or("declined"),
            ))
        }
        status => Err(Error::new(
            "provider",
            format!("the provider answered {status}: {}", answer.text()),
        )),
    }
}

fn get_state() -> Result<Payment> {
    state::get_or_default()
}

/// The provider's callback: `POST /settled`, signed. A settlement whose
/// signature holds goes on the instance's queue, for the waiting workflow.
fn webhook(request: http::Incoming) -> http::Reply {
    if (request.method.as_str(), request.path.as_str()) != ("POST", "/settled") {
        return http::Reply::text(404, "the only hook is POST /settled");
    }
    let signed = request
        .header("x-signature")
        .and_then(|signature| hex::decode(signature).ok())
        .is_some_and(|signature| {
            let mut mac = Hmac::<Sha256>::new_from_slice(WEBHOOK_SECRET).expect("any key");
            mac.update(&request.body);
            mac.verify_slice(&signature).is_ok()
        });
    if !signed {
        return http::Reply::text(401, "the signature does not hold");
    }
    let settlement: Json = match request.json() {
        Ok(settlement) => settlement,
        Err(e) => return http::Reply::text(400, e.to_string()),
    };
    match queue::append("settled", &settlement) {
        Ok(id) => http::Reply::json(202, &json!({ "queued": id })),
        Err(e) => http::Reply::text(500, e.to_string()),
    }
}

burrow_sdk::actor! {
    create: create,
    workflow: run,
    actions: [get_state],
}

burrow_sdk::http_handler!(webhook);
