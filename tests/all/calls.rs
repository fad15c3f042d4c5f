//! Calls between actors: a call or a send from guest code, cycles refused.

use serde_json::json;

use crate::schedules::talk_probe;
use crate::support::*;

const ACTOR: &str = "talk-probe";

#[tokio::test(flavor = "multi_thread")]
async fn an_actor_calls_another_and_sends_to_its_queue() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe(), counter(), queue_probe()]).await;
    let args = json!(["counter", "c", "increment", [5]]).to_string();
    assert_eq!(call(&host, ACTOR, "a", "call", &args).await, 5);
    assert_eq!(call(&host, ACTOR, "a", "call", &args).await, 10);
    assert_eq!(call(&host, "counter", "c", "get", "[]").await, 10);

    let args = json!(["queue-probe", "q", "incr", null]).to_string();
    let id = call(&host, ACTOR, "a", "send", &args).await;
    assert_eq!(id, 1);
    eventually(
        std::time::Duration::from_secs(5),
        "the event's processing",
        async || (call(&host, "queue-probe", "q", "counter", "[]").await == 1).then_some(()),
    )
    .await;

    // A call from an action through another instance to a third.
    let inner = json!(["counter", "c", "increment", [1]]);
    let args = json!([ACTOR, "b", "call", inner]).to_string();
    assert_eq!(call(&host, ACTOR, "a", "call", &args).await, 11);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_comes_back_to_a_waiting_instance_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe()]).await;
    // a -> b -> a
    let back = json!([ACTOR, "a", "bump", []]);
    let args = json!([ACTOR, "b", "call", back]).to_string();
    let e = host.call(ACTOR, "a", "call", &args).await.unwrap_err();
    let burrow::Error::Failed { code, message, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(code, "cycle");
    assert!(
        message.contains("talk-probe/a -> talk-probe/b -> talk-probe/a"),
        "{message}"
    );
    // a -> a, and a send to one's own queue through `actors`.
    let args = json!([ACTOR, "a", "bump", []]).to_string();
    let e = host.call(ACTOR, "a", "call", &args).await.unwrap_err();
    assert!(e.to_string().contains("cycle"), "{e}");
    let args = json!([ACTOR, "a", "t", null]).to_string();
    let e = host.call(ACTOR, "a", "send", &args).await.unwrap_err();
    assert!(e.to_string().contains("cycle"), "{e}");
    // Nothing was left waiting: both instances answer at once.
    assert_eq!(call(&host, ACTOR, "a", "bump", "[]").await, 1);
    assert_eq!(call(&host, ACTOR, "b", "bump", "[]").await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_call_reaches_the_caller_and_the_callee_commits_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe(), counter()]).await;
    // The callee's own error keeps its code.
    let args = json!([ACTOR, "b", "note_then_fail", ["x"]]).to_string();
    let e = host.call(ACTOR, "a", "call", &args).await.unwrap_err();
    assert!(
        matches!(&e, burrow::Error::Failed { code, .. } if code == "planned"),
        "{e}"
    );
    assert_eq!(call(&host, ACTOR, "b", "notes", "[]").await, json!([]));

    // A bad address or action is `invalid`; the caller's write rolls back.
    for (actor, action) in [("nobody", "bump"), ("counter", "nope")] {
        let args = json!([actor, "c", action, []]).to_string();
        let e = host
            .call(ACTOR, "a", "bump_then_call", &args)
            .await
            .unwrap_err();
        assert!(
            matches!(&e, burrow::Error::Failed { code, .. } if code == "invalid"),
            "{e}"
        );
    }
    // The callee committed before the caller failed: its write stays.
    let args = json!(["counter", "c", "increment", [3]]).to_string();
    call(&host, ACTOR, "a", "bump_then_call", &args).await;
    let args = json!([ACTOR, "b", "note", ["kept"]]).to_string();
    host.call(ACTOR, "a", "call", &args).await.unwrap();
    assert_eq!(call(&host, ACTOR, "a", "bump", "[]").await, 2);
    assert_eq!(
        call(&host, ACTOR, "b", "notes", "[]").await,
        json!(["kept"])
    );
    assert_eq!(call(&host, "counter", "c", "get", "[]").await, 3);
}
