//! `ANY /actors/{actor}/{key}/http/{path...}`: a request for an actor's
//! own HTTP handler (`wasi:http/incoming-handler`, see
//! `cell/incoming.rs`). The guard lets it through with a client token for
//! the actor, or with none when the manifest says `public_http = true`
//! (a third party's webhook; the guest checks its signature). The guest
//! sees the method, the path after `/http` with the query, the headers
//! (less the hop-by-hop ones, Burrow's own, and the API token) and the
//! body, at most the actor's `http_max_request`; its response, at most
//! `http_max_response`, is answered after the commit.
//!
//! In a cluster, a request that reaches a host other than the instance's
//! goes on to that host like a call, its headers carried in one signed
//! header ([`HTTP_HEADERS_HEADER`]) and the answer's headers brought back.

use std::collections::HashMap;

use axum::Extension;
use axum::body::Body;
use axum::extract::{OriginalUri, Path, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;

use super::auth::BurrowToken;
use super::{ApiError, ApiResult, hop};
use crate::caller::Caller;
use crate::cell::{HttpAnswer, HttpRequest};
use crate::host::{HTTP_HEADERS_HEADER, Hop, Host};

/// Headers that belong to one connection, not to the request or the
/// response: never passed on (RFC 9110, 7.6.1), with `content-length`,
/// which the host sets itself.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
];

/// Whether `name` is one of Burrow's own headers (between hosts).
fn is_burrows(name: &HeaderName) -> bool {
    name.as_str().starts_with("x-burrow-")
}

/// The headers of a request that its handler sees; `Authorization` only
/// when it is the sender's own (a public actor's, and not an API token).
fn for_the_guest(headers: &HeaderMap, sender_authorization: bool) -> HeaderMap {
    headers
        .iter()
        .filter(|(name, _)| {
            !HOP_BY_HOP.contains(&name.as_str())
                && !is_burrows(name)
                && (sender_authorization || *name != axum::http::header::AUTHORIZATION)
        })
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// The path after `/actors/{actor}/{key}/http`, as the client wrote it
/// (still percent-encoded), with its query: `/` at the least.
fn guest_path(uri: &axum::http::Uri) -> String {
    let mut segments = uri.path().trim_start_matches('/').splitn(5, '/');
    let rest = segments.nth(4).unwrap_or("");
    let mut path = format!("/{rest}");
    if let Some(query) = uri.query() {
        path.push('?');
        path.push_str(query);
    }
    path
}

/// Headers as text for [`HTTP_HEADERS_HEADER`]: a JSON list of
/// `[name, hex of the value's bytes]` (a value may hold any byte a header
/// may).
fn encode_headers(headers: &HeaderMap) -> String {
    let pairs: Vec<(&str, String)> = headers
        .iter()
        .map(|(name, value)| (name.as_str(), hex::encode(value.as_bytes())))
        .collect();
    serde_json::to_string(&pairs).expect("strings serialize")
}

fn decode_headers(text: &str) -> Result<HeaderMap, ApiError> {
    let bad = |why: String| {
        ApiError::new(
            400,
            "invalid-body",
            format!("the {HTTP_HEADERS_HEADER} header is not acceptable: {why}"),
        )
    };
    let pairs: Vec<(String, String)> =
        serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    pairs
        .into_iter()
        .map(|(name, value)| {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| bad(e.to_string()))?;
            let bytes = hex::decode(&value).map_err(|e| bad(e.to_string()))?;
            let value = HeaderValue::from_bytes(&bytes).map_err(|e| bad(e.to_string()))?;
            Ok((name, value))
        })
        .collect()
}

