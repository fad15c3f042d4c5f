//! Several hosts on one PostgreSQL (`burrow serve --cluster`), as processes:
//! requests through any host, failover after `kill -9`, a paused owner
//! fenced out, a deleted data directory restored, a clean leave.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use burrow::client::Client;
use serde_json::{Value, json};

use crate::postgres;
use crate::support::{free_port, programs};

/// The lease, heartbeat and margin the test clusters run with.
const LEASE: Duration = Duration::from_secs(2);
const HEARTBEAT: &str = "250ms";
const MARGIN: Duration = Duration::from_millis(500);

/// Hosts of one cluster, each a `burrow serve` process with a data
/// directory of its own.
struct Cluster {
    dir: tempfile::TempDir,
    manifest: PathBuf,
    postgres: String,
    lease: Duration,
    hosts: Vec<Member>,
}

struct Member {
    port: u16,
    child: Option<Child>,
}

impl Cluster {
    /// `n` hosts on a new database, with the test lease.
    fn start(n: usize) -> Cluster {
        Cluster::start_with(n, LEASE, "10s")
    }

    fn start_with(n: usize, lease: Duration, call_timeout: &str) -> Cluster {
        Cluster::start_configured(n, lease, call_timeout, "", &[])
    }

    /// `n` hosts whose manifests begin with `head` (a `[host]` section),
    /// with `files` (name and text) beside the manifest.
    fn start_configured(
        n: usize,
        lease: Duration,
        call_timeout: &str,
        head: &str,
        files: &[(&str, &str)],
    ) -> Cluster {
        Cluster::start_on(postgres::database(), n, lease, call_timeout, head, files)
    }

