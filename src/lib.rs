//! gyre: a terminal inspector for agentic-RL training data, and the processing engine it embeds.
//!
//! [`engine`] implements the gyre/1 contract (records → shared-prefix tree → scores → masks →
//! admission → export) with no UI code; [`cli`] is a thin client of it. [`text`] turns token ids
//! into text (tokenizers, chat templates, terminal-safe sanitising); [`synth`] simulates a
//! Claude-Code-style harness that writes gyre/1 recordings.

pub mod cli;
pub mod demo;
pub mod engine;
pub mod import;
pub mod output;
pub mod paint;
pub mod recgen;
pub mod report;
pub mod show;
pub mod synth;
pub mod text;
#[cfg(feature = "tui")]
pub mod tui;
