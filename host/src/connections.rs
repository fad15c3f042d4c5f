//! Client connections and the events broadcast to them.
//!
//! Every instance with live connections has a channel in the [`Hub`]; each
//! connection holds a receiver of it. Guest code broadcasts with the
//! `events` import; the events of a call are published here only after the
//! call's transaction commits. An instance with a channel stays awake (the
//! idle reaper and eviction skip it). Connections live in memory: a restart
//! closes them, and their disconnect hooks do not run.
//!
//! # Limits
//!
//! The hub refuses a connection past any of three limits ([`Limits`]):
//! connections of one instance (manifest `max_connections`), connections
//! of the host (`--max-connections`), and instances with connections (half
//! of `--max-awake`). Connected instances cannot be put to sleep, so the
//! last limit keeps the other half of the awake instances for everything
//! else: connections to ever new keys cannot make every other wake fail
//! with `overloaded`.
//!
//! # Memory
//!
//! An instance's channel keeps at most [`CONNECTION_BUFFER`] frames, and a
//! frame is dropped as soon as every connection has read it: connections
//! without events hold none. A slow client can keep at most
//! `CONNECTION_BUFFER` frames of [`MAX_BROADCAST_BYTES`] each (plus the
//! event's name) alive in its instance's channel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use crate::address::Address;
use crate::config::CONNECTION_BUFFER;
#[cfg(doc)]
use crate::config::MAX_BROADCAST_BYTES;
use crate::error::Error;
use crate::metrics::ActorMetrics;

/// One event as a connected client receives it: a WebSocket text frame
/// `{"event": name, "payload": payload}`.
pub(crate) type Frame = Arc<str>;

/// An event broadcast by guest code, not yet committed.
#[derive(Debug, Clone)]
pub(crate) struct PendingEvent {
    pub(crate) name: String,
    /// JSON text.
    pub(crate) payload: String,
}

impl PendingEvent {
    fn frame(&self) -> Frame {
        let name = serde_json::Value::String(self.name.clone());
        format!("{{\"event\":{name},\"payload\":{}}}", self.payload).into()
    }
}

struct Channel {
    /// Tells this channel from a later one of the same instance (after a
    /// destroy closed this one).
    id: u64,
    sender: broadcast::Sender<Frame>,
    connections: usize,
}

/// The most connections a new one may join.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Connections of the instance (its actor's `max_connections`).
    pub(crate) per_instance: usize,
    /// Connections of the host (`--max-connections`).
    pub(crate) per_host: usize,
    /// Instances with connections ([`crate::config::max_connected_instances`]).
    pub(crate) instances: usize,
}

/// The channels of the instances that have connections.
#[derive(Default)]
pub(crate) struct Hub {
    channels: Mutex<Channels>,
    next_id: AtomicU64,
}

#[derive(Default)]
struct Channels {
    by_address: HashMap<Address, Channel>,
    /// Connections of every channel.
    connections: usize,
}

