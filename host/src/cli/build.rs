//! `burrow build`: runs each actor's build command, then checks and
//! compiles its component into the compile cache, one actor at a time,
//! with progress on stderr.
//!
//! Building a Python or JavaScript actor takes tens of seconds (the
//! component bundles an interpreter), and compiling it as long again, so
//! every stage names the actor, says what runs, and reports its elapsed time
//! every few seconds until it ends. The times go to `builds.json` in the
//! data directory (`builds`), where `burrow bench --languages` reads
//! them.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::HostArgs;
use super::builds::{BuildRecord, read_records, write_records};
use super::embedded::{host_config, load_manifest};
use crate::manifest::ActorSpec;

/// How often a stage that is still running says so.
const TICK: Duration = Duration::from_secs(5);

fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// Runs the build command of each selected actor, then compiles and checks
/// each component (into the compile cache, so the next `serve` starts at
/// once).
pub(super) async fn build(manifest_path: &Path, only: &[String], host: &HostArgs) -> Result<()> {
    let begun = Instant::now();
    let manifest = load_manifest(manifest_path)?;
    for name in only {
        if !manifest.actors.contains_key(name) {
            bail!(
                "unknown actor `{name}`: it is not defined in {}",
                manifest_path.display()
            );
        }
    }
    let selected: Vec<&ActorSpec> = manifest
        .actors
        .values()
        .filter(|a| only.is_empty() || only.contains(&a.name))
        .collect();
    let total = selected.len();
    let mut records = BTreeMap::new();
    for (i, actor) in selected.iter().enumerate() {
        let tag = format!("[{}/{total}] {}", i + 1, actor.name);
        let took = run_build_command(&tag, actor, &manifest.dir).await?;
        records.insert(
            actor.name.clone(),
            BuildRecord {
                build_s: took.map(|t| t.as_secs_f64()),
                ..BuildRecord::default()
            },
        );
    }
    let config = host_config(&manifest, host)?;
    for (i, actor) in selected.iter().enumerate() {
        let tag = format!("[{}/{total}] {}", i + 1, actor.name);
        let bytes = std::fs::metadata(&actor.component).map_or(0, |m| m.len());
        eprintln!("{tag}: checking and compiling {}", megabytes(bytes));
        let started = Instant::now();
        let spec = (*actor).clone();
        let check_config = config.clone();
        let mut task = tokio::spawn(async move {
            crate::host::check_actors(&check_config, std::slice::from_ref(&spec)).await
        });
        let result = loop {
            match tokio::time::timeout(TICK, &mut task).await {
                Ok(joined) => break joined.context("the compile task failed")?,
                Err(_) => eprintln!("{tag}: compiling, {}", seconds(started.elapsed())),
            }
        };
        let compiled = result? > 0;
        let took = started.elapsed();
        if compiled {
            eprintln!("{tag}: compiled in {}", seconds(took));
        } else {
            eprintln!(
                "{tag}: already compiled (compile cache); checked in {}",
                seconds(took)
            );
        }
        let record = records.entry(actor.name.clone()).or_default();
        record.compile_s = took.as_secs_f64();
        record.compiled = compiled;
        record.component_bytes = bytes;
    }
    let mut all = read_records(&config.data_dir);
    all.extend(records);
    if let Err(e) = write_records(&config.data_dir, &all) {
        eprintln!("cannot record the build times in the data directory: {e:#}");
    }
    eprintln!("ready: {total} actor(s) in {}", seconds(begun.elapsed()));
    Ok(())
}

/// Runs the actor's build command, if it has one, and says every `TICK`
/// that it still runs; returns how long it took.
pub(super) async fn run_build_command(
    tag: &str,
    actor: &ActorSpec,
    dir: &Path,
) -> Result<Option<Duration>> {
    let Some(command) = &actor.build else {
        eprintln!(
            "{tag}: no build command; using {}",
            actor.component.display()
        );
        return Ok(None);
    };
    eprintln!("{tag}: building: {command}");
    let started = Instant::now();
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot run the build command of `{}`", actor.name))?;
    let status = loop {
        match tokio::time::timeout(TICK, child.wait()).await {
            Ok(status) => break status?,
            Err(_) => eprintln!("{tag}: building, {}", seconds(started.elapsed())),
        }
    };
    if !status.success() {
        bail!(
            "the build command of `{}` failed ({status}): {command}",
            actor.name
        );
    }
    if !actor.component.exists() {
        bail!(
            "the build command of `{}` succeeded but {} does not exist; check `component` in the manifest",
            actor.name,
            actor.component.display()
        );
    }
    let took = started.elapsed();
    let bytes = std::fs::metadata(&actor.component).map_or(0, |m| m.len());
    eprintln!(
        "{tag}: built in {} -> {} ({})",
        seconds(took),
        actor.component.display(),
        megabytes(bytes)
    );
    Ok(Some(took))
}
