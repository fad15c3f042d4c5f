//! Outgoing HTTP requests, through `wasi:http` (blocking: an action or a
//! step waits for its answer; the host meanwhile runs other instances).
//!
//! An actor reaches only what its manifest lists
//! (`http = ["https://api.example.com"]`); everything else is refused
//! before any connection. In a workflow, requests are side effects: they
//! work inside a step and are refused to orchestration code
//! ([`HttpError::NotInStep`]). A step that finished is never run again,
//! so its request is not sent again; a failed attempt may be retried, and
//! [`crate::workflow::step_key`] gives the same key to every attempt: send
//! it as `Idempotency-Key` ([`Request::idempotency_key`]).
//!
//! ```no_run
//! use burrow_sdk::{http, workflow};
//!
//! # fn charge() -> Result<(), burrow_sdk::Error> {
//! let answer = http::post("https://pay.example.com/charges")
//!     .idempotency_key(&workflow::step_key().unwrap_or_default())
//!     .json(&serde_json::json!({"amount": 1200}))?
//!     .send()?;
//! let charge: serde_json::Value = answer.json()?;
//! # Ok(()) }
//! ```

mod incoming;

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
};
use wasip2::io::streams::StreamError;

pub use incoming::{Incoming, Reply, serve};

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// Workflow orchestration code sent it: requests are side effects,
    /// allowed only inside a step.
    NotInStep(String),
    /// It was sent where requests are not allowed (the queue selector).
    NotAllowed(String),
    /// The host refused it: the actor's manifest does not list its
    /// authority, its name resolves to an address the actor may not
    /// reach, or too many requests are in flight. The text says which.
    Denied(String),
    /// The URL, a header or the method is not valid.
    Invalid(String),
    /// It failed on the way: no connection, a timeout, a body over its
    /// limit, a broken answer (`wasi:http`'s error code).
    Failed(String),
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::NotInStep(m) => write!(f, "not-in-step: {m}"),
            HttpError::NotAllowed(m) => write!(f, "not-allowed: {m}"),
            HttpError::Denied(m) => write!(f, "denied: {m}"),
            HttpError::Invalid(m) => write!(f, "invalid: {m}"),
            HttpError::Failed(m) => write!(f, "failed: {m}"),
        }
    }
}

impl std::error::Error for HttpError {}

impl From<HttpError> for crate::Error {
    fn from(e: HttpError) -> Self {
        match e {
            HttpError::NotInStep(m) => crate::Error::new("not-in-step", m),
            e => crate::Error::new("http", e.to_string()),
        }
    }
}

impl From<ErrorCode> for HttpError {
    fn from(code: ErrorCode) -> Self {
        // The host's own refusals come as an internal error whose text
        // starts with what was refused.
        if let ErrorCode::InternalError(Some(text)) = &code {
            for (prefix, make) in [
                (
                    "not-in-step: ",
                    HttpError::NotInStep as fn(String) -> HttpError,
                ),
                ("not-allowed: ", HttpError::NotAllowed),
                ("denied: ", HttpError::Denied),
                ("limit: ", HttpError::Denied),
            ] {
                if let Some(rest) = text.strip_prefix(prefix) {
                    return make(rest.to_owned());
                }
            }
        }
        HttpError::Failed(format!("{code:?}"))
    }
}

/// A request to send.
#[derive(Debug, Clone)]
pub struct Request {
    method: Method,
    url: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    timeout_ms: Option<u64>,
}

/// A `GET` of `url`.
pub fn get(url: &str) -> Request {
    Request::new(Method::Get, url)
}

/// A `POST` to `url`.
pub fn post(url: &str) -> Request {
    Request::new(Method::Post, url)
}

/// A `PUT` to `url`.
pub fn put(url: &str) -> Request {
    Request::new(Method::Put, url)
}

/// A `DELETE` of `url`.
pub fn delete(url: &str) -> Request {
    Request::new(Method::Delete, url)
}

impl Request {
    /// A request with `method` (`GET`, `POST`, ... or any other token) to
    /// `url` (`http://` or `https://`).
    pub fn method(method: &str, url: &str) -> Request {
        let method = match method.to_ascii_uppercase().as_str() {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "OPTIONS" => Method::Options,
            "PATCH" => Method::Patch,
            _ => Method::Other(method.to_owned()),
        };
        Request::new(method, url)
    }

