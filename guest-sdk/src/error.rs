use std::fmt;

use crate::db::DbError;
use crate::state::StateError;

/// An application error: a machine-readable code and a message for people.
///
/// Returning it from an action rolls back everything the action wrote; the
/// caller sees the code and the message (HTTP status 422).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// A short identifier the caller can match on, such as `"not-found"`.
    pub code: String,
    /// A message for people.
    pub message: String,
    /// In a workflow step: not worth retrying; the step fails for good at
    /// once (see [`Error::critical`]).
    pub critical: bool,
    /// In a workflow step: fail for good and roll the workflow back (see
    /// [`Error::rollback`]).
    pub rollback: bool,
}

/// `Result` with [`Error`] as its default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error with a code and a message.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Error {
            code: code.into(),
            message: message.into(),
            critical: false,
            rollback: false,
        }
    }

    /// Marks the error as a rollback request: a workflow step that returns
    /// it fails for good at once (kind `rollback`), `try_block` does not
    /// catch it (unless asked to), and an uncaught one rolls the workflow
    /// back to its last checkpoint.
    pub fn rollback(mut self) -> Self {
        self.rollback = true;
        self
    }

    /// Marks the error critical: a workflow step that returns it fails for
    /// good without retries (a failure of kind `critical`).
    pub fn critical(mut self) -> Self {
        self.critical = true;
        self
    }

    /// An error with the generic code `"error"`.
    pub fn msg(message: impl Into<String>) -> Self {
        Error::new("error", message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

impl From<DbError> for Error {
    fn from(e: DbError) -> Self {
        match e {
            DbError::NotInStep(m) => Error::new("not-in-step", m),
            e => Error::new("db", e.to_string()),
        }
    }
}

impl From<StateError> for Error {
    fn from(e: StateError) -> Self {
        match e {
            StateError::NotInStep(m) => Error::new("not-in-step", m),
            e => Error::new("state", e.to_string()),
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::new("json", e.to_string())
    }
}

impl From<Error> for crate::wit::burrow::actor::types::Failure {
    fn from(e: Error) -> Self {
        crate::wit::burrow::actor::types::Failure {
            code: e.code,
            message: e.message,
        }
    }
}
