//! The examples of `examples/`, end to end, in Rust and for the twins in
//! Python and JavaScript (the counters have their own tests, and the chat
//! room's connections are in `client.rs`).

use std::time::Duration;

use burrow::manifest::ActorSpec;
use burrow::{SendOptions, SendOutcome};
use serde_json::{Value, json};

use crate::support::{Server, call, eventually, js_actor, programs, restart, start};

const LONG: Duration = Duration::from_secs(20);

fn examples() -> Vec<ActorSpec> {
    let mut router = ActorSpec::new("router", programs::ROUTER);
    router.options.queue_max_attempts = 2;
    router.options.queue_retry_base = Duration::from_millis(10);
    vec![
        ActorSpec::new("mailer", programs::MAILER),
        router,
        ActorSpec::new("coder", programs::CODER),
        ActorSpec::new("alerts", programs::ALERTS),
    ]
}

fn send() -> SendOptions {
    SendOptions::default()
}

/// The mailer's test body, for the Rust and the Python mailer.
async fn mailer_sends_every_welcome_email_once_across_a_restart(mailer: ActorSpec) {
    let name = mailer.name.clone();
    let actors = [mailer];
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &actors).await;
    for email in ["ada@example.com", "alan@example.com", "grace@example.com"] {
        call(&host, &name, "main", "enqueue", &json!([email]).to_string()).await;
    }
    let host = restart(host, &actors).await;
    let sent = eventually(LONG, "three emails", async || {
        let sent = call(&host, &name, "main", "sent", "[]").await;
        (sent.as_array().unwrap().len() == 3).then_some(sent)
    })
    .await;
    assert_eq!(
        sent,
        json!(["ada@example.com", "alan@example.com", "grace@example.com"])
    );
    assert_eq!(host.queue(&name, "main").unwrap().pending_count, 0);
    // A sender that waits gets what `process` returned.
    let wait = SendOptions {
        wait: Some(LONG),
        ..send()
    };
    let job = json!({"email": "edsger@example.com"}).to_string();
    let outcome = host
        .send(&name, "main", "welcome", &job, wait)
        .await
        .unwrap();
    let SendOutcome::Processed { result, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(result, "\"sent to edsger@example.com\"");
    let many = json!([["a@example.com", "b@example.com"]]).to_string();
    assert_eq!(call(&host, &name, "main", "enqueue_many", &many).await, 2);
    eventually(LONG, "six emails", async || {
        let sent = call(&host, &name, "main", "sent", "[]").await;
        (sent.as_array().unwrap().len() == 6).then_some(())
    })
    .await;
    let e = host
        .call(&name, "main", "enqueue", "[42]")
        .await
        .unwrap_err();
    assert_eq!(e.code(), "invalid-arguments", "{e}");
    host.shutdown().await;
}

