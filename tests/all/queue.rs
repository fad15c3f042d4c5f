//! The durable queue: policies, groups and concurrency, retries, dead
//! letters, send-and-wait, limits, and resuming after a restart.

use std::time::{Duration, Instant};

use burrow::{Error, Host, SendOptions, SendOutcome};
use serde_json::{Value, json};

use crate::support::{call, eventually, queue_probe, restart, start};

const ACTOR: &str = "queue-probe";
const LONG: Duration = Duration::from_secs(20);

async fn create(host: &Host, key: &str, config: Value) {
    host.create(ACTOR, key, &config.to_string()).await.unwrap();
}

async fn enqueue(host: &Host, key: &str, events: Value) -> Vec<i64> {
    let ids = call(host, ACTOR, key, "enqueue", &json!([events]).to_string()).await;
    serde_json::from_value(ids).unwrap()
}

/// Waits until `process` has recorded `n` events; returns the log.
async fn log_of(host: &Host, key: &str, n: usize) -> Vec<Value> {
    eventually(LONG, &format!("{n} processed events"), async || {
        let log = call(host, ACTOR, key, "log", "[]").await;
        let log = log.as_array().unwrap().clone();
        (log.len() >= n).then_some(log)
    })
    .await
}

fn types(log: &[Value]) -> Vec<&str> {
    log.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn mixed_priorities() -> Value {
    json!([
        {"type": "a", "priority": 5},
        {"type": "b", "priority": 0},
        {"type": "c", "priority": 5},
        {"type": "d", "priority": 0},
        {"type": "e", "priority": 1},
    ])
}

#[tokio::test]
async fn fifo_and_lifo_take_lower_priorities_first_then_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    for (mode, expected) in [
        ("fifo", ["b", "d", "e", "a", "c"]),
        ("lifo", ["d", "b", "e", "c", "a"]),
    ] {
        create(&host, mode, json!({"mode": mode})).await;
        // One transaction: the pump sees all five at once.
        enqueue(&host, mode, mixed_priorities()).await;
        let log = log_of(&host, mode, 5).await;
        assert_eq!(types(&log), expected, "{mode}");
    }
    host.shutdown().await;
}

#[tokio::test]
async fn random_takes_lower_priorities_first_in_some_order() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    let mut orders = std::collections::HashSet::new();
    for round in 0..8 {
        let key = format!("random-{round}");
        create(&host, &key, json!({"mode": "random"})).await;
        enqueue(&host, &key, mixed_priorities()).await;
        let log = log_of(&host, &key, 5).await;
        let order = types(&log);
        let mut first: Vec<_> = order[..2].to_vec();
        first.sort();
        assert_eq!(first, ["b", "d"]);
        assert_eq!(order[2], "e");
        orders.insert(order.join(""));
    }
    assert!(orders.len() > 1, "eight rounds, one order: {orders:?}");
    host.shutdown().await;
}

/// Most intervals open at once among `intervals`.
fn max_overlap(intervals: &[(i64, i64)]) -> usize {
    let mut edges: Vec<(i64, i32)> = intervals
        .iter()
        .flat_map(|&(start, end)| [(start, 1), (end, -1)])
        .collect();
    // An interval that ends as another starts does not overlap it.
    edges.sort();
    let (mut open, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        open += step;
        most = most.max(open);
    }
    most as usize
}

