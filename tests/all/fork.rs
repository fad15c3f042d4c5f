//! Fork, pause and resume: a fork holds its original's data as committed
//! at the fork, answers calls at once, and does none of its background
//! work (its queue, its schedules, its workflow) until it is resumed, even
//! across a restart; its original goes on untouched. Any instance can be
//! paused and resumed the same way while it works.

use std::time::Duration;

use burrow::manifest::ActorSpec;
use burrow::{Error, Host, SendOptions};
use serde_json::{Value, json};

use crate::support::{Server, call, counter, eventually, programs, queue_probe, restart, start};

const LONG: Duration = Duration::from_secs(30);
/// How long a paused fork is watched doing nothing, past the time its
/// work came due.
const IDLE: Duration = Duration::from_millis(1500);

fn actors() -> Vec<ActorSpec> {
    let mut queue = queue_probe();
    queue.options.queue_max_attempts = 100_000;
    vec![
        counter(),
        queue,
        crate::support::workflow_probe(),
        ActorSpec::new("conformance", programs::CONFORMANCE_RUST),
    ]
}

/// What of an instance's work is left or done: its pending events, its
/// notes (from schedules), and whether its workflow ended.
async fn work_done(host: &Host, key: &str) -> (usize, Value, bool) {
    let pending = host.queue("queue-probe", key).unwrap().pending.len();
    let notes = call(host, "conformance", key, "notes", "[]").await;
    let ended = host
        .workflow("workflow-probe", key)
        .unwrap()
        .record
        .status
        .is_final();
    (pending, notes, ended)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_does_its_work_only_once_resumed_and_its_original_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &actors()).await;
    // A pending event (it fails until its instance is healed), a schedule
    // due soon, and a workflow asleep between its steps.
    let send = async |host: &Host, key: &str, event_type: &str, payload: &str| {
        (host.send(
            "queue-probe",
            key,
            event_type,
            payload,
            SendOptions::default(),
        ))
        .await
        .unwrap();
    };
    send(&host, "o", "fail", r#"{"until_healed": true}"#).await;
    call(
        &host,
        "conformance",
        "o",
        "schedule_note",
        r#"["later", 800]"#,
    )
    .await;
    host.create(
        "workflow-probe",
        "o",
        &json!({"steps": 3, "sleep_ms": 800}).to_string(),
    )
    .await
    .unwrap();
    eventually(LONG, "the workflow's sleep", async || {
        let view = host.workflow("workflow-probe", "o").unwrap();
        (view.record.waiting_on.as_deref() == Some("sleep `nap`")).then_some(())
    })
    .await;
    call(&host, "counter", "o", "increment", "[7]").await;
    for actor in ["queue-probe", "conformance", "workflow-probe", "counter"] {
        host.fork(actor, "o", "f")
            .await
            .unwrap_or_else(|e| panic!("fork of {actor}: {e}"));
    }

    // Its data is the original's, and its calls run at once.
    assert_eq!(call(&host, "counter", "f", "get", "[]").await, 7);
    assert_eq!(call(&host, "counter", "f", "increment", "[1]").await, 8);
    assert_eq!(call(&host, "counter", "o", "get", "[]").await, 7);
    let inspection = host.inspect("counter", "f").unwrap();
    let paused = inspection.paused.expect("the fork is paused");
    assert!(paused.reason.contains("`o`"), "{paused:?}");
    assert!(host.inspect("counter", "o").unwrap().paused.is_none());
    // Healed, with another event sent: the fork's events stay pending,
    // and a sender that waits for the outcome times out.
    call(&host, "queue-probe", "f", "heal", "[]").await;
    call(&host, "queue-probe", "o", "heal", "[]").await;
    let waited = host
        .send(
            "queue-probe",
            "f",
            "incr",
            r#"{"ms": 1}"#,
            SendOptions {
                wait: Some(Duration::from_millis(300)),
                ..SendOptions::default()
            },
        )
        .await
        .unwrap();
    assert!(
        matches!(waited, burrow::SendOutcome::TimedOut { .. }),
        "{waited:?}"
    );

    eventually(LONG, "the original's work", async || {
        let done = work_done(&host, "o").await;
        (done == (0, json!(["later"]), true)).then_some(())
    })
    .await;
    tokio::time::sleep(IDLE).await;
    assert_eq!(work_done(&host, "f").await, (2, json!([]), false));
    assert_eq!(host.schedules("conformance", "f").unwrap().count, 1);

    // Paused across a restart.
    let host = restart(host, &actors()).await;
    tokio::time::sleep(IDLE).await;
    assert_eq!(work_done(&host, "f").await, (2, json!([]), false));
    assert!(host.inspect("counter", "f").unwrap().paused.is_some());

    // Resumed, it does it all, once.
    for actor in ["queue-probe", "conformance", "workflow-probe", "counter"] {
        assert!(host.resume(actor, "f").await.unwrap(), "{actor}");
    }
    eventually(LONG, "the fork's work", async || {
        let done = work_done(&host, "f").await;
        (done == (0, json!(["later"]), true)).then_some(())
    })
    .await;
    assert_eq!(call(&host, "queue-probe", "f", "counter", "[]").await, 1);
    assert!(
        host.queue("queue-probe", "f")
            .unwrap()
            .dead_letters
            .is_empty()
    );
    let output = host.workflow("workflow-probe", "f").unwrap().record.output;
    let output: Value = serde_json::from_str(output.as_deref().unwrap()).unwrap();
    assert_eq!(output["count"], 3, "{output}");
    assert!(host.inspect("counter", "f").unwrap().paused.is_none());
    // An instance that is not paused is left as it is.
    assert!(!host.resume("counter", "f").await.unwrap());
    assert!(!host.resume("counter", "o").await.unwrap());
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_working_instance_paused_finishes_what_runs_and_starts_nothing_more() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &actors()).await;
    // A queue being processed, a schedule due soon, a workflow asleep.
    let events: Vec<Value> = (0..100)
        .map(|_| json!({"type": "slow", "payload": {"ms": 20}}))
        .collect();
    call(
        &host,
        "queue-probe",
        "w",
        "enqueue",
        &json!([events]).to_string(),
    )
    .await;
    call(
        &host,
        "conformance",
        "w",
        "schedule_note",
        r#"["later", 800]"#,
    )
    .await;
    host.create(
        "workflow-probe",
        "w",
        &json!({"steps": 3, "sleep_ms": 800}).to_string(),
    )
    .await
    .unwrap();
    eventually(
        LONG,
        "the first events and the workflow's sleep",
        async || {
            let view = host.workflow("workflow-probe", "w").unwrap();
            let processed = 100 - host.queue("queue-probe", "w").unwrap().pending.len();
            (processed > 0 && view.record.waiting_on.as_deref() == Some("sleep `nap`"))
                .then_some(())
        },
    )
    .await;
    for actor in ["queue-probe", "conformance", "workflow-probe"] {
        assert!(host.pause(actor, "w").await.unwrap(), "{actor}");
        assert!(!host.pause(actor, "w").await.unwrap(), "{actor}");
    }
    // What was in flight ends; then nothing moves.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stopped = work_done(&host, "w").await;
    assert!(stopped.0 > 0, "{stopped:?}");
    assert_eq!((&stopped.1, stopped.2), (&json!([]), false), "{stopped:?}");
    tokio::time::sleep(IDLE).await;
    assert_eq!(work_done(&host, "w").await, stopped);
    // Calls go on meanwhile.
    assert_eq!(
        call(&host, "conformance", "w", "notes", "[]").await,
        json!([])
    );

    for actor in ["queue-probe", "conformance", "workflow-probe"] {
        assert!(host.resume(actor, "w").await.unwrap(), "{actor}");
    }
    eventually(LONG, "the work to end", async || {
        let done = work_done(&host, "w").await;
        (done == (0, json!(["later"]), true)).then_some(())
    })
    .await;
    let missing = host.pause("counter", "nobody").await.unwrap_err();
    assert!(matches!(missing, Error::NoSuchInstance { .. }), "{missing}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_is_refused_for_a_missing_source_or_a_taken_key_and_travels_paused() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let host = start(a_dir.path(), &actors()).await;
    call(&host, "counter", "o", "increment", "[3]").await;
    call(&host, "counter", "taken", "increment", "[100]").await;

    let missing = host.fork("counter", "nobody", "f").await.unwrap_err();
    assert!(matches!(missing, Error::NoSuchInstance { .. }), "{missing}");
    let taken = host.fork("counter", "o", "taken").await.unwrap_err();
    assert!(matches!(taken, Error::AlreadyExists { .. }), "{taken}");
    assert_eq!(call(&host, "counter", "taken", "get", "[]").await, 100);
    let itself = host.fork("counter", "o", "o").await.unwrap_err();
    assert!(matches!(itself, Error::AlreadyExists { .. }), "{itself}");
    let unknown = host.fork("nothing", "o", "f").await.unwrap_err();
    assert!(matches!(unknown, Error::UnknownActor(_)), "{unknown}");
    let missing = host.resume("counter", "nobody").await.unwrap_err();
    assert!(matches!(missing, Error::NoSuchInstance { .. }), "{missing}");
    assert_eq!(
        host.keys("counter").await.unwrap(),
        ["o", "taken"],
        "nothing was made"
    );

    // A paused fork's export is paused wherever it is imported.
    host.fork("counter", "o", "f").await.unwrap();
    let file = host.export("counter", "f").await.unwrap();
    host.shutdown().await;
    let b = start(b_dir.path(), &actors()).await;
    b.import("counter", "f", &file, false).await.unwrap();
    assert_eq!(call(&b, "counter", "f", "get", "[]").await, 3);
    assert!(b.inspect("counter", "f").unwrap().paused.is_some());
    assert!(b.resume("counter", "f").await.unwrap());
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fork_and_resume_go_through_the_http_api() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(start(dir.path(), &actors()).await).await;
    let client = server.client();
    client
        .call("counter", "o", "increment", "[5]")
        .await
        .unwrap();
    client.fork("counter", "o", "f").await.unwrap();
    assert_eq!(client.call("counter", "f", "get", "[]").await.unwrap(), "5");
    let inspection = client.inspect("counter", "f").await.unwrap();
    assert!(
        inspection["paused"]["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("`o`")),
        "{inspection}"
    );
    let again = client.fork("counter", "o", "f").await.unwrap_err();
    assert_eq!(
        (again.status, again.code.as_str()),
        (Some(409), "already-exists")
    );
    assert!(client.resume("counter", "f").await.unwrap());
    assert!(!client.resume("counter", "f").await.unwrap());
    let inspection = client.inspect("counter", "f").await.unwrap();
    assert!(inspection.get("paused").is_none(), "{inspection}");
    assert!(client.pause("counter", "o").await.unwrap());
    assert!(!client.pause("counter", "o").await.unwrap());
    let inspection = client.inspect("counter", "o").await.unwrap();
    assert_eq!(
        inspection["paused"]["reason"], "paused by an operator",
        "{inspection}"
    );
    assert!(client.resume("counter", "o").await.unwrap());

    // A body that is not `{"key": ...}` is refused and names what it wants.
    let refused = crate::support::http()
        .post(format!("{}/actors/counter/o/fork", server.url))
        .body(r#"{"new_key": "g"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let answer: Value = refused.json().await.unwrap();
    assert_eq!(answer["error"]["code"], "invalid-arguments", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains(r#"{"key": NEW_KEY}"#),
        "{answer}"
    );
    server.stop().await;
}