#[tokio::test]
async fn the_mailer_sends_every_welcome_email_once_across_a_restart() {
    mailer_sends_every_welcome_email_once_across_a_restart(ActorSpec::new(
        "mailer",
        programs::MAILER,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_mailer_sends_every_welcome_email_once_across_a_restart() {
    mailer_sends_every_welcome_email_once_across_a_restart(python(
        "mailer-py",
        programs::MAILER_PY,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_javascript_mailer_sends_every_welcome_email_once_across_a_restart() {
    mailer_sends_every_welcome_email_once_across_a_restart(js_actor(
        "mailer-js",
        programs::MAILER_JS,
    ))
    .await;
}

/// A Python example's spec; panics if it was not built.
fn python(name: &str, component: Result<&str, &str>) -> ActorSpec {
    let path = component.unwrap_or_else(|why| panic!("{name} was not built: {why}"));
    let mut spec = ActorSpec::new(name, path);
    spec.options.memory_limit = 256 << 20;
    spec
}

#[tokio::test]
async fn the_router_keeps_each_topic_in_arrival_order() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &examples()).await;
    for (topic, text) in [("billing", "b1"), ("support", "s1"), ("billing", "b2")] {
        let payload = json!({"topic": topic, "text": text}).to_string();
        host.send("router", "main", "message", &payload, send())
            .await
            .unwrap();
    }
    let wait = || SendOptions {
        wait: Some(LONG),
        ..send()
    };
    // A message that cannot be routed fails each attempt and holds its
    // place (the order is kept) until it is dead-lettered.
    let bad = host
        .send(
            "router",
            "main",
            "message",
            r#"{"topic": "", "text": "?"}"#,
            wait(),
        )
        .await
        .unwrap();
    let SendOutcome::DeadLettered { error, .. } = bad else {
        panic!("{bad:?}")
    };
    assert!(error.contains("the topic is empty"), "{error}");
    let last = json!({"topic": "billing", "text": "b3"}).to_string();
    let outcome = host
        .send("router", "main", "message", &last, wait())
        .await
        .unwrap();
    assert!(
        matches!(outcome, SendOutcome::Processed { .. }),
        "{outcome:?}"
    );
    let inbox = call(&host, "router", "main", "inbox", r#"["billing"]"#).await;
    assert_eq!(inbox, json!(["b1", "b2", "b3"]));
    host.shutdown().await;
}

#[tokio::test]
async fn the_coder_answers_a_waiting_sender_and_keeps_its_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &examples()).await;
    let wait = SendOptions {
        wait: Some(LONG),
        ..send()
    };
    let task = json!({"title": "add login", "files": ["auth.rs", "main.rs"]}).to_string();
    let outcome = host
        .send("coder", "main", "task", &task, wait)
        .await
        .unwrap();
    let SendOutcome::Processed { result, .. } = outcome else {
        panic!("{outcome:?}")
    };
    let result: Value = serde_json::from_str(&result).unwrap();
    assert_eq!(result["step"], 1);
    assert_eq!(
        call(&host, "coder", "main", "transcript", "[]").await,
        json!(["worked on `add login` across 2 file(s): auth.rs, main.rs"])
    );
    host.shutdown().await;
}

#[tokio::test]
async fn alerts_take_the_preferred_type_first_then_priorities() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &examples()).await;
    host.create("alerts", "ops", r#"{"prefer": "disk.full"}"#)
        .await
        .unwrap();
    let batch = json!([[
        {"type": "cpu.high", "priority": 5},
        {"type": "net.down", "priority": 1},
        {"type": "disk.full", "priority": 9},
    ]]);
    call(&host, "alerts", "ops", "raise", &batch.to_string()).await;
    let handled = eventually(LONG, "three alerts", async || {
        let handled = call(&host, "alerts", "ops", "handled", "[]").await;
        (handled.as_array().unwrap().len() == 3).then_some(handled)
    })
    .await;
    assert_eq!(handled, json!(["disk.full", "net.down", "cpu.high"]));
    host.shutdown().await;
}

fn workflow_examples() -> Vec<ActorSpec> {
    vec![
        ActorSpec::new("payment", programs::PAYMENT),
        ActorSpec::new("payment-loop", programs::PAYMENT_LOOP),
        ActorSpec::new("fulfillment", programs::FULFILLMENT),
    ]
}

async fn workflow_done(
    host: &burrow::Host,
    actor: &str,
    key: &str,
) -> burrow::workflow::WorkflowView {
    eventually(LONG, &format!("{actor}/{key} to finish"), async || {
        let view = host.workflow(actor, key).unwrap();
        view.record.status.is_final().then_some(view)
    })
    .await
}

/// `scripts/provider.py`, the examples' payment provider, on a free port
/// of 127.0.0.1: stopped when dropped.
pub(crate) struct PaymentProvider {
    child: std::process::Child,
    pub(crate) url: String,
}

impl PaymentProvider {
    pub(crate) fn start() -> PaymentProvider {
        use std::io::BufRead;
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/provider.py");
        let mut child = std::process::Command::new("python3")
            .args([script, "--port", "0"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs scripts/provider.py");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("provider listening on ")
            .unwrap_or_else(|| panic!("the provider said {line:?}"))
            .to_owned();
        PaymentProvider { child, url }
    }

    /// What the provider says at `path` (`/charges`, `/requests`).
    pub(crate) async fn get(&self, path: &str) -> Value {
        crate::support::http()
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

impl Drop for PaymentProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `payment` allowed to reach `provider`.
fn paying(mut payment: ActorSpec, provider: &PaymentProvider) -> ActorSpec {
    payment.options.http =
        burrow::outbound::Allowed::parse(std::slice::from_ref(&provider.url)).unwrap();
    payment
}

const DECLINED: &str = "4000 0000 0000 0002";

/// The payment workflow's test body, for the payment of each language:
/// one card charged at the provider, one declined into manual review, the
/// same idempotency key in every attempt.
async fn declined_payment_goes_to_manual_review(payment: ActorSpec) {
    let provider = PaymentProvider::start();
    let name = payment.name.clone();
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[paying(payment, &provider)]).await;
    let order = |order: &str, card: Option<&str>| {
        let mut input = json!({"order": order, "provider": provider.url});
        if let Some(card) = card {
            input["card"] = card.into();
        }
        input.to_string()
    };
    host.create(&name, "ok", &order("order-1", None))
        .await
        .unwrap();
    host.create(&name, "declined", &order("order-2", Some(DECLINED)))
        .await
        .unwrap();
    let paid = workflow_done(&host, &name, "ok").await;
    assert_eq!(paid.record.output.as_deref(), Some("\"paid\""));
    let charges = provider.get("/charges").await;
    assert_eq!(charges.as_array().unwrap().len(), 1, "{charges}");
    assert_eq!(charges[0]["order"], "order-1");
    assert_eq!(
        call(&host, &name, "ok", "get_state", "[]").await,
        json!({"status": "paid", "reason": null, "charge": charges[0]["id"]})
    );
    let review = workflow_done(&host, &name, "declined").await;
    assert_eq!(review.record.output.as_deref(), Some("\"manual-review\""));
    let charge = &review.history[0];
    assert_eq!(
        (charge.attempts, charge.failure_kind.as_deref()),
        (4, Some("exhausted"))
    );
    let state = call(&host, &name, "declined", "get_state", "[]").await;
    assert_eq!(state["status"], "manual-review");
    assert_eq!(state["reason"], "the card for order-2 was declined");
    // One request for the paid order; one per attempt for the declined.
    let requests = provider.get("/requests").await;
    assert_eq!(requests, json!({"order-1": 1, "order-2": 4}));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_declined_payment_goes_to_manual_review() {
    declined_payment_goes_to_manual_review(ActorSpec::new("payment", programs::PAYMENT)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_declined_python_payment_goes_to_manual_review() {
    declined_payment_goes_to_manual_review(python("payment-py", programs::PAYMENT_PY)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_declined_javascript_payment_goes_to_manual_review() {
    declined_payment_goes_to_manual_review(js_actor("payment-js", programs::PAYMENT_JS)).await;
}

/// The provider settles a charge by calling the instance's own HTTP
/// handler back; the handler checks the signature and queues the
/// settlement, which the waiting workflow takes. A forged settlement is
/// refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_settlement_calls_the_payment_back_and_wakes_its_workflow() {
    let provider = PaymentProvider::start();
    let dir = tempfile::tempdir().unwrap();
    let mut payment = paying(ActorSpec::new("payment", programs::PAYMENT), &provider);
    payment.options.public_http = true;
    let host = start(dir.path(), &[payment]).await;
    let server = Server::start(host.clone()).await;
    let hook = format!("{}/actors/payment/hooked/http/settled", server.url);

    let input = json!({"order": "order-3", "provider": provider.url, "callback": hook});
    host.create("payment", "hooked", &input.to_string())
        .await
        .unwrap();
    // A forged settlement, while the workflow waits: no signature, then
    // a wrong one.
    let http = crate::support::http();
    for signature in [None, Some("00ff")] {
        let mut forged = http
            .post(&hook)
            .body(r#"{"id": "ch_1", "status": "settled"}"#);
        if let Some(signature) = signature {
            forged = forged.header("x-signature", signature);
        }
        let answer = forged.send().await.unwrap();
        assert_eq!(answer.status().as_u16(), 401);
    }

    let done = workflow_done(&host, "payment", "hooked").await;
    assert_eq!(done.record.output.as_deref(), Some("\"paid\""));
    let state = call(&host, "payment", "hooked", "get_state", "[]").await;
    assert_eq!(state["status"], "paid");
    let charges = provider.get("/charges").await;
    assert_eq!(charges[0]["status"], "settled", "{charges}");
    assert_eq!(state["charge"], charges[0]["id"]);
    // The workflow took the settlement from its queue: nothing is left.
    assert_eq!(host.queue("payment", "hooked").unwrap().pending_count, 0);
    server.stop().await;
    host.shutdown().await;
}

/// The stepper's test body: counts to N, each step once, then after a
/// durable sleep once more.
async fn stepper_counts_to_n(stepper: ActorSpec) {
    let name = stepper.name.clone();
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[stepper]).await;
    let plan = json!({"steps": 40, "then_sleep_ms": 100}).to_string();
    host.create(&name, "k", &plan).await.unwrap();
    let view = workflow_done(&host, &name, "k").await;
    assert_eq!(
        view.record.output.as_deref(),
        Some("41"),
        "{:?}",
        view.record
    );
    assert_eq!(call(&host, &name, "k", "count", "[]").await, 41);
    // An input that does not fit the plan fails the workflow, naming it.
    host.create(&name, "bad", r#"{"steps": "many"}"#)
        .await
        .unwrap();
    let view = workflow_done(&host, &name, "bad").await;
    let error = view.record.error.unwrap_or_default();
    assert!(error.contains("invalid-input"), "{error}");
    assert_eq!(view.record.status.as_str(), "failed");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_stepper_counts_to_n() {
    stepper_counts_to_n(ActorSpec::new("stepper", programs::STEPPER)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_stepper_counts_to_n() {
    stepper_counts_to_n(python("stepper-py", programs::STEPPER_PY)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_javascript_stepper_counts_to_n() {
    stepper_counts_to_n(js_actor("stepper-js", programs::STEPPER_JS)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_payment_loop_applies_every_payment_once_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &workflow_examples()).await;
    host.create("payment-loop", "main", "null").await.unwrap();
    let mut total = 0;
    for i in 0..25 {
        let payment = json!({"id": format!("p-{i}"), "amount": i * 10}).to_string();
        host.send("payment-loop", "main", "payment", &payment, send())
            .await
            .unwrap();
        total += i * 10;
    }
    // A restart while the loop works through them.
    let host = restart(host, &workflow_examples()).await;
    for i in 25..30 {
        let payment = json!({"id": format!("p-{i}"), "amount": i * 10}).to_string();
        host.send("payment-loop", "main", "payment", &payment, send())
            .await
            .unwrap();
        total += i * 10;
    }
    let state = eventually(LONG, "30 payments", async || {
        let state = call(&host, "payment-loop", "main", "get_state", "[]").await;
        (state["applied_count"] == 30).then_some(state)
    })
    .await;
    assert_eq!(state["total_amount"], total);
    assert_eq!(state["last_payment_id"], "p-29");
    // The loop runs on, waiting for more; its history stays short.
    let view = host.workflow("payment-loop", "main").unwrap();
    assert_eq!(
        view.record.status,
        burrow::workflow::WorkflowStatus::Waiting
    );
    assert!(view.history_len <= 3, "{:?}", view.history);
    assert_eq!(host.queue("payment-loop", "main").unwrap().pending_count, 0);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fulfillment_joins_quotes_and_races_approval_against_a_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &workflow_examples()).await;
    let order = |ms: u64| json!({"weight_kg": 3, "approval_ms": ms}).to_string();
    host.create("fulfillment", "approved", &order(60_000))
        .await
        .unwrap();
    host.create("fulfillment", "late", &order(300))
        .await
        .unwrap();
    eventually(LONG, "the approval wait", async || {
        let state = call(&host, "fulfillment", "approved", "get_state", "[]").await;
        (state["status"] == "awaiting-approval").then_some(())
    })
    .await;
    host.send("fulfillment", "approved", "approve", "null", send())
        .await
        .unwrap();
    let shipped = workflow_done(&host, "fulfillment", "approved").await;
    let output: Value = serde_json::from_str(shipped.record.output.as_deref().unwrap()).unwrap();
    assert_eq!(
        output,
        json!({"status": "shipped", "carrier": "rail", "cents": 860})
    );
    let late = workflow_done(&host, "fulfillment", "late").await;
    let output: Value = serde_json::from_str(late.record.output.as_deref().unwrap()).unwrap();
    assert_eq!(output["status"], "cancelled");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn reminders_fire_once_when_due_and_a_cancelled_one_never() {
    let dir = tempfile::tempdir().unwrap();
    let actors = [ActorSpec::new("reminder", programs::REMINDER)];
    let host = start(dir.path(), &actors).await;
    let stretch = call(&host, "reminder", "me", "remind", r#"["stretch", 300]"#).await;
    let water = call(&host, "reminder", "me", "remind", r#"["water", 400]"#).await;
    call(
        &host,
        "reminder",
        "me",
        "remind",
        r#"["much later", 600000]"#,
    )
    .await;
    let pending = call(&host, "reminder", "me", "pending", "[]").await;
    let texts: Vec<&str> = pending
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["stretch", "water", "much later"]);
    assert_eq!(pending[0]["id"], stretch);
    let cancel = json!([water]).to_string();
    assert_eq!(call(&host, "reminder", "me", "cancel", &cancel).await, true);
    let e = host
        .call("reminder", "me", "remind", r#"["  ", 10]"#)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("empty-reminder"), "{e}");

    // Across a restart: the reminder fires once, the cancelled one never.
    let host = restart(host, &actors).await;
    let fired = eventually(LONG, "the reminder to fire", async || {
        let fired = call(&host, "reminder", "me", "fired", "[]").await;
        (!fired.as_array().unwrap().is_empty()).then_some(fired)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let fired = {
        let again = call(&host, "reminder", "me", "fired", "[]").await;
        assert_eq!(again, fired, "a reminder fired twice");
        again
    };
    assert_eq!(fired.as_array().unwrap().len(), 1);
    assert_eq!(fired[0]["text"], "stretch");
    assert!(fired[0]["fired_at"].as_i64() >= fired[0]["due"].as_i64());
    let pending = call(&host, "reminder", "me", "pending", "[]").await;
    assert_eq!(pending.as_array().unwrap().len(), 1, "{pending}");
}

#[tokio::test(flavor = "multi_thread")]
async fn accounts_transfer_by_calling_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[ActorSpec::new("account", programs::ACCOUNT)]).await;
    assert_eq!(
        call(&host, "account", "alice", "deposit", "[100]").await,
        100
    );
    assert_eq!(
        call(&host, "account", "alice", "transfer", r#"["bob", 30]"#).await,
        70
    );
    assert_eq!(call(&host, "account", "bob", "balance", "[]").await, 30);
    // Refusals roll the withdrawal back.
    for (args, code) in [
        (r#"["bob", 1000]"#, "insufficient-funds"),
        (r#"["bob", 0]"#, "invalid-amount"),
        (r#"["alice", 10]"#, "cycle"),
    ] {
        let e = host
            .call("account", "alice", "transfer", args)
            .await
            .unwrap_err();
        assert!(
            matches!(&e, burrow::Error::Failed { code: c, .. } if c == code),
            "{args}: {e}"
        );
    }
    assert_eq!(call(&host, "account", "alice", "balance", "[]").await, 70);
    assert_eq!(call(&host, "account", "bob", "balance", "[]").await, 30);
}

/// The chat room's test body, for the Rust and the Python room.
async fn chat_room_keeps_its_history_and_refuses_bad_posts(room: ActorSpec) {
    let name = room.name.clone();
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[room]).await;
    for i in 0..105 {
        let args = json!(["ada", format!("message {i}")]).to_string();
        assert_eq!(call(&host, &name, "lobby", "post", &args).await, i + 1);
    }
    let history = call(&host, &name, "lobby", "history", "[3]").await;
    let texts: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["message 102", "message 103", "message 104"]);
    let history = call(&host, &name, "lobby", "history", "[1000]").await;
    assert_eq!(history.as_array().unwrap().len(), 100);
    for (args, code) in [
        (r#"["ada", ""]"#, "empty-message"),
        (
            &*json!(["ada", "x".repeat(4001)]).to_string(),
            "message-too-long",
        ),
    ] {
        let e = host.call(&name, "lobby", "post", args).await.unwrap_err();
        assert!(e.to_string().contains(code), "{e}");
    }
    assert_eq!(
        call(&host, &name, "lobby", "members", "[]").await,
        json!([])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_chat_room_keeps_its_history_and_refuses_bad_posts() {
    chat_room_keeps_its_history_and_refuses_bad_posts(crate::support::chat_room()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_chat_room_keeps_its_history_and_refuses_bad_posts() {
    chat_room_keeps_its_history_and_refuses_bad_posts(python(
        "chat-room-py",
        programs::CHAT_ROOM_PY,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_javascript_chat_room_keeps_its_history_and_refuses_bad_posts() {
    chat_room_keeps_its_history_and_refuses_bad_posts(js_actor(
        "chat-room-js",
        programs::CHAT_ROOM_JS,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_chat_room_tells_connected_clients() {
    use crate::client::expect_event;
    let dir = tempfile::tempdir().unwrap();
    let spec = python("chat-room-py", programs::CHAT_ROOM_PY);
    let server = crate::support::Server::start(start(dir.path(), &[spec]).await).await;
    let room = server.client().actor("chat-room-py", "lobby");
    let e = room.subscribe(None).await.unwrap_err();
    assert_eq!(e.code, "connection-refused", "{e}");
    assert!(e.message.contains("name-required"), "{e}");
    let mut ada = room.subscribe(Some(&json!({"name": "ada"}))).await.unwrap();
    assert_eq!(
        expect_event(&mut ada, "joined").await,
        json!({"name": "ada"})
    );
    let mut bob = room.subscribe(Some(&json!({"name": "bob"}))).await.unwrap();
    assert_eq!(
        expect_event(&mut bob, "joined").await,
        json!({"name": "bob"})
    );
    assert_eq!(
        expect_event(&mut ada, "joined").await,
        json!({"name": "bob"})
    );
    let members: Vec<String> = room.call("members", &()).await.unwrap();
    assert_eq!(members, ["ada", "bob"]);
    let id: i64 = room.call("post", &("ada", "hello")).await.unwrap();
    for subscription in [&mut ada, &mut bob] {
        let message = expect_event(subscription, "message").await;
        assert_eq!(
            (message["id"].as_i64(), &message["text"]),
            (Some(id), &json!("hello"))
        );
        assert!(message["at"].as_i64().unwrap() > 0, "{message}");
    }
    drop(bob);
    assert_eq!(expect_event(&mut ada, "left").await, json!({"name": "bob"}));
    server.stop().await;
}
