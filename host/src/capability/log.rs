//! `burrow:actor/log`: guest log lines into the host log, tagged with the
//! instance and cut at [`MAX_LOG_LINE_BYTES`].
//!
//! Every guest text that reaches a log line or a stored error (log lines,
//! stdout and stderr, failure codes and messages, traps) goes through
//! [`clean`] first: cut to its limit, with control characters escaped, so
//! that no guest can forge a log line or fill the log.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::bindings::log::{Host, Level};
use crate::config::{MAX_FAILURE_MESSAGE_BYTES, MAX_LOG_LINE_BYTES, MAX_LOG_LINES_PER_SECOND};
use crate::instance_state::{InstanceName, InstanceState};

/// The per-second budget of log lines of one instance, shared by the log
/// import and the guest's stdout and stderr.
#[derive(Clone, Default)]
pub(crate) struct LogLimit(Arc<Mutex<Window>>);

#[derive(Default)]
struct Window {
    start: Option<Instant>,
    lines: u32,
    dropped: u64,
}

impl LogLimit {
    /// Whether one more line may go to the log now. When a new second
    /// starts, reports the lines dropped in the last one.
    pub(crate) fn admit(&self, name: &InstanceName) -> bool {
        let mut window = self.0.lock().unwrap();
        let now = Instant::now();
        if window
            .start
            .is_none_or(|start| now.duration_since(start) >= Duration::from_secs(1))
        {
            if window.dropped > 0 {
                tracing::warn!(
                    target: "burrow::guest",
                    actor = %name.actor,
                    key = %name.key,
                    dropped = window.dropped,
                    "log lines dropped: over {MAX_LOG_LINES_PER_SECOND} lines per second"
                );
            }
            *window = Window {
                start: Some(now),
                ..Window::default()
            };
        }
        if window.lines < MAX_LOG_LINES_PER_SECOND {
            window.lines += 1;
            true
        } else {
            window.dropped += 1;
            false
        }
    }
}

impl Host for InstanceState {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        if !self.log_limit.admit(&self.name) {
            return Ok(());
        }
        let message = clean(&message, MAX_LOG_LINE_BYTES);
        let (actor, key) = (&*self.name.actor, &*self.name.key);
        match level {
            Level::Trace => tracing::trace!(target: "burrow::guest", actor, key, "{message}"),
            Level::Debug => tracing::debug!(target: "burrow::guest", actor, key, "{message}"),
            Level::Info => tracing::info!(target: "burrow::guest", actor, key, "{message}"),
            Level::Warn => tracing::warn!(target: "burrow::guest", actor, key, "{message}"),
            Level::Error => tracing::error!(target: "burrow::guest", actor, key, "{message}"),
        }
        Ok(())
    }
}

/// `text` as it may go into a log line or a stored error: control
/// characters (newlines and carriage returns among them) and Unicode line
/// and paragraph separators escaped (`\n`, `\u{1b}`), then cut to at most
/// `max` bytes on a character boundary.
pub(crate) fn clean(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    let mut buf = [0; 4];
    for c in text.chars() {
        let escaped;
        let piece: &str = if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
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

/// Guest failure text (an error's code or message, a trap) as the host
/// keeps, logs and stores it: [`clean`], cut at
/// [`MAX_FAILURE_MESSAGE_BYTES`].
pub(crate) fn failure_text(text: &str) -> String {
    clean(text, MAX_FAILURE_MESSAGE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::clean;

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
}
