//! The cluster's benchmark (`burrow bench --cluster URL`): W1 and W2 over
//! HTTP on one host alone, on one host in a cluster and on three hosts in
//! one, each against `burrow serve` in child processes; W1 in-process
//! alone and in a cluster, whose difference is what shipping a commit
//! costs; PostgreSQL's own round trip and commit measured in the same run
//! (the floor of that cost); and the time from `kill -9` of an owner, and
//! from its clean stop, to the first call another host answers.
//!
//! The hosts run with the default lease, heartbeat and margin, as a user's
//! would. The database at URL gets Burrow's tables (and a scratch table for
//! the floor, dropped afterwards); each run uses keys of its own.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::modes::{self, Counter};
use super::server_process::ServerProcess;
use super::{Latencies, micros, timed};
use burrow::client::Client;
use burrow::config::{ClusterConfig, HostConfig, Synchronous};
use burrow::host::Host;
use burrow::manifest::ActorSpec;

/// Sequential round trips and commits the floor is measured over.
const FLOOR_ROUNDS: usize = 2_000;

/// One row of the table: a workload on one arrangement of hosts.
struct Measured {
    what: String,
    figures: Value,
}

/// Runs the cluster's benchmark on the PostgreSQL at `url`.
pub(super) async fn run(
    root: &Path,
    spec: &ActorSpec,
    config: &HostConfig,
    url: &str,
    w1_calls: usize,
    w2_calls: usize,
) -> Result<Value> {
    let run = std::process::id();
    let mut rows: Vec<Measured> = Vec::new();
    let mut report = serde_json::Map::new();

    let floor = postgres_floor(url).await.context("PostgreSQL's floor")?;
    eprintln!("PostgreSQL floor: {floor}");
    report.insert("postgres_floor".into(), floor.clone());

    // In-process: what a commit costs with and without shipping.
    let alone = in_process_w1(config, spec, None, w1_calls, "alone").await?;
    let cluster = ClusterConfig::new(url, "bench-in-process", "http://127.0.0.1:1");
    let shipped =
        in_process_w1(config, spec, Some(cluster), w1_calls, &format!("ip-{run}")).await?;
    let cost = shipped.mean().saturating_sub(alone.mean());
    eprintln!(
        "W1 in-process: alone {}, in a cluster {}",
        alone.to_json(),
        shipped.to_json()
    );
    rows.push(Measured {
        what: "W1 in-process, alone".into(),
        figures: alone.to_json(),
    });
    rows.push(Measured {
        what: "W1 in-process, in a cluster".into(),
        figures: shipped.to_json(),
    });
    report.insert("shipping_cost_per_commit_us".into(), json!(micros(cost)));

    // Over HTTP: one host alone, one in a cluster, three in one.
    for (hosts, clustered) in [(1, false), (1, true), (3, true)] {
        let name = match (hosts, clustered) {
            (_, false) => "alone".to_owned(),
            (n, true) => format!("{n} in a cluster"),
        };
        let dir = root.join(format!("http-{hosts}-{clustered}"));
        let servers = start_hosts(spec, &dir, hosts, clustered.then_some(url)).await?;
        let urls: Vec<String> = servers.iter().map(|s| s.url.clone()).collect();
        let keys = format!("{run}-{hosts}-{clustered}");
        // W1 through the owner, and (with several hosts) through another.
        let owner = Client::new(&urls[0]);
        owner
            .call("counter", &format!("w1-{keys}"), "increment", "[1]")
            .await?;
        let w1 = sequential(&owner, &format!("w1-{keys}"), w1_calls).await?;
        rows.push(Measured {
            what: format!("W1 over HTTP, {name}"),
            figures: w1.to_json(),
        });
        if hosts > 1 {
            let other = Client::new(&urls[1]);
            let w1 = sequential(&other, &format!("w1-{keys}"), w1_calls).await?;
            rows.push(Measured {
                what: format!("W1 over HTTP, {name}, through another host"),
                figures: w1.to_json(),
            });
        }
        // W2: 64 instances, caller i on instance i; with several hosts,
        // instance i is taken by host i % n and its calls go to every host
        // in turn (two in three are forwarded).
        let before = shipping(&urls).await;
        let callers: Vec<Counter> = (0..modes::CALLERS)
            .map(|i| Counter::Http {
                client: Client::new(&urls[i % urls.len()]),
                key: format!("w2-{keys}-{i}"),
            })
            .collect();
        for caller in &callers {
            caller.increment().await?;
        }
        let w2 = if hosts > 1 {
            spread(&urls, &keys, w2_calls).await?
        } else {
            modes::concurrent(callers, w2_calls).await?.to_json()
        };
        let after = shipping(&urls).await;
        let mut figures = w2;
        if clustered {
            let shipments = after.0 - before.0;
            let statements = (after.1 - before.1).max(1);
            figures["shipments_per_statement"] =
                json!((shipments as f64 / statements as f64 * 10.0).round() / 10.0);
        }
        rows.push(Measured {
            what: format!("W2 over HTTP, {name}"),
            figures,
        });
        if hosts > 1 {
            let deploys = deploys(spec, &owner).await?;
            eprintln!("deploys across {hosts} hosts: {deploys}");
            report.insert("deploys".into(), deploys);
        }
        for server in servers {
            server.stop().await?;
        }
    }

    // Failover: from kill -9 (and from a clean stop) of the owner to the
    // first call another host answers.
    let failover = failover(spec, &root.join("failover"), url, run).await?;
    eprintln!("failover: {failover}");
    report.insert("failover".into(), failover.clone());

    let table = table(&rows, &floor, cost, &failover, &report["deploys"]);
    report.insert(
        "rows".into(),
        rows.iter()
            .map(|row| json!({"workload": row.what, "figures": row.figures}))
            .collect(),
    );
    report.insert("table".into(), json!(table));
    Ok(Value::Object(report))
}

