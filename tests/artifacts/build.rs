//! Builds every guest test program (and the example actors) into a
//! component for wasm32-wasip2, and writes a constant with the path of each.
//!
//! The guests build in their own target directory (`target/guests`), so this
//! nested cargo never waits for the lock of the build that runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

mod js;

/// Rust guests: (constant, package, file stem).
const RUST_GUESTS: &[(&str, &str, &str)] = &[
    ("COUNTER", "counter", "counter"),
    ("PROBE", "probe", "probe"),
    ("NO_EXPORTS", "no-exports", "no_exports"),
    ("STRAY_IMPORT", "stray-import", "stray_import"),
    ("QUEUE_PROBE", "queue-probe", "queue_probe"),
    ("WORKFLOW_PROBE", "workflow-probe", "workflow_probe"),
    ("TALK_PROBE", "talk-probe", "talk_probe"),
    ("MAILER", "mailer", "mailer"),
    ("ROUTER", "router", "router"),
    ("CODER", "coder", "coder"),
    ("ALERTS", "alerts", "alerts"),
    ("PAYMENT", "payment", "payment"),
    ("PAYMENT_LOOP", "payment-loop", "payment_loop"),
    ("FULFILLMENT", "fulfillment", "fulfillment"),
    ("STEPPER", "stepper", "stepper"),
    ("CHAT_ROOM", "chat-room", "chat_room"),
    ("REMINDER", "reminder", "reminder"),
    ("ACCOUNT", "account", "account"),
];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("guests");
    for watched in [
        "wit",
        "guest-sdk",
        "tests/programs",
        "examples/counter",
        "examples/counter-py",
        "examples/mailer",
        "examples/router",
        "examples/coder",
        "examples/alerts",
        "examples/payment",
        "examples/payment-loop",
        "examples/fulfillment",
        "examples/stepper",
        "examples/chat-room",
        "examples/reminder",
        "examples/account",
    ]
    .iter()
    .chain(js::WATCHED)
    {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }

    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .current_dir(&root)
        .args([
            "build",
            "--target",
            "wasm32-wasip2",
            "--profile",
            "guest",
            "--target-dir",
        ])
        .arg(&target_dir);
    for (_, package, _) in RUST_GUESTS {
        cargo.args(["-p", package]);
    }
    // The outer build's settings (clippy's wrapper, its flags, its jobserver)
    // are not meant for the guests.
    for var in [
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_MAKEFLAGS",
        "CARGO_BUILD_TARGET",
    ] {
        cargo.env_remove(var);
    }
    let status = cargo
        .status()
        .expect("run cargo to build the guest programs");
    assert!(
        status.success(),
        "building the guest programs failed; is the target installed? (rustup target add wasm32-wasip2)"
    );

    let out_dir = target_dir.join("wasm32-wasip2").join("guest");
    let mut constants = String::new();
    for (name, _, stem) in RUST_GUESTS {
        let path = out_dir.join(format!("{stem}.wasm"));
        assert!(path.exists(), "{} was not built", path.display());
        constants.push_str(&format!(
            "pub const {name}: &str = {:?};\n",
            path.display().to_string()
        ));
    }

    let counter_py = target_dir.join("counter-py.wasm");
    let python = build_python(&root, &counter_py);
    constants.push_str(&format!(
        "pub const COUNTER_PY: Result<&str, &str> = {};\n",
        match python {
            Ok(()) => format!("Ok({:?})", counter_py.display().to_string()),
            Err(why) => format!("Err({why:?})"),
        }
    ));
    constants.push_str(&js::build(&root, &target_dir));
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("programs.rs");
    std::fs::write(out, constants).unwrap();
}

/// Builds the Python counter with componentize-py, if it is installed.
fn build_python(root: &Path, out: &Path) -> Result<(), String> {
    let script = root.join("examples/counter-py/build.sh");
    if !script.exists() {
        return Err("examples/counter-py/build.sh is missing".into());
    }
    let status = Command::new("bash").arg(&script).arg(out).status();
    match status {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => {
            println!(
                "cargo:warning=building examples/counter-py failed ({s}); run scripts/setup.sh"
            );
            Err(format!(
                "building examples/counter-py failed ({s}); install componentize-py with scripts/setup.sh"
            ))
        }
        Err(e) => Err(format!("cannot run {}: {e}", script.display())),
    }
}
