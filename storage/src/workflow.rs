//! The workflow's tables in an instance database, and every statement on
//! them.
//!
//! `_burrow_workflow` holds the one workflow of the instance: its input,
//! status and what it waits for. `_burrow_workflow_history` holds one entry
//! per position the run reached (a step, a sleep, a recorded time, a loop,
//! a join, a queue wait), keyed by that position's location: `3` for the
//! fourth position of the run, `3/17/0` for the first position of
//! iteration 17 of the loop at `3`, `5/1/2` for the third position of
//! branch 1 of the join at `5`. A step's entry is written in the
//! transaction that commits the step's own writes.
//!
//! A step's entry also holds the outgoing HTTP requests of its attempts
//! (method, authority, status, outcome, duration), written with the entry
//! of the attempt that sent them, the last [`MAX_STEP_REQUESTS`] of the
//! step: the inspector's timeline shows them. They are in the entry's own
//! row (its `requests` column), so a step that sent a request writes no
//! page besides its entry's for them. Instances made before that column
//! get it when a step first records a request, and may hold earlier
//! requests in a table of their own (`_burrow_workflow_requests`), which
//! is read beside the column and emptied step by step as steps retry.

use super::sandbox::{has_host_table, host_statement};
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::Serialize;

/// The workflow's internal tables.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS main._burrow_workflow (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    status TEXT NOT NULL,
    input TEXT NOT NULL,
    output TEXT,
    error TEXT,
    wake_at INTEGER,
    waiting_on TEXT,
    runs INTEGER NOT NULL DEFAULT 0,
    started_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS main._burrow_workflow_history (
    seq INTEGER PRIMARY KEY,
    location TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    output TEXT,
    failure_kind TEXT,
    error_code TEXT,
    error TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    wake_at INTEGER,
    updated_at INTEGER NOT NULL,
    requests TEXT
);
";

/// Adds the `requests` column to the history of an instance made before
/// it.
const ADD_REQUESTS_COLUMN: &str =
    "ALTER TABLE main._burrow_workflow_history ADD COLUMN requests TEXT";

/// At most this many outgoing requests of one step are recorded per
/// attempt, and kept per step (the last ones).
pub const MAX_STEP_REQUESTS: usize = 32;

/// The table where instances of before the history's `requests` column
/// kept the requests of steps (`seq`, `location`, then the columns of
/// [`StepRequestRow`]). Nothing writes it now; it is read, and a step's
/// rows move to the step's entry when the step retries.
const OLD_REQUESTS_TABLE: &str = "_burrow_workflow_requests";

/// That table, as those instances have it (an imported copy of one gets
/// it from here, `transfer.rs`).
pub(crate) const OLD_REQUESTS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS main._burrow_workflow_requests (
    seq INTEGER PRIMARY KEY,
    location TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    method TEXT NOT NULL,
    authority TEXT NOT NULL,
    status INTEGER,
    outcome TEXT NOT NULL,
    duration_ms INTEGER,
    at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS main._burrow_workflow_requests_location
    ON _burrow_workflow_requests (location, seq);
";

/// One outgoing request of a step's attempt, as the workflow view shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepRequestRow {
    /// The attempt that sent it.
    pub attempt: i64,
    /// `GET`, `POST`, ...
    pub method: String,
    /// `scheme://host[:port]`.
    pub authority: String,
    /// The answer's status, if one came.
    pub status: Option<i64>,
    /// `answered`, `denied`, `timeout`, `too-large`, `failed`, ... or
    /// `in-flight` (the step ended before it did).
    pub outcome: String,
    /// From the request to its answer's head, or to its failure.
    pub duration_ms: Option<i64>,
    /// When the attempt that sent it ended (ms since the Unix epoch).
    pub at: i64,
}

/// A step's requests as its entry's `requests` column holds them: a JSON
/// array of `[attempt, method, authority, status, outcome, duration_ms,
/// at]`, shorter than objects and apart from the names the views show.
type StoredRequest = (i64, String, String, Option<i64>, String, Option<i64>, i64);

