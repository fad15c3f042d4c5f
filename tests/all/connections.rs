//! Connections: hooks with parameters, events only from commits, lag, and
//! an instance kept awake while connected.

use std::time::Duration;

use burrow::client::Event;
use serde_json::json;

use crate::client::{expect_event, next_event};
use crate::schedules::talk_probe;
use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn hooks_see_each_connection_with_its_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe(), counter()]).await;
    let server = Server::start(host.clone()).await;
    let probe = server.client().actor("talk-probe", "k");
    let mut first = probe.subscribe(Some(&json!({"n": 1}))).await.unwrap();
    assert_eq!(expect_event(&mut first, "hello").await, first.id());
    let second = probe.subscribe(None).await.unwrap();
    assert_eq!(expect_event(&mut first, "hello").await, second.id());
    assert_eq!(host.connections(), 2);
    let (first_id, second_id) = (first.id(), second.id());
    second.close().await;
    assert_eq!(expect_event(&mut first, "bye").await, second_id);
    let seen: Vec<(u64, String)> = probe.call("connections", &()).await.unwrap();
    assert_eq!(
        seen,
        [
            (first_id, r#"connect {"n":1}"#.to_owned()),
            (second_id, "connect null".to_owned()),
            (second_id, "disconnect".to_owned()),
        ]
    );
    // A refusal by the hook keeps nothing the hook did.
    let e = probe
        .subscribe(Some(&json!({"refuse": true})))
        .await
        .unwrap_err();
    assert_eq!(
        (e.status, e.code.as_str()),
        (Some(403), "connection-refused")
    );
    assert!(
        e.message
            .contains("refused: the parameters asked to be refused"),
        "{e}"
    );
    let seen: Vec<(u64, String)> = probe.call("connections", &()).await.unwrap();
    assert_eq!(seen.len(), 3);
    assert_eq!(host.connections(), 1);

    // Events go out only when their call commits.
    let e = probe
        .call::<_, ()>("broadcast_then_fail", &("lost",))
        .await
        .unwrap_err();
    assert_eq!(e.code, "action-failed");
    probe
        .call::<_, ()>("broadcast", &("kept", [1, 2]))
        .await
        .unwrap();
    assert_eq!(expect_event(&mut first, "kept").await, json!([1, 2]));

    // An actor without hooks takes every connection.
    let plain = server
        .client()
        .actor("counter", "c")
        .subscribe(None)
        .await
        .unwrap();
    server
        .client()
        .call("counter", "c", "increment", "[1]")
        .await
        .unwrap();
    first.close().await;
    plain.close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_reads_too_slowly_learns_how_many_events_it_missed() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(start(dir.path(), &[talk_probe()]).await).await;
    let probe = server.client().actor("talk-probe", "k");
    let mut slow = probe.subscribe(None).await.unwrap();
    expect_event(&mut slow, "hello").await;
    // One call broadcasts 1000 events; three calls overrun the 1024 kept.
    for _ in 0..3 {
        probe
            .call::<_, ()>("broadcast_many", &(1000,))
            .await
            .unwrap();
    }
    let mut received = 0;
    let mut missed = 0;
    while received + missed < 3000 {
        match next_event(&mut slow).await {
            Event::Message { name, .. } => {
                assert_eq!(name, "tick");
                received += 1;
            }
            Event::Lagged(n) => missed += n,
        }
    }
    assert!(missed > 0, "no lag notice");
    assert_eq!(received + missed, 3000);
    slow.close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_instance_with_connections_stays_awake() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = talk_probe();
    spec.options.sleep_timeout = Duration::from_millis(50);
    let host = start(dir.path(), &[spec]).await;
    let server = Server::start(host.clone()).await;
    let probe = server.client().actor("talk-probe", "k");
    let mut connection = probe.subscribe(None).await.unwrap();
    expect_event(&mut connection, "hello").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(host.awake_count(), 1, "it slept while connected");
    connection.close().await;
    eventually(
        Duration::from_secs(5),
        "the instance to sleep",
        async || (host.awake_count() == 0).then_some(()),
    )
    .await;
    server.stop().await;
}
