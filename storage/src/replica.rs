//! An instance connection's link to the cluster, when the host is part of
//! one: it ships what each commit wrote, and knows when the connection's
//! lease has gone.
//!
//! The local database file is a cache of the replicated one. Its lease slot
//! (`cluster/leases.rs`) knows which replicated version the file is, while
//! a lease is held; when the last connection of the instance closes, that
//! version is recorded in `host.sqlite` (`Index::set_replica`), so that a
//! later start takes the file as it is if nobody wrote meanwhile, and the
//! record is deleted when the first connection opens, before anything can
//! be committed through it: a record is never older than its file.

use std::path::Path;
use std::sync::Arc;

use rusqlite::Connection;

use super::cluster::shipper::{MarkWrites, Shipment, Write};
use super::cluster::{Cluster, ClusterError, LeaseSlot};
use super::index::Index;
use super::pages::LogTail;

/// An instance connection's link to the cluster (see the module docs).
pub struct Replica {
    cluster: Arc<Cluster>,
    slot: Arc<LeaseSlot>,
    index: Arc<Index>,
    incarnation: u64,
}

impl Replica {
    /// Links `conn`, a new connection to the database at `path`, whose lease
    /// this host holds with the file current.
    pub fn open(
        cluster: Arc<Cluster>,
        slot: Arc<LeaseSlot>,
        index: Arc<Index>,
        conn: &Connection,
        path: &Path,
    ) -> Result<Replica, String> {
        let incarnation = cluster.member().incarnation;
        let mut state = slot.state();
        if !state
            .held
            .is_some_and(|held| held.incarnation == incarnation && held.current)
        {
            return Err(format!(
                "this host does not hold the lease of {} (it was lost meanwhile)",
                slot.address
            ));
        }
        if state.open == 0 {
            // The log's frames so far are shipped already: a passive
            // checkpoint reports how many there are.
            let frames: i64 = conn
                .query_row("PRAGMA main.wal_checkpoint(PASSIVE)", [], |r| r.get(1))
                .map_err(|e| format!("cannot read the log of {}: {e}", slot.address))?;
            let tail = LogTail::new(path, frames.max(0) as u32)
                .map_err(|e| format!("cannot read the log of {}: {e}", slot.address))?;
            state.tail = Some(tail);
            index
                .set_replica(&slot.address.actor, &slot.address.key, None)
                .map_err(|e| format!("cannot record the copy of {}: {e}", slot.address))?;
        }
        state.open += 1;
        drop(state);
        Ok(Replica {
            cluster,
            slot,
            index,
            incarnation,
        })
    }

    /// Whether the lease this connection was opened under is gone: the
    /// connection must close before the instance is used again.
    pub fn is_stale(&self) -> bool {
        self.slot
            .held_under(self.cluster.member().incarnation)
            .is_none_or(|held| held.incarnation != self.incarnation)
    }

    /// Runs `commit` (the local commit of the open transaction), then ships
    /// the pages it wrote, whose log then has `frames()` frames, with
    /// `marks` (and `created`, for the commit that creates the instance),
    /// and waits for PostgreSQL to take them (off the async
    /// workers). A transaction that wrote nothing and releases nothing
    /// ships nothing, but is answered only while the lease is valid.
    ///
    /// The outer error is the cluster's: the commit is then on the local
    /// copy alone, which is forgotten (the next use restores it).
    pub fn commit<E>(
        &self,
        frames: impl FnOnce() -> u32,
        marks: MarkWrites,
        created: Option<i64>,
        commit: impl FnOnce() -> Result<(), E>,
    ) -> Result<Result<(), E>, ClusterError> {
        let order = self.slot.order();
        if let Err(e) = commit() {
            return Ok(Err(e));
        }
        let member = self.cluster.member();
        let mut state = self.slot.state();
        let held = state.held.filter(|held| {
            held.incarnation == member.incarnation && held.incarnation == self.incarnation
        });
        let Some(mut held) = held else {
            drop(state);
            self.diverged();
            return Err(ClusterError::Fenced);
        };
        let changes = state
            .tail
            .as_mut()
            .expect("open connections have a tail")
            .read_commit(frames());
        let changes = match changes {
            Ok(changes) => changes,
            Err(e) => {
                drop(state);
                self.diverged();
                return Err(ClusterError::Unavailable(format!(
                    "cannot read the commit's pages: {e}"
                )));
            }
        };
        let write = if changes.pages.is_empty() {
            if marks.is_empty() {
                drop(state);
                drop(order);
                // Nothing to ship: a read, answered while the lease holds.
                return if member.valid() {
                    Ok(Ok(()))
                } else {
                    Err(ClusterError::NotMember)
                };
            }
            Write::Marks(marks)
        } else {
            let write = Write::Commit {
                base: held.version,
                page_size: changes.page_size,
                db_pages: changes.db_pages,
                shrank: changes.db_pages < held.db_pages,
                pages: changes.pages.into_iter().collect(),
                created,
                marks,
            };
            held.version += 1;
            held.written_epoch = held.epoch;
            held.db_pages = changes.db_pages;
            state.held = Some(held);
            write
        };
        drop(state);
        let ack = self.cluster.ship(Shipment {
            id: held.id,
            epoch: held.epoch,
            write,
        });
        drop(order);
        match crate::blocking::off_worker(|| self.cluster.wait(&ack)) {
            Ok(()) => Ok(Ok(())),
            Err(e) => {
                self.diverged();
                Err(e)
            }
        }
    }

    /// This connection committed what the cluster did not take: the copy
    /// and the lease are forgotten, and what serves the instance here
    /// stops.
    fn diverged(&self) {
        self.slot.diverged();
        self.cluster.lost(&self.slot.address);
    }
}

impl Drop for Replica {
    /// After the connection closed: the last one records which replicated
    /// version the file is.
    fn drop(&mut self) {
        let mut state = self.slot.state();
        state.open = state.open.saturating_sub(1);
        if state.open > 0 {
            return;
        }
        state.tail = None;
        let version = match state.held {
            Some(held) if held.current => Some((held.written_epoch, held.version)),
            _ => state.known,
        };
        drop(state);
        if let Some(version) = version {
            let address = &self.slot.address;
            if let Err(e) = self
                .index
                .set_replica(&address.actor, &address.key, Some(version))
            {
                tracing::warn!(%address, error = %e, "cannot record the version of the local copy; the next start restores it");
            }
        }
    }
}