    fn new(method: Method, url: &str) -> Request {
        Request {
            method,
            url: url.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
            timeout_ms: None,
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Request {
        self.headers
            .push((name.to_ascii_lowercase(), value.as_ref().to_vec()));
        self
    }

    /// Adds `Idempotency-Key: key` (see [`crate::workflow::step_key`]).
    pub fn idempotency_key(self, key: &str) -> Request {
        self.header("idempotency-key", key)
    }

    /// The body, as it is.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = body.into();
        self
    }

    /// `value` as a JSON body, with its content type.
    pub fn json(self, value: &impl Serialize) -> Result<Request, crate::Error> {
        let body = serde_json::to_vec(value)?;
        Ok(self.header("content-type", "application/json").body(body))
    }

    /// The longest each of its phases (connecting, waiting for the answer,
    /// and each pause of the answer's body) may take; the host cuts them
    /// at the call's or step's deadline anyway.
    pub fn timeout_ms(mut self, ms: u64) -> Request {
        self.timeout_ms = Some(ms);
        self
    }

    /// Sends it and reads the whole answer.
    pub fn send(self) -> Result<Response, HttpError> {
        let (scheme, authority, path) = split_url(&self.url)?;
        let mut entries: Vec<(String, Vec<u8>)> = self.headers;
        // A body of known length is sent with it, so the server (and the
        // host's limit) knows its size before reading it.
        if !self.body.is_empty()
            && !entries
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        {
            entries.push((
                "content-length".into(),
                self.body.len().to_string().into_bytes(),
            ));
        }
        let headers = Fields::from_list(&entries)
            .map_err(|e| HttpError::Invalid(format!("a header is not valid: {e:?}")))?;
        let request = OutgoingRequest::new(headers);
        let invalid = |what: &str| HttpError::Invalid(format!("{what} of `{}`", self.url));
        request
            .set_method(&self.method)
            .map_err(|()| invalid("the method"))?;
        request
            .set_scheme(Some(&scheme))
            .map_err(|()| invalid("the scheme"))?;
        request
            .set_authority(Some(&authority))
            .map_err(|()| invalid("the authority"))?;
        request
            .set_path_with_query(Some(&path))
            .map_err(|()| invalid("the path"))?;
        let options = self.timeout_ms.map(|ms| {
            let options = RequestOptions::new();
            let ns = Some(ms.saturating_mul(1_000_000));
            let _ = options.set_connect_timeout(ns);
            let _ = options.set_first_byte_timeout(ns);
            let _ = options.set_between_bytes_timeout(ns);
            options
        });
        let body = request
            .body()
            .map_err(|()| HttpError::Failed("the request has no body to write".into()))?;
        let future = outgoing_handler::handle(request, options)?;
        let written = write_body(body, &self.body);
        let answer = loop {
            match future.get() {
                Some(answer) => break answer,
                None => future.subscribe().block(),
            }
        };
        let answer =
            answer.map_err(|()| HttpError::Failed("the answer was taken already".into()))?;
        // A body the host stopped taking: the request's own error says why.
        let answer = match (answer, written) {
            (Err(code), _) => return Err(code.into()),
            (Ok(_), Err(e)) => return Err(e),
            (Ok(answer), Ok(())) => answer,
        };
        let status = answer.status();
        let headers = answer.headers().entries();
        let body = answer
            .consume()
            .map_err(|()| HttpError::Failed("the answer's body was taken already".into()))?;
        let bytes = read_body(&body)?;
        Ok(Response {
            status,
            headers,
            body: bytes,
        })
    }
}

/// The scheme, authority and path of `url`.
fn split_url(url: &str) -> Result<(Scheme, String, String), HttpError> {
    let invalid = || HttpError::Invalid(format!("`{url}` is not an http:// or https:// URL"));
    let (scheme, rest) = url.split_once("://").ok_or_else(invalid)?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        _ => return Err(invalid()),
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        return Err(invalid());
    }
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    Ok((scheme, authority.to_owned(), path))
}

fn write_body(body: OutgoingBody, bytes: &[u8]) -> Result<(), HttpError> {
    let failed = |e: StreamError| HttpError::Failed(format!("cannot send the body: {e:?}"));
    {
        let stream = body
            .write()
            .map_err(|()| HttpError::Failed("the body's stream was taken already".into()))?;
        for chunk in bytes.chunks(4096) {
            stream.blocking_write_and_flush(chunk).map_err(failed)?;
        }
    }
    OutgoingBody::finish(body, None)?;
    Ok(())
}

fn read_body(body: &IncomingBody) -> Result<Vec<u8>, HttpError> {
    let stream = body
        .stream()
        .map_err(|()| HttpError::Failed("the answer's stream was taken already".into()))?;
    let mut bytes = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                let code = wasip2::http::types::http_error_code(&e);
                return Err(match code {
                    Some(code) => code.into(),
                    None => HttpError::Failed(e.to_debug_string()),
                });
            }
        }
    }
    Ok(bytes)
}

/// The first value of header `name` (any case) in `headers`, as text.
fn header_in<'h>(headers: &'h [(String, Vec<u8>)], name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .and_then(|(_, v)| std::str::from_utf8(v).ok())
}

/// An answer.
#[derive(Debug, Clone)]
pub struct Response {
    /// Its status (`200`, `404`, ...).
    pub status: u16,
    /// Its headers, names in lowercase, in their order.
    pub headers: Vec<(String, Vec<u8>)>,
    /// Its body.
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (any case), as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        header_in(&self.headers, name)
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body read as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, crate::Error> {
        Ok(serde_json::from_slice(&self.body)?)
    }
}
