//! Every code block of README.md, ARCHITECTURE.md and docs/*.md is tested. Its info string says
//! how:
//! - `console`: run, and the lines shown must be what the binary prints (`readme.rs`);
//! - `python`: run by pytest (`python/tests/test_docs.py`);
//! - `python ray`: run in order, in one namespace, against a local Ray cluster
//!   (`python/tests/test_ray.py`);
//! - `python model`: run with `model` (a small Qwen3-architecture `transformers` model), its
//!   `optimizer` and a recording `run.jsonl` (`python/tests/test_tree.py`);
//! - `python no-run` (needs a trainer, a model, a GPU or a cluster): compiled by pytest, its
//!   imports and every `gyre.…` name it uses resolved;
//! - `sh no-run` (installs, servers, agents): parsed by `sh -n`, and every `gyre` command in it
//!   names a subcommand and flags the binary has (here);
//! - `text` (a diagram or a usage line): a line starting with `gyre ` is checked like `sh`;
//! - `json`, `toml`: parsed by pytest (`...` marks what an excerpt leaves out).
//!
//! A block with any other info string fails here, so no block goes untested by accident.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One fenced block.
pub struct DocBlock {
    /// File, relative to the repository root.
    pub file: String,
    /// Line of the opening fence (1-based).
    pub line: usize,
    /// The info string (`console`, `sh no-run`).
    pub info: String,
    /// The lines between the fences.
    pub body: Vec<String>,
}

/// The documents whose blocks are tested.
pub fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    docs.insert(0, root.join("ARCHITECTURE.md"));
    docs.insert(0, root.join("README.md"));
    docs
}

/// Every fenced block of `text`.
pub fn blocks_of(file: &str, text: &str) -> Vec<DocBlock> {
    let mut out = Vec::new();
    let mut open: Option<DocBlock> = None;
    for (i, line) in text.lines().enumerate() {
        match (&mut open, line.trim_start().strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(DocBlock {
                    file: file.to_owned(),
                    line: i + 1,
                    info: info.trim().to_owned(),
                    body: Vec::new(),
                })
            }
            (Some(_), Some("")) => out.extend(open.take()),
            (Some(b), _) => b.body.push(line.to_owned()),
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "{file}: a code block is never closed");
    out
}

