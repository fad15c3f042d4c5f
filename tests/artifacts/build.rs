//! Builds every guest test program (and the example actors) into a
//! component for wasm32-wasip2, and writes a constant with the path of each.
//!
//! The Rust guests build where `burrow build` builds them (burrow.toml:
//! `--target wasm32-wasip2 --profile guest` in the workspace's target
//! directory), so after the tests `burrow build` finds them built. The
//! nested cargo locks only that profile's folders (`target/guest` and
//! `target/wasm32-wasip2/guest`), never `target/debug`, which the build
//! that runs it holds. The Python and JavaScript components go to
//! `target/guests`, where burrow.toml names them.

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
    ("HTTP_PROBE", "http-probe", "http_probe"),
    ("MAILER", "mailer", "mailer"),
    ("ROUTER", "router", "router"),
    ("CODER", "coder", "coder"),
    ("ALERTS", "alerts", "alerts"),
    ("PAYMENT", "payment", "payment"),
    ("PAYMENT_LOOP", "payment-loop", "payment_loop"),
    ("FULFILLMENT", "fulfillment", "fulfillment"),
    ("STEPPER", "stepper", "stepper"),
    ("STEPPER_NEXT", "stepper-next", "stepper_next"),
    ("CHAT_ROOM", "chat-room", "chat_room"),
    ("REMINDER", "reminder", "reminder"),
    ("ACCOUNT", "account", "account"),
    ("CONFORMANCE_RUST", "conformance", "conformance"),
    (
        "CONFORMANCE_FLOW_RUST",
        "conformance-flow",
        "conformance_flow",
    ),
];

/// Python guests: (constant, the actor's module, component file name). Each
/// is built with the SDK in `guest-sdk-py` (`python3 -m burrow.build`).
const PYTHON_GUESTS: &[(&str, &str, &str)] = &[
    (
        "COUNTER_PY",
        "examples/counter-py/app.py",
        "counter-py.wasm",
    ),
    ("MAILER_PY", "examples/mailer-py/app.py", "mailer-py.wasm"),
    (
        "PAYMENT_PY",
        "examples/payment-py/app.py",
        "payment-py.wasm",
    ),
    (
        "CHAT_ROOM_PY",
        "examples/chat-room-py/app.py",
        "chat-room-py.wasm",
    ),
    (
        "STEPPER_PY",
        "examples/stepper-py/app.py",
        "stepper-py.wasm",
    ),
    (
        "CONFORMANCE_PY",
        "tests/conformance/py/conformance/app.py",
        "conformance-py.wasm",
    ),
    (
        "CONFORMANCE_FLOW_PY",
        "tests/conformance/py/conformance-flow/app.py",
        "conformance-flow-py.wasm",
    ),
];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let cargo_target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    // The Python and JavaScript components; the Rust guests build where
    // `burrow build` puts them (below).
    let components_dir = cargo_target_dir.join("guests");
    for watched in [
        "wit",
        "guest-sdk",
        "tests/programs",
        "examples/counter",
        "guest-sdk-py/burrow",
        "tests/conformance",
        "examples/counter-py",
        "examples/mailer-py",
        "examples/payment-py",
        "examples/chat-room-py",
        "examples/stepper-py",
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
        .arg(&cargo_target_dir);
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

    let out_dir = cargo_target_dir.join("wasm32-wasip2").join("guest");
    let mut constants = String::new();
    for (name, _, stem) in RUST_GUESTS {
        let path = out_dir.join(format!("{stem}.wasm"));
        assert!(path.exists(), "{} was not built", path.display());
        constants.push_str(&format!(
            "pub const {name}: &str = {:?};\n",
            path.display().to_string()
        ));
    }

    for (name, result) in build_python(&root, &components_dir) {
        constants.push_str(&format!(
            "pub const {name}: Result<&str, &str> = {};
",
            match result {
                Ok(path) => format!("Ok({:?})", path.display().to_string()),
                Err(why) => format!("Err({why:?})"),
            }
        ));
    }
    constants.push_str(&js::build(&root, &components_dir));
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("programs.rs");
    std::fs::write(out, constants).unwrap();
}

/// Builds the Python guests with componentize-py (if it is installed), two
/// at a time. A component whose inputs (its directory, the SDK, the WIT)
/// have not changed since its last build is kept.
fn build_python(
    root: &Path,
    components_dir: &Path,
) -> Vec<(&'static str, Result<PathBuf, String>)> {
    let sdk = root.join("guest-sdk-py");
    let mut results = Vec::new();
    for pair in PYTHON_GUESTS.chunks(2) {
        let running: Vec<_> = pair
            .iter()
            .map(|(name, module, file)| {
                let out = components_dir.join(file);
                let source = root.join(module);
                let inputs = [
                    source.parent().unwrap().to_path_buf(),
                    sdk.join("burrow"),
                    root.join("wit"),
                ];
                let stamp = out.with_extension("wasm.inputs");
                let digest = digest_of(&inputs);
                if out.exists() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(&digest)
                {
                    return (*name, out, stamp, digest, None);
                }
                let child = Command::new("python3")
                    .args(["-m", "burrow.build", "--quiet"])
                    .arg(&source)
                    .arg("-o")
                    .arg(&out)
                    .env("PYTHONPATH", &sdk)
                    .spawn();
                (*name, out, stamp, digest, Some(child))
            })
            .collect();
        for (name, out, stamp, digest, child) in running {
            let result = match child {
                None => Ok(out),
                Some(Ok(mut child)) => match child.wait() {
                    Ok(status) if status.success() => {
                        std::fs::write(&stamp, &digest).unwrap();
                        Ok(out)
                    }
                    Ok(status) => {
                        println!(
                            "cargo:warning=building {name} failed ({status}); run scripts/setup.sh"
                        );
                        Err(format!(
                            "building {name} with componentize-py failed ({status}); \
                             install it with scripts/setup.sh"
                        ))
                    }
                    Err(e) => Err(format!("waiting for the build of {name}: {e}")),
                },
                Some(Err(e)) => Err(format!("cannot run python3 to build {name}: {e}")),
            };
            results.push((name, result));
        }
    }
    results
}

/// A digest of every file under `paths` (names and contents), to tell
/// whether a Python component must be built again.
fn digest_of(paths: &[PathBuf]) -> String {
    use std::hash::{Hash, Hasher};
    fn walk(path: &Path, files: &mut Vec<PathBuf>) {
        if path.is_dir() {
            for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
                if entry.file_name() != "__pycache__" {
                    walk(&entry.path(), files);
                }
            }
        } else if path.is_file() {
            files.push(path.to_path_buf());
        }
    }
    let mut files = Vec::new();
    for path in paths {
        walk(path, &mut files);
    }
    files.sort();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for file in files {
        file.hash(&mut hasher);
        std::fs::read(&file).unwrap_or_default().hash(&mut hasher);
    }
    format!("{:016x}", hasher.finish())
}
