//! The SQLite authorizer that fences guest SQL.
//!
//! The authorizer is installed once per connection and consulted while a
//! statement is prepared (and re-prepared after a schema change). It applies
//! its rules only while guest SQL is being run ([`Sandbox::enter_guest`]);
//! the host's own statements on `_burrow_*` tables pass untouched.
//!
//! The authorizer sees names, not outcomes (an `ALTER TABLE ... RENAME`
//! shows it only the old name; a foreign key's parent is not shown at
//! all), so a guest statement that changes the schema also runs inside a
//! [`SchemaGuard`]: a savepoint, and a check of the schema afterwards.

mod names;
mod rules;
mod schema_guard;

use names::INTERNAL_PREFIX;
pub use names::is_internal;
pub use rules::refuse_statement;
pub use schema_guard::SchemaGuard;

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::hooks::{AuthContext, Authorization};
use rusqlite::{CachedStatement, Connection, Statement};

use rules::{changes_schema, keeps_sequence, refusal, upkeep_refusal};

/// Shared switch between the connection's authorizer and the code running
/// guest SQL, plus the reason of the last refusal for a clear error.
#[derive(Clone, Default)]
pub struct Sandbox {
    guest: Arc<AtomicBool>,
    /// Set while a guest statement that changes the schema is prepared.
    schema_change: Arc<AtomicBool>,
    /// Set while a guest `DROP TABLE` or `ALTER TABLE` is prepared: SQLite
    /// then deletes or renames the table's row of `sqlite_sequence` in a
    /// statement of its own (and the statement's `SchemaGuard` checks that
    /// the host's rows are as they were).
    keeping_sequence: Arc<AtomicBool>,
    last_denial: Arc<Mutex<Option<String>>>,
}

/// Marks guest SQL as running until dropped.
pub struct GuestSql<'a>(&'a Sandbox);

impl Drop for GuestSql<'_> {
    fn drop(&mut self) {
        self.0.guest.store(false, Ordering::Relaxed);
    }
}

impl Sandbox {
    pub fn install(&self, conn: &mut rusqlite::Connection) -> rusqlite::Result<()> {
        let sandbox = self.clone();
        conn.authorizer(Some(move |ctx: AuthContext<'_>| sandbox.authorize(ctx)))
    }

    pub fn enter_guest(&self) -> GuestSql<'_> {
        self.last_denial.lock().unwrap().take();
        self.take_schema_change();
        self.guest.store(true, Ordering::Relaxed);
        GuestSql(self)
    }

    /// Whether a guest statement prepared since the last call changes the
    /// schema (then it must run inside a [`SchemaGuard`]).
    pub fn take_schema_change(&self) -> bool {
        self.keeping_sequence.store(false, Ordering::Relaxed);
        self.schema_change.swap(false, Ordering::Relaxed)
    }

    /// Prepares one guest statement through the connection's cache. A
    /// statement that changes the schema is never kept there: it is
    /// prepared, and so authorized and guarded, every time it runs. Nor is
    /// one whose text names the host's prefix: the host's own statements
    /// are kept there under such texts (see [`host_statement`]).
    pub fn prepare_cached<'c>(
        &self,
        conn: &'c Connection,
        sql: &str,
    ) -> rusqlite::Result<GuestStatement<'c>> {
        self.take_schema_change();
        if sql.contains(INTERNAL_PREFIX) {
            return Ok(GuestStatement::Uncached(conn.prepare(sql)?));
        }
        let cached = conn.prepare_cached(sql)?;
        if !self.schema_change.load(Ordering::Relaxed) {
            return Ok(GuestStatement::Cached(cached));
        }
        cached.discard();
        // Prepared again (the flags are set again) outside the cache.
        self.take_schema_change();
        Ok(GuestStatement::Uncached(conn.prepare(sql)?))
    }

    /// Runs host statements in the middle of guest SQL, unfenced.
    fn as_host<T>(&self, work: impl FnOnce() -> T) -> T {
        let was_guest = self.guest.swap(false, Ordering::Relaxed);
        let result = work();
        self.guest.store(was_guest, Ordering::Relaxed);
        result
    }

    /// Why the last guest statement was refused, if it was.
    pub fn take_denial(&self) -> Option<String> {
        self.last_denial.lock().unwrap().take()
    }

    fn authorize(&self, ctx: AuthContext<'_>) -> Authorization {
        if !self.guest.load(Ordering::Relaxed) {
            return Authorization::Allow;
        }
        if changes_schema(&ctx.action) {
            self.schema_change.store(true, Ordering::Relaxed);
        }
        if keeps_sequence(&ctx.action) {
            self.keeping_sequence.store(true, Ordering::Relaxed);
        }
        let keeping_sequence = self.keeping_sequence.load(Ordering::Relaxed);
        match refusal(&ctx.action).or_else(|| upkeep_refusal(&ctx.action, keeping_sequence)) {
            None => Authorization::Allow,
            Some(reason) => {
                *self.last_denial.lock().unwrap() = Some(reason);
                Authorization::Deny
            }
        }
    }
}

/// Whether the host's table `name` exists in `main`, as far as `conn`
/// knows: SQLite looks it up in the schema the connection holds in memory
/// (no statement runs, unlike a read of `sqlite_schema`). That is exact on
/// the connection that makes the table, in and out of its transactions; a
/// table another connection made shows only once `conn` has read the
/// database since. For a check whose "no" costs only a `CREATE TABLE IF
/// NOT EXISTS`.
pub fn has_host_table(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    debug_assert!(
        name.starts_with(INTERNAL_PREFIX),
        "{name} is not a host table"
    );
    conn.table_exists(Some("main"), name)
}

