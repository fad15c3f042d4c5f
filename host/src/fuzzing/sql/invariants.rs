//! The invariants of the instance database checked after every operation
//! of the `sql` target: the `_burrow_*` objects are exactly the host's, no
//! guest table has a foreign key into a host table, the instance record is
//! unchanged, the host's tables hold what it acknowledged, the host's
//! `AUTOINCREMENT` counters are the last ids it handed out, and no row of
//! the planner's statistics names a host object.

use std::sync::OnceLock;

use rusqlite::Connection;

use super::acknowledged::read_main;
use super::render::show;
use super::session::SqlSession;

impl SqlSession {
    /// The invariants after every operation.
    pub(super) fn check(&self, problems: &mut Vec<String>) {
        let conn = &self.session.state.db().conn;
        match internal_objects(conn, "main") {
            Ok(main) => {
                let host = host_objects();
                let without_schedules: Vec<_> = host
                    .iter()
                    .filter(|o| o.2 != "_burrow_schedule")
                    .cloned()
                    .collect();
                if main != *host && main != without_schedules {
                    let foreign: Vec<_> = main.iter().filter(|o| !host.contains(o)).collect();
                    let missing: Vec<_> = without_schedules
                        .iter()
                        .filter(|o| !main.contains(o))
                        .collect();
                    problems.push(format!(
                        "the `_burrow_*` objects of main are not the host's: not the host's {foreign:?}, missing {missing:?}"
                    ));
                }
            }
            Err(e) => problems.push(format!("main's schema is unreadable: {e}")),
        }
        match internal_objects(conn, "temp") {
            Ok(temp) if temp.is_empty() => {}
            Ok(temp) => problems.push(format!("temp has `_burrow_*` objects: {temp:?}")),
            Err(e) => problems.push(format!("temp's schema is unreadable: {e}")),
        }
        match foreign_keys_into_host_tables(conn) {
            Ok(keys) if keys.is_empty() => {}
            Ok(keys) => problems.push(format!(
                "guest tables have foreign keys into host tables: {keys:?}"
            )),
            Err(e) => problems.push(format!("foreign keys are unreadable: {e}")),
        }
        let record = conn.query_row(
            "SELECT actor, key, created_at FROM main._burrow_instance WHERE id = 1",
            [],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get(2)?)),
        );
        match record {
            Ok(record) if record == ("fuzz".into(), "key".into(), 1i64) => {}
            other => problems.push(format!("the instance record changed: {other:?}")),
        }
        match read_main(conn) {
            Ok(main) => {
                if main.state != self.model.current.state {
                    problems.push(format!(
                        "main._burrow_state holds {}; the host acknowledged {}",
                        show(main.state.as_deref()),
                        show(self.model.current.state.as_deref())
                    ));
                }
                if main.events != self.model.current.events {
                    problems.push(format!(
                        "main._burrow_queue holds events {:?}; the host's are {:?}",
                        main.events, self.model.current.events
                    ));
                }
                if main.schedules != self.model.current.schedules {
                    problems.push(format!(
                        "main._burrow_schedule holds schedules {:?}; the host's are {:?}",
                        main.schedules, self.model.current.schedules
                    ));
                }
                if main.counters != self.model.current.counters {
                    problems.push(format!(
                        "sqlite_sequence holds the host's counters {:?}; the last ids the host handed out are {:?}",
                        main.counters, self.model.current.counters
                    ));
                }
            }
            Err(e) => problems.push(format!("the host's tables are unreadable: {e}")),
        }
        match statistics_of_host_objects(conn) {
            Ok(rows) if rows.is_empty() => {}
            Ok(rows) => problems.push(format!(
                "the planner's statistics name host objects: {rows:?}"
            )),
            Err(e) => problems.push(format!("the planner's statistics are unreadable: {e}")),
        }
    }
}

/// (statistics table, table, index) of every row of `sqlite_stat1` and
/// `sqlite_stat4`, in main or temp, that names a host object.
pub(super) fn statistics_of_host_objects(
    conn: &Connection,
) -> rusqlite::Result<Vec<(String, String, Option<String>)>> {
    let mut rows = Vec::new();
    for schema in ["main", "temp"] {
        for table in ["sqlite_stat1", "sqlite_stat4"] {
            let exists = conn
                .prepare(&format!(
                    "SELECT 1 FROM {schema}.sqlite_schema WHERE type = 'table' AND name = ?1"
                ))?
                .exists([table])?;
            if !exists {
                continue;
            }
            let sql = format!(
                "SELECT tbl, idx FROM {schema}.{table}
                 WHERE tbl LIKE '\\_burrow\\_%' ESCAPE '\\' OR idx LIKE '\\_burrow\\_%' ESCAPE '\\'"
            );
            let found: Vec<(String, Option<String>)> = conn
                .prepare(&sql)?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?;
            rows.extend(
                found
                    .into_iter()
                    .map(|(tbl, idx)| (format!("{schema}.{table}"), tbl, idx)),
            );
        }
    }
    Ok(rows)
}

/// (type, name, table, SQL) of a schema's objects with an internal name or
/// on a table with one.
pub(super) type SchemaObject = (String, String, String, Option<String>);

pub(super) fn internal_objects(
    conn: &Connection,
    schema: &str,
) -> rusqlite::Result<Vec<SchemaObject>> {
    let sql = format!(
        "SELECT type, name, tbl_name, sql FROM {schema}.sqlite_schema
         WHERE name LIKE '\\_burrow\\_%' ESCAPE '\\' OR tbl_name LIKE '\\_burrow\\_%' ESCAPE '\\'
         ORDER BY type, name"
    );
    conn.prepare(&sql)?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect()
}

/// The internal objects of an instance database with every host table
/// (the schedules' included), as the host makes them.
pub(super) fn host_objects() -> &'static Vec<SchemaObject> {
    static OBJECTS: OnceLock<Vec<SchemaObject>> = OnceLock::new();
    OBJECTS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = crate::storage::InstanceDb::open(
            &dir.path().join("host.sqlite"),
            crate::config::Synchronous::Off,
            8 << 20,
            crate::deadline::Deadline::default(),
        )
        .expect("open the database");
        db.create_schema().expect("internal tables");
        db.ensure_queue_schema().expect("queue tables");
        db.ensure_workflow_schema().expect("workflow tables");
        db.ensure_schedule_schema().expect("schedule tables");
        internal_objects(&db.conn, "main").expect("the host's objects")
    })
}

/// (table, parent) of every foreign key of a guest table, in main or temp,
/// into a table with an internal name.
pub(super) fn foreign_keys_into_host_tables(
    conn: &Connection,
) -> rusqlite::Result<Vec<(String, String)>> {
    let mut keys = Vec::new();
    for schema in ["main", "temp"] {
        let sql = format!(
            "SELECT m.name, f.\"table\" FROM {schema}.sqlite_schema AS m,
                 pragma_foreign_key_list(m.name, '{schema}') AS f
             WHERE m.type = 'table' AND m.name NOT LIKE '\\_burrow\\_%' ESCAPE '\\'
                 AND f.\"table\" LIKE '\\_burrow\\_%' ESCAPE '\\'"
        );
        let found: Vec<(String, String)> = conn
            .prepare(&sql)?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        keys.extend(found);
    }
    Ok(keys)
}
