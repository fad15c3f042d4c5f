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
//! (reqwest) from tasks of the bench process, or with `--wrk SECONDS`
//! `wrk` (see [`wrk`](super::wrk)), a lighter client that runs each
//! workload for a fixed time. Every instance gets one call before the
//! timing starts, so creations are not counted; the hot instance's count
//! is checked at the end. Around W1 the host's log syncs are read
//! (`Host::log_syncs`, or `burrow_log_sync_seconds` from the server's
//! `GET /metrics`): in `full` mode, the mean time of W1's own syncs is
//! the disk's latency while W1 ran, beside the one measured before it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::Latencies;
use super::cpu::{self, MachineCpu};
use super::disk::{self, DiskLimits};
use super::server_process::ServerProcess;
use super::table::{self, DiskLine, Figures, Row};
use super::wrk::{self, WrkReport};
use burrow::client::Client;
use burrow::config::{HostConfig, Synchronous};
use burrow::host::{Host, LogSyncs};
use burrow::manifest::ActorSpec;

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

/// Where the bench reads a host's log syncs.
#[derive(Clone)]
enum Syncs {
    InProcess(Host),
    /// `GET /metrics` of the server at this URL.
    Server(String),
}

impl Syncs {
    async fn read(&self) -> Result<LogSyncs> {
        match self {
            Syncs::InProcess(host) => Ok(host.log_syncs()),
            Syncs::Server(url) => {
                let http = burrow::client::Trust::system().http_client().build()?;
                let answer = http.get(format!("{url}/metrics")).send().await?;
                if !answer.status().is_success() {
                    bail!("GET /metrics answered {}", answer.status());
                }
                let text = answer.text().await?;
                LogSyncs::from_metrics(&text)
                    .ok_or_else(|| anyhow::anyhow!("GET /metrics has no burrow_log_sync_seconds"))
            }
        }
    }
}

/// The increments of a run: the latency of each that succeeded, and the
/// failures (a call that timed out is a figure too, so the run goes on).
pub(super) struct Increments {
    pub(super) latencies: Latencies,
    pub(super) failed: u64,
    pub(super) first_failure: Option<String>,
}

impl Increments {
    pub(super) fn to_json(&self) -> Value {
        let mut value = self.latencies.to_json();
        value["failed"] = json!(self.failed);
        if let Some(failure) = &self.first_failure {
            value["first_failure"] = json!(failure);
        }
        value
    }
}

/// Runs every caller in its own task, `calls_each` increments one after
/// another.
pub(super) async fn concurrent(callers: Vec<Counter>, calls_each: usize) -> Result<Increments> {
    let begun = Instant::now();
    let tasks: Vec<_> = callers
        .into_iter()
        .map(|caller| {
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(calls_each);
                let mut failures = Vec::new();
                for _ in 0..calls_each {
                    let t = Instant::now();
                    match caller.increment().await {
                        Ok(()) => samples.push(t.elapsed()),
                        Err(e) => failures.push(format!("{e:#}")),
                    }
                }
                (samples, failures)
            })
        })
        .collect();
    let mut samples = Vec::new();
    let mut failed = 0;
    let mut first_failure = None;
    for task in tasks {
        let (more, failures) = task.await?;
        samples.extend(more);
        failed += failures.len() as u64;
        first_failure = first_failure.or(failures.into_iter().next());
    }
    Ok(Increments {
        latencies: Latencies::new(samples, begun.elapsed()),
        failed,
        first_failure,
    })
}

/// Throughput and latency of one workload, from this process's own
/// timings or from `wrk`'s report.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Summary {
    ops: u64,
    ops_per_sec: f64,
    mean: Duration,
    p50: Duration,
    p99: Duration,
    p999: Duration,
    /// Failed requests (answers other than 2xx and socket errors for
    /// `wrk`).
    failed: u64,
    first_failure: Option<String>,
}

