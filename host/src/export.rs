//! The file `burrow export` writes and `burrow import` reads: one
//! instance's database as committed at one moment, self-contained.
//!
//! ```text
//! burrow-export 1\n
//! {"actor", "key", "exported_at", "component": {"version", "digest"}, "database_bytes"}\n
//! <database_bytes bytes: an SQLite database file>
//! \nsha256 <64 hex digits>\n
//! ```
//!
//! The last line is the SHA-256 of every byte before it, so a file cut
//! short or changed anywhere is refused before anything is read from it.
//! The component is the one the instance ran when it was exported, for
//! the operator to compare: an import runs the actor's component of the
//! host it goes to, whose `migrate` hook sees the copy first.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The first line of every such file.
const MAGIC: &[u8] = b"burrow-export 1\n";
/// What precedes the checksum.
const TRAILER: &[u8] = b"\nsha256 ";

/// The component an instance ran when it was exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportedComponent {
    /// 0 for the manifest's; each deploy adds one.
    pub version: u64,
    /// Its SHA-256, in hex.
    pub digest: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Head {
    actor: String,
    key: String,
    exported_at: i64,
    component: ExportedComponent,
    database_bytes: u64,
}

/// One exported instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// Its actor.
    pub actor: String,
    /// Its key when it was exported (an import may give it another).
    pub key: String,
    /// When it was read, in ms since the Unix epoch.
    pub exported_at: i64,
    /// The actor's component on the host it was exported from.
    pub component: ExportedComponent,
    /// The bytes of its database file.
    pub database: Vec<u8>,
}

impl Export {
    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let head = Head {
            actor: self.actor.clone(),
            key: self.key.clone(),
            exported_at: self.exported_at,
            component: self.component.clone(),
            database_bytes: self.database.len() as u64,
        };
        let mut bytes = MAGIC.to_vec();
        bytes.extend(serde_json::to_vec(&head).expect("a head always serializes"));
        bytes.push(b'\n');
        bytes.extend(&self.database);
        bytes.extend(TRAILER);
        let sum = hex::encode(Sha256::digest(&bytes[..bytes.len() - TRAILER.len() + 1]));
        bytes.extend(sum.as_bytes());
        bytes.push(b'\n');
        bytes
    }

    /// Reads a file written by [`Export::to_bytes`]; what is wrong with it
    /// otherwise, as the end of a sentence that begins "the file".
    pub fn parse(bytes: &[u8]) -> Result<Export, String> {
        let rest = bytes
            .strip_prefix(MAGIC)
            .ok_or("is not one that `burrow export` wrote")?;
        // "\nsha256 " and 64 digits and "\n".
        let tail = TRAILER.len() + 64 + 1;
        if rest.len() < tail || !bytes.ends_with(b"\n") {
            return Err("is cut short: it has no checksum".into());
        }
        let (body, trailer) = bytes.split_at(bytes.len() - tail);
        let sum = trailer
            .strip_prefix(TRAILER)
            .and_then(|t| t.strip_suffix(b"\n"))
            .ok_or("is cut short: it has no checksum")?;
        let expected = hex::encode(Sha256::digest(&bytes[..body.len() + 1]));
        if sum != expected.as_bytes() {
            return Err("fails its checksum: it was cut short or changed".into());
        }
        let rest = &body[MAGIC.len()..];
        let end = rest
            .iter()
            .position(|b| *b == b'\n')
            .ok_or("has no description of its instance")?;
        let head: Head = serde_json::from_slice(&rest[..end])
            .map_err(|e| format!("has a description that cannot be read: {e}"))?;
        let database = &rest[end + 1..];
        if database.len() as u64 != head.database_bytes {
            return Err(format!(
                "holds {} bytes of database where its description says {}",
                database.len(),
                head.database_bytes
            ));
        }
        Ok(Export {
            actor: head.actor,
            key: head.key,
            exported_at: head.exported_at,
            component: head.component,
            database: database.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export() -> Export {
        Export {
            actor: "counter".into(),
            key: "a\nb".into(),
            exported_at: 1_700_000_000_000,
            component: ExportedComponent {
                version: 2,
                digest: "ab".repeat(32),
            },
            database: b"SQLite format 3\0\nsha256 and more".to_vec(),
        }
    }

    #[test]
    fn a_file_reads_back_as_written() {
        assert_eq!(Export::parse(&export().to_bytes()).unwrap(), export());
    }

    #[test]
    fn a_file_cut_short_or_changed_anywhere_is_refused() {
        let bytes = export().to_bytes();
        for cut in [0, 10, bytes.len() / 2, bytes.len() - 1] {
            assert!(Export::parse(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in [0, 20, bytes.len() / 2, bytes.len() - 70, bytes.len() - 2] {
            let mut changed = bytes.clone();
            changed[at] ^= 1;
            let error = Export::parse(&changed).unwrap_err();
            assert!(
                error.contains("checksum") || error.contains("not one"),
                "changed at {at}: {error}"
            );
        }
    }
}
