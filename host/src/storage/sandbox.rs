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

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::{CachedStatement, Connection, OptionalExtension, Statement};

/// Prefix of every table the host keeps for itself.
pub(crate) const INTERNAL_PREFIX: &str = "_burrow_";

/// Pragmas a guest may use: they read, or change nothing that matters for
/// durability or schema safety.
const ALLOWED_PRAGMAS: &[&str] = &[
    "application_id",
    "collation_list",
    "data_version",
    "foreign_key_check",
    "foreign_key_list",
    "foreign_keys",
    "freelist_count",
    "function_list",
    "index_info",
    "index_list",
    "index_xinfo",
    "integrity_check",
    "page_count",
    "page_size",
    "quick_check",
    "table_info",
    "table_list",
    "table_xinfo",
    "user_version",
];

/// Virtual table modules a guest may create.
const ALLOWED_VTABLE_MODULES: &[&str] = &["fts5", "rtree"];

/// Functions a guest may not call.
const DENIED_FUNCTIONS: &[&str] = &["load_extension", "fts3_tokenizer"];

/// Shared switch between the connection's authorizer and the code running
/// guest SQL, plus the reason of the last refusal for a clear error.
#[derive(Clone, Default)]
pub(crate) struct Sandbox {
    guest: Arc<AtomicBool>,
    /// Set while a guest statement that changes the schema is prepared.
    schema_change: Arc<AtomicBool>,
    /// Set while a guest `DROP TABLE` or `ALTER TABLE` is prepared: SQLite
    /// then deletes or renames the table's row of `sqlite_sequence` in a
    /// statement of its own.
    keeping_sequence: Arc<AtomicBool>,
    last_denial: Arc<Mutex<Option<String>>>,
}

/// Marks guest SQL as running until dropped.
pub(crate) struct GuestSql<'a>(&'a Sandbox);

impl Drop for GuestSql<'_> {
    fn drop(&mut self) {
        self.0.guest.store(false, Ordering::Relaxed);
    }
}

impl Sandbox {
    pub(crate) fn install(&self, conn: &mut rusqlite::Connection) -> rusqlite::Result<()> {
        let sandbox = self.clone();
        conn.authorizer(Some(move |ctx: AuthContext<'_>| sandbox.authorize(ctx)))
    }

    pub(crate) fn enter_guest(&self) -> GuestSql<'_> {
        self.last_denial.lock().unwrap().take();
        self.take_schema_change();
        self.guest.store(true, Ordering::Relaxed);
        GuestSql(self)
    }

    /// Whether a guest statement prepared since the last call changes the
    /// schema (then it must run inside a [`SchemaGuard`]).
    pub(crate) fn take_schema_change(&self) -> bool {
        self.keeping_sequence.store(false, Ordering::Relaxed);
        self.schema_change.swap(false, Ordering::Relaxed)
    }

    /// Prepares one guest statement through the connection's cache. A
    /// statement that changes the schema is never kept there: it is
    /// prepared, and so authorized and guarded, every time it runs.
    pub(crate) fn prepare_cached<'c>(
        &self,
        conn: &'c Connection,
        sql: &str,
    ) -> rusqlite::Result<GuestStatement<'c>> {
        self.take_schema_change();
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
    pub(crate) fn take_denial(&self) -> Option<String> {
        self.last_denial.lock().unwrap().take()
    }

    fn authorize(&self, ctx: AuthContext<'_>) -> Authorization {
        if !self.guest.load(Ordering::Relaxed) {
            return Authorization::Allow;
        }
        if changes_schema(&ctx.action) {
            self.schema_change.store(true, Ordering::Relaxed);
        }
        if matches!(
            ctx.action,
            AuthAction::DropTable { .. }
                | AuthAction::DropTempTable { .. }
                | AuthAction::AlterTable { .. }
        ) {
            self.keeping_sequence.store(true, Ordering::Relaxed);
        }
        let keeping_sequence = self.keeping_sequence.load(Ordering::Relaxed);
        match refusal(&ctx.action).or_else(|| sequence_refusal(&ctx.action, keeping_sequence)) {
            None => Authorization::Allow,
            Some(reason) => {
                *self.last_denial.lock().unwrap() = Some(reason);
                Authorization::Deny
            }
        }
    }
}

