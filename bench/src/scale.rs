//! `burrow bench --scale N`: N new counters, each made by its first
//! `increment(1)` over HTTP, [`CONNECTIONS`] at a time, against `burrow
//! serve` in a child process (`synchronous = normal`, the default). Per
//! tenth of N: the creation rate, the server's resident memory and the
//! disk used per instance so far. Then the time the server takes to start
//! again over that data directory (until `/healthz` answers), and to list
//! every key page by page. Beside it, the floor's parallel creation rate:
//! the floor's W3 create (a minimal wasmtime and SQLite program, up to
//! 1,000 instances a thread) on as many threads as the machine has cores,
//! at once.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::server_process::ServerProcess;
use super::table::thousands;
use burrow::config::Synchronous;
use burrow::manifest::ActorSpec;

/// Creations in flight at once (as `wrk -c16`).
pub(super) const CONNECTIONS: usize = 16;
/// Keys per page of the listing (the API's largest page).
const PAGE: usize = burrow::http::MAX_KEY_PAGE;
/// The most instances each floor thread creates.
const FLOOR_INSTANCES: usize = 1_000;

/// One tenth of the run.
struct Tenth {
    /// Instances on disk at its end.
    instances: usize,
    creations_per_sec: f64,
    rss_bytes: Option<u64>,
    disk_bytes: u64,
}

/// Runs the benchmark with `n` instances of `spec` under `dir`.
pub(super) async fn run(spec: &ActorSpec, dir: &Path, n: usize) -> Result<Value> {
    if n == 0 {
        bail!("--scale needs at least one instance");
    }
    let server = ServerProcess::start(spec, dir, Synchronous::Normal).await?;
    let data = dir.join("data");
    let http = burrow::client::Trust::system().http_client().build()?;
    let mut tenths = Vec::new();
    let mut made = 0;
    for tenth in 1..=10 {
        let until = n * tenth / 10;
        if until == made {
            continue;
        }
        let begun = Instant::now();
        create(&http, &server.url, &spec.name, made..until).await?;
        let elapsed = begun.elapsed();
        let row = Tenth {
            instances: until,
            creations_per_sec: (until - made) as f64 / elapsed.as_secs_f64(),
            rss_bytes: server.pid().and_then(rss_bytes),
            disk_bytes: disk_bytes(&data)?,
        };
        eprintln!("{}", row_line(&row));
        tenths.push(row);
        made = until;
    }
    server.stop().await?;

    let starting = Instant::now();
    let server = ServerProcess::start(spec, dir, Synchronous::Normal).await?;
    let start = starting.elapsed();
    let listing = Instant::now();
    let listed = list_keys(&http, &server.url, &spec.name).await?;
    let list = listing.elapsed();
    server.stop().await?;
    if listed != n {
        bail!("the listing gave {listed} keys, not the {n} instances made");
    }

    let floor = parallel_floor(&spec.component, &dir.join("floor"), n.min(FLOOR_INSTANCES)).await?;
    let table = table(&tenths, start, list, &floor);
    Ok(json!({
        "instances": n,
        "connections": CONNECTIONS,
        "tenths": tenths.iter().map(|t| json!({
            "instances": t.instances,
            "creations_per_sec": t.creations_per_sec.round(),
            "rss_bytes": t.rss_bytes,
            "disk_bytes_per_instance": t.disk_bytes / t.instances as u64,
        })).collect::<Vec<_>>(),
        "start_ms": start.as_millis() as u64,
        "list_ms": list.as_millis() as u64,
        "floor_threads": floor.threads,
        "floor_creations_per_sec": floor.creations_per_sec.round(),
        "table": table,
    }))
}

