//! `GET /actors/{actor}/{key}/connect`: a client's WebSocket to an
//! instance. The connect hook runs (here, or at the host of the cluster
//! that serves the instance, with frames passed through this host), then
//! the instance's events go out to the client until either side closes,
//! and the disconnect hook runs.
//!
//! A client that cannot send an `Authorization` header (a browser) may
//! connect without one to a server that checks tokens: its first message
//! must then be `{"token": "..."}`, within [`FIRST_MESSAGE_TIMEOUT`]. A
//! refusal is then one text frame, the JSON error the request would have
//! been answered with, and a close frame (1008, policy violation). Such
//! WebSockets are capped while they wait (`gate.rs`): past the cap of its
//! address the upgrade is answered 429 `rate-limited`, past the server's
//! 503 `too-many-connections`.
//!
//! An open WebSocket keeps its connection's places (its [`Ticket`]) until
//! it closes.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Extension, OriginalUri, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tokio::sync::OwnedSemaphorePermit;

use super::auth::Access;
use super::gate::{Refused, Ticket, TokenWait};
use super::{ApiError, ApiResult, hop};
use crate::caller::Caller;
use crate::client::{Hello, Lagged};
use crate::config::{FIRST_MESSAGE_TIMEOUT, MAX_CLIENT_MESSAGE_BYTES};
use crate::connections::{Connection, Received};
use crate::error::Error;
use crate::host::{
    CALLER_HEADER, Claim, FORWARDED_HEADER, Hop, Host, SIGNATURE_HEADER, caller_header,
};
use crate::text::escaped;

/// The query of a connect request.
#[derive(serde::Deserialize)]
pub(super) struct ConnectQuery {
    /// The connection parameters, JSON text.
    params: Option<String>,
}

/// What a connection asks for.
struct Asked {
    host: Host,
    hop: Hop,
    actor: String,
    key: String,
    params: String,
    uri: Uri,
}