/// `n` hosts serving the counter, in a cluster on `url` if given.
async fn start_hosts(
    spec: &ActorSpec,
    dir: &Path,
    n: usize,
    url: Option<&str>,
) -> Result<Vec<ServerProcess>> {
    let mut servers = Vec::new();
    for i in 0..n {
        let extra = match url {
            Some(url) => vec![
                "--cluster".to_owned(),
                url.to_owned(),
                "--name".to_owned(),
                format!("bench-{i}"),
            ],
            None => Vec::new(),
        };
        let dir = dir.join(format!("host-{i}"));
        servers.push(ServerProcess::start_with(spec, &dir, Synchronous::Normal, &extra).await?);
    }
    Ok(servers)
}

/// W1: `calls` increments of `key` one after another through `client`.
async fn sequential(client: &Client, key: &str, calls: usize) -> Result<Latencies> {
    timed(calls, async |_| {
        client.call("counter", key, "increment", "[1]").await?;
        Ok(())
    })
    .await
}

/// W2 on several hosts: caller i increments instance i, sending its n-th
/// call to host (i + n) % hosts.
async fn spread(urls: &[String], keys: &str, calls_each: usize) -> Result<Value> {
    let clients: Vec<Client> = urls.iter().map(|url| Client::new(url)).collect();
    let begun = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..modes::CALLERS {
        let clients = clients.clone();
        let key = format!("w2-{keys}-{i}");
        tasks.spawn(async move {
            let mut samples = Vec::with_capacity(calls_each);
            let mut failed = 0u64;
            for n in 0..calls_each {
                let client = &clients[(i + n) % clients.len()];
                let t = Instant::now();
                match client.call("counter", &key, "increment", "[1]").await {
                    Ok(_) => samples.push(t.elapsed()),
                    Err(_) => failed += 1,
                }
            }
            (samples, failed)
        });
    }
    let mut samples = Vec::new();
    let mut failed = 0;
    while let Some(done) = tasks.join_next().await {
        let (more, lost) = done?;
        samples.extend(more);
        failed += lost;
    }
    let mut figures = Latencies::new(samples, begun.elapsed()).to_json();
    figures["failed"] = json!(failed);
    Ok(figures)
}

/// Shipments and statements the hosts at `urls` wrote so far.
async fn shipping(urls: &[String]) -> (u64, u64) {
    let mut total = (0, 0);
    for url in urls {
        if let Ok(status) = Client::new(url).cluster_status().await {
            total.0 += status["shipped"]["shipments"].as_u64().unwrap_or(0);
            total.1 += status["shipped"]["statements"].as_u64().unwrap_or(0);
        }
    }
    total
}

