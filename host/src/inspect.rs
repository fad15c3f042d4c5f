//! Read-only views of an instance's data, through a separate connection.
//!
//! Reading the actor's own tables runs guest-defined SQL (generated
//! columns, virtual tables), so it is bounded like guest SQL: SQLite's
//! length limits, the sandbox's authorizer, a deadline (the actor's
//! `call_timeout`) enforced by the progress handler and the watchdog,
//! [`MAX_STATEMENT_MEMORY`] of SQLite's heap per statement and
//! [`MAX_INSPECT_BYTES`] of values in all. The host runs it on a blocking
//! thread, never on an async worker.

use std::path::Path;
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode};
use serde::Serialize;

use crate::address::{validate_actor_name, validate_key};
use crate::config::{MAX_INSPECT_BYTES, MAX_SQL_VALUE_BYTES, MAX_STATEMENT_MEMORY};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::storage::{
    DeadLetter, HeapRefused, HistoryEntry, HostTables, Pause, QueuePolicy, QueuedEvent, Sandbox,
    WorkflowRecord, bounded_heap, is_internal, read_state, uncounted_heap,
};
use crate::watchdog::Watch;

/// Rows shown per table.
pub const INSPECT_ROWS: usize = 100;

/// The most rows one page of a table holds ([`table_page`]).
pub const MAX_TABLE_PAGE_ROWS: usize = 1000;

/// What `burrow inspect` shows.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    /// The actor.
    pub actor: String,
    /// The key.
    pub key: String,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at: i64,
    /// Since when and why its background work is paused (a fork, until
    /// `burrow resume`); absent for an instance that is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<Pause>,
    /// The state value: JSON if it is JSON, else `{"hex": ...}`; null if never set.
    pub state: serde_json::Value,
    /// The actor's own tables.
    pub tables: Vec<TableDump>,
    /// The queue, if the instance has one.
    pub queue: Option<QueueView>,
    /// The workflow and its history, if the instance has one.
    pub workflow: Option<WorkflowView>,
}

/// An instance's workflow and its history, as `burrow inspect --history`
/// and `GET /actors/{actor}/{key}/workflow` show it.
#[derive(Debug, Clone, Serialize)]
pub struct WorkflowView {
    /// Status, input, output, error and what it waits for.
    #[serde(flatten)]
    pub record: WorkflowRecord,
    /// Entries in history, in order (the first [`INSPECT_ROWS`]).
    pub history: Vec<HistoryEntry>,
    /// Entries in history, in all.
    pub history_len: i64,
    /// The outgoing HTTP requests of the steps among `history`, by the
    /// step's location, in the order they were sent (each step's last
    /// [`MAX_STEP_REQUESTS`](crate::storage::MAX_STEP_REQUESTS)).
    pub requests: std::collections::BTreeMap<String, Vec<crate::storage::StepRequestRow>>,
}

/// An instance's queue: its policy, the first pending events and the dead
/// letters.
#[derive(Debug, Clone, Serialize)]
pub struct QueueView {
    /// The policy recorded at creation; `None` for a workflow's queue,
    /// which its queue waits consume.
    pub policy: Option<QueuePolicy>,
    /// Number of pending events (including those in flight).
    pub pending_count: u64,
    /// The first [`INSPECT_ROWS`] pending events, in fifo order.
    pub pending: Vec<QueuedEvent>,
    /// The first [`INSPECT_ROWS`] dead letters, oldest failure first.
    pub dead_letters: Vec<DeadLetter>,
    /// What keeps the queue from being processed, if anything does (a
    /// custom selector that fails, say). Only a running host knows it.
    pub error: Option<String>,
}

/// The first rows of one table.
#[derive(Debug, Clone, Serialize)]
pub struct TableDump {
    /// Table name.
    pub name: String,
    /// Column names.
    pub columns: Vec<String>,
    /// Up to [`INSPECT_ROWS`] rows.
    pub rows: Vec<Vec<serde_json::Value>>,
    /// Number of rows in the table.
    pub total_rows: i64,
}

/// One of the actor's tables in an instance, without its rows.
#[derive(Debug, Clone, Serialize)]
pub struct TableSummary {
    /// Table name.
    pub name: String,
    /// Column names.
    pub columns: Vec<String>,
    /// Number of rows in the table.
    pub total_rows: i64,
}

/// One page of a table's rows, in the table's own order (its rowid or
/// primary key).
#[derive(Debug, Clone, Serialize)]
pub struct TablePage {
    /// Table name.
    pub name: String,
    /// Column names.
    pub columns: Vec<String>,
    /// The rows from `offset` on, at most `limit`.
    pub rows: Vec<Vec<serde_json::Value>>,
    /// Number of rows in the table.
    pub total_rows: i64,
    /// Rows skipped before the first one here.
    pub offset: u64,
    /// The most rows asked for.
    pub limit: usize,
}

