//! How many connections the accept loop lets in, before any token is
//! checked: TCP connections open, connections waiting for authentication
//! (accepted, with no authenticated request yet) and WebSockets waiting
//! for their first-message token, each in all and per client address
//! ([`HttpLimits`]). Past a cap the newcomer is refused at once, never
//! queued: a connection is closed, an upgrade is answered 503 or 429.
//!
//! A connection holds its places through its [`Ticket`], shared by its
//! requests (in their extensions) and by a WebSocket it became; the last
//! one dropped gives them back. IPv6 clients count by their /64 network,
//! which one machine commonly holds whole.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::HttpLimits;

/// How often, at most, the log says that connections were refused.
const REFUSALS_LOGGED_EVERY: Duration = Duration::from_secs(10);

/// The caps of one server, and what holds a place in each.
pub(super) struct Gate {
    limits: HttpLimits,
    counts: Mutex<Counts>,
    /// Connections refused since the log last said so, and when it did.
    refused: AtomicU64,
    logged: Mutex<Option<Instant>>,
}

#[derive(Default)]
struct Counts {
    all: Tally,
    by_address: HashMap<IpAddr, Tally>,
}

/// What one address (or all of them) holds.
#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
struct Tally {
    connections: usize,
    unauthenticated: usize,
    token_waits: usize,
}

/// Which cap refused a newcomer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    Connections,
    ConnectionsFromAddress,
    Unauthenticated,
    UnauthenticatedFromAddress,
    TokenWaits,
    TokenWaitsFromAddress,
}

impl Refused {
    /// Whether one client address is past its share (rather than the
    /// server past its whole).
    pub(super) fn by_address(self) -> bool {
        matches!(
            self,
            Refused::ConnectionsFromAddress
                | Refused::UnauthenticatedFromAddress
                | Refused::TokenWaitsFromAddress
        )
    }

    /// The cap, by its option's name, and what it counts.
    pub(super) fn describe(self, limits: &HttpLimits) -> String {
        let (name, most, what) = match self {
            Refused::Connections => (
                "max_tcp_connections",
                limits.max_tcp_connections,
                "TCP connections are open",
            ),
            Refused::ConnectionsFromAddress => (
                "max_tcp_connections_per_address",
                limits.max_tcp_connections_per_address,
                "TCP connections are open from this address",
            ),
            Refused::Unauthenticated => (
                "max_unauthenticated",
                limits.max_unauthenticated,
                "connections wait for authentication",
            ),
            Refused::UnauthenticatedFromAddress => (
                "max_unauthenticated_per_address",
                limits.max_unauthenticated_per_address,
                "connections wait for authentication from this address",
            ),
            Refused::TokenWaits => (
                "max_token_waits",
                limits.max_token_waits,
                "WebSockets wait for their first-message token",
            ),
            Refused::TokenWaitsFromAddress => (
                "max_token_waits_per_address",
                limits.max_token_waits_per_address,
                "WebSockets wait for their first-message token from this address",
            ),
        };
        format!("{most} {what} already ({name})")
    }
}

/// The address a client counts under: IPv4 as it is (an IPv4-mapped IPv6
/// address as its IPv4 one), IPv6 by its /64 network.
fn counted_as(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let network = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(network))
            }
        },
    }
}

impl Gate {
    pub(super) fn new(limits: HttpLimits) -> Arc<Gate> {
        Arc::new(Gate {
            limits,
            counts: Mutex::new(Counts::default()),
            refused: AtomicU64::new(0),
            logged: Mutex::new(None),
        })
    }

    /// A place for a new connection from `peer` on `local`: open, and
    /// waiting for authentication until its ticket says otherwise.
    pub(super) fn admit(
        self: &Arc<Self>,
        peer: SocketAddr,
        local: SocketAddr,
    ) -> Result<Ticket, Refused> {
        let address = counted_as(peer.ip());
        let limits = &self.limits;
        let mut counts = self.counts.lock().unwrap();
        let mine = counts.by_address.get(&address).copied().unwrap_or_default();
        let all = counts.all;
        if all.connections >= limits.max_tcp_connections {
            return Err(Refused::Connections);
        }
        if mine.connections >= limits.max_tcp_connections_per_address {
            return Err(Refused::ConnectionsFromAddress);
        }
        if all.unauthenticated >= limits.max_unauthenticated {
            return Err(Refused::Unauthenticated);
        }
        if mine.unauthenticated >= limits.max_unauthenticated_per_address {
            return Err(Refused::UnauthenticatedFromAddress);
        }
        counts.change(address, |tally| {
            tally.connections += 1;
            tally.unauthenticated += 1;
        });
        Ok(Ticket {
            gate: self.clone(),
            address,
            local,
            waiting: AtomicBool::new(true),
        })
    }

