//! What the host acknowledged (committed, and in the open transaction),
//! and the host's tables as they are, to compare the two.

use std::collections::BTreeSet;

use rusqlite::Connection;

/// What the host acknowledged, as of one point of a transaction.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Snapshot {
    pub(super) state: Option<Vec<u8>>,
    pub(super) events: BTreeSet<i64>,
    pub(super) schedules: BTreeSet<i64>,
    /// The host's `AUTOINCREMENT` counters: its rows of `sqlite_sequence`
    /// (table, last id it handed out), in name order.
    pub(super) counters: Vec<(String, i64)>,
}

impl Snapshot {
    /// The host handed out `id` from `table`'s counter.
    pub(super) fn counted(&mut self, table: &str, id: i64) {
        match self.counters.iter_mut().find(|(name, _)| name == table) {
            Some((_, last)) => *last = (*last).max(id),
            None => {
                self.counters.push((table.to_owned(), id));
                self.counters.sort();
            }
        }
    }
}

/// What the host acknowledged: committed, and in the open transaction.
#[derive(Debug, Default)]
pub(super) struct Model {
    pub(super) committed: Snapshot,
    pub(super) current: Snapshot,
    pub(super) recurring: BTreeSet<i64>,
}

impl Model {
    pub(super) fn commit(&mut self) {
        self.committed = self.current.clone();
    }

    pub(super) fn rollback(&mut self) {
        self.current = self.committed.clone();
    }
}

/// The host's tables as they are in `main`.
pub(super) fn read_main(conn: &Connection) -> rusqlite::Result<Snapshot> {
    let state = conn
        .prepare("SELECT value FROM main._burrow_state WHERE id = 1")?
        .query_map([], |r| r.get(0))?
        .next()
        .transpose()?;
    let ids = |sql: &str| -> rusqlite::Result<BTreeSet<i64>> {
        conn.prepare(sql)?.query_map([], |r| r.get(0))?.collect()
    };
    let events = ids("SELECT id FROM main._burrow_queue")?;
    let has_schedules = conn
        .prepare(
            "SELECT 1 FROM main.sqlite_schema WHERE type = 'table' AND name = '_burrow_schedule'",
        )?
        .exists([])?;
    let schedules = if has_schedules {
        ids("SELECT id FROM main._burrow_schedule")?
    } else {
        BTreeSet::new()
    };
    Ok(Snapshot {
        state,
        events,
        schedules,
        counters: host_counters(conn)?,
    })
}

/// The host's rows of `sqlite_sequence`, in name order.
pub(super) fn host_counters(conn: &Connection) -> rusqlite::Result<Vec<(String, i64)>> {
    let has_counters = conn
        .prepare(
            "SELECT 1 FROM main.sqlite_schema WHERE type = 'table' AND name = 'sqlite_sequence'",
        )?
        .exists([])?;
    if !has_counters {
        return Ok(Vec::new());
    }
    conn.prepare(
        "SELECT name, seq FROM main.sqlite_sequence
         WHERE name LIKE '\\_burrow\\_%' ESCAPE '\\' ORDER BY name, seq",
    )?
    .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
    .collect()
}
