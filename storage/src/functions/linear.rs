//! `instr`, `replace` and the trims in time linear in their arguments.
//! `instr` and `replace` are each one substring search (`memchr::memmem`)
//! where SQLite's C code compares at every position; a trim looks the
//! characters of its set up by length, where SQLite's C code compares
//! each of them at every step, and counts the bytes it looks up against
//! the call's deadline. The results are SQLite's, byte for byte.

use std::collections::HashMap;

use rusqlite::Result;
use rusqlite::types::ValueRef;

use super::text::{Reader, SqlText, continues, text, until_nul};
use super::{Budget, too_big};

/// `instr(X, Y)`: the 1-based position of the first `Y` in `X`, in
/// characters for text and bytes when both are blobs; 0 when absent.
pub(super) fn instr(haystack: ValueRef<'_>, needle: ValueRef<'_>) -> Result<Option<i64>> {
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
pub(super) fn replace(
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

#[derive(Clone, Copy)]
pub(super) enum Ends {
    Left,
    Right,
    Both,
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
pub(super) fn trim(
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
