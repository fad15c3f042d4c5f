//! The layering rule, checked: a module uses only what stands below it (or
//! beside it, in its own layer, without a cycle). The table is the picture
//! in ARCHITECTURE.md ("Layers"); a new module gets a row there and here.

/// The names at the crate's root, bottom layer first. Those of the crates
/// below (`burrow-base`'s leaves and `burrow-storage` as `storage`) stand
/// here so that what uses them is checked; the compiler keeps those crates
/// from naming anything above them.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "leaves",
        &[
            "address", "bindings", "blocking", "cache", "caller", "clock", "config", "deadline",
            "engine", "error", "metrics", "outbound", "text", "watchdog",
        ],
    ),
    (
        "data",
        &[
            "storage",
            "export",
            "manifest",
            "inspect",
            "connections",
            "presence",
            "tokens",
        ],
    ),
    ("instance", &["instance"]),
    ("capabilities", &["capability", "definition"]),
    ("cells", &["cell", "directory"]),
    ("runtime core", &["runtime"]),
    ("background work", &["background"]),
    ("public host", &["host", "queue", "workflow"]),
    ("front ends", &["http", "client", "cli", "fuzzing"]),
];

/// Items `lib.rs` re-exports at the crate root, with the module they
/// come from: `crate::Host` names the public host as `crate::host` does.
const ROOT_ITEMS: &[(&str, &str)] = &[
    ("Host", "host"),
    ("Caller", "caller"),
    ("Identity", "caller"),
    ("Role", "caller"),
    ("SendOptions", "host"),
    ("SendOutcome", "host"),
    ("EventOutcome", "queue"),
    ("Inspection", "inspect"),
    ("QueueView", "inspect"),
    ("TableDump", "inspect"),
    ("inspect_instance", "inspect"),
    ("LoadError", "definition"),
    ("Error", "error"),
    ("ActorOptions", "config"),
    ("HostConfig", "config"),
    ("Synchronous", "config"),
    ("instance_path", "storage"),
    ("validate_actor_name", "address"),
    ("validate_key", "address"),
];

fn layer_of(module: &str) -> Option<usize> {
    let module = ROOT_ITEMS
        .iter()
        .find(|(item, _)| *item == module)
        .map_or(module, |(_, from)| from);
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

/// The top-level modules a source text names through `crate::`, with the
/// line, leaving out unit tests (from the first `#[cfg(test)]` on).
fn uses(text: &str) -> Vec<(String, usize)> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
                let group = group.split('}').next().unwrap_or("");
                group
                    .split(',')
                    .map(|item| item.trim().split("::").next().unwrap_or("").trim())
                    .collect()
            } else {
                vec![
                    rest.split(|c: char| !c.is_alphanumeric() && c != '_')
                        .next()
                        .unwrap_or(""),
                ]
            };
            for name in names {
                if !name.is_empty() {
                    found.push((name.to_owned(), n + 1));
                }
            }
        }
    }
    found
}

fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_module_uses_only_what_stands_below_it() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut broken = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&src).unwrap();
        let top = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let top = top.trim_end_matches(".rs");
        if matches!(top, "lib" | "main" | "bin" | "layers") {
            continue;
        }
        let own = layer_of(top).unwrap_or_else(|| {
            panic!("`{top}` has no layer: add it to LAYERS and ARCHITECTURE.md")
        });
        let text = std::fs::read_to_string(&file).unwrap();
        for (used, line) in uses(&text) {
            let Some(layer) = layer_of(&used) else {
                panic!(
                    "{}:{line}: `crate::{used}` is neither a module nor a re-export listed here",
                    relative.display()
                );
            };
            if layer > own {
                broken.push(format!(
                    "{}:{line}: `{top}` ({}) uses `{used}` ({})",
                    relative.display(),
                    LAYERS[own].0,
                    LAYERS[layer].0
                ));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "uses that run up a layer:\n{}",
        broken.join("\n")
    );
}

#[test]
fn uses_are_read_from_paths_and_groups() {
    let text = "use crate::a::b;\nuse crate::{c::d, e};\nlet x = crate::f::g(); // crate::h\n#[cfg(test)]\nuse crate::i;";
    let names: Vec<_> = uses(text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["a", "c", "e", "f"]);
}
