//! The tables SQLite keeps by itself in an instance's database: the
//! host's `AUTOINCREMENT` counters in `sqlite_sequence`, the planner's
//! statistics (`sqlite_stat1`, `sqlite_stat4`), the `dbstat` view of every
//! table's pages and the shadow tables of FTS5 and R*Tree. A guest reads
//! its own part of them; nothing it writes, directly or through SQLite's
//! own upkeep (a `DROP TABLE` whose foreign-key cascade fires a trigger),
//! reaches the host's part.

use serde_json::{Value, json};

use crate::support::*;

async fn batch(host: &burrow::Host, key: &str, text: &str) -> Value {
    call(host, "probe", key, "batch", &json!([text]).to_string()).await
}

async fn sql(host: &burrow::Host, key: &str, text: &str) -> Value {
    call(host, "probe", key, "sql", &json!([text, []]).to_string()).await
}

/// The error of a probe's `batch` or `sql` outcome, or a panic naming
/// `attack` if it succeeded.
fn error_of<'a>(outcome: &'a Value, attack: &str) -> &'a str {
    outcome["error"]
        .as_str()
        .or(outcome.as_str())
        .unwrap_or_else(|| panic!("`{attack}` was allowed: {outcome}"))
}

/// Asserts that `outcome` is a `denied` error that names `what`.
fn assert_denied(outcome: &Value, what: &str, attack: &str) {
    let error = error_of(outcome, attack);
    assert!(
        error.contains("Denied") && error.to_lowercase().contains(&what.to_lowercase()),
        "`{attack}` is not a denial naming `{what}`: {error}"
    );
}

/// The host's counter of `_burrow_schedule`, as the guest reads it.
async fn schedule_counter(host: &burrow::Host, key: &str) -> Value {
    sql(
        host,
        key,
        "SELECT seq FROM sqlite_sequence WHERE name = '_burrow_schedule'",
    )
    .await["rows"]
        .clone()
}

