//! `burrow:actor/log`: guest log lines into the host log, tagged with the
//! instance and cut at [`MAX_LOG_LINE_BYTES`].
//!
//! Every guest text that reaches a log line or a stored error goes through
//! [`clean`] first (see `text.rs` and `instance::output`).

use crate::bindings::log::{Host, Level};
use crate::config::MAX_LOG_LINE_BYTES;
use crate::instance::InstanceState;
use crate::text::clean;

impl Host for InstanceState {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        if !self.log_limit().admit(self.name()) {
            return Ok(());
        }
        let message = clean(&message, MAX_LOG_LINE_BYTES);
        let (actor, key) = (&*self.name().actor, &*self.name().key);
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
