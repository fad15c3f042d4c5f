//! The check of the schema after a guest statement that changes it: the
//! statement runs inside a savepoint, and its changes stand only if the
//! host's objects in `main` are exactly as they were, `temp` holds none
//! of the host's names, no foreign key names an internal table, one of
//! SQLite's own tables or a virtual table's shadow table, the host's
//! `AUTOINCREMENT` counters are as they were, and no row of the planner's
//! statistics names a host object.

use rusqlite::{Connection, OptionalExtension};

use super::names::is_internal;
use super::{Sandbox, host_statement};

/// The savepoint a [`SchemaGuard`] opens around one guest statement.
const GUARD_SAVEPOINT: &str = "_burrow_schema_guard";

/// `expr` names a host object: starts with `_burrow_`, in any case (not
/// `LIKE`, whose `_` matches any character).
macro_rules! internal_sql {
    ($expr:literal) => {
        concat!("lower(substr(", $expr, ", 1, 8)) = '_burrow_'")
    };
}

/// Every object of `main`, read once before and once after the statement
/// and sorted out in [`Listing::read`]: a schema has few rows, and one
/// plain scan costs less to prepare than a filtering query per question.
const MAIN_SCHEMA: &str = "SELECT type, name, tbl_name, sql FROM main.sqlite_schema";
/// Every object of `temp`, read after the statement.
const TEMP_SCHEMA: &str = "SELECT type, name, tbl_name, sql FROM temp.sqlite_schema";

/// The parent `$expr` of a guest's foreign key is out of bounds: a host
/// table, one of SQLite's own (`sqlite_*`), or the shadow table of a
/// virtual table in any schema. A module writes its shadow tables itself;
/// a foreign key into one makes each of those writes check the key in a
/// statement savepoint, and FTS5 answers a savepoint by flushing into the
/// same table again, without end, until the host's stack overflows.
macro_rules! forbidden_parent_sql {
    ($expr:literal) => {
        concat!(
            "(",
            internal_sql!($expr),
            " OR lower(substr(",
            $expr,
            ", 1, 7)) = 'sqlite_' OR EXISTS (SELECT 1 FROM pragma_table_list AS s \
             WHERE s.type = 'shadow' AND lower(s.name) = lower(",
            $expr,
            ")))"
        )
    };
}

/// Foreign keys from a guest table (in `main` or `temp`) to an internal
/// table, one of SQLite's or a shadow table: there must be none.
const FOREIGN_KEYS_INTO_INTERNAL: &str = concat!(
    "SELECT t.name, f.\"table\" FROM main.sqlite_schema AS t, pragma_foreign_key_list(t.name, 'main') AS f
     WHERE t.type = 'table' AND NOT ",
    internal_sql!("t.name"),
    " AND ",
    forbidden_parent_sql!("f.\"table\""),
    " UNION ALL
     SELECT t.name, f.\"table\" FROM temp.sqlite_schema AS t, pragma_foreign_key_list(t.name, 'temp') AS f
     WHERE t.type = 'table' AND ",
    forbidden_parent_sql!("f.\"table\""),
    " LIMIT 1"
);

/// The host's `AUTOINCREMENT` counters: its rows of `sqlite_sequence`.
const HOST_COUNTERS: &str = concat!(
    "SELECT name, seq FROM main.sqlite_sequence WHERE ",
    internal_sql!("name"),
    " ORDER BY name, seq"
);

/// A row of the planner's statistics that names a host object (`%s`: the
/// statistics table): there must be none.
const HOST_STATISTICS: &str = concat!(
    "SELECT tbl, coalesce(idx, '') FROM main.%s WHERE ",
    internal_sql!("tbl"),
    " OR ",
    internal_sql!("idx"),
    " LIMIT 1"
);

/// One object of the host's: type, name, table, definition.
type SchemaObject = (String, String, String, String);

/// What one read of a schema's rows ([`MAIN_SCHEMA`], [`TEMP_SCHEMA`])
/// tells the guard.
#[derive(Default)]
struct Listing {
    /// The host's objects: every object with an internal name or on an
    /// internal table, and every table or view that would shadow a
    /// table-valued function the host's statements use (`json_each(...)`
    /// finds a table of that name first, in `main` or `temp`) or takes the
    /// name of `dbstat`, a built-in table guest SQL may not read. Sorted.
    host_objects: Vec<SchemaObject>,
    /// SQLite's own tables that exist: it makes `sqlite_sequence` and the
    /// statistics tables when they are first needed.
    sequence: bool,
    stat1: bool,
    stat4: bool,
    /// Whether a guest table's definition has the word `REFERENCES`: a
    /// table without it has no foreign key, which that keyword alone
    /// declares.
    foreign_keys: bool,
}

