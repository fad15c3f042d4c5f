//! The pages a commit changed, read from the write-ahead log, and a
//! database file written back from pages.
//!
//! A commit of a WAL database appends frames to its `-wal` file: a 24-byte
//! header (the page's number, the database's size in pages for the last
//! frame of a commit, the log's two salts, a checksum) and the page. After
//! each commit, [`LogTail`] reads the frames appended since the one before,
//! which are exactly the pages the transaction changed, with the database's
//! size after it. A cluster ships them (`storage/src/cluster`), as LiteFS and
//! Litestream do, and a host that takes an instance over writes the pages
//! it got back into a database file ([`Image`]).
//!
//! The log starts over after a checkpoint copied all of it: the next
//! commit writes a new header with new salts and its frames from the first
//! one. `LogTail` tells by the salts, not by the frame count.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Size of the log's header.
const LOG_HEADER: u64 = 32;
/// Size of a frame's header.
const FRAME_HEADER: u64 = 24;
/// The log header's magic numbers (big- and little-endian checksums).
const LOG_MAGIC: [u32; 2] = [0x377f_0682, 0x377f_0683];

/// The pages one commit wrote, and the database's size after it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// The page size of the database.
    pub page_size: u32,
    /// The database's size in pages after the commit.
    pub db_pages: u32,
    /// The pages the commit wrote, by page number (the last frame of a page
    /// wins: a transaction that spilled may write a page twice).
    pub pages: BTreeMap<u32, Vec<u8>>,
}

/// Where the next commit's frames start in an instance's log.
pub struct LogTail {
    wal: PathBuf,
    file: Option<File>,
    /// The salts of the log the last read was in (`None`: not read yet).
    salts: Option<[u32; 2]>,
    /// Frames of that log already read.
    read: u32,
}

impl LogTail {
    /// The tail of the log of the database at `db`, whose log holds `frames`
    /// frames that were read already (shipped before this tail began).
    pub fn new(db: &Path, frames: u32) -> io::Result<LogTail> {
        let mut tail = LogTail {
            wal: wal_path(db),
            file: None,
            salts: None,
            read: frames,
        };
        if frames > 0 {
            let header = tail.header()?;
            tail.salts = header.map(|h| h.salts);
        }
        Ok(tail)
    }

    /// The pages of the commit that just took the log to `frames` frames.
    /// An empty transaction (nothing written) has no pages and
    /// `db_pages` 0.
    pub fn read_commit(&mut self, frames: u32) -> io::Result<Changes> {
        let Some(header) = self.header()? else {
            if frames == 0 {
                return Ok(Changes::default());
            }
            return Err(invalid(format!(
                "the log {} is missing or has no header, but SQLite counts {frames} frames in it",
                self.wal.display()
            )));
        };
        let start = if self.salts == Some(header.salts) {
            self.read
        } else {
            // A new log (it started over, or this is its first commit).
            0
        };
        if frames < start {
            return Err(invalid(format!(
                "the log {} has {frames} frames, fewer than the {start} read before",
                self.wal.display()
            )));
        }
        let mut changes = Changes {
            page_size: header.page_size,
            ..Changes::default()
        };
        if frames == start {
            self.salts = Some(header.salts);
            self.read = frames;
            return Ok(changes);
        }
        let file = self.file.as_ref().expect("opened by header()");
        let frame_size = FRAME_HEADER + u64::from(header.page_size);
        let mut frame = vec![0u8; frame_size as usize];
        for index in start..frames {
            let at = LOG_HEADER + u64::from(index) * frame_size;
            file.read_exact_at(&mut frame, at)?;
            let page = be32(&frame[0..4]);
            let commit_size = be32(&frame[4..8]);
            let salts = [be32(&frame[8..12]), be32(&frame[12..16])];
            if salts != header.salts || page == 0 {
                return Err(invalid(format!(
                    "frame {index} of the log {} does not belong to it",
                    self.wal.display()
                )));
            }
            if index + 1 == frames && commit_size == 0 {
                return Err(invalid(format!(
                    "the last frame of the log {} does not end a commit",
                    self.wal.display()
                )));
            }
            if commit_size != 0 {
                changes.db_pages = commit_size;
            }
            changes
                .pages
                .insert(page, frame[FRAME_HEADER as usize..].to_vec());
        }
        // Pages past the end of a database that shrank are not part of it.
        let size = changes.db_pages;
        changes.pages.retain(|&page, _| page <= size);
        self.salts = Some(header.salts);
        self.read = frames;
        Ok(changes)
    }

