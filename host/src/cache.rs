//! Components compiled once and cached on disk.
//!
//! An entry is named by the SHA-256 of the component's bytes and of the
//! engine's compatibility hash (wasmtime version, target, settings), and
//! holds the SHA-256 of its payload followed by the payload. An entry that
//! is truncated, corrupt or from another engine is ignored and rebuilt.

use std::hash::Hasher;

use anyhow::{Context, Result};
use cap_std::fs::Dir;
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

const CHECKSUM_BYTES: usize = 32;

/// Feeds `std::hash::Hash` output into SHA-256.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// The cache entry name for `bytes` compiled by `engine`.
pub(crate) fn entry_name(engine: &Engine, bytes: &[u8]) -> String {
    let mut hasher = ShaHasher(Sha256::new());
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut hasher);
    hasher.0.update(Sha256::digest(bytes));
    format!("{}.cwasm", hex::encode(hasher.0.finalize()))
}

/// Compiles `bytes`, or loads the compiled form from `cache`.
pub(crate) fn load(engine: &Engine, cache: &Dir, bytes: &[u8]) -> Result<Component> {
    let name = entry_name(engine, bytes);
    match from_cache(engine, cache, &name) {
        Some(component) => Ok(component),
        None => compile(engine, cache, &name, bytes),
    }
}

/// The compiled form of `bytes` from `cache`, if it holds a sound entry
/// for them: a fast load, no compilation.
pub(crate) fn cached(engine: &Engine, cache: &Dir, bytes: &[u8]) -> Option<Component> {
    from_cache(engine, cache, &entry_name(engine, bytes))
}

fn from_cache(engine: &Engine, cache: &Dir, name: &str) -> Option<Component> {
    let entry = cache.read(name).ok()?;
    let component = from_entry(engine, &entry);
    if component.is_none() {
        tracing::warn!(entry = %name, "ignoring a corrupt compile-cache entry; recompiling");
    }
    component
}

/// Compiles `bytes` and writes the result into `cache` as the entry `name`.
fn compile(engine: &Engine, cache: &Dir, name: &str, bytes: &[u8]) -> Result<Component> {
    let component = Component::new(engine, bytes)?;
    if let Err(e) = store(cache, name, &component) {
        tracing::warn!(entry = %name, error = %format!("{e:#}"), "cannot write the compile cache");
    }
    Ok(component)
}

fn from_entry(engine: &Engine, entry: &[u8]) -> Option<Component> {
    if entry.len() <= CHECKSUM_BYTES {
        return None;
    }
    let (checksum, payload) = entry.split_at(CHECKSUM_BYTES);
    if Sha256::digest(payload).as_slice() != checksum {
        return None;
    }
    // SAFETY: the payload was written by `store` below from
    // `Component::serialize` of an engine with the same compatibility hash
    // (part of the entry name), and its checksum matches, so these are the
    // bytes wasmtime produced.
    unsafe { Component::deserialize(engine, payload) }.ok()
}

fn store(cache: &Dir, name: &str, component: &Component) -> Result<()> {
    let payload = component.serialize()?;
    let mut entry = Vec::with_capacity(CHECKSUM_BYTES + payload.len());
    entry.extend_from_slice(&Sha256::digest(&payload));
    entry.extend_from_slice(&payload);
    // Write under a unique name, then rename: a reader never sees half an entry.
    let tmp = format!("{name}.{}.tmp", std::process::id());
    cache.write(&tmp, &entry).context("write the entry")?;
    cache
        .rename(&tmp, cache, name)
        .context("rename the entry")?;
    Ok(())
}
