//! The instance store: the one interface through which the layers above
//! reach instances' data. Opening, creating, removing and listing an
//! instance's database, and the index of marks (`host.sqlite`) that says
//! which instances have work due, go through it and nothing else: cells,
//! capabilities and background work never see a path or a directory.
//!
//! Its first backend is the local data directory: one SQLite file per
//! instance under `actors/<actor>/`, and the index beside them. In a
//! cluster (`cluster/`), the files are caches of the copies in PostgreSQL:
//! an instance must be claimed ([`InstanceStore::claim`]) before it is
//! opened, which takes its lease and makes its file the replicated one,
//! and each connection ships its commits (`replica.rs`); the marks and the
//! list of instances are PostgreSQL's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use rusqlite::{Connection, OpenFlags};

use crate::address::Address;
use crate::config::{DB_BUSY_TIMEOUT, Synchronous};
use crate::deadline::Deadline;

use super::DataDir;
use super::backend::Backend;
use super::cluster::shipper::{Shipment, Write};
use super::cluster::{Acquired, Cluster, ClusterError, Held, Owner};
use super::index::Index;
use super::instance_db::InstanceDb;
use super::marks::Marks;
use super::replica::Replica;

/// Where instances' databases and the index of marks live.
pub struct InstanceStore {
    data: DataDir,
    index: Arc<Index>,
    marks: Arc<Marks>,
    synchronous: Synchronous,
    cluster: Option<Arc<Cluster>>,
}

/// Why an instance could not be claimed.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// Another member holds its lease.
    #[error("another host holds the instance: {}", .0.id)]
    Elsewhere(Owner),
    #[error("{0}")]
    Cluster(#[from] ClusterError),
    /// A connection of a lease held before is still open on the file.
    #[error("the instance's file is still open from before; try again")]
    Busy,
    #[error("cannot restore the instance's file: {0}")]
    Restore(String),
}

impl InstanceStore {
    /// The store in `data` (opened and locked already), with a directory
    /// for each of `actors`, and its index; in `cluster` if given.
    pub fn open(
        data: DataDir,
        synchronous: Synchronous,
        actors: impl IntoIterator<Item = impl AsRef<str>>,
        cluster: Option<Arc<Cluster>>,
    ) -> Result<InstanceStore> {
        for actor in actors {
            data.prepare_actor(actor.as_ref())?;
        }
        let index = Index::open_with(&data.root().join("host.sqlite"), synchronous)
            .with_context(|| format!("cannot open {}/host.sqlite", data.root().display()))?;
        data.sync_root()?;
        let index = Arc::new(index);
        Ok(InstanceStore {
            data,
            marks: Arc::new(Marks::new(index.clone(), cluster.clone())),
            index,
            synchronous,
            cluster,
        })
    }

