//! The durability modes side by side, with the machine's limits measured
//! in the same run (see [`disk`](super::disk)). On the manifest's `counter`:
//!
//! - W1: sequential `increment(1)` on one instance.
//! - W2: `increment(1)` over 64 instances, one caller each (64 in flight).
//! - Hot instance: 64 callers on one instance, `increment(1)`.
//!
//! Each runs with `synchronous = normal` and with `full`, each mode on a
//! fresh data directory: in-process through `Host::call`, then over HTTP
//! against `burrow serve` in a child process (one connection for W1, one
//! per caller otherwise), where `GET /healthz` on 64 connections shows
//! what the HTTP layer alone reaches. The client is `burrow-client`
//! (reqwest), heavier than `wrk`; `wrk/` holds the scripts that drive the
//! same workloads with `wrk` against `burrow serve`. Every instance gets one call before
//! the timing starts, so creations are not counted; the hot instance's
//! count is checked at the end.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::disk::{self, DiskLimits};
use super::server_process::ServerProcess;
use super::table::{self, DiskLine, Figures, Row};
use super::{Latencies, timed};
use crate::client::Client;
use crate::config::{HostConfig, Synchronous};
use crate::host::Host;
use crate::manifest::ActorSpec;

/// Callers at once in W2 and on the hot instance (and connections for
/// `GET /healthz`).
pub const CALLERS: usize = 64;
/// Requests of each connection to `GET /healthz`.
const HEALTH_REQUESTS_PER_CONNECTION: usize = 500;

/// How many calls each workload makes.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Calls of W1.
    pub w1: usize,
    /// Calls per instance in W2.
    pub w2_per_instance: usize,
    /// Calls of the hot instance, all callers together.
    pub hot: usize,
}

/// One counter instance, reached in-process or over HTTP.
#[derive(Clone)]
pub(super) enum Counter {
    InProcess { host: Host, key: String },
    Http { client: Client, key: String },
}

impl Counter {
    pub(super) async fn increment(&self) -> Result<()> {
        match self {
            Counter::InProcess { host, key } => {
                host.call("counter", key, "increment", "[1]").await?;
            }
            Counter::Http { client, key } => {
                client.call("counter", key, "increment", "[1]").await?;
            }
        }
        Ok(())
    }

    async fn value(&self) -> Result<i64> {
        let text = match self {
            Counter::InProcess { host, key } => host.call("counter", key, "get", "[]").await?,
            Counter::Http { client, key } => client.call("counter", key, "get", "[]").await?,
        };
        Ok(text.trim().parse()?)
    }
}

/// Runs every caller in its own task, `calls_each` increments one after
/// another; the latency of every increment.
pub(super) async fn concurrent(callers: Vec<Counter>, calls_each: usize) -> Result<Latencies> {
    let begun = Instant::now();
    let tasks: Vec<_> = callers
        .into_iter()
        .map(|caller| {
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(calls_each);
                for _ in 0..calls_each {
                    let t = Instant::now();
                    caller.increment().await?;
                    samples.push(t.elapsed());
                }
                Ok::<_, anyhow::Error>(samples)
            })
        })
        .collect();
    let mut samples = Vec::new();
    for task in tasks {
        samples.extend(task.await??);
    }
    Ok(Latencies::new(samples, begun.elapsed()))
}

/// The three workloads of one mode on one way in.
#[derive(Debug, Clone)]
pub(super) struct Workloads {
    w1: Latencies,
    w2: Latencies,
    hot: Latencies,
}

impl Workloads {
    fn to_json(&self) -> Value {
        json!({
            "w1": self.w1.to_json(),
            "w2": self.w2.to_json(),
            "hot_instance": self.hot.to_json(),
        })
    }
}

/// W1, W2 and the hot instance on the counters `counter` makes from keys.
async fn workloads(counter: impl Fn(&str) -> Counter, sizes: Sizes) -> Result<Workloads> {
    let one = counter("w1");
    one.increment().await?;
    let w1 = timed(sizes.w1, async |_| one.increment().await).await?;

    let spread: Vec<_> = (0..CALLERS).map(|i| counter(&format!("w2-{i}"))).collect();
    for caller in &spread {
        caller.increment().await?;
    }
    let w2 = concurrent(spread, sizes.w2_per_instance).await?;

    let hot_each = sizes.hot.div_ceil(CALLERS);
    let hot = counter("hot");
    hot.increment().await?;
    let callers = (0..CALLERS).map(|_| counter("hot")).collect();
    let hot_latencies = concurrent(callers, hot_each).await?;
    let count = hot.value().await?;
    let expected = (1 + hot_each * CALLERS) as i64;
    if count != expected {
        bail!("the hot instance counted {count}, not {expected}");
    }
    Ok(Workloads {
        w1,
        w2,
        hot: hot_latencies,
    })
}

