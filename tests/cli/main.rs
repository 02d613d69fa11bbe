//! The `gyre` binary end to end: every subcommand, the README's console blocks, the recording
//! proxy with real clients, the inspector in tmux.

// Test helpers may unwrap too: a panic is the failure report.
#![allow(clippy::unwrap_used)]

// Helpers shared with the importers' and the inspector's own test binaries (one copy each).
#[path = "../../crates/gyre-import/tests/import/common.rs"]
mod import_common;
#[cfg(feature = "record")]
mod proxy;
#[cfg(feature = "tui")]
#[path = "../../crates/gyre-tui/tests/tui/common.rs"]
mod tui_common;

mod audit;
mod audit_against;
mod audit_plants;
mod cli_edges;
mod cli_errors;
mod diff;
mod doc_blocks;
mod import_atif;
mod import_cli;
mod import_dumps;
mod import_nemo_rl;
mod import_prime_rl;
mod lens;
mod parquet_rows;
mod readme;
mod record_adversary;
mod record_codex;
mod record_families;
mod record_faults;
mod record_limits;
mod record_proxy;
mod record_security;
mod show;
mod spec_rules;
mod trained_cli;
mod tui_e2e;
mod tui_export;
mod why;
