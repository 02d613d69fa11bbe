//! The README's console blocks are real output: every `$ …` command in a ```console block runs
//! (the tour and the what-if sections from the repository root, the import section from
//! `tests/fixtures/import/`, as the README says) and every line the README shows under it must
//! be in the command's output. A line ending in `…` is a cut line (a prefix); lines the
//! README leaves out are allowed (it shows excerpts of `gyre stats`), lines it shows that the
//! binary does not print are not.

use std::path::{Path, PathBuf};
use std::process::Command;

struct Block {
    /// README line of the block's first command.
    line: usize,
    /// Whether the section says its commands run from `tests/fixtures/import`.
    fixtures: bool,
    commands: Vec<(String, Vec<String>)>,
}

fn blocks(readme: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut current: Option<Block> = None;
    for (i, line) in readme.lines().enumerate() {
        if line.starts_with("## ") {
            section = line.to_owned();
        }
        match (&mut current, line) {
            (None, "```console") => {
                current = Some(Block {
                    line: i + 2,
                    fixtures: section.contains("Importing real logs"),
                    commands: Vec::new(),
                })
            }
            (Some(_), "```") => out.extend(current.take()),
            (Some(b), l) => match l.strip_prefix("$ ") {
                Some(cmd) => b.commands.push((cmd.to_owned(), Vec::new())),
                None => b
                    .commands
                    .last_mut()
                    .expect("a console block starts with a command")
                    .1
                    .push(l.to_owned()),
            },
            _ => {}
        }
    }
    out
}

/// Links every entry of `from` into `dir`, so commands naming them relative to `from` run in
/// `dir`.
fn link_all(from: &Path, dir: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::os::unix::fs::symlink(entry.path(), dir.join(entry.file_name())).unwrap();
    }
}

/// Runs the block's commands in one shell, each command's stdout and stderr after a marker line
/// (`echo $?` sees the status of the command before it).
fn run_block(block: &Block, cwd: &Path) -> Vec<Vec<String>> {
    const MARK: &str = "<<gyre-readme-command>>";
    let mut script = String::from("status=0\n");
    for (cmd, _) in &block.commands {
        script.push_str(&format!(
            "echo '{MARK}'\n(exit $status)\n{cmd} 2>&1\nstatus=$?\n"
        ));
    }
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_gyre"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(cwd)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env_remove("GYRE_MAX_LINE_MB")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(&format!("{MARK}\n"))
        .skip(1)
        .map(|part| part.lines().map(str::to_owned).collect())
        .collect()
}

/// The shown lines that are not in `actual` (`…` marks a prefix). Order is not compared: the
/// README shows stdout and stderr as a terminal interleaves them.
fn missing(shown: &[String], actual: &[String]) -> Vec<String> {
    shown
        .iter()
        .filter(|want| {
            !actual.iter().any(|got| match want.strip_suffix('…') {
                Some(prefix) => got.starts_with(prefix),
                None => got == *want,
            })
        })
        .cloned()
        .collect()
}

#[test]
fn every_console_block_in_the_readme_is_what_the_binary_prints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let blocks = blocks(&readme);
    assert!(blocks.len() >= 10, "console blocks found: {}", blocks.len());
    // Scratch folders that look like the folders the README runs from, so the commands'
    // outputs are written there (and read by later blocks) and not into the repository.
    let (top, fixtures) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::os::unix::fs::symlink(root.join("assets"), top.path().join("assets")).unwrap();
    link_all(&root.join("tests/fixtures/import"), fixtures.path());
    let mut failures = Vec::new();
    for block in &blocks {
        let dir = if block.fixtures { &fixtures } else { &top };
        let outputs = run_block(block, dir.path());
        assert_eq!(outputs.len(), block.commands.len(), "README:{}", block.line);
        for ((cmd, shown), actual) in block.commands.iter().zip(&outputs) {
            let gone = missing(shown, actual);
            if !gone.is_empty() {
                failures.push(format!(
                    "README block at line {}: `{cmd}` does not print:\n  {}\nit prints:\n  {}",
                    block.line,
                    gone.join("\n  "),
                    actual.join("\n  ")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
