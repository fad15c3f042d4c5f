//! Every action is one transaction: an error or a trap rolls back rows and
//! state alike; calls to one instance are serialized.

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn an_action_error_rolls_back_rows_and_state() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    assert_eq!(
        call(&host, "probe", "p", "add", "[\"kept\"]").await,
        json!(1)
    );
    assert_eq!(call(&host, "probe", "p", "bump", "[]").await, json!(1));

    let err = host
        .call("probe", "p", "add_then_fail", "[\"lost\"]")
        .await
        .unwrap_err();
    assert_eq!(err.code(), "action-failed");
    assert!(
        err.to_string().contains("deliberate: failed after writing"),
        "{err}"
    );
    assert_eq!(err.http_status(), 422);

    assert_eq!(call(&host, "probe", "p", "count", "[]").await, json!(1));
    assert_eq!(
        call(&host, "probe", "p", "state_value", "[]").await,
        json!(1)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trap_rolls_back_and_the_instance_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    assert_eq!(
        call(&host, "probe", "p", "add", "[\"kept\"]").await,
        json!(1)
    );
    assert_eq!(call(&host, "probe", "p", "bump", "[]").await, json!(1));

    let err = host
        .call("probe", "p", "add_then_trap", "[\"lost\"]")
        .await
        .unwrap_err();
    assert_eq!(err.code(), "trapped", "{err}");
    assert_eq!(err.http_status(), 500);
    assert!(err.to_string().contains("action add_then_trap"), "{err}");

    // Nothing of the trapped call survived, and a fresh instance (woken
    // again) serves the next call.
    assert_eq!(call(&host, "probe", "p", "count", "[]").await, json!(1));
    assert_eq!(
        call(&host, "probe", "p", "state_value", "[]").await,
        json!(1)
    );
    let hooks = call(&host, "probe", "p", "hooks", "[]").await;
    assert_eq!(
        hooks,
        json!(["migrate", "create", "wake", "migrate", "wake"])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn state_commits_with_the_action_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let actors = [probe()];
    let host = start(dir.path(), &actors).await;
    for expected in 1..=3 {
        assert_eq!(
            call(&host, "probe", "s", "bump", "[]").await,
            json!(expected)
        );
    }
    let host = restart(host, &actors).await;
    assert_eq!(
        call(&host, "probe", "s", "state_value", "[]").await,
        json!(3)
    );
    assert_eq!(
        host.inspect("probe", "s").unwrap().state,
        json!({ "value": 3 })
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_calls_to_one_instance_lose_no_update() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter()]).await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let host = host.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                host.call("counter", "shared", "increment", "[1]")
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        call(&host, "counter", "shared", "get", "[]").await,
        json!(200)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caller_that_goes_away_mid_call_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    assert_eq!(
        call(&host, "probe", "p", "add", "[\"kept\"]").await,
        json!(1)
    );

    // The caller gives up (as an HTTP client that hangs up) while the guest runs.
    let gave_up = tokio::time::timeout(
        std::time::Duration::from_millis(200),
        host.call("probe", "p", "spin", "[]"),
    )
    .await;
    assert!(gave_up.is_err(), "the spin ended by itself: {gave_up:?}");

    // The half-run call is rolled back and the instance replaced.
    assert_eq!(
        call(&host, "probe", "p", "add", "[\"after\"]").await,
        json!(2)
    );
    let hooks = call(&host, "probe", "p", "hooks", "[]").await;
    assert_eq!(
        hooks,
        json!(["migrate", "create", "wake", "migrate", "wake"])
    );
}
