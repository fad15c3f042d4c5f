//! Schedules: actions that run later, once, across sleep and restarts.

use std::time::Duration;

use burrow::manifest::ActorSpec;
use serde_json::{Value, json};

use crate::support::*;

/// The test actor for schedules, calls and connections.
pub fn talk_probe() -> ActorSpec {
    ActorSpec::new("talk-probe", programs::TALK_PROBE)
}

const ACTOR: &str = "talk-probe";

async fn notes(host: &burrow::Host, key: &str) -> Value {
    call(host, ACTOR, key, "notes", "[]").await
}

async fn pending(host: &burrow::Host, key: &str) -> Vec<Value> {
    let pending = call(host, ACTOR, key, "pending", "[]").await;
    pending.as_array().unwrap().clone()
}

/// Waits until the instance has `expected` notes, then a while longer to
/// see that nothing runs twice.
async fn settle(host: &burrow::Host, key: &str, expected: Value) {
    eventually(
        Duration::from_secs(10),
        "the schedules to run",
        async || (notes(host, key).await == expected).then_some(()),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(notes(host, key).await, expected, "a schedule ran twice");
    assert_eq!(pending(host, key).await, Vec::<Value>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn scheduled_actions_run_once_in_the_order_of_their_times() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe()]).await;
    let later = call(&host, ACTOR, "k", "later", r#"[400, "note", ["late"]]"#).await;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let soon = call(
        &host,
        ACTOR,
        "k",
        "later_at",
        &json!([now_ms + 200, "note", ["soon"]]).to_string(),
    )
    .await;
    let pending = pending(&host, "k").await;
    assert_eq!(pending.len(), 2);
    assert_eq!(pending[0][0], soon, "soonest first");
    assert_eq!(pending[0][1], "note");
    assert_eq!(pending[0][2], r#"["soon"]"#);
    assert_eq!(pending[0][4], Value::Null, "not recurring");
    assert_eq!(pending[1][0], later);
    assert_eq!(notes(&host, "k").await, json!([]), "nothing runs early");
    settle(&host, "k", json!(["soon", "late"])).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schedule_rolled_back_or_cancelled_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe()]).await;
    let e = host
        .call(ACTOR, "k", "later_then_fail", "[0]")
        .await
        .unwrap_err();
    assert_eq!(e.code(), "action-failed");
    let id = call(&host, ACTOR, "k", "later", r#"[200, "note", ["x"]]"#).await;
    let args = json!([id]).to_string();
    assert_eq!(call(&host, ACTOR, "k", "cancel", &args).await, true);
    assert_eq!(call(&host, ACTOR, "k", "cancel", &args).await, false);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(notes(&host, "k").await, json!([]));
    assert!(pending(&host, "k").await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_scheduled_action_is_rolled_back_and_not_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe()]).await;
    call(
        &host,
        ACTOR,
        "k",
        "later",
        r#"[0, "note_then_fail", ["z"]]"#,
    )
    .await;
    call(&host, ACTOR, "k", "later", r#"[0, "no_such_action", []]"#).await;
    call(&host, ACTOR, "k", "later", r#"[50, "note", ["after"]]"#).await;
    settle(&host, "k", json!(["after"])).await;

    // A recurring one that fails goes on at its next time.
    call(
        &host,
        ACTOR,
        "k",
        "every",
        r#"[100, "note_then_fail", ["r"]]"#,
    )
    .await;
    let first = pending(&host, "k").await[0][3].as_i64().unwrap();
    eventually(Duration::from_secs(10), "a few failed runs", async || {
        let next = pending(&host, "k").await[0][3].as_i64().unwrap();
        (next >= first + 300).then_some(())
    })
    .await;
    assert_eq!(notes(&host, "k").await, json!(["after"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_schedules_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe()]).await;
    let refusal = async |args: &str| {
        let e = host.call(ACTOR, "k", "later", args).await.unwrap_err();
        e.to_string()
    };
    let e = refusal(r#"[0, "", []]"#).await;
    assert!(
        e.contains("schedule.after: the action name must be 1 to 256 bytes"),
        "{e}"
    );
    let e = refusal(r#"[0, "note", {"a": 1}]"#).await;
    assert!(e.contains("must serialize as a JSON array"), "{e}");
    assert!(pending(&host, "k").await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schedule_wakes_a_sleeping_instance() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = talk_probe();
    spec.options.sleep_timeout = Duration::from_millis(50);
    let host = start(dir.path(), &[spec]).await;
    call(&host, ACTOR, "k", "later", r#"[700, "note", ["woken"]]"#).await;
    eventually(
        Duration::from_secs(5),
        "the instance to sleep",
        async || (host.awake_count() == 0).then_some(()),
    )
    .await;
    eventually(
        Duration::from_secs(5),
        "the schedule to wake it",
        async || (host.awake_count() == 1).then_some(()),
    )
    .await;
    settle(&host, "k", json!(["woken"])).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn schedules_survive_a_restart_and_one_due_meanwhile_runs_once_the_host_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let actors = [talk_probe()];
    let host = start(dir.path(), &actors).await;
    call(
        &host,
        ACTOR,
        "k",
        "later",
        r#"[150, "note", ["while down"]]"#,
    )
    .await;
    call(
        &host,
        ACTOR,
        "k",
        "later",
        r#"[1500, "note", ["after restart"]]"#,
    )
    .await;
    call(&host, ACTOR, "other", "later_many", r#"[100, 20, "n", 0]"#).await;
    let dir_path = host.data_dir().to_path_buf();
    host.shutdown().await;
    drop(host);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let host = start(&dir_path, &actors).await;
    eventually(
        Duration::from_secs(5),
        "the schedule due while down",
        async || (notes(&host, "k").await == json!(["while down"])).then_some(()),
    )
    .await;
    settle(&host, "k", json!(["while down", "after restart"])).await;
    let many: Vec<Value> = (0..20).map(|n| json!(format!("n{n}"))).collect();
    settle(&host, "other", Value::Array(many)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recurring_schedule_runs_at_each_interval_until_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let actors = [talk_probe()];
    let host = start(dir.path(), &actors).await;
    let e = host
        .call(ACTOR, "k", "every", r#"[50, "note", ["tick"]]"#)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("at least 100 ms"), "{e}");
    let id = call(&host, ACTOR, "k", "every", r#"[100, "note", ["tick"]]"#).await;
    let count = async |host: &burrow::Host| notes(host, "k").await.as_array().unwrap().len();
    eventually(Duration::from_secs(10), "three runs", async || {
        (count(&host).await >= 3).then_some(())
    })
    .await;
    let left = pending(&host, "k").await;
    assert_eq!(left.len(), 1, "it stays pending");
    assert_eq!(left[0][4], 100);
    // It goes on across a restart.
    let host = restart(host, &actors).await;
    let before = count(&host).await;
    eventually(
        Duration::from_secs(10),
        "runs after the restart",
        async || (count(&host).await >= before + 2).then_some(()),
    )
    .await;
    let args = json!([id]).to_string();
    assert_eq!(call(&host, ACTOR, "k", "cancel", &args).await, true);
    let stopped = count(&host).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(count(&host).await, stopped, "it ran after its cancel");
    assert!(pending(&host, "k").await.is_empty());
}
