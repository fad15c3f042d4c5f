//! The build and compile times `burrow build` records for each actor, in
//! `builds.json` in the data directory, which `burrow bench --languages`
//! reads.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};

/// The file in the data directory where `burrow build` records its times.
pub const BUILDS_FILE: &str = "builds.json";

/// What `burrow build` measured for one actor.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BuildRecord {
    /// Seconds its build command took (none without a build command).
    pub build_s: Option<f64>,
    /// Seconds the check and compile took.
    pub compile_s: f64,
    /// Whether it was compiled (false: the compile cache had it).
    pub compiled: bool,
    /// The component's size in bytes.
    pub component_bytes: u64,
}

/// The times recorded in `data_dir` (empty if none were).
pub fn read_records(data_dir: &Path) -> BTreeMap<String, BuildRecord> {
    std::fs::read(data_dir.join(BUILDS_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Replaces the records in `data_dir`.
pub fn write_records(data_dir: &Path, records: &BTreeMap<String, BuildRecord>) -> Result<()> {
    std::fs::create_dir_all(data_dir)?;
    let path = data_dir.join(BUILDS_FILE);
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(records)?)?;
    std::fs::rename(&tmp, &path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_missing_or_broken_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_records(dir.path()).is_empty());
        let mut records = BTreeMap::new();
        records.insert(
            "counter-py".to_owned(),
            BuildRecord {
                build_s: Some(27.5),
                compile_s: 9.0,
                compiled: true,
                component_bytes: 18_000_000,
            },
        );
        write_records(dir.path(), &records).unwrap();
        assert_eq!(read_records(dir.path()), records);
        std::fs::write(dir.path().join(BUILDS_FILE), "{not json").unwrap();
        assert!(read_records(dir.path()).is_empty());
    }
}
