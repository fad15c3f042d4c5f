//! Opening an instance's database: pragmas, internal tables, sandbox.

use std::path::Path;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionState};

use super::HostTables;
use super::backend::{Backend, Release};
use super::cluster::ClusterError;
use super::sandbox::{Sandbox, host_statement};
use super::wal::Wal;
use crate::config::{
    DB_BUSY_TIMEOUT, MAX_LIKE_PATTERN_BYTES, MAX_SQL_BYTES, MAX_SQL_PARAMS, MAX_SQL_PROGRAM_OPS,
    MAX_SQL_VALUE_BYTES, Synchronous,
};
use crate::deadline::Deadline;
use crate::watchdog::Watch;

/// Statements prepared once per connection and kept: the guest's, and the
/// host's own, which `sandbox::host_statement` keeps apart from them.
const STATEMENT_CACHE: usize = 128;
/// The savepoints the host opens inside a transaction that holds several
/// operations. Guest SQL may not name savepoints `_burrow*`
/// (`sandbox/rules.rs`), so no guest statement can release one or roll
/// back past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Savepoint {
    /// Around one call of a batch of calls or one event of a run of queue
    /// events (`cell/batch.rs`, `cell/queue.rs`).
    Call,
    /// Around one step of a workflow run whose steps commit together, or
    /// one write of its orchestration code between them
    /// (`capability/workflow`).
    Step,
}

impl Savepoint {
    fn sql(self) -> [&'static str; 3] {
        match self {
            Savepoint::Call => [
                "SAVEPOINT _burrow_call",
                "RELEASE _burrow_call",
                "ROLLBACK TO _burrow_call",
            ],
            Savepoint::Step => [
                "SAVEPOINT _burrow_step",
                "RELEASE _burrow_step",
                "ROLLBACK TO _burrow_step",
            ],
        }
    }
}
/// SQLite virtual-machine steps between checks of the call deadline.
const PROGRESS_STEPS: i32 = 10_000;

/// The internal tables every instance database has.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS main._burrow_instance (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    actor TEXT NOT NULL,
    key TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS main._burrow_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    value BLOB NOT NULL
);
";

/// Puts the database of `conn` in WAL mode with the durability of
/// `synchronous`.
///
/// A new (empty) database's switch writes its first page. SQLite does that
/// through a rollback journal, with four syncs (the journal twice, its
/// directory, the database), although an empty file has nothing to roll
/// back to. Here it switches without a journal: a crash in the middle
/// leaves an empty file or a whole first page, and a page torn by a power
/// loss is read from the log, which holds a copy of it from the creation's
/// commit on (the schema is on that page) until the checkpoint that syncs
/// it. The page is synced at once only in `full` mode, where the
/// creation's commit is on disk before it is answered: a database file
/// that lost its first page would have SQLite delete its log.
pub fn enter_wal(conn: &Connection, synchronous: Synchronous) -> rusqlite::Result<()> {
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    if pages == 0 {
        let switch = match synchronous {
            Synchronous::Full => Synchronous::Normal,
            _ => Synchronous::Off,
        };
        conn.pragma_update(None, "synchronous", switch.pragma())?;
        conn.pragma_update(None, "journal_mode", "OFF")?;
    }
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // In `full` mode the commit stage syncs the log after each commit
    // itself (see `Wal::log`): SQLite adds nothing else for `full` in WAL
    // mode.
    let sqlite_synchronous = match synchronous {
        Synchronous::Full => Synchronous::Normal,
        other => other,
    };
    conn.pragma_update(None, "synchronous", sqlite_synchronous.pragma())
}

