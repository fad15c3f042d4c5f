//! The marks of every instance (when its queue, its workflow and its
//! schedules next have work): in `host.sqlite` on a host of its own
//! (`index.rs`, which states their invariants), in PostgreSQL in a cluster
//! (`cluster/marks.rs`). Background work reads and writes them here, the
//! same way in both.
//!
//! A transaction's commit lowers the marks its effects need in the commit
//! stage (`instance/commit.rs`): under the index's lock before it commits
//! on one host, in the same statement that ships its pages in a cluster.
//! Background work sets a mark from what it reads of the committed data
//! ([`Marks::set_mark_from`]): under the index's lock on one host; in a
//! cluster, under the instance's write order, as a fenced shipment that
//! reaches PostgreSQL after every commit made before it and before every
//! commit made after it.

use std::sync::Arc;

use crate::address::Address;

use super::cluster::shipper::{MarkWrite, MarkWrites, Shipment, Write};
use super::cluster::{Cluster, ClusterError};
use super::index::{Index, Mark};

/// Why a mark could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum MarkError {
    #[error("the index: {0}")]
    Index(#[from] rusqlite::Error),
    #[error("the cluster: {0}")]
    Cluster(#[from] ClusterError),
    #[error("this host does not hold the instance's lease")]
    NotHeld,
}

/// The marks of every instance.
pub struct Marks {
    index: Arc<Index>,
    cluster: Option<Arc<Cluster>>,
}

/// A change of `mark` alone.
pub fn mark_write(mark: Mark, write: MarkWrite) -> MarkWrites {
    let mut writes = MarkWrites::default();
    match mark {
        Mark::Queue => writes.queue = write,
        Mark::Workflow => writes.workflow = write,
        Mark::Schedule => writes.schedule = write,
    }
    writes
}

impl Marks {
    pub fn new(index: Arc<Index>, cluster: Option<Arc<Cluster>>) -> Marks {
        Marks { index, cluster }
    }

    /// Sets `mark` of (`actor`, `key`) to what `compute` reads from the
    /// instance's committed data, so that no commit that lowers the mark
    /// comes in between (see the module docs). Never makes an instance.
    pub fn set_mark_from<E>(
        &self,
        mark: Mark,
        actor: &str,
        key: &str,
        compute: impl FnOnce() -> Result<Option<i64>, E>,
    ) -> Result<Result<Option<i64>, E>, MarkError> {
        let Some(cluster) = &self.cluster else {
            return Ok(self.index.set_mark_from(mark, actor, key, compute)?);
        };
        let address = Address {
            actor: actor.into(),
            key: key.into(),
        };
        let slot = cluster.slot(&address);
        let held = slot
            .held_under(cluster.member().incarnation)
            .ok_or(MarkError::NotHeld)?;
        let order = slot.order();
        let at = match compute() {
            Ok(at) => at,
            Err(e) => return Ok(Err(e)),
        };
        let ack = cluster.ship(Shipment {
            id: held.id,
            epoch: held.epoch,
            write: Write::Marks(mark_write(mark, MarkWrite::Set(at))),
        });
        drop(order);
        crate::blocking::off_worker(|| cluster.wait(&ack))?;
        Ok(Ok(at))
    }

    /// Sets `mark` of (`actor`, `key`) to `at` (`None`: nothing to do).
    pub fn set_mark(
        &self,
        mark: Mark,
        actor: &str,
        key: &str,
        at: Option<i64>,
    ) -> Result<(), MarkError> {
        self.set_mark_from(mark, actor, key, || Ok::<_, std::convert::Infallible>(at))?
            .unwrap_or_else(|never| match never {});
        Ok(())
    }

    /// Instances of `actors` whose `mark` is at or before `now`, earliest
    /// first, at most `limit`. In a cluster, those whose lease is this
    /// host's or free, which are this host's afterwards.
    pub async fn due(
        &self,
        mark: Mark,
        now: i64,
        actors: &[String],
        limit: usize,
    ) -> Result<Vec<(String, String)>, MarkError> {
        let Some(cluster) = &self.cluster else {
            return Ok(self.index.due(mark, now, actors, limit)?);
        };
        let member = cluster.member();
        if !member.valid() || cluster.has_left() {
            return Ok(Vec::new());
        }
        let claimed = cluster
            .claim_due(&member.id, mark, now, actors, limit)
            .await?;
        Ok(claimed
            .into_iter()
            .map(|(actor, key, _)| (actor, key))
            .collect())
    }
}
