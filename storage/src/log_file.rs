//! The write-ahead log file of an instance in `synchronous = full`, which
//! the commit stage syncs after every commit (`Wal::log` in `wal.rs`).
//!
//! A sync of a file that grew must also write the file's new size to the
//! disk: on ext4 that is a second write, waited for before the flush, and
//! it makes a commit's sync cost about twice the sync of one that only
//! overwrote the file. SQLite's log grows by one frame or more at every
//! commit until a checkpoint lets it start over, and it starts from
//! nothing at every wake (SQLite deletes it when the instance's last
//! connection closes): most commits of an instance that is not busy for
//! long would pay for growth. So before a sync, once the log's frames
//! come within [`AHEAD_MIN_FRAMES`] of the file's end, the file is made
//! [`AHEAD_FRAMES`] frames longer with zeros, which that sync writes out
//! with the file's new size: the commits after it overwrite blocks the
//! file already has, and their syncs write data only.
//!
//! The zeros are never read as frames: SQLite's recovery reads the log's
//! frames in order and stops at the first one whose salt and checksum do
//! not continue the log's (a frame of zeros has neither), as it does at
//! the frames of an older round of the log left after a start-over. The
//! zeros are written past the file's end only, which SQLite has not
//! written, and only between the instance connection's transactions (the
//! commit stage syncs after a commit, and the instance's next transaction
//! waits for that sync), so no frame of SQLite's is ever overwritten.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::pages::wal_path;

/// The bytes of a log's header, before its first frame.
const HEADER_BYTES: u64 = 32;
/// The bytes of a frame's header, before its page.
const FRAME_HEADER_BYTES: u64 = 24;
/// Frames the log file is made longer by when it is extended ahead of
/// SQLite's writes (about 256 KiB with 4 KiB pages).
pub const AHEAD_FRAMES: u64 = 64;
/// The log file is extended once fewer frames than this are left between
/// the log's last frame and the file's end.
pub const AHEAD_MIN_FRAMES: u64 = 16;

/// A handle of an instance's log file, to sync it.
#[derive(Clone)]
pub struct LogFile {
    file: Arc<File>,
    /// Frames in the log after the last commit (kept by the log's
    /// watcher, `Wal::watch` in `wal.rs`).
    frames: Arc<AtomicU32>,
    /// The bytes of one frame: a frame header and a page.
    frame_bytes: u64,
    /// The file's length as last seen here.
    length: Arc<AtomicU64>,
    /// Syncs made through this handle and its clones.
    syncs: Arc<AtomicU64>,
}

impl LogFile {
    /// Opens the log of the database at `path`, which the instance
    /// connection created when it first read the database in WAL mode;
    /// `frames` counts the log's frames after each commit, of pages of
    /// `page_size` bytes.
    pub fn open(path: &Path, frames: Arc<AtomicU32>, page_size: u64) -> rusqlite::Result<LogFile> {
        let log = wal_path(path);
        let cannot_open = |e: io::Error| {
            rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
                Some(format!(
                    "cannot open the write-ahead log {}: {e}",
                    log.display()
                )),
            )
        };
        let file = OpenOptions::new()
            .write(true)
            .open(&log)
            .map_err(cannot_open)?;
        let length = file.metadata().map_err(cannot_open)?.len();
        Ok(LogFile {
            file: Arc::new(file),
            frames,
            frame_bytes: FRAME_HEADER_BYTES + page_size,
            length: Arc::new(AtomicU64::new(length)),
            syncs: Arc::default(),
        })
    }

    /// Waits until what was written to the log is on the disk, the file
    /// extended first if the log comes near its end. Called between the
    /// instance connection's transactions only.
    pub fn sync(&self) -> io::Result<()> {
        if let Err(e) = self.extend_ahead() {
            // The commits after it pay for the growth, as they would
            // without the extension; the sync itself may still succeed.
            tracing::debug!(error = %e, "the write-ahead log could not be extended ahead");
        }
        self.file.sync_data()?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Makes the file [`AHEAD_FRAMES`] frames longer than the log with
    /// zeros, once the log's end comes within [`AHEAD_MIN_FRAMES`] of the
    /// file's.
    fn extend_ahead(&self) -> io::Result<()> {
        let frames = u64::from(self.frames.load(Ordering::Relaxed));
        let log_end = HEADER_BYTES + frames * self.frame_bytes;
        if log_end + AHEAD_MIN_FRAMES * self.frame_bytes <= self.length.load(Ordering::Relaxed) {
            return Ok(());
        }
        // The file's own length, past whatever SQLite wrote (a frame of a
        // transaction rolled back, say, lies past the log's end).
        let length = self.file.metadata()?.len();
        let wanted = log_end + AHEAD_FRAMES * self.frame_bytes;
        if length < wanted {
            write_zeros(&self.file, length, wanted)?;
        }
        self.length.store(length.max(wanted), Ordering::Relaxed);
        Ok(())
    }

    /// Syncs made so far.
    #[cfg(any(test, feature = "testing"))]
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }
}

