//! The queue's tables in an instance database, and every statement on them.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::{DeadLetter, NewEvent, QueueMode, QueuePolicy, QueuedEvent};
use crate::sandbox::host_statement;

/// The tables of the queue's events, made by an instance's first append
/// (in its transaction), or at the start of a workflow. Until then the
/// instance's queue is empty: every reader here answers so (see [`or_empty`]).
pub const EVENTS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS main._burrow_queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    priority INTEGER NOT NULL,
    grp TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    not_before INTEGER NOT NULL DEFAULT 0,
    last_error TEXT
);
CREATE INDEX IF NOT EXISTS main._burrow_queue_order ON _burrow_queue (priority, created_at, id);
CREATE INDEX IF NOT EXISTS main._burrow_queue_group_fifo ON _burrow_queue (grp, priority, created_at, id);
CREATE INDEX IF NOT EXISTS main._burrow_queue_group_lifo ON _burrow_queue (grp, priority, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS main._burrow_queue_retry ON _burrow_queue (not_before);
CREATE TABLE IF NOT EXISTS main._burrow_dead_letter (
    id INTEGER PRIMARY KEY,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    priority INTEGER NOT NULL,
    grp TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    failed_at INTEGER NOT NULL,
    error TEXT NOT NULL
);
";

/// The table of the queue's policy, made when an instance records one.
pub const POLICY_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS main._burrow_queue_policy (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    mode TEXT NOT NULL,
    concurrency INTEGER
);
";

const EVENT_COLUMNS: &str =
    "id, type, payload, priority, grp, created_at, attempts, not_before, last_error";

/// Whether `e` says that one of the queue's tables does not exist (yet).
fn absent(e: &rusqlite::Error) -> bool {
    match e {
        rusqlite::Error::SqliteFailure(_, Some(msg))
        | rusqlite::Error::SqlInputError { msg, .. } => [
            "_burrow_queue",
            "_burrow_dead_letter",
            "_burrow_queue_policy",
        ]
        .iter()
        .any(|table| msg.starts_with(&format!("no such table: main.{table}"))),
        _ => false,
    }
}

/// `read`'s answer, or the answer of an empty queue (no events, no dead
/// letters, no policy) if the queue's tables are not made yet. The tables
/// are made lazily, so that an instance that never uses its queue does
/// not carry them; asking whether they exist before every read would cost
/// each read a query, where a missing table costs only the failed prepare.
fn or_empty<T: Default>(read: impl FnOnce() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    match read() {
        Err(e) if absent(&e) => Ok(T::default()),
        other => other,
    }
}

fn group_of(stored: String) -> Option<String> {
    if stored.is_empty() {
        None
    } else {
        Some(stored)
    }
}

fn event(row: &Row) -> rusqlite::Result<QueuedEvent> {
    Ok(QueuedEvent {
        id: row.get(0)?,
        event_type: row.get(1)?,
        payload: row.get(2)?,
        priority: row.get(3)?,
        group: group_of(row.get(4)?),
        created_at: row.get(5)?,
        attempts: row.get(6)?,
        not_before: row.get(7)?,
        last_error: row.get(8)?,
    })
}

/// Why an append failed.
#[derive(Debug)]
pub enum AppendError {
    /// The queue holds its limit of pending events.
    Full(u64),
    Sqlite(rusqlite::Error),
}

impl From<rusqlite::Error> for AppendError {
    fn from(e: rusqlite::Error) -> Self {
        AppendError::Sqlite(e)
    }
}

/// What became of a failed event.
#[derive(Debug, Clone, PartialEq)]
pub enum AfterFailure {
    /// It will be retried at this time (ms since the Unix epoch).
    Retry(i64),
    /// It moved to the dead-letter table.
    DeadLettered,
    /// It is no longer pending (deleted meanwhile).
    Gone,
}

/// The queue's tables, through one connection to the instance's database
/// (`conn.queue()`: see [`HostTables`](crate::HostTables)).
pub struct QueueTables<'c> {
    conn: &'c Connection,
}

impl<'c> QueueTables<'c> {
    pub(crate) fn of(conn: &'c Connection) -> Self {
        QueueTables { conn }
    }
}

