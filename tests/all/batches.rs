//! Coalesced calls: calls waiting for one instance commit together, and
//! each still succeeds or fails alone.

use std::time::Duration;

use burrow::{Error, Host};
use serde_json::{Value, json};

use crate::client::expect_event;
use crate::schedules::talk_probe;
use crate::support::*;

const ACTOR: &str = "talk-probe";

/// Runs `calls` on instance `key` while a slow call holds it, so that
/// they wait for it together (in this order); their results, in order.
async fn behind_a_slow_call(
    host: &Host,
    key: &str,
    calls: &[(&str, Value)],
) -> Vec<Result<Value, Error>> {
    let slow = {
        let host = host.clone();
        let key = key.to_owned();
        tokio::spawn(async move {
            host.call(ACTOR, &key, "note_slowly", r#"["slow", 400]"#)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut waiting = Vec::new();
    for (action, args) in calls {
        let host = host.clone();
        let (key, action, args) = (key.to_owned(), action.to_string(), args.to_string());
        waiting.push(tokio::spawn(async move {
            host.call(ACTOR, &key, &action, &args).await
        }));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    slow.await.unwrap().expect("the slow call succeeds");
    let mut results = Vec::new();
    for call in waiting {
        let result = call.await.unwrap();
        results.push(result.map(|text| serde_json::from_str(&text).unwrap()));
    }
    results
}

async fn notes(host: &Host, key: &str) -> Vec<String> {
    let notes = call(host, ACTOR, key, "notes", "[]").await;
    serde_json::from_value(notes).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_call_in_a_batch_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe()]).await;
    call(&host, ACTOR, "b", "note", r#"["first"]"#).await;
    let commits = host.commits();
    let results = behind_a_slow_call(
        &host,
        "b",
        &[
            ("note", json!(["a"])),
            ("note", json!(["b"])),
            ("note_then_fail", json!(["lost"])),
            ("note", json!(["c"])),
            ("note", json!(["d"])),
        ],
    )
    .await;
    // Each note counts the notes so far, its own included: the failed
    // call's note was never seen by the calls after it.
    let counts: Vec<_> = results
        .iter()
        .filter_map(|r| r.as_ref().ok().cloned())
        .collect();
    assert_eq!(counts, [json!(3), json!(4), json!(5), json!(6)]);
    let e = results[2].as_ref().unwrap_err();
    assert_eq!(e.code(), "action-failed", "{e}");
    assert!(e.to_string().contains("failed after writing a note"), "{e}");
    assert_eq!(
        notes(&host, "b").await,
        ["first", "slow", "a", "b", "c", "d"]
    );
    // The slow call and the five behind it: the five committed in fewer
    // than five commits.
    let used = host.commits() - commits;
    assert!(used < 6, "{used} commits for six calls: none coalesced");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trap_in_a_batch_loses_none_of_its_neighbours() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe()]).await;
    call(&host, ACTOR, "t", "note", r#"["first"]"#).await;
    let results = behind_a_slow_call(
        &host,
        "t",
        &[
            ("note", json!(["a"])),
            ("note", json!(["b"])),
            ("note_then_trap", json!(["lost"])),
            ("note", json!(["c"])),
            ("note", json!(["d"])),
        ],
    )
    .await;
    let e = results[2].as_ref().unwrap_err();
    assert_eq!(e.code(), "trapped", "{e}");
    for (i, result) in results.iter().enumerate() {
        if i != 2 {
            assert!(result.is_ok(), "call {i}: {result:?}");
        }
    }
    // The calls before the trap committed with their batch, the calls
    // after it ran on a new wasm instance.
    assert_eq!(
        notes(&host, "t").await,
        ["first", "slow", "a", "b", "c", "d"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_never_mixes_two_instances() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe()]).await;
    call(&host, ACTOR, "x", "note", r#"["first"]"#).await;
    call(&host, ACTOR, "y", "note", r#"["first"]"#).await;
    let on_x = [
        ("note", json!(["x1"])),
        ("note_then_fail", json!(["x-lost"])),
        ("note", json!(["x2"])),
    ];
    let on_y = [("note", json!(["y1"])), ("note", json!(["y2"]))];
    let (x, y) = tokio::join!(
        behind_a_slow_call(&host, "x", &on_x),
        behind_a_slow_call(&host, "y", &on_y),
    );
    assert!(x[1].is_err() && x[0].is_ok() && x[2].is_ok(), "{x:?}");
    assert!(y.iter().all(Result::is_ok), "{y:?}");
    assert_eq!(notes(&host, "x").await, ["first", "slow", "x1", "x2"]);
    assert_eq!(notes(&host, "y").await, ["first", "slow", "y1", "y2"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_events_of_a_failed_call_in_a_batch_are_never_broadcast() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe()]).await;
    let server = Server::start(host.clone()).await;
    let probe = server.client().actor(ACTOR, "e");
    let mut events = probe.subscribe(None).await.unwrap();
    expect_event(&mut events, "hello").await;
    let results = behind_a_slow_call(
        &host,
        "e",
        &[
            ("broadcast", json!(["kept-1", 1])),
            ("broadcast_then_fail", json!(["lost"])),
            ("broadcast", json!(["kept-2", 2])),
        ],
    )
    .await;
    assert!(results[1].is_err(), "{results:?}");
    assert_eq!(expect_event(&mut events, "kept-1").await, json!(1));
    // Were the failed call's event published, it would come here.
    assert_eq!(expect_event(&mut events, "kept-2").await, json!(2));
}

/// In `full` mode, while other instances work, a batch's callers wait for
/// the log's sync away from the async workers. Callers that go away
/// meanwhile (a closed connection drops its request) leave no call of
/// their batch to be run again, and every call answered is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_full_mode_callers_that_go_away_during_the_sync_leave_no_call_run_twice() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.synchronous = burrow::Synchronous::Full;
    let host = Host::start(config, &[talk_probe()]).await.unwrap();
    // The window is short: several rounds, on instances of their own.
    for round in 0..4 {
        let keys: Vec<String> = (0..4).map(|k| format!("r{round}-{k}")).collect();
        for key in &keys {
            call(&host, ACTOR, key, "note", r#"["first"]"#).await;
        }
        let mut callers = Vec::new();
        for key in &keys {
            for i in 0..80u64 {
                let host = host.clone();
                let key = key.clone();
                callers.push(tokio::spawn(async move {
                    let text = format!("{key}/{i}");
                    let args = json!([text]).to_string();
                    let call = host.call(ACTOR, &key, "note", &args);
                    // Every third caller gives up after a while: inside a
                    // batch, during its sync or before its turn.
                    let answered = if i % 3 == 0 {
                        let patience = Duration::from_micros(100 + i * 97 % 2_000);
                        tokio::time::timeout(patience, call).await.ok()
                    } else {
                        Some(call.await)
                    };
                    (key, text, answered.map(|result| result.is_ok()))
                }));
            }
        }
        let mut sent = std::collections::HashMap::<String, Vec<(String, Option<bool>)>>::new();
        for caller in callers {
            let (key, text, answered) = caller.await.unwrap();
            sent.entry(key).or_default().push((text, answered));
        }
        for key in &keys {
            let kept = notes(&host, key).await;
            let mut unique = kept.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(
                unique.len(),
                kept.len(),
                "a call ran twice on {key}: {kept:?}"
            );
            for (text, answered) in &sent[key] {
                match answered {
                    Some(true) => assert!(kept.contains(text), "{text} succeeded, not kept"),
                    Some(false) => panic!("{text} failed"),
                    // Given up: kept or not, but once at most.
                    None => {}
                }
            }
        }
    }
}
