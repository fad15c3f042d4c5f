//! `burrow:actor/db`: guest SQL on the instance's own database, behind the
//! sandbox's authorizer and inside the current call's transaction.
//!
//! Statements are prepared through the connection's statement cache, so a
//! guest that runs the same SQL on every call pays for parsing once.

use rusqlite::ErrorCode;
use rusqlite::fallible_iterator::FallibleIterator;
use rusqlite::types::ValueRef;

use crate::bindings::db::{DbError, Host, QueryResult, Value};
use crate::config::{
    MAX_QUERY_BYTES, MAX_QUERY_ROWS, MAX_SQL_BYTES, MAX_SQL_PARAMS, MAX_SQL_PROGRAM_OPS,
    MAX_SQL_VALUE_BYTES, MAX_STATEMENT_MEMORY,
};
use crate::deadline::{Deadline, DeadlineExceeded};
use crate::instance::{ConflictTrap, InstanceState, is_busy};
use crate::storage::{
    HeapRefused, InstanceDb, Sandbox, SchemaGuard, bounded_heap, refuse_statement, uncounted_heap,
};

impl Host for InstanceState {
    fn execute(
        &mut self,
        sql: String,
        params: Vec<Value>,
    ) -> wasmtime::Result<Result<QueryResult, DbError>> {
        if let Err(refusal) = self.check_mode("db.execute") {
            return Ok(Err(refusal.into()));
        }
        if let Err(e) = check_sql_size(&sql) {
            return Ok(Err(e));
        }
        if params.len() > MAX_SQL_PARAMS {
            return Ok(Err(DbError::LimitExceeded(format!(
                "{} parameters; the limit is {MAX_SQL_PARAMS}",
                params.len()
            ))));
        }
        let read_only = self.check_write("db.execute").is_err();
        let db = self.db();
        let result = bounded(db, self.deadline(), || {
            execute(&db.conn, &db.sandbox, &sql, params, read_only)
        });
        self.finish(result)
    }

    fn execute_batch(&mut self, sql: String) -> wasmtime::Result<Result<(), DbError>> {
        if let Err(refusal) = self.check_write("db.execute-batch") {
            return Ok(Err(refusal.into()));
        }
        if let Err(e) = check_sql_size(&sql) {
            return Ok(Err(e));
        }
        let db = self.db();
        let result = bounded(db, self.deadline(), || {
            execute_batch(&db.conn, &db.sandbox, &sql)
        });
        self.finish(result)
    }
}

impl InstanceState {
    /// Turns a failure into the guest's error, or into a trap when the
    /// call's deadline passed while SQLite ran.
    fn finish<T>(&mut self, result: Result<T, Failure>) -> wasmtime::Result<Result<T, DbError>> {
        let result = match result {
            Ok(value) => Ok(Ok(value)),
            // Interrupted by the progress handler or the watchdog, or refused
            // memory by the allocator, once the deadline passed.
            Err(Failure::Sqlite(e, _))
                if self.deadline().passed()
                    && (is_interrupt(&e) || is_code(&e, ErrorCode::OutOfMemory)) =>
            {
                Err(DeadlineExceeded.into())
            }
            // A concurrent call of this instance writes, or committed since
            // this call began reading: this call cannot commit; it is rolled
            // back and run again.
            Err(Failure::Sqlite(e, _)) if is_busy(&e) => Err(ConflictTrap.into()),
            Err(failure) => Ok(Err(failure.into_db_error())),
        };
        if let Ok(Err(e)) = &result {
            self.check_transaction(&format!("{e:?}"))?;
        }
        result
    }
}

/// Runs one guest call's SQL under the watchdog (which interrupts it once
/// the deadline passes) and within [`MAX_STATEMENT_MEMORY`] of SQLite's
/// heap. A statement that runs long hands its worker's other tasks off at
/// its first progress tick (`InstanceDb::open`); before that tick it has
/// run at most a few thousand VM steps, and no single function call is
/// long (the costly built-ins are linear or watch the deadline, see
/// `storage/src/functions/`), so a short statement, the common case, pays
/// for no hand-off.
fn bounded<T>(
    db: &InstanceDb,
    deadline: &Deadline,
    run: impl FnOnce() -> Result<T, Failure>,
) -> Result<T, Failure> {
    // Dropped after `run` has reset its statements.
    let _running = db.watch.running();
    match bounded_heap(MAX_STATEMENT_MEMORY, deadline, run) {
        (Err(Failure::Sqlite(..)), Some(HeapRefused::Memory)) => {
            Err(Failure::Guest(DbError::LimitExceeded(format!(
                "memory of one statement: it needed more than {MAX_STATEMENT_MEMORY} bytes \
                 of SQLite's heap"
            ))))
        }
        (result, _) => result,
    }
}

