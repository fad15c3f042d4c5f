//! `host.sqlite`: the index of every instance on this data directory, and
//! when each instance's queue and workflow next have work.
//!
//! Instance databases are the source of truth; the index lets the host list
//! instances, and find the queues to resume after a start, without opening
//! every database. A row is written after an instance's creation commits
//! and removed when it is destroyed; triggers keep each actor's count of
//! rows in `instance_counts`, for the metrics.
//!
//! # The queue mark
//!
//! `queue_due_at` is the earliest time at which the instance may have an
//! event to process, or NULL when its queue is empty. The host keeps this
//! invariant, also across a crash: *if an instance has a committed pending
//! event, its mark is set and not later than that event's due time.*
//!
//! - A transaction that appends lowers the mark to "now" and commits while
//!   holding the index's lock ([`Index::lower_marks_around`]).
//! - Only a queue pump raises or clears a mark, and it computes the new
//!   value from the committed queue while holding the same lock
//!   ([`Index::set_mark_from`]), so no append can commit in between.
//!
//! A mark may be early (an append rolled back, a crash after processing):
//! that costs one needless wake, never a lost event.
//!
//! # The schedule mark
//!
//! `schedule_due_at` is the earliest time at which the instance may have a
//! schedule to run, or NULL when it has none, with the queue mark's
//! invariant: a transaction that adds schedules lowers it to their soonest
//! time and commits under the index's lock ([`Index::lower_marks_around`]),
//! and only the host's schedule runner raises or clears it, from the
//! committed schedules, under the same lock
//! ([`Index::set_schedule_mark_from`]).
//!
//! # The workflow mark
//!
//! `workflow_due_at` is when the instance's workflow should run next (NULL
//! when it finished). It is set before the creation that starts the
//! workflow commits, and afterwards only by the workflow's driver, from the
//! run's outcome. An early or stale mark costs a replay that finds nothing
//! to do; a mark for an instance that does not exist is cleared.
//!
//! # Reading due marks
//!
//! The host's timer reads due marks earliest first, only for the actors in
//! the manifest: marks of an actor that was removed are neither read (they
//! would hold the front of the list for good) nor lost (they are served
//! when the actor comes back). Each mark has an index by actor, of the
//! instances that have that mark, so a read looks only at due rows,
//! however many instances have none.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};

use crate::config::Synchronous;

pub struct Index {
    conn: Mutex<Connection>,
}

/// The three marks an instance's row holds: when its queue, its workflow
/// and its schedules next have work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Queue,
    Workflow,
    Schedule,
}

impl Mark {
    /// Every mark, in the order the timer serves them.
    pub const ALL: [Mark; 3] = [Mark::Queue, Mark::Workflow, Mark::Schedule];

    /// The mark's column in `instances`.
    fn column(self) -> &'static str {
        match self {
            Mark::Queue => "queue_due_at",
            Mark::Workflow => "workflow_due_at",
            Mark::Schedule => "schedule_due_at",
        }
    }

    /// The statement that sets the mark of one instance.
    fn update_sql(self) -> &'static str {
        macro_rules! update {
            ($column:literal) => {
                concat!(
                    "UPDATE instances SET ",
                    $column,
                    " = ? WHERE actor = ? AND key = ?"
                )
            };
        }
        match self {
            Mark::Queue => update!("queue_due_at"),
            Mark::Workflow => update!("workflow_due_at"),
            Mark::Schedule => update!("schedule_due_at"),
        }
    }

    /// The query of one actor's instances whose mark is due, earliest
    /// first: a range of the mark's index of that actor, never a scan of
    /// its instances. Asked with `actor IN (...)` beside an index of the
    /// mark alone, SQLite read by the primary key (it guesses an equality
    /// narrower than a range), so at every turn of the timer each mark
    /// read every instance of every actor: a core's worth at a million
    /// instances. `INDEXED BY` leaves the planner no such guess.
    fn due_sql(self) -> &'static str {
        macro_rules! due {
            ($name:literal, $column:literal) => {
                concat!(
                    "SELECT key, ",
                    $column,
                    " FROM instances INDEXED BY instances_",
                    $name,
                    "_due_of_actor WHERE actor = ? AND ",
                    $column,
                    " IS NOT NULL AND ",
                    $column,
                    " <= ? ORDER BY ",
                    $column,
                    " LIMIT ?"
                )
            };
        }
        match self {
            Mark::Queue => due!("queue", "queue_due_at"),
            Mark::Workflow => due!("workflow", "workflow_due_at"),
            Mark::Schedule => due!("schedule", "schedule_due_at"),
        }
    }

    /// The mark's name in logs.
    pub fn name(self) -> &'static str {
        match self {
            Mark::Queue => "queue",
            Mark::Workflow => "workflow",
            Mark::Schedule => "schedule",
        }
    }
}