/// An instance's pending schedules.
#[derive(Debug, Clone, Serialize)]
pub struct ScheduleView {
    /// Number of pending schedules.
    pub count: u64,
    /// The first [`INSPECT_ROWS`], soonest first.
    pub schedules: Vec<ScheduleEntry>,
}

/// One pending schedule.
#[derive(Debug, Clone, Serialize)]
pub struct ScheduleEntry {
    /// Unique within the instance.
    pub id: i64,
    /// The action it runs.
    pub action: String,
    /// Its arguments (JSON).
    pub args: serde_json::Value,
    /// When it is due, in milliseconds since the Unix epoch.
    pub due_at: i64,
    /// For a recurring schedule, its interval in milliseconds.
    pub every_ms: Option<i64>,
}

/// Decodes a state value for people: JSON when it is JSON.
pub fn state_to_json(bytes: Option<Vec<u8>>) -> serde_json::Value {
    match bytes {
        None => serde_json::Value::Null,
        Some(bytes) => serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| serde_json::json!({ "hex": hex::encode(&bytes) })),
    }
}

/// Inspects (`actor`, `key`) under the data directory `root`, read-only,
/// reading the actor's tables for at most `timeout`. Blocks: async code
/// calls it on a blocking thread.
pub fn inspect(
    root: &Path,
    actor: &str,
    key: &str,
    timeout: Duration,
) -> Result<Inspection, Error> {
    let (mut conn, created_at) = open(root, actor, key)?;
    let storage = |e: rusqlite::Error| storage(actor, key, e);
    let guest = GuestTables::new(&mut conn, timeout).map_err(storage)?;
    let state = state_to_json(read_state(&conn).map_err(storage)?);
    let mut tables = Vec::new();
    let mut budget = MAX_INSPECT_BYTES;
    for name in guest_table_names(&conn).map_err(storage)? {
        let dump = guest.dump(&conn, &name, 0, INSPECT_ROWS, &mut budget);
        let dump = dump.map_err(|e| e.into_error(actor, key, &name, timeout))?;
        tables.push(TableDump {
            name: dump.name,
            columns: dump.columns,
            rows: dump.rows,
            total_rows: dump.total_rows,
        });
    }
    let queue = read_queue(&conn).map_err(storage)?;
    let workflow = read_workflow(&conn).map_err(storage)?;
    let paused = conn.pause().get().map_err(storage)?;
    Ok(Inspection {
        actor: actor.into(),
        key: key.into(),
        created_at,
        paused,
        state,
        tables,
        queue,
        workflow,
    })
}

/// The actor's own tables of (`actor`, `key`) under the data directory
/// `root`, with their columns and row counts, read-only and bounded like
/// [`inspect`]. Blocks.
pub fn tables(
    root: &Path,
    actor: &str,
    key: &str,
    timeout: Duration,
) -> Result<Vec<TableSummary>, Error> {
    let (mut conn, _) = open(root, actor, key)?;
    let storage = |e: rusqlite::Error| storage(actor, key, e);
    let guest = GuestTables::new(&mut conn, timeout).map_err(storage)?;
    let mut tables = Vec::new();
    for name in guest_table_names(&conn).map_err(storage)? {
        let mut budget = MAX_INSPECT_BYTES;
        let page = guest.dump(&conn, &name, 0, 0, &mut budget);
        let page = page.map_err(|e| e.into_error(actor, key, &name, timeout))?;
        tables.push(TableSummary {
            name: page.name,
            columns: page.columns,
            total_rows: page.total_rows,
        });
    }
    Ok(tables)
}

/// Up to `limit` rows (at most [`MAX_TABLE_PAGE_ROWS`]) of the actor's
/// table `table` in (`actor`, `key`), from row `offset` on, read-only and
/// bounded like [`inspect`]. A table the actor does not have (the host's
/// own included) is [`Error::NoSuchTable`]. Blocks.
pub fn table_page(
    root: &Path,
    actor: &str,
    key: &str,
    table: &str,
    offset: u64,
    limit: usize,
    timeout: Duration,
) -> Result<TablePage, Error> {
    let (mut conn, _) = open(root, actor, key)?;
    let storage = |e: rusqlite::Error| storage(actor, key, e);
    let guest = GuestTables::new(&mut conn, timeout).map_err(storage)?;
    if !guest_table_names(&conn)
        .map_err(storage)?
        .iter()
        .any(|name| name == table)
    {
        return Err(Error::NoSuchTable {
            actor: actor.into(),
            key: key.into(),
            table: table.into(),
        });
    }
    let limit = limit.min(MAX_TABLE_PAGE_ROWS);
    let mut budget = MAX_INSPECT_BYTES;
    guest
        .dump(&conn, table, offset, limit, &mut budget)
        .map_err(|e| e.into_error(actor, key, table, timeout))
}

