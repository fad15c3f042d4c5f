//! One compile cache per user: every data directory and project of a user
//! finds a component compiled once, in `$XDG_CACHE_HOME/burrow` (else
//! `~/.cache/burrow`), unless `--cache-dir`, `BURROW_CACHE_DIR` or the
//! manifest's `cache_dir` name another; a corrupt entry is reported and
//! compiled again, never loaded.

use std::path::{Path, PathBuf};

use crate::support::{burrow_command, programs};

/// A project in `dir/name` with the counter, its data in the project.
fn project(dir: &Path, name: &str) -> PathBuf {
    let project = dir.join(name);
    std::fs::create_dir_all(&project).unwrap();
    let manifest = project.join("burrow.toml");
    std::fs::write(
        &manifest,
        format!("[actors.counter]\ncomponent = {:?}\n", programs::COUNTER),
    )
    .unwrap();
    manifest
}

/// `burrow build` of `manifest` as a user whose home is `home`, with
/// `XDG_CACHE_HOME` set when `xdg` is given: its stderr.
fn build(manifest: &Path, home: &Path, xdg: Option<&Path>, args: &[&str]) -> String {
    let mut command = burrow_command();
    command
        .env_remove("BURROW_CACHE_DIR")
        .env_remove("XDG_CACHE_HOME")
        .env("HOME", home)
        .env("BURROW_LOG", "warn")
        .arg("--manifest")
        .arg(manifest)
        .arg("build")
        .args(args);
    if let Some(xdg) = xdg {
        command.env("XDG_CACHE_HOME", xdg);
    }
    let out = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

/// The compiled components in `dir`.
fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir).map_or_else(
        |_| Vec::new(),
        |entries| {
            entries
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
                .collect()
        },
    )
}

const COMPILED: &str = "[1/1] counter: compiled in ";
const CACHED: &str = "[1/1] counter: already compiled (compile cache)";

#[test]
fn every_data_directory_of_a_user_shares_one_compile_cache() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let xdg = dir.path().join("xdg");
    let (first, second) = (project(dir.path(), "first"), project(dir.path(), "second"));

    // The first project compiles into $XDG_CACHE_HOME/burrow, not into
    // its data directory; the second, on its own data directory, finds it.
    assert!(build(&first, &home, Some(&xdg), &[]).contains(COMPILED));
    assert_eq!(entries(&xdg.join("burrow")).len(), 1);
    assert!(entries(&dir.path().join("first/.burrow/cache")).is_empty());
    assert!(build(&second, &home, Some(&xdg), &[]).contains(CACHED));

    // Without XDG_CACHE_HOME: ~/.cache/burrow.
    assert!(build(&first, &home, None, &[]).contains(COMPILED));
    let user_cache = home.join(".cache/burrow");
    assert!(build(&second, &home, None, &[]).contains(CACHED));

    // A corrupt entry is reported, compiled again and replaced.
    let [entry] = entries(&user_cache).try_into().unwrap();
    let mut bytes = std::fs::read(&entry).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();
    let stderr = build(&second, &home, None, &[]);
    assert!(stderr.contains("corrupt compile-cache entry"), "{stderr}");
    assert!(stderr.contains(COMPILED), "{stderr}");
    assert!(build(&first, &home, None, &[]).contains(CACHED));

    // --cache-dir names another.
    let elsewhere = dir.path().join("elsewhere");
    let cache_dir = elsewhere.to_str().unwrap();
    assert!(build(&first, &home, None, &["--cache-dir", cache_dir]).contains(COMPILED));
    assert_eq!(entries(&elsewhere).len(), 1);
}

#[test]
fn a_cache_too_small_for_a_component_keeps_only_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let manifest = dir.path().join("burrow.toml");
    // Two components, a cache of 1 byte: each compile evicts the other.
    std::fs::write(
        &manifest,
        format!(
            "[host]\ncache_dir = \"compiled\"\ncache_max = \"1\"\n\n\
             [actors.counter]\ncomponent = {:?}\n\n[actors.stepper]\ncomponent = {:?}\n",
            programs::COUNTER,
            programs::STEPPER,
        ),
    )
    .unwrap();
    let stderr = build(&manifest, &home, None, &[]);
    assert!(stderr.contains("[1/2] counter: compiled in "), "{stderr}");
    assert!(stderr.contains("[2/2] stepper: compiled in "), "{stderr}");
    assert_eq!(entries(&dir.path().join("compiled")).len(), 1);

    let out = burrow_command()
        .env("HOME", &home)
        .arg("--manifest")
        .arg(&manifest)
        .args(["build", "--cache-max", "lots"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--cache-max"), "{stderr}");
}
