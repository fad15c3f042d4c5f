//! `burrow new`: the files of a project, and the refusals that write
//! nothing. (scripts/new-projects.sh builds, tests, serves and calls a new
//! project of each language, outside the repository.)

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

const BURROW: &str = env!("CARGO_BIN_EXE_burrow");

/// `burrow new ARGS` run in `dir`, with `path` as its PATH when given.
fn new_in(dir: &Path, path: Option<&Path>, args: &[&str]) -> Output {
    let mut command = Command::new(BURROW);
    command.arg("new").args(args).current_dir(dir);
    if let Some(path) = path {
        command.env("PATH", path);
    }
    command.output().expect("run burrow")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A folder of programs that print `version` for `--version` and, for
/// `rustc --print sysroot`, the folder itself (which has no targets).
fn fake_tools(dir: &Path, tools: &[(&str, &str)]) -> std::path::PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, version) in tools {
        let path = bin.join(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\nif [ \"$1\" = --print ]; then echo {}; else echo '{version}'; fi\n",
                bin.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

#[test]
fn a_project_has_its_manifest_source_test_and_ignores() {
    let dir = tempfile::tempdir().unwrap();
    let out = new_in(
        dir.path(),
        None,
        &["hello-py", "--lang", "python", "--sdk", "0.1.0"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let project = dir.path().join("hello-py");
    assert_eq!(
        entries(&project),
        [
            ".gitignore",
            "README.md",
            "app.py",
            "burrow.toml",
            "requirements.txt",
            "test_app.py"
        ]
    );
    let manifest = std::fs::read_to_string(project.join("burrow.toml")).unwrap();
    assert!(manifest.contains("[actors.hello-py]"), "{manifest}");
    let requirements = std::fs::read_to_string(project.join("requirements.txt")).unwrap();
    assert!(
        requirements.contains("burrow-sdk[build]==0.1.0"),
        "{requirements}"
    );
    // Nothing of the template's placeholders is left in any file.
    for name in entries(&project) {
        let text = std::fs::read_to_string(project.join(&name)).unwrap();
        assert!(!text.contains("{{"), "{name}: {text}");
    }
    // Only the project: nothing staged beside it is left behind.
    assert_eq!(entries(dir.path()), ["hello-py"]);
}

#[test]
fn a_rust_project_names_its_library_and_its_sdk_by_git() {
    let dir = tempfile::tempdir().unwrap();
    let out = new_in(
        dir.path(),
        None,
        &["my-actor", "--sdk", "https://example.com/burrow.git"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let project = dir.path().join("my-actor");
    let cargo = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    assert!(cargo.contains("name = \"my-actor\""), "{cargo}");
    assert!(
        cargo.contains("burrow-sdk = { git = \"https://example.com/burrow.git\" }"),
        "{cargo}"
    );
    let manifest = std::fs::read_to_string(project.join("burrow.toml")).unwrap();
    assert!(
        manifest.contains("target/wasm32-wasip2/release/my_actor.wasm"),
        "{manifest}"
    );
    assert!(project.join("src/lib.rs").is_file() && project.join("tests/actor.rs").is_file());
}

#[test]
fn an_existing_folder_is_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("taken")).unwrap();
    std::fs::write(dir.path().join("taken/notes.txt"), "mine").unwrap();
    let out = new_in(dir.path(), None, &["taken", "--lang", "js"]);
    assert_eq!(out.status.code(), Some(8), "{}", stderr(&out));
    assert!(stderr(&out).contains("exists already"), "{}", stderr(&out));
    assert_eq!(entries(&dir.path().join("taken")), ["notes.txt"]);
    assert_eq!(entries(dir.path()), ["taken"]);
}

#[test]
fn an_unknown_language_or_a_bad_name_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = new_in(dir.path(), None, &["hello", "--lang", "cobol"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("cobol"), "{}", stderr(&out));
    let out = new_in(dir.path(), None, &["Hello"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("`Hello`"), "{}", stderr(&out));
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn a_missing_toolchain_is_named_with_its_install_command() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let cases: [(&[&str], &Path, &str); 3] = [
        (&["a", "--lang", "js"], &empty, "node is not installed"),
        (
            &["a", "--lang", "python"],
            &empty,
            "python3 is not installed",
        ),
        (&["a", "--lang", "rust"], &empty, "cargo is not installed"),
    ];
    for (args, path, says) in cases {
        let out = new_in(dir.path(), Some(path), args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("nothing was written"));
    }
    // Tools that are there but will not do.
    let old = fake_tools(
        &dir.path().join("old"),
        &[("node", "v18.19.0"), ("python3", "Python 3.9.2")],
    );
    let out = new_in(dir.path(), Some(&old), &["a", "--lang", "js"]);
    assert!(stderr(&out).contains("Node.js 18.19"), "{}", stderr(&out));
    let out = new_in(dir.path(), Some(&old), &["a", "--lang", "python"]);
    assert!(stderr(&out).contains("Python 3.9"), "{}", stderr(&out));
    let no_target = fake_tools(
        &dir.path().join("rust"),
        &[("cargo", "cargo 1.95.0"), ("rustc", "rustc 1.95.0")],
    );
    let out = new_in(dir.path(), Some(&no_target), &["a", "--lang", "rust"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("rustup target add wasm32-wasip2"),
        "{}",
        stderr(&out)
    );
    assert_eq!(entries(dir.path()), ["empty", "old", "rust"]);
}
