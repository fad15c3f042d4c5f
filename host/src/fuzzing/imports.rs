//! The `imports` target's way in: one instance's store state over a fresh
//! database, driven by [`ImportCall`]s in any order, with the host's
//! invariants checked after every call.

use wasmtime::StoreLimits;

use super::{FuzzValue, ImportCall, When, WorkflowCall};
use crate::address::Address;
use crate::bindings::db::{DbError, Host as _, Value};
use crate::bindings::log::{Host as _, Level};
use crate::bindings::queue::{AppendOptions, Host as _, QueueError};
use crate::bindings::state::{Host as _, StateError};
use crate::config::Synchronous;
use crate::deadline::Deadline;
use crate::instance::workflow_run::RunState;
use crate::instance::{InstanceState, Mode, QueueLimits};
use crate::storage::{HostTables, InstanceDb};

/// The store state of one instance over a fresh database, driven by
/// [`ImportCall`]s as a guest would.
pub struct ImportSession {
    pub(super) state: InstanceState,
    pub(super) _dir: tempfile::TempDir,
}

impl ImportSession {
    /// A new instance with a queue (at most 64 pending events of at most
    /// 4 KiB), in the middle of an action's transaction.
    pub fn new() -> ImportSession {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let deadline = Deadline::default();
        // Where the host keeps the instance, so that `inspect` finds it.
        let path = crate::storage::instance_path(dir.path(), "fuzz", "key");
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("the actor's directory");
        let db = InstanceDb::open(&path, Synchronous::Off, 8 << 20, deadline.clone())
            .expect("open the database");
        db.create_schema().expect("internal tables");
        db.ensure_queue_schema().expect("queue tables");
        db.ensure_workflow_schema().expect("workflow tables");
        db.conn.workflow().start("null", 1).expect("a workflow");
        db.record_creation("fuzz", "key", 1).expect("creation");
        let name = Address {
            actor: "fuzz".into(),
            key: "key".into(),
        };
        let mut state = InstanceState::new(name, db, deadline, StoreLimits::default());
        state.set_queue_limits(QueueLimits {
            max_pending: 64,
            max_payload: 4096,
        });
        state.set_mode(Mode::Action);
        state.note_workflow(true);
        state.begin_run(RunState::default());
        state.db().begin().expect("begin");
        state.deadline().start(std::time::Duration::from_secs(5));
        ImportSession { state, _dir: dir }
    }

