//! Claude Code sessions → one reconstructed execution (docs/import.md#claude-code).
//!
//! Claude Code writes `~/.claude/projects/<project>/<session>.jsonl` and, beside it,
//! `<session>/subagents/agent-<id>.jsonl` (delegated sub-agents) and
//! `agent-acompact-<id>.jsonl` (the call that wrote a compaction summary); older versions keep
//! sub-agent lines inline with `isSidechain: true`. Every line has `uuid` and `parentUuid`; an
//! API response is split over several `assistant` lines sharing `message.id`.
//!
//! One request per API response. Its context is the conversation on the `parentUuid` chain
//! above the response's first line: a stand-in system segment (the real system prompt is not in
//! the log), then user messages, earlier responses and tool results (all results of a response's
//! parallel calls, wherever they hang in the tree), rendered through the chat template.
//!
//! The import runs in phases ([`read_session`]): the session's lines, typed, from every file,
//! with chains repaired where a parent was never written (`lines.rs`); then the responses,
//! their tool calls and results, sub-agents and compaction calls, and each response's context
//! (`context.rs`).

mod attachments;
mod context;
mod lines;

use std::path::{Path, PathBuf};

use eyre::Result;
use serde_json::Value;

use super::session::Session;
use super::sniff::{Fit, Probe, Shape};
use super::{About, Importer, Job};
use context::{assemble, build_contexts, group_responses, link_calls};
use lines::{cut_at_boundaries, name_inline_sidechains, read_log, relink_preserved, repair_chains};

/// The Claude Code importer.
pub struct ClaudeCode;

static ABOUT: About = About {
    name: "claude-code",
    what: "a Claude Code session",
    summary: "A Claude Code session (with its subagents/ files): one request per API response",
    input: "SESSION.jsonl",
    input_help: "The session's main `.jsonl` file",
    many: false,
    directories: false,
    reconstructed: true,
    help: "\
Examples:
  gyre import claude-code ~/.claude/projects/-home-me-app/8463c716-….jsonl --out session.jsonl
  gyre import claude-code SESSION.jsonl --score 1 --out session.jsonl.zst
  gyre import claude-code SESSION.jsonl --no-restore --out rerendered.jsonl   # the false branches
  gyre stats session.jsonl

Reads SESSION.jsonl and SESSION/subagents/agent-*.jsonl (sub-agents, compaction). Records are
reconstructed (re-tokenised, no log-probs) and marked so. docs/import.md has the mapping.",
};

/// What the stand-in system segment says.
pub const SYSTEM_NOTE: &str = "[gyre import] The system prompt and tool definitions Claude Code \
sent with this request are not in the session log; this segment stands in for them.";

/// Line types Claude Code writes; a file whose lines have none of these is not a session.
const LINE_TYPES: [&str; 8] = [
    "user",
    "assistant",
    "system",
    "summary",
    "progress",
    "file-history-snapshot",
    "queue-operation",
    "attachment",
];

impl Importer for ClaudeCode {
    type Item = Session;

    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn sniff(&self, probe: &Probe) -> Fit {
        match (&probe.shape, probe.first_object()) {
            (Shape::Jsonl(_), Some(o)) => {
                let typed = o
                    .get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| LINE_TYPES.contains(&t));
                if typed || o.contains_key("parentUuid") || o.contains_key("sessionId") {
                    Fit::Yes
                } else {
                    Fit::No
                }
            }
            // A first line longer than the bytes looked at (a pasted image).
            (Shape::Document(head), _) if !head.array => {
                if head.has("type") || head.has("parentUuid") || head.has("uuid") {
                    Fit::Unknown
                } else {
                    Fit::No
                }
            }
            _ => Fit::No,
        }
    }

    fn files(&self, inputs: &[PathBuf]) -> Vec<PathBuf> {
        inputs.iter().flat_map(|p| session_files(p)).collect()
    }

    fn read(
        &self,
        inputs: &[PathBuf],
        job: &mut Job,
        emit: &mut dyn FnMut(&mut Job, Session) -> Result<()>,
    ) -> Result<()> {
        for main in inputs {
            let session = read_session(main, job)?;
            emit(job, session)?;
        }
        Ok(())
    }

    fn records(&self, item: Session, job: &mut Job) -> Result<()> {
        super::session::records(item, job)
    }
}

/// Reads the session at `main` (and the files beside it) into a [`Session`].
pub fn read_session(main: &Path, job: &mut Job) -> Result<Session> {
    let files = session_files(main);
    let mut log = read_log(files, job)?;
    if log.lines.is_empty() {
        return Err(super::error::bad(
            main,
            0,
            format!(
                "not a Claude Code session: no line has a `uuid`; this is {}",
                Probe::of(main).describe(&[])
            ),
            None,
        ));
    }
    relink_preserved(&mut log);
    cut_at_boundaries(&mut log, job);
    repair_chains(&mut log, job);
    name_inline_sidechains(&mut log);
    let groups = group_responses(&log);
    let links = link_calls(main, &log, &groups, job);
    let (turns, responses, task) = build_contexts(&log, &groups, &links, job);
    Ok(assemble(main, &log, &links, turns, responses, task))
}

/// The files of a session: the main file first, then `subagents/*.jsonl` in name order.
pub fn session_files(main: &Path) -> Vec<PathBuf> {
    let mut files = vec![main.to_path_buf()];
    let dir = main.with_extension("").join("subagents");
    if let Ok(rd) = std::fs::read_dir(&dir) {
        let mut subs: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && p.extension().is_some_and(|x| x == "jsonl")
                    && p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("agent-"))
            })
            .collect();
        subs.sort();
        files.extend(subs);
    }
    files
}
