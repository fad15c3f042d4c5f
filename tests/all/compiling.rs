//! A host whose compile cache lacks components serves at once: what is
//! ready answers, operations on an actor still compiling wait for it (up
//! to their timeout), and background work starts once it is ready.

use std::path::Path;
use std::time::Duration;

use burrow::{Host, HostConfig, Readiness, SendOptions};
use serde_json::{Value, json};

use crate::cli::Serve;
use crate::support::{call, config, counter_py, eventually, programs, queue_probe, start};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// How long a test waits for a Python component to compile: one thread
/// of lowered priority, on a machine that may be busy with other work.
const COMPILE_LIMIT: Duration = Duration::from_secs(30 * 60);

async fn request(method: reqwest::Method, url: &str, body: &'static str) -> (u16, Value) {
    let response = crate::support::http()
        .request(method, url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

async fn get(url: &str) -> (u16, Value) {
    request(reqwest::Method::GET, url, "").await
}

async fn post(url: &str, body: &'static str) -> (u16, Value) {
    request(reqwest::Method::POST, url, body).await
}

fn names(readiness: &Value, which: &str) -> Vec<String> {
    serde_json::from_value(readiness[which].clone())
        .unwrap_or_else(|e| panic!("no list `{which}` in {readiness}: {e}"))
}

/// A manifest of the Rust counter and the Python one twice: `counter-py`
/// waits for its compilation as long as it takes, `hasty-py` (the same
/// component) 200 ms.
fn write_manifest(dir: &Path) -> std::path::PathBuf {
    let python = programs::COUNTER_PY
        .unwrap_or_else(|why| panic!("the Python counter was not built: {why}"));
    let manifest = dir.join("burrow.toml");
    std::fs::write(
        &manifest,
        format!(
            "[host]\ndata_dir = \"data\"\n\n\
             [actors.counter]\ncomponent = {:?}\ncall_timeout = \"30m\"\n\n\
             [actors.counter-py]\ncomponent = {python:?}\nmemory_limit = \"256MiB\"\ncall_timeout = \"30m\"\n\n\
             [actors.hasty-py]\ncomponent = {python:?}\nmemory_limit = \"256MiB\"\ncall_timeout = \"200ms\"\n",
            programs::COUNTER,
        ),
    )
    .unwrap();
    manifest
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_server_answers_rust_actors_while_python_ones_compile() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(dir.path());
    // A new data directory, and an empty compile cache of its own.
    let cache = dir.path().join("cache");
    let server = Serve::spawn(&manifest, &["--cache-dir", cache.to_str().unwrap()]);
    let url = server.url.clone();

    let (status, health) = get(&format!("{url}/healthz")).await;
    assert_eq!((status, health), (200, json!({"status": "ok"})));
    // A call whose timeout passes before its actor is compiled.
    let (status, refused) =
        post(&format!("{url}/actors/hasty-py/k/actions/increment"), "[1]").await;
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["error"]["code"], "compiling", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`hasty-py`") && message.contains("still compiling"),
        "{message}"
    );

    let (status, readiness) = get(&format!("{url}/readyz")).await;
    assert_eq!(status, 503, "GET /readyz answered {readiness}");
    assert_eq!(readiness["status"], "compiling", "{readiness}");
    let compiling = names(&readiness, "compiling");
    for actor in ["counter-py", "hasty-py"] {
        assert!(
            compiling.iter().any(|name| name == actor),
            "{actor} is not listed as compiling: {readiness}"
        );
    }

    // A call that waits for its actor as long as it takes.
    let waiting = tokio::spawn({
        let url = url.clone();
        async move {
            post(
                &format!("{url}/actors/counter-py/k/actions/increment"),
                "[1]",
            )
            .await
        }
    });

    // The Rust actor answers meanwhile (after its own short compilation).
    let (status, answer) = post(&format!("{url}/actors/counter/c/actions/increment"), "[2]").await;
    assert_eq!((status, answer), (200, json!(2)));
    let (status, readiness) = get(&format!("{url}/readyz")).await;
    assert_eq!(status, 503, "{readiness}");
    assert!(
        names(&readiness, "ready").contains(&"counter".to_owned()),
        "{readiness}"
    );
    assert!(
        names(&readiness, "compiling").contains(&"counter-py".to_owned()),
        "{readiness}"
    );
    assert!(!waiting.is_finished(), "the Python call answered already");

    // The waiting call is answered once its component is compiled.
    let (status, answer) = waiting.await.unwrap();
    assert_eq!((status, answer), (200, json!(1)));
    let readiness = eventually(COMPILE_LIMIT, "every actor ready", async || {
        let (status, readiness) = get(&format!("{url}/readyz")).await;
        (status == 200).then_some(readiness)
    })
    .await;
    assert_eq!(
        readiness,
        json!({
            "status": "ready",
            "ready": ["counter", "counter-py", "hasty-py"],
            "compiling": [],
            "failed": [],
        })
    );
    let (status, answer) = post(&format!("{url}/actors/hasty-py/k/actions/increment"), "[5]").await;
    assert_eq!((status, answer), (200, json!(5)));
    server.stop();
}

/// The queue test actor, whose failed attempts are retried after 3 s:
/// long enough for a host to stop before the retry, however loaded the
/// machine.
fn slow_retrying_queue_probe() -> burrow::manifest::ActorSpec {
    let mut spec = queue_probe();
    spec.options.queue_retry_base = Duration::from_secs(3);
    spec.options.queue_retry_cap = Duration::from_secs(3);
    spec
}

#[tokio::test(flavor = "multi_thread")]
async fn background_work_of_an_actor_still_compiling_waits_and_is_not_lost() {
    let dir = tempfile::tempdir().unwrap();
    let probe = slow_retrying_queue_probe();
    // A run of the host leaves an event whose first attempt failed: its
    // retry (and the queue mark) comes due 3 s later.
    let host = start(dir.path(), std::slice::from_ref(&probe)).await;
    host.send(
        "queue-probe",
        "q",
        "fail",
        r#"{"until": 2}"#,
        SendOptions::default(),
    )
    .await
    .unwrap();
    let retry_at = eventually(Duration::from_secs(30), "a failed attempt", async || {
        let view = host.queue("queue-probe", "q").unwrap();
        let event = view.pending.first()?;
        (event.attempts == 1).then_some(event.not_before)
    })
    .await;
    host.shutdown().await;
    drop(host);

    // The next run starts with an empty compile cache: the Python counter
    // compiles first (for many seconds), then the queue actor. Nothing
    // waits for the queue actor before its retry's time, so nothing
    // moves it to the front of the line.
    let cold = tempfile::tempdir().unwrap();
    let config = HostConfig {
        cache_dir: Some(cold.path().to_path_buf()),
        ..config(dir.path())
    };
    let host = Host::launch(config, &[counter_py(), probe.clone()])
        .await
        .unwrap();
    assert_eq!(
        host.readiness(),
        Readiness {
            ready: vec![],
            compiling: vec!["counter-py".into(), "queue-probe".into()],
            failed: vec![],
        }
    );
    // The retry's time passes while the actor compiles: the event stays
    // pending, with its one attempt, and its mark due.
    eventually(Duration::from_secs(30), "the retry's time", async || {
        (now_ms() > retry_at + 500).then_some(())
    })
    .await;
    let view = host.queue("queue-probe", "q").unwrap();
    let still_compiling = || {
        host.readiness()
            .compiling
            .contains(&"queue-probe".to_owned())
    };
    assert!(still_compiling(), "{:?}", host.readiness());
    assert_eq!(view.pending.len(), 1, "{view:?}");
    assert_eq!(view.pending[0].attempts, 1, "{view:?}");

    // A deploy of the actor waits for its compilation: it has not ended
    // while the actor is seen compiling after it was looked at.
    let bytes = std::fs::read(&probe.component).unwrap();
    let deploying = tokio::spawn({
        let host = host.clone();
        async move { host.deploy("queue-probe", bytes, false).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let deployed_early = deploying.is_finished();
    assert!(
        !(deployed_early && still_compiling()),
        "the deploy did not wait: {:?}",
        host.readiness()
    );

    // Once the actor is ready, the timer starts its pump: the event is
    // processed at its second attempt, once.
    let deployed = deploying.await.unwrap().unwrap();
    assert_eq!(deployed.version, 1);
    assert_eq!(deployed.previous_digest, deployed.digest);
    let log = eventually(COMPILE_LIMIT, "the event processed", async || {
        let log = call(&host, "queue-probe", "q", "log", "[]").await;
        let done = log.as_array()?.iter().any(|entry| entry["attempt"] == 2);
        done.then_some(log)
    })
    .await;
    let log = log.as_array().unwrap();
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0]["type"], "fail", "{log:?}");
    assert_eq!(host.queue("queue-probe", "q").unwrap().pending_count, 0);
    eventually(COMPILE_LIMIT, "every compilation ended", async || {
        host.readiness().compiling.is_empty().then_some(())
    })
    .await;
    assert!(host.readiness().all_ready(), "{:?}", host.readiness());
    assert_eq!(
        call(&host, "counter-py", "k", "increment", "[4]").await,
        json!(4)
    );
    host.shutdown().await;
}