impl Summary {
    fn of(latencies: &Latencies) -> Summary {
        Summary {
            ops: latencies.samples.len() as u64,
            ops_per_sec: latencies.ops_per_sec(),
            mean: latencies.mean(),
            p50: latencies.percentile(50.0),
            p99: latencies.percentile(99.0),
            p999: latencies.percentile(99.9),
            failed: 0,
            first_failure: None,
        }
    }

    fn of_increments(increments: Increments) -> Summary {
        Summary {
            failed: increments.failed,
            first_failure: increments.first_failure,
            ..Summary::of(&increments.latencies)
        }
    }

    fn of_wrk(report: &WrkReport) -> Summary {
        Summary {
            ops: report.requests,
            ops_per_sec: report.requests_per_sec,
            mean: report.mean,
            p50: report.p50,
            p99: report.p99,
            p999: report.p999,
            failed: report.errors,
            first_failure: None,
        }
    }

    fn to_json(&self) -> Value {
        let mut value = json!({
            "ops": self.ops,
            "ops_per_sec": self.ops_per_sec.round(),
            "mean_us": super::micros(self.mean),
            "p50_us": super::micros(self.p50),
            "p99_us": super::micros(self.p99),
            "p999_us": super::micros(self.p999),
        });
        value["failed"] = json!(self.failed);
        if let Some(failure) = &self.first_failure {
            value["first_failure"] = json!(failure);
        }
        value
    }

    /// The time of one call of a single sequential caller: 1 / its rate
    /// (`wrk`'s mean latency is not that).
    fn time_per_call(&self) -> Duration {
        if self.ops_per_sec > 0.0 {
            Duration::from_secs_f64(1.0 / self.ops_per_sec)
        } else {
            Duration::ZERO
        }
    }

    fn figures(&self) -> Figures {
        Figures {
            ops_per_sec: self.ops_per_sec,
            p50: self.p50,
            p99: self.p99,
            failed: self.failed,
        }
    }
}

/// The three workloads of one mode on one way in.
#[derive(Debug, Clone)]
pub(super) struct Workloads {
    w1: Summary,
    w2: Summary,
    hot: Summary,
    /// The machine's CPU time (all cores, the client's too) per call of
    /// W2.
    w2_cpu_per_call: Option<Duration>,
    /// The mean time of the log syncs made during W1 (`full` mode only).
    w1_sync: Option<Duration>,
}

impl Workloads {
    fn to_json(&self) -> Value {
        json!({
            "w1": self.w1.to_json(),
            "w2": self.w2.to_json(),
            "w2_machine_cpu_per_call_us": self.w2_cpu_per_call.map(super::micros),
            "w1_log_sync_mean_us": self.w1_sync.map(super::micros),
            "hot_instance": self.hot.to_json(),
        })
    }
}

/// W1, W2 and the hot instance on the counters `counter` makes from keys.
async fn workloads(
    counter: impl Fn(&str) -> Counter,
    syncs: &Syncs,
    sizes: Sizes,
) -> Result<Workloads> {
    let one = counter("w1");
    one.increment().await?;
    let before = syncs.read().await?;
    let w1 = concurrent(vec![one], sizes.w1).await?;
    let w1_sync = syncs.read().await?.mean_since(before);

    let spread: Vec<_> = (0..CALLERS).map(|i| counter(&format!("w2-{i}"))).collect();
    for caller in &spread {
        caller.increment().await?;
    }
    let machine = MachineCpu::now();
    let w2 = concurrent(spread, sizes.w2_per_instance).await?;
    let w2_cpu_per_call = machine
        .and_then(MachineCpu::busy_since)
        .and_then(|busy| cpu::per_op(busy, w2.latencies.samples.len() as u64));

    let hot_each = sizes.hot.div_ceil(CALLERS);
    let hot = counter("hot");
    hot.increment().await?;
    let callers = (0..CALLERS).map(|_| counter("hot")).collect();
    let hot_increments = concurrent(callers, hot_each).await?;
    let count = hot.value().await?;
    // A failed call (one that timed out) may have committed or not.
    let answered = 1 + hot_increments.latencies.samples.len() as i64;
    let most = answered + hot_increments.failed as i64;
    if !(answered..=most).contains(&count) {
        bail!("the hot instance counted {count}, not {answered} to {most}");
    }
    Ok(Workloads {
        w1: Summary::of_increments(w1),
        w2: Summary::of_increments(w2),
        hot: Summary::of_increments(hot_increments),
        w2_cpu_per_call,
        w1_sync,
    })
}

