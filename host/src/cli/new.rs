//! `burrow new`: a project of one actor from a template embedded in this
//! binary (`host/templates`), so it works from any folder. A project is a
//! `burrow.toml`, the actor's source, a test that builds the actor and uses
//! it with `burrow`, a `.gitignore` and a short README. Nothing is written
//! when the folder exists, the name cannot be an actor's, or the language's
//! toolchain is missing; the files appear together (written beside, then
//! renamed into place). The Rust template's manifest is `Cargo.toml.in`:
//! cargo, which reads every `Cargo.toml` in the repository of a git
//! dependency, must not take it for a package.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::args::{Lang, Template};
use super::output::{Failure, exit_code};
use crate::address::validate_actor_name;

/// The version of the SDKs a project depends on by default: this host's.
const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// One file of a template: where it goes in the project, and its text with
/// `{{name}}` (the actor), `{{crate}}` (its Rust library), `{{sdk}}` (the
/// SDK dependency) and `{{try}}` (the commands that try the actor) still in
/// it.
struct File {
    path: &'static str,
    text: &'static str,
}

/// A template's file, embedded: `file!("rust/burrow.toml" => "burrow.toml")`;
/// several sources make one file, in order (a test's shared helpers, then
/// the template's own test).
macro_rules! file {
    ($($source:literal),+ => $path:literal) => {
        File {
            path: $path,
            text: concat!($(include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/templates/",
                $source
            ))),+),
        }
    };
}

/// The files every project of `lang` has.
fn common(lang: Lang) -> [File; 4] {
    match lang {
        Lang::Rust => [
            file!("rust/Cargo.toml.in" => "Cargo.toml"),
            file!("rust/burrow.toml" => "burrow.toml"),
            file!("rust/gitignore" => ".gitignore"),
            file!("rust/README.md" => "README.md"),
        ],
        Lang::Python => [
            file!("python/requirements.txt" => "requirements.txt"),
            file!("python/burrow.toml" => "burrow.toml"),
            file!("python/gitignore" => ".gitignore"),
            file!("python/README.md" => "README.md"),
        ],
        Lang::Js => [
            file!("js/package.json" => "package.json"),
            file!("js/burrow.toml" => "burrow.toml"),
            file!("js/gitignore" => ".gitignore"),
            file!("js/README.md" => "README.md"),
        ],
    }
}

/// The actor's source and its test.
fn actor(lang: Lang, template: Template) -> [File; 2] {
    use Template::{Counter, Queue, Workflow};
    match (lang, template) {
        (Lang::Rust, Counter) => [
            file!("rust/counter/lib.rs" => "src/lib.rs"),
            file!("rust/test_head.rs", "rust/counter/test.rs" => "tests/actor.rs"),
        ],
        (Lang::Rust, Workflow) => [
            file!("rust/workflow/lib.rs" => "src/lib.rs"),
            file!("rust/test_head.rs", "rust/workflow/test.rs" => "tests/actor.rs"),
        ],
        (Lang::Rust, Queue) => [
            file!("rust/queue/lib.rs" => "src/lib.rs"),
            file!("rust/test_head.rs", "rust/queue/test.rs" => "tests/actor.rs"),
        ],
        (Lang::Python, Counter) => [
            file!("python/counter/app.py" => "app.py"),
            file!("python/test_head.py", "python/counter/test_app.py" => "test_app.py"),
        ],
        (Lang::Python, Workflow) => [
            file!("python/workflow/app.py" => "app.py"),
            file!("python/test_head.py", "python/workflow/test_app.py" => "test_app.py"),
        ],
        (Lang::Python, Queue) => [
            file!("python/queue/app.py" => "app.py"),
            file!("python/test_head.py", "python/queue/test_app.py" => "test_app.py"),
        ],
        (Lang::Js, Counter) => [
            file!("js/counter/app.js" => "app.js"),
            file!("js/test_head.mjs", "js/counter/actor.test.mjs" => "test/actor.test.mjs"),
        ],
        (Lang::Js, Workflow) => [
            file!("js/workflow/app.js" => "app.js"),
            file!("js/test_head.mjs", "js/workflow/actor.test.mjs" => "test/actor.test.mjs"),
        ],
        (Lang::Js, Queue) => [
            file!("js/queue/app.js" => "app.js"),
            file!("js/test_head.mjs", "js/queue/actor.test.mjs" => "test/actor.test.mjs"),
        ],
    }
}