/// Counters over HTTP, each with a client (a connection) of its own, also
/// when several are on the hot instance.
fn http_counter(url: &str) -> impl Fn(&str) -> Counter {
    let url = url.to_owned();
    move |key| Counter::Http {
        client: Client::new(&url),
        key: key.to_owned(),
    }
}

/// `GET /healthz` on [`CALLERS`] connections.
async fn health(url: &str) -> Result<Latencies> {
    let url = Arc::new(format!("{url}/healthz"));
    let begun = Instant::now();
    let tasks: Vec<_> = (0..CALLERS)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let mut samples = Vec::with_capacity(HEALTH_REQUESTS_PER_CONNECTION);
                for _ in 0..HEALTH_REQUESTS_PER_CONNECTION {
                    let t = Instant::now();
                    let answer = http.get(url.as_str()).send().await?;
                    if !answer.status().is_success() {
                        bail!("GET /healthz answered {}", answer.status());
                    }
                    answer.bytes().await?;
                    samples.push(t.elapsed());
                }
                Ok(samples)
            })
        })
        .collect();
    let mut samples = Vec::new();
    for task in tasks {
        samples.extend(task.await??);
    }
    Ok(Latencies::new(samples, begun.elapsed()))
}

/// Every figure of the section.
pub(super) struct ModesReport {
    disk: DiskLimits,
    in_process: [Workloads; 2],
    http: Option<([Workloads; 2], Latencies)>,
}

const MODES: [Synchronous; 2] = [Synchronous::Normal, Synchronous::Full];

fn mode_key(mode: Synchronous) -> &'static str {
    match mode {
        Synchronous::Off => "off",
        Synchronous::Normal => "normal",
        Synchronous::Full => "full",
    }
}

/// Measures the disk, then runs the workloads in both modes, in-process
/// and (with `http`) against `burrow serve` in a child process.
pub(super) async fn run(
    root: &Path,
    spec: &ActorSpec,
    config: &HostConfig,
    sizes: Sizes,
    http: bool,
) -> Result<ModesReport> {
    let disk = disk::measure(&root.join("disk")).await?;
    eprintln!("disk: {}", disk.to_json());
    let mut in_process = Vec::new();
    for mode in MODES {
        let config = HostConfig {
            data_dir: root.join(format!("modes-{}", mode_key(mode))),
            synchronous: mode,
            ..config.clone()
        };
        let host = Host::start(config, std::slice::from_ref(spec)).await?;
        let figures = workloads(
            |key| Counter::InProcess {
                host: host.clone(),
                key: key.to_owned(),
            },
            sizes,
        )
        .await;
        host.shutdown().await;
        let figures = figures?;
        eprintln!("in-process, {}: {}", mode_key(mode), figures.to_json());
        in_process.push(figures);
    }
    let http = if http {
        let mut modes = Vec::new();
        let mut healthz = None;
        for mode in MODES {
            let dir = root.join(format!("modes-http-{}", mode_key(mode)));
            let server = ServerProcess::start(spec, &dir, mode).await?;
            let figures = workloads(http_counter(&server.url), sizes).await;
            let health = match (&figures, mode) {
                (Ok(_), Synchronous::Normal) => Some(health(&server.url).await),
                _ => None,
            };
            server.stop().await?;
            let figures = figures?;
            if let Some(health) = health {
                healthz = Some(health?);
            }
            eprintln!("HTTP, {}: {}", mode_key(mode), figures.to_json());
            modes.push(figures);
        }
        let healthz = healthz.expect("measured in normal mode");
        eprintln!("HTTP, GET /healthz: {}", healthz.to_json());
        Some((pair(modes), healthz))
    } else {
        None
    };
    Ok(ModesReport {
        disk,
        in_process: pair(in_process),
        http,
    })
}

fn pair(modes: Vec<Workloads>) -> [Workloads; 2] {
    modes.try_into().expect("one figure per mode")
}

fn figures(latencies: &Latencies) -> Figures {
    Figures {
        ops_per_sec: latencies.ops_per_sec(),
        p50: latencies.percentile(50.0),
        p99: latencies.percentile(99.0),
    }
}

/// The limits of the workloads in `full` mode, from the disk's figures and
/// the workload's own time in `normal` mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct FullModeLimits {
    /// 1 / fsync latency (its mean): one caller, one fsync per commit,
    /// nothing else.
    pub fsync_bound: f64,
    /// 1 / the fsync latency's median: the same bound when the disk is
    /// quiet (on a shared machine the mean carries others' bursts).
    pub fsync_bound_at_p50: f64,
    /// 1 / (fsync latency + W1's mean in `normal` mode).
    pub w1_with_call: f64,
    /// The parallel fsync rate: instances committing at once.
    pub parallel: f64,
}

impl FullModeLimits {
    pub(super) fn new(
        fsync: Duration,
        fsync_p50: Duration,
        parallel: f64,
        w1_normal_mean: Duration,
    ) -> Self {
        FullModeLimits {
            fsync_bound: disk::per_second(fsync),
            fsync_bound_at_p50: disk::per_second(fsync_p50),
            w1_with_call: disk::sequential_limit_with_call(fsync, w1_normal_mean),
            parallel,
        }
    }

