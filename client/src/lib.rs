//! A client for the HTTP API of a Burrow server.
//!
//! [`Client`] talks to one server. Its methods named after the API take and
//! return JSON text or [`serde_json::Value`]s; [`Client::actor`] gives an
//! [`Instance`], a typed handle on one instance (an actor name and a key)
//! whose methods serialize arguments and deserialize results with serde, and
//! whose [`Instance::subscribe`] opens a WebSocket [`Subscription`] to the
//! events the instance broadcasts.
//!
//! `https://` servers (and their `wss://` WebSockets) are verified against
//! the system's root certificates; [`Client::with_trust`] adds CA
//! certificates to those, such as the one named by `BURROW_CA_CERT`
//! ([`Trust::from_env`]).
//!
//! # Example
//!
//! ```no_run
//! # async fn run() -> Result<(), burrow_client::ClientError> {
//! use burrow_client::{Client, SendOptions, SendOutcome};
//! use serde_json::json;
//!
//! let client = Client::new("http://127.0.0.1:7878");
//! let counter = client.actor("counter", "my-counter");
//! let value: i64 = counter.call("increment", &(5,)).await?;
//! let value: i64 = counter.call("get", &()).await?;
//!
//! let mailer = client.actor("mailer", "main");
//! let outcome = mailer
//!     .send("welcome", &"ada@example.com", &SendOptions::default())
//!     .await?;
//! assert!(matches!(outcome, SendOutcome::Queued { .. }));
//!
//! let alice = client.actor("account", "alice");
//! let left: i64 = alice.call("transfer", &("bob", 30)).await?;
//!
//! let room = client.actor("chat-room", "lobby");
//! let mut events = room.subscribe(Some(&json!({"name": "ada"}))).await?;
//! while let Some(event) = events.next().await {
//!     println!("{:?}", event?);
//! }
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod instance;
pub mod route;
mod subscription;
mod tls;
mod wire;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

pub use instance::Instance;
pub use subscription::{Event, Subscription};
pub use tls::{CA_CERT_ENV, POOL_IDLE_TIMEOUT, Trust, crypto_provider};
pub use wire::{
    ErrorBody, ErrorDetail, EventResult, ForkBody, GuestFailure, Hello, KeyList, Lagged, Paused,
    Resumed, SendBody, SendOptions, SendOutcome,
};

/// An error answer from the server, or a failure to reach it or to
/// understand it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ClientError {
    /// The HTTP status of the answer that carried the error, or `None` if
    /// none did: the server could not be reached, the request was found
    /// wrong before it was sent, or a subscription's frame was wrong or its
    /// connection broke off.
    pub status: Option<u16>,
    /// The error code: the server's (such as `unknown-actor`), or one of
    /// the client's own: `unreachable` (the server could not be reached, or
    /// its answer broke off), `invalid-arguments` (arguments that are not a
    /// JSON array), `invalid-event` (a payload that is not JSON),
    /// `invalid-response` (an answer that does not decode), `disconnected`
    /// (a subscription broke off without a close), `http` (an error answer
    /// without a code), `invalid-ca-cert` (a CA certificate to trust that
    /// cannot be read or used). A server whose TLS certificate is not
    /// trusted is `unreachable`, the message says why.
    pub code: String,
    /// What went wrong.
    pub message: String,
}

impl ClientError {
    /// An error found before anything was sent.
    fn local(code: &str, message: impl Into<String>) -> ClientError {
        ClientError {
            status: None,
            code: code.into(),
            message: message.into(),
        }
    }

