//! The inspector: snapshots, layouts, views, what-if, the state-machine property test.

// Test helpers may unwrap too: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod audit;
mod common;
mod copy;
mod defects;
mod degrade;
mod history;
mod keys;
mod layout;
mod navigate;
mod outside;
mod palette;
mod snapshots;
mod state_machine;
mod views;
mod whatif;
