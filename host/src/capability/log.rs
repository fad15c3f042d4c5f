//! `burrow:actor/log`: guest log lines into the host log, tagged with the
//! instance and cut at [`MAX_LOG_LINE_BYTES`].

use crate::bindings::log::{Host, Level};
use crate::config::MAX_LOG_LINE_BYTES;
use crate::instance_state::InstanceState;

impl Host for InstanceState {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
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