/// W1, W2 and the hot instance over HTTP, driven by `wrk` for `seconds`
/// each; every instance gets one call first, and the hot instance's count
/// must hold every answered request.
async fn workloads_with_wrk(url: &str, dir: &Path, seconds: u64) -> Result<Workloads> {
    let scripts = wrk::Scripts::write(dir)?;
    let counter = http_counter(url);
    counter("w1").increment().await?;
    for i in 0..CALLERS {
        counter(&format!("w2-{i}")).increment().await?;
    }
    let hot = counter("hot");
    hot.increment().await?;
    let syncs = Syncs::Server(url.to_owned());
    let before = syncs.read().await?;
    let w1 = wrk::run(url, &scripts, wrk::Load::Sequential, seconds).await?;
    let w1_sync = syncs.read().await?.mean_since(before);
    let machine = MachineCpu::now();
    let w2 = wrk::run(url, &scripts, wrk::Load::Spread, seconds).await?;
    let w2_cpu_per_call = machine
        .and_then(MachineCpu::busy_since)
        .and_then(|busy| cpu::per_op(busy, w2.requests));
    let hot_report = wrk::run(url, &scripts, wrk::Load::Hot, seconds).await?;
    let count = hot.value().await?;
    if (count as u64) < 1 + hot_report.requests - hot_report.errors.min(hot_report.requests) {
        bail!(
            "the hot instance counted {count}, fewer than the {} requests wrk saw answered",
            hot_report.requests
        );
    }
    Ok(Workloads {
        w1: Summary::of_wrk(&w1),
        w2: Summary::of_wrk(&w2),
        hot: Summary::of_wrk(&hot_report),
        w2_cpu_per_call,
        w1_sync,
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

/// `GET /healthz` on [`CALLERS`] connections, driven by `client`.
async fn health(url: &str, dir: &Path, client: HttpClient) -> Result<Summary> {
    if let HttpClient::Wrk { seconds } = client {
        return health_with_wrk(url, dir, CALLERS as u32, seconds).await;
    }
    let url = Arc::new(format!("{url}/healthz"));
    let begun = Instant::now();
    let tasks: Vec<_> = (0..CALLERS)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                let http = burrow::client::Trust::system().http_client().build()?;
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
    Ok(Summary::of(&Latencies::new(samples, begun.elapsed())))
}

/// `GET /healthz` on `connections` connections, driven by `wrk` for
/// `seconds`.
async fn health_with_wrk(url: &str, dir: &Path, connections: u32, seconds: u64) -> Result<Summary> {
    let scripts = wrk::Scripts::write(&dir.join("wrk"))?;
    let load = wrk::Load::Health { connections };
    let report = wrk::run(url, &scripts, load, seconds).await?;
    Ok(Summary::of_wrk(&report))
}

/// How the HTTP workloads are driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HttpClient {
    /// None: in-process only.
    Skip,
    /// `burrow-client`, from tasks of this process.
    Burrow,
    /// `wrk`, for this many seconds per workload.
    Wrk { seconds: u64 },
}

impl HttpClient {
    fn name(self) -> &'static str {
        match self {
            HttpClient::Skip => "none",
            HttpClient::Burrow => "burrow-client (reqwest) in the bench process",
            HttpClient::Wrk { .. } => "wrk",
        }
    }
}

/// Every figure of the section.
pub(super) struct ModesReport {
    /// Both modes in-process, and the disk measured before the `full` one.
    in_process: ([Workloads; 2], DiskLimits),
    /// Both modes over HTTP, the disk measured before the `full` one, and
    /// `GET /healthz`.
    http: Option<([Workloads; 2], DiskLimits, Summary)>,
    /// `GET /healthz` on one connection, beside W1 (with `wrk` only).
    healthz_one: Option<Summary>,
    client: HttpClient,
}

const MODES: [Synchronous; 2] = [Synchronous::Normal, Synchronous::Full];

fn mode_key(mode: Synchronous) -> &'static str {
    match mode {
        Synchronous::Off => "off",
        Synchronous::Normal => "normal",
        Synchronous::Full => "full",
    }
}

