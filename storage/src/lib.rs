//! Burrow's data layer: where instance data lives on disk (and, in a
//! cluster, in PostgreSQL). A crate of its own below the library
//! `burrow`, on the leaves of `burrow-base` alone, so that nothing here
//! can name the layers above.
//!
//! ```text
//! <data dir>/
//!   host.lock                         held while a host runs on this directory (with its URL)
//!   host.sqlite                       index of instances
//!   actors/<actor>/<ab>/<sha256(key)>.sqlite   one database per instance
//!                                     (<ab>: the hash's first two digits; `layout`)
//!   cache/<hash>.cwasm                precompiled components
//! ```
//!
//! A key never becomes part of a path: file names are the hex SHA-256 of the
//! key, and actor names are checked to be `[a-z0-9][a-z0-9_-]*`, so no key
//! or name can reach outside the data directory. Directories and files are
//! created and removed through a cap-std [`Dir`] rooted at the data
//! directory; SQLite itself opens the derived path.
//!
//! Unless `synchronous` is `off`, a directory whose entries changed is
//! synced (`fsync`) before the change is acknowledged: after an instance's
//! creation commits, after its files are removed, and after the host's own
//! directories and files are made at start. SQLite syncs the files' data
//! itself, but not the directory entry of a new database file.
//!
//! A host opens instance databases through SQLite's `unix-excl` VFS
//! ([`INSTANCE_VFS`]): see there.
//!
//! The layers above reach storage only through the names this crate's
//! root exports; every module of it is private. The host's tables in an
//! instance's database (queue, workflow, schedules, pause) are reached
//! through [`HostTables`] on a connection to it; the bounds of guest SQL
//! through the sandbox's and the heap's names below.

// The leaves this crate stands on, under the names its modules use.
use burrow_base::{address, blocking, clock, config, deadline, watchdog};

mod backend;
mod cluster;
mod functions;
mod heap;
mod host_lock;
mod host_tables;
mod index;
mod instance_db;
mod layout;
mod log_file;
mod marks;
mod pages;
mod pause;
mod queue;
mod replica;
mod sandbox;
mod schedule;
mod store;
mod transfer;
mod wal;
mod workflow;

pub use backend::Release;
pub use cluster::{Cluster, ClusterError, Component, DeployRecord, Held, Owner};
pub use functions::register as register_functions;
pub use heap::{
    Refused as HeapRefused, bounded as bounded_heap, install as install_heap,
    uncounted as uncounted_heap,
};
#[cfg(any(test, feature = "testing"))]
pub use heap::{keep_statistics as keep_heap_statistics, statistics_kept as heap_statistics_kept};
pub use host_lock::{Holder, holder};
pub use host_tables::HostTables;
pub use index::Mark;
pub use instance_db::{InstanceDb, Savepoint, read_state};
pub use log_file::LogFile;
pub use marks::{MarkError, Marks};
pub use pause::Pause;
pub use queue::{AfterFailure, AppendError, retry_delay};
pub use queue::{DeadLetter, NewEvent, QueueMode, QueuePolicy, QueuedEvent};
pub use sandbox::{Sandbox, SchemaGuard, is_internal, refuse_statement};
pub use schedule::AddScheduleError;
pub use store::{ClaimError, InstanceStore};
pub use transfer::{open_image, snapshot};
pub use workflow::MAX_STEP_REQUESTS;
pub use workflow::{
    EntryKind, EntryStatus, HistoryEntry, StepRequestRow, WorkflowRecord, WorkflowStatus,
};

use std::ffi::CStr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::config::Synchronous;
use host_lock::HostLock;

/// The SQLite VFS of every connection a host opens to an instance's
/// database: `unix-excl`. Its first lock takes an exclusive lock on the
/// file for the process, held while the process has the file open; from
/// then on, the locks between the host's own connections (the instance's,
/// its checkpointer's, a queue pump's reader) are kept in memory, and the
/// log's index lives on the heap instead of in a `-shm` file. A
/// transaction takes no `fcntl` lock: in WAL mode each took six (the
/// read mark, the read lock, the write lock, each taken and released).
/// No other process can open an awake instance's database: commands that
/// read the data directory ask the running server instead (`host.lock`).
pub const INSTANCE_VFS: &CStr = c"unix-excl";

