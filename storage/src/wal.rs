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
//! checkpoint, the commit stage queues a checkpoint on a second connection
//! of the instance's own, for the process's checkpoint thread, which runs
//! them one at a time (see [`queue_job`] for why). The instance
//! goes on meanwhile: a passive checkpoint copies what was committed when
//! it began, and the log starts over at the first write after a
//! checkpoint that copied it whole. That write syncs the log's new header
//! in every synchronous mode, as does the first commit of a connection
//! (the log is removed when an instance sleeps), so the commit stage lets
//! a commit that begins a log wait for the disk off the async workers
//! ([`Wal::begins_log`]).
//!
//! Under writes that never pause, no checkpoint may copy the whole log, so
//! past [`INLINE_CHECKPOINT_PAGES`] the checkpoint runs on the instance
//! connection after the commit, the instance still held and the worker's
//! other tasks moved off first ([`crate::blocking::off_worker`]): no write
//! comes between, and the log starts over.
//!
//! A lone instance checkpoints so at [`CHECKPOINT_PAGES`] already: a
//! checkpoint beside it could not copy a log its commits never stop
//! growing (W1 over HTTP ran at 17,000 to 18,600 calls/s with checkpoints
//! beside it, or with its log let grow to 4,000 pages, against 23,700 to
//! 27,200 at 1,000 in the same runs). Its callers wait for that
//! checkpoint, and most of the wait was the sync of the 4 MiB of log
//! written since the last one (`fdatasync` 2.4 to 3.6 ms under `strace`,
//! in one call of a thousand; with `wrk`'s count of the calls a steady
//! client would have sent meanwhile, W1's p99 was 2.3 to 3.0 ms). So the
//! checkpoint thread syncs a lone instance's log ahead, every
//! [`SYNC_AHEAD_PAGES`] while it grows, and the checkpoint waits for the
//! sync that began past [`CHECKPOINT_PAGES`] (or for
//! [`SYNC_AHEAD_PAGES`] more, should the thread lag): the log it syncs
//! then holds the commits of that sync's time only, and the call that
//! waits for the checkpoint waits for three short syncs (the log's rest,
//! the database file, and the log's new header at the next commit). W1's
//! p99 over HTTP fell to 0.36 to 0.46 ms; its rate fell by about a tenth
//! (the same bytes reach the disk, now while the cores are busy).
//!
//! The checkpoint connection and the log's handle for the syncs ahead
//! live and die with the instance connection: dropping the [`Wal`] waits
//! for a checkpoint or sync in flight and closes both, so nothing opened
//! on the files outlives the instance's cell.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};

use rusqlite::{Connection, OpenFlags};

use crate::config::Synchronous;

use super::log_file::LogFile;

/// The log's growth, in pages, past which a checkpoint starts beside the
/// instance (SQLite's own default for its automatic checkpoints).
pub const CHECKPOINT_PAGES: u32 = 1000;

/// The log's size, in pages, past which the checkpoint runs on the
/// instance connection, holding the instance (about 32 MiB of log).
pub const INLINE_CHECKPOINT_PAGES: u32 = 8 * CHECKPOINT_PAGES;

/// The log's growth, in pages, after which the checkpoint thread syncs a
/// lone instance's log ahead of its checkpoint (about 1 MiB).
pub const SYNC_AHEAD_PAGES: u32 = CHECKPOINT_PAGES / 4;

/// The write-ahead log of one instance database.
pub struct Wal {
    /// The log file, which the commit stage syncs after every commit in
    /// `synchronous = full` (`None` in the other modes).
    log: Option<LogFile>,
    /// The log's size when the last checkpoint began.
    checkpointed_at: AtomicU32,
    /// The log's size when the last sync ahead was queued.
    sync_queued_at: AtomicU32,
    checkpointer: Arc<Checkpointer>,
}

/// What the checkpoint thread does for an instance.
#[derive(Debug, Clone, Copy)]
enum Job {
    /// A passive checkpoint on the second connection.
    Checkpoint,
    /// A sync of the log, ahead of the instance's own checkpoint.
    SyncAhead,
}

