//! The benchmark workloads behind `burrow bench`.
//!
//! - W1: sequential `increment(1)` on one instance, in-process and over HTTP.
//! - W2: 64 instances with 64 calls in flight.
//! - W3: first call to N new instances (create), then the first call to each
//!   after a restart of the host (wake).
//! - W4: the queue, on the manifest's `mailer` actor (see [`queue`]).
//! - W5: workflows, on the manifest's `stepper` actor (see [`workflow`]).
//! - W6: calls between actors, on the manifest's `account` actor; W7: events
//!   to 100 connected clients, on its `chat-room` (see [`talk`]).
//! - W8: workflow steps that send an HTTP request, on the manifest's
//!   `stepper` actor, against a server and a floor in this process (see
//!   [`outbound`]).
//! - The durability modes (see [`modes`]): W1, W2 and a hot instance (64
//!   callers on one instance), each with `synchronous = normal` and
//!   `full`, in-process and over HTTP against `burrow serve` in a child
//!   process, in one table with the disk's limits measured in the same run
//!   (see [`disk`]). Part of every full run; `--modes` runs it alone.
//! - Load (`--load SECONDS`): 64 HTTP clients on the manifest's counters
//!   (calls) and its mailer (queue sends, all checked as processed),
//!   reporting errors and the peak memory of the process.
//! - Languages (see [`languages`]): W1 and W5 for the counter and the
//!   stepper of each guest language (Rust, Python, JavaScript), each W1
//!   against the floor, with each component's compile and build time.
//!   Part of every full run; `--languages` runs it alone.
//! - The floor: W1 and W3 done by [`floor`], a minimal program with wasmtime
//!   and rusqlite and nothing of Burrow in between, so that Burrow's
//!   overhead is a ratio measured in the same run.
//!
//! W1 to W3 use the `counter` actor of the manifest.

mod cluster;
mod cpu;
mod disk;
mod floor;
mod languages;
pub mod load;
mod modes;
mod outbound;
mod queue;
mod scale;
mod server_process;
mod table;
mod talk;
mod workflow;
mod wrk;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

pub use burrow::cli::BenchArgs;
use burrow::client::Client;
use burrow::config::HostConfig;
use burrow::host::Host;
use burrow::manifest::{ActorSpec, Manifest};

/// Latency figures of a run of sequential operations.
#[derive(Debug, Clone)]
pub struct Latencies {
    samples: Vec<Duration>,
    total: Duration,
}

impl Latencies {
    fn new(mut samples: Vec<Duration>, total: Duration) -> Latencies {
        samples.sort_unstable();
        Latencies { samples, total }
    }

    fn percentile(&self, p: f64) -> Duration {
        if self.samples.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * (self.samples.len() - 1) as f64).round() as usize;
        self.samples[rank]
    }

    fn mean(&self) -> Duration {
        if self.samples.is_empty() {
            return Duration::ZERO;
        }
        self.samples.iter().sum::<Duration>() / self.samples.len() as u32
    }

    fn ops_per_sec(&self) -> f64 {
        self.samples.len() as f64 / self.total.as_secs_f64()
    }

    fn to_json(&self) -> Value {
        json!({
            "ops": self.samples.len(),
            "ops_per_sec": self.ops_per_sec().round(),
            "mean_us": micros(self.mean()),
            "p50_us": micros(self.percentile(50.0)),
            "p99_us": micros(self.percentile(99.0)),
        })
    }
}

fn micros(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e7).round() / 10.0
}

async fn timed<F: AsyncFnMut(usize) -> Result<()>>(n: usize, mut op: F) -> Result<Latencies> {
    let mut samples = Vec::with_capacity(n);
    let start = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        op(i).await?;
        samples.push(t.elapsed());
    }
    Ok(Latencies::new(samples, start.elapsed()))
}

fn counter_spec(manifest: &Path) -> Result<ActorSpec> {
    let manifest = Manifest::load(manifest)?;
    match manifest.actors.get("counter") {
        Some(spec) => Ok(spec.clone()),
        None => bail!("the manifest has no `counter` actor, which the benchmarks use"),
    }
}

fn config(dir: &Path, args: &BenchArgs) -> HostConfig {
    HostConfig {
        data_dir: dir.to_path_buf(),
        pooling: !args.on_demand,
        ..HostConfig::default()
    }
}