impl Index {
    /// Opens (creating if needed) the index at `path` with the host's
    /// `synchronous` setting: with `full`, a mark is on disk before the
    /// instance commit that needs it, so a power loss cannot keep the
    /// commit and lose the mark.
    pub fn open_with(path: &Path, synchronous: Synchronous) -> rusqlite::Result<Index> {
        let conn = Connection::open(path)?;
        // Statements run as prepared, whatever is bound (a page of keys
        // binds its `LIMIT`): see `InstanceDb::open`.
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        )?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", synchronous.pragma())?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS instances (
                 actor TEXT NOT NULL,
                 key TEXT NOT NULL,
                 created_at INTEGER NOT NULL,
                 PRIMARY KEY (actor, key)
             ) WITHOUT ROWID;",
        )?;
        for mark in Mark::ALL {
            let column = mark.column();
            let has_column = conn
                .prepare("SELECT 1 FROM pragma_table_info('instances') WHERE name = ?")?
                .exists([column])?;
            if !has_column {
                conn.execute_batch(&format!(
                    "ALTER TABLE instances ADD COLUMN {column} INTEGER"
                ))?;
            }
        }
        // In a cluster: the replicated version each local copy held when
        // its last connection closed (`storage/src/cluster`).
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS replicas (
                 actor TEXT NOT NULL,
                 key TEXT NOT NULL,
                 written_epoch INTEGER NOT NULL,
                 version INTEGER NOT NULL,
                 PRIMARY KEY (actor, key)
             ) WITHOUT ROWID;",
        )?;
        // Each mark's index, by actor (`Mark::due_sql`); hosts before it
        // had one over all actors, which no statement reads now.
        for mark in Mark::ALL {
            let (name, column) = (mark.name(), mark.column());
            conn.execute_batch(&format!(
                "CREATE INDEX IF NOT EXISTS instances_{name}_due_of_actor
                     ON instances (actor, {column}) WHERE {column} IS NOT NULL;
                 DROP INDEX IF EXISTS instances_{name}_due;"
            ))?;
        }
        keep_counts(&conn)?;
        Ok(Index {
            conn: Mutex::new(conn),
        })
    }

    /// Opens the index with the default `synchronous` (for tests).
    #[cfg(test)]
    pub fn open(path: &Path) -> rusqlite::Result<Index> {
        Index::open_with(path, Synchronous::default())
    }

    pub fn insert(&self, actor: &str, key: &str, created_at: i64) -> rusqlite::Result<()> {
        let conn = self.conn.lock().unwrap();
        conn.prepare_cached(
            "INSERT INTO instances (actor, key, created_at) VALUES (?, ?, ?)
             ON CONFLICT (actor, key) DO UPDATE SET created_at = excluded.created_at",
        )?
        .execute(params![actor, key, created_at])?;
        Ok(())
    }

    pub fn remove(&self, actor: &str, key: &str) -> rusqlite::Result<()> {
        let conn = self.conn.lock().unwrap();
        conn.prepare_cached("DELETE FROM instances WHERE actor = ? AND key = ?")?
            .execute([actor, key])?;
        Ok(())
    }

    /// In a cluster: the replicated version (written epoch, version) the
    /// local copy of (`actor`, `key`) held when its last connection closed,
    /// if it has not been opened since.
    pub fn replica(&self, actor: &str, key: &str) -> rusqlite::Result<Option<(i64, i64)>> {
        let conn = self.conn.lock().unwrap();
        conn.prepare_cached(
            "SELECT written_epoch, version FROM replicas WHERE actor = ? AND key = ?",
        )?
        .query_row([actor, key], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
    }

    /// Records the replicated version of the local copy of (`actor`, `key`)
    /// (`None`: unknown, as while it is open).
    pub fn set_replica(
        &self,
        actor: &str,
        key: &str,
        version: Option<(i64, i64)>,
    ) -> rusqlite::Result<()> {
        let conn = self.conn.lock().unwrap();
        match version {
            Some((written_epoch, version)) => conn
                .prepare_cached(
                    "INSERT INTO replicas (actor, key, written_epoch, version) VALUES (?, ?, ?, ?)
                     ON CONFLICT (actor, key) DO UPDATE
                     SET written_epoch = excluded.written_epoch, version = excluded.version",
                )?
                .execute(params![actor, key, written_epoch, version])?,
            None => conn
                .prepare_cached("DELETE FROM replicas WHERE actor = ? AND key = ?")?
                .execute([actor, key])?,
        };
        Ok(())
    }

    /// How many instances each actor has: its row of `instance_counts`,
    /// not a count of its rows, which every scrape of the metrics would
    /// make under the index's lock (a million rows read while creations
    /// wait).
    pub fn count_by_actor(&self) -> rusqlite::Result<Vec<(String, u64)>> {
        let conn = self.conn.lock().unwrap();
        let mut stmt = conn.prepare_cached(
            "SELECT actor, instances FROM instance_counts WHERE instances > 0 ORDER BY actor",
        )?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?
            .collect()
    }

    /// Keys of `actor`'s instances in byte order: those from `from` on,
    /// after `after` and before `before` (each if given), at most `limit`.
    pub fn keys(
        &self,
        actor: &str,
        from: &str,
        after: Option<&str>,
        before: Option<&str>,
        limit: Option<usize>,
    ) -> rusqlite::Result<Vec<String>> {
        let (lower, after_is_lower) = match after {
            Some(after) if after >= from => (after, true),
            _ => (from, false),
        };
        let conn = self.conn.lock().unwrap();
        let mut stmt = conn.prepare_cached(&keys_sql(after_is_lower, before.is_some()))?;
        let limit = limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        stmt.query_map(params![actor, lower, before, limit], |r| r.get(0))?
            .collect()
    }

    /// Lowers the queue mark of (`actor`, `key`) to `queue` and its
    /// schedule mark to `schedule` (each only if given and earlier), sets
    /// its workflow mark to `workflow` (if given: the transaction starts
    /// the workflow of a new instance), then runs `commit`, holding the
    /// index's lock throughout. If a mark cannot be written, `commit` does
    /// not run.
    pub fn lower_marks_around<T, E>(
        &self,
        actor: &str,
        key: &str,
        queue: Option<i64>,
        schedule: Option<i64>,
        workflow: Option<i64>,
        commit: impl FnOnce() -> Result<T, E>,
    ) -> Result<Result<T, E>, rusqlite::Error> {
        let conn = self.conn.lock().unwrap();
        if let Some(at) = workflow {
            conn.prepare_cached(
                "INSERT INTO instances (actor, key, created_at, workflow_due_at)
                 VALUES (?1, ?2, ?3, ?3)
                 ON CONFLICT (actor, key) DO UPDATE SET workflow_due_at = excluded.workflow_due_at",
            )?
            .execute(params![actor, key, at])?;
        }
        let created_at = crate::clock::now_ms();
        conn.prepare_cached(
            "INSERT INTO instances (actor, key, created_at, queue_due_at, schedule_due_at)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (actor, key) DO UPDATE
             SET queue_due_at = CASE WHEN excluded.queue_due_at IS NULL THEN queue_due_at
                     ELSE min(coalesce(queue_due_at, excluded.queue_due_at), excluded.queue_due_at) END,
                 schedule_due_at = CASE WHEN excluded.schedule_due_at IS NULL THEN schedule_due_at
                     ELSE min(coalesce(schedule_due_at, excluded.schedule_due_at), excluded.schedule_due_at) END",
        )?
        .execute(params![actor, key, created_at, queue, schedule])?;
        Ok(commit())
    }

    /// Sets `mark` of (`actor`, `key`) to what `compute` reads from the
    /// instance's committed data (its queue, its schedules), holding the
    /// index's lock meanwhile, so that no commit that lowers the mark comes
    /// in between. Never adds a row.
    pub fn set_mark_from<E>(
        &self,
        mark: Mark,
        actor: &str,
        key: &str,
        compute: impl FnOnce() -> Result<Option<i64>, E>,
    ) -> Result<Result<Option<i64>, E>, rusqlite::Error> {
        let conn = self.conn.lock().unwrap();
        let at = match compute() {
            Ok(at) => at,
            Err(e) => return Ok(Err(e)),
        };
        conn.prepare_cached(mark.update_sql())?
            .execute(params![at, actor, key])?;
        Ok(Ok(at))
    }

    #[cfg(test)]
    /// Sets `mark` of (`actor`, `key`) to `at` (`None`: nothing to do).
    /// Never adds a row (the instance may have been destroyed meanwhile).
    pub fn set_mark(
        &self,
        mark: Mark,
        actor: &str,
        key: &str,
        at: Option<i64>,
    ) -> rusqlite::Result<()> {
        self.set_mark_from(mark, actor, key, || Ok::<_, rusqlite::Error>(at))??;
        Ok(())
    }

    /// Instances of `actors` whose `mark` is at or before `now`, earliest
    /// first, at most `limit`.
    pub fn due(
        &self,
        mark: Mark,
        now: i64,
        actors: &[String],
        limit: usize,
    ) -> rusqlite::Result<Vec<(String, String)>> {
        let conn = self.conn.lock().unwrap();
        let mut stmt = conn.prepare_cached(mark.due_sql())?;
        let mut due = Vec::new();
        for actor in actors {
            let rows = stmt.query_map(params![actor, now, limit as i64], |r| {
                Ok((r.get::<_, i64>(1)?, actor.clone(), r.get(0)?))
            })?;
            for row in rows {
                due.push(row?);
            }
        }
        // Earliest first over all actors; an actor's own are in order.
        due.sort_by_key(|(at, _, _)| *at);
        Ok(due
            .into_iter()
            .take(limit)
            .map(|(_, actor, key)| (actor, key))
            .collect())
    }
}

