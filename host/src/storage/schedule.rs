//! The schedules' table in an instance database, and every statement on it.
//!
//! `_burrow_schedule` holds pending schedules. A schedule is inserted in the
//! transaction of the call that makes it, and deleted in the transaction
//! that runs its action (or that records its failure): a schedule whose
//! action committed is gone, and one whose action did not commit is still
//! there to run.

use super::sandbox::host_statement;
use rusqlite::{Connection, OptionalExtension, params};

/// The schedules' internal table.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS main._burrow_schedule (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    action TEXT NOT NULL,
    args TEXT NOT NULL,
    due_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    every_ms INTEGER
);
CREATE INDEX IF NOT EXISTS main._burrow_schedule_due ON _burrow_schedule (due_at, id);
";

/// The columns [`from_row`] reads.
const COLUMNS: &str = "id, action, args, due_at, every_ms";

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Schedule> {
    Ok(Schedule {
        id: r.get(0)?,
        action: r.get(1)?,
        args: r.get(2)?,
        due_at: r.get(3)?,
        every_ms: r.get(4)?,
    })
}

/// A pending schedule.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Schedule {
    /// Unique within the instance, never reused.
    pub id: i64,
    /// The action it runs.
    pub action: String,
    /// Its arguments, a JSON array as text.
    pub args: String,
    /// When it is due, in milliseconds since the Unix epoch.
    pub due_at: i64,
    /// For a recurring schedule, its interval in milliseconds.
    pub every_ms: Option<i64>,
}

impl Schedule {
    /// For a recurring schedule that ran (or was due) at `due_at`: the
    /// first time after `now` in its phase.
    pub(crate) fn next_after(&self, now: i64) -> Option<i64> {
        let every = self.every_ms?.max(1);
        let periods = (now.saturating_sub(self.due_at) / every).max(0) + 1;
        Some(self.due_at.saturating_add(periods.saturating_mul(every)))
    }
}

/// Whether the table exists (it is made by the first schedule).
pub(crate) fn has_schema(conn: &Connection) -> rusqlite::Result<bool> {
    host_statement(
        conn,
        "SELECT 1 FROM main.sqlite_schema WHERE type = 'table' AND name = '_burrow_schedule'",
    )?
    .exists([])
}

/// Why a schedule was not inserted.
#[derive(Debug)]
pub(crate) enum AddError {
    /// The instance has this many pending schedules, the most it may have.
    Full(u64),
    Sqlite(rusqlite::Error),
}

impl From<rusqlite::Error> for AddError {
    fn from(e: rusqlite::Error) -> Self {
        AddError::Sqlite(e)
    }
}

/// Inserts a schedule (making the table if needed), recurring every
/// `every_ms` if given; returns its id.
pub(crate) fn add(
    conn: &Connection,
    action: &str,
    args: &str,
    due_at: i64,
    every_ms: Option<i64>,
    now: i64,
    max_pending: u64,
) -> Result<i64, AddError> {
    if !has_schema(conn)? {
        conn.execute_batch(SCHEMA)?;
    }
    let pending: i64 = host_statement(conn, "SELECT count(*) FROM main._burrow_schedule")?
        .query_row([], |r| r.get(0))?;
    if pending as u64 >= max_pending {
        return Err(AddError::Full(max_pending));
    }
    host_statement(
        conn,
        "INSERT INTO main._burrow_schedule (action, args, due_at, created_at, every_ms)
         VALUES (?, ?, ?, ?, ?)",
    )?
    .execute(params![action, args, due_at, now, every_ms])?;
    Ok(conn.last_insert_rowid())
}

/// The pending schedules, soonest first.
pub(crate) fn pending(conn: &Connection) -> rusqlite::Result<Vec<Schedule>> {
    if !has_schema(conn)? {
        return Ok(Vec::new());
    }
    let sql = format!("SELECT {COLUMNS} FROM main._burrow_schedule ORDER BY due_at, id");
    let mut stmt = host_statement(conn, &sql)?;
    stmt.query_map([], from_row)?.collect()
}

/// Number of pending schedules.
pub(crate) fn count(conn: &Connection) -> rusqlite::Result<u64> {
    if !has_schema(conn)? {
        return Ok(0);
    }
    host_statement(conn, "SELECT count(*) FROM main._burrow_schedule")?
        .query_row([], |r| r.get::<_, i64>(0))
        .map(|n| n.max(0) as u64)
}

