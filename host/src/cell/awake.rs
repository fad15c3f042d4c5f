//! The places for awake instances: a host keeps at most `max_awake`
//! instances awake (its engine's pool has that many slots), and a cell
//! holds one place from before it instantiates until after its store is
//! gone.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;
use tokio::sync::futures::Notified;

use crate::metrics::ActorMetrics;

/// The places of a host, taken and given back.
pub(crate) struct Awake {
    count: AtomicUsize,
    max: usize,
    given_back: Notify,
}

impl Awake {
    pub(crate) fn new(max: usize) -> Arc<Awake> {
        Arc::new(Awake {
            count: AtomicUsize::new(0),
            max: max.max(1),
            given_back: Notify::new(),
        })
    }

    /// Instances awake (or starting) now.
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// A place for one more instance of the actor whose metrics these
    /// are, unless every place is taken.
    pub(crate) fn try_take(self: &Arc<Self>, metrics: &Arc<ActorMetrics>) -> Option<AwakeToken> {
        self.count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()?;
        metrics.woke();
        Some(AwakeToken(self.clone(), metrics.clone()))
    }

    /// Completes once a place is given back after this call (poll it, or
    /// `enable` it, before trying [`Awake::try_take`] so that no place
    /// given back in between is missed).
    pub(crate) fn given_back(&self) -> Notified<'_> {
        self.given_back.notified()
    }
}

/// One taken place, of the host and of the actor (whose metrics the cell
/// records to); one per cell, given back when the cell is dropped.
pub(crate) struct AwakeToken(Arc<Awake>, Arc<ActorMetrics>);

impl AwakeToken {
    pub(crate) fn metrics(&self) -> &Arc<ActorMetrics> {
        &self.1
    }
}

impl Drop for AwakeToken {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
        self.0.given_back.notify_waiters();
        self.1.slept();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn places_are_at_most_max_and_a_given_back_one_wakes_a_waiter() {
        let awake = Awake::new(2);
        let metrics = crate::metrics::Metrics::new(["a"]).actor("a").clone();
        let a = awake.try_take(&metrics).expect("a place");
        let _b = awake.try_take(&metrics).expect("a place");
        assert!(awake.try_take(&metrics).is_none());
        assert_eq!(awake.count(), 2);
        let waiter = awake.given_back();
        drop(a);
        waiter.await;
        assert_eq!(awake.count(), 1);
        assert!(awake.try_take(&metrics).is_some());
    }
}