#[tokio::test]
async fn concurrency_per_group_is_a_real_overlap_and_a_limit() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    create(&host, "k", json!({"concurrency": 2})).await;
    let mut events = Vec::new();
    for group in ["a", "b"] {
        for _ in 0..4 {
            events.push(json!({"type": "slow", "payload": {"ms": 300}, "group": group}));
        }
    }
    let begun = Instant::now();
    enqueue(&host, "k", json!(events)).await;
    let log = log_of(&host, "k", 8).await;
    let elapsed = begun.elapsed();
    let interval = |e: &Value| {
        (
            e["started_ms"].as_i64().unwrap(),
            e["ended_ms"].as_i64().unwrap(),
        )
    };
    for group in ["a", "b"] {
        let intervals: Vec<_> = log
            .iter()
            .filter(|e| e["group"] == group)
            .map(interval)
            .collect();
        assert_eq!(intervals.len(), 4);
        assert_eq!(max_overlap(&intervals), 2, "group {group}: {intervals:?}");
    }
    let all: Vec<_> = log.iter().map(interval).collect();
    assert!(max_overlap(&all) >= 3, "groups overlap too: {all:?}");
    // Eight calls of 300 ms, four at a time.
    assert!(
        elapsed < Duration::from_millis(8 * 300 / 2),
        "took {elapsed:?}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn concurrent_read_modify_writes_lose_no_update() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    create(&host, "k", json!({"unlimited": true})).await;
    let events: Vec<Value> = (0..24)
        .map(|i| json!({"type": "incr", "payload": {"ms": 10}, "group": format!("g{i}")}))
        .collect();
    enqueue(&host, "k", json!(events)).await;
    let log = log_of(&host, "k", 24).await;
    let mut ids: Vec<i64> = log
        .iter()
        .map(|e| e["event_id"].as_i64().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 24, "every event committed once");
    assert_eq!(call(&host, ACTOR, "k", "counter", "[]").await, 24);
    host.shutdown().await;
}

#[tokio::test]
async fn actions_run_while_events_are_processed() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    create(&host, "k", json!({"concurrency": 4})).await;
    let events: Vec<Value> = (0..12)
        .map(|_| json!({"type": "incr", "payload": {"ms": 5}}))
        .collect();
    enqueue(&host, "k", json!(events)).await;
    // Actions that write meet the workers' transactions and are re-run.
    for _ in 0..20 {
        call(&host, ACTOR, "k", "heal", "[]").await;
    }
    log_of(&host, "k", 12).await;
    assert_eq!(call(&host, ACTOR, "k", "counter", "[]").await, 12);
    host.shutdown().await;
}

#[tokio::test]
async fn a_custom_selector_picks_and_keeps_working_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    create(&host, "k", json!({"mode": "custom", "prefer": "urgent"})).await;
    let batch = json!([{"type": "normal"}, {"type": "normal"}, {"type": "urgent"}]);
    enqueue(&host, "k", batch.clone()).await;
    let log = log_of(&host, "k", 3).await;
    assert_eq!(types(&log), ["urgent", "normal", "normal"]);
    let host = restart(host, &[queue_probe()]).await;
    enqueue(&host, "k", batch).await;
    let log = log_of(&host, "k", 6).await;
    assert_eq!(types(&log[3..]), ["urgent", "normal", "normal"]);
    assert_eq!(
        host.queue(ACTOR, "k").unwrap().policy.unwrap().mode,
        burrow::queue::QueueMode::Custom
    );
    host.shutdown().await;
}

#[tokio::test]
async fn a_selector_that_names_an_unknown_event_claims_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    create(&host, "k", json!({"mode": "custom", "bogus_select": true})).await;
    enqueue(&host, "k", json!([{"type": "x"}])).await;
    let error = eventually(LONG, "the selector's error", async || {
        host.queue(ACTOR, "k").unwrap().error
    })
    .await;
    assert!(error.contains("999999"), "{error}");
    assert!(error.contains("not one of the pending events"), "{error}");
    let view = host.queue(ACTOR, "k").unwrap();
    assert_eq!(view.pending_count, 1);
    assert!(
        call(&host, ACTOR, "k", "log", "[]")
            .await
            .as_array()
            .unwrap()
            .is_empty()
    );
    host.shutdown().await;
}

#[tokio::test]
async fn an_error_or_a_trap_keeps_the_event_for_a_later_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    create(&host, "k", json!({})).await;
    let begun = Instant::now();
    enqueue(
        &host,
        "k",
        json!([{"type": "fail", "payload": {"until": 3}}, {"type": "trap", "payload": {"until": 2}}]),
    )
    .await;
    let log = log_of(&host, "k", 2).await;
    // Only the successful attempts left a trace: the failed ones rolled back.
    let attempts: Vec<(&str, i64)> = log
        .iter()
        .map(|e| (e["type"].as_str().unwrap(), e["attempt"].as_i64().unwrap()))
        .collect();
    assert_eq!(attempts, [("fail", 3), ("trap", 2)]);
    // Waits of 20 ms, then 40 ms, before the fail's third attempt.
    assert!(begun.elapsed() >= Duration::from_millis(60));
    assert_eq!(host.queue(ACTOR, "k").unwrap().pending_count, 0);
    host.shutdown().await;
}