/// W1 in this process, on a host alone or in `cluster`.
async fn in_process_w1(
    config: &HostConfig,
    spec: &ActorSpec,
    cluster: Option<ClusterConfig>,
    calls: usize,
    name: &str,
) -> Result<Latencies> {
    let config = HostConfig {
        data_dir: config.data_dir.join(format!("w1-{name}")),
        cluster,
        ..config.clone()
    };
    let host = Host::start(config, std::slice::from_ref(spec)).await?;
    let key = format!("w1-{name}");
    host.call("counter", &key, "increment", "[1]").await?;
    let w1 = timed(calls, async |_| {
        host.call("counter", &key, "increment", "[1]").await?;
        Ok(())
    })
    .await?;
    host.shutdown().await;
    Ok(w1)
}

/// PostgreSQL's own cost: a round trip (`SELECT 1`), and a commit of one
/// 4 KiB page written as the shipper writes it (an upsert, alone in its
/// transaction), one after another.
async fn postgres_floor(url: &str) -> Result<Value> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    let select = client.prepare("SELECT 1").await?;
    let round_trip = timed(FLOOR_ROUNDS, async |_| {
        client.query_one(&select, &[]).await?;
        Ok(())
    })
    .await?;
    client
        .batch_execute(
            "DROP TABLE IF EXISTS burrow_bench_floor;
             CREATE TABLE burrow_bench_floor (id INTEGER PRIMARY KEY, data BYTEA NOT NULL);",
        )
        .await?;
    let upsert = client
        .prepare(
            "INSERT INTO burrow_bench_floor (id, data) VALUES ($1, $2)
             ON CONFLICT (id) DO UPDATE SET data = EXCLUDED.data",
        )
        .await?;
    let page = vec![7u8; 4096];
    let commit = timed(FLOOR_ROUNDS, async |i| {
        client
            .execute(&upsert, &[&((i % 16) as i32), &page.as_slice()])
            .await?;
        Ok(())
    })
    .await?;
    client
        .batch_execute("DROP TABLE burrow_bench_floor")
        .await?;
    drop(client);
    let _ = connection.await;
    Ok(json!({
        "round_trip": round_trip.to_json(),
        "page_commit": commit.to_json(),
    }))
}

/// A deploy of the counter's own component through `client`'s host, and
/// `--previous` after it: how long each took to answer, that is, until
/// every host of the cluster ran it (the component in each host's compile
/// cache, so this is the deploy's path, not a compilation).
async fn deploys(spec: &ActorSpec, client: &Client) -> Result<Value> {
    let bytes = std::fs::read(&spec.component)
        .with_context(|| format!("cannot read {}", spec.component.display()))?;
    let began = Instant::now();
    let deployed = client.deploy("counter", bytes, false).await?;
    let deploy = began.elapsed();
    let began = Instant::now();
    client.deploy_previous("counter", false).await?;
    let previous = began.elapsed();
    if deployed["lagging"] != json!([]) {
        bail!("hosts had not taken the deploy up when it answered: {deployed}");
    }
    let ms = |d: Duration| (d.as_secs_f64() * 1e4).round() / 10.0;
    Ok(json!({ "deploy_ms": ms(deploy), "previous_ms": ms(previous) }))
}

/// Kills of the owner timed in [`failover`].
const KILLS: usize = 20;