/// Prepares one of the host's own statements through the connection's
/// cache, so that the host does not parse its SQL again on every call.
///
/// The cache is looked up by text, and a statement the host prepared was
/// never held to the guest rules: a guest that sent the same text and got
/// the host's statement from the cache would run it unfenced. So a host
/// statement is kept there only if its text names the host's prefix
/// (`_burrow_`, as every host table and savepoint does), and a guest
/// statement whose text contains that prefix is never looked up there
/// ([`Sandbox::prepare_cached`]). A text without the prefix is refused
/// here with `SQLITE_MISUSE`, which a test of every host path would meet.
pub fn host_statement<'c>(
    conn: &'c Connection,
    sql: &str,
) -> rusqlite::Result<CachedStatement<'c>> {
    if !sql.contains(INTERNAL_PREFIX) {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_MISUSE),
            Some(format!(
                "a host statement kept in the statement cache must name `{INTERNAL_PREFIX}`: {sql}"
            )),
        ));
    }
    conn.prepare_cached(sql)
}

/// A guest statement ready to run: from the connection's cache, or
/// prepared for this run alone when it changes the schema.
pub enum GuestStatement<'c> {
    Cached(CachedStatement<'c>),
    Uncached(Statement<'c>),
}

impl<'c> Deref for GuestStatement<'c> {
    type Target = Statement<'c>;

    fn deref(&self) -> &Statement<'c> {
        match self {
            GuestStatement::Cached(stmt) => stmt,
            GuestStatement::Uncached(stmt) => stmt,
        }
    }
}

impl<'c> DerefMut for GuestStatement<'c> {
    fn deref_mut(&mut self) -> &mut Statement<'c> {
        match self {
            GuestStatement::Cached(stmt) => stmt,
            GuestStatement::Uncached(stmt) => stmt,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn guest_conn() -> (rusqlite::Connection, Sandbox) {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE _burrow_state (v); CREATE TABLE t (v);")
            .unwrap();
        let sandbox = Sandbox::default();
        sandbox.install(&mut conn).unwrap();
        (conn, sandbox)
    }

    /// `has_host_table` follows the connection's own transactions; a
    /// table another connection made shows once it has read the database.
    #[test]
    fn a_host_table_exists_as_the_schema_says() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let open = || {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.pragma_update(None, "journal_mode", "WAL").unwrap();
            conn
        };
        let (conn, other) = (open(), open());
        assert!(!has_host_table(&conn, "_burrow_probe").unwrap());
        conn.execute_batch("BEGIN; CREATE TABLE _burrow_probe (v);")
            .unwrap();
        assert!(has_host_table(&conn, "_burrow_probe").unwrap());
        conn.execute_batch("ROLLBACK").unwrap();
        assert!(!has_host_table(&conn, "_burrow_probe").unwrap());
        // Not a view, nor another database's table.
        conn.execute_batch(
            "CREATE VIEW _burrow_view AS SELECT 1; CREATE TEMP TABLE _burrow_temp (v);",
        )
        .unwrap();
        assert!(!has_host_table(&conn, "_burrow_view").unwrap());
        assert!(!has_host_table(&conn, "_burrow_temp").unwrap());

        assert!(!has_host_table(&other, "_burrow_probe").unwrap());
        conn.execute_batch("CREATE TABLE _burrow_probe (v)")
            .unwrap();
        other.execute_batch("SELECT 1").unwrap();
        assert!(!has_host_table(&other, "_burrow_probe").unwrap());
        other
            .query_row("SELECT count(*) FROM main.sqlite_schema", [], |_| Ok(()))
            .unwrap();
        assert!(has_host_table(&other, "_burrow_probe").unwrap());
    }

    #[test]
    fn host_sql_is_not_fenced() {
        let (conn, _sandbox) = guest_conn();
        conn.execute("INSERT INTO _burrow_state VALUES (1)", [])
            .unwrap();
    }

    /// The host's statements share the connection's statement cache with
    /// the guest's; a guest that sends the text of one the host keeps
    /// there gets a statement of its own, held to the guest rules.
    #[test]
    fn a_guest_never_runs_a_host_statement_from_the_cache() {
        let (conn, sandbox) = guest_conn();
        let host_sql = "SELECT count(*) FROM _burrow_state";
        let count: i64 = host_statement(&conn, host_sql)
            .unwrap()
            .query_row([], |r| r.get(0))
            .unwrap();
        assert_eq!(count, 0);
        let _guest = sandbox.enter_guest();
        for sql in [host_sql.to_owned(), format!("  {host_sql} ")] {
            let refused = sandbox.prepare_cached(&conn, &sql).err();
            assert!(refused.is_some(), "`{sql}` ran unfenced");
            let denial = sandbox.take_denial().unwrap_or_default();
            assert!(denial.contains("_burrow_state"), "{denial}");
        }
    }

    #[test]
    fn a_host_statement_without_the_prefix_is_not_kept() {
        let (conn, _sandbox) = guest_conn();
        let e = host_statement(&conn, "SELECT v FROM t")
            .err()
            .expect("refused");
        assert!(e.to_string().contains("must name `_burrow_`"), "{e}");
    }

    #[test]
    fn only_statements_that_change_the_schema_are_flagged() {
        let (conn, sandbox) = guest_conn();
        let _guest = sandbox.enter_guest();
        for (sql, changes) in [
            ("SELECT v FROM t", false),
            ("INSERT INTO t VALUES (1)", false),
            ("CREATE TABLE u (x)", true),
            ("ALTER TABLE t RENAME TO t2", true),
            ("CREATE TEMP VIEW w AS SELECT 1", true),
            ("DROP VIEW w", true),
        ] {
            conn.execute_batch(sql).unwrap();
            assert_eq!(sandbox.take_schema_change(), changes, "{sql}");
        }
    }
}