impl QueueTables<'_> {
    /// Whether the tables of the queue's events exist.
    pub fn has_schema(&self) -> rusqlite::Result<bool> {
        host_statement(
            self.conn,
            "SELECT 1 FROM main.sqlite_schema WHERE type = 'table' AND name = '_burrow_queue'",
        )?
        .exists([])
    }

    /// Appends `event` (already checked) unless the queue is full; returns
    /// its id.
    pub fn append(&self, event: &NewEvent, now: i64, max_pending: u64) -> Result<i64, AppendError> {
        let count = || {
            host_statement(self.conn, "SELECT count(*) FROM main._burrow_queue")?
                .query_row([], |r| r.get::<_, i64>(0))
        };
        let pending = match count() {
            Err(e) if absent(&e) => {
                self.conn.execute_batch(EVENTS_SCHEMA)?;
                0
            }
            other => other?,
        };
        if pending as u64 >= max_pending {
            return Err(AppendError::Full(max_pending));
        }
        host_statement(
            self.conn,
            "INSERT INTO main._burrow_queue (type, payload, priority, grp, created_at) VALUES (?, ?, ?, ?, ?)",
        )?
        .execute(params![
            event.event_type,
            event.payload,
            event.priority,
            event.group.as_deref().unwrap_or(""),
            now
        ])?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Deletes a processed event; returns whether it was pending (a second
    /// deletion of the same event deletes nothing).
    pub fn delete(&self, id: i64) -> rusqlite::Result<bool> {
        let deleted = host_statement(self.conn, "DELETE FROM main._burrow_queue WHERE id = ?")?
            .execute([id])?;
        Ok(deleted == 1)
    }

    /// Records a failed attempt of event `id`: raises its attempt count and
    /// either schedules its retry at `retry_at(failed_attempts)` or moves it to
    /// the dead-letter table once it has failed `max_attempts` times.
    pub fn record_failure(
        &self,
        id: i64,
        error: &str,
        now: i64,
        max_attempts: u32,
        retry_at: impl Fn(u32) -> i64,
    ) -> rusqlite::Result<AfterFailure> {
        let attempts: Option<u32> = host_statement(
            self.conn,
            "SELECT attempts FROM main._burrow_queue WHERE id = ?",
        )?
        .query_row([id], |r| r.get(0))
        .optional()?;
        let Some(attempts) = attempts else {
            return Ok(AfterFailure::Gone);
        };
        let failed = attempts.saturating_add(1);
        if failed >= max_attempts {
            host_statement(
                self.conn,
                "INSERT INTO main._burrow_dead_letter
                     (id, type, payload, priority, grp, created_at, attempts, failed_at, error)
                 SELECT id, type, payload, priority, grp, created_at, ?, ?, ?
                 FROM main._burrow_queue WHERE id = ?",
            )?
            .execute(params![failed, now, error, id])?;
            self.delete(id)?; // pending: read above, in this transaction
            return Ok(AfterFailure::DeadLettered);
        }
        let at = retry_at(failed);
        host_statement(
            self.conn,
            "UPDATE main._burrow_queue SET attempts = ?, not_before = ?, last_error = ? WHERE id = ?",
        )?
        .execute(params![failed, at, error, id])?;
        Ok(AfterFailure::Retry(at))
    }

    /// Up to `limit` events due at `now`, in `mode`'s order, leaving out the
    /// ids and groups given.
    ///
    /// The scan walks the index of the mode's order and stops at `limit` (the
    /// `+` keeps SQLite from scanning the retry index and sorting instead).
    pub fn due_events(
        &self,
        mode: QueueMode,
        now: i64,
        skip_ids: &[i64],
        skip_groups: &[&str],
        limit: usize,
    ) -> rusqlite::Result<Vec<QueuedEvent>> {
        let ids = serde_json::to_string(skip_ids).unwrap_or_else(|_| "[]".into());
        let groups = serde_json::to_string(skip_groups).unwrap_or_else(|_| "[]".into());
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM main._burrow_queue
             WHERE +not_before <= ?1
               AND id NOT IN (SELECT value FROM json_each(?2))
               AND grp NOT IN (SELECT value FROM json_each(?3))
             ORDER BY {} LIMIT ?4",
            order_by(mode)
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        or_empty(|| {
            host_statement(self.conn, &sql)?
                .query_map(params![now, ids, groups, limit], event)?
                .collect()
        })
    }

    /// Up to `limit` groups that have pending events, in name order. Each step
    /// is one index lookup, so this costs nothing like a scan of the queue.
    pub fn groups(&self, limit: usize) -> rusqlite::Result<Vec<String>> {
        or_empty(|| groups_of(self.conn, limit))
    }

    /// Up to `limit` events of `group` due at `now`, in `mode`'s order
    /// (for `random`, lower priorities first, then at random), leaving out
    /// `skip_ids`. Each comes with a random number to merge groups by, in
    /// `random` mode.
    pub fn group_head(
        &self,
        mode: QueueMode,
        group: &str,
        now: i64,
        skip_ids: &[i64],
        limit: usize,
    ) -> rusqlite::Result<Vec<(QueuedEvent, i64)>> {
        let ids = serde_json::to_string(skip_ids).unwrap_or_else(|_| "[]".into());
        let sql = format!(
            "SELECT {EVENT_COLUMNS}, random() FROM main._burrow_queue
             WHERE grp = ?1 AND +not_before <= ?2
               AND id NOT IN (SELECT value FROM json_each(?3))
             ORDER BY {} LIMIT ?4",
            order_by(mode)
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        or_empty(|| {
            host_statement(self.conn, &sql)?
                .query_map(params![group, now, ids, limit], |row| {
                    Ok((event(row)?, row.get(9)?))
                })?
                .collect()
        })
    }

    /// Per group, the events that wait for a retry (not due at `now`). Such an
    /// event keeps its place: it counts against its group's concurrency.
    pub fn waiting_for_retry(&self, now: i64) -> rusqlite::Result<HashMap<String, usize>> {
        or_empty(|| {
            host_statement(self.conn, WAITING_FOR_RETRY)?
                .query_map([now], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as usize)))?
                .collect()
        })
    }

    /// When the earliest pending event is due (0 for at once), or `None` if
    /// the queue is empty.
    pub fn next_due(&self) -> rusqlite::Result<Option<i64>> {
        or_empty(|| {
            host_statement(self.conn, "SELECT min(not_before) FROM main._burrow_queue")?
                .query_row([], |r| r.get(0))
        })
    }

    /// Number of pending events.
    pub fn pending_count(&self) -> rusqlite::Result<u64> {
        or_empty(|| {
            host_statement(self.conn, "SELECT count(*) FROM main._burrow_queue")?
                .query_row([], |r| r.get::<_, i64>(0))
                .map(|n| n as u64)
        })
    }

    /// The first `limit` pending events in fifo order.
    pub fn pending(&self, limit: usize) -> rusqlite::Result<Vec<QueuedEvent>> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM main._burrow_queue ORDER BY priority, created_at, id LIMIT ?"
        );
        or_empty(|| {
            host_statement(self.conn, &sql)?
                .query_map([limit as i64], event)?
                .collect()
        })
    }

    /// Up to `limit` pending events whose type is one of `types` (any when
    /// empty), in fifo order: for a workflow's queue wait.
    pub fn pending_of_types(
        &self,
        types: &[String],
        limit: usize,
    ) -> rusqlite::Result<Vec<QueuedEvent>> {
        let types = serde_json::to_string(types).unwrap_or_else(|_| "[]".into());
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM main._burrow_queue
             WHERE json_array_length(?1) = 0 OR type IN (SELECT value FROM json_each(?1))
             ORDER BY priority, created_at, id LIMIT ?2"
        );
        or_empty(|| {
            host_statement(self.conn, &sql)?
                .query_map(params![types, limit as i64], event)?
                .collect()
        })
    }

    /// The dead letters, oldest failure first.
    pub fn dead_letters(&self, limit: usize) -> rusqlite::Result<Vec<DeadLetter>> {
        or_empty(|| dead_letters_of(self.conn, limit))
    }

    /// Moves dead letter `id` back into the queue with no failed attempts,
    /// at its old place in the order. Returns whether there was such a dead
    /// letter.
    pub fn requeue(&self, id: i64) -> rusqlite::Result<bool> {
        or_empty(|| requeue_dead_letter(self.conn, id))
    }

    /// Deletes dead letter `id` for good. Returns whether there was one.
    pub fn discard(&self, id: i64) -> rusqlite::Result<bool> {
        or_empty(|| {
            Ok(host_statement(
                self.conn,
                "DELETE FROM main._burrow_dead_letter WHERE id = ?",
            )?
            .execute([id])?
                > 0)
        })
    }

    /// The recorded policy, or `None` if the instance has no queue.
    pub fn policy(&self) -> rusqlite::Result<Option<QueuePolicy>> {
        let row: Option<(String, Option<u32>)> = or_empty(|| {
            host_statement(
                self.conn,
                "SELECT mode, concurrency FROM main._burrow_queue_policy WHERE id = 1",
            )?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
        })?;
        Ok(row.and_then(|(mode, concurrency)| {
            Some(QueuePolicy {
                mode: QueueMode::parse(&mode)?,
                concurrency,
            })
        }))
    }

    /// Records the policy (once, at creation or at the first start that
    /// offers one).
    pub fn record_policy(&self, policy: &QueuePolicy) -> rusqlite::Result<()> {
        self.conn.execute_batch(POLICY_SCHEMA)?;
        host_statement(
            self.conn,
            "INSERT INTO main._burrow_queue_policy (id, mode, concurrency) VALUES (1, ?, ?)",
        )?
        .execute(params![policy.mode.as_str(), policy.concurrency])?;
        Ok(())
    }
}