/// Two hosts; the owner of an instance is killed with SIGKILL, [`KILLS`]
/// times (a new owner each time, the survivor the same), then, on a new
/// pair, stopped with SIGTERM; times the first call the survivor answers,
/// calling it without pause.
async fn failover(spec: &ActorSpec, dir: &Path, url: &str, run: u32) -> Result<Value> {
    let defaults = ClusterConfig::new(url, "", "http://x");
    let mut figures = json!({
        "lease_ms": defaults.lease.as_millis() as u64,
        "margin_ms": defaults.margin.as_millis() as u64,
        "heartbeat_ms": defaults.heartbeat.as_millis() as u64,
    });
    let survivor = start_hosts(spec, &dir.join("kill_9"), 1, Some(url))
        .await?
        .pop()
        .expect("one host");
    let mut kills = Vec::with_capacity(KILLS);
    for round in 0..KILLS {
        let owner = ServerProcess::start_with(
            spec,
            &dir.join(format!("kill_9/owner-{round}")),
            Synchronous::Normal,
            &[
                "--cluster".into(),
                url.into(),
                "--name".into(),
                "bench-owner".into(),
            ],
        )
        .await?;
        let key = format!("failover-{run}-kill-{round}");
        let took = taken_over(owner, &survivor, &key, true).await?;
        kills.push(took);
    }
    survivor.stop().await?;
    kills.sort();
    let ms = |d: Duration| (d.as_secs_f64() * 1e4).round() / 10.0;
    let at = |q: f64| kills[((kills.len() - 1) as f64 * q).round() as usize];
    figures["kill_9_ms"] = json!(ms(at(0.5)));
    figures["kill_9_p99_ms"] = json!(ms(at(0.99)));
    figures["kill_9_max_ms"] = json!(ms(at(1.0)));
    figures["kills"] = json!(KILLS);

    let mut pair = start_hosts(spec, &dir.join("clean_stop"), 2, Some(url)).await?;
    let survivor = pair.pop().expect("two hosts");
    let owner = pair.pop().expect("two hosts");
    let key = format!("failover-{run}-clean-stop");
    let took = taken_over(owner, &survivor, &key, false).await?;
    figures["clean_stop_ms"] = json!(ms(took));
    survivor.stop().await?;
    Ok(figures)
}

/// Has `owner` take `key`, ends it (SIGKILL if `kill`, else SIGTERM), and
/// returns how long until `survivor` answered a call for `key`.
async fn taken_over(
    owner: ServerProcess,
    survivor: &ServerProcess,
    key: &str,
    kill: bool,
) -> Result<Duration> {
    Client::new(&owner.url)
        .call("counter", key, "increment", "[1]")
        .await?;
    let survivor = Client::new(&survivor.url);
    let begun = Instant::now();
    if kill {
        owner.kill().await?;
    } else {
        owner.stop().await?;
    }
    let deadline = begun + Duration::from_secs(60);
    loop {
        if let Ok(answer) = survivor.call("counter", key, "increment", "[1]").await {
            if answer != "2" {
                bail!("{key} answered {answer} after the failover, not 2");
            }
            return Ok(begun.elapsed());
        }
        if Instant::now() > deadline {
            bail!("no host answered for {key} within a minute of the owner's end");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The table: every row's rate and latencies, then the floor and the
/// failover figures.
fn table(
    rows: &[Measured],
    floor: &Value,
    cost: Duration,
    failover: &Value,
    deploys: &Value,
) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "| workload | ops/s | p50 | p99 | failed |");
    let _ = writeln!(out, "| --- | --- | --- | --- | --- |");
    for row in rows {
        let f = &row.figures;
        let mut failed = f["failed"].as_u64().unwrap_or(0).to_string();
        if let Some(per) = f["shipments_per_statement"].as_f64() {
            failed.push_str(&format!(" ({per} shipments per statement)"));
        }
        let _ = writeln!(
            out,
            "| {} | {} | {} µs | {} µs | {failed} |",
            row.what,
            super::table::thousands(f["ops_per_sec"].as_f64().unwrap_or(0.0)),
            f["p50_us"],
            f["p99_us"],
        );
    }
    let _ = writeln!(
        out,
        "\nShipping costs a commit {} µs in-process (W1 in a cluster minus W1 alone). \
         PostgreSQL on this machine: a round trip {} µs (p50), a commit of one 4 KiB page {} µs (p50).",
        micros(cost),
        floor["round_trip"]["p50_us"],
        floor["page_commit"]["p50_us"],
    );
    let _ = writeln!(
        out,
        "Failover with the default lease ({} ms) and margin ({} ms): after kill -9 of the owner, p50 {} ms, p99 {} ms over {} kills; after a clean stop, {} ms.",
        failover["lease_ms"],
        failover["margin_ms"],
        failover["kill_9_ms"],
        failover["kill_9_p99_ms"],
        failover["kills"],
        failover["clean_stop_ms"],
    );
    let _ = writeln!(
        out,
        "A deploy through one of three hosts (the component compiled already) answered, every host running it, after {} ms; `--previous` after {} ms.",
        deploys["deploy_ms"], deploys["previous_ms"],
    );
    out
}