impl Listing {
    fn read(conn: &Connection, sql: &str) -> rusqlite::Result<Listing> {
        let mut listing = Listing::default();
        let mut stmt = conn.prepare(sql)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let [kind, name, table, definition] = [0, 1, 2, 3].map(|i| text(row, i));
            let (kind, name, table, definition) = (kind?, name?, table?, definition?);
            if is_internal(name) || is_internal(table) || shadows_function(kind, name) {
                listing.host_objects.push((
                    kind.into(),
                    name.into(),
                    table.into(),
                    definition.into(),
                ));
            } else if kind == "table" {
                match name {
                    "sqlite_sequence" => listing.sequence = true,
                    "sqlite_stat1" => listing.stat1 = true,
                    "sqlite_stat4" => listing.stat4 = true,
                    _ => {}
                }
                listing.foreign_keys |= contains_ignoring_case(definition, "references");
            }
        }
        listing.host_objects.sort();
        Ok(listing)
    }
}

/// Column `i` of a row of `sqlite_schema` as text (`''` for `NULL`).
fn text<'r>(row: &'r rusqlite::Row<'_>, i: usize) -> rusqlite::Result<&'r str> {
    let value = row.get_ref(i)?;
    let text = value.as_str_or_null().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(i, value.data_type(), Box::new(e))
    })?;
    Ok(text.unwrap_or(""))
}

/// A table or view of this name would shadow a table-valued function the
/// host's statements use, or take the name of `dbstat`.
fn shadows_function(kind: &str, name: &str) -> bool {
    (kind == "table" || kind == "view")
        && (["json_each", "json_tree", "dbstat"]
            .iter()
            .any(|f| name.eq_ignore_ascii_case(f))
            || name
                .as_bytes()
                .get(..7)
                .is_some_and(|p| p.eq_ignore_ascii_case(b"pragma_")))
}

/// Whether `text` contains `word` (ASCII, lower case) in any case, as
/// SQLite reads its keywords.
fn contains_ignoring_case(text: &str, word: &str) -> bool {
    text.as_bytes()
        .windows(word.len())
        .any(|w| w.eq_ignore_ascii_case(word.as_bytes()))
}

/// What the guard compares before and after the statement.
#[derive(Debug, PartialEq)]
struct HostPart {
    objects: Vec<SchemaObject>,
    /// The host's rows of `sqlite_sequence` (name, last id).
    counters: Vec<(String, i64)>,
}

impl HostPart {
    fn read(conn: &Connection, main: Listing) -> rusqlite::Result<HostPart> {
        let counters = if main.sequence {
            conn.prepare(HOST_COUNTERS)?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?
        } else {
            Vec::new()
        };
        Ok(HostPart {
            objects: main.host_objects,
            counters,
        })
    }
}

fn describe((kind, name, table, _): &SchemaObject) -> String {
    if name.eq_ignore_ascii_case(table) {
        format!("{kind} `{name}`")
    } else {
        format!("{kind} `{name}` on `{table}`")
    }
}

/// Runs one guest statement that changes the schema inside a savepoint,
/// and keeps its changes only if the host's names are still the host's
/// alone: no object in `temp` with an internal name or on an internal
/// table, the host's objects in `main` exactly as they were, and no
/// foreign key from a guest table to an internal table. Otherwise the
/// statement is undone and the guest told why.
///
/// A guard that is dropped unfinished (the statement failed) undoes the
/// statement too.
pub struct SchemaGuard<'c> {
    conn: &'c Connection,
    sandbox: &'c Sandbox,
    before: HostPart,
    open: bool,
}

impl<'c> SchemaGuard<'c> {
    /// Opens a guard for the statement just prepared, if it changes the
    /// schema; `None` (and no cost) otherwise.
    pub fn begin(
        conn: &'c Connection,
        sandbox: &'c Sandbox,
    ) -> rusqlite::Result<Option<SchemaGuard<'c>>> {
        if !sandbox.take_schema_change() {
            return Ok(None);
        }
        let before = sandbox.as_host(|| {
            host_statement(conn, &format!("SAVEPOINT {GUARD_SAVEPOINT}"))?.execute([])?;
            HostPart::read(conn, Listing::read(conn, MAIN_SCHEMA)?)
        });
        let before = match before {
            Ok(before) => before,
            Err(e) => {
                sandbox.as_host(|| undo(conn));
                return Err(e);
            }
        };
        Ok(Some(SchemaGuard {
            conn,
            sandbox,
            before,
            open: true,
        }))
    }

    /// Checks the schema after the statement ran (and was reset): keeps
    /// its changes, or undoes them and returns why they were refused.
    pub fn finish(mut self) -> rusqlite::Result<Result<(), String>> {
        self.open = false;
        let (conn, before) = (self.conn, &self.before);
        let verdict = self.sandbox.as_host(|| violation(conn, before));
        self.sandbox.as_host(|| match verdict {
            Ok(None) => host_statement(conn, &format!("RELEASE {GUARD_SAVEPOINT}"))?
                .execute([])
                .map(|_| Ok(())),
            Ok(Some(why)) => {
                undo(conn);
                Ok(Err(why))
            }
            Err(e) => {
                undo(conn);
                Err(e)
            }
        })
    }
}

