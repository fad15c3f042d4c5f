//! The workflow actor's cases that need no restart: not-in-step at every
//! side-effect import, try_step's failures as data, a rollback, a loop's
//! bounded history, a join and a race, and queue waits.

use std::time::Duration;

use burrow::{Host, SendOptions};
use serde_json::{Value, json};

use super::*;

async fn setup(case: &'static str) -> (tempfile::TempDir, Host, Vec<&'static str>, Report) {
    let dir = tempfile::tempdir().unwrap();
    let (specs, present, missing) = super::actors();
    let host = start(dir.path(), &specs).await;
    (dir, host, present, Report::new(case, &missing))
}

async fn scenario(
    host: &Host,
    language: &str,
    key: &str,
    input: Value,
) -> burrow::workflow::WorkflowView {
    let actor = flow(language);
    host.create(&actor, key, &input.to_string()).await.unwrap();
    finished(host, &actor, key).await
}

async fn applied(host: &Host, language: &str, key: &str) -> Value {
    call(host, &flow(language), key, "applied", json!([])).await
}

/// The side effects orchestration code tries, in the order of SPEC.md.
const SIDE_EFFECTS: [&str; 13] = [
    "db.execute",
    "db.execute-batch",
    "state.get",
    "state.set",
    "queue.append",
    "schedule.after",
    "schedule.at",
    "schedule.every",
    "schedule.pending",
    "schedule.cancel",
    "actors.call",
    "actors.send",
    "events.broadcast",
];

#[tokio::test(flavor = "multi_thread")]
async fn every_side_effect_outside_a_step_is_not_in_step() {
    let (_dir, host, present, mut report) = setup("not-in-step").await;
    report
        .run(&present, |language| {
            let host = host.clone();
            async move {
                let view = scenario(&host, language, "k", json!({"scenario": "outside"})).await;
                let out = output(&view);
                let attempts = out["outside"].as_array().unwrap();
                assert_eq!(attempts.len(), SIDE_EFFECTS.len(), "{out}");
                for (call, attempt) in SIDE_EFFECTS.iter().zip(attempts) {
                    assert_eq!(attempt["call"], *call, "{attempt}");
                    assert_eq!(attempt["error"], "not-in-step", "{attempt}");
                    // The host's own message, naming the call.
                    let message = attempt["message"].as_str().unwrap();
                    assert!(
                        message.contains(call) && message.contains("outside a step"),
                        "{attempt}"
                    );
                }
                // Nothing of the attempts happened; the step's writes did.
                assert_eq!(applied(&host, language, "k").await, json!(["inside"]));
                assert_eq!(
                    host.state(&flow(language), "k").unwrap(),
                    json!({"inside": true})
                );
                assert!(
                    host.keys(&flow(language))
                        .await
                        .unwrap()
                        .iter()
                        .all(|k| k != "other")
                );
            }
        })
        .await;
    host.shutdown().await;
    report.finish();
}

fn failed(kind: &str, code: &str, message: &str, attempts: u32) -> Value {
    json!({"failed": {"kind": kind, "code": code, "message": message, "attempts": attempts}})
}