impl Hub {
    /// Registers a new connection to `address`, unless that would pass one
    /// of `limits` (then [`Error::TooManyConnections`] names the limit); it
    /// receives what is published from now on, until it is dropped.
    pub(crate) fn connect(
        self: &Arc<Self>,
        address: &Address,
        limits: Limits,
    ) -> Result<Connection, Error> {
        let mut channels = self.channels.lock().unwrap();
        let instance = channels
            .by_address
            .get(address)
            .map_or(0, |c| c.connections);
        let refused = if instance >= limits.per_instance {
            Some(format!(
                "`{}/{}` has {instance} connections, the most one instance of `{}` may have \
                 (manifest max_connections = {})",
                address.actor, address.key, address.actor, limits.per_instance
            ))
        } else if channels.connections >= limits.per_host {
            Some(format!(
                "the host has {} connections, the most it takes (--max-connections = {})",
                channels.connections, limits.per_host
            ))
        } else if instance == 0 && channels.by_address.len() >= limits.instances {
            Some(format!(
                "{} instances have connections, the most the host allows ({}: half of \
                 --max-awake, so that other instances can still wake); raise --max-awake",
                channels.by_address.len(),
                limits.instances
            ))
        } else {
            None
        };
        if let Some(message) = refused {
            return Err(Error::TooManyConnections(message));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let channel = channels
            .by_address
            .entry(address.clone())
            .or_insert_with(|| Channel {
                id,
                sender: broadcast::channel(CONNECTION_BUFFER).0,
                connections: 0,
            });
        channel.connections += 1;
        let connection = Connection {
            id,
            channel: channel.id,
            receiver: channel.sender.subscribe(),
            hub: self.clone(),
            address: address.clone(),
            metrics: None,
        };
        channels.connections += 1;
        Ok(connection)
    }

    /// Sends committed events to the connections of `address`, if any.
    pub(crate) fn publish(&self, address: &Address, events: &[PendingEvent]) {
        let channels = self.channels.lock().unwrap();
        if let Some(channel) = channels.by_address.get(address) {
            for event in events {
                // An error means no receiver is left: nothing to do.
                let _ = channel.sender.send(event.frame());
            }
        }
    }

    /// Whether `address` has live connections.
    pub(crate) fn is_connected(&self, address: &Address) -> bool {
        self.channels
            .lock()
            .unwrap()
            .by_address
            .contains_key(address)
    }

    /// Closes every connection of `address` (its instance is destroyed).
    pub(crate) fn close(&self, address: &Address) {
        let mut channels = self.channels.lock().unwrap();
        if let Some(channel) = channels.by_address.remove(address) {
            channels.connections -= channel.connections;
        }
    }

    /// Closes every connection (the host shuts down).
    pub(crate) fn close_all(&self) {
        let mut channels = self.channels.lock().unwrap();
        channels.by_address.clear();
        channels.connections = 0;
    }

    /// Connections open right now.
    pub(crate) fn count(&self) -> usize {
        self.channels.lock().unwrap().connections
    }

    /// Connections open right now, by actor.
    pub(crate) fn count_by_actor(&self) -> HashMap<Arc<str>, usize> {
        let channels = self.channels.lock().unwrap();
        let mut counts: HashMap<Arc<str>, usize> = HashMap::new();
        for (address, channel) in &channels.by_address {
            *counts.entry(address.actor.clone()).or_default() += channel.connections;
        }
        counts
    }

    fn release(&self, address: &Address, channel_id: u64) {
        let mut channels = self.channels.lock().unwrap();
        let Some(channel) = channels.by_address.get_mut(address) else {
            return;
        };
        if channel.id != channel_id {
            return;
        }
        channel.connections -= 1;
        if channel.connections == 0 {
            channels.by_address.remove(address);
        }
        channels.connections -= 1;
    }
}

/// What the next event of a connection is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Received {
    /// A frame to send to the client.
    Frame(Frame),
    /// The client read too slowly and missed this many events.
    Lagged(u64),
    /// The instance's connections were closed (destroy or shutdown).
    Closed,
}

/// A client's live connection to an instance ([`crate::Host::connect_as`]);
/// dropping it unregisters it, and [`crate::Host::disconnect`] also runs
/// the instance's disconnect hook.
pub struct Connection {
    /// Unique within the host's run.
    pub(crate) id: u64,
    channel: u64,
    receiver: broadcast::Receiver<Frame>,
    hub: Arc<Hub>,
    address: Address,
    /// Where the events it receives are counted.
    metrics: Option<Arc<ActorMetrics>>,
}

impl Connection {
    /// The connection's id, unique within the host's run (the connection
    /// hooks' `id`).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Counts the events this connection receives in `metrics`.
    pub(crate) fn count_in(&mut self, metrics: Arc<ActorMetrics>) {
        self.metrics = Some(metrics);
    }

    /// Whether this connection's instance is still the one at its address
    /// (no destroy closed its channel).
    pub(crate) fn is_current(&self) -> bool {
        self.hub
            .channels
            .lock()
            .unwrap()
            .by_address
            .get(&self.address)
            .is_some_and(|channel| channel.id == self.channel)
    }