/// Runs the workloads in both modes, in-process and (unless `client` is
/// `Skip`) against `burrow serve` in a child process; the disk is measured
/// right before each `full` run, so that its limits are taken under the
/// same conditions as the figures they bound (on a shared machine the
/// disk's latency changes by the minute).
pub(super) async fn run(
    root: &Path,
    spec: &ActorSpec,
    config: &HostConfig,
    sizes: Sizes,
    client: HttpClient,
) -> Result<ModesReport> {
    if let HttpClient::Wrk { .. } = client {
        wrk::check_installed().await?;
    }
    let measure_disk = async |way: &str| {
        let disk = disk::measure(&root.join("disk")).await?;
        eprintln!("disk, before the {way} full runs: {}", disk.to_json());
        anyhow::Ok(disk)
    };
    let mut in_process = Vec::new();
    let mut in_process_disk = None;
    for mode in MODES {
        if mode == Synchronous::Full {
            in_process_disk = Some(measure_disk("in-process").await?);
        }
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
            &Syncs::InProcess(host.clone()),
            sizes,
        )
        .await;
        host.shutdown().await;
        let figures = figures?;
        eprintln!("in-process, {}: {}", mode_key(mode), figures.to_json());
        in_process.push(figures);
    }
    let mut healthz_one = None;
    let http = if client != HttpClient::Skip {
        let mut modes = Vec::new();
        let mut healthz = None;
        let mut http_disk = None;
        let mut one = None;
        for mode in MODES {
            if mode == Synchronous::Full {
                http_disk = Some(measure_disk("HTTP").await?);
            }
            let dir = root.join(format!("modes-http-{}", mode_key(mode)));
            let server = ServerProcess::start(spec, &dir, mode).await?;
            let figures = match client {
                HttpClient::Wrk { seconds } => {
                    workloads_with_wrk(&server.url, &dir.join("wrk"), seconds).await
                }
                _ => {
                    let syncs = Syncs::Server(server.url.clone());
                    workloads(http_counter(&server.url), &syncs, sizes).await
                }
            };
            let health = match (&figures, mode) {
                (Ok(_), Synchronous::Normal) => Some(health(&server.url, &dir, client).await),
                _ => None,
            };
            if let (Ok(_), Synchronous::Normal, HttpClient::Wrk { seconds }) =
                (&figures, mode, client)
            {
                one = Some(health_with_wrk(&server.url, &dir, 1, seconds).await);
            }
            server.stop().await?;
            let figures = figures?;
            if let Some(health) = health {
                healthz = Some(health?);
            }
            if let Some(health) = one.take() {
                healthz_one = Some(health?);
            }
            eprintln!("HTTP, {}: {}", mode_key(mode), figures.to_json());
            modes.push(figures);
        }
        let healthz = healthz.expect("measured in normal mode");
        eprintln!("HTTP, GET /healthz: {}", healthz.to_json());
        Some((
            pair(modes),
            http_disk.expect("measured before full mode"),
            healthz,
        ))
    } else {
        None
    };
    Ok(ModesReport {
        in_process: (
            pair(in_process),
            in_process_disk.expect("measured before full mode"),
        ),
        http,
        healthz_one,
        client,
    })
}

fn pair(modes: Vec<Workloads>) -> [Workloads; 2] {
    modes.try_into().expect("one figure per mode")
}

