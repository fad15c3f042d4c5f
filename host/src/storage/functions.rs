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

use std::borrow::Cow;
use std::collections::HashMap;

use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::limits::Limit;
use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};
use rusqlite::{Connection, Error, Result, ffi};

use crate::deadline::Deadline;

/// Steps of a pattern match between two checks of the deadline.
const STEPS_PER_CHECK: usize = 4096;

/// Registers the replacements on `conn`; its calls' deadline is `deadline`.
/// The LIKE pattern length limit is read from `conn`: register after
/// lowering the limits.
pub(crate) fn register(conn: &Connection, deadline: &Deadline) -> Result<()> {
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

/// A value as SQLite's `sqlite3_value_text` gives it, or `None` for NULL.
fn text(value: ValueRef<'_>) -> Option<Cow<'_, [u8]>> {
    match value {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(Cow::Owned(i.to_string().into_bytes())),
        ValueRef::Real(r) => Some(Cow::Owned(real_text(r))),
        ValueRef::Text(t) => Some(Cow::Borrowed(t)),
        ValueRef::Blob(b) => Some(Cow::Borrowed(b)),
    }
}

/// A real as SQLite renders it as text (`%!.17g` of its own printf).
fn real_text(r: f64) -> Vec<u8> {
    // SAFETY: the format takes one int and one double, both given; the
    // returned string is copied and then freed with SQLite's allocator.
    unsafe {
        let s = ffi::sqlite3_mprintf(c"%!.*g".as_ptr(), 17 as std::ffi::c_int, r);
        if s.is_null() {
            return r.to_string().into_bytes();
        }
        let bytes = std::ffi::CStr::from_ptr(s).to_bytes().to_vec();
        ffi::sqlite3_free(s.cast());
        bytes
    }
}

/// Whether `b` continues a UTF-8 character.
fn continues(b: u8) -> bool {
    b & 0xc0 == 0x80
}

/// `instr(X, Y)`: the 1-based position of the first `Y` in `X`, in
/// characters for text and bytes when both are blobs; 0 when absent.
fn instr(haystack: ValueRef<'_>, needle: ValueRef<'_>) -> Result<Option<i64>> {
    let is_blobs = matches!((haystack, needle), (ValueRef::Blob(_), ValueRef::Blob(_)));
    let (Some(hay), Some(needle)) = (text(haystack), text(needle)) else {
        return Ok(None);
    };
    if needle.is_empty() {
        return Ok(Some(1));
    }
    if is_blobs {
        return Ok(Some(
            memchr::memmem::find(&hay, &needle).map_or(0, |at| at as i64 + 1),
        ));
    }
    // SQLite compares at the first byte and at each byte that does not
    // continue a character: a needle that starts with a continuation byte
    // can match only at the start.
    let found = if continues(needle[0]) {
        hay.starts_with(&needle).then_some(0)
    } else {
        memchr::memmem::find(&hay, &needle)
    };
    // Counted as SQLite counts: the first byte, then each byte that does
    // not continue a character, up to the match.
    Ok(Some(found.map_or(0, |at| {
        1 + hay[1..=at].iter().filter(|b| !continues(**b)).count() as i64
    })))
}

/// `replace(X, Y, Z)`: `X` with every `Y` replaced by `Z`, left to right;
/// `X` itself when `Y` is empty. Fails once the result would exceed
/// `max_length` bytes.
fn replace(
    string: ValueRef<'_>,
    pattern: ValueRef<'_>,
    with: ValueRef<'_>,
    max_length: usize,
) -> Result<Option<SqlText>> {
    let (Some(string), Some(pattern)) = (text(string), text(pattern)) else {
        return Ok(None);
    };
    if pattern.first().is_none_or(|b| *b == 0) {
        return Ok(Some(SqlText(string.into_owned())));
    }
    let Some(with) = text(with) else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(string.len());
    let mut rest = 0;
    for at in memchr::memmem::find_iter(&string, &pattern) {
        out.extend_from_slice(&string[rest..at]);
        out.extend_from_slice(&with);
        rest = at + pattern.len();
        if out.len() + (string.len() - rest) > max_length {
            return Err(too_big());
        }
    }
    out.extend_from_slice(&string[rest..]);
    Ok(Some(SqlText(out)))
}

/// A text result of bytes as SQLite keeps them, which need not be UTF-8.
struct SqlText(Vec<u8>);

impl ToSql for SqlText {
    fn to_sql(&self) -> Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(ValueRef::Text(&self.0)))
    }
}