#[tokio::test(flavor = "multi_thread")]
async fn try_step_returns_failures_as_data() {
    let (_dir, host, present, mut report) = setup("try_step").await;
    report
        .run(&present, |language| {
            let host = host.clone();
            async move {
                let view = scenario(&host, language, "k", json!({"scenario": "try-step"})).await;
                let out = output(&view);
                assert_eq!(
                    out["declined"],
                    failed("exhausted", "declined", "card declined", 3)
                );
                assert_eq!(out["critical"], failed("critical", "fatal", "no retry", 1));
                let timeout = &out["timeout"]["failed"];
                assert_eq!(
                    (&timeout["kind"], &timeout["code"], &timeout["attempts"]),
                    (&json!("timeout"), &json!("timeout"), &json!(1)),
                    "{out}"
                );
                assert_eq!(out["fine"], json!({"ok": "fine"}));
                assert_eq!(out["block"], failed("exhausted", "nope", "block failed", 1));
                // Failed attempts rolled back; the block's first step stayed.
                assert_eq!(
                    applied(&host, language, "k").await,
                    json!(["block-a", "after"])
                );
            }
        })
        .await;
    host.shutdown().await;
    report.finish();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rollback_runs_the_handlers_since_the_checkpoint_in_reverse() {
    let (_dir, host, present, mut report) = setup("rollback").await;
    report
        .run(&present, |language| {
            let host = host.clone();
            async move {
                let view = scenario(&host, language, "k", json!({"scenario": "rollback"})).await;
                assert_eq!(view.record.status.as_str(), "failed", "{:?}", view.record);
                let error = view.record.error.clone().unwrap_or_default();
                assert!(
                    error.contains("out-of-stock") && error.contains("nothing left"),
                    "{error}"
                );
                let actor = flow(language);
                assert_eq!(
                    applied(&host, language, "k").await,
                    json!(["reserve", "charge", "ship"])
                );
                assert_eq!(
                    call(&host, &actor, "k", "undone", json!([])).await,
                    json!(["ship:s1", "charge:c1"])
                );
            }
        })
        .await;
    host.shutdown().await;
    report.finish();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_loop_keeps_a_bounded_history() {
    let (_dir, host, present, mut report) = setup("loop").await;
    report
        .run(&present, |language| {
            let host = host.clone();
            async move {
                let input = json!({"scenario": "loop", "iterations": 30});
                let view = scenario(&host, language, "k", input).await;
                assert_eq!(output(&view), json!({"sum": 435}));
                assert!(
                    view.history_len <= 2,
                    "history of {} entries",
                    view.history_len
                );
                let expected: Vec<String> = (0..30).map(|i| format!("add-{i}")).collect();
                assert_eq!(applied(&host, language, "k").await, json!(expected));
            }
        })
        .await;
    host.shutdown().await;
    report.finish();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_join_waits_for_both_and_a_race_keeps_the_first() {
    let (_dir, host, present, mut report) = setup("join and race").await;
    report
        .run(&present, |language| {
            let host = host.clone();
            async move {
                let begun = std::time::Instant::now();
                let view = scenario(&host, language, "k", json!({"scenario": "join-race"})).await;
                assert_eq!(
                    output(&view),
                    json!({"join": ["a", "b"], "race": {"winner": 1, "value": "fast"}})
                );
                assert!(
                    begun.elapsed() < Duration::from_secs(50),
                    "the race waited for its loser"
                );
                let mut names: Vec<String> =
                    serde_json::from_value(applied(&host, language, "k").await).unwrap();
                names.sort();
                assert_eq!(names, ["a1", "a2", "b1", "fast"]);
            }
        })
        .await;
    host.shutdown().await;
    report.finish();
}

#[tokio::test(flavor = "multi_thread")]
async fn queue_waits_take_events_by_type() {
    let (_dir, host, present, mut report) = setup("queue waits").await;
    report
        .run(&present, |language| {
            let host = host.clone();
            async move {
                let actor = flow(language);
                host.create(&actor, "k", r#"{"scenario": "events"}"#)
                    .await
                    .unwrap();
                for ping in 1..=3 {
                    host.send(
                        &actor,
                        "k",
                        "ping",
                        &ping.to_string(),
                        SendOptions::default(),
                    )
                    .await
                    .unwrap();
                }
                host.send(&actor, "k", "go", r#""now""#, SendOptions::default())
                    .await
                    .unwrap();
                let view = finished(&host, &actor, "k").await;
                assert_eq!(
                    output(&view),
                    json!({"go": "now", "pings": [1, 2, 3], "none": null})
                );
                assert_eq!(host.queue(&actor, "k").unwrap().pending_count, 0);
            }
        })
        .await;
    host.shutdown().await;
    report.finish();
}
