//! Outgoing HTTP: `wasi:http/outgoing-handler` and `wasi:http/types`, as
//! wasmtime-wasi-http implements them, with Burrow's rules on top.
//!
//! - **At the import boundary** (`handle`, shadowing the crate's
//!   `wasi:http/outgoing-handler.handle`): a request is a side
//!   effect, refused to a workflow's orchestration code (`not-in-step`)
//!   and to the queue selector (`not-allowed`), whatever the guest's
//!   language. A request reaches outside like a call to another actor
//!   does: a step that sends one inside a batch of steps stops the run so
//!   that the steps before it commit first, and a batch of calls ends
//!   after a call that sent one.
//! - **In the hooks every request goes through** ([`Hooks`], the crate's
//!   `send_request` hook): the actor's list of authorities (manifest
//!   `http`, by default nothing), the address rules of `outbound.rs` on
//!   the addresses the name resolves to, the limits of requests in flight
//!   per instance and per host, timeouts within the call's or step's
//!   deadline, and the body limits (`send.rs`).
//!
//! A refusal of Burrow's reaches the guest as `error-code.internal-error`
//! with a text that starts with what was refused (`not-in-step:`,
//! `not-allowed:`, `denied:`, `limit:`) and names the actor and the
//! authority; the SDKs turn the first two into their usual errors.

mod pool;
mod send;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi_http::p2::bindings::http::{outgoing_handler, types};
use wasmtime_wasi_http::p2::types::{HostFutureIncomingResponse, HostOutgoingRequest};
use wasmtime_wasi_http::p2::{HttpError, HttpResult};
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks, WasiHttpView};

use crate::config::{
    MAX_OUTBOUND_PER_HOST, MAX_OUTBOUND_PER_INSTANCE, OUTBOUND_BETWEEN_BYTES_TIMEOUT,
    OUTBOUND_CONNECT_TIMEOUT, OUTBOUND_FIRST_BYTE_TIMEOUT,
};
use crate::deadline::Deadline;
use crate::instance::{InstanceState, Mode, Refusal, StepRequest};
use crate::metrics::ActorMetrics;
use crate::outbound::{Allowed, Listed, Scheme};
use crate::storage::MAX_STEP_REQUESTS;

/// The name of the import, in refusals.
const HANDLE: &str = "wasi:http/outgoing-handler.handle";

/// The `wasi:http` version wasmtime-wasi-http links (guests that import
/// an earlier 0.2 version are linked to it too).
const WASI_HTTP: &str = "wasi:http/outgoing-handler@0.2.12";

