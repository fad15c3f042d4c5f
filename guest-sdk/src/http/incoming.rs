//! The actor's own HTTP handler: requests to
//! `/actors/{actor}/{key}/http/{path...}` reach a function of the actor,
//! in one transaction like an action (its writes commit before the reply
//! leaves; a panic or an error reply the host cannot send rolls them
//! back). A client token for the actor is needed, unless the manifest
//! says `public_http = true`: then anyone may send (a webhook), and the
//! handler checks the sender's own signature.
//!
//! ```no_run
//! use burrow_sdk::http::{Incoming, Reply};
//!
//! fn webhook(request: Incoming) -> Reply {
//!     match (request.method.as_str(), request.path.as_str()) {
//!         ("POST", "/paid") => Reply::json(200, &serde_json::json!({"ok": true})),
//!         _ => Reply::text(404, "no such hook"),
//!     }
//! }
//!
//! burrow_sdk::http_handler!(webhook);
//! ```

use serde::Serialize;
use serde::de::DeserializeOwned;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingRequest, Method, OutgoingResponse, ResponseOutparam,
};

use super::{header_in, read_body, write_body};

/// A request for the actor's HTTP handler.
#[derive(Debug, Clone)]
pub struct Incoming {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path after `/actors/{actor}/{key}/http` (`/` at the least),
    /// with its query, as the client wrote it.
    pub path: String,
    /// Its headers, names in lowercase, in their order (Burrow's API token
    /// is not among them).
    pub headers: Vec<(String, Vec<u8>)>,
    /// Its body.
    pub body: Vec<u8>,
}

impl Incoming {
    /// The first value of header `name` (any case), as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        header_in(&self.headers, name)
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

/// The handler's answer.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Its status.
    pub status: u16,
    /// Its headers.
    pub headers: Vec<(String, Vec<u8>)>,
    /// Its body.
    pub body: Vec<u8>,
}

impl Reply {
    /// An answer with `status` and no body.
    pub fn new(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// An answer with `status` and `text` (`text/plain; charset=utf-8`).
    pub fn text(status: u16, text: impl Into<String>) -> Reply {
        Reply::new(status)
            .header("content-type", "text/plain; charset=utf-8")
            .body(text.into())
    }

    /// An answer with `status` and `value` as JSON (`application/json`).
    pub fn json(status: u16, value: &impl Serialize) -> Reply {
        match serde_json::to_vec(value) {
            Ok(json) => Reply::new(status)
                .header("content-type", "application/json")
                .body(json),
            Err(e) => Reply::text(500, format!("the reply is not JSON: {e}")),
        }
    }

    /// Adds the header `name: value`.
    pub fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Reply {
        self.headers
            .push((name.to_ascii_lowercase(), value.as_ref().to_vec()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Reply {
        self.body = body.into();
        self
    }
}

/// Reads `request`, runs `handler` on it and sends its reply through
/// `out`: what [`crate::http_handler!`] exports. A request that cannot be
/// read is answered `400`; a reply with a status outside 100-599 or a
/// header that is not valid, `500` (saying which).
pub fn serve(
    request: IncomingRequest,
    out: ResponseOutparam,
    handler: impl FnOnce(Incoming) -> Reply,
) {
    let reply = match read_request(request) {
        Ok(incoming) => handler(incoming),
        Err(why) => Reply::text(400, why),
    };
    let (response, body) = match response(&reply) {
        Ok(response) => (response, reply.body),
        Err(why) => {
            let response = OutgoingResponse::new(Fields::new());
            let _ = response.set_status_code(500);
            (response, why.into_bytes())
        }
    };
    let Ok(outgoing) = response.body() else {
        let taken = ErrorCode::InternalError(Some("the reply's body was taken already".into()));
        ResponseOutparam::set(out, Err(taken));
        return;
    };
    ResponseOutparam::set(out, Ok(response));
    // The host reads the body while it is written and answers once it is
    // finished; a body left unfinished fails the request there.
    let _ = write_body(outgoing, &body);
}

/// The head of `reply`, or why it cannot be sent.
fn response(reply: &Reply) -> Result<OutgoingResponse, String> {
    let headers = Fields::new();
    for (name, value) in &reply.headers {
        headers
            .append(name, value)
            .map_err(|e| format!("the reply's header `{name}` is not valid: {e:?}"))?;
    }
    let response = OutgoingResponse::new(headers);
    if !(100..=599).contains(&reply.status) || response.set_status_code(reply.status).is_err() {
        return Err(format!("the reply's status {} is not valid", reply.status));
    }
    Ok(response)
}

fn read_request(request: IncomingRequest) -> Result<Incoming, String> {
    let method = match request.method() {
        Method::Get => "GET".to_owned(),
        Method::Head => "HEAD".to_owned(),
        Method::Post => "POST".to_owned(),
        Method::Put => "PUT".to_owned(),
        Method::Delete => "DELETE".to_owned(),
        Method::Connect => "CONNECT".to_owned(),
        Method::Options => "OPTIONS".to_owned(),
        Method::Trace => "TRACE".to_owned(),
        Method::Patch => "PATCH".to_owned(),
        Method::Other(other) => other,
    };
    let path = request.path_with_query().unwrap_or_else(|| "/".to_owned());
    let headers = request.headers().entries();
    let body = request
        .consume()
        .map_err(|()| "the request's body was taken already".to_owned())?;
    let bytes = read_body(&body).map_err(|e| format!("the request's body cannot be read: {e}"))?;
    Ok(Incoming {
        method,
        path,
        headers,
        body: bytes,
    })
}

/// Exports `handler` (a `fn(Incoming) -> Reply`) as the actor's HTTP
/// handler (`wasi:http/incoming-handler`). Requests reach it at
/// `/actors/{actor}/{key}/http/{path...}`.
///
/// ```ignore
/// fn webhook(request: burrow_sdk::http::Incoming) -> burrow_sdk::http::Reply {
///     burrow_sdk::http::Reply::text(200, "ok")
/// }
/// burrow_sdk::http_handler!(webhook);
/// ```
#[macro_export]
macro_rules! http_handler {
    ($handler:path) => {
        #[doc(hidden)]
        struct __BurrowHttpHandler;

        impl $crate::__wasip2::exports::wasi::http::incoming_handler::Guest for __BurrowHttpHandler {
            fn handle(
                request: $crate::__wasip2::http::types::IncomingRequest,
                out: $crate::__wasip2::http::types::ResponseOutparam,
            ) {
                $crate::http::serve(request, out, $handler)
            }
        }

        $crate::__wasip2::http::proxy::export!(__BurrowHttpHandler with_types_in $crate::__wasip2);
    };
}
