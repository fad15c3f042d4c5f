//! `burrow dev`: `serve`, plus a rebuild and a deploy of an actor whenever
//! the files its manifest entry lists under `watch` change.
//!
//! The watch compares, every [`POLL`], the modification time and size of
//! every file under each actor's watched paths (build output and package
//! folders left out); polling works the same on every file system, and a
//! few hundred files cost nothing at this rate. A change waits [`SETTLE`]
//! for the editor to finish writing, then the actor's build command runs
//! and its component is deployed with a check (as `burrow deploy --check`);
//! what happened is printed on stderr. A failed build or a refused deploy
//! leaves the running code as it was.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Result;

use super::build::run_build_command;
use super::embedded::{
    access_of, announce, host_config, http_limits, load_manifest, stop_signal, tls,
};
use super::{AccessArgs, HostArgs, HttpArgs};
use crate::host::Host;
use crate::manifest::ActorSpec;

/// How often the watched files are looked at.
const POLL: Duration = Duration::from_millis(500);
/// How long a change must rest before the build starts.
const SETTLE: Duration = Duration::from_millis(300);
/// Folders under a watched path that are never sources.
const SKIPPED: &[&str] = &["target", "node_modules", ".git", "__pycache__", ".burrow"];

/// What the watched files of one actor looked like: path, modified, size.
type Fingerprint = BTreeMap<PathBuf, (Option<SystemTime>, u64)>;

/// Serves the manifest on `listen` and redeploys each actor whose watched
/// files change, until Ctrl-C or SIGTERM.
pub(super) async fn dev(
    manifest_path: &Path,
    listen: SocketAddr,
    access: &AccessArgs,
    http: &HttpArgs,
    args: &HostArgs,
) -> Result<()> {
    let manifest = load_manifest(manifest_path)?;
    let access = access_of(&manifest, access, listen)?;
    let limits = http_limits(&manifest, http)?;
    let actors: Vec<_> = manifest.actors.values().cloned().collect();
    let config = host_config(&manifest, args)?;
    let tls = tls(&manifest, None)?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    let host = Host::launch(config, &actors).await?;
    announce(&host, &listener, tls.is_some())?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    eprintln!("serving on {scheme}://{listen}");
    let mut watched = Vec::new();
    for actor in actors {
        if actor.watch.is_empty() {
            eprintln!("{}: not watched (no `watch` in the manifest)", actor.name);
            continue;
        }
        let paths: Vec<String> = actor
            .watch
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        eprintln!("{}: watching {}", actor.name, paths.join(", "));
        watched.push(actor);
    }
    let watcher = tokio::spawn(watch(host.clone(), watched, manifest.dir.clone()));
    let serving = crate::http::Serving {
        ui: manifest.host.ui.unwrap_or(true),
        access,
        tls,
        limits,
    };
    let served = crate::http::serve_with(host, listener, serving, stop_signal()).await;
    watcher.abort();
    served
}

/// Polls the watched files of `actors` and redeploys each on a change.
async fn watch(host: Host, actors: Vec<ActorSpec>, dir: PathBuf) {
    let mut seen: Vec<Fingerprint> = actors.iter().map(fingerprint).collect();
    loop {
        tokio::time::sleep(POLL).await;
        for (actor, seen) in actors.iter().zip(seen.iter_mut()) {
            let now = fingerprint(actor);
            if now == *seen {
                continue;
            }
            tokio::time::sleep(SETTLE).await;
            *seen = fingerprint(actor);
            eprintln!("{}: sources changed", actor.name);
            redeploy(&host, actor, &dir).await;
        }
    }
}

/// Builds `actor` and deploys its component with a check, saying what
/// happened.
async fn redeploy(host: &Host, actor: &ActorSpec, dir: &Path) {
    let name = &actor.name;
    if let Err(e) = run_build_command(name, actor, dir).await {
        eprintln!("{name}: not deployed: {e:#}");
        return;
    }
    let bytes = match std::fs::read(&actor.component) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!(
                "{name}: not deployed: cannot read {}: {e}",
                actor.component.display()
            );
            return;
        }
    };
    match host.deploy(name, bytes, true).await {
        Ok(deployed) => eprintln!(
            "{name}: deployed version {} ({}), {} running workflow(s) checked",
            deployed.version,
            &deployed.digest[..12.min(deployed.digest.len())],
            deployed.checked
        ),
        Err(e) => eprintln!("{name}: not deployed: {e}"),
    }
}

/// The modification time and size of every file under `actor`'s watched
/// paths.
fn fingerprint(actor: &ActorSpec) -> Fingerprint {
    let mut files = Fingerprint::new();
    for path in &actor.watch {
        walk(path, &mut files);
    }
    files
}

fn walk(path: &Path, files: &mut Fingerprint) {
    let Ok(mut meta) = std::fs::symlink_metadata(path) else {
        // Gone (or not there yet): its absence is what is seen.
        return;
    };
    if meta.file_type().is_symlink() {
        // A link to a file counts; one to a folder is not followed (it
        // may lead back up).
        match std::fs::metadata(path) {
            Ok(target) if target.is_file() => meta = target,
            _ => return,
        }
    }
    if meta.is_file() {
        files.insert(path.to_path_buf(), (meta.modified().ok(), meta.len()));
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        let skipped = entry
            .file_name()
            .to_str()
            .is_some_and(|name| SKIPPED.contains(&name));
        if !skipped {
            walk(&entry.path(), files);
        }
    }
}