    /// Says, at most every [`REFUSALS_LOGGED_EVERY`], that connections
    /// were refused: how many, and the last one's address and cap.
    pub(super) fn log_refusal(&self, peer: SocketAddr, refused: Refused) {
        let count = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        let mut logged = self.logged.lock().unwrap();
        let now = Instant::now();
        if logged.is_some_and(|at| now.duration_since(at) < REFUSALS_LOGGED_EVERY) {
            tracing::debug!(%peer, cap = %refused.describe(&self.limits), "a connection was refused");
            return;
        }
        *logged = Some(now);
        self.refused.store(0, Ordering::Relaxed);
        drop(logged);
        tracing::warn!(
            refused = count,
            last = %peer,
            cap = %refused.describe(&self.limits),
            "connections were refused at once: a cap was reached"
        );
    }

    fn release(&self, address: IpAddr, what: impl FnOnce(&mut Tally)) {
        self.counts.lock().unwrap().change(address, what);
    }
}

impl Counts {
    /// Applies `what` to the address's tally and to the whole; an address
    /// that holds nothing any more is forgotten.
    fn change(&mut self, address: IpAddr, what: impl FnOnce(&mut Tally)) {
        let before = self.by_address.get(&address).copied().unwrap_or_default();
        let mut after = before;
        what(&mut after);
        self.all.connections = self.all.connections + after.connections - before.connections;
        self.all.unauthenticated =
            self.all.unauthenticated + after.unauthenticated - before.unauthenticated;
        self.all.token_waits = self.all.token_waits + after.token_waits - before.token_waits;
        if after == Tally::default() {
            self.by_address.remove(&address);
        } else {
            self.by_address.insert(address, after);
        }
    }
}

/// One connection's places; given back when dropped.
pub(super) struct Ticket {
    gate: Arc<Gate>,
    address: IpAddr,
    local: SocketAddr,
    /// Still counted as waiting for authentication.
    waiting: AtomicBool,
}

impl Ticket {
    /// The address the client reached this server at.
    pub(super) fn local(&self) -> SocketAddr {
        self.local
    }

    /// The caps this connection is held to.
    pub(super) fn limits(&self) -> &HttpLimits {
        &self.gate.limits
    }

    /// The connection made an authenticated request (or any request, on
    /// a server without tokens): it waits for authentication no more.
    pub(super) fn authenticated(&self) {
        if self.waiting.swap(false, Ordering::AcqRel) {
            self.gate
                .release(self.address, |tally| tally.unauthenticated -= 1);
        }
    }