/// The second connection, opened at the first checkpoint, and the log's
/// file, opened at the first sync ahead.
struct Checkpointer {
    path: PathBuf,
    conn: Mutex<CheckpointConn>,
    /// A checkpoint was started and has not ended.
    in_flight: AtomicBool,
    /// A sync ahead was queued and has not ended.
    syncing: AtomicBool,
    /// Pages in the log after the last commit on the instance connection
    /// (kept by the WAL hook).
    pages: Arc<AtomicU32>,
    /// How many times the log started over (counted by the WAL hook).
    round: Arc<AtomicU32>,
    /// Where the log was when the last sync ahead that ended began: its
    /// round and its pages ([`position`]).
    synced: AtomicU64,
    /// The log's size, in pages, when a checkpoint last copied all of it
    /// (0: none since the last commit). While the log still has that
    /// size, the next commit that writes starts it over.
    copied: Arc<AtomicU32>,
}

struct CheckpointConn {
    conn: Option<Connection>,
    /// The log's file, for the syncs ahead.
    log: Option<File>,
    /// The instance connection is closing: no checkpoint runs any more.
    closed: bool,
}

/// Hands `job` for `checkpointer` (a checkpoint, or a sync ahead) to the
/// process's checkpoint thread, started at the first call. The thread runs
/// the jobs in the order they came, one at a time: their syncs then keep the disk's queue short, so that the
/// syncs an instance waits for (a commit in `full` mode, the commit that
/// starts a log over) wait behind one checkpoint's writes at most, not
/// behind those of every busy instance. With the checkpoints of 64
/// instances side by side, W2's p99 over HTTP was 35 to 38 ms; one at a
/// time, 7 to 8 ms (CHANGELOG.md, "One thread for the checkpoints, and
/// `fdatasync`").
fn queue_job(checkpointer: Arc<Checkpointer>, job: Job) {
    type Queue = Mutex<mpsc::Sender<(Arc<Checkpointer>, Job)>>;
    static QUEUE: OnceLock<Option<Queue>> = OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (send, receive) = mpsc::channel::<(Arc<Checkpointer>, Job)>();
        let started = std::thread::Builder::new()
            .name("burrow-checkpoint".into())
            .spawn(move || {
                for (checkpointer, job) in receive {
                    checkpointer.run(job);
                }
            });
        match started {
            Ok(_) => Some(Mutex::new(send)),
            Err(e) => {
                tracing::warn!(error = %e, "no thread for checkpoints could start; each runs right after the commit that makes it due");
                None
            }
        }
    });
    let sent = match queue {
        Some(send) => send
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send((checkpointer, job)),
        None => Err(mpsc::SendError((checkpointer, job))),
    };
    if let Err(mpsc::SendError((checkpointer, job))) = sent {
        checkpointer.run(job);
    }
}

impl Checkpointer {
    /// Runs `job`, unless the instance connection closed.
    fn run(&self, job: Job) {
        let mut guard = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        match job {
            Job::Checkpoint => {
                if !guard.closed {
                    match open_and_checkpoint(&self.path, &mut guard.conn) {
                        Ok(Copied::All(pages)) => self.copied.store(pages, Ordering::Relaxed),
                        Ok(Copied::Part) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "a checkpoint of the log failed; a later commit tries again")
                        }
                    }
                }
                self.in_flight.store(false, Ordering::Release);
            }
            Job::SyncAhead => {
                if !guard.closed {
                    // The frames of every commit counted here are written.
                    let at = position(
                        self.round.load(Ordering::Relaxed),
                        self.pages.load(Ordering::Relaxed),
                    );
                    match open_and_sync(&self.path, &mut guard.log) {
                        Ok(()) => self.synced.store(at, Ordering::Relaxed),
                        Err(e) => {
                            tracing::warn!(error = %e, "a sync of the log ahead of its checkpoint failed; the checkpoint syncs it")
                        }
                    }
                }
                self.syncing.store(false, Ordering::Release);
            }
        }
    }
}

/// A place in the log: the round (how many times it started over) and
/// the pages, in one word.
fn position(round: u32, pages: u32) -> u64 {
    (u64::from(round) << 32) | u64::from(pages)
}

