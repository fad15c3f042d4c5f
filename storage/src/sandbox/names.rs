//! The host's names. Every table, index and trigger the host keeps in an
//! instance database is named `_burrow_*` (in any case), and the host's
//! statements name the `main` schema: no object a guest makes, in `main`
//! or `temp`, can take one of those names or shadow one of the host's
//! tables.

/// Prefix of every table the host keeps for itself.
pub const INTERNAL_PREFIX: &str = "_burrow_";

/// Whether `name` is one of the host's (`_burrow_*`, in any case).
pub fn is_internal(name: &str) -> bool {
    name.len() >= INTERNAL_PREFIX.len()
        && name.as_bytes()[..INTERNAL_PREFIX.len()].eq_ignore_ascii_case(INTERNAL_PREFIX.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostTables;

    /// Every host statement on an instance database names `main.`, so that
    /// no object a guest makes in `temp` can shadow the host's tables.
    /// (`ON` of `CREATE INDEX` and `INDEXED BY` take no schema; the
    /// database `host.sqlite` of `storage/src/index.rs` has no guest.)
    #[test]
    fn host_sql_names_the_main_schema() {
        fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    sources(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(path);
                }
            }
        }
        // This crate's statements, and those of the crates beside it that
        // run SQL on an instance (the host library's).
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        for crate_dir in [".", "../base", "../host"] {
            sources(&root.join(crate_dir).join("src"), &mut files);
        }
        let mut unqualified = Vec::new();
        for file in files {
            if file.ends_with("storage/src/index.rs")
                || file
                    .parent()
                    .is_some_and(|d| d.ends_with("storage/src/sandbox"))
            {
                continue;
            }
            // A file of tests alone (`*_tests.rs`) is guest input.
            if file
                .file_stem()
                .is_some_and(|stem| stem.to_string_lossy().ends_with("_tests"))
            {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            // Tests and guest inputs come after `#[cfg(test)]`.
            let code = text.split("#[cfg(test)]").next().unwrap();
            let words: Vec<&str> = code
                .split(|c: char| c.is_whitespace() || c == '"' || c == '(' || c == ',')
                .filter(|w| !w.is_empty())
                .collect();
            for pair in words.windows(2) {
                let (keyword, name) = (pair[0].to_ascii_uppercase(), pair[1]);
                let names_table = ["FROM", "INTO", "UPDATE", "JOIN", "EXISTS", "TABLE"]
                    .contains(&keyword.as_str());
                let internal = is_internal(name) || name.starts_with("sqlite_");
                if names_table && internal {
                    unqualified.push(format!("{}: {keyword} {name}", file.display()));
                }
            }
            if code.contains("sqlite_master") {
                unqualified.push(format!("{}: sqlite_master", file.display()));
            }
        }
        assert!(
            unqualified.is_empty(),
            "host SQL without `main.`: {unqualified:#?}"
        );
    }

    /// With a table of every internal name in `temp` (with triggers that
    /// record any write), the host's statements still use `main`'s tables.
    #[test]
    fn host_statements_never_meet_objects_in_temp() {
        use crate::config::Synchronous;
        use crate::deadline::Deadline;
        use crate::instance_db::InstanceDb;
        use crate::{queue, schedule, workflow};

        let dir = tempfile::tempdir().unwrap();
        let db = InstanceDb::open(
            &dir.path().join("i.sqlite"),
            Synchronous::Normal,
            1 << 30,
            Deadline::default(),
        )
        .unwrap();
        let conn = &db.conn;
        db.create_schema().unwrap();
        db.record_creation("a", "k", 1).unwrap();
        db.ensure_queue_schema().unwrap();
        db.ensure_workflow_schema().unwrap();
        conn.execute_batch(schedule::SCHEMA).unwrap();
        conn.pause().pause(1, "test").unwrap();
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM main.sqlite_schema WHERE type = 'table' AND name LIKE '\\_burrow\\_%' ESCAPE '\\'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(tables.len(), 9, "{tables:?}");
        conn.execute_batch("CREATE TEMP TABLE fired (what)")
            .unwrap();
        for table in &tables {
            conn.execute_batch(&format!(
                "CREATE TEMP TABLE {table} AS SELECT * FROM main.{table} WHERE 0;
                 CREATE TEMP TRIGGER {table}_i AFTER INSERT ON {table} BEGIN INSERT INTO fired VALUES ('{table}'); END;
                 CREATE TEMP TRIGGER {table}_u AFTER UPDATE ON {table} BEGIN INSERT INTO fired VALUES ('{table}'); END;
                 CREATE TEMP TRIGGER {table}_d AFTER DELETE ON {table} BEGIN INSERT INTO fired VALUES ('{table}'); END;"
            ))
            .unwrap();
        }

        db.write_state(b"{}").unwrap();
        assert_eq!(db.read_state().unwrap().as_deref(), Some(&b"{}"[..]));
        assert_eq!(db.created_at().unwrap(), Some(1));
        let event = crate::queue::NewEvent {
            event_type: "e".into(),
            payload: "null".into(),
            priority: 0,
            group: None,
        };
        let first = conn.queue().append(&event, 10, 100).unwrap();
        let second = conn.queue().append(&event, 10, 100).unwrap();
        assert_eq!(conn.queue().pending_count().unwrap(), 2);
        assert_eq!(conn.queue().next_due().unwrap(), Some(0));
        assert_eq!(conn.queue().pending(10).unwrap().len(), 2);
        assert_eq!(
            conn.queue()
                .record_failure(first, "no", 11, 1, |_| 0)
                .unwrap(),
            queue::AfterFailure::DeadLettered
        );
        assert_eq!(conn.queue().dead_letters(10).unwrap().len(), 1);
        assert!(conn.queue().requeue(first).unwrap());
        conn.queue().delete(second).unwrap();
        assert_eq!(conn.queue().pending_count().unwrap(), 1);
        let id = conn.schedules().add("go", "[]", 5, None, 1, 100).unwrap();
        assert_eq!(conn.schedules().pending().unwrap().len(), 1);
        let due = conn
            .schedules()
            .next_due(6)
            .unwrap()
            .expect("a due schedule");
        assert_eq!(due.id, id);
        conn.schedules().done(&due, 6).unwrap();
        assert_eq!(conn.schedules().earliest().unwrap(), None);
        conn.workflow().start("{}", 1).unwrap();
        assert!(conn.workflow().record().unwrap().is_some());
        conn.workflow()
            .set_status(
                workflow::WorkflowStatus::Completed,
                Some("1"),
                None,
                None,
                2,
            )
            .unwrap();
        let entry = workflow::HistoryEntry {
            location: "0".into(),
            kind: workflow::EntryKind::Step,
            name: "s".into(),
            status: workflow::EntryStatus::Done,
            output: Some("1".into()),
            failure_kind: None,
            error_code: None,
            error: None,
            attempts: 1,
            wake_at: None,
            updated_at: 2,
        };
        conn.workflow().put_entry(&entry).unwrap();
        conn.workflow().put_entry(&entry).unwrap();
        assert!(conn.workflow().entry("0").unwrap().is_some());
        assert_eq!(conn.workflow().history(10).unwrap().len(), 1);
        assert_eq!(conn.workflow().delete_under("0", None).unwrap(), 1);
        assert_eq!(conn.workflow().history_len().unwrap(), 0);
        assert_eq!(conn.pause().get().unwrap().unwrap().reason, "test");
        conn.pause().pause(2, "again").unwrap();

        let fired: i64 = conn
            .query_row("SELECT count(*) FROM temp.fired", [], |r| r.get(0))
            .unwrap();
        assert_eq!(fired, 0, "a host statement wrote a table in temp");
        for table in &tables {
            let n: i64 = conn
                .query_row(&format!("SELECT count(*) FROM temp.{table}"), [], |r| {
                    r.get(0)
                })
                .unwrap();
            assert_eq!(n, 0, "temp.{table}");
        }
    }
}
