//! gyre/1 on disk (docs/format.md §1, §9): the record types and their per-line checks, the reader's
//! fast token-array path (and its prefix-skipping reader of full-form inputs), the one writer
//! every producer uses, reading inputs (decompression by content, the line limit, diagnostics),
//! output files (atomic, compressed by name), and the one terminal sanitiser every string from a
//! recording passes through.
//!
//! This is the bottom layer: it uses no other gyre crate, and knows nothing of trees, tokenizers
//! or terminals beyond making text safe to print.

pub mod copy;
pub mod id;
pub mod input;
pub mod line_error;
pub mod named;
pub mod note;
pub mod output;
pub mod prefix;
pub mod record;
pub mod sanitize;
pub mod tokenizer_spec;
pub mod trained;
pub mod write;

pub use sanitize::sanitize;
