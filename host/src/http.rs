//! The HTTP API.
//!
//! | method and path | body | answer |
//! | --- | --- | --- |
//! | `POST /actors/{actor}/{key}/actions/{action}` | JSON array of arguments | 200 and the JSON result |
//! | `PUT /actors/{actor}/{key}` | JSON create input (optional) | 201 |
//! | `GET /actors/{actor}/{key}/state` | | 200 and the state (JSON) |
//! | `GET /actors/{actor}/{key}` | | 200 and the inspection (state and tables) |
//! | `DELETE /actors/{actor}/{key}` | | 204 |
//! | `GET /actors/{actor}/{key}/export` | | 200 and the instance's export file (`application/octet-stream`) |
//! | `PUT /actors/{actor}/{key}/export?replace=` | an export file | 201 (a new instance made from it) |
//! | `POST /actors/{actor}/{key}/fork` | `{"key": new_key}` | 201 (a new instance from the instance as committed now, its background work paused) |
//! | `POST /actors/{actor}/{key}/pause` | | 200 `{"paused": bool}` (whether it was running) |
//! | `POST /actors/{actor}/{key}/resume` | | 200 `{"resumed": bool}` (whether it was paused) |
//! | `GET /actors` | | 200 and `{"actors": [{"name"}]}` |
//! | `GET /actors/{actor}?prefix=&after=&limit=` | | 200 and `{"keys": [...]}` (a page: `"next"` when more follow) |
//! | `GET /actors/{actor}/{key}/tables` | | 200 and `{"tables": [{"name", "columns", "total_rows"}]}` |
//! | `GET /actors/{actor}/{key}/tables/{table}?offset=&limit=` | | 200 and a page of rows |
//! | `GET /actors/{actor}/{key}/schedules` | | 200 and `{"count", "schedules"}` |
//! | `POST /actors/{actor}/{key}/queue` | `{"type", "payload", "priority", "group", "wait", "timeout_ms"}` | 202 `{"status": "queued", "id"}`; with `"wait": true`, 200 `{"status": "processed", "id", "result"}` or `{"status": "dead-lettered", "id", "error"}`, or 202 `{"status": "timed-out", "id"}` |
//! | `GET /actors/{actor}/{key}/queue` | | 200 and the queue: policy, pending events, dead letters |
//! | `POST /actors/{actor}/{key}/queue/dead-letters/{id}/requeue` | | 200 |
//! | `DELETE /actors/{actor}/{key}/queue/dead-letters/{id}` | | 204 |
//! | `GET /actors/{actor}/{key}/connect?params=JSON` | WebSocket upgrade | 101, then one text frame `{"connected": id}` and one per event `{"event", "payload"}` (`{"lagged": n}` when the client missed n events by reading too slowly); 403 `connection-refused` when the connect hook refuses; 503 `too-many-connections` past a connection limit |
//! | `GET /healthz` | | 200 and `{"status": "ok"}` |
//! | `GET /readyz` | | 200 and `{"status": "ready", "ready", "compiling", "failed"}` when every actor's component is loaded; 503 and the same with `"status": "compiling"` (or `"failed"`) otherwise |
//! | `GET /ui`, `/ui/...` | | the web inspector (unless served without it) |
//! | `GET /metrics` | | 200 and the host's metrics in the Prometheus text format |
//! | `GET /cluster` | | 200 and the hosts of the cluster with the leases each holds; 404 `no-cluster` on a host alone |
//! | `POST /cluster/drain` | | 200 `{"moved", "ms"}` once every instance this host served is another's |
//!
//! Every routed request passes the guard of `auth.rs` first: with API
//! tokens, a route needs the role its table says (see
//! docs/operating/security.md). Before that, the accept loop (`accept.rs`)
//! holds every connection to the timeouts and caps of [`HttpLimits`].
//!
//! Errors are `{"error": {"code": ..., "message": ...}}` with status 400
//! (malformed input), 401 (no or a wrong API token, or a request between
//! hosts whose signature does not hold), 403 (a token not allowed the
//! request; on a server without tokens, another site's request or a
//! `Host` that is not its own), 404 (unknown actor, action, instance or
//! route), 405 (a method the route does not take), 409 (already exists),
//! 413 (body or payload too large), 422 (the action returned an error),
//! 429 (the queue is full, a token is past its limits, or an address has
//! too many WebSockets waiting for their token), 500 (the guest trapped)
//! or 503 (overloaded, timed out, shutting down, too many WebSockets
//! waiting for their token, the actor's component still compiling or
//! failed to load).

