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
pub const SCHEMA: &str = "
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
    pub fn next_after(&self, now: i64) -> Option<i64> {
        let every = self.every_ms?.max(1);
        let periods = (now.saturating_sub(self.due_at) / every).max(0) + 1;
        Some(self.due_at.saturating_add(periods.saturating_mul(every)))
    }
}

/// The schedules' table, through one connection to the instance's database
/// (`conn.schedules()`: see [`HostTables`](super::HostTables)).
pub struct ScheduleTable<'c> {
    conn: &'c Connection,
}

impl<'c> ScheduleTable<'c> {
    pub(crate) fn of(conn: &'c Connection) -> Self {
        ScheduleTable { conn }
    }
}

impl ScheduleTable<'_> {
    /// Whether the table exists (it is made by the first schedule).
    pub fn has_schema(&self) -> rusqlite::Result<bool> {
        host_statement(
            self.conn,
            "SELECT 1 FROM main.sqlite_schema WHERE type = 'table' AND name = '_burrow_schedule'",
        )?
        .exists([])
    }

    /// Inserts a schedule (making the table if needed), recurring every
    /// `every_ms` if given; returns its id.
    pub fn add(
        &self,
        action: &str,
        args: &str,
        due_at: i64,
        every_ms: Option<i64>,
        now: i64,
        max_pending: u64,
    ) -> Result<i64, AddScheduleError> {
        if !self.has_schema()? {
            self.conn.execute_batch(SCHEMA)?;
        }
        let pending: i64 = host_statement(self.conn, "SELECT count(*) FROM main._burrow_schedule")?
            .query_row([], |r| r.get(0))?;
        if pending as u64 >= max_pending {
            return Err(AddScheduleError::Full(max_pending));
        }
        host_statement(
            self.conn,
            "INSERT INTO main._burrow_schedule (action, args, due_at, created_at, every_ms)
             VALUES (?, ?, ?, ?, ?)",
        )?
        .execute(params![action, args, due_at, now, every_ms])?;
        Ok(self.conn.last_insert_rowid())
    }

    /// The pending schedules, soonest first.
    pub fn pending(&self) -> rusqlite::Result<Vec<Schedule>> {
        if !self.has_schema()? {
            return Ok(Vec::new());
        }
        let sql = format!("SELECT {COLUMNS} FROM main._burrow_schedule ORDER BY due_at, id");
        let mut stmt = host_statement(self.conn, &sql)?;
        stmt.query_map([], from_row)?.collect()
    }

    /// Number of pending schedules.
    pub fn count(&self) -> rusqlite::Result<u64> {
        if !self.has_schema()? {
            return Ok(0);
        }
        host_statement(self.conn, "SELECT count(*) FROM main._burrow_schedule")?
            .query_row([], |r| r.get::<_, i64>(0))
            .map(|n| n.max(0) as u64)
    }

    /// The first `limit` pending schedules, soonest first.
    pub fn first(&self, limit: usize) -> rusqlite::Result<Vec<Schedule>> {
        if !self.has_schema()? {
            return Ok(Vec::new());
        }
        let sql =
            format!("SELECT {COLUMNS} FROM main._burrow_schedule ORDER BY due_at, id LIMIT ?");
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = host_statement(self.conn, &sql)?;
        stmt.query_map([limit], from_row)?.collect()
    }

    /// Deletes schedule `id`; returns whether it was pending.
    pub fn delete(&self, id: i64) -> rusqlite::Result<bool> {
        if !self.has_schema()? {
            return Ok(false);
        }
        Ok(
            host_statement(self.conn, "DELETE FROM main._burrow_schedule WHERE id = ?")?
                .execute([id])?
                > 0,
        )
    }

    /// The soonest schedule due at or before `now`.
    pub fn next_due(&self, now: i64) -> rusqlite::Result<Option<Schedule>> {
        if !self.has_schema()? {
            return Ok(None);
        }
        let sql = format!(
            "SELECT {COLUMNS} FROM main._burrow_schedule WHERE due_at <= ? ORDER BY due_at, id LIMIT 1"
        );
        host_statement(self.conn, &sql)?
            .query_row([now], from_row)
            .optional()
    }

    /// After schedule `schedule` ran (or failed) at `now`: deletes it, or
    /// moves a recurring one to its next time.
    pub fn done(&self, schedule: &Schedule, now: i64) -> rusqlite::Result<()> {
        match schedule.next_after(now) {
            Some(next) => {
                host_statement(
                    self.conn,
                    "UPDATE main._burrow_schedule SET due_at = ? WHERE id = ?",
                )?
                .execute(params![next, schedule.id])?;
            }
            None => {
                self.delete(schedule.id)?;
            }
        }
        Ok(())
    }

    /// When the soonest pending schedule is due, or `None` without any.
    pub fn earliest(&self) -> rusqlite::Result<Option<i64>> {
        if !self.has_schema()? {
            return Ok(None);
        }
        host_statement(self.conn, "SELECT min(due_at) FROM main._burrow_schedule")?
            .query_row([], |r| r.get(0))
    }
}

