//! Checkpoints of an instance's write-ahead log, beside the instance's
//! work.
//!
//! SQLite checkpoints a WAL database inside the commit that takes the log
//! past 1,000 pages: that commit copies the log into the database file and
//! syncs both, milliseconds (tens of them on a busy disk) during which the
//! worker thread is blocked and the instance held, so every call waiting
//! for the instance waits for the disk too. An instance connection instead
//! records the log's size after each commit ([`Wal::watch`], which turns
//! SQLite's automatic checkpoints off on it). While other instances are at
//! work, once the log has grown by [`CHECKPOINT_PAGES`] since the last
//! checkpoint, the commit stage starts a checkpoint on a second connection
//! of the instance's own, on a blocking thread. The instance goes on
//! meanwhile: a passive checkpoint copies what was committed when it
//! began, and the log starts over at the first write after a checkpoint
//! that copied it whole.
//!
//! Under writes that never pause, no checkpoint may copy the whole log, so
//! past [`INLINE_CHECKPOINT_PAGES`] the checkpoint runs on the instance
//! connection after the commit, the instance still held and the worker's
//! other tasks moved off first ([`crate::blocking::off_worker`]): no write
//! comes between, and the log starts over. A lone instance checkpoints so
//! at [`CHECKPOINT_PAGES`] already: there, a checkpoint beside it only
//! meets its own commits at the disk, and its callers wait all the same. The checkpoint
//! connection lives and dies with the instance connection: dropping the
//! [`Wal`] waits for a checkpoint in flight and closes it, so no
//! connection to the files outlives the instance's cell.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OpenFlags};

use crate::config::Synchronous;

/// The log's growth, in pages, past which a checkpoint starts beside the
/// instance (SQLite's own default for its automatic checkpoints).
pub(crate) const CHECKPOINT_PAGES: u32 = 1000;

/// The log's size, in pages, past which the checkpoint runs on the
/// instance connection, holding the instance (about 32 MiB of log).
pub(crate) const INLINE_CHECKPOINT_PAGES: u32 = 8 * CHECKPOINT_PAGES;

/// The write-ahead log of one instance database.
pub(crate) struct Wal {
    synchronous: Synchronous,
    /// Pages in the log after the last commit on the instance connection.
    pages: Arc<AtomicU32>,
    /// The log's size when the last checkpoint began.
    checkpointed_at: AtomicU32,
    checkpointer: Arc<Checkpointer>,
}

/// The second connection, opened at the first checkpoint.
struct Checkpointer {
    path: PathBuf,
    conn: Mutex<CheckpointConn>,
    /// A checkpoint was started and has not ended.
    in_flight: AtomicBool,
}

struct CheckpointConn {
    conn: Option<Connection>,
    /// The instance connection is closing: no checkpoint runs any more.
    closed: bool,
}

impl Checkpointer {
    /// Runs one passive checkpoint on the second connection.
    fn run(&self) {
        let mut guard = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        if !guard.closed
            && let Err(e) = checkpoint(&self.path, &mut guard.conn)
        {
            tracing::warn!(error = %e, "a checkpoint of the log failed; a later commit tries again");
        }
        self.in_flight.store(false, Ordering::Release);
    }
}

fn checkpoint(path: &Path, conn: &mut Option<Connection>) -> rusqlite::Result<()> {
    if conn.is_none() {
        let opened = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        *conn = Some(opened);
    }
    let conn = conn.as_ref().expect("opened above");
    conn.query_row("PRAGMA main.wal_checkpoint(PASSIVE)", [], |_| Ok(()))
}

