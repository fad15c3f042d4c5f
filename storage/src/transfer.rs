//! Copies of one instance's database, for export and import.
//!
//! [`snapshot`] gives what is committed, as the bytes of one database
//! file, read in one read transaction (so it is consistent while the
//! instance keeps working). [`open_image`] opens such bytes in memory,
//! read-only, once SQLite's own check of them passes. [`InstanceDb::import`]
//! copies an image into a new instance's open transaction, table by table,
//! so that it commits like any other transaction (and, in a cluster,
//! ships its pages like one).
//!
//! An image is input from outside, so the copy trusts none of its schema:
//! - the host's tables (`_burrow_*`) are made from the host's own schema,
//!   never from the image's text; a host table this version does not know
//!   is refused, and so is a column it does not have;
//! - the actor's tables, indexes, views and triggers are made from the
//!   image's text under the rules of guest SQL (the sandbox and its schema
//!   guard), as if the guest had made them;
//! - every table is made first, then the rows of each are copied by column
//!   name (foreign keys checked at the commit, so that a table's rows may
//!   come before those they refer to), then indexes, views and triggers,
//!   so that no trigger fires on the copy.

use rusqlite::types::Value;
use rusqlite::{Connection, MAIN_DB, OpenFlags, params_from_iter};

use super::InstanceDb;
use super::sandbox::{SchemaGuard, is_internal, refuse_statement};

/// The first bytes of every SQLite database file.
const SQLITE_HEADER: &[u8] = b"SQLite format 3\0";

/// The bytes of the database `conn` reads, as committed now: a file in
/// rollback-journal mode, whatever mode the database itself is in.
pub fn snapshot(conn: &mut Connection) -> rusqlite::Result<Vec<u8>> {
    conn.execute_batch("BEGIN")?;
    // The read transaction begins with the first read.
    let read = conn
        .query_row("SELECT count(*) FROM main.sqlite_schema", [], |_| Ok(()))
        .and_then(|()| conn.serialize(MAIN_DB).map(|data| data.to_vec()));
    let _ = conn.execute_batch("ROLLBACK");
    let mut bytes = read?;
    // Bytes 18 and 19 of the header: the read and write format versions,
    // 2 in WAL mode. An image is one file, with no log beside it.
    if bytes.len() >= 20 {
        bytes[18] = 1;
        bytes[19] = 1;
    }
    Ok(bytes)
}

/// `bytes` opened as a read-only database in memory, once SQLite finds
/// nothing wrong with it (`PRAGMA quick_check`); else what is wrong.
pub fn open_image(bytes: &[u8]) -> Result<Connection, String> {
    if bytes.len() < 100 || !bytes.starts_with(SQLITE_HEADER) {
        return Err("it holds no SQLite database".into());
    }
    let damaged = |e: rusqlite::Error| format!("its database cannot be read: {e}");
    let mut conn = Connection::open_with_flags(
        ":memory:",
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(damaged)?;
    // What SQLite advises for a database from outside: no function of its
    // schema that is not innocuous, no writes past SQL's own.
    conn.pragma_update(None, "trusted_schema", false)
        .map_err(damaged)?;
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)
        .map_err(damaged)?;
    conn.deserialize_read_exact(MAIN_DB, bytes, bytes.len(), true)
        .map_err(damaged)?;
    let verdict: Vec<String> = conn
        .prepare("PRAGMA main.quick_check")
        .and_then(|mut stmt| {
            stmt.query_map([], |row| row.get::<_, String>(0))?
                .collect::<rusqlite::Result<_>>()
        })
        .map_err(damaged)?;
    if verdict != ["ok"] {
        return Err(format!("its database is damaged: {}", verdict.join("; ")));
    }
    Ok(conn)
}

/// One object of an image's schema.
struct Object {
    kind: String,
    name: String,
    sql: Option<String>,
}