fn files(lang: Lang, template: Template) -> Vec<File> {
    common(lang)
        .into_iter()
        .chain(actor(lang, template))
        .collect()
}

/// The commands that try the actor once `burrow dev` serves it, with
/// `{{name}}` for its name.
fn try_it(template: Template) -> &'static str {
    match template {
        Template::Counter => {
            "burrow call {{name}} my-key increment '[5]'          # in another terminal: 5"
        }
        Template::Workflow => {
            "burrow create {{name}} my-key '{\"steps\": 3}'      # in another terminal: the workflow starts\n\
             burrow call {{name}} my-key count                    # 4 once it is done"
        }
        Template::Queue => {
            "burrow send {{name}} my-key job '{\"text\": \"hi\"}' --wait  # in another terminal: HI"
        }
    }
}

/// Writes the project `name` (its folder under `parent`, and its actor's
/// name) and says what to run next. `sdk` is where the SDK comes from, in
/// the language's own terms (see `sdk_dependency`).
pub(super) fn new(
    parent: &Path,
    name: &str,
    lang: Lang,
    template: Template,
    sdk: Option<&str>,
) -> Result<String, Failure> {
    validate_actor_name(name).map_err(|e| {
        Failure::usage(format!(
            "`{name}` cannot name a project: it is its actor's name ({e})"
        ))
    })?;
    let folder = parent.join(name);
    if folder.symlink_metadata().is_ok() {
        return Err(Failure {
            code: "already-exists".into(),
            message: format!("{} exists already: nothing was written", folder.display()),
            exit: exit_code("already-exists"),
        });
    }
    check_toolchain(lang)?;
    let dependency = sdk_dependency(lang, sdk, parent);
    let replace = |text: &str| {
        text.replace("{{try}}", try_it(template))
            .replace("{{name}}", name)
            .replace("{{crate}}", &name.replace('-', "_"))
            .replace("{{sdk}}", &dependency)
    };
    write_together(&folder, &files(lang, template), replace)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e:#}", folder.display()))?;
    Ok(next_steps(name, lang, template, &folder))
}

/// The SDK as the project's manifest names it, quoted for that file (TOML,
/// JSON, a pip requirement). `sdk` is a URL (a git repository for Rust, a
/// package for Python and JavaScript), a path (made absolute: a crate's
/// folder, a Python package's folder or wheel, an npm package's folder or
/// `npm pack` tarball), or a version; by default the version of this host.
fn sdk_dependency(lang: Lang, sdk: Option<&str>, parent: &Path) -> String {
    enum Source {
        Url(String),
        Path(PathBuf),
        Version(String),
    }
    let source = match sdk {
        None => Source::Version(SDK_VERSION.into()),
        Some(sdk) if sdk.contains("://") => Source::Url(sdk.into()),
        Some(sdk) if parent.join(sdk).exists() => {
            let path = parent.join(sdk);
            Source::Path(path.canonicalize().unwrap_or(path))
        }
        Some(version) => Source::Version(version.into()),
    };
    let toml = |text: &str| toml::Value::String(text.into()).to_string();
    let json = |text: &str| serde_json::Value::String(text.into()).to_string();
    let file_url = |path: &Path| {
        url::Url::from_file_path(path).map_or_else(|()| path.display().to_string(), String::from)
    };
    match (lang, source) {
        (Lang::Rust, Source::Url(url)) => format!("burrow-sdk = {{ git = {} }}", toml(&url)),
        (Lang::Rust, Source::Path(path)) => {
            format!(
                "burrow-sdk = {{ path = {} }}",
                toml(&path.display().to_string())
            )
        }
        (Lang::Rust, Source::Version(version)) => format!("burrow-sdk = {}", toml(&version)),
        (Lang::Python, Source::Url(url)) => format!("burrow-sdk[build] @ {url}"),
        (Lang::Python, Source::Path(path)) => format!("burrow-sdk[build] @ {}", file_url(&path)),
        (Lang::Python, Source::Version(version)) => format!("burrow-sdk[build]=={version}"),
        (Lang::Js, Source::Url(url)) => json(&url),
        (Lang::Js, Source::Path(path)) => json(&format!("file:{}", path.display())),
        (Lang::Js, Source::Version(version)) => json(&version),
    }
}

