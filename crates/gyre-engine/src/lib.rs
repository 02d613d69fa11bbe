//! The gyre engine: records → shared-prefix trees → scores → masks → admission → export.
//!
//! No terminal, UI, tokenizer or proxy code lives here (this crate cannot name them: it depends
//! on `gyre-format` alone); the CLI, the inspector and the Python package are clients of it and
//! never recompute what it decides. [`report`] words its decisions for people, [`paint`] is the
//! view model both `gyre show` and the inspector draw from.

pub mod admit;
pub mod assess;
pub mod audit;
pub mod branches;
pub mod consume;
pub mod delegation;
pub mod diff;
pub mod execution;
pub mod export;
pub mod follow;
pub mod lens;
pub mod load;
pub mod loss;
pub mod process;
pub mod provenance;
pub mod recorder;
pub mod route;
pub mod row_prefix;
pub mod rows;
pub mod runs;
pub mod score;
pub mod shard;
pub mod stats;
pub mod steps;
pub mod sweep;
pub mod trained;
pub mod tree;
pub mod tree_pack;
pub mod why;

pub mod demo;
pub mod paint;
pub mod recgen;
pub mod report;

/// The gyre/1 record types and the writer, from the format layer (the engine reads and writes
/// nothing else).
pub use gyre_format::{record, write};

pub use process::{Results, process, process_with_progress};
