//! The instance store: the one interface through which the layers above
//! reach instances' data. Opening, creating, removing and listing an
//! instance's database, and the index of marks (`host.sqlite`) that says
//! which instances have work due, go through it and nothing else: cells,
//! capabilities and background work never see a path or a directory.
//!
//! Its one backend today is the local data directory: one SQLite file per
//! instance under `actors/<actor>/`, and the index beside them. A second
//! backend (several hosts sharing actors through PostgreSQL) replaces what
//! is behind these methods, not their callers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use rusqlite::{Connection, OpenFlags};

use crate::address::Address;
use crate::config::{DB_BUSY_TIMEOUT, Synchronous};
use crate::deadline::Deadline;

use super::DataDir;
use super::index::Index;
use super::instance_db::InstanceDb;

/// Where instances' databases and the index of marks live.
pub(crate) struct InstanceStore {
    data: DataDir,
    index: Arc<Index>,
    synchronous: Synchronous,
}

impl InstanceStore {
    /// The store in `data` (opened and locked already), with a directory
    /// for each of `actors`, and its index.
    pub(crate) fn open(
        data: DataDir,
        synchronous: Synchronous,
        actors: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Result<InstanceStore> {
        for actor in actors {
            data.prepare_actor(actor.as_ref())?;
        }
        let index = Index::open_with(&data.root().join("host.sqlite"), synchronous)
            .with_context(|| format!("cannot open {}/host.sqlite", data.root().display()))?;
        data.sync_root()?;
        Ok(InstanceStore {
            data,
            index: Arc::new(index),
            synchronous,
        })
    }

    /// The data directory (for read-only views that open files of their
    /// own, and for users to see).
    pub(crate) fn root(&self) -> &Path {
        self.data.root()
    }

    /// The index of marks.
    pub(crate) fn marks(&self) -> &Arc<Index> {
        &self.index
    }

    /// Whether the instance at `address` exists.
    pub(crate) fn exists(&self, address: &Address) -> bool {
        self.data.instance_exists(&address.actor, &address.key)
    }

    /// Opens the database of `address` (creating the file if it is new)
    /// with its size limit and the deadline its statements run under.
    pub(crate) fn open_instance(
        &self,
        address: &Address,
        size_limit: u64,
        deadline: Deadline,
    ) -> rusqlite::Result<InstanceDb> {
        InstanceDb::open(&self.path(address), self.synchronous, size_limit, deadline)
    }

    /// A read-only connection to the database of `address` that sees what
    /// is committed (a queue pump reads its queue through one).
    pub(crate) fn open_reader(&self, address: &Address) -> rusqlite::Result<Connection> {
        let conn = Connection::open_with_flags(
            self.path(address),
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(DB_BUSY_TIMEOUT)?;
        Ok(conn)
    }

    /// Makes a new instance durable once its creation committed, and lists
    /// it in the index.
    pub(crate) fn created(&self, address: &Address, created_at: i64) -> Result<()> {
        // Both are tried; the first failure is reported.
        let synced = self
            .data
            .sync_created(&address.actor)
            .context("cannot sync the new instance's directory");
        let indexed = self
            .index
            .insert(&address.actor, &address.key, created_at)
            .context("cannot index the new instance");
        synced.and(indexed)
    }

    /// Deletes the database files of `address` (also what a destroy cut
    /// short left: a WAL without its database).
    pub(crate) fn remove_files(&self, address: &Address) -> Result<()> {
        self.data.remove_instance(&address.actor, &address.key)
    }

    /// Deletes the instance at `address`: its files, then its index row
    /// with its marks.
    pub(crate) fn remove(&self, address: &Address) -> Result<()> {
        self.remove_files(address)?;
        Ok(self.index.remove(&address.actor, &address.key)?)
    }

    /// Keys of `actor`'s instances, sorted.
    pub(crate) fn keys(&self, actor: &str) -> rusqlite::Result<Vec<String>> {
        self.index.keys(actor)
    }

    fn path(&self, address: &Address) -> PathBuf {
        self.data.instance_path(&address.actor, &address.key)
    }
}
