//! Client connections and the events broadcast to them.
//!
//! Every instance with live connections has a channel in the [`Hub`]; each
//! connection holds a receiver of it. Guest code broadcasts with the
//! `events` import; the events of a call are published here only after the
//! call's transaction commits. An instance with a channel stays awake (the
//! idle reaper and eviction skip it). Connections live in memory: a restart
//! closes them, and their disconnect hooks do not run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use crate::config::CONNECTION_BUFFER;
use crate::directory::Address;

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

/// The channels of the instances that have connections.
#[derive(Default)]
pub(crate) struct Hub {
    channels: Mutex<HashMap<Address, Channel>>,
    next_id: AtomicU64,
}

impl Hub {
    /// Registers a new connection to `address`; it receives what is
    /// published from now on, until it is dropped.
    pub(crate) fn connect(self: &Arc<Self>, address: &Address) -> Connection {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let mut channels = self.channels.lock().unwrap();
        let channel = channels.entry(address.clone()).or_insert_with(|| Channel {
            id,
            sender: broadcast::channel(CONNECTION_BUFFER).0,
            connections: 0,
        });
        channel.connections += 1;
        Connection {
            id,
            channel: channel.id,
            receiver: channel.sender.subscribe(),
            hub: self.clone(),
            address: address.clone(),
        }
    }

    /// Sends committed events to the connections of `address`, if any.
    pub(crate) fn publish(&self, address: &Address, events: &[PendingEvent]) {
        let channels = self.channels.lock().unwrap();
        if let Some(channel) = channels.get(address) {
            for event in events {
                // An error means no receiver is left: nothing to do.
                let _ = channel.sender.send(event.frame());
            }
        }
    }

    /// Whether `address` has live connections.
    pub(crate) fn is_connected(&self, address: &Address) -> bool {
        self.channels.lock().unwrap().contains_key(address)
    }

    /// Closes every connection of `address` (its instance is destroyed).
    pub(crate) fn close(&self, address: &Address) {
        self.channels.lock().unwrap().remove(address);
    }

    /// Closes every connection (the host shuts down).
    pub(crate) fn close_all(&self) {
        self.channels.lock().unwrap().clear();
    }

    /// Connections open right now.
    pub(crate) fn count(&self) -> usize {
        let channels = self.channels.lock().unwrap();
        channels.values().map(|c| c.connections).sum()
    }

    fn release(&self, address: &Address, channel_id: u64) {
        let mut channels = self.channels.lock().unwrap();
        if let Some(channel) = channels.get_mut(address)
            && channel.id == channel_id
        {
            channel.connections -= 1;
            if channel.connections == 0 {
                channels.remove(address);
            }
        }
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

/// A live connection; dropping it unregisters it.
pub(crate) struct Connection {
    /// Unique within the host's run.
    pub(crate) id: u64,
    channel: u64,
    receiver: broadcast::Receiver<Frame>,
    hub: Arc<Hub>,
    address: Address,
}

impl Connection {
    /// Waits for the next event.
    pub(crate) async fn next(&mut self) -> Received {
        match self.receiver.recv().await {
            Ok(frame) => Received::Frame(frame),
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
        let mut a = hub.connect(&address("a"));
        let mut b = hub.connect(&address("a"));
        let mut other = hub.connect(&address("b"));
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
        let mut later = hub.connect(&address("b"));
        drop(other);
        assert!(hub.is_connected(&address("b")));
        hub.publish(&address("b"), &[event("e", "1")]);
        assert!(matches!(later.next().await, Received::Frame(_)));
    }

    #[tokio::test]
    async fn a_slow_connection_learns_how_many_events_it_missed() {
        let hub = Arc::new(Hub::default());
        let mut slow = hub.connect(&address("a"));
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
}
