//! Logging into the host's log, tagged with the actor's name and key.

use crate::wit::burrow::actor::log as wit;

pub use wit::Level;

/// Logs `message` at `level`.
pub fn log(level: Level, message: impl AsRef<str>) {
    wit::log(level, message.as_ref());
}

/// Logs at debug level.
pub fn debug(message: impl AsRef<str>) {
    log(Level::Debug, message);
}

/// Logs at info level.
pub fn info(message: impl AsRef<str>) {
    log(Level::Info, message);
}

/// Logs at warn level.
pub fn warn(message: impl AsRef<str>) {
    log(Level::Warn, message);
}

/// Logs at error level.
pub fn error(message: impl AsRef<str>) {
    log(Level::Error, message);
}
