//! The workflow actor's cases across a restart of the host and across
//! `kill -9` of `burrow serve`: each step applied once, a durable sleep.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use burrow::Host;
use serde_json::{Value, json};

use super::*;

/// `step-0` to `step-<count - 1>`, each once, in order.
fn steps_once(applied: &Value, count: usize) {
    let expected: Vec<String> = (0..count).map(|i| format!("step-{i}")).collect();
    assert_eq!(applied, &json!(expected));
}

/// Runs `phase` for the languages still passing; records a failure.
async fn phase<F, Fut>(report: &mut Report, present: &[&'static str], f: F)
where
    F: Fn(&'static str) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let passing = report.passing(present);
    report.run(&passing, f).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn steps_and_a_sleep_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (specs, present, missing) = super::actors();
    let host = start(dir.path(), &specs).await;
    let mut report = Report::new("steps once and a durable sleep across a restart", &missing);
    let waiting = |host: Host| {
        move |language: &'static str| {
            let host = host.clone();
            async move {
                let actor = flow(language);
                let steps = json!({"scenario": "steps", "count": 20, "pause_ms": 1500});
                host.create(&actor, "steps", &steps.to_string())
                    .await
                    .unwrap();
                let sleep = json!({"scenario": "sleep", "ms": 1500});
                host.create(&actor, "sleep", &sleep.to_string())
                    .await
                    .unwrap();
                for key in ["steps", "sleep"] {
                    eventually(LONG, &format!("{actor}/{key} to wait"), async || {
                        let view = host.workflow(&actor, key).unwrap();
                        (view.record.status.as_str() == "waiting").then_some(())
                    })
                    .await;
                }
                let applied = call(&host, &actor, "steps", "applied", json!([])).await;
                steps_once(&applied, 10);
            }
        }
    };
    phase(&mut report, &present, waiting(host.clone())).await;
    let host = crate::support::restart(host, &specs).await;
    let resumed = |host: Host| {
        move |language: &'static str| {
            let host = host.clone();
            async move {
                let actor = flow(language);
                let view = finished(&host, &actor, "steps").await;
                assert_eq!(output(&view), json!({"count": 20, "version": 2}));
                steps_once(
                    &call(&host, &actor, "steps", "applied", json!([])).await,
                    20,
                );
                let view = finished(&host, &actor, "sleep").await;
                let out = output(&view);
                let slept = out["to"].as_i64().unwrap() - out["from"].as_i64().unwrap();
                assert!(slept >= 1500, "slept {slept} ms: {out}");
                let applied = call(&host, &actor, "sleep", "applied", json!([])).await;
                assert_eq!(applied, json!(["before", "after"]));
            }
        }
    };
    phase(&mut report, &present, resumed(host.clone())).await;
    host.shutdown().await;
    report.finish();
}

/// `burrow serve` on a free port.
struct Serve {
    child: Child,
    url: String,
}

impl Serve {
    fn start(manifest: &Path) -> Serve {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // The tests' shared compile cache: `serve` loads the components
        // the tests compiled already.
        let child = crate::support::burrow_command()
            .arg("--manifest")
            .arg(manifest)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .env("BURROW_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(300);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "burrow serve did not start listening"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Serve {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    fn kill_9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn stop(mut self) {
        Command::new("kill")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "burrow serve ended with {status}");
    }
}

/// A manifest of the workflow actors, their data in `dir/data`.
fn manifest(dir: &Path, specs: &[burrow::manifest::ActorSpec]) -> std::path::PathBuf {
    let mut text = String::from("[host]\ndata_dir = \"data\"\n");
    for spec in specs
        .iter()
        .filter(|s| s.name.starts_with("conformance-flow-"))
    {
        text.push_str(&format!(
            "\n[actors.{}]\ncomponent = {:?}\ncall_timeout = \"5s\"\nmemory_limit = \"{}MiB\"\n",
            spec.name,
            spec.component.display().to_string(),
            spec.options.memory_limit >> 20,
        ));
    }
    let manifest = dir.join("burrow.toml");
    std::fs::write(&manifest, text).unwrap();
    manifest
}

#[tokio::test(flavor = "multi_thread")]
async fn steps_apply_once_across_kill_9() {
    let (specs, present, missing) = super::actors();
    let mut report = Report::new("steps once across kill -9", &missing);
    // Beside the shared compile cache, so its entries can be hard links.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // Compiles what the shared cache lacks, in this process, once.
    start(&dir.path().join("warm"), &specs)
        .await
        .shutdown()
        .await;
    let manifest = manifest(dir.path(), &specs);
    let mut server = Serve::start(&manifest);
    // Enough work (600 steps of 15 ms each) that a busy machine, whose
    // restarts take seconds, still kills every language mid-way.
    const COUNT: i64 = 600;
    let input = json!({"scenario": "steps", "count": COUNT, "step_ms": 15});
    // Rust's workflow last: it runs fastest, and should not be half done
    // before the kills begin.
    for language in present.iter().rev() {
        let client = burrow::client::Client::new(&server.url);
        client
            .actor(&flow(language), "k")
            .create(&input)
            .await
            .unwrap();
    }
    // history_len counts the version and the steps: COUNT + 1 at the end.
    let mid_way =
        |progress: &Vec<i64>| progress.iter().filter(|n| (2..=COUNT).contains(*n)).count();
    let mut progress: Vec<Vec<i64>> = vec![Vec::new(); present.len()];
    let pauses = [150, 90, 260, 40, 200, 120, 310, 70];
    // Kill until every language was caught mid-way twice (or finished),
    // eight times at least, twenty at most.
    for round in 0..20 {
        tokio::time::sleep(Duration::from_millis(pauses[round % pauses.len()])).await;
        let client = burrow::client::Client::new(&server.url);
        for (i, language) in present.iter().enumerate() {
            let view = client.actor(&flow(language), "k").workflow().await;
            let len = view
                .ok()
                .and_then(|v| v["history_len"].as_i64())
                .unwrap_or(0);
            progress[i].push(len);
        }
        server.kill_9();
        server = Serve::start(&manifest);
        let settled = progress
            .iter()
            .all(|p| mid_way(p) >= 2 || p.last().is_some_and(|n| *n > COUNT));
        if round >= 7 && settled {
            break;
        }
    }
    let client = burrow::client::Client::new(&server.url);
    for (i, language) in present.iter().enumerate() {
        let actor = flow(language);
        let handle = client.actor(&actor, "k");
        let progress = progress[i].clone();
        let outcome = async {
            assert!(
                mid_way(&progress) >= 2,
                "too few kills landed mid-way: {progress:?}"
            );
            let deadline = Instant::now() + Duration::from_secs(180);
            let view = loop {
                let view = handle.workflow().await.unwrap();
                if view["status"] == "completed" {
                    break view;
                }
                assert!(
                    Instant::now() < deadline,
                    "the workflow did not finish: {view}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            let out = json(view["output"].as_str().unwrap());
            assert_eq!(out, json!({"count": COUNT, "version": 2}), "{progress:?}");
            let applied = handle.call_json("applied", "[]").await.unwrap();
            steps_once(&applied, COUNT as usize);
            eprintln!("{actor}: history length at each kill: {progress:?}");
        };
        let result =
            futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(outcome)).await;
        report.record(language, result);
    }
    server.stop();
    report.finish();
}