fn order_by(mode: QueueMode) -> &'static str {
    match mode {
        QueueMode::Fifo | QueueMode::Custom => "priority, created_at, id",
        QueueMode::Lifo => "priority, created_at DESC, id DESC",
        QueueMode::Random => "priority, random()",
    }
}

fn groups_of(conn: &Connection, limit: usize) -> rusqlite::Result<Vec<String>> {
    let mut stmt = host_statement(
        conn,
        "WITH RECURSIVE g(grp, n) AS (
             SELECT (SELECT min(grp) FROM main._burrow_queue), 1
             UNION ALL
             SELECT (SELECT min(grp) FROM main._burrow_queue WHERE grp > g.grp), n + 1
             FROM g WHERE g.grp IS NOT NULL AND n < ?
         )
         SELECT grp FROM g WHERE grp IS NOT NULL",
    )?;
    stmt.query_map([limit as i64], |r| r.get(0))?.collect()
}

// Without the hint SQLite prefers a group index, for the GROUP BY, and
// scans the whole queue.
const WAITING_FOR_RETRY: &str =
    "SELECT grp, count(*) FROM main._burrow_queue INDEXED BY _burrow_queue_retry
     WHERE not_before > ? GROUP BY grp";

fn dead_letters_of(conn: &Connection, limit: usize) -> rusqlite::Result<Vec<DeadLetter>> {
    host_statement(
        conn,
        "SELECT id, type, payload, priority, grp, created_at, attempts, failed_at, error
         FROM main._burrow_dead_letter ORDER BY failed_at, id LIMIT ?",
    )?
    .query_map([limit as i64], |row| {
        Ok(DeadLetter {
            id: row.get(0)?,
            event_type: row.get(1)?,
            payload: row.get(2)?,
            priority: row.get(3)?,
            group: group_of(row.get(4)?),
            created_at: row.get(5)?,
            attempts: row.get(6)?,
            failed_at: row.get(7)?,
            error: row.get(8)?,
        })
    })?
    .collect()
}

