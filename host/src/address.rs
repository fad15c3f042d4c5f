//! The address of an instance: its actor's name and its key. One type
//! names an instance everywhere: in the directory, in logs and errors, in
//! the chain of calls between actors.

use std::sync::Arc;

/// The address of an instance: actor name and key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Address {
    pub(crate) actor: Arc<str>,
    pub(crate) key: Arc<str>,
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.actor, self.key)
    }
}