/// The host's tables, each with the schema that makes it (and its
/// indexes): an image's host objects are made from here, never from its
/// own text.
const HOST_SCHEMAS: &[(&[&str], &str)] = &[
    (
        &["_burrow_instance", "_burrow_state"],
        super::instance_db::SCHEMA,
    ),
    (
        &["_burrow_queue", "_burrow_dead_letter"],
        super::queue::EVENTS_SCHEMA,
    ),
    (&["_burrow_queue_policy"], super::queue::POLICY_SCHEMA),
    (
        &["_burrow_workflow", "_burrow_workflow_history"],
        super::workflow::SCHEMA,
    ),
    (
        &["_burrow_workflow_requests"],
        super::workflow::OLD_REQUESTS_SCHEMA,
    ),
    (&["_burrow_schedule"], super::schedule::SCHEMA),
    (&["_burrow_pause"], super::pause::SCHEMA),
];

/// The host's own schema for its table `name`, if this version has one.
fn host_schema(name: &str) -> Option<&'static str> {
    HOST_SCHEMAS
        .iter()
        .find(|(tables, _)| tables.iter().any(|t| t.eq_ignore_ascii_case(name)))
        .map(|(_, schema)| *schema)
}

/// Whether the host's schema of some table makes the index `name`.
fn host_schema_has(name: &str) -> bool {
    let made = format!("main.{name}");
    HOST_SCHEMAS.iter().any(|(_, schema)| {
        schema
            .split_whitespace()
            .any(|word| word.eq_ignore_ascii_case(&made))
    })
}

