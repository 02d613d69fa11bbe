//! The example recording bundled in the binary, so `gyre` runs with no input at all.

/// File name shown for the bundled recording.
pub const NAME: &str = "example.jsonl";

/// One-line description of what the recording covers.
pub const DESCRIPTION: &str = "4 executions of one GRPO group: a retry, a sub-agent, compaction, \
an evaluator critique, a failed-then-valid assessment, a dummy, an open execution, a valid zero \
and a request after closure";

/// The recording (gyre/1 JSONL).
pub const RECORDING: &[u8] = include_bytes!("../assets/demo/example.jsonl");

/// File name shown for the simulated demo recording (the inspector's demo).
pub const SYNTH_NAME: &str = "inspector.jsonl.zst";

/// The command that wrote [`SYNTH_RECORDING`] (same bytes every time).
pub const SYNTH_COMMAND: &str =
    "gyre synth --out assets/demo/inspector.jsonl.zst --executions 8 --seed 0";

/// A `gyre synth` recording with real Qwen3 text: eight executions, one per scoring fate, with
/// compaction, sub-agents, retries, re-serialised tool calls and critiques (zstd-compressed
/// gyre/1).
pub const SYNTH_RECORDING: &[u8] = include_bytes!("../assets/demo/inspector.jsonl.zst");

/// A recording bundled in the binary that the inspector can open (`gyre inspect --demo NAME`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Demo {
    /// The `gyre synth` recording: every concept of the paper in eight executions.
    #[default]
    Synth,
    /// A real Claude Code session, imported: compaction and a sub-agent from a real run.
    ClaudeCode,
}

impl Demo {
    /// File name shown for it.
    pub fn name(self) -> &'static str {
        match self {
            Demo::Synth => SYNTH_NAME,
            Demo::ClaudeCode => crate::import::demo::CLAUDE_CODE_NAME,
        }
    }

    /// Its bytes (gyre/1, zstd-compressed).
    pub fn bytes(self) -> &'static [u8] {
        match self {
            Demo::Synth => SYNTH_RECORDING,
            Demo::ClaudeCode => crate::import::demo::CLAUDE_CODE_RECORDING,
        }
    }
}