/// Writes zeros to `file` from `from` up to `to`.
fn write_zeros(file: &File, from: u64, to: u64) -> io::Result<()> {
    static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];
    let mut at = from;
    while at < to {
        let len = (to - at).min(ZEROS.len() as u64) as usize;
        file.write_all_at(&ZEROS[..len], at)?;
        at += len as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use rusqlite::Connection;

    /// A database in WAL mode in a new directory, with a table `t (x)`,
    /// and its log file, whose frames are counted after every commit as
    /// the log's watcher counts them.
    fn watched(dir: &Path) -> (Connection, LogFile, Arc<AtomicU32>) {
        let path = dir.join("i.sqlite");
        let mut conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
        conn.execute_batch("CREATE TABLE t (x)").unwrap();
        let frames = Arc::new(AtomicU32::new(0));
        let counted = frames.clone();
        conn.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, n: i32| {
            counted.store(n.max(0) as u32, Ordering::Relaxed);
            Ok(())
        }))
        .unwrap();
        let log = LogFile::open(&path, frames.clone(), 4096).unwrap();
        (conn, log, frames)
    }

    fn log_length(dir: &Path) -> u64 {
        std::fs::metadata(dir.join("i.sqlite-wal")).unwrap().len()
    }

    /// The file is extended ahead of the log at the first sync; the
    /// commits after it, up to the margin, leave the file's length alone,
    /// and the next extension comes before the log reaches the file's end.
    #[test]
    fn the_log_file_is_extended_ahead_of_the_log_and_only_near_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, log, frames) = watched(dir.path());
        let frame = FRAME_HEADER_BYTES + 4096;
        let log_end = || HEADER_BYTES + u64::from(frames.load(Ordering::Relaxed)) * frame;
        log.sync().unwrap();
        let extended = log_length(dir.path());
        assert_eq!(extended, log_end() + AHEAD_FRAMES * frame);
        let mut lengths = vec![];
        for i in 0..200 {
            conn.execute("INSERT INTO t VALUES (?)", [i]).unwrap();
            assert!(
                log_end() <= log_length(dir.path()),
                "the log outgrew the file"
            );
            log.sync().unwrap();
            lengths.push(log_length(dir.path()));
            assert!(
                log_end() + AHEAD_MIN_FRAMES * frame <= log_length(dir.path()),
                "the file is not ahead of the log after a sync"
            );
        }
        lengths.dedup();
        // 200 one-frame commits: a few extensions, not one per commit.
        assert!(
            (2..=5).contains(&lengths.len()),
            "the file's lengths: {lengths:?}"
        );
    }

    /// A database whose host died with commits in a log extended with
    /// zeros opens with every commit, and goes on.
    #[test]
    fn a_log_extended_with_zeros_is_recovered_whole() {
        let dir = tempfile::tempdir().unwrap();
        let copy = tempfile::tempdir().unwrap();
        {
            let (conn, log, frames) = watched(dir.path());
            for i in 0..100 {
                conn.execute("INSERT INTO t VALUES (?)", [i]).unwrap();
                log.sync().unwrap();
            }
            let log_end = HEADER_BYTES + u64::from(frames.load(Ordering::Relaxed)) * 4120;
            assert!(log_length(dir.path()) > log_end, "no zeros past the log");
            // The files as a killed host leaves them: the log is not
            // checkpointed and deleted by a close.
            for name in ["i.sqlite", "i.sqlite-wal"] {
                std::fs::copy(dir.path().join(name), copy.path().join(name)).unwrap();
            }
        }
        let conn = Connection::open(copy.path().join("i.sqlite")).unwrap();
        let (rows, sum): (i64, i64) = conn
            .query_row("SELECT count(*), sum(x) FROM t", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((rows, sum), (100, (0..100).sum()));
        conn.execute("INSERT INTO t VALUES (100)", []).unwrap();
        let check: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
    }
}