/// Why a schedule was not inserted.
#[derive(Debug)]
pub enum AddScheduleError {
    /// The instance has this many pending schedules, the most it may have.
    Full(u64),
    Sqlite(rusqlite::Error),
}

impl From<rusqlite::Error> for AddScheduleError {
    fn from(e: rusqlite::Error) -> Self {
        AddScheduleError::Sqlite(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostTables;

    #[test]
    fn schedules_are_added_listed_due_and_deleted() {
        let conn = Connection::open_in_memory().unwrap();
        assert_eq!(conn.schedules().pending().unwrap(), []);
        assert_eq!(conn.schedules().earliest().unwrap(), None);
        assert!(!conn.schedules().delete(1).unwrap());
        let late = conn.schedules().add("b", "[]", 200, None, 1, 10).unwrap();
        let soon = conn.schedules().add("a", "[1]", 100, None, 1, 10).unwrap();
        assert_eq!(
            conn.schedules()
                .pending()
                .unwrap()
                .iter()
                .map(|s| s.id)
                .collect::<Vec<_>>(),
            [soon, late]
        );
        assert_eq!(conn.schedules().earliest().unwrap(), Some(100));
        assert_eq!(conn.schedules().next_due(99).unwrap(), None);
        assert_eq!(conn.schedules().next_due(150).unwrap().unwrap().action, "a");
        assert!(conn.schedules().delete(soon).unwrap());
        assert!(!conn.schedules().delete(soon).unwrap());
        assert_eq!(conn.schedules().earliest().unwrap(), Some(200));
        conn.schedules().add("c", "[]", 300, None, 1, 2).unwrap();
        assert!(matches!(
            conn.schedules().add("d", "[]", 300, None, 1, 2),
            Err(AddScheduleError::Full(2))
        ));
        // A one-off is deleted when done.
        conn.schedules().delete(late).unwrap();
        let one_off = conn.schedules().next_due(1_000).unwrap().unwrap();
        assert_eq!((one_off.action.as_str(), one_off.every_ms), ("c", None));
        conn.schedules().done(&one_off, 1_000).unwrap();
        assert_eq!(conn.schedules().pending().unwrap(), []);
        // A recurring schedule moves to its next time in its phase.
        let every = conn
            .schedules()
            .add("r", "[]", 1_000, Some(100), 1, 10)
            .unwrap();
        let recurring = conn.schedules().next_due(1_000).unwrap().unwrap();
        assert_eq!((recurring.id, recurring.every_ms), (every, Some(100)));
        conn.schedules().done(&recurring, 1_010).unwrap();
        assert_eq!(conn.schedules().next_due(1_099).unwrap(), None);
        let recurring = conn.schedules().next_due(1_100).unwrap().unwrap();
        // Missed runs collapse into one, in phase.
        conn.schedules().done(&recurring, 1_555).unwrap();
        assert_eq!(conn.schedules().next_due(1_599).unwrap(), None);
        assert_eq!(
            conn.schedules().next_due(1_600).unwrap().unwrap().due_at,
            1_600
        );
        // Ids are never reused.
        conn.schedules().delete(late).unwrap();
        assert!(conn.schedules().add("e", "[]", 1, None, 1, 10).unwrap() > soon.max(late));
    }
}