    /// The server at `base` could not be reached: `error` and its causes
    /// (the TLS error is a cause several levels down).
    fn unreachable(base: &str, error: &(dyn std::error::Error + 'static)) -> ClientError {
        let mut why = error.to_string();
        let mut cause = error.source();
        while let Some(e) = cause {
            let text = e.to_string();
            if !why.contains(&text) {
                why.push_str(": ");
                why.push_str(&text);
            }
            cause = e.source();
        }
        if why.contains("certificate") {
            why.push_str(&format!(
                " (is the server's TLS certificate trusted? give its CA certificate with {CA_CERT_ENV} or --ca-cert)"
            ));
        }
        ClientError {
            status: None,
            code: "unreachable".into(),
            message: format!("cannot reach the burrow server at {base}: {why}"),
        }
    }

    /// An error answer: `{"error": {"code", "message"}}` with `status`.
    fn from_answer(status: u16, text: &str) -> ClientError {
        match serde_json::from_str::<ErrorBody>(text) {
            Ok(ErrorBody { error }) => ClientError {
                status: Some(status),
                code: error.code,
                message: error.message,
            },
            // Not the server's own answer (a proxy's, say).
            Err(_) => ClientError {
                status: Some(status),
                code: "http".into(),
                message: format!("HTTP {status}: {text}"),
            },
        }
    }
}

/// Decodes an answer of the server; `what` names it in the error.
fn decode<T: DeserializeOwned>(
    status: Option<u16>,
    text: &str,
    what: &str,
) -> Result<T, ClientError> {
    serde_json::from_str(text).map_err(|e| {
        let shown: String = text.chars().take(200).collect();
        ClientError {
            status,
            code: "invalid-response".into(),
            message: format!("{what} does not decode ({e}): {shown}"),
        }
    })
}

/// The environment variable an API token may come from
/// ([`Client::with_token_from_env`], the CLI's `--token`).
pub const TOKEN_ENV: &str = "BURROW_TOKEN";

/// A client of one Burrow server.
#[derive(Clone)]
pub struct Client {
    base: String,
    http: reqwest::Client,
    trust: Trust,
    token: Option<String>,
}

/// Percent-encodes one path segment (keys may hold any text).
pub fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("token", &self.token.as_ref().map(|_| "…"))
            .finish()
    }
}

impl Client {
    /// A client of the server at `base` (such as `http://127.0.0.1:7878`,
    /// or `https://...`: its certificate is verified against the system's
    /// roots).
    pub fn new(base: &str) -> Client {
        Client::with_trust(base, Trust::system())
    }

    /// A client of the server at `base` that verifies an `https://`
    /// server's certificate (and a `wss://` one's) with `trust`.
    pub fn with_trust(base: &str, trust: Trust) -> Client {
        let http = trust
            .http_client()
            .build()
            .expect("an HTTP client with a prepared TLS configuration builds");
        Client {
            base: base.trim_end_matches('/').to_owned(),
            http,
            trust,
            token: None,
        }
    }

    /// This client, sending `token` (an API token's secret) with every
    /// request and WebSocket, as `Authorization: Bearer <token>`.
    pub fn with_token(mut self, token: impl Into<String>) -> Client {
        self.token = Some(token.into());
        self
    }

    /// This client with the API token of the `BURROW_TOKEN` environment
    /// variable, if it is set.
    pub fn with_token_from_env(self) -> Client {
        match std::env::var(TOKEN_ENV) {
            Ok(token) if !token.is_empty() => self.with_token(token),
            _ => self,
        }
    }

    /// The server's base URL, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// A typed handle on the instance `key` of `actor`. Nothing is sent:
    /// the instance need not exist yet.
    pub fn actor(&self, actor: &str, key: &str) -> Instance {
        Instance::new(self.clone(), actor, key)
    }

    /// The keys of `actor`'s instances.
    pub async fn keys(&self, actor: &str) -> Result<Vec<String>, ClientError> {
        let url = self.url(route::KEYS, &[actor]);
        let (status, text) = self.request(self.http.get(url)).await?;
        let keys: KeyList = decode(Some(status), &text, "the list of keys")?;
        Ok(keys.keys)
    }

    /// The hosts of the cluster the server is part of, with the leases
    /// each holds (an error `no-cluster` from a server that runs alone).
    pub async fn cluster_status(&self) -> Result<Value, ClientError> {
        let url = self.url(route::CLUSTER, &[]);
        let (status, text) = self.request(self.http.get(url)).await?;
        decode(Some(status), &text, "the cluster's status")
    }