use std::future::Future;
use std::net::SocketAddr;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Extension, FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use serde_json::{Value, json};

use crate::address::Address;
use crate::caller::Caller;
use crate::client::{
    ErrorBody, ErrorDetail, ForkBody, GuestFailure, Paused, Resumed, SendBody, route,
};
use crate::config::{
    DEFAULT_SEND_WAIT, HttpLimits, MAX_ARGS_BYTES, MAX_CALL_DEPTH, MAX_COMPONENT_BYTES,
    MAX_IMPORT_BYTES, MAX_SEND_WAIT,
};
use crate::error::Error;
use crate::host::{CHAIN_HEADER, FORWARDED_HEADER, Hop, Host, METRICS_CONTENT_TYPE};
use crate::runtime::{Deployed, WorkflowCheck};

mod accept;
mod auth;
mod connect;
mod gate;
mod idle;
mod incoming;
mod origin;
mod own_wakes;
mod routed;
mod tls;
mod ui;
mod views;

pub use auth::Access;
pub use tls::{RELOAD_POLL, Tls};
pub use views::MAX_KEY_PAGE;

use routed::Routed;

/// What a server serves beside the JSON API, and how.
#[derive(Debug, Clone)]
pub struct Serving {
    /// The web inspector at `/ui` (`burrow serve --no-ui` turns it off).
    pub ui: bool,
    /// Who may do what (`burrow serve --tokens FILE`).
    pub access: Access,
    /// HTTPS with this certificate and key (reloaded when their files
    /// change) instead of plain HTTP.
    pub tls: Option<Tls>,
    /// How long connections may wait and how many may be open, per client
    /// address and in all.
    pub limits: HttpLimits,
}

impl Default for Serving {
    fn default() -> Serving {
        Serving {
            ui: true,
            access: Access::open(),
            tls: None,
            limits: HttpLimits::default(),
        }
    }
}

/// An HTTP error answer.
pub struct ApiError {
    status: StatusCode,
    code: String,
    message: String,
    guest: Option<Box<GuestFailure>>,
}

impl ApiError {
    fn new(status: u16, code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            code: code.into(),
            message: message.into(),
            guest: None,
        }
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        let mut error = ApiError::new(e.http_status(), e.code(), e.to_string());
        // The actor's own code and message, for a client (or another host
        // of the cluster) to tell them apart from the host's.
        error.guest = match e {
            Error::Failed {
                during,
                code,
                message,
                ..
            } => Some(Box::new(GuestFailure {
                during,
                code,
                message,
            })),
            Error::ConnectionRefused { code, message, .. } => Some(Box::new(GuestFailure {
                during: "connect".into(),
                code,
                message,
            })),
            _ => None,
        };
        error
    }
}

impl From<PathRejection> for ApiError {
    fn from(e: PathRejection) -> ApiError {
        ApiError::new(
            400,
            "invalid-address",
            format!("the path is not acceptable: {e}"),
        )
    }
}

