//! Who may do what over HTTP: every routed request passes [`guard`] first.
//!
//! - A request that claims to come from another host of the cluster (it
//!   carries one of the headers hosts forward with) must be signed by one:
//!   its caller is then the one the signature vouches for, and the host it
//!   came through has already checked its token.
//! - Otherwise, the route's [`Permission`] decides: `/healthz` and
//!   `/readyz` (and `/metrics` when opened) are public; calls, creates, sends,
//!   connections and requests for an actor's HTTP handler need a client or
//!   an admin token (a client token only for the actors it names), unless
//!   the actor's manifest says `public_http = true`, which opens its HTTP
//!   handler to anyone; everything else needs an admin token. A route
//!   not in [`permission`]'s table needs an admin token.
//! - A server without tokens lets every request through as an anonymous
//!   client, but not from another site's page or to a name that is not
//!   its own (`origin.rs`).
//! - A request that passes (a token known here, a host's signature, any
//!   request on a server without tokens) authenticates its connection:
//!   it no longer counts among those waiting for authentication
//!   (`gate.rs`).
//!
//! A WebSocket client that cannot set a header (a browser) may connect
//! without one and send the token as its first message (`{"token": ...}`);
//! see `connect.rs`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::sync::Arc;

use axum::RequestExt;
use axum::body::Body;
use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::{DefaultDirectRateLimiter, Quota};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::ApiError;
use super::gate::Ticket;
use crate::caller::{Caller, Role};
use crate::client::route;
use crate::config::PEER_BODY_TIMEOUT;
use crate::host::{
    CALLER_HEADER, CHAIN_HEADER, Claim, FORWARDED_HEADER, HTTP_HEADERS_HEADER, Host,
    SIGNATURE_HEADER, caller_from_header,
};
use crate::tokens::{Token, Tokens};

/// Who may use a server, and how much: its API tokens (none: everyone may
/// do everything), and whether `/metrics` is open to all.
#[derive(Clone, Default)]
pub struct Access {
    tokens: Option<Arc<Tokens>>,
    open_metrics: bool,
    /// Without tokens, on an address other hosts can reach too.
    insecure_no_auth: bool,
    limits: Arc<Limits>,
}

/// What each token may still do: its requests per second, its open
/// WebSockets.
#[derive(Default)]
struct Limits {
    rates: HashMap<String, (NonZeroU32, DefaultDirectRateLimiter)>,
    connections: HashMap<String, (u32, Arc<Semaphore>)>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Option<Vec<&str>> = self
            .tokens
            .as_ref()
            .map(|tokens| tokens.iter().map(|t| t.name.as_str()).collect());
        f.debug_struct("Access")
            .field("tokens", &names)
            .field("open_metrics", &self.open_metrics)
            .field("insecure_no_auth", &self.insecure_no_auth)
            .finish()
    }
}

impl Access {
    /// No tokens: every request is let through. A server serves so only
    /// on a loopback address, unless [`Access::insecure_no_auth`] says
    /// otherwise.
    pub fn open() -> Access {
        Access::default()
    }

    /// Without tokens, serve on an address other hosts can reach too
    /// (`burrow serve --insecure-no-auth`): anyone who reaches it may do
    /// everything.
    pub fn insecure_no_auth(mut self) -> Access {
        self.insecure_no_auth = true;
        self
    }

    /// Refuses `addr`, where a server is to listen, if it has no tokens,
    /// other hosts can reach the address, and
    /// [`Access::insecure_no_auth`] did not say so.
    pub(crate) fn check_address(&self, addr: SocketAddr) -> anyhow::Result<()> {
        if self.tokens.is_none() && !addr.ip().is_loopback() && !self.insecure_no_auth {
            anyhow::bail!(
                "refusing to serve on {addr} without API tokens: anyone who can reach it could \
                 call, read, destroy and deploy anything. Serve with `Access::with_tokens`, on a \
                 loopback address, or with `Access::insecure_no_auth`"
            );
        }
        Ok(())
    }

    /// Requests need one of `tokens`.
    pub fn with_tokens(tokens: Tokens) -> Access {
        let mut limits = Limits::default();
        for token in tokens.iter() {
            if let Some(rate) = token.rate {
                let limiter = governor::RateLimiter::direct(Quota::per_second(rate));
                limits.rates.insert(token.name.clone(), (rate, limiter));
            }
            if let Some(most) = token.connections {
                let permits = Arc::new(Semaphore::new(most as usize));
                limits
                    .connections
                    .insert(token.name.clone(), (most, permits));
            }
        }
        Access {
            tokens: Some(Arc::new(tokens)),
            open_metrics: false,
            insecure_no_auth: false,
            limits: Arc::new(limits),
        }
    }