fn all_blocks() -> Vec<DocBlock> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    documents(root)
        .iter()
        .flat_map(|p| {
            let name = p.strip_prefix(root).unwrap().display().to_string();
            blocks_of(&name, &std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

/// `gyre` commands in shell text: continuation lines joined, comments dropped, each command's
/// words after `gyre` (in a `shell`, a command starts a line or follows `&&`, `;`, `|` or `&`;
/// in a usage line, `|` separates choices).
fn gyre_commands(body: &[String], shell: bool) -> Vec<Vec<String>> {
    let joined = body
        .iter()
        .map(|l| l.split(" #").next().unwrap_or(""))
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        let parts: Vec<&str> = if shell {
            line.split(['&', ';', '|']).collect()
        } else if line.starts_with("gyre ") {
            vec![line]
        } else {
            Vec::new()
        };
        for part in parts {
            let words: Vec<&str> = part
                .split_whitespace()
                .skip_while(|w| w.contains('=') && !w.starts_with('-'))
                .collect();
            if words.first() == Some(&"gyre") {
                out.push(words[1..].iter().map(|w| (*w).to_owned()).collect());
            }
        }
    }
    out
}

/// The help of the deepest subcommand that `words` start with (`import claude-code`), and how
/// many words name it.
fn help_of(words: &[String]) -> (String, usize) {
    let bin = env!("CARGO_BIN_EXE_gyre");
    let names: Vec<&String> = words
        .iter()
        .take_while(|w| {
            w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !w.starts_with('-')
        })
        .collect();
    for n in (0..=names.len()).rev() {
        let out = Command::new(bin)
            .args(&names[..n])
            .arg("--help")
            .output()
            .unwrap();
        if out.status.success() {
            return (String::from_utf8_lossy(&out.stdout).into_owned(), n);
        }
    }
    panic!("`gyre --help` fails");
}

/// What is wrong with a `gyre` command a document shows: a subcommand or a flag the binary lacks.
fn command_faults(words: &[String]) -> Vec<String> {
    let (help, named) = help_of(words);
    let mut faults = Vec::new();
    let word = |w: &str| w.chars().all(|c| c.is_ascii_lowercase() || c == '-');
    if named == 0
        && words
            .first()
            .is_some_and(|w| word(w) && !w.starts_with('-'))
    {
        faults.push(format!("no subcommand {:?}", words[0]));
    }
    for w in &words[named..] {
        let flag = w
            .trim_start_matches('[')
            .split(['=', ']'])
            .next()
            .unwrap_or("");
        if flag.starts_with("--")
            && flag.len() > 2
            && !help.contains(&format!("{flag} "))
            && !help.contains(&format!("{flag}\n"))
            && !help.contains(&format!("{flag}="))
        {
            faults.push(format!("no flag {flag}"));
        }
    }
    faults
}

#[test]
fn every_documented_block_says_how_it_is_tested() {
    let known = [
        "console",
        "python",
        "python no-run",
        "python ray",
        "python model",
        "sh no-run",
        "text",
        "json",
        "toml",
    ];
    let blocks = all_blocks();
    assert!(blocks.len() >= 40, "blocks found: {}", blocks.len());
    // readme.rs runs the console blocks of the README.
    let console: Vec<String> = blocks
        .iter()
        .filter(|b| b.info == "console" && b.file != "README.md")
        .map(|b| format!("{}:{}", b.file, b.line))
        .collect();
    assert!(
        console.is_empty(),
        "console blocks outside the README: {console:?}"
    );
    let unknown: Vec<String> = blocks
        .iter()
        .filter(|b| !known.contains(&b.info.as_str()))
        .map(|b| format!("{}:{}: ```{}", b.file, b.line, b.info))
        .collect();
    assert!(
        unknown.is_empty(),
        "blocks tested by no one (info strings: {known:?}):\n{}",
        unknown.join("\n")
    );
}

#[test]
fn shell_blocks_parse_and_name_what_the_binary_has() {
    let mut faults = Vec::new();
    let mut commands = 0;
    for b in all_blocks() {
        let shell = b.info == "sh no-run";
        if !shell && b.info != "text" {
            continue;
        }
        if shell {
            let out = Command::new("sh")
                .arg("-n")
                .arg("-c")
                .arg(b.body.join("\n"))
                .output()
                .unwrap();
            if !out.status.success() {
                faults.push(format!(
                    "{}:{}: sh -n: {}",
                    b.file,
                    b.line,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
        for words in gyre_commands(&b.body, shell) {
            commands += 1;
            for f in command_faults(&words) {
                faults.push(format!(
                    "{}:{}: `gyre {}`: {f}",
                    b.file,
                    b.line,
                    words.join(" ")
                ));
            }
        }
    }
    assert!(commands >= 10, "gyre commands found: {commands}");
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}

#[test]
fn a_command_the_binary_lacks_is_found() {
    let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    assert!(command_faults(&words("admit run.jsonl --out rows.jsonl --jmax 2")).is_empty());
    assert_eq!(
        command_faults(&words("admit run.jsonl --no-such-flag")),
        ["no flag --no-such-flag"]
    );
    assert_eq!(
        command_faults(&words("teleport run.jsonl")),
        ["no subcommand \"teleport\""]
    );
    assert_eq!(
        gyre_commands(
            &[
                "X=1 gyre record --out a \\".into(),
                "  --quiet && gyre validate a".into()
            ],
            true
        ),
        [words("record --out a --quiet"), words("validate a")]
    );
}