#[tokio::test]
async fn after_its_last_attempt_an_event_is_dead_lettered_then_requeued_or_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = queue_probe();
    spec.options.queue_max_attempts = 2;
    let host = start(dir.path(), &[spec.clone()]).await;
    create(&host, "k", json!({})).await;
    let wait = SendOptions {
        wait: Some(LONG),
        ..SendOptions::default()
    };
    let failing = json!({"until_healed": true}).to_string();
    let outcome = host
        .send(ACTOR, "k", "fail", &failing, wait.clone())
        .await
        .unwrap();
    let SendOutcome::DeadLettered { id, error } = outcome else {
        panic!("not dead-lettered: {outcome:?}");
    };
    assert!(error.contains("attempt 2 fails"), "{error}");
    let view = host.queue(ACTOR, "k").unwrap();
    assert_eq!(view.pending_count, 0);
    assert_eq!(view.dead_letters.len(), 1);
    assert_eq!(
        (view.dead_letters[0].id, view.dead_letters[0].attempts),
        (id, 2)
    );

    // Requeued after a fix, it is processed.
    call(&host, ACTOR, "k", "heal", "[]").await;
    host.requeue(ACTOR, "k", id).await.unwrap();
    let log = log_of(&host, "k", 1).await;
    assert_eq!(
        (log[0]["event_id"].as_i64(), log[0]["attempt"].as_i64()),
        (Some(id), Some(1))
    );
    assert!(host.queue(ACTOR, "k").unwrap().dead_letters.is_empty());
    assert!(matches!(
        host.requeue(ACTOR, "k", id).await,
        Err(Error::NoSuchEvent { .. })
    ));

    // Dropped, it is gone for good.
    let outcome = host.send(ACTOR, "k", "fail", "{}", wait).await.unwrap();
    let id = outcome.id();
    assert!(matches!(outcome, SendOutcome::DeadLettered { .. }));
    host.discard(ACTOR, "k", id).await.unwrap();
    assert!(host.queue(ACTOR, "k").unwrap().dead_letters.is_empty());
    assert!(matches!(
        host.discard(ACTOR, "k", id).await,
        Err(Error::NoSuchEvent { .. })
    ));
    host.shutdown().await;
}

#[tokio::test]
async fn a_sender_can_wait_for_the_result_or_time_out() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    let wait = |d: Duration| SendOptions {
        wait: Some(d),
        ..SendOptions::default()
    };
    // The first send creates the instance.
    let outcome = host.send(ACTOR, "k", "x", "{}", wait(LONG)).await.unwrap();
    let SendOutcome::Processed { id, result } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        serde_json::from_str::<Value>(&result).unwrap(),
        json!({"processed": id, "attempt": 1})
    );

    let slow = json!({"ms": 400}).to_string();
    let outcome = host
        .send(ACTOR, "k", "slow", &slow, wait(Duration::from_millis(50)))
        .await
        .unwrap();
    assert!(
        matches!(outcome, SendOutcome::TimedOut { .. }),
        "{outcome:?}"
    );
    // Timed out is not lost.
    log_of(&host, "k", 2).await;

    let queued = host
        .send(ACTOR, "k", "x", "{}", SendOptions::default())
        .await
        .unwrap();
    assert!(matches!(queued, SendOutcome::Queued { .. }));
    log_of(&host, "k", 3).await;
    host.shutdown().await;
}

