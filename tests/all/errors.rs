//! Clear errors for bad calls, and limits that hold.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn bad_calls_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;

    let err = host.call("nobody", "k", "x", "[]").await.unwrap_err();
    assert_eq!((err.code(), err.http_status()), ("unknown-actor", 404));
    assert!(err.to_string().contains("`nobody`"), "{err}");

    let err = host.call("probe", "k", "fly", "[]").await.unwrap_err();
    assert_eq!((err.code(), err.http_status()), ("unknown-action", 404));
    assert!(err.to_string().contains("no action `fly`"), "{err}");

    let err = host.call("probe", "k", "echo", "[1]").await.unwrap_err();
    assert_eq!((err.code(), err.http_status()), ("invalid-arguments", 400));
    assert!(
        err.to_string().contains("expected 2 arguments, got 1"),
        "{err}"
    );

    let err = host.call("probe", "k", "echo", "[1, 2]").await.unwrap_err();
    assert!(err.to_string().contains("argument 2"), "{err}");

    let err = host
        .call("probe", "k", "echo", "{\"a\": 1}")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("JSON array"), "{err}");

    let err = host.call("probe", "k", "echo", "[1,").await.unwrap_err();
    assert!(err.to_string().contains("not valid JSON"), "{err}");

    let err = host.call("probe", "", "echo", "[]").await.unwrap_err();
    assert_eq!(err.code(), "invalid-address");
    let err = host
        .call("probe", &"k".repeat(1025), "echo", "[]")
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid-address");
    let err = host.call("../probe", "k", "echo", "[]").await.unwrap_err();
    assert_eq!(err.code(), "invalid-address");

    let big = format!("[\"{}\"]", "x".repeat(burrow::config::MAX_ARGS_BYTES));
    let err = host.call("probe", "k", "add", &big).await.unwrap_err();
    assert!(err.to_string().contains("limit is"), "{err}");

    assert_eq!(
        call(&host, "probe", "k", "echo", "[1, \"b\"]").await,
        json!([1, "b"])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn strange_keys_are_just_keys() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter()]).await;
    for key in ["../../etc", "a/b", "nul\0in", "ключ 🙂", &"k".repeat(1024)] {
        assert_eq!(
            call(&host, "counter", key, "increment", "[1]").await,
            json!(1)
        );
        assert_eq!(host.inspect("counter", key).unwrap().key, key);
    }
    // Every file stays inside the actor's directory, one level down.
    let files: usize = std::fs::read_dir(dir.path().join("actors/counter"))
        .unwrap()
        .map(|subdir| std::fs::read_dir(subdir.unwrap().path()).unwrap().count())
        .sum();
    assert!(files >= 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_past_its_deadline_is_stopped_and_others_keep_serving() {
    let dir = tempfile::tempdir().unwrap();
    let mut spinner = probe();
    spinner.name = "spinner".into();
    spinner.options.call_timeout = Duration::from_millis(1500);
    let host = start(dir.path(), &[spinner, counter()]).await;
    call(&host, "spinner", "s", "add", "[\"before\"]").await;

    let spinning = {
        let host = host.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            (
                host.call("spinner", "s", "spin", "[]").await,
                started.elapsed(),
            )
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    // While the guest spins, other instances answer promptly.
    for i in 0..20 {
        let t = Instant::now();
        call(&host, "counter", "other", "increment", "[1]").await;
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "call {i} waited {:?}",
            t.elapsed()
        );
    }
    let (result, took) = spinning.await.unwrap();
    let err = result.unwrap_err();
    assert_eq!((err.code(), err.http_status()), ("timeout", 503), "{err}");
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(10),
        "{took:?}"
    );
    assert_eq!(call(&host, "spinner", "s", "count", "[]").await, json!(1));
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_past_the_limit_traps_without_harm() {
    let dir = tempfile::tempdir().unwrap();
    let mut small = probe();
    small.options.memory_limit = 32 << 20;
    let host = start(dir.path(), &[small]).await;
    assert_eq!(
        call(&host, "probe", "m", "allocate", "[4]").await,
        json!(4 << 20)
    );
    let err = host
        .call("probe", "m", "allocate", "[64]")
        .await
        .unwrap_err();
    assert_eq!(err.code(), "trapped", "{err}");
    assert_eq!(
        call(&host, "probe", "m", "allocate", "[1]").await,
        json!(1 << 20)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_results_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    let n = burrow::config::MAX_RESULT_BYTES + 10;
    let err = host
        .call("probe", "r", "big_result", &format!("[{n}]"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("limit"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn unbounded_recursion_traps_without_harm() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    assert_eq!(
        call(&host, "probe", "r", "recurse", "[1000]").await,
        json!(1000)
    );
    let err = host
        .call("probe", "r", "recurse", "[100000000]")
        .await
        .unwrap_err();
    assert_eq!(err.code(), "trapped", "{err}");
    assert!(err.to_string().contains("stack"), "{err}");
    assert_eq!(
        call(&host, "probe", "r", "recurse", "[10]").await,
        json!(10)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hook_that_never_returns_is_stopped_and_leaves_no_instance() {
    let dir = tempfile::tempdir().unwrap();
    let mut spinner = probe();
    spinner.options.call_timeout = Duration::from_millis(300);
    let host = start(dir.path(), &[spinner]).await;
    let err = host
        .create("probe", "stuck", r#"{"spin": true}"#)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "timeout", "{err}");
    assert!(err.to_string().contains("hook create"), "{err}");
    assert!(!burrow::instance_path(host.data_dir(), "probe", "stuck").exists());
    assert_eq!(call(&host, "probe", "fine", "count", "[]").await, json!(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_past_its_size_limit_refuses_writes_and_keeps_what_it_had() {
    let dir = tempfile::tempdir().unwrap();
    let mut small = probe();
    small.options.db_size_limit = 256 << 10;
    let host = start(dir.path(), &[small]).await;
    let insert = |n: usize| {
        let blob = json!(["INSERT INTO items (name) VALUES (?)", ["x".repeat(n)]]);
        blob.to_string()
    };
    assert!(call(&host, "probe", "d", "sql", &insert(1000)).await["error"].is_null());
    // The guest sees the limit; SQLite rolls the whole transaction back on a
    // full database, so the call fails even though the guest carried on.
    let err = host
        .call("probe", "d", "sql", &insert(400 << 10))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "action-failed", "{err}");
    let message = err.to_string();
    assert!(message.contains("transaction-rolled-back"), "{message}");
    assert!(
        message.contains("LimitExceeded") && message.contains("database size"),
        "{message}"
    );
    assert_eq!(call(&host, "probe", "d", "count", "[]").await, json!(1));
    assert!(call(&host, "probe", "d", "sql", &insert(1001)).await["error"].is_null());
    assert_eq!(call(&host, "probe", "d", "count", "[]").await, json!(2));
}

#[tokio::test(flavor = "multi_thread")]
async fn callers_piling_up_behind_a_spinning_guest_get_overloaded() {
    let dir = tempfile::tempdir().unwrap();
    let mut spinner = probe();
    spinner.options.call_timeout = Duration::from_millis(1500);
    let host = start(dir.path(), &[spinner]).await;
    call(&host, "probe", "s", "add", "[\"before\"]").await;
    let spinning = {
        let host = host.clone();
        tokio::spawn(async move { host.call("probe", "s", "spin", "[]").await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let limit = burrow::config::MAX_QUEUED_CALLS_PER_INSTANCE;
    let callers: Vec<_> = (0..limit + 50)
        .map(|_| {
            let host = host.clone();
            tokio::spawn(async move { host.call("probe", "s", "count", "[]").await })
        })
        .collect();
    let mut overloaded = 0;
    let mut answered = 0;
    for caller in callers {
        match caller.await.unwrap() {
            Ok(count) => {
                assert_eq!(count, "1");
                answered += 1;
            }
            Err(e) => {
                assert_eq!((e.code(), e.http_status()), ("overloaded", 503), "{e}");
                assert!(e.to_string().contains("calls are already waiting"), "{e}");
                overloaded += 1;
            }
        }
    }
    // The spinning call holds one place; everyone past the limit is told at once.
    assert_eq!(overloaded, 51, "{answered} answered");
    assert_eq!(answered, limit - 1);
    assert_eq!(spinning.await.unwrap().unwrap_err().code(), "timeout");
}

/// With every awake instance busy, a call that needs a place waits for
/// one up to its call timeout: it gets the place the busy one gives back,
/// or is told `overloaded` once its timeout has passed.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_whose_awake_instances_are_all_busy_waits_then_says_overloaded() {
    let dir = tempfile::tempdir().unwrap();
    let mut spinner = probe();
    spinner.options.call_timeout = Duration::from_millis(1500);
    let mut hasty = burrow::manifest::ActorSpec::new("hasty", spinner.component.clone());
    hasty.options.call_timeout = Duration::from_millis(300);
    let config = burrow::HostConfig {
        max_awake: 1,
        ..config(dir.path())
    };
    let host = burrow::Host::start(config, &[spinner, hasty])
        .await
        .unwrap();
    let spinning = {
        let host = host.clone();
        tokio::spawn(async move { host.call("probe", "a", "spin", "[]").await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A call whose timeout ends before the spin does is refused then.
    let asked = Instant::now();
    let err = host.call("hasty", "b", "count", "[]").await.unwrap_err();
    assert_eq!(err.code(), "overloaded", "{err}");
    assert!(
        err.to_string()
            .contains("all 1 awake instances are busy (waited 300 ms)"),
        "{err}"
    );
    assert!(asked.elapsed() >= Duration::from_millis(300));
    // One that may wait longer than the spin gets the place it gives back.
    let waiting = {
        let host = host.clone();
        tokio::spawn(async move { host.call("probe", "c", "count", "[]").await })
    };
    assert_eq!(spinning.await.unwrap().unwrap_err().code(), "timeout");
    assert_eq!(json(&waiting.await.unwrap().unwrap()), json!(0));
    assert_eq!(call(&host, "hasty", "b", "count", "[]").await, json!(0));
}
