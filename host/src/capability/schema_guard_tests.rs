//! The schema guard of the SQL sandbox (`burrow-storage`'s
//! `sandbox/schema_guard.rs`) as a guest meets it: through the `db`
//! import of an instance.

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
    let mut stmt = state.db().conn.prepare(&sql).unwrap();
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
            "CREATE VIRTUAL TABLE dbstat USING rtree (id, x0, x1)",
            "dbstat",
        ),
        (
            "CREATE TABLE d (v); ALTER TABLE d RENAME TO DBSTAT",
            "DBSTAT",
        ),
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
        (
            "CREATE TABLE h (x, y rEfErEnCeS \"_burrow_state\" (id))",
            "_burrow_state",
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
        .db()
        .conn
        .prepare("SELECT name FROM sqlite_temp_schema UNION ALL SELECT name FROM main.sqlite_schema WHERE name IN ('x', 'y', 'f', 'g')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(kept, ["x", "j", "y", "g"]);
    // The call's transaction is still open and usable.
    assert!(!state.db().conn.is_autocommit());
    batch(
        &mut state,
        "CREATE TABLE after (v); INSERT INTO after VALUES (1)",
    )
    .unwrap();
}

/// A foreign key into an FTS5 or R*Tree shadow table makes the module's
/// own writes to it check the key inside a statement savepoint, which
/// makes FTS5 flush into the same table again, without end: the host's
/// stack overflowed (found by the `sql` fuzz target). Whichever comes
/// first, the key or the virtual table, the second is refused.
#[test]
fn a_foreign_key_into_a_shadow_table_is_refused() {
    let (mut state, _dir) = instance();
    for (sql, what) in [
        (
            "CREATE TABLE t (a INTEGER PRIMARY KEY, q REFERENCES f_data (id) DEFERRABLE INITIALLY DEFERRED);
             CREATE VIRTUAL TABLE f USING fts5 (a, b)",
            "f_data",
        ),
        (
            "CREATE VIRTUAL TABLE g USING fts5 (a);
             CREATE TABLE u (q REFERENCES G_IDX (segid) ON DELETE RESTRICT)",
            "G_IDX",
        ),
        (
            "CREATE TEMP TABLE v (q REFERENCES h_node (nodeno));
             CREATE VIRTUAL TABLE temp.h USING rtree (id, x0, x1)",
            "h_node",
        ),
        (
            "CREATE TABLE w (q REFERENCES sqlite_sequence (name))",
            "sqlite_sequence",
        ),
    ] {
        match batch(&mut state, sql) {
            Err(DbError::Denied(why)) => assert!(why.contains(what), "{sql}: {why}"),
            other => panic!("{sql}: {other:?}"),
        }
    }
    // The virtual tables that stand work, their modules' own writes included.
    batch(
        &mut state,
        "INSERT INTO g VALUES ('hello'); INSERT INTO g(g) VALUES ('optimize');
         SAVEPOINT s; INSERT INTO g VALUES ('world'); RELEASE s;",
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
    assert!(!state.db().conn.is_autocommit());
}
