//! One line of a recording: never a panic; a line that is accepted is a JSON object.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|line: &[u8]| {
    if gyre_engine::record::parse_line(line).is_ok() {
        let value: serde_json::Value =
            serde_json::from_slice(line).expect("an accepted line is JSON");
        assert!(value.is_object(), "an accepted line is an object");
    }
});
