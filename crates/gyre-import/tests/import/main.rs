//! The importers' integration tests, on excerpts of real logs.

// Test helpers may unwrap too: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod atif;
mod claude_code;
mod claude_code_2_1_2xx;
mod codex;
mod common;
mod formats;
mod inspect;
mod mini_swe_agent;
mod nemo_rl;
mod openhands_instances;
mod openhands_timestamps;
mod openhands_v1;
mod real_logs;
mod trainer_dumps;
mod verl;