impl From<BytesRejection> for ApiError {
    fn from(e: BytesRejection) -> ApiError {
        let status = e.status().as_u16();
        let code = if status == 413 {
            "body-too-large"
        } else {
            "invalid-body"
        };
        ApiError::new(
            status,
            code,
            format!("the request body was refused: {}", e.body_text()),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
                guest: self.guest.map(|guest| *guest),
            },
        };
        (self.status, axum::Json(body)).into_response()
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// The router of the HTTP API over `host`, with the web inspector.
pub fn router(host: Host) -> Router {
    router_with(host, Serving::default())
}

/// The router of the HTTP API over `host`, with what `serving` asks for.
pub fn router_with(host: Host, serving: Serving) -> Router {
    let guard = auth::Guard {
        host: host.clone(),
        access: serving.access.clone(),
        tls: serving.tls.is_some(),
    };
    let router = Router::new()
        .route(route::HEALTH, get(health))
        .route(route::READY, get(ready))
        .route(route::METRICS, get(metrics))
        .route(route::CLUSTER, get(cluster_status))
        .route(route::CLUSTER_DRAIN, post(cluster_drain))
        .route(route::ACTORS, get(views::actors))
        .route(route::KEYS, get(views::keys))
        .route(route::TABLES, get(views::tables))
        .route(route::TABLE, get(views::table_page))
        .route(route::SCHEDULES, get(views::schedules))
        .route(
            route::COMPONENT,
            get(component)
                .put(deploy)
                .layer(DefaultBodyLimit::max(MAX_COMPONENT_BYTES as usize)),
        )
        .route(route::PREVIOUS_COMPONENT, post(deploy_previous))
        .route(route::INSTANCE, get(inspect).put(create).delete(destroy))
        .route(route::STATE, get(state))
        .route(
            route::EXPORT,
            get(export)
                .put(import)
                .layer(DefaultBodyLimit::max(MAX_IMPORT_BYTES as usize)),
        )
        .route(route::FORK, post(fork))
        .route(route::PAUSE, post(pause))
        .route(route::RESUME, post(resume))
        .route(route::ACTION, post(call))
        .route(route::QUEUE, get(queue).post(send))
        .route(route::WORKFLOW, get(workflow))
        .route(route::WORKFLOW_CHECK, post(workflow_check))
        .route(
            route::HTTP,
            any(incoming::incoming).layer(Extension(incoming::OverTls(serving.tls.is_some()))),
        )
        .route(
            route::HTTP_PATH,
            any(incoming::incoming).layer(Extension(incoming::OverTls(serving.tls.is_some()))),
        )
        // Only a connection needs the access rules past the guard (its
        // token may come as its first message).
        .route(
            route::CONNECT,
            get(connect::connect).layer(Extension(serving.access.clone())),
        )
        .route(route::REQUEUE, post(requeue))
        .route(route::DEAD_LETTER, axum::routing::delete(discard))
        // One layer for the guard and the body limit, not two: each layer
        // of a router boxes and clones the routes' services again, on
        // every request.
        .route_layer(
            tower::ServiceBuilder::new()
                .layer(axum::middleware::from_fn_with_state(guard, auth::guard))
                .layer(DefaultBodyLimit::max(MAX_ARGS_BYTES)),
        );
    // The inspector's files hold no data: its pages ask the API, with the
    // token the user gives them.
    let router = if serving.ui {
        router.merge(ui::routes())
    } else {
        router
    };
    // After the merge, so that the inspector's routes answer a wrong
    // method with the same JSON error as the API's.
    router
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(host)
}

/// Serves the API on `addr` until `shutdown` resolves, then puts every
/// instance to sleep.
pub async fn serve(
    host: Host,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    serve_on(host, listener, shutdown).await
}

/// Serves the API (and the web inspector) on a bound listener until
/// `shutdown` resolves.
pub async fn serve_on(
    host: Host,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve_with(host, listener, Serving::default(), shutdown).await
}

/// Serves the API and what `serving` asks for on a bound listener (over
/// TLS with `serving.tls`) until `shutdown` resolves.
pub async fn serve_with(
    host: Host,
    listener: tokio::net::TcpListener,
    serving: Serving,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let address = listener.local_addr()?;
    serving.access.check_address(address)?;
    serving
        .limits
        .check()
        .map_err(|e| anyhow::anyhow!("the HTTP limits are not acceptable: {e}"))?;
    tracing::info!(%address, tls = serving.tls.is_some(), "burrow is serving");
    // Open connections would keep the graceful shutdown waiting: close
    // them when it begins.
    let connections = host.clone();
    let shutdown = async move {
        shutdown.await;
        connections.close_connections();
    };
    let router = router_with(host.clone(), serving.clone());
    let front = accept::Front {
        limits: serving.limits,
        checks_tokens: serving.access.checks_tokens(),
    };
    match serving.tls {
        Some(pair) => tls::serve(listener, router, pair, front, shutdown).await,
        None => {
            let plain = axum_server::accept::DefaultAcceptor::new();
            accept::serve(listener, router, plain, front, shutdown).await
        }
    }
    host.shutdown().await;
    Ok(())
}

async fn health() -> axum::Json<Value> {
    axum::Json(json!({ "status": "ok" }))
}

/// Which actors are ready: 200 when every one is, else 503 with the
/// actors still compiling and those that failed.
async fn ready(State(host): State<Host>) -> Response {
    let readiness = host.readiness();
    let (status, word) = if readiness.all_ready() {
        (StatusCode::OK, "ready")
    } else if readiness.compiling.is_empty() {
        (StatusCode::SERVICE_UNAVAILABLE, "failed")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "compiling")
    };
    let body = json!({
        "status": word,
        "ready": readiness.ready,
        "compiling": readiness.compiling,
        "failed": readiness.failed,
    });
    (status, axum::Json(body)).into_response()
}