#[derive(Clone, Copy)]
enum Ends {
    Left,
    Right,
    Both,
}

/// How many characters SQLite counts in `s` (a lead byte and its
/// continuation bytes each), up to the first NUL.
fn count_characters(s: &[u8]) -> usize {
    let s = until_nul(s);
    let (mut at, mut n) = (0, 0);
    while at < s.len() {
        Reader(s).skip(&mut at);
        n += 1;
    }
    n
}

/// The characters of a trim set, each with the index of its first
/// appearance in the set.
struct CharSet<'a> {
    /// One-byte characters, by their byte.
    single: [Option<usize>; 256],
    /// Longer ones.
    multi: HashMap<&'a [u8], usize>,
    /// The lengths of the longer ones, shortest first.
    lengths: Vec<usize>,
}

impl<'a> CharSet<'a> {
    fn new(set: &'a [u8], budget: &mut Budget<'_>) -> Result<CharSet<'a>> {
        let mut chars = CharSet {
            single: [None; 256],
            multi: HashMap::new(),
            lengths: Vec::new(),
        };
        let mut at = 0;
        let mut i = 0;
        let set = until_nul(set);
        while at < set.len() {
            let start = at;
            Reader(set).skip(&mut at);
            let c = &set[start..at.min(set.len())];
            budget.spend(c.len())?;
            if c.len() == 1 {
                chars.single[usize::from(c[0])].get_or_insert(i);
            } else {
                chars.multi.entry(c).or_insert(i);
                chars.lengths.push(c.len());
            }
            i += 1;
        }
        chars.lengths.sort_unstable();
        chars.lengths.dedup();
        Ok(chars)
    }
}

/// `ltrim`, `rtrim`, `trim(X, Y)`: `X` without the characters of `Y` at
/// the chosen ends. At each step SQLite takes the first character of the
/// set (in the set's order) that the end of `X` starts with; so does this,
/// looking each length of the set's characters up once.
fn trim(
    string: ValueRef<'_>,
    set: ValueRef<'_>,
    ends: Ends,
    budget: &mut Budget<'_>,
) -> Result<Option<SqlText>> {
    let (Some(string), Some(set)) = (text(string), text(set)) else {
        return Ok(None);
    };
    let set = CharSet::new(&set, budget)?;
    let (mut start, mut end) = (0, string.len());
    // The length of the set's first character that `pick` finds in `s`
    // (the bytes hashed count as steps: a set of long invalid sequences of
    // many lengths is slow, not endless).
    let mut step = |s: &[u8], pick: &dyn Fn(&[u8], usize) -> &[u8]| -> Result<Option<usize>> {
        let mut found = set.single[usize::from(pick(s, 1)[0])].map(|i| (i, 1));
        for len in set
            .lengths
            .iter()
            .copied()
            .take_while(|len| *len <= s.len())
        {
            budget.spend(len)?;
            if let Some(i) = set.multi.get(pick(s, len))
                && found.is_none_or(|(earlier, _)| *i < earlier)
            {
                found = Some((*i, len));
            }
        }
        Ok(found.map(|(_, len)| len))
    };
    if set.lengths.is_empty() {
        // One-byte characters only: the first and last bytes not in the set.
        let kept = |b: &u8| set.single[usize::from(*b)].is_none();
        if matches!(ends, Ends::Left | Ends::Both) {
            start = string.iter().position(kept).unwrap_or(end);
        }
        if matches!(ends, Ends::Right | Ends::Both) {
            end = string[start..]
                .iter()
                .rposition(kept)
                .map_or(start, |at| start + at + 1);
        }
        return Ok(Some(SqlText(string[start..end].to_vec())));
    }
    if matches!(ends, Ends::Left | Ends::Both) {
        while start < end {
            match step(&string[start..end], &|s, len| &s[..len])? {
                Some(len) => start += len,
                None => break,
            }
        }
    }
    if matches!(ends, Ends::Right | Ends::Both) {
        while start < end {
            match step(&string[start..end], &|s, len| &s[s.len() - len..])? {
                Some(len) => end -= len,
                None => break,
            }
        }
    }
    Ok(Some(SqlText(string[start..end].to_vec())))
}