/// The limits of the workloads in `full` mode, from the disk's figures and
/// the workloads' own cost in `normal` mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct FullModeLimits {
    /// 1 / fsync latency (its mean): one caller, one fsync per commit,
    /// nothing else.
    pub fsync_bound: f64,
    /// 1 / the fsync latency's median: the same bound when the disk is
    /// quiet (on a shared machine the mean carries others' bursts).
    pub fsync_bound_at_p50: f64,
    /// 1 / (fsync latency + W1's time per call in `normal` mode).
    pub w1_with_call: f64,
    /// The mean time of W1's own log syncs in `full` mode: the fsync
    /// latency while W1 ran.
    pub w1_own_syncs: Option<OwnSyncs>,
    /// The parallel fsync rate: instances committing at once.
    pub parallel: f64,
    /// W2 once each call and each sync take their CPU.
    pub w2_cpu_bound: Option<CpuBound>,
}

/// W1's bounds at the mean time of its own log syncs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct OwnSyncs {
    pub sync: Duration,
    /// 1 / the sync.
    pub bound: f64,
    /// 1 / (the sync + W1's time per call in `normal` mode).
    pub with_call: f64,
}

/// The rate of W2 in `full` mode that the machine's cores allow when each
/// call costs what it does in `normal` mode and each commit adds one sync
/// at its CPU cost: cores / (call + sync). Syncs in parallel reach more
/// than this only while they have the cores to themselves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct CpuBound {
    pub per_sec: f64,
    pub cores: usize,
    /// The machine's CPU time per W2 call in `normal` mode.
    pub call: Duration,
    /// The machine's CPU time per sync, from the parallel fsync rate.
    pub sync: Duration,
}

impl CpuBound {
    pub(super) fn new(cores: usize, call: Duration, sync: Duration) -> Self {
        CpuBound {
            per_sec: cores as f64 * disk::per_second(call + sync),
            cores,
            call,
            sync,
        }
    }
}

impl FullModeLimits {
    pub(super) fn new(
        fsync: Duration,
        fsync_p50: Duration,
        parallel: f64,
        w1_normal_call: Duration,
        w1_own_sync: Option<Duration>,
        w2_cpu_bound: Option<CpuBound>,
    ) -> Self {
        FullModeLimits {
            fsync_bound: disk::per_second(fsync),
            fsync_bound_at_p50: disk::per_second(fsync_p50),
            w1_with_call: disk::sequential_limit_with_call(fsync, w1_normal_call),
            w1_own_syncs: w1_own_sync.map(|sync| OwnSyncs {
                sync,
                bound: disk::per_second(sync),
                with_call: disk::sequential_limit_with_call(sync, w1_normal_call),
            }),
            parallel,
            w2_cpu_bound,
        }
    }

    fn to_json(self) -> Value {
        json!({
            "w1_fsync_bound_ops_per_sec": self.fsync_bound.round(),
            "w1_fsync_bound_at_p50_ops_per_sec": self.fsync_bound_at_p50.round(),
            "w1_with_the_call_ops_per_sec": self.w1_with_call.round(),
            "w1_own_log_sync_mean_us": self.w1_own_syncs.map(|own| super::micros(own.sync)),
            "w1_own_syncs_bound_ops_per_sec": self.w1_own_syncs.map(|own| own.bound.round()),
            "w1_own_syncs_with_the_call_ops_per_sec": self.w1_own_syncs.map(|own| own.with_call.round()),
            "w2_parallel_fsyncs_per_sec": self.parallel.round(),
            "w2_cpu_bound_ops_per_sec": self.w2_cpu_bound.map(|b| b.per_sec.round()),
            "hot_instance_one_fsync_per_call_ops_per_sec": self.fsync_bound.round(),
        })
    }