/// Keeps `instance_counts` (the instances of each actor) with triggers
/// on `instances`: an insert adds one (an upsert that finds the row
/// updates it and adds nothing), a delete takes one away. An index made
/// before the table gets it, filled from `instances`, in one transaction
/// with its triggers, so a crash leaves both or neither.
fn keep_counts(conn: &Connection) -> rusqlite::Result<()> {
    let has_counts = conn
        .prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'instance_counts'")?
        .exists([])?;
    if has_counts {
        return Ok(());
    }
    let made = conn.execute_batch(
        "BEGIN IMMEDIATE;
         CREATE TABLE instance_counts (
             actor TEXT PRIMARY KEY,
             instances INTEGER NOT NULL
         ) WITHOUT ROWID;
         INSERT INTO instance_counts (actor, instances)
             SELECT actor, count(*) FROM instances GROUP BY actor;
         CREATE TRIGGER instance_counted AFTER INSERT ON instances BEGIN
             INSERT OR IGNORE INTO instance_counts (actor, instances) VALUES (new.actor, 0);
             UPDATE instance_counts SET instances = instances + 1 WHERE actor = new.actor;
         END;
         CREATE TRIGGER instance_uncounted AFTER DELETE ON instances BEGIN
             UPDATE instance_counts SET instances = instances - 1 WHERE actor = old.actor;
         END;
         COMMIT;",
    );
    if made.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    made
}