    /// Makes one call; panics if the host broke an invariant.
    pub fn apply(&mut self, call: ImportCall) {
        let s = &mut self.state;
        let in_transaction = !s.db().conn.is_autocommit();
        let orchestration = s.mode() == Mode::Orchestration;
        // What a side effect returned: in orchestration code it must be
        // refused with not-in-step, whatever it is.
        let mut refused_not_in_step = None;
        match call {
            ImportCall::Execute(sql, params) => {
                let params = params.into_iter().map(value).collect();
                let result = s.execute(sql, params);
                refused_not_in_step = Some(matches!(result, Ok(Err(DbError::NotInStep(_)))));
            }
            ImportCall::ExecuteBatch(sql) => {
                let result = s.execute_batch(sql);
                refused_not_in_step = Some(matches!(result, Ok(Err(DbError::NotInStep(_)))));
            }
            ImportCall::StateGet => {
                let result = crate::bindings::state::Host::get(s);
                refused_not_in_step = Some(matches!(result, Ok(Err(StateError::NotInStep(_)))));
            }
            ImportCall::StateSet(bytes) => {
                let result = s.set(bytes);
                refused_not_in_step = Some(matches!(result, Ok(Err(StateError::NotInStep(_)))));
            }
            ImportCall::Append {
                event_type,
                payload,
                priority,
                group,
            } => {
                let result = s.append(event_type, payload, AppendOptions { priority, group });
                refused_not_in_step = Some(matches!(result, Ok(Err(QueueError::NotInStep(_)))));
            }
            ImportCall::Workflow(call) => {
                apply_workflow(s, call);
            }
            ImportCall::Schedule { when, action, args } => {
                use crate::bindings::schedule::{Host as _, ScheduleError};
                let result = match when {
                    When::After(delay) => s.after(delay, action, args),
                    When::At(at) => s.at(at, action, args),
                    When::Every(interval) => s.every(interval, action, args),
                };
                refused_not_in_step = Some(matches!(result, Ok(Err(ScheduleError::NotInStep(_)))));
            }
            ImportCall::CancelSchedule(id) => {
                use crate::bindings::schedule::{Host as _, ScheduleError};
                let result = s.cancel(id);
                refused_not_in_step = Some(matches!(result, Ok(Err(ScheduleError::NotInStep(_)))));
            }
            ImportCall::PendingSchedules => {
                use crate::bindings::schedule::{Host as _, ScheduleError};
                let result = s.pending();
                refused_not_in_step = Some(matches!(result, Ok(Err(ScheduleError::NotInStep(_)))));
            }
            ImportCall::Broadcast(name, payload) => {
                use crate::bindings::events::{EventError, Host as _};
                let result = s.broadcast(name, payload);
                refused_not_in_step = Some(matches!(result, Ok(Err(EventError::NotInStep(_)))));
            }
            ImportCall::HttpRequest {
                method,
                scheme,
                authority,
                path,
                headers,
            } => {
                if let Some(refusal) = http_request(s, method, scheme, authority, path, headers) {
                    refused_not_in_step = Some(refusal.starts_with("not-in-step:"));
                    let refused = matches!(s.mode(), Mode::Idle | Mode::Select);
                    assert_eq!(
                        refusal.starts_with("not-allowed:"),
                        refused,
                        "an HTTP request must be refused with not-allowed when no guest code that may send one runs, and only then: {refusal}"
                    );
                }
            }
            ImportCall::NewRun => {
                s.db().rollback();
                s.set_mode(Mode::Orchestration);
                s.begin_run(RunState::default());
            }
            ImportCall::Log(level, message) => {
                let level = match level % 5 {
                    0 => Level::Trace,
                    1 => Level::Debug,
                    2 => Level::Info,
                    3 => Level::Warn,
                    _ => Level::Error,
                };
                let _ = s.log(level, message);
            }
            ImportCall::SetMode(mode) => {
                s.set_mode(match mode % 7 {
                    0 => Mode::Idle,
                    1 => Mode::Hook("fuzz"),
                    2 => Mode::Action,
                    3 => Mode::Process,
                    4 => Mode::Select,
                    5 => Mode::Orchestration,
                    _ => Mode::Step,
                });
            }
            ImportCall::Commit => {
                s.take_lost_transaction();
                let _ = s.commit_transaction();
                s.roll_back();
                s.begin_transaction().expect("begin");
            }
            ImportCall::Rollback => {
                s.take_lost_transaction();
                s.roll_back();
                s.begin_transaction().expect("begin");
            }
        }
        if let Some(refused) = refused_not_in_step {
            assert_eq!(
                refused, orchestration,
                "a side effect in orchestration code must get not-in-step, and only there"
            );
            // Guest SQL (and every other side effect) cannot end the host's
            // transaction.
            assert!(
                !in_transaction || !self.state.db().conn.is_autocommit(),
                "a guest call ended the host's transaction"
            );
        }
        self.check();
    }