/// Adds `wasi:http` to the linker, its `handle` guarded (see the module
/// docs).
pub(crate) fn add_to_linker(linker: &mut Linker<InstanceState>) -> wasmtime::Result<()> {
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)?;
    linker.allow_shadowing(true);
    linker.instance(WASI_HTTP)?.func_wrap(
        "handle",
        |mut store: StoreContextMut<'_, InstanceState>,
         (request, options): (
            Resource<HostOutgoingRequest>,
            Option<Resource<types::RequestOptions>>,
        )| {
            let state = store.data_mut();
            let handled = handle(state, request, options);
            Ok((match handled {
                Ok(future) => Ok(future),
                Err(e) => Err(types::Host::convert_error_code(&mut state.http(), e)?),
            },))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// `wasi:http/outgoing-handler.handle`, guarded (see the module docs).
pub(crate) fn handle(
    state: &mut InstanceState,
    request: Resource<HostOutgoingRequest>,
    options: Option<Resource<types::RequestOptions>>,
) -> HttpResult<Resource<HostFutureIncomingResponse>> {
    let refusal = match state.mode() {
        Mode::Select => Some(Refusal::NotAllowed(format!(
            "{HANDLE}: the queue selector may only read; it sends no request"
        ))),
        _ => state.check_mode(HANDLE).err(),
    };
    if let Some(refusal) = refusal {
        // The request was given to the call: it goes with the refusal.
        let _ = state.http().table.delete(request);
        let (outcome, text) = match refusal {
            Refusal::NotInStep(why) => ("not-in-step", format!("not-in-step: {why}")),
            Refusal::NotAllowed(why) => ("not-allowed", format!("not-allowed: {why}")),
        };
        if let Some(metrics) = &state.http_context().metrics {
            metrics.outbound_ended(outcome, Duration::ZERO);
        }
        return Err(types::ErrorCode::InternalError(Some(text)).into());
    }
    state
        .check_reaching_outside(HANDLE)
        .map_err(HttpError::trap)?;
    state.note_reached_outside();
    let record = (state.mode() == Mode::Step).then(|| step_request(state, &request));
    if let Some(record) = &record {
        *state
            .http_context()
            .sending
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(record.clone());
    }
    let handled = outgoing_handler::Host::handle(&mut state.http(), request, options);
    // Still there: the crate refused the request before the hooks saw it
    // (a bad URI, a body of the wrong form).
    let unsent = state
        .http_context()
        .sending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(unsent) = unsent {
        unsent.lock().unwrap_or_else(|e| e.into_inner()).outcome = "invalid";
    }
    handled
}

/// A record of `request` among the open step's, if the step has room for
/// one more ([`MAX_STEP_REQUESTS`]); else a record kept nowhere.
fn step_request(
    state: &mut InstanceState,
    request: &Resource<HostOutgoingRequest>,
) -> Arc<Mutex<StepRequest>> {
    let (method, authority) = match state.http().table.get(request) {
        Ok(r) => {
            let method = match &r.method {
                types::Method::Get => "GET".to_owned(),
                types::Method::Head => "HEAD".to_owned(),
                types::Method::Post => "POST".to_owned(),
                types::Method::Put => "PUT".to_owned(),
                types::Method::Delete => "DELETE".to_owned(),
                types::Method::Connect => "CONNECT".to_owned(),
                types::Method::Options => "OPTIONS".to_owned(),
                types::Method::Trace => "TRACE".to_owned(),
                types::Method::Patch => "PATCH".to_owned(),
                types::Method::Other(other) => other.clone(),
            };
            let scheme = match &r.scheme {
                Some(types::Scheme::Http) | None => "http".to_owned(),
                Some(types::Scheme::Https) => "https".to_owned(),
                Some(types::Scheme::Other(other)) => other.clone(),
            };
            let authority = format!("{scheme}://{}", r.authority.as_deref().unwrap_or(""));
            (method, authority)
        }
        Err(_) => ("?".to_owned(), String::new()),
    };
    let record = Arc::new(Mutex::new(StepRequest {
        method: crate::instance::output::failure_text(&method),
        authority: crate::instance::output::failure_text(&authority),
        status: None,
        outcome: "in-flight",
        duration_ms: None,
    }));
    let requests = &mut state.http_context().step_requests;
    if requests.len() < MAX_STEP_REQUESTS {
        requests.push(record.clone());
    }
    record
}

/// What every instance of a host shares for its outgoing requests: the
/// TLS configuration (the system's roots and `outbound_ca`) and the limit
/// of requests in flight.
pub(crate) struct Outbound {
    tls: Arc<rustls::ClientConfig>,
    in_flight: Arc<Semaphore>,
    /// Connections kept open between requests.
    pool: Arc<pool::Pool<send::RequestBody>>,
}

impl Outbound {
    pub(crate) fn new(trust: &burrow_client::Trust) -> Arc<Outbound> {
        Arc::new(Outbound {
            tls: trust.client_config(),
            in_flight: Arc::new(Semaphore::new(MAX_OUTBOUND_PER_HOST)),
            pool: Arc::default(),
        })
    }
}

/// The hooks of one instance's outgoing requests (see the module docs).
pub(crate) struct Hooks {
    actor: Arc<str>,
    allowed: Allowed,
    max_request: u64,
    max_response: u64,
    /// The running call's or step's.
    deadline: Deadline,
    in_flight: Arc<Semaphore>,
    host: Arc<Outbound>,
    metrics: Arc<ActorMetrics>,
    /// The record of a step's request, put there by the import
    /// ([`HttpContext::sending`](crate::instance::HttpContext)).
    sending: Arc<Mutex<Option<Arc<Mutex<StepRequest>>>>>,
}

impl Hooks {
    pub(crate) fn new(
        actor: Arc<str>,
        options: &crate::config::ActorOptions,
        deadline: Deadline,
        host: Arc<Outbound>,
        metrics: Arc<ActorMetrics>,
        sending: Arc<Mutex<Option<Arc<Mutex<StepRequest>>>>>,
    ) -> Hooks {
        Hooks {
            actor,
            allowed: options.http.clone(),
            max_request: options.http_max_request,
            max_response: options.http_max_response,
            deadline,
            in_flight: Arc::new(Semaphore::new(MAX_OUTBOUND_PER_INSTANCE)),
            host,
            metrics,
            sending,
        }
    }

    /// What a request may do, or why it may not leave at all.
    fn admit(
        &self,
        request: &http::Request<WasiBody>,
        options: Option<RequestOptions>,
    ) -> Result<send::Plan, Error> {
        let uri = request.uri();
        let scheme = uri
            .scheme_str()
            .and_then(Scheme::parse)
            .ok_or(Error::HttpProtocolError)?;
        let host = uri.host().ok_or(Error::HttpRequestUriInvalid)?;
        let port = uri.port_u16().unwrap_or(scheme.default_port());
        let authority = format!("{}://{}:{port}", uri.scheme_str().unwrap_or(""), host);
        let denied = |why: String| {
            tracing::warn!(actor = %self.actor, %authority, "an outgoing request was refused: {why}");
            Error::InternalError(Some(format!(
                "denied: actor `{}` may not reach `{authority}`: {why}",
                self.actor
            )))
        };
        let listing = self
            .allowed
            .listing(scheme, host, port)
            .ok_or_else(|| denied("it is not in the actor's `http` list in the manifest".into()))?;
        if let Some(length) = request
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            && length > self.max_request
        {
            return Err(Error::HttpRequestBodySize(Some(self.max_request)));
        }
        let left = self
            .deadline
            .remaining()
            .ok_or_else(|| denied("no call is running".into()))?;
        if left.is_zero() {
            return Err(Error::ConnectionTimeout);
        }
        let limit = |what: &str, most: usize| {
            tracing::warn!(actor = %self.actor, %authority, "an outgoing request was refused: {what} has {most} requests in flight");
            Error::InternalError(Some(format!(
                "limit: {what} has {most} outgoing requests in flight already; `{authority}` was not sent"
            )))
        };
        let instance = self
            .in_flight
            .clone()
            .try_acquire_owned()
            .map_err(|_| limit("this instance", MAX_OUTBOUND_PER_INSTANCE))?;
        let host_permit = self
            .host
            .in_flight
            .clone()
            .try_acquire_owned()
            .map_err(|_| limit("this host", MAX_OUTBOUND_PER_HOST))?;
        let capped =
            |asked: Option<Duration>, default: Duration| asked.unwrap_or(default).min(left);
        let options = options.unwrap_or_default();
        Ok(send::Plan {
            route: pool::Route {
                actor: self.actor.clone(),
                https: scheme == Scheme::Https,
                host: host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_owned(),
                port,
                any_address: listing == Listed::Exactly,
            },
            authority,
            deadline: Instant::now() + left,
            connect_timeout: capped(options.connect_timeout, OUTBOUND_CONNECT_TIMEOUT),
            first_byte_timeout: capped(options.first_byte_timeout, OUTBOUND_FIRST_BYTE_TIMEOUT),
            between_bytes_timeout: capped(
                options.between_bytes_timeout,
                OUTBOUND_BETWEEN_BYTES_TIMEOUT,
            ),
            max_request: self.max_request,
            max_response: self.max_response,
            tls: self.host.tls.clone(),
            permits: (instance, host_permit),
            pool: self.host.pool.clone(),
        })
    }
}

/// What `send_request` gives back.
type Sent = Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), Error>> + Send>,
    ),
    Error,