#[tokio::test]
async fn bad_sends_are_refused_with_errors_that_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = queue_probe();
    spec.options.queue_max_payload = 64;
    spec.options.queue_max_pending = 2;
    let host = start(dir.path(), &[spec, crate::support::counter()]).await;
    let send = async |actor: &str, t: &str, payload: &str| {
        host.send(actor, "k", t, payload, SendOptions::default())
            .await
    };
    let big = json!("x".repeat(100)).to_string();
    let e = send(ACTOR, "x", &big).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::PayloadTooLarge {
                size: 102,
                limit: 64,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("queue_max_payload"));
    let e = send(ACTOR, "x", "{not json").await.unwrap_err();
    assert!(
        matches!(e, Error::InvalidEvent { .. }) && e.to_string().contains("not valid JSON"),
        "{e}"
    );
    let e = send(ACTOR, "", "1").await.unwrap_err();
    assert!(e.to_string().contains("event type"), "{e}");
    let e = send("nobody", "x", "1").await.unwrap_err();
    assert!(matches!(e, Error::UnknownActor(_)), "{e}");
    let e = send("counter", "x", "1").await.unwrap_err();
    assert!(matches!(e, Error::NoQueue(_)), "{e}");
    assert!(e.to_string().contains("burrow:actor/processor"), "{e}");

    // A queue at its limit refuses more, from a sender and from the guest.
    let slow = json!({"ms": 2000}).to_string();
    for _ in 0..2 {
        send(ACTOR, "slow", &slow).await.unwrap();
    }
    let e = send(ACTOR, "slow", &slow).await.unwrap_err();
    assert!(matches!(e, Error::QueueFull { limit: 2, .. }), "{e}");
    assert_eq!(e.http_status(), 429);
    let e = host
        .call(ACTOR, "k", "enqueue", r#"[[{"type": "x"}]]"#)
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("the queue is full (2 pending events)"),
        "{e}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn an_append_in_a_failed_call_is_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    create(&host, "k", json!({})).await;
    let e = host
        .call(ACTOR, "k", "enqueue_then_fail", r#"["ghost"]"#)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("after the append"), "{e}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(host.queue(ACTOR, "k").unwrap().pending_count, 0);
    assert!(
        call(&host, ACTOR, "k", "log", "[]")
            .await
            .as_array()
            .unwrap()
            .is_empty()
    );
    host.shutdown().await;
}

#[tokio::test]
async fn pending_events_resume_after_a_restart_without_any_call() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = queue_probe();
    // The retry is due long after the shutdown below.
    spec.options.queue_retry_base = Duration::from_millis(400);
    let host = start(dir.path(), &[spec.clone()]).await;
    create(&host, "k", json!({})).await;
    host.send(
        ACTOR,
        "k",
        "fail",
        &json!({"until": 2}).to_string(),
        SendOptions::default(),
    )
    .await
    .unwrap();
    eventually(LONG, "the first attempt", async || {
        let view = host.queue(ACTOR, "k").unwrap();
        (view.pending.first()?.attempts == 1).then_some(())
    })
    .await;
    let dir_path = host.data_dir().to_path_buf();
    host.shutdown().await;
    drop(host);

    // Nobody calls the instance: the index says its queue has work.
    let host = start(&dir_path, &[spec]).await;
    eventually(LONG, "the retry after the restart", async || {
        let view = host.queue(ACTOR, "k").unwrap();
        (view.pending_count == 0).then_some(())
    })
    .await;
    let log = call(&host, ACTOR, "k", "log", "[]").await;
    assert_eq!(log[0]["attempt"], 2);
    host.shutdown().await;
}

#[tokio::test]
async fn events_appended_by_process_are_processed_too() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    create(&host, "k", json!({})).await;
    let chain = json!([{"type": "append", "payload": {"events": [{"type": "second"}]}}]);
    enqueue(&host, "k", chain).await;
    let log = log_of(&host, "k", 2).await;
    assert_eq!(types(&log), ["append", "second"]);
    host.shutdown().await;
}