    /// The limit cells of W1, W2 and the hot instance.
    pub(super) fn cells(self) -> [String; 3] {
        let fsync = table::thousands(self.fsync_bound);
        let own_syncs = match self.w1_own_syncs {
            Some(own) => format!(
                "; at W1's own syncs ({} each): {}, {} with the call",
                table::latency(own.sync),
                table::thousands(own.bound),
                table::thousands(own.with_call),
            ),
            None => String::new(),
        };
        [
            format!(
                "{fsync} (1 / fsync; {} at its p50); {} with the call's own time{own_syncs}",
                table::thousands(self.fsync_bound_at_p50),
                table::thousands(self.w1_with_call)
            ),
            match self.w2_cpu_bound {
                Some(bound) => format!(
                    "{} ({} threads fsyncing their own files); {} with the CPU of the calls and syncs ({} cores; {} a call, {} a sync)",
                    table::thousands(self.parallel),
                    disk::PARALLEL_THREADS,
                    table::thousands(bound.per_sec),
                    bound.cores,
                    table::latency(bound.call),
                    table::latency(bound.sync),
                ),
                None => format!(
                    "{} ({} threads fsyncing their own files)",
                    table::thousands(self.parallel),
                    disk::PARALLEL_THREADS
                ),
            },
            format!("{fsync} × the calls that share one fsync"),
        ]
    }
}

/// Rows of one way in (in-process or HTTP).
fn rows(way: &str, modes: &[Workloads; 2], disk: &DiskLimits) -> (Vec<Row>, FullModeLimits) {
    let [normal, full] = modes;
    let w2_cpu_bound = normal
        .w2_cpu_per_call
        .zip(disk.cpu_per_parallel_sync)
        .map(|(call, sync)| CpuBound::new(cpu::cores(), call, sync));
    let limits = FullModeLimits::new(
        disk.sync_mean(),
        disk.sync.percentile(50.0),
        disk.parallel_syncs_per_sec,
        normal.w1.time_per_call(),
        full.w1_sync,
        w2_cpu_bound,
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
            normal: Some(normal.w1.figures()),
            full: Some(full.w1.figures()),
            limit: w1_limit,
        },
        Row {
            workload: format!(
                "W2 {way}: `increment(1)` over 64 instances, 64 in flight{}",
                connections[1]
            ),
            normal: Some(normal.w2.figures()),
            full: Some(full.w2.figures()),
            limit: w2_limit,
        },
        Row {
            workload: format!(
                "hot instance {way}: 64 callers on one instance{}",
                connections[1]
            ),
            normal: Some(normal.hot.figures()),
            full: Some(full.hot.figures()),
            limit: hot_limit,
        },
    ];
    (rows, limits)
}

impl ModesReport {
    /// The figures as JSON, the table among them.
    pub(super) fn to_json(&self) -> Value {
        let (modes, disk) = &self.in_process;
        let (in_process_rows, in_process_limits) = rows("in-process", modes, disk);
        let mut all_rows = in_process_rows;
        let mut disks = vec![("in-process", disk_line(disk))];
        let mut report = json!({
            "in_process": {
                "normal": modes[0].to_json(),
                "full": modes[1].to_json(),
                "disk_before_full": disk.to_json(),
                "full_mode_limits": in_process_limits.to_json(),
            },
        });
        if let Some((modes, disk, healthz)) = &self.http {
            let (http_rows, http_limits) = rows("HTTP", modes, disk);
            disks.push(("HTTP", disk_line(disk)));
            all_rows.extend(http_rows);
            all_rows.push(Row {
                workload: "`GET /healthz`, 64 connections".into(),
                normal: Some(healthz.figures()),
                full: None,
                limit: "(the HTTP layer)".into(),
            });
            report["http"] = json!({
                "server": "burrow serve in a child process",
                "client": self.client.name(),
                "normal": modes[0].to_json(),
                "full": modes[1].to_json(),
                "healthz_64_connections": healthz.to_json(),
                "disk_before_full": disk.to_json(),
                "full_mode_limits": http_limits.to_json(),
            });
        }
        let mut rendered = table::render(&all_rows, &disks);
        if let (Some((modes, _, healthz)), Some(one)) = (&self.http, &self.healthz_one) {
            rendered.push_str(&tails(&modes[0], one, healthz));
            report["http"]["healthz_1_connection"] = one.to_json();
        }
        report["table"] = json!(rendered);
        report
    }
}