/// An open instance database with its sandbox and the deadline its
/// progress handler and the watchdog enforce.
pub struct InstanceDb {
    /// Its write-ahead log, checkpointed outside commits. Dropped first:
    /// a checkpoint or sync of the log queued on the checkpoint thread
    /// must find it closed, not find the connection gone and the log with
    /// it (the last connection to close removes the log).
    pub wal: Wal,
    pub conn: Connection,
    pub sandbox: Sandbox,
    pub watch: Watch,
    /// Where its commits go besides the file (dropped last: after the
    /// connection closed).
    pub backend: Backend,
    /// Set for a replay that must leave nothing behind (a deploy's
    /// check): every commit rolls back instead, and fails.
    pub dry_run: bool,
}

impl InstanceDb {
    /// Opens (creating if needed) the database at `path`.
    pub fn open(
        path: &Path,
        synchronous: Synchronous,
        size_limit: u64,
        deadline: Deadline,
    ) -> rusqlite::Result<InstanceDb> {
        super::heap::install();
        let mut conn = Connection::open_with_flags_and_vfs(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            super::INSTANCE_VFS,
        )?;
        // Other connections to this database belong to concurrent calls of the
        // same instance: wait briefly for a writer, then let the call be re-run.
        conn.busy_timeout(DB_BUSY_TIMEOUT)?;
        enter_wal(&conn, synchronous)?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        // Defensive: ordinary SQL cannot write the shadow tables of FTS5 and
        // R*Tree (a guest's would corrupt its own index), nor make the
        // schema writable or the database file corruptible by other means.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
        // A cached statement runs as it was prepared, whatever is bound to
        // it: without this, SQLite prepares every statement whose `LIMIT`
        // is a parameter again at each run (the guest's, and the host's
        // reads of the queue and of a step's requests).
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
        // The guest may not change this pragma: past it, writes fail with
        // a `limit-exceeded` error naming the database size.
        // Temp tables get the same bound, on their own database.
        limit_size(&conn, "main", size_limit)?;
        limit_size(&conn, "temp", size_limit)?;
        lower_limits(&conn)?;
        super::functions::register(&conn, &deadline)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let watch = Watch::new(&conn, deadline.clone());
        conn.progress_handler(
            PROGRESS_STEPS,
            Some(move || {
                if deadline.passed() {
                    return true;
                }
                // This statement is a long one: let the thread's other
                // tasks go on elsewhere meanwhile.
                crate::blocking::hand_off_worker();
                false
            }),
        )?;
        let sandbox = Sandbox::default();
        sandbox.install(&mut conn)?;
        let wal = Wal::watch(&mut conn, synchronous, path)?;
        Ok(InstanceDb {
            conn,
            sandbox,
            watch,
            wal,
            backend: Backend::Detached,
            dry_run: false,
        })
    }

    /// The recorded creation, or `None` for a database that was never created.
    pub fn created_at(&self) -> rusqlite::Result<Option<i64>> {
        created_at(&self.conn)
    }

    /// Creates the internal tables, inside the creation's transaction.
    pub fn create_schema(&self) -> rusqlite::Result<()> {
        self.conn.execute_batch(SCHEMA)
    }

    /// Makes sure the queue's tables exist, for a workflow (its queue
    /// waits read the events). Other instances get them lazily: the
    /// policy's when they record one, the events' at their first append.
    pub fn ensure_queue_schema(&self) -> rusqlite::Result<()> {
        if !self.conn.queue().has_schema()? {
            self.conn.execute_batch(super::queue::EVENTS_SCHEMA)?;
            self.conn.execute_batch(super::queue::POLICY_SCHEMA)?;
        }
        Ok(())
    }

    /// Makes sure the workflow's tables exist, for a workflow actor.
    pub fn ensure_workflow_schema(&self) -> rusqlite::Result<()> {
        if !self.conn.workflow().has_schema()? {
            self.conn.execute_batch(super::workflow::SCHEMA)?;
        }
        Ok(())
    }

    /// Makes sure the schedules' table exists (the first schedule makes
    /// it otherwise): the fuzz targets list the host's objects with it.
    #[cfg(any(test, feature = "testing"))]
    pub fn ensure_schedule_schema(&self) -> rusqlite::Result<()> {
        self.conn.execute_batch(super::schedule::SCHEMA)
    }

