//! The load workload: 64 HTTP clients for a fixed time on a mix of actors,
//! against a server in this process. Reports throughput, latency, errors
//! and the process's peak memory (host and clients together).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::Latencies;
use burrow::SendOptions;
use burrow::client::Client;
use burrow::config::HostConfig;
use burrow::host::Host;
use burrow::manifest::ActorSpec;

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

/// The queue actor of the mix, if the manifest has it: clients send it jobs
/// (without waiting), and the run checks that every job was processed.
const MAILER: &str = "mailer";

/// Runs `CLIENTS` clients for `duration` on every actor of `actors`: the
/// counters (`increment` and `get` actions) get calls, the mailer gets
/// queue sends.
pub async fn run(config: HostConfig, actors: &[ActorSpec], duration: Duration) -> Result<Value> {
    if !actors.iter().any(|a| a.name.starts_with("counter")) {
        bail!("the load workload needs at least one counter actor");
    }
    let names: Vec<String> = actors.iter().map(|a| a.name.clone()).collect();
    let host = Host::start(config, actors).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(burrow::http::serve_on(host.clone(), listener, async {
        let _ = stopped.await;
    }));

    let errors = Arc::new(AtomicU64::new(0));
    let sends = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(std::sync::Mutex::new(None::<String>));
    let deadline = Instant::now() + duration;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client_index in 0..CLIENTS {
        let client = Client::new(&url);
        let names = names.clone();
        let errors = errors.clone();
        let sends = sends.clone();
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
                let t = Instant::now();
                let result = if actor == MAILER {
                    let job = json!({ "email": format!("{key}-{n}@example.com") }).to_string();
                    let sent = client
                        .send(actor, &key, "welcome", &job, &SendOptions::default())
                        .await;
                    if sent.is_ok() {
                        sends.fetch_add(1, Ordering::Relaxed);
                    }
                    sent.map(drop)
                } else {
                    let (action, args) = if (n >> 7) % 10 == 0 {
                        ("get", "[]")
                    } else {
                        ("increment", "[1]")
                    };
                    client.call(actor, &key, action, args).await.map(drop)
                };
                if let Err(e) = result {
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
    let mut report = latencies.to_json();
    let object = report.as_object_mut().expect("an object");
    if names.iter().any(|n| n == MAILER) {
        let drained = Instant::now();
        let processed = processed_jobs(&host).await?;
        object.insert("queue_sends".into(), json!(sends.load(Ordering::Relaxed)));
        object.insert("queue_jobs_processed".into(), json!(processed));
        object.insert(
            "queue_drain_after_ms".into(),
            json!(drained.elapsed().as_millis() as u64),
        );
    }
    let _ = stop.send(());
    server.await??;
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

/// Waits until every mailer instance's queue is empty; returns the number
/// of jobs they recorded as sent.
async fn processed_jobs(host: &Host) -> Result<u64> {
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut processed = 0;
    for key in (0..KEYS).map(|k| format!("load-{k}")) {
        loop {
            match host.queue(MAILER, &key) {
                Ok(view) if view.pending_count > 0 => {}
                Ok(_) => {
                    let sent = host.call(MAILER, &key, "sent", "[]").await?;
                    processed += serde_json::from_str::<Vec<String>>(&sent)?.len() as u64;
                    break;
                }
                Err(e) if e.code() == "no-such-instance" => break,
                Err(e) => return Err(e.into()),
            }
            if Instant::now() > deadline {
                bail!("the queue of {MAILER}/{key} did not drain within 10 minutes");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(processed)
}

/// The actors of the load mix: the manifest's counters (named `counter*`)
/// and its mailer.
pub fn mix(actors: impl IntoIterator<Item = ActorSpec>) -> Vec<ActorSpec> {
    actors
        .into_iter()
        .filter(|a| a.name.starts_with("counter") || a.name == MAILER)
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
    fn the_mix_is_the_counters_and_the_mailer() {
        let actors = [
            ActorSpec::new("counter", "a.wasm"),
            ActorSpec::new("probe", "b.wasm"),
            ActorSpec::new("mailer", "d.wasm"),
            ActorSpec::new("counter-py", "c.wasm"),
        ];
        let names: Vec<_> = mix(actors).into_iter().map(|a| a.name).collect();
        assert_eq!(names, ["counter", "mailer", "counter-py"]);
    }
}
