//! `burrow:actor/log`: guest log lines into the host log, tagged with the
//! instance and cut at [`MAX_LOG_LINE_BYTES`].

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::bindings::log::{Host, Level};
use crate::config::{MAX_LOG_LINE_BYTES, MAX_LOG_LINES_PER_SECOND};
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
        let message = truncate(&message, MAX_LOG_LINE_BYTES);
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

/// `text` cut to at most `max` bytes, on a character boundary.
pub(crate) fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn truncation_keeps_whole_characters() {
        assert_eq!(truncate("hello", 10), "hello");
        assert_eq!(truncate("hello", 3), "hel");
        assert_eq!(truncate("héllo", 2), "h");
    }
}