/// The pending schedules of (`actor`, `key`) under the data directory
/// `root`, soonest first, read-only.
pub fn schedules(root: &Path, actor: &str, key: &str) -> Result<ScheduleView, Error> {
    let (conn, _) = open(root, actor, key)?;
    let storage = |e: rusqlite::Error| storage(actor, key, e);
    let count = conn.schedules().count().map_err(storage)?;
    let schedules = conn
        .schedules()
        .first(INSPECT_ROWS)
        .map_err(storage)?
        .into_iter()
        .map(|s| ScheduleEntry {
            id: s.id,
            args: serde_json::from_str(&s.args).unwrap_or(serde_json::Value::String(s.args)),
            action: s.action,
            due_at: s.due_at,
            every_ms: s.every_ms,
        })
        .collect();
    Ok(ScheduleView { count, schedules })
}

/// The names of the actor's own tables, sorted: neither SQLite's nor the
/// host's.
fn guest_table_names(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let names: Vec<String> = conn
        .prepare(
            "SELECT name FROM main.sqlite_schema WHERE type = 'table' AND substr(name, 1, 7) <> 'sqlite_' ORDER BY name",
        )
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())?;
    Ok(names.into_iter().filter(|n| !is_internal(n)).collect())
}

/// The state value of (`actor`, `key`) under the data directory `root`, as
/// JSON, read-only.
pub fn state(root: &Path, actor: &str, key: &str) -> Result<serde_json::Value, Error> {
    let (conn, _) = open(root, actor, key)?;
    let state = read_state(&conn).map_err(|e| storage(actor, key, e))?;
    Ok(state_to_json(state))
}

/// The queue of (`actor`, `key`) under the data directory `root`, read-only;
/// `None` if the instance has no queue.
pub fn queue_view(root: &Path, actor: &str, key: &str) -> Result<Option<QueueView>, Error> {
    let (conn, _) = open(root, actor, key)?;
    read_queue(&conn).map_err(|e| storage(actor, key, e))
}

fn read_queue(conn: &Connection) -> rusqlite::Result<Option<QueueView>> {
    let policy = conn.queue().policy()?;
    if policy.is_none() && conn.workflow().record()?.is_none() {
        return Ok(None);
    }
    Ok(Some(QueueView {
        policy,
        pending_count: conn.queue().pending_count()?,
        pending: conn.queue().pending(INSPECT_ROWS)?,
        dead_letters: conn.queue().dead_letters(INSPECT_ROWS)?,
        error: None,
    }))
}

/// The workflow of (`actor`, `key`) under the data directory `root`, with
/// its history, read-only; `None` if the instance has no workflow.
pub fn workflow_view(root: &Path, actor: &str, key: &str) -> Result<Option<WorkflowView>, Error> {
    let (conn, _) = open(root, actor, key)?;
    read_workflow(&conn).map_err(|e| storage(actor, key, e))
}

/// The workflow's record alone (no history): `None` if the instance has
/// no workflow.
pub fn workflow_record(
    root: &Path,
    actor: &str,
    key: &str,
) -> Result<Option<WorkflowRecord>, Error> {
    let (conn, _) = open(root, actor, key)?;
    conn.workflow().record().map_err(|e| storage(actor, key, e))
}

fn read_workflow(conn: &Connection) -> rusqlite::Result<Option<WorkflowView>> {
    let Some(record) = conn.workflow().record()? else {
        return Ok(None);
    };
    Ok(Some(WorkflowView {
        record,
        history: conn.workflow().history(INSPECT_ROWS)?,
        history_len: conn.workflow().history_len()?,
        requests: conn.workflow().requests(INSPECT_ROWS)?,
    }))
}

fn storage(actor: &str, key: &str, e: rusqlite::Error) -> Error {
    Error::storage(actor, key, e.to_string())
}

/// Opens the instance's database read-only; returns it with the creation time.
fn open(root: &Path, actor: &str, key: &str) -> Result<(Connection, i64), Error> {
    validate_actor_name(actor)?;
    validate_key(key)?;
    crate::storage::open_read_only(root, actor, key)
        .map_err(|e| storage(actor, key, e))?
        .ok_or_else(|| Error::no_such_instance(actor, key))
}

/// Reads the actor's own tables under the bounds of guest SQL.
struct GuestTables {
    sandbox: Sandbox,
    deadline: Deadline,
    watch: Watch,
}

/// Why reading a table failed.
enum DumpFailure {
    Sqlite(rusqlite::Error, Option<HeapRefused>),
    TooLarge,
}