/// The data directory of one host, locked against a second host process.
pub struct DataDir {
    root: PathBuf,
    dir: Dir,
    /// Whether directories are synced after their entries change.
    sync_dirs: bool,
    /// Held for the host's lifetime.
    lock: HostLock,
}

impl DataDir {
    /// Opens (creating if needed) and locks `root`; directories are synced
    /// after their entries change unless `synchronous` is off.
    pub fn open(root: &Path, synchronous: Synchronous) -> Result<DataDir> {
        std::fs::create_dir_all(root)
            .with_context(|| format!("cannot create the data directory {}", root.display()))?;
        let root = root
            .canonicalize()
            .with_context(|| format!("cannot resolve the data directory {}", root.display()))?;
        let dir = Dir::open_ambient_dir(&root, ambient_authority())
            .with_context(|| format!("cannot open the data directory {}", root.display()))?;
        let lock = HostLock::take(&dir, &root)?;
        dir.create_dir_all("actors")?;
        dir.create_dir_all("cache")?;
        let data = DataDir {
            root,
            dir,
            sync_dirs: synchronous != Synchronous::Off,
            lock,
        };
        data.sync_dir(".")?;
        Ok(data)
    }

    /// Syncs the data directory itself, after the host made files in it
    /// (`host.sqlite`).
    pub fn sync_root(&self) -> Result<()> {
        self.sync_dir(".")
    }

    /// Makes a new instance durable once its creation committed: syncs
    /// the directory that holds its database file.
    pub fn sync_created(&self, actor: &str, key: &str) -> Result<()> {
        self.sync_dir(&layout::subdir(actor, key))
    }

    /// Syncs the directory `path` (relative to the data directory), unless
    /// `synchronous` is off.
    fn sync_dir(&self, path: &str) -> Result<()> {
        if !self.sync_dirs {
            return Ok(());
        }
        // Opened for reading: a directory opened for lookups only cannot
        // be synced.
        let synced = self
            .dir
            .open(path)
            .and_then(|dir| dir.into_std().sync_all());
        synced.with_context(|| format!("cannot sync the directory {}/{path}", self.root.display()))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Records in `host.lock` that this host serves its API at `url`.
    pub fn announce(&self, url: &str) -> Result<()> {
        self.lock
            .announce(url)
            .with_context(|| format!("cannot write {}/host.lock", self.root.display()))
    }

    /// The compile cache: `cache/` here, or `elsewhere` (created if missing).
    pub fn cache_dir(&self, elsewhere: Option<&Path>) -> Result<Dir> {
        match elsewhere {
            None => Ok(self.dir.open_dir("cache")?),
            Some(path) => open_dir_creating(path),
        }
    }

    /// Makes sure the directory of `actor` and its subdirectories exist,
    /// and moves instance files of the flat layout into them (see
    /// `layout`).
    pub fn prepare_actor(&self, actor: &str) -> Result<()> {
        let path = layout::actor_dir(actor);
        self.dir.create_dir_all(&path)?;
        let dir = self.dir.open_dir(&path)?;
        let mut changed = false;
        for subdir in layout::subdir_names() {
            if !dir.exists(&subdir) {
                dir.create_dir(&subdir)?;
                changed = true;
            }
        }
        let moved = layout::move_flat_files(&dir).with_context(|| {
            format!(
                "cannot move the instances of {}/{path} into subdirectories",
                self.root.display()
            )
        })?;
        if !moved.is_empty() {
            tracing::info!(
                actor,
                subdirectories = moved.len(),
                "moved instance files into subdirectories"
            );
            changed = true;
        }
        for subdir in &moved {
            self.sync_dir(&format!("{path}/{subdir}"))?;
        }
        if changed {
            self.sync_dir(&path)?;
        }
        self.sync_dir("actors")
    }

    /// Path of the database of (`actor`, `key`), for SQLite to open.
    pub fn instance_path(&self, actor: &str, key: &str) -> PathBuf {
        instance_path(&self.root, actor, key)
    }

    /// Whether the database file of (`actor`, `key`) exists: one `stat`
    /// (every wake asks).
    pub fn instance_exists(&self, actor: &str, key: &str) -> bool {
        self.instance_path(actor, key).exists()
    }

    /// Deletes the database of (`actor`, `key`) with its WAL and
    /// shared-memory files, then syncs their directory: once this returns,
    /// a power loss cannot bring the instance back.
    pub fn remove_instance(&self, actor: &str, key: &str) -> Result<()> {
        let base = layout::instance_file(actor, key);
        let mut removed = false;
        for suffix in ["", "-wal", "-shm"] {
            let path = format!("{base}{suffix}");
            match self.dir.remove_file(&path) {
                Ok(()) => removed = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).with_context(|| format!("cannot remove {path}")),
            }
        }
        if removed {
            self.sync_dir(&layout::subdir(actor, key))?;
        }
        Ok(())
    }
}

