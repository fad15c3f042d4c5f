//! The accept loop of `burrow serve`, for plain TCP and for TLS: what
//! `axum::serve` does (a task for each connection, HTTP/1.1 with upgrades
//! for WebSockets, a graceful shutdown that waits for the open
//! connections), with each connection's task polled through
//! [`RepollOwnWakes`] (see `own_wakes.rs` for why).

use std::future::Future;

use axum::Router;
use axum::serve::Listener;
use axum_server::accept::Accept;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::own_wakes::RepollOwnWakes;

/// Serves `router` on `listener` until `shutdown` resolves, each
/// connection first through `handshake` (nothing for plain TCP, TLS's
/// handshake for HTTPS); then closes the listener, lets the open
/// connections finish what they are answering and waits for them.
pub(super) async fn serve<H>(
    mut listener: TcpListener,
    router: Router,
    handshake: H,
    shutdown: impl Future<Output = ()>,
) where
    H: Accept<TcpStream, ()> + Clone + Send + Sync + 'static,
    H::Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H::Future: Send,
{
    // Dropped when the shutdown begins: every connection then closes
    // once it has answered.
    let (stop, stopped) = watch::channel(());
    // Each connection holds a receiver; the last one dropped ends the wait.
    let (open, open_connections) = watch::channel(());
    tokio::pin!(shutdown);
    loop {
        // Errors are retried (and logged, and slowed down, when they are
        // the listener's rather than one connection's).
        let (tcp, _) = tokio::select! {
            accepted = Listener::accept(&mut listener) => accepted,
            () = &mut shutdown => break,
        };
        // Small answers go out at once instead of waiting for an ACK.
        let _ = tcp.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let handshake = handshake.clone();
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
            let builder = Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
            tokio::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                _ = stopped.changed() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
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
