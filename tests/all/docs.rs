//! The code blocks of README.md and docs/ cannot drift from the code.
//!
//! Every fenced block carries a note on the line before it that says how
//! it is checked:
//!
//! - `<!-- doc: run -->` or `<!-- doc: background -->`: a shell block that
//!   `scripts/doc-blocks.py` runs, checking each `# -> VALUE` and `# exit N`
//!   (run by `scripts/test.sh`, so by CI);
//! - `<!-- doc: excerpt PATH -->`: code quoted from PATH (relative to the
//!   repository), which the tests build and run; checked here, line by
//!   line, in order;
//! - `<!-- doc: manifest -->` and `<!-- doc: tokens -->`: TOML checked here
//!   by the parser of `burrow.toml` or of a tokens file;
//! - `<!-- doc: output -->`: what a command prints, shown, not run;
//! - `<!-- doc: not run: REASON -->`: a block that cannot run here, and why.
//!
//! A block without a note fails this test, so a new block is checked from
//! the start.

use std::path::{Path, PathBuf};

use burrow::manifest::Manifest;
use burrow::tokens::Tokens;

/// One fenced block of a Markdown file.
struct Block {
    /// `file:line` of its opening fence.
    place: String,
    /// The info string: `rust`, `sh`, or empty.
    lang: String,
    /// The note before it, less `<!-- doc:` and `-->`.
    note: Option<String>,
    text: String,
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// README.md and every Markdown file under docs/.
fn documents() -> Vec<PathBuf> {
    let root = repository();
    let mut files = vec![root.join("README.md")];
    let mut folders = vec![root.join("docs")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn blocks(path: &Path) -> Vec<Block> {
    let name = path
        .strip_prefix(repository())
        .unwrap_or(path)
        .display()
        .to_string();
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(lang) = lines[i].strip_prefix("```") else {
            i += 1;
            continue;
        };
        let end = (i + 1..lines.len())
            .find(|&j| lines[j].starts_with("```"))
            .unwrap_or_else(|| panic!("{name}:{}: a block that never closes", i + 1));
        let note = i
            .checked_sub(1)
            .and_then(|before| lines[before].trim().strip_prefix("<!-- doc:"))
            .and_then(|note| note.strip_suffix("-->"))
            .map(|note| note.trim().to_string());
        blocks.push(Block {
            place: format!("{name}:{}", i + 1),
            lang: lang.trim().to_string(),
            note,
            text: lines[i + 1..end].join("\n"),
        });
        i = end + 1;
    }
    blocks
}

fn all_blocks() -> Vec<Block> {
    documents().iter().flat_map(|path| blocks(path)).collect()
}

#[test]
fn every_block_says_how_it_is_checked() {
    let mut unchecked = Vec::new();
    for block in all_blocks() {
        let known = match block.note.as_deref() {
            Some("run" | "background") => block.lang == "sh",
            Some("manifest" | "tokens") => block.lang == "toml",
            Some("output") => true,
            Some(note) => {
                note.strip_prefix("excerpt ").is_some()
                    || note
                        .strip_prefix("not run:")
                        .is_some_and(|why| !why.trim().is_empty())
            }
            None => false,
        };
        if !known {
            unchecked.push(format!(
                "{} ({:?}, note {:?})",
                block.place, block.lang, block.note
            ));
        }
    }
    assert!(
        unchecked.is_empty(),
        "blocks without a known `<!-- doc: ... -->` note on the line before them \
         (run and background are for sh, manifest and tokens for toml):\n{}",
        unchecked.join("\n")
    );
}

#[test]
fn manifests_and_tokens_files_parse() {
    let mut checked = 0;
    for block in all_blocks() {
        let parsed = match block.note.as_deref() {
            Some("manifest") => Manifest::parse(&block.text, &repository()).map(drop),
            Some("tokens") => Tokens::parse(&block.text).map(drop),
            _ => continue,
        };
        if let Err(e) = parsed {
            panic!("{}: {e:#}\n{}", block.place, block.text);
        }
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} TOML blocks were checked");
}

/// A line of code as compared: a doc comment's marker (`//!`, `///`) and a
/// trailing comment removed, spaces collapsed. `None` for what is not
/// compared: an empty line, a comment line, an elision (`...`, `{ .. }`).
fn comparable(line: &str, comment: &str) -> Option<String> {
    let mut line = line.trim();
    for marker in ["//! ", "/// ", "//!", "///"] {
        if let Some(rest) = line.strip_prefix(marker) {
            line = rest.trim();
            break;
        }
    }
    if line.starts_with(comment) || line.contains("...") || line.contains("{ .. }") {
        return None;
    }
    // A trailing comment follows a space: `"http://..."` is not one.
    let code = match line.find(&format!(" {comment} ")) {
        Some(at) => &line[..at],
        None => line.strip_suffix(&format!(" {comment}")).unwrap_or(line),
    };
    let code = code.split_whitespace().collect::<Vec<_>>().join(" ");
    (!code.is_empty()).then_some(code)
}

/// Where `block` does not follow `file`: the first line of the block that
/// is not found, in order, among the file's lines.
fn first_stray_line(block: &str, file: &str, comment: &str) -> Option<String> {
    let mut file_lines = file.lines().filter_map(|line| comparable(line, comment));
    block
        .lines()
        .filter_map(|line| comparable(line, comment))
        .find(|wanted| !file_lines.any(|line| line == *wanted))
}

#[test]
fn excerpts_follow_their_source() {
    let mut checked = 0;
    for block in all_blocks() {
        let Some(source) = block
            .note
            .as_deref()
            .and_then(|n| n.strip_prefix("excerpt "))
        else {
            continue;
        };
        let comment = match block.lang.as_str() {
            "python" | "toml" | "sh" => "#",
            _ => "//",
        };
        let file = std::fs::read_to_string(repository().join(source.trim()))
            .unwrap_or_else(|e| panic!("{}: cannot read {source}: {e}", block.place));
        if let Some(stray) = first_stray_line(&block.text, &file, comment) {
            panic!(
                "{}: the excerpt of {source} has a line that is not there (in this order):\n{stray}",
                block.place
            );
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} excerpts were checked");
}

#[test]
fn an_excerpt_is_compared_line_by_line_in_order() {
    let file = "fn a() {\n    let x = 1; // one\n    /// b\n    call(\"http://x\");\n}\n";
    assert_eq!(
        first_stray_line("let x = 1;\ncall(\"http://x\");", file, "//"),
        None
    );
    assert_eq!(
        first_stray_line(
            "// a note\nfn a() { .. }\nlet  x = 1;   // one more",
            file,
            "//"
        ),
        None
    );
    assert_eq!(
        first_stray_line("call(\"http://x\");\nlet x = 1;", file, "//"),
        Some("let x = 1;".into()),
        "out of order"
    );
    assert_eq!(
        first_stray_line("let x = 2;", file, "//"),
        Some("let x = 2;".into())
    );
    assert_eq!(
        first_stray_line("b", file, "//"),
        None,
        "a doc comment's text counts"
    );
}
