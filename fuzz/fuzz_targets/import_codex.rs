//! `gyre import codex` on mutated logs: see `import_common.rs`.
#![no_main]

#[path = "import_common.rs"]
mod import_common;

libfuzzer_sys::fuzz_target!(init: import_common::init(), |data: &[u8]| import_common::run("codex", "rollout.jsonl", data));
