//! Connections kept open between outgoing requests (HTTP/1.1 keep-alive).
//!
//! A connection whose answer the guest read to its end comes back here,
//! under its [`Route`]: the actor, the authority (scheme, host, port) and
//! whether the address rules applied when it was made. The next request of
//! that actor to that authority under the same rule takes it instead of
//! connecting, so the address check still holds for every connection: one
//! is reused only for requests that the same check would have let make it.
//! Another actor never gets it.
//!
//! A kept connection waits at most [`OUTBOUND_IDLE_TIMEOUT`], and the pool
//! keeps at most [`MAX_IDLE_PER_ROUTE`] per route and
//! [`MAX_IDLE_CONNECTIONS`] in all; the newest is taken first. A
//! connection the server closed meanwhile is dropped when it is taken
//! (its sender says so), and a request it could not take goes on a new
//! connection (`send.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::client::conn::http1::SendRequest;

use crate::config::{MAX_IDLE_CONNECTIONS, MAX_IDLE_PER_ROUTE, OUTBOUND_IDLE_TIMEOUT};

/// Where a connection goes, and under which rule it was made.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Route {
    pub(super) actor: Arc<str>,
    pub(super) https: bool,
    pub(super) host: String,
    pub(super) port: u16,
    /// Made with every address allowed (its host is listed by its name).
    pub(super) any_address: bool,
}

/// Idle connections, by route; `B` is the requests' body type.
pub(crate) struct Pool<B> {
    idle: Mutex<Idle<B>>,
}

struct Idle<B> {
    by_route: HashMap<Route, Vec<(SendRequest<B>, Instant)>>,
    count: usize,
    /// When connections past their time were last dropped.
    swept: Instant,
}

impl<B> Default for Pool<B> {
    fn default() -> Self {
        Pool {
            idle: Mutex::new(Idle {
                by_route: HashMap::new(),
                count: 0,
                swept: Instant::now(),
            }),
        }
    }
}

impl<B> Pool<B> {
    /// The newest idle connection of `route` that is still open, if any.
    pub(super) fn take(&self, route: &Route) -> Option<SendRequest<B>> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.sweep();
        let kept = idle.by_route.get_mut(route)?;
        let before = kept.len();
        let mut found = None;
        while let Some((sender, since)) = kept.pop() {
            if !sender.is_closed() && since.elapsed() < OUTBOUND_IDLE_TIMEOUT {
                found = Some(sender);
                break;
            }
        }
        let after = kept.len();
        if after == 0 {
            idle.by_route.remove(route);
        }
        idle.count -= before - after;
        found
    }

    /// Keeps `sender`, whose last answer was read to its end, for the next
    /// request of `route`, if the pool has room.
    pub(super) fn put(&self, route: Route, sender: SendRequest<B>) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.sweep();
        if idle.count >= MAX_IDLE_CONNECTIONS {
            return;
        }
        let kept = idle.by_route.entry(route).or_default();
        if kept.len() >= MAX_IDLE_PER_ROUTE {
            return;
        }
        kept.push((sender, Instant::now()));
        idle.count += 1;
    }

    /// Idle connections kept now (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.idle.lock().unwrap().count
    }
}

impl<B> Idle<B> {
    /// Drops connections past their time or closed by their server, at
    /// most once a second.
    fn sweep(&mut self) {
        if self.swept.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.swept = Instant::now();
        self.by_route.retain(|_, kept| {
            kept.retain(|(sender, since)| {
                !sender.is_closed() && since.elapsed() < OUTBOUND_IDLE_TIMEOUT
            });
            !kept.is_empty()
        });
        self.count = self.by_route.values().map(Vec::len).sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::Empty;
    use hyper_util::rt::TokioIo;

    type Body = Empty<Bytes>;

    /// A sender over an in-memory pipe, its connection running; the
    /// pipe's other end is returned so that the test can close it.
    async fn sender() -> (SendRequest<Body>, tokio::io::DuplexStream) {
        let (ours, theirs) = tokio::io::duplex(1024);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(ours))
            .await
            .unwrap();
        tokio::spawn(conn);
        (sender, theirs)
    }

    fn route(actor: &str, any_address: bool) -> Route {
        Route {
            actor: actor.into(),
            https: false,
            host: "127.0.0.1".into(),
            port: 8080,
            any_address,
        }
    }

    #[tokio::test]
    async fn a_connection_is_taken_again_only_by_its_actor_under_its_rule() {
        let pool = Pool::<Body>::default();
        let (kept, _server) = sender().await;
        pool.put(route("a", false), kept);
        assert!(pool.take(&route("b", false)).is_none(), "another actor");
        assert!(pool.take(&route("a", true)).is_none(), "another rule");
        let mut other_port = route("a", false);
        other_port.port = 8081;
        assert!(pool.take(&other_port).is_none(), "another authority");
        assert_eq!(pool.len(), 1);
        assert!(pool.take(&route("a", false)).is_some());
        assert!(pool.take(&route("a", false)).is_none(), "taken once");
        assert_eq!(pool.len(), 0);
    }

    #[tokio::test]
    async fn a_connection_its_server_closed_is_not_taken() {
        let pool = Pool::<Body>::default();
        let (kept, server) = sender().await;
        pool.put(route("a", false), kept);
        drop(server);
        // The connection's task sees the end of its stream.
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert!(pool.take(&route("a", false)).is_none());
        assert_eq!(pool.len(), 0);
    }

    #[tokio::test]
    async fn a_route_keeps_at_most_its_share() {
        let pool = Pool::<Body>::default();
        let mut servers = Vec::new();
        for _ in 0..MAX_IDLE_PER_ROUTE + 3 {
            let (kept, server) = sender().await;
            servers.push(server);
            pool.put(route("a", false), kept);
        }
        assert_eq!(pool.len(), MAX_IDLE_PER_ROUTE);
    }
}
