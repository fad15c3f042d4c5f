//! The queue examples of `examples/`, end to end.

use std::time::Duration;

use burrow::manifest::ActorSpec;
use burrow::{SendOptions, SendOutcome};
use serde_json::{Value, json};

use crate::support::{call, eventually, programs, restart, start};

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

#[tokio::test]
async fn the_mailer_sends_every_welcome_email_once_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &examples()).await;
    for email in ["ada@example.com", "alan@example.com", "grace@example.com"] {
        call(
            &host,
            "mailer",
            "main",
            "enqueue",
            &json!([email]).to_string(),
        )
        .await;
    }
    let host = restart(host, &examples()).await;
    let sent = eventually(LONG, "three emails", async || {
        let sent = call(&host, "mailer", "main", "sent", "[]").await;
        (sent.as_array().unwrap().len() == 3).then_some(sent)
    })
    .await;
    assert_eq!(
        sent,
        json!(["ada@example.com", "alan@example.com", "grace@example.com"])
    );
    assert_eq!(host.queue("mailer", "main").unwrap().pending_count, 0);
    host.shutdown().await;
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
