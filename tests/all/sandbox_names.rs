//! Internal `_burrow_*` names belong to the host, in `main` and `temp`: a
//! guest cannot make an object with such a name (directly, by a rename, as
//! an index, a trigger, a view or a virtual table's shadow table), nor point
//! a foreign key at one, so no host statement meets a guest's object and no
//! guest trigger runs inside a host statement. Renames between guest names
//! keep working.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

async fn batch(host: &burrow::Host, key: &str, text: &str) -> Value {
    call(host, "probe", key, "batch", &json!([text]).to_string()).await
}

async fn sql(host: &burrow::Host, key: &str, text: &str) -> Value {
    call(host, "probe", key, "sql", &json!([text, []]).to_string()).await
}

/// Why `outcome` (a probe's `batch` or `sql` result) is not a `denied`
/// error that names `what`, if it is not.
fn not_denied(outcome: &Value, what: &str, attack: &str) -> Option<String> {
    let Some(error) = outcome["error"].as_str().or(outcome.as_str()) else {
        return Some(format!("`{attack}` was allowed: {outcome}"));
    };
    let named = error.to_lowercase().contains(&what.to_lowercase());
    (!error.contains("Denied") || !named)
        .then(|| format!("`{attack}` is not a denial naming `{what}`: {error}"))
}

/// Asserts that `outcome` is a `denied` error that names `what`.
fn assert_denied(outcome: &Value, what: &str, attack: &str) {
    if let Some(why) = not_denied(outcome, what, attack) {
        panic!("{why}");
    }
}

/// Names of objects in `schema` whose name or table starts with `_burrow_`,
/// as the guest sees them.
async fn internal_objects(host: &burrow::Host, key: &str, schema: &str) -> Value {
    let text = format!(
        "SELECT type || ' ' || name || ' on ' || tbl_name FROM {schema}.sqlite_schema
         WHERE lower(substr(name, 1, 8)) = '_burrow_' OR lower(substr(tbl_name, 1, 8)) = '_burrow_'
         ORDER BY 1"
    );
    sql(host, key, &text).await["rows"].clone()
}

async fn state_value(host: &burrow::Host, key: &str) -> Value {
    call(host, "probe", key, "state_value", "[]").await
}

const FORGE_STATE: &str = "CREATE TEMP TABLE x (id INTEGER PRIMARY KEY, value BLOB NOT NULL);
     INSERT INTO x VALUES (1, X'7b2276616c7565223a313030307d');
     ALTER TABLE temp.x RENAME TO _burrow_state;";

