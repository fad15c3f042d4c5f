//! The client crate end to end: typed handles on instances, sends and
//! their outcomes, errors, and subscriptions to an instance's events,
//! against a server in this process.

use std::time::Duration;

use burrow_client::{Client, ClientError, Event, SendOptions, SendOutcome, Subscription};
use serde_json::{Value, json};

use crate::support::*;

/// How long a test waits for an event that should come at once.
const EVENT_WAIT: Duration = Duration::from_secs(20);

fn code(e: &ClientError) -> (Option<u16>, &str) {
    (e.status, e.code.as_str())
}

fn waiting(seconds: u64) -> SendOptions {
    SendOptions {
        wait: Some(Duration::from_secs(seconds)),
        ..SendOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn typed_calls_create_state_inspect_keys_and_destroy() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(start(dir.path(), &[counter(), probe()]).await).await;
    let client = server.client();

    let counter = client.actor("counter", "c");
    assert_eq!((counter.actor(), counter.key()), ("counter", "c"));
    let value: i64 = counter.call("increment", &(5,)).await.unwrap();
    assert_eq!(value, 5);
    let value: i64 = counter.call("get", &()).await.unwrap();
    assert_eq!(value, 5);
    assert_eq!(
        counter.call_json("increment", "[2]").await.unwrap(),
        json!(7)
    );
    assert_eq!(counter.call_json("get", "").await.unwrap(), json!(7));
    // Arguments and results of several types.
    let probe = client.actor("probe", "odd key/../ü");
    let echoed: (i64, String) = probe.call("echo", &(3, "three")).await.unwrap();
    assert_eq!(echoed, (3, "three".to_owned()));
    let bumped: i64 = probe.call("bump", &[0u8; 0]).await.unwrap();
    assert_eq!(bumped, 1);
    assert_eq!(probe.state().await.unwrap(), json!({ "value": 1 }));

    // Arguments that are no JSON array never leave the client; a result
    // of another type than asked for is an error, not a panic.
    let e = counter.call::<_, i64>("increment", &5).await.unwrap_err();
    assert_eq!(code(&e), (None, "invalid-arguments"), "{e}");
    let e = counter.call::<_, String>("get", &()).await.unwrap_err();
    assert_eq!(code(&e), (Some(200), "invalid-response"), "{e}");
    let e = counter
        .call::<_, i64>("increment", &(1, 2))
        .await
        .unwrap_err();
    assert_eq!(code(&e), (Some(400), "invalid-arguments"), "{e}");
    let e = counter.call_json("fly", "[]").await.unwrap_err();
    assert_eq!(code(&e), (Some(404), "unknown-action"), "{e}");

    let made = client.actor("probe", "made");
    made.create(&json!({ "label": "typed" })).await.unwrap();
    let label: Option<String> = made.call("create_label", &()).await.unwrap();
    assert_eq!(label.as_deref(), Some("typed"));
    let e = made.create(&()).await.unwrap_err();
    assert_eq!(code(&e), (Some(409), "already-exists"), "{e}");

    let inspection = counter.inspect().await.unwrap();
    assert_eq!(inspection["tables"][0]["rows"], json!([[1, 7]]));
    assert_eq!(client.keys("counter").await.unwrap(), ["c"]);
    let mut keys = client.keys("probe").await.unwrap();
    keys.sort();
    assert_eq!(keys, ["made", "odd key/../ü"]);

    counter.destroy().await.unwrap();
    let e = counter.state().await.unwrap_err();
    assert_eq!(code(&e), (Some(404), "no-such-instance"), "{e}");
    let e = counter.destroy().await.unwrap_err();
    assert_eq!(code(&e), (Some(404), "no-such-instance"), "{e}");
    assert!(client.keys("counter").await.unwrap().is_empty());

    // Unknown actors, and a server that is not there.
    let nobody = client.actor("nobody", "k");
    let e = nobody.call::<_, Value>("get", &()).await.unwrap_err();
    assert_eq!(code(&e), (Some(404), "unknown-actor"), "{e}");
    assert!(e.message.contains("nobody"), "{e}");
    let e = client.keys("nobody").await.unwrap_err();
    assert_eq!(code(&e), (Some(404), "unknown-actor"), "{e}");
    let nowhere = Client::new("http://127.0.0.1:9");
    assert!(!nowhere.healthy().await);
    let e = nowhere.actor("counter", "c").state().await.unwrap_err();
    assert_eq!(code(&e), (None, "unreachable"), "{e}");
    let e = nowhere
        .actor("chat-room", "c")
        .subscribe(None)
        .await
        .unwrap_err();
    assert_eq!(code(&e), (None, "unreachable"), "{e}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn typed_sends_and_the_dead_letter_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = queue_probe();
    spec.options.queue_max_attempts = 1;
    let server = Server::start(start(dir.path(), &[spec, counter()]).await).await;
    let client = server.client();
    let queue = client.actor("queue-probe", "k");

    let outcome = queue
        .send("x", &json!({ "a": 1 }), &SendOptions::default())
        .await
        .unwrap();
    assert!(matches!(outcome, SendOutcome::Queued { .. }), "{outcome:?}");
    let queued = outcome.id();
    let outcome = queue.send("x", &(), &waiting(20)).await.unwrap();
    let SendOutcome::Processed { id, result } = outcome else {
        panic!("not processed: {outcome:?}");
    };
    assert!(id > queued);
    assert_eq!(result["processed"], id);
    assert_eq!(result["attempt"], 1);

    // With a priority and a group.
    let grouped = SendOptions {
        priority: -2,
        group: Some("g".into()),
        wait: Some(Duration::from_secs(20)),
    };
    let outcome = queue.send("x", &"text", &grouped).await.unwrap();
    assert!(
        matches!(outcome, SendOutcome::Processed { .. }),
        "{outcome:?}"
    );
    let log: Value = queue.call("log", &()).await.unwrap();
    let entry = log
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event_id"] == outcome.id())
        .unwrap_or_else(|| panic!("event {} is not in the log: {log}", outcome.id()));
    assert_eq!(
        (&entry["priority"], &entry["group"]),
        (&json!(-2), &json!("g"))
    );

    // A wait that ends first: the event stays queued.
    let outcome = queue
        .send(
            "slow",
            &json!({ "ms": 1500 }),
            &SendOptions {
                wait: Some(Duration::from_millis(100)),
                ..SendOptions::default()
            },
        )
        .await
        .unwrap();
    assert!(
        matches!(outcome, SendOutcome::TimedOut { .. }),
        "{outcome:?}"
    );

    // A failure with one attempt allowed: a dead letter.
    let outcome = queue
        .send("fail", &json!({ "until_healed": true }), &waiting(20))
        .await
        .unwrap();
    let SendOutcome::DeadLettered { id: dead, error } = outcome.clone() else {
        panic!("not dead-lettered: {outcome:?}");
    };
    assert!(error.contains("attempt 1 fails"), "{error}");
    let view = queue.queue().await.unwrap();
    assert_eq!(view["dead_letters"][0]["id"], dead, "{view}");
    assert_eq!(view["policy"], json!({"mode": "fifo", "concurrency": 1}));

    // Healed and requeued, it is processed.
    let () = queue.call("heal", &()).await.unwrap();
    queue.requeue(dead).await.unwrap();
    eventually(Duration::from_secs(20), "the requeued event", async || {
        let log: Value = queue.call("log", &()).await.unwrap();
        log.as_array()
            .unwrap()
            .iter()
            .any(|e| e["event_id"] == dead)
            .then_some(())
    })
    .await;
    let view = queue.queue().await.unwrap();
    assert_eq!(view["dead_letters"], json!([]), "{view}");
    let e = queue.requeue(dead).await.unwrap_err();
    assert_eq!(code(&e), (Some(404), "no-such-event"), "{e}");

    // Another dead letter, discarded.
    let outcome = queue
        .send("fail", &json!({ "until": 99 }), &waiting(20))
        .await
        .unwrap();
    assert!(
        matches!(outcome, SendOutcome::DeadLettered { .. }),
        "{outcome:?}"
    );
    queue.discard(outcome.id()).await.unwrap();
    let view = queue.queue().await.unwrap();
    assert_eq!(view["dead_letters"], json!([]), "{view}");
    let e = queue.discard(outcome.id()).await.unwrap_err();
    assert_eq!(code(&e), (Some(404), "no-such-event"), "{e}");

    // Bad sends.
    let e = queue
        .send("", &(), &SendOptions::default())
        .await
        .unwrap_err();
    assert_eq!(code(&e), (Some(400), "invalid-event"), "{e}");
    let e = client
        .actor("counter", "k")
        .send("x", &(), &SendOptions::default())
        .await
        .unwrap_err();
    assert_eq!(code(&e), (Some(400), "no-queue"), "{e}");
    let e = client
        .send("queue-probe", "k", "x", "{oops", &SendOptions::default())
        .await
        .unwrap_err();
    assert_eq!(code(&e), (None, "invalid-event"), "{e}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workflow_through_a_handle() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(start(dir.path(), &[workflow_probe(), counter()]).await).await;
    let client = server.client();
    let flow = client.actor("workflow-probe", "w");
    flow.create(&json!({ "steps": 2 })).await.unwrap();
    let view = eventually(Duration::from_secs(20), "completion", async || {
        let view = flow.workflow().await.unwrap();
        (view["status"] == "completed").then_some(view)
    })
    .await;
    let steps: Vec<&str> = view["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["add-0", "add-1", "total"], "{view}");
    let count: i64 = flow.call("count", &()).await.unwrap();
    assert_eq!(count, 2);

    let counter = client.actor("counter", "c");
    let _: i64 = counter.call("increment", &(1,)).await.unwrap();
    let e = counter.workflow().await.unwrap_err();
    assert_eq!(code(&e), (Some(400), "no-workflow"), "{e}");
    let e = client
        .actor("workflow-probe", "nobody")
        .workflow()
        .await
        .unwrap_err();
    assert_eq!(code(&e), (Some(404), "no-such-instance"), "{e}");
    server.stop().await;
}

/// The next event of `subscription`, which must come within `EVENT_WAIT`.
pub async fn next_event(subscription: &mut Subscription) -> Event {
    match tokio::time::timeout(EVENT_WAIT, subscription.next()).await {
        Ok(Some(Ok(event))) => event,
        Ok(Some(Err(e))) => panic!("the subscription failed: {e} ({e:?})"),
        Ok(None) => panic!("the server closed the subscription"),
        Err(_) => panic!("no event within {EVENT_WAIT:?}"),
    }
}

/// The next event, which must be `name`; its payload.
pub async fn expect_event(subscription: &mut Subscription, name: &str) -> Value {
    match next_event(subscription).await {
        Event::Message { name: got, payload } if got == name => payload,
        other => panic!("expected a `{name}` event, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn subscribers_get_the_events_of_committed_calls() {
    room_events_follow_commits(chat_room()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn subscribers_get_the_events_of_committed_calls_in_javascript() {
    room_events_follow_commits(js_actor("chat-room-js", programs::CHAT_ROOM_JS)).await;
}

/// The chat room's connect and disconnect hooks and its broadcasts, seen
/// by two subscribers.
async fn room_events_follow_commits(spec: burrow::manifest::ActorSpec) {
    let name = spec.name.clone();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(start(dir.path(), &[spec]).await).await;
    let client = server.client();
    let room = client.actor(&name, "lobby");

    let mut ada = room
        .subscribe(Some(&json!({ "name": "ada" })))
        .await
        .unwrap();
    // The connect hook's own event reaches the new connection.
    assert_eq!(
        expect_event(&mut ada, "joined").await,
        json!({ "name": "ada" })
    );
    let mut bob = room
        .subscribe(Some(&json!({ "name": "bob" })))
        .await
        .unwrap();
    assert_ne!(ada.id(), bob.id());
    assert_eq!(
        expect_event(&mut bob, "joined").await,
        json!({ "name": "bob" })
    );
    assert_eq!(
        expect_event(&mut ada, "joined").await,
        json!({ "name": "bob" })
    );
    let members: Vec<String> = room.call("members", &()).await.unwrap();
    assert_eq!(members, ["ada", "bob"]);

    let id: i64 = room.call("post", &("ada", "hello")).await.unwrap();
    for subscription in [&mut ada, &mut bob] {
        let message = expect_event(subscription, "message").await;
        assert_eq!(message["id"], id, "{message}");
        assert_eq!(message["author"], "ada", "{message}");
        assert_eq!(message["text"], "hello", "{message}");
    }
    // A failed call broadcasts nothing: the next event is the next post's.
    let e = room
        .call::<_, i64>("post", &("ada", " "))
        .await
        .unwrap_err();
    assert_eq!(code(&e), (Some(422), "action-failed"), "{e}");
    let second: i64 = room.call("post", &("bob", "second")).await.unwrap();
    let message = expect_event(&mut ada, "message").await;
    assert_eq!(
        (&message["id"], &message["text"]),
        (&json!(second), &json!("second"))
    );

    // Closing runs the disconnect hook, which tells the others.
    bob.close().await;
    assert_eq!(
        expect_event(&mut ada, "left").await,
        json!({ "name": "bob" })
    );
    let members: Vec<String> = room.call("members", &()).await.unwrap();
    assert_eq!(members, ["ada"]);

    // Destroying the instance ends its subscriptions.
    room.destroy().await.unwrap();
    let end = tokio::time::timeout(EVENT_WAIT, ada.next()).await;
    assert!(
        matches!(end, Ok(None)),
        "the subscription did not end: {end:?}"
    );
    assert!(ada.next().await.is_none());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_subscriptions_carry_the_servers_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(start(dir.path(), &[chat_room(), counter()]).await).await;
    let client = server.client();
    let room = client.actor("chat-room", "lobby");

    let e = room.subscribe(None).await.unwrap_err();
    assert_eq!(code(&e), (Some(403), "connection-refused"), "{e}");
    assert!(e.message.contains("name"), "{e}");
    let e = room
        .subscribe(Some(&json!({ "name": "   " })))
        .await
        .unwrap_err();
    assert_eq!(code(&e), (Some(403), "connection-refused"), "{e}");

    let e = client
        .actor("nobody", "lobby")
        .subscribe(None)
        .await
        .unwrap_err();
    assert_eq!(code(&e), (Some(404), "unknown-actor"), "{e}");
    let e = client
        .actor("chat-room", &"k".repeat(10_000))
        .subscribe(None)
        .await
        .unwrap_err();
    assert_eq!(e.status.map(|s| s / 100), Some(4), "{e} ({e:?})");

    // A refused connection leaves no member behind; an accepted one works.
    let mut ada = room
        .subscribe(Some(&json!({ "name": "ada" })))
        .await
        .unwrap();
    assert_eq!(
        expect_event(&mut ada, "joined").await,
        json!({ "name": "ada" })
    );
    let members: Vec<String> = room.call("members", &()).await.unwrap();
    assert_eq!(members, ["ada"]);
    ada.close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stopping_the_server_ends_subscriptions() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(start(dir.path(), &[chat_room()]).await).await;
    let room = server.client().actor("chat-room", "lobby");
    let mut ada = room
        .subscribe(Some(&json!({ "name": "ada" })))
        .await
        .unwrap();
    expect_event(&mut ada, "joined").await;
    let reader = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(event) = ada.next().await {
            events.push(event);
        }
        events
    });
    tokio::time::timeout(EVENT_WAIT, server.stop())
        .await
        .expect("the server stops while a client is connected");
    let events = tokio::time::timeout(EVENT_WAIT, reader)
        .await
        .expect("the subscription ends when the server stops")
        .unwrap();
    assert!(
        events.iter().all(|e| e.is_ok()),
        "the subscription ended with an error: {events:?}"
    );
}