async fn metrics(State(host): State<Host>) -> Result<impl IntoResponse, ApiError> {
    let text = tokio::task::spawn_blocking(move || host.metrics())
        .await
        .map_err(|e| ApiError::new(500, "storage", format!("cannot read the metrics: {e}")))?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, METRICS_CONTENT_TYPE)],
        text,
    ))
}

async fn no_route(method: Method, uri: Uri) -> ApiError {
    ApiError::new(404, "no-route", format!("no route for {method} {uri}"))
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        405,
        "method-not-allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}

fn parse_json(body: &[u8], what: &str) -> Result<Value, String> {
    serde_json::from_slice(body).map_err(|e| format!("{what} is not valid JSON: {e}"))
}

/// Whether `body`, valid JSON, is an array (the arguments of a call),
/// checked without building it: the guest parses it anyway.
fn is_json_array(body: &[u8], what: &str) -> Result<bool, String> {
    serde_json::from_slice::<serde::de::IgnoredAny>(body)
        .map_err(|e| format!("{what} is not valid JSON: {e}"))?;
    Ok(body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'['))
}

/// Where a call came from and the chain of callers it carries, read from
/// its headers (without copying them).
struct CallOrigin {
    hop: Hop,
    chain: Vec<Address>,
}

impl<S: Sync> FromRequestParts<S> for CallOrigin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<CallOrigin, ApiError> {
        Ok(CallOrigin {
            hop: hop(&parts.headers),
            chain: chain(&parts.headers)?,
        })
    }
}

/// Where a request came from: a client, or another host of the cluster.
fn hop(headers: &HeaderMap) -> Hop {
    if headers.contains_key(FORWARDED_HEADER) {
        Hop::Forwarded
    } else {
        Hop::Origin
    }
}

/// The chain of callers a forwarded call between actors carries.
fn chain(headers: &HeaderMap) -> Result<Vec<Address>, ApiError> {
    let Some(value) = headers.get(CHAIN_HEADER) else {
        return Ok(Vec::new());
    };
    let bad = |why: String| {
        ApiError::new(
            400,
            "invalid-arguments",
            format!("the {CHAIN_HEADER} header is not acceptable: {why}"),
        )
    };
    let text = value.to_str().map_err(|e| bad(e.to_string()))?;
    let pairs: Vec<(String, String)> =
        serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    if pairs.len() > MAX_CALL_DEPTH {
        return Err(bad(format!(
            "it names {} instances; at most {MAX_CALL_DEPTH}",
            pairs.len()
        )));
    }
    pairs
        .into_iter()
        .map(|(actor, key)| {
            crate::address::validate_actor_name(&actor).map_err(|e| bad(e.to_string()))?;
            crate::address::validate_key(&key).map_err(|e| bad(e.to_string()))?;
            Ok(Address {
                actor: actor.into(),
                key: key.into(),
            })
        })
        .collect()
}

async fn cluster_status(State(host): State<Host>) -> ApiResult<axum::Json<Value>> {
    match host.cluster_status().await? {
        Some(status) => Ok(axum::Json(status)),
        None => Err(ApiError::new(
            404,
            "no-cluster",
            "this host runs alone: it was not started with --cluster",
        )),
    }
}

async fn cluster_drain(State(host): State<Host>) -> ApiResult<axum::Json<Value>> {
    Ok(axum::Json(host.drain().await?))
}

async fn call(
    State(host): State<Host>,
    origin: Result<CallOrigin, ApiError>,
    Extension(caller): Extension<Caller>,
    path: Result<Path<(String, String, String)>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let Path((actor, key, action)) = path?;
    let body = body?;
    let CallOrigin { hop, chain } = origin?;
    let invalid = |message: String| Error::InvalidArguments {
        actor: actor.clone(),
        action: action.clone(),
        message,
    };
    let args = if body.iter().all(u8::is_ascii_whitespace) {
        "[]"
    } else {
        match is_json_array(&body, "the body") {
            Ok(true) => std::str::from_utf8(&body).map_err(|e| invalid(e.to_string()))?,
            Ok(false) => {
                return Err(invalid("the body must be a JSON array of arguments".into()).into());
            }
            Err(message) => return Err(invalid(message).into()),
        }
    };
    // Boxed: the call's future is large, and the layers above would move
    // it several times over.
    let result =
        Box::pin(host.call_from_as(hop, caller, chain, &actor, &key, &action, args)).await?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        result,
    )
        .into_response())
}

