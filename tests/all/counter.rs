//! The counter, in Rust, Python and JavaScript: increments, and the count survives
//! a restart of the host.

use burrow::manifest::ActorSpec;
use serde_json::json;

use crate::support::*;

async fn increments_and_survives_a_restart(spec: ActorSpec) {
    let name = spec.name.clone();
    let dir = tempfile::tempdir().unwrap();
    let actors = [spec];
    let host = start(dir.path(), &actors).await;
    assert_eq!(call(&host, &name, "a", "increment", "[5]").await, json!(5));
    assert_eq!(call(&host, &name, "a", "increment", "[2]").await, json!(7));
    assert_eq!(call(&host, &name, "b", "increment", "[1]").await, json!(1));
    assert_eq!(call(&host, &name, "a", "get", "[]").await, json!(7));

    let host = restart(host, &actors).await;
    assert_eq!(call(&host, &name, "a", "get", "[]").await, json!(7));
    assert_eq!(
        call(&host, &name, "a", "increment", "[-10]").await,
        json!(-3)
    );
    assert_eq!(call(&host, &name, "b", "get", "[]").await, json!(1));

    // The same errors as the Rust SDK gives.
    let err = host
        .call(&name, "a", "increment", "[1, 2]")
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid-arguments", "{err}");
    assert!(
        err.to_string().contains("expected 1 argument, got 2"),
        "{err}"
    );
    let err = host
        .call(&name, "a", "increment", "[\"five\"]")
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid-arguments", "{err}");
    let err = host.call(&name, "a", "get", "[1]").await.unwrap_err();
    assert!(
        err.to_string().contains("expected 0 arguments, got 1"),
        "{err}"
    );
    let err = host.call(&name, "a", "decrement", "[1]").await.unwrap_err();
    assert_eq!(err.code(), "unknown-action", "{err}");
    assert_eq!(call(&host, &name, "a", "get", "[]").await, json!(-3));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rust_counter() {
    increments_and_survives_a_restart(counter()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn python_counter() {
    increments_and_survives_a_restart(counter_py()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn javascript_counter() {
    increments_and_survives_a_restart(counter_js()).await;
}