/// The owner's end of a connection passed on to another host.
type OwnerSocket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A connection, opened.
enum Opened {
    /// Here: its connect hook committed.
    Here(OpenConnection),
    /// At the host that serves the instance.
    There(Box<OwnerSocket>),
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn connect(
    State(host): State<Host>,
    Extension(access): Extension<Access>,
    caller: Option<Extension<Caller>>,
    ticket: Option<Extension<Arc<Ticket>>>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    path: Result<Path<(String, String)>, PathRejection>,
    query: Result<Query<ConnectQuery>, QueryRejection>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    let Path((actor, key)) = path?;
    let Query(query) = query.map_err(|e| {
        ApiError::new(
            400,
            "invalid-arguments",
            format!("the query is not acceptable: {e}"),
        )
    })?;
    let upgrade = upgrade
        .map_err(|e| {
            ApiError::new(
                426,
                "not-a-websocket",
                format!("connect is a WebSocket endpoint: {e}"),
            )
        })?
        .read_buffer_size(MAX_CLIENT_MESSAGE_BYTES)
        .max_message_size(MAX_CLIENT_MESSAGE_BYTES)
        .max_frame_size(MAX_CLIENT_MESSAGE_BYTES)
        .write_buffer_size(0);
    let asked = Asked {
        host,
        hop: hop(&headers),
        actor,
        key,
        params: query.params.unwrap_or_else(|| "null".into()),
        uri,
    };
    let ticket = ticket.map(|Extension(ticket)| ticket);
    let Some(Extension(caller)) = caller else {
        // No token yet: it comes as the first message, if there is room
        // to wait for it.
        let wait = match &ticket {
            Some(ticket) => Some(
                ticket
                    .wait_for_token()
                    .map_err(|refused| token_wait_refused(refused, ticket.limits()))?,
            ),
            None => None,
        };
        return Ok(upgrade
            .on_upgrade(move |socket| after_first_message(asked, access, socket, ticket, wait)));
    };
    // Counted at the host the client is connected to, not again where its
    // connection is passed on to.
    let permit = match asked.hop {
        Hop::Origin => access.connection_permit(&caller)?,
        Hop::Forwarded => None,
    };
    Ok(match open(&asked, caller).await {
        Ok(Opened::Here(open)) => upgrade.on_upgrade(move |socket| async move {
            let _places = ticket;
            serve_connection(open, socket, permit).await
        }),
        Ok(Opened::There(owner)) => upgrade.on_upgrade(move |socket| async move {
            let _places = ticket;
            pass_frames(socket, *owner, permit).await
        }),
        Err(refused) => refused,
    })
}

/// The answer to an upgrade without a token past a cap on those waiting
/// for theirs.
fn token_wait_refused(refused: Refused, limits: &crate::config::HttpLimits) -> ApiError {
    let (status, code) = if refused.by_address() {
        (429, "rate-limited")
    } else {
        (503, "too-many-connections")
    };
    ApiError::new(
        status,
        code,
        format!(
            "{}: send the token in an Authorization header, or retry later",
            refused.describe(limits)
        ),
    )
}

/// Opens the connection `asked` for, for `caller`: here, or at the host
/// that serves the instance. A refusal is the answer to send.
async fn open(asked: &Asked, caller: Caller) -> Result<Opened, Response> {
    let Asked {
        host,
        actor,
        key,
        params,
        ..
    } = asked;
    let owner = host
        .locate(actor, key)
        .await
        .map_err(|e| ApiError::from(e).into_response())?;
    if let Some(owner) = owner {
        if asked.hop == Hop::Forwarded {
            return Err(ApiError::from(Error::Moved {
                actor: actor.clone(),
                key: key.clone(),
                owner: owner.id,
                address: owner.address,
                live: true,
            })
            .into_response());
        }
        return dial_owner(host, actor, &owner.address, &asked.uri, &caller)
            .await
            .map(|owner| Opened::There(Box::new(owner)));
    }
    let connection = host
        .connect_as(caller, actor, key, params)
        .await
        .map_err(|e| ApiError::from(e).into_response())?;
    // From here the connect hook has committed: the disconnect hook runs
    // whatever happens, also when the upgrade fails (the callback is then
    // dropped, and the connection with it).
    Ok(Opened::Here(OpenConnection {
        host: host.clone(),
        actor: actor.clone(),
        key: key.clone(),
        connection: Some(connection),
    }))
}

/// Waits for the token a connection without one must send first (holding
/// `wait`, its place among those waiting), then opens the connection for
/// the caller it proves.
async fn after_first_message(
    asked: Asked,
    access: Access,
    mut socket: WebSocket,
    ticket: Option<Arc<Ticket>>,
    wait: Option<TokenWait>,
) {
    let first = tokio::time::timeout(FIRST_MESSAGE_TIMEOUT, socket.recv()).await;
    drop(wait);
    let admitted = match first {
        Ok(Some(Ok(Message::Text(text)))) => {
            access.admit_first_message(text.as_str(), &asked.actor)
        }
        Ok(Some(Ok(_))) => Err(ApiError::new(
            401,
            "unauthenticated",
            "the first message must be the text {\"token\": \"...\"} on this server",
        )),
        Ok(_) => return,
        Err(_) => Err(ApiError::new(
            401,
            "unauthenticated",
            format!(
                "no token came within {} s of connecting",
                FIRST_MESSAGE_TIMEOUT.as_secs()
            ),
        )),
    };
    if admitted.is_ok()
        && let Some(ticket) = &ticket
    {
        ticket.authenticated();
    }
    let opened = match admitted.and_then(|caller| {
        access
            .connection_permit(&caller)
            .map(|permit| (caller, permit))
    }) {
        Ok((caller, permit)) => open(&asked, caller).await.map(|opened| (opened, permit)),
        Err(refused) => Err(refused.into_response()),
    };
    match opened {
        Ok((Opened::Here(open), permit)) => serve_connection(open, socket, permit).await,
        Ok((Opened::There(owner), permit)) => pass_frames(socket, *owner, permit).await,
        Err(refused) => refuse(socket, refused).await,
    }
}

/// Tells a client its connection was refused: the answer's JSON as a
/// text frame, then a close frame.
async fn refuse(mut socket: WebSocket, refused: Response) {
    let body = axum::body::to_bytes(refused.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body).into_owned();
    let _ = socket.send(Message::Text(text.into())).await;
    let close = CloseFrame {
        code: 1008,
        reason: "refused".into(),
    };
    let _ = socket.send(Message::Close(Some(close))).await;
}

/// Connects to the host of the cluster that serves the instance, for
/// `caller` (signed): the connect hook runs there, and frames pass through
/// this host both ways until either side closes. A refusal there (a status
/// other than 101) is the answer to send.
async fn dial_owner(
    host: &Host,
    actor: &str,
    base: &str,
    uri: &Uri,
    caller: &Caller,
) -> Result<OwnerSocket, Response> {
    use tokio_tungstenite::tungstenite;
    use tungstenite::client::IntoClientRequest;

    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let target = format!(
        "{}{path}",
        base.trim_end_matches('/')
            .replacen("http://", "ws://", 1)
            .replacen("https://", "wss://", 1)
    );
    let unreachable = |why: String| {
        ApiError::from(Error::ClusterUnavailable(format!(
            "the host that serves this instance, at {base}, cannot be reached: {why}"
        )))
        .into_response()
    };
    let mut request = target
        .into_client_request()
        .map_err(|e| unreachable(e.to_string()))?;
    let member = host.member_id();
    let caller = caller_header(caller);
    let signature = Claim {
        method: "GET",
        path_and_query: path,
        forwarded: &member,
        chain: "",
        caller: &caller,
        http_headers: "",
        body: &[],
    }
    .sign(host.cluster_secret());
    for (name, value) in [
        (FORWARDED_HEADER, member),
        (CALLER_HEADER, caller),
        (SIGNATURE_HEADER, signature),
    ] {
        let value = axum::http::HeaderValue::from_str(&value)
            .map_err(|e| unreachable(format!("{name} cannot be sent: {e}")))?;
        request.headers_mut().insert(name, value);
    }
    let config = tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(crate::config::MAX_BROADCAST_BYTES * 4))
        .max_frame_size(Some(crate::config::MAX_BROADCAST_BYTES * 4));
    let timeout = host.forward_timeout(actor, Duration::ZERO);
    let connected = tokio::time::timeout(
        timeout,
        tokio_tungstenite::connect_async_tls_with_config(
            request,
            Some(config),
            true,
            base.starts_with("https://")
                .then(|| host.cluster_trust().connector()),
        ),
    )
    .await
    .map_err(|_| unreachable(format!("no answer within {} ms", timeout.as_millis())))?;
    match connected {
        Ok((owner, _)) => Ok(owner),
        Err(tungstenite::Error::Http(answer)) => {
            let status =
                StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let body = answer.into_body().unwrap_or_default();
            Err((
                status,
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                body,
            )
                .into_response())
        }
        Err(e) => Err(unreachable(e.to_string())),
    }
}