    /// Waits for the next event.
    pub(crate) async fn next(&mut self) -> Received {
        match self.receiver.recv().await {
            Ok(frame) => {
                if let Some(metrics) = &self.metrics {
                    metrics.event_sent();
                }
                Received::Frame(frame)
            }
            Err(broadcast::error::RecvError::Lagged(missed)) => Received::Lagged(missed),
            Err(broadcast::error::RecvError::Closed) => Received::Closed,
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.hub.release(&self.address, self.channel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANY: Limits = Limits {
        per_instance: usize::MAX,
        per_host: usize::MAX,
        instances: usize::MAX,
    };

    fn address(key: &str) -> Address {
        Address {
            actor: "room".into(),
            key: key.into(),
        }
    }

    fn event(name: &str, payload: &str) -> PendingEvent {
        PendingEvent {
            name: name.into(),
            payload: payload.into(),
        }
    }

    #[tokio::test]
    async fn events_reach_every_connection_of_their_instance_only() {
        let hub = Arc::new(Hub::default());
        let mut a = hub.connect(&address("a"), ANY).unwrap();
        let mut b = hub.connect(&address("a"), ANY).unwrap();
        let mut other = hub.connect(&address("b"), ANY).unwrap();
        assert_ne!(a.id, b.id);
        assert_eq!(hub.count(), 3);
        hub.publish(
            &address("a"),
            &[event("said", "{\"text\":\"hi \\\"you\\\"\"}")],
        );
        let expected = Received::Frame(
            "{\"event\":\"said\",\"payload\":{\"text\":\"hi \\\"you\\\"\"}}".into(),
        );
        assert_eq!(a.next().await, expected);
        assert_eq!(b.next().await, expected);
        hub.publish(&address("b"), &[event("x\"y", "1")]);
        let Received::Frame(frame) = other.next().await else {
            panic!()
        };
        let parsed: serde_json::Value = serde_json::from_str(&frame).unwrap();
        assert_eq!(parsed["event"], "x\"y");
        drop(a);
        assert!(hub.is_connected(&address("a")));
        drop(b);
        assert!(
            !hub.is_connected(&address("a")),
            "the last connection removes the channel"
        );
        hub.close(&address("b"));
        assert_eq!(other.next().await, Received::Closed);
        // A connection made after the close is not counted off by the
        // closed one going away.
        let mut later = hub.connect(&address("b"), ANY).unwrap();
        drop(other);
        assert!(hub.is_connected(&address("b")));
        hub.publish(&address("b"), &[event("e", "1")]);
        assert!(matches!(later.next().await, Received::Frame(_)));
    }

    #[tokio::test]
    async fn a_slow_connection_learns_how_many_events_it_missed() {
        let hub = Arc::new(Hub::default());
        let mut slow = hub.connect(&address("a"), ANY).unwrap();
        let events: Vec<_> = (0..CONNECTION_BUFFER + 5)
            .map(|i| event("n", &i.to_string()))
            .collect();
        hub.publish(&address("a"), &events);
        assert_eq!(slow.next().await, Received::Lagged(5));
        let Received::Frame(frame) = slow.next().await else {
            panic!()
        };
        assert!(frame.ends_with(":5}"), "{frame}");
    }

    #[test]
    fn connections_past_a_limit_are_refused_naming_it() {
        let hub = Arc::new(Hub::default());
        let limits = Limits {
            per_instance: 2,
            per_host: 3,
            instances: 2,
        };
        let refusal = |key: &str| match hub.connect(&address(key), limits) {
            Err(Error::TooManyConnections(message)) => message,
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("a connection to {key} past a limit was taken"),
        };
        let a1 = hub.connect(&address("a"), limits).unwrap();
        let a2 = hub.connect(&address("a"), limits).unwrap();
        assert!(refusal("a").contains("max_connections = 2"));
        let b1 = hub.connect(&address("b"), limits).unwrap();
        assert!(refusal("b").contains("--max-connections = 3"));
        drop(a2);
        assert!(refusal("c").contains("half of --max-awake"));
        // A connection to an instance that has some takes no new place.
        let b2 = hub.connect(&address("b"), limits).unwrap();
        assert_eq!(hub.count(), 3);
        drop((a1, b1, b2));
        assert_eq!(hub.count(), 0);
        let _c = hub.connect(&address("c"), limits).unwrap();
        let e = Error::TooManyConnections(String::new());
        assert_eq!((e.code(), e.http_status()), ("too-many-connections", 503));
    }
}
