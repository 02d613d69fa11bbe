//! The engine's integration tests: properties against the random generator, the Recorder, the tree against a reference trie, the loader against the exact line-by-line path.

// Test helpers may unwrap too: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod audit;
mod audit_gap;
mod audit_verdict;
mod loader;
mod properties;
mod recorder;
mod temperature;
mod trained;
mod tree_reference;
