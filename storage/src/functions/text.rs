//! Values as SQLite's C functions read them: any value as the bytes of
//! its text (`sqlite3_value_text`, which need not be UTF-8), up to the
//! first NUL, character by character as SQLite's lenient UTF-8 reader
//! goes. The replacements read their arguments only through these, so
//! they see what the built-ins see.

use std::borrow::Cow;

use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};
use rusqlite::{Result, ffi};

/// A value as SQLite's `sqlite3_value_text` gives it, or `None` for NULL.
pub(super) fn text(value: ValueRef<'_>) -> Option<Cow<'_, [u8]>> {
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
pub(super) fn continues(b: u8) -> bool {
    b & 0xc0 == 0x80
}

/// A text result of bytes as SQLite keeps them, which need not be UTF-8.
pub(super) struct SqlText(pub(super) Vec<u8>);

impl ToSql for SqlText {
    fn to_sql(&self) -> Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(ValueRef::Text(&self.0)))
    }
}

/// How many characters SQLite counts in `s` (a lead byte and its
/// continuation bytes each), up to the first NUL.
pub(super) fn count_characters(s: &[u8]) -> usize {
    let s = until_nul(s);
    let (mut at, mut n) = (0, 0);
    while at < s.len() {
        Reader(s).skip(&mut at);
        n += 1;
    }
    n
}

pub(super) fn until_nul(s: &[u8]) -> &[u8] {
    &s[..memchr::memchr(0, s).unwrap_or(s.len())]
}

/// A NUL-terminated string as SQLite reads it: past the end is NUL.
#[derive(Clone, Copy)]
pub(super) struct Reader<'a>(pub(super) &'a [u8]);

/// The first bytes of the characters that start with 0xc0 to 0xff.
const UTF8_TRANS1: [u8; 64] = [
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x00, 0x01, 0x02, 0x03, 0x00, 0x01, 0x00, 0x00,
];

impl Reader<'_> {
    pub(super) fn byte(&self, at: usize) -> u8 {
        self.0.get(at).copied().unwrap_or(0)
    }

    /// Reads the character at `*at` and moves past it (SQLite's
    /// `sqlite3Utf8Read`: lenient, invalid sequences read as U+FFFD).
    pub(super) fn read(&self, at: &mut usize) -> u32 {
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
    pub(super) fn skip(&self, at: &mut usize) {
        let lead = self.byte(*at);
        *at += 1;
        if lead >= 0xc0 {
            while continues(self.byte(*at)) {
                *at += 1;
            }
        }
    }
}
