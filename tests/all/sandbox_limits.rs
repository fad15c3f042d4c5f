//! What a guest cannot reach, and every limit it controls, tried from a guest.

use burrow::config::{
    MAX_QUERY_BYTES, MAX_QUERY_ROWS, MAX_SQL_BYTES, MAX_SQL_PARAMS, MAX_STATE_BYTES,
};
use serde_json::{Value, json};

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_guest_has_no_ambient_authority() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    let got = call(&host, "probe", "a", "ambient", "[]").await;
    assert_eq!(
        got,
        json!({
            "read_root": false,
            "read_cwd": false,
            "env": [],
            "args": [],
            "connect": false,
            "stdin_bytes": 0,
        })
    );
}

async fn sql_error(host: &burrow::Host, sql: String, params: Vec<Value>) -> String {
    let args = json!([sql, params]).to_string();
    let got = call(host, "probe", "l", "sql", &args).await;
    got["error"]
        .as_str()
        .unwrap_or_else(|| {
            panic!(
                "no error: {}",
                got.to_string().chars().take(200).collect::<String>()
            )
        })
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_sql_limit_names_itself_to_the_guest() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;

    let long = format!("SELECT '{}'", "x".repeat(MAX_SQL_BYTES));
    let e = sql_error(&host, long, vec![]).await;
    assert!(e.contains("LimitExceeded") && e.contains("SQL text"), "{e}");

    let e = sql_error(&host, "SELECT 1".into(), vec![json!(1); MAX_SQL_PARAMS + 1]).await;
    assert!(
        e.contains("LimitExceeded") && e.contains("parameters"),
        "{e}"
    );

    let rows = format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT {}) SELECT i FROM n",
        MAX_QUERY_ROWS + 1
    );
    let e = sql_error(&host, rows, vec![]).await;
    assert!(e.contains("LimitExceeded") && e.contains("rows"), "{e}");

    let bytes = format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT {}) SELECT zeroblob(1048576) FROM n",
        MAX_QUERY_BYTES / (1 << 20) + 1
    );
    let e = sql_error(&host, bytes, vec![]).await;
    assert!(e.contains("LimitExceeded") && e.contains("bytes"), "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_state_past_its_limit_is_refused_to_the_guest() {
    let dir = tempfile::tempdir().unwrap();
    let host = start(dir.path(), &[probe()]).await;
    call(&host, "probe", "s", "big_state", "[1000]").await;
    let err = host
        .call("probe", "s", "big_state", &format!("[{MAX_STATE_BYTES}]"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "action-failed", "{err}");
    assert!(
        err.to_string().contains(&MAX_STATE_BYTES.to_string()),
        "{err}"
    );
    let state = host.inspect("probe", "s").unwrap().state;
    assert_eq!(state.as_str().map(str::len), Some(1000));
}

#[tokio::test]
async fn an_oversized_component_is_refused_by_name() {
    let scratch = tempfile::tempdir().unwrap();
    let path = scratch.path().join("huge.wasm");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(burrow::config::MAX_COMPONENT_BYTES + 1)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spec = burrow::manifest::ActorSpec::new("huge", &path);
    let err = burrow::Host::start(config(dir.path()), &[spec])
        .await
        .err()
        .unwrap();
    let message = format!("{err:#}");
    assert!(
        message.contains("actor `huge`") && message.contains("the limit is"),
        "{message}"
    );
}