#[tokio::test(flavor = "multi_thread")]
async fn a_temp_table_renamed_to_the_state_table_forges_nothing_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    assert_eq!(call(&host, "probe", "k", "bump", "[]").await, 1);
    let attack = batch(&host, "k", FORGE_STATE).await;
    // The guest reads the host's value, not its own ({"value": 1000}).
    assert_eq!(state_value(&host, "k").await, 1);
    // The acknowledged write lands in the host's table: inspect (another
    // connection) sees it, and so does the instance after a restart.
    assert_eq!(call(&host, "probe", "k", "bump", "[]").await, 2);
    assert_eq!(
        host.inspect("probe", "k").unwrap().state,
        json!({"value": 2})
    );
    assert_denied(&attack, "_burrow_state", FORGE_STATE);
    let host = restart(host, &[probe()]).await;
    assert_eq!(state_value(&host, "k").await, 2);
    assert_eq!(internal_objects(&host, "k", "temp").await, json!([]));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn no_guest_statement_makes_an_object_with_an_internal_name() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    call(&host, "probe", "k", "bump", "[]").await;
    let main_before = internal_objects(&host, "k", "main").await;
    let attacks = [
        // Renames into internal names, in main and temp, in any case; the
        // first is a table the host makes only at the first schedule.
        (
            "CREATE TABLE a1 (id INTEGER PRIMARY KEY, value BLOB NOT NULL);
             ALTER TABLE a1 RENAME TO _burrow_schedule;",
            "_burrow_schedule",
        ),
        // A guest that would pause its own background work.
        (
            "CREATE TABLE _burrow_pause (id INTEGER PRIMARY KEY, since INTEGER, reason TEXT)",
            "_burrow_pause",
        ),
        (
            "CREATE TABLE a0 (id INTEGER PRIMARY KEY, since INTEGER, reason TEXT);
             ALTER TABLE a0 RENAME TO _Burrow_Pause;",
            "_burrow_pause",
        ),
        (
            "CREATE TABLE a2 (x); ALTER TABLE main.a2 RENAME TO _BURROW_Mine;",
            "_burrow_mine",
        ),
        (
            "CREATE TEMP TABLE a3 (x); ALTER TABLE temp.a3 RENAME TO \"_Burrow_instance\";",
            "_burrow_instance",
        ),
        // A table with a trigger renamed into an internal name.
        (
            "CREATE TABLE a4 (x); CREATE TRIGGER a4_t AFTER DELETE ON a4 BEGIN SELECT 1; END;
             ALTER TABLE a4 RENAME TO _burrow_later;",
            "_burrow_later",
        ),
        // Indexes, triggers and views named like the host's objects.
        (
            "CREATE INDEX _burrow_schedule_due ON items (name)",
            "_burrow_schedule_due",
        ),
        (
            "CREATE TEMP TABLE a5 (x); CREATE INDEX temp._burrow_i ON a5 (x);",
            "_burrow_i",
        ),
        (
            "CREATE TRIGGER _burrow_t AFTER INSERT ON items BEGIN SELECT 1; END",
            "_burrow_t",
        ),
        (
            "CREATE TEMP TRIGGER _BURROW_tt AFTER INSERT ON items BEGIN SELECT 1; END",
            "_burrow_tt",
        ),
        ("CREATE VIEW _burrow_v AS SELECT 1", "_burrow_v"),
        (
            "CREATE TEMP VIEW _burrow_state AS SELECT 1 AS id, X'00' AS value",
            "_burrow_state",
        ),
        // A virtual table whose shadow tables get internal names.
        ("CREATE VIRTUAL TABLE _burrow USING fts5 (x)", "_burrow_"),
        // Foreign keys into internal tables, however they are declared.
        (
            "CREATE TABLE f1 (x REFERENCES _burrow_state (id) ON DELETE CASCADE)",
            "_burrow_state",
        ),
        (
            "CREATE TABLE f2 (x INTEGER REFERENCES _BURROW_schedule)",
            "_burrow_schedule",
        ),
        (
            "CREATE TABLE f3 (x); ALTER TABLE f3 ADD COLUMN y REFERENCES _burrow_instance (id);",
            "_burrow_instance",
        ),
        (
            "CREATE TABLE f4 (x, FOREIGN KEY (x) REFERENCES \"_burrow_queue\" (id) ON DELETE RESTRICT)",
            "_burrow_queue",
        ),
    ];
    let mut allowed = Vec::new();
    for (attack, what) in attacks {
        allowed.extend(not_denied(&batch(&host, "k", attack).await, what, attack));
    }
    assert!(allowed.is_empty(), "{allowed:#?}");
    // One statement at a time, twice: the second run of the same text
    // (which may come from the statement cache) is refused too.
    sql(&host, "k", "CREATE TABLE c1 (x)").await;
    for _ in 0..2 {
        let attack = "ALTER TABLE c1 RENAME TO _burrow_c";
        assert_denied(&sql(&host, "k", attack).await, "_burrow_c", attack);
    }
    assert_eq!(internal_objects(&host, "k", "main").await, main_before);
    assert_eq!(internal_objects(&host, "k", "temp").await, json!([]));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn renames_between_guest_names_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    let migration = "CREATE TABLE r1 (a);
         INSERT INTO r1 VALUES (7);
         ALTER TABLE r1 RENAME TO r2;
         ALTER TABLE r2 RENAME COLUMN a TO b;
         ALTER TABLE r2 ADD COLUMN c REFERENCES items (name);
         CREATE INDEX r2_b ON r2 (b);
         CREATE TRIGGER r2_t AFTER INSERT ON r2 BEGIN SELECT 1; END;
         DROP TRIGGER r2_t;
         DROP INDEX r2_b;
         CREATE TEMP TABLE t1 (a);
         ALTER TABLE temp.t1 RENAME TO t2;
         CREATE VIEW v2 AS SELECT b FROM r2;
         CREATE VIRTUAL TABLE docs USING fts5 (body);
         ALTER TABLE docs RENAME TO documents;
         CREATE TABLE burrow_like (x);
         ALTER TABLE burrow_like RENAME TO _burrowed;";
    assert_eq!(batch(&host, "k", migration).await, Value::Null);
    assert_eq!(
        sql(&host, "k", "SELECT b FROM v2").await["rows"],
        json!([[7]])
    );
    assert_eq!(
        sql(&host, "k", "SELECT count(*) FROM documents").await["rows"],
        json!([[0]])
    );
    assert_eq!(
        sql(&host, "k", "SELECT count(*) FROM _burrowed").await["rows"],
        json!([[0]])
    );
    host.shutdown().await;
}

/// The columns of `_burrow_schedule`.
const SCHEDULE_COLUMNS: &str = "id INTEGER PRIMARY KEY AUTOINCREMENT, action TEXT NOT NULL,
     args TEXT NOT NULL, due_at INTEGER NOT NULL, created_at INTEGER NOT NULL, every_ms INTEGER";