/// Makes the instances `keys` (named `s<number>`) by their first call,
/// [`CONNECTIONS`] at a time; the first failure ends the run.
async fn create(
    http: &reqwest::Client,
    url: &str,
    actor: &str,
    keys: std::ops::Range<usize>,
) -> Result<()> {
    let next = Arc::new(AtomicUsize::new(keys.start));
    let end = keys.end;
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..CONNECTIONS {
        let (http, next) = (http.clone(), next.clone());
        let base = format!("{url}/actors/{actor}");
        clients.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= end {
                    return Ok::<(), anyhow::Error>(());
                }
                let answer = http
                    .post(format!("{base}/s{i}/actions/increment"))
                    .header("content-type", "application/json")
                    .body("[1]")
                    .send()
                    .await
                    .with_context(|| format!("creating instance s{i}"))?;
                let status = answer.status();
                if !status.is_success() {
                    let body = answer.text().await.unwrap_or_default();
                    bail!("creating instance s{i} answered {status}: {body}");
                }
            }
        });
    }
    while let Some(client) = clients.join_next().await {
        client??;
    }
    Ok(())
}

/// Lists the keys of `actor` page by page; how many there were.
async fn list_keys(http: &reqwest::Client, url: &str, actor: &str) -> Result<usize> {
    let mut after = String::new();
    let mut count = 0;
    loop {
        let page: Value = http
            // The keys are `s<number>`: nothing in them to escape.
            .get(format!("{url}/actors/{actor}?limit={PAGE}&after={after}"))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        count += page["keys"].as_array().map_or(0, Vec::len);
        match page["next"].as_str() {
            Some(next) => after = next.to_owned(),
            None => return Ok(count),
        }
    }
}

/// The resident memory of process `pid` (Linux), from `/proc`.
fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The disk space the files under `dir` take (their allocated blocks).
fn disk_bytes(dir: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                pending.push(entry.path());
            } else {
                total += meta.blocks() * 512;
            }
        }
    }
    Ok(total)
}

/// The floor's creations on every core at once.
struct ParallelFloor {
    threads: usize,
    creations_per_sec: f64,
}

/// Runs the floor's W3 create of `instances` on one thread per core, each
/// on its own runtime and directory, and adds their rates.
async fn parallel_floor(component: &Path, dir: &Path, instances: usize) -> Result<ParallelFloor> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runs: Vec<_> = (0..threads)
        .map(|i| {
            let (component, dir) = (component.to_path_buf(), dir.join(format!("t{i}")));
            std::thread::spawn(move || -> Result<f64> {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let report = runtime.block_on(super::floor::run(&component, &dir, 1, instances))?;
                Ok(report.create.ops_per_sec())
            })
        })
        .collect();
    let mut creations_per_sec = 0.0;
    for run in runs {
        creations_per_sec += run
            .join()
            .map_err(|_| anyhow::anyhow!("a floor thread panicked"))??;
    }
    Ok(ParallelFloor {
        threads,
        creations_per_sec,
    })
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1 << 20) as f64)
}

fn row_line(t: &Tenth) -> String {
    format!(
        "| {} | {}/s | {} | {} |",
        thousands(t.instances as f64),
        thousands(t.creations_per_sec),
        t.rss_bytes.map_or("?".into(), mib),
        thousands((t.disk_bytes / t.instances as u64) as f64),
    )
}

/// The Markdown table of the run.
fn table(tenths: &[Tenth], start: Duration, list: Duration, floor: &ParallelFloor) -> String {
    let mut out = String::from(
        "| instances made | creations (last tenth) | server RSS | disk bytes per instance |\n|---|---|---|---|\n",
    );
    for t in tenths {
        out.push_str(&row_line(t));
        out.push('\n');
    }
    out.push_str(&format!(
        "\nstart over that directory: {} ms; every key listed, {PAGE} a page: {} ms\n\
         floor's creations on {} threads at once: {}/s\n",
        start.as_millis(),
        list.as_millis(),
        floor.threads,
        thousands(floor.creations_per_sec),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_disk_used_counts_files_in_subdirectories() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/f"), vec![1u8; 10_000]).unwrap();
        std::fs::write(dir.path().join("g"), vec![1u8; 5_000]).unwrap();
        let used = disk_bytes(dir.path()).unwrap();
        assert!(used >= 15_000, "{used}");
    }

    #[test]
    fn this_process_has_a_resident_size() {
        let rss = rss_bytes(std::process::id()).expect("Linux has /proc");
        assert!(rss > 1 << 20, "{rss}");
    }
}