/// `name` quoted as an SQL identifier.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl InstanceDb {
    /// Copies the image `source` (from [`open_image`]) into this new
    /// instance's open transaction, as the module docs say: its tables
    /// (but the instance's own record, which the new instance writes), its
    /// `AUTOINCREMENT` counters and its `user_version`. An error says what
    /// of the image was refused; the caller rolls the transaction back.
    pub fn import(&self, source: &Connection) -> Result<(), String> {
        let sqlite = |e: rusqlite::Error| e.to_string();
        let objects: Vec<Object> = source
            .prepare("SELECT type, name, sql FROM main.sqlite_schema ORDER BY rowid")
            .and_then(|mut stmt| {
                stmt.query_map([], |row| {
                    Ok(Object {
                        kind: row.get(0)?,
                        name: row.get(1)?,
                        sql: row.get(2)?,
                    })
                })?
                .collect::<rusqlite::Result<_>>()
            })
            .map_err(sqlite)?;
        let shadows = shadow_tables(source).map_err(sqlite)?;
        // Rows go table by table, not in the order they were written: the
        // foreign keys among them are checked at the commit.
        self.conn
            .pragma_update(None, "defer_foreign_keys", true)
            .map_err(sqlite)?;
        let mut tables = Vec::new();
        for object in objects.iter().filter(|o| o.kind == "table") {
            let name = &object.name;
            if name.to_ascii_lowercase().starts_with("sqlite_") || shadows.contains(name) {
                continue;
            }
            if is_internal(name) {
                let schema = host_schema(name).ok_or_else(|| {
                    format!(
                        "it holds the table `{name}`, which this version of Burrow does not know"
                    )
                })?;
                self.conn.execute_batch(schema).map_err(sqlite)?;
                if name.eq_ignore_ascii_case("_burrow_instance") {
                    continue;
                }
            } else {
                self.create_as_guest(object)?;
            }
            tables.push(name);
        }
        // Every table first: a foreign key may name one made after its own.
        for name in tables {
            self.copy_rows(source, name)
                .map_err(|e| format!("the rows of `{name}`: {e}"))?;
        }
        for object in objects.iter().filter(|o| o.kind != "table") {
            // An index SQLite made for a constraint has no text.
            if object.sql.is_none() {
                continue;
            }
            if is_internal(&object.name) {
                // The host's schema made the host's own indexes.
                if object.kind == "index" && host_schema_has(&object.name) {
                    continue;
                }
                return Err(format!(
                    "it holds the {} `{}`, which is not one of the host's",
                    object.kind, object.name
                ));
            }
            self.create_as_guest(object)?;
        }
        self.copy_counters(source).map_err(sqlite)?;
        let version: i64 = source
            .query_row("PRAGMA main.user_version", [], |row| row.get(0))
            .map_err(sqlite)?;
        self.conn
            .pragma_update(Some("main"), "user_version", version)
            .map_err(sqlite)
    }

    /// Makes `object` from its text under the rules of guest SQL.
    fn create_as_guest(&self, object: &Object) -> Result<(), String> {
        let name = &object.name;
        let Some(sql) = &object.sql else {
            return Err(format!("the {} `{name}` has no definition", object.kind));
        };
        let refused = |why: String| format!("the {} `{name}` is refused: {why}", object.kind);
        if let Some(why) = refuse_statement(sql) {
            return Err(refused(why));
        }
        let _guest = self.sandbox.enter_guest();
        let failed = |e: rusqlite::Error| match self.sandbox.take_denial() {
            Some(why) => refused(why),
            None => refused(e.to_string()),
        };
        let mut stmt = self.conn.prepare(sql).map_err(failed)?;
        if stmt.parameter_count() > 0 || !sql_creates(sql, &object.kind) {
            return Err(refused("its definition is not one CREATE statement".into()));
        }
        let guard = SchemaGuard::begin(&self.conn, &self.sandbox).map_err(failed)?;
        stmt.raw_execute().map_err(failed)?;
        drop(stmt);
        match guard {
            Some(guard) => guard.finish().map_err(failed)?.map_err(refused),
            None => Ok(()),
        }
    }

    /// Copies every row of `table` from `source`, by column name (with
    /// their `rowid`s, for a table that has them).
    fn copy_rows(&self, source: &Connection, table: &str) -> rusqlite::Result<()> {
        let columns = column_names(source, table)?;
        let ours = column_names(&self.conn, table)?;
        if let Some(extra) = columns.iter().find(|c| !ours.contains(c)) {
            return Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_SCHEMA),
                Some(format!(
                    "this version of Burrow has no column `{extra}` there"
                )),
            ));
        }
        let mut list: Vec<String> = columns.iter().map(|c| quoted(c)).collect();
        let rowid_free = !columns
            .iter()
            .any(|c| ["rowid", "_rowid_", "oid"].contains(&c.to_ascii_lowercase().as_str()));
        let select = |list: &[String]| {
            source.prepare(&format!(
                "SELECT {} FROM main.{}",
                list.join(", "),
                quoted(table)
            ))
        };
        let mut read = match has_rowid(source, table)? {
            // A virtual table may have none: then its rows go without.
            Some(maybe) if rowid_free => {
                let with_rowid = [vec!["rowid".to_string()], list.clone()].concat();
                match select(&with_rowid) {
                    Ok(read) => {
                        list = with_rowid;
                        read
                    }
                    Err(_) if maybe => select(&list)?,
                    Err(e) => return Err(e),
                }
            }
            _ => select(&list)?,
        };
        let marks = vec!["?"; list.len()].join(", ");
        let list = list.join(", ");
        let mut write = self.conn.prepare(&format!(
            "INSERT INTO main.{} ({list}) VALUES ({marks})",
            quoted(table)
        ))?;
        let width = read.column_count();
        let mut rows = read.query([])?;
        while let Some(row) = rows.next()? {
            let values = (0..width)
                .map(|i| row.get::<_, Value>(i))
                .collect::<rusqlite::Result<Vec<_>>>()?;
            write.execute(params_from_iter(values))?;
        }
        Ok(())
    }

    /// The `AUTOINCREMENT` counters of the image's tables.
    fn copy_counters(&self, source: &Connection) -> rusqlite::Result<()> {
        let has_sequence = |conn: &Connection| {
            conn.query_row(
                "SELECT count(*) FROM main.sqlite_schema WHERE name = 'sqlite_sequence'",
                [],
                |row| row.get::<_, i64>(0),
            )
        };
        if has_sequence(source)? == 0 || has_sequence(&self.conn)? == 0 {
            return Ok(());
        }
        let mut read = source.prepare("SELECT name, seq FROM main.sqlite_sequence")?;
        let mut rows = read.query([])?;
        while let Some(row) = rows.next()? {
            let (name, seq): (String, i64) = (row.get(0)?, row.get(1)?);
            self.conn
                .execute("DELETE FROM main.sqlite_sequence WHERE name = ?", [&name])?;
            self.conn.execute(
                "INSERT INTO main.sqlite_sequence (name, seq) VALUES (?, ?)",
                rusqlite::params![name, seq],
            )?;
        }
        Ok(())
    }
}