impl DumpFailure {
    fn into_error(self, actor: &str, key: &str, table: &str, timeout: Duration) -> Error {
        let limit = |message: String| Error::LimitExceeded {
            actor: actor.into(),
            key: key.into(),
            message: format!("inspecting table `{table}`: {message}"),
        };
        match self {
            DumpFailure::TooLarge => limit(format!(
                "the tables' values shown exceed {MAX_INSPECT_BYTES} bytes"
            )),
            DumpFailure::Sqlite(_, Some(HeapRefused::Memory)) => limit(format!(
                "a statement needed more than {MAX_STATEMENT_MEMORY} bytes of SQLite's heap"
            )),
            DumpFailure::Sqlite(e, refused)
                if refused == Some(HeapRefused::Deadline)
                    || e.sqlite_error_code() == Some(ErrorCode::OperationInterrupted) =>
            {
                Error::Timeout {
                    actor: actor.into(),
                    key: key.into(),
                    during: format!("inspect of table `{table}`"),
                    timeout_ms: timeout.as_millis(),
                }
            }
            DumpFailure::Sqlite(e, _) if e.sqlite_error_code() == Some(ErrorCode::TooBig) => limit(
                format!("a value or row is larger than {MAX_SQL_VALUE_BYTES} bytes"),
            ),
            DumpFailure::Sqlite(e, _) => storage(actor, key, e),
        }
    }
}

impl GuestTables {
    /// Fences `conn` like an instance connection and starts the deadline.
    fn new(conn: &mut Connection, timeout: Duration) -> rusqlite::Result<GuestTables> {
        let sandbox = Sandbox::default();
        sandbox.install(conn)?;
        let deadline = Deadline::default();
        deadline.start(timeout);
        // After the limits of guest SQL, set in `open`: the matchers read
        // the pattern limit.
        crate::storage::register_functions(conn, &deadline)?;
        let watch = Watch::new(conn, deadline.clone());
        let passed = deadline.clone();
        conn.progress_handler(1000, Some(move || passed.passed()))?;
        Ok(GuestTables {
            sandbox,
            deadline,
            watch,
        })
    }

    /// Up to `limit` rows of table `name` from row `offset` on, counting
    /// their values' bytes against `budget` before copying them.
    fn dump(
        &self,
        conn: &Connection,
        name: &str,
        offset: u64,
        limit: usize,
        budget: &mut usize,
    ) -> Result<TablePage, DumpFailure> {
        let _guest = self.sandbox.enter_guest();
        let _running = self.watch.running();
        let (dump, refused) = bounded_heap(MAX_STATEMENT_MEMORY, &self.deadline, || {
            dump_table(conn, name, offset, limit, budget)
        });
        dump.map_err(|failure| match failure {
            DumpFailure::Sqlite(e, _) => DumpFailure::Sqlite(e, refused),
            other => other,
        })
    }
}

fn dump_table(
    conn: &Connection,
    name: &str,
    offset: u64,
    limit: usize,
    budget: &mut usize,
) -> Result<TablePage, DumpFailure> {
    let sqlite = |e| DumpFailure::Sqlite(e, None);
    let quoted = format!("\"{}\"", name.replace('"', "\"\""));
    let total_rows = conn
        .query_row(&format!("SELECT count(*) FROM main.{quoted}"), [], |r| {
            r.get(0)
        })
        .map_err(sqlite)?;
    let mut stmt = conn
        .prepare(&format!(
            "SELECT * FROM main.{quoted} LIMIT {limit} OFFSET {offset}"
        ))
        .map_err(sqlite)?;
    let columns: Vec<String> = uncounted_heap(|| stmt.column_names().map(String::from).collect());
    let width = columns.len();
    let mut rows = Vec::new();
    let mut cursor = stmt.raw_query();
    while let Some(row) = cursor.next().map_err(sqlite)? {
        let mut values = Vec::with_capacity(width);
        for i in 0..width {
            // As for guest SQL: a zeroblob is expanded here, bounded by
            // the length limit, and counted before it is copied.
            let value = uncounted_heap(|| row.get_ref(i)).map_err(sqlite)?;
            let size = match value {
                ValueRef::Text(t) => t.len(),
                ValueRef::Blob(b) => b.len(),
                _ => 0,
            } + 8;
            *budget = budget.checked_sub(size).ok_or(DumpFailure::TooLarge)?;
            values.push(value_to_json(value));
        }
        rows.push(values);
    }
    Ok(TablePage {
        name: name.into(),
        columns,
        rows,
        total_rows,
        offset,
        limit,
    })
}

fn value_to_json(value: ValueRef<'_>) -> serde_json::Value {
    match value {
        ValueRef::Null => serde_json::Value::Null,
        ValueRef::Integer(i) => i.into(),
        ValueRef::Real(r) => r.into(),
        ValueRef::Text(t) => String::from_utf8_lossy(t).into(),
        ValueRef::Blob(b) => serde_json::json!({ "hex": hex::encode(b) }),
    }
}