async fn create(
    State(host): State<Host>,
    routed: Routed,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let body = body?;
    let input = if body.iter().all(u8::is_ascii_whitespace) {
        "null"
    } else {
        parse_json(&body, "the create input")
            .map_err(|m| ApiError::new(400, "invalid-arguments", m))?;
        std::str::from_utf8(&body)
            .map_err(|e| ApiError::new(400, "invalid-arguments", e.to_string()))?
    };
    let routed = routed.with_body(body.clone());
    routed
        .serve(&host, |host, actor, key| async move {
            host.create(actor, key, input).await?;
            Ok(StatusCode::CREATED.into_response())
        })
        .await
}

async fn destroy(State(host): State<Host>, routed: Routed) -> ApiResult<Response> {
    routed
        .serve(&host, |host, actor, key| async move {
            host.destroy(actor, key).await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        })
        .await
}

async fn export(State(host): State<Host>, routed: Routed) -> ApiResult<Response> {
    routed
        .serve(&host, |host, actor, key| async move {
            let file = host.export(actor, key).await?;
            Ok((
                [(axum::http::header::CONTENT_TYPE, "application/octet-stream")],
                file,
            )
                .into_response())
        })
        .await
}

/// The query of `PUT /actors/{actor}/{key}/export`: whether an existing
/// instance is destroyed first.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportQuery {
    #[serde(default)]
    replace: bool,
}

async fn import(
    State(host): State<Host>,
    routed: Routed,
    query: Result<Query<ImportQuery>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let Query(ImportQuery { replace }) = query.map_err(|e| {
        ApiError::new(
            400,
            "invalid-arguments",
            format!("the query is not acceptable (only `replace=true|false`): {e}"),
        )
    })?;
    let routed = routed.with_body(body?);
    let body = routed.body();
    routed
        .serve(&host, |host, actor, key| async move {
            host.import(actor, key, body, replace).await?;
            Ok(StatusCode::CREATED.into_response())
        })
        .await
}

async fn fork(
    State(host): State<Host>,
    routed: Routed,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let body = body?;
    let ForkBody { key: new_key } = serde_json::from_slice(&body).map_err(|e| {
        ApiError::new(
            400,
            "invalid-arguments",
            format!("the fork's body is not `{{\"key\": NEW_KEY}}`: {e}"),
        )
    })?;
    let routed = routed.with_body(body);
    let new_key = new_key.as_str();
    routed
        .serve(&host, |host, actor, key| async move {
            host.fork(actor, key, new_key).await?;
            Ok(StatusCode::CREATED.into_response())
        })
        .await
}

async fn pause(State(host): State<Host>, routed: Routed) -> ApiResult<Response> {
    routed
        .serve(&host, |host, actor, key| async move {
            let paused = host.pause(actor, key).await?;
            Ok(axum::Json(Paused { paused }).into_response())
        })
        .await
}

async fn resume(State(host): State<Host>, routed: Routed) -> ApiResult<Response> {
    routed
        .serve(&host, |host, actor, key| async move {
            let resumed = host.resume(actor, key).await?;
            Ok(axum::Json(Resumed { resumed }).into_response())
        })
        .await
}

async fn state(State(host): State<Host>, routed: Routed) -> ApiResult<Response> {
    routed
        .view(&host, |host, actor, key| host.state(actor, key))
        .await
}

async fn inspect(State(host): State<Host>, routed: Routed) -> ApiResult<Response> {
    routed
        .view(&host, |host, actor, key| host.inspect(actor, key))
        .await
}

/// The query of a deploy: `?check=true` replays the running workflows
/// first.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DeployQuery {
    #[serde(default)]
    check: bool,
}

fn deploy_query(query: Result<Query<DeployQuery>, QueryRejection>) -> ApiResult<bool> {
    query.map(|Query(q)| q.check).map_err(|e| {
        ApiError::new(
            400,
            "invalid-arguments",
            format!("the query is not acceptable (only `check=true|false`): {e}"),
        )
    })
}

/// The query of `POST /actors/{actor}/{key}/workflow/check`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckQuery {
    digest: String,
}

