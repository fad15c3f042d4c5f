//! Deploys: an actor's component replaced on a running host, with no
//! instance reset, nothing lost and nothing run twice; refusals that change
//! nothing; `--check`'s replay; rollback; and a restart that loads the
//! manifest's component again.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use burrow::manifest::ActorSpec;
use burrow::{Error, Host};
use serde_json::{Value, json};

use crate::client::expect_event;
use crate::schedules::talk_probe;
use crate::support::*;

fn component(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

fn stepper() -> ActorSpec {
    ActorSpec::new("stepper", programs::STEPPER)
}

async fn workflow_status(host: &Host, actor: &str, key: &str) -> String {
    host.workflow(actor, key)
        .unwrap()
        .record
        .status
        .as_str()
        .to_owned()
}

async fn workflow_reaches(host: &Host, actor: &str, key: &str, status: &str) {
    eventually(Duration::from_secs(30), status, async || {
        (workflow_status(host, actor, key).await == status).then_some(())
    })
    .await;
}

/// 16 clients increment 4 counters over HTTP while the counter's component
/// is swapped for a larger one (the conformance actor, whose `migrate`
/// adds tables and which has more actions): no call fails, no increment is
/// lost, and the instances answer the new actions afterwards with their
/// counts intact.
#[tokio::test(flavor = "multi_thread")]
async fn a_deploy_under_16_clients_fails_no_call_and_loses_no_increment() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter()]).await;
    let server = Server::start(host.clone()).await;
    const CLIENTS: usize = 16;
    const CALLS: usize = 60;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut clients = Vec::new();
    for i in 0..CLIENTS {
        let client = server.client();
        let done = done.clone();
        clients.push(tokio::spawn(async move {
            let key = format!("k{}", i % 4);
            for _ in 0..CALLS {
                client
                    .call("counter", &key, "increment", "[1]")
                    .await
                    .unwrap_or_else(|e| panic!("a call failed during the deploy: {e}"));
                done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }));
    }
    // Deploy once the calls are well under way.
    eventually(Duration::from_secs(60), "the first calls", async || {
        (done.load(std::sync::atomic::Ordering::Relaxed) >= CLIENTS * CALLS / 4).then_some(())
    })
    .await;
    let deployed = server
        .client()
        .deploy("counter", component(programs::CONFORMANCE_RUST), false)
        .await
        .unwrap();
    let in_flight = done.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(deployed["version"], 1, "{deployed}");
    assert_eq!(deployed["checked"], 0, "{deployed}");
    for client in clients {
        client.await.unwrap();
    }
    assert!(
        in_flight < CLIENTS * CALLS,
        "the deploy came after every call ({in_flight})"
    );
    let mut total = 0;
    for k in 0..4 {
        let key = format!("k{k}");
        total += call(&host, "counter", &key, "get", "[]")
            .await
            .as_i64()
            .unwrap();
        // The new code answers, on the same instance: nothing was reset.
        assert_eq!(
            call(&host, "counter", &key, "state", "[]").await,
            Value::Null
        );
        let rows = call(&host, "counter", &key, "rows", "[]").await;
        assert!(rows.is_array() || rows.is_object(), "{rows}");
    }
    assert_eq!(total as usize, CLIENTS * CALLS);
    let (version, digest) = host.component("counter").unwrap();
    assert_eq!(version, 1);
    assert_eq!(digest, deployed["digest"].as_str().unwrap());
    server.stop().await;
    host.shutdown().await;
}

