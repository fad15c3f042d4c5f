//! Internal actions (refused to clients, and to other actors when the
//! actor says so) and the caller that actions and the connect hook see.

use burrow::manifest::ActorSpec;
use burrow::{Caller, Error, Identity, Role};
use serde_json::{Value, json};

use crate::conformance::LONG;
use crate::schedules::talk_probe;
use crate::support::*;

fn reminder() -> ActorSpec {
    ActorSpec::new("reminder", programs::REMINDER)
}

/// The plain conformance actor in Rust: `relay` calls another actor, and
/// `secret` is internal and not for other actors.
fn relayer() -> ActorSpec {
    ActorSpec::new("conformance-rust", programs::CONFORMANCE_RUST)
}

fn client(name: &str, role: Role) -> Caller {
    Caller::Client(Some(Identity {
        name: name.into(),
        role,
    }))
}

async fn call_err(
    host: &burrow::Host,
    caller: Caller,
    actor: &str,
    key: &str,
    action: &str,
    args: &str,
) -> Error {
    match host.call_as(caller, actor, key, action, args).await {
        Ok(result) => panic!("{actor}/{key}.{action}({args}) returned {result}, not an error"),
        Err(e) => e,
    }
}

/// The guest's code of an `action-failed` error.
fn guest_code(e: &Error) -> &str {
    match e {
        Error::Failed { code, .. } => code,
        other => panic!(
            "expected an action's failure, got {} ({other})",
            other.code()
        ),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_internal_action_is_refused_to_clients_and_runs_from_its_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[reminder(), relayer()]).await;
    let fire = r#"["forged", 0]"#;
    let unknown = call_err(
        &host,
        Caller::Client(None),
        "reminder",
        "me",
        "nothing",
        fire,
    )
    .await;
    for caller in [
        Caller::Client(None),
        client("root", Role::Admin),
        client("ann", Role::Client),
    ] {
        let e = call_err(&host, caller, "reminder", "me", "fire", fire).await;
        assert_eq!(e.code(), "unknown-action", "{e}");
        assert_eq!(
            e.to_string().replace("fire", "nothing"),
            unknown.to_string()
        );
    }
    // Another actor may not either: `fire` is not for other actors.
    let args = json!(["reminder", "me", "fire", ["forged", 0]]).to_string();
    let e = call_err(
        &host,
        Caller::Client(None),
        "conformance-rust",
        "a",
        "relay",
        &args,
    )
    .await;
    assert_eq!(guest_code(&e), "invalid", "{e}");
    assert!(e.to_string().contains("has no action `fire`"), "{e}");
    assert_eq!(
        call(&host, "reminder", "me", "fired", "[]").await,
        json!([])
    );

    // Its schedule runs it.
    call(&host, "reminder", "me", "remind", r#"["stretch", 0]"#).await;
    let fired = eventually(LONG, "the reminder to fire", async || {
        let fired = call(&host, "reminder", "me", "fired", "[]").await;
        (fired != json!([])).then_some(fired)
    })
    .await;
    assert_eq!(fired[0]["text"], json!("stretch"));

    // Over HTTP: the 404 of an unknown action.
    let server = Server::start(host.clone()).await;
    let e = server
        .client()
        .actor("reminder", "me")
        .call::<_, Value>("fire", &("forged", 0))
        .await
        .unwrap_err();
    assert_eq!(
        (e.status, e.code.as_str()),
        (Some(404), "unknown-action"),
        "{e}"
    );
    let after = call(&host, "reminder", "me", "fired", "[]").await;
    assert_eq!(after, fired, "a refused call fired a reminder");
    // Stopping the server shuts the host down.
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn other_actors_call_an_internal_action_only_if_the_actor_allows_it() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe(), relayer()]).await;
    // talk-probe's `guarded` is internal; other actors may call it.
    let e = call_err(
        &host,
        Caller::Client(None),
        "talk-probe",
        "x",
        "guarded",
        r#"["hi"]"#,
    )
    .await;
    assert_eq!(e.code(), "unknown-action", "{e}");
    let args = json!(["talk-probe", "x", "guarded", ["from rust"]]);
    let seen = call(&host, "conformance-rust", "a", "relay", &args.to_string()).await;
    assert_eq!(
        seen,
        json!({"actor": {"actor": "conformance-rust", "key": "a"}})
    );
    // And so may another instance of the same actor.
    let args = json!(["talk-probe", "x", "guarded", ["from y"]]);
    let seen = call(&host, "talk-probe", "y", "call", &args.to_string()).await;
    assert_eq!(seen, json!({"actor": {"actor": "talk-probe", "key": "y"}}));
    assert_eq!(
        call(&host, "talk-probe", "x", "notes", "[]").await,
        json!([
            r#"from rust by {"actor":{"actor":"conformance-rust","key":"a"}}"#,
            r#"from y by {"actor":{"actor":"talk-probe","key":"y"}}"#,
        ])
    );

    // conformance-rust's `secret` is internal and not for other actors,
    // but its own instances may call it.
    let args = json!(["conformance-rust", "b", "secret", ["from talk-probe"]]).to_string();
    let e = call_err(
        &host,
        Caller::Client(None),
        "talk-probe",
        "x",
        "call",
        &args,
    )
    .await;
    assert_eq!(guest_code(&e), "invalid", "{e}");
    assert!(e.to_string().contains("has no action `secret`"), "{e}");
    let args = json!(["conformance-rust", "b", "secret", ["from a"]]).to_string();
    call(&host, "conformance-rust", "a", "relay", &args).await;
    assert_eq!(
        call(&host, "conformance-rust", "b", "notes", "[]").await,
        json!(["from a from actor"])
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn actions_see_who_calls_them() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe()]).await;
    let whoami = async |caller: Caller| {
        json(
            &host
                .call_as(caller, "talk-probe", "k", "whoami", "[]")
                .await
                .unwrap(),
        )
    };
    assert_eq!(whoami(Caller::Client(None)).await, json!({"client": null}));
    assert_eq!(
        whoami(client("bob", Role::Client)).await,
        json!({"client": {"name": "bob", "role": "client"}})
    );
    assert_eq!(
        call(&host, "talk-probe", "k", "whoami", "[]").await,
        json!({"client": null})
    );
    // Another actor's call: the calling instance.
    let args = json!(["talk-probe", "other", "whoami", []]).to_string();
    assert_eq!(
        call(&host, "talk-probe", "k", "call", &args).await,
        json!({"actor": {"actor": "talk-probe", "key": "k"}})
    );
    // A schedule (which may run the internal action).
    call(
        &host,
        "talk-probe",
        "k",
        "later",
        r#"[0, "guarded", ["tick"]]"#,
    )
    .await;
    let notes = eventually(LONG, "the scheduled action", async || {
        let notes = call(&host, "talk-probe", "k", "notes", "[]").await;
        (notes != json!([])).then_some(notes)
    })
    .await;
    assert_eq!(notes, json!([r#"tick by "schedule""#]));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_connect_hook_admits_by_identity() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe()]).await;
    let only_ann = r#"{"only":"ann"}"#;
    for caller in [Caller::Client(None), client("bob", Role::Admin)] {
        let e = host
            .connect_as(caller.clone(), "talk-probe", "room", only_ann)
            .await
            .err()
            .unwrap_or_else(|| panic!("{caller:?} was admitted"));
        match &e {
            Error::ConnectionRefused { code, message, .. } => {
                assert_eq!(code, "not-you");
                assert!(
                    message.contains(&serde_json::to_string(&caller).unwrap()),
                    "{message}"
                );
            }
            other => panic!("expected a refusal, got {other}"),
        }
    }
    assert_eq!(host.connections(), 0);
    let ann = host
        .connect_as(client("ann", Role::Client), "talk-probe", "room", only_ann)
        .await
        .unwrap();
    assert_eq!(host.connections(), 1);
    let id = ann.id();
    host.disconnect("talk-probe", "room", ann).await.unwrap();
    assert_eq!(host.connections(), 0);
    let seen: Vec<(u64, String)> =
        serde_json::from_value(call(&host, "talk-probe", "room", "connections", "[]").await)
            .unwrap();
    assert_eq!(
        seen,
        [
            (id, format!("connect {only_ann}")),
            (id, "disconnect".to_owned())
        ]
    );
    host.shutdown().await;
}