async fn workflow_check(
    State(host): State<Host>,
    routed: Routed,
    query: Result<Query<CheckQuery>, QueryRejection>,
) -> ApiResult<axum::Json<WorkflowCheck>> {
    let digest = query
        .map(|Query(q)| q.digest)
        .ok()
        .filter(|digest| digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| {
            ApiError::new(
                400,
                "invalid-arguments",
                "the query must be `digest=` and a component's SHA-256 in hex",
            )
        })?;
    Ok(axum::Json(
        host.check_instance(routed.hop, &routed.actor, &routed.key, &digest)
            .await?,
    ))
}

async fn component(
    State(host): State<Host>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<axum::Json<Value>> {
    let Path(actor) = path?;
    let (version, digest) = host.component(&actor)?;
    Ok(axum::Json(
        json!({ "actor": actor, "version": version, "digest": digest }),
    ))
}

async fn deploy(
    State(host): State<Host>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<DeployQuery>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<axum::Json<Deployed>> {
    let Path(actor) = path?;
    let check = deploy_query(query)?;
    let body = body?;
    Ok(axum::Json(host.deploy(&actor, body.to_vec(), check).await?))
}

async fn deploy_previous(
    State(host): State<Host>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<DeployQuery>, QueryRejection>,
) -> ApiResult<axum::Json<Deployed>> {
    let Path(actor) = path?;
    let check = deploy_query(query)?;
    Ok(axum::Json(host.deploy_previous(&actor, check).await?))
}

async fn send(
    State(host): State<Host>,
    headers: HeaderMap,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let Path((actor, key)) = path?;
    let body = body?;
    let invalid = |message: String| Error::InvalidEvent {
        actor: actor.clone(),
        message,
    };
    let body: SendBody = serde_json::from_slice(&body).map_err(|e| {
        invalid(format!(
            "the body must be {{\"type\": ..., \"payload\": ...}} (optional: priority, group, wait, timeout_ms): {e}"
        ))
    })?;
    let options = body
        .options(DEFAULT_SEND_WAIT, MAX_SEND_WAIT)
        .map_err(invalid)?;
    let payload = body.payload.as_deref().map_or("null", |p| p.get());
    let outcome = host
        .send_from(
            hop(&headers),
            &actor,
            &key,
            &body.event_type,
            payload,
            options,
        )
        .await?;
    let status = StatusCode::from_u16(outcome.http_status()).unwrap_or(StatusCode::OK);
    Ok((status, axum::Json(outcome)).into_response())
}

async fn queue(State(host): State<Host>, routed: Routed) -> ApiResult<Response> {
    routed
        .view(&host, |host, actor, key| host.queue(actor, key))
        .await
}

async fn workflow(State(host): State<Host>, routed: Routed) -> ApiResult<Response> {
    routed
        .view(&host, |host, actor, key| host.workflow(actor, key))
        .await
}

async fn requeue(
    State(host): State<Host>,
    routed: Routed,
    path: Result<Path<(String, String, i64)>, PathRejection>,
) -> ApiResult<Response> {
    let Path((_, _, id)) = path?;
    routed
        .serve(&host, |host, actor, key| async move {
            host.requeue(actor, key, id).await?;
            Ok(axum::Json(json!({ "id": id, "status": "requeued" })).into_response())
        })
        .await
}

async fn discard(
    State(host): State<Host>,
    routed: Routed,
    path: Result<Path<(String, String, i64)>, PathRejection>,
) -> ApiResult<Response> {
    let Path((_, _, id)) = path?;
    routed
        .serve(&host, |host, actor, key| async move {
            host.discard(actor, key, id).await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::is_json_array;

    #[test]
    fn call_arguments_must_be_one_json_array() {
        for body in ["[]", "[1, \"a\"]", " \n\t[{\"x\": [2]}]\r\n"] {
            assert_eq!(
                is_json_array(body.as_bytes(), "the body"),
                Ok(true),
                "{body}"
            );
        }
        for body in ["{\"a\": 1}", "1", "\"[1]\"", "null"] {
            assert_eq!(
                is_json_array(body.as_bytes(), "the body"),
                Ok(false),
                "{body}"
            );
        }
        for body in ["[1", "[1] [2]", "[1,]", "\u{c}[1]"] {
            let refused = is_json_array(body.as_bytes(), "the body").unwrap_err();
            assert!(
                refused.starts_with("the body is not valid JSON"),
                "{body}: {refused}"
            );
        }
    }
}
