//! Entry points for the fuzz targets in `fuzz/`. Not a stable API.
//!
//! Each drives one part of the guest boundary the way a hostile guest or
//! caller could, and checks the host's invariants after every step: no
//! panic, the host's transaction stays the host's, internal tables stay
//! intact, and errors are values, not crashes.

mod calls;
mod imports;
pub mod sql;

pub use calls::{FuzzValue, ImportCall, When, WorkflowCall};
pub use imports::ImportSession;

use std::path::Path;

use crate::config::HostConfig;

/// Loads `bytes` as the component of an actor the way `burrow serve`
/// does (header checks, compilation, imports and exports), returning the
/// error text if it cannot be an actor. `cache_dir` is the compile cache.
pub fn load_component(bytes: &[u8], cache_dir: &Path) -> Result<(), String> {
    let config = HostConfig {
        max_awake: 1,
        pooling: false,
        ..HostConfig::default()
    };
    let engine =
        crate::engine::build(config.max_awake, config.pooling).map_err(|e| e.to_string())?;
    let linker = crate::capability::linker(&engine).map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join("fuzz.wasm");
    std::fs::write(&file, bytes).map_err(|e| e.to_string())?;
    let cache = crate::cache::CompileCache::open(cache_dir, config.cache_max)
        .map_err(|e| format!("{e:#}"))?;
    let spec = crate::manifest::ActorSpec::new("fuzz", &file);
    crate::definition::load(&engine, &linker, &cache, &spec)
        .map(drop)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_components_are_errors() {
        let cache = tempfile::tempdir().unwrap();
        for bytes in [
            &b""[..],
            b"\0asm",
            b"\0asm\x0d\0\x01\0",
            b"\0asm\x01\0\0\0",
            b"\0asm\x0d\0\x01\0\xff\xff\xff",
        ] {
            let e = load_component(bytes, cache.path()).unwrap_err();
            assert!(e.contains("actor `fuzz`"), "{e}");
        }
    }
}
