//! Arbitrary sequences of the host's import calls (db, state, queue, log)
//! and transaction boundaries, as a hostile guest would make them. The
//! session checks the host's invariants after every call.

#![no_main]

use arbitrary::Arbitrary;
use burrow::fuzzing::{FuzzValue, ImportCall, ImportSession};
use libfuzzer_sys::fuzz_target;

/// SQL pieces that reach deeper than random text: internal tables,
/// transaction control, pragmas, schema changes.
const FRAGMENTS: &[&str] = &[
    "SELECT",
    "INSERT INTO",
    "UPDATE",
    "DELETE FROM",
    "CREATE TABLE",
    "DROP TABLE",
    "CREATE TRIGGER",
    "CREATE VIEW",
    "ALTER TABLE",
    "PRAGMA",
    "ATTACH",
    "DETACH",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT",
    "RELEASE",
    "VACUUM",
    "REINDEX",
    "ANALYZE",
    "WITH RECURSIVE",
    "_burrow_instance",
    "_burrow_state",
    "_burrow_queue",
    "_burrow_dead_letter",
    "sqlite_master",
    "sqlite_sequence",
    "t",
    "x",
    "(",
    ")",
    ",",
    ";",
    "*",
    "?",
    "?1",
    "VALUES",
    "SET",
    "WHERE",
    "FROM",
    "AS",
    "load_extension",
    "writable_schema",
    "journal_mode",
    "synchronous",
    "max_page_count",
    "=",
    "1",
    "'a'",
    "zeroblob(100000)",
    "randomblob(1000)",
    "json_each",
    "fts5",
    "USING",
    "VIRTUAL",
];

#[derive(Debug, Arbitrary)]
enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

#[derive(Debug, Arbitrary)]
enum Sql {
    Raw(String),
    Pieces(Vec<u8>),
}

impl Sql {
    fn text(self) -> String {
        match self {
            Sql::Raw(text) => text,
            Sql::Pieces(indexes) => indexes
                .iter()
                .map(|i| FRAGMENTS[*i as usize % FRAGMENTS.len()])
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Call {
    Execute(Sql, Vec<Value>),
    ExecuteBatch(Sql),
    StateGet,
    StateSet(Vec<u8>),
    Append(String, String, i32, Option<String>),
    Log(u8, String),
    SetMode(u8),
    Commit,
    Rollback,
}

fuzz_target!(|calls: Vec<Call>| {
    let mut session = ImportSession::new();
    for call in calls.into_iter().take(64) {
        let call = match call {
            Call::Execute(sql, params) => ImportCall::Execute(
                sql.text(),
                params
                    .into_iter()
                    .map(|v| match v {
                        Value::Null => FuzzValue::Null,
                        Value::Integer(i) => FuzzValue::Integer(i),
                        Value::Real(r) => FuzzValue::Real(r),
                        Value::Text(t) => FuzzValue::Text(t),
                        Value::Blob(b) => FuzzValue::Blob(b),
                    })
                    .collect(),
            ),
            Call::ExecuteBatch(sql) => ImportCall::ExecuteBatch(sql.text()),
            Call::StateGet => ImportCall::StateGet,
            Call::StateSet(bytes) => ImportCall::StateSet(bytes),
            Call::Append(event_type, payload, priority, group) => ImportCall::Append {
                event_type,
                payload,
                priority,
                group,
            },
            Call::Log(level, message) => ImportCall::Log(level, message),
            Call::SetMode(mode) => ImportCall::SetMode(mode),
            Call::Commit => ImportCall::Commit,
            Call::Rollback => ImportCall::Rollback,
        };
        session.apply(call);
    }
});