/// `rows` as the `requests` column holds them.
fn to_column(rows: &[StepRequestRow]) -> rusqlite::Result<String> {
    let stored: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.attempt,
                &r.method,
                &r.authority,
                r.status,
                &r.outcome,
                r.duration_ms,
                r.at,
            )
        })
        .collect();
    serde_json::to_string(&stored).map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))
}

/// The rows a `requests` column holds.
fn from_column(text: &str) -> rusqlite::Result<Vec<StepRequestRow>> {
    let stored: Vec<StoredRequest> = serde_json::from_str(text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, e.into())
    })?;
    Ok(stored
        .into_iter()
        .map(
            |(attempt, method, authority, status, outcome, duration_ms, at)| StepRequestRow {
                attempt,
                method,
                authority,
                status,
                outcome,
                duration_ms,
                at,
            },
        )
        .collect())
}

/// Whether the history has its `requests` column (looked up without a
/// statement, in the schema the connection holds).
fn has_requests_column(conn: &Connection) -> rusqlite::Result<bool> {
    conn.column_exists(Some("main"), "_burrow_workflow_history", "requests")
}

/// Adds the history's `requests` column. The schema a connection holds
/// can be older than the file's (another connection changed the file
/// since this one last read it), so the column may be there already: the
/// `ALTER` then fails with SQLite's "duplicate column name", the answer
/// wanted.
fn add_requests_column(conn: &Connection) -> rusqlite::Result<()> {
    match conn.execute_batch(ADD_REQUESTS_COLUMN) {
        Err(
            rusqlite::Error::SqliteFailure(_, Some(msg))
            | rusqlite::Error::SqlInputError { msg, .. },
        ) if msg.starts_with("duplicate column name") => Ok(()),
        other => other,
    }
}

/// The requests the old table holds for the step at `location`, or
/// without one for the first `history_limit` entries of the history, by
/// location, oldest first.
fn old_requests(
    conn: &Connection,
    location: Option<&str>,
    history_limit: usize,
) -> rusqlite::Result<Vec<(String, StepRequestRow)>> {
    if !has_host_table(conn, OLD_REQUESTS_TABLE)? {
        return Ok(Vec::new());
    }
    let mut select = host_statement(
        conn,
        "SELECT location, attempt, method, authority, status, outcome, duration_ms, at
         FROM main._burrow_workflow_requests WHERE location IN
         (SELECT location FROM main._burrow_workflow_history
          WHERE ?1 IS NULL OR location = ?1 ORDER BY seq LIMIT ?2)
         ORDER BY seq",
    )?;
    select
        .query_map(params![location, history_limit as i64], |r| {
            Ok((
                r.get::<_, String>(0)?,
                StepRequestRow {
                    attempt: r.get(1)?,
                    method: r.get(2)?,
                    authority: r.get(3)?,
                    status: r.get(4)?,
                    outcome: r.get(5)?,
                    duration_ms: r.get(6)?,
                    at: r.get(7)?,
                },
            ))
        })?
        .collect()
}

/// Where a workflow is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkflowStatus {
    /// It has work to do now.
    Running,
    /// It waits for a time (a sleep, a retry's backoff).
    Waiting,
    /// It finished with an output.
    Completed,
    /// It failed for good.
    Failed,
    /// Its code no longer matches its history.
    Diverged,
}

impl WorkflowStatus {
    /// The status as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowStatus::Running => "running",
            WorkflowStatus::Waiting => "waiting",
            WorkflowStatus::Completed => "completed",
            WorkflowStatus::Failed => "failed",
            WorkflowStatus::Diverged => "diverged",
        }
    }

    fn parse(s: &str) -> WorkflowStatus {
        match s {
            "waiting" => WorkflowStatus::Waiting,
            "completed" => WorkflowStatus::Completed,
            "failed" => WorkflowStatus::Failed,
            "diverged" => WorkflowStatus::Diverged,
            _ => WorkflowStatus::Running,
        }
    }

    /// Whether the workflow will not run again.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            WorkflowStatus::Completed | WorkflowStatus::Failed | WorkflowStatus::Diverged
        )
    }
}

