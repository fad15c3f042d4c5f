//! Export and import of one instance: a copy made on another host has the
//! source's data and takes up the work it holds (queue events, schedules,
//! a workflow under way); a file that is not whole, or not of the actor,
//! or meant for an existing key, is refused and changes nothing.

use std::time::Duration;

use burrow::manifest::ActorSpec;
use burrow::{Error, Host, SendOptions};
use serde_json::{Value, json};

use crate::support::{Server, call, counter, eventually, programs, queue_probe, start};

const LONG: Duration = Duration::from_secs(30);

fn conformance() -> ActorSpec {
    ActorSpec::new("conformance", programs::CONFORMANCE_RUST)
}

/// The queue test actor, retrying an event (nearly) for ever.
fn patient_queue() -> ActorSpec {
    let mut spec = queue_probe();
    spec.options.queue_max_attempts = 100_000;
    spec
}

fn actors() -> Vec<ActorSpec> {
    vec![
        counter(),
        patient_queue(),
        crate::support::workflow_probe(),
        conformance(),
    ]
}

async fn export(host: &Host, actor: &str, key: &str) -> Vec<u8> {
    host.export(actor, key)
        .await
        .unwrap_or_else(|e| panic!("export of {actor}/{key}: {e}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_copy_on_another_host_has_the_data_and_takes_up_the_work() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = start(a_dir.path(), &actors()).await;
    call(&a, "counter", "c", "increment", "[7]").await;
    // An event that fails until its instance is healed.
    a.send(
        "queue-probe",
        "q",
        "fail",
        r#"{"until_healed": true}"#,
        SendOptions::default(),
    )
    .await
    .unwrap();
    // A schedule that comes due after the move.
    call(
        &a,
        "conformance",
        "s",
        "schedule_note",
        r#"["later", 1500]"#,
    )
    .await;
    // A workflow asleep between its steps.
    a.create(
        "workflow-probe",
        "w",
        &json!({"steps": 4, "sleep_ms": 1500}).to_string(),
    )
    .await
    .unwrap();
    eventually(LONG, "the workflow's sleep", async || {
        let view = a.workflow("workflow-probe", "w").unwrap();
        (view.record.waiting_on.as_deref() == Some("sleep `nap`")).then_some(())
    })
    .await;
    let files: Vec<(&str, &str, Vec<u8>)> = vec![
        ("counter", "c", export(&a, "counter", "c").await),
        ("queue-probe", "q", export(&a, "queue-probe", "q").await),
        ("conformance", "s", export(&a, "conformance", "s").await),
        (
            "workflow-probe",
            "w",
            export(&a, "workflow-probe", "w").await,
        ),
    ];
    a.shutdown().await;

    let b = start(b_dir.path(), &actors()).await;
    for (actor, key, file) in &files {
        b.import(actor, key, file, false)
            .await
            .unwrap_or_else(|e| panic!("import of {actor}/{key}: {e}"));
    }
    // The data, under its key and under another.
    assert_eq!(call(&b, "counter", "c", "get", "[]").await, 7);
    b.import("counter", "c2", &files[0].2, false).await.unwrap();
    assert_eq!(call(&b, "counter", "c2", "increment", "[1]").await, 8);
    assert_eq!(call(&b, "counter", "c", "get", "[]").await, 7);
    // The queue's event, processed here once healed.
    call(&b, "queue-probe", "q", "heal", "[]").await;
    eventually(LONG, "the imported event to be processed", async || {
        let queue = b.queue("queue-probe", "q").unwrap();
        queue.pending.is_empty().then_some(())
    })
    .await;
    assert!(b.queue("queue-probe", "q").unwrap().dead_letters.is_empty());
    // The schedule, run here.
    eventually(LONG, "the imported schedule to run", async || {
        let notes = call(&b, "conformance", "s", "notes", "[]").await;
        (notes == json!(["later"])).then_some(())
    })
    .await;
    // The workflow, woken here and finished.
    let view = eventually(LONG, "the imported workflow to finish", async || {
        let view = b.workflow("workflow-probe", "w").unwrap();
        view.record.status.is_final().then_some(view)
    })
    .await;
    let output: Value = serde_json::from_str(view.record.output.as_deref().unwrap()).unwrap();
    assert_eq!(output["count"], 4, "{view:?}");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_foreign_or_unwanted_file_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &actors()).await;
    call(&host, "counter", "c", "increment", "[3]").await;
    let file = export(&host, "counter", "c").await;

    let refused = async |actor: &str, key: &str, file: &[u8]| match host
        .import(actor, key, file, false)
        .await
    {
        Err(Error::InvalidExport { reason, .. }) => reason,
        other => panic!("{actor}/{key}: {other:?}"),
    };
    let cut = refused("counter", "d", &file[..file.len() - 100]).await;
    assert!(cut.contains("checksum"), "{cut}");
    let mut changed = file.clone();
    let middle = changed.len() / 2;
    changed[middle] ^= 0x40;
    let changed = refused("counter", "d", &changed).await;
    assert!(changed.contains("checksum"), "{changed}");
    let foreign = refused("queue-probe", "d", &file).await;
    assert!(foreign.contains("not of `queue-probe`"), "{foreign}");
    let text = refused("counter", "d", b"counter = 3\n").await;
    assert!(
        text.contains("not one that `burrow export` wrote"),
        "{text}"
    );
    assert!(
        host.keys("counter").await.unwrap() == ["c"],
        "nothing was made"
    );

    // An existing key, unless replaced.
    call(&host, "counter", "e", "increment", "[100]").await;
    let exists = host.import("counter", "e", &file, false).await.unwrap_err();
    assert!(matches!(exists, Error::AlreadyExists { .. }), "{exists}");
    assert_eq!(call(&host, "counter", "e", "get", "[]").await, 100);
    host.import("counter", "e", &file, true).await.unwrap();
    assert_eq!(call(&host, "counter", "e", "get", "[]").await, 3);
    // A missing instance has no export.
    let missing = host.export("counter", "nobody").await.unwrap_err();
    assert!(matches!(missing, Error::NoSuchInstance { .. }), "{missing}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn export_and_import_go_through_the_http_api() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Server::start(start(a_dir.path(), &actors()).await).await;
    let b = Server::start(start(b_dir.path(), &actors()).await).await;
    let (a_client, b_client) = (a.client(), b.client());
    a_client
        .call("counter", "c", "increment", "[5]")
        .await
        .unwrap();
    let file = a_client.export("counter", "c").await.unwrap();
    b_client
        .import("counter", "c", file.clone(), false)
        .await
        .unwrap();
    assert_eq!(
        b_client.call("counter", "c", "get", "[]").await.unwrap(),
        "5"
    );
    let again = b_client.import("counter", "c", file.clone(), false).await;
    assert_eq!(again.unwrap_err().code, "already-exists");
    let mut changed = file;
    changed[20] ^= 1;
    let refused = b_client.import("counter", "x", changed, false).await;
    let refused = refused.unwrap_err();
    assert_eq!(
        (refused.status, refused.code.as_str()),
        (Some(400), "invalid-export"),
        "{refused:?}"
    );
    let missing = a_client.export("counter", "nobody").await.unwrap_err();
    assert_eq!(missing.code, "no-such-instance");
    a.stop().await;
    b.stop().await;
}