/// Syncs the log of the database at `path`, opening it first if `log` is
/// `None`. Only a sync: SQLite alone writes the file, and its checkpoint
/// syncs the log again before copying it, so a sync ahead changes when
/// the disk does the work, never what is durable when.
fn open_and_sync(path: &Path, log: &mut Option<File>) -> std::io::Result<()> {
    if log.is_none() {
        *log = Some(File::open(super::pages::wal_path(path))?);
    }
    log.as_ref().expect("opened above").sync_data()
}

/// What a passive checkpoint copied.
enum Copied {
    /// The whole log, of this many pages (the log's size when the
    /// checkpoint began).
    All(u32),
    /// Part of it: a reader or writer was in the way.
    Part,
}

fn open_and_checkpoint(path: &Path, conn: &mut Option<Connection>) -> rusqlite::Result<Copied> {
    if conn.is_none() {
        let opened = Connection::open_with_flags_and_vfs(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            super::INSTANCE_VFS,
        )?;
        *conn = Some(opened);
    }
    checkpoint(conn.as_ref().expect("opened above"))
}

/// Runs a passive checkpoint on `conn`.
fn checkpoint(conn: &Connection) -> rusqlite::Result<Copied> {
    let (busy, log, copied): (i64, i64, i64) =
        conn.query_row("PRAGMA main.wal_checkpoint(PASSIVE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    Ok(if busy == 0 && log > 0 && copied == log {
        Copied::All(u32::try_from(log).unwrap_or(u32::MAX))
    } else {
        Copied::Part
    })
}

