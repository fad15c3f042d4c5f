//! Starting hosts on temporary data directories.

use std::path::{Path, PathBuf};
use std::time::Duration;

use burrow::manifest::ActorSpec;
use burrow::{Host, HostConfig};
use serde_json::Value;

pub use burrow_test_artifacts as programs;

/// A compile cache shared by every test, so each component compiles once.
pub fn shared_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("compile-cache")
}

pub fn config(dir: &Path) -> HostConfig {
    HostConfig {
        data_dir: dir.to_path_buf(),
        max_awake: 32,
        cache_dir: Some(shared_cache()),
        ..HostConfig::default()
    }
}

pub fn counter() -> ActorSpec {
    ActorSpec::new("counter", programs::COUNTER)
}

pub fn counter_py() -> ActorSpec {
    let path = programs::COUNTER_PY
        .unwrap_or_else(|why| panic!("the Python counter was not built: {why}"));
    let mut spec = ActorSpec::new("counter-py", path);
    spec.options.memory_limit = 256 << 20;
    spec
}

pub fn probe() -> ActorSpec {
    ActorSpec::new("probe", programs::PROBE)
}

/// A probe whose instances sleep after `timeout` idle.
pub fn sleepy_probe(timeout: Duration) -> ActorSpec {
    let mut spec = probe();
    spec.options.sleep_timeout = timeout;
    spec
}

pub async fn start(dir: &Path, actors: &[ActorSpec]) -> Host {
    Host::start(config(dir), actors)
        .await
        .expect("the host starts")
}

/// Stops `host` and starts a new one on the same data directory.
pub async fn restart(host: Host, actors: &[ActorSpec]) -> Host {
    let dir = host.data_dir().to_path_buf();
    host.shutdown().await;
    drop(host);
    start(&dir, actors).await
}

pub fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

pub async fn call(host: &Host, actor: &str, key: &str, action: &str, args: &str) -> Value {
    let result = host
        .call(actor, key, action, args)
        .await
        .unwrap_or_else(|e| {
            let args: String = args.chars().take(200).collect();
            panic!("{actor}/{key}.{action}({args}) failed: {e}")
        });
    json(&result)
}

/// The queue test actor, with quick retries (20 ms, doubling, at most 100 ms).
pub fn queue_probe() -> ActorSpec {
    let mut spec = ActorSpec::new("queue-probe", programs::QUEUE_PROBE);
    spec.options.queue_retry_base = Duration::from_millis(20);
    spec.options.queue_retry_cap = Duration::from_millis(100);
    spec
}

/// The workflow test actor (call timeout 2 s).
pub fn workflow_probe() -> ActorSpec {
    let mut spec = ActorSpec::new("workflow-probe", programs::WORKFLOW_PROBE);
    spec.options.call_timeout = Duration::from_secs(2);
    spec
}

/// Polls `check` every 10 ms until it returns `Some`, for at most `limit`.
pub async fn eventually<T>(
    limit: Duration,
    what: &str,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let begun = std::time::Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(begun.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
