//! Tokens as text: chat templates against the reference renderer, token display.

// Test helpers may unwrap too: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod assets;
mod template;
mod tokens;
mod turns;