    pub fn record_creation(&self, actor: &str, key: &str, now_ms: i64) -> rusqlite::Result<()> {
        host_statement(
            &self.conn,
            "INSERT INTO main._burrow_instance (id, actor, key, created_at) VALUES (1, ?, ?, ?)",
        )?
        .execute(rusqlite::params![actor, key, now_ms])?;
        Ok(())
    }

    pub fn read_state(&self) -> rusqlite::Result<Option<Vec<u8>>> {
        read_state(&self.conn)
    }

    pub fn write_state(&self, value: &[u8]) -> rusqlite::Result<()> {
        host_statement(
            &self.conn,
            "INSERT INTO main._burrow_state (id, value) VALUES (1, ?)
             ON CONFLICT (id) DO UPDATE SET value = excluded.value",
        )?
        .execute([value])?;
        Ok(())
    }

    /// Begins a deferred transaction. `BEGIN` and `COMMIT` come from the
    /// statement cache, as every host statement does, so that a call does
    /// not parse them again; SQLite ignores a transaction's name, which is
    /// here only to give them the host's prefix (see `host_statement`).
    pub fn begin(&self) -> rusqlite::Result<()> {
        host_statement(&self.conn, "BEGIN TRANSACTION _burrow_transaction")?.execute([])?;
        Ok(())
    }

    /// Whether committing the open transaction begins the instance's log
    /// (see [`Wal::begins_log`]), and so waits for the disk even in
    /// `normal` mode. Only a transaction that writes can: one that only
    /// read leaves the log as it was (an instance that is only read never
    /// begins one), and its commit need not leave the async worker.
    pub fn commit_begins_log(&self) -> bool {
        let reads_only = matches!(
            self.conn.transaction_state(Some("main")),
            Ok(TransactionState::None | TransactionState::Read)
        );
        !reads_only && self.wal.begins_log()
    }

    pub fn commit(&self) -> rusqlite::Result<()> {
        self.refuse_dry_run()?;
        host_statement(&self.conn, "COMMIT TRANSACTION _burrow_transaction")?.execute([])?;
        Ok(())
    }

    /// Runs `commit` (the SQLite commit of the open transaction, with
    /// whatever must go with it) and releases `release` through the
    /// database's backend (see `backend.rs`).
    pub fn commit_releasing<E>(
        &self,
        release: Release,
        commit: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<rusqlite::Error> + From<ClusterError>,
    {
        self.backend.commit(|| self.wal.pages(), release, commit)
    }

    /// In a dry run, rolls the open transaction back and fails: nothing
    /// of it may be kept.
    pub fn refuse_dry_run(&self) -> rusqlite::Result<()> {
        if !self.dry_run {
            return Ok(());
        }
        self.rollback();
        Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY),
            Some("a dry run commits nothing".into()),
        ))
    }

    /// Opens `savepoint` (inside the open transaction).
    pub fn enter(&self, savepoint: Savepoint) -> rusqlite::Result<()> {
        host_statement(&self.conn, savepoint.sql()[0])?.execute([])?;
        Ok(())
    }

    /// Keeps the writes since [`InstanceDb::enter`] of `savepoint` (and
    /// ends every savepoint the guest left open inside it).
    pub fn keep(&self, savepoint: Savepoint) -> rusqlite::Result<()> {
        host_statement(&self.conn, savepoint.sql()[1])?.execute([])?;
        Ok(())
    }

    /// Undoes the writes since [`InstanceDb::enter`] of `savepoint`,
    /// leaving the rest of the transaction as it was.
    pub fn undo(&self, savepoint: Savepoint) -> rusqlite::Result<()> {
        let [_, release, rollback_to] = savepoint.sql();
        host_statement(&self.conn, rollback_to)?.execute([])?;
        host_statement(&self.conn, release)?.execute([])?;
        Ok(())
    }

    /// Rolls back the open transaction, if there is one.
    pub fn rollback(&self) {
        if !self.conn.is_autocommit()
            && let Err(e) = self.conn.execute_batch("ROLLBACK")
        {
            tracing::error!(error = %e, "rollback failed");
        }
    }
}

