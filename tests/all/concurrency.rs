//! Calls to different instances run in parallel; calls to one are serialized.

use std::time::{Duration, Instant};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn different_instances_run_in_parallel() {
    let dir = tempfile::tempdir().unwrap();
    let mut spinner = probe();
    spinner.options.call_timeout = Duration::from_millis(800);
    let host = start(dir.path(), &[spinner]).await;
    for key in ["a", "b"] {
        call(&host, "probe", key, "count", "[]").await;
    }
    // Two spins of 0.8 s on two instances end together, not one after the other.
    let started = Instant::now();
    let spins: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|key| {
            let host = host.clone();
            tokio::spawn(async move { host.call("probe", key, "spin", "[]").await })
        })
        .collect();
    for spin in spins {
        assert_eq!(spin.await.unwrap().unwrap_err().code(), "timeout");
    }
    let both = started.elapsed();
    assert!(
        both < Duration::from_millis(1500),
        "two instances took {both:?}"
    );

    // Two spins on one instance run one after the other.
    let started = Instant::now();
    let spins: Vec<_> = (0..2)
        .map(|_| {
            let host = host.clone();
            tokio::spawn(async move { host.call("probe", "a", "spin", "[]").await })
        })
        .collect();
    for spin in spins {
        assert_eq!(spin.await.unwrap().unwrap_err().code(), "timeout");
    }
    let serial = started.elapsed();
    assert!(
        serial >= Duration::from_millis(1600),
        "one instance took only {serial:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn past_the_awake_limit_the_least_recently_used_instance_sleeps() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.max_awake = 3;
    let host = burrow::Host::start(config, &[probe()]).await.unwrap();
    for key in ["a", "b", "c", "d", "e"] {
        call(&host, "probe", key, "add", "[\"x\"]").await;
        assert!(host.awake_count() <= 3);
    }
    // "a" slept to make room, and wakes with its data.
    assert_eq!(
        call(&host, "probe", "a", "count", "[]").await,
        serde_json::json!(1)
    );
    let hooks = call(&host, "probe", "a", "hooks", "[]").await;
    assert_eq!(
        hooks,
        serde_json::json!(["migrate", "create", "wake", "sleep", "migrate", "wake"])
    );
}

/// Many more distinct instances in flight over time than may be awake:
/// each call that needs room makes it (the least recently used idle
/// instance sleeps) or waits for it, and none is refused while idle
/// instances could give room.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_new_instances_past_the_awake_limit_is_never_refused() {
    const KEYS: usize = 20_000;
    const IN_FLIGHT: usize = 64;
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.max_awake = 100;
    let host = burrow::Host::start(config, &[counter()]).await.unwrap();
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let workers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (host, next) = (host.clone(), next.clone());
            tokio::spawn(async move {
                let mut failures = Vec::new();
                loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if n >= KEYS {
                        return failures;
                    }
                    let key = format!("k{n}");
                    match host
                        .call("counter", &key, "increment", &format!("[{n}]"))
                        .await
                    {
                        Ok(value) if json(&value) == serde_json::json!(n) => {}
                        other => failures.push(format!("{key}: {other:?}")),
                    }
                }
            })
        })
        .collect();
    let mut failures = Vec::new();
    for worker in workers {
        failures.extend(worker.await.unwrap());
    }
    assert!(
        failures.is_empty(),
        "{} of {KEYS} calls failed, the first: {:?}",
        failures.len(),
        &failures[..failures.len().min(3)]
    );
    assert!(host.awake_count() <= 100);
    // Every instance kept its value, asleep or awake.
    for n in (0..KEYS).step_by(997) {
        let key = format!("k{n}");
        assert_eq!(
            call(&host, "counter", &key, "increment", "[0]").await,
            serde_json::json!(n),
            "{key}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn instances_run_the_same_with_on_demand_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.pooling = false;
    let host = burrow::Host::start(config, &[counter()]).await.unwrap();
    for expected in 1..=3 {
        assert_eq!(
            call(&host, "counter", "od", "increment", "[1]").await,
            serde_json::json!(expected)
        );
    }
}