/// Guest tables shaped like `_burrow_schedule`, renamed to it, with a
/// trigger that records that it ran: on the table itself (in main or in
/// temp), or on a table whose foreign key cascades from it.
fn schedule_decoys() -> [(&'static str, String); 3] {
    let fired = "CREATE TABLE IF NOT EXISTS fired (n);";
    [
        (
            "main",
            format!(
                "{fired} CREATE TABLE s ({SCHEDULE_COLUMNS});
                 CREATE TRIGGER s_gone AFTER DELETE ON s BEGIN INSERT INTO fired VALUES (1); END;
                 ALTER TABLE s RENAME TO _burrow_schedule;"
            ),
        ),
        (
            "temp",
            format!(
                "{fired} CREATE TEMP TABLE s ({SCHEDULE_COLUMNS});
                 CREATE TEMP TRIGGER s_gone AFTER DELETE ON s BEGIN INSERT INTO fired VALUES (1); END;
                 ALTER TABLE temp.s RENAME TO _burrow_schedule;"
            ),
        ),
        (
            "cascade",
            format!(
                "{fired} CREATE TABLE s ({SCHEDULE_COLUMNS});
                 INSERT INTO s VALUES (1, 'bump', '[]', 0, 0, NULL);
                 CREATE TABLE g (x REFERENCES s (id) ON DELETE CASCADE);
                 INSERT INTO g VALUES (1);
                 CREATE TRIGGER g_gone AFTER DELETE ON g BEGIN INSERT INTO fired VALUES (1); END;
                 ALTER TABLE s RENAME TO _burrow_schedule;"
            ),
        ),
    ]
}

async fn fired(host: &burrow::Host, key: &str) -> Value {
    sql(host, key, "SELECT count(*) FROM fired").await["rows"][0][0].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn no_guest_trigger_runs_when_the_schedule_runner_deletes_a_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    let mut failures = Vec::new();
    for (key, attack) in schedule_decoys() {
        call(&host, "probe", key, "bump", "[]").await;
        let outcome = batch(&host, key, &attack).await;
        call(&host, "probe", key, "later", r#"[0, "bump", []]"#).await;
        eventually(Duration::from_secs(10), "the schedule to run", async || {
            (state_value(&host, key).await.as_i64() >= Some(2)).then_some(())
        })
        .await;
        if fired(&host, key).await != 0 {
            failures.push(format!("{key}: a guest trigger ran in the host's DELETE"));
        }
        failures.extend(not_denied(&outcome, "_burrow_schedule", &attack));
        // The schedule ran once, and its write is durable.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let state = host.inspect("probe", key).unwrap().state;
        if state != json!({"value": 2}) {
            failures.push(format!("{key}: the state is {state}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    host.shutdown().await;
}

async fn queue_batch(host: &burrow::Host, key: &str, text: &str) -> Value {
    call(
        host,
        "queue-probe",
        key,
        "batch",
        &json!([text]).to_string(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_event_appended_after_a_queue_decoy_is_processed() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[queue_probe()]).await;
    host.create("queue-probe", "k", "{}").await.unwrap();
    let attack = "CREATE TEMP TABLE q (id INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT NOT NULL,
             payload TEXT NOT NULL, priority INTEGER NOT NULL, grp TEXT NOT NULL,
             created_at INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
             not_before INTEGER NOT NULL DEFAULT 0, last_error TEXT);
         ALTER TABLE temp.q RENAME TO _burrow_queue;";
    let outcome = queue_batch(&host, "k", attack).await;
    let fk = "CREATE TABLE g (x REFERENCES _burrow_queue (id) ON DELETE CASCADE)";
    let fk_outcome = queue_batch(&host, "k", fk).await;
    // A table named like a table-valued function of the host's queue SQL.
    let function = "CREATE TABLE json_each (value)";
    let function_outcome = queue_batch(&host, "k", function).await;
    call(
        &host,
        "queue-probe",
        "k",
        "enqueue",
        &json!([[{"type": "x"}]]).to_string(),
    )
    .await;
    // The acknowledged append is in the host's queue: the pump (another
    // connection) processes it.
    eventually(
        Duration::from_secs(10),
        "the event to be processed",
        async || {
            let log = call(&host, "queue-probe", "k", "log", "[]").await;
            (log.as_array().unwrap().len() == 1).then_some(())
        },
    )
    .await;
    assert_denied(&outcome, "_burrow_queue", attack);
    assert_denied(&fk_outcome, "_burrow_queue", fk);
    assert_denied(&function_outcome, "json_each", function);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_instance_cannot_resume_itself() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    call(&host, "probe", "k", "bump", "[]").await;
    host.fork("probe", "k", "copy").await.unwrap();
    for attack in [
        "DROP TABLE _burrow_pause",
        "DELETE FROM _burrow_pause",
        "ALTER TABLE _burrow_pause RENAME TO gone",
    ] {
        assert_denied(&batch(&host, "copy", attack).await, "_burrow_pause", attack);
    }
    assert!(host.inspect("probe", "copy").unwrap().paused.is_some());
    host.shutdown().await;
}