/// Refusals: bytes that are no component, a broken one, one that exports
/// nothing of an actor or imports what the host lacks, an unknown actor, a rollback with nothing
/// to roll back to; none of them changes what runs or what is stored.
#[tokio::test(flavor = "multi_thread")]
async fn refused_deploys_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let conformance = ActorSpec::new("conformance", programs::CONFORMANCE_RUST);
    let host = start(dir.path(), &[conformance]).await;
    let server = Server::start(host.clone()).await;
    let client = server.client();
    assert_eq!(call(&host, "conformance", "k", "increment", "[5]").await, 5);
    let (_, digest) = host.component("conformance").unwrap();

    let e = client
        .deploy("conformance", b"not a component".to_vec(), false)
        .await
        .unwrap_err();
    assert_eq!(
        (e.status, e.code.as_str()),
        (Some(400), "invalid-component")
    );
    assert!(e.message.contains("not a WebAssembly component"), "{e}");

    let mut truncated = component(programs::CONFORMANCE_RUST);
    truncated.truncate(truncated.len() / 2);
    let e = client
        .deploy("conformance", truncated, true)
        .await
        .unwrap_err();
    assert_eq!(e.code, "invalid-component", "{e}");
    assert!(e.message.contains("does not compile"), "{e}");

    // A component of another world: it exports nothing of an actor.
    let e = client
        .deploy("conformance", component(programs::NO_EXPORTS), false)
        .await
        .unwrap_err();
    assert_eq!(e.code, "invalid-component", "{e}");
    assert!(e.message.contains("burrow:actor/guest"), "{e}");

    // One that imports what the host does not give.
    let e = client
        .deploy("conformance", component(programs::STRAY_IMPORT), false)
        .await
        .unwrap_err();
    assert_eq!(e.code, "invalid-component", "{e}");
    assert!(e.message.contains("imports something"), "{e}");

    let e = client
        .deploy("nobody", component(programs::COUNTER), false)
        .await
        .unwrap_err();
    assert_eq!((e.status, e.code.as_str()), (Some(404), "unknown-actor"));

    let e = client
        .deploy_previous("conformance", false)
        .await
        .unwrap_err();
    assert_eq!(
        (e.status, e.code.as_str()),
        (Some(404), "no-previous-component")
    );

    let e = host
        .deploy("conformance", Vec::new(), false)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidComponent { .. }), "{e}");

    // A check of one instance (what a checked deploy in a cluster asks
    // of each host): against the running component, of an instance and
    // of none; against a component nobody holds.
    use burrow::host::Hop;
    let checked = host
        .check_instance(Hop::Origin, "conformance", "k", &digest)
        .await
        .unwrap();
    assert_eq!(checked, burrow::WorkflowCheck::Nothing);
    let e = host
        .check_instance(Hop::Origin, "conformance", "nobody", &digest)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "no-such-instance", "{e}");
    let e = host
        .check_instance(Hop::Origin, "conformance", "k", &"0".repeat(64))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "invalid-component", "{e}");

    assert_eq!(host.component("conformance").unwrap(), (0, digest));
    assert_eq!(call(&host, "conformance", "k", "increment", "[1]").await, 6);
    server.stop().await;
    host.shutdown().await;
}

