//! Replacements for SQLite's built-in functions whose C implementations take
//! time quadratic in their arguments, on every connection that runs
//! guest-defined SQL.
//!
//! SQLite checks for interrupts and runs its progress handler only between
//! instructions of a statement's program, so one call of `instr`, `replace`,
//! `trim(X, Y)` or of a `LIKE`/`GLOB` match on values near the length limit
//! could run for many minutes with nothing to stop it. The replacements keep
//! SQLite's semantics (they follow its C code, byte for byte, also on
//! invalid UTF-8): `instr`, `replace` and the trims run in linear time; the
//! pattern matchers check the call's deadline every [`STEPS_PER_CHECK`] steps
//! and fail as interrupted once it passed, as the progress handler would.
//!
//! Overriding `like` turns off SQLite's LIKE optimization (a `LIKE 'ab%'`
//! no longer narrows an index scan); `GLOB` likewise. Such statements still
//! give the same rows, by a scan.

mod linear;
mod pattern;
mod text;

use rusqlite::functions::FunctionFlags;
use rusqlite::limits::Limit;
use rusqlite::{Connection, Error, Result, ffi};

use crate::deadline::Deadline;
use linear::{Ends, instr, replace, trim};
use pattern::{GLOB, LIKE, pattern_function};

/// Steps of a pattern match between two checks of the deadline.
const STEPS_PER_CHECK: usize = 4096;

/// Registers the replacements on `conn`; its calls' deadline is `deadline`.
/// The LIKE pattern length limit is read from `conn`: register after
/// lowering the limits.
pub fn register(conn: &Connection, deadline: &Deadline) -> Result<()> {
    // Innocuous, as the built-ins are: views, triggers and generated
    // columns may use them whatever `trusted_schema` says.
    let flags = FunctionFlags::SQLITE_UTF8
        | FunctionFlags::SQLITE_DETERMINISTIC
        | FunctionFlags::SQLITE_INNOCUOUS;
    conn.create_scalar_function("instr", 2, flags, |ctx| {
        instr(ctx.get_raw(0), ctx.get_raw(1))
    })?;
    let limit = |which| conn.limit(which).map(|n| usize::try_from(n).unwrap_or(0));
    let max_length = limit(Limit::SQLITE_LIMIT_LENGTH)?;
    let max_pattern = limit(Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH)?;
    conn.create_scalar_function("replace", 3, flags, move |ctx| {
        replace(ctx.get_raw(0), ctx.get_raw(1), ctx.get_raw(2), max_length)
    })?;
    for (name, ends) in [
        ("ltrim", Ends::Left),
        ("rtrim", Ends::Right),
        ("trim", Ends::Both),
    ] {
        let deadline = deadline.clone();
        conn.create_scalar_function(name, 2, flags, move |ctx| {
            let mut budget = Budget::new(&deadline);
            trim(ctx.get_raw(0), ctx.get_raw(1), ends, &mut budget)
        })?;
    }
    for n_arg in [2, 3] {
        let deadline = deadline.clone();
        conn.create_scalar_function("like", n_arg, flags, move |ctx| {
            let escape = if ctx.len() == 3 {
                Some(ctx.get_raw(2))
            } else {
                None
            };
            pattern_function(ctx, &LIKE, escape, max_pattern, &deadline)
        })?;
    }
    let deadline = deadline.clone();
    conn.create_scalar_function("glob", 2, flags, move |ctx| {
        pattern_function(ctx, &GLOB, None, max_pattern, &deadline)
    })?;
    Ok(())
}

/// The error a matcher gives once the deadline passed: SQLite's own
/// interrupt, which the host maps to the call's `timeout`. It carries no
/// message, as a message would turn the code into a plain `SQLITE_ERROR`.
fn interrupted() -> Error {
    Error::SqliteFailure(ffi::Error::new(ffi::SQLITE_INTERRUPT), None)
}

/// SQLite's error for a value longer than `SQLITE_LIMIT_LENGTH`.
fn too_big() -> Error {
    Error::SqliteFailure(ffi::Error::new(ffi::SQLITE_TOOBIG), None)
}

/// Counts a function's steps and checks the deadline every
/// [`STEPS_PER_CHECK`] of them.
struct Budget<'a> {
    deadline: &'a Deadline,
    steps: usize,
}

