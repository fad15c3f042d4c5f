//! The plain actor's cases: the counter and its errors, arguments, state,
//! database errors, a schedule, broadcasts and calls between languages.

use std::time::Duration;

use burrow::{Caller, Host, Identity, Role};
use serde_json::{Value, json};

use super::*;
use crate::client::expect_event;
use crate::support::Server;

/// One host with every language's actors, and what the case needs.
async fn setup(case: &'static str) -> (tempfile::TempDir, Host, Vec<&'static str>, Report) {
    let dir = tempfile::tempdir().unwrap();
    let (specs, present, missing) = super::actors();
    let host = start(dir.path(), &specs).await;
    (dir, host, present, Report::new(case, &missing))
}

#[tokio::test(flavor = "multi_thread")]
async fn counter_and_its_errors() {
    let (_dir, host, present, mut report) = setup("counter and its errors").await;
    report
        .run(&present, |language| {
            let host = host.clone();
            async move {
                let actor = basic(language);
                let a = |args: Value| call(&host, &actor, "a", "increment", args);
                assert_eq!(a(json!([5])).await, json!(5));
                assert_eq!(a(json!([2])).await, json!(7));
                assert_eq!(
                    call(&host, &actor, "b", "increment", json!([1])).await,
                    json!(1)
                );
                assert_eq!(call(&host, &actor, "a", "get", json!([])).await, json!(7));

                let e = call_err(&host, &actor, "a", "decrement", "[1]").await;
                assert_eq!(e.code(), "unknown-action", "{e}");
                // The name is checked before the arguments.
                let e = call_err(&host, &actor, "a", "decrement", "[1, 2, 3]").await;
                assert_eq!(e.code(), "unknown-action", "{e}");

                // An error rolls back what the action wrote.
                let e = call_err(&host, &actor, "a", "add_then_fail", "[10]").await;
                assert_eq!(guest_code(&e), "planned", "{e}");
                assert!(e.to_string().contains("added 10, then failed"), "{e}");
                assert_eq!(call(&host, &actor, "a", "get", json!([])).await, json!(7));
                // So does a failure the language did not expect.
                let e = call_err(&host, &actor, "a", "add_then_crash", "[10]").await;
                assert!(
                    ["trapped", "action-failed"].contains(&e.code()),
                    "{} {e}",
                    e.code()
                );
                assert_eq!(call(&host, &actor, "a", "get", json!([])).await, json!(7));
                assert_eq!(a(json!([1])).await, json!(8));
            }
        })
        .await;
    host.shutdown().await;
    report.finish();
}