/// `--check` replays every unfinished workflow against the new component:
/// a sleep renamed under a workflow that sleeps is caught (and the deploy
/// changes nothing); otherwise the deploy goes through, and a workflow
/// sleeping across it finishes once, on the new code.
#[tokio::test(flavor = "multi_thread")]
async fn check_refuses_a_rename_and_a_workflow_finishes_once_on_the_new_code() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[stepper()]).await;
    let next = component(programs::STEPPER_NEXT);
    // Sleeps at `rest`, which the next version calls `pause` for it.
    host.create(
        "stepper",
        "renamed",
        r#"{"steps": 2, "then_sleep_ms": 600000, "rename": true}"#,
    )
    .await
    .unwrap();
    // Wakes from `rest` after the deploys below (30 s, for a busy machine:
    // 10 s were too few once, beside a compile):
    // it finishes on the new code.
    host.create(
        "stepper",
        "across",
        r#"{"steps": 2, "then_sleep_ms": 30000}"#,
    )
    .await
    .unwrap();
    // Finished before the deploy: not replayed.
    host.create("stepper", "finished", r#"{"steps": 1}"#)
        .await
        .unwrap();
    workflow_reaches(&host, "stepper", "renamed", "waiting").await;
    workflow_reaches(&host, "stepper", "across", "waiting").await;
    workflow_reaches(&host, "stepper", "finished", "completed").await;

    let e = host
        .deploy("stepper", next.clone(), true)
        .await
        .unwrap_err();
    let Error::WouldDiverge { divergences, .. } = &e else {
        panic!("expected would-diverge, got {e}");
    };
    assert_eq!(divergences.len(), 1, "{e}");
    assert_eq!(divergences[0].key, "renamed");
    assert!(
        divergences[0].message.contains("`rest`") && divergences[0].message.contains("`pause`"),
        "{e}"
    );
    assert_eq!(e.code(), "would-diverge");
    assert_eq!(e.http_status(), 409);
    assert_eq!(host.component("stepper").unwrap().0, 0);
    // The check kept nothing: both still wait where they were.
    assert_eq!(
        workflow_status(&host, "stepper", "renamed").await,
        "waiting"
    );
    assert_eq!(call(&host, "stepper", "renamed", "count", "[]").await, 2);

    // A component whose workflow does not take these inputs would fail
    // both unfinished workflows at their next run.
    let e = host
        .deploy("stepper", component(programs::PAYMENT), true)
        .await
        .unwrap_err();
    let Error::WouldDiverge { divergences, .. } = &e else {
        panic!("expected would-diverge, got {e}");
    };
    let mut keys: Vec<&str> = divergences.iter().map(|d| d.key.as_str()).collect();
    keys.sort();
    assert_eq!(keys, ["across", "renamed"], "{e}");
    assert!(
        divergences
            .iter()
            .all(|d| d.message.contains("fails the workflow")),
        "{e}"
    );
    assert_eq!(host.component("stepper").unwrap().0, 0);

    host.destroy("stepper", "renamed").await.unwrap();
    assert!(
        workflow_status(&host, "stepper", "across").await == "waiting",
        "the workflow finished before the deploy; make its sleep longer"
    );
    let deployed = host.deploy("stepper", next, true).await.unwrap();
    assert_eq!((deployed.version, deployed.checked), (1, 1));
    workflow_reaches(&host, "stepper", "across", "completed").await;
    // Two steps on the old code, the last one once on the new: 2 + 100.
    assert_eq!(call(&host, "stepper", "across", "count", "[]").await, 102);
    assert_eq!(call(&host, "stepper", "across", "version", "[]").await, 2);
    assert_eq!(call(&host, "stepper", "finished", "count", "[]").await, 1);
    host.shutdown().await;
}

/// `--previous` puts back what ran before the last deploy; instances keep
/// their data through both swaps.
#[tokio::test(flavor = "multi_thread")]
async fn a_rollback_puts_back_the_previous_component() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter()]).await;
    assert_eq!(call(&host, "counter", "k", "increment", "[3]").await, 3);
    let (_, original) = host.component("counter").unwrap();
    host.deploy("counter", component(programs::CONFORMANCE_RUST), false)
        .await
        .unwrap();
    assert_eq!(
        call(&host, "counter", "k", "state", "[]").await,
        Value::Null
    );
    assert_eq!(call(&host, "counter", "k", "increment", "[1]").await, 4);
    let back = host.deploy_previous("counter", false).await.unwrap();
    assert_eq!(back.version, 2);
    assert_eq!(back.digest, original);
    let e = host.call("counter", "k", "state", "[]").await.unwrap_err();
    assert_eq!(e.code(), "unknown-action");
    assert_eq!(call(&host, "counter", "k", "increment", "[1]").await, 5);
    // Rolling back again goes forward again.
    let forward = host.deploy_previous("counter", false).await.unwrap();
    assert_eq!(forward.version, 3);
    assert_eq!(
        call(&host, "counter", "k", "state", "[]").await,
        Value::Null
    );
    host.shutdown().await;
}