fn check_sql_size(sql: &str) -> Result<(), DbError> {
    if sql.len() > MAX_SQL_BYTES {
        return Err(DbError::LimitExceeded(format!(
            "SQL text of {} bytes; the limit is {MAX_SQL_BYTES} bytes",
            sql.len()
        )));
    }
    Ok(())
}

enum Failure {
    Sqlite(rusqlite::Error, Option<String>),
    Guest(DbError),
}

impl Failure {
    fn into_db_error(self) -> DbError {
        match self {
            Failure::Guest(e) => e,
            // The authorizer refused something while this statement was
            // prepared: that is why it failed (SQLite reports some refusals,
            // such as functions, as plain errors).
            Failure::Sqlite(_, Some(denial)) => DbError::Denied(denial),
            Failure::Sqlite(e, _) => sqlite_error(e),
        }
    }
}

fn is_code(e: &rusqlite::Error, code: ErrorCode) -> bool {
    e.sqlite_error_code() == Some(code)
}

fn is_interrupt(e: &rusqlite::Error) -> bool {
    is_code(e, ErrorCode::OperationInterrupted)
}

fn sqlite_error(e: rusqlite::Error) -> DbError {
    let message = e.to_string();
    match e.sqlite_error_code() {
        Some(ErrorCode::ConstraintViolation) => DbError::Constraint(message),
        Some(ErrorCode::AuthorizationForStatementDenied) => DbError::Denied(message),
        Some(ErrorCode::DiskFull) => DbError::LimitExceeded(format!(
            "database size (db_size_limit, which also bounds temp tables): {message}"
        )),
        Some(ErrorCode::TooBig) => DbError::LimitExceeded(format!(
            "length of a value or row: more than {MAX_SQL_VALUE_BYTES} bytes ({message})"
        )),
        Some(ErrorCode::OutOfMemory) => DbError::LimitExceeded(format!(
            "size of the statement: its program exceeds {MAX_SQL_PROGRAM_OPS} instructions, \
             or SQLite ran out of memory ({message})"
        )),
        _ => match e {
            rusqlite::Error::SqlInputError { .. } => DbError::InvalidSql(message),
            rusqlite::Error::MultipleStatement => DbError::InvalidSql(
                "execute runs one statement; use execute-batch for several".into(),
            ),
            rusqlite::Error::SqliteFailure(_, Some(ref m))
                if m.contains("syntax error") || m.starts_with("no such") =>
            {
                DbError::InvalidSql(message)
            }
            _ => DbError::Other(message),
        },
    }
}

/// Keeps what a guest statement did to the schema, or undoes it and
/// refuses it (see [`SchemaGuard`]).
fn finish_schema_change(guard: Option<SchemaGuard<'_>>) -> rusqlite::Result<Result<(), Failure>> {
    Ok(match guard {
        Some(guard) => guard
            .finish()?
            .map_err(|why| Failure::Guest(DbError::Denied(why))),
        None => Ok(()),
    })
}

fn execute_batch(conn: &rusqlite::Connection, sandbox: &Sandbox, sql: &str) -> Result<(), Failure> {
    let _guest = sandbox.enter_guest();
    let sqlite = |e| Failure::Sqlite(e, sandbox.take_denial());
    let mut batch = rusqlite::Batch::new(conn, sql);
    while let Some(mut stmt) = batch.next().map_err(sqlite)? {
        if let Some(reason) = stmt.expanded_sql().as_deref().and_then(refuse_statement) {
            return Err(Failure::Guest(DbError::Denied(reason)));
        }
        let schema = SchemaGuard::begin(conn, sandbox).map_err(sqlite)?;
        let mut rows = stmt.raw_query();
        while rows.next().map_err(sqlite)?.is_some() {}
        drop(rows);
        finish_schema_change(schema).map_err(sqlite)??;
    }
    Ok(())
}

