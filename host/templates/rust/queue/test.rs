//! Builds the actor and uses it on a host of the test's own (a new data
//! directory in target/tmp; the compiled component stays in the user's
//! compile cache) with the `burrow` command: `cargo test`.

use std::path::{Path, PathBuf};
use std::process::Command;

const ACTOR: &str = "{{name}}";

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

#[test]
fn a_job_is_done_once() {
    let data = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("burrow-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    burrow(&data, &["build"]);
    let send = |text: &str| {
        let payload = format!(r#"{{"text": "{text}"}}"#);
        burrow(&data, &["send", "--local", ACTOR, "test", "job", &payload, "--wait"])
    };
    // `--wait` returns once the job's processing committed, with its result.
    assert_eq!(send("hello"), "HELLO");
    assert_eq!(send("again"), "AGAIN");
    assert_eq!(burrow(&data, &["call", "--local", ACTOR, "test", "processed"]), "2");
    std::fs::remove_dir_all(&data).unwrap();
}
