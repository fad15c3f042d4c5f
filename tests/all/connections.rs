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
    // Events of 4 KiB fill the client's socket, so the server cannot keep
    // up, however fast it writes.
    for _ in 0..3 {
        probe
            .call::<_, ()>("broadcast_many_padded", &(1000, 4096))
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

/// What talk-probe's connection hooks saw at `key`.
async fn hooks_seen(host: &burrow::Host, key: &str) -> Vec<(u64, String)> {
    serde_json::from_value(call(host, "talk-probe", key, "connections", "[]").await).unwrap()
}

/// Waits until talk-probe's `key` saw `n` hook runs; returns them.
async fn hooks_seen_reach(host: &burrow::Host, key: &str, n: usize) -> Vec<(u64, String)> {
    eventually(
        Duration::from_secs(5),
        &format!("{n} hook runs at {key}"),
        async || {
            let seen = hooks_seen(host, key).await;
            (seen.len() >= n).then_some(seen)
        },
    )
    .await
}

/// Connections past the instance's limit get a 503 naming it. Instances
/// with connections stay awake, so at most half of `--max-awake` may have
/// some: connections to ever new keys are refused, and calls to other
/// instances still wake them instead of failing with `overloaded`.
#[tokio::test(flavor = "multi_thread")]
async fn connections_past_a_limit_get_503_and_other_instances_still_wake() {
    let dir = tempfile::tempdir().unwrap();
    let mut talk = talk_probe();
    talk.options.max_connections = 2;
    let config = burrow::HostConfig {
        max_awake: 4,
        ..config(dir.path())
    };
    let host = burrow::Host::start(config, &[talk, counter()])
        .await
        .unwrap();
    let server = Server::start(host.clone()).await;
    let client = server.client();
    let refusal = async |key: &str| {
        let e = client
            .actor("talk-probe", key)
            .subscribe(None)
            .await
            .err()
            .unwrap_or_else(|| panic!("a connection to {key} past a limit was taken"));
        assert_eq!(
            (e.status, e.code.as_str()),
            (Some(503), "too-many-connections"),
            "{e}"
        );
        e.message
    };
    let a1 = client
        .actor("talk-probe", "a")
        .subscribe(None)
        .await
        .unwrap();
    let a2 = client
        .actor("talk-probe", "a")
        .subscribe(None)
        .await
        .unwrap();
    let e = refusal("a").await;
    assert!(e.contains("max_connections = 2"), "{e}");
    let b = client
        .actor("talk-probe", "b")
        .subscribe(None)
        .await
        .unwrap();
    let e = refusal("c").await;
    assert!(e.contains("half of --max-awake"), "{e}");
    // The other half of the awake instances serves every other instance.
    for i in 0..8 {
        call(&host, "counter", &format!("c{i}"), "increment", "[1]").await;
    }
    // A refused connection ran no hook.
    assert_eq!(hooks_seen(&host, "a").await.len(), 2);
    // Once a connection ends, there is room again.
    b.close().await;
    eventually(Duration::from_secs(5), "b to close", async || {
        (host.connections() == 2).then_some(())
    })
    .await;
    let c = client
        .actor("talk-probe", "c")
        .subscribe(None)
        .await
        .unwrap();
    for connection in [a1, a2, c] {
        connection.close().await;
    }
    server.stop().await;
}

/// The host takes at most `--max-connections` connections, whichever
/// instances they go to.
#[tokio::test(flavor = "multi_thread")]
async fn the_host_takes_at_most_max_connections() {
    let dir = tempfile::tempdir().unwrap();
    let config = burrow::HostConfig {
        max_connections: 3,
        ..config(dir.path())
    };
    let host = burrow::Host::start(config, &[talk_probe()]).await.unwrap();
    let server = Server::start(host.clone()).await;
    let client = server.client();
    let mut open = Vec::new();
    for key in ["a", "a", "b"] {
        open.push(
            client
                .actor("talk-probe", key)
                .subscribe(None)
                .await
                .unwrap(),
        );
    }
    let Err(e) = client.actor("talk-probe", "c").subscribe(None).await else {
        panic!("a fourth connection was taken");
    };
    assert_eq!(
        (e.status, e.code.as_str()),
        (Some(503), "too-many-connections")
    );
    assert!(e.message.contains("--max-connections = 3"), "{e}");
    for connection in open {
        connection.close().await;
    }
    server.stop().await;
}

/// A client that asks for the upgrade, sends its first frame at once, and
/// resets the connection while the connect hook runs: the hook commits, the
/// upgrade then fails (the answer cannot be written), and the disconnect
/// hook still runs for that connection.
#[tokio::test(flavor = "multi_thread")]
async fn the_disconnect_hook_runs_when_the_upgrade_fails() {
    use tokio::io::AsyncWriteExt;

    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe()]).await;
    let server = Server::start(host.clone()).await;
    let address = server.url.trim_start_matches("http://").to_owned();
    let mut tcp = tokio::net::TcpStream::connect(&address).await.unwrap();
    let request = format!(
        "GET /actors/talk-probe/k/connect?params=%7B%22linger_ms%22%3A400%7D HTTP/1.1\r\n\
         Host: {address}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    );
    // A masked text frame "hi", sent before the answer came.
    let frame = [0x81, 0x82, 1, 2, 3, 4, b'h' ^ 1, b'i' ^ 2];
    tcp.write_all(&[request.as_bytes(), &frame].concat())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Reset, not close: the server's answer cannot be written.
    #[allow(deprecated)]
    tcp.set_linger(Some(Duration::ZERO)).unwrap();
    drop(tcp);
    // The connect hook committed...
    let seen = hooks_seen_reach(&host, "k", 1).await;
    assert!(seen[0].1.starts_with("connect"), "{seen:?}");
    // ...and so the disconnect hook runs.
    let seen = hooks_seen_reach(&host, "k", 2).await;
    assert_eq!(seen[1], (seen[0].0, "disconnect".to_owned()));
    eventually(Duration::from_secs(5), "the connection to go", async || {
        (host.connections() == 0).then_some(())
    })
    .await;
    server.stop().await;
}