/// The first `limit` pending schedules, soonest first.
pub(crate) fn first(conn: &Connection, limit: usize) -> rusqlite::Result<Vec<Schedule>> {
    if !has_schema(conn)? {
        return Ok(Vec::new());
    }
    let sql = format!("SELECT {COLUMNS} FROM main._burrow_schedule ORDER BY due_at, id LIMIT ?");
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = host_statement(conn, &sql)?;
    stmt.query_map([limit], from_row)?.collect()
}

/// Deletes schedule `id`; returns whether it was pending.
pub(crate) fn delete(conn: &Connection, id: i64) -> rusqlite::Result<bool> {
    if !has_schema(conn)? {
        return Ok(false);
    }
    Ok(host_statement(conn, "DELETE FROM main._burrow_schedule WHERE id = ?")?.execute([id])? > 0)
}

/// The soonest schedule due at or before `now`.
pub(crate) fn next_due(conn: &Connection, now: i64) -> rusqlite::Result<Option<Schedule>> {
    if !has_schema(conn)? {
        return Ok(None);
    }
    let sql = format!(
        "SELECT {COLUMNS} FROM main._burrow_schedule WHERE due_at <= ? ORDER BY due_at, id LIMIT 1"
    );
    host_statement(conn, &sql)?
        .query_row([now], from_row)
        .optional()
}

/// After schedule `schedule` ran (or failed) at `now`: deletes it, or
/// moves a recurring one to its next time.
pub(crate) fn done(conn: &Connection, schedule: &Schedule, now: i64) -> rusqlite::Result<()> {
    match schedule.next_after(now) {
        Some(next) => {
            host_statement(
                conn,
                "UPDATE main._burrow_schedule SET due_at = ? WHERE id = ?",
            )?
            .execute(params![next, schedule.id])?;
        }
        None => {
            delete(conn, schedule.id)?;
        }
    }
    Ok(())
}

/// When the soonest pending schedule is due, or `None` without any.
pub(crate) fn earliest(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    if !has_schema(conn)? {
        return Ok(None);
    }
    host_statement(conn, "SELECT min(due_at) FROM main._burrow_schedule")?
        .query_row([], |r| r.get(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_are_added_listed_due_and_deleted() {
        let conn = Connection::open_in_memory().unwrap();
        assert_eq!(pending(&conn).unwrap(), []);
        assert_eq!(earliest(&conn).unwrap(), None);
        assert!(!delete(&conn, 1).unwrap());
        let late = add(&conn, "b", "[]", 200, None, 1, 10).unwrap();
        let soon = add(&conn, "a", "[1]", 100, None, 1, 10).unwrap();
        assert_eq!(
            pending(&conn)
                .unwrap()
                .iter()
                .map(|s| s.id)
                .collect::<Vec<_>>(),
            [soon, late]
        );
        assert_eq!(earliest(&conn).unwrap(), Some(100));
        assert_eq!(next_due(&conn, 99).unwrap(), None);
        assert_eq!(next_due(&conn, 150).unwrap().unwrap().action, "a");
        assert!(delete(&conn, soon).unwrap());
        assert!(!delete(&conn, soon).unwrap());
        assert_eq!(earliest(&conn).unwrap(), Some(200));
        add(&conn, "c", "[]", 300, None, 1, 2).unwrap();
        assert!(matches!(
            add(&conn, "d", "[]", 300, None, 1, 2),
            Err(AddError::Full(2))
        ));
        // A one-off is deleted when done.
        delete(&conn, late).unwrap();
        let one_off = next_due(&conn, 1_000).unwrap().unwrap();
        assert_eq!((one_off.action.as_str(), one_off.every_ms), ("c", None));
        done(&conn, &one_off, 1_000).unwrap();
        assert_eq!(pending(&conn).unwrap(), []);
        // A recurring schedule moves to its next time in its phase.
        let every = add(&conn, "r", "[]", 1_000, Some(100), 1, 10).unwrap();
        let recurring = next_due(&conn, 1_000).unwrap().unwrap();
        assert_eq!((recurring.id, recurring.every_ms), (every, Some(100)));
        done(&conn, &recurring, 1_010).unwrap();
        assert_eq!(next_due(&conn, 1_099).unwrap(), None);
        let recurring = next_due(&conn, 1_100).unwrap().unwrap();
        // Missed runs collapse into one, in phase.
        done(&conn, &recurring, 1_555).unwrap();
        assert_eq!(next_due(&conn, 1_599).unwrap(), None);
        assert_eq!(next_due(&conn, 1_600).unwrap().unwrap().due_at, 1_600);
        // Ids are never reused.
        delete(&conn, late).unwrap();
        assert!(add(&conn, "e", "[]", 1, None, 1, 10).unwrap() > soon.max(late));
    }
}