/// Whether `name` is one of the host's (`_burrow_*`, in any case).
pub(crate) fn is_internal(name: &str) -> bool {
    name.len() >= INTERNAL_PREFIX.len()
        && name.as_bytes()[..INTERNAL_PREFIX.len()].eq_ignore_ascii_case(INTERNAL_PREFIX.as_bytes())
}

/// Why `action` on `sqlite_sequence` is refused, if it is. That table
/// holds the host's `AUTOINCREMENT` counters too: a guest that set them
/// could make the host reuse event ids or run out of them. A guest reads
/// it; only SQLite's own upkeep for a guest's `DROP TABLE` or `ALTER
/// TABLE` (the table's own row, deleted or renamed) writes it.
fn sequence_refusal(action: &AuthAction<'_>, keeping_sequence: bool) -> Option<String> {
    let table = match *action {
        AuthAction::Insert { table_name } => table_name,
        AuthAction::Update { table_name, .. } | AuthAction::Delete { table_name }
            if !keeping_sequence =>
        {
            table_name
        }
        _ => return None,
    };
    table.eq_ignore_ascii_case("sqlite_sequence").then(|| {
        "sqlite_sequence is read-only to guest SQL: it holds the host's counters too".to_string()
    })
}

/// Whether `action` is part of a statement that changes the schema.
fn changes_schema(action: &AuthAction<'_>) -> bool {
    use AuthAction::*;
    matches!(
        action,
        CreateIndex { .. }
            | CreateTable { .. }
            | CreateTempIndex { .. }
            | CreateTempTable { .. }
            | CreateTempTrigger { .. }
            | CreateTempView { .. }
            | CreateTrigger { .. }
            | CreateView { .. }
            | DropIndex { .. }
            | DropTable { .. }
            | DropTempIndex { .. }
            | DropTempTable { .. }
            | DropTempTrigger { .. }
            | DropTempView { .. }
            | DropTrigger { .. }
            | DropView { .. }
            | AlterTable { .. }
            | CreateVtable { .. }
            | DropVtable { .. }
    )
}

/// Why `action` is refused to guest SQL, or `None` if it is allowed.
pub(crate) fn refusal(action: &AuthAction<'_>) -> Option<String> {
    use AuthAction::*;
    let table = match *action {
        CreateIndex { table_name, .. }
        | CreateTable { table_name }
        | CreateTempIndex { table_name, .. }
        | CreateTempTable { table_name }
        | CreateTempTrigger { table_name, .. }
        | CreateTrigger { table_name, .. }
        | Delete { table_name }
        | DropIndex { table_name, .. }
        | DropTable { table_name }
        | DropTempIndex { table_name, .. }
        | DropTempTable { table_name }
        | DropTempTrigger { table_name, .. }
        | DropTrigger { table_name, .. }
        | Insert { table_name }
        | Read { table_name, .. }
        | Update { table_name, .. }
        | AlterTable { table_name, .. }
        | Analyze { table_name }
        | CreateVtable { table_name, .. }
        | DropVtable { table_name, .. } => Some(table_name),
        CreateView { view_name }
        | CreateTempView { view_name }
        | DropView { view_name }
        | DropTempView { view_name } => Some(view_name),
        _ => None,
    };
    if let Some(table) = table
        && is_internal(table)
    {
        return Some(format!(
            "`{table}` is an internal table of the host; tables named `{INTERNAL_PREFIX}*` are off limits"
        ));
    }
    let index_or_trigger = match *action {
        CreateIndex { index_name, .. }
        | CreateTempIndex { index_name, .. }
        | DropIndex { index_name, .. }
        | DropTempIndex { index_name, .. } => Some(index_name),
        CreateTrigger { trigger_name, .. }
        | CreateTempTrigger { trigger_name, .. }
        | DropTrigger { trigger_name, .. }
        | DropTempTrigger { trigger_name, .. } => Some(trigger_name),
        _ => None,
    };
    if let Some(name) = index_or_trigger
        && is_internal(name)
    {
        return Some(format!(
            "`{name}` is an internal name of the host; indexes and triggers named `{INTERNAL_PREFIX}*` are off limits"
        ));
    }
    match *action {
        Attach { filename } => Some(format!(
            "ATTACH of `{filename}` is not allowed: an instance reaches only its own database"
        )),
        Detach { .. } => Some("DETACH is not allowed".into()),
        Transaction { .. } => Some(
            "BEGIN, COMMIT and ROLLBACK are not allowed: every call already runs in one transaction \
             that the host commits (use SAVEPOINT for nested work)"
                .into(),
        ),
        Pragma { pragma_name, .. } => {
            let name = pragma_name.to_ascii_lowercase();
            (!ALLOWED_PRAGMAS.contains(&name.as_str())).then(|| {
                format!("PRAGMA {pragma_name} is not allowed: it could change durability or schema safety")
            })
        }
        Function { function_name } => {
            let name = function_name.to_ascii_lowercase();
            DENIED_FUNCTIONS
                .contains(&name.as_str())
                .then(|| format!("the function {function_name}() is not allowed"))
        }
        CreateVtable { module_name, .. } => {
            let name = module_name.to_ascii_lowercase();
            (!ALLOWED_VTABLE_MODULES.contains(&name.as_str()))
                .then(|| format!("virtual tables of module `{module_name}` are not allowed"))
        }
        Unknown { code, .. } => Some(format!("SQLite action {code} is not allowed")),
        _ => None,
    }
}

