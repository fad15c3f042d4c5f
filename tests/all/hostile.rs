//! Hostile `process` calls: each attack fails its own attempt, while other
//! instances keep answering and committed data stays as it was.

use std::time::{Duration, Instant};

use burrow::{SendOptions, SendOutcome};
use serde_json::json;

use crate::support::{call, counter, eventually, queue_probe, start};

const ACTOR: &str = "queue-probe";

fn summary(latencies: &mut [Duration]) -> String {
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    format!(
        "{} calls, p50 {:?}, p99 {:?}, max {:?}",
        latencies.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn attacks_in_process_fail_alone_while_other_instances_answer() {
    let dir = tempfile::tempdir().unwrap();
    let mut attacked = queue_probe();
    attacked.options.call_timeout = Duration::from_millis(500);
    attacked.options.memory_limit = 32 << 20;
    attacked.options.queue_max_attempts = 1;
    let host = start(dir.path(), &[attacked, counter()]).await;
    let wait = || SendOptions {
        wait: Some(Duration::from_secs(20)),
        ..SendOptions::default()
    };

    // Committed before the attacks: one processed event, the counter at 0.
    let before = host
        .send(ACTOR, "k", "record", "null", wait())
        .await
        .unwrap();
    assert!(
        matches!(before, SendOutcome::Processed { .. }),
        "{before:?}"
    );

    // The bystander's latency with no attack going on, for comparison.
    let mut quiet = Vec::new();
    for _ in 0..200 {
        let begun = Instant::now();
        call(&host, "counter", "quiet", "increment", "[1]").await;
        quiet.push(begun.elapsed());
    }
    eprintln!("bystander with no attack: {}", summary(&mut quiet));

    // Another instance is called without pause during every attack.
    let bystander = {
        let host = host.clone();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut latencies = Vec::new();
            while stopped.try_recv().is_err() {
                let begun = Instant::now();
                call(&host, "counter", "bystander", "increment", "[1]").await;
                latencies.push(begun.elapsed());
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            latencies
        });
        (stop, task)
    };

    let big = burrow::config::MAX_RESULT_BYTES + 1;
    let attacks = [
        ("spin", json!(null), "call timeout of 500 ms"),
        ("bomb", json!(null), "trapped"),
        ("recurse", json!(null), "call stack exhausted"),
        ("big", json!({"ms": big}), "the limit is"),
        ("write_then_panic", json!(null), "trapped"),
        ("write_then_spin", json!(null), "call timeout of 500 ms"),
    ];
    for (attack, payload, expected) in &attacks {
        let begun = Instant::now();
        let outcome = host
            .send(ACTOR, "k", attack, &payload.to_string(), wait())
            .await
            .unwrap();
        let SendOutcome::DeadLettered { error, .. } = outcome else {
            panic!("{attack}: {outcome:?}")
        };
        assert!(error.contains(*expected), "{attack}: {error}");
        let first_line = error.lines().next().unwrap_or_default();
        eprintln!("{attack}: failed after {:?}: {first_line}", begun.elapsed());
    }

    let (stop, task) = bystander;
    stop.send(()).unwrap();
    let mut latencies = task.await.unwrap();
    eprintln!("bystander during the attacks: {}", summary(&mut latencies));
    assert!(latencies.len() >= 20, "{} calls", latencies.len());
    let slowest = latencies.iter().max().unwrap();
    assert!(*slowest < Duration::from_secs(1), "max {slowest:?}");
    let count = latencies.len() as i64;
    assert_eq!(
        call(&host, "counter", "bystander", "get", "[]").await,
        json!(count)
    );

    // Nothing an attack wrote was kept; the replaced instance serves again.
    let log = call(&host, ACTOR, "k", "log", "[]").await;
    let log = log.as_array().unwrap();
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0]["type"], "record");
    assert_eq!(call(&host, ACTOR, "k", "counter", "[]").await, json!(0));
    let after = host
        .send(ACTOR, "k", "record", "null", wait())
        .await
        .unwrap();
    assert!(matches!(after, SendOutcome::Processed { .. }), "{after:?}");
    let view = host.queue(ACTOR, "k").unwrap();
    assert_eq!(view.dead_letters.len(), attacks.len());
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_selector_that_tries_to_write_is_refused_at_every_import() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    host.create(
        ACTOR,
        "k",
        &json!({"mode": "custom", "select_writes": true}).to_string(),
    )
    .await
    .unwrap();
    call(
        &host,
        ACTOR,
        "k",
        "enqueue",
        &json!([[{"type": "a"}]]).to_string(),
    )
    .await;
    eventually(Duration::from_secs(20), "the event processed", async || {
        let log = call(&host, ACTOR, "k", "log", "[]").await;
        (log.as_array().unwrap().len() == 1).then_some(())
    })
    .await;
    let heard = call(&host, ACTOR, "k", "select_errors", "[]").await;
    let heard: Vec<String> = serde_json::from_value(heard).unwrap();
    assert_eq!(heard.len(), 4, "{heard:?}");
    for (what, error) in [
        "db.execute",
        "db.execute-batch",
        "state.set",
        "queue.append",
    ]
    .iter()
    .zip(&heard)
    {
        assert!(
            error.contains("selector may only read") && error.contains(what),
            "{what}: {error}"
        );
    }
    // Nothing the selector tried is there: no row, no state change, no event.
    let view = host.queue(ACTOR, "k").unwrap();
    assert!(view.pending.is_empty(), "{:?}", view.pending);
    let state = host.inspect(ACTOR, "k").unwrap().state;
    assert_eq!(state["select_writes"], true);
    host.shutdown().await;
}
