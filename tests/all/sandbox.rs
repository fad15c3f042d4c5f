//! Guest SQL runs behind the authorizer; every refusal is a `denied` error
//! the guest sees, naming what was refused.

use serde_json::{Value, json};

use crate::support::*;

async fn sql(host: &burrow::Host, text: &str) -> Value {
    let args = serde_json::to_string(&json!([text, []])).unwrap();
    call(host, "probe", "db", "sql", &args).await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_authorizer_refuses_what_a_guest_may_not_do() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    let refusals = [
        ("SELECT * FROM _burrow_state", "internal table"),
        ("UPDATE _burrow_instance SET key = 'x'", "internal table"),
        ("DROP TABLE _burrow_state", "internal table"),
        ("ATTACH DATABASE '/tmp/elsewhere.db' AS other", "ATTACH"),
        ("PRAGMA synchronous = OFF", "PRAGMA synchronous"),
        ("PRAGMA journal_mode = DELETE", "PRAGMA journal_mode"),
        ("PRAGMA writable_schema = 1", "PRAGMA writable_schema"),
        ("SELECT load_extension('evil')", "load_extension"),
        ("COMMIT", "transaction"),
        ("VACUUM INTO '/tmp/copy.db'", "not allowed"),
    ];
    for (statement, reason) in refusals {
        let result = sql(&host, statement).await;
        let error = result["error"]
            .as_str()
            .unwrap_or_else(|| panic!("`{statement}` was allowed: {result}"));
        assert!(error.contains("Denied"), "`{statement}`: {error}");
        assert!(error.contains(reason), "`{statement}`: {error}");
    }
    // The exact text of the host's own statements gets no way around it.
    call(&host, "probe", "db", "bump", "[]").await;
    for host_statement in [
        "SELECT value FROM main._burrow_state WHERE id = 1",
        "SELECT created_at FROM main._burrow_instance WHERE id = 1",
        "BEGIN",
    ] {
        let result = sql(&host, host_statement).await;
        assert!(
            result["error"]
                .as_str()
                .is_some_and(|e| e.contains("Denied")),
            "{host_statement}: {result}"
        );
    }
    let batch = call(
        &host,
        "probe",
        "db",
        "batch",
        "[\"CREATE TABLE ok (x); DELETE FROM _burrow_state;\"]",
    )
    .await;
    assert!(
        batch["error"].as_str().unwrap().contains("internal table"),
        "{batch}"
    );
    // The batch ran in the action's transaction; its first statement is kept
    // because the action itself succeeded.
    assert_eq!(
        sql(&host, "SELECT count(*) FROM ok").await["rows"],
        json!([[0]])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn guest_sql_works_on_its_own_tables() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    let args = json!([
        "SELECT ?1 + 1 AS n, ?2 AS t, ?3 AS r, ?4 AS z",
        [41, "text", 1.5, null]
    ]);
    let result = call(&host, "probe", "db", "sql", &args.to_string()).await;
    assert_eq!(result["columns"], json!(["n", "t", "r", "z"]));
    assert_eq!(result["rows"], json!([[42, "text", 1.5, null]]));

    let wrong = json!(["SELECT ?", [1, 2]]);
    let result = call(&host, "probe", "db", "sql", &wrong.to_string()).await;
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .contains("InvalidParameters"),
        "{result}"
    );

    let syntax = sql(&host, "SELEC nonsense").await;
    assert!(
        syntax["error"].as_str().unwrap().contains("InvalidSql"),
        "{syntax}"
    );

    let dup = sql(&host, "INSERT INTO items (name) VALUES ('a'), ('a')").await;
    assert!(
        dup["error"].as_str().unwrap().contains("Constraint"),
        "{dup}"
    );
}