fn execute(
    conn: &rusqlite::Connection,
    sandbox: &Sandbox,
    sql: &str,
    params: Vec<Value>,
    read_only: bool,
) -> Result<QueryResult, Failure> {
    let _guest = sandbox.enter_guest();
    let sqlite = |e| Failure::Sqlite(e, sandbox.take_denial());
    if let Some(reason) = refuse_statement(sql) {
        return Err(Failure::Guest(DbError::Denied(reason)));
    }
    let mut stmt = sandbox.prepare_cached(conn, sql).map_err(sqlite)?;
    if read_only && !stmt.readonly() {
        return Err(Failure::Guest(DbError::NotAllowed(
            "db.execute: this statement writes, and the queue selector may only read".into(),
        )));
    }
    let expected = stmt.parameter_count();
    if expected != params.len() {
        return Err(Failure::Guest(DbError::InvalidParameters(format!(
            "the statement takes {expected} parameter{}, {} given",
            if expected == 1 { "" } else { "s" },
            params.len()
        ))));
    }
    for (i, value) in params.into_iter().enumerate() {
        let index = i + 1;
        let bound = match value {
            Value::Null => stmt.raw_bind_parameter(index, rusqlite::types::Null),
            Value::Integer(v) => stmt.raw_bind_parameter(index, v),
            Value::Real(v) => stmt.raw_bind_parameter(index, v),
            Value::Text(v) => stmt.raw_bind_parameter(index, v),
            Value::Blob(v) => stmt.raw_bind_parameter(index, v),
        };
        bound.map_err(sqlite)?;
    }
    let columns: Vec<String> = uncounted_heap(|| stmt.column_names().map(String::from).collect());
    let width = columns.len();
    let mut rows = Vec::new();
    let mut bytes = 0usize;
    let schema = SchemaGuard::begin(conn, sandbox).map_err(sqlite)?;
    let mut cursor = stmt.raw_query();
    while let Some(row) = cursor.next().map_err(sqlite)? {
        if rows.len() == MAX_QUERY_ROWS {
            return Err(Failure::Guest(DbError::LimitExceeded(format!(
                "the statement returned more than {MAX_QUERY_ROWS} rows"
            ))));
        }
        let mut values = Vec::with_capacity(width);
        for i in 0..width {
            // Reading a value may expand a zeroblob, which rusqlite cannot
            // fail: it is left out of the statement's account, and bounded
            // by SQLite's length limit and the check below.
            let value = uncounted_heap(|| row.get_ref(i)).map_err(sqlite)?;
            let size = 8 + match value {
                ValueRef::Text(t) => t.len(),
                ValueRef::Blob(b) => b.len(),
                _ => 0,
            };
            // Checked before the value is copied.
            bytes += size;
            if bytes > MAX_QUERY_BYTES {
                return Err(Failure::Guest(DbError::LimitExceeded(format!(
                    "the statement returned more than {MAX_QUERY_BYTES} bytes"
                ))));
            }
            values.push(match value {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(v) => Value::Integer(v),
                ValueRef::Real(v) => Value::Real(v),
                ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Blob(b) => Value::Blob(b.to_vec()),
            });
        }
        rows.push(values);
    }
    drop(cursor);
    finish_schema_change(schema).map_err(sqlite)??;
    Ok(QueryResult {
        columns,
        rows,
        changes: conn.changes(),
        last_insert_rowid: conn.last_insert_rowid(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::instance::testing::instance;

    fn ok(result: wasmtime::Result<Result<QueryResult, DbError>>) -> QueryResult {
        result.expect("no trap").expect("no error")
    }

    fn err(result: wasmtime::Result<Result<QueryResult, DbError>>) -> DbError {
        result.expect("no trap").expect_err("an error")
    }

    #[test]
    fn every_value_type_round_trips() {
        let (mut state, _dir) = instance();
        let params = vec![
            Value::Null,
            Value::Integer(i64::MIN),
            Value::Real(2.5),
            Value::Text("ü ✓".into()),
            Value::Blob(vec![0, 255]),
        ];
        let result = ok(state.execute("SELECT ?, ?, ?, ? AS t, ?".into(), params));
        assert_eq!(result.columns[3], "t");
        let row = &result.rows[0];
        assert!(matches!(row[0], Value::Null));
        assert!(matches!(row[1], Value::Integer(i64::MIN)));
        assert!(matches!(row[2], Value::Real(r) if r == 2.5));
        assert!(matches!(&row[3], Value::Text(t) if t == "ü ✓"));
        assert!(matches!(&row[4], Value::Blob(b) if b == &[0, 255]));
    }

    #[test]
    fn changes_and_rowids_are_reported() {
        let (mut state, _dir) = instance();
        state
            .execute_batch("CREATE TABLE t (x)".into())
            .unwrap()
            .unwrap();
        let result = ok(state.execute("INSERT INTO t VALUES (1), (2)".into(), vec![]));
        assert_eq!((result.changes, result.last_insert_rowid), (2, 2));
        assert!(result.rows.is_empty());
    }

    #[test]
    fn mistakes_in_a_call_are_errors_the_guest_can_match() {
        let (mut state, _dir) = instance();
        let e = err(state.execute("SELECT ?".into(), vec![]));
        assert!(
            matches!(e, DbError::InvalidParameters(m) if m.contains("takes 1 parameter, 0 given"))
        );
        let e = err(state.execute("SELECT 1; SELECT 2".into(), vec![]));
        assert!(matches!(e, DbError::InvalidSql(m) if m.contains("execute-batch")));
        let e = err(state.execute("SELEC 1".into(), vec![]));
        assert!(matches!(e, DbError::InvalidSql(_)), "{e:?}");
        let e = err(state.execute("SELECT * FROM missing".into(), vec![]));
        assert!(matches!(e, DbError::InvalidSql(m) if m.contains("no such table")));
    }

    #[test]
    fn limits_name_themselves() {
        let (mut state, _dir) = instance();
        let long = format!("SELECT '{}'", "x".repeat(MAX_SQL_BYTES));
        let e = err(state.execute(long, vec![]));
        assert!(matches!(e, DbError::LimitExceeded(m) if m.contains("SQL text")));
        let e = err(state.execute("SELECT 1".into(), vec![Value::Null; MAX_SQL_PARAMS + 1]));
        assert!(matches!(e, DbError::LimitExceeded(m) if m.contains("parameters")));
        let rows = format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT {}) SELECT i FROM n",
            MAX_QUERY_ROWS + 1
        );
        let e = err(state.execute(rows, vec![]));
        assert!(matches!(e, DbError::LimitExceeded(m) if m.contains("rows")));
        let bytes = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 40)
                     SELECT zeroblob(1048576) FROM n";
        let e = err(state.execute(bytes.into(), vec![]));
        assert!(matches!(e, DbError::LimitExceeded(m) if m.contains("bytes")));
    }

    #[test]
    fn a_database_past_its_size_limit_refuses_writes() {
        let (mut state, _dir) = instance();
        state
            .execute_batch("CREATE TABLE big (b BLOB)".into())
            .unwrap()
            .unwrap();
        let insert = || vec![Value::Blob(vec![7; 1 << 20])];
        for _ in 0..3 {
            ok(state.execute("INSERT INTO big VALUES (?)".into(), insert()));
        }
        let e = err(state.execute("INSERT INTO big VALUES (?)".into(), insert()));
        assert!(matches!(e, DbError::LimitExceeded(m) if m.contains("database size")),);
    }

    #[test]
    fn a_query_past_the_deadline_traps() {
        let (mut state, _dir) = instance();
        state.deadline().start(Duration::from_millis(50));
        let forever = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n";
        let trap = state.execute(forever.into(), vec![]).expect_err("a trap");
        assert!(
            trap.downcast_ref::<DeadlineExceeded>().is_some(),
            "{trap:?}"
        );
    }

    #[test]
    fn outside_a_call_the_database_is_refused() {
        let (mut state, _dir) = instance();
        state.set_mode(crate::instance::Mode::Idle);
        let e = err(state.execute("SELECT 1".into(), vec![]));
        assert!(matches!(e, DbError::NotAllowed(m) if m.contains("db.execute")));
    }
}