/// Fails, naming what is missing and how to install it, when `lang`'s
/// toolchain cannot build an actor here.
fn check_toolchain(lang: Lang) -> Result<(), Failure> {
    let missing = |what: String| Failure {
        code: "missing-toolchain".into(),
        message: format!("nothing was written: {what}"),
        exit: 1,
    };
    match lang {
        Lang::Rust => {
            if version_of("cargo").is_none() {
                return Err(missing(
                    "cargo is not installed (Rust actors need it): install Rust with rustup, https://rustup.rs".into(),
                ));
            }
            let sysroot = output_of("rustc", &["--print", "sysroot"]).unwrap_or_default();
            let target = Path::new(sysroot.trim()).join("lib/rustlib/wasm32-wasip2");
            if !target.is_dir() {
                return Err(missing(
                    "the wasm32-wasip2 target is not installed (Rust actors are built for it): rustup target add wasm32-wasip2".into(),
                ));
            }
        }
        Lang::Python => match version_of("python3") {
            Some(version) if version >= (3, 11) => {}
            Some((major, minor)) => {
                return Err(missing(format!(
                    "python3 is Python {major}.{minor}, and Python actors need 3.11 or later: install a newer Python"
                )));
            }
            None => {
                return Err(missing(
                    "python3 is not installed (Python actors need 3.11 or later, with pip and venv): install Python, e.g. apt install python3 python3-venv".into(),
                ));
            }
        },
        Lang::Js => {
            match version_of("node") {
                Some(version) if version >= (20, 0) => {}
                Some((major, minor)) => {
                    return Err(missing(format!(
                        "node is Node.js {major}.{minor}, and JavaScript actors need 20 or later: install a newer Node.js"
                    )));
                }
                None => {
                    return Err(missing(
                        "node is not installed (JavaScript actors need Node.js 20 or later, with npm): install Node.js, https://nodejs.org".into(),
                    ));
                }
            }
            if version_of("npm").is_none() {
                return Err(missing(
                    "npm is not installed (it installs the SDK and componentize-js): install it with Node.js".into(),
                ));
            }
        }
    }
    Ok(())
}

/// What `program ARGS` printed on stdout, if it ran and succeeded.
fn output_of(program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program).args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The major and minor version `program --version` prints, if it runs.
fn version_of(program: &str) -> Option<(u32, u32)> {
    parse_version(&output_of(program, &["--version"])?)
}

/// The major and minor version in a tool's `--version` (`Python 3.11.2`,
/// `v20.1.0`, `cargo 1.95.0 (...)`).
fn parse_version(text: &str) -> Option<(u32, u32)> {
    let word = text
        .split_whitespace()
        .map(|word| word.trim_start_matches('v'))
        .find(|word| word.starts_with(|c: char| c.is_ascii_digit()))?;
    let mut numbers = word.split('.').map(|n| n.parse::<u32>().ok());
    Some((numbers.next()??, numbers.next().flatten().unwrap_or(0)))
}

