//! Arbitrary HTTP requests against the API router: no input alone may
//! cause a 500, and every error answer is the documented JSON shape. Each
//! request goes to a server without tokens or to one with them (as no one,
//! a client, an admin, or with a wrong or arbitrary `Authorization`, and
//! perhaps with headers only hosts of a cluster send); without a valid
//! token, nothing but the probes (`/healthz`, `/readyz`) and the
//! inspector's files answers 2xx.
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
    guarded: axum::Router,
    _dir: std::path::PathBuf,
}

const ADMIN: &str = "admin-secret-0123456789";
const CLIENT: &str = "client-secret-0123456789";
const TOKENS: &str = r#"
    [tokens.ops]
    role = "admin"
    secret = "admin-secret-0123456789"
    [tokens.web]
    role = "client"
    secret = "client-secret-0123456789"
    actors = ["counter"]
    rate = 1000
"#;

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
        let serving = burrow::http::Serving {
            access: burrow::http::Access::with_tokens(
                burrow::tokens::Tokens::parse(TOKENS).unwrap(),
            ),
            ..burrow::http::Serving::default()
        };
        World {
            guarded: burrow::http::router_with(host.clone(), serving),
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

const HOST_HEADERS: &[&str] = &[
    "x-burrow-forwarded",
    "x-burrow-chain",
    "x-burrow-caller",
    "x-burrow-signature",
];

#[derive(Debug, Arbitrary)]
enum Auth {
    /// The server without tokens.
    Open,
    Nobody,
    Client,
    Admin,
    Header(String),
}

#[derive(Debug, Arbitrary)]
struct Input {
    method: u8,
    segments: Vec<u8>,
    raw_path: Option<String>,
    body: Vec<u8>,
    auth: Auth,
    host_header: Option<(u8, String)>,
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
    let mut request = Request::builder().method(method).uri(&path);
    let authorization = match &input.auth {
        Auth::Open | Auth::Nobody => None,
        Auth::Client => Some(format!("Bearer {CLIENT}")),
        Auth::Admin => Some(format!("Bearer {ADMIN}")),
        Auth::Header(value) => Some(value.clone()),
    };
    if let Some(value) = &authorization {
        request = request.header("authorization", value);
    }
    if let Some((which, value)) = &input.host_header {
        request = request.header(HOST_HEADERS[*which as usize % HOST_HEADERS.len()], value);
    }
    let Ok(request) = request.body(Body::from(input.body)) else {
        return; // not a request a client could send
    };
    let router = match input.auth {
        Auth::Open => &world.router,
        _ => &world.guarded,
    };
    let response = world
        .runtime
        .block_on(router.clone().oneshot(request))
        .unwrap();
    let status = response.status().as_u16();
    assert_ne!(status, 500, "{method} {path} answered 500");
    let token = authorization
        .as_deref()
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim);
    let proven = matches!(input.auth, Auth::Open) || matches!(token, Some(CLIENT | ADMIN));
    // The probes answer anyone, as the guard's table says.
    let public = path == "/healthz" || path == "/readyz" || path.starts_with("/ui");
    if !proven && !public {
        assert!(
            !(200..300).contains(&status),
            "{method} {path} answered {status} without a token"
        );
    }
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