#[tokio::test(flavor = "multi_thread")]
async fn arguments_are_checked_by_count_and_type() {
    let (_dir, host, present, mut report) = setup("arity and types").await;
    report
        .run(&present, |language| {
            let host = host.clone();
            async move {
                let actor = basic(language);
                let args = json!([-3, 2.5, "s", true, [1, 2], {"k": [null]}]);
                assert_eq!(call(&host, &actor, "k", "echo", args.clone()).await, args);
                let invalid = async |action: &str, args: &str| {
                    let e = call_err(&host, &actor, "k", action, args).await;
                    assert_eq!(e.code(), "invalid-arguments", "{action}({args}): {e}");
                    e.to_string()
                };
                let message = invalid("increment", "[1, 2]").await;
                assert!(message.contains("expected 1 argument, got 2"), "{message}");
                let message = invalid("get", "[1]").await;
                assert!(message.contains("expected 0 arguments, got 1"), "{message}");
                let message = invalid("echo", "[1]").await;
                assert!(message.contains("expected 6 arguments, got 1"), "{message}");
                let message = invalid("increment", "{}").await;
                assert!(
                    message.contains("arguments must be a JSON array"),
                    "{message}"
                );
                let message = invalid("increment", "[1,").await;
                assert!(
                    message.contains("arguments are not valid JSON"),
                    "{message}"
                );
                for (position, args) in [
                    (1, r#"["1", 2.5, "s", true, [], null]"#),
                    (1, r#"[1.5, 2.5, "s", true, [], null]"#),
                    (1, r#"[true, 2.5, "s", true, [], null]"#),
                    (1, r#"[9223372036854775808, 2.5, "s", true, [], null]"#),
                    (2, r#"[1, "2.5", "s", true, [], null]"#),
                    (3, r#"[1, 2.5, 3, true, [], null]"#),
                    (4, r#"[1, 2.5, "s", 1, [], null]"#),
                    (5, r#"[1, 2.5, "s", true, [1, "x"], null]"#),
                    (5, r#"[1, 2.5, "s", true, {}, null]"#),
                ] {
                    let message = invalid("echo", args).await;
                    assert!(
                        message.contains(&format!("argument {position}:")),
                        "echo({args}): {message}"
                    );
                }
                let message = invalid("increment", r#"["five"]"#).await;
                assert!(message.contains("argument 1:"), "{message}");
            }
        })
        .await;
    host.shutdown().await;
    report.finish();
}

#[tokio::test(flavor = "multi_thread")]
async fn state_and_database_errors() {
    let (_dir, host, present, mut report) = setup("state and db").await;
    report
        .run(&present, |language| {
            let host = host.clone();
            async move {
                let actor = basic(language);
                assert_eq!(
                    call(&host, &actor, "k", "state", json!([])).await,
                    Value::Null
                );
                assert_eq!(
                    call(&host, &actor, "k", "bump", json!(["a"])).await,
                    json!(1)
                );
                assert_eq!(
                    call(&host, &actor, "k", "bump", json!(["a"])).await,
                    json!(2)
                );
                assert_eq!(
                    call(&host, &actor, "k", "bump", json!(["b"])).await,
                    json!(1)
                );
                let expected = json!({"a": 2, "b": 1});
                assert_eq!(call(&host, &actor, "k", "state", json!([])).await, expected);
                // The state is JSON the host can read.
                assert_eq!(host.state(&actor, "k").unwrap(), expected);

                assert_eq!(
                    call(&host, &actor, "k", "rows", json!([])).await,
                    json!([1, "two", null, 2.5, [0, 255], 1])
                );
                for kind in ["invalid-sql", "constraint", "denied", "invalid-parameters"] {
                    assert_eq!(
                        call(&host, &actor, "k", "db_error", json!([kind])).await,
                        json!(kind)
                    );
                }
                let e = call_err(&host, &actor, "k", "db_uncaught", "[]").await;
                assert_eq!(guest_code(&e), "db", "{e}");
            }
        })
        .await;
    host.shutdown().await;
    report.finish();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schedule_fires_once_and_a_cancelled_one_never() {
    let (_dir, host, present, mut report) = setup("schedule once").await;
    report
        .run(&present, |language| {
            let host = host.clone();
            async move {
                let actor = basic(language);
                // The cancelled one is due late enough to be cancelled first
                // on a busy machine.
                let begun = std::time::Instant::now();
                let once = call(&host, &actor, "k", "schedule_note", json!(["once", 100])).await;
                let never = call(&host, &actor, "k", "schedule_note", json!(["never", 1500])).await;
                let pending = call(&host, &actor, "k", "schedules", json!([])).await;
                assert_eq!(
                    pending,
                    json!([
                        {"id": once, "action": "note", "args": ["once"]},
                        {"id": never, "action": "note", "args": ["never"]},
                    ])
                );
                assert_eq!(
                    call(&host, &actor, "k", "cancel", json!([never])).await,
                    json!(true)
                );
                assert_eq!(
                    call(&host, &actor, "k", "cancel", json!([never])).await,
                    json!(false)
                );
                eventually(LONG, "the schedule to fire", async || {
                    let notes = call(&host, &actor, "k", "notes", json!([])).await;
                    (notes != json!([])).then_some(())
                })
                .await;
                // Past the cancelled one's time: still one note.
                let past = Duration::from_millis(1800).saturating_sub(begun.elapsed());
                tokio::time::sleep(past).await;
                assert_eq!(
                    call(&host, &actor, "k", "notes", json!([])).await,
                    json!(["once"])
                );
                assert_eq!(
                    call(&host, &actor, "k", "schedules", json!([])).await,
                    json!([])
                );
            }
        })
        .await;
    host.shutdown().await;
    report.finish();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connected_client_sees_committed_broadcasts() {
    let (_dir, host, present, mut report) = setup("broadcast").await;
    let server = Server::start(host.clone()).await;
    let url = server.url.clone();
    report
        .run(&present, |language| {
            let host = host.clone();
            let client = burrow::client::Client::new(&url);
            async move {
                let actor = basic(language);
                let room = client.actor(&actor, "room");
                let e = room.subscribe(None).await.unwrap_err();
                assert_eq!(e.code, "connection-refused", "{e}");
                assert!(e.message.contains("name-required"), "{e}");
                let e = room
                    .subscribe(Some(&json!({"name": ""})))
                    .await
                    .unwrap_err();
                assert_eq!(e.code, "connection-refused", "{e}");

                let mut ada = room.subscribe(Some(&json!({"name": "ada"}))).await.unwrap();
                assert_eq!(
                    expect_event(&mut ada, "joined").await,
                    json!({"name": "ada"})
                );
                assert_eq!(
                    call(&host, &actor, "room", "members", json!([])).await,
                    json!(["ada"])
                );
                let e = call_err(&host, &actor, "room", "say_then_fail", r#"["unsaid"]"#).await;
                assert_eq!(guest_code(&e), "planned", "{e}");
                call(&host, &actor, "room", "say", json!(["hello"])).await;
                // The rolled-back event never comes: the next one is `hello`.
                assert_eq!(
                    expect_event(&mut ada, "said").await,
                    json!({"text": "hello"})
                );

                let mut bob = room.subscribe(Some(&json!({"name": "bob"}))).await.unwrap();
                assert_eq!(
                    expect_event(&mut bob, "joined").await,
                    json!({"name": "bob"})
                );
                assert_eq!(
                    expect_event(&mut ada, "joined").await,
                    json!({"name": "bob"})
                );
                drop(bob);
                assert_eq!(expect_event(&mut ada, "left").await, json!({"name": "bob"}));
                assert_eq!(
                    call(&host, &actor, "room", "members", json!([])).await,
                    json!(["ada"])
                );
            }
        })
        .await;
    server.stop().await;
    report.finish();
}

/// Who calls whom: Python calls Rust, JavaScript calls Python, Rust calls
/// JavaScript. When `BURROW_CONFORMANCE` leaves the callee out, another
/// language of the run stands in (the caller itself if it runs alone).
fn callee(language: &str) -> &'static str {
    let callee = match language {
        "py" => "rust",
        "js" => "py",
        _ => "js",
    };
    let selected = languages();
    if selected.contains(&callee) {
        return callee;
    }
    selected
        .iter()
        .copied()
        .find(|l| *l != language)
        .unwrap_or(callee_self(language))
}

fn callee_self(language: &str) -> &'static str {
    LANGUAGES.iter().copied().find(|l| *l == language).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_between_languages() {
    let (_dir, host, present, mut report) = setup("calls").await;
    let all = present.clone();
    report
        .run(&present, |language| {
            let host = host.clone();
            let all = all.clone();
            async move {
                let other = callee(language);
                assert!(
                    all.contains(&other),
                    "{language} calls {other}, whose components are missing"
                );
                let me = basic(language);
                let them = basic(other);
                let key = format!("from-{language}");
                let relay = |action: &str, args: Value| json!([them, key, action, args]);
                let result = call(&host, &me, "k", "relay", relay("increment", json!([5]))).await;
                assert_eq!(result, json!(5));
                assert_eq!(call(&host, &them, &key, "get", json!([])).await, json!(5));
                // The callee's own error keeps its code.
                let args = relay("add_then_fail", json!([1])).to_string();
                let e = call_err(&host, &me, "k", "relay", &args).await;
                assert_eq!(guest_code(&e), "planned", "{e}");
                let args = json!(["no-such-actor", "k", "get", []]).to_string();
                let e = call_err(&host, &me, "k", "relay", &args).await;
                assert_eq!(guest_code(&e), "invalid", "{e}");
                // A call back to the caller is a cycle.
                let args = json!([me, "k", "get", []]).to_string();
                let e = call_err(&host, &me, "k", "relay", &args).await;
                assert_eq!(guest_code(&e), "cycle", "{e}");
                // A send reaches the other instance's queue.
                let payload = json!({"label": format!("sent-by-{language}")});
                let args = json!([them, key, "job", payload]);
                call(&host, &me, "k", "relay_send", args).await;
                let processed = eventually(LONG, "the sent event", async || {
                    let done = call(&host, &them, &key, "processed", json!([])).await;
                    (done != json!([])).then_some(done)
                })
                .await;
                assert_eq!(processed[0]["label"], json!(format!("sent-by-{language}")));
            }
        })
        .await;
    host.shutdown().await;
    report.finish();
}

#[tokio::test(flavor = "multi_thread")]
async fn internal_actions_and_the_caller() {
    let (_dir, host, present, mut report) = setup("internal actions and the caller").await;
    report
        .run(&present, |language| {
            let host = host.clone();
            async move {
                let me = basic(language);
                let whoami = |key: &'static str, caller: Caller| {
                    let (host, me) = (host.clone(), me.clone());
                    async move {
                        let seen = host.call_as(caller, &me, key, "whoami", "[]").await;
                        json(&seen.unwrap_or_else(|e| panic!("whoami failed: {e}")))
                    }
                };
                // The action reads who calls it.
                let ann = Caller::Client(Some(Identity {
                    name: "ann".into(),
                    role: Role::Admin,
                }));
                assert_eq!(
                    whoami("k", Caller::Client(None)).await,
                    json!({"client": null})
                );
                assert_eq!(
                    whoami("k", ann.clone()).await,
                    json!({"client": {"name": "ann", "role": "admin"}})
                );

                // A client gets the internal action refused as an unknown
                // one, whoever it is, and nothing is written.
                let unknown = call_err(&host, &me, "k", "no_such", r#"["x"]"#).await;
                for caller in [Caller::Client(None), ann] {
                    let e = host
                        .call_as(caller, &me, "k", "secret", r#"["x"]"#)
                        .await
                        .expect_err("a client ran an internal action");
                    assert_eq!(e.code(), "unknown-action", "{e}");
                    assert_eq!(
                        e.to_string().replace("secret", "no_such"),
                        unknown.to_string()
                    );
                }
                assert_eq!(call(&host, &me, "k", "notes", json!([])).await, json!([]));

                // Another instance of the same actor may call it.
                let relayed = call(
                    &host,
                    &me,
                    "a",
                    "relay",
                    json!([me, "b", "secret", ["mine"]]),
                )
                .await;
                assert_eq!(relayed, json!({"actor": {"actor": me, "key": "a"}}));
                assert_eq!(
                    call(&host, &me, "b", "notes", json!([])).await,
                    json!(["mine from actor"])
                );

                // Another actor may not (the actor says so), and hears of
                // an unknown action; it may call the other actions.
                let other = callee(language);
                if other != language {
                    let them = basic(other);
                    let args = json!([me, "c", "secret", ["theirs"]]).to_string();
                    let e = call_err(&host, &them, "a", "relay", &args).await;
                    assert_eq!(guest_code(&e), "invalid", "{e}");
                    assert!(e.to_string().contains("no action"), "{e}");
                    let seen =
                        call(&host, &them, "a", "relay", json!([me, "c", "whoami", []])).await;
                    assert_eq!(seen, json!({"actor": {"actor": them, "key": "a"}}));
                    assert_eq!(call(&host, &me, "c", "notes", json!([])).await, json!([]));
                }

                // The instance's own schedule runs it.
                call(&host, &me, "s", "schedule_secret", json!(["later", 0])).await;
                eventually(LONG, "the scheduled internal action", async || {
                    let notes = call(&host, &me, "s", "notes", json!([])).await;
                    (notes != json!([])).then_some(())
                })
                .await;
                assert_eq!(
                    call(&host, &me, "s", "notes", json!([])).await,
                    json!(["later from schedule"])
                );
            }
        })
        .await;
    host.shutdown().await;
    report.finish();
}