/// A queue draining while its actor is deployed processes every event
/// once: the events before the deploy on the old code (the queue probe,
/// which logs each in `log`), the rest on the new one (the conformance
/// actor, which records each in `processed`), none on both, none lost.
#[tokio::test(flavor = "multi_thread")]
async fn a_queue_draining_across_a_deploy_processes_each_event_once_then_on_the_new_code() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    const EVENTS: usize = 40;
    let events: Vec<Value> = (0..EVENTS)
        .map(|i| json!({"type": "slow", "payload": {"ms": 15, "label": format!("e{i:02}")}}))
        .collect();
    call(
        &host,
        "queue-probe",
        "q",
        "enqueue",
        &json!([events]).to_string(),
    )
    .await;
    let table = |name: &str| -> Vec<Vec<Value>> {
        let inspection = host.inspect("queue-probe", "q").unwrap();
        inspection
            .tables
            .into_iter()
            .find(|t| t.name == name)
            .map(|t| t.rows)
            .unwrap_or_default()
    };
    eventually(Duration::from_secs(60), "the first events", async || {
        (table("log").len() >= 5).then_some(())
    })
    .await;
    host.deploy("queue-probe", component(programs::CONFORMANCE_RUST), false)
        .await
        .unwrap();
    eventually(Duration::from_secs(60), "the queue drained", async || {
        let view = host.queue("queue-probe", "q").unwrap();
        (view.pending_count == 0 && table("log").len() + table("processed").len() >= EVENTS)
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let old: Vec<i64> = table("log")
        .iter()
        .map(|r| r[1].as_i64().unwrap())
        .collect();
    let new: Vec<i64> = table("processed")
        .iter()
        .map(|r| r[1].as_i64().unwrap())
        .collect();
    assert!(
        old.len() < EVENTS,
        "every event ran on the old code: {old:?}"
    );
    assert!(!new.is_empty(), "no event ran on the new code");
    let mut all: Vec<i64> = old.iter().chain(&new).copied().collect();
    all.sort();
    all.dedup();
    assert_eq!(
        (all.len(), old.len() + new.len()),
        (EVENTS, EVENTS),
        "old {old:?}, new {new:?}"
    );
    host.shutdown().await;
}

/// Connected clients stay connected through a deploy, and hear what the
/// new code broadcasts.
#[tokio::test(flavor = "multi_thread")]
async fn connections_stay_open_across_a_deploy() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[talk_probe()]).await;
    let server = Server::start(host.clone()).await;
    let probe = server.client().actor("talk-probe", "k");
    let mut subscription = probe.subscribe(None).await.unwrap();
    expect_event(&mut subscription, "hello").await;
    probe
        .call::<_, ()>("broadcast", &("before", 1))
        .await
        .unwrap();
    assert_eq!(expect_event(&mut subscription, "before").await, 1);
    let deployed = server
        .client()
        .deploy("talk-probe", component(programs::TALK_PROBE), true)
        .await
        .unwrap();
    assert_eq!(deployed["version"], 1);
    probe
        .call::<_, ()>("broadcast", &("after", 2))
        .await
        .unwrap();
    assert_eq!(expect_event(&mut subscription, "after").await, 2);
    assert_eq!(host.connections(), 1);
    server.stop().await;
    host.shutdown().await;
}

fn serve(manifest: &Path, port: u16) -> Child {
    let child = crate::support::burrow_command()
        .arg("--manifest")
        .arg(manifest)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("BURROW_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "burrow serve did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    crate::support::wait_until_ready(port, Duration::from_secs(600));
    child
}

fn cli(manifest: &Path, args: &[&str]) -> (bool, Value) {
    let output = crate::support::burrow_command()
        .arg("--manifest")
        .arg(manifest)
        .args(args)
        .env("BURROW_LOG", "warn")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    let value: Value = serde_json::from_str(text.trim()).unwrap_or(Value::String(text.into()));
    // `--json` prints `{"result": ..}` or `{"error": ..}`.
    let value = match value.get("result") {
        Some(result) => result.clone(),
        None => value,
    };
    (output.status.success(), value)
}

/// `burrow deploy` against a server, then `kill -9`: the restarted server
/// runs the manifest's component again, with the data the deployed one
/// committed.
#[test]
fn a_kill_9_after_a_deploy_restarts_on_the_manifests_component() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("burrow.toml");
    std::fs::write(
        &manifest,
        format!(
            "[host]\ndata_dir = \"data\"\n\n[actors.counter]\ncomponent = {:?}\n",
            programs::COUNTER
        ),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let mut server = serve(&manifest, port);
    let on = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--url", url.as_str(), "--json"]);
        cli(&manifest, &all)
    };
    assert_eq!(
        on(&["call", "counter", "k", "increment", "[2]"]),
        (true, json!(2))
    );
    let (ok, deployed) = on(&["deploy", "counter", programs::CONFORMANCE_RUST, "--check"]);
    assert!(ok, "{deployed}");
    assert_eq!(deployed["version"], 1, "{deployed}");
    assert_eq!(on(&["call", "counter", "k", "state"]), (true, Value::Null));
    assert_eq!(
        on(&["call", "counter", "k", "increment", "[1]"]),
        (true, json!(3))
    );
    let (ok, refused) = on(&["deploy", "counter", "/nonexistent.wasm"]);
    assert!(!ok);
    assert_eq!(refused["error"]["code"], "invalid-arguments", "{refused}");

    server.kill().unwrap();
    server.wait().unwrap();
    let mut server = serve(&manifest, port);
    let (ok, failed) = on(&["call", "counter", "k", "state"]);
    assert!(!ok);
    assert_eq!(failed["error"]["code"], "unknown-action", "{failed}");
    assert_eq!(on(&["call", "counter", "k", "get"]), (true, json!(3)));
    server.kill().unwrap();
    server.wait().unwrap();
}