/// Refuses statements the authorizer is not asked about: `VACUUM` (also
/// `VACUUM INTO`, which would write a copy of the database elsewhere).
pub(crate) fn refuse_statement(sql: &str) -> Option<String> {
    let keyword: String = skip_comments(sql)
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    keyword
        .eq_ignore_ascii_case("vacuum")
        .then(|| "VACUUM is not allowed: the host maintains the database file".to_string())
}

fn skip_comments(mut sql: &str) -> &str {
    loop {
        sql = sql.trim_start();
        if let Some(rest) = sql.strip_prefix("--") {
            sql = rest.split_once('\n').map_or("", |(_, after)| after);
        } else if let Some(rest) = sql.strip_prefix("/*") {
            sql = rest.split_once("*/").map_or("", |(_, after)| after);
        } else {
            return sql;
        }
    }
}

/// A guest statement ready to run: from the connection's cache, or
/// prepared for this run alone when it changes the schema.
pub(crate) enum GuestStatement<'c> {
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

/// The savepoint a [`SchemaGuard`] opens around one guest statement.
const GUARD_SAVEPOINT: &str = "_burrow_schema_guard";

/// `expr` names a host object: starts with `_burrow_`, in any case (not
/// `LIKE`, whose `_` matches any character).
macro_rules! internal_sql {
    ($expr:literal) => {
        concat!("lower(substr(", $expr, ", 1, 8)) = '_burrow_'")
    };
}

/// The row of `sqlite_schema` is a table or view that would shadow a
/// table-valued function the host's statements use: `json_each(...)`
/// finds a table of that name first, in `main` or `temp`.
macro_rules! shadows_function_sql {
    () => {
        "(type IN ('table', 'view') AND (lower(name) IN ('json_each', 'json_tree') \
         OR lower(substr(name, 1, 7)) = 'pragma_'))"
    };
}

/// The host's objects in `main`: every object with an internal name or on
/// an internal table, with its definition.
const MAIN_INTERNAL_OBJECTS: &str = concat!(
    "SELECT type, name, tbl_name, coalesce(sql, '') FROM main.sqlite_schema WHERE ",
    internal_sql!("name"),
    " OR ",
    internal_sql!("tbl_name"),
    " OR ",
    shadows_function_sql!(),
    " ORDER BY type, name"
);

/// Objects in `temp` with an internal name or on an internal table: there
/// must be none.
const TEMP_INTERNAL_OBJECTS: &str = concat!(
    "SELECT type, name, tbl_name, '' FROM temp.sqlite_schema WHERE ",
    internal_sql!("name"),
    " OR ",
    internal_sql!("tbl_name"),
    " OR ",
    shadows_function_sql!(),
    " ORDER BY type, name"
);

