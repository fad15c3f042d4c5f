//! The SQLite authorizer that fences guest SQL.
//!
//! The authorizer is installed once per connection and consulted while a
//! statement is prepared (and re-prepared after a schema change). It applies
//! its rules only while guest SQL is being run ([`Sandbox::enter_guest`]);
//! the host's own statements on `_burrow_*` tables pass untouched.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};

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
        self.guest.store(true, Ordering::Relaxed);
        GuestSql(self)
    }

    /// Why the last guest statement was refused, if it was.
    pub(crate) fn take_denial(&self) -> Option<String> {
        self.last_denial.lock().unwrap().take()
    }

    fn authorize(&self, ctx: AuthContext<'_>) -> Authorization {
        if !self.guest.load(Ordering::Relaxed) {
            return Authorization::Allow;
        }
        match refusal(&ctx.action) {
            None => Authorization::Allow,
            Some(reason) => {
                *self.last_denial.lock().unwrap() = Some(reason);
                Authorization::Deny
            }
        }
    }
}

fn is_internal(table: &str) -> bool {
    table.len() >= INTERNAL_PREFIX.len()
        && table[..INTERNAL_PREFIX.len()].eq_ignore_ascii_case(INTERNAL_PREFIX)
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
}
