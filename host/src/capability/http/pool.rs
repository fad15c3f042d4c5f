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
//! A kept connection waits at most [`OUTBOUND_IDLE_TIMEOUT`]: while the
//! pool holds any, a task of its own closes those past their time every
//! quarter of it. The pool keeps at most [`MAX_IDLE_PER_ROUTE`] per route
//! and [`MAX_IDLE_CONNECTIONS`] in all; the newest is taken first. A
//! connection the server closed meanwhile is dropped when it is taken
//! (its sender says so), and a request it could not take goes on a new
//! connection (`send.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use hyper::client::conn::http1::SendRequest;

use crate::config::{MAX_IDLE_CONNECTIONS, MAX_IDLE_PER_ROUTE, OUTBOUND_IDLE_TIMEOUT};

/// Where a connection goes, and under which rule it was made.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Route {
    pub(super) actor: Arc<str>,
    pub(super) https: bool,
    /// A name, or an address (an IPv6 one without brackets).
    pub(super) host: String,
    pub(super) port: u16,
    /// Its very host is listed: any address it resolves to may be reached.
    pub(super) any_address: bool,
}

/// Idle connections, by route; `B` is the requests' body type.
pub(crate) struct Pool<B> {
    idle: Mutex<Idle<B>>,
    /// How long a connection may wait idle.
    idle_timeout: Duration,
}

struct Idle<B> {
    by_route: HashMap<Route, Vec<(SendRequest<B>, Instant)>>,
    count: usize,
    /// The task that closes connections past their time is running.
    sweeping: bool,
}

impl<B> Default for Pool<B> {
    fn default() -> Self {
        Pool::with_idle_timeout(OUTBOUND_IDLE_TIMEOUT)
    }
}

impl<B> Pool<B> {
    fn with_idle_timeout(idle_timeout: Duration) -> Self {
        Pool {
            idle: Mutex::new(Idle {
                by_route: HashMap::new(),
                count: 0,
                sweeping: false,
            }),
            idle_timeout,
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Idle<B>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The newest idle connection of `route` that is still open, if any.
    pub(super) fn take(&self, route: &Route) -> Option<SendRequest<B>> {
        let mut idle = self.idle();
        let kept = idle.by_route.get_mut(route)?;
        let before = kept.len();
        let mut found = None;
        while let Some((sender, since)) = kept.pop() {
            if !sender.is_closed() && since.elapsed() < self.idle_timeout {
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

    /// Idle connections kept now (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.idle().count
    }
}

impl<B: Send + 'static> Pool<B> {
    /// Keeps `sender`, whose last answer was read to its end, for the next
    /// request of `route`, if the pool has room.
    pub(super) fn put(self: &Arc<Self>, route: Route, sender: SendRequest<B>) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.idle();
        if idle.count >= MAX_IDLE_CONNECTIONS {
            return;
        }
        let kept = idle.by_route.entry(route).or_default();
        if kept.len() >= MAX_IDLE_PER_ROUTE {
            return;
        }
        kept.push((sender, Instant::now()));
        idle.count += 1;
        if !idle.sweeping
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            idle.sweeping = true;
            runtime.spawn(sweep(Arc::downgrade(self), self.idle_timeout / 4));
        }
    }
}

/// Closes the connections of `pool` past their time, or closed by their
/// server, every `period`, until the pool holds none (or is gone).
async fn sweep<B>(pool: Weak<Pool<B>>, period: Duration) {
    loop {
        tokio::time::sleep(period).await;
        let Some(pool) = pool.upgrade() else {
            return;
        };
        let mut idle = pool.idle();
        let timeout = pool.idle_timeout;
        idle.by_route.retain(|_, kept| {
            kept.retain(|(sender, since)| !sender.is_closed() && since.elapsed() < timeout);
            !kept.is_empty()
        });
        idle.count = idle.by_route.values().map(Vec::len).sum();
        if idle.count == 0 {
            idle.sweeping = false;
            return;
        }
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
        let pool = Arc::new(Pool::<Body>::default());
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
        let pool = Arc::new(Pool::<Body>::default());
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
        let pool = Arc::new(Pool::<Body>::default());
        let mut servers = Vec::new();
        for _ in 0..MAX_IDLE_PER_ROUTE + 3 {
            let (kept, server) = sender().await;
            servers.push(server);
            pool.put(route("a", false), kept);
        }
        assert_eq!(pool.len(), MAX_IDLE_PER_ROUTE);
    }

    #[tokio::test]
    async fn an_idle_connection_is_closed_after_its_time() {
        let pool = Arc::new(Pool::<Body>::with_idle_timeout(Duration::from_millis(200)));
        let (kept, mut server) = sender().await;
        pool.put(route("a", false), kept);
        assert_eq!(pool.len(), 1);
        // The server's end reads the end of the stream once the pool has
        // closed the connection.
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::io::AsyncReadExt::read(&mut server, &mut buf),
        )
        .await
        .expect("the idle connection was not closed");
        assert_eq!(read.unwrap(), 0);
        assert_eq!(pool.len(), 0);
    }
}