impl Wal {
    /// Records the log's size after every commit on `conn`, the instance
    /// connection of the database at `path`; SQLite's automatic
    /// checkpoints stop on it. In `synchronous = full`, opens the log to
    /// sync it after every commit ([`Wal::log`]).
    pub fn watch(
        conn: &mut Connection,
        synchronous: Synchronous,
        path: &Path,
    ) -> rusqlite::Result<Wal> {
        let pages = Arc::new(AtomicU32::new(0));
        let round = Arc::new(AtomicU32::new(0));
        let copied = Arc::new(AtomicU32::new(0));
        let (recorded, restarts, committed) = (pages.clone(), round.clone(), copied.clone());
        conn.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, n: i32| {
            let n = n.max(0) as u32;
            if n < recorded.swap(n, Ordering::Relaxed) {
                restarts.fetch_add(1, Ordering::Relaxed);
            }
            // A checkpoint that ends after this commit copied less than
            // the log; one that ended before did not copy this commit.
            committed.store(0, Ordering::Relaxed);
            Ok(())
        }))?;
        let log = if synchronous == Synchronous::Full {
            let page_size: u32 = conn.query_row("PRAGMA main.page_size", [], |r| r.get(0))?;
            Some(LogFile::open(path, pages.clone(), page_size.into())?)
        } else {
            None
        };
        Ok(Wal {
            log,
            checkpointed_at: AtomicU32::new(0),
            sync_queued_at: AtomicU32::new(0),
            checkpointer: Arc::new(Checkpointer {
                path: path.to_owned(),
                conn: Mutex::new(CheckpointConn {
                    conn: None,
                    log: None,
                    closed: false,
                }),
                in_flight: AtomicBool::new(false),
                syncing: AtomicBool::new(false),
                pages,
                round,
                synced: AtomicU64::new(0),
                copied,
            }),
        })
    }

    /// The log file to sync after every commit, in `synchronous = full`
    /// (`None` in the other modes).
    ///
    /// The instance connection runs with `synchronous = normal`, which
    /// writes a commit's frames to the log and syncs only at checkpoints
    /// (and at the write that starts the log over); `full` adds exactly one
    /// sync of the log per commit, after its frames are written (this
    /// build has no sector padding: the unix VFS declares power-safe
    /// overwrites). The commit stage makes that sync itself on this handle
    /// of the same file, so that it can wait for it without holding an
    /// async worker (`instance/commit.rs`). SQLite keeps the file for the
    /// connection's life: nothing deletes it while the instance
    /// connection is open.
    pub fn log(&self) -> Option<&LogFile> {
        self.log.as_ref()
    }

    /// Pages in the log after the last commit.
    pub fn pages(&self) -> u32 {
        self.checkpointer.pages.load(Ordering::Relaxed)
    }

    /// Whether the next commit that writes starts the log over: a
    /// checkpoint copied the whole log, and nothing was committed since.
    /// Such a commit writes the log's new header and syncs it (whatever
    /// the synchronous mode: SQLite's guard against a reordered write
    /// after the restart), so it waits for the disk.
    pub fn starts_over(&self) -> bool {
        let copied = self.checkpointer.copied.load(Ordering::Relaxed);
        copied != 0 && copied == self.pages()
    }

    /// Whether the next commit that writes begins a log, writing its
    /// header and syncing it (in every synchronous mode): the commit that
    /// starts the log over ([`Wal::starts_over`]), and the first commit
    /// since the connection opened, as the log of an instance is removed
    /// when its last connection closes (a new instance, or one that slept
    /// since its last commit). After a crash that first commit may find a
    /// log left behind and append to it without a sync.
    pub fn begins_log(&self) -> bool {
        self.pages() == 0 || self.starts_over()
    }

    /// After a commit on `conn` (the instance connection, between
    /// transactions). With `beside` (other instances are at work), starts
    /// a checkpoint beside the instance once the log has grown by
    /// [`CHECKPOINT_PAGES`] since the last one, and runs one on `conn`,
    /// off the async workers, once it is past [`INLINE_CHECKPOINT_PAGES`].
    /// Without, runs one on `conn` once the log is past
    /// [`CHECKPOINT_PAGES`] and synced ahead (see
    /// [`Wal::checkpoint_alone`]). A failure is logged: a later commit
    /// tries again.
    pub fn checkpoint_if_due(&self, conn: &Connection, beside: bool) {
        let pages = self.pages();
        if pages < self.checkpointed_at.load(Ordering::Relaxed) {
            // The log started over since.
            self.checkpointed_at.store(0, Ordering::Relaxed);
        }
        if !beside {
            self.checkpoint_alone(conn, pages);
            return;
        }
        // A checkpoint beside the instance may be waiting for its turn:
        // this one does its work (and that one then finds nothing left),
        // or, if it is running, finds the log taken and tries again at
        // the next commit.
        if pages >= INLINE_CHECKPOINT_PAGES && !self.starts_over() {
            self.checkpoint_here(conn, pages);
            return;
        }
        let grown = pages.saturating_sub(self.checkpointed_at.load(Ordering::Relaxed));
        if grown < CHECKPOINT_PAGES || self.checkpointer.in_flight.swap(true, Ordering::AcqRel) {
            return;
        }
        self.checkpointed_at.store(pages, Ordering::Relaxed);
        queue_job(self.checkpointer.clone(), Job::Checkpoint);
    }

    /// A lone instance's checkpoint: on `conn`, once the log is past
    /// [`CHECKPOINT_PAGES`] and a sync ahead that began there has ended
    /// (in `full` mode every commit synced the log already), or once it
    /// is [`SYNC_AHEAD_PAGES`] further; until then, a sync ahead on the
    /// checkpoint thread every [`SYNC_AHEAD_PAGES`] of growth.
    fn checkpoint_alone(&self, conn: &Connection, pages: u32) {
        if self.starts_over() {
            return;
        }
        let due = pages >= CHECKPOINT_PAGES
            && (pages >= CHECKPOINT_PAGES + SYNC_AHEAD_PAGES
                || self.log.is_some()
                || self.synced_ahead_past(CHECKPOINT_PAGES));
        if due {
            self.checkpoint_here(conn, pages);
        } else if self.log.is_none() {
            self.sync_ahead(pages);
        }
    }

    /// Whether a sync ahead that began in this round of the log, with at
    /// least `pages` in it, has ended.
    fn synced_ahead_past(&self, pages: u32) -> bool {
        let round = self.checkpointer.round.load(Ordering::Relaxed);
        let synced = self.checkpointer.synced.load(Ordering::Relaxed);
        (synced >> 32) as u32 == round && synced as u32 >= pages
    }

    /// Queues a sync of the log on the checkpoint thread once it has
    /// grown by [`SYNC_AHEAD_PAGES`] since the last one was queued, unless
    /// one is queued or running.
    fn sync_ahead(&self, pages: u32) {
        let queued_at = self.sync_queued_at.load(Ordering::Relaxed);
        // After the log started over, it counts from nothing.
        let queued_at = if pages < queued_at { 0 } else { queued_at };
        if pages - queued_at < SYNC_AHEAD_PAGES
            || self.checkpointer.syncing.swap(true, Ordering::AcqRel)
        {
            return;
        }
        self.sync_queued_at.store(pages, Ordering::Relaxed);
        queue_job(self.checkpointer.clone(), Job::SyncAhead);
    }

    /// Runs a checkpoint on `conn`, the instance connection, off the async
    /// workers; the log has `pages`.
    fn checkpoint_here(&self, conn: &Connection, pages: u32) {
        match crate::blocking::off_worker(|| checkpoint(conn)) {
            Ok(copied) => {
                if let Copied::All(log) = copied {
                    self.checkpointer.copied.store(log, Ordering::Relaxed);
                }
                self.checkpointed_at.store(pages, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::warn!(error = %e, "a checkpoint of the log failed; the next commit tries again")
            }
        }
    }
}