/// Runs every workload and returns the figures.
pub async fn run(manifest: &Path, args: BenchArgs) -> Result<Value> {
    let temp = tempfile::tempdir()?;
    let root = args
        .data_dir
        .clone()
        .unwrap_or_else(|| temp.path().to_path_buf());
    let dir = |name: &str| root.join(name);
    if let Some(seconds) = args.load {
        let actors = load::mix(Manifest::load(manifest)?.actors.into_values());
        let config = config(&dir("load"), &args);
        let report = load::run(config, &actors, Duration::from_secs(seconds)).await?;
        eprintln!("load: {report}");
        return Ok(report);
    }
    if args.languages {
        let figures = languages::run(manifest, &dir("languages"), &args).await?;
        eprintln!("\n{}", figures["table"].as_str().unwrap_or_default());
        return Ok(figures);
    }
    let spec = counter_spec(manifest)?;
    let mut report = serde_json::Map::new();
    if let Some(url) = &args.cluster {
        let figures = cluster::run(
            &dir("cluster"),
            &spec,
            &config(&dir("cluster"), &args),
            url,
            args.ops.min(5_000),
            args.w2_calls,
        )
        .await
        .context("the cluster's benchmark failed")?;
        eprintln!("\n{}", figures["table"].as_str().unwrap_or_default());
        return Ok(figures);
    }
    if let Some(n) = args.scale {
        let figures = scale::run(&spec, &dir("scale"), n).await?;
        eprintln!("\n{}", figures["table"].as_str().unwrap_or_default());
        return Ok(figures);
    }
    if args.modes {
        let table = durability_modes(&root, &spec, &args, &mut report).await?;
        eprintln!("\n{table}");
        return Ok(Value::Object(report));
    }
    // W1, in-process.
    let host = Host::start(config(&dir("w1"), &args), std::slice::from_ref(&spec)).await?;
    host.call("counter", "w1", "increment", "[1]").await?;
    let w1 = timed(args.ops, async |_| {
        Ok(host
            .call("counter", "w1", "increment", "[1]")
            .await
            .map(drop)?)
    })
    .await?;
    eprintln!("W1 in-process: {}", w1.to_json());
    report.insert("w1_in_process".into(), w1.to_json());
    if args.queue || args.workflows || args.talk || args.outbound {
        host.shutdown().await;
        if args.queue {
            report.insert("w4".into(), w4(manifest, &dir("w4"), &args).await?);
        }
        if args.workflows {
            report.insert("w5".into(), w5(manifest, &dir("w5"), &args, &report).await?);
        }
        if args.talk {
            talk_workloads(manifest, &root, &args, &mut report).await?;
        }
        if args.outbound {
            report.insert("w8".into(), w8(manifest, &dir("w8"), &args).await?);
        }
        return Ok(Value::Object(report));
    }

    // W1 over HTTP, against a server in this process.
    if !args.no_http {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(burrow::http::serve_on(host.clone(), listener, async {
            let _ = stopped.await;
        }));
        let client = Client::new(&url);
        client
            .call("counter", "w1-http", "increment", "[1]")
            .await?;
        let w1_http = timed(args.ops, async |_| {
            Ok(client
                .call("counter", "w1-http", "increment", "[1]")
                .await
                .map(drop)?)
        })
        .await?;
        eprintln!("W1 HTTP: {}", w1_http.to_json());
        report.insert("w1_http".into(), w1_http.to_json());
        let _ = stop.send(());
        server.await??;
    }
    host.shutdown().await;
    drop(host);

    // W2: 64 instances, one task each, so 64 calls are in flight (their
    // creations included).
    let host = Host::start(config(&dir("w2"), &args), std::slice::from_ref(&spec)).await?;
    let callers = (0..modes::CALLERS)
        .map(|i| modes::Counter::InProcess {
            host: host.clone(),
            key: format!("w2-{i}"),
        })
        .collect();
    let w2 = modes::concurrent(callers, args.w2_calls).await?.to_json();
    eprintln!("W2: {w2}");
    report.insert("w2".into(), w2);
    host.shutdown().await;
    drop(host);

    // W3: create, then wake after a restart.
    let w3_dir = dir("w3");
    let create = first_calls(config(&w3_dir, &args), &spec, args.instances).await?;
    let wake = first_calls(config(&w3_dir, &args), &spec, args.instances).await?;
    eprintln!(
        "W3 create: {}\nW3 wake: {}",
        create.to_json(),
        wake.to_json()
    );
    report.insert("w3_create".into(), create.to_json());
    report.insert("w3_wake".into(), wake.to_json());

    report.insert("w4".into(), w4(manifest, &dir("w4"), &args).await?);
    report.insert("w5".into(), w5(manifest, &dir("w5"), &args, &report).await?);
    talk_workloads(manifest, &root, &args, &mut report).await?;
    report.insert("w8".into(), w8(manifest, &dir("w8"), &args).await?);

    // The floor, on the same machine in the same run.
    let floor = floor::run(&spec.component, &dir("floor"), args.ops, args.instances)
        .await
        .context("the floor benchmark failed")?;
    eprintln!(
        "floor W1: {}\nfloor W3 create: {}\nfloor W3 wake: {}",
        floor.w1.to_json(),
        floor.create.to_json(),
        floor.wake.to_json()
    );
    report.insert("floor_w1".into(), floor.w1.to_json());
    report.insert("floor_w3_create".into(), floor.create.to_json());
    report.insert("floor_w3_wake".into(), floor.wake.to_json());
    let ratio =
        |a: Duration, b: Duration| (a.as_secs_f64() / b.as_secs_f64() * 100.0).round() / 100.0;
    report.insert(
        "ratios_to_floor".into(),
        json!({
            "w1_mean": ratio(w1_mean(&report), floor.w1.mean()),
            "w3_create_mean": ratio(create.mean(), floor.create.mean()),
            "w3_wake_mean": ratio(wake.mean(), floor.wake.mean()),
        }),
    );
    let figures = languages::run(manifest, &dir("languages"), &args)
        .await
        .context("the languages side by side failed")?;
    eprintln!("\n{}", figures["table"].as_str().unwrap_or_default());
    report.insert("languages".into(), figures);
    let table = if args.no_modes {
        None
    } else {
        Some(durability_modes(&root, &spec, &args, &mut report).await?)
    };
    if let Some(table) = table {
        eprintln!("\n{table}");
    }
    Ok(Value::Object(report))
}

