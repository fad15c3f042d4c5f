//! Checkpoints of an instance's write-ahead log, off the async workers.
//!
//! SQLite checkpoints a WAL database inside the commit that takes the log
//! past 1,000 pages: that commit copies the log into the database file and
//! syncs both, milliseconds during which the worker thread it runs on is
//! blocked, and with it the other tasks of that worker. An instance
//! connection instead records the log's size after each commit
//! ([`Wal::watch`], which replaces SQLite's automatic checkpoints on that
//! connection), and once the log is past [`CHECKPOINT_PAGES`] the commit
//! stage runs the same checkpoint right after the commit, with the
//! worker's other tasks moved to another thread first
//! ([`crate::blocking::off_worker`]). It runs while the instance's
//! operation still holds the instance, so no write comes between: the
//! checkpoint copies the whole log, and the log starts over at the next
//! write, as with SQLite's own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use rusqlite::Connection;

use crate::config::Synchronous;

/// The log's size, in pages, past which a checkpoint runs (SQLite's own
/// default for its automatic checkpoints).
pub(crate) const CHECKPOINT_PAGES: u32 = 1000;

/// The write-ahead log of one instance database.
pub(crate) struct Wal {
    synchronous: Synchronous,
    /// Pages in the log after the last commit on the instance connection.
    pages: Arc<AtomicU32>,
}

impl Wal {
    /// Records the log's size after every commit on `conn`; SQLite's
    /// automatic checkpoints stop on it.
    pub(crate) fn watch(conn: &mut Connection, synchronous: Synchronous) -> rusqlite::Result<Wal> {
        let pages = Arc::new(AtomicU32::new(0));
        let recorded = pages.clone();
        conn.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, n: i32| {
            recorded.store(n.max(0) as u32, Ordering::Relaxed);
            Ok(())
        }))?;
        Ok(Wal { synchronous, pages })
    }

    /// Whether a commit syncs the log (`synchronous = full`).
    pub(crate) fn syncs_every_commit(&self) -> bool {
        self.synchronous == Synchronous::Full
    }

    /// Pages in the log after the last commit.
    pub(crate) fn pages(&self) -> u32 {
        self.pages.load(Ordering::Relaxed)
    }

    /// Checkpoints the log of `conn` (its instance connection, between
    /// transactions) if it is past [`CHECKPOINT_PAGES`], off the async
    /// workers. A failure is logged: the next commit tries again.
    pub(crate) fn checkpoint_if_due(&self, conn: &Connection) {
        if self.pages() < CHECKPOINT_PAGES {
            return;
        }
        let done = crate::blocking::off_worker(|| {
            conn.query_row("PRAGMA main.wal_checkpoint(PASSIVE)", [], |_| Ok(()))
        });
        match done {
            Ok(()) => self.pages.store(0, Ordering::Relaxed),
            Err(e) => {
                tracing::warn!(error = %e, "a checkpoint of the log failed; the next commit tries again")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log grows past the mark without a checkpoint inside a commit,
    /// and the checkpoint after the commit copies it whole: the log
    /// starts over at the next write.
    #[test]
    fn the_log_is_checkpointed_after_the_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.sqlite");
        let mut conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        let wal = Wal::watch(&mut conn, Synchronous::Normal).unwrap();
        conn.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        let page = vec![0u8; 4096];
        let mut inserted = 0;
        while wal.pages() < CHECKPOINT_PAGES + 100 {
            conn.execute("INSERT INTO t VALUES (?)", [&page]).unwrap();
            inserted += 1;
        }
        // No automatic checkpoint ran: SQLite's would have kept the log
        // under the mark.
        assert!(wal.pages() > CHECKPOINT_PAGES, "{}", wal.pages());
        wal.checkpoint_if_due(&conn);
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
}
