//! A request to one instance (`/actors/{actor}/{key}/...`): served here
//! when this host serves the instance, else passed on as it came to the
//! host of the cluster that does, and its answer passed back.
//!
//! A handler takes a [`Routed`] (the instance's address and what passing
//! the request on needs of it) and gives [`Routed::serve`] what to do
//! here, or [`Routed::view`] the read that makes the JSON it answers.

use std::future::Future;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{FromRequestParts, OriginalUri, Path};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use super::{ApiError, ApiResult, hop};
use crate::caller::Caller;
use crate::error::Error;
use crate::host::{Forwarded, Hop, Host};

/// A request to the instance (`actor`, `key`), as its route took it: with
/// an empty body, which a route that takes one puts in with
/// [`Routed::with_body`].
pub(super) struct Routed {
    pub(super) actor: String,
    pub(super) key: String,
    pub(super) hop: Hop,
    caller: Caller,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
}

/// The segments of the path every route of one instance has; the others
/// (an action, a table, a dead letter's id) are the handler's to read.
#[derive(serde::Deserialize)]
struct InstancePath {
    actor: String,
    key: String,
}

impl<S: Send + Sync> FromRequestParts<S> for Routed {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Routed, ApiError> {
        let Path(InstancePath { actor, key }) =
            Path::<InstancePath>::from_request_parts(parts, state).await?;
        // The guard (`http/auth.rs`) puts the caller on every routed request.
        let caller = parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
            ApiError::new(
                500,
                "internal",
                "the request reached its route without a caller",
            )
        })?;
        let uri = parts
            .extensions
            .get::<OriginalUri>()
            .map_or_else(|| parts.uri.clone(), |OriginalUri(uri)| uri.clone());
        Ok(Routed {
            actor,
            key,
            hop: hop(&parts.headers),
            caller,
            method: parts.method.clone(),
            uri,
            headers: parts.headers.clone(),
            body: Bytes::new(),
        })
    }
}

impl Routed {
    /// The request with its body, which is passed on with it.
    pub(super) fn with_body(self, body: Bytes) -> Routed {
        Routed { body, ..self }
    }

    /// The request's body.
    pub(super) fn body(&self) -> &Bytes {
        &self.body
    }

    /// Serves the request with `here` (given the host, the actor and the
    /// key) on this host, or passes it on as it came to the host of the
    /// cluster that serves the instance, and its answer back.
    pub(super) async fn serve<'a, Here>(
        &'a self,
        host: &'a Host,
        mut here: impl FnMut(&'a Host, &'a str, &'a str) -> Here,
    ) -> ApiResult<Response>
    where
        Here: Future<Output = Result<Response, Error>>,
    {
        let (actor, key) = (self.actor.as_str(), self.key.as_str());
        let there = move |base: String| async move {
            let path = self
                .uri
                .path_and_query()
                .map_or(self.uri.path(), |p| p.as_str());
            let content_type = self
                .headers
                .get(axum::http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok());
            host.forward(
                &base,
                self.method.clone(),
                path,
                content_type,
                None,
                None,
                &self.caller,
                self.body.clone(),
                host.forward_timeout(actor, Duration::ZERO),
            )
            .await
            .map(|answer| Ok(passed_on(answer)))
        };
        Ok(host
            .route(self.hop, actor, key, || here(host, actor, key), there)
            .await?)
    }

    /// Answers with the JSON of a read of the instance's database, on the
    /// host that serves it ([`Routed::serve`]), the read (bounded, but
    /// blocking) and its serialization on a blocking thread
    /// ([`off_the_workers`]).
    pub(super) async fn view<T: serde::Serialize>(
        &self,
        host: &Host,
        read: impl FnOnce(&Host, &str, &str) -> Result<T, Error> + Clone + Send + 'static,
    ) -> ApiResult<Response> {
        self.serve(host, |host, actor, key| {
            let (host, actor, key, read) =
                (host.clone(), actor.to_owned(), key.to_owned(), read.clone());
            async move {
                let answer = off_the_workers(move || {
                    let view = read(&host, &actor, &key)?;
                    Ok(axum::Json(view).into_response())
                })
                .await;
                // An error of the read itself is its answer.
                Ok(answer.unwrap_or_else(IntoResponse::into_response))
            }
        })
        .await
    }
}

/// The answer of another host, passed on.
fn passed_on(answer: Forwarded) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut response = (status, answer.body).into_response();
    if let Some(content_type) = answer
        .content_type
        .and_then(|v| axum::http::HeaderValue::from_str(&v).ok())
    {
        response
            .headers_mut()
            .insert(axum::http::header::CONTENT_TYPE, content_type);
    }
    response
}

/// Runs a read of an instance's database (bounded, but blocking) on a
/// blocking thread, so that it never holds an async worker.
async fn off_the_workers<T: Send + 'static>(
    read: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> ApiResult<T> {
    match tokio::task::spawn_blocking(read).await {
        Ok(result) => Ok(result?),
        Err(e) => Err(ApiError::new(
            500,
            "storage",
            format!("the read failed: {e}"),
        )),
    }
}
