//! `host.lock`: one host per data directory, and where that host serves.
//!
//! A host holds an exclusive `flock` on the file for its lifetime (the OS
//! releases it when the process ends, also after `kill -9`). A host that
//! serves HTTP writes its URL into the file, so that a command reading the
//! data directory while it runs asks it instead: a running host holds its
//! awake instances' databases exclusively (see [`super::INSTANCE_VFS`]).
//! What the file says counts only while its lock is held.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result, bail};
use cap_std::fs::Dir;

const NAME: &str = "host.lock";

/// The lock of the running host.
pub struct HostLock {
    file: File,
}

impl HostLock {
    /// Takes the lock of the data directory `dir` (at `root`), or fails
    /// naming the directory if another host holds it.
    pub fn take(dir: &Dir, root: &Path) -> Result<HostLock> {
        // Not truncated on opening: a host refused here leaves the running
        // one's address in place.
        let mut options = cap_std::fs::OpenOptions::new();
        options.create(true).read(true).write(true);
        let file = dir
            .open_with(NAME, &options)
            .map(|f| f.into_std())
            .with_context(|| format!("cannot create {}/{NAME}", root.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => bail!(
                "another burrow host is already running on the data directory {} \
                 (it holds {NAME}); stop it, or use another --data-dir",
                root.display()
            ),
            Err(TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}/{NAME}", root.display()));
            }
        }
        // The address of an earlier host that served here is gone with it.
        file.set_len(0)
            .with_context(|| format!("cannot clear {}/{NAME}", root.display()))?;
        Ok(HostLock { file })
    }

    /// Records that this host serves its API at `url`.
    pub fn announce(&self, url: &str) -> Result<()> {
        self.file.set_len(0)?;
        std::os::unix::fs::FileExt::write_all_at(&self.file, url.as_bytes(), 0)?;
        Ok(())
    }
}

/// Who holds the data directory at `root`.
#[derive(Debug, PartialEq, Eq)]
pub enum Holder {
    /// No host runs on it.
    Nobody,
    /// A host that serves its API at this URL.
    Server(String),
    /// A host that serves no API (a command's embedded host), or one
    /// still starting.
    Host,
}

/// Who holds the data directory at `root` now (a directory without a
/// `host.lock` has never had a host).
pub fn holder(root: &Path) -> Result<Holder> {
    let path = root.join(NAME);
    let file = match OpenOptions::new().read(true).open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Holder::Nobody),
        Err(e) => return Err(e).with_context(|| format!("cannot open {}", path.display())),
    };
    match file.try_lock_shared() {
        Ok(()) => return Ok(Holder::Nobody),
        Err(TryLockError::WouldBlock) => {}
        Err(TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("cannot read the lock {}", path.display()));
        }
    }
    let mut url = String::new();
    file.take(1024)
        .read_to_string(&mut url)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let url = url.trim();
    Ok(
        if url.starts_with("http://") || url.starts_with("https://") {
            Holder::Server(url.to_owned())
        } else {
            Holder::Host
        },
    )
}

#[cfg(test)]
mod tests {
    use cap_std::ambient_authority;

    use super::*;

    #[test]
    fn the_holder_and_its_address_are_seen_only_while_the_lock_is_held() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        assert_eq!(holder(root).unwrap(), Holder::Nobody, "no host.lock yet");
        let dir = Dir::open_ambient_dir(root, ambient_authority()).unwrap();

        let lock = HostLock::take(&dir, root).unwrap();
        assert_eq!(holder(root).unwrap(), Holder::Host);
        lock.announce("http://127.0.0.1:7878").unwrap();
        let served = Holder::Server("http://127.0.0.1:7878".into());
        assert_eq!(holder(root).unwrap(), served);
        // A second host is refused, and leaves the first one's address.
        let second = HostLock::take(&dir, root)
            .err()
            .expect("one host at a time");
        assert!(
            format!("{second:#}").contains("another burrow host"),
            "{second:#}"
        );
        assert_eq!(holder(root).unwrap(), served);
        drop(lock);
        assert_eq!(holder(root).unwrap(), Holder::Nobody, "released");

        // A new host does not inherit its predecessor's address.
        let lock = HostLock::take(&dir, root).unwrap();
        assert_eq!(holder(root).unwrap(), Holder::Host);
        drop(lock);
    }
}
