//! The example recording bundled in the binary, so `gyre` runs with no input at all.

/// File name shown for the bundled recording.
pub const NAME: &str = "example.jsonl";

/// One-line description of what the recording covers.
pub const DESCRIPTION: &str = "4 executions of one GRPO group: a retry, a sub-agent, compaction, \
an evaluator critique, a failed-then-valid assessment, a dummy, an open execution, a valid zero \
and a request after closure";

/// The recording (gyre/1 JSONL).
pub const RECORDING: &[u8] = include_bytes!("../assets/demo/example.jsonl");