fn requeue_dead_letter(conn: &Connection, id: i64) -> rusqlite::Result<bool> {
    let moved = host_statement(
        conn,
        "INSERT INTO main._burrow_queue (id, type, payload, priority, grp, created_at)
             SELECT id, type, payload, priority, grp, created_at
             FROM main._burrow_dead_letter WHERE id = ?",
    )?
    .execute([id])?;
    host_statement(conn, "DELETE FROM main._burrow_dead_letter WHERE id = ?")?.execute([id])?;
    Ok(moved > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostTables;

    fn queue() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(EVENTS_SCHEMA).unwrap();
        conn.execute_batch(POLICY_SCHEMA).unwrap();
        conn
    }

    /// Before its first append an instance has no queue tables: every
    /// read answers an empty queue, and the append makes them.
    #[test]
    fn a_queue_without_tables_is_empty_until_its_first_append() {
        let conn = Connection::open_in_memory().unwrap();
        assert_eq!(conn.queue().pending_count().unwrap(), 0);
        assert_eq!(conn.queue().next_due().unwrap(), None);
        assert!(conn.queue().pending(10).unwrap().is_empty());
        assert!(conn.queue().pending_of_types(&[], 10).unwrap().is_empty());
        assert!(
            conn.queue()
                .due_events(QueueMode::Fifo, 0, &[], &[], 10)
                .unwrap()
                .is_empty()
        );
        assert!(conn.queue().groups(10).unwrap().is_empty());
        assert!(
            conn.queue()
                .group_head(QueueMode::Fifo, "", 0, &[], 10)
                .unwrap()
                .is_empty()
        );
        assert!(conn.queue().waiting_for_retry(0).unwrap().is_empty());
        assert!(conn.queue().dead_letters(10).unwrap().is_empty());
        assert!(!conn.queue().requeue(1).unwrap());
        assert!(!conn.queue().discard(1).unwrap());
        assert_eq!(conn.queue().policy().unwrap(), None);
        assert!(!conn.queue().has_schema().unwrap());
        // Other errors are not taken for an empty queue.
        conn.execute_batch("CREATE TABLE _burrow_queue (x)")
            .unwrap();
        assert!(conn.queue().pending(10).is_err());
        conn.execute_batch("DROP TABLE _burrow_queue").unwrap();

        let id = push(&conn, "a", 0, None, 5);
        assert!(conn.queue().has_schema().unwrap());
        assert_eq!(conn.queue().pending_count().unwrap(), 1);
        assert_eq!(conn.queue().next_due().unwrap(), Some(0));
        assert_eq!(conn.queue().pending(10).unwrap()[0].id, id);
        let fifo = QueuePolicy {
            mode: QueueMode::Fifo,
            concurrency: None,
        };
        conn.queue().record_policy(&fifo).unwrap();
        assert_eq!(conn.queue().policy().unwrap(), Some(fifo));
    }

    fn push(conn: &Connection, kind: &str, priority: i32, group: Option<&str>, at: i64) -> i64 {
        let event = NewEvent {
            event_type: kind.into(),
            payload: "null".into(),
            priority,
            group: group.map(Into::into),
        };
        conn.queue().append(&event, at, 100).unwrap()
    }

    fn types(events: &[QueuedEvent]) -> Vec<&str> {
        events.iter().map(|e| e.event_type.as_str()).collect()
    }

    #[test]
    fn an_event_is_deleted_once() {
        let conn = queue();
        let id = push(&conn, "a", 0, None, 1);
        assert!(conn.queue().delete(id).unwrap());
        assert!(
            !conn.queue().delete(id).unwrap(),
            "a second deletion is told apart"
        );
    }

    #[test]
    fn fifo_and_lifo_order_by_priority_then_age() {
        let conn = queue();
        push(&conn, "a", 5, None, 1);
        push(&conn, "b", 0, None, 2);
        push(&conn, "c", 5, None, 3);
        push(&conn, "d", 0, None, 3);
        let fifo = conn
            .queue()
            .due_events(QueueMode::Fifo, 10, &[], &[], 10)
            .unwrap();
        assert_eq!(types(&fifo), ["b", "d", "a", "c"]);
        let lifo = conn
            .queue()
            .due_events(QueueMode::Lifo, 10, &[], &[], 10)
            .unwrap();
        assert_eq!(types(&lifo), ["d", "b", "c", "a"]);
        let random = conn
            .queue()
            .due_events(QueueMode::Random, 10, &[], &[], 10)
            .unwrap();
        let mut first: Vec<_> = types(&random[..2]).to_vec();
        first.sort();
        assert_eq!(first, ["b", "d"], "priority still comes first");
    }

    #[test]
    fn skipped_ids_and_groups_are_left_out() {
        let conn = queue();
        let a = push(&conn, "a", 0, Some("g"), 1);
        push(&conn, "b", 0, Some("g"), 2);
        push(&conn, "c", 0, None, 3);
        let due = conn
            .queue()
            .due_events(QueueMode::Fifo, 10, &[a], &[], 10)
            .unwrap();
        assert_eq!(types(&due), ["b", "c"]);
        let due = conn
            .queue()
            .due_events(QueueMode::Fifo, 10, &[], &["g"], 10)
            .unwrap();
        assert_eq!(types(&due), ["c"]);
        let due = conn
            .queue()
            .due_events(QueueMode::Fifo, 10, &[], &[""], 10)
            .unwrap();
        assert_eq!(
            types(&due),
            ["a", "b"],
            "the default group is the empty name"
        );
    }

    #[test]
    fn groups_and_their_heads_come_from_the_indexes() {
        let conn = queue();
        push(&conn, "a1", 0, Some("a"), 1);
        push(&conn, "b1", 3, Some("b"), 2);
        push(&conn, "a2", 0, Some("a"), 3);
        push(&conn, "d1", 0, None, 4);
        assert_eq!(conn.queue().groups(10).unwrap(), ["", "a", "b"]);
        assert_eq!(conn.queue().groups(2).unwrap(), ["", "a"]);
        let head = |mode, group: &str, skip: &[i64]| -> Vec<String> {
            conn.queue()
                .group_head(mode, group, 10, skip, 10)
                .unwrap()
                .into_iter()
                .map(|(e, _)| e.event_type)
                .collect()
        };
        assert_eq!(head(QueueMode::Fifo, "a", &[]), ["a1", "a2"]);
        assert_eq!(head(QueueMode::Lifo, "a", &[]), ["a2", "a1"]);
        assert_eq!(head(QueueMode::Fifo, "a", &[1]), ["a2"]);
        assert_eq!(head(QueueMode::Fifo, "", &[]), ["d1"]);
        // The retry lookup uses its index, not a scan of a group index.
        let mut plan = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {WAITING_FOR_RETRY}"))
            .unwrap();
        let details: Vec<String> = plan
            .query_map([0], |r| r.get(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(
            details.iter().any(|d| d.contains("_burrow_queue_retry")),
            "{details:?}"
        );
    }

    #[test]
    fn a_full_queue_refuses_more() {
        let conn = queue();
        let event = NewEvent {
            event_type: "x".into(),
            payload: "1".into(),
            priority: 0,
            group: None,
        };
        conn.queue().append(&event, 1, 2).unwrap();
        conn.queue().append(&event, 1, 2).unwrap();
        assert!(matches!(
            conn.queue().append(&event, 1, 2),
            Err(AppendError::Full(2))
        ));
    }

    #[test]
    fn failures_back_off_then_dead_letter_and_requeue_keeps_the_place() {
        let conn = queue();
        let id = push(&conn, "a", 0, Some("g"), 1);
        let after = conn
            .queue()
            .record_failure(id, "boom", 100, 3, |n| 100 + n as i64 * 10)
            .unwrap();
        assert_eq!(after, AfterFailure::Retry(110));
        assert!(
            conn.queue()
                .due_events(QueueMode::Fifo, 105, &[], &[], 10)
                .unwrap()
                .is_empty()
        );
        assert_eq!(conn.queue().waiting_for_retry(105).unwrap()["g"], 1);
        assert_eq!(conn.queue().next_due().unwrap(), Some(110));
        let event = &conn
            .queue()
            .due_events(QueueMode::Fifo, 110, &[], &[], 10)
            .unwrap()[0];
        assert_eq!(
            (event.attempts, event.last_error.as_deref()),
            (1, Some("boom"))
        );
        conn.queue()
            .record_failure(id, "boom", 120, 3, |_| 0)
            .unwrap();
        let after = conn
            .queue()
            .record_failure(id, "last", 130, 3, |_| 0)
            .unwrap();
        assert_eq!(after, AfterFailure::DeadLettered);
        assert_eq!(conn.queue().next_due().unwrap(), None);
        let dead = conn.queue().dead_letters(10).unwrap();
        assert_eq!((dead[0].id, dead[0].attempts), (id, 3));
        assert_eq!(dead[0].error, "last");
        assert!(conn.queue().requeue(id).unwrap());
        assert!(!conn.queue().requeue(id).unwrap());
        let back = &conn.queue().pending(10).unwrap()[0];
        assert_eq!((back.id, back.attempts, back.created_at), (id, 0, 1));
        assert_eq!(
            conn.queue().record_failure(999, "x", 1, 3, |_| 0).unwrap(),
            AfterFailure::Gone
        );
    }
}
