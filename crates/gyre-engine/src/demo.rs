//! The recordings bundled in the binary, so `gyre` runs with no input at all: the hand-written
//! example, the `gyre synth` demo and a real Claude Code session, imported.
//!
//! The Claude Code demo (`gyre inspect --demo claude-code`) shows compaction and a sub-agent
//! from a real run.
//!
//! Regenerate `assets/demo/claude-code.jsonl.zst` after changing the importer (from the
//! repository root):
//!
//! ```text
//! gyre import claude-code \
//!   tests/fixtures/import/claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl \
//!   --score 1 --out assets/demo/claude-code.jsonl.zst --force
//! ```
//!
//! `crates/gyre-import/tests/import/claude_code.rs` checks that the bundled file matches a fresh import.

/// File name shown for the bundled recording.
pub const NAME: &str = "example.jsonl";

/// One-line description of what the recording covers.
pub const DESCRIPTION: &str = "4 executions of one GRPO group: a retry, a sub-agent, compaction, \
an evaluator critique, a failed-then-valid assessment, a dummy, an open execution, a valid zero \
and a request after closure";

/// The recording (gyre/1 JSONL).
pub const RECORDING: &[u8] = include_bytes!("../../../assets/demo/example.jsonl");

/// File name shown for the simulated demo recording (the inspector's demo).
pub const SYNTH_NAME: &str = "inspector.jsonl.zst";

/// The command that wrote [`SYNTH_RECORDING`] (same bytes every time).
pub const SYNTH_COMMAND: &str =
    "gyre synth --out assets/demo/inspector.jsonl.zst --executions 8 --seed 0";

/// A `gyre synth` recording with real Qwen3 text: eight executions, one per scoring fate, with
/// compaction, sub-agents, retries, re-serialised tool calls and critiques (zstd-compressed
/// gyre/1).
pub const SYNTH_RECORDING: &[u8] = include_bytes!("../../../assets/demo/inspector.jsonl.zst");

/// A recording bundled in the binary that the inspector can open (`gyre inspect --demo NAME`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Demo {
    /// The `gyre synth` recording: every concept of the paper in eight executions.
    #[default]
    Synth,
    /// A real Claude Code session, imported: compaction and a sub-agent from a real run.
    ClaudeCode,
}

impl gyre_format::named::Named for Demo {
    const ALL: &'static [Self] = &[Demo::Synth, Demo::ClaudeCode];

    fn name(self) -> &'static str {
        match self {
            Demo::Synth => "synth",
            Demo::ClaudeCode => "claude-code",
        }
    }

    fn help(self) -> &'static str {
        match self {
            Demo::Synth => {
                "The `gyre synth` recording: every concept of the paper in eight executions"
            }
            Demo::ClaudeCode => "A real Claude Code session, imported: compaction and a sub-agent",
        }
    }
}

impl Demo {
    /// File name shown for it.
    pub fn file_name(self) -> &'static str {
        match self {
            Demo::Synth => SYNTH_NAME,
            Demo::ClaudeCode => CLAUDE_CODE_NAME,
        }
    }

    /// Its bytes (gyre/1, zstd-compressed).
    pub fn bytes(self) -> &'static [u8] {
        match self {
            Demo::Synth => SYNTH_RECORDING,
            Demo::ClaudeCode => CLAUDE_CODE_RECORDING,
        }
    }
}

/// File name shown for the bundled recording.
pub const CLAUDE_CODE_NAME: &str = "claude-code.jsonl.zst";

/// One-line description.
pub const CLAUDE_CODE_DESCRIPTION: &str = "a real Claude Code 2.1.39 session (marot/spotter, MIT) \
imported with `gyre import claude-code --score 1`: 157 API responses (143 main, 13 of an Explore \
sub-agent, 1 compaction call), reconstructed from the log (no log-probs)";

/// The recording (gyre/1 JSONL, zstd-compressed; the loader decompresses by magic number).
pub const CLAUDE_CODE_RECORDING: &[u8] =
    include_bytes!("../../../assets/demo/claude-code.jsonl.zst");