    /// Drains the server (a host of a cluster): hands every instance it
    /// serves to the other hosts, each between two calls, and answers once
    /// it serves none: `{"moved", "ms"}`. The host goes on forwarding
    /// requests until it is stopped.
    pub async fn cluster_drain(&self) -> Result<Value, ClientError> {
        let url = self.url(route::CLUSTER_DRAIN, &[]);
        let (status, text) = self.request(self.http.post(url)).await?;
        decode(Some(status), &text, "the drain's answer")
    }

    /// The same client (its token, its CA, its timeouts) for the server
    /// at `base_url`.
    pub fn with_base_url(&self, base_url: &str) -> Client {
        Client {
            base: base_url.trim_end_matches('/').to_owned(),
            ..self.clone()
        }
    }

    /// Replaces `actor`'s component on the server with `component` (the
    /// bytes of a `.wasm` component); with `check`, only if no running
    /// workflow would diverge. Returns what the server did:
    /// `{"actor", "version", "digest", "previous_digest", "checked"}`.
    pub async fn deploy(
        &self,
        actor: &str,
        component: Vec<u8>,
        check: bool,
    ) -> Result<Value, ClientError> {
        let url = format!("{}?check={check}", self.url(route::COMPONENT, &[actor]));
        let request = self
            .http
            .put(url)
            .header("content-type", "application/wasm")
            .body(component);
        let (status, text) = self.request(request).await?;
        decode(Some(status), &text, "the deploy's answer")
    }

    /// The component `actor` runs on the server: `{"actor", "version",
    /// "digest"}` (version 0: the manifest's).
    pub async fn component(&self, actor: &str) -> Result<Value, ClientError> {
        let url = self.url(route::COMPONENT, &[actor]);
        let (status, text) = self.request(self.http.get(url)).await?;
        decode(Some(status), &text, "the actor's component")
    }

    /// Puts back the component `actor` ran before its last deploy.
    pub async fn deploy_previous(&self, actor: &str, check: bool) -> Result<Value, ClientError> {
        let url = format!(
            "{}?check={check}",
            self.url(route::PREVIOUS_COMPONENT, &[actor])
        );
        let (status, text) = self.request(self.http.post(url)).await?;
        decode(Some(status), &text, "the deploy's answer")
    }

    /// The URL of the route `pattern` filled in with `segments`.
    fn url(&self, pattern: &str, segments: &[&str]) -> String {
        format!("{}{}", self.base, route::path(pattern, segments))
    }