/// The wildcards of one kind of pattern.
#[derive(Clone, Copy)]
struct Wildcards {
    /// Matches any run of characters (`%`, `*`).
    all: u32,
    /// Matches one character (`_`, `?`).
    one: u32,
    /// Whether `[...]` sets are patterns (GLOB).
    sets: bool,
    /// Whether ASCII letters match either case (LIKE).
    no_case: bool,
}

const LIKE: Wildcards = Wildcards {
    all: b'%' as u32,
    one: b'_' as u32,
    sets: false,
    no_case: true,
};

const GLOB: Wildcards = Wildcards {
    all: b'*' as u32,
    one: b'?' as u32,
    sets: true,
    no_case: false,
};

/// `like(Y, X [, E])` and `glob(Y, X)`: whether `X` matches pattern `Y`.
fn pattern_function(
    ctx: &Context<'_>,
    kind: &Wildcards,
    escape: Option<ValueRef<'_>>,
    max_pattern: usize,
    deadline: &Deadline,
) -> Result<Option<bool>> {
    let pattern = text(ctx.get_raw(0));
    if pattern.as_ref().map_or(0, |p| p.len()) > max_pattern {
        return Err(sql_error("LIKE or GLOB pattern too complex"));
    }
    let mut wildcards = *kind;
    let other = match escape {
        Some(escape) => {
            let Some(escape) = text(escape) else {
                return Ok(None);
            };
            if count_characters(&escape) != 1 {
                return Err(sql_error("ESCAPE expression must be a single character"));
            }
            let c = Reader(until_nul(&escape)).read(&mut 0);
            if c == wildcards.all {
                wildcards.all = 0;
            }
            if c == wildcards.one {
                wildcards.one = 0;
            }
            c
        }
        None if kind.sets => u32::from(b'['),
        None => 0,
    };
    let (Some(pattern), Some(string)) = (pattern, text(ctx.get_raw(1))) else {
        return Ok(None);
    };
    let mut matcher = Matcher {
        wildcards: &wildcards,
        other,
        budget: Budget::new(deadline),
    };
    let pattern = Reader(until_nul(&pattern));
    let string = Reader(until_nul(&string));
    Ok(Some(matcher.compare(pattern, 0, string, 0)? == Match::Yes))
}

fn until_nul(s: &[u8]) -> &[u8] {
    &s[..memchr::memchr(0, s).unwrap_or(s.len())]
}

/// A NUL-terminated string as SQLite reads it: past the end is NUL.
#[derive(Clone, Copy)]
struct Reader<'a>(&'a [u8]);

/// The first bytes of the characters that start with 0xc0 to 0xff.
const UTF8_TRANS1: [u8; 64] = [
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x00, 0x01, 0x02, 0x03, 0x00, 0x01, 0x00, 0x00,
];

