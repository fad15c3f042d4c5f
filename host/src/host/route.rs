//! In a cluster, every host accepts every request: one for an instance
//! another member owns is forwarded to that member over HTTP, as it came
//! (the front end's requests) or as a call or a send (guest code's).
//!
//! [`Host::route`] decides: the instance is served here when this host
//! holds its lease or takes it (no live owner); else the request goes to
//! the owner. A forwarded request carries [`FORWARDED_HEADER`], and the
//! host that receives it serves it or answers `moved`, never forwards it
//! again, so that no request travels in circles. A call between actors
//! carries its chain of callers in [`CHAIN_HEADER`], so that a cycle is
//! refused across hosts as on one.
//!
//! When the owner cannot be reached before anything was sent (it died),
//! or answers `moved` (the lease changed hands), the host looks the owner
//! up again and retries, until the dead owner's lease and its margin have
//! run out and the instance can be taken over: a failover costs the
//! caller that wait, not an error. A request that reached the owner and
//! got no answer is not retried (it may have been applied): its caller
//! hears that its outcome is unknown.

use std::future::Future;
use std::time::{Duration, Instant};

use burrow_client::{ErrorBody, GuestFailure, SendBody, route};
use reqwest::{Method, StatusCode};

use super::signature::{CALLER_HEADER, Claim, HTTP_HEADERS_HEADER, SIGNATURE_HEADER, Signature};
use crate::address::Address;
use crate::caller::Caller;
use crate::error::Error;
use crate::{SendOptions, SendOutcome};

use super::Host;

/// Marks a request forwarded by another host (its value: that host's id).
pub const FORWARDED_HEADER: &str = "x-burrow-forwarded";
/// The chain of a call between actors: a JSON array of `[actor, key]`.
pub const CHAIN_HEADER: &str = "x-burrow-chain";
/// How long establishing a connection to another host may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The pause before looking an unreachable owner up again.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Where a request came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// A client of this host, or guest code on it: forwarded if need be.
    Origin,
    /// Another host forwarded it: served here, or answered `moved`.
    Forwarded,
}

/// Why a request sent to another host got no answer of its own.
#[derive(Debug)]
pub enum Unreached {
    /// Nothing was sent (no connection), or the host answered that it does
    /// not own the instance: look the owner up again and retry.
    Retry(String),
    /// The request was sent and no answer came: it may have been applied.
    Unknown(String),
}

/// An answer of another host, as it came.
#[derive(Debug)]
pub struct Forwarded {
    /// Its HTTP status.
    pub status: u16,
    /// Its content type.
    pub content_type: Option<String>,
    /// Its headers (the content type among them).
    pub headers: reqwest::header::HeaderMap,
    /// Its body.
    pub body: bytes::Bytes,
}

/// The HTTP client a host forwards with (connections to other hosts are
/// kept open between requests; `https://` ones verified with the
/// cluster's trust).
pub(super) struct Forwarder {
    client: reqwest::Client,
    trust: burrow_client::Trust,
}

impl Forwarder {
    pub(super) fn new(trust: &burrow_client::Trust) -> Forwarder {
        Forwarder {
            trust: trust.clone(),
            client: trust
                .http_client()
                .connect_timeout(CONNECT_TIMEOUT)
                .tcp_nodelay(true)
                .build()
                .unwrap_or_default(),
        }
    }
}

impl Host {
    /// The owner of (`actor`, `key`) if another member serves it; `None`
    /// when it is served here (this host holds, or has just taken, its
    /// lease, with its file current). Always `None` on a host alone.
    pub async fn locate(&self, actor: &str, key: &str) -> Result<Option<Owner>, Error> {
        if self.core.store.cluster().is_none() {
            return Ok(None);
        }
        let spec = self.core.listed(actor, key)?;
        let address = self.core.address_of(&spec, key);
        if let Some(owner) = self.core.store.known_owner(&address)
            && owner.live
        {
            return Ok(Some(Owner {
                id: owner.id,
                address: owner.address,
            }));
        }
        match self.core.claim_to_serve(&address).await {
            Ok(()) => Ok(None),
            Err(Error::Moved { owner, address, .. }) => Ok(Some(Owner { id: owner, address })),
            Err(e) => Err(e),
        }
    }

