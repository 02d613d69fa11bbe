//! The fast token-array reader reads every line it takes exactly as serde_json does.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|line: &[u8]| {
    if let Err(e) = gyre_engine::record::check_split_against_serde(line) {
        panic!("{e}");
    }
});
