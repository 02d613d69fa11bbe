//! A real Claude Code session, imported, bundled as a second demo (`gyre inspect --demo
//! claude-code`): compaction and a sub-agent from a real run.
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
//! `tests/import_claude_code.rs` checks that the bundled file matches a fresh import.

/// File name shown for the bundled recording.
pub const CLAUDE_CODE_NAME: &str = "claude-code.jsonl.zst";

/// One-line description.
pub const CLAUDE_CODE_DESCRIPTION: &str = "a real Claude Code 2.1.39 session (marot/spotter, MIT) \
imported with `gyre import claude-code --score 1`: 157 API responses (143 main, 13 of an Explore \
sub-agent, 1 compaction call), reconstructed from the log (no log-probs)";

/// The recording (gyre/1 JSONL, zstd-compressed; the loader decompresses by magic number).
pub const CLAUDE_CODE_RECORDING: &[u8] = include_bytes!("../../assets/demo/claude-code.jsonl.zst");
