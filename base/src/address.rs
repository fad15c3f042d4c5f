//! The address of an instance: its actor's name and its key. One type
//! names an instance everywhere: in the directory, in logs and errors, in
//! the chain of calls between actors.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::{MAX_ACTOR_NAME_BYTES, MAX_KEY_BYTES};
use crate::error::Error;
use crate::text::escaped;

/// A map keyed by actor names: hashed with foldhash, a few times cheaper
/// than the standard SipHash on short names, and looked up several times
/// by every call. Its names are the manifest's and the deploys' (the
/// operator's), so no client chooses what goes in; maps keyed by instance
/// keys, which clients choose, keep the standard hasher.
pub type ByActor<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The address of an instance: actor name and key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Address {
    pub actor: Arc<str>,
    pub key: Arc<str>,
}

/// `actor/key`, with the key's control characters escaped (a client
/// chooses it, and an address goes into log lines).
impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.actor, escaped(&self.key))
    }
}

/// Checks an actor name: 1 to 64 bytes of `[a-z0-9_-]`, starting with a letter or digit.
pub fn validate_actor_name(name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name.len() <= MAX_ACTOR_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        && name.as_bytes()[0].is_ascii_alphanumeric();
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidAddress(format!(
            "actor name `{}` must be 1 to {MAX_ACTOR_NAME_BYTES} characters of a-z, 0-9, `_` and `-`, \
             starting with a letter or digit",
            name.escape_debug()
        )))
    }
}

/// Checks an instance key: any UTF-8 text of 1 to [`MAX_KEY_BYTES`] bytes.
pub fn validate_key(key: &str) -> Result<(), Error> {
    if key.is_empty() {
        return Err(Error::InvalidAddress("the key is empty".into()));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::InvalidAddress(format!(
            "the key is {} bytes long; the limit is {MAX_KEY_BYTES} bytes",
            key.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actor_names_are_checked() {
        for good in ["counter", "counter-py", "a_1", "9lives"] {
            validate_actor_name(good).unwrap();
        }
        for bad in ["", "Counter", "../x", "a/b", "-x", "a b", &"a".repeat(65)] {
            let err = validate_actor_name(bad).unwrap_err();
            assert_eq!(err.code(), "invalid-address");
        }
    }

    #[test]
    fn keys_are_checked() {
        validate_key("any text at all: ../ \u{1F600}").unwrap();
        validate_key(&"k".repeat(MAX_KEY_BYTES)).unwrap();
        assert!(validate_key("").unwrap_err().to_string().contains("empty"));
        let long = validate_key(&"k".repeat(MAX_KEY_BYTES + 1)).unwrap_err();
        assert!(long.to_string().contains("limit is 1024 bytes"), "{long}");
    }
}