#[tokio::test]
async fn a_destroyed_instance_stops_processing_and_its_waiters_hear_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    create(&host, "k", json!({})).await;
    let slow = json!({"ms": 5000}).to_string();
    let waiting = {
        let host = host.clone();
        let slow = slow.clone();
        tokio::spawn(async move {
            let wait = SendOptions {
                wait: Some(LONG),
                ..SendOptions::default()
            };
            host.send(ACTOR, "k", "slow", &slow, wait).await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    host.destroy(ACTOR, "k").await.unwrap();
    let outcome = waiting.await.unwrap();
    assert!(
        matches!(outcome, Err(Error::NoSuchInstance { .. })),
        "{outcome:?}"
    );
    assert!(matches!(
        host.queue(ACTOR, "k"),
        Err(Error::NoSuchInstance { .. })
    ));
    host.shutdown().await;
}

#[tokio::test]
async fn an_event_waiting_for_a_retry_holds_its_place_in_its_group_only() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    create(&host, "k", json!({})).await;
    enqueue(
        &host,
        "k",
        json!([
            {"type": "fail", "payload": {"until": 3}, "group": "a"},
            {"type": "after", "group": "a"},
            {"type": "other", "group": "b"},
        ]),
    )
    .await;
    let log = log_of(&host, "k", 3).await;
    let order = types(&log);
    assert_eq!(
        order[0], "other",
        "group b does not wait for group a: {order:?}"
    );
    assert_eq!(&order[1..], ["fail", "after"], "group a keeps its order");
    host.shutdown().await;
}

#[tokio::test]
async fn many_groups_are_picked_by_a_scan_and_each_event_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    create(&host, "k", json!({})).await;
    // More groups than the pump looks at one by one.
    let events: Vec<Value> = (0..90)
        .map(|i| json!({"type": "incr", "payload": {"ms": 0}, "group": format!("g{i}")}))
        .collect();
    enqueue(&host, "k", json!(events)).await;
    let log = log_of(&host, "k", 90).await;
    let mut ids: Vec<i64> = log
        .iter()
        .map(|e| e["event_id"].as_i64().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 90);
    assert_eq!(call(&host, ACTOR, "k", "counter", "[]").await, 90);
    host.shutdown().await;
}

#[tokio::test]
async fn a_call_that_sleeps_past_its_deadline_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = queue_probe();
    spec.options.call_timeout = Duration::from_millis(300);
    spec.options.queue_max_attempts = 1;
    let host = start(dir.path(), &[spec]).await;
    let wait = SendOptions {
        wait: Some(LONG),
        ..SendOptions::default()
    };
    let begun = Instant::now();
    // `process` sleeps (a WASI clock wait in the host) for 5 s.
    let outcome = host
        .send(ACTOR, "k", "slow", &json!({"ms": 5000}).to_string(), wait)
        .await
        .unwrap();
    let SendOutcome::DeadLettered { error, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert!(error.contains("call timeout of 300 ms"), "{error}");
    assert!(
        begun.elapsed() < Duration::from_secs(3),
        "{:?}",
        begun.elapsed()
    );
    host.shutdown().await;
}

/// A wake that fails before the event's `process` ran is no attempt of
/// the event. Here the instance sleeps through the retry backoff of an
/// event's first, failed attempt, and its next wake fails (its wake hook,
/// as it could be the host finding no room): the event is retried later,
/// not dead-lettered after a second attempt that never happened.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_wake_is_not_an_attempt_of_the_event() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = queue_probe();
    spec.options.queue_max_attempts = 2;
    spec.options.queue_retry_base = Duration::from_millis(1000);
    spec.options.queue_retry_cap = Duration::from_millis(1000);
    spec.options.sleep_timeout = Duration::from_millis(100);
    let host = start(dir.path(), &[spec]).await;
    host.create(ACTOR, "flag", "{}").await.unwrap();
    host.create(ACTOR, "q", r#"{"fail_wake_once": "flag"}"#)
        .await
        .unwrap();
    // Its first attempt fails, the second succeeds.
    let events = json!([[{"type": "fail", "payload": {"until": 2}}]]);
    call(&host, ACTOR, "q", "enqueue", &events.to_string()).await;
    eventually(LONG, "the first attempt", async || {
        let view = host.queue(ACTOR, "q").unwrap();
        view.pending
            .first()
            .is_some_and(|e| e.attempts == 1)
            .then_some(())
    })
    .await;
    call(&host, ACTOR, "flag", "arm", "[]").await;
    let view = eventually(LONG, "the queue to drain", async || {
        let view = host.queue(ACTOR, "q").unwrap();
        (view.pending_count == 0).then_some(view)
    })
    .await;
    assert_eq!(
        call(&host, ACTOR, "flag", "take", "[]").await,
        json!(false),
        "the instance woke again during the backoff"
    );
    assert!(
        view.dead_letters.is_empty(),
        "dead-lettered without a second run: {:?}",
        view.dead_letters
    );
    let log = call(&host, ACTOR, "q", "log", "[]").await;
    let attempts: Vec<_> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["attempt"].clone())
        .collect();
    assert_eq!(attempts, [json!(2)]);
    host.shutdown().await;
}