/// The workflow of an instance, as recorded.
#[derive(Debug, Clone, Serialize)]
pub struct WorkflowRecord {
    /// Where the workflow is.
    pub status: WorkflowStatus,
    /// The create input, JSON text.
    pub input: String,
    /// The output (JSON text) once completed.
    pub output: Option<String>,
    /// Why it failed or diverged.
    pub error: Option<String>,
    /// When it runs next while waiting (ms since the Unix epoch).
    pub wake_at: Option<i64>,
    /// What it waits for, for people.
    pub waiting_on: Option<String>,
    /// Runs so far (each replays from the start).
    pub runs: i64,
    /// When the workflow started (ms since the Unix epoch).
    pub started_at: i64,
    /// When a run last ended (ms since the Unix epoch).
    pub updated_at: i64,
}

/// What a history entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryKind {
    /// A step.
    Step,
    /// A durable sleep.
    Sleep,
    /// A recorded time (`workflow.now`).
    Now,
    /// A loop: its next iteration and carried state, or its output.
    Loop,
    /// A join of branches.
    Join,
    /// A race of branches: its winner once recorded.
    Race,
    /// A queue wait: the events it took.
    Queue,
    /// A recorded code version.
    Version,
}

impl EntryKind {
    /// The kind as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Step => "step",
            EntryKind::Sleep => "sleep",
            EntryKind::Now => "now",
            EntryKind::Loop => "loop",
            EntryKind::Join => "join",
            EntryKind::Race => "race",
            EntryKind::Queue => "queue",
            EntryKind::Version => "version",
        }
    }

    fn parse(s: &str) -> EntryKind {
        match s {
            "sleep" => EntryKind::Sleep,
            "now" => EntryKind::Now,
            "loop" => EntryKind::Loop,
            "join" => EntryKind::Join,
            "race" => EntryKind::Race,
            "queue" => EntryKind::Queue,
            "version" => EntryKind::Version,
            _ => EntryKind::Step,
        }
    }
}

/// Where a history entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryStatus {
    /// Finished: a step committed, a sleep is over, a time was recorded.
    Done,
    /// A step failed for good.
    Failed,
    /// A step failed and waits for its retry.
    Retrying,
    /// A sleep is not over, or a queue wait has no event yet.
    Sleeping,
    /// A loop or a join that has not finished.
    Running,
}

impl EntryStatus {
    /// The status as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryStatus::Done => "done",
            EntryStatus::Failed => "failed",
            EntryStatus::Retrying => "retrying",
            EntryStatus::Sleeping => "sleeping",
            EntryStatus::Running => "running",
        }
    }

    fn parse(s: &str) -> EntryStatus {
        match s {
            "failed" => EntryStatus::Failed,
            "retrying" => EntryStatus::Retrying,
            "sleeping" => EntryStatus::Sleeping,
            "running" => EntryStatus::Running,
            _ => EntryStatus::Done,
        }
    }
}

/// One position of the workflow's history.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryEntry {
    /// Its place in the run (see the module's documentation).
    pub location: String,
    /// What it records.
    pub kind: EntryKind,
    /// The step's or sleep's name (`now` for a time).
    pub name: String,
    /// Where it is.
    pub status: EntryStatus,
    /// A step's or loop's output (JSON text), a recorded time, a loop's
    /// carried state, a race's winner, a queue wait's events, a version.
    pub output: Option<String>,
    /// For a failed step: `critical`, `timeout` or `exhausted`.
    pub failure_kind: Option<String>,
    /// The code of a failed step's last error.
    pub error_code: Option<String>,
    /// The last error of a step that failed at least once.
    pub error: Option<String>,
    /// Attempts of a step that ran (committed or failed); a loop's next
    /// iteration.
    pub attempts: i64,
    /// A sleep's end, a queue wait's timeout, or when a failed step is
    /// retried.
    pub wake_at: Option<i64>,
    /// When it was last written (ms since the Unix epoch).
    pub updated_at: i64,
}

/// The workflow's tables, through one connection to the instance's
/// database (`conn.workflow()`: see [`HostTables`](super::HostTables)).
pub struct WorkflowTables<'c> {
    conn: &'c Connection,
}

