//! Checkpoints of an instance's write-ahead log, off the commit path.
//!
//! SQLite checkpoints a WAL database inside the commit that takes the log
//! past 1,000 pages: that commit copies the log into the database file and
//! syncs both, milliseconds during which the call waits, and with it the
//! worker thread it runs on. An instance connection instead records the
//! log's size after each commit ([`Wal::watch`], which replaces SQLite's
//! automatic checkpoints on that connection), and once the log is past
//! [`CHECKPOINT_PAGES`] the commit stage starts a passive checkpoint on a
//! connection of its own, on a blocking thread ([`Wal::checkpoint_soon`]).
//! A passive checkpoint never blocks the instance's readers or writer, and
//! one at a time runs per instance.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use rusqlite::{Connection, OpenFlags};

use crate::config::Synchronous;

/// The log's size, in pages, past which a checkpoint starts (SQLite's own
/// default for its automatic checkpoints).
pub(crate) const CHECKPOINT_PAGES: u32 = 1000;

/// The write-ahead log of one instance database.
pub(crate) struct Wal {
    path: PathBuf,
    synchronous: Synchronous,
    /// Pages in the log after the last commit on the instance connection.
    pages: Arc<AtomicU32>,
    /// A checkpoint of this log is running.
    running: Arc<AtomicBool>,
}

impl Wal {
    /// Records the log's size after every commit on `conn`, the instance
    /// connection of the database at `path`; SQLite's automatic
    /// checkpoints stop on it.
    pub(crate) fn watch(
        conn: &mut Connection,
        path: &Path,
        synchronous: Synchronous,
    ) -> rusqlite::Result<Wal> {
        let pages = Arc::new(AtomicU32::new(0));
        let recorded = pages.clone();
        conn.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, n: i32| {
            recorded.store(n.max(0) as u32, Ordering::Relaxed);
            Ok(())
        }))?;
        Ok(Wal {
            path: path.to_owned(),
            synchronous,
            pages,
            running: Arc::default(),
        })
    }

    /// Whether a commit syncs the log (`synchronous = full`).
    pub(crate) fn syncs_every_commit(&self) -> bool {
        self.synchronous == Synchronous::Full
    }

    /// Pages in the log after the last commit.
    pub(crate) fn pages(&self) -> u32 {
        self.pages.load(Ordering::Relaxed)
    }

    /// Starts a checkpoint on a blocking thread if the log is past
    /// [`CHECKPOINT_PAGES`] and none is running. Outside a tokio runtime
    /// (tools, unit tests) it runs here.
    pub(crate) fn checkpoint_soon(&self) {
        if self.pages() < CHECKPOINT_PAGES || self.running.swap(true, Ordering::AcqRel) {
            return;
        }
        let (path, synchronous, running) =
            (self.path.clone(), self.synchronous, self.running.clone());
        let work = move || {
            if let Err(e) = checkpoint(&path, synchronous) {
                tracing::warn!(path = %path.display(), error = %e, "a checkpoint of the log failed; the next commit past the mark tries again");
            }
            running.store(false, Ordering::Release);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => drop(handle.spawn_blocking(work)),
            Err(_) => work(),
        }
    }
}

/// Runs a passive checkpoint of the database at `path` on a connection of
/// its own. It never creates the database: an instance destroyed
/// meanwhile stays gone.
fn checkpoint(path: &Path, synchronous: Synchronous) -> rusqlite::Result<()> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.pragma_update(None, "synchronous", synchronous.pragma())?;
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log grows past the mark without a checkpoint in the commit,
    /// and the checkpoint the stage starts copies it into the database
    /// (the log starts over at the next write).
    #[test]
    fn the_log_is_checkpointed_outside_the_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.sqlite");
        let mut conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        let wal = Wal::watch(&mut conn, &path, Synchronous::Normal).unwrap();
        conn.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        let page = vec![0u8; 4096];
        let mut inserted = 0;
        while wal.pages() < CHECKPOINT_PAGES + 100 {
            conn.execute("INSERT INTO t VALUES (?)", [&page]).unwrap();
            inserted += 1;
        }
        // No automatic checkpoint ran: SQLite's would have kept the log
        // under the mark.
        let before = wal.pages();
        assert!(before > CHECKPOINT_PAGES, "{before}");
        wal.checkpoint_soon();
        assert!(!wal.running.load(Ordering::Acquire));
        conn.execute("INSERT INTO t VALUES (?)", [&page]).unwrap();
        assert!(
            wal.pages() < 10,
            "the log did not start over: {}",
            wal.pages()
        );
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, inserted + 1);
    }

    /// A checkpoint of a database that is gone fails without creating it.
    #[test]
    fn a_checkpoint_never_creates_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone.sqlite");
        assert!(checkpoint(&path, Synchronous::Normal).is_err());
        assert!(!path.exists());
    }
}