    /// The invariants after every call.
    fn check(&self) {
        let conn = &self.state.db().conn;
        // ...nor touch the instance record.
        let record: (String, String, i64) = conn
            .query_row(
                "SELECT actor, key, created_at FROM main._burrow_instance WHERE id = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .expect("the instance record is readable");
        assert_eq!(record, ("fuzz".into(), "key".into(), 1));
        let pending: i64 = conn
            .query_row("SELECT count(*) FROM main._burrow_queue", [], |r| r.get(0))
            .expect("the queue is readable");
        assert!(pending <= 64, "the queue grew past its limit: {pending}");
        // Schedules stay readable and within their limit; a transaction's
        // broadcasts stay within theirs.
        let schedules = conn
            .schedules()
            .pending()
            .expect("the schedules are readable");
        assert!(schedules.len() as u64 <= crate::config::MAX_PENDING_SCHEDULES);
        for schedule in &schedules {
            let args: serde_json::Value =
                serde_json::from_str(&schedule.args).expect("schedule arguments are JSON");
            assert!(args.is_array(), "schedule arguments are an array");
            assert!(
                schedule
                    .every_ms
                    .is_none_or(|ms| ms as u64 >= crate::config::MIN_SCHEDULE_INTERVAL_MS),
                "a recurring schedule runs at most every 100 ms"
            );
            assert!(!schedule.action.is_empty());
        }
        assert!(self.state.effects().events.len() <= crate::config::MAX_BROADCASTS_PER_CALL);
        // The workflow's history stays readable, and every location is a
        // position, or positions inside loops and joins.
        let history = conn
            .workflow()
            .history(10_000)
            .expect("the history is readable");
        for entry in history {
            let parts: Vec<&str> = entry.location.split('/').collect();
            assert!(
                parts.len() % 2 == 1 && parts.iter().all(|p| p.parse::<u64>().is_ok()),
                "a malformed location: {}",
                entry.location
            );
        }
    }
}

impl Default for ImportSession {
    fn default() -> Self {
        ImportSession::new()
    }
}

fn apply_workflow(s: &mut InstanceState, call: WorkflowCall) {
    use crate::bindings::types::Failure;
    use crate::bindings::workflow::{Host as _, StepOptions, StepOutcome};
    let failure = |message: String| Failure {
        code: "fuzz".into(),
        message,
    };
    let _ = match call {
        WorkflowCall::BeginStep {
            name,
            max_retries,
            backoff_ms,
            timeout_ms,
        } => s
            .begin_step(
                name,
                StepOptions {
                    max_retries,
                    backoff_base_ms: backoff_ms.0,
                    backoff_cap_ms: backoff_ms.1,
                    timeout_ms,
                },
            )
            .map(drop),
        WorkflowCall::EndStep(kind, text) => s
            .end_step(match kind % 4 {
                0 => StepOutcome::Ok(text),
                1 => StepOutcome::Error(failure(text)),
                2 => StepOutcome::Critical(failure(text)),
                _ => StepOutcome::Rollback(failure(text)),
            })
            .map(drop),
        WorkflowCall::Sleep(name, ms) => s.sleep(name, ms).map(drop),
        WorkflowCall::SleepUntil(name, at) => s.sleep_until(name, at).map(drop),
        WorkflowCall::Now => s.now().map(drop),
        WorkflowCall::LoopEnter(name, state) => s.loop_enter(name, state).map(drop),
        WorkflowCall::LoopContinue(state) => s.loop_continue(state).map(drop),
        WorkflowCall::LoopBreak(output) => s.loop_break(output).map(drop),
        WorkflowCall::LoopLeave => s.loop_leave().map(drop),
        WorkflowCall::JoinEnter(name, race) => s.join_enter(name, race).map(drop),
        WorkflowCall::Branch(index) => s.branch(index).map(drop),
        WorkflowCall::JoinExit(winner) => s.join_exit(winner).map(drop),
        WorkflowCall::QueueNext(name, types, count, timeout) => {
            s.queue_next(name, types, count, timeout).map(drop)
        }
        WorkflowCall::Version(name, latest) => s.version(name, latest).map(drop),
        WorkflowCall::Removed(name) => s.removed(name).map(drop),
    };
}

/// Builds a request as a guest would and hands it to the host's
/// `handle`. The text of the host's refusal at the import, `""` for a
/// request it took; `None` when the request could not be built.
fn http_request(
    s: &mut InstanceState,
    method: String,
    scheme: Option<String>,
    authority: Option<String>,
    path: Option<String>,
    headers: Vec<(String, Vec<u8>)>,
) -> Option<String> {
    use wasmtime::component::Resource;
    use wasmtime_wasi_http::WasiHttpView as _;
    use wasmtime_wasi_http::p2::bindings::http::types::{
        ErrorCode, HostFields as _, HostOutgoingRequest as OutgoingRequestImports, Method, Scheme,
    };
    use wasmtime_wasi_http::p2::types::HostOutgoingRequest;

    let mut view = s.http();
    let fields = view.from_list(headers).ok()?;
    let request: Resource<HostOutgoingRequest> =
        OutgoingRequestImports::new(&mut view, fields).ok()?;
    let this = || Resource::<HostOutgoingRequest>::new_borrow(request.rep());
    let method = match method.as_str() {
        "GET" => Method::Get,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        _ => Method::Other(method),
    };
    let scheme = scheme.map(|scheme| match scheme.as_str() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        _ => Scheme::Other(scheme),
    });
    let built = [
        view.set_method(this(), method),
        view.set_scheme(this(), scheme),
        view.set_authority(this(), authority),
        view.set_path_with_query(this(), path),
    ];
    if built.iter().any(|set| !matches!(set, Ok(Ok(())))) {
        let _ = view.table.delete(request);
        return None;
    }
    match crate::capability::http::handle(s, request, None) {
        Ok(future) => {
            let _ = s.http().table.delete(future);
            Some(String::new())
        }
        Err(e) => match e.downcast() {
            Ok(ErrorCode::InternalError(Some(text))) => Some(text),
            Ok(_) => Some(String::new()),
            Err(trap) => panic!("a request trapped the host: {trap:?}"),
        },
    }
}

