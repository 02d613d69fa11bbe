//! The simulated harness and the engine on what it writes (sweeps, the bundled demos).

// Test helpers may unwrap too: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod demo_assets;
mod engine;
mod sweep;
mod synth;
