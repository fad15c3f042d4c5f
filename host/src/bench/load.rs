//! The load workload: 64 HTTP clients for a fixed time on a mix of actors,
//! against a server in this process. Reports throughput, latency, errors
//! and the process's peak memory (host and clients together).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::Latencies;
use crate::client::Client;
use crate::config::HostConfig;
use crate::host::Host;
use crate::manifest::ActorSpec;

/// Clients calling at once.
pub const CLIENTS: usize = 64;
/// Keys per actor the clients spread over.
const KEYS: usize = 256;

/// Peak resident memory of this process, from `/proc/self/status`.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Runs `CLIENTS` clients for `duration` on every actor of `actors` that
/// has `increment` and `get` actions (the counters).
pub async fn run(config: HostConfig, actors: &[ActorSpec], duration: Duration) -> Result<Value> {
    if actors.is_empty() {
        bail!("the load workload needs at least one counter actor");
    }
    let names: Vec<String> = actors.iter().map(|a| a.name.clone()).collect();
    let host = Host::start(config, actors).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(crate::http::serve_on(host.clone(), listener, async {
        let _ = stopped.await;
    }));

    let errors = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(std::sync::Mutex::new(None::<String>));
    let deadline = Instant::now() + duration;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client_index in 0..CLIENTS {
        let client = Client::new(&url);
        let names = names.clone();
        let errors = errors.clone();
        let first_error = first_error.clone();
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut n = client_index;
            while Instant::now() < deadline {
                n = n
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let actor = &names[(n >> 33) % names.len()];
                let key = format!("load-{}", (n >> 17) % KEYS);
                let (action, args) = if (n >> 7) % 10 == 0 {
                    ("get", "[]")
                } else {
                    ("increment", "[1]")
                };
                let t = Instant::now();
                if let Err(e) = client.call(actor, &key, action, args).await {
                    errors.fetch_add(1, Ordering::Relaxed);
                    first_error.lock().unwrap().get_or_insert(e.to_string());
                }
                samples.push(t.elapsed());
            }
            samples
        }));
    }
    let mut samples = Vec::new();
    for task in tasks {
        samples.extend(task.await?);
    }
    let latencies = Latencies::new(samples, started.elapsed());
    let _ = stop.send(());
    server.await??;
    let mut report = latencies.to_json();
    let object = report.as_object_mut().expect("an object");
    object.insert("clients".into(), json!(CLIENTS));
    object.insert("seconds".into(), json!(duration.as_secs_f64()));
    object.insert("actors".into(), json!(names));
    object.insert("errors".into(), json!(errors.load(Ordering::Relaxed)));
    object.insert(
        "first_error".into(),
        json!(first_error.lock().unwrap().clone()),
    );
    object.insert(
        "peak_rss_mib".into(),
        json!(peak_rss_bytes().map(|b| b / (1 << 20))),
    );
    Ok(report)
}

/// The counters of a manifest: its actors named `counter*`.
pub fn counters(actors: impl IntoIterator<Item = ActorSpec>) -> Vec<ActorSpec> {
    actors
        .into_iter()
        .filter(|a| a.name.starts_with("counter"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_memory_is_read_from_proc() {
        let peak = peak_rss_bytes().expect("/proc/self/status has VmHWM");
        assert!(peak > 1 << 20, "{peak}");
    }

    #[test]
    fn the_counters_are_the_actors_named_counter() {
        let actors = [
            ActorSpec::new("counter", "a.wasm"),
            ActorSpec::new("probe", "b.wasm"),
            ActorSpec::new("counter-py", "c.wasm"),
        ];
        let names: Vec<_> = counters(actors).into_iter().map(|a| a.name).collect();
        assert_eq!(names, ["counter", "counter-py"]);
    }
}
