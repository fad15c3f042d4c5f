//! Arbitrary sequences of the host's import calls (db, state, queue, log,
//! workflow steps, loops, joins and queue waits, outgoing HTTP requests,
//! in any order and in every mode)
//! and transaction boundaries, as a hostile guest would make them. The
//! session checks the host's invariants after every call.

#![no_main]

use arbitrary::Arbitrary;
use burrow::fuzzing::{FuzzValue, ImportCall, ImportSession, When, WorkflowCall};
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
    Workflow(Wf),
    NewRun,
    ScheduleAfter(u16, u8, String),
    ScheduleAt(i64, u8, String),
    ScheduleEvery(u16, u8, String),
    CancelSchedule(u8),
    PendingSchedules,
    Broadcast(u8, String),
    Http(
        u8,
        Option<String>,
        Option<String>,
        Option<String>,
        Vec<(String, Vec<u8>)>,
    ),
}

/// Methods and schemes of outgoing requests, and a few of anything.
const METHODS: [&str; 5] = ["GET", "POST", "PUT", "DELETE", "X-ANY"];

/// Workflow calls, with names from a small set so that replays meet
/// recorded positions.
#[derive(Debug, Arbitrary)]
enum Wf {
    BeginStep(u8, u8, (u16, u16), Option<u16>),
    EndStep(u8, String),
    Sleep(u8, u16),
    SleepUntil(u8, i64),
    Now,
    LoopEnter(u8, String),
    LoopContinue(String),
    LoopBreak(String),
    LoopLeave,
    JoinEnter(u8, bool),
    Branch(u8),
    JoinExit(Option<u8>),
    QueueNext(u8, Vec<String>, u8, Option<u16>),
    Version(u8, u32),
    Removed(u8),
}

const NAMES: [&str; 4] = ["a", "b", "loop", ""];

fn name(i: u8) -> String {
    NAMES[i as usize % NAMES.len()].to_owned()
}

impl Wf {
    fn call(self) -> WorkflowCall {
        match self {
            Wf::BeginStep(n, retries, (base, cap), timeout) => WorkflowCall::BeginStep {
                name: name(n),
                max_retries: u32::from(retries % 4),
                backoff_ms: (u64::from(base), u64::from(cap)),
                timeout_ms: timeout.map(u64::from),
            },
            Wf::EndStep(kind, text) => WorkflowCall::EndStep(kind, text),
            Wf::Sleep(n, ms) => WorkflowCall::Sleep(name(n), u64::from(ms)),
            Wf::SleepUntil(n, at) => WorkflowCall::SleepUntil(name(n), at),
            Wf::Now => WorkflowCall::Now,
            Wf::LoopEnter(n, state) => WorkflowCall::LoopEnter(name(n), state),
            Wf::LoopContinue(state) => WorkflowCall::LoopContinue(state),
            Wf::LoopBreak(output) => WorkflowCall::LoopBreak(output),
            Wf::LoopLeave => WorkflowCall::LoopLeave,
            Wf::JoinEnter(n, race) => WorkflowCall::JoinEnter(name(n), race),
            Wf::Branch(i) => WorkflowCall::Branch(u32::from(i % 4)),
            Wf::JoinExit(winner) => WorkflowCall::JoinExit(winner.map(|w| u32::from(w % 4))),
            Wf::QueueNext(n, types, count, timeout) => {
                WorkflowCall::QueueNext(name(n), types, u32::from(count), timeout.map(u64::from))
            }
            Wf::Version(n, latest) => WorkflowCall::Version(name(n), latest),
            Wf::Removed(n) => WorkflowCall::Removed(name(n)),
        }
    }
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
            Call::Workflow(call) => ImportCall::Workflow(call.call()),
            Call::NewRun => ImportCall::NewRun,
            Call::ScheduleAfter(delay, n, args) => ImportCall::Schedule {
                when: When::After(u64::from(delay)),
                action: name(n),
                args,
            },
            Call::ScheduleAt(at, n, args) => ImportCall::Schedule {
                when: When::At(at),
                action: name(n),
                args,
            },
            Call::ScheduleEvery(interval, n, args) => ImportCall::Schedule {
                when: When::Every(u64::from(interval)),
                action: name(n),
                args,
            },
            Call::CancelSchedule(id) => ImportCall::CancelSchedule(u64::from(id % 8)),
            Call::PendingSchedules => ImportCall::PendingSchedules,
            Call::Broadcast(n, payload) => ImportCall::Broadcast(name(n), payload),
            Call::Http(method, scheme, authority, path, headers) => ImportCall::HttpRequest {
                method: METHODS[method as usize % METHODS.len()].to_owned(),
                scheme,
                authority,
                path,
                headers,
            },
        };
        session.apply(call);
    }
});
