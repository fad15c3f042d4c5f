//! The address of an instance: its actor's name and its key. One type
//! names an instance everywhere: in the directory, in logs and errors, in
//! the chain of calls between actors.

use std::collections::HashMap;
use std::sync::Arc;

use crate::text::escaped;

/// A map keyed by actor names: hashed with foldhash, a few times cheaper
/// than the standard SipHash on short names, and looked up several times
/// by every call. Its names are the manifest's and the deploys' (the
/// operator's), so no client chooses what goes in; maps keyed by instance
/// keys, which clients choose, keep the standard hasher.
pub(crate) type ByActor<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The address of an instance: actor name and key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Address {
    pub(crate) actor: Arc<str>,
    pub(crate) key: Arc<str>,
}

/// `actor/key`, with the key's control characters escaped (a client
/// chooses it, and an address goes into log lines).
impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.actor, escaped(&self.key))
    }
}