/// Foreign keys from a guest table (in `main` or `temp`) to an internal
/// table: there must be none.
const FOREIGN_KEYS_INTO_INTERNAL: &str = concat!(
    "SELECT t.name, f.\"table\" FROM main.sqlite_schema AS t, pragma_foreign_key_list(t.name, 'main') AS f
     WHERE t.type = 'table' AND NOT ",
    internal_sql!("t.name"),
    " AND ",
    internal_sql!("f.\"table\""),
    " UNION ALL
     SELECT t.name, f.\"table\" FROM temp.sqlite_schema AS t, pragma_foreign_key_list(t.name, 'temp') AS f
     WHERE t.type = 'table' AND ",
    internal_sql!("f.\"table\""),
    " LIMIT 1"
);

/// One row of [`MAIN_INTERNAL_OBJECTS`]: type, name, table, definition.
type SchemaObject = (String, String, String, String);

fn internal_objects(conn: &Connection, sql: &str) -> rusqlite::Result<Vec<SchemaObject>> {
    conn.prepare(sql)?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect()
}

fn describe((kind, name, table, _): &SchemaObject) -> String {
    if name.eq_ignore_ascii_case(table) {
        format!("{kind} `{name}`")
    } else {
        format!("{kind} `{name}` on `{table}`")
    }
}

/// Runs one guest statement that changes the schema inside a savepoint,
/// and keeps its changes only if the host's names are still the host's
/// alone: no object in `temp` with an internal name or on an internal
/// table, the host's objects in `main` exactly as they were, and no
/// foreign key from a guest table to an internal table. Otherwise the
/// statement is undone and the guest told why.
///
/// A guard that is dropped unfinished (the statement failed) undoes the
/// statement too.
pub(crate) struct SchemaGuard<'c> {
    conn: &'c Connection,
    sandbox: &'c Sandbox,
    before: Vec<SchemaObject>,
    open: bool,
}

impl<'c> SchemaGuard<'c> {
    /// Opens a guard for the statement just prepared, if it changes the
    /// schema; `None` (and no cost) otherwise.
    pub(crate) fn begin(
        conn: &'c Connection,
        sandbox: &'c Sandbox,
    ) -> rusqlite::Result<Option<SchemaGuard<'c>>> {
        if !sandbox.take_schema_change() {
            return Ok(None);
        }
        let before = sandbox.as_host(|| {
            conn.execute_batch(&format!("SAVEPOINT {GUARD_SAVEPOINT}"))?;
            internal_objects(conn, MAIN_INTERNAL_OBJECTS)
        });
        let before = match before {
            Ok(before) => before,
            Err(e) => {
                sandbox.as_host(|| undo(conn));
                return Err(e);
            }
        };
        Ok(Some(SchemaGuard {
            conn,
            sandbox,
            before,
            open: true,
        }))
    }

    /// Checks the schema after the statement ran (and was reset): keeps
    /// its changes, or undoes them and returns why they were refused.
    pub(crate) fn finish(mut self) -> rusqlite::Result<Result<(), String>> {
        self.open = false;
        let (conn, before) = (self.conn, &self.before);
        let verdict = self.sandbox.as_host(|| violation(conn, before));
        self.sandbox.as_host(|| match verdict {
            Ok(None) => conn
                .execute_batch(&format!("RELEASE {GUARD_SAVEPOINT}"))
                .map(Ok),
            Ok(Some(why)) => {
                undo(conn);
                Ok(Err(why))
            }
            Err(e) => {
                undo(conn);
                Err(e)
            }
        })
    }
}

impl Drop for SchemaGuard<'_> {
    fn drop(&mut self) {
        if self.open {
            self.sandbox.as_host(|| undo(self.conn));
        }
    }
}

/// Rolls back to the guard's savepoint and releases it. Errors are left:
/// SQLite may have rolled the whole transaction back already, savepoint
/// included, and the caller then finds the connection in autocommit.
fn undo(conn: &Connection) {
    let _ = conn.execute_batch(&format!(
        "ROLLBACK TO {GUARD_SAVEPOINT}; RELEASE {GUARD_SAVEPOINT}"
    ));
}

/// What the host keeps for itself, for refusals.
const HOST_NAMES: &str = "names starting with `_burrow_` belong to the host, and so do the \
     names of the table-valued functions its statements use (`json_each`, `json_tree`, `pragma_*`)";

