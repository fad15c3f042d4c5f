//! Destroy is final: nothing of the old instance runs, is processed or
//! touches the files of a new instance with the same key.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use burrow::Host;
use burrow::manifest::ActorSpec;
use serde_json::{Value, json};

use crate::support::*;

const ACTOR: &str = "queue-probe";
const LONG: Duration = Duration::from_secs(30);

/// The queue probe with four events at a time, and a dead letter at the
/// first failure.
fn probe_of_dead_letters() -> ActorSpec {
    let mut spec = queue_probe();
    spec.options.queue_max_attempts = 1;
    spec
}

async fn log(host: &Host, key: &str) -> Vec<Value> {
    call(host, ACTOR, key, "log", "[]")
        .await
        .as_array()
        .unwrap()
        .clone()
}

/// A new connection (which reads the WAL by its name) sees the one row
/// the new instance committed to `healed`.
fn a_new_connection_sees_the_heal(host: &Host, key: &str, round: usize) {
    let inspection = host
        .inspect(ACTOR, key)
        .unwrap_or_else(|e| panic!("round {round}: {e}"));
    let healed = inspection
        .tables
        .iter()
        .find(|t| t.name == "healed")
        .expect("the table exists");
    assert_eq!(
        healed.total_rows, 1,
        "round {round}: a new connection misses what the new instance committed"
    );
}

