//! Who works on an instance outside a caller's call: queue pumps, workflow
//! drivers, schedule runs and connection hooks each hold a [`Lease`] on
//! the instance's address for as long as they run.
//!
//! `destroy` closes the address first ([`Presence::close`]): from then on
//! no new lease is given, and destroy waits until every lease is returned
//! before it deletes the files. So nothing started for the old instance
//! runs, holds a connection to its files, or reaches a new instance of the
//! same key after destroy returns. The address opens again when the
//! [`Closed`] guard is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::address::Address;

/// The leases of every address that has some, and the closed addresses.
#[derive(Default)]
pub(crate) struct Presence {
    entries: Arc<Mutex<HashMap<Address, Entry>>>,
}

struct Entry {
    /// Leases given out and not yet returned.
    leases: watch::Sender<usize>,
    /// Whether the address is closed (being destroyed).
    closed: watch::Sender<bool>,
}

impl Entry {
    fn new() -> Entry {
        Entry {
            leases: watch::Sender::new(0),
            closed: watch::Sender::new(false),
        }
    }

    fn is_unused(&self) -> bool {
        *self.leases.borrow() == 0 && !*self.closed.borrow()
    }
}

/// Held by background work on an instance; returned when dropped.
pub(crate) struct Lease {
    entries: Arc<Mutex<HashMap<Address, Entry>>>,
    address: Address,
    closed: watch::Receiver<bool>,
}

impl Lease {
    /// Whether the instance is being destroyed: the holder should end.
    pub(crate) fn is_closing(&self) -> bool {
        *self.closed.borrow()
    }

    /// Resolves once the instance is being destroyed.
    pub(crate) async fn closing(&self) {
        let mut closed = self.closed.clone();
        let _ = closed.wait_for(|closed| *closed).await;
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut entries = self.entries.lock().unwrap();
        if let Some(entry) = entries.get(&self.address) {
            entry.leases.send_modify(|n| *n -= 1);
            if entry.is_unused() {
                entries.remove(&self.address);
            }
        }
    }
}

/// A closed address; it opens again when this is dropped.
pub(crate) struct Closed {
    entries: Arc<Mutex<HashMap<Address, Entry>>>,
    address: Address,
}

impl Drop for Closed {
    fn drop(&mut self) {
        let mut entries = self.entries.lock().unwrap();
        if let Some(entry) = entries.get(&self.address) {
            entry.closed.send_replace(false);
            if entry.is_unused() {
                entries.remove(&self.address);
            }
        }
    }
}

impl Presence {
    /// A lease on `address`, or `None` while it is closed.
    pub(crate) fn lease(&self, address: &Address) -> Option<Lease> {
        let mut entries = self.entries.lock().unwrap();
        let entry = entries.entry(address.clone()).or_insert_with(Entry::new);
        if *entry.closed.borrow() {
            return None;
        }
        entry.leases.send_modify(|n| *n += 1);
        Some(Lease {
            entries: self.entries.clone(),
            address: address.clone(),
            closed: entry.closed.subscribe(),
        })
    }

    /// Closes `address` (waiting first for another closing of it to end),
    /// then waits until every lease on it is returned. `hurry` runs once
    /// the address is closed, to ask the holders to end.
    pub(crate) async fn close(&self, address: &Address, hurry: impl AsyncFnOnce()) -> Closed {
        loop {
            let other = {
                let mut entries = self.entries.lock().unwrap();
                let entry = entries.entry(address.clone()).or_insert_with(Entry::new);
                if *entry.closed.borrow() {
                    Some(entry.closed.subscribe())
                } else {
                    entry.closed.send_replace(true);
                    None
                }
            };
            match other {
                Some(mut other) => {
                    let _ = other.wait_for(|closed| !*closed).await;
                }
                None => break,
            }
        }
        let closed = Closed {
            entries: self.entries.clone(),
            address: address.clone(),
        };
        hurry().await;
        let mut leases = {
            let entries = self.entries.lock().unwrap();
            entries[address].leases.subscribe()
        };
        let _ = leases.wait_for(|n| *n == 0).await;
        closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address() -> Address {
        Address {
            actor: "a".into(),
            key: "k".into(),
        }
    }

    #[tokio::test]
    async fn closing_waits_for_leases_and_refuses_new_ones() {
        let presence = Arc::new(Presence::default());
        let lease = presence.lease(&address()).unwrap();
        let closing = {
            let presence = presence.clone();
            tokio::spawn(async move {
                let closed = presence.close(&address(), async || {}).await;
                assert!(presence.lease(&address()).is_none());
                drop(closed);
            })
        };
        lease.closing().await;
        assert!(lease.is_closing());
        assert!(presence.lease(&address()).is_none(), "closed");
        assert!(!closing.is_finished(), "waits for the lease");
        drop(lease);
        closing.await.unwrap();
        assert!(presence.lease(&address()).is_some(), "open again");
        assert!(presence.entries.lock().unwrap().is_empty(), "nothing kept");
    }
}
