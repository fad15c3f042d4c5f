//! Incoming HTTP: a request to `/actors/{actor}/{key}/http/...` runs the
//! component's `wasi:http/incoming-handler` export in one transaction, as
//! an action does. The handler's response is read in full (at most the
//! actor's `http_max_response`) while the handler runs; it leaves the
//! host only after the commit. A trap, a deadline, an error the handler
//! sets instead of a response, no response at all, or a response past its
//! limit rolls everything back.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};

use crate::caller::Caller;
use crate::error::Error;
use crate::instance::Mode;
use crate::text::escaped;

use super::Cell;

/// A request for an actor's incoming handler: its path and query are
/// those after `/actors/{actor}/{key}/http`.
#[derive(Clone)]
pub(crate) struct HttpRequest {
    pub(crate) method: http::Method,
    /// `/rest?query`, never empty.
    pub(crate) path_and_query: String,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: Bytes,
    /// It came over HTTPS.
    pub(crate) https: bool,
}

/// The incoming handler's response, read in full.
pub(crate) struct HttpAnswer {
    pub(crate) status: http::StatusCode,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: Bytes,
}

/// Why the handler gave no response the host can pass on.
enum NoAnswer {
    /// It set an error instead of a response.
    GuestError(ErrorCode),
    /// It dropped its response-outparam unset.
    NotSet,
    /// Its body went past the limit.
    TooLarge(u64),
    /// Its body failed, or was not finished by the deadline.
    Body(String),
}

impl Cell {
    /// Runs the incoming HTTP handler on `request` for `caller` in one
    /// transaction; its response may be at most `max_response` bytes.
    pub(crate) async fn incoming_http(
        &mut self,
        request: HttpRequest,
        caller: &Caller,
        max_response: u64,
    ) -> Result<HttpAnswer, Error> {
        if self.exports.incoming.is_none() {
            return Err(Error::NoHttpHandler(self.name().actor.to_string()));
        }
        self.begin()?;
        self.store.data_mut().set_caller(caller.clone());
        let result = self.run_incoming(request, max_response).await;
        self.store.data_mut().set_caller(Caller::Host);
        self.finish(result)
    }

    async fn run_incoming(
        &mut self,
        request: HttpRequest,
        max_response: u64,
    ) -> Result<HttpAnswer, Error> {
        // The path is the client's text: escaped in errors.
        let during = format!(
            "http {} {}",
            request.method,
            escaped(&request.path_and_query)
        );
        let outcome = self
            .call(Mode::Action, &during, async |exports, store| {
                let handler = exports.incoming.as_ref().expect("checked by the caller");
                let deadline = store.data().deadline().clone();
                let (sender, receiver) = tokio::sync::oneshot::channel();
                let mut http = store.data_mut().http();
                let scheme = if request.https {
                    Scheme::Https
                } else {
                    Scheme::Http
                };
                let mut incoming =
                    http::Request::new(Full::new(request.body).map_err(
                        |never: Infallible| -> wasmtime_wasi_http::Error { match never {} },
                    ));
                *incoming.method_mut() = request.method;
                *incoming.uri_mut() = request.path_and_query.parse()?;
                *incoming.headers_mut() = request.headers;
                let incoming = http.new_incoming_request(scheme, incoming)?;
                let out = http.new_response_outparam(sender)?;
                let answer = async move {
                    let response = match receiver.await {
                        Ok(Ok(response)) => response,
                        Ok(Err(code)) => return Err(NoAnswer::GuestError(code)),
                        Err(_) => return Err(NoAnswer::NotSet),
                    };
                    let (parts, body) = response.into_parts();
                    let body = Limited::new(body, max_response as usize)
                        .collect()
                        .await
                        .map_err(|e| {
                            if e.is::<http_body_util::LengthLimitError>() {
                                NoAnswer::TooLarge(max_response)
                            } else {
                                NoAnswer::Body(e.to_string())
                            }
                        })?;
                    Ok(HttpAnswer {
                        status: parts.status,
                        headers: parts.headers,
                        body: body.to_bytes(),
                    })
                };
                // A handler that keeps its response (or its body) past its
                // return answers nothing: bounded by the call's deadline.
                let answer = async {
                    tokio::select! {
                        answer = answer => answer,
                        _ = deadline.overdue(Duration::ZERO) => Err(NoAnswer::Body(
                            "the handler did not finish its response by the call's deadline".into(),
                        )),
                    }
                };
                // The answer is read while the handler writes it; a trap
                // ends the request at once, its response unset.
                let mut answer = std::pin::pin!(answer);
                let mut handle = std::pin::pin!(handler.call_handle(&mut *store, incoming, out));
                let mut answered = None;
                let handled = loop {
                    tokio::select! {
                        handled = &mut handle => break handled,
                        early = &mut answer, if answered.is_none() => answered = Some(early),
                    }
                };
                handled?;
                Ok(match answered {
                    Some(answer) => answer,
                    None => answer.await,
                })
            })
            .await?;
        outcome.map_err(|no_answer| {
            let (code, message) = match no_answer {
                NoAnswer::GuestError(code) => (
                    "http-error",
                    format!("the handler answered with an error instead of a response: {code:?}"),
                ),
                NoAnswer::NotSet => (
                    "no-response",
                    "the handler returned without setting a response".to_owned(),
                ),
                NoAnswer::TooLarge(max) => (
                    "limit-exceeded",
                    format!(
                        "the response's body is over {max} bytes (the actor's http_max_response)"
                    ),
                ),
                NoAnswer::Body(why) => ("http-error", format!("the response's body failed: {why}")),
            };
            self.failed(&during, code, message)
        })
    }
}