    /// The cluster this host is part of, if any.
    pub fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.as_ref()
    }

    /// Makes the instance at `address` this host's to open: in a cluster,
    /// takes its lease unless this host holds it already, and makes its
    /// local file the replicated one (restoring it from PostgreSQL unless
    /// it is known to be that version). Nothing to do on a host alone.
    pub async fn claim(&self, address: &Address) -> Result<(), ClaimError> {
        let Some(cluster) = &self.cluster else {
            return Ok(());
        };
        let slot = cluster.slot(address);
        let current = |incarnation| {
            slot.held_under(incarnation)
                .is_some_and(|held: Held| held.current)
        };
        let member = cluster.valid_member().await?;
        if current(member.incarnation) {
            return Ok(());
        }
        let _claiming = slot.claiming.lock().await;
        let member = cluster.valid_member().await?;
        if current(member.incarnation) {
            return Ok(());
        }
        let taken = match cluster.acquire(&member, address).await? {
            Acquired::Taken(taken) => taken,
            Acquired::Elsewhere(owner) => {
                cluster.note_owner(address, Some(owner.clone()));
                return Err(ClaimError::Elsewhere(owner));
            }
        };
        cluster.note_owner(address, None);
        let recorded = {
            let state = slot.state();
            if state.open > 0 {
                return Err(ClaimError::Busy);
            }
            state.known
        };
        let recorded = match recorded {
            Some(known) => Some(known),
            None => self
                .index
                .replica(&address.actor, &address.key)
                .map_err(|e| ClaimError::Restore(e.to_string()))?,
        };
        let path = self.path(address);
        let replicated = (taken.written_epoch, taken.version);
        if taken.created_at.is_none() {
            // Not an instance (any more): no file may stand for it.
            self.remove_files(address)
                .map_err(|e| ClaimError::Restore(format!("{e:#}")))?;
        } else if recorded != Some(replicated) || !path.exists() {
            let image = super::pages::Image::create(&path, taken.page_size, taken.pages)
                .map_err(|e| ClaimError::Restore(e.to_string()))?;
            cluster.restore(taken.id, image).await?;
            tracing::info!(%address, version = taken.version, pages = taken.pages, "restored the instance from the cluster");
        }
        let mut state = slot.state();
        state.known = None;
        state.held = Some(Held {
            incarnation: member.incarnation,
            id: taken.id,
            epoch: taken.epoch,
            version: taken.version,
            written_epoch: taken.written_epoch,
            db_pages: taken.pages,
            current: true,
        });
        Ok(())
    }

    /// The owner of `address` this host last met, if another member.
    pub fn known_owner(&self, address: &Address) -> Option<Owner> {
        self.cluster.as_ref()?.known_owner(address)
    }

    /// Forgets the owner of `address` this host met (it did not answer).
    pub fn forget_owner(&self, address: &Address) {
        if let Some(cluster) = &self.cluster {
            cluster.note_owner(address, None);
        }
    }

    /// The data directory (for read-only views that open files of their
    /// own, and for users to see).
    pub fn root(&self) -> &Path {
        self.data.root()
    }

    /// Records in the data directory that this host serves its API at
    /// `url` (see `storage/src/host_lock.rs`).
    pub fn announce(&self, url: &str) -> Result<()> {
        self.data.announce(url)
    }

    /// The marks of every instance.
    pub fn marks(&self) -> &Arc<Marks> {
        &self.marks
    }

    /// This host's index (its marks, when it runs alone).
    pub fn index(&self) -> &Arc<Index> {
        &self.index
    }

    /// Whether the instance at `address` exists.
    pub fn exists(&self, address: &Address) -> bool {
        self.data.instance_exists(&address.actor, &address.key)
    }

    /// Opens the database of `address` (creating the file if it is new)
    /// with its size limit and the deadline its statements run under; its
    /// commits go to this store's backend (`backend.rs`).
    pub fn open_instance(
        &self,
        address: &Address,
        size_limit: u64,
        deadline: Deadline,
    ) -> rusqlite::Result<InstanceDb> {
        let path = self.path(address);
        let mut db = InstanceDb::open(&path, self.synchronous, size_limit, deadline)?;
        db.backend = match &self.cluster {
            Some(cluster) => {
                let replica = Replica::open(
                    cluster.clone(),
                    cluster.slot(address),
                    self.index.clone(),
                    &db.conn,
                    &path,
                );
                Backend::Cluster(replica.map_err(|e| {
                    rusqlite::Error::SqliteFailure(
                        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
                        Some(e),
                    )
                })?)
            }
            None => Backend::Local {
                index: self.index.clone(),
                address: address.clone(),
            },
        };
        Ok(db)
    }

    /// A read-only connection to the database of `address` that sees what
    /// is committed (a queue pump reads its queue through one).
    pub fn open_reader(&self, address: &Address) -> rusqlite::Result<Connection> {
        let conn = Connection::open_with_flags_and_vfs(
            self.path(address),
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            super::INSTANCE_VFS,
        )?;
        conn.busy_timeout(DB_BUSY_TIMEOUT)?;
        Ok(conn)
    }

    /// Makes a new instance durable once its creation committed, and lists
    /// it in the index (in a cluster, the creation's shipment did both).
    pub fn created(&self, address: &Address, created_at: i64) -> Result<()> {
        if self.cluster.is_some() {
            return Ok(());
        }
        // Both are tried; the first failure is reported.
        let synced = self
            .data
            .sync_created(&address.actor, &address.key)
            .context("cannot sync the new instance's directory");
        let indexed = self
            .index
            .insert(&address.actor, &address.key, created_at)
            .context("cannot index the new instance");
        synced.and(indexed)
    }

    /// Deletes the database files of `address` (also what a destroy cut
    /// short left: a WAL without its database).
    pub fn remove_files(&self, address: &Address) -> Result<()> {
        self.data.remove_instance(&address.actor, &address.key)
    }

    /// Deletes the instance at `address`: its files, then its index row
    /// with its marks. In a cluster, first its replicated copy and marks
    /// (fenced: this host must hold its lease, its file current).
    pub fn remove(&self, address: &Address) -> Result<()> {
        if let Some(cluster) = &self.cluster {
            let slot = cluster.slot(address);
            let held = slot
                .held_under(cluster.member().incarnation)
                .filter(|held| held.current)
                .ok_or_else(|| {
                    anyhow::anyhow!("this host no longer holds the lease of {address}")
                })?;
            let order = slot.order();
            let ack = cluster.ship(Shipment {
                id: held.id,
                epoch: held.epoch,
                write: Write::Destroy { base: held.version },
            });
            drop(order);
            let shipped = crate::blocking::off_worker(|| cluster.wait(&ack));
            if let Err(e) = shipped {
                slot.diverged();
                return Err(e).context("the cluster did not take the destroy");
            }
            {
                let mut state = slot.state();
                if let Some(held) = &mut state.held {
                    held.version += 1;
                    held.written_epoch = held.epoch;
                    held.db_pages = 0;
                }
            }
            return self.remove_files(address);
        }
        self.remove_files(address)?;
        Ok(self.index.remove(&address.actor, &address.key)?)
    }

    /// Keys of `actor`'s instances that begin with `prefix`, after
    /// `after` if given, at most `limit`, in byte order.
    pub async fn keys(
        &self,
        actor: &str,
        prefix: &str,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<String>> {
        let before = super::prefix_end(prefix);
        let before = before.as_deref();
        match &self.cluster {
            Some(cluster) => Ok(cluster.keys(actor, prefix, after, before, limit).await?),
            None => Ok(self.index.keys(actor, prefix, after, before, limit)?),
        }
    }

    fn path(&self, address: &Address) -> PathBuf {
        self.data.instance_path(&address.actor, &address.key)
    }
}