/// Bounds the database `schema` of `conn` (`main` or `temp`) to `size_limit`
/// bytes with `max_page_count`, which guests may not change: past it, writes
/// fail with a `limit-exceeded` error naming the database size. Setting it
/// on `temp` opens the temp database, so the bound holds from the first
/// temp table on.
fn limit_size(conn: &Connection, schema: &str, size_limit: u64) -> rusqlite::Result<()> {
    let page_size: i64 = conn.query_row(&format!("PRAGMA {schema}.page_size"), [], |r| r.get(0))?;
    let pages = i64::try_from(size_limit).unwrap_or(i64::MAX) / page_size.max(1);
    conn.pragma_update(Some(schema), "max_page_count", pages.max(1))?;
    Ok(())
}

/// Lowers SQLite's own limits to the host's, on every connection that runs
/// guest-defined SQL (instance connections, `inspect`): a value or row, SQL
/// text, parameters, the size of a statement's program, a LIKE or GLOB
/// pattern; no attached
/// databases, no helper threads.
pub fn lower_limits(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::limits::Limit;
    let limits = [
        (Limit::SQLITE_LIMIT_LENGTH, MAX_SQL_VALUE_BYTES),
        (Limit::SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_BYTES),
        (Limit::SQLITE_LIMIT_VARIABLE_NUMBER, MAX_SQL_PARAMS),
        (Limit::SQLITE_LIMIT_VDBE_OP, MAX_SQL_PROGRAM_OPS),
        (
            Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH,
            MAX_LIKE_PATTERN_BYTES,
        ),
        (Limit::SQLITE_LIMIT_ATTACHED, 0),
        (Limit::SQLITE_LIMIT_WORKER_THREADS, 0),
    ];
    for (limit, value) in limits {
        conn.set_limit(limit, i32::try_from(value).unwrap_or(i32::MAX))?;
    }
    Ok(())
}