/// `burrow dev` rebuilds and deploys an actor when a watched file changes;
/// a failed build leaves the running code as it was.
#[test]
fn dev_rebuilds_and_deploys_on_a_change_of_the_sources() {
    let dir = tempfile::tempdir().unwrap();
    let sources = dir.path().join("src");
    std::fs::create_dir(&sources).unwrap();
    // The "build" copies the component the file `src/which` names.
    std::fs::write(sources.join("which"), programs::COUNTER).unwrap();
    std::fs::copy(programs::COUNTER, dir.path().join("actor.wasm")).unwrap();
    let manifest = dir.path().join("burrow.toml");
    std::fs::write(
        &manifest,
        "[host]\ndata_dir = \"data\"\n\n[actors.counter]\ncomponent = \"actor.wasm\"\n\
         build = 'cp \"$(cat src/which)\" actor.wasm'\nwatch = [\"src\"]\n",
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = dir.path().join("dev.log");
    let mut child = crate::support::burrow_command()
        .arg("--manifest")
        .arg(&manifest)
        .args(["dev", "--listen", &format!("127.0.0.1:{port}")])
        .env("BURROW_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "burrow dev did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let on = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--url", url.as_str(), "--json"]);
        cli(&manifest, &all)
    };
    let printed = || std::fs::read_to_string(&log).unwrap_or_default();
    let wait_for = |text: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !printed().contains(text) {
            assert!(
                Instant::now() < deadline,
                "`{text}` never printed:\n{}",
                printed()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for("counter: watching");
    assert_eq!(
        on(&["call", "counter", "k", "increment", "[4]"]),
        (true, json!(4))
    );

    std::fs::write(sources.join("which"), programs::CONFORMANCE_RUST).unwrap();
    wait_for("counter: deployed version 1");
    assert_eq!(on(&["call", "counter", "k", "state"]), (true, Value::Null));
    assert_eq!(on(&["call", "counter", "k", "get"]), (true, json!(4)));

    std::fs::write(sources.join("which"), "/nonexistent.wasm").unwrap();
    wait_for("counter: not deployed");
    assert!(
        printed().contains("the build command of `counter` failed"),
        "{}",
        printed()
    );
    assert_eq!(on(&["call", "counter", "k", "state"]), (true, Value::Null));

    child.kill().unwrap();
    child.wait().unwrap();
}

/// The deploy routes sit beside the instance routes: an instance whose key
/// is `component` is still reached for its actions, queue and state.
#[tokio::test(flavor = "multi_thread")]
async fn a_key_named_component_keeps_its_routes() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[counter()]).await;
    let server = Server::start(host.clone()).await;
    let client = server.client();
    assert_eq!(
        client
            .call("counter", "component", "increment", "[2]")
            .await
            .unwrap(),
        "2"
    );
    assert_eq!(
        client.state("counter", "component").await.unwrap(),
        Value::Null
    );
    let info = crate::support::http()
        .get(format!("{}/actors/counter/component", server.url))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(info["version"], 0, "{info}");
    server.stop().await;
    host.shutdown().await;
}
