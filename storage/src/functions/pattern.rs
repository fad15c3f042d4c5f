//! `LIKE` and `GLOB`: SQLite's own pattern matcher, step for step, which
//! checks the call's deadline as it goes: a match that backtracks through
//! long values fails as interrupted once the deadline passed.

use rusqlite::Result;
use rusqlite::functions::Context;
use rusqlite::types::ValueRef;

use super::text::{Reader, count_characters, text, until_nul};
use super::{Budget, sql_error};
use crate::deadline::Deadline;

/// The wildcards of one kind of pattern.
#[derive(Clone, Copy)]
pub(super) struct Wildcards {
    /// Matches any run of characters (`%`, `*`).
    all: u32,
    /// Matches one character (`_`, `?`).
    one: u32,
    /// Whether `[...]` sets are patterns (GLOB).
    sets: bool,
    /// Whether ASCII letters match either case (LIKE).
    no_case: bool,
}

pub(super) const LIKE: Wildcards = Wildcards {
    all: b'%' as u32,
    one: b'_' as u32,
    sets: false,
    no_case: true,
};

pub(super) const GLOB: Wildcards = Wildcards {
    all: b'*' as u32,
    one: b'?' as u32,
    sets: true,
    no_case: false,
};

/// `like(Y, X [, E])` and `glob(Y, X)`: whether `X` matches pattern `Y`.
pub(super) fn pattern_function(
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

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Match {
    Yes,
    No,
    /// No match, and none with a later start either: stop backtracking.
    NoWildcard,
}

/// SQLite's `patternCompare`, with a count of its steps and a check of the
/// deadline every [`STEPS_PER_CHECK`](super::STEPS_PER_CHECK) of them.
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