/// Why the schema after a guest statement is refused, if it is.
fn violation(conn: &Connection, before: &[SchemaObject]) -> rusqlite::Result<Option<String>> {
    if let Some(object) = internal_objects(conn, TEMP_INTERNAL_OBJECTS)?.first() {
        return Ok(Some(format!(
            "the statement would make {} in `temp`; {HOST_NAMES}",
            describe(object)
        )));
    }
    let after = internal_objects(conn, MAIN_INTERNAL_OBJECTS)?;
    if after != before {
        let changed = after
            .iter()
            .find(|o| !before.contains(o))
            .or_else(|| before.iter().find(|o| !after.contains(o)))
            .map_or_else(|| "the host's objects".to_string(), describe);
        return Ok(Some(format!(
            "the statement would make or change {changed}; {HOST_NAMES}"
        )));
    }
    let foreign_key: Option<(String, String)> = conn
        .prepare(FOREIGN_KEYS_INTO_INTERNAL)?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(foreign_key.map(|(table, parent)| {
        format!(
            "the table `{table}` would have a foreign key into `{parent}`; foreign keys may not \
             name the host's internal tables"
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest_conn() -> (rusqlite::Connection, Sandbox) {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE _burrow_state (v); CREATE TABLE t (v);")
            .unwrap();
        let sandbox = Sandbox::default();
        sandbox.install(&mut conn).unwrap();
        (conn, sandbox)
    }

    fn denial(sql: &str) -> String {
        let (conn, sandbox) = guest_conn();
        let _guest = sandbox.enter_guest();
        match conn.execute_batch(sql) {
            Ok(()) => panic!("`{sql}` was allowed"),
            Err(_) => sandbox.take_denial().expect("a reason is recorded"),
        }
    }

    #[test]
    fn guest_sql_is_refused_what_the_sandbox_forbids() {
        assert!(denial("SELECT * FROM _burrow_state").contains("internal table"));
        assert!(denial("select v from _BURROW_state").contains("internal table"));
        assert!(denial("DELETE FROM _burrow_state").contains("internal table"));
        assert!(denial("DROP TABLE _burrow_state").contains("internal table"));
        assert!(denial("CREATE TABLE _burrow_mine (x)").contains("internal table"));
        // A view over an internal table can be made, but not read through.
        assert!(
            denial("CREATE VIEW v AS SELECT * FROM _burrow_state; SELECT * FROM v;")
                .contains("internal table")
        );
        assert!(denial("ATTACH DATABASE '/tmp/x.db' AS x").contains("ATTACH"));
        assert!(denial("DETACH DATABASE main").contains("DETACH"));
        assert!(denial("BEGIN").contains("transaction"));
        assert!(denial("COMMIT").contains("transaction"));
        assert!(denial("PRAGMA synchronous = OFF").contains("PRAGMA synchronous"));
        assert!(denial("PRAGMA journal_mode = DELETE").contains("journal_mode"));
        assert!(denial("PRAGMA writable_schema = ON").contains("writable_schema"));
        assert!(denial("SELECT load_extension('x')").contains("load_extension"));
    }

    #[test]
    fn guest_sql_may_use_its_own_tables_and_harmless_pragmas() {
        let (conn, sandbox) = guest_conn();
        let _guest = sandbox.enter_guest();
        conn.execute_batch(
            "INSERT INTO t VALUES (1); CREATE TABLE u (x); CREATE INDEX ui ON u(x);
             PRAGMA user_version = 3; PRAGMA table_info(t); SAVEPOINT s; RELEASE s;",
        )
        .unwrap();
        let n: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }

    #[test]
    fn vacuum_is_refused_whatever_precedes_it() {
        for sql in ["VACUUM", "  vacuum into '/tmp/x'", "-- hi\n/* x */ Vacuum"] {
            assert!(refuse_statement(sql).is_some(), "{sql}");
        }
        for sql in [
            "SELECT 'VACUUM'",
            "INSERT INTO vacuums VALUES (1)",
            "-- VACUUM\nSELECT 1",
        ] {
            assert!(refuse_statement(sql).is_none(), "{sql}");
        }
    }

    #[test]
    fn host_sql_is_not_fenced() {
        let (conn, _sandbox) = guest_conn();
        conn.execute("INSERT INTO _burrow_state VALUES (1)", [])
            .unwrap();
    }

    #[test]
    fn indexes_and_triggers_with_internal_names_are_refused() {
        for sql in [
            "CREATE INDEX _burrow_i ON t (v)",
            "CREATE INDEX main._BURROW_i ON t (v)",
            "CREATE TEMP TABLE tt (v); CREATE INDEX temp._burrow_i ON tt (v);",
            "CREATE TRIGGER _burrow_t AFTER INSERT ON t BEGIN SELECT 1; END",
            "CREATE TEMP TRIGGER _Burrow_t AFTER INSERT ON t BEGIN SELECT 1; END",
        ] {
            assert!(denial(sql).contains("internal name"), "{sql}");
        }
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

    mod guarded {
        use crate::bindings::db::{DbError, Host as _};
        use crate::instance::testing::instance;

        fn batch(state: &mut crate::instance::InstanceState, sql: &str) -> Result<(), DbError> {
            state.execute_batch(sql.into()).expect("no trap")
        }

        fn objects(state: &crate::instance::InstanceState, schema: &str) -> Vec<String> {
            let sql = format!(
                "SELECT name FROM {schema}.sqlite_schema WHERE lower(substr(name, 1, 8)) = '_burrow_'
                 OR lower(substr(tbl_name, 1, 8)) = '_burrow_' ORDER BY name"
            );
            let mut stmt = state.db.conn.prepare(&sql).unwrap();
            stmt.query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        }

        #[test]
        fn a_refused_schema_change_is_undone_and_names_what_was_refused() {
            let (mut state, _dir) = instance();
            let main_before = objects(&state, "main");
            for (sql, what) in [
                (
                    "CREATE TEMP TABLE x (v); ALTER TABLE temp.x RENAME TO _burrow_state",
                    "_burrow_state",
                ),
                (
                    "CREATE TABLE y (v); ALTER TABLE y RENAME TO _BURROW_schedule",
                    "_BURROW_schedule",
                ),
                ("CREATE VIRTUAL TABLE _burrow USING fts5 (body)", "_burrow_"),
                (
                    "CREATE TABLE f (x REFERENCES _burrow_queue (id) ON DELETE CASCADE)",
                    "_burrow_queue",
                ),
                ("CREATE TABLE json_each (value)", "json_each"),
                (
                    "CREATE TEMP TABLE j (value); ALTER TABLE temp.j RENAME TO JSON_TREE",
                    "JSON_TREE",
                ),
                (
                    "CREATE VIEW pragma_foreign_key_list AS SELECT 1",
                    "pragma_foreign_key_list",
                ),
                (
                    "CREATE TABLE g (x); ALTER TABLE g ADD COLUMN y REFERENCES _Burrow_State",
                    "_Burrow_State",
                ),
            ] {
                match batch(&mut state, sql) {
                    Err(DbError::Denied(why)) => assert!(why.contains(what), "{sql}: {why}"),
                    other => panic!("{sql}: {other:?}"),
                }
            }
            assert_eq!(objects(&state, "main"), main_before);
            assert!(objects(&state, "temp").is_empty());
            // The statements before each refused one stand; the refused one left nothing.
            let kept: Vec<String> = state
                .db
                .conn
                .prepare("SELECT name FROM sqlite_temp_schema UNION ALL SELECT name FROM main.sqlite_schema WHERE name IN ('x', 'y', 'f', 'g')")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(kept, ["x", "j", "y", "g"]);
            // The call's transaction is still open and usable.
            assert!(!state.db.conn.is_autocommit());
            batch(
                &mut state,
                "CREATE TABLE after (v); INSERT INTO after VALUES (1)",
            )
            .unwrap();
        }

        #[test]
        fn a_schema_change_sent_twice_through_the_cache_is_checked_twice() {
            use crate::bindings::db::Value;
            let (mut state, _dir) = instance();
            batch(&mut state, "CREATE TABLE c (v)").unwrap();
            for _ in 0..3 {
                let e = state
                    .execute(
                        "ALTER TABLE c RENAME TO _burrow_c".into(),
                        Vec::<Value>::new(),
                    )
                    .unwrap();
                assert!(
                    matches!(&e, Err(DbError::Denied(m)) if m.contains("_burrow_c")),
                    "{e:?}"
                );
            }
            // A harmless schema change through the same path works, every time.
            for n in 0..3 {
                let sql = format!("ALTER TABLE c ADD COLUMN x{n}");
                state.execute(sql, vec![]).unwrap().unwrap();
            }
        }

        #[test]
        fn sqlite_sequence_is_read_only_but_drop_table_still_clears_it() {
            let (mut state, _dir) = instance();
            batch(
                &mut state,
                "CREATE TABLE a (id INTEGER PRIMARY KEY AUTOINCREMENT); INSERT INTO a DEFAULT VALUES;
                 SELECT * FROM sqlite_sequence; ALTER TABLE a RENAME TO a2; DROP TABLE a2;",
            )
            .unwrap();
            for sql in [
                "UPDATE sqlite_sequence SET seq = 9223372036854775807 WHERE name = '_burrow_queue'",
                "INSERT INTO sqlite_sequence VALUES ('_burrow_schedule', 9223372036854775807)",
                "DELETE FROM sqlite_sequence WHERE name = '_burrow_queue'",
                "CREATE TABLE b (x); DROP TABLE b; DELETE FROM sqlite_sequence;",
                "CREATE TABLE c (x); ALTER TABLE c RENAME TO d; UPDATE sqlite_sequence SET seq = 0;",
            ] {
                match batch(&mut state, sql) {
                    Err(DbError::Denied(why)) => {
                        assert!(why.contains("sqlite_sequence"), "{sql}: {why}")
                    }
                    other => panic!("{sql}: {other:?}"),
                }
            }
        }

        #[test]
        fn a_failing_schema_change_keeps_its_error() {
            let (mut state, _dir) = instance();
            let e = batch(&mut state, "CREATE TABLE t (v); CREATE TABLE t (v)").unwrap_err();
            assert!(
                matches!(&e, DbError::Other(m) | DbError::InvalidSql(m) if m.contains("already exists")),
                "{e:?}"
            );
            assert!(!state.db.conn.is_autocommit());
        }
    }

    /// Every host statement on an instance database names `main.`, so that
    /// no object a guest makes in `temp` can shadow the host's tables.
    /// (`ON` of `CREATE INDEX` and `INDEXED BY` take no schema; the
    /// database `host.sqlite` of `storage/index.rs` has no guest.)
    #[test]
    fn host_sql_names_the_main_schema() {
        fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    sources(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(path);
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&root, &mut files);
        let mut unqualified = Vec::new();
        for file in files {
            if file.ends_with("storage/index.rs") || file.ends_with("storage/sandbox.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            // Tests and guest inputs come after `#[cfg(test)]`.
            let code = text.split("#[cfg(test)]").next().unwrap();
            let words: Vec<&str> = code
                .split(|c: char| c.is_whitespace() || c == '"' || c == '(' || c == ',')
                .filter(|w| !w.is_empty())
                .collect();
            for pair in words.windows(2) {
                let (keyword, name) = (pair[0].to_ascii_uppercase(), pair[1]);
                let names_table = ["FROM", "INTO", "UPDATE", "JOIN", "EXISTS", "TABLE"]
                    .contains(&keyword.as_str());
                let internal = is_internal(name) || name.starts_with("sqlite_");
                if names_table && internal {
                    unqualified.push(format!("{}: {keyword} {name}", file.display()));
                }
            }
            if code.contains("sqlite_master") {
                unqualified.push(format!("{}: sqlite_master", file.display()));
            }
        }
        assert!(
            unqualified.is_empty(),
            "host SQL without `main.`: {unqualified:#?}"
        );
    }

    /// With a table of every internal name in `temp` (with triggers that
    /// record any write), the host's statements still use `main`'s tables.
    #[test]
    fn host_statements_never_meet_objects_in_temp() {
        use crate::config::Synchronous;
        use crate::deadline::Deadline;
        use crate::storage::instance_db::InstanceDb;
        use crate::storage::{queue, schedule, workflow};

        let dir = tempfile::tempdir().unwrap();
        let db = InstanceDb::open(
            &dir.path().join("i.sqlite"),
            Synchronous::Normal,
            1 << 30,
            Deadline::default(),
        )
        .unwrap();
        let conn = &db.conn;
        db.create_schema().unwrap();
        db.record_creation("a", "k", 1).unwrap();
        db.ensure_queue_schema().unwrap();
        db.ensure_workflow_schema().unwrap();
        conn.execute_batch(schedule::SCHEMA).unwrap();
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM main.sqlite_schema WHERE type = 'table' AND name LIKE '\\_burrow\\_%' ESCAPE '\\'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(tables.len(), 8, "{tables:?}");
        conn.execute_batch("CREATE TEMP TABLE fired (what)")
            .unwrap();
        for table in &tables {
            conn.execute_batch(&format!(
                "CREATE TEMP TABLE {table} AS SELECT * FROM main.{table} WHERE 0;
                 CREATE TEMP TRIGGER {table}_i AFTER INSERT ON {table} BEGIN INSERT INTO fired VALUES ('{table}'); END;
                 CREATE TEMP TRIGGER {table}_u AFTER UPDATE ON {table} BEGIN INSERT INTO fired VALUES ('{table}'); END;
                 CREATE TEMP TRIGGER {table}_d AFTER DELETE ON {table} BEGIN INSERT INTO fired VALUES ('{table}'); END;"
            ))
            .unwrap();
        }

        db.write_state(b"{}").unwrap();
        assert_eq!(db.read_state().unwrap().as_deref(), Some(&b"{}"[..]));
        assert_eq!(db.created_at().unwrap(), Some(1));
        let event = crate::storage::queue::NewEvent {
            event_type: "e".into(),
            payload: "null".into(),
            priority: 0,
            group: None,
        };
        let first = queue::append(conn, &event, 10, 100).unwrap();
        let second = queue::append(conn, &event, 10, 100).unwrap();
        assert_eq!(queue::pending_count(conn).unwrap(), 2);
        assert_eq!(queue::next_due(conn).unwrap(), Some(0));
        assert_eq!(queue::pending(conn, 10).unwrap().len(), 2);
        assert_eq!(
            queue::record_failure(conn, first, "no", 11, 1, |_| 0).unwrap(),
            queue::AfterFailure::DeadLettered
        );
        assert_eq!(queue::dead_letters(conn, 10).unwrap().len(), 1);
        assert!(queue::requeue(conn, first).unwrap());
        queue::delete(conn, second).unwrap();
        assert_eq!(queue::pending_count(conn).unwrap(), 1);
        let id = schedule::add(conn, "go", "[]", 5, None, 1, 100).unwrap();
        assert_eq!(schedule::pending(conn).unwrap().len(), 1);
        let due = schedule::next_due(conn, 6)
            .unwrap()
            .expect("a due schedule");
        assert_eq!(due.id, id);
        schedule::done(conn, &due, 6).unwrap();
        assert_eq!(schedule::earliest(conn).unwrap(), None);
        workflow::start(conn, "{}", 1).unwrap();
        assert!(workflow::record(conn).unwrap().is_some());
        workflow::set_status(
            conn,
            workflow::WorkflowStatus::Completed,
            Some("1"),
            None,
            None,
            2,
        )
        .unwrap();
        let entry = workflow::HistoryEntry {
            location: "0".into(),
            kind: workflow::EntryKind::Step,
            name: "s".into(),
            status: workflow::EntryStatus::Done,
            output: Some("1".into()),
            failure_kind: None,
            error_code: None,
            error: None,
            attempts: 1,
            wake_at: None,
            updated_at: 2,
        };
        workflow::put_entry(conn, &entry).unwrap();
        workflow::put_entry(conn, &entry).unwrap();
        assert!(workflow::entry(conn, "0").unwrap().is_some());
        assert_eq!(workflow::history(conn, 10).unwrap().len(), 1);
        assert_eq!(workflow::delete_under(conn, "0", None).unwrap(), 1);
        assert_eq!(workflow::history_len(conn).unwrap(), 0);

        let fired: i64 = conn
            .query_row("SELECT count(*) FROM temp.fired", [], |r| r.get(0))
            .unwrap();
        assert_eq!(fired, 0, "a host statement wrote a table in temp");
        for table in &tables {
            let n: i64 = conn
                .query_row(&format!("SELECT count(*) FROM temp.{table}"), [], |r| {
                    r.get(0)
                })
                .unwrap();
            assert_eq!(n, 0, "temp.{table}");
        }
    }
}
