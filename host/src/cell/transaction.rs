//! The transaction protocol: every call into the guest runs in one
//! transaction of the instance's database, begun here and ended in the
//! commit stage, or rolled back whole.

use crate::error::Error;
use crate::instance::commit::{CommitError, Durable, Unsynced};
use crate::storage::InstanceDb;
use crate::text::escaped;

use super::{Cell, Start};

impl Cell {
    /// Completes the creation transaction (for an explicit create).
    pub(crate) fn commit_creation(&mut self) -> Result<(), Error> {
        self.begin()?;
        self.finish(Ok(()))
    }

    /// Runs the `sleep` hook; the cell is dropped afterwards either way.
    pub(crate) async fn sleep(mut self) {
        if !self.is_broken()
            && let Err(e) = self.hook_transaction("sleep").await
        {
            tracing::warn!(error = %escaped(&e), "the sleep hook failed");
        }
        // Closing the database waits for the disk (SQLite's checkpoint of
        // the log and its removal, as the last connection closes): not on
        // a worker that other instances' calls need.
        crate::blocking::wait_on_sync_thread(move || drop(self)).await;
    }

    /// Runs the `destroy` hook before the instance's data is deleted.
    pub(crate) async fn destroy(mut self) {
        if let Err(e) = self.hook_transaction("destroy").await {
            tracing::warn!(error = %escaped(&e), "the destroy hook failed; destroying anyway");
        }
    }

    pub(super) async fn hook_transaction(&mut self, hook: &'static str) -> Result<(), Error> {
        self.begin()?;
        let result = self.hook(hook).await;
        self.finish(result)
    }

    pub(super) fn begin(&mut self) -> Result<(), Error> {
        self.wait_for_the_last_sync()?;
        if self.starting.is_some() {
            return Ok(());
        }
        self.store
            .data_mut()
            .begin_transaction()
            .map_err(|e| self.storage_error(e))
    }

    pub(super) fn finish<T>(&mut self, result: Result<T, Error>) -> Result<T, Error> {
        let (value, unsynced) = self.end(result, false)?;
        debug_assert!(unsynced.is_none(), "a commit told to sync now did");
        Ok(value)
    }

    /// [`Cell::finish`], except that in `synchronous = full`, while other
    /// instances work, the log's sync is left to the caller (see
    /// `cell/batch.rs`, [`Cell::wait_until_durable`]).
    pub(super) fn finish_syncing_later<T>(
        &mut self,
        result: Result<T, Error>,
    ) -> Result<(T, Option<Unsynced>), Error> {
        self.end(result, true)
    }

    /// Holds the cell until the log's sync of its last commit has ended,
    /// the async worker free meanwhile. A sync that failed replaces the
    /// cell. Should the wait be dropped, the next transaction of the cell
    /// waits for that sync first ([`Cell::begin`]), so that nothing it
    /// does leaves the instance before the commit before it is durable.
    pub(super) async fn wait_until_durable(&mut self, durable: Durable) {
        self.syncing = Some(durable.clone());
        let synced = durable.wait().await;
        self.syncing = None;
        self.broken |= synced.is_err();
    }

    /// The wait of [`Cell::wait_until_durable`], if a dropped one left it
    /// to the next transaction.
    fn wait_for_the_last_sync(&mut self) -> Result<(), Error> {
        let Some(durable) = self.syncing.take() else {
            return Ok(());
        };
        // A sync is left to a caller on a multi-thread runtime only, where
        // a worker may block on it once its other tasks moved away.
        let synced = match futures_util::FutureExt::now_or_never(durable.wait()) {
            Some(synced) => synced,
            None => {
                let handle = tokio::runtime::Handle::current();
                crate::blocking::off_worker(|| handle.block_on(durable.wait()))
            }
        };
        synced.map_err(|e| self.not_synced(e))
    }

    /// A commit whose log could not be synced: the call is not reported
    /// as done, and the cell is replaced, so that the instance is read
    /// anew from its files.
    pub(super) fn not_synced(&mut self, e: CommitError) -> Error {
        self.broken = true;
        e.unknown_outcome(&self.name().actor, &self.name().key)
    }

    fn end<T>(
        &mut self,
        result: Result<T, Error>,
        sync_later: bool,
    ) -> Result<(T, Option<Unsynced>), Error> {
        let result = match self.store.data_mut().take_lost_transaction() {
            Some(cause) if result.is_ok() => Err(Error::transaction_rolled_back(
                &self.name().actor,
                &self.name().key,
                &cause,
            )),
            _ => result,
        };
        if let Some(Start::Created(at)) = self.starting {
            self.store.data_mut().note_created(at);
        }
        match result {
            Ok(value) => match if sync_later {
                self.store.data_mut().commit_transaction_syncing_later()
            } else {
                self.store
                    .data_mut()
                    .commit_transaction()
                    .map(|committed| (committed, None))
            } {
                Ok((committed, unsynced)) => {
                    self.queue_grew |= committed.appended;
                    if let Some(Start::Created(at)) = self.starting.take() {
                        self.created = Some(at);
                    }
                    Ok((value, unsynced))
                }
                Err(CommitError::Sqlite(e)) => {
                    let error = self.storage_error(e);
                    self.db().rollback();
                    self.broken |= self.starting.is_some();
                    Err(error)
                }
                Err(CommitError::NotReplicated(e)) => {
                    // Committed here, not in the cluster: this copy is
                    // forgotten, and the cell with it.
                    self.broken = true;
                    Err(self.not_replicated(e))
                }
                Err(e @ CommitError::LogNotSynced(_)) => Err(self.not_synced(e)),
            },
            Err(e) => {
                self.store.data_mut().roll_back();
                // A start rolled back leaves a guest whose hooks ran for
                // nothing: replace it.
                self.broken |= self.starting.is_some();
                Err(e)
            }
        }
    }

    /// Runs a transaction of the host's own statements.
    pub(crate) fn host_transaction<T>(
        &mut self,
        f: impl FnOnce(&InstanceDb) -> rusqlite::Result<T>,
    ) -> Result<T, Error> {
        self.begin()?;
        let result = f(self.db()).map_err(|e| self.storage_error(e));
        self.finish(result)
    }
}