    /// The longest a request waits for an unreachable owner's instances to
    /// be taken over: a lease, its margin and a heartbeat.
    fn failover_bound(&self) -> Duration {
        match self.core.store.cluster() {
            Some(cluster) => {
                let config = cluster.config();
                config.lease + config.margin * 2 + config.heartbeat
            }
            None => Duration::ZERO,
        }
    }

    /// Serves a request for (`actor`, `key`): `here` if it is served on
    /// this host, else `there` with the owner's base URL (see the module
    /// docs).
    pub async fn route<T, Here, There>(
        &self,
        hop: Hop,
        actor: &str,
        key: &str,
        mut here: impl FnMut() -> Here,
        mut there: impl FnMut(String) -> There,
    ) -> Result<T, Error>
    where
        Here: Future<Output = Result<T, Error>>,
        There: Future<Output = Result<Result<T, Error>, Unreached>>,
    {
        let until = Instant::now() + self.failover_bound();
        loop {
            let owner = match self.locate(actor, key).await? {
                None => match here().await {
                    // The lease went elsewhere meanwhile.
                    Err(Error::Moved { .. }) if hop == Hop::Origin && Instant::now() < until => {
                        continue;
                    }
                    other => return other,
                },
                Some(owner) => owner,
            };
            let moved = || Error::Moved {
                actor: actor.into(),
                key: key.into(),
                owner: owner.id.clone(),
                address: owner.address.clone(),
                live: true,
            };
            if hop == Hop::Forwarded {
                return Err(moved());
            }
            // This host's address, under an id of before: a run of this
            // host that ended (killed) and whose lease has yet to run out.
            let answer = if self.is_own_address(&owner.address) {
                Err(Unreached::Retry(format!(
                    "its lease is still held by {}, an earlier run of this host",
                    owner.id
                )))
            } else {
                there(owner.address.clone()).await
            };
            match answer {
                Ok(answer) => return answer,
                Err(Unreached::Retry(why)) => {
                    self.forget_owner(actor, key);
                    if Instant::now() >= until {
                        return Err(Error::ClusterUnavailable(format!(
                            "`{actor}/{key}` is served by host {} at {}, which cannot be reached: {why}",
                            owner.id, owner.address
                        )));
                    }
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                Err(Unreached::Unknown(why)) => {
                    self.forget_owner(actor, key);
                    return Err(Error::ClusterUnavailable(format!(
                        "`{actor}/{key}` is served by host {} at {}, which failed before it answered ({why}); the request may or may not have been applied",
                        owner.id, owner.address
                    )));
                }
            }
        }
    }

    /// Whether `address` is the one this host is reached at.
    fn is_own_address(&self, address: &str) -> bool {
        self.core.store.cluster().is_some_and(|cluster| {
            cluster.config().advertise.trim_end_matches('/') == address.trim_end_matches('/')
        })
    }

    fn forget_owner(&self, actor: &str, key: &str) {
        self.core.store.forget_owner(&Address {
            actor: actor.into(),
            key: key.into(),
        });
    }

    /// This host's id in its cluster (empty on a host alone).
    pub fn member_id(&self) -> String {
        self.core
            .store
            .cluster()
            .map(|cluster| cluster.member().id)
            .unwrap_or_default()
    }

    /// How long a request for an instance of `actor` forwarded to another
    /// host may take, past what the request itself waits for (`extra`):
    /// the actor's call timeout, then a lease and its margins. A host
    /// that has not answered by then was paused or cut off, and its
    /// instances are another's.
    pub fn forward_timeout(&self, actor: &str, extra: Duration) -> Duration {
        self.core.call_timeout(actor) + extra + self.failover_bound()
    }

    /// Sends a request to the host at `base` as it came: `path_and_query`
    /// with `method`, `content_type` and `body`, for `caller`, signed; its
    /// answer must come within `timeout`. `http_headers` are the headers
    /// of a request for an actor's HTTP handler ([`HTTP_HEADERS_HEADER`]).
    #[allow(clippy::too_many_arguments)]
    pub async fn forward(
        &self,
        base: &str,
        method: Method,
        path_and_query: &str,
        content_type: Option<&str>,
        chain: Option<String>,
        http_headers: Option<String>,
        caller: &Caller,
        body: bytes::Bytes,
        timeout: Duration,
    ) -> Result<Forwarded, Unreached> {
        let url = format!("{}{path_and_query}", base.trim_end_matches('/'));
        let member = self.member_id();
        let caller = caller_header(caller);
        let signature = Claim {
            method: method.as_str(),
            path_and_query,
            forwarded: &member,
            chain: chain.as_deref().unwrap_or(""),
            caller: &caller,
            http_headers: http_headers.as_deref().unwrap_or(""),
            body: &body,
        }
        .sign(self.cluster_secret());
        let mut request = self
            .forwarder
            .client
            .request(method, &url)
            .header(FORWARDED_HEADER, member)
            .header(CALLER_HEADER, caller)
            .header(SIGNATURE_HEADER, signature)
            .timeout(timeout)
            .body(body);
        if let Some(content_type) = content_type {
            request = request.header(reqwest::header::CONTENT_TYPE, content_type);
        }
        if let Some(chain) = chain {
            request = request.header(CHAIN_HEADER, chain);
        }
        if let Some(http_headers) = http_headers {
            request = request.header(HTTP_HEADERS_HEADER, http_headers);
        }
        let response = request.send().await.map_err(|e| {
            if e.is_connect() {
                Unreached::Retry(e.to_string())
            } else {
                Unreached::Unknown(e.to_string())
            }
        })?;
        let status = response.status();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let headers = response.headers().clone();
        let body = response
            .bytes()
            .await
            .map_err(|e| Unreached::Unknown(e.to_string()))?;
        if status == StatusCode::SERVICE_UNAVAILABLE
            && let Ok(error) = serde_json::from_slice::<ErrorBody>(&body)
            && matches!(error.error.code.as_str(), "moved" | "shutting-down")
        {
            // Nothing was done there: the owner changed, or is leaving.
            return Err(Unreached::Retry(error.error.message));
        }
        Ok(Forwarded {
            status: status.as_u16(),
            content_type,
            headers,
            body,
        })
    }

    /// Calls `action` on (`actor`, `key`) at the host at `base`, for
    /// `caller` (signed, so that the host there believes it), with the
    /// chain `chain` of calling instances.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn forward_call(
        &self,
        base: &str,
        caller: &Caller,
        chain: &[Address],
        actor: &str,
        key: &str,
        action: &str,
        args: &str,
    ) -> Result<Result<String, Error>, Unreached> {
        let path = route::path(route::ACTION, &[actor, key, action]);
        let chain: Vec<[&str; 2]> = chain.iter().map(|a| [&*a.actor, &*a.key]).collect();
        let chain = serde_json::to_string(&chain).expect("strings serialize");
        let answer = self
            .forward(
                base,
                Method::POST,
                &path,
                Some("application/json"),
                Some(chain),
                None,
                caller,
                bytes::Bytes::copy_from_slice(args.as_bytes()),
                self.forward_timeout(actor, Duration::ZERO),
            )
            .await?;
        Ok(match answer.status {
            200 => String::from_utf8(answer.body.to_vec())
                .map_err(|_| remote_garbage(actor, key, "a result that is not UTF-8")),
            _ => Err(remote_error(actor, key, &answer)),
        })
    }