/// The durability modes, into `report` (under `modes`); returns their table.
async fn durability_modes(
    root: &Path,
    spec: &ActorSpec,
    args: &BenchArgs,
    report: &mut serde_json::Map<String, Value>,
) -> Result<String> {
    let sizes = modes::Sizes {
        w1: args.ops,
        w2_per_instance: args.w2_calls,
        hot: args.hot_calls,
    };
    let client = match (args.no_http, args.wrk) {
        (true, _) => modes::HttpClient::Skip,
        (false, Some(seconds)) => modes::HttpClient::Wrk { seconds },
        (false, None) => modes::HttpClient::Burrow,
    };
    let figures = modes::run(root, spec, &config(root, args), sizes, client)
        .await
        .context("the durability modes failed")?
        .to_json();
    let table = figures["table"].as_str().unwrap_or_default().to_owned();
    report.insert("modes".into(), figures);
    Ok(table)
}

async fn w4(manifest: &Path, dir: &Path, args: &BenchArgs) -> Result<Value> {
    let manifest = Manifest::load(manifest)?;
    let Some(spec) = manifest.actors.get("mailer") else {
        bail!("the manifest has no `mailer` actor, which W4 uses");
    };
    let w4 = queue::run(config(dir, args), spec, args.w4_jobs).await?;
    eprintln!("W4: {w4}");
    Ok(w4)
}

async fn w5(
    manifest: &Path,
    dir: &Path,
    args: &BenchArgs,
    report: &serde_json::Map<String, Value>,
) -> Result<Value> {
    let manifest = Manifest::load(manifest)?;
    let Some(spec) = manifest.actors.get("stepper") else {
        bail!("the manifest has no `stepper` actor, which W5 uses");
    };
    let mut w5 = workflow::run(config(dir, args), spec, args.w5_steps).await?;
    let step_us = w5["us_per_step"].as_f64().unwrap_or(0.0);
    let action_us = w1_mean(report).as_secs_f64() * 1e6;
    if action_us > 0.0 {
        w5["step_to_action_call"] = json!((step_us / action_us * 10.0).round() / 10.0);
    }
    eprintln!("W5: {w5}");
    Ok(w5)
}

async fn w8(manifest: &Path, dir: &Path, args: &BenchArgs) -> Result<Value> {
    let manifest = Manifest::load(manifest)?;
    let Some(spec) = manifest.actors.get("stepper") else {
        bail!("the manifest has no `stepper` actor, which W8 uses");
    };
    let w8 = outbound::run(config(dir, args), spec, args.w8_steps).await?;
    eprintln!("W8: {w8}");
    Ok(w8)
}

/// W6 and W7, into `report`.
async fn talk_workloads(
    manifest: &Path,
    root: &Path,
    args: &BenchArgs,
    report: &mut serde_json::Map<String, Value>,
) -> Result<()> {
    let manifest = Manifest::load(manifest)?;
    let spec = |name: &str| match manifest.actors.get(name) {
        Some(spec) => Ok(spec.clone()),
        None => bail!("the manifest has no `{name}` actor, which W6 and W7 use"),
    };
    let w6 = talk::calls(
        config(&root.join("w6"), args),
        &spec("account")?,
        args.w6_calls,
    )
    .await?;
    eprintln!("W6: {w6}");
    report.insert("w6".into(), w6);
    let w7 = talk::events(
        config(&root.join("w7"), args),
        &spec("chat-room")?,
        args.w7_clients,
        args.w7_messages,
    )
    .await?;
    eprintln!("W7: {w7}");
    report.insert("w7".into(), w7);
    Ok(())
}

/// Starts a host and times one call to each of `n` instances: creations on
/// a fresh data directory, wakes on one whose instances exist.
async fn first_calls(config: HostConfig, spec: &ActorSpec, n: usize) -> Result<Latencies> {
    let host = Host::start(config, std::slice::from_ref(spec)).await?;
    let latencies = timed(n, async |i| {
        Ok(host
            .call("counter", &format!("w3-{i}"), "increment", "[1]")
            .await
            .map(drop)?)
    })
    .await?;
    host.shutdown().await;
    Ok(latencies)
}

fn w1_mean(report: &serde_json::Map<String, Value>) -> Duration {
    let us = report["w1_in_process"]["mean_us"].as_f64().unwrap_or(0.0);
    Duration::from_secs_f64(us / 1e6)
}