impl Budget<'_> {
    fn new(deadline: &Deadline) -> Budget<'_> {
        Budget { deadline, steps: 0 }
    }

    /// Counts `n` steps; fails as interrupted once the deadline passed.
    fn spend(&mut self, n: usize) -> Result<()> {
        self.steps += n;
        if self.steps >= STEPS_PER_CHECK {
            self.steps = 0;
            if self.deadline.passed() {
                return Err(interrupted());
            }
        }
        Ok(())
    }
}

/// A plain SQL error with a message, as SQLite's functions give.
fn sql_error(message: &str) -> Error {
    Error::SqliteFailure(ffi::Error::new(ffi::SQLITE_ERROR), Some(message.into()))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Expressions whose values SQLite's built-ins and the replacements
    /// must agree on.
    const CASES: &[&str] = &[
        // instr: text positions in characters, blob positions in bytes.
        "instr('hello world', 'o')",
        "instr('hello world', 'z')",
        "instr('hello', '')",
        "instr('', '')",
        "instr('', 'a')",
        "instr('héllo wörld', 'wö')",
        "instr('日本語のテキスト', 'テ')",
        "instr(x'00010203', x'0203')",
        "instr(x'c3a9c3a9', x'a9')",
        "instr(CAST(x'c3a9c3a9' AS TEXT), CAST(x'a9' AS TEXT))",
        "instr(CAST(x'80c3a9' AS TEXT), CAST(x'80' AS TEXT))",
        "instr(CAST(x'41808042' AS TEXT), 'B')",
        "instr('héllo', x'6c6c')",
        "instr(x'68c3a96c6c6f', 'llo')",
        "instr(12345, 34)",
        "instr(1.5, '.')",
        "instr(0.1, '1')",
        "instr('a1e+20', 1e20)",
        "instr(NULL, 'a')",
        "instr('a', NULL)",
        "instr('aaa' || char(0) || 'b', 'b')",
        // replace
        "replace('hello world', 'o', '0')",
        "replace('aaaa', 'aa', 'b')",
        "replace('aaa', 'a', 'aa')",
        "replace('abc', '', 'x')",
        "replace('abc', 'b', '')",
        "replace('abc', 'b', NULL)",
        "replace('abc', '', NULL)",
        "replace(NULL, 'a', 'b')",
        "replace('abc', NULL, 'b')",
        "replace('héllo', 'é', 'e')",
        "replace(x'616263', x'62', 'z')",
        "replace(12321, 2, 9)",
        "replace(1.25, '.', ',')",
        "replace('abc', char(0) || 'x', 'y')",
        "typeof(replace(x'00', 'a', 'b'))",
        "hex(replace(CAST(x'ff41ff' AS TEXT), 'A', 'B'))",
        // trim with a set
        "trim('xxhixx', 'x')",
        "ltrim('xxhixx', 'x')",
        "rtrim('xxhixx', 'x')",
        "trim('abcHIcba', 'abc')",
        "trim('hi', '')",
        "trim('', 'x')",
        "trim(NULL, 'x')",
        "trim('x', NULL)",
        "trim('ééhiéé', 'é')",
        "ltrim('日本日本語', '日本')",
        "rtrim(12300, 0)",
        "trim(x'414141', 'A')",
        "hex(trim(CAST(x'c3a9a9' AS TEXT), CAST(x'a9' AS TEXT)))",
        "hex(ltrim(CAST(x'c3a9a9' AS TEXT), CAST(x'c3a9' AS TEXT)))",
        "hex(ltrim(CAST(x'c3a9a9' AS TEXT), CAST(x'c3a9a9' AS TEXT)))",
        "hex(rtrim(CAST(x'41c3a9a9' AS TEXT), CAST(x'a9c3a9a9' AS TEXT)))",
        "trim('aXa', 'a' || char(0) || 'X')",
        "typeof(trim(x'41', 'B'))",
        // LIKE: ASCII case-insensitive, `_` one character, ESCAPE
        "'abc' LIKE 'abc'",
        "'abc' LIKE 'ABC'",
        "'abc' LIKE 'a%'",
        "'abc' LIKE '%c'",
        "'abc' LIKE '%b%'",
        "'abc' LIKE 'a_c'",
        "'abc' LIKE '_'",
        "'abc' LIKE '%%%'",
        "'' LIKE '%'",
        "'' LIKE '_'",
        "'abc' LIKE 'a%_'",
        "'ab' LIKE 'a%__'",
        "'é' LIKE '_'",
        "'é' LIKE 'É'",
        "'日本' LIKE '_本'",
        "'日本' LIKE '%本'",
        "'aé' LIKE '%é'",
        "'Straße' LIKE 'STRA%E'",
        "'10%' LIKE '10!%' ESCAPE '!'",
        "'100' LIKE '10!%' ESCAPE '!'",
        "'a_c' LIKE 'a!_c' ESCAPE '!'",
        "'abc' LIKE 'a!_c' ESCAPE '!'",
        "'abc' LIKE 'a%' ESCAPE '%'",
        "'a%' LIKE 'a%' ESCAPE '%'",
        "'a_' LIKE 'a_' ESCAPE '_'",
        "'ab' LIKE 'a_' ESCAPE '_'",
        "'abc' LIKE 'abc!' ESCAPE '!'",
        "'a!' LIKE 'a!!' ESCAPE '!'",
        "'aé' LIKE 'aéé' ESCAPE 'é'",
        "'a%' LIKE '%é%' ESCAPE 'é'",
        "'abc' LIKE 'abc' ESCAPE NULL",
        "NULL LIKE 'a'",
        "'a' LIKE NULL",
        "like('a%', 'abc')",
        "like('a!%', 'a%', '!')",
        "12 LIKE 1 || '%'",
        "x'616263' LIKE 'a%'",
        "'ab' || char(0) || 'c' LIKE 'ab'",
        "'ab' LIKE 'ab' || char(0) || 'c'",
        "CAST(x'61ff62' AS TEXT) LIKE 'a_b'",
        "CAST(x'61c3' AS TEXT) LIKE 'a_'",
        "'abc' NOT LIKE 'a%'",
        "'aaaaaaaaab' LIKE '%a%a%a%b'",
        "'aaaaaaaaaa' LIKE '%a%a%a%b'",
        // GLOB: case-sensitive, `*`, `?`, sets and ranges
        "'abc' GLOB 'abc'",
        "'abc' GLOB 'ABC'",
        "'abc' GLOB 'a*'",
        "'abc' GLOB '*c'",
        "'abc' GLOB 'a?c'",
        "'abc' GLOB '?'",
        "'abc' GLOB '[a-c]bc'",
        "'dbc' GLOB '[a-c]bc'",
        "'abc' GLOB '[^a-c]bc'",
        "'dbc' GLOB '[^a-c]bc'",
        "']x' GLOB '[]]x'",
        "'-x' GLOB '[a-]x'",
        "'bx' GLOB '[a-]x'",
        "'^' GLOB '[\\^]'",
        "'a' GLOB '[^]a]'",
        "'abc' GLOB '*[c]'",
        "'abc' GLOB '*[d]'",
        "'abc' GLOB 'a[bc'",
        "'é' GLOB '?'",
        "'é' GLOB '[à-ê]'",
        "'日本語' GLOB '*本*'",
        "'a*c' GLOB 'a[*]c'",
        "'a?' GLOB 'a[?]'",
        "'abc' GLOB '*'",
        "'' GLOB '*'",
        "'' GLOB '?'",
        "'abc' GLOB '**?*'",
        "'ab' GLOB '*??*?'",
        "NULL GLOB 'a'",
        "'a' GLOB NULL",
        "glob('a*', 'abc')",
        "123 GLOB '1*3'",
        "'aXbXc' GLOB '*X*X*'",
    ];

    fn value(conn: &Connection, expr: &str) -> std::result::Result<rusqlite::types::Value, String> {
        conn.query_row(&format!("SELECT {expr}"), [], |r| r.get(0))
            .map_err(|e| format!("{:?}: {e}", e.sqlite_error_code()))
    }

    fn connections(deadline: &Deadline) -> (Connection, Connection) {
        let builtin = Connection::open_in_memory().unwrap();
        let replaced = Connection::open_in_memory().unwrap();
        register(&replaced, deadline).unwrap();
        (builtin, replaced)
    }

    #[test]
    fn the_replacements_agree_with_sqlite_s_built_ins() {
        let (builtin, replaced) = connections(&Deadline::default());
        for expr in CASES {
            assert_eq!(value(&replaced, expr), value(&builtin, expr), "{expr}");
        }
    }

    #[test]
    fn the_replacements_fail_as_sqlite_s_built_ins_fail() {
        let builtin = Connection::open_in_memory().unwrap();
        let replaced = Connection::open_in_memory().unwrap();
        for conn in [&builtin, &replaced] {
            conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, 1_000_000)
                .unwrap();
        }
        register(&replaced, &Deadline::default()).unwrap();
        let long = format!("'{}'", "a".repeat(50_001));
        for expr in [
            "'a' LIKE 'a' ESCAPE ''".to_owned(),
            "'a' LIKE 'a' ESCAPE 'ab'".to_owned(),
            format!("'a' LIKE {long}"),
            format!("'a' GLOB {long}"),
            "length(replace(hex(zeroblob(1000)), '0', hex(zeroblob(1000))))".to_owned(),
        ] {
            let want = value(&builtin, &expr);
            assert!(want.is_err(), "{expr}: {want:?}");
            assert_eq!(value(&replaced, &expr), want, "{expr}");
        }
    }

    #[test]
    fn a_table_s_rows_match_as_with_sqlite_s_like() {
        let (builtin, replaced) = connections(&Deadline::default());
        for conn in [&builtin, &replaced] {
            conn.execute_batch(
                "CREATE TABLE t (name TEXT COLLATE NOCASE);
                 CREATE INDEX t_name ON t (name);
                 INSERT INTO t VALUES ('abc'), ('ABD'), ('abe'), ('xab'), (NULL), ('ab');",
            )
            .unwrap();
        }
        for sql in [
            "SELECT group_concat(name) FROM (SELECT name FROM t WHERE name LIKE 'ab%' ORDER BY name)",
            "SELECT group_concat(name) FROM (SELECT name FROM t WHERE name GLOB 'a*' ORDER BY name)",
        ] {
            let rows = |conn: &Connection| -> Option<String> {
                conn.query_row(sql, [], |r| r.get(0)).unwrap()
            };
            assert_eq!(rows(&replaced), rows(&builtin), "{sql}");
        }
    }

    #[test]
    fn the_replacements_serve_in_the_schema_of_an_untrusted_database() {
        let (_, replaced) = connections(&Deadline::default());
        replaced
            .execute_batch(
                "PRAGMA trusted_schema = OFF;
                 CREATE TABLE g (a TEXT, b AS (a LIKE 'x%' AND instr(a, 'y') = 2));
                 INSERT INTO g (a) VALUES ('xy'), ('ay');",
            )
            .unwrap();
        assert_eq!(
            value(&replaced, "(SELECT group_concat(b) FROM g)"),
            Ok(rusqlite::types::Value::Text("1,0".into()))
        );
    }

    #[test]
    fn a_backtracking_match_fails_as_interrupted_once_the_deadline_passed() {
        let deadline = Deadline::default();
        let (_, replaced) = connections(&deadline);
        deadline.start(Duration::from_millis(200));
        let begun = std::time::Instant::now();
        let got = value(
            &replaced,
            "replace(hex(zeroblob(500000)), '0', 'a') LIKE '%' || replace(hex(zeroblob(400)), '0', 'a') || 'b'",
        );
        assert_eq!(got, Err("Some(OperationInterrupted): interrupted".into()));
        assert!(
            begun.elapsed() < Duration::from_secs(5),
            "{:?}",
            begun.elapsed()
        );
    }

    #[test]
    fn instr_and_replace_of_large_values_are_linear() {
        let (_, replaced) = connections(&Deadline::default());
        let begun = std::time::Instant::now();
        assert_eq!(
            value(
                &replaced,
                "instr(zeroblob(4000000) || x'01', zeroblob(2000000) || x'01')"
            ),
            Ok(rusqlite::types::Value::Integer(2000001))
        );
        assert_eq!(
            value(
                &replaced,
                "length(rtrim(hex(zeroblob(2000000)), '1' || hex(zeroblob(1000000))))"
            ),
            Ok(rusqlite::types::Value::Integer(0))
        );
        assert!(
            begun.elapsed() < Duration::from_secs(5),
            "{:?}",
            begun.elapsed()
        );
    }
}