/// Clients only listen: a message past `MAX_CLIENT_MESSAGE_BYTES` ends the
/// connection (the server buffers no more than that for a client), and the
/// disconnect hook runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_message_past_the_limit_ends_the_connection() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;

    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe()]).await;
    let server = Server::start(host.clone()).await;
    let url = format!(
        "{}/actors/talk-probe/k/connect",
        server.url.replacen("http", "ws", 1)
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let hello = socket.next().await.unwrap().unwrap();
    assert!(hello.to_text().unwrap().contains("connected"), "{hello}");
    let small = "x".repeat(burrow::config::MAX_CLIENT_MESSAGE_BYTES / 2);
    socket.send(Message::text(small)).await.unwrap();
    let big = "x".repeat(burrow::config::MAX_CLIENT_MESSAGE_BYTES * 16);
    socket.send(Message::text(big)).await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(message) = socket.next().await {
            if matches!(message, Err(_) | Ok(Message::Close(_))) {
                return;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the connection stayed open");
    let seen = hooks_seen_reach(&host, "k", 2).await;
    assert_eq!(seen[1].1, "disconnect", "{seen:?}");
    server.stop().await;
}

/// A connection closed by a destroy belongs to the destroyed instance: its
/// disconnect hook never runs in the instance created after it at the same
/// key, however late the connection's own task gets to it. Here the task
/// is held up writing events to a client that does not read, so it learns
/// of the close only after the destroy returned and the key was re-created.
#[tokio::test(flavor = "multi_thread")]
async fn a_connection_closed_by_destroy_is_not_disconnected_from_the_next_instance() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe()]).await;
    let server = Server::start(host.clone()).await;
    let probe = server.client().actor("talk-probe", "k");
    let mut stalled = probe.subscribe(None).await.unwrap();
    // About 4 MB of events the client leaves unread: the server's task
    // waits in a write until the client reads again.
    probe
        .call::<_, ()>("broadcast_many_padded", &(1000, 4096))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    host.destroy("talk-probe", "k").await.unwrap();
    let _: i64 = probe.call("note", &("new",)).await.unwrap();
    let drained = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(_)) = stalled.next().await {}
    });
    drained.await.expect("destroy closes the connection");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = hooks_seen(&host, "k").await;
    assert!(
        seen.is_empty(),
        "the new instance heard of the old one's connection: {seen:?}"
    );
    assert_eq!(host.connections(), 0);
    server.stop().await;
}