/// Opens the database at `path` read-only, for a view of an instance
/// from outside its host (`inspect`): through the host's VFS, with the
/// limits of guest SQL, and the creation time it records. `None` when it
/// is no instance: no file, or one whose creation never committed. A file
/// that cannot be read (not a database, locked) is an error, not a
/// missing instance.
pub fn open_read_only(path: &Path) -> rusqlite::Result<Option<(Connection, i64)>> {
    if !path.exists() {
        return Ok(None);
    }
    super::heap::install();
    let conn = Connection::open_with_flags_and_vfs(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        super::INSTANCE_VFS,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    lower_limits(&conn)?;
    let created_at = created_at(&conn)?;
    Ok(created_at.map(|created_at| (conn, created_at)))
}

/// The creation recorded in the database of `conn`, or `None` for a
/// database that was never created.
fn created_at(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    let created = host_statement(
        conn,
        "SELECT created_at FROM main._burrow_instance WHERE id = 1",
    )
    .and_then(|mut stmt| stmt.query_row([], |r| r.get(0)))
    .optional();
    match created {
        // A database without the internal tables was never created.
        Err(rusqlite::Error::SqlInputError { ref msg, .. }) if msg.starts_with("no such table") => {
            Ok(None)
        }
        Err(rusqlite::Error::SqliteFailure(_, Some(ref msg)))
            if msg.starts_with("no such table") =>
        {
            Ok(None)
        }
        other => other,
    }
}

/// Reads the state value through any connection to an instance database.
pub fn read_state(conn: &Connection) -> rusqlite::Result<Option<Vec<u8>>> {
    host_statement(conn, "SELECT value FROM main._burrow_state WHERE id = 1")?
        .query_row([], |r| r.get(0))
        .optional()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instance database at `path` in `normal` mode, with no deadline.
    fn open_normal(path: &Path) -> InstanceDb {
        InstanceDb::open(path, Synchronous::Normal, 1 << 30, Deadline::default()).unwrap()
    }

    /// `full` is SQLite's `normal` plus a sync of the log per commit,
    /// which the commit stage makes on the log's handle.
    #[test]
    fn the_database_is_in_wal_mode_with_the_configured_synchronous() {
        let dir = tempfile::tempdir().unwrap();
        for (setting, sqlite_setting, syncs_log) in [
            (Synchronous::Off, 0, false),
            (Synchronous::Normal, 1, false),
            (Synchronous::Full, 1, true),
        ] {
            let path = dir.path().join(format!("{}.sqlite", setting.pragma()));
            let db = InstanceDb::open(&path, setting, 1 << 30, Deadline::default()).unwrap();
            let mode: String = db
                .conn
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap();
            let sync: i64 = db
                .conn
                .query_row("PRAGMA synchronous", [], |r| r.get(0))
                .unwrap();
            assert_eq!((mode.as_str(), sync), ("wal", sqlite_setting));
            assert_eq!(db.wal.log().is_some(), syncs_log);
        }
    }

    /// A connection's first commit that writes begins a log, and syncs;
    /// one that only read writes nothing, before or after it.
    #[test]
    fn only_a_commit_that_writes_begins_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.sqlite");
        let db = open_normal(&path);
        db.create_schema().unwrap();
        drop(db);
        let db = open_normal(&path);
        db.begin().unwrap();
        db.read_state().unwrap();
        assert!(!db.commit_begins_log(), "a read begins no log");
        db.commit().unwrap();
        db.begin().unwrap();
        db.write_state(b"v").unwrap();
        assert!(db.commit_begins_log(), "the first write begins the log");
        db.commit().unwrap();
        db.begin().unwrap();
        db.write_state(b"w").unwrap();
        assert!(!db.commit_begins_log(), "the next write appends to it");
        db.rollback();
    }

    /// A statement kept in the cache runs as it was prepared, whatever is
    /// bound to it: SQLite otherwise prepares a statement again at every
    /// run when a parameter is its `LIMIT` (the host's reads of the queue
    /// and of a step's requests have one), which cost a step with a
    /// request about 50 µs.
    #[test]
    fn a_cached_statement_with_a_bound_limit_is_not_prepared_again() {
        use rusqlite::StatementStatus;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.sqlite");
        let db = open_normal(&path);
        db.conn
            .execute_batch("CREATE TABLE _burrow_t (x INTEGER PRIMARY KEY)")
            .unwrap();
        let sql = "DELETE FROM main._burrow_t WHERE x NOT IN \
                   (SELECT x FROM main._burrow_t ORDER BY x DESC LIMIT ?1)";
        for limit in [32, 32, 16] {
            let mut stmt = host_statement(&db.conn, sql).unwrap();
            stmt.execute([limit]).unwrap();
            assert_eq!(
                stmt.get_status(StatementStatus::RePrepare),
                0,
                "LIMIT {limit}"
            );
        }
    }

    /// A new database is switched to WAL mode without a journal: its first
    /// page on disk says WAL at once, and what it commits is there when it
    /// is opened again.
    #[test]
    fn a_new_database_is_in_wal_mode_on_disk_and_keeps_its_creation() {
        let dir = tempfile::tempdir().unwrap();
        for setting in [Synchronous::Off, Synchronous::Normal, Synchronous::Full] {
            let path = dir.path().join(format!("{}.sqlite", setting.pragma()));
            let db = InstanceDb::open(&path, setting, 1 << 30, Deadline::default()).unwrap();
            let header = std::fs::read(&path).unwrap();
            assert_eq!(header.len(), 4096, "{setting:?}: one page");
            assert_eq!(&header[18..20], &[2, 2], "{setting:?}: WAL on disk");
            db.begin().unwrap();
            db.create_schema().unwrap();
            db.record_creation("a", "k", 7).unwrap();
            db.commit().unwrap();
            drop(db);
            let db = InstanceDb::open(&path, setting, 1 << 30, Deadline::default()).unwrap();
            assert_eq!(db.created_at().unwrap(), Some(7), "{setting:?}");
            let mode: String = db
                .conn
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap();
            assert_eq!(mode, "wal");
        }
    }

    #[test]
    fn sqlite_limits_are_the_hosts_and_temp_tables_are_bounded_too() {
        use rusqlite::limits::Limit;
        let dir = tempfile::tempdir().unwrap();
        let db = InstanceDb::open(
            &dir.path().join("i.sqlite"),
            Synchronous::Normal,
            1 << 20,
            Deadline::default(),
        )
        .unwrap();
        let limit = |l| db.conn.limit(l).unwrap() as usize;
        assert_eq!(limit(Limit::SQLITE_LIMIT_LENGTH), MAX_SQL_VALUE_BYTES);
        assert_eq!(limit(Limit::SQLITE_LIMIT_SQL_LENGTH), MAX_SQL_BYTES);
        assert_eq!(limit(Limit::SQLITE_LIMIT_VARIABLE_NUMBER), MAX_SQL_PARAMS);
        assert_eq!(limit(Limit::SQLITE_LIMIT_VDBE_OP), MAX_SQL_PROGRAM_OPS);
        assert_eq!(limit(Limit::SQLITE_LIMIT_ATTACHED), 0);
        let pages = |schema: &str| -> i64 {
            db.conn
                .query_row(&format!("PRAGMA {schema}.max_page_count"), [], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(pages("main"), (1 << 20) / 4096);
        assert_eq!(pages("temp"), (1 << 20) / 4096);
        db.conn
            .execute_batch(
                "CREATE TEMP TABLE t (x);
                 INSERT INTO t SELECT zeroblob(100000) FROM
                   (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 10)
                    SELECT i FROM n);",
            )
            .expect("under the bound");
        let e = db
            .conn
            .execute_batch("INSERT INTO t SELECT x FROM t")
            .expect_err("past the bound");
        assert_eq!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DiskFull));
    }

    #[test]
    fn a_database_without_internal_tables_was_never_created() {
        let dir = tempfile::tempdir().unwrap();
        let db = InstanceDb::open(
            &dir.path().join("i.sqlite"),
            Synchronous::Normal,
            1 << 30,
            Deadline::default(),
        )
        .unwrap();
        assert_eq!(db.created_at().unwrap(), None);
        db.create_schema().unwrap();
        assert_eq!(db.created_at().unwrap(), None);
        db.record_creation("a", "k", 42).unwrap();
        assert_eq!(db.created_at().unwrap(), Some(42));
    }

    /// A read-only view finds an instance, no instance (no file, or a
    /// database never created), or names a file it cannot read.
    #[test]
    fn a_read_only_view_tells_a_missing_instance_from_an_unreadable_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.sqlite");
        assert!(open_read_only(&path).unwrap().is_none());
        let db = open_normal(&path);
        assert!(open_read_only(&path).unwrap().is_none(), "never created");
        db.create_schema().unwrap();
        db.record_creation("a", "k", 42).unwrap();
        drop(db);
        let (_, created_at) = open_read_only(&path).unwrap().expect("an instance");
        assert_eq!(created_at, 42);
        let garbage = dir.path().join("g.sqlite");
        std::fs::write(&garbage, vec![7u8; 8192]).unwrap();
        let e = open_read_only(&garbage).expect_err("not a database");
        assert!(e.to_string().contains("not a database"), "{e}");
    }
}