    /// A place for a WebSocket of this connection waiting for its
    /// first-message token, until the returned hold is dropped.
    pub(super) fn wait_for_token(&self) -> Result<TokenWait, Refused> {
        let limits = &self.gate.limits;
        let mut counts = self.gate.counts.lock().unwrap();
        let mine = counts
            .by_address
            .get(&self.address)
            .copied()
            .unwrap_or_default();
        if counts.all.token_waits >= limits.max_token_waits {
            return Err(Refused::TokenWaits);
        }
        if mine.token_waits >= limits.max_token_waits_per_address {
            return Err(Refused::TokenWaitsFromAddress);
        }
        counts.change(self.address, |tally| tally.token_waits += 1);
        Ok(TokenWait {
            gate: self.gate.clone(),
            address: self.address,
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let waiting = *self.waiting.get_mut();
        self.gate.release(self.address, |tally| {
            tally.connections -= 1;
            if waiting {
                tally.unauthenticated -= 1;
            }
        });
    }
}

/// A WebSocket's place among those waiting for their token.
pub(super) struct TokenWait {
    gate: Arc<Gate>,
    address: IpAddr,
}

impl Drop for TokenWait {
    fn drop(&mut self) {
        self.gate
            .release(self.address, |tally| tally.token_waits -= 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> HttpLimits {
        HttpLimits {
            max_tcp_connections: 8,
            max_tcp_connections_per_address: 4,
            max_unauthenticated: 5,
            max_unauthenticated_per_address: 3,
            max_token_waits: 3,
            max_token_waits_per_address: 2,
            ..HttpLimits::default()
        }
    }

    fn at(ip: &str) -> SocketAddr {
        SocketAddr::new(ip.parse().unwrap(), 40000)
    }

    fn local() -> SocketAddr {
        "127.0.0.1:7878".parse().unwrap()
    }

    fn tally(gate: &Gate, ip: &str) -> Tally {
        let counts = gate.counts.lock().unwrap();
        counts
            .by_address
            .get(&counted_as(ip.parse().unwrap()))
            .copied()
            .unwrap_or_default()
    }

    #[test]
    fn waiting_connections_are_capped_per_address_and_in_all() {
        let gate = Gate::new(limits());
        let a: Vec<Ticket> = (0..3)
            .map(|_| gate.admit(at("10.0.0.1"), local()).unwrap())
            .collect();
        assert_eq!(
            gate.admit(at("10.0.0.1"), local()).err(),
            Some(Refused::UnauthenticatedFromAddress)
        );
        let b: Vec<Ticket> = (0..2)
            .map(|_| gate.admit(at("10.0.0.2"), local()).unwrap())
            .collect();
        assert_eq!(
            gate.admit(at("10.0.0.3"), local()).err(),
            Some(Refused::Unauthenticated)
        );
        // An authenticated connection waits no more, and makes room.
        a[0].authenticated();
        a[0].authenticated();
        assert_eq!(
            tally(&gate, "10.0.0.1"),
            Tally {
                connections: 3,
                unauthenticated: 2,
                token_waits: 0
            }
        );
        let c = gate.admit(at("10.0.0.3"), local()).unwrap();
        // Still open, the authenticated one counts among the connections.
        a[1].authenticated();
        a[2].authenticated();
        let d = gate.admit(at("10.0.0.1"), local()).unwrap();
        assert_eq!(
            gate.admit(at("10.0.0.1"), local()).err(),
            Some(Refused::ConnectionsFromAddress)
        );
        let e = gate.admit(at("10.0.0.4"), local()).unwrap();
        assert_eq!(
            gate.admit(at("10.0.0.5"), local()).err(),
            Some(Refused::Connections)
        );
        // Dropped, every place is given back.
        drop((a, b, c, d, e));
        let counts = gate.counts.lock().unwrap();
        assert_eq!(counts.all, Tally::default());
        assert!(counts.by_address.is_empty());
    }

    #[test]
    fn token_waits_are_capped_per_address_and_in_all() {
        let gate = Gate::new(limits());
        let one = gate.admit(at("10.0.0.1"), local()).unwrap();
        let two = gate.admit(at("10.0.0.2"), local()).unwrap();
        let waits = [one.wait_for_token().unwrap(), one.wait_for_token().unwrap()];
        assert_eq!(
            one.wait_for_token().err(),
            Some(Refused::TokenWaitsFromAddress)
        );
        let other = two.wait_for_token().unwrap();
        assert_eq!(two.wait_for_token().err(), Some(Refused::TokenWaits));
        drop(waits);
        let again = one.wait_for_token().unwrap();
        drop((again, other, one, two));
        assert_eq!(gate.counts.lock().unwrap().all, Tally::default());
    }

    #[test]
    fn ipv6_clients_count_by_their_network() {
        assert_eq!(
            counted_as("2001:db8:1:2:aaaa::1".parse().unwrap()),
            "2001:db8:1:2::".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            counted_as("::ffff:10.0.0.1".parse().unwrap()),
            "10.0.0.1".parse::<IpAddr>().unwrap()
        );
        let gate = Gate::new(limits());
        let held: Vec<Ticket> = (1..=3)
            .map(|n| gate.admit(at(&format!("2001:db8::{n}")), local()).unwrap())
            .collect();
        assert_eq!(
            gate.admit(at("2001:db8::ffff"), local()).err(),
            Some(Refused::UnauthenticatedFromAddress)
        );
        assert!(gate.admit(at("2001:db8:0:1::1"), local()).is_ok());
        drop(held);
    }

    #[test]
    fn a_refusal_names_its_cap() {
        let text = Refused::TokenWaitsFromAddress.describe(&limits());
        assert!(text.contains("max_token_waits_per_address"), "{text}");
        assert!(text.starts_with("2 "), "{text}");
        assert!(Refused::ConnectionsFromAddress.by_address());
        assert!(!Refused::Unauthenticated.by_address());
    }
}