/// The page of keys' statement: one range of the primary key, from the
/// lower bound (`?2`, excluded when it is the last key of the page before)
/// up to `?3` if given, `?4` rows. Each bound is written only when it
/// applies: SQLite does not narrow its range by a bound written as
/// `?n IS NULL OR key > ?n`, so with one every page scanned each key
/// before it, and listing a million keys page by page took 39 s.
fn keys_sql(after_is_lower: bool, bounded: bool) -> String {
    format!(
        "SELECT key FROM instances WHERE actor = ?1 AND key {} ?2 AND {} ORDER BY key LIMIT ?4",
        if after_is_lower { ">" } else { ">=" },
        if bounded { "key < ?3" } else { "?3 IS NULL" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn actors() -> Vec<String> {
        vec!["a".into(), "w".into()]
    }

    /// Runs `f` on `index` and counts the virtual-machine steps SQLite took.
    fn steps_of<T>(index: &Index, f: impl FnOnce(&Index) -> T) -> (T, u64) {
        use std::sync::atomic::{AtomicU64, Ordering};
        let steps = std::sync::Arc::new(AtomicU64::new(0));
        let counter = steps.clone();
        let count = move || {
            counter.fetch_add(1, Ordering::Relaxed);
            false
        };
        index
            .conn
            .lock()
            .unwrap()
            .progress_handler(1, Some(count))
            .unwrap();
        let out = f(index);
        let off: Option<fn() -> bool> = None;
        index.conn.lock().unwrap().progress_handler(1, off).unwrap();
        (out, steps.load(Ordering::Relaxed))
    }

    /// An index with 2,000 instances of actor `a`, `k0000` to `k1999`,
    /// without marks (and the directory it lives in).
    fn index_of_2000_keys() -> (tempfile::TempDir, Index) {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(&dir.path().join("host.sqlite")).unwrap();
        for i in 0..2000 {
            index.insert("a", &format!("k{i:04}"), 1).unwrap();
        }
        (dir, index)
    }

    /// A page of keys reads its own rows, not every key before it: the
    /// page after the 1,990th of 2,000 keys takes SQLite a few dozen steps.
    #[test]
    fn a_page_of_keys_starts_where_the_page_before_ended() {
        let (_dir, index) = index_of_2000_keys();
        let page = |index: &Index| index.keys("a", "", Some("k1990"), None, Some(5)).unwrap();
        page(&index);
        let (page, steps) = steps_of(&index, page);
        assert_eq!(page, ["k1991", "k1992", "k1993", "k1994", "k1995"]);
        assert!(steps < 200, "{steps} steps for a page of 5");
        // The other bounds still hold.
        assert_eq!(
            index.keys("a", "k1998", None, None, None).unwrap(),
            ["k1998", "k1999"]
        );
        assert_eq!(
            index.keys("a", "k1998", Some("k0005"), None, None).unwrap(),
            ["k1998", "k1999"]
        );
        assert_eq!(
            index
                .keys("a", "k0", Some("k0997"), Some("k1"), None)
                .unwrap(),
            ["k0998", "k0999"]
        );
    }

    /// The truth `count_by_actor` keeps: a count of the rows.
    fn counted(index: &Index) -> Vec<(String, u64)> {
        let conn = index.conn.lock().unwrap();
        let mut stmt = conn
            .prepare("SELECT actor, count(*) FROM instances GROUP BY actor ORDER BY actor")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    /// A scrape of the metrics counts each actor's instances: a few steps
    /// beside 2,000 instances, not a read of each row under the index's
    /// lock.
    #[test]
    fn the_instances_of_each_actor_are_counted_without_a_look_at_each() {
        let (_dir, index) = index_of_2000_keys();
        index.insert("w", "x", 1).unwrap();
        index.count_by_actor().unwrap();
        let (counts, steps) = steps_of(&index, |index| index.count_by_actor().unwrap());
        assert_eq!(counts, [("a".to_string(), 2000), ("w".to_string(), 1)]);
        assert!(steps < 100, "{steps} steps to count the instances");
    }

    /// The counts follow inserts, upserts of a row that exists, rows made
    /// by a mark, and deletes; an index made before the counts gets them
    /// from its rows when it opens, and keeps them from then on.
    #[test]
    fn the_counts_follow_every_change_and_an_older_index_gets_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("host.sqlite");
        let index = Index::open(&path).unwrap();
        for (actor, key) in [("a", "1"), ("a", "2"), ("a", "1"), ("w", "x"), ("w", "y")] {
            index.insert(actor, key, 1).unwrap();
        }
        index
            .lower_marks_around("q", "k", Some(1), None, None, || Ok::<_, ()>(()))
            .unwrap()
            .unwrap();
        index.remove("a", "2").unwrap();
        index.remove("a", "never").unwrap();
        index.remove("w", "x").unwrap();
        index.remove("w", "y").unwrap();
        let expected = [("a".to_string(), 1), ("q".to_string(), 1)];
        assert_eq!(counted(&index), expected);
        assert_eq!(index.count_by_actor().unwrap(), expected);

        // As an index of a host before the counts.
        index
            .conn
            .lock()
            .unwrap()
            .execute_batch(
                "DROP TRIGGER instance_counted; DROP TRIGGER instance_uncounted;
                 DROP TABLE instance_counts;",
            )
            .unwrap();
        index.insert("a", "3", 1).unwrap();
        drop(index);
        let index = Index::open(&path).unwrap();
        let expected = [("a".to_string(), 2), ("q".to_string(), 1)];
        assert_eq!(index.count_by_actor().unwrap(), expected);
        index.insert("w", "z", 1).unwrap();
        index.remove("a", "1").unwrap();
        assert_eq!(index.count_by_actor().unwrap(), counted(&index));
        drop(index);
        let index = Index::open(&path).unwrap();
        assert_eq!(index.count_by_actor().unwrap(), counted(&index));
    }

    /// The timer's read of due marks (every 100 ms, of each kind) takes
    /// the due rows of each actor from the mark's index: a few dozen steps
    /// beside 2,000 instances without a mark, not a look at each of them.
    #[test]
    fn due_marks_are_read_without_a_look_at_every_instance() {
        let (_dir, index) = index_of_2000_keys();
        for (actor, key, at) in [
            ("a", "k0007", 7),
            ("w", "x", 3),
            ("a", "k1500", 2),
            ("a", "late", 50),
        ] {
            index
                .lower_marks_around(actor, key, Some(at), Some(at), Some(at), || Ok::<_, ()>(()))
                .unwrap()
                .unwrap();
        }
        let expected: Vec<(String, String)> = [("a", "k1500"), ("w", "x"), ("a", "k0007")]
            .map(|(a, k)| (a.to_string(), k.to_string()))
            .into();
        for mark in Mark::ALL {
            let read = |index: &Index| index.due(mark, 10, &actors(), 10).unwrap();
            read(&index);
            let (due, steps) = steps_of(&index, read);
            assert_eq!(due, expected, "{}", mark.name());
            assert!(
                steps < 200,
                "{steps} steps for three due {} marks",
                mark.name()
            );
            assert_eq!(index.due(mark, 10, &actors(), 2).unwrap(), expected[..2]);
        }
    }

    #[test]
    fn marks_of_actors_left_out_are_neither_read_nor_lost() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(&dir.path().join("host.sqlite")).unwrap();
        for (actor, at) in [("gone", 1), ("a", 5)] {
            index
                .lower_marks_around(actor, "k", Some(at), Some(at), Some(at), || Ok::<_, ()>(()))
                .unwrap()
                .unwrap();
        }
        let only_a = [("a".to_string(), "k".to_string())];
        assert_eq!(index.due(Mark::Queue, 10, &actors(), 1).unwrap(), only_a);
        assert_eq!(index.due(Mark::Schedule, 10, &actors(), 1).unwrap(), only_a);
        assert_eq!(index.due(Mark::Workflow, 10, &actors(), 1).unwrap(), only_a);
        let all = ["gone".to_string(), "a".to_string()];
        assert_eq!(
            index.due(Mark::Queue, 10, &all, 5).unwrap().len(),
            2,
            "kept"
        );
    }

    #[test]
    fn the_index_follows_the_synchronous_setting() {
        let dir = tempfile::tempdir().unwrap();
        for (setting, expected) in [
            (Synchronous::Off, 0),
            (Synchronous::Normal, 1),
            (Synchronous::Full, 2),
        ] {
            let path = dir.path().join(format!("host-{expected}.sqlite"));
            let index = Index::open_with(&path, setting).unwrap();
            let conn = index.conn.lock().unwrap();
            let mode: String = conn
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap();
            let sync: i64 = conn
                .query_row("PRAGMA synchronous", [], |r| r.get(0))
                .unwrap();
            assert_eq!((mode.as_str(), sync), ("wal", expected), "{setting:?}");
        }
    }

    #[test]
    fn workflow_marks_are_made_at_creation_and_moved_by_drivers() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(&dir.path().join("host.sqlite")).unwrap();
        index
            .lower_marks_around("w", "k", None, None, Some(10), || Ok::<_, ()>(()))
            .unwrap()
            .unwrap();
        index.insert("w", "k", 10).unwrap();
        assert_eq!(
            index.due(Mark::Workflow, 10, &actors(), 5).unwrap(),
            [("w".into(), "k".into())]
        );
        index.set_mark(Mark::Workflow, "w", "k", Some(100)).unwrap();
        assert!(
            index
                .due(Mark::Workflow, 99, &actors(), 5)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            index.due(Mark::Workflow, 100, &actors(), 5).unwrap().len(),
            1
        );
        index.set_mark(Mark::Workflow, "w", "k", None).unwrap();
        assert!(
            index
                .due(Mark::Workflow, i64::MAX, &actors(), 5)
                .unwrap()
                .is_empty()
        );
        // The queue mark is separate.
        assert!(
            index
                .due(Mark::Queue, i64::MAX, &actors(), 5)
                .unwrap()
                .is_empty()
        );
        // A destroyed instance does not come back through a late mark.
        index.remove("w", "k").unwrap();
        index.set_mark(Mark::Workflow, "w", "k", Some(5)).unwrap();
        assert!(index.keys("w", "", None, None, None).unwrap().is_empty());
    }

    #[test]
    fn schedule_marks_are_lowered_by_commits_and_set_by_the_runner() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(&dir.path().join("host.sqlite")).unwrap();
        index.insert("a", "k", 1).unwrap();
        let lower = |queue, schedule| {
            index
                .lower_marks_around("a", "k", queue, schedule, None, || Ok::<_, ()>(()))
                .unwrap()
                .unwrap()
        };
        lower(None, Some(500));
        lower(None, Some(700));
        assert!(
            index
                .due(Mark::Schedule, 499, &actors(), 10)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            index.due(Mark::Schedule, 500, &actors(), 10).unwrap().len(),
            1
        );
        assert!(
            index
                .due(Mark::Queue, i64::MAX, &actors(), 10)
                .unwrap()
                .is_empty(),
            "the queue mark is apart"
        );
        lower(Some(5), None);
        assert_eq!(index.due(Mark::Queue, 5, &actors(), 10).unwrap().len(), 1);
        assert!(
            index
                .due(Mark::Schedule, 499, &actors(), 10)
                .unwrap()
                .is_empty(),
            "kept by a queue append"
        );
        index
            .set_mark_from(Mark::Schedule, "a", "k", || Ok::<_, ()>(Some(900)))
            .unwrap()
            .unwrap();
        assert!(
            index
                .due(Mark::Schedule, 899, &actors(), 10)
                .unwrap()
                .is_empty()
        );
        index
            .set_mark_from(Mark::Schedule, "a", "k", || Ok::<_, ()>(None))
            .unwrap()
            .unwrap();
        assert!(
            index
                .due(Mark::Schedule, i64::MAX, &actors(), 10)
                .unwrap()
                .is_empty()
        );
        // The runner never brings back a destroyed instance.
        index.remove("a", "k").unwrap();
        index
            .set_mark_from(Mark::Schedule, "a", "k", || Ok::<_, ()>(Some(1)))
            .unwrap()
            .unwrap();
        assert!(index.keys("a", "", None, None, None).unwrap().is_empty());
    }

    #[test]
    fn marks_are_lowered_by_appends_and_set_by_pumps() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(&dir.path().join("host.sqlite")).unwrap();
        index.insert("a", "k", 1).unwrap();
        assert!(
            index
                .due(Mark::Queue, i64::MAX, &actors(), 10)
                .unwrap()
                .is_empty()
        );
        index
            .lower_marks_around("a", "k", Some(50), None, None, || Ok::<_, ()>(()))
            .unwrap()
            .unwrap();
        index
            .lower_marks_around("a", "k", Some(70), None, None, || Ok::<_, ()>(()))
            .unwrap()
            .unwrap();
        assert!(
            index
                .due(Mark::Queue, 49, &actors(), 10)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            index.due(Mark::Queue, 50, &actors(), 10).unwrap(),
            [("a".into(), "k".into())]
        );
        index
            .set_mark_from(Mark::Queue, "a", "k", || Ok::<_, ()>(Some(90)))
            .unwrap()
            .unwrap();
        assert!(
            index
                .due(Mark::Queue, 89, &actors(), 10)
                .unwrap()
                .is_empty()
        );
        index.insert("a", "k", 1).unwrap();
        assert_eq!(
            index.due(Mark::Queue, 90, &actors(), 10).unwrap().len(),
            1,
            "a re-insert keeps the mark"
        );
        index.set_mark(Mark::Queue, "a", "k", None).unwrap();
        assert!(
            index
                .due(Mark::Queue, i64::MAX, &actors(), 10)
                .unwrap()
                .is_empty()
        );
        // An append to an instance not yet indexed makes its row.
        index
            .lower_marks_around("b", "k", Some(5), None, None, || Ok::<_, ()>(()))
            .unwrap()
            .unwrap();
        assert_eq!(index.keys("b", "", None, None, None).unwrap(), ["k"]);
        for key in ["ka", "kb", "l", "k\u{10FFFF}"] {
            index.insert("b", key, 1).unwrap();
        }
        let page =
            |from, after, before, limit| index.keys("b", from, after, before, limit).unwrap();
        assert_eq!(
            page("k", None, Some("l"), None),
            ["k", "ka", "kb", "k\u{10FFFF}"]
        );
        assert_eq!(
            page("k", Some("ka"), Some("l"), Some(2)),
            ["kb", "k\u{10FFFF}"]
        );
        assert_eq!(page("", Some("kb"), None, Some(1)), ["k\u{10FFFF}"]);
    }
}
