//! Where instance data lives on disk.
//!
//! ```text
//! <data dir>/
//!   host.lock                         held while a host runs on this directory
//!   host.sqlite                       index of instances
//!   actors/<actor>/<sha256(key)>.sqlite   one database per instance
//!   cache/<hash>.cwasm                precompiled components
//! ```
//!
//! A key never becomes part of a path: file names are the hex SHA-256 of the
//! key, and actor names are checked to be `[a-z0-9][a-z0-9_-]*`, so no key
//! or name can reach outside the data directory. Directories and files are
//! created and removed through a cap-std [`Dir`] rooted at the data
//! directory; SQLite itself opens the derived path.

pub(crate) mod functions;
pub(crate) mod heap;
pub(crate) mod index;
pub(crate) mod instance_db;
pub(crate) mod queue;
pub(crate) mod sandbox;
pub(crate) mod schedule;
pub(crate) mod workflow;

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use sha2::{Digest, Sha256};

use crate::config::{MAX_ACTOR_NAME_BYTES, MAX_KEY_BYTES};
use crate::error::Error;

/// The data directory of one host, locked against a second host process.
pub(crate) struct DataDir {
    root: PathBuf,
    dir: Dir,
    // Held for the host's lifetime: the OS releases the lock when the
    // process ends, also after `kill -9`.
    _lock: File,
}

impl DataDir {
    /// Opens (creating if needed) and locks `root`.
    pub(crate) fn open(root: &Path) -> Result<DataDir> {
        std::fs::create_dir_all(root)
            .with_context(|| format!("cannot create the data directory {}", root.display()))?;
        let root = root
            .canonicalize()
            .with_context(|| format!("cannot resolve the data directory {}", root.display()))?;
        let dir = Dir::open_ambient_dir(&root, ambient_authority())
            .with_context(|| format!("cannot open the data directory {}", root.display()))?;
        let lock = dir
            .create("host.lock")
            .map(|f| f.into_std())
            .or_else(|_| dir.open("host.lock").map(|f| f.into_std()))
            .with_context(|| format!("cannot create {}/host.lock", root.display()))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => bail!(
                "another burrow host is already running on the data directory {} \
                 (it holds host.lock); stop it, or use another --data-dir",
                root.display()
            ),
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}/host.lock", root.display()));
            }
        }
        dir.create_dir_all("actors")?;
        dir.create_dir_all("cache")?;
        Ok(DataDir {
            root,
            dir,
            _lock: lock,
        })
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The compile cache: `cache/` here, or `elsewhere` (created if missing).
    pub(crate) fn cache_dir(&self, elsewhere: Option<&Path>) -> Result<Dir> {
        match elsewhere {
            None => Ok(self.dir.open_dir("cache")?),
            Some(path) => open_dir_creating(path),
        }
    }

    /// Makes sure the directory of `actor` exists.
    pub(crate) fn prepare_actor(&self, actor: &str) -> Result<()> {
        self.dir.create_dir_all(format!("actors/{actor}"))?;
        Ok(())
    }

    /// Path of the database of (`actor`, `key`), for SQLite to open.
    pub(crate) fn instance_path(&self, actor: &str, key: &str) -> PathBuf {
        instance_path(&self.root, actor, key)
    }

    /// Whether the database file of (`actor`, `key`) exists.
    pub(crate) fn instance_exists(&self, actor: &str, key: &str) -> bool {
        self.dir
            .try_exists(relative_instance_path(actor, key))
            .unwrap_or(false)
    }

    /// Deletes the database of (`actor`, `key`) with its WAL and shared-memory files.
    pub(crate) fn remove_instance(&self, actor: &str, key: &str) -> Result<()> {
        let base = relative_instance_path(actor, key);
        for suffix in ["", "-wal", "-shm"] {
            let path = format!("{base}{suffix}");
            match self.dir.remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).with_context(|| format!("cannot remove {path}")),
            }
        }
        Ok(())
    }
}

/// Opens the directory at `path`, creating it if missing.
pub(crate) fn open_dir_creating(path: &Path) -> Result<Dir> {
    std::fs::create_dir_all(path)
        .with_context(|| format!("cannot create the directory {}", path.display()))?;
    Dir::open_ambient_dir(path, ambient_authority())
        .with_context(|| format!("cannot open the directory {}", path.display()))
}

/// Path of the database of (`actor`, `key`) under the data directory `root`.
pub fn instance_path(root: &Path, actor: &str, key: &str) -> PathBuf {
    root.join(relative_instance_path(actor, key))
}

fn relative_instance_path(actor: &str, key: &str) -> String {
    format!("actors/{actor}/{}.sqlite", key_file_stem(key))
}

/// The file stem for `key`: the hex SHA-256 of its UTF-8 bytes.
pub(crate) fn key_file_stem(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
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
    fn hostile_keys_stay_inside_the_data_directory() {
        let root = Path::new("/data");
        for key in [
            "../../etc/passwd",
            "/abs",
            "a\0b",
            "..",
            "ключ/🙂",
            &"x".repeat(1024),
        ] {
            let path = instance_path(root, "counter", key);
            assert!(path.starts_with("/data/actors/counter/"), "{path:?}");
            let name = path.file_name().unwrap().to_str().unwrap();
            assert_eq!(name.len(), 64 + ".sqlite".len());
            assert!(
                name.trim_end_matches(".sqlite")
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit())
            );
        }
    }

    #[test]
    fn different_keys_get_different_files() {
        assert_ne!(key_file_stem("a"), key_file_stem("A"));
        assert_ne!(key_file_stem("a"), key_file_stem("a "));
    }

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

    #[test]
    fn a_second_host_on_the_same_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let first = DataDir::open(tmp.path()).unwrap();
        let err = DataDir::open(tmp.path())
            .err()
            .expect("second open must fail");
        assert!(err.to_string().contains("another burrow host"), "{err}");
        drop(first);
        DataDir::open(tmp.path()).expect("the lock is released with the first host");
    }
}