    /// Serves `/metrics` to anyone (a scraper without a token), or not.
    pub fn open_metrics(mut self, open: bool) -> Access {
        self.open_metrics = open;
        self
    }

    /// Whether requests need a token.
    pub fn checks_tokens(&self) -> bool {
        self.tokens.is_some()
    }

    /// The token whose secret is `presented`, or a 401.
    fn authenticate(&self, presented: &str) -> Result<Option<&Token>, ApiError> {
        match &self.tokens {
            None => Ok(None),
            Some(tokens) => tokens
                .authenticate(presented)
                .map(Some)
                .ok_or_else(|| unauthenticated("the API token is not known to this server")),
        }
    }

    /// Lets `token` reach `actor` by a route of `permission`, within its
    /// rate: its caller, or a 403 or a 429.
    fn admit(
        &self,
        token: &Token,
        permission: Permission,
        actor: Option<&str>,
        what: &str,
    ) -> Result<Caller, ApiError> {
        match permission {
            Permission::Public => {}
            Permission::Admin if token.role != Role::Admin => {
                return Err(ApiError::new(
                    403,
                    "forbidden",
                    format!(
                        "token `{}` has the client role; {what} needs an admin token",
                        token.name
                    ),
                ));
            }
            Permission::Admin => {}
            Permission::Client | Permission::Connect | Permission::Http => {
                let actor = actor.unwrap_or_default();
                if !token.may_reach(actor) {
                    return Err(ApiError::new(
                        403,
                        "forbidden",
                        format!("token `{}` may not reach actor `{actor}`", token.name),
                    ));
                }
            }
        }
        if let Some((rate, limiter)) = self.limits.rates.get(&token.name)
            && limiter.check().is_err()
        {
            return Err(ApiError::new(
                429,
                "rate-limited",
                format!(
                    "token `{}` is past its limit of {rate} requests per second; retry later",
                    token.name
                ),
            ));
        }
        Ok(Caller::Client(Some(token.identity())))
    }

    /// A hold on one of the WebSockets `caller`'s token may keep open, if
    /// its token limits them (released when dropped), or a 429.
    pub(super) fn connection_permit(
        &self,
        caller: &Caller,
    ) -> Result<Option<OwnedSemaphorePermit>, ApiError> {
        let Caller::Client(Some(identity)) = caller else {
            return Ok(None);
        };
        let Some((most, permits)) = self.limits.connections.get(&identity.name) else {
            return Ok(None);
        };
        permits.clone().try_acquire_owned().map(Some).map_err(|_| {
            ApiError::new(
                429,
                "rate-limited",
                format!(
                    "token `{}` already has its {most} WebSockets open; close one first",
                    identity.name
                ),
            )
        })
    }

    /// The caller a WebSocket's first message (`{"token": ...}`) proves,
    /// for a connection to `actor`.
    pub(super) fn admit_first_message(&self, text: &str, actor: &str) -> Result<Caller, ApiError> {
        #[derive(serde::Deserialize)]
        struct First {
            token: String,
        }
        let first: First = serde_json::from_str(text).map_err(|_| {
            unauthenticated("the first message must be {\"token\": \"...\"} on this server")
        })?;
        match self.authenticate(&first.token)? {
            Some(token) => self.admit(token, Permission::Connect, Some(actor), "connect"),
            None => Ok(Caller::Client(None)),
        }
    }
}

/// Put on a request for a public actor's HTTP handler that carries one
/// of this server's API tokens: the handler does not see it.
#[derive(Clone, Copy)]
pub(super) struct BurrowToken;

/// What a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Permission {
    /// Anyone.
    Public,
    /// A client token that names the route's actor, or an admin token.
    Client,
    /// As [`Permission::Client`]; the token may also come as the
    /// WebSocket's first message.
    Connect,
    /// A request for an actor's HTTP handler: as [`Permission::Client`],
    /// or anyone's when the actor's manifest says `public_http = true`.
    Http,
    /// An admin token.
    Admin,
}

/// The `{actor}` of the request's route, if it has one.
async fn route_actor(request: &mut Request) -> Option<String> {
    let params = request.extract_parts::<RawPathParams>().await;
    params.ok().and_then(|params| {
        params
            .iter()
            .find(|(name, _)| *name == "actor")
            .map(|(_, value)| value.to_owned())
    })
}

