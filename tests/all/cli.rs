//! The `burrow` binary end to end: serve, call over HTTP and in-process,
//! restart survival, inspect, destroy, exit codes and JSON output.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{free_port, programs, wait_until_ready};

/// Writes a manifest into `dir` with the counter alone and the data
/// directory `dir/data`; its path.
pub(crate) fn write_manifest(dir: &Path) -> std::path::PathBuf {
    let manifest = dir.join("burrow.toml");
    std::fs::write(
        &manifest,
        format!(
            "[host]\ndata_dir = \"data\"\n\n[actors.counter]\ncomponent = {:?}\n",
            programs::COUNTER
        ),
    )
    .unwrap();
    manifest
}

pub(crate) fn burrow(manifest: &Path, args: &[&str]) -> Output {
    crate::support::burrow_command()
        .arg("--manifest")
        .arg(manifest)
        .args(args)
        .env("BURROW_LOG", "warn")
        .output()
        .expect("run burrow")
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// `burrow serve` in a child process.
pub(crate) struct Serve {
    child: Child,
    pub(crate) url: String,
    /// The arguments after `serve --listen ADDR`, for a restart.
    args: Vec<String>,
}

impl Serve {
    fn start(manifest: &Path) -> Serve {
        Serve::start_with(manifest, &[])
    }

    /// Serves `manifest` with `args` after `serve --listen ADDR`, once
    /// every actor is ready (its component compiled).
    pub(crate) fn start_with(manifest: &Path, args: &[&str]) -> Serve {
        let server = Serve::spawn(manifest, args);
        let port = server.url.rsplit(':').next().unwrap().parse().unwrap();
        wait_until_ready(port, Duration::from_secs(600));
        server
    }

    /// Serves `manifest` with `args` after `serve --listen ADDR`, once it
    /// listens: components may still be compiling.
    pub(crate) fn spawn(manifest: &Path, args: &[&str]) -> Serve {
        let port = free_port();
        let child = crate::support::burrow_command()
            .arg("--manifest")
            .arg(manifest)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .env("BURROW_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "burrow serve did not start listening"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let args = args.iter().map(|arg| arg.to_string()).collect();
        Serve { child, url, args }
    }

    /// Kills the server with SIGKILL, then starts a new one on `manifest`,
    /// with the same arguments.
    pub(crate) fn kill_9_and_restart(mut self, manifest: &Path) -> Serve {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        Serve::start_with(manifest, &args)
    }

    /// Stops the server with SIGTERM and waits for it.
    pub(crate) fn stop(mut self) {
        Command::new("kill")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "burrow serve ended with {status}");
    }
}

/// A test that fails leaves no server behind.
impl Drop for Serve {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Reads the schema of the database at `path` from this process, without
/// waiting for a lock.
fn read_schema(path: &Path) -> rusqlite::Result<i64> {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
}

/// A reader that went away before the output came (`burrow inspect ... |
/// grep -q`) ends the command with its own exit code, not a panic.
#[test]
fn a_closed_stdout_is_no_panic() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(dir.path());
    let out = burrow(
        &manifest,
        &["call", "counter", "c1", "increment", "[5]", "--local"],
    );
    assert!(out.status.success(), "{out:?}");
    for args in [
        &["inspect", "counter", "c1"][..],
        &["call", "counter", "c1", "get", "--local"],
        &["call", "counter", "c1", "nope", "--local", "--json"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = crate::support::burrow_command()
            .arg("--manifest")
            .arg(&manifest)
            .args(args)
            .env("BURROW_LOG", "warn")
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        let expected = if args.get(3) == Some(&"nope") { 3 } else { 0 };
        assert_eq!(out.status.code(), Some(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn serve_call_restart_and_call_again() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(dir.path());

    let server = Serve::start(&manifest);
    let url = server.url.clone();
    let out = burrow(
        &manifest,
        &["call", "counter", "c1", "increment", "[5]", "--url", &url],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout(&out), "5");
    let out = burrow(
        &manifest,
        &[
            "call",
            "counter",
            "c1",
            "increment",
            "[2]",
            "--url",
            &url,
            "--json",
        ],
    );
    assert_eq!(
        serde_json::from_str::<Value>(&stdout(&out)).unwrap(),
        json!({ "result": 7 })
    );

    // While the server runs, the data directory is locked...
    let out = burrow(&manifest, &["call", "counter", "c1", "get", "--local"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another burrow host"),
        "{out:?}"
    );
    // ...and its awake instance's database is the server's alone...
    let path = burrow::instance_path(&dir.path().join("data"), "counter", "c1");
    assert!(
        read_schema(&path).is_err(),
        "another process read an awake instance's database"
    );
    // ...but inspect reads it, asking the server.
    let out = burrow(&manifest, &["inspect", "counter", "c1"]);
    let inspection: Value =
        serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(inspection["tables"][0]["rows"], json!([[1, 7]]));

    server.stop();
    assert!(read_schema(&path).is_ok(), "released when the server ended");
    let out = burrow(&manifest, &["inspect", "counter", "c1"]);
    let inspection: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(inspection["tables"][0]["rows"], json!([[1, 7]]));
    let server = Serve::start(&manifest);
    let out = burrow(
        &manifest,
        &["call", "counter", "c1", "get", "--url", &server.url],
    );
    assert_eq!(stdout(&out), "7", "{out:?}");
    server.stop();

    // In-process, on the same data directory.
    let out = burrow(
        &manifest,
        &["call", "counter", "c1", "increment", "[1]", "--local"],
    );
    assert_eq!(stdout(&out), "8", "{out:?}");
    let out = burrow(&manifest, &["destroy", "counter", "c1", "--local"]);
    assert!(out.status.success(), "{out:?}");
    let out = burrow(&manifest, &["inspect", "counter", "c1"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}

/// Many callers on one instance, so that their calls commit in batches;
/// the server is killed mid-way, three times.
#[test]
fn kill_9_during_coalesced_calls_loses_no_acknowledged_call() {
    kill_9_during_calls_loses_no_acknowledged_call(&[], &["hot"]);
}

/// In `synchronous = full`, callers spread over instances, whose logs
/// grow into the zeros they were extended with ahead of their frames;
/// the server is killed mid-way, three times, and every instance comes
/// back with its acknowledged calls.
#[test]
fn kill_9_in_full_mode_during_calls_to_many_instances_loses_no_acknowledged_call() {
    let keys: Vec<String> = (0..8).map(|i| format!("spread-{i}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    kill_9_during_calls_loses_no_acknowledged_call(&["--synchronous", "full"], &keys);
}

/// 16 callers increment the counters `keys` (caller i the key i mod
/// their number) until `burrow serve` (with `args`) is killed under them,
/// three times; after each restart, every counter holds its acknowledged
/// increments, and at most one more per caller that was cut off.
fn kill_9_during_calls_loses_no_acknowledged_call(args: &[&str], keys: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(dir.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut server = Serve::start_with(&manifest, args);
    let mut acknowledged = vec![0; keys.len()];
    let mut unanswered = vec![0; keys.len()];
    for round in 0..3 {
        let client = burrow::client::Client::new(&server.url);
        let callers: Vec<_> = (0..16)
            .map(|i| {
                let counter = client.actor("counter", keys[i % keys.len()]);
                runtime.spawn(async move {
                    let mut acked = 0;
                    // Until the kill cuts the call off.
                    while counter.call::<_, i64>("increment", &(1,)).await.is_ok() {
                        acked += 1;
                    }
                    acked
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(400 + 150 * round));
        server = server.kill_9_and_restart(&manifest);
        for (i, caller) in callers.into_iter().enumerate() {
            acknowledged[i % keys.len()] += runtime.block_on(caller).unwrap();
            // Each caller had one call in flight, which may have committed.
            unanswered[i % keys.len()] += 1;
        }
        let client = burrow::client::Client::new(&server.url);
        for (k, key) in keys.iter().enumerate() {
            let value: i64 = runtime
                .block_on(client.actor("counter", key).call("get", &()))
                .unwrap();
            assert!(
                (acknowledged[k]..=acknowledged[k] + unanswered[k]).contains(&value),
                "round {round}, `{key}`: {} increments acknowledged, {} cut off, \
                 the counter is {value}",
                acknowledged[k],
                unanswered[k]
            );
            // What the cut-off calls did is known now.
            (acknowledged[k], unanswered[k]) = (value, 0);
        }
    }
    let total: i64 = acknowledged.iter().sum();
    assert!(total > 100, "too few calls ran: {total}");
    server.stop();
}

#[test]
fn bad_input_gets_clear_errors_and_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(dir.path());
    let local = |args: &[&str]| {
        let mut all = args.to_vec();
        all.push("--local");
        burrow(&manifest, &all)
    };

    let out = local(&["call", "nobody", "k", "get"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown actor `nobody`"),
        "{out:?}"
    );

    let out = local(&["call", "counter", "k", "fly"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");

    let out = local(&["call", "counter", "k", "increment", "[1,"]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("invalid JSON in the arguments"),
        "{out:?}"
    );

    let out = local(&["call", "counter", "k", "increment", "[1, 2]", "--json"]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let error: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(error["error"]["code"], json!("invalid-arguments"));

    let out = burrow(
        &manifest,
        &["call", "counter", "k", "get", "--url", "http://127.0.0.1:9"],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot reach"),
        "{out:?}"
    );

    let out = burrow(
        &dir.path().join("missing.toml"),
        &["call", "counter", "k", "get", "--local"],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("missing.toml"),
        "{out:?}"
    );

    let out = burrow(&manifest, &["call"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");

    // A PostgreSQL nobody listens for: an error naming it, not a panic.
    let port = crate::support::free_port();
    let url = format!("postgres://burrow@127.0.0.1:{port}/nowhere");
    let data = dir.path().join("cluster-data");
    let out = burrow(
        &manifest,
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            data.to_str().unwrap(),
            "--cluster",
            &url,
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stderr.contains(&format!("cannot join the cluster at {url}")),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn build_runs_the_manifest_build_commands_and_checks_the_components() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("burrow.toml");
    std::fs::write(
        &manifest,
        format!(
            "[host]\ncache_dir = \"compiled\"\n\
             [actors.made]\ncomponent = \"made.wasm\"\nbuild = \"sleep 5.5 && cp {} made.wasm\"\n\
             [actors.broken]\ncomponent = \"broken.wasm\"\nbuild = \"printf built > broken.wasm\"\n\
             [actors.fails]\ncomponent = \"x.wasm\"\nbuild = \"exit 3\"\n",
            programs::COUNTER
        ),
    )
    .unwrap();
    // The manifest's compile cache, not the tests' shared one.
    let build = |actor: &str| {
        crate::support::burrow_command()
            .env_remove("BURROW_CACHE_DIR")
            .arg("--manifest")
            .arg(&manifest)
            .args(["build", actor])
            .env("BURROW_LOG", "warn")
            .output()
            .unwrap()
    };
    let out = build("made");
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Each stage names the actor, and a slow one says it still runs.
    for line in [
        "[1/1] made: building: sleep 5.5",
        "[1/1] made: building, 5.0 s",
        "[1/1] made: built in ",
        "[1/1] made: checking and compiling 0.",
        "[1/1] made: compiled in ",
        "ready: 1 actor(s) in ",
    ] {
        assert!(stderr.contains(line), "no `{line}` in:\n{stderr}");
    }
    // The component was compiled into the manifest's cache (`cache_dir`),
    // and the times recorded in the data directory.
    let cached = std::fs::read_dir(dir.path().join("compiled"))
        .unwrap()
        .count();
    assert_eq!(cached, 1);
    let records: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join(".burrow/builds.json")).unwrap())
            .unwrap();
    assert!(
        records["made"]["build_s"].as_f64().unwrap() >= 5.5,
        "{records}"
    );
    assert_eq!(records["made"]["compiled"], true, "{records}");
    // Built again, it is compiled already.
    let out = build("made");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[1/1] made: already compiled (compile cache)"),
        "{stderr}"
    );

    let out = burrow(&manifest, &["build", "broken"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot load actor `broken`")
            && stderr.contains("not a WebAssembly component"),
        "{stderr}"
    );

    let out = burrow(&manifest, &["build", "fails"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("build command of `fails` failed"),
        "{out:?}"
    );

    let out = burrow(&manifest, &["build", "ghost"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown actor `ghost`"),
        "{out:?}"
    );
}

fn write_queue_manifest(dir: &Path) -> std::path::PathBuf {
    let manifest = dir.join("burrow.toml");
    std::fs::write(
        &manifest,
        format!(
            "[host]\ndata_dir = \"data\"\n\n[actors.queue-probe]\ncomponent = {:?}\n\
             queue_retry_base = \"20ms\"\nqueue_retry_cap = \"100ms\"\nqueue_max_attempts = 3\n",
            programs::QUEUE_PROBE
        ),
    )
    .unwrap();
    manifest
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).trim().to_owned()
}

#[test]
fn send_wait_queue_requeue_and_discard_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_queue_manifest(dir.path());
    let server = Serve::start(&manifest);
    let url = server.url.clone();
    let cli = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--url", &url]);
        burrow(&manifest, &all)
    };

    let out = cli(&["send", "queue-probe", "k", "hello", "{}", "--wait"]);
    assert!(out.status.success(), "{out:?}");
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(result["attempt"], 1);

    let out = cli(&[
        "send",
        "queue-probe",
        "k",
        "hello",
        "--priority",
        "-3",
        "--json",
    ]);
    let queued: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(queued["result"]["status"], "queued", "{out:?}");

    let failing = r#"{"until_healed": true}"#;
    let out = cli(&["send", "queue-probe", "k", "fail", failing, "--wait"]);
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert!(stderr(&out).contains("dead-lettered"), "{out:?}");

    // `queue` reads the data directory while the server runs.
    let out = burrow(&manifest, &["queue", "queue-probe", "k"]);
    let view: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let dead = &view["dead_letters"][0];
    assert_eq!(dead["attempts"], 3, "{view}");
    assert_eq!(dead["payload"], json!({"until_healed": true}));
    let id = dead["id"].to_string();
    let out = burrow(&manifest, &["inspect", "queue-probe", "k"]);
    let inspection: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(inspection["queue"]["dead_letters"][0]["id"].to_string(), id);

    let out = cli(&["call", "queue-probe", "k", "heal"]);
    assert!(out.status.success(), "{out:?}");
    let out = cli(&["requeue", "queue-probe", "k", &id]);
    assert!(out.status.success(), "{out:?}");
    let out = cli(&["discard", "queue-probe", "k", &id]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "requeued, so no dead letter: {out:?}"
    );

    let out = cli(&["send", "queue-probe", "k", "x", "{oops"]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let out = cli(&["send", "queue-probe", "k", "x", "--timeout", "1s"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--timeout needs --wait: {out:?}"
    );
    server.stop();
}

/// Waits until the instance's queue is empty, reading the data directory
/// (no call reaches the instance).
fn wait_for_empty_queue(manifest: &Path, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = burrow(manifest, &["queue", "queue-probe", key]);
        let view: Value = serde_json::from_str(&stdout(&out)).unwrap_or(Value::Null);
        if view["pending_count"] == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the queue of {key} did not drain: {view}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn kill_9_during_processing_loses_no_event_and_applies_none_twice() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_queue_manifest(dir.path());
    let server = Serve::start(&manifest);
    let url = server.url.clone();
    let keys = [
        ("serial", json!({})),
        ("parallel", json!({"concurrency": 4})),
    ];
    for (key, config) in &keys {
        let out = burrow(
            &manifest,
            &[
                "create",
                "queue-probe",
                key,
                &config.to_string(),
                "--url",
                &url,
            ],
        );
        assert!(out.status.success(), "{out:?}");
        let events: Vec<Value> = (0..200)
            .map(|_| json!({"type": "slow", "payload": {"ms": 4}}))
            .collect();
        let out = burrow(
            &manifest,
            &[
                "call",
                "queue-probe",
                key,
                "enqueue",
                &json!([events]).to_string(),
                "--url",
                &url,
            ],
        );
        assert!(out.status.success(), "{out:?}");
    }
    let mut server = Some(server);
    let mut killed_mid_way = 0;
    for pause in [150, 300, 220] {
        std::thread::sleep(Duration::from_millis(pause));
        let out = burrow(&manifest, &["queue", "queue-probe", "serial"]);
        let view: Value = serde_json::from_str(&stdout(&out)).unwrap();
        let pending = view["pending_count"].as_u64().unwrap();
        if 0 < pending && pending < 200 {
            killed_mid_way += 1;
        }
        server = Some(server.take().unwrap().kill_9_and_restart(&manifest));
    }
    assert!(
        killed_mid_way > 0,
        "no kill landed while events were processed"
    );
    // Nobody calls: the queues resume by themselves.
    for (key, _) in &keys {
        wait_for_empty_queue(&manifest, key);
    }
    let url = server.as_ref().unwrap().url.clone();
    for (key, _) in &keys {
        let out = burrow(
            &manifest,
            &["call", "queue-probe", key, "log", "--url", &url],
        );
        let log: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
        let mut ids: Vec<i64> = log
            .iter()
            .map(|e| e["event_id"].as_i64().unwrap())
            .collect();
        assert_eq!(ids.len(), 200, "{key}: every event applied once");
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 200, "{key}: no event applied twice");
    }
    server.unwrap().stop();
}

fn write_workflow_manifest(dir: &Path) -> std::path::PathBuf {
    let manifest = dir.join("burrow.toml");
    std::fs::write(
        &manifest,
        format!(
            "[host]\ndata_dir = \"data\"\n\n[actors.workflow-probe]\ncomponent = {:?}\n",
            programs::WORKFLOW_PROBE
        ),
    )
    .unwrap();
    manifest
}

fn workflow_of(manifest: &Path, key: &str) -> Value {
    let out = burrow(manifest, &["inspect", "workflow-probe", key, "--history"]);
    serde_json::from_str(&stdout(&out)).unwrap_or(Value::Null)
}

#[test]
fn kill_9_at_many_points_of_a_200_step_workflow_applies_each_step_once() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_workflow_manifest(dir.path());
    let server = Serve::start(&manifest);
    let config = json!({"steps": 200, "step_ms": 8}).to_string();
    let out = burrow(
        &manifest,
        &[
            "create",
            "workflow-probe",
            "k",
            &config,
            "--url",
            &server.url,
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let mut server = Some(server);
    let mut progress = Vec::new();
    for pause in [150, 90, 260, 40, 200, 120, 310, 70] {
        std::thread::sleep(Duration::from_millis(pause));
        let view = workflow_of(&manifest, "k");
        progress.push(view["history_len"].as_i64().unwrap_or(0));
        server = Some(server.take().unwrap().kill_9_and_restart(&manifest));
    }
    let mid_way = progress.iter().filter(|n| (1..200).contains(*n)).count();
    assert!(mid_way >= 3, "too few kills landed mid-way: {progress:?}");
    // Nobody calls: the workflow resumes by itself.
    let deadline = Instant::now() + Duration::from_secs(120);
    let view = loop {
        let view = workflow_of(&manifest, "k");
        if view["status"] == "completed" {
            break view;
        }
        assert!(
            Instant::now() < deadline,
            "the workflow did not finish: {view}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let output: Value = serde_json::from_str(view["output"].as_str().unwrap()).unwrap();
    assert_eq!(output["count"], 200, "{progress:?}");
    let url = server.as_ref().unwrap().url.clone();
    let out = burrow(
        &manifest,
        &["call", "workflow-probe", "k", "count", "--url", &url],
    );
    assert_eq!(stdout(&out), "200");
    let out = burrow(
        &manifest,
        &["call", "workflow-probe", "k", "done", "--url", &url],
    );
    let done: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(done.len(), 200);
    eprintln!("history length at each kill: {progress:?}");
    server.unwrap().stop();
}

#[test]
fn kill_9_during_queue_waits_and_a_rollback_loses_nothing_and_repeats_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_workflow_manifest(dir.path());
    let server = Serve::start(&manifest);
    let url = server.url.clone();
    let run = |args: &[&str]| {
        let out = burrow(&manifest, args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        out
    };
    // 60 payments taken 3 at a time, each batch applied in a 20 ms step.
    let pay = json!({"payment_batch": 3, "batch_timeout_ms": 1500, "step_ms": 20}).to_string();
    run(&["create", "workflow-probe", "pay", &pay, "--url", &url]);
    run(&[
        "call",
        "workflow-probe",
        "pay",
        "pay",
        "[60]",
        "--url",
        &url,
    ]);
    // 30 reservations, then a failure: 30 undos of 20 ms each.
    let undo = json!({"rollback": true, "reservations": 30, "step_ms": 20}).to_string();
    run(&["create", "workflow-probe", "undo", &undo, "--url", &url]);

    let mut server = Some(server);
    let mut running_at_kill = Vec::new();
    for pause in [120, 200, 80, 260, 150] {
        std::thread::sleep(Duration::from_millis(pause));
        let status = |key| {
            workflow_of(&manifest, key)["status"]
                .as_str()
                .map(str::to_owned)
        };
        running_at_kill.push((status("pay"), status("undo")));
        server = Some(server.take().unwrap().kill_9_and_restart(&manifest));
    }
    let mid_way = |key: usize| {
        running_at_kill
            .iter()
            .map(|(pay, undo)| if key == 0 { pay } else { undo })
            .filter(|s| matches!(s.as_deref(), Some("running" | "waiting")))
            .count()
    };
    assert!(
        mid_way(0) >= 2 && mid_way(1) >= 2,
        "too few kills landed mid-way: {running_at_kill:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    for key in ["pay", "undo"] {
        loop {
            let view = workflow_of(&manifest, key);
            if ["completed", "failed"].contains(&view["status"].as_str().unwrap_or("")) {
                break;
            }
            assert!(Instant::now() < deadline, "{key} did not finish: {view}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let url = server.as_ref().unwrap().url.clone();
    let call = |key: &str, action: &str| -> Value {
        let out = burrow(
            &manifest,
            &["call", "workflow-probe", key, action, "--url", &url],
        );
        serde_json::from_str(&stdout(&out)).unwrap()
    };
    // Every payment applied exactly once: 1 + 2 + .. + 60.
    assert_eq!(call("pay", "count"), json!(1830));
    assert_eq!(call("pay", "done").as_array().unwrap().len(), 60);
    let view = workflow_of(&manifest, "pay");
    let output: Value = serde_json::from_str(view["output"].as_str().unwrap()).unwrap();
    assert_eq!(output["applied"], 60);
    // Every reservation undone exactly once, newest first.
    assert_eq!(call("undo", "count"), json!(0));
    let done = call("undo", "done");
    let done: Vec<&str> = done
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d[0].as_str().unwrap())
        .collect();
    assert_eq!(done.len(), 60, "{done:?}");
    assert_eq!(done[30], "undo reserve-29");
    assert_eq!(done[59], "undo reserve");
    assert_eq!(workflow_of(&manifest, "undo")["status"], "failed");
    server.unwrap().stop();
}

fn write_chat_manifest(dir: &Path) -> std::path::PathBuf {
    let manifest = dir.join("burrow.toml");
    std::fs::write(
        &manifest,
        format!(
            "[host]\ndata_dir = \"data\"\n\n[actors.chat-room]\ncomponent = {:?}\n",
            programs::CHAT_ROOM
        ),
    )
    .unwrap();
    manifest
}

/// Waits for `child` to exit, for at most `limit`; kills it if it does not.
fn wait_for_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn watch_prints_each_event_as_a_json_line_until_the_server_closes() {
    use std::io::BufRead;

    let dir = tempfile::tempdir().unwrap();
    let manifest = write_chat_manifest(dir.path());
    let server = Serve::start(&manifest);
    let url = server.url.clone();
    let mut watch = crate::support::burrow_command()
        .arg("--manifest")
        .arg(&manifest)
        .args(["watch", "chat-room", "lobby", "--url", &url])
        .args(["--params", r#"{"name": "ada"}"#])
        .env("BURROW_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let mut errors = std::io::BufReader::new(watch.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        let read = errors.read_line(&mut line).unwrap();
        assert!(read > 0, "burrow watch ended before it connected");
        if line.starts_with("connected as ") {
            break;
        }
    }
    let id = line["connected as ".len()..].trim();
    assert!(id.parse::<u64>().is_ok(), "{line}");

    let (lines, received) = std::sync::mpsc::channel();
    let output = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(output).lines() {
            if lines.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let next_line = || {
        received
            .recv_timeout(Duration::from_secs(30))
            .expect("a line from burrow watch")
    };

    assert_eq!(
        next_line(),
        r#"{"event":"joined","payload":{"name":"ada"}}"#
    );
    let out = burrow(
        &manifest,
        &[
            "call",
            "chat-room",
            "lobby",
            "post",
            r#"["bob", "hi"]"#,
            "--url",
            &url,
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let posted = stdout(&out);
    // Exactly as the server sent it: compact, in the actor's field order.
    let line = next_line();
    assert!(
        line.starts_with(&format!(
            r#"{{"event":"message","payload":{{"id":{posted},"author":"bob","text":"hi","at":"#
        )),
        "{line}"
    );
    let message: Value = serde_json::from_str(&line).unwrap();
    assert!(message["payload"]["at"].is_i64(), "{line}");

    // Destroying the instance closes the connection: watch ends with 0.
    let out = burrow(&manifest, &["destroy", "chat-room", "lobby", "--url", &url]);
    assert!(out.status.success(), "{out:?}");
    let status = wait_for_exit(&mut watch, Duration::from_secs(30));
    assert!(status.success(), "burrow watch ended with {status}");
    let rest: Vec<String> = received.iter().collect();
    assert!(rest.is_empty(), "more lines: {rest:?}");
    server.stop();
}

#[test]
fn watch_failures_get_errors_and_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_chat_manifest(dir.path());
    let server = Serve::start(&manifest);
    let url = server.url.clone();
    let watch = |args: &[&str]| {
        let mut all = vec!["watch"];
        all.extend_from_slice(args);
        burrow(&manifest, &all)
    };

    // The connect hook refuses a connection without a name.
    let out = watch(&["chat-room", "lobby", "--url", &url]);
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert!(stderr(&out).contains("name"), "{out:?}");
    let out = watch(&["chat-room", "lobby", "--url", &url, "--json"]);
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    let error: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(error["error"]["code"], "connection-refused", "{out:?}");

    let out = watch(&["nobody", "lobby", "--url", &url]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let out = watch(&["chat-room", "lobby", "--params", "{oops", "--url", &url]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let out = watch(&["chat-room", "lobby", "--url", "http://127.0.0.1:9"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr(&out).contains("cannot reach"), "{out:?}");
    server.stop();
}

fn write_talk_manifest(dir: &Path) -> std::path::PathBuf {
    let manifest = dir.join("burrow.toml");
    std::fs::write(
        &manifest,
        format!(
            "[host]\ndata_dir = \"data\"\n\n[actors.talk-probe]\ncomponent = {:?}\n",
            programs::TALK_PROBE
        ),
    )
    .unwrap();
    manifest
}

fn notes_of(manifest: &Path, url: &str) -> Vec<String> {
    let out = burrow(
        manifest,
        &["call", "talk-probe", "k", "notes", "--url", url],
    );
    serde_json::from_str(&stdout(&out)).unwrap_or_default()
}

#[test]
fn kill_9_while_schedules_come_due_runs_each_once() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_talk_manifest(dir.path());
    let server = Serve::start(&manifest);
    // 400 schedules, due in batches of 40 from 300 ms to 1650 ms from now,
    // each taking 3 ms.
    for batch in 0..10 {
        let args = json!([300 + batch * 150, 40, format!("b{batch}-"), 3]).to_string();
        let out = burrow(
            &manifest,
            &[
                "call",
                "talk-probe",
                "k",
                "later_many",
                &args,
                "--url",
                &server.url,
            ],
        );
        assert!(out.status.success(), "{out:?}");
    }
    let mut server = Some(server);
    let mut progress = Vec::new();
    for pause in [350, 200, 300, 150, 400] {
        std::thread::sleep(Duration::from_millis(pause));
        progress.push(notes_of(&manifest, &server.as_ref().unwrap().url).len());
        server = Some(server.take().unwrap().kill_9_and_restart(&manifest));
    }
    let mid_way = progress.iter().filter(|n| (1..400).contains(*n)).count();
    assert!(mid_way >= 2, "too few kills landed mid-way: {progress:?}");
    // Nobody calls but to look: the host runs what is left by itself.
    let url = server.as_ref().unwrap().url.clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut notes = notes_of(&manifest, &url);
    while notes.len() < 400 {
        assert!(Instant::now() < deadline, "only {} of 400 ran", notes.len());
        std::thread::sleep(Duration::from_millis(100));
        notes = notes_of(&manifest, &url);
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut notes = notes_of(&manifest, &url);
    assert_eq!(notes.len(), 400, "a schedule ran twice: {progress:?}");
    notes.sort();
    notes.dedup();
    assert_eq!(notes.len(), 400, "a schedule ran twice: {progress:?}");
    let out = burrow(
        &manifest,
        &["call", "talk-probe", "k", "pending", "--url", &url],
    );
    assert_eq!(stdout(&out), "[]");
    eprintln!("notes at each kill: {progress:?}");
    server.unwrap().stop();
}

/// What one key's writer knows of its instance: the generation it writes
/// (one per creation), the notes acknowledged in it, and, while a destroy
/// is unanswered, the notes of the generation being destroyed.
#[derive(Default, Clone)]
struct Generations {
    generation: u32,
    acked: Vec<String>,
    destroying: Option<(u32, Vec<String>)>,
}

/// Destroys and re-creates the instance of `key` and writes notes into
/// each new one, until a request fails (the server was killed).
async fn destroy_and_write(
    client: burrow::client::Client,
    key: String,
    log: std::sync::Arc<std::sync::Mutex<Generations>>,
) {
    loop {
        let generation = {
            let mut log = log.lock().unwrap();
            log.destroying = Some((log.generation, log.acked.clone()));
            log.generation
        };
        if client.destroy("talk-probe", &key).await.is_err() {
            return;
        }
        {
            let mut log = log.lock().unwrap();
            log.generation = generation + 1;
            log.acked.clear();
            log.destroying = None;
        }
        for n in 0..4 {
            let note = format!("g{}-{n}", generation + 1);
            let args = json!([note]).to_string();
            if client
                .call("talk-probe", &key, "note", &args)
                .await
                .is_err()
            {
                return;
            }
            log.lock().unwrap().acked.push(note);
        }
    }
}

/// The generation a note was written in.
fn generation_of(note: &str) -> u32 {
    note[1..note.find('-').unwrap()].parse().unwrap()
}

/// Checks what survived of `key` against what its writer knew; returns
/// the writer's state for the next round.
fn check_generations(key: &str, notes: &[String], known: &Generations) -> Generations {
    let generations: std::collections::BTreeSet<u32> =
        notes.iter().map(|n| generation_of(n)).collect();
    assert!(generations.len() <= 1, "{key} mixes generations: {notes:?}");
    let written = |generation: u32, count: usize| -> Vec<String> {
        (0..count).map(|n| format!("g{generation}-{n}")).collect()
    };
    match generations.first() {
        None => assert!(
            known.destroying.is_some() || known.acked.is_empty(),
            "{key} lost its acknowledged notes {:?}",
            known.acked
        ),
        Some(&generation) if generation == known.generation => {
            // At most one note more than acknowledged: the one in flight.
            assert!(
                notes.len() <= known.acked.len() + 1
                    && notes[..known.acked.len().min(notes.len())] == known.acked[..]
                    && notes == written(generation, notes.len()).as_slice(),
                "{key}: acknowledged {:?}, found {notes:?}",
                known.acked
            );
        }
        Some(&generation) => {
            let Some((old, old_notes)) = &known.destroying else {
                panic!("{key}: generation {generation} came back: {notes:?}");
            };
            assert!(
                generation == *old && notes == old_notes.as_slice(),
                "{key}: the destroyed instance is not intact: {old_notes:?} became {notes:?}"
            );
        }
    }
    let generation = generations.first().copied().unwrap_or(known.generation + 1);
    Generations {
        generation: generation.max(known.generation),
        acked: notes.to_vec(),
        destroying: None,
    }
}

#[test]
fn kill_9_during_destroy_and_re_create_leaves_each_instance_old_or_new() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_talk_manifest(dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut server = Serve::start(&manifest);
    let keys: Vec<String> = (0..4).map(|n| format!("k{n}")).collect();
    let mut known: Vec<Generations> = vec![Generations::default(); keys.len()];
    let mut mid_destroy = 0;
    for (round, pause) in [120u64, 260, 180, 330, 90, 240, 150, 300, 210, 170]
        .into_iter()
        .enumerate()
    {
        let client = burrow::client::Client::new(&server.url);
        let logs: Vec<_> = known
            .iter()
            .map(|k| std::sync::Arc::new(std::sync::Mutex::new(k.clone())))
            .collect();
        let writers: Vec<_> = keys
            .iter()
            .zip(&logs)
            .map(|(key, log)| {
                runtime.spawn(destroy_and_write(client.clone(), key.clone(), log.clone()))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(pause));
        server = server.kill_9_and_restart(&manifest);
        for writer in writers {
            runtime.block_on(writer).unwrap();
        }
        for ((key, log), known) in keys.iter().zip(&logs).zip(known.iter_mut()) {
            let log = log.lock().unwrap().clone();
            mid_destroy += usize::from(log.destroying.is_some());
            let out = burrow(
                &manifest,
                &["call", "talk-probe", key, "notes", "--url", &server.url],
            );
            assert!(out.status.success(), "round {round}: {out:?}");
            let notes: Vec<String> = serde_json::from_str(&stdout(&out)).unwrap();
            *known = check_generations(key, &notes, &log);
        }
    }
    eprintln!("kills during an unanswered destroy: {mid_destroy}");
    assert!(mid_destroy >= 3, "too few kills landed during a destroy");
    server.stop();
}

/// `burrow serve` over HTTPS with the manifest's certificate and key, and
/// `burrow call --url https://...` trusting its CA by `--ca-cert` or by
/// `BURROW_CA_CERT`; without either the call fails on the certificate. A
/// bad pair stops `serve` before it starts.
#[test]
fn calls_over_https_trust_the_ca_given_by_flag_or_environment() {
    let dir = tempfile::tempdir().unwrap();
    let tls = dir.path().join("tls");
    std::fs::create_dir(&tls).unwrap();
    let (_, key, ca) = crate::tls::Pki::new("cli").write(&tls);
    let manifest = dir.path().join("burrow.toml");
    std::fs::write(
        &manifest,
        format!(
            "[host]\ndata_dir = \"data\"\ntls_cert = \"tls/cert.pem\"\ntls_key = \"tls/key.pem\"\n\n[actors.counter]\ncomponent = {:?}\n",
            programs::COUNTER
        ),
    )
    .unwrap();
    let server = Serve::start(&manifest);
    let url = server.url.replace("http://", "https://");
    let call = |ca_flag: Option<&Path>, ca_env: Option<&Path>| {
        let mut command = crate::support::burrow_command();
        command
            .arg("--manifest")
            .arg(&manifest)
            .args(["call", "counter", "c", "increment", "[1]", "--url", &url])
            .env("BURROW_LOG", "warn")
            .env_remove("BURROW_CA_CERT");
        if let Some(ca) = ca_flag {
            command.arg("--ca-cert").arg(ca);
        }
        if let Some(ca) = ca_env {
            command.env("BURROW_CA_CERT", ca);
        }
        command.output().expect("run burrow")
    };

    let out = call(Some(&ca), None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "1");
    let out = call(None, Some(&ca));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "2");

    let out = call(None, None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("certificate"),
        "the error says it is the certificate: {}",
        stderr(&out)
    );
    let out = call(Some(&dir.path().join("nothing.pem")), None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("nothing.pem"), "{}", stderr(&out));
    server.stop();

    // A certificate file that is not there: `serve` stops at once and
    // names it.
    let out = burrow(
        &manifest,
        &[
            "serve",
            "--listen",
            &format!("127.0.0.1:{}", free_port()),
            "--tls-cert",
            &dir.path().join("missing.pem").display().to_string(),
            "--tls-key",
            &key.display().to_string(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("missing.pem"), "{}", stderr(&out));
    // A certificate without its key is a bad command line.
    let out = burrow(&manifest, &["serve", "--tls-cert", "tls/cert.pem"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn export_to_a_file_or_stdout_and_import_from_a_file_or_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(dir.path());
    let local = ["--local"];
    let run = |args: &[&str]| {
        let output = burrow(&manifest, &[args, &local].concat());
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        output
    };
    run(&["call", "counter", "a", "increment", "[4]"]);
    let file = dir.path().join("a.burrow");
    let file_arg = file.to_str().unwrap();
    run(&["export", "counter", "a", "--output", file_arg]);
    let to_stdout = run(&["export", "counter", "a"]).stdout;
    assert!(to_stdout.starts_with(b"burrow-export 1\n"));
    run(&["import", "counter", "b", file_arg]);
    assert_eq!(stdout(&run(&["call", "counter", "b", "get", "[]"])), "4");
    // From standard input, over an existing instance.
    let mut child = crate::support::burrow_command()
        .arg("--manifest")
        .arg(&manifest)
        .args(["import", "counter", "a", "-", "--replace", "--local"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    run(&["call", "counter", "a", "increment", "[10]"]);
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &to_stdout).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&run(&["call", "counter", "a", "get", "[]"])), "4");
    // A changed file: a clear error, and an exit code that says so.
    let mut changed = std::fs::read(&file).unwrap();
    let middle = changed.len() / 2;
    changed[middle] ^= 1;
    std::fs::write(&file, changed).unwrap();
    let output = burrow(&manifest, &["import", "counter", "c", file_arg, "--local"]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("fails its checksum"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn fork_makes_a_paused_copy_and_resume_lets_it_work() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(dir.path());
    let local = ["--local"];
    let run = |args: &[&str]| {
        let output = burrow(&manifest, &[args, &local].concat());
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        stdout(&output)
    };
    run(&["call", "counter", "a", "increment", "[4]"]);
    let forked: serde_json::Value =
        serde_json::from_str(&run(&["fork", "counter", "a", "b"])).unwrap();
    assert_eq!(forked["forked"], "b", "{forked}");
    assert_eq!(run(&["call", "counter", "b", "get", "[]"]), "4");
    let inspection = burrow(&manifest, &["inspect", "counter", "b"]);
    let inspection: serde_json::Value = serde_json::from_str(&stdout(&inspection)).unwrap();
    assert!(inspection["paused"]["since"].is_i64(), "{inspection}");
    let resumed = |key: &str| -> serde_json::Value {
        serde_json::from_str(&run(&["resume", "counter", key])).unwrap()
    };
    assert_eq!(resumed("b")["resumed"], true);
    assert_eq!(resumed("b")["resumed"], false);
    let paused: serde_json::Value = serde_json::from_str(&run(&["pause", "counter", "a"])).unwrap();
    assert_eq!(paused["paused"], true);
    assert_eq!(resumed("a")["resumed"], true);
    // A taken key: a clear error, and nothing changed.
    let output = burrow(&manifest, &["fork", "counter", "a", "b", "--local"]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("already exists"),
        "{}",
        stderr(&output)
    );
}
