//! The queue's cases: order under each policy, dequeue after success,
//! retries and the dead letter.

use burrow::{SendOptions, SendOutcome};
use serde_json::{Value, json};

use super::*;

/// Four events in one call: labels c, a (priority 5), d, b (priority 1).
fn four_events() -> Value {
    json!([[
        {"type": "job", "payload": {"label": "c"}, "priority": 5},
        {"type": "job", "payload": {"label": "a"}, "priority": 5},
        {"type": "job", "payload": {"label": "d"}, "priority": 1},
        {"type": "job", "payload": {"label": "b"}, "priority": 1},
    ]])
}

async fn processed_labels(
    host: &burrow::Host,
    actor: &str,
    key: &str,
    count: usize,
) -> Vec<String> {
    let processed = eventually(
        LONG,
        &format!("{count} events of {actor}/{key}"),
        async || {
            let processed = call(host, actor, key, "processed", json!([])).await;
            (processed.as_array().unwrap().len() >= count).then_some(processed)
        },
    )
    .await;
    processed
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["label"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_queue_keeps_each_policys_order() {
    let dir = tempfile::tempdir().unwrap();
    let (specs, present, missing) = super::actors();
    let host = start(dir.path(), &specs).await;
    let mut report = Report::new("queue order", &missing);
    report
        .run(&present, |language| {
            let host = host.clone();
            async move {
                let actor = basic(language);
                for (policy, expected) in [
                    ("fifo", ["d", "b", "c", "a"]),
                    ("lifo", ["b", "d", "a", "c"]),
                    ("custom", ["a", "b", "c", "d"]),
                ] {
                    let input = json!({ "policy": policy }).to_string();
                    host.create(&actor, policy, &input).await.unwrap();
                    let ids = call(&host, &actor, policy, "enqueue_many", four_events()).await;
                    assert_eq!(ids.as_array().unwrap().len(), 4, "{ids}");
                    let labels = processed_labels(&host, &actor, policy, 4).await;
                    assert_eq!(labels, expected, "{policy}");
                    let view = host.queue(&actor, policy).unwrap();
                    let mode = view.policy.as_ref().map(|p| format!("{:?}", p.mode));
                    assert_eq!(mode.map(|m| m.to_lowercase()), Some(policy.to_owned()));
                }
                // Random: priorities still first, every event once.
                host.create(&actor, "random", r#"{"policy": "random"}"#)
                    .await
                    .unwrap();
                call(&host, &actor, "random", "enqueue_many", four_events()).await;
                let mut labels = processed_labels(&host, &actor, "random", 4).await;
                labels[..2].sort();
                labels[2..].sort();
                assert_eq!(labels, ["b", "d", "a", "c"]);
                // An instance created by a call is fifo; priority and group
                // reach `process`.
                let args = json!(["job", {"label": "g"}, 7, "grouped"]);
                call(&host, &actor, "plain", "enqueue", args).await;
                let args = json!(["job", {"label": "h"}, -1, null]);
                call(&host, &actor, "plain", "enqueue", args).await;
                processed_labels(&host, &actor, "plain", 2).await;
                // Two calls: the first event may be processed before the
                // second is appended.
                let processed = call(&host, &actor, "plain", "processed", json!([])).await;
                let mut processed: Vec<Value> = serde_json::from_value(processed).unwrap();
                processed.sort_by_key(|p| p["label"].as_str().unwrap().to_owned());
                assert_eq!(
                    Value::from(processed),
                    json!([
                        {"label": "g", "attempt": 1, "priority": 7, "group": "grouped"},
                        {"label": "h", "attempt": 1, "priority": -1, "group": null},
                    ])
                );
                // The wrong create input is refused.
                let e = host
                    .create(&actor, "bad", r#"{"policy": "sideways"}"#)
                    .await
                    .unwrap_err();
                assert!(e.to_string().contains("invalid-input"), "{e}");
            }
        })
        .await;
    host.shutdown().await;
    report.finish();
}

#[tokio::test(flavor = "multi_thread")]
async fn events_are_retried_then_dead_lettered_and_dequeued_after_success() {
    let dir = tempfile::tempdir().unwrap();
    let (specs, present, missing) = super::actors();
    let host = start(dir.path(), &specs).await;
    let mut report = Report::new("queue retry and dead letter", &missing);
    report
        .run(&present, |language| {
            let host = host.clone();
            async move {
                let actor = basic(language);
                let wait = || SendOptions {
                    wait: Some(LONG),
                    ..SendOptions::default()
                };
                let flaky = json!({"label": "flaky", "fail": 2}).to_string();
                let outcome = host.send(&actor, "k", "job", &flaky, wait()).await.unwrap();
                let SendOutcome::Processed { result, .. } = outcome else {
                    panic!("flaky was not processed: {outcome:?}")
                };
                assert_eq!(json(&result), json!({"label": "flaky", "attempt": 3}));

                let doomed = json!({"label": "doomed", "fail": 99}).to_string();
                let outcome = host
                    .send(&actor, "k", "job", &doomed, wait())
                    .await
                    .unwrap();
                let SendOutcome::DeadLettered { error, .. } = outcome else {
                    panic!("doomed was not dead-lettered: {outcome:?}")
                };
                assert!(error.contains("planned-failure"), "{error}");
                assert!(error.contains("event doomed failed attempt 3"), "{error}");

                // Failed attempts rolled back their rows: one row, the success.
                let processed = call(&host, &actor, "k", "processed", json!([])).await;
                assert_eq!(
                    processed,
                    json!([{"label": "flaky", "attempt": 3, "priority": 0, "group": null}])
                );
                let view = host.queue(&actor, "k").unwrap();
                assert_eq!(view.pending_count, 0, "{view:?}");
                assert_eq!(view.dead_letters.len(), 1, "{view:?}");
                assert_eq!(view.dead_letters[0].attempts, 3);
                assert_eq!(json(&view.dead_letters[0].payload), json(&doomed));

                // Appended by an action: pending until processed, then gone.
                let id = call(
                    &host,
                    &actor,
                    "k",
                    "enqueue",
                    json!(["job", {"label": "late"}, 0, null]),
                )
                .await;
                assert!(id.as_i64().unwrap() > 0, "{id}");
                processed_labels(&host, &actor, "k", 2).await;
                eventually(LONG, "the queue to empty", async || {
                    (host.queue(&actor, "k").unwrap().pending_count == 0).then_some(())
                })
                .await;
            }
        })
        .await;
    host.shutdown().await;
    report.finish();
}