    /// Sends an event to (`actor`, `key`) at the host at `base`.
    pub(super) async fn forward_send(
        &self,
        base: &str,
        actor: &str,
        key: &str,
        event_type: &str,
        payload: &str,
        options: &SendOptions,
    ) -> Result<Result<SendOutcome, Error>, Unreached> {
        let path = route::path(route::QUEUE, &[actor, key]);
        let payload: Box<serde_json::value::RawValue> =
            serde_json::value::RawValue::from_string(payload.to_owned())
                .map_err(|e| Unreached::Unknown(format!("the payload is not JSON: {e}")))?;
        let body = serde_json::to_vec(&SendBody::new(event_type, payload, options))
            .expect("a send body serializes");
        let answer = self
            .forward(
                base,
                Method::POST,
                &path,
                Some("application/json"),
                None,
                None,
                &Caller::Host,
                bytes::Bytes::from(body),
                self.forward_timeout(actor, options.wait.unwrap_or_default()),
            )
            .await?;
        Ok(match answer.status {
            200..=299 => serde_json::from_slice::<SendOutcome>(&answer.body).map_err(|e| {
                remote_garbage(
                    actor,
                    key,
                    &format!("an answer that is not a send outcome ({e})"),
                )
            }),
            _ => Err(remote_error(actor, key, &answer)),
        })
    }
}