/// Passes frames between a client and the host that serves its
/// connection until either closes.
async fn pass_frames(
    mut client: WebSocket,
    mut owner: OwnerSocket,
    _permit: Option<OwnedSemaphorePermit>,
) {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message as Frame;
    loop {
        tokio::select! {
            from_owner = owner.next() => match from_owner {
                Some(Ok(Frame::Text(text))) => {
                    if client.send(Message::Text(text.as_str().into())).await.is_err() {
                        break;
                    }
                }
                Some(Ok(Frame::Binary(bytes))) => {
                    if client.send(Message::Binary(bytes)).await.is_err() {
                        break;
                    }
                }
                Some(Ok(Frame::Ping(_) | Frame::Pong(_) | Frame::Frame(_))) => {}
                Some(Ok(Frame::Close(_)) | Err(_)) | None => {
                    let _ = client.send(Message::Close(None)).await;
                    break;
                }
            },
            from_client = client.recv() => match from_client {
                Some(Ok(Message::Close(_)) | Err(_)) | None => {
                    let _ = owner.close(None).await;
                    break;
                }
                // Clients only listen; what else they send is not passed on.
                Some(Ok(_)) => {}
            },
        }
    }
}

/// A connection whose connect hook committed. Its disconnect hook runs
/// once, when it is closed, or (in a task of its own) when it is dropped
/// unclosed: a failed upgrade, a task cancelled.
struct OpenConnection {
    host: Host,
    actor: String,
    key: String,
    connection: Option<Connection>,
}

impl OpenConnection {
    fn connection(&mut self) -> &mut Connection {
        self.connection.as_mut().expect("open until closed")
    }

    /// Unregisters the connection and runs the disconnect hook.
    async fn close(mut self) {
        if let Some(connection) = self.connection.take() {
            disconnect(&self.host, &self.actor, &self.key, connection).await;
        }
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        let Some(connection) = self.connection.take() else {
            return;
        };
        let id = connection.id;
        let (host, actor, key) = (
            self.host.clone(),
            std::mem::take(&mut self.actor),
            std::mem::take(&mut self.key),
        );
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move { disconnect(&host, &actor, &key, connection).await });
            }
            Err(_) => tracing::warn!(
                actor = actor.as_str(),
                key = key.as_str(),
                connection = id,
                "the disconnect hook cannot run: the runtime is gone"
            ),
        }
    }
}

/// Unregisters `connection` and runs its disconnect hook.
async fn disconnect(host: &Host, actor: &str, key: &str, connection: Connection) {
    let id = connection.id;
    match host.disconnect(actor, key, connection).await {
        Ok(()) | Err(Error::NoSuchInstance { .. } | Error::ShuttingDown) => {}
        Err(e) => {
            tracing::warn!(actor, key, connection = id, error = %escaped(&e), "the disconnect hook failed")
        }
    }
}

/// Sends the instance's events to one client until either side closes,
/// then runs the disconnect hook. `_permit` holds the connection's place
/// among its token's until then.
async fn serve_connection(
    mut open: OpenConnection,
    mut socket: WebSocket,
    _permit: Option<OwnedSemaphorePermit>,
) {
    let connection = open.connection();
    let id = connection.id;
    let hello = serde_json::to_string(&Hello { connected: id }).expect("a frame serializes");
    if socket.send(Message::Text(hello.into())).await.is_ok() {
        loop {
            tokio::select! {
                received = connection.next() => {
                    let text = match received {
                        Received::Frame(frame) => frame.to_string(),
                        Received::Lagged(missed) => serde_json::to_string(&Lagged { lagged: missed })
                            .expect("a frame serializes"),
                        Received::Closed => {
                            let _ = socket.send(Message::Close(None)).await;
                            break;
                        }
                    };
                    if socket.send(Message::Text(text.into())).await.is_err() {
                        break;
                    }
                }
                incoming = socket.recv() => match incoming {
                    // Clients only listen; anything they send but a close is
                    // ignored. A message past MAX_CLIENT_MESSAGE_BYTES is an
                    // error: it ends the connection.
                    Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                    Some(Ok(_)) => {}
                },
            }
        }
    }
    open.close().await;
}