    async fn request(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<(u16, String), ClientError> {
        let (status, bytes) = self.request_bytes(request).await?;
        Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// [`Client::request`], the answer's body as bytes.
    async fn request_bytes(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<(u16, Vec<u8>), ClientError> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response = request
            .send()
            .await
            .map_err(|e| ClientError::unreachable(&self.base, &e))?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(|e| ClientError {
            status: Some(status),
            code: "unreachable".into(),
            message: format!("the answer of {} broke off: {e}", self.base),
        })?;
        if (200..300).contains(&status) {
            return Ok((status, bytes.to_vec()));
        }
        Err(ClientError::from_answer(
            status,
            &String::from_utf8_lossy(&bytes),
        ))
    }

    /// Posts `args` (a JSON array as text) to `action`; the status and the
    /// result text.
    async fn post_action(
        &self,
        actor: &str,
        key: &str,
        action: &str,
        args: String,
    ) -> Result<(u16, String), ClientError> {
        let url = self.url(route::ACTION, &[actor, key, action]);
        let request = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .body(args);
        self.request(request).await
    }

    /// Calls `action` with `args` (a JSON array as text); returns the JSON result text.
    pub async fn call(
        &self,
        actor: &str,
        key: &str,
        action: &str,
        args: &str,
    ) -> Result<String, ClientError> {
        Ok(self
            .post_action(actor, key, action, args.to_owned())
            .await?
            .1)
    }

    /// Creates the instance with `input` (JSON text).
    pub async fn create(&self, actor: &str, key: &str, input: &str) -> Result<(), ClientError> {
        let request = self
            .http
            .put(self.url(route::INSTANCE, &[actor, key]))
            .body(input.to_owned());
        self.request(request).await.map(drop)
    }

    /// Destroys the instance.
    pub async fn destroy(&self, actor: &str, key: &str) -> Result<(), ClientError> {
        self.request(self.http.delete(self.url(route::INSTANCE, &[actor, key])))
            .await
            .map(drop)
    }

    /// GETs `url` and parses the answer (`null` if it is not JSON).
    async fn get_value(&self, url: String) -> Result<Value, ClientError> {
        let (_, text) = self.request(self.http.get(url)).await?;
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// The instance's export file: its database as committed now (see
    /// `burrow export`).
    pub async fn export(&self, actor: &str, key: &str) -> Result<Vec<u8>, ClientError> {
        let url = self.url(route::EXPORT, &[actor, key]);
        Ok(self.request_bytes(self.http.get(url)).await?.1)
    }

    /// Creates the instance from an export `file`; with `replace`, an
    /// existing one is destroyed first (see `burrow import`).
    pub async fn import(
        &self,
        actor: &str,
        key: &str,
        file: Vec<u8>,
        replace: bool,
    ) -> Result<(), ClientError> {
        let url = format!(
            "{}?replace={replace}",
            self.url(route::EXPORT, &[actor, key])
        );
        let request = self
            .http
            .put(url)
            .header("content-type", "application/octet-stream")
            .body(file);
        self.request(request).await.map(drop)
    }

    /// Creates the instance `new_key` of `actor` from the database of
    /// `key` as committed now, its background work paused until
    /// [`Client::resume`] (see `burrow fork`).
    pub async fn fork(&self, actor: &str, key: &str, new_key: &str) -> Result<(), ClientError> {
        let body = ForkBody {
            key: new_key.into(),
        };
        let body = serde_json::to_string(&body).expect("a fork's body is JSON");
        let request = self
            .http
            .post(self.url(route::FORK, &[actor, key]))
            .header("content-type", "application/json")
            .body(body);
        self.request(request).await.map(drop)
    }

    /// Pauses the instance's background work (its queue, schedules and
    /// workflow) until [`Client::resume`]; returns whether it was running
    /// (see `burrow pause`).
    pub async fn pause(&self, actor: &str, key: &str) -> Result<bool, ClientError> {
        let url = self.url(route::PAUSE, &[actor, key]);
        let (status, text) = self.request(self.http.post(url)).await?;
        let paused: Paused = decode(Some(status), &text, "the pause's answer")?;
        Ok(paused.paused)
    }

    /// Ends the pause of the instance's background work; returns whether
    /// it was paused (see `burrow resume`).
    pub async fn resume(&self, actor: &str, key: &str) -> Result<bool, ClientError> {
        let url = self.url(route::RESUME, &[actor, key]);
        let (status, text) = self.request(self.http.post(url)).await?;
        let resumed: Resumed = decode(Some(status), &text, "the resume's answer")?;
        Ok(resumed.resumed)
    }

    /// The instance's state.
    pub async fn state(&self, actor: &str, key: &str) -> Result<Value, ClientError> {
        self.get_value(self.url(route::STATE, &[actor, key])).await
    }

    /// The instance's state and tables.
    pub async fn inspect(&self, actor: &str, key: &str) -> Result<Value, ClientError> {
        self.get_value(self.url(route::INSTANCE, &[actor, key]))
            .await
    }

    /// The instance's workflow: status, what it waits for, and history.
    pub async fn workflow(&self, actor: &str, key: &str) -> Result<Value, ClientError> {
        self.get_value(self.url(route::WORKFLOW, &[actor, key]))
            .await
    }

    /// Posts an event to the instance's queue; the status and the answer text.
    async fn post_event<P: Serialize + ?Sized>(
        &self,
        actor: &str,
        key: &str,
        event_type: &str,
        payload: &P,
        options: &SendOptions,
    ) -> Result<(u16, String), ClientError> {
        let body = SendBody::new(event_type, payload, options);
        let body = serde_json::to_string(&body).map_err(|e| {
            ClientError::local(
                "invalid-event",
                format!("the payload does not serialize to JSON: {e}"),
            )
        })?;
        let url = self.url(route::QUEUE, &[actor, key]);
        let request = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .body(body);
        self.request(request).await
    }

    /// Appends an event to the instance's queue; with `options.wait`, waits
    /// for its processing. Returns the outcome: `{"status": "queued" |
    /// "processed" | "dead-lettered" | "timed-out", "id", ...}`.
    pub async fn send(
        &self,
        actor: &str,
        key: &str,
        event_type: &str,
        payload: &str,
        options: &SendOptions,
    ) -> Result<Value, ClientError> {
        let payload: Box<RawValue> = serde_json::from_str(payload).map_err(|e| {
            ClientError::local(
                "invalid-event",
                format!("the payload is not valid JSON: {e}"),
            )
        })?;
        let (_, text) = self
            .post_event(actor, key, event_type, &payload, options)
            .await?;
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// The instance's queue: policy, pending events and dead letters.
    pub async fn queue(&self, actor: &str, key: &str) -> Result<Value, ClientError> {
        self.get_value(self.url(route::QUEUE, &[actor, key])).await
    }

    /// Moves a dead letter back into the queue.
    pub async fn requeue(&self, actor: &str, key: &str, id: i64) -> Result<(), ClientError> {
        let url = self.url(route::REQUEUE, &[actor, key, &id.to_string()]);
        self.request(self.http.post(url)).await.map(drop)
    }

    /// Deletes a dead letter for good.
    pub async fn discard(&self, actor: &str, key: &str, id: i64) -> Result<(), ClientError> {
        let url = self.url(route::DEAD_LETTER, &[actor, key, &id.to_string()]);
        self.request(self.http.delete(url)).await.map(drop)
    }

    /// Whether the server answers its health check.
    pub async fn healthy(&self) -> bool {
        self.request(self.http.get(self.url(route::HEALTH, &[])))
            .await
            .is_ok()
    }

    /// The WebSocket URL of the instance's `connect` endpoint.
    fn connect_url(&self, actor: &str, key: &str, params: Option<&Value>) -> String {
        let url = self.url(route::CONNECT, &[actor, key]);
        let url = if let Some(rest) = url.strip_prefix("http://") {
            format!("ws://{rest}")
        } else if let Some(rest) = url.strip_prefix("https://") {
            format!("wss://{rest}")
        } else {
            url
        };
        match params {
            Some(params) => format!("{url}?params={}", encode_segment(&params.to_string())),
            None => url,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(encode_segment("plain-key_1.x~"), "plain-key_1.x~");
        assert_eq!(encode_segment("../a b"), "..%2Fa%20b");
        assert_eq!(encode_segment("ü\0"), "%C3%BC%00");
    }

    #[test]
    fn connect_urls_use_websocket_schemes_and_encode_params() {
        let client = Client::new("http://127.0.0.1:7878/");
        assert_eq!(
            client.connect_url("chat-room", "a b", None),
            "ws://127.0.0.1:7878/actors/chat-room/a%20b/connect"
        );
        let params = serde_json::json!({"name": "ada"});
        assert_eq!(
            client.connect_url("chat-room", "lobby", Some(&params)),
            "ws://127.0.0.1:7878/actors/chat-room/lobby/connect?params=%7B%22name%22%3A%22ada%22%7D"
        );
        let secure = Client::new("https://example.com");
        assert!(
            secure
                .connect_url("a", "b", None)
                .starts_with("wss://example.com/")
        );
    }

    #[test]
    fn error_answers_carry_their_code_and_message() {
        let e = ClientError::from_answer(
            404,
            r#"{"error": {"code": "unknown-actor", "message": "unknown actor `x`"}}"#,
        );
        assert_eq!(
            (e.status, e.code.as_str(), e.message.as_str()),
            (Some(404), "unknown-actor", "unknown actor `x`")
        );
        let e = ClientError::from_answer(502, "bad gateway");
        assert_eq!((e.status, e.code.as_str()), (Some(502), "http"));
        assert!(e.message.contains("bad gateway"));
    }
}
