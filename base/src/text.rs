//! Text from outside the host (a guest's output and failures, a client's
//! key, actor or action name, a header) as a log line or a stored error
//! may show it: control characters (newlines, carriage returns, escape
//! sequences among them) and Unicode line and paragraph separators
//! escaped (`\n`, `\u{1b}`), so that no one can forge a log line or move a
//! terminal's cursor.
//!
//! [`clean`] makes such text once, cut to a limit (guest text, which is
//! kept); [`escaped`] shows any value's text so as it is formatted (a key
//! or an error in a log field), without a copy.

use std::fmt::{self, Display, Write};

/// Whether `c` is written escaped.
fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

/// `text` as it may go into a log line or a stored error, escaped, then
/// cut to at most `max` bytes on a character boundary (an escape is never
/// cut in half).
pub fn clean(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    let mut buf = [0; 4];
    for c in text.chars() {
        let escaped;
        let piece: &str = if needs_escape(c) {
            escaped = c.escape_default().to_string();
            &escaped
        } else {
            c.encode_utf8(&mut buf)
        };
        if out.len() + piece.len() > max {
            break;
        }
        out.push_str(piece);
    }
    out
}

/// `value`'s text, escaped as it is written: for a log field that may
/// hold a client's text (`key = %escaped(key)`, `error = %escaped(&e)`).
pub fn escaped<T: Display>(value: T) -> Escaped<T> {
    Escaped(value)
}

/// See [`escaped`].
pub struct Escaped<T>(T);

impl<T: Display> Display for Escaped<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(EscapingWriter(f), "{}", self.0)
    }
}

impl<T: Display> fmt::Debug for Escaped<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Display::fmt(self, f)
    }
}

/// Writes what it is given to a formatter, escaped.
struct EscapingWriter<'a, 'b>(&'a mut fmt::Formatter<'b>);

impl Write for EscapingWriter<'_, '_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let mut rest = text;
        while let Some(at) = rest.find(needs_escape) {
            self.0.write_str(&rest[..at])?;
            let c = rest[at..].chars().next().expect("a character at a match");
            write!(self.0, "{}", c.escape_default())?;
            rest = &rest[at + c.len_utf8()..];
        }
        self.0.write_str(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleaning_keeps_whole_characters() {
        assert_eq!(clean("hello", 10), "hello");
        assert_eq!(clean("hello", 3), "hel");
        assert_eq!(clean("héllo", 2), "h");
    }

    #[test]
    fn cleaning_escapes_what_could_forge_a_line() {
        assert_eq!(
            clean("a\nb\r\u{1b}[31mc\u{2028}d\te", 100),
            "a\\nb\\r\\u{1b}[31mc\\u{2028}d\\te"
        );
        // The escapes count against the limit, and are never cut in half.
        assert_eq!(clean("ab\n", 3), "ab");
        assert_eq!(clean("\n\n\n", 5), "\\n\\n");
        assert_eq!(clean(&"x".repeat(10_000), 4096).len(), 4096);
    }

    #[test]
    fn escaped_text_is_cleaned_text_uncut() {
        for text in [
            "plain key",
            "",
            "a\nb\r\u{1b}[31mc\u{2028}d\te\u{2029}",
            "\n",
            "héllo wörld\u{7f}\u{85}!",
            "ends with\r",
        ] {
            assert_eq!(
                escaped(text).to_string(),
                clean(text, usize::MAX),
                "{text:?}"
            );
        }
        // Through another value's formatting, as an error's.
        let error = format!("instance `{}` does not exist", "k\nFORGED");
        assert_eq!(
            escaped(&error).to_string(),
            "instance `k\\nFORGED` does not exist"
        );
        assert_eq!(format!("{:?}", escaped("a\nb")), "a\\nb");
    }
}
