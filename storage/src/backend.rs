//! Where a commit of an instance's database goes besides its file: the
//! marks that say which of the instance's work is due (its queue, its
//! schedules, its workflow) are lowered in the host's index when the host
//! runs alone, and shipped with the commit's pages to PostgreSQL in a
//! cluster (`replica.rs`). The store chooses the backend when it opens the
//! database (`store.rs`); the commit stage hands over what the transaction
//! released and does not know which backend it has.

use std::sync::Arc;

use super::cluster::ClusterError;
use super::cluster::shipper::{MarkWrite, MarkWrites};
use super::index::Index;
use super::replica::Replica;
use crate::address::Address;

/// What a commit releases besides its pages: the marks it lowers or sets
/// and, for the commit that creates the instance, its creation time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Release {
    /// The queue's mark is lowered to this time (it appended).
    pub queue: Option<i64>,
    /// The schedules' mark is lowered to this time (it added one).
    pub schedule: Option<i64>,
    /// The workflow's mark is set to this time (it started the workflow).
    pub workflow: Option<i64>,
    /// It created the instance, at this time.
    pub created: Option<i64>,
}

impl Release {
    /// Whether a mark changes.
    fn moves_marks(&self) -> bool {
        self.queue.is_some() || self.schedule.is_some() || self.workflow.is_some()
    }

    /// The changes of the marks, as a cluster ships them.
    fn mark_writes(&self) -> MarkWrites {
        MarkWrites {
            queue: self.queue.map(MarkWrite::Lower).unwrap_or_default(),
            workflow: self
                .workflow
                .map(|at| MarkWrite::Set(Some(at)))
                .unwrap_or_default(),
            schedule: self.schedule.map(MarkWrite::Lower).unwrap_or_default(),
        }
    }
}

/// Where an instance database's commits go besides its file (see the
/// module docs).
pub enum Backend {
    /// A database opened outside a store (a unit test, the fuzzer):
    /// nothing beside the file.
    Detached,
    /// A host alone: the marks are the index's (`host.sqlite`).
    Local { index: Arc<Index>, address: Address },
    /// A member of a cluster: every commit is shipped.
    Cluster(Replica),
}

impl Backend {
    /// Runs `commit` (the local commit of the open transaction) and
    /// releases `release`, whose pages then fill `frames()` frames of the
    /// log:
    ///
    /// - on a host alone, the index's marks are lowered first, under the
    ///   index's lock, so that a crash after the commit finds the work to
    ///   resume;
    /// - in a cluster, the commit's pages and marks are shipped after it
    ///   and waited for (off the async workers); a commit the cluster did
    ///   not take is on the local copy alone, which is forgotten (the next
    ///   use restores it).
    pub fn commit<E>(
        &self,
        frames: impl FnOnce() -> u32,
        release: Release,
        commit: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<rusqlite::Error> + From<ClusterError>,
    {
        match self {
            Backend::Cluster(replica) => {
                replica.commit(frames, release.mark_writes(), release.created, commit)?
            }
            Backend::Local { index, address } if release.moves_marks() => index
                .lower_marks_around(
                    &address.actor,
                    &address.key,
                    release.queue,
                    release.schedule,
                    release.workflow,
                    commit,
                )?,
            Backend::Local { .. } | Backend::Detached => commit(),
        }
    }

    /// Whether each commit is shipped to a cluster (and so must be on the
    /// local disk before it is).
    pub fn ships(&self) -> bool {
        matches!(self, Backend::Cluster(_))
    }

    /// Whether the lease the database was opened under is gone (in a
    /// cluster): the connection must close before the instance is used
    /// again.
    pub fn is_stale(&self) -> bool {
        match self {
            Backend::Cluster(replica) => replica.is_stale(),
            Backend::Local { .. } | Backend::Detached => false,
        }
    }
}