impl<'c> WorkflowTables<'c> {
    pub(crate) fn of(conn: &'c Connection) -> Self {
        WorkflowTables { conn }
    }
}

impl WorkflowTables<'_> {
    /// Records the requests an attempt of the step at `location` sent in
    /// the step's entry (written before), and keeps the step's last
    /// [`MAX_STEP_REQUESTS`].
    pub fn record_requests(&self, location: &str, rows: &[StepRequestRow]) -> rusqlite::Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        if !has_requests_column(self.conn)? {
            add_requests_column(self.conn)?;
        }
        // A first attempt finds none of its step's before it (an attempt
        // that did not end rolled its own back), and sends at most the
        // limit; a retry adds to those of the attempts before it.
        let first_attempt = rows.iter().all(|r| r.attempt <= 1);
        let column = if first_attempt && rows.len() <= MAX_STEP_REQUESTS {
            to_column(rows)?
        } else {
            let mut kept = self.requests_of(location)?;
            kept.extend_from_slice(rows);
            let older = kept.len().saturating_sub(MAX_STEP_REQUESTS);
            kept.drain(..older);
            if has_host_table(self.conn, OLD_REQUESTS_TABLE)? {
                host_statement(
                    self.conn,
                    "DELETE FROM main._burrow_workflow_requests WHERE location = ?",
                )?
                .execute([location])?;
            }
            to_column(&kept)?
        };
        host_statement(
            self.conn,
            "UPDATE main._burrow_workflow_history SET requests = ? WHERE location = ?",
        )?
        .execute(params![column, location])?;
        Ok(())
    }

    /// The requests recorded for the step at `location`, oldest first.
    fn requests_of(&self, location: &str) -> rusqlite::Result<Vec<StepRequestRow>> {
        let mut rows: Vec<StepRequestRow> = old_requests(self.conn, Some(location), 1)?
            .into_iter()
            .map(|(_, row)| row)
            .collect();
        let column: Option<String> = host_statement(
            self.conn,
            "SELECT requests FROM main._burrow_workflow_history WHERE location = ?",
        )?
        .query_row([location], |r| r.get(0))
        .optional()?
        .flatten();
        if let Some(text) = column {
            rows.extend(from_column(&text)?);
        }
        Ok(rows)
    }

    /// The recorded requests of the first `limit` entries of the history, by
    /// location, in the order they were sent.
    pub fn requests(
        &self,
        limit: usize,
    ) -> rusqlite::Result<std::collections::BTreeMap<String, Vec<StepRequestRow>>> {
        let mut by_location = std::collections::BTreeMap::<String, Vec<StepRequestRow>>::new();
        for (location, row) in old_requests(self.conn, None, limit)? {
            by_location.entry(location).or_default().push(row);
        }
        if !has_requests_column(self.conn)? {
            return Ok(by_location);
        }
        let mut select = host_statement(
            self.conn,
            "SELECT location, requests FROM
             (SELECT location, requests FROM main._burrow_workflow_history ORDER BY seq LIMIT ?)
             WHERE requests IS NOT NULL",
        )?;
        let columns = select.query_map([limit as i64], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        for column in columns {
            let (location, text) = column?;
            by_location
                .entry(location)
                .or_default()
                .extend(from_column(&text)?);
        }
        Ok(by_location)
    }

    /// Whether the workflow's tables exist.
    pub fn has_schema(&self) -> rusqlite::Result<bool> {
        host_statement(
            self.conn,
            "SELECT 1 FROM main.sqlite_schema WHERE type = 'table' AND name = '_burrow_workflow'",
        )?
        .exists([])
    }

    /// Records a new workflow with `input`, running now.
    pub fn start(&self, input: &str, now: i64) -> rusqlite::Result<()> {
        host_statement(
            self.conn,
            "INSERT OR IGNORE INTO main._burrow_workflow (id, status, input, started_at, updated_at)
             VALUES (1, 'running', ?1, ?2, ?2)",
        )?
        .execute(params![input, now])?;
        Ok(())
    }

    /// The instance's workflow, if it has one.
    pub fn record(&self) -> rusqlite::Result<Option<WorkflowRecord>> {
        if !self.has_schema()? {
            return Ok(None);
        }
        host_statement(
            self.conn,
            "SELECT status, input, output, error, wake_at, waiting_on, runs, started_at, updated_at
             FROM main._burrow_workflow WHERE id = 1",
        )?
        .query_row([], record_from_row)
        .optional()
    }

    /// Records how a run ended.
    pub fn set_status(
        &self,
        status: WorkflowStatus,
        output: Option<&str>,
        error: Option<&str>,
        wait: Option<(Option<i64>, &str)>,
        now: i64,
    ) -> rusqlite::Result<()> {
        host_statement(
            self.conn,
            "UPDATE main._burrow_workflow
             SET status = ?, output = ?, error = ?, wake_at = ?, waiting_on = ?,
                 runs = runs + 1, updated_at = ?
             WHERE id = 1",
        )?
        .execute(params![
            status.as_str(),
            output,
            error,
            wait.and_then(|w| w.0),
            wait.map(|w| w.1),
            now
        ])?;
        Ok(())
    }

    /// The entry at `location`, if the run reached it before.
    pub fn entry(&self, location: &str) -> rusqlite::Result<Option<HistoryEntry>> {
        host_statement(
            self.conn,
            &format!(
                "SELECT {ENTRY_COLUMNS} FROM main._burrow_workflow_history WHERE location = ?"
            ),
        )?
        .query_row([location], entry_from_row)
        .optional()
    }

    /// Writes the entry at its location, replacing what was there (and keeping
    /// its place in the order).
    pub fn put_entry(&self, e: &HistoryEntry) -> rusqlite::Result<()> {
        host_statement(
            self.conn,
            &format!(
                "INSERT INTO main._burrow_workflow_history ({ENTRY_COLUMNS})
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT (location) DO UPDATE SET
                 kind = excluded.kind, name = excluded.name, status = excluded.status,
                 output = excluded.output, failure_kind = excluded.failure_kind,
                 error_code = excluded.error_code, error = excluded.error,
                 attempts = excluded.attempts, wake_at = excluded.wake_at,
                 updated_at = excluded.updated_at"
            ),
        )?
        .execute(params![
            e.location,
            e.kind.as_str(),
            e.name,
            e.status.as_str(),
            e.output,
            e.failure_kind,
            e.error_code,
            e.error,
            e.attempts,
            e.wake_at,
            e.updated_at
        ])?;
        Ok(())
    }

    /// The first `limit` entries of the history, in order.
    pub fn history(&self, limit: usize) -> rusqlite::Result<Vec<HistoryEntry>> {
        host_statement(
            self.conn,
            &format!(
                "SELECT {ENTRY_COLUMNS} FROM main._burrow_workflow_history ORDER BY seq LIMIT ?"
            ),
        )?
        .query_map([limit as i64], entry_from_row)?
        .collect()
    }

    /// Deletes the entries under `prefix` (a location followed by `/`),
    /// except those under `keep` (another such prefix).
    pub fn delete_under(&self, prefix: &str, keep: Option<&str>) -> rusqlite::Result<usize> {
        // Locations hold digits and `/` only, so the prefixes need no escaping.
        if has_host_table(self.conn, OLD_REQUESTS_TABLE)? {
            host_statement(
                self.conn,
                "DELETE FROM main._burrow_workflow_requests
                 WHERE location LIKE ?1 || '%' AND (?2 IS NULL OR location NOT LIKE ?2 || '%')",
            )?
            .execute(params![prefix, keep])?;
        }
        host_statement(
            self.conn,
            "DELETE FROM main._burrow_workflow_history
             WHERE location LIKE ?1 || '%' AND (?2 IS NULL OR location NOT LIKE ?2 || '%')",
        )?
        .execute(params![prefix, keep])
    }

    /// Whether an entry under `prefix` has not finished: a sleep or queue
    /// wait not over, a step waiting for its retry, a loop or join still
    /// running.
    pub fn unfinished_under(&self, prefix: &str) -> rusqlite::Result<bool> {
        // Locations hold digits and `/` only, so the prefix needs no escaping.
        host_statement(
            self.conn,
            "SELECT EXISTS (SELECT 1 FROM main._burrow_workflow_history
             WHERE location LIKE ?1 || '%' AND status IN ('sleeping', 'retrying', 'running'))",
        )?
        .query_row([prefix], |r| r.get(0))
    }

    /// Entries in the history.
    pub fn history_len(&self) -> rusqlite::Result<i64> {
        host_statement(
            self.conn,
            "SELECT count(*) FROM main._burrow_workflow_history",
        )?
        .query_row([], |r| r.get(0))
    }
}