/// What `method` on a route (its `pattern`) needs. Anything not listed
/// needs an admin token.
pub(super) fn permission(method: &Method, pattern: &str, open_metrics: bool) -> Permission {
    match (method.as_str(), pattern) {
        (_, route::HEALTH | route::READY) => Permission::Public,
        ("GET", route::METRICS) if open_metrics => Permission::Public,
        ("POST", route::ACTION) | ("PUT", route::INSTANCE) | ("POST", route::QUEUE) => {
            Permission::Client
        }
        ("GET", route::CONNECT) => Permission::Connect,
        (_, route::HTTP | route::HTTP_PATH) => Permission::Http,
        _ => Permission::Admin,
    }
}

/// What the guard needs: the host (for the cluster's key), who may use
/// it, and whether it is served over HTTPS (the scheme of its own pages).
#[derive(Clone)]
pub(super) struct Guard {
    pub(super) host: Host,
    pub(super) access: Access,
    pub(super) tls: bool,
}

/// The middleware every routed request passes (see the module docs). It
/// leaves the request's [`Caller`] in its extensions; a connection without
/// a token yet gets no caller.
pub(super) async fn guard(
    State(guard): State<Guard>,
    route: Option<MatchedPath>,
    mut request: Request,
    next: Next,
) -> Response {
    let ticket = request.extensions().get::<Arc<Ticket>>().cloned();
    if claims_a_host(request.headers()) {
        return match from_a_host(&guard.host, request).await {
            Ok(request) => {
                authenticated(ticket.as_deref());
                next.run(request).await
            }
            Err(refused) => refusal(refused),
        };
    }
    let access = &guard.access;
    if !access.checks_tokens() {
        let local = ticket.as_deref().map(Ticket::local);
        if let Err(refused) = super::origin::check(request.headers(), local, guard.tls) {
            return refusal(refused);
        }
        request.extensions_mut().insert(Caller::Client(None));
        return next.run(request).await;
    }
    let route = route.as_ref().map_or("", MatchedPath::as_str);
    let method = request.method().clone();
    let mut permission = permission(&method, route, access.open_metrics);
    if permission == Permission::Http {
        let actor = route_actor(&mut request).await;
        if actor.is_some_and(|actor| guard.host.has_public_http(&actor)) {
            permission = Permission::Public;
            // A public handler sees the sender's Authorization, but never
            // a token of this server's.
            if let Ok(Some(presented)) = bearer(request.headers())
                && matches!(access.authenticate(&presented), Ok(Some(_)))
            {
                request.extensions_mut().insert(BurrowToken);
            }
        }
    }
    if permission == Permission::Public {
        request.extensions_mut().insert(Caller::Client(None));
        return next.run(request).await;
    }
    let presented = match bearer(request.headers()) {
        Ok(Some(presented)) => presented,
        // A browser's WebSocket sends its token as its first message.
        Ok(None) if permission == Permission::Connect && is_upgrade(request.headers()) => {
            return next.run(request).await;
        }
        Ok(None) => {
            return refusal(unauthenticated(
                "this server needs an API token: send `Authorization: Bearer <token>`",
            ));
        }
        Err(refused) => return refusal(refused),
    };
    let actor = route_actor(&mut request).await;
    let what = format!("{method} {route}");
    let admitted = access
        .authenticate(&presented)
        .and_then(|token| match token {
            Some(token) => {
                // Known here: whatever the token may do, the connection
                // has authenticated.
                authenticated(ticket.as_deref());
                access.admit(token, permission, actor.as_deref(), &what)
            }
            None => Ok(Caller::Client(None)),
        });
    match admitted {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(refused) => refusal(refused),
    }
}

/// Marks the connection of `ticket` (if served by the accept loop) as
/// authenticated.
fn authenticated(ticket: Option<&Ticket>) {
    if let Some(ticket) = ticket {
        ticket.authenticated();
    }
}

/// The bearer token of `headers`, if any; a 401 for another scheme.
fn bearer(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(axum::http::header::AUTHORIZATION) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|token| Some(token.trim().to_owned()))
        .ok_or_else(|| unauthenticated("the Authorization header must be `Bearer <token>`"))
}

fn unauthenticated(message: &str) -> ApiError {
    ApiError::new(401, "unauthenticated", message)
}