/// The value of [`CALLER_HEADER`] for `caller`: hex of its JSON (a key
/// may hold what a header may not).
pub(crate) fn caller_header(caller: &Caller) -> String {
    hex::encode(serde_json::to_vec(caller).expect("a caller serializes"))
}

/// The caller a [`CALLER_HEADER`] value names.
pub(crate) fn caller_from_header(value: &str) -> Result<Caller, String> {
    let json = hex::decode(value).map_err(|_| format!("{CALLER_HEADER} is not hex"))?;
    serde_json::from_slice(&json).map_err(|e| format!("{CALLER_HEADER} names no caller: {e}"))
}

impl Host {
    /// What this host trusts in the other hosts' `https://` and `wss://`
    /// addresses.
    pub(crate) fn cluster_trust(&self) -> &burrow_client::Trust {
        &self.forwarder.trust
    }

    /// The key this host signs its requests to other hosts with (empty on
    /// a host alone, which forwards nothing).
    pub(crate) fn cluster_secret(&self) -> &[u8] {
        self.core.store.cluster().map_or(&[], |c| c.secret())
    }

    /// What can be checked of a request claiming to come from another host
    /// of the cluster before its body is read: that this host is in a
    /// cluster, and its signature's form and time. `Err` says why it
    /// cannot hold.
    pub(crate) fn read_peer_signature(&self, signature: &str) -> Result<Signature, String> {
        if self.core.store.cluster().is_none() {
            return Err("this host runs alone: no other host forwards to it".into());
        }
        Signature::read(self.cluster_secret(), signature)
    }

    /// Checks that a request claiming to come from another host of the
    /// cluster does, with its body: `Err` says why not.
    pub(crate) fn verify_peer(
        &self,
        claim: &Claim<'_>,
        signature: &Signature,
    ) -> Result<(), String> {
        claim.holds(self.cluster_secret(), signature)
    }
}

/// The host of the cluster that serves an instance.
#[derive(Debug, Clone)]
pub struct Owner {
    /// Its id.
    pub id: String,
    /// Its base URL.
    pub address: String,
}

fn remote_garbage(actor: &str, key: &str, what: &str) -> Error {
    Error::ClusterUnavailable(format!(
        "the host that serves `{actor}/{key}` answered with {what}"
    ))
}

/// The error another host answered with, as this host would have made it
/// where it can be rebuilt (a failure of the actor's code keeps its code).
pub(crate) fn remote_error(actor: &str, key: &str, answer: &Forwarded) -> Error {
    let Ok(body) = serde_json::from_slice::<ErrorBody>(&answer.body) else {
        return remote_garbage(
            actor,
            key,
            &format!("status {} and no error", answer.status),
        );
    };
    let detail = body.error;
    match (detail.code.as_str(), detail.guest) {
        (
            "action-failed",
            Some(GuestFailure {
                during,
                code,
                message,
            }),
        ) => Error::Failed {
            actor: actor.into(),
            key: key.into(),
            during,
            code,
            message,
        },
        ("connection-refused", Some(GuestFailure { code, message, .. })) => {
            Error::ConnectionRefused {
                actor: actor.into(),
                key: key.into(),
                code,
                message,
            }
        }
        _ => Error::Remote {
            status: answer.status,
            code: detail.code,
            message: detail.message,
        },
    }
}
