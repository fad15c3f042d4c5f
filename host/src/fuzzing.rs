//! Entry points for the fuzz targets in `fuzz/`. Not a stable API.
//!
//! Each drives one part of the guest boundary the way a hostile guest or
//! caller could, and checks the host's invariants after every step: no
//! panic, the host's transaction stays the host's, internal tables stay
//! intact, and errors are values, not crashes.

use std::path::Path;

use wasmtime::StoreLimits;

use crate::bindings::db::{Host as _, Value};
use crate::bindings::log::{Host as _, Level};
use crate::bindings::queue::{AppendOptions, Host as _};
use crate::bindings::state::Host as _;
use crate::config::{HostConfig, Synchronous};
use crate::deadline::Deadline;
use crate::instance_state::{InstanceName, InstanceState, Mode, QueueLimits};
use crate::storage::instance_db::InstanceDb;

/// A value for a statement parameter.
#[derive(Debug, Clone)]
pub enum FuzzValue {
    /// SQL NULL.
    Null,
    /// An integer.
    Integer(i64),
    /// A float.
    Real(f64),
    /// Text.
    Text(String),
    /// A blob.
    Blob(Vec<u8>),
}

/// One call a guest could make, or a transaction boundary the host makes.
#[derive(Debug, Clone)]
pub enum ImportCall {
    /// `db.execute`.
    Execute(String, Vec<FuzzValue>),
    /// `db.execute-batch`.
    ExecuteBatch(String),
    /// `state.get`.
    StateGet,
    /// `state.set`.
    StateSet(Vec<u8>),
    /// `queue.append`.
    Append {
        /// Event type.
        event_type: String,
        /// Payload text.
        payload: String,
        /// Priority.
        priority: i32,
        /// Group.
        group: Option<String>,
    },
    /// `log.log`.
    Log(u8, String),
    /// The host switches what guest code is running (0 idle, 1 hook,
    /// 2 action, 3 process, 4 select).
    SetMode(u8),
    /// The host commits the call's transaction and opens the next.
    Commit,
    /// The host rolls the call's transaction back and opens the next.
    Rollback,
}

/// The store state of one instance over a fresh database, driven by
/// [`ImportCall`]s as a guest would.
pub struct ImportSession {
    state: InstanceState,
    _dir: tempfile::TempDir,
}

impl ImportSession {
    /// A new instance with a queue (at most 64 pending events of at most
    /// 4 KiB), in the middle of an action's transaction.
    pub fn new() -> ImportSession {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let deadline = Deadline::default();
        let db = InstanceDb::open(
            &dir.path().join("fuzz.sqlite"),
            Synchronous::Off,
            8 << 20,
            deadline.clone(),
        )
        .expect("open the database");
        db.create_schema().expect("internal tables");
        db.ensure_queue_schema().expect("queue tables");
        db.record_creation("fuzz", "key", 1).expect("creation");
        let name = InstanceName {
            actor: "fuzz".into(),
            key: "key".into(),
        };
        let mut state = InstanceState::new(name, db, deadline, StoreLimits::default());
        state.has_queue = true;
        state.queue_limits = QueueLimits {
            max_pending: 64,
            max_payload: 4096,
        };
        state.mode = Mode::Action;
        state.db.begin().expect("begin");
        state.deadline.start(std::time::Duration::from_secs(5));
        ImportSession { state, _dir: dir }
    }

    /// Makes one call; panics if the host broke an invariant.
    pub fn apply(&mut self, call: ImportCall) {
        let s = &mut self.state;
        match call {
            ImportCall::Execute(sql, params) => {
                let params = params.into_iter().map(value).collect();
                let _ = s.execute(sql, params);
            }
            ImportCall::ExecuteBatch(sql) => {
                let _ = s.execute_batch(sql);
            }
            ImportCall::StateGet => {
                let _ = crate::bindings::state::Host::get(s);
            }
            ImportCall::StateSet(bytes) => {
                let _ = s.set(bytes);
            }
            ImportCall::Append {
                event_type,
                payload,
                priority,
                group,
            } => {
                let _ = s.append(event_type, payload, AppendOptions { priority, group });
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
                s.mode = match mode % 5 {
                    0 => Mode::Idle,
                    1 => Mode::Hook("fuzz"),
                    2 => Mode::Action,
                    3 => Mode::Process,
                    _ => Mode::Select,
                };
            }
            ImportCall::Commit => {
                s.transaction_lost = None;
                let _ = s.db.commit();
                s.db.rollback();
                s.db.begin().expect("begin");
            }
            ImportCall::Rollback => {
                s.transaction_lost = None;
                s.db.rollback();
                s.db.begin().expect("begin");
            }
        }
        self.check();
    }

    /// The invariants after every call.
    fn check(&self) {
        let conn = &self.state.db.conn;
        // Guest SQL can neither end the host's transaction...
        assert!(
            !conn.is_autocommit(),
            "guest SQL ended the host's transaction"
        );
        // ...nor touch the instance record.
        let record: (String, String, i64) = conn
            .query_row(
                "SELECT actor, key, created_at FROM _burrow_instance WHERE id = 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .expect("the instance record is readable");
        assert_eq!(record, ("fuzz".into(), "key".into(), 1));
        let pending: i64 = conn
            .query_row("SELECT count(*) FROM _burrow_queue", [], |r| r.get(0))
            .expect("the queue is readable");
        assert!(pending <= 64, "the queue grew past its limit: {pending}");
    }
}

impl Default for ImportSession {
    fn default() -> Self {
        ImportSession::new()
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

/// Loads `bytes` as the component of an actor the way `burrow serve`
/// does (header checks, compilation, imports and exports), returning the
/// error text if it cannot be an actor. `cache_dir` is the compile cache.
pub fn load_component(bytes: &[u8], cache_dir: &Path) -> Result<(), String> {
    let config = HostConfig {
        max_awake: 1,
        pooling: false,
        ..HostConfig::default()
    };
    let engine =
        crate::engine::build(config.max_awake, config.pooling).map_err(|e| e.to_string())?;
    let linker = crate::capability::linker(&engine).map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join("fuzz.wasm");
    std::fs::write(&file, bytes).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(cache_dir).map_err(|e| e.to_string())?;
    let cache = crate::storage::open_dir_creating(cache_dir).map_err(|e| e.to_string())?;
    let spec = crate::manifest::ActorSpec::new("fuzz", &file);
    crate::definition::load(&engine, &linker, &cache, &spec)
        .map(drop)
        .map_err(|e| e.to_string())
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

    #[test]
    fn broken_components_are_errors() {
        let cache = tempfile::tempdir().unwrap();
        for bytes in [
            &b""[..],
            b"\0asm",
            b"\0asm\x0d\0\x01\0",
            b"\0asm\x01\0\0\0",
            b"\0asm\x0d\0\x01\0\xff\xff\xff",
        ] {
            let e = load_component(bytes, cache.path()).unwrap_err();
            assert!(e.contains("actor `fuzz`"), "{e}");
        }
    }
}