    fn to_json(self) -> Value {
        json!({
            "w1_fsync_bound_ops_per_sec": self.fsync_bound.round(),
            "w1_fsync_bound_at_p50_ops_per_sec": self.fsync_bound_at_p50.round(),
            "w1_with_the_call_ops_per_sec": self.w1_with_call.round(),
            "w2_parallel_fsyncs_per_sec": self.parallel.round(),
            "hot_instance_one_fsync_per_call_ops_per_sec": self.fsync_bound.round(),
        })
    }

    /// The limit cells of W1, W2 and the hot instance.
    pub(super) fn cells(self) -> [String; 3] {
        let fsync = table::thousands(self.fsync_bound);
        [
            format!(
                "{fsync} (1 / fsync; {} at its p50); {} with the call's own time",
                table::thousands(self.fsync_bound_at_p50),
                table::thousands(self.w1_with_call)
            ),
            format!(
                "{} ({} threads fsyncing their own files)",
                table::thousands(self.parallel),
                disk::PARALLEL_THREADS
            ),
            format!("{fsync} × the calls that share one fsync"),
        ]
    }
}

/// Rows of one way in (in-process or HTTP).
fn rows(way: &str, modes: &[Workloads; 2], disk: &DiskLimits) -> (Vec<Row>, FullModeLimits) {
    let [normal, full] = modes;
    let limits = FullModeLimits::new(
        disk.sync_mean(),
        disk.sync.percentile(50.0),
        disk.parallel_syncs_per_sec,
        normal.w1.mean(),
    );
    let [w1_limit, w2_limit, hot_limit] = limits.cells();
    let connections = if way == "HTTP" {
        [", 1 connection", ", 64 connections"]
    } else {
        ["", ""]
    };
    let rows = vec![
        Row {
            workload: format!(
                "W1 {way}: sequential `increment(1)`, one instance{}",
                connections[0]
            ),
            normal: Some(figures(&normal.w1)),
            full: Some(figures(&full.w1)),
            limit: w1_limit,
        },
        Row {
            workload: format!(
                "W2 {way}: `increment(1)` over 64 instances, 64 in flight{}",
                connections[1]
            ),
            normal: Some(figures(&normal.w2)),
            full: Some(figures(&full.w2)),
            limit: w2_limit,
        },
        Row {
            workload: format!(
                "hot instance {way}: 64 callers on one instance{}",
                connections[1]
            ),
            normal: Some(figures(&normal.hot)),
            full: Some(figures(&full.hot)),
            limit: hot_limit,
        },
    ];
    (rows, limits)
}

impl ModesReport {
    /// The figures as JSON, the table among them.
    pub(super) fn to_json(&self) -> Value {
        let (in_process_rows, in_process_limits) = rows("in-process", &self.in_process, &self.disk);
        let mut all_rows = in_process_rows;
        let mut report = json!({
            "disk": self.disk.to_json(),
            "in_process": {
                "normal": self.in_process[0].to_json(),
                "full": self.in_process[1].to_json(),
                "full_mode_limits": in_process_limits.to_json(),
            },
        });
        if let Some((modes, healthz)) = &self.http {
            let (http_rows, http_limits) = rows("HTTP", modes, &self.disk);
            all_rows.extend(http_rows);
            all_rows.push(Row {
                workload: "`GET /healthz`, 64 connections".into(),
                normal: Some(figures(healthz)),
                full: None,
                limit: "(the HTTP layer)".into(),
            });
            report["http"] = json!({
                "server": "burrow serve in a child process",
                "normal": modes[0].to_json(),
                "full": modes[1].to_json(),
                "healthz_64_connections": healthz.to_json(),
                "full_mode_limits": http_limits.to_json(),
            });
        }
        let disk_line = DiskLine {
            fsync_p50: self.disk.sync.percentile(50.0),
            fsync_mean: self.disk.sync_mean(),
            rounds: disk::SYNC_ROUNDS,
            parallel_threads: disk::PARALLEL_THREADS,
            parallel_fsyncs_per_sec: self.disk.parallel_syncs_per_sec,
        };
        report["table"] = json!(table::render(&all_rows, &disk_line));
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_mode_limits_come_from_the_disk_and_the_normal_call() {
        let limits = FullModeLimits::new(
            Duration::from_micros(125),
            Duration::from_micros(100),
            36_410.0,
            Duration::from_micros(125),
        );
        assert_eq!(limits.fsync_bound, 8_000.0);
        assert!((limits.w1_with_call - 4_000.0).abs() < 1e-6);
        let [w1, w2, hot] = limits.cells();
        assert_eq!(
            w1,
            "8,000 (1 / fsync; 10,000 at its p50); 4,000 with the call's own time"
        );
        assert_eq!(w2, "36,410 (16 threads fsyncing their own files)");
        assert_eq!(hot, "8,000 × the calls that share one fsync");
    }
}
