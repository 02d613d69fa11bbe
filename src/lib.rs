//! gyre: a terminal inspector for agentic-RL training data, and the processing engine it embeds.
//!
//! [`engine`] implements the gyre/1 contract (records → shared-prefix tree → scores → masks →
//! admission → export) with no UI code; [`cli`] is a thin client of it.

pub mod cli;
pub mod demo;
pub mod engine;
pub mod recgen;
pub mod tui;
