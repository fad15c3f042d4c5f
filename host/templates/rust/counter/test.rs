//! Builds the actor and calls it on a host of the test's own (its data in
//! target/tmp, where compiled components stay cached between runs) with the
//! `burrow` command: `cargo test`.

use std::path::PathBuf;
use std::process::Command;

const ACTOR: &str = "{{name}}";

/// Runs `burrow ARGS` on the test's data directory; what it printed.
fn burrow(args: &[&str]) -> String {
    let data = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("burrow-test-data");
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
fn the_counter_counts() {
    burrow(&["build"]);
    let key = format!("test-{}", std::process::id());
    assert_eq!(burrow(&["call", "--local", ACTOR, &key, "increment", "[2]"]), "2");
    assert_eq!(burrow(&["call", "--local", ACTOR, &key, "increment", "[3]"]), "5");
    assert_eq!(burrow(&["call", "--local", ACTOR, &key, "get"]), "5");
}