impl Drop for Wal {
    /// Waits for a checkpoint or a sync ahead in flight, then closes the
    /// second connection and the log's file before the instance's files
    /// can go.
    fn drop(&mut self) {
        let mut guard = self
            .checkpointer
            .conn
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        guard.closed = true;
        guard.conn = None;
        guard.log = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database in WAL mode in a new directory, its log watched, with a
    /// table `t (x COLUMN_TYPE)`.
    fn watched(column_type: &str) -> (tempfile::TempDir, Connection, Wal) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.sqlite");
        let mut conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        let wal = Wal::watch(&mut conn, Synchronous::Normal, &path).unwrap();
        conn.execute_batch(&format!("CREATE TABLE t (x {column_type})"))
            .unwrap();
        (dir, conn, wal)
    }

    /// A connection's first commit begins a log, as the commit stage is
    /// told: a new database has none, and closing the last connection
    /// removed the log of one that had. The commits after it append.
    #[test]
    fn a_connections_first_commit_begins_a_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.sqlite");
        let log = dir.path().join("i.sqlite-wal");
        let log_bytes = || std::fs::metadata(&log).map_or(0, |m| m.len());
        for round in ["new", "reopened"] {
            let mut conn = Connection::open(&path).unwrap();
            conn.pragma_update(None, "journal_mode", "WAL").unwrap();
            let wal = Wal::watch(&mut conn, Synchronous::Normal, &path).unwrap();
            assert!(wal.begins_log(), "{round}");
            assert_eq!(log_bytes(), 0, "{round}");
            conn.execute_batch("CREATE TABLE IF NOT EXISTS t (x); INSERT INTO t VALUES (0)")
                .unwrap();
            assert!(log_bytes() > 0, "{round}");
            assert!(!wal.begins_log(), "{round}");
            conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
            assert!(!wal.begins_log(), "{round}");
            drop(wal);
            drop(conn);
            assert!(!log.exists(), "{round}: the log outlived the connection");
        }
    }

    /// The log grows past the mark without a checkpoint inside a commit,
    /// and the checkpoint after the commit (a lone instance's, the log
    /// never synced ahead) copies it whole: the log starts over at the
    /// next write.
    #[test]
    fn the_log_is_checkpointed_after_the_commit() {
        let (_dir, conn, wal) = watched("BLOB");
        let page = vec![0u8; 4096];
        let mut inserted = 0;
        while wal.pages() < CHECKPOINT_PAGES + SYNC_AHEAD_PAGES {
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

    /// The commit that starts the log over is known before it runs, after
    /// a checkpoint on the instance connection and after one beside it,
    /// and only then.
    #[test]
    fn the_commit_that_starts_the_log_over_is_known_before_it_runs() {
        let (_dir, conn, wal) = watched("INTEGER");
        // A commit as the commit stage makes it; true if it started the
        // log over.
        let commit = |beside: bool| {
            let before = wal.pages();
            conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
            let started_over = wal.pages() < before;
            wal.checkpoint_if_due(&conn, beside);
            started_over
        };
        // On the instance connection (a lone instance).
        while !wal.starts_over() {
            assert!(!commit(false));
        }
        assert!(commit(false));
        assert!(!wal.starts_over());
        // Beside it, on the checkpoint thread (which may end the
        // checkpoint before the test looks).
        while !wal.checkpointer.in_flight.load(Ordering::Acquire) && !wal.starts_over() {
            assert!(!commit(true));
        }
        let start = std::time::Instant::now();
        while wal.checkpointer.in_flight.load(Ordering::Acquire) {
            assert!(start.elapsed().as_secs() < 10, "the checkpoint never ended");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(wal.starts_over());
        assert!(commit(true));
        assert!(!wal.starts_over());
        assert!(!commit(true));
    }

    /// The checkpoint runs on the checkpoint thread while the instance
    /// connection goes on committing; the log still starts over,
    /// nothing is lost, and dropping the log's watcher leaves no
    /// connection open (the last close removes the log file).
    #[test]
    fn the_checkpoint_runs_beside_the_instance_and_ends_with_it() {
        let (dir, conn, wal) = watched("BLOB");
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

    /// Waits until no sync ahead is queued or running.
    fn wait_for_the_sync_ahead(wal: &Wal) {
        let start = std::time::Instant::now();
        while wal.checkpointer.syncing.load(Ordering::Acquire) {
            assert!(start.elapsed().as_secs() < 10, "the sync ahead never ended");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// A lone instance's log is synced ahead on the checkpoint thread as
    /// it grows, and its checkpoint waits for the sync that began past
    /// the mark, then runs at the next commit; in the log's next round,
    /// the syncs of the last one count for nothing.
    #[test]
    fn a_lone_instance_checkpoints_once_its_log_was_synced_ahead() {
        let (_dir, conn, wal) = watched("INTEGER");
        for round in 0..2 {
            let mut syncs = 0;
            let mut synced_past_the_mark = None;
            while !wal.starts_over() {
                conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
                if synced_past_the_mark.is_none() && wal.synced_ahead_past(CHECKPOINT_PAGES) {
                    synced_past_the_mark = Some(wal.pages());
                }
                let queued_before = wal.sync_queued_at.load(Ordering::Relaxed);
                wal.checkpoint_if_due(&conn, false);
                // A sync queued by this commit moved the mark (the
                // thread may have ended it already).
                if wal.sync_queued_at.load(Ordering::Relaxed) != queued_before {
                    syncs += 1;
                    wait_for_the_sync_ahead(&wal);
                }
                assert!(wal.pages() < CHECKPOINT_PAGES + SYNC_AHEAD_PAGES);
            }
            // The commit that found the sync past the mark ended ran the
            // checkpoint: the sync began at the commit before it.
            let checkpointed_at = wal.pages();
            assert_eq!(
                synced_past_the_mark,
                Some(checkpointed_at),
                "round {round}: the checkpoint ran before the log was synced past the mark"
            );
            assert_eq!(
                syncs,
                CHECKPOINT_PAGES / SYNC_AHEAD_PAGES,
                "round {round}: syncs ahead"
            );
            conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
            assert!(
                wal.pages() < 10,
                "round {round}: the log did not start over"
            );
            assert!(
                !wal.synced_ahead_past(1),
                "round {round}: a sync of the last round counts"
            );
        }
    }

    /// A sync ahead that does not end (the checkpoint thread busy with
    /// other instances) holds the lone instance's checkpoint back by
    /// [`SYNC_AHEAD_PAGES`] at most.
    #[test]
    fn a_lone_instance_checkpoints_without_a_sync_ahead_that_lags() {
        let (_dir, conn, wal) = watched("INTEGER");
        wal.checkpointer.syncing.store(true, Ordering::Release);
        while !wal.starts_over() {
            assert!(wal.pages() < CHECKPOINT_PAGES + SYNC_AHEAD_PAGES);
            conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
            wal.checkpoint_if_due(&conn, false);
        }
        assert_eq!(wal.pages(), CHECKPOINT_PAGES + SYNC_AHEAD_PAGES);
    }
}
