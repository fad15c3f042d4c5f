//! Components compiled once and cached on disk.
//!
//! An entry is named by the SHA-256 of the component's bytes and of the
//! engine's compatibility hash (wasmtime version, target, settings), and
//! holds the SHA-256 of its payload followed by the payload. An entry that
//! is truncated, corrupt or from another engine is ignored and rebuilt.
//!
//! One cache may serve every data directory and project of a user, and
//! several processes at once: an entry appears whole (written beside, then
//! renamed), a load marks it used (its modification time), and a new entry
//! that takes the cache past its size evicts the least recently used ones.

use std::hash::Hasher;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

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

/// A folder of compiled components, at most `max_bytes` of entries.
pub(crate) struct CompileCache {
    dir: Dir,
    max_bytes: u64,
    /// Components compiled through this cache and its clones.
    compiled: Arc<AtomicUsize>,
}

impl CompileCache {
    /// The cache in `dir`.
    pub(crate) fn new(dir: Dir, max_bytes: u64) -> CompileCache {
        CompileCache {
            dir,
            max_bytes,
            compiled: Arc::default(),
        }
    }

    /// The cache in the folder `path`, made if it does not exist.
    pub(crate) fn open(path: &Path, max_bytes: u64) -> Result<CompileCache> {
        let dir = std::fs::create_dir_all(path)
            .and_then(|()| Dir::open_ambient_dir(path, cap_std::ambient_authority()))
            .with_context(|| format!("cannot open the compile cache {}", path.display()))?;
        Ok(CompileCache::new(dir, max_bytes))
    }

    pub(crate) fn try_clone(&self) -> Result<CompileCache> {
        Ok(CompileCache {
            dir: self.dir.try_clone()?,
            max_bytes: self.max_bytes,
            compiled: self.compiled.clone(),
        })
    }

    /// How many components were compiled (not found in the cache) through
    /// this cache and its clones.
    pub(crate) fn compiled(&self) -> usize {
        self.compiled.load(Ordering::Relaxed)
    }

    /// Compiles `bytes`, or loads the compiled form from the cache.
    pub(crate) fn load(&self, engine: &Engine, bytes: &[u8]) -> Result<Component> {
        let name = entry_name(engine, bytes);
        match self.find(engine, &name) {
            Some(component) => Ok(component),
            None => self.compile(engine, &name, bytes),
        }
    }

    /// The compiled form of `bytes` from the cache, if it holds a sound
    /// entry for them: a fast load, no compilation.
    pub(crate) fn cached(&self, engine: &Engine, bytes: &[u8]) -> Option<Component> {
        self.find(engine, &entry_name(engine, bytes))
    }

    fn find(&self, engine: &Engine, name: &str) -> Option<Component> {
        let entry = self.dir.read(name).ok()?;
        let component = from_entry(engine, &entry);
        match component {
            Some(_) => self.mark_used(name),
            None => {
                tracing::warn!(entry = %name, "ignoring a corrupt compile-cache entry; recompiling")
            }
        }
        component
    }

    /// Compiles `bytes` and writes the result into the cache as `name`.
    fn compile(&self, engine: &Engine, name: &str, bytes: &[u8]) -> Result<Component> {
        let component = Component::new(engine, bytes)?;
        self.compiled.fetch_add(1, Ordering::Relaxed);
        let stored = store(&self.dir, name, &component).and_then(|()| self.evict(name));
        if let Err(e) = stored {
            tracing::warn!(entry = %name, error = %format!("{e:#}"), "cannot write the compile cache");
        }
        Ok(component)
    }

    /// Sets the entry's modification time to now: eviction takes the
    /// entries used longest ago first.
    fn mark_used(&self, name: &str) {
        let marked = self
            .dir
            .open(name)
            .and_then(|file| file.into_std().set_modified(SystemTime::now()));
        if let Err(e) = marked {
            tracing::debug!(entry = %name, error = %e, "cannot mark a compile-cache entry used");
        }
    }

    /// Removes the least recently used entries (never `keep`) while the
    /// entries take more than the cache's size.
    fn evict(&self, keep: &str) -> Result<()> {
        let mut entries = Vec::new();
        let mut total = 0u64;
        for entry in self.dir.entries()? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".cwasm") {
                continue;
            }
            let Ok(meta) = entry.metadata() else {
                continue; // removed meanwhile, by another process
            };
            let used = meta
                .modified()
                .map(|t| t.into_std())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            total += meta.len();
            entries.push((used, name, meta.len()));
        }
        if total <= self.max_bytes {
            return Ok(());
        }
        entries.sort();
        for (_, name, len) in entries {
            if total <= self.max_bytes {
                break;
            }
            if name != keep && self.dir.remove_file(&name).is_ok() {
                total -= len;
                tracing::info!(entry = %name, bytes = len, "evicted from the compile cache");
            }
        }
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A cache of `max_bytes` in a new folder, with fake entries of
    /// `len` bytes each, the first used longest ago.
    fn cache_with(max_bytes: u64, names: &[&str], len: usize) -> (tempfile::TempDir, CompileCache) {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::open(dir.path(), max_bytes).unwrap();
        let start = SystemTime::now() - Duration::from_secs(3600);
        for (i, name) in names.iter().enumerate() {
            let path = dir.path().join(name);
            std::fs::write(&path, vec![0u8; len]).unwrap();
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(start + Duration::from_secs(i as u64 * 60))
                .unwrap();
        }
        (dir, cache)
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn entries_used_longest_ago_go_first_past_the_size() {
        let (dir, cache) = cache_with(250, &["a.cwasm", "b.cwasm", "c.cwasm", "d.cwasm"], 100);
        // `a` was written first, then used last: `b` and `c` go.
        cache.mark_used("a.cwasm");
        cache.evict("d.cwasm").unwrap();
        assert_eq!(names(dir.path()), ["a.cwasm", "d.cwasm"]);
    }

    #[test]
    fn the_entry_just_written_stays_even_past_the_size() {
        let (dir, cache) = cache_with(50, &["old.cwasm", "new.cwasm", "other.tmp"], 100);
        cache.evict("new.cwasm").unwrap();
        // Only entries count and go: a file being written stays.
        assert_eq!(names(dir.path()), ["new.cwasm", "other.tmp"]);
    }

    #[test]
    fn a_cache_within_its_size_keeps_everything() {
        let (dir, cache) = cache_with(300, &["a.cwasm", "b.cwasm", "c.cwasm"], 100);
        cache.evict("c.cwasm").unwrap();
        assert_eq!(names(dir.path()).len(), 3);
    }
}