    /// Opens the log anew (the file at its path may be a new one: SQLite
    /// deletes the log when its last connection closes) and reads its
    /// header.
    fn header(&mut self) -> io::Result<Option<LogHeader>> {
        self.file = None;
        match File::open(&self.wal) {
            Ok(file) => self.file = Some(file),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        }
        let file = self.file.as_ref().expect("opened above");
        let mut bytes = [0u8; LOG_HEADER as usize];
        match file.read_exact_at(&mut bytes, 0) {
            Ok(()) => {}
            // A log truncated to nothing (a checkpoint that truncates).
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let magic = be32(&bytes[0..4]);
        if !LOG_MAGIC.contains(&magic) {
            return Err(invalid(format!(
                "{} is not a write-ahead log",
                self.wal.display()
            )));
        }
        Ok(Some(LogHeader {
            page_size: match be32(&bytes[8..12]) {
                // SQLite writes 1 for 65,536-byte pages.
                1 => 65_536,
                size => size,
            },
            salts: [be32(&bytes[16..20]), be32(&bytes[20..24])],
        }))
    }
}

struct LogHeader {
    page_size: u32,
    salts: [u32; 2],
}

fn be32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes(bytes.try_into().expect("four bytes"))
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// The log of the database at `db`.
pub fn wal_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

/// The shared-memory index of the log of the database at `db`.
fn shm_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-shm");
    PathBuf::from(name)
}

/// A database file being written anew from its pages, in order, beside
/// the file it replaces ([`Image::finish`] puts it in place).
pub struct Image {
    db: PathBuf,
    temporary: PathBuf,
    out: io::BufWriter<File>,
    page_size: u32,
    db_pages: u32,
    next: u32,
}

impl Image {
    /// Starts the database at `db` anew: `db_pages` pages of `page_size`
    /// bytes will follow.
    pub fn create(db: &Path, page_size: u32, db_pages: u32) -> io::Result<Image> {
        let mut temporary = db.as_os_str().to_owned();
        temporary.push(".restore");
        let temporary = PathBuf::from(temporary);
        let file = File::create(&temporary)?;
        Ok(Image {
            db: db.to_owned(),
            temporary,
            out: io::BufWriter::new(file),
            page_size,
            db_pages,
            next: 1,
        })
    }

    /// Writes page `number`, the next one.
    pub fn push(&mut self, number: u32, page: &[u8]) -> io::Result<()> {
        if number != self.next {
            return Err(invalid(format!(
                "page {} of the database is missing (found page {number})",
                self.next
            )));
        }
        if page.len() != self.page_size as usize || number > self.db_pages {
            return Err(invalid(format!(
                "page {number} has {} bytes, not {} (of a database of {} pages)",
                page.len(),
                self.page_size,
                self.db_pages
            )));
        }
        self.out.write_all(page)?;
        self.next += 1;
        Ok(())
    }