/// Whether `sql` begins as a `CREATE` of an object of `kind` (SQLite
/// prepares one statement, and rusqlite refuses a text with more after it).
fn sql_creates(sql: &str, kind: &str) -> bool {
    let words: Vec<String> = sql
        .split_whitespace()
        .take(4)
        .map(str::to_ascii_uppercase)
        .collect();
    let kind = kind.to_ascii_uppercase();
    words.first().is_some_and(|w| w == "CREATE") && words.iter().skip(1).any(|w| *w == kind)
}

/// The columns of `table`, in order.
fn column_names(conn: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?, 'main')")?;
    stmt.query_map([table], |row| row.get(0))?.collect()
}

/// Whether `table` has `rowid`s: `None` for a `WITHOUT ROWID` table,
/// `Some(false)` for an ordinary one, `Some(true)` (maybe) for a virtual
/// one.
fn has_rowid(conn: &Connection, table: &str) -> rusqlite::Result<Option<bool>> {
    let (kind, without_rowid): (String, bool) = conn.query_row(
        "SELECT type, wr FROM pragma_table_list(?) WHERE schema = 'main'",
        [table],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    Ok(match (kind.as_str(), without_rowid) {
        ("virtual", _) => Some(true),
        (_, false) => Some(false),
        (_, true) => None,
    })
}

/// The tables SQLite keeps for the image's virtual tables: a virtual
/// table makes its own when it is made, and its rows are copied through
/// it.
fn shadow_tables(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn
        .prepare("SELECT name FROM pragma_table_list WHERE schema = 'main' AND type = 'shadow'")?;
    stmt.query_map([], |row| row.get(0))?.collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Synchronous;
    use crate::deadline::Deadline;

    fn open(path: &std::path::Path) -> InstanceDb {
        InstanceDb::open(path, Synchronous::Normal, 1 << 30, Deadline::default()).unwrap()
    }

    /// An instance with the host's tables, a queue with one event, and
    /// tables, an index, a view and a trigger of its own.
    fn source(dir: &std::path::Path) -> InstanceDb {
        let db = open(&dir.join("source.sqlite"));
        db.begin().unwrap();
        db.create_schema().unwrap();
        db.record_creation("counter", "a", 1).unwrap();
        db.write_state(b"{\"n\":3}").unwrap();
        db.ensure_queue_schema().unwrap();
        db.conn
            .execute_batch(
                "INSERT INTO main._burrow_queue (type, payload, priority, grp, created_at)
                     VALUES ('tick', '1', 0, '', 5);
                 CREATE TABLE items (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT);
                 CREATE TABLE log (what TEXT, item REFERENCES later (id));
                 CREATE TABLE later (id INTEGER PRIMARY KEY);
                 INSERT INTO later VALUES (1);
                 INSERT INTO log VALUES ('kept', 1);
                 CREATE TABLE pairs (k TEXT PRIMARY KEY, v) WITHOUT ROWID;
                 INSERT INTO items (name) VALUES ('x'), ('y');
                 DELETE FROM items WHERE name = 'y';
                 INSERT INTO pairs VALUES ('a', 1);
                 CREATE INDEX items_name ON items (name);
                 CREATE VIEW names AS SELECT name FROM items;
                 CREATE VIRTUAL TABLE docs USING fts5 (body);
                 INSERT INTO docs (rowid, body) VALUES (5, 'burrows are warm');
                 CREATE TRIGGER logged AFTER INSERT ON items BEGIN
                     INSERT INTO log (what) VALUES (new.name);
                 END;
                 PRAGMA user_version = 7;",
            )
            .unwrap();
        db.commit().unwrap();
        db
    }

    fn image(dir: &std::path::Path) -> Vec<u8> {
        let mut reader = Connection::open(dir.join("source.sqlite")).unwrap();
        snapshot(&mut reader).unwrap()
    }

    fn import_into(dir: &std::path::Path, bytes: &[u8]) -> (InstanceDb, Result<(), String>) {
        let db = open(&dir.join("copy.sqlite"));
        db.begin().unwrap();
        db.create_schema().unwrap();
        let result = open_image(bytes).and_then(|source| db.import(&source));
        match &result {
            Ok(()) => {
                db.record_creation("counter", "b", 2).unwrap();
                db.commit().unwrap();
            }
            Err(_) => db.rollback(),
        }
        (db, result)
    }

    fn rows(db: &InstanceDb, sql: &str) -> Vec<String> {
        let mut stmt = db.conn.prepare(sql).unwrap();
        stmt.query_map([], |row| row.get::<_, Value>(0))
            .unwrap()
            .map(|v| format!("{:?}", v.unwrap()))
            .collect()
    }

    #[test]
    fn a_copy_has_the_rows_schema_counters_and_version_of_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let _source = source(dir.path());
        let (copy, result) = import_into(dir.path(), &image(dir.path()));
        result.unwrap();
        assert_eq!(copy.read_state().unwrap().unwrap(), b"{\"n\":3}");
        assert_eq!(
            rows(&copy, "SELECT type FROM _burrow_queue"),
            ["Text(\"tick\")"]
        );
        assert_eq!(
            rows(&copy, "SELECT key FROM _burrow_instance"),
            ["Text(\"b\")"]
        );
        assert_eq!(rows(&copy, "SELECT name FROM names"), ["Text(\"x\")"]);
        assert_eq!(rows(&copy, "SELECT v FROM pairs"), ["Integer(1)"]);
        // The trigger did not fire on the copy, and fires afterwards.
        assert_eq!(rows(&copy, "SELECT what FROM log"), ["Text(\"kept\")"]);
        copy.conn
            .execute("INSERT INTO items (name) VALUES ('z')", [])
            .unwrap();
        assert_eq!(
            rows(&copy, "SELECT what FROM log"),
            ["Text(\"kept\")", "Text(\"z\")"]
        );
        // The counter went on from the source's: 'y' had 2.
        assert_eq!(
            rows(&copy, "SELECT id FROM items WHERE name = 'z'"),
            ["Integer(3)"]
        );
        assert_eq!(rows(&copy, "PRAGMA user_version"), ["Integer(7)"]);
        assert_eq!(
            rows(&copy, "SELECT rowid FROM docs WHERE docs MATCH 'warm'"),
            ["Integer(5)"]
        );
        assert_eq!(rows(&copy, "PRAGMA integrity_check"), ["Text(\"ok\")"]);
    }

    /// A workflow of before the history's `requests` column keeps its
    /// steps' requests in a table of their own, which comes along.
    #[test]
    fn the_requests_table_of_an_earlier_version_comes_along() {
        let dir = tempfile::tempdir().unwrap();
        let source = source(dir.path());
        source
            .conn
            .execute_batch(super::super::workflow::OLD_REQUESTS_SCHEMA)
            .unwrap();
        source
            .conn
            .execute(
                "INSERT INTO main._burrow_workflow_requests
                     (location, attempt, method, authority, outcome, at)
                     VALUES ('0', 1, 'POST', 'http://a', 'answered', 9)",
                [],
            )
            .unwrap();
        let (copy, result) = import_into(dir.path(), &image(dir.path()));
        result.unwrap();
        assert_eq!(
            rows(&copy, "SELECT method FROM _burrow_workflow_requests"),
            ["Text(\"POST\")"]
        );
    }

    #[test]
    fn a_damaged_image_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let _source = source(dir.path());
        let mut bytes = image(dir.path());
        assert!(
            open_image(b"not a database")
                .unwrap_err()
                .contains("no SQLite database")
        );
        let half = bytes.len() / 2;
        bytes.truncate(half);
        assert!(open_image(&bytes).is_err());
    }

    /// An image is input from outside: what a guest could not make, and a
    /// host table of another shape, are refused, and nothing is kept.
    #[test]
    fn an_image_with_what_no_guest_could_make_is_refused() {
        for (sql, says) in [
            ("CREATE TABLE _burrow_mine (x)", "does not know"),
            (
                "CREATE TRIGGER t AFTER INSERT ON _burrow_state BEGIN SELECT 1; END",
                "is refused",
            ),
            (
                "ALTER TABLE _burrow_state ADD COLUMN extra",
                "no column `extra`",
            ),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let _source = source(dir.path());
            let conn = Connection::open(dir.path().join("source.sqlite")).unwrap();
            conn.execute_batch(sql).unwrap();
            drop(conn);
            let (copy, result) = import_into(dir.path(), &image(dir.path()));
            let error = result.unwrap_err();
            assert!(error.contains(says), "{sql}: {error}");
            assert!(
                copy.created_at().unwrap().is_none(),
                "{sql}: nothing is kept"
            );
        }
    }
}
