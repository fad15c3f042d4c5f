//! The authorizer's rules: what each action of a guest statement may do,
//! decided from the names SQLite shows while the statement is prepared.
//! Guest SQL reaches only its own tables, indexes, triggers and views,
//! harmless pragmas and functions, and the virtual table modules listed
//! here; a statement the authorizer is never asked about (`VACUUM`) is
//! refused before it is prepared.

use rusqlite::hooks::AuthAction;

use super::names::{INTERNAL_PREFIX, is_internal};

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

/// Built-in virtual tables a guest may not read: they show every table of
/// the database page by page, the host's included.
const DENIED_VTABLES: &[&str] = &["dbstat", "sqlite_dbpage"];

/// Which of SQLite's own upkeep a guest statement being prepared does:
/// a `DROP TABLE` or `ALTER TABLE` deletes or renames the table's row of
/// `sqlite_sequence` in a statement of its own.
pub(super) fn keeps_sequence(action: &AuthAction<'_>) -> bool {
    matches!(
        action,
        AuthAction::DropTable { .. }
            | AuthAction::DropTempTable { .. }
            | AuthAction::AlterTable { .. }
    )
}

/// Whether `table` is one of SQLite's statistics tables, which `ANALYZE`
/// fills and the query planner reads for every statement, the host's
/// included.
fn is_statistics(table: &str) -> bool {
    [
        "sqlite_stat1",
        "sqlite_stat2",
        "sqlite_stat3",
        "sqlite_stat4",
    ]
    .iter()
    .any(|t| table.eq_ignore_ascii_case(t))
}

/// Why `action` on a table SQLite keeps by itself is refused, if it is.
///
/// `sqlite_sequence` holds the host's `AUTOINCREMENT` counters too: a
/// guest that set them could make the host reuse event ids or run out of
/// them. A guest reads it; only SQLite's own upkeep for a `DROP TABLE` or
/// an `ALTER TABLE` (`keeping_sequence`: the statement being prepared is
/// one) writes it, and the statement's [`SchemaGuard`](super::SchemaGuard)
/// then checks that the host's rows are as they were: a trigger that such
/// a statement fires (a foreign key's cascade) is prepared inside the same
/// window.
///
/// The statistics tables steer the planner of the host's statements as
/// well as the guest's: a guest reads them and deletes rows of them (as
/// SQLite's upkeep does for a drop and for `ANALYZE`, before the statement
/// shows what it is), and only `ANALYZE` of its own tables adds rows.
pub(super) fn upkeep_refusal(action: &AuthAction<'_>, keeping_sequence: bool) -> Option<String> {
    let (table, allowed) = match *action {
        AuthAction::Insert { table_name } => (table_name, false),
        AuthAction::Update { table_name, .. } if is_statistics(table_name) => (table_name, false),
        AuthAction::Update { table_name, .. } | AuthAction::Delete { table_name }
            if table_name.eq_ignore_ascii_case("sqlite_sequence") =>
        {
            (table_name, keeping_sequence)
        }
        _ => return None,
    };
    if allowed {
        None
    } else if table.eq_ignore_ascii_case("sqlite_sequence") {
        Some("sqlite_sequence is read-only to guest SQL: it holds the host's counters too".into())
    } else if is_statistics(table) {
        Some(format!(
            "{table} is read-only to guest SQL: the query planner reads it for the host's \
             statements too (ANALYZE your own tables, by name, to fill it)"
        ))
    } else {
        None
    }
}

/// Whether `action` is part of a statement that changes the schema.
pub(super) fn changes_schema(action: &AuthAction<'_>) -> bool {
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
            | Analyze { .. }
    )
}

/// Why `action` is refused to guest SQL, or `None` if it is allowed.
pub fn refusal(action: &AuthAction<'_>) -> Option<String> {
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
    if let Analyze { table_name } = *action
        && is_internal(table_name)
    {
        return Some(format!(
            "ANALYZE would analyze `{table_name}`, an internal table of the host: analyze your \
             own tables by name (`ANALYZE t`)"
        ));
    }
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
    if let Savepoint { savepoint_name, .. } = *action
        && is_internal(savepoint_name)
    {
        return Some(format!(
            "`{savepoint_name}` is a savepoint of the host; savepoints named `{INTERNAL_PREFIX}*` are off limits"
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
        Read { table_name, .. }
            if DENIED_VTABLES
                .iter()
                .any(|t| table_name.eq_ignore_ascii_case(t)) =>
        {
            Some(format!(
                "`{table_name}` is not available to guest SQL: it shows the host's tables too"
            ))
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
pub fn refuse_statement(sql: &str) -> Option<String> {
    let sql = skip_comments(sql);
    let keyword = &sql[..sql
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(sql.len())];
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
    use crate::sandbox::tests::guest_conn;

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
        // The host's savepoints end calls of a batch: a guest that released
        // or rolled back to one would reach its neighbours' writes.
        for sql in [
            "RELEASE _burrow_call",
            "ROLLBACK TO _BURROW_call",
            "SAVEPOINT _burrow_schema_guard",
        ] {
            assert!(denial(sql).contains("savepoint of the host"), "{sql}");
        }
        assert!(denial("PRAGMA synchronous = OFF").contains("PRAGMA synchronous"));
        assert!(denial("PRAGMA journal_mode = DELETE").contains("journal_mode"));
        assert!(denial("PRAGMA writable_schema = ON").contains("writable_schema"));
        assert!(denial("SELECT load_extension('x')").contains("load_extension"));
        assert!(denial("SELECT * FROM dbstat").contains("dbstat"));
        assert!(denial("SELECT * FROM DBSTAT('main')").contains("dbstat"));
        assert!(denial("ANALYZE").contains("analyze your own tables by name"));
    }

    #[test]
    fn the_planners_statistics_are_filled_by_analyze_alone() {
        let (conn, sandbox) = guest_conn();
        let _guest = sandbox.enter_guest();
        conn.execute_batch(
            "INSERT INTO t VALUES (1); ANALYZE t; SELECT * FROM sqlite_stat1;
             DELETE FROM sqlite_stat1 WHERE tbl = 't'; ANALYZE t;",
        )
        .unwrap();
        for sql in [
            "INSERT INTO sqlite_stat1 VALUES ('_burrow_state', NULL, '1')",
            "UPDATE sqlite_stat1 SET tbl = '_burrow_state'",
            "UPDATE SQLITE_STAT1 SET stat = '1'",
        ] {
            assert!(conn.execute_batch(sql).is_err(), "{sql}");
            let why = sandbox.take_denial().expect("a reason is recorded");
            assert!(why.to_lowercase().contains("sqlite_stat1"), "{sql}: {why}");
        }
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
        for sql in [
            "VACUUM",
            "VACUUM;",
            "  vacuum into '/tmp/x'",
            "-- hi\n/* x */ Vacuum",
        ] {
            assert!(refuse_statement(sql).is_some(), "{sql}");
        }
        for sql in [
            "SELECT 'VACUUM'",
            "INSERT INTO vacuums VALUES (1)",
            "-- VACUUM\nSELECT 1",
            "VACUUMS",
            "",
        ] {
            assert!(refuse_statement(sql).is_none(), "{sql}");
        }
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
}
