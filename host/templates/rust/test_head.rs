//! Builds the actor and uses it on a host of the test's own (a new data
//! directory in target/tmp; the compiled component stays in the user's
//! compile cache) with the `burrow` command: `cargo test`.

use std::path::{Path, PathBuf};
use std::process::Command;

const ACTOR: &str = "{{name}}";

/// A new data directory for one test, in target/tmp.
fn new_data_dir(test: &str) -> PathBuf {
    let data = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("burrow-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    data
}

/// Runs `burrow ARGS` on the data directory `data`; what it printed.
fn burrow(data: &Path, args: &[&str]) -> String {
    let program = std::env::var("BURROW").unwrap_or_else(|_| "burrow".into());
    let output = Command::new(&program)
        .args(args)
        .env("BURROW_DATA_DIR", &data)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{program}` (is Burrow installed?): {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(
        output.status.success(),
        "burrow {args:?} failed: {}{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