/// Events due together are processed in runs, each run one commit; an
/// event that traps in a run fails alone: the events before it in the run
/// stay processed, and each event is processed once.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_of_events_commits_together_and_a_trap_in_it_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    create(&host, "run", json!({"mode": "fifo"})).await;
    let mut events: Vec<Value> = (0..12).map(|_| json!({"type": "ok"})).collect();
    // Traps at its first attempt, succeeds at its second.
    events[4] = json!({"type": "trap", "payload": {"until": 2}});
    let commits = host.commits();
    let ids = enqueue(&host, "run", json!(events)).await;
    let log = log_of(&host, "run", 12).await;
    let processed: Vec<(i64, i64)> = log
        .iter()
        .map(|e| {
            (
                e["event_id"].as_i64().unwrap(),
                e["attempt"].as_i64().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(i64, i64)> = ids
        .iter()
        .map(|&id| (id, if id == ids[4] { 2 } else { 1 }))
        .collect();
    assert_eq!(processed, expected);
    let queue = host.queue(ACTOR, "run").unwrap();
    assert_eq!((queue.pending_count, queue.dead_letters.len()), (0, 0));
    // The append, the trap's record and a few runs: fewer commits than
    // events.
    let used = host.commits() - commits;
    assert!(used < 12, "{used} commits for 12 events: no run");
}

/// An event that reached another instance ends its run, which commits
/// before the next event runs: what the event did there is not undone by
/// a rollback here, so no later event of the run may cost it its commit.
#[tokio::test(flavor = "multi_thread")]
async fn an_event_that_reaches_another_instance_ends_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    create(&host, "flag", json!({})).await;
    create(&host, "run", json!({"mode": "fifo"})).await;
    let events: Vec<Value> = (0..6)
        .map(|_| json!({"type": "take", "payload": {"flag": "flag"}}))
        .collect();
    let commits = host.commits();
    enqueue(&host, "run", json!(events)).await;
    log_of(&host, "run", 6).await;
    // The append, each call's commit on the flag, and each event's own.
    let used = host.commits() - commits;
    assert!(
        used >= 1 + 6 + 6,
        "{used} commits for 6 events that each reached out"
    );
    host.shutdown().await;
}

/// The host's tables in the database of (`actor`, `key`), read with the
/// host stopped.
fn host_tables(dir: &std::path::Path, actor: &str, key: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(burrow::instance_path(dir, actor, key)).unwrap();
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name LIKE '\\_burrow%' ESCAPE '\\' ORDER BY name")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// An instance carries only the host tables it uses: a queue actor's
/// gets its policy's table when it records one, and its events' tables
/// with its first append, in that append's transaction (an append that
/// rolls back leaves none).
#[tokio::test(flavor = "multi_thread")]
async fn a_queue_gets_its_tables_with_its_first_append() {
    let dir = tempfile::tempdir().unwrap();
    let actors = [queue_probe()];
    let host = start(dir.path(), &actors).await;
    create(&host, "k", json!({})).await;
    let e = host
        .call(ACTOR, "k", "enqueue_then_fail", r#"["ghost"]"#)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("after the append"), "{e}");
    // Read while no table exists: an empty queue.
    let view = host.queue(ACTOR, "k").unwrap();
    assert_eq!((view.pending_count, view.dead_letters.len()), (0, 0));
    host.shutdown().await;
    drop(host);
    let before = ["_burrow_instance", "_burrow_queue_policy", "_burrow_state"];
    assert_eq!(host_tables(dir.path(), ACTOR, "k"), before);

    let host = start(dir.path(), &actors).await;
    enqueue(&host, "k", json!([{ "type": "incr" }])).await;
    assert_eq!(log_of(&host, "k", 1).await[0]["type"], "incr");
    host.shutdown().await;
    drop(host);
    assert_eq!(
        host_tables(dir.path(), ACTOR, "k"),
        [
            "_burrow_dead_letter",
            "_burrow_instance",
            "_burrow_queue",
            "_burrow_queue_policy",
            "_burrow_state"
        ]
    );
}