/// The handler of both routes (`.../http` and `.../http/{*path}`).
pub(super) async fn incoming(
    State(host): State<Host>,
    Extension(caller): Extension<Caller>,
    Extension(OverTls(https)): Extension<OverTls>,
    Path(params): Path<HashMap<String, String>>,
    request: Request,
) -> ApiResult<Response> {
    let (parts, body) = request.into_parts();
    let (method, headers) = (parts.method, parts.headers);
    // Past the router's nesting, if any: the path the client sent.
    let uri = parts
        .extensions
        .get::<OriginalUri>()
        .map_or(parts.uri, |OriginalUri(uri)| uri.clone());
    let (Some(actor), Some(key)) = (params.get("actor"), params.get("key")) else {
        return Err(ApiError::new(
            500,
            "internal",
            "the route has no actor or key",
        ));
    };
    let max_request = host.http_max_request(actor)?;
    let body = axum::body::to_bytes(body, max_request as usize)
        .await
        .map_err(|e| {
            ApiError::new(
                413,
                "body-too-large",
                format!(
                    "the request's body is over {max_request} bytes (actor `{actor}`'s \
                     http_max_request), or could not be read: {e}"
                ),
            )
        })?;
    let hop = hop(&headers);
    // The sender's own Authorization reaches a public handler, unless it
    // is one of this server's tokens (the guard says so).
    let sender_authorization =
        host.has_public_http(actor) && parts.extensions.get::<BurrowToken>().is_none();
    let guest_headers = match (hop, headers.get(HTTP_HEADERS_HEADER)) {
        (Hop::Forwarded, Some(text)) => decode_headers(text.to_str().unwrap_or_default())?,
        _ => for_the_guest(&headers, sender_authorization),
    };
    let request = HttpRequest {
        method: method.clone(),
        path_and_query: guest_path(&uri),
        headers: guest_headers,
        body,
        https,
    };
    let path_and_query = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let (host, caller, request) = (&host, &caller, &request);
    let answer = host
        .route(
            hop,
            actor,
            key,
            || async move {
                host.incoming_http_as(caller.clone(), actor, key, request.clone())
                    .await
            },
            |base: String| async move {
                let forwarded = host
                    .forward(
                        &base,
                        request.method.clone(),
                        path_and_query,
                        None,
                        None,
                        // Made only for a request that goes on.
                        Some(encode_headers(&request.headers)),
                        caller,
                        request.body.clone(),
                        host.forward_timeout(actor, std::time::Duration::ZERO),
                    )
                    .await?;
                Ok(Ok(HttpAnswer {
                    status: StatusCode::from_u16(forwarded.status)
                        .unwrap_or(StatusCode::BAD_GATEWAY),
                    headers: forwarded.headers,
                    body: forwarded.body,
                }))
            },
        )
        .await?;
    Ok(respond(answer))
}

/// The handler's answer as the client gets it.
fn respond(answer: HttpAnswer) -> Response {
    let mut response = Response::new(Body::from(answer.body));
    *response.status_mut() = answer.status;
    let headers = response.headers_mut();
    for (name, value) in answer.headers.iter() {
        if !HOP_BY_HOP.contains(&name.as_str()) && !is_burrows(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    response
}

/// Whether the server serves over TLS (the scheme the guest sees).
#[derive(Clone, Copy)]
pub(super) struct OverTls(pub(super) bool);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_sees_the_path_after_http_as_written() {
        for (uri, path) in [
            ("/actors/a/k/http", "/"),
            ("/actors/a/k/http/", "/"),
            ("/actors/a/k/http/hook", "/hook"),
            ("/actors/a%2Fb/k%20x/http/x%2Fy/z?q=1&r", "/x%2Fy/z?q=1&r"),
            ("/actors/a/k/http?only=query", "/?only=query"),
        ] {
            let uri: axum::http::Uri = uri.parse().unwrap();
            assert_eq!(guest_path(&uri), path, "{uri}");
        }
    }

    #[test]
    fn the_api_token_and_connection_headers_stay_with_burrow() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("authorization", "Bearer secret"),
            ("connection", "keep-alive"),
            ("transfer-encoding", "chunked"),
            ("content-length", "5"),
            ("x-burrow-caller", "client"),
            ("x-signature", "t=1,v1=abc"),
            ("content-type", "application/json"),
        ] {
            headers.append(name, value.parse().unwrap());
        }
        let names =
            |h: HeaderMap| -> Vec<String> { h.keys().map(|k| k.as_str().to_owned()).collect() };
        assert_eq!(
            names(for_the_guest(&headers, false)),
            ["x-signature", "content-type"]
        );
        assert_eq!(
            names(for_the_guest(&headers, true)),
            ["authorization", "x-signature", "content-type"]
        );
        // Between hosts, every byte of every value goes as it came.
        headers.append("x-bytes", HeaderValue::from_bytes(b"caf\xe9").unwrap());
        let guest = for_the_guest(&headers, true);
        let text = encode_headers(&guest);
        let decoded = decode_headers(&text).unwrap_or_else(|_| panic!("{text} decodes"));
        assert_eq!(decoded, guest);
    }
}
