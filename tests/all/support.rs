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

/// The `burrow` binary, with the tests' shared compile cache (not the
/// user's).
pub fn burrow_command() -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_burrow"));
    command.env("BURROW_CACHE_DIR", shared_cache());
    command
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

/// A JavaScript component built by `guest-sdk-js/build.mjs`, with the
/// memory its engine needs.
pub fn js_actor(name: &str, built: Result<&str, &str>) -> ActorSpec {
    let path =
        built.unwrap_or_else(|why| panic!("the JavaScript actor {name} was not built: {why}"));
    let mut spec = ActorSpec::new(name, path);
    spec.options.memory_limit = 256 << 20;
    spec
}

pub fn counter_js() -> ActorSpec {
    js_actor("counter-js", programs::COUNTER_JS)
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

/// The chat room example: a connect hook that wants `{"name": ...}`, and
/// `post(author, text)` that broadcasts a `message` event.
pub fn chat_room() -> ActorSpec {
    ActorSpec::new("chat-room", programs::CHAT_ROOM)
}

/// The HTTP API of a host, served in this process on a free port.
pub struct Server {
    /// The server's base URL, such as `http://127.0.0.1:40000`.
    pub url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Server {
    /// Serves `host` until [`Server::stop`].
    pub async fn start(host: Host) -> Server {
        Server::start_with(host, burrow::http::Serving::default()).await
    }

    /// Serves `host` as `serving` says (its URL is `https://` with TLS)
    /// until [`Server::stop`].
    pub async fn start_with(host: Host, serving: burrow::http::Serving) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let scheme = if serving.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let url = format!("{scheme}://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(burrow::http::serve_with(host, listener, serving, async {
            let _ = stopped.await;
        }));
        Server {
            url,
            stop: Some(stop),
            task,
        }
    }

    /// A client of this server.
    pub fn client(&self) -> burrow::client::Client {
        burrow::client::Client::new(&self.url)
    }

    /// Stops serving and waits until the server has shut down.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap().unwrap();
    }
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

/// Waits until the server on the loopback's `port` answers `GET /readyz`
/// with 200 (every actor's component compiled), for at most `limit`. A
/// server that does not answer in plain HTTP (it serves HTTPS) is not
/// waited for.
pub fn wait_until_ready(port: u16, limit: Duration) {
    let begun = std::time::Instant::now();
    loop {
        match readyz_status(port) {
            Some(200) | None => return,
            Some(_) => {}
        }
        assert!(
            begun.elapsed() < limit,
            "the server on port {port} did not get ready"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The status of `GET /readyz` on the loopback's `port`, if it answers
/// in HTTP.
fn readyz_status(port: u16) -> Option<u16> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .ok()?;
    stream
        .write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).ok()?;
    let answer = String::from_utf8_lossy(&answer);
    answer.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

/// A TCP port free on the loopback now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A client's WebSocket to the API.
pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next text message of `socket` as JSON, past other frames; `None`
/// once it is closed.
pub async fn next_text(socket: &mut Socket) -> Option<Value> {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    loop {
        match socket.next().await? {
            Ok(Message::Text(text)) => return Some(serde_json::from_str(&text).unwrap()),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// A client for raw HTTP requests to a test's servers. reqwest is built
/// without a TLS provider of its own: Burrow's is installed first, so
/// that no test depends on another having made a client before it.
pub fn http() -> reqwest::Client {
    http_builder().build().unwrap()
}

/// [`http`], to configure first.
pub fn http_builder() -> reqwest::ClientBuilder {
    burrow::client::crypto_provider();
    reqwest::Client::builder()
}