    /// Checks that every page came, syncs the new file and renames it over
    /// the database (its log deleted first), so that a crash leaves either
    /// the old database or the new one. No connection may be open on it.
    pub fn finish(mut self) -> io::Result<()> {
        if self.next != self.db_pages + 1 {
            return Err(invalid(format!(
                "the database has {} pages, but {} were given",
                self.db_pages,
                self.next - 1
            )));
        }
        self.out.flush()?;
        self.out.get_ref().sync_all()?;
        for stale in [wal_path(&self.db), shm_path(&self.db)] {
            match std::fs::remove_file(&stale) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        std::fs::rename(&self.temporary, &self.db)?;
        if let Some(dir) = self.db.parent() {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

impl Drop for Image {
    /// An image that was not finished leaves nothing behind.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.temporary);
    }
}

/// Writes the database at `db` anew from `pages` (page numbers from 1 to
/// `db_pages`, each `page_size` bytes, every one present), replacing
/// whatever was there (see [`Image`]).
#[cfg(test)]
pub fn write_image(
    db: &Path,
    page_size: u32,
    db_pages: u32,
    pages: impl IntoIterator<Item = (u32, Vec<u8>)>,
) -> io::Result<()> {
    let mut image = Image::create(db, page_size, db_pages)?;
    for (number, page) in pages {
        image.push(number, &page)?;
    }
    image.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A WAL database whose log's size after each commit is recorded (the
    /// hook also turns automatic checkpoints off, as on an instance
    /// connection).
    fn database(dir: &Path) -> (PathBuf, Connection, Arc<AtomicU32>) {
        let path = dir.join("i.sqlite");
        let mut conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        let frames = Arc::new(AtomicU32::new(0));
        let recorded = frames.clone();
        conn.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, n: i32| {
            recorded.store(n as u32, Ordering::Relaxed);
            Ok(())
        }))
        .unwrap();
        (path, conn, frames)
    }

    /// Applies every commit's changes to a page map, as the shipped copy
    /// of a database is kept.
    fn apply(copy: &mut BTreeMap<u32, Vec<u8>>, changes: &Changes) -> u32 {
        for (page, data) in &changes.pages {
            copy.insert(*page, data.clone());
        }
        copy.retain(|&page, _| page <= changes.db_pages);
        changes.db_pages
    }

    fn rows(path: &Path) -> Vec<(i64, String)> {
        let conn = Connection::open(path).unwrap();
        let check: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
        let mut stmt = conn.prepare("SELECT id, v FROM t ORDER BY id").unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// A copy kept as a cluster keeps it: every commit's pages applied in
    /// order.
    struct Copy {
        tail: LogTail,
        pages: BTreeMap<u32, Vec<u8>>,
        size: u32,
    }

    impl Copy {
        fn commit(&mut self, conn: &Connection, frames: &AtomicU32, sql: &str) -> Changes {
            conn.execute_batch(sql).unwrap();
            let changes = self
                .tail
                .read_commit(frames.load(Ordering::Relaxed))
                .unwrap();
            if changes.db_pages != 0 {
                self.size = apply(&mut self.pages, &changes);
            }
            changes
        }
    }

    /// Every commit's pages, applied in order to an empty copy, give a
    /// database equal to the original: across a log that starts over, a
    /// table that grows past many pages and one that shrinks back.
    #[test]
    fn the_pages_of_each_commit_rebuild_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn, frames) = database(dir.path());
        let mut copy = Copy {
            tail: LogTail::new(&path, 0).unwrap(),
            pages: BTreeMap::new(),
            size: 0,
        };
        let first = copy.commit(
            &conn,
            &frames,
            "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)",
        );
        assert_eq!(first.page_size, 4096);
        assert!(first.pages.contains_key(&1), "the schema is on page 1");
        for n in 0..50 {
            copy.commit(
                &conn,
                &frames,
                &format!("INSERT INTO t (v) VALUES (printf('%.1000c', 'a') || {n})"),
            );
        }
        let grown = copy.commit(
            &conn,
            &frames,
            "INSERT INTO t (v) SELECT printf('%.3000c', 'b') FROM t",
        );
        assert!(grown.pages.len() > 10, "{} pages", grown.pages.len());
        // The log is copied whole, and the next commit starts it over.
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        copy.commit(&conn, &frames, "UPDATE t SET v = 'x' WHERE id = 1");
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
            .unwrap();
        copy.commit(&conn, &frames, "UPDATE t SET v = 'y' WHERE id = 2");
        copy.commit(&conn, &frames, "UPDATE t SET v = 'z' WHERE id = 3");
        // A transaction that writes nothing has no pages.
        let nothing = copy.commit(&conn, &frames, "SELECT 1");
        assert!(
            nothing.pages.is_empty() && nothing.db_pages == 0,
            "{nothing:?}"
        );
        // The file shrinks: pages past its end leave the copy.
        let before = copy.size;
        copy.commit(&conn, &frames, "PRAGMA auto_vacuum = FULL");
        copy.commit(&conn, &frames, "VACUUM");
        copy.commit(&conn, &frames, "DELETE FROM t WHERE id > 10");
        assert!(copy.size < before, "{} pages, {before} before", copy.size);
        assert_eq!(copy.pages.len() as u32, copy.size);

        let restored = dir.path().join("restored.sqlite");
        write_image(&restored, 4096, copy.size, copy.pages.clone()).unwrap();
        assert_eq!(rows(&restored), rows(&path));
        assert_eq!(rows(&restored).len(), 10);
    }

    /// A tail that begins on a log with frames in it reads only the
    /// commits after them.
    #[test]
    fn a_tail_begins_after_the_frames_already_in_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn, frames) = database(dir.path());
        conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
            .unwrap();
        let before = frames.load(Ordering::Relaxed);
        assert!(before > 0);
        let mut tail = LogTail::new(&path, before).unwrap();
        conn.execute_batch("INSERT INTO t (v) VALUES ('a')")
            .unwrap();
        let changes = tail.read_commit(frames.load(Ordering::Relaxed)).unwrap();
        assert_eq!(
            changes.pages.len(),
            1,
            "one leaf page: {:?}",
            changes.pages.keys()
        );
    }

    /// Pages that do not make a whole database are refused, and the file
    /// that was there stays.
    #[test]
    fn an_image_with_a_missing_page_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.sqlite");
        std::fs::write(&path, b"old").unwrap();
        let page = vec![0u8; 512];
        let e = write_image(&path, 512, 3, [(1, page.clone()), (3, page.clone())]).unwrap_err();
        assert!(e.to_string().contains("page 2"), "{e}");
        let e = write_image(&path, 512, 3, [(1, page.clone()), (2, page.clone())]).unwrap_err();
        assert!(e.to_string().contains("3 pages"), "{e}");
        let e = write_image(&path, 512, 1, [(1, vec![0u8; 100])]).unwrap_err();
        assert!(e.to_string().contains("100 bytes"), "{e}");
        let e = write_image(&path, 512, 1, [(1, page.clone()), (2, page.clone())]).unwrap_err();
        assert!(e.to_string().contains("page 2"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert!(!dir.path().join("i.sqlite.restore").exists());
    }

    /// A log that is not one is named as such.
    #[test]
    fn a_file_that_is_not_a_log_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.sqlite");
        std::fs::write(wal_path(&path), [7u8; 64]).unwrap();
        let mut tail = LogTail::new(&path, 0).unwrap();
        let e = tail.read_commit(1).unwrap_err();
        assert!(e.to_string().contains("not a write-ahead log"), "{e}");
    }
}