/// The tails over HTTP in `normal` mode, W1 beside `GET /healthz` on one
/// connection and W2 beside it on 64, with each one's p99 as a multiple
/// of `/healthz`'s (the HTTP layer alone, on the same machine, in the same
/// run).
fn tails(normal: &Workloads, healthz_one: &Summary, healthz: &Summary) -> String {
    let row = |name: &str, s: &Summary, beside: &Summary| {
        let ratio = s.p99.as_secs_f64() / beside.p99.as_secs_f64().max(1e-9);
        format!(
            "| {name} | {} | {} | {} | {} | {ratio:.1}x |\n",
            table::thousands(s.ops_per_sec),
            table::latency(s.p50),
            table::latency(s.p99),
            table::latency(s.p999),
        )
    };
    let mut out = String::from(
        "\nTails over HTTP, `normal` mode (wrk):\n\n\
         | workload | ops/s | p50 | p99 | p99.9 | p99 / `/healthz`'s |\n\
         |---|---|---|---|---|---|\n",
    );
    out.push_str(&row("W1, 1 connection", &normal.w1, healthz_one));
    out.push_str(&row(
        "`GET /healthz`, 1 connection",
        healthz_one,
        healthz_one,
    ));
    out.push_str(&row("W2, 64 connections", &normal.w2, healthz));
    out.push_str(&row("`GET /healthz`, 64 connections", healthz, healthz));
    out
}

fn disk_line(disk: &DiskLimits) -> DiskLine {
    DiskLine {
        fsync_p50: disk.sync.percentile(50.0),
        fsync_mean: disk.sync_mean(),
        rounds: disk::SYNC_ROUNDS,
        parallel_threads: disk::PARALLEL_THREADS,
        parallel_fsyncs_per_sec: disk.parallel_syncs_per_sec,
        cpu_per_parallel_sync: disk.cpu_per_parallel_sync,
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
            Some(Duration::from_micros(160)),
            None,
        );
        assert_eq!(limits.fsync_bound, 8_000.0);
        assert!((limits.w1_with_call - 4_000.0).abs() < 1e-6);
        let [w1, w2, hot] = limits.cells();
        assert_eq!(
            w1,
            "8,000 (1 / fsync; 10,000 at its p50); 4,000 with the call's own time; at W1's own syncs (160 µs each): 6,250, 3,509 with the call"
        );
        assert_eq!(limits.to_json()["w1_own_syncs_bound_ops_per_sec"], 6_250.0);
        assert_eq!(
            limits.to_json()["w1_own_syncs_with_the_call_ops_per_sec"],
            3_509.0
        );
        assert_eq!(w2, "36,410 (16 threads fsyncing their own files)");
        assert_eq!(hot, "8,000 × the calls that share one fsync");
    }

    #[test]
    fn w2_in_full_mode_is_bound_by_the_cpu_of_its_calls_and_syncs() {
        // Two cores; a call costs the machine 40 µs in normal mode, a sync
        // 60 µs: 2 / 100 µs.
        let bound = CpuBound::new(2, Duration::from_micros(40), Duration::from_micros(60));
        assert!((bound.per_sec - 20_000.0).abs() < 1e-6, "{bound:?}");
        let limits = FullModeLimits::new(
            Duration::from_micros(125),
            Duration::from_micros(100),
            36_410.0,
            Duration::from_micros(125),
            None,
            Some(bound),
        );
        assert_eq!(
            limits.cells()[1],
            "36,410 (16 threads fsyncing their own files); 20,000 with the CPU of the calls and syncs (2 cores; 40.0 µs a call, 60.0 µs a sync)"
        );
        assert_eq!(limits.to_json()["w2_cpu_bound_ops_per_sec"], 20_000.0);
    }
}
