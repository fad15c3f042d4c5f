//! Where an instance's files are in the data directory, and the move from
//! the flat layout of older hosts.
//!
//! The database of (`actor`, `key`) is
//! `actors/<actor>/<ab>/<sha256(key)>.sqlite`, where `<ab>` is the first
//! two hex digits of the hash: 256 subdirectories an actor, so a million
//! instances make about 3,900 entries a directory, not a million in one.
//! Hosts before this layout kept every instance file in `actors/<actor>/`
//! itself; [`move_flat_files`] moves them into their subdirectory at start,
//! one `rename` a file, before any instance is opened. A crash in the
//! middle leaves every file whole in one place or the other (a database
//! may be moved without its log yet), and the next start moves the rest.

use std::collections::BTreeSet;

use anyhow::{Context, Result, bail};
use cap_std::fs::Dir;
use sha2::{Digest, Sha256};

/// The files an instance may have: its database, and SQLite's files beside it.
const SUFFIXES: [&str; 4] = [".sqlite", ".sqlite-wal", ".sqlite-shm", ".sqlite-journal"];

/// The file stem for `key`: the hex SHA-256 of its UTF-8 bytes.
pub fn key_file_stem(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// The directory of `actor`'s instances, relative to the data directory.
pub fn actor_dir(actor: &str) -> String {
    format!("actors/{actor}")
}

/// The subdirectory of `actor`'s directory that holds the files of `key`.
pub fn subdir(actor: &str, key: &str) -> String {
    let stem = key_file_stem(key);
    format!("actors/{actor}/{}", &stem[..2])
}

/// The database of (`actor`, `key`), relative to the data directory.
pub fn instance_file(actor: &str, key: &str) -> String {
    let stem = key_file_stem(key);
    format!("actors/{actor}/{}/{stem}.sqlite", &stem[..2])
}

/// The names of an actor's subdirectories: `00` to `ff`.
pub fn subdir_names() -> impl Iterator<Item = String> {
    (0..=255u8).map(|i| format!("{i:02x}"))
}

/// The subdirectory a file of the flat layout belongs in, if `name` is the
/// name of an instance's file (a hash and one of [`SUFFIXES`]).
fn subdir_of_flat(name: &str) -> Option<&str> {
    let stem = SUFFIXES.iter().find_map(|s| name.strip_suffix(s))?;
    let is_hash = stem.len() == 64 && stem.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    is_hash.then(|| &stem[..2])
}

/// Moves the instance files of the flat layout in `actor` (an actor's
/// directory, its subdirectories made) into their subdirectories; returns
/// the subdirectories that received files, for the caller to sync.
pub fn move_flat_files(actor: &Dir) -> Result<BTreeSet<String>> {
    let mut moved = BTreeSet::new();
    for entry in actor.entries()? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(subdir) = subdir_of_flat(name) else {
            continue;
        };
        if !entry.file_type()?.is_file() {
            continue;
        }
        let to = format!("{subdir}/{name}");
        if actor.exists(&to) {
            bail!("{name} is in the old layout and at {to} too; move one of them away");
        }
        actor
            .rename(name, actor, &to)
            .with_context(|| format!("cannot move {name} to {to}"))?;
        moved.insert(subdir.to_string());
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_has_one_file_in_the_subdirectory_of_its_hash() {
        let stem = key_file_stem("k");
        assert_eq!(stem.len(), 64);
        assert_eq!(
            instance_file("a", "k"),
            format!("actors/a/{}/{stem}.sqlite", &stem[..2])
        );
        assert_eq!(subdir("a", "k"), format!("actors/a/{}", &stem[..2]));
        assert_eq!(subdir_names().count(), 256);
        assert!(subdir_names().any(|s| s == stem[..2]));
    }

    #[test]
    fn only_instance_files_of_the_flat_layout_are_moved() {
        let stem = key_file_stem("k");
        assert_eq!(subdir_of_flat(&format!("{stem}.sqlite")), Some(&stem[..2]));
        assert_eq!(
            subdir_of_flat(&format!("{stem}.sqlite-wal")),
            Some(&stem[..2])
        );
        for other in [
            "notes.txt".to_string(),
            format!("{stem}.txt"),
            format!("{}.sqlite", &stem[..63]),
            format!("{}.sqlite", stem.to_uppercase()),
            "ab".to_string(),
        ] {
            assert_eq!(subdir_of_flat(&other), None, "{other}");
        }
    }
}