fn value(v: FuzzValue) -> Value {
    match v {
        FuzzValue::Null => Value::Null,
        FuzzValue::Integer(i) => Value::Integer(i),
        FuzzValue::Real(r) => Value::Real(r),
        FuzzValue::Text(t) => Value::Text(t),
        FuzzValue::Blob(b) => Value::Blob(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hostile calls the fuzz targets start from: each must leave the
    /// host's invariants intact (checked after every call).
    #[test]
    fn hostile_calls_keep_the_invariants() {
        let mut session = ImportSession::new();
        let execute = |sql: &str| ImportCall::Execute(sql.into(), Vec::new());
        for call in [
            execute("COMMIT"),
            execute("ROLLBACK"),
            execute("END"),
            execute("SAVEPOINT s"),
            execute("RELEASE s"),
            ImportCall::ExecuteBatch("SAVEPOINT a; RELEASE a; COMMIT;".into()),
            execute("DELETE FROM _burrow_instance"),
            execute("UPDATE _burrow_queue SET attempts = 99"),
            execute("PRAGMA writable_schema = 1"),
            execute("ATTACH ':memory:' AS other"),
            execute("CREATE TABLE t (x)"),
            ImportCall::Execute(
                "INSERT INTO t VALUES (?)".into(),
                vec![FuzzValue::Blob(vec![0; 64])],
            ),
            ImportCall::Execute("SELECT ?5".into(), vec![FuzzValue::Null]),
            execute(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c LIMIT 200000",
            ),
            ImportCall::StateSet(vec![1; 10]),
            ImportCall::StateGet,
            ImportCall::SetMode(4),
            execute("INSERT INTO t VALUES (1)"),
            ImportCall::StateSet(vec![2]),
            ImportCall::SetMode(0),
            ImportCall::StateGet,
            ImportCall::SetMode(2),
            ImportCall::Rollback,
            ImportCall::Log(9, "x".repeat(10_000)),
            ImportCall::Commit,
        ] {
            session.apply(call);
        }
        for i in 0..70 {
            session.apply(ImportCall::Append {
                event_type: format!("e{i}"),
                payload: "{}".into(),
                priority: i,
                group: None,
            });
        }
        session.apply(ImportCall::Append {
            event_type: String::new(),
            payload: "{".into(),
            priority: 0,
            group: Some("g".repeat(300)),
        });
    }

    /// Schedules and broadcasts with bad input, in every mode, around
    /// commits and rollbacks.
    #[test]
    fn http_requests_in_every_mode_keep_the_invariants() {
        let mut session = ImportSession::new();
        let request =
            |method: &str, scheme: Option<&str>, authority: Option<&str>| ImportCall::HttpRequest {
                method: method.into(),
                scheme: scheme.map(Into::into),
                authority: authority.map(Into::into),
                path: Some("/x?y=1".into()),
                headers: vec![("idempotency-key".into(), b"k".to_vec())],
            };
        for mode in 0..7 {
            session.apply(ImportCall::SetMode(mode));
            for call in [
                request("POST", Some("https"), Some("api.example.com")),
                request("GET", Some("http"), Some("169.254.169.254")),
                request("GET", None, None),
                request("BREW", Some("gopher"), Some("[::1]:70")),
                request("bad method", Some("http"), Some("a b")),
                ImportCall::HttpRequest {
                    method: "GET".into(),
                    scheme: Some("http".into()),
                    authority: Some("example.com".into()),
                    path: Some("/".into()),
                    headers: vec![("bad header".into(), b"\0".to_vec())],
                },
            ] {
                session.apply(call);
            }
        }
    }

    #[test]
    fn schedules_and_broadcasts_keep_the_invariants() {
        let mut session = ImportSession::new();
        let schedule = |when, action: &str, args: &str| ImportCall::Schedule {
            when,
            action: action.into(),
            args: args.into(),
        };
        for mode in 0..7 {
            for call in [
                ImportCall::SetMode(mode),
                schedule(When::After(u64::MAX), "a", "[]"),
                schedule(When::At(i64::MIN), "a", "[1, {\"x\": null}]"),
                schedule(When::Every(u64::MAX), "a", "[]"),
                schedule(When::Every(0), "a", "[]"),
                schedule(When::After(0), "", "[]"),
                schedule(When::After(0), "a", "{}"),
                schedule(When::After(0), "a", "[oops"),
                schedule(When::After(0), &"x".repeat(300), "[]"),
                ImportCall::PendingSchedules,
                ImportCall::CancelSchedule(1),
                ImportCall::CancelSchedule(u64::MAX),
                ImportCall::Broadcast("e".into(), "{\"a\": [1, 2]}".into()),
                ImportCall::Broadcast("".into(), "1".into()),
                ImportCall::Broadcast("e".into(), "not json".into()),
                ImportCall::Commit,
                schedule(When::After(5), "b", "[]"),
                ImportCall::Broadcast("e".into(), "1".into()),
                ImportCall::Rollback,
            ] {
                session.apply(call);
            }
        }
        for _ in 0..1001 {
            session.apply(ImportCall::Broadcast("e".into(), "1".into()));
        }
    }

    /// Workflow calls out of order and side effects around them.
    #[test]
    fn workflow_calls_in_any_order_keep_the_invariants() {
        let mut session = ImportSession::new();
        let wf = ImportCall::Workflow;
        let step = |name: &str, timeout_ms| {
            ImportCall::Workflow(WorkflowCall::BeginStep {
                name: name.into(),
                max_retries: 1,
                backoff_ms: (0, u64::MAX),
                timeout_ms,
            })
        };
        let execute = |sql: &str| ImportCall::Execute(sql.into(), Vec::new());
        for call in [
            wf(WorkflowCall::EndStep(0, "1".into())),
            ImportCall::SetMode(5),
            execute("CREATE TABLE t (x)"),
            ImportCall::StateSet(vec![1]),
            ImportCall::StateGet,
            ImportCall::Append {
                event_type: "e".into(),
                payload: "{}".into(),
                priority: 0,
                group: None,
            },
            wf(WorkflowCall::LoopContinue("1".into())),
            wf(WorkflowCall::JoinExit(Some(7))),
            wf(WorkflowCall::Branch(3)),
            step("a", Some(0)),
            step("nested", None),
            execute("CREATE TABLE t (x)"),
            execute("COMMIT"),
            wf(WorkflowCall::EndStep(0, "{".into())),
            wf(WorkflowCall::LoopEnter("l".into(), "not json".into())),
            step("a", None),
            wf(WorkflowCall::EndStep(1, "fails".into())),
            wf(WorkflowCall::JoinEnter("j".into(), true)),
            wf(WorkflowCall::Branch(u32::MAX)),
            wf(WorkflowCall::QueueNext("q".into(), vec![], 0, Some(0))),
            wf(WorkflowCall::QueueNext(
                "q".into(),
                vec!["x".into()],
                u32::MAX,
                None,
            )),
            wf(WorkflowCall::JoinExit(Some(u32::MAX))),
            wf(WorkflowCall::Sleep("s".into(), u64::MAX)),
            wf(WorkflowCall::SleepUntil("s".into(), i64::MIN)),
            wf(WorkflowCall::LoopBreak("2".into())),
            wf(WorkflowCall::LoopLeave),
            wf(WorkflowCall::Version("v".into(), u32::MAX)),
            wf(WorkflowCall::Removed("a".into())),
            wf(WorkflowCall::Now),
            ImportCall::NewRun,
            step("a", None),
            wf(WorkflowCall::EndStep(3, "back".into())),
            step("x".repeat(100_000).as_str(), None),
            ImportCall::SetMode(6),
            execute("INSERT INTO t VALUES (1)"),
            wf(WorkflowCall::EndStep(0, "x".repeat(5 << 20))),
            ImportCall::NewRun,
            ImportCall::SetMode(2),
            ImportCall::Commit,
        ] {
            session.apply(call);
        }
    }
}