impl Drop for SchemaGuard<'_> {
    fn drop(&mut self) {
        if self.open {
            self.sandbox.as_host(|| undo(self.conn));
        }
    }
}

/// Rolls back to the guard's savepoint and releases it. Errors are left:
/// SQLite may have rolled the whole transaction back already, savepoint
/// included, and the caller then finds the connection in autocommit.
fn undo(conn: &Connection) {
    let _ = conn.execute_batch(&format!(
        "ROLLBACK TO {GUARD_SAVEPOINT}; RELEASE {GUARD_SAVEPOINT}"
    ));
}

/// What the host keeps for itself, for refusals.
const HOST_NAMES: &str = "names starting with `_burrow_` belong to the host, and so do the \
     names of the table-valued functions its statements use (`json_each`, `json_tree`, `pragma_*`) \
     and of `dbstat`, which guest SQL may not read";

/// Why the schema after a guest statement is refused, if it is.
fn violation(conn: &Connection, before: &HostPart) -> rusqlite::Result<Option<String>> {
    let temp = Listing::read(conn, TEMP_SCHEMA)?;
    if let Some(object) = temp.host_objects.first() {
        return Ok(Some(format!(
            "the statement would make {} in `temp`; {HOST_NAMES}",
            describe(object)
        )));
    }
    let main = Listing::read(conn, MAIN_SCHEMA)?;
    let (foreign_keys, statistics) = (
        main.foreign_keys || temp.foreign_keys,
        [("sqlite_stat1", main.stat1), ("sqlite_stat4", main.stat4)],
    );
    let after = HostPart::read(conn, main)?;
    if after.objects != before.objects {
        let changed = after
            .objects
            .iter()
            .find(|o| !before.objects.contains(o))
            .or_else(|| before.objects.iter().find(|o| !after.objects.contains(o)))
            .map_or_else(|| "the host's objects".to_string(), describe);
        return Ok(Some(format!(
            "the statement would make or change {changed}; {HOST_NAMES}"
        )));
    }
    if after.counters != before.counters {
        return Ok(Some(
            "the statement would change the host's rows of sqlite_sequence (its counters); \
             SQLite's own upkeep may change only the rows of the guest's tables"
                .into(),
        ));
    }
    let foreign_key: Option<(String, String)> = if foreign_keys {
        conn.prepare(FOREIGN_KEYS_INTO_INTERNAL)?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?
    } else {
        None
    };
    if let Some((table, parent)) = foreign_key {
        return Ok(Some(format!(
            "the table `{table}` would have a foreign key into `{parent}`; foreign keys may not \
             name the host's internal tables, SQLite's own tables or the shadow tables of a \
             virtual table"
        )));
    }
    for (statistics, exists) in statistics {
        if !exists {
            continue;
        }
        let named: Option<(String, String)> = conn
            .prepare(&HOST_STATISTICS.replace("%s", statistics))?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        if let Some((table, index)) = named {
            return Ok(Some(format!(
                "the statement would leave a row of {statistics} naming the host's `{}`; the \
                 planner's statistics of the host's tables are the host's",
                if is_internal(&table) { table } else { index }
            )));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::{Listing, MAIN_SCHEMA};

    /// One scan of `sqlite_schema` answers what the guard asks: the host's
    /// objects (by prefix, by table, or by a shadowing name, in any case),
    /// which of SQLite's own tables exist, and whether any guest table may
    /// hold a foreign key.
    #[test]
    fn one_read_of_the_schema_sorts_out_the_hosts_objects() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE _BURROW_x (v); CREATE INDEX guest_on_host ON _burrow_x (v);
             CREATE TABLE Pragma_Table_Info (v); CREATE VIEW JSON_each AS SELECT 1;
             CREATE TABLE a (id INTEGER PRIMARY KEY AUTOINCREMENT, v);
             CREATE INDEX json_tree ON a (v);",
        )
        .unwrap();
        let listing = Listing::read(&conn, MAIN_SCHEMA).unwrap();
        let names: Vec<&str> = listing
            .host_objects
            .iter()
            .map(|(_, name, _, _)| name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "guest_on_host",
                "Pragma_Table_Info",
                "_BURROW_x",
                "JSON_each"
            ]
        );
        assert!(listing.sequence && !listing.stat1 && !listing.stat4);
        assert!(!listing.foreign_keys);
        conn.execute_batch("CREATE TABLE b (x /* a comment */ ReFeReNcEs a); ANALYZE")
            .unwrap();
        let listing = Listing::read(&conn, MAIN_SCHEMA).unwrap();
        assert!(listing.foreign_keys && listing.stat1);
    }
}