/// Writes `files` into a folder beside `folder`, then renames it to
/// `folder`: the project appears whole or not at all.
fn write_together(
    folder: &Path,
    files: &[File],
    replace: impl Fn(&str) -> String,
) -> anyhow::Result<()> {
    let parent = folder.parent().unwrap_or(Path::new("."));
    let staging = tempfile::Builder::new()
        .prefix(".burrow-new-")
        .tempdir_in(parent)?;
    for file in files {
        let path = staging.path().join(file.path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::File::create(&path)?.write_all(replace(file.text).as_bytes())?;
    }
    let staged: PathBuf = staging.keep();
    // A folder made in the meantime with anything in it is not replaced:
    // rename fails on a folder that is not empty.
    if let Err(e) = std::fs::rename(&staged, folder) {
        let _ = std::fs::remove_dir_all(&staged);
        return Err(e.into());
    }
    Ok(())
}

/// What to run in the new project.
fn next_steps(name: &str, lang: Lang, template: Template, folder: &Path) -> String {
    let setup = match lang {
        Lang::Rust => "",
        Lang::Python => {
            "  python3 -m venv .venv && . .venv/bin/activate && pip install -r requirements.txt\n"
        }
        Lang::Js => "  npm install\n",
    };
    let test = match lang {
        Lang::Rust => "cargo test",
        Lang::Python => "python -m unittest",
        Lang::Js => "npm test",
    };
    let folder = folder.display();
    format!(
        "created {folder}; next:\n  cd {folder}\n{setup}  burrow build\n  \
         burrow dev                                  # serves on 127.0.0.1:7878, redeploys on change\n  \
         {try_it}\n  {test}",
        try_it = try_it(template)
            .replace("{{name}}", name)
            .replace('\n', "\n  "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_what_tools_print() {
        let parse = parse_version;
        assert_eq!(parse("Python 3.11.2"), Some((3, 11)));
        assert_eq!(parse("v20.20.2"), Some((20, 20)));
        assert_eq!(parse("cargo 1.95.0 (f2d3ce0bd 2026-01-01)"), Some((1, 95)));
        assert_eq!(parse("no version here"), None);
    }

    #[test]
    fn the_sdk_is_named_in_each_ecosystems_terms() {
        let here = Path::new("/nonexistent-parent");
        let rust = |sdk| sdk_dependency(Lang::Rust, sdk, here);
        assert_eq!(rust(None), format!("burrow-sdk = \"{SDK_VERSION}\""));
        assert_eq!(
            rust(Some("https://example.com/burrow.git")),
            "burrow-sdk = { git = \"https://example.com/burrow.git\" }"
        );
        let python = |sdk| sdk_dependency(Lang::Python, sdk, here);
        assert_eq!(python(Some("0.2.0")), "burrow-sdk[build]==0.2.0");
        let js = |sdk| sdk_dependency(Lang::Js, sdk, here);
        assert_eq!(js(None), format!("\"{SDK_VERSION}\""));

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("burrow-sdk-0.1.0.tgz"), b"").unwrap();
        let tarball = dir
            .path()
            .canonicalize()
            .unwrap()
            .join("burrow-sdk-0.1.0.tgz");
        assert_eq!(
            sdk_dependency(Lang::Js, Some("burrow-sdk-0.1.0.tgz"), dir.path()),
            format!("\"file:{}\"", tarball.display())
        );
        assert_eq!(
            sdk_dependency(Lang::Python, Some("burrow-sdk-0.1.0.tgz"), dir.path()),
            format!("burrow-sdk[build] @ file://{}", tarball.display())
        );
        // A path is quoted for TOML and JSON, and a URL for pip.
        std::fs::create_dir(dir.path().join("my \"sdk\"")).unwrap();
        let odd = dir.path().canonicalize().unwrap().join("my \"sdk\"");
        let rust = sdk_dependency(Lang::Rust, Some("my \"sdk\""), dir.path());
        let table: toml::Table = toml::from_str(&rust).unwrap();
        assert_eq!(table["burrow-sdk"]["path"].as_str(), odd.to_str(), "{rust}");
        let js = sdk_dependency(Lang::Js, Some("my \"sdk\""), dir.path());
        let spec: String = serde_json::from_str(&js).unwrap();
        assert_eq!(spec, format!("file:{}", odd.display()));
        let python = sdk_dependency(Lang::Python, Some("my \"sdk\""), dir.path());
        assert!(python.ends_with("/my%20%22sdk%22"), "{python}");
    }

    #[test]
    fn every_template_names_its_actor_and_its_sdk() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            for template in [Template::Counter, Template::Workflow, Template::Queue] {
                let files = files(lang, template);
                let all: String = files.iter().map(|f| f.text).collect();
                assert!(all.contains("{{name}}"), "{lang:?} {template:?}");
                assert!(all.contains("{{sdk}}"), "{lang:?} {template:?}");
                assert!(all.contains("{{try}}"), "{lang:?} {template:?}");
                let paths: Vec<_> = files.iter().map(|f| f.path).collect();
                assert!(paths.contains(&"burrow.toml") && paths.contains(&".gitignore"));
            }
        }
    }
}
