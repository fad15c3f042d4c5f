//! The JavaScript components: the examples and the conformance actors, each
//! built by `guest-sdk-js/build.mjs` (componentize-js) into `target/guests`.
//! A component whose sources did not change is left as it is (build.mjs
//! keeps a digest of its inputs), so the host's compile cache keeps it too.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// (constant, entry module, component file name).
const JS_GUESTS: &[(&str, &str, &str)] = &[
    (
        "COUNTER_JS",
        "examples/counter-js/app.js",
        "counter-js.wasm",
    ),
    ("MAILER_JS", "examples/mailer-js/app.js", "mailer-js.wasm"),
    (
        "PAYMENT_JS",
        "examples/payment-js/app.js",
        "payment-js.wasm",
    ),
    (
        "CHAT_ROOM_JS",
        "examples/chat-room-js/app.js",
        "chat-room-js.wasm",
    ),
    (
        "STEPPER_JS",
        "examples/stepper-js/app.js",
        "stepper-js.wasm",
    ),
    (
        "CONFORMANCE_JS",
        "tests/conformance/js/conformance/app.js",
        "conformance-js.wasm",
    ),
    (
        "CONFORMANCE_FLOW_JS",
        "tests/conformance/js/conformance-flow/app.js",
        "conformance-flow-js.wasm",
    ),
];

/// Builds at once: componentize-js runs on one core per build.
const PARALLEL: usize = 2;

/// What a change of must rebuild the JavaScript components.
pub const WATCHED: &[&str] = &[
    "guest-sdk-js/src",
    "guest-sdk-js/build.mjs",
    "guest-sdk-js/package-lock.json",
    // Written by scripts/setup.sh once the packages are installed: a build
    // that found them missing runs again after it.
    "guest-sdk-js/node_modules/.burrow-installed",
    "examples/counter-js",
    "examples/mailer-js",
    "examples/payment-js",
    "examples/chat-room-js",
    "examples/stepper-js",
    "tests/conformance/js",
];

/// Builds every JavaScript component and returns the constants naming
/// them: `Result<&str, &str>`, the path or why it could not be built.
pub fn build(root: &Path, components_dir: &Path) -> String {
    let script = root.join("guest-sdk-js/build.mjs");
    let installed = root.join("guest-sdk-js/node_modules/@bytecodealliance/componentize-js");
    let missing = if !installed.exists() {
        Some("the JavaScript SDK's packages are not installed; run scripts/setup.sh".to_string())
    } else {
        None
    };
    let mut results: Vec<Result<PathBuf, String>> = Vec::new();
    let mut running: Vec<(usize, Child)> = Vec::new();
    for (index, (_, entry, file)) in JS_GUESTS.iter().enumerate() {
        let out = components_dir.join(file);
        results.push(Ok(out.clone()));
        if let Some(why) = &missing {
            results[index] = Err(why.clone());
            continue;
        }
        if running.len() == PARALLEL {
            let (done, child) = running.remove(0);
            results[done] = finish(JS_GUESTS[done].1, child, &results[done]);
        }
        let child = Command::new("node")
            .current_dir(root)
            .arg(&script)
            .arg(root.join(entry))
            .arg(&out)
            .spawn();
        match child {
            Ok(child) => running.push((index, child)),
            Err(e) => results[index] = Err(format!("cannot run node ({e}); install Node.js 20")),
        }
    }
    for (done, child) in running {
        results[done] = finish(JS_GUESTS[done].1, child, &results[done]);
    }
    let mut constants = String::new();
    for ((name, _, _), result) in JS_GUESTS.iter().zip(results) {
        let value = match result {
            Ok(path) => format!("Ok({:?})", path.display().to_string()),
            Err(why) => format!("Err({why:?})"),
        };
        constants.push_str(&format!(
            "pub const {name}: Result<&str, &str> = {value};\n"
        ));
    }
    constants
}

fn finish(
    entry: &str,
    mut child: Child,
    result: &Result<PathBuf, String>,
) -> Result<PathBuf, String> {
    match child.wait() {
        Ok(status) if status.success() => result.clone(),
        Ok(status) => {
            println!("cargo:warning=building {entry} failed ({status})");
            Err(format!(
                "building {entry} with guest-sdk-js/build.mjs failed ({status})"
            ))
        }
        Err(e) => Err(format!("waiting for the build of {entry}: {e}")),
    }
}