/// The answer to a refused request; a 401 says which scheme to use.
fn refusal(refused: ApiError) -> Response {
    let unauthenticated = refused.status == axum::http::StatusCode::UNAUTHORIZED;
    let mut response = refused.into_response();
    if unauthenticated {
        response.headers_mut().insert(
            axum::http::header::WWW_AUTHENTICATE,
            axum::http::HeaderValue::from_static("Bearer"),
        );
    }
    response
}

/// Whether a request asks for a WebSocket.
fn is_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// Whether a request carries a header only hosts of a cluster send.
fn claims_a_host(headers: &HeaderMap) -> bool {
    [
        FORWARDED_HEADER,
        CHAIN_HEADER,
        CALLER_HEADER,
        SIGNATURE_HEADER,
        HTTP_HEADERS_HEADER,
    ]
    .iter()
    .any(|name| headers.contains_key(*name))
}

/// A request from another host of the cluster, with its signature checked
/// and the caller it vouches for in its extensions; a 401 when it does
/// not hold. What can be checked without the body is checked first (the
/// headers, this host being in a cluster, the signature's form and time),
/// so that a request no host sent is refused before its body is read; the
/// body then has [`PEER_BODY_TIMEOUT`] to arrive.
async fn from_a_host(host: &Host, request: Request) -> Result<Request, ApiError> {
    let refused = |why: String| {
        unauthenticated(&format!(
            "a request between hosts must be signed by a host of this cluster: {why}"
        ))
    };
    let (mut parts, body) = request.into_parts();
    let header = |name: &str| -> Result<&str, ApiError> {
        match parts.headers.get(name) {
            None => Ok(""),
            Some(value) => value
                .to_str()
                .map_err(|_| refused(format!("{name} is not text"))),
        }
    };
    let signature = header(SIGNATURE_HEADER)?;
    let caller = header(CALLER_HEADER)?;
    if signature.is_empty() || caller.is_empty() {
        return Err(refused(format!(
            "it has no {SIGNATURE_HEADER} or no {CALLER_HEADER}"
        )));
    }
    let signature = host.read_peer_signature(signature).map_err(refused)?;
    let body = tokio::time::timeout(
        PEER_BODY_TIMEOUT,
        axum::body::to_bytes(body, host.max_peer_body()),
    )
    .await
    .map_err(|_| {
        refused(format!(
            "its body did not arrive within {} s",
            PEER_BODY_TIMEOUT.as_secs()
        ))
    })?
    .map_err(|e| refused(format!("its body cannot be read: {e}")))?;
    let claim = Claim {
        method: parts.method.as_str(),
        path_and_query: parts
            .uri
            .path_and_query()
            .map_or(parts.uri.path(), |p| p.as_str()),
        forwarded: header(FORWARDED_HEADER)?,
        chain: header(CHAIN_HEADER)?,
        caller,
        http_headers: header(HTTP_HEADERS_HEADER)?,
        body: &body,
    };
    host.verify_peer(&claim, &signature).map_err(refused)?;
    let caller = caller_from_header(caller).map_err(refused)?;
    parts.extensions.insert(caller);
    Ok(Request::from_parts(parts, Body::from(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_routes_are_open_to_clients() {
        let p = |method: Method, route: &str| permission(&method, route, false);
        assert_eq!(p(Method::GET, "/healthz"), Permission::Public);
        assert_eq!(p(Method::GET, "/readyz"), Permission::Public);
        assert_eq!(p(Method::GET, "/metrics"), Permission::Admin);
        assert_eq!(
            permission(&Method::GET, "/metrics", true),
            Permission::Public
        );
        assert_eq!(
            p(Method::POST, "/actors/{actor}/{key}/actions/{action}"),
            Permission::Client
        );
        assert_eq!(p(Method::PUT, "/actors/{actor}/{key}"), Permission::Client);
        assert_eq!(p(Method::GET, "/actors/{actor}/{key}"), Permission::Admin);
        assert_eq!(
            p(Method::DELETE, "/actors/{actor}/{key}"),
            Permission::Admin
        );
        assert_eq!(
            p(Method::POST, "/actors/{actor}/{key}/queue"),
            Permission::Client
        );
        assert_eq!(
            p(Method::GET, "/actors/{actor}/{key}/queue"),
            Permission::Admin
        );
        assert_eq!(
            p(Method::GET, "/actors/{actor}/{key}/connect"),
            Permission::Connect
        );
        assert_eq!(
            p(Method::PUT, "/actors/{actor}/component"),
            Permission::Admin
        );
        assert_eq!(p(Method::GET, "/a/route/added/later"), Permission::Admin);
    }
}