/// Opens the directory at `path`, creating it if missing.
pub fn open_dir_creating(path: &Path) -> Result<Dir> {
    std::fs::create_dir_all(path)
        .with_context(|| format!("cannot create the directory {}", path.display()))?;
    Dir::open_ambient_dir(path, ambient_authority())
        .with_context(|| format!("cannot open the directory {}", path.display()))
}

/// Path of the database of (`actor`, `key`) under the data directory `root`.
pub fn instance_path(root: &Path, actor: &str, key: &str) -> PathBuf {
    root.join(layout::instance_file(actor, key))
}

/// Opens the database of (`actor`, `key`) under the data directory `root`
/// read-only, with its creation time: a view of an instance from outside
/// its host (`inspect`). `None` when there is no such instance.
pub fn open_read_only(
    root: &Path,
    actor: &str,
    key: &str,
) -> rusqlite::Result<Option<(rusqlite::Connection, i64)>> {
    instance_db::open_read_only(&instance_path(root, actor, key))
}

/// The least text after every text that begins with `prefix`, in byte
/// order (which is code point order for UTF-8): `prefix` with its last
/// character raised by one, the characters that cannot be raised dropped.
/// `None` when nothing is after them all (an empty prefix, or one of only
/// U+10FFFF).
pub fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let raised = (last as u32 + 1..=char::MAX as u32).find_map(char::from_u32);
        if let Some(raised) = raised {
            chars.push(raised);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_of_a_prefix_bounds_the_texts_that_begin_with_it() {
        assert_eq!(prefix_end(""), None);
        assert_eq!(prefix_end("ab").as_deref(), Some("ac"));
        assert_eq!(prefix_end("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_end("\u{10FFFF}"), None);
        assert_eq!(prefix_end("a\u{D7FF}").as_deref(), Some("a\u{E000}"));
        for prefix in ["user-", "ключ", "a\u{7F}", "🙂"] {
            let end = prefix_end(prefix).unwrap();
            for text in [
                prefix.to_string(),
                format!("{prefix}\u{10FFFF}z"),
                format!("{prefix}/"),
            ] {
                assert!(
                    prefix <= text.as_str() && text < end,
                    "{text:?} in [{prefix:?}, {end:?})"
                );
            }
            assert!(end.as_bytes() > prefix.as_bytes());
        }
    }

    #[test]
    fn hostile_keys_stay_inside_the_data_directory() {
        let root = Path::new("/data");
        for key in [
            "../../etc/passwd",
            "/abs",
            "a\0b",
            "..",
            "ключ/🙂",
            &"x".repeat(1024),
        ] {
            let path = instance_path(root, "counter", key);
            assert!(path.starts_with("/data/actors/counter/"), "{path:?}");
            let name = path.file_name().unwrap().to_str().unwrap();
            assert_eq!(name.len(), 64 + ".sqlite".len());
            assert!(
                name.trim_end_matches(".sqlite")
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit())
            );
        }
    }

    #[test]
    fn different_keys_get_different_files() {
        assert_ne!(layout::key_file_stem("a"), layout::key_file_stem("A"));
        assert_ne!(layout::key_file_stem("a"), layout::key_file_stem("a "));
    }

    /// Writes an instance of key `key` in the flat layout of older hosts
    /// as a host killed while it was awake leaves it: a database and a log
    /// that holds its only commit (`n`). Returns the files' names.
    fn flat_instance(data: &DataDir, key: &str, n: i64) -> [String; 2] {
        let scratch = tempfile::tempdir().unwrap();
        let open = scratch.path().join("i.sqlite");
        let conn = rusqlite::Connection::open(&open).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (n);")
            .unwrap();
        conn.execute("INSERT INTO t VALUES (?)", [n]).unwrap();
        let stem = layout::key_file_stem(key);
        let names = [format!("{stem}.sqlite"), format!("{stem}.sqlite-wal")];
        let actor = data.root().join("actors/a");
        std::fs::copy(&open, actor.join(&names[0])).unwrap();
        std::fs::copy(open.with_extension("sqlite-wal"), actor.join(&names[1])).unwrap();
        drop(conn);
        names
    }

    fn committed(data: &DataDir, key: &str) -> i64 {
        let conn = rusqlite::Connection::open(data.instance_path("a", key)).unwrap();
        conn.query_row("SELECT n FROM t", [], |r| r.get(0)).unwrap()
    }

    /// Every state a crash in the middle of the move can leave (any of the
    /// files moved already, a database without its log among them) is
    /// finished by the next start, and every commit is where SQLite finds it.
    #[test]
    fn instances_of_the_flat_layout_move_into_subdirectories_across_a_crash() {
        let keys = ["one", "two"];
        for moved_before in 0..16u32 {
            let tmp = tempfile::tempdir().unwrap();
            let data = DataDir::open(tmp.path(), Synchronous::Normal).unwrap();
            std::fs::create_dir_all(tmp.path().join("actors/a")).unwrap();
            std::fs::write(tmp.path().join("actors/a/notes.txt"), "mine").unwrap();
            let files: Vec<String> = keys
                .iter()
                .enumerate()
                .flat_map(|(i, key)| flat_instance(&data, key, i as i64 + 10))
                .collect();
            // The crash: the files of `moved_before` were moved already.
            for (i, name) in files.iter().enumerate() {
                if moved_before & (1 << i) != 0 {
                    let actor = tmp.path().join("actors/a");
                    std::fs::create_dir_all(actor.join(&name[..2])).unwrap();
                    std::fs::rename(actor.join(name), actor.join(&name[..2]).join(name)).unwrap();
                }
            }
            data.prepare_actor("a").unwrap();
            for (i, key) in keys.iter().enumerate() {
                assert_eq!(committed(&data, key), i as i64 + 10, "{moved_before:04b}");
            }
            let left: Vec<_> = std::fs::read_dir(tmp.path().join("actors/a"))
                .unwrap()
                .map(|e| e.unwrap())
                .filter(|e| e.file_type().unwrap().is_file())
                .map(|e| e.file_name().into_string().unwrap())
                .collect();
            assert_eq!(left, ["notes.txt"], "{moved_before:04b}");
            // The next start has nothing to move.
            data.prepare_actor("a").unwrap();
            assert_eq!(committed(&data, "one"), 10);
        }
    }

    #[test]
    fn a_file_in_both_layouts_stops_the_start_and_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let data = DataDir::open(tmp.path(), Synchronous::Normal).unwrap();
        data.prepare_actor("a").unwrap();
        let [db, _] = flat_instance(&data, "k", 1);
        std::fs::write(data.instance_path("a", "k"), b"newer").unwrap();
        let err = format!("{:#}", data.prepare_actor("a").unwrap_err());
        assert!(err.contains(&db) && err.contains("old layout"), "{err}");
        // Neither file was touched.
        assert_eq!(
            std::fs::read(data.instance_path("a", "k")).unwrap(),
            b"newer"
        );
        assert!(tmp.path().join("actors/a").join(&db).exists());
    }

    /// Runs `f` on a thread of its own on which every `fsync` fails with
    /// EIO (a seccomp filter: it stays with that thread), and returns what
    /// `f` returned. A function that syncs then reports the failure.
    fn with_failing_fsync<T: Send>(f: impl FnOnce() -> T + Send) -> T {
        // Classic BPF over `struct seccomp_data` (nr at 0, arch at 4).
        const LD_W_ABS: u16 = 0x20;
        const JEQ_K: u16 = 0x15;
        const RET_K: u16 = 0x06;
        const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
        let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
        let filter = [
            op(LD_W_ABS, 0, 0, 4),
            op(JEQ_K, 0, 3, AUDIT_ARCH_X86_64),
            op(LD_W_ABS, 0, 0, 0),
            op(JEQ_K, 0, 1, libc::SYS_fsync as u32),
            op(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EIO as u32),
            op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        ];
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let program = libc::sock_fprog {
                        len: filter.len() as u16,
                        filter: filter.as_ptr().cast_mut(),
                    };
                    // SAFETY: plain prctl calls; the filter outlives them
                    // (the kernel copies it).
                    unsafe {
                        let (one, zero): (libc::c_ulong, libc::c_ulong) = (1, 0);
                        let no_new_privs =
                            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, one, zero, zero, zero);
                        assert_eq!(no_new_privs, 0, "{}", std::io::Error::last_os_error());
                        let set = libc::prctl(
                            libc::PR_SET_SECCOMP,
                            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                            &program as *const libc::sock_fprog,
                        );
                        assert_eq!(set, 0, "{}", std::io::Error::last_os_error());
                    }
                    assert!(std::fs::File::open(".").unwrap().sync_all().is_err());
                    f()
                })
                .join()
                .unwrap()
        })
    }

    /// Whether `e` says a directory could not be synced.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    fn sync_failed(e: anyhow::Error) -> bool {
        format!("{e:#}").contains("cannot sync the directory")
    }

    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[test]
    fn creation_and_removal_sync_the_instance_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let data = DataDir::open(tmp.path(), Synchronous::Normal).unwrap();
        data.prepare_actor("a").unwrap();
        // SQLite makes the database file and its WAL; the host syncs the
        // directory that holds them.
        let path = data.instance_path("a", "k");
        std::fs::write(&path, b"db").unwrap();
        std::fs::write(path.with_extension("sqlite-wal"), b"wal").unwrap();
        data.sync_created("a", "k").unwrap();
        assert!(sync_failed(
            with_failing_fsync(|| data.sync_created("a", "k")).unwrap_err()
        ));
        let removed = with_failing_fsync(|| data.remove_instance("a", "k"));
        assert!(sync_failed(removed.unwrap_err()));
        assert!(!data.instance_exists("a", "k"), "the files are gone");
        assert!(!path.with_extension("sqlite-wal").exists());
        // Nothing left to remove: nothing to sync.
        with_failing_fsync(|| data.remove_instance("a", "k")).unwrap();
        // At start, the data directory and the actors' directory are synced.
        drop(data);
        let reopened = with_failing_fsync(|| DataDir::open(tmp.path(), Synchronous::Full));
        assert!(sync_failed(reopened.err().unwrap()));

        // With `synchronous = off`, nothing is synced.
        let tmp = tempfile::tempdir().unwrap();
        let off = with_failing_fsync(|| DataDir::open(tmp.path(), Synchronous::Off)).unwrap();
        off.prepare_actor("a").unwrap();
        std::fs::write(off.instance_path("a", "k"), b"db").unwrap();
        with_failing_fsync(|| off.sync_created("a", "k")).unwrap();
        with_failing_fsync(|| off.remove_instance("a", "k")).unwrap();
        assert!(!off.instance_exists("a", "k"));
    }

    #[test]
    fn a_second_host_on_the_same_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let first = DataDir::open(tmp.path(), Synchronous::Normal).unwrap();
        let err = DataDir::open(tmp.path(), Synchronous::Normal)
            .err()
            .expect("second open must fail");
        assert!(err.to_string().contains("another burrow host"), "{err}");
        drop(first);
        DataDir::open(tmp.path(), Synchronous::Normal)
            .expect("the lock is released with the first host");
    }
}
