//! Arbitrary HTTP requests against the API router: no input alone may
//! cause a 500, and every error answer is the documented JSON shape.
//!
//! With `BURROW_FUZZ_COUNTER` set to a counter component, requests can
//! reach a real actor named `counter`.

#![no_main]

use std::sync::OnceLock;

use arbitrary::Arbitrary;
use axum::body::Body;
use axum::http::Request;
use burrow::manifest::ActorSpec;
use burrow::{Host, HostConfig};
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;

struct World {
    runtime: tokio::runtime::Runtime,
    router: axum::Router,
    _dir: std::path::PathBuf,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let dir = std::env::temp_dir().join(format!("burrow-fuzz-http-{}", std::process::id()));
        let actors: Vec<ActorSpec> = std::env::var_os("BURROW_FUZZ_COUNTER")
            .map(|path| vec![ActorSpec::new("counter", path)])
            .unwrap_or_default();
        let config = HostConfig {
            data_dir: dir.clone(),
            max_awake: 8,
            pooling: false,
            ..HostConfig::default()
        };
        let host = runtime.block_on(Host::start(config, &actors)).unwrap();
        World {
            router: burrow::http::router(host),
            runtime,
            _dir: dir,
        }
    })
}

const METHODS: &[&str] = &["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"];
const SEGMENTS: &[&str] = &[
    "actors",
    "counter",
    "nobody",
    "k",
    "actions",
    "increment",
    "get",
    "state",
    "queue",
    "dead-letters",
    "requeue",
    "1",
    "-1",
    "..",
    "%2F",
    "%00",
    "healthz",
    "",
];

#[derive(Debug, Arbitrary)]
struct Input {
    method: u8,
    segments: Vec<u8>,
    raw_path: Option<String>,
    body: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let world = world();
    let method = METHODS[input.method as usize % METHODS.len()];
    let path = match input.raw_path {
        Some(raw) => format!("/{raw}"),
        None => {
            let parts: Vec<&str> = input
                .segments
                .iter()
                .take(8)
                .map(|i| SEGMENTS[*i as usize % SEGMENTS.len()])
                .collect();
            format!("/{}", parts.join("/"))
        }
    };
    let Ok(request) = Request::builder()
        .method(method)
        .uri(&path)
        .body(Body::from(input.body))
    else {
        return; // not a request a client could send
    };
    let response = world
        .runtime
        .block_on(world.router.clone().oneshot(request))
        .unwrap();
    let status = response.status().as_u16();
    assert_ne!(status, 500, "{method} {path} answered 500");
    // A HEAD answer has no body, by HTTP's rules.
    if status >= 400 && method != "HEAD" {
        let body = world
            .runtime
            .block_on(axum::body::to_bytes(response.into_body(), 1 << 20))
            .unwrap();
        let error: serde_json::Value = serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("{method} {path}: error body is not JSON ({e})"));
        assert!(
            error["error"]["code"].is_string(),
            "{method} {path}: {error}"
        );
        assert!(
            error["error"]["message"].is_string(),
            "{method} {path}: {error}"
        );
    }
});