fn record_from_row(r: &Row<'_>) -> rusqlite::Result<WorkflowRecord> {
    Ok(WorkflowRecord {
        status: WorkflowStatus::parse(&r.get::<_, String>(0)?),
        input: r.get(1)?,
        output: r.get(2)?,
        error: r.get(3)?,
        wake_at: r.get(4)?,
        waiting_on: r.get(5)?,
        runs: r.get(6)?,
        started_at: r.get(7)?,
        updated_at: r.get(8)?,
    })
}

fn entry_from_row(r: &Row<'_>) -> rusqlite::Result<HistoryEntry> {
    Ok(HistoryEntry {
        location: r.get(0)?,
        kind: EntryKind::parse(&r.get::<_, String>(1)?),
        name: r.get(2)?,
        status: EntryStatus::parse(&r.get::<_, String>(3)?),
        output: r.get(4)?,
        failure_kind: r.get(5)?,
        error_code: r.get(6)?,
        error: r.get(7)?,
        attempts: r.get(8)?,
        wake_at: r.get(9)?,
        updated_at: r.get(10)?,
    })
}

const ENTRY_COLUMNS: &str = "location, kind, name, status, output, failure_kind, error_code, \
                             error, attempts, wake_at, updated_at";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostTables;

    fn db() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        conn
    }

    /// The entry of step `charge` at `location`, after its first attempt.
    fn step_entry(location: &str, status: EntryStatus) -> HistoryEntry {
        HistoryEntry {
            location: location.into(),
            kind: EntryKind::Step,
            name: "charge".into(),
            status,
            output: None,
            failure_kind: None,
            error_code: None,
            error: None,
            attempts: 1,
            wake_at: None,
            updated_at: 1,
        }
    }

    /// A POST of attempt `attempt` to 127.0.0.1:9, answered with `status`.
    fn request(attempt: i64, status: Option<i64>, at: i64) -> StepRequestRow {
        StepRequestRow {
            attempt,
            method: "POST".into(),
            authority: "http://127.0.0.1:9".into(),
            status,
            outcome: "answered".into(),
            duration_ms: Some(2),
            at,
        }
    }

    #[test]
    fn a_steps_requests_are_kept_by_location_the_last_ones_only() {
        let conn = db();
        assert!(conn.workflow().requests(10).unwrap().is_empty());
        for location in ["0", "1/3/0"] {
            let mut e = step_entry(location, EntryStatus::Done);
            conn.workflow().put_entry(&e).unwrap();
            e.attempts = 2;
            conn.workflow().put_entry(&e).unwrap();
        }
        let row = |attempt: i64, status: Option<i64>| request(attempt, status, 5);
        conn.workflow()
            .record_requests("0", &[row(1, Some(500))])
            .unwrap();
        let many: Vec<StepRequestRow> = (0..40).map(|_| row(2, Some(200))).collect();
        conn.workflow().record_requests("0", &many).unwrap();
        conn.workflow()
            .record_requests("1/3/0", &[row(1, None)])
            .unwrap();
        let by_location = conn.workflow().requests(10).unwrap();
        assert_eq!(by_location["0"].len(), MAX_STEP_REQUESTS);
        assert!(by_location["0"].iter().all(|r| r.attempt == 2));
        assert_eq!(by_location["1/3/0"], [row(1, None)]);
        // A loop's iterations deleted take their requests with them.
        conn.workflow().delete_under("1/", None).unwrap();
        let by_location = conn.workflow().requests(10).unwrap();
        assert!(!by_location.contains_key("1/3/0"));
        assert!(by_location.contains_key("0"));
    }

    /// The history and the requests' table as instances made before the
    /// `requests` column have them.
    const OLD_SCHEMA: &str = "
        CREATE TABLE main._burrow_workflow_history (
            seq INTEGER PRIMARY KEY,
            location TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL,
            name TEXT NOT NULL,
            status TEXT NOT NULL,
            output TEXT,
            failure_kind TEXT,
            error_code TEXT,
            error TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            wake_at INTEGER,
            updated_at INTEGER NOT NULL
        );
    ";

    /// A database with the old schema, and a connection to it.
    fn old_file() -> (tempfile::TempDir, std::path::PathBuf, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.sqlite");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(OLD_SCHEMA).unwrap();
        conn.execute_batch(OLD_REQUESTS_SCHEMA).unwrap();
        (dir, path, conn)
    }

    #[test]
    fn requests_of_an_instance_made_before_the_column_are_read_and_kept() {
        let (_dir, path, conn) = old_file();
        let entry = |location: &str| step_entry(location, EntryStatus::Retrying);
        // As the old rows below hold them.
        let row = |attempt: i64, at: i64| request(attempt, Some(503), at);
        conn.workflow().put_entry(&entry("0")).unwrap();
        conn.workflow().put_entry(&entry("1")).unwrap();
        for (location, at) in [("0", 10), ("0", 11), ("1", 12)] {
            conn.execute(
                "INSERT INTO _burrow_workflow_requests
                 (location, attempt, method, authority, status, outcome, duration_ms, at)
                 VALUES (?, 1, 'POST', 'http://127.0.0.1:9', 503, 'answered', 2, ?)",
                params![location, at],
            )
            .unwrap();
        }
        let old = |conn: &Connection| conn.workflow().requests(10).unwrap();
        let before = old(&conn);
        assert_eq!(before["0"], [row(1, 10), row(1, 11)]);
        assert_eq!(before["1"], [row(1, 12)]);
        // A reader of the old file sees the same, without the column.
        let reader =
            Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        assert_eq!(old(&reader), before);

        // Step 0 retries: its old rows move to its entry, after which
        // come the retry's own; step 1's stay where they were.
        conn.workflow().record_requests("0", &[row(2, 20)]).unwrap();
        let after = old(&conn);
        assert_eq!(after["0"], [row(1, 10), row(1, 11), row(2, 20)]);
        assert_eq!(after["1"], [row(1, 12)]);
        let left: i64 = conn
            .query_row("SELECT count(*) FROM _burrow_workflow_requests", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(left, 1);
        // A new step's requests go to its entry.
        conn.workflow().put_entry(&entry("2")).unwrap();
        conn.workflow().record_requests("2", &[row(1, 30)]).unwrap();
        assert_eq!(old(&conn)["2"], [row(1, 30)]);
        // Deleting a step's entries takes both kinds of rows with them.
        conn.workflow().delete_under("", Some("2")).unwrap();
        assert_eq!(old(&conn).keys().collect::<Vec<_>>(), ["2"]);
    }

    #[test]
    fn a_connection_behind_the_file_finds_the_requests_column_there() {
        let (_dir, path, behind) = old_file();
        behind
            .workflow()
            .put_entry(&step_entry("0", EntryStatus::Done))
            .unwrap();
        // Another connection adds the column; the first one's schema in
        // memory does not have it until it reads the file again.
        Connection::open(&path)
            .unwrap()
            .execute_batch(ADD_REQUESTS_COLUMN)
            .unwrap();
        assert!(!has_requests_column(&behind).unwrap());
        let row = request(1, Some(200), 2);
        behind
            .workflow()
            .record_requests("0", std::slice::from_ref(&row))
            .unwrap();
        assert_eq!(behind.workflow().requests(10).unwrap()["0"], [row]);
        // Any other failure of the `ALTER` is still one.
        behind
            .execute_batch("DROP TABLE _burrow_workflow_history")
            .unwrap();
        assert!(add_requests_column(&behind).is_err());
    }

    #[test]
    fn a_workflow_starts_once_and_records_its_runs() {
        let conn = db();
        conn.workflow().start("{\"a\":1}", 10).unwrap();
        conn.workflow().start("other", 11).unwrap();
        let r = conn.workflow().record().unwrap().unwrap();
        assert_eq!(
            (r.status, r.input.as_str(), r.runs),
            (WorkflowStatus::Running, "{\"a\":1}", 0)
        );
        conn.workflow()
            .set_status(
                WorkflowStatus::Waiting,
                None,
                None,
                Some((Some(50), "sleep `s`")),
                12,
            )
            .unwrap();
        let r = conn.workflow().record().unwrap().unwrap();
        assert_eq!(
            (r.status, r.wake_at, r.runs),
            (WorkflowStatus::Waiting, Some(50), 1)
        );
        assert_eq!(r.waiting_on.as_deref(), Some("sleep `s`"));
    }

    #[test]
    fn entries_are_kept_by_position() {
        let conn = db();
        let mut e = HistoryEntry {
            location: "0".into(),
            kind: EntryKind::Step,
            name: "a".into(),
            status: EntryStatus::Retrying,
            output: None,
            failure_kind: None,
            error_code: Some("x".into()),
            error: Some("boom".into()),
            attempts: 1,
            wake_at: Some(5),
            updated_at: 1,
        };
        conn.workflow().put_entry(&e).unwrap();
        e.status = EntryStatus::Done;
        e.output = Some("1".into());
        e.attempts = 2;
        conn.workflow().put_entry(&e).unwrap();
        let got = conn.workflow().entry("0").unwrap().unwrap();
        assert_eq!((got.status, got.attempts), (EntryStatus::Done, 2));
        assert!(conn.workflow().entry("1").unwrap().is_none());
        assert_eq!(conn.workflow().history(10).unwrap().len(), 1);
        for location in ["1", "1/0/0", "1/0/1", "1/1/0", "1/10/0", "10/0/0"] {
            e.location = location.into();
            conn.workflow().put_entry(&e).unwrap();
        }
        // The first entry keeps its place after an update.
        assert_eq!(conn.workflow().history(10).unwrap()[0].location, "0");
        assert_eq!(conn.workflow().delete_under("1/1/", None).unwrap(), 1);
        assert_eq!(conn.workflow().delete_under("1/", Some("1/0/")).unwrap(), 1);
        let left: Vec<String> = conn
            .workflow()
            .history(10)
            .unwrap()
            .into_iter()
            .map(|e| e.location)
            .collect();
        assert_eq!(left, ["0", "1", "1/0/0", "1/0/1", "10/0/0"]);
    }

    #[test]
    fn a_scope_is_unfinished_while_an_entry_under_it_is() {
        let conn = db();
        let put = |location: &str, status: EntryStatus| {
            let e = HistoryEntry {
                location: location.into(),
                kind: EntryKind::Step,
                name: "s".into(),
                status,
                output: None,
                failure_kind: None,
                error_code: None,
                error: None,
                attempts: 0,
                wake_at: None,
                updated_at: 1,
            };
            conn.workflow().put_entry(&e).unwrap();
        };
        put("1", EntryStatus::Running);
        put("1/0/0", EntryStatus::Done);
        put("1/1/0", EntryStatus::Failed);
        put("10/0/0", EntryStatus::Sleeping);
        // Not the scope's own entry, nor a neighbour whose location
        // starts with the same digit.
        assert!(!conn.workflow().unfinished_under("1/").unwrap());
        for status in [
            EntryStatus::Sleeping,
            EntryStatus::Retrying,
            EntryStatus::Running,
        ] {
            put("1/1/1", status);
            assert!(
                conn.workflow().unfinished_under("1/").unwrap(),
                "{status:?}"
            );
        }
        put("1/1/1", EntryStatus::Done);
        assert!(!conn.workflow().unfinished_under("1/").unwrap());
    }
}
