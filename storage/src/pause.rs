//! Whether an instance's background work is paused, in its own database.
//!
//! A fork (`burrow fork`) is made paused: its queue is not processed, its
//! schedules do not run and its workflow is not driven until
//! `burrow resume`, so that a copy never repeats by itself what its
//! original did in the world. Calls and hooks run as on any instance.
//!
//! `_burrow_pause` exists only while the instance is paused, with one row
//! that says since when and why. It is in the instance's database, so a
//! pause outlives a restart, ships with every commit in a cluster and
//! travels in an export.

use rusqlite::{Connection, OptionalExtension};

use super::sandbox::host_statement;

/// The pause's internal table.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS main._burrow_pause (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    since INTEGER NOT NULL,
    reason TEXT NOT NULL
);
";

/// Why and since when an instance is paused.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pause {
    /// Since when, in milliseconds since the Unix epoch.
    pub since: i64,
    /// Why, for a person: what made it (a fork of which key).
    pub reason: String,
}

/// The pause, through one connection to the instance's database
/// (`conn.pause()`: see [`HostTables`](super::HostTables)).
pub struct PauseTable<'c> {
    conn: &'c Connection,
}

impl<'c> PauseTable<'c> {
    pub(crate) fn of(conn: &'c Connection) -> Self {
        PauseTable { conn }
    }
}

impl PauseTable<'_> {
    /// Whether the instance is paused: one look at the schema, as cheap
    /// as a statement gets, for the paths that ask before every batch.
    pub fn is_paused(&self) -> rusqlite::Result<bool> {
        host_statement(
            self.conn,
            "SELECT 1 FROM main.sqlite_schema WHERE type = 'table' AND name = '_burrow_pause'",
        )?
        .exists([])
    }

    /// The pause, if the instance is paused.
    pub fn get(&self) -> rusqlite::Result<Option<Pause>> {
        if !self.is_paused()? {
            return Ok(None);
        }
        host_statement(
            self.conn,
            "SELECT since, reason FROM main._burrow_pause WHERE id = 1",
        )?
        .query_row([], |r| {
            Ok(Pause {
                since: r.get(0)?,
                reason: r.get(1)?,
            })
        })
        .optional()
    }

    /// Pauses the instance's background work (again, with this reason, if
    /// it was paused already).
    pub fn pause(&self, since: i64, reason: &str) -> rusqlite::Result<()> {
        self.conn.execute_batch(SCHEMA)?;
        host_statement(
            self.conn,
            "INSERT OR REPLACE INTO main._burrow_pause (id, since, reason) VALUES (1, ?, ?)",
        )?
        .execute(rusqlite::params![since, reason])?;
        Ok(())
    }

    /// Ends the pause; returns whether the instance was paused. The table
    /// goes, so that an instance that was never paused and one that was
    /// resumed look the same.
    pub fn resume(&self) -> rusqlite::Result<bool> {
        if !self.is_paused()? {
            return Ok(false);
        }
        self.conn
            .execute_batch("DROP TABLE IF EXISTS main._burrow_pause")?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use crate::HostTables;

    #[test]
    fn a_pause_is_kept_until_resumed_and_leaves_nothing_behind() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        assert!(!conn.pause().is_paused().unwrap());
        assert_eq!(conn.pause().get().unwrap(), None);
        assert!(!conn.pause().resume().unwrap());

        conn.pause().pause(5, "a fork of `a`").unwrap();
        assert!(conn.pause().is_paused().unwrap());
        let pause = conn.pause().get().unwrap().unwrap();
        assert_eq!((pause.since, pause.reason.as_str()), (5, "a fork of `a`"));
        conn.pause().pause(6, "again").unwrap();
        assert_eq!(conn.pause().get().unwrap().unwrap().since, 6);

        assert!(conn.pause().resume().unwrap());
        assert!(!conn.pause().is_paused().unwrap());
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM main.sqlite_schema", [], |r| r.get(0))
            .unwrap();
        assert_eq!(tables, 0);
    }
}