async fn schedule(host: &burrow::Host, key: &str) -> u64 {
    let id = call(host, "probe", key, "later", r#"[600000, "bump", []]"#).await;
    id.as_u64()
        .unwrap_or_else(|| panic!("no schedule id: {id}"))
}

/// A trigger fired by the foreign-key cascade of a `DROP TABLE`, which
/// SQLite prepares while it lets the drop keep `sqlite_sequence`.
fn cascade_into(body: &str) -> String {
    format!(
        "CREATE TABLE x (id INTEGER PRIMARY KEY);
         CREATE TABLE y (xid REFERENCES x (id) ON DELETE CASCADE);
         CREATE TRIGGER ty AFTER DELETE ON y BEGIN {body}; END;
         INSERT INTO x VALUES (1); INSERT INTO y VALUES (1);
         DROP TABLE x;"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_drop_cannot_rewrite_or_empty_the_hosts_counters() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    let key = "k";
    let first = schedule(&host, key).await;
    let counter = schedule_counter(&host, key).await;
    assert_eq!(counter, json!([[first]]));
    // A counter of the guest's own, which a forged rename would give the
    // host's name.
    let own = batch(
        &host,
        key,
        "CREATE TABLE z (id INTEGER PRIMARY KEY AUTOINCREMENT); INSERT INTO z DEFAULT VALUES;",
    )
    .await;
    assert_eq!(own, Value::Null, "{own}");
    for body in [
        "UPDATE sqlite_sequence SET seq = 9223372036854775000",
        "DELETE FROM sqlite_sequence",
        "UPDATE sqlite_sequence SET name = '_burrow_schedule', seq = 0 WHERE name = 'z'",
    ] {
        let attack = cascade_into(body);
        let outcome = batch(&host, key, &attack).await;
        assert_denied(&outcome, "sqlite_sequence", &attack);
        assert_eq!(schedule_counter(&host, key).await, counter, "{attack}");
        // The refused drop left its tables; the next attack makes them anew.
        batch(&host, key, "DROP TABLE y; DROP TABLE x").await;
    }
    // The host's next id follows its last one.
    assert_eq!(schedule(&host, key).await, first + 1);
    // SQLite's own upkeep of the guest's counters still works: a rename
    // renames the guest table's row, a drop deletes it, also with a
    // cascade whose trigger writes the guest's own tables.
    let own = batch(
        &host,
        key,
        "CREATE TABLE a (id INTEGER PRIMARY KEY AUTOINCREMENT); INSERT INTO a DEFAULT VALUES;
         ALTER TABLE a RENAME TO a2;
         CREATE TABLE log (n);
         CREATE TABLE b (id INTEGER PRIMARY KEY);
         CREATE TABLE c (bid REFERENCES b (id) ON DELETE CASCADE);
         CREATE TRIGGER tc AFTER DELETE ON c BEGIN INSERT INTO log VALUES (1); END;
         INSERT INTO b VALUES (1); INSERT INTO c VALUES (1);
         DROP TABLE b;",
    )
    .await;
    assert_eq!(own, Value::Null, "{own}");
    let rows = sql(&host, key, "SELECT name FROM sqlite_sequence ORDER BY name").await;
    assert_eq!(rows["rows"], json!([["_burrow_schedule"], ["a2"], ["z"]]));
    let logged = sql(&host, key, "SELECT count(*) FROM log").await;
    assert_eq!(logged["rows"], json!([[1]]));
    batch(&host, key, "DROP TABLE a2; DROP TABLE z").await;
    let rows = sql(&host, key, "SELECT name FROM sqlite_sequence ORDER BY name").await;
    assert_eq!(rows["rows"], json!([["_burrow_schedule"]]));
    host.shutdown().await;
}

/// Rows of the statistics tables that name a host object.
async fn host_statistics(host: &burrow::Host, key: &str) -> Value {
    sql(
        host,
        key,
        "SELECT tbl, idx FROM sqlite_stat1
         WHERE lower(substr(tbl, 1, 8)) = '_burrow_' OR lower(substr(idx, 1, 8)) = '_burrow_'",
    )
    .await["rows"]
        .clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_planners_statistics_of_host_tables_are_out_of_reach() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    let key = "k";
    schedule(&host, key).await;
    // A guest analyzes its own tables, by name.
    let analyzed = batch(
        &host,
        key,
        "CREATE TABLE t (a, b); CREATE INDEX ta ON t (a);
         WITH RECURSIVE n(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM n WHERE v < 100)
         INSERT INTO t SELECT v, v % 7 FROM n;
         ANALYZE t;",
    )
    .await;
    assert_eq!(analyzed, Value::Null, "{analyzed}");
    let stats = sql(
        &host,
        key,
        "SELECT tbl, idx FROM sqlite_stat1 ORDER BY 1, 2",
    )
    .await;
    assert_eq!(stats["rows"], json!([["t", "ta"]]), "{stats}");
    for attack in [
        "INSERT INTO sqlite_stat1 (tbl, idx, stat) SELECT tbl_name, name, '1000000000 1000000000'
         FROM sqlite_schema WHERE name LIKE '%burrow%'",
        "UPDATE sqlite_stat1 SET tbl = '_burrow_schedule', idx = NULL",
    ] {
        assert_denied(&batch(&host, key, attack).await, "sqlite_stat1", attack);
    }
    // ANALYZE of the whole database would analyze the host's tables.
    assert_denied(&batch(&host, key, "ANALYZE").await, "ANALYZE", "ANALYZE");
    assert_denied(
        &batch(&host, key, "ANALYZE main").await,
        "ANALYZE",
        "ANALYZE main",
    );
    // Inside the upkeep of a drop, a cascade's trigger may not write them
    // either.
    let attack = cascade_into("UPDATE sqlite_stat1 SET tbl = '_burrow_schedule'");
    assert_denied(&batch(&host, key, &attack).await, "sqlite_stat1", &attack);
    batch(&host, key, "DROP TABLE y; DROP TABLE x").await;
    assert_eq!(host_statistics(&host, key).await, json!([]));
    // SQLite's own upkeep of the guest's rows still works.
    for upkeep in [
        "ALTER TABLE t RENAME TO t2",
        "DROP INDEX ta",
        "ANALYZE t2",
        "DROP TABLE t2",
    ] {
        assert_eq!(batch(&host, key, upkeep).await, Value::Null, "{upkeep}");
    }
    let stats = sql(&host, key, "SELECT count(*) FROM sqlite_stat1").await;
    assert_eq!(stats["rows"], json!([[0]]), "{stats}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dbstat_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    let key = "k";
    schedule(&host, key).await;
    for attack in [
        "SELECT name FROM dbstat WHERE name LIKE '%burrow%'",
        "SELECT name, pgsize FROM DBSTAT('main')",
    ] {
        assert_denied(&sql(&host, key, attack).await, "dbstat", attack);
    }
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shadow_tables_of_fts5_and_rtree_cannot_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    let key = "k";
    let made = batch(
        &host,
        key,
        "CREATE VIRTUAL TABLE f2 USING fts5 (body);
         INSERT INTO f2 VALUES ('hello world'), ('goodbye');
         CREATE VIRTUAL TABLE r USING rtree (id, x0, x1);
         INSERT INTO r VALUES (1, 0, 1);",
    )
    .await;
    assert_eq!(made, Value::Null, "{made}");
    for attack in [
        "UPDATE f2_data SET block = randomblob(64)",
        "DELETE FROM f2_idx",
        "INSERT INTO f2_content VALUES (99, 'forged')",
        "UPDATE r_node SET data = randomblob(48)",
        "DELETE FROM r_rowid",
    ] {
        let outcome = batch(&host, key, attack).await;
        let error = error_of(&outcome, attack);
        assert!(error.contains("may not be modified"), "{attack}: {error}");
    }
    // Their own indexes are intact and answer.
    let found = sql(&host, key, "SELECT body FROM f2 WHERE f2 MATCH 'hello'").await;
    assert_eq!(found["rows"], json!([["hello world"]]), "{found}");
    let found = sql(&host, key, "SELECT id FROM r WHERE x0 <= 0.5 AND x1 >= 0.5").await;
    assert_eq!(found["rows"], json!([[1]]), "{found}");
    // Reading them is fine, as is the index's own upkeep.
    let read = sql(&host, key, "SELECT count(*) FROM f2_content").await;
    assert_eq!(read["rows"], json!([[2]]), "{read}");
    let kept = batch(
        &host,
        key,
        "DELETE FROM f2 WHERE body = 'goodbye'; INSERT INTO f2 (f2) VALUES ('optimize');
         DROP TABLE f2; DROP TABLE r;",
    )
    .await;
    assert_eq!(kept, Value::Null, "{kept}");
    host.shutdown().await;
}