impl Wal {
    /// Records the log's size after every commit on `conn`, the instance
    /// connection of the database at `path`; SQLite's automatic
    /// checkpoints stop on it.
    pub(crate) fn watch(
        conn: &mut Connection,
        synchronous: Synchronous,
        path: &Path,
    ) -> rusqlite::Result<Wal> {
        let pages = Arc::new(AtomicU32::new(0));
        let recorded = pages.clone();
        conn.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, n: i32| {
            recorded.store(n.max(0) as u32, Ordering::Relaxed);
            Ok(())
        }))?;
        Ok(Wal {
            synchronous,
            pages,
            checkpointed_at: AtomicU32::new(0),
            checkpointer: Arc::new(Checkpointer {
                path: path.to_owned(),
                conn: Mutex::new(CheckpointConn {
                    conn: None,
                    closed: false,
                }),
                in_flight: AtomicBool::new(false),
            }),
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

    /// After a commit on `conn` (the instance connection, between
    /// transactions). With `beside` (other instances are at work), starts
    /// a checkpoint beside the instance once the log has grown by
    /// [`CHECKPOINT_PAGES`] since the last one, and runs one on `conn`,
    /// off the async workers, once it is past [`INLINE_CHECKPOINT_PAGES`].
    /// Without, runs one on `conn` once the log is past
    /// [`CHECKPOINT_PAGES`]: a second connection's checkpoint, its syncs
    /// meeting the instance's own commits, costs a lone instance more than
    /// it frees. A failure is logged: a later commit tries again.
    pub(crate) fn checkpoint_if_due(&self, conn: &Connection, beside: bool) {
        let pages = self.pages();
        if pages < self.checkpointed_at.load(Ordering::Relaxed) {
            // The log started over since.
            self.checkpointed_at.store(0, Ordering::Relaxed);
        }
        let inline_at = if beside {
            INLINE_CHECKPOINT_PAGES
        } else {
            CHECKPOINT_PAGES
        };
        if pages >= inline_at && !self.checkpointer.in_flight.load(Ordering::Acquire) {
            let done = crate::blocking::off_worker(|| {
                conn.query_row("PRAGMA main.wal_checkpoint(PASSIVE)", [], |_| Ok(()))
            });
            match done {
                Ok(()) => {
                    self.pages.store(0, Ordering::Relaxed);
                    self.checkpointed_at.store(0, Ordering::Relaxed);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a checkpoint of the log failed; the next commit tries again")
                }
            }
            return;
        }
        let grown = pages.saturating_sub(self.checkpointed_at.load(Ordering::Relaxed));
        if grown < CHECKPOINT_PAGES || self.checkpointer.in_flight.swap(true, Ordering::AcqRel) {
            return;
        }
        self.checkpointed_at.store(pages, Ordering::Relaxed);
        let checkpointer = self.checkpointer.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(move || checkpointer.run());
            }
            Err(_) => checkpointer.run(),
        }
    }
}

impl Drop for Wal {
    /// Waits for a checkpoint in flight, then closes the second connection
    /// before the instance's files can go.
    fn drop(&mut self) {
        let mut guard = self
            .checkpointer
            .conn
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        guard.closed = true;
        guard.conn = None;
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
        let wal = Wal::watch(&mut conn, Synchronous::Normal, &path).unwrap();
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
        wal.checkpoint_if_due(&conn, false);
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

    /// With a runtime, the checkpoint runs on a blocking thread while the
    /// instance connection goes on committing; the log still starts over,
    /// nothing is lost, and dropping the log's watcher leaves no
    /// connection open (the last close removes the log file).
    #[test]
    fn the_checkpoint_runs_beside_the_instance_and_ends_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.sqlite");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let _entered = runtime.enter();
        let mut conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        let wal = Wal::watch(&mut conn, Synchronous::Normal, &path).unwrap();
        conn.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        let page = vec![0u8; 4096];
        let mut inserted = 0;
        let mut started_over = false;
        for _ in 0..20_000 {
            conn.execute("INSERT INTO t VALUES (?)", [&page]).unwrap();
            inserted += 1;
            let before = wal.pages();
            wal.checkpoint_if_due(&conn, true);
            assert!(wal.pages() == before || before >= INLINE_CHECKPOINT_PAGES);
            if inserted > CHECKPOINT_PAGES as i64 && wal.pages() < 10 {
                started_over = true;
                break;
            }
        }
        assert!(
            started_over,
            "the log never started over: {} pages",
            wal.pages()
        );
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, inserted);
        drop(conn);
        drop(wal);
        let log = dir.path().join("i.sqlite-wal");
        assert!(!log.exists(), "a connection outlived the instance's");
    }
}
