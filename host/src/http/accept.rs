//! The accept loop of `burrow serve`, for plain TCP and for TLS: what
//! `axum::serve` does (a task for each connection, HTTP/1.1 with upgrades
//! for WebSockets, a graceful shutdown that waits for the open
//! connections), with each connection's task polled through
//! [`RepollOwnWakes`] (see `own_wakes.rs` for why), and held to the
//! front's limits before any token is checked:
//!
//! - a connection past a cap of `gate.rs` (open in all or from its
//!   address, waiting for authentication in all or from its address) is
//!   closed as soon as it is accepted;
//! - a connection with no request in flight is closed past its idle or
//!   header timeout (`idle.rs`), and hyper's header-read timeout bounds
//!   both behind them.
//!
//! Each request carries its connection's [`Ticket`] in its extensions:
//! the guard (`auth.rs`) marks the connection authenticated, a WebSocket
//! (`connect.rs`) keeps its places while it is open.

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::serve::Listener;
use axum_server::accept::Accept;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::gate::{Gate, Ticket};
use super::idle::{Activity, Verdict, Watched};
use super::own_wakes::RepollOwnWakes;
use crate::config::HttpLimits;

/// What the accept loop holds connections to.
#[derive(Clone, Copy)]
pub(super) struct Front {
    pub(super) limits: HttpLimits,
    /// Whether requests need a token: without, any request authenticates
    /// its connection.
    pub(super) checks_tokens: bool,
}

/// Serves `router` on `listener` until `shutdown` resolves, each
/// connection first through `handshake` (nothing for plain TCP, TLS's
/// handshake for HTTPS); then closes the listener, lets the open
/// connections finish what they are answering and waits for them.
pub(super) async fn serve<H>(
    mut listener: TcpListener,
    router: Router,
    handshake: H,
    front: Front,
    shutdown: impl Future<Output = ()>,
) where
    H: Accept<TcpStream, ()> + Clone + Send + Sync + 'static,
    H::Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H::Future: Send,
{
    let limits = front.limits;
    let gate = Gate::new(limits);
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.idle_timeout.saturating_add(limits.header_timeout));
    // Dropped when the shutdown begins: every connection then closes
    // once it has answered.
    let (stop, stopped) = watch::channel(());
    // Each connection holds a receiver; the last one dropped ends the wait.
    let (open, open_connections) = watch::channel(());
    tokio::pin!(shutdown);
    loop {
        // Errors are retried (and logged, and slowed down, when they are
        // the listener's rather than one connection's).
        let (tcp, peer) = tokio::select! {
            accepted = Listener::accept(&mut listener) => accepted,
            () = &mut shutdown => break,
        };
        let Ok(local) = tcp.local_addr() else {
            continue;
        };
        let ticket = match gate.admit(peer, local) {
            Ok(ticket) => Arc::new(ticket),
            Err(refused) => {
                // Closed at once: a connection past a cap is not queued.
                drop(tcp);
                gate.log_refusal(peer, refused);
                continue;
            }
        };
        // Small answers go out at once instead of waiting for an ACK.
        let _ = tcp.set_nodelay(true);
        let router = router.clone();
        let handshake = handshake.clone();
        let http = http.clone();
        let mut stopped = stopped.clone();
        let open_connection = open_connections.clone();
        tokio::spawn(RepollOwnWakes::new(async move {
            // A client that never finishes its handshake does not hold
            // the shutdown (until the handshake's own timeout).
            let io = tokio::select! {
                shaken = handshake.accept(tcp, ()) => match shaken {
                    Ok((io, _)) => io,
                    Err(e) => {
                        tracing::debug!(error = %e, "a connection failed its handshake");
                        return;
                    }
                },
                _ = stopped.changed() => return,
            };
            let activity = Activity::new();
            let service = per_connection(router, ticket, activity.clone(), front.checks_tokens);
            let io = TokioIo::new(Watched::new(io, activity.clone()));
            let connection = http.serve_connection(io, service).with_upgrades();
            tokio::pin!(connection);
            let mut stopping = false;
            let mut wait = limits.header_timeout.min(limits.idle_timeout);
            let served = loop {
                tokio::select! {
                    served = connection.as_mut() => break served,
                    _ = stopped.changed(), if !stopping => {
                        stopping = true;
                        connection.as_mut().graceful_shutdown();
                    }
                    () = tokio::time::sleep(wait) => match activity.verdict(&limits) {
                        Verdict::Wait(left) => wait = left,
                        // Nothing in flight: closed at once.
                        Verdict::Idle => {
                            tracing::debug!(%peer, "closed a connection idle past idle_timeout");
                            break Ok(());
                        }
                        Verdict::SlowHead => {
                            tracing::debug!(%peer, "closed a connection whose request's head took longer than header_timeout");
                            break Ok(());
                        }
                    },
                }
            };
            if let Err(e) = served {
                tracing::debug!(error = %e, "a connection ended with an error");
            }
            drop(open_connection);
        }));
    }
    // New connections are refused from now on, not left waiting.
    drop(listener);
    drop(stop);
    drop(open_connections);
    open.closed().await;
}

/// `router` for the requests of one connection: each carries the
/// connection's ticket, counts as in flight until its answer is ready,
/// and (on a server without tokens) authenticates the connection.
fn per_connection(
    router: Router,
    ticket: Arc<Ticket>,
    activity: Arc<Activity>,
    checks_tokens: bool,
) -> TowerToHyperService<
    impl tower::Service<
        Request<hyper::body::Incoming>,
        Response = axum::response::Response,
        Error = std::convert::Infallible,
        Future: Send,
    > + Clone,
> {
    let service = tower::ServiceBuilder::new()
        .map_request(move |mut request: Request<hyper::body::Incoming>| {
            if !checks_tokens {
                ticket.authenticated();
            }
            request.extensions_mut().insert(ticket.clone());
            request
        })
        .map_future(move |answer| {
            let in_flight = activity.request_began();
            async move {
                let answer = answer.await;
                drop(in_flight);
                answer
            }
        })
        .service(router);
    TowerToHyperService::new(service)
}