impl Reader<'_> {
    fn byte(&self, at: usize) -> u8 {
        self.0.get(at).copied().unwrap_or(0)
    }

    /// Reads the character at `*at` and moves past it (SQLite's
    /// `sqlite3Utf8Read`: lenient, invalid sequences read as U+FFFD).
    fn read(&self, at: &mut usize) -> u32 {
        let mut c = u32::from(self.byte(*at));
        *at += 1;
        if c >= 0xc0 {
            c = u32::from(UTF8_TRANS1[(c - 0xc0) as usize]);
            while continues(self.byte(*at)) {
                c = (c << 6).wrapping_add(u32::from(0x3f & self.byte(*at)));
                *at += 1;
            }
            if c < 0x80 || (c & 0xFFFF_F800) == 0xD800 || (c & 0xFFFF_FFFE) == 0xFFFE {
                c = 0xFFFD;
            }
        }
        c
    }

    /// Moves past the character at `*at` (SQLite's `SQLITE_SKIP_UTF8`).
    fn skip(&self, at: &mut usize) {
        let lead = self.byte(*at);
        *at += 1;
        if lead >= 0xc0 {
            while continues(self.byte(*at)) {
                *at += 1;
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Match {
    Yes,
    No,
    /// No match, and none with a later start either: stop backtracking.
    NoWildcard,
}

/// SQLite's `patternCompare`, with a count of its steps and a check of the
/// deadline every [`STEPS_PER_CHECK`] of them.
struct Matcher<'a> {
    wildcards: &'a Wildcards,
    /// The escape character (LIKE) or `[` (GLOB); 0 for none.
    other: u32,
    budget: Budget<'a>,
}

fn to_lower(c: u32) -> u32 {
    if c < 0x80 {
        u32::from((c as u8).to_ascii_lowercase())
    } else {
        c
    }
}

impl Matcher<'_> {
    fn step(&mut self) -> Result<()> {
        self.budget.spend(1)
    }

    fn compare(
        &mut self,
        pat: Reader<'_>,
        mut p: usize,
        s: Reader<'_>,
        mut i: usize,
    ) -> Result<Match> {
        let Wildcards {
            all,
            one,
            sets,
            no_case,
        } = *self.wildcards;
        let mut escaped: Option<usize> = None;
        loop {
            self.step()?;
            let mut c = pat.read(&mut p);
            if c == 0 {
                break;
            }
            if c == all {
                // Skip further `*` and `?`, each `?` taking one character.
                loop {
                    c = pat.read(&mut p);
                    if !(c == all || (c == one && one != 0)) {
                        break;
                    }
                    if c == one && s.read(&mut i) == 0 {
                        return Ok(Match::NoWildcard);
                    }
                }
                if c == 0 {
                    return Ok(Match::Yes);
                } else if c == self.other {
                    if !sets {
                        c = pat.read(&mut p);
                        if c == 0 {
                            return Ok(Match::NoWildcard);
                        }
                    } else {
                        // `[...]` right after the `*`: try each start.
                        while s.byte(i) != 0 {
                            let m = self.compare(pat, p - 1, s, i)?;
                            if m != Match::No {
                                return Ok(m);
                            }
                            s.skip(&mut i);
                        }
                        return Ok(Match::NoWildcard);
                    }
                }
                // Find each place the next character matches, and go on
                // matching from there.
                if c < 0x80 {
                    let (a, b) = if no_case {
                        (
                            (c as u8).to_ascii_uppercase(),
                            (c as u8).to_ascii_lowercase(),
                        )
                    } else {
                        (c as u8, c as u8)
                    };
                    loop {
                        self.step()?;
                        match memchr::memchr2(a, b, &s.0[i.min(s.0.len())..]) {
                            Some(at) => i += at + 1,
                            None => break,
                        }
                        let m = self.compare(pat, p, s, i)?;
                        if m != Match::No {
                            return Ok(m);
                        }
                    }
                } else {
                    loop {
                        self.step()?;
                        let c2 = s.read(&mut i);
                        if c2 == 0 {
                            break;
                        }
                        if c2 != c {
                            continue;
                        }
                        let m = self.compare(pat, p, s, i)?;
                        if m != Match::No {
                            return Ok(m);
                        }
                    }
                }
                return Ok(Match::NoWildcard);
            }
            if c == self.other {
                if !sets {
                    c = pat.read(&mut p);
                    if c == 0 {
                        return Ok(Match::No);
                    }
                    escaped = Some(p);
                } else {
                    let mut prior = 0;
                    let mut seen = false;
                    let mut invert = false;
                    let c = s.read(&mut i);
                    if c == 0 {
                        return Ok(Match::No);
                    }
                    let mut c2 = pat.read(&mut p);
                    if c2 == u32::from(b'^') {
                        invert = true;
                        c2 = pat.read(&mut p);
                    }
                    if c2 == u32::from(b']') {
                        if c == u32::from(b']') {
                            seen = true;
                        }
                        c2 = pat.read(&mut p);
                    }
                    while c2 != 0 && c2 != u32::from(b']') {
                        if c2 == u32::from(b'-')
                            && pat.byte(p) != b']'
                            && pat.byte(p) != 0
                            && prior > 0
                        {
                            c2 = pat.read(&mut p);
                            if c >= prior && c <= c2 {
                                seen = true;
                            }
                            prior = 0;
                        } else {
                            if c == c2 {
                                seen = true;
                            }
                            prior = c2;
                        }
                        c2 = pat.read(&mut p);
                    }
                    if c2 == 0 || seen == invert {
                        return Ok(Match::No);
                    }
                    continue;
                }
            }
            let c2 = s.read(&mut i);
            if c == c2 {
                continue;
            }
            if no_case && to_lower(c) == to_lower(c2) && c < 0x80 && c2 < 0x80 {
                continue;
            }
            if c == one && escaped != Some(p) && c2 != 0 {
                continue;
            }
            return Ok(Match::No);
        }
        Ok(if s.byte(i) == 0 {
            Match::Yes
        } else {
            Match::No
        })
    }
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