>;

impl WasiHttpHooks for Hooks {
    /// A request body past the actor's limit reaches hyper as the body's
    /// error: it is told as what it is.
    fn p2_error_from_hyper(&mut self, err: &hyper::Error) -> types::ErrorCode {
        let mut cause = std::error::Error::source(err);
        while let Some(e) = cause {
            if let Some(Error::HttpRequestBodySize(max)) = e.downcast_ref::<Error>() {
                return types::ErrorCode::HttpRequestBodySize(*max);
            }
            cause = e.source();
        }
        tracing::debug!(actor = %self.actor, error = %err, "an outgoing request failed");
        types::ErrorCode::HttpProtocolError
    }

    fn p2_error_from_connect(&mut self, err: &std::io::Error) -> types::ErrorCode {
        tracing::debug!(actor = %self.actor, error = %err, "an outgoing request could not connect");
        types::ErrorCode::ConnectionRefused
    }

    /// A server certificate the host does not trust is told as such (the
    /// usual cause: a private CA that `outbound_ca` does not name).
    fn p2_error_from_tls(&mut self, err: &std::io::Error) -> types::ErrorCode {
        tracing::debug!(actor = %self.actor, error = %err, "an outgoing request failed its TLS handshake");
        match err
            .get_ref()
            .and_then(|e| e.downcast_ref::<rustls::Error>())
        {
            Some(rustls::Error::InvalidCertificate(_)) => types::ErrorCode::TlsCertificateError,
            _ => types::ErrorCode::TlsProtocolError,
        }
    }

    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        let metrics = self.metrics.clone();
        let began = Instant::now();
        let record = self
            .sending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let ended = move |outcome: &'static str, status: Option<u16>| {
            metrics.outbound_ended(outcome, began.elapsed());
            if let Some(record) = &record {
                let mut record = record.lock().unwrap_or_else(|e| e.into_inner());
                record.outcome = outcome;
                record.status = status;
                record.duration_ms = Some(began.elapsed().as_millis() as u64);
            }
        };
        match self.admit(&request, options) {
            Ok(plan) => Box::new(async move {
                let sent = send::send(request, plan).await;
                match &sent {
                    Ok((response, _)) => ended("answered", Some(response.status().as_u16())),
                    Err(e) => ended(outcome(e), None),
                }
                sent
            }),
            Err(refused) => {
                ended(outcome(&refused), None);
                Box::new(async move { Err(refused) })
            }
        }
    }
}

/// What `burrow_outbound_requests` counts a request that failed as.
fn outcome(e: &Error) -> &'static str {
    match e {
        Error::InternalError(Some(text)) if text.starts_with("denied:") => "denied",
        Error::InternalError(Some(text)) if text.starts_with("limit:") => "limit",
        Error::ConnectionTimeout | Error::ConnectionReadTimeout | Error::DnsTimeout => "timeout",
        Error::HttpRequestBodySize(_) | Error::HttpResponseBodySize(_) => "too-large",
        _ => "failed",
    }
}
