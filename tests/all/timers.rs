//! The host's timer: schedules, workflow sleeps and queue resumption make
//! progress at any `max_awake` and beside busy pumps; marks of removed
//! actors and of runs that fail hold nobody back.

use std::path::Path;
use std::time::Duration;

use burrow::Host;
use burrow::manifest::ActorSpec;
use burrow::workflow::WorkflowStatus;
use serde_json::{Value, json};

use crate::support::*;

const LONG: Duration = Duration::from_secs(30);

fn reminder(name: &str) -> ActorSpec {
    ActorSpec::new(name, programs::REMINDER)
}

async fn start_with(dir: &Path, max_awake: usize, actors: &[ActorSpec]) -> Host {
    let config = burrow::HostConfig {
        max_awake,
        ..config(dir)
    };
    Host::start(config, actors).await.expect("the host starts")
}

/// Calls `action`, again while the host is at `max_awake` (a caller may
/// meet every awake instance busy with background work).
async fn call_when_room(host: &Host, actor: &str, key: &str, action: &str, args: &str) -> Value {
    eventually(
        LONG,
        &format!("{actor}/{key}.{action} to succeed"),
        async || match host.call(actor, key, action, args).await {
            Ok(result) => Some(json(&result)),
            Err(e) if e.code() == "overloaded" => None,
            Err(e) => panic!("{actor}/{key}.{action}({args}) failed: {e}"),
        },
    )
    .await
}

async fn fired(host: &Host, actor: &str, key: &str) -> Vec<Value> {
    call_when_room(host, actor, key, "fired", "[]")
        .await
        .as_array()
        .unwrap()
        .clone()
}

/// Waits until every key of `keys` has fired one reminder.
async fn all_fire(host: &Host, actor: &str, keys: &[String]) {
    for key in keys {
        let what = format!("the reminder of {actor}/{key} to fire");
        eventually(LONG, &what, async || {
            (!fired(host, actor, key).await.is_empty()).then_some(())
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reminder_fires_at_max_awake_1() {
    let dir = tempfile::tempdir().unwrap();
    let host = start_with(dir.path(), 1, &[reminder("reminder")]).await;
    call_when_room(&host, "reminder", "k", "remind", r#"["tea", 300]"#).await;
    all_fire(&host, "reminder", &["k".into()]).await;
    host.shutdown().await;
}

/// Many instances due at once, at `max_awake` 1 and 2: every one of them
/// runs (schedules, workflow sleeps, queues left pending by the last run).
#[tokio::test(flavor = "multi_thread")]
async fn many_due_instances_all_progress_at_max_awake_1_and_2() {
    for max_awake in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let actors = [reminder("reminder"), workflow_probe(), queue_probe()];
        let keys: Vec<String> = (0..12).map(|n| format!("k{n}")).collect();
        // Queue events left pending by a host that stopped at once.
        let host = start(dir.path(), &actors).await;
        for key in &keys {
            let events = json!([[{"type": "slow", "payload": {"ms": 300}}, {"type": "e"}]]);
            call(&host, "queue-probe", key, "enqueue", &events.to_string()).await;
        }
        host.shutdown().await;
        drop(host);

        let host = start_with(dir.path(), max_awake, &actors).await;
        for key in &keys {
            call_when_room(&host, "reminder", key, "remind", r#"["tea", 200]"#).await;
            let config = json!({"steps": 2, "sleep_ms": 1200}).to_string();
            let what = format!("the creation of workflow-probe/{key}");
            eventually(LONG, &what, async || {
                match host.create("workflow-probe", key, &config).await {
                    Ok(()) => Some(()),
                    Err(e) if e.code() == "overloaded" => None,
                    Err(e) => panic!("{what}: {e}"),
                }
            })
            .await;
        }
        all_fire(&host, "reminder", &keys).await;
        for key in &keys {
            let what = format!("the workflow of {key} at max_awake {max_awake}");
            eventually(LONG, &what, async || {
                let view = host.workflow("workflow-probe", key).unwrap();
                (view.record.status == WorkflowStatus::Completed).then_some(())
            })
            .await;
            let what = format!("the queue of {key} at max_awake {max_awake}");
            eventually(LONG, &what, async || {
                let log = call_when_room(&host, "queue-probe", key, "log", "[]").await;
                (log.as_array().unwrap().len() == 2).then_some(())
            })
            .await;
        }
        host.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn schedules_fire_while_pumps_are_busy() {
    let dir = tempfile::tempdir().unwrap();
    let host = start_with(dir.path(), 2, &[reminder("reminder"), queue_probe()]).await;
    // About 10 s of work for one pump.
    let events: Vec<Value> = (0..200)
        .map(|_| json!({"type": "slow", "payload": {"ms": 50}}))
        .collect();
    call(
        &host,
        "queue-probe",
        "busy",
        "enqueue",
        &json!([events]).to_string(),
    )
    .await;
    call(&host, "reminder", "k", "remind", r#"["tea", 200]"#).await;
    all_fire(&host, "reminder", &["k".into()]).await;
    let queue = host.queue("queue-probe", "busy").unwrap();
    assert!(queue.pending_count > 0, "the pump was no longer busy");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn marks_of_removed_actors_hold_nobody_back() {
    let dir = tempfile::tempdir().unwrap();
    let both = [reminder("old"), reminder("reminder")];
    let host = start_with(dir.path(), 2, &both).await;
    for n in 0..4 {
        call(&host, "old", &format!("k{n}"), "remind", r#"["tea", 100]"#).await;
    }
    host.shutdown().await;
    drop(host);
    tokio::time::sleep(Duration::from_millis(200)).await;

    // `old` is gone from the manifest; its marks are due and stay.
    let host = start_with(dir.path(), 2, &[reminder("reminder")]).await;
    call(&host, "reminder", "k", "remind", r#"["tea", 100]"#).await;
    all_fire(&host, "reminder", &["k".into()]).await;
    host.shutdown().await;
    drop(host);

    // Back in the manifest, its reminders fire.
    let host = start_with(dir.path(), 2, &both).await;
    let keys: Vec<String> = (0..4).map(|n| format!("k{n}")).collect();
    all_fire(&host, "old", &keys).await;
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_instance_that_cannot_start_holds_nobody_back() {
    let dir = tempfile::tempdir().unwrap();
    let actors = [reminder("reminder")];
    let host = start_with(dir.path(), 2, &actors).await;
    call(&host, "reminder", "broken", "remind", r#"["tea", 100]"#).await;
    host.shutdown().await;
    drop(host);
    // Its database is no longer one: every run of its schedules fails.
    let path = burrow::instance_path(dir.path(), "reminder", "broken");
    std::fs::write(&path, vec![b'x'; 8192]).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;

    let host = start_with(dir.path(), 2, &actors).await;
    for n in 0..3 {
        let key = format!("k{n}");
        call(&host, "reminder", &key, "remind", r#"["tea", 100]"#).await;
        all_fire(&host, "reminder", &[key]).await;
    }
    host.shutdown().await;
}