    /// As [`Cluster::start_configured`], on the database at `postgres`.
    fn start_on(
        postgres: String,
        n: usize,
        lease: Duration,
        call_timeout: &str,
        head: &str,
        files: &[(&str, &str)],
    ) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let manifest = dir.path().join("burrow.toml");
        std::fs::write(
            &manifest,
            format!(
                "{head}\n[actors.counter]\ncomponent = {:?}\n\n\
                 [actors.talk]\ncomponent = {:?}\ncall_timeout = {call_timeout:?}\n\n\
                 [actors.queue-probe]\ncomponent = {:?}\n\n\
                 [actors.workflow-probe]\ncomponent = {:?}\n",
                programs::COUNTER,
                programs::TALK_PROBE,
                programs::QUEUE_PROBE,
                programs::WORKFLOW_PROBE,
            ),
        )
        .unwrap();
        let mut cluster = Cluster {
            dir,
            manifest,
            postgres,
            lease,
            hosts: (0..n)
                .map(|_| Member {
                    port: free_port(),
                    child: None,
                })
                .collect(),
        };
        for i in 0..n {
            cluster.start_host(i);
        }
        cluster
    }

    fn data_dir(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("host-{i}"))
    }

    fn url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.hosts[i].port)
    }

    fn client(&self, i: usize) -> Client {
        Client::new(&self.url(i))
    }

    /// Starts host `i` (again) and waits until it answers.
    fn start_host(&mut self, i: usize) {
        let port = self.hosts[i].port;
        let child = crate::support::burrow_command()
            .arg("--manifest")
            .arg(&self.manifest)
            .arg("serve")
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .arg("--data-dir")
            .arg(self.data_dir(i))
            .args(["--cluster", &self.postgres])
            .args(["--name", &format!("host-{i}")])
            .args(["--lease", &format!("{}ms", self.lease.as_millis())])
            .args(["--heartbeat", HEARTBEAT])
            .args(["--lease-margin", &format!("{}ms", MARGIN.as_millis())])
            .env("BURROW_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        self.hosts[i].child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "host {i} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        crate::support::wait_until_ready(port, Duration::from_secs(600));
    }

    /// Kills host `i` with SIGKILL.
    fn kill_9(&mut self, i: usize) {
        let mut child = self.hosts[i].child.take().expect("running");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Stops host `i` with SIGTERM (it leaves the cluster) and waits.
    fn terminate(&mut self, i: usize) {
        let mut child = self.hosts[i].child.take().expect("running");
        signal(&child, "TERM");
        let status = child.wait().unwrap();
        assert!(status.success(), "host {i} ended with {status}");
    }

    fn signal(&self, i: usize, name: &str) {
        signal(self.hosts[i].child.as_ref().expect("running"), name);
    }
}

fn signal(child: &Child, name: &str) {
    let sent = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(sent.success());
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for host in &mut self.hosts {
            if let Some(mut child) = host.child.take() {
                let _ = Command::new("kill")
                    .args(["-CONT", &child.id().to_string()])
                    .status();
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn hex_json(value: &Value) -> String {
    value
        .to_string()
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn call(client: &Client, actor: &str, key: &str, action: &str, args: Value) -> Value {
    let text = client
        .call(actor, key, action, &args.to_string())
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{actor}/{key}.{action}{args} at {}: {e:?}",
                client.base_url()
            )
        });
    serde_json::from_str(&text).unwrap()
}

/// The notes of `talk/key`, counted.
async fn notes(client: &Client, key: &str) -> BTreeMap<String, usize> {
    let notes = call(client, "talk", key, "notes", json!([])).await;
    let mut counted = BTreeMap::new();
    for note in notes.as_array().unwrap() {
        *counted
            .entry(note.as_str().unwrap().to_owned())
            .or_insert(0) += 1;
    }
    counted
}

/// The host that holds each lease, from any host's `/cluster`.
async fn leases(client: &Client) -> HashMap<String, i64> {
    let status = client.cluster_status().await.unwrap();
    status["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["live"].as_bool().unwrap())
        .map(|h| {
            (
                h["name"].as_str().unwrap().to_owned(),
                h["leases"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn increments_spread_over_three_hosts_sum_exactly() {
    let cluster = Cluster::start(3);
    let clients: Vec<Client> = (0..3).map(|i| cluster.client(i)).collect();
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..12usize {
        let clients = clients.clone();
        let mut plan = Vec::new();
        for n in 0..40usize {
            let key = format!("k{}", (task + n) % 5);
            let amount = (n % 3 + 1) as i64;
            *expected.entry(key.clone()).or_default() += amount;
            plan.push((n % 3, key, amount));
        }
        tasks.spawn(async move {
            for (host, key, amount) in plan {
                call(
                    &clients[host],
                    "counter",
                    &key,
                    "increment",
                    json!([amount]),
                )
                .await;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    for (key, sum) in &expected {
        for client in &clients {
            let value = call(client, "counter", key, "get", json!([])).await;
            assert_eq!(value, json!(sum), "{key} through {}", client.base_url());
        }
    }
    // Each instance has one owner, and every host lists every instance.
    let held: i64 = leases(&clients[1]).await.values().sum();
    assert_eq!(held, expected.len() as i64);
    for client in &clients {
        assert_eq!(
            client.keys("counter").await.unwrap(),
            ["k0", "k1", "k2", "k3", "k4"]
        );
    }
    let status = crate::support::burrow_command()
        .args(["--json", "cluster", "status", "--url", &cluster.url(2)])
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    let hosts = status["result"]["hosts"].as_array().expect("hosts");
    assert_eq!(hosts.len(), 3, "{status}");
    assert!(hosts.iter().all(|h| h["live"] == true), "{status}");
}

/// Waits, at most a minute, until the queue of the queue probe `key` has
/// processed `events` events, each once.
async fn every_event_processed_once(reader: &Client, key: &str, events: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let log = call(reader, "queue-probe", key, "log", json!([])).await;
        let mut processed: HashMap<i64, usize> = HashMap::new();
        for entry in log.as_array().unwrap() {
            *processed
                .entry(entry["event_id"].as_i64().unwrap())
                .or_default() += 1;
        }
        assert!(
            processed.values().all(|&n| n == 1),
            "an event was processed twice: {log}"
        );
        if processed.len() == events {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the queue stopped at {} events",
            processed.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the load of one round saw.
#[derive(Default)]
struct Seen {
    acknowledged: Vec<String>,
    unknown: Vec<String>,
    /// When the first call succeeded after the fault began.
    back_at: Option<Instant>,
    /// Calls that failed: when each began, and what it said.
    failed: Vec<(Instant, String)>,
}

/// What happens to the owner of a round's instances.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// `kill -9`.
    Kill,
    /// `SIGSTOP` for this long (past the lease), then `SIGCONT`.
    Pause(Duration),
}

/// Faults for `rounds` rounds, drawn from `seed`: a kill first, a pause
/// second, then either, a pause lasting from just past the lease and its
/// margin to twice the lease.
fn faults(seed: u64, rounds: usize) -> Vec<Fault> {
    let mut state = seed | 1;
    let mut next = move || {
        // xorshift64
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let shortest = LEASE + MARGIN + Duration::from_millis(100);
    let pause = move |n: u64| {
        let spread = (LEASE * 2 - shortest).as_millis() as u64;
        Fault::Pause(shortest + Duration::from_millis(n % (spread + 1)))
    };
    (0..rounds)
        .map(|round| match round {
            0 => Fault::Kill,
            1 => pause(next()),
            _ if next() % 2 == 0 => Fault::Kill,
            _ => pause(next()),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_and_pauses_of_owners_under_load_lose_nothing_acknowledged_and_repeat_nothing() {
    let seed = std::env::var("BURROW_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let faults = faults(seed, 4);
    eprintln!("faults {faults:?} (BURROW_TEST_SEED={seed})");
    // After a fault, every instance is writable again within this, through
    // every host: from the kill, or from the end of the pause.
    let bound = LEASE + MARGIN + Duration::from_secs(1);
    let mut cluster = Cluster::start(3);
    let mut failovers = Vec::new();
    for (round, fault) in faults.into_iter().enumerate() {
        let victim = round % 3;
        let others: Vec<usize> = (0..3).filter(|&i| i != victim).collect();
        let owner = cluster.client(victim);
        // The victim takes the leases: it serves the first requests.
        let keys: Vec<String> = (0..3).map(|i| format!("r{round}-{i}")).collect();
        for key in &keys {
            call(&owner, "talk", key, "note", json!(["first"])).await;
        }
        let workflow = format!("w{round}");
        owner
            .create(
                "workflow-probe",
                &workflow,
                &json!({"steps": 200, "step_ms": 8}).to_string(),
            )
            .await
            .unwrap();
        let queue = format!("q{round}");
        owner.create("queue-probe", &queue, "{}").await.unwrap();
        let events: Vec<Value> = (0..120)
            .map(|_| json!({"type": "slow", "payload": {"ms": 5}}))
            .collect();
        call(&owner, "queue-probe", &queue, "enqueue", json!([events])).await;

        let seen = Arc::new(Mutex::new(Seen::default()));
        let fault_at: Arc<Mutex<Option<Instant>>> = Arc::default();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut load = tokio::task::JoinSet::new();
        for task in 0..6usize {
            let client = cluster.client(others[task % 2]);
            let key = keys[task % keys.len()].clone();
            let (seen, fault_at, stop) = (seen.clone(), fault_at.clone(), stop.clone());
            load.spawn(async move {
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    let note = format!("{key}/t{task}/{n}");
                    let after_fault = fault_at.lock().unwrap().is_some();
                    let began = Instant::now();
                    let answer = client
                        .call("talk", &key, "note", &json!([note]).to_string())
                        .await;
                    let mut seen = seen.lock().unwrap();
                    match answer {
                        Ok(_) => {
                            // The first call begun after the fault that
                            // succeeds: the instance is back.
                            let now = Instant::now();
                            if after_fault && seen.back_at.is_none_or(|at| now < at) {
                                seen.back_at = Some(now);
                            }
                            seen.acknowledged.push(note);
                        }
                        Err(e) => {
                            seen.failed
                                .push((began, format!("{key}: {}: {}", e.code, e.message)));
                            seen.unknown.push(note);
                        }
                    }
                }
            });
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
        // From when the instances must come back within the bound.
        let fault_end = match fault {
            Fault::Kill => {
                cluster.kill_9(victim);
                let at = Instant::now();
                *fault_at.lock().unwrap() = Some(at);
                at
            }
            Fault::Pause(pause) => {
                cluster.signal(victim, "STOP");
                *fault_at.lock().unwrap() = Some(Instant::now());
                tokio::time::sleep(pause).await;
                cluster.signal(victim, "CONT");
                Instant::now()
            }
        };
        // Calls that were on their way to the stopped owner end without
        // an answer; the first to succeed after the fault marks the
        // failover.
        tokio::time::sleep(bound + Duration::from_secs(2)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        while let Some(done) = load.join_next().await {
            done.unwrap();
        }
        if let Fault::Kill = fault {
            cluster.start_host(victim);
        }
        let seen = Arc::try_unwrap(seen).ok().unwrap().into_inner().unwrap();
        let at = fault_at.lock().unwrap().expect("the fault happened");
        let back = seen.back_at.expect("no call succeeded after the fault") - at;
        failovers.push((fault, back));
        if let Fault::Kill = fault {
            // The dead host's session closed: its instances are taken
            // over without waiting for its lease.
            assert!(
                back < LEASE,
                "the instances came back {back:?} after the kill"
            );
        }
        // No instance stays unwritable past the bound.
        let late: Vec<&String> = seen
            .failed
            .iter()
            .filter(|(began, _)| *began >= fault_end + bound)
            .map(|(_, error)| error)
            .collect();
        assert!(
            late.is_empty(),
            "round {round} ({fault:?}): {} calls begun {bound:?} after the fault ended failed: {:#?}",
            late.len(),
            &late[..late.len().min(10)]
        );

        // Every acknowledged note exactly once; nothing twice.
        let reader = cluster.client(others[0]);
        let mut found: BTreeMap<String, usize> = BTreeMap::new();
        for key in &keys {
            found.append(&mut notes(&reader, key).await);
        }
        assert!(found.values().all(|&n| n == 1), "a note was applied twice");
        for note in &seen.acknowledged {
            assert!(found.contains_key(note), "acknowledged {note} is lost");
        }
        let applied_unknown = seen
            .unknown
            .iter()
            .filter(|n| found.contains_key(*n))
            .count();
        eprintln!(
            "round {round}: back after {back:?}; {} acknowledged, {} without an answer ({applied_unknown} of them applied)",
            seen.acknowledged.len(),
            seen.unknown.len()
        );

        // The workflow and the queue resume on another host: every step
        // and every event applied once.
        let deadline = Instant::now() + Duration::from_secs(60);
        let view = loop {
            let view = reader.workflow("workflow-probe", &workflow).await.unwrap();
            if view["status"] == "completed" {
                break view;
            }
            assert!(
                Instant::now() < deadline,
                "the workflow did not finish: {view}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let output: Value = serde_json::from_str(view["output"].as_str().unwrap()).unwrap();
        assert_eq!(output["count"], 200, "{view}");
        let done = call(&reader, "workflow-probe", &workflow, "done", json!([])).await;
        assert_eq!(
            done.as_array().unwrap().len(),
            200,
            "each step applied once"
        );
        every_event_processed_once(&reader, &queue, 120).await;
    }
    eprintln!("back after each fault: {failovers:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_kills_of_owners_under_load_lose_nothing_and_fail_over_in_under_a_second() {
    // A long lease: a takeover that waited for it would take 10 s.
    let lease = Duration::from_secs(10);
    let mut cluster = Cluster::start_with(3, lease, "10s");
    let mut failovers = Vec::new();
    for round in 0..20 {
        let victim = round % 3;
        let others: Vec<usize> = (0..3).filter(|&i| i != victim).collect();
        let owner = cluster.client(victim);
        let keys: Vec<String> = (0..2).map(|i| format!("k{round}-{i}")).collect();
        for key in &keys {
            call(&owner, "talk", key, "note", json!(["first"])).await;
        }
        // Per key: the notes acknowledged, those without an answer, and
        // when the first call begun after the kill succeeded.
        type Log = (Vec<String>, Vec<String>, Option<Instant>);
        let logs: Vec<Arc<Mutex<Log>>> = keys.iter().map(|_| Arc::default()).collect();
        let killed_at: Arc<Mutex<Option<Instant>>> = Arc::default();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut load = tokio::task::JoinSet::new();
        for task in 0..4usize {
            let client = cluster.client(others[task % 2]);
            let key = keys[task % 2].clone();
            let log = logs[task % 2].clone();
            let (killed_at, stop) = (killed_at.clone(), stop.clone());
            load.spawn(async move {
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    let note = format!("{key}/t{task}/{n}");
                    let after_kill = *killed_at.lock().unwrap();
                    let answer = client
                        .call("talk", &key, "note", &json!([note]).to_string())
                        .await;
                    let mut log = log.lock().unwrap();
                    match answer {
                        Ok(_) => {
                            if after_kill.is_some() && log.2.is_none() {
                                log.2 = Some(Instant::now());
                            }
                            log.0.push(note);
                        }
                        Err(e) => log.1.push(format!("{note}: {}: {}", e.code, e.message)),
                    }
                }
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        cluster.kill_9(victim);
        let killed = Instant::now();
        *killed_at.lock().unwrap() = Some(killed);
        // Until every instance of the dead host answered again.
        let back = loop {
            let backs: Vec<Option<Instant>> = logs.iter().map(|l| l.lock().unwrap().2).collect();
            if backs.iter().all(Option::is_some) {
                break backs.into_iter().flatten().max().unwrap() - killed;
            }
            assert!(
                killed.elapsed() < Duration::from_secs(30),
                "round {round}: the instances did not come back"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        failovers.push(back);
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        while let Some(done) = load.join_next().await {
            done.unwrap();
        }
        // Every acknowledged note exactly once; nothing twice.
        let reader = cluster.client(others[0]);
        for (key, log) in keys.iter().zip(&logs) {
            let found = notes(&reader, key).await;
            let log = log.lock().unwrap();
            assert!(
                found.values().all(|&n| n == 1),
                "a note of {key} was applied twice"
            );
            for note in &log.0 {
                assert!(found.contains_key(note), "acknowledged {note} is lost");
            }
            // Only calls that reached the dead host fail, and say that
            // their outcome is unknown.
            for failed in &log.1 {
                assert!(
                    failed.contains("cluster-unavailable") && failed.contains("may or may not"),
                    "{failed}"
                );
            }
        }
        cluster.start_host(victim);
    }
    let mut sorted = failovers.clone();
    sorted.sort();
    eprintln!(
        "back after each kill: p50 {:?}, max {:?}: {failovers:?}",
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1]
    );
    assert!(
        sorted[sorted.len() - 1] < Duration::from_secs(1),
        "a failover took {:?}: {failovers:?}",
        sorted[sorted.len() - 1]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_drain_under_load_moves_every_instance_and_fails_no_request() {
    // A long lease: nothing here may wait for one.
    let lease = Duration::from_secs(10);
    let mut cluster = Cluster::start_with(3, lease, "10s");
    let drained = cluster.client(0);
    let keys: Vec<String> = (0..12).map(|n| format!("d{n}")).collect();
    for key in &keys {
        call(&drained, "counter", key, "increment", json!([1])).await;
    }
    // Work in the background of a drained instance: its queue.
    drained.create("queue-probe", "dq", "{}").await.unwrap();
    let events: Vec<Value> = (0..60)
        .map(|_| json!({"type": "slow", "payload": {"ms": 5}}))
        .collect();
    call(&drained, "queue-probe", "dq", "enqueue", json!([events])).await;

    // Callers of every counter through every host, the drained one too.
    let acknowledged: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let failed: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut load = tokio::task::JoinSet::new();
    for (task, key) in keys.iter().enumerate() {
        let client = cluster.client(task % 3);
        let key = key.clone();
        let (acknowledged, failed, stop) = (acknowledged.clone(), failed.clone(), stop.clone());
        load.spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match client.call("counter", &key, "increment", "[1]").await {
                    Ok(_) => *acknowledged.lock().unwrap().entry(key.clone()).or_default() += 1,
                    Err(e) => failed.lock().unwrap().push(format!("{key}: {e:?}")),
                }
            }
        });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let out = crate::support::burrow_command()
        .args(["cluster", "drain", "host-0", "--url", &cluster.url(1)])
        .env("BURROW_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The counters in use at least (an idle instance may have moved
    // to its share's host before).
    assert!(answer["moved"].as_u64().unwrap() >= 12, "{answer}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    while let Some(done) = load.join_next().await {
        done.unwrap();
    }
    let failed = failed.lock().unwrap().clone();
    assert!(
        failed.is_empty(),
        "{} calls failed: {failed:?}",
        failed.len()
    );

    // Host 0 serves nothing, and says it drains; the others hold it all.
    let status = drained.cluster_status().await.unwrap();
    let host_0 = status["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "host-0" && h["live"] == true)
        .unwrap()
        .clone();
    assert_eq!(host_0["leases"], 0, "{status}");
    assert_eq!(host_0["draining"], true, "{status}");
    // Every acknowledged increment is there, once.
    let reader = cluster.client(1);
    let acknowledged = acknowledged.lock().unwrap().clone();
    eprintln!(
        "drained: {answer}; {} increments acknowledged during the drain's run",
        acknowledged.values().sum::<u64>()
    );
    for key in &keys {
        let got = call(&reader, "counter", key, "get", json!([])).await;
        let expected = 1 + acknowledged.get(key).copied().unwrap_or(0);
        assert_eq!(got, json!(expected), "{key}");
    }
    // The queue goes on at its new host: every event processed once.
    every_event_processed_once(&reader, "dq", 60).await;
    // Its metrics say so.
    let metrics = crate::support::http()
        .get(format!("{}/metrics", cluster.url(0)))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("\nburrow_cluster_leases 0\n"), "{metrics}");
    let handed: u64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("burrow_cluster_handovers_total{reason=\"drain\"} "))
        .expect("handovers counted")
        .parse()
        .unwrap();
    assert_eq!(handed, answer["moved"].as_u64().unwrap(), "{metrics}");
    // It drains still after it joins again under a new id (its session
    // ended, say).
    let old = live_id(&cluster.postgres, "host-0").await.unwrap();
    end_session(&cluster.postgres, "host-0").await;
    let deadline = Instant::now() + lease;
    let new = loop {
        match live_id(&cluster.postgres, "host-0").await {
            Some(id) if id != old => break id,
            _ => {
                assert!(Instant::now() < deadline, "host 0 did not join again");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let draining = sql(
        &cluster.postgres,
        &format!("SELECT draining FROM burrow_hosts WHERE id = '{new}'"),
    )
    .await;
    assert!(
        draining[0].get::<_, bool>(0),
        "host 0 joined again, not draining"
    );
    // A drained host stops with nothing to give back; the rest serve on.
    assert_eq!(leases(&reader).await.get("host-0"), Some(&0));
    cluster.terminate(0);
    for key in &keys {
        call(&reader, "counter", key, "get", json!([])).await;
    }

    // Draining a name nobody has is an error naming it.
    let out = crate::support::burrow_command()
        .args(["cluster", "drain", "host-9", "--url", &cluster.url(1)])
        .env("BURROW_LOG", "warn")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no live host of the cluster is named `host-9`"),
        "{out:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_instances_spread_to_a_host_that_joins_and_busy_ones_stay() {
    let lease = Duration::from_secs(10);
    let mut cluster = Cluster::start_with(2, lease, "10s");
    cluster.hosts.push(Member {
        port: free_port(),
        child: None,
    });
    let a = cluster.client(0);
    for n in 0..30 {
        call(&a, "counter", &format!("s{n}"), "increment", json!([n])).await;
    }
    // One instance in use all along, through host 0, which serves it.
    let busy = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let calls = {
        let (client, busy) = (cluster.client(0), busy.clone());
        tokio::spawn(async move {
            let mut failed = Vec::new();
            let mut n = 0u64;
            while busy.load(std::sync::atomic::Ordering::Relaxed) {
                match client.call("counter", "hot", "increment", "[1]").await {
                    Ok(_) => n += 1,
                    Err(e) => failed.push(format!("{e:?}")),
                }
            }
            (n, failed)
        })
    };
    let shares = |leases: &HashMap<String, i64>| {
        (0..3)
            .map(|i| leases.get(&format!("host-{i}")).copied().unwrap_or(0))
            .collect::<Vec<i64>>()
    };
    // Host 1 takes a share of the 30 idle counters of host 0.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = shares(&leases(&a).await);
        if got[1] >= 14 {
            break;
        }
        assert!(Instant::now() < deadline, "host 1 holds {got:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A host that joins takes its share too.
    cluster.start_host(2);
    let joined = Instant::now();
    let got = loop {
        let got = shares(&leases(&a).await);
        if got[2] >= 9 {
            break got;
        }
        assert!(
            joined.elapsed() < Duration::from_secs(30),
            "host 2 holds {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!("host 2 held {got:?} after {:?}", joined.elapsed());
    busy.store(false, std::sync::atomic::Ordering::Relaxed);
    let (hot, failed) = calls.await.unwrap();
    assert!(failed.is_empty(), "{failed:?}");
    // The instance in use stayed with host 0; every counter is as it was.
    let status = a.cluster_status().await.unwrap();
    let c = cluster.client(2);
    for n in 0..30 {
        assert_eq!(
            call(&c, "counter", &format!("s{n}"), "get", json!([])).await,
            json!(n)
        );
    }
    assert_eq!(
        call(&c, "counter", "hot", "get", json!([])).await,
        json!(hot)
    );
    let rows = sql(
        &cluster.postgres,
        "SELECT h.name FROM burrow_instances i JOIN burrow_hosts h ON h.id = i.owner
         WHERE i.actor = 'counter' AND i.key = 'hot'",
    )
    .await;
    assert_eq!(rows.len(), 1, "{status}");
    assert_eq!(rows[0].get::<_, String>(0), "host-0", "{status}");
}

/// The version and digest of the counter's component on `client`'s host.
async fn counter_component(client: &Client) -> (i64, String) {
    let component = client.component("counter").await.unwrap();
    (
        component["version"].as_i64().unwrap(),
        component["digest"].as_str().unwrap().to_owned(),
    )
}

/// A deploy through one host runs on every host, on the instances each
/// holds, before it returns; a host that starts again runs the cluster's
/// last deploy, not its manifest's component; `--previous` through
/// another host puts the manifest's component back everywhere, as the
/// next version; counts survive it all.
#[tokio::test(flavor = "multi_thread")]
async fn a_deploy_through_one_host_runs_on_every_host_and_after_a_restart() {
    let mut cluster = Cluster::start(2);
    let (a, b) = (cluster.client(0), cluster.client(1));
    // One instance held by each host.
    call(&a, "counter", "on-0", "increment", json!([2])).await;
    call(&b, "counter", "on-1", "increment", json!([3])).await;
    let (_, manifest_digest) = counter_component(&a).await;
    // Refusals record nothing: bytes that are no component, and a
    // rollback before any deploy.
    let refused = b
        .deploy("counter", b"not a component".to_vec(), false)
        .await
        .unwrap_err();
    assert_eq!(refused.code, "invalid-component", "{refused:?}");
    let refused = a.deploy_previous("counter", false).await.unwrap_err();
    assert_eq!(refused.code, "no-previous-component", "{refused:?}");
    for client in [&a, &b] {
        assert_eq!(
            counter_component(client).await,
            (0, manifest_digest.clone())
        );
    }
    let conformance = std::fs::read(programs::CONFORMANCE_RUST).unwrap();
    let deployed = b.deploy("counter", conformance, false).await.unwrap();
    assert_eq!(deployed["version"], 1, "{deployed}");
    assert_eq!(
        deployed["previous_digest"],
        manifest_digest.as_str(),
        "{deployed}"
    );
    assert_eq!(deployed["lagging"], json!([]), "{deployed}");
    let digest = deployed["digest"].as_str().unwrap().to_owned();
    // Every host runs it once the deploy returned, on every instance.
    for client in [&a, &b] {
        assert_eq!(counter_component(client).await, (1, digest.clone()));
        for (key, count) in [("on-0", 2), ("on-1", 3)] {
            assert_eq!(
                call(client, "counter", key, "state", json!([])).await,
                Value::Null
            );
            assert_eq!(
                call(client, "counter", key, "get", json!([])).await,
                json!(count)
            );
        }
    }
    // A host that starts again runs the cluster's deploy.
    cluster.terminate(0);
    cluster.start_host(0);
    let a = cluster.client(0);
    assert_eq!(counter_component(&a).await, (1, digest.clone()));
    assert_eq!(
        call(&a, "counter", "new-on-0", "state", json!([])).await,
        Value::Null
    );
    // Back to the manifest's component, through the other host.
    let previous = a.deploy_previous("counter", false).await.unwrap();
    assert_eq!(previous["version"], 2, "{previous}");
    assert_eq!(previous["digest"], manifest_digest.as_str(), "{previous}");
    assert_eq!(previous["previous_digest"], digest.as_str(), "{previous}");
    for client in [&a, &b] {
        assert_eq!(
            counter_component(client).await,
            (2, manifest_digest.clone())
        );
        let refused = client
            .call("counter", "on-1", "state", "[]")
            .await
            .unwrap_err();
        assert!(format!("{refused:?}").contains("state"), "{refused:?}");
        assert_eq!(
            call(client, "counter", "on-0", "get", json!([])).await,
            json!(2)
        );
    }
    cluster.terminate(1);
    cluster.start_host(1);
    assert_eq!(
        counter_component(&cluster.client(1)).await,
        (2, manifest_digest)
    );
}

/// Calls through all three hosts while a deploy goes through one of
/// them, before it and after it: every call succeeds, on the old code or
/// the new, none applied twice (the counts sum to the calls answered),
/// and every instance answers the new code's actions afterwards through
/// every host.
#[tokio::test(flavor = "multi_thread")]
async fn a_deploy_under_calls_through_three_hosts_fails_none_and_applies_each_once() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let cluster = Cluster::start(3);
    let clients: Vec<Client> = (0..3).map(|i| cluster.client(i)).collect();
    const TASKS: usize = 12;
    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let (clients, done, stop) = (clients.clone(), done.clone(), stop.clone());
        tasks.spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("k{}", (task + n) % 6);
                call(
                    &clients[(task + n) % 3],
                    "counter",
                    &key,
                    "increment",
                    json!([1]),
                )
                .await;
                done.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
        });
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while done.load(Ordering::Relaxed) < 200 {
        assert!(Instant::now() < deadline, "the calls did not get going");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let conformance = std::fs::read(programs::CONFORMANCE_RUST).unwrap();
    let deployed = clients[0]
        .deploy("counter", conformance, false)
        .await
        .unwrap();
    let before = done.load(Ordering::Relaxed);
    assert_eq!(deployed["version"], 1, "{deployed}");
    assert_eq!(deployed["lagging"], json!([]), "{deployed}");
    // Calls after the deploy, on the new code.
    while done.load(Ordering::Relaxed) < before + 200 {
        assert!(
            Instant::now() < deadline,
            "the calls stopped after the deploy"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::Relaxed);
    while let Some(finished) = tasks.join_next().await {
        finished.unwrap();
    }
    let mut total = 0;
    for k in 0..6 {
        let key = format!("k{k}");
        total += call(&clients[k % 3], "counter", &key, "get", json!([]))
            .await
            .as_i64()
            .unwrap();
        for client in &clients {
            assert_eq!(
                call(client, "counter", &key, "state", json!([])).await,
                Value::Null
            );
        }
    }
    assert_eq!(total as usize, done.load(Ordering::Relaxed));
    for client in &clients {
        assert_eq!(counter_component(client).await.0, 1);
    }
}

/// A deploy while a host is paused does not wait for it past its lease
/// (its membership expires), and the host runs the deploy once it
/// resumes: its first request for the instance it served before, whose
/// lease it takes again, already runs the new code.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_paused_during_a_deploy_takes_it_up_when_it_resumes() {
    let cluster = Cluster::start(2);
    let (a, b) = (cluster.client(0), cluster.client(1));
    call(&b, "counter", "k", "increment", json!([1])).await;
    cluster.signal(1, "STOP");
    let began = Instant::now();
    let conformance = std::fs::read(programs::CONFORMANCE_RUST).unwrap();
    let deployed = a.deploy("counter", conformance, false).await.unwrap();
    let took = began.elapsed();
    cluster.signal(1, "CONT");
    assert_eq!(deployed["version"], 1, "{deployed}");
    // It waited for the paused host's membership to expire, not longer.
    assert!(took < LEASE * 4, "the deploy took {took:?}");
    assert_eq!(
        call(&b, "counter", "k", "state", json!([])).await,
        Value::Null
    );
    assert_eq!(call(&b, "counter", "k", "get", json!([])).await, json!(1));
    assert_eq!(counter_component(&b).await.0, 1);
}

/// Waits until the workflow of `stepper/key` has `status`.
async fn stepper_reaches(client: &Client, key: &str, status: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let view = client.workflow("stepper", key).await.unwrap();
        if view["status"] == status {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{key} never became {status}: {view}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `--check` in a cluster replays each unfinished workflow on the host
/// that serves it: a divergence on another host than the deploying one
/// refuses the deploy on every host; once that instance is gone, the
/// deploy goes through, having checked the workflow on the deploying
/// host. The same for `--previous --check`.
#[tokio::test(flavor = "multi_thread")]
async fn a_check_replays_each_workflow_on_the_host_that_serves_it() {
    let stepper = format!("[actors.stepper]\ncomponent = {:?}\n", programs::STEPPER);
    let cluster = Cluster::start_configured(2, LEASE, "10s", &stepper, &[]);
    let (a, b) = (cluster.client(0), cluster.client(1));
    // Sleeps at `rest`, which the next version calls `pause`: served by
    // the host that does not deploy.
    b.create(
        "stepper",
        "renamed",
        r#"{"steps": 2, "then_sleep_ms": 600000, "rename": true}"#,
    )
    .await
    .unwrap();
    a.create(
        "stepper",
        "plain",
        r#"{"steps": 2, "then_sleep_ms": 600000}"#,
    )
    .await
    .unwrap();
    stepper_reaches(&b, "renamed", "waiting").await;
    stepper_reaches(&a, "plain", "waiting").await;
    let next = std::fs::read(programs::STEPPER_NEXT).unwrap();
    let refused = a.deploy("stepper", next.clone(), true).await.unwrap_err();
    assert_eq!(refused.code, "would-diverge", "{refused:?}");
    assert!(
        refused.message.contains("`renamed`") && !refused.message.contains("`plain`"),
        "{refused:?}"
    );
    let version = |v: Value| v["version"].as_i64().unwrap();
    for client in [&a, &b] {
        assert_eq!(version(client.component("stepper").await.unwrap()), 0);
    }
    // The check kept nothing, and `renamed` is still served where it was.
    stepper_reaches(&a, "renamed", "waiting").await;
    let status = b.cluster_status().await.unwrap();
    let held_by_b = status["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "host-1")
        .map(|h| h["leases"].as_i64().unwrap());
    assert_eq!(held_by_b, Some(1), "{status}");

    a.destroy("stepper", "renamed").await.unwrap();
    let deployed = a.deploy("stepper", next, true).await.unwrap();
    assert_eq!(deployed["version"], 1, "{deployed}");
    assert_eq!(deployed["checked"], 1, "{deployed}");
    for client in [&a, &b] {
        assert_eq!(version(client.component("stepper").await.unwrap()), 1);
    }
    // Back, checked, through the other host: `plain` replays on the
    // component it started on.
    let back = b.deploy_previous("stepper", true).await.unwrap();
    assert_eq!(
        (back["version"].as_i64(), back["checked"].as_i64()),
        (Some(2), Some(1)),
        "{back}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn hosts_upgrade_the_tables_of_an_earlier_release() {
    let url = postgres::database();
    // The first release's burrow_hosts, with a member long gone.
    sql(
        &url,
        "CREATE TABLE burrow_hosts (
             id TEXT PRIMARY KEY,
             name TEXT NOT NULL,
             address TEXT NOT NULL,
             started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
             expires_at TIMESTAMPTZ NOT NULL)",
    )
    .await;
    sql(
        &url,
        "INSERT INTO burrow_hosts (id, name, address, expires_at)
         VALUES ('old-1', 'old', 'http://127.0.0.1:9', now() - interval '1 day')",
    )
    .await;
    let mut cluster = Cluster::start_on(url.clone(), 2, LEASE, "10s", "", &[]);
    let (a, b) = (cluster.client(0), cluster.client(1));
    call(&a, "counter", "u", "increment", json!([3])).await;
    let columns = sql(
        &url,
        "SELECT count(*) FROM information_schema.columns
         WHERE table_name = 'burrow_hosts'
           AND column_name IN ('session_lock', 'draining', 'deploys_taken')",
    )
    .await;
    assert_eq!(columns[0].get::<_, i64>(0), 3);
    // The sessions work on the upgraded tables: a kill is seen at once.
    cluster.kill_9(0);
    let (got, took) = increment_until_served(&b, "u").await;
    assert_eq!(got, json!(4));
    assert!(took < LEASE, "taken over after {took:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_owner_commits_nothing_once_another_host_took_over() {
    // A long call timeout: the paused call must reach its commit.
    let cluster = Cluster::start_with(2, LEASE, "60s");
    let (a, b) = (cluster.client(0), cluster.client(1));
    call(&a, "talk", "p", "note", json!(["before"])).await;
    // A call that is inside the owner when it is paused.
    let slow = {
        let a = a.clone();
        tokio::spawn(async move {
            a.call(
                "talk",
                "p",
                "note_slowly",
                &json!(["slow", 1500]).to_string(),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.signal(0, "STOP");
    tokio::time::sleep(LEASE + MARGIN + Duration::from_millis(500)).await;
    // The lease has run out: the other host takes the instance and serves.
    call(&b, "talk", "p", "note", json!(["after"])).await;
    cluster.signal(0, "CONT");
    let slow = slow.await.unwrap();
    let e = slow.expect_err("the paused host's commit was acknowledged");
    assert_eq!(e.code, "not-replicated", "{e:?}");
    call(&a, "talk", "p", "note", json!(["later"])).await;
    for client in [&a, &b] {
        let notes = notes(client, "p").await;
        let names: Vec<&str> = notes.keys().map(String::as_str).collect();
        assert_eq!(names, ["after", "before", "later"], "{notes:?}");
    }
}

/// The local copy's integrity, read from the file itself (its host
/// stopped).
fn integrity(data_dir: &Path, actor: &str, key: &str) -> String {
    let path = burrow::instance_path(data_dir, actor, key);
    let conn =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_whose_data_directory_was_deleted_serves_from_postgres() {
    // One host: beside another, it may hand its idle instances over (the
    // spread), and their files would then be the other host's.
    let mut cluster = Cluster::start(1);
    let a = cluster.client(0);
    for n in 0..20 {
        call(&a, "counter", "c", "increment", json!([n])).await;
        call(&a, "talk", "t", "note", json!([format!("n{n}")])).await;
    }
    // Enough rows for the database to span many pages.
    let big: Vec<String> = (0..400).map(|n| format!("{n:0>500}")).collect();
    for note in &big {
        call(&a, "talk", "big", "note", json!([note])).await;
    }
    for (how, stop) in [("a clean stop", true), ("kill -9", false)] {
        if stop {
            cluster.terminate(0);
        } else {
            cluster.kill_9(0);
        }
        std::fs::remove_dir_all(cluster.data_dir(0)).unwrap();
        cluster.start_host(0);
        let got = call(&a, "counter", "c", "get", json!([])).await;
        assert_eq!(got, json!(190), "after {how}");
        assert_eq!(notes(&a, "t").await.len(), 20, "after {how}");
        assert_eq!(notes(&a, "big").await.len(), 400, "after {how}");
        // A running host holds its awake instances' files for itself.
        cluster.terminate(0);
        for (actor, key) in [("counter", "c"), ("talk", "t"), ("talk", "big")] {
            assert_eq!(
                integrity(&cluster.data_dir(0), actor, key),
                "ok",
                "{actor}/{key} after {how}"
            );
        }
        cluster.start_host(0);
        // Awake again, so that the next round's stop meets them open.
        assert_eq!(call(&a, "counter", "c", "get", json!([])).await, json!(190));
        assert_eq!(notes(&a, "t").await.len(), 20);
        assert_eq!(notes(&a, "big").await.len(), 400);
    }
}

/// The inode of the local copy of (`actor`, `key`): a restored copy is a
/// new file.
fn inode(data_dir: &Path, actor: &str, key: &str) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(burrow::instance_path(data_dir, actor, key))
        .unwrap()
        .ino()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_copy_is_taken_as_it_is_only_when_nobody_wrote_meanwhile() {
    let mut cluster = Cluster::start(2);
    let (a, b) = (cluster.client(0), cluster.client(1));
    for key in ["kept", "moved"] {
        call(&a, "counter", key, "increment", json!([1])).await;
    }
    let before = |key| inode(&cluster.data_dir(0), "counter", key);
    let (kept, moved) = (before("kept"), before("moved"));
    // Host 0 leaves; host 1 writes one of the two instances meanwhile.
    cluster.terminate(0);
    call(&b, "counter", "moved", "increment", json!([10])).await;
    cluster.terminate(1);
    cluster.start_host(0);
    assert_eq!(
        call(&a, "counter", "kept", "get", json!([])).await,
        json!(1)
    );
    assert_eq!(
        call(&a, "counter", "moved", "get", json!([])).await,
        json!(11)
    );
    let after = |key| inode(&cluster.data_dir(0), "counter", key);
    assert_eq!(after("kept"), kept, "the copy nobody wrote was restored");
    assert_ne!(
        after("moved"),
        moved,
        "the copy another host wrote was taken as it was"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_calls_sends_and_connections_reach_the_owner_from_any_host() {
    let cluster = Cluster::start(2);
    let (a, b) = (cluster.client(0), cluster.client(1));
    call(&a, "talk", "x", "note", json!(["on-a"])).await;
    call(&b, "talk", "y", "note", json!(["on-b"])).await;
    let held = leases(&a).await;
    assert_eq!((held["host-0"], held["host-1"]), (1, 1), "{held:?}");

    // A request for x through b, and the views, from the other host.
    assert_eq!(notes(&b, "x").await.len(), 1);
    assert_eq!(b.inspect("talk", "x").await.unwrap()["key"], "x");
    assert!(b.state("talk", "x").await.is_ok());
    // A call between actors on different hosts: y (on b) calls x (on a).
    call(
        &b,
        "talk",
        "y",
        "call",
        json!(["talk", "x", "note", ["from-y"]]),
    )
    .await;
    assert!(notes(&a, "x").await.contains_key("from-y"));
    // A cycle across hosts: x (a) calls y (b), which calls x back.
    let e = a
        .call(
            "talk",
            "x",
            "call",
            &json!(["talk", "y", "call", ["talk", "x", "notes", []]]).to_string(),
        )
        .await
        .unwrap_err();
    assert!(e.message.contains("cycle"), "{e:?}");
    // A send from y (on b) to a queue owned by a.
    a.create("queue-probe", "q", "{}").await.unwrap();
    call(
        &b,
        "talk",
        "y",
        "send",
        json!(["queue-probe", "q", "plain", {}]),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while call(&a, "queue-probe", "q", "log", json!([]))
        .await
        .as_array()
        .unwrap()
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the event sent across hosts was not processed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A client connected through b hears what x broadcasts on a.
    // (Its connect hook, run on a, broadcasts `hello` with the
    // connection's id first.)
    let mut events = b.actor("talk", "x").subscribe(None).await.unwrap();
    call(&a, "talk", "x", "broadcast", json!(["news", {"n": 1}])).await;
    let mut heard = Vec::new();
    for _ in 0..2 {
        let event = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("the event came")
            .expect("the connection is open")
            .unwrap();
        heard.push(event);
    }
    assert_eq!(
        heard,
        [
            burrow::client::Event::Message {
                name: "hello".into(),
                payload: json!(events.id())
            },
            burrow::client::Event::Message {
                name: "news".into(),
                payload: json!({"n": 1})
            }
        ]
    );
    events.close().await;
    // Its disconnect hook ran on a.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = call(&a, "talk", "x", "connections", json!([])).await;
        if log.to_string().contains("disconnect") {
            break;
        }
        assert!(Instant::now() < deadline, "no disconnect: {log}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A request that only claims to come from a host is refused: with no
    // signature, a made-up one, or one that signs another request.
    let forged = |headers: &[(&str, &str)]| {
        let mut request = crate::support::http()
            .post(format!("{}/actors/talk/x/actions/note", cluster.url(0)))
            .body(r#"["forged"]"#);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send()
    };
    let caller = hex_json(&json!({"actor": {"actor": "talk", "key": "y"}}));
    let stale = format!("{}.{}", 1_000, "ab".repeat(32));
    for headers in [
        vec![("x-burrow-forwarded", "host-1")],
        vec![("x-burrow-chain", r#"[["talk", "y"]]"#)],
        vec![
            ("x-burrow-forwarded", "host-1"),
            ("x-burrow-caller", caller.as_str()),
            ("x-burrow-signature", stale.as_str()),
        ],
    ] {
        let answer = forged(&headers).await.unwrap();
        assert_eq!(answer.status().as_u16(), 401, "{headers:?}");
    }
    assert!(!notes(&a, "x").await.contains_key("forged"));
    // A destroy through the other host.
    b.destroy("talk", "x").await.unwrap();
    assert_eq!(a.keys("talk").await.unwrap(), ["y"]);
    let e = b.inspect("talk", "x").await.unwrap_err();
    assert_eq!(e.code, "no-such-instance", "{e:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_for_an_actors_http_handler_reaches_its_owner_with_its_headers() {
    let head = format!(
        "[actors.http-probe]\ncomponent = {:?}\npublic_http = true\nhttp_max_request = \"2MiB\"\n",
        programs::HTTP_PROBE
    );
    let cluster = Cluster::start_configured(2, LEASE, "10s", &head, &[]);
    let http = crate::support::http();
    let hook = async |host: usize, signature: &str, body: String| {
        let answer = http
            .post(format!(
                "{}/actors/http-probe/k/http/hooks/paid?n=1",
                cluster.url(host)
            ))
            .header("x-signature", signature)
            .body(body)
            .send()
            .await
            .unwrap();
        let status = answer.status().as_u16();
        let counted = answer.headers().get("x-hook").cloned();
        let body: Value = answer.json().await.unwrap();
        (status, counted, body)
    };
    // Host 0 serves the instance: its first request came there.
    let (status, _, body) = hook(0, "on-a", "first".into()).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["hits"], 1);
    let held = leases(&cluster.client(0)).await;
    assert_eq!(
        (held["host-0"], held.get("host-1")),
        (1, Some(&0)),
        "{held:?}"
    );

    // Through host 1: passed on to host 0 with the sender's headers and a
    // body larger than a call's arguments may be; the handler's headers
    // come back.
    let large = "x".repeat(1_500_000);
    let (status, counted, body) = hook(1, "through-b", large.clone()).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["hits"], 2);
    assert_eq!(body["signature"], "through-b");
    assert_eq!(body["path"], "/hooks/paid?n=1");
    assert_eq!(body["body"].as_str().map(str::len), Some(large.len()));
    assert_eq!(
        counted.as_ref().map(|v| v.to_str().unwrap()),
        Some("counted")
    );
    let held = leases(&cluster.client(0)).await;
    assert_eq!(
        (held["host-0"], held.get("host-1")),
        (1, Some(&0)),
        "{held:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forwarded_request_keeps_its_callers_identity_and_its_tokens_checks() {
    let tokens = "[tokens.web]\nrole = \"client\"\nsecret = \"web-secret-0123456789\"\n\
                  actors = [\"talk\"]\n";
    let cluster = Cluster::start_configured(
        2,
        LEASE,
        "10s",
        "[host]\ntokens = \"tokens.toml\"\n",
        &[("tokens.toml", tokens)],
    );
    let token = "web-secret-0123456789";
    let (a, b) = (
        cluster.client(0).with_token(token),
        cluster.client(1).with_token(token),
    );
    let web = json!({"client": {"name": "web", "role": "client"}});
    assert_eq!(call(&a, "talk", "x", "whoami", json!([])).await, web);
    // Through the other host: served where x lives, as the same caller.
    assert_eq!(call(&b, "talk", "x", "whoami", json!([])).await, web);
    // An internal action stays unknown to the client there too.
    let e = b
        .call("talk", "x", "guarded", r#"["through b"]"#)
        .await
        .unwrap_err();
    assert_eq!(e.code, "unknown-action", "{e:?}");
    // A WebSocket through b, its token sent as a browser sends it.
    let url = format!(
        "{}/actors/talk/x/connect",
        cluster.url(1).replacen("http://", "ws://", 1)
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    use futures_util::{SinkExt, StreamExt};
    socket
        .send(tokio_tungstenite::tungstenite::Message::Text(
            json!({ "token": token }).to_string().into(),
        ))
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), socket.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.to_text().unwrap().contains("connected"), "{first}");
    // Without the token, the other host refuses before forwarding.
    let e = cluster
        .client(1)
        .call("talk", "x", "whoami", "[]")
        .await
        .unwrap_err();
    assert_eq!(e.code, "unauthenticated", "{e:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_clean_leave_hands_instances_over_at_once() {
    // A long lease: a host that waited for it would be seen waiting.
    let mut cluster = Cluster::start_with(2, Duration::from_secs(20), "10s");
    let (a, b) = (cluster.client(0), cluster.client(1));
    for n in 0..5 {
        call(&a, "counter", &format!("c{n}"), "increment", json!([n + 1])).await;
    }
    cluster.terminate(0);
    let begun = Instant::now();
    for n in 0..5 {
        let got = call(&b, "counter", &format!("c{n}"), "get", json!([])).await;
        assert_eq!(got, json!(n + 1));
    }
    assert!(
        begun.elapsed() < Duration::from_secs(5),
        "taking the instances over took {:?}",
        begun.elapsed()
    );
    assert_eq!(leases(&b).await.get("host-0"), None, "the host left");
}

/// Runs `statement` on the cluster's database; returns its rows.
async fn sql(url: &str, statement: &str) -> Vec<tokio_postgres::Row> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .query(statement, &[])
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"))
}

/// Ends the session of host `name` as an administrator (or a restart of
/// the server) would: PostgreSQL closes the connection that holds its
/// session lock; the host itself lives on.
async fn end_session(url: &str, name: &str) {
    let ended = sql(
        url,
        &format!(
            "SELECT pg_terminate_backend(l.pid) FROM pg_locks l
             JOIN burrow_hosts h ON l.objid = h.session_lock::oid
             WHERE l.locktype = 'advisory' AND l.objsubid = 2
               AND l.classid = 1651668769::oid AND h.name = '{name}'"
        ),
    )
    .await;
    assert_eq!(ended.len(), 1, "{name} holds one session lock");
    assert!(ended[0].get::<_, bool>(0));
}

/// The id of host `name`'s newest live membership, if it has one (a
/// host that joins again has two for the moment between its new row and
/// its giving back the old one).
async fn live_id(url: &str, name: &str) -> Option<String> {
    let rows = sql(
        url,
        &format!(
            "SELECT id FROM burrow_hosts WHERE name = '{name}' AND expires_at > now()
             ORDER BY started_at DESC LIMIT 1"
        ),
    )
    .await;
    rows.first().map(|row| row.get(0))
}

/// Increments `key` through `client` until a call succeeds; returns what
/// it answered and how long that took.
async fn increment_until_served(client: &Client, key: &str) -> (Value, Duration) {
    let begun = Instant::now();
    loop {
        match client.call("counter", key, "increment", "[1]").await {
            Ok(text) => return (serde_json::from_str(&text).unwrap(), begun.elapsed()),
            Err(e) => {
                assert!(
                    begun.elapsed() < Duration::from_secs(60),
                    "{key} was not served within a minute: {e:?}"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_owners_instances_are_taken_over_long_before_its_lease_runs_out() {
    // A long lease: a takeover that waited for it would be seen waiting.
    let lease = Duration::from_secs(10);
    let mut cluster = Cluster::start_with(2, lease, "10s");
    let (a, b) = (cluster.client(0), cluster.client(1));
    for n in 0..3 {
        call(&a, "counter", &format!("k{n}"), "increment", json!([5])).await;
    }
    cluster.kill_9(0);
    // PostgreSQL closed the dead host's session: the survivor expires its
    // membership and takes its instances, nothing acknowledged lost.
    let (got, took) = increment_until_served(&b, "k0").await;
    eprintln!("taken over {took:?} after the kill");
    assert_eq!(got, json!(6));
    assert!(
        took < lease / 2,
        "the survivor took the instance over {took:?} after the kill"
    );
    for n in 1..3 {
        let got = call(&b, "counter", &format!("k{n}"), "get", json!([])).await;
        assert_eq!(got, json!(5));
    }
    assert_eq!(live_id(&cluster.postgres, "host-0").await, None);
    // The host started again joins as a new member and serves.
    cluster.start_host(0);
    assert_eq!(call(&a, "counter", "k0", "get", json!([])).await, json!(6));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_whose_session_postgres_closed_stops_serving_and_joins_again() {
    let lease = Duration::from_secs(10);
    let cluster = Cluster::start_with(2, lease, "10s");
    let (a, b) = (cluster.client(0), cluster.client(1));
    for _ in 0..3 {
        call(&a, "counter", "s", "increment", json!([1])).await;
    }
    let old = live_id(&cluster.postgres, "host-0")
        .await
        .expect("host 0 is a member");
    // Ends host 0's session as an administrator (or a restart of the
    // server) would; the host itself lives on.
    end_session(&cluster.postgres, "host-0").await;
    let (got, took) = increment_until_served(&b, "s").await;
    eprintln!("taken over {took:?} after the session ended");
    assert_eq!(got, json!(4));
    assert!(
        took < lease / 2,
        "host 1 took the instance over after {took:?}"
    );
    // Host 0 joined again under a new id, the old one gone, and serves.
    let deadline = Instant::now() + lease;
    loop {
        match live_id(&cluster.postgres, "host-0").await {
            Some(id) if id != old => break,
            _ => {
                assert!(Instant::now() < deadline, "host 0 did not join again");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    // It gives the old one back right after its new row is in.
    while !sql(
        &cluster.postgres,
        &format!("SELECT 1 FROM burrow_hosts WHERE id = '{old}'"),
    )
    .await
    .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the old membership {old} was left behind"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (got, _) = increment_until_served(&a, "s").await;
    assert_eq!(got, json!(5));
    assert_eq!(call(&b, "counter", "s", "get", json!([])).await, json!(5));
}

/// What the callers of one counter through one host saw after a pause.
#[derive(Default)]
struct Writes {
    /// Increments answered (each applied once).
    acknowledged: u64,
    /// Increments that failed: (when the call began, what it said).
    failed: Vec<(Instant, String)>,
}

/// Increments `key` through `client` in sequence until `stop`, recording
/// what each call said into `writes`.
async fn keep_incrementing(
    client: Client,
    key: String,
    stop: Arc<std::sync::atomic::AtomicBool>,
    writes: Arc<Mutex<Writes>>,
) {
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let began = Instant::now();
        let answer = client.call("counter", &key, "increment", "[1]").await;
        {
            let mut writes = writes.lock().unwrap();
            match answer {
                Ok(_) => writes.acknowledged += 1,
                Err(e) => writes
                    .failed
                    .push((began, format!("{}: {}", e.code, e.message))),
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Host 0 serves six counters, is paused (SIGSTOP) for `pause` while the
/// others call them, and resumes. From lease + margin + 1 s after the
/// resume on, every increment through every host succeeds, and no lease is
/// held by an expired membership; every acknowledged increment is kept,
/// none twice.
/// How host 0 is held back while the others take load.
#[derive(Debug, Clone, Copy)]
enum Stall {
    /// `SIGSTOP` for this long, then `SIGCONT`.
    Pause(Duration),
    /// For this long, every thread of it at the idle scheduling class on
    /// one CPU, with busy loops on that CPU: it runs, barely.
    Starve(Duration),
}

/// Busy loops on the last CPU, with host `pid` moved there at the idle
/// scheduling class; dropping it ends the loops and gives the host back
/// every CPU at the normal class.
struct Starved {
    pid: u32,
    loops: Vec<Child>,
}

impl Starved {
    fn start(pid: u32) -> Starved {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let last = (cpus - 1).to_string();
        let run = |program: &str, args: &[&str]| {
            let status = Command::new(program)
                .args(args)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "{program} {args:?}: {status}");
        };
        let pid_text = pid.to_string();
        run("taskset", &["-a", "-p", "-c", &last, &pid_text]);
        run("chrt", &["-a", "-i", "-p", "0", &pid_text]);
        let loops = (0..2)
            .map(|_| {
                Command::new("taskset")
                    .args(["-c", &last, "sh", "-c", "while :; do :; done"])
                    .spawn()
                    .unwrap()
            })
            .collect();
        Starved { pid, loops }
    }
}

impl Drop for Starved {
    fn drop(&mut self) {
        for mut busy in self.loops.drain(..) {
            let _ = busy.kill();
            let _ = busy.wait();
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let all = format!("0-{}", cpus - 1);
        let pid = self.pid.to_string();
        for (program, args) in [
            ("chrt", ["-a", "-o", "-p", "0", &pid].as_slice()),
            ("taskset", ["-a", "-p", "-c", &all, &pid].as_slice()),
        ] {
            let _ = Command::new(program)
                .args(args)
                .stdout(Stdio::null())
                .status();
        }
    }
}

async fn every_counter_is_writable_after_a_pause_of(pause: Duration) {
    every_counter_is_writable_after(Stall::Pause(pause)).await;
}

/// Host 0 serves six counters, is held back by `stall` while hosts 1 and
/// 2 call them, then takes calls too: no call begun a lease and a margin
/// after the stall fails, no expired membership keeps a lease, and every
/// acknowledged increment is kept.
async fn every_counter_is_writable_after(stall: Stall) {
    let cluster = Cluster::start(3);
    let keys: Vec<String> = (0..6).map(|i| format!("z{i}")).collect();
    let first = cluster.client(0);
    for _ in 0..10 {
        for key in &keys {
            call(&first, "counter", key, "increment", json!([1])).await;
        }
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut load = tokio::task::JoinSet::new();
    let mut writes = Vec::new();
    let mut start_load = |hosts: &[usize], load: &mut tokio::task::JoinSet<()>| {
        for &host in hosts {
            for key in &keys {
                let seen = Arc::new(Mutex::new(Writes::default()));
                writes.push((host, key.clone(), seen.clone()));
                load.spawn(keep_incrementing(
                    cluster.client(host),
                    key.clone(),
                    stop.clone(),
                    seen,
                ));
            }
        }
    };
    match stall {
        Stall::Pause(pause) => {
            cluster.signal(0, "STOP");
            start_load(&[1, 2], &mut load);
            tokio::time::sleep(pause).await;
            cluster.signal(0, "CONT");
        }
        Stall::Starve(time) => {
            let pid = cluster.hosts[0].child.as_ref().expect("running").id();
            let starved = Starved::start(pid);
            start_load(&[1, 2], &mut load);
            tokio::time::sleep(time).await;
            drop(starved);
        }
    }
    let resumed = Instant::now();
    start_load(&[0], &mut load);
    let bound = LEASE + MARGIN + Duration::from_secs(1);
    tokio::time::sleep(bound + Duration::from_secs(4)).await;
    let status = cluster.client(1).cluster_status().await.unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    while let Some(done) = load.join_next().await {
        done.unwrap();
    }

    let mut late = Vec::new();
    let mut acknowledged: HashMap<&str, u64> = HashMap::new();
    let mut unknown: HashMap<&str, u64> = HashMap::new();
    for (host, key, seen) in &writes {
        let seen = seen.lock().unwrap();
        *acknowledged.entry(key).or_default() += seen.acknowledged;
        *unknown.entry(key).or_default() += seen.failed.len() as u64;
        for (began, error) in &seen.failed {
            if *began >= resumed + bound {
                late.push(format!(
                    "{key} through host {host}, {:?} after the resume: {error}",
                    *began - resumed
                ));
            }
        }
    }
    assert!(
        late.is_empty(),
        "after {stall:?}, {} calls begun later than {bound:?} after the resume failed; the first: {:#?}",
        late.len(),
        &late[..late.len().min(10)]
    );
    let expired: Vec<&Value> = status["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| !h["live"].as_bool().unwrap() && h["leases"].as_i64().unwrap() > 0)
        .collect();
    assert!(
        expired.is_empty(),
        "expired memberships still hold leases {bound:?} after the resume: {expired:?}"
    );
    for key in &keys {
        let value = call(&cluster.client(2), "counter", key, "get", json!([])).await;
        let value = value.as_u64().unwrap();
        let (done, maybe) = (10 + acknowledged[key.as_str()], unknown[key.as_str()]);
        assert!(
            (done..=done + maybe).contains(&value),
            "{key} is {value}: {done} increments were acknowledged and {maybe} failed"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pause_just_under_the_lease_leaves_every_instance_writable() {
    every_counter_is_writable_after_a_pause_of(LEASE - Duration::from_millis(500)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pause_just_over_the_lease_leaves_every_instance_writable() {
    every_counter_is_writable_after_a_pause_of(LEASE + MARGIN + Duration::from_millis(500)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pause_of_twice_the_lease_leaves_every_instance_writable() {
    every_counter_is_writable_after_a_pause_of(LEASE * 2).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_starved_of_cpu_for_ten_seconds_keeps_or_loses_its_instances_cleanly() {
    every_counter_is_writable_after(Stall::Starve(Duration::from_secs(10))).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_instance_moves_between_a_host_alone_and_a_cluster_as_a_file() {
    let cluster = Cluster::start(2);
    let (a, b) = (cluster.client(0), cluster.client(1));
    let dir = tempfile::tempdir().unwrap();
    let host = crate::support::start(dir.path(), &[crate::support::counter()]).await;
    let alone = crate::support::Server::start(host).await;
    let alone_client = alone.client();
    call(&alone_client, "counter", "m", "increment", json!([9])).await;

    // Into the cluster through one host, read through the other.
    let file = alone_client.export("counter", "m").await.unwrap();
    a.import("counter", "m", file, false).await.unwrap();
    assert_eq!(call(&b, "counter", "m", "get", json!([])).await, json!(9));
    call(&b, "counter", "m", "increment", json!([1])).await;
    // Out again, through either host, whichever serves it.
    for client in [&a, &b] {
        let file = client.export("counter", "m").await.unwrap();
        alone_client
            .import("counter", "m", file, true)
            .await
            .unwrap();
        assert_eq!(
            call(&alone_client, "counter", "m", "get", json!([])).await,
            json!(10)
        );
    }
    // The import was shipped like any commit: PostgreSQL has it when its
    // owner is gone.
    let owner = leases(&a).await;
    let killed = usize::from(owner.get("host-1").copied().unwrap_or(0) > 0);
    let mut cluster = cluster;
    cluster.kill_9(killed);
    let survivor = cluster.client(1 - killed);
    let (got, _) = increment_until_served(&survivor, "m").await;
    assert_eq!(got, json!(11));
    alone.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_in_a_cluster_stays_paused_whichever_host_serves_it_until_resumed() {
    let mut cluster = Cluster::start(2);
    let (a, b) = (cluster.client(0), cluster.client(1));
    a.create("queue-probe", "q", "{}").await.unwrap();
    // An event that fails until its instance is healed: pending at the fork.
    let event = json!({"type": "fail", "payload": {"until_healed": true}});
    call(&a, "queue-probe", "q", "enqueue", json!([[event]])).await;
    b.fork("queue-probe", "q", "f").await.unwrap();
    let pending = async |client: &Client, key: &str| {
        let queue = client.queue("queue-probe", key).await.unwrap();
        queue["pending"].as_array().unwrap().len()
    };
    for key in ["q", "f"] {
        call(&a, "queue-probe", key, "heal", json!([])).await;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while pending(&b, "q").await > 0 {
        assert!(Instant::now() < deadline, "the original's event waits");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(pending(&a, "f").await, 1);
    // A key another host serves is taken, wherever the fork runs.
    b.create("queue-probe", "g", "{}").await.unwrap();
    let taken = b.fork("queue-probe", "q", "g").await.unwrap_err();
    assert_eq!(taken.code, "already-exists", "{taken:?}");

    // Its owner gone (the fork is made where its original is served, by
    // the host that created it), the other host takes it, paused still.
    cluster.kill_9(0);
    let survivor = cluster.client(1);
    let deadline = Instant::now() + Duration::from_secs(30);
    let inspection = loop {
        match survivor.inspect("queue-probe", "f").await {
            Ok(inspection) => break inspection,
            Err(e) => assert!(Instant::now() < deadline, "{e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(inspection["paused"]["since"].is_i64(), "{inspection}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let resumed = loop {
        match survivor.resume("queue-probe", "f").await {
            Ok(resumed) => break resumed,
            Err(e) => assert!(Instant::now() < deadline, "{e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(resumed);
    let deadline = Instant::now() + Duration::from_secs(20);
    while pending(&survivor, "f").await > 0 {
        assert!(Instant::now() < deadline, "the resumed fork's event waits");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