/// An instance with `n` dead letters that succeed once requeued.
async fn dead_letters(host: &Host, key: &str, n: usize) -> Vec<i64> {
    host.create(ACTOR, key, r#"{"concurrency": 4}"#)
        .await
        .unwrap();
    let events: Vec<Value> = (0..n)
        .map(|_| json!({"type": "fail", "payload": {"until_healed": true}}))
        .collect();
    call(host, ACTOR, key, "enqueue", &json!([events]).to_string()).await;
    let ids = eventually(LONG, "the dead letters", async || {
        let view = host.queue(ACTOR, key).unwrap();
        (view.pending_count == 0 && view.dead_letters.len() == n)
            .then(|| view.dead_letters.iter().map(|d| d.id).collect::<Vec<_>>())
    })
    .await;
    call(host, ACTOR, key, "heal", "[]").await;
    ids
}

/// Requeues (and so starts pumps) while the instance is destroyed, then
/// creates it anew at once: the new instance never sees an old event, and
/// what it commits survives a restart (the old instance's connections,
/// closed late, would remove its `-wal`).
#[tokio::test(flavor = "multi_thread")]
async fn a_destroyed_instance_leaves_nothing_running_in_its_successor() {
    let dir = tempfile::tempdir().unwrap();
    let actors = [probe_of_dead_letters()];
    let mut host = start(dir.path(), &actors).await;
    for round in 0..6 {
        let key = format!("k{round}");
        let ids = dead_letters(&host, &key, 40).await;
        let stop = Arc::new(AtomicBool::new(false));
        let requeuer = {
            let (host, key, stop) = (host.clone(), key.clone(), stop.clone());
            tokio::spawn(async move {
                for id in ids.iter().cycle() {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let _ = host.requeue(ACTOR, &key, *id).await;
                    tokio::task::yield_now().await;
                }
            })
        };
        eventually(LONG, "processing", async || {
            (log(&host, &key).await.len() >= 3).then_some(())
        })
        .await;
        host.destroy(ACTOR, &key).await.unwrap();
        host.create(ACTOR, &key, r#"{"concurrency": 4}"#)
            .await
            .unwrap();
        stop.store(true, Ordering::Relaxed);
        requeuer.await.unwrap();
        // The new instance commits a write of its own.
        call(&host, ACTOR, &key, "heal", "[]").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            log(&host, &key).await,
            Vec::<Value>::new(),
            "round {round}: an old event was processed in the new instance"
        );
        let view = host.queue(ACTOR, &key).unwrap();
        assert_eq!(view.pending_count, 0, "round {round}");
        assert!(view.dead_letters.is_empty(), "round {round}");
        host = restart(host, &actors).await;
        let healed = host
            .inspect(ACTOR, &key)
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let healed = healed
            .tables
            .iter()
            .find(|t| t.name == "healed")
            .expect("the table exists");
        assert_eq!(
            healed.rows.len(),
            1,
            "round {round}: the new instance lost a committed write"
        );
        assert_eq!(log(&host, &key).await, Vec::<Value>::new(), "round {round}");
    }
    host.shutdown().await;
}

/// Destroy stops a busy pump whose workers take a while to go (their sleep
/// hooks): requeues meanwhile must not start a new pump on the old files.
/// Its workers, closed after the instance is created anew, would delete
/// the new instance's WAL, and a new connection would miss what the new
/// instance committed.
#[tokio::test(flavor = "multi_thread")]
async fn requeues_during_destroy_start_nothing_on_the_old_files() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe_of_dead_letters()]).await;
    for round in 0..3 {
        let key = format!("k{round}");
        let config = r#"{"concurrency": 4, "sleep_hook_ms": 150}"#;
        host.create(ACTOR, &key, config).await.unwrap();
        // Events that always fail: requeued, each is a dead letter again.
        let events: Vec<Value> = (0..40).map(|_| json!({"type": "fail"})).collect();
        call(&host, ACTOR, &key, "enqueue", &json!([events]).to_string()).await;
        let ids = eventually(LONG, "the dead letters", async || {
            let view = host.queue(ACTOR, &key).unwrap();
            (view.pending_count == 0 && view.dead_letters.len() == 40)
                .then(|| view.dead_letters.iter().map(|d| d.id).collect::<Vec<_>>())
        })
        .await;
        let stop = Arc::new(AtomicBool::new(false));
        let requeuers: Vec<_> = ids
            .chunks(10)
            .map(|ids| {
                let (host, key, stop, ids) =
                    (host.clone(), key.clone(), stop.clone(), ids.to_vec());
                tokio::spawn(async move {
                    for id in ids.iter().cycle() {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        let _ = host.requeue(ACTOR, &key, *id).await;
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        host.destroy(ACTOR, &key).await.unwrap();
        host.create(ACTOR, &key, r#"{"concurrency": 4}"#)
            .await
            .unwrap();
        call(&host, ACTOR, &key, "heal", "[]").await;
        stop.store(true, Ordering::Relaxed);
        for requeuer in requeuers {
            requeuer.await.unwrap();
        }
        // Time for anything left of the old instance to end.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        a_new_connection_sees_the_heal(&host, &key, round);
        let view = host.queue(ACTOR, &key).unwrap();
        assert_eq!(view.pending_count, 0, "round {round}: an old event came in");
        assert!(
            view.dead_letters.is_empty(),
            "round {round}: an old event came in"
        );
    }
    host.shutdown().await;
}

/// Destroy waits while the instance's pump stops (its workers' sleep
/// hooks take a while). An append committed meanwhile must not start a
/// new pump on the old files: its workers would go on processing old
/// events past the destroy, its main runner would process them in the new
/// instance, and its connections, closed after the instance is created
/// anew, would delete the new instance's WAL.
#[tokio::test(flavor = "multi_thread")]
async fn an_append_while_destroy_stops_the_pump_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let actors = [queue_probe()];
    let mut host = start(dir.path(), &actors).await;
    for round in 0..2 {
        let key = format!("k{round}");
        let config = r#"{"concurrency": 4, "sleep_hook_ms": 400}"#;
        host.create(ACTOR, &key, config).await.unwrap();
        let slow: Vec<Value> = (0..8)
            .map(|_| json!({"type": "slow", "payload": {"ms": 50}}))
            .collect();
        let slow = json!([slow]).to_string();
        call(&host, ACTOR, &key, "enqueue", &slow).await;
        // Workers are idle.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let destroy = {
            let (host, key) = (host.clone(), key.clone());
            tokio::spawn(async move { host.destroy(ACTOR, &key).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Committed while destroy waits for the workers' sleep hooks, or
        // refused; either way, its events belong to the old instance.
        let _ = host.call(ACTOR, &key, "enqueue", &slow).await;
        destroy.await.unwrap().unwrap();
        host.create(ACTOR, &key, r#"{"concurrency": 4}"#)
            .await
            .unwrap();
        call(&host, ACTOR, &key, "heal", "[]").await;
        // Time for anything left of the old instance to end.
        tokio::time::sleep(Duration::from_millis(3000)).await;
        assert_eq!(
            log(&host, &key).await,
            Vec::<Value>::new(),
            "round {round}: an old event was processed in the new instance"
        );
        let view = host.queue(ACTOR, &key).unwrap();
        assert_eq!(view.pending_count, 0, "round {round}: an old event came in");
        a_new_connection_sees_the_heal(&host, &key, round);
        host = restart(host, &actors).await;
        assert_eq!(
            call(&host, ACTOR, &key, "rows", r#"["healed"]"#).await,
            json!(1),
            "round {round}: the new instance lost a committed write"
        );
    }
    host.shutdown().await;
}
