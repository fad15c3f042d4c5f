//! Incoming HTTP to an actor: a request to `/actors/{actor}/{key}/http/...`
//! runs the instance's `wasi:http/incoming-handler` (see
//! `cell/incoming.rs`), creating the instance if needed, as a call does.

use crate::caller::Caller;
use crate::cell::{HttpAnswer, HttpRequest, Origin};
use crate::config::MAX_ARGS_BYTES;
use crate::error::Error;
use crate::runtime::ConflictRetry;

use super::Host;

impl Host {
    /// Runs the incoming HTTP handler of (`actor`, `key`) on `request` for
    /// `caller`, in one transaction; the answer comes after the commit.
    pub(crate) async fn incoming_http_as(
        &self,
        caller: Caller,
        actor: &str,
        key: &str,
        request: HttpRequest,
    ) -> Result<HttpAnswer, Error> {
        let def = self.core.resolve_ready(actor, key).await?;
        if !def.pre.has_incoming_http() {
            return Err(Error::NoHttpHandler(actor.into()));
        }
        let max_response = def.options.http_max_response;
        let (caller, request) = (&caller, &request);
        ConflictRetry::run(def.options.call_timeout, || {
            self.core
                .with_cell(actor, key, Origin::CreateIfMissing("null"), async |cell| {
                    cell.incoming_http(request.clone(), caller, max_response)
                        .await
                })
        })
        .await
    }

    /// Whether `actor`'s incoming HTTP handler may be reached without a
    /// token (manifest `public_http`).
    pub(crate) fn has_public_http(&self, actor: &str) -> bool {
        self.core
            .spec(actor)
            .is_some_and(|spec| spec.options.public_http)
    }

    /// The largest body of a request for `actor`'s HTTP handler.
    pub(crate) fn http_max_request(&self, actor: &str) -> Result<u64, Error> {
        self.core
            .spec(actor)
            .map(|spec| spec.options.http_max_request)
            .ok_or_else(|| Error::UnknownActor(actor.into()))
    }

    /// The largest body a request forwarded by another host may have: a
    /// call's arguments, or a request for an actor's HTTP handler.
    pub(crate) fn max_peer_body(&self) -> usize {
        let largest_http = self.core.largest_http_max_request();
        MAX_ARGS_BYTES.max(usize::try_from(largest_http).unwrap_or(usize::MAX))
    }
}
