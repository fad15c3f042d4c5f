//! The commit stage: every transaction of an instance ends here, whoever
//! opened it (an action, a hook, a queue event, a workflow step, a
//! schedule run, a host operation).
//!
//! The stage decides when a transaction is durable and what it releases
//! once it is: the index's marks its effects need are lowered first,
//! under the index's lock (a crash after the commit finds the work to
//! resume); then the SQLite commit makes it durable; then the events it
//! broadcast are published, and [`Committed`] tells the caller which
//! wake-ups to release (the runtime core starts a queue pump or a
//! workflow driver after the operation, with the instance's slot still
//! held). The caller hears back only after this returns.
//!
//! Everything that will change how commits reach the disk or other
//! machines (coalescing several instances' commits into one sync,
//! shipping a commit before it is acknowledged) belongs here.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::address::Address;
use crate::connections::{Hub, PendingEvent};
use crate::storage::index::Index;
use crate::storage::instance_db::{InstanceDb, now_ms};

/// What the open transaction did that outlives it: collected while the
/// guest runs, acted on by the commit stage, dropped on a rollback.
#[derive(Default)]
pub(crate) struct Effects {
    /// It appended to the queue.
    pub(crate) appended: bool,
    /// The soonest time of the schedules it added.
    pub(crate) scheduled: Option<i64>,
    /// Events it broadcast, published once it commits.
    pub(crate) events: Vec<PendingEvent>,
    /// It called or sent to another instance, which no rollback undoes: a
    /// batch of calls ends with it (see `cell/batch.rs`).
    pub(crate) reached_outside: bool,
}

impl Effects {
    /// Adds the effects of a later call of the same transaction.
    pub(crate) fn absorb(&mut self, later: Effects) {
        self.appended |= later.appended;
        self.scheduled = match (self.scheduled, later.scheduled) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.events.extend(later.events);
        self.reached_outside |= later.reached_outside;
    }
}

/// What a commit released, for the caller to act on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Committed {
    /// The transaction appended to the queue: its pump (or workflow
    /// driver) must run.
    pub(crate) appended: bool,
}

/// Where an instance's transactions end (see the module docs).
#[derive(Clone, Default)]
pub(crate) struct CommitStage {
    /// The host's index, whose marks a commit lowers (`None` in unit tests).
    index: Option<Arc<Index>>,
    /// Where broadcast events go (`None` in unit tests).
    hub: Option<Arc<Hub>>,
    /// Transactions committed through this stage and its clones.
    commits: Arc<AtomicU64>,
}

impl CommitStage {
    pub(crate) fn new(index: Arc<Index>, hub: Arc<Hub>) -> CommitStage {
        CommitStage {
            index: Some(index),
            hub: Some(hub),
            commits: Arc::default(),
        }
    }

    /// Transactions committed through this stage and its clones (a batch
    /// of coalesced calls is one).
    pub(crate) fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Commits the open transaction of `db`, the database of `address`,
    /// with its `effects`.
    pub(crate) fn commit(
        &self,
        address: &Address,
        db: &InstanceDb,
        effects: Effects,
    ) -> rusqlite::Result<Committed> {
        let Effects {
            appended,
            scheduled,
            events,
            reached_outside: _,
        } = effects;
        // The commit waits for the disk: not on a worker other instances'
        // calls need.
        crate::blocking::off_worker(|| match &self.index {
            Some(index) if appended || scheduled.is_some() => index.lower_marks_around(
                &address.actor,
                &address.key,
                appended.then_some(now_ms()),
                scheduled,
                || db.commit(),
            ),
            _ => Ok(db.commit()),
        })??;
        self.commits.fetch_add(1, Ordering::Relaxed);
        if !events.is_empty()
            && let Some(hub) = &self.hub
        {
            hub.publish(address, &events);
        }
        Ok(Committed { appended })
    }
}
