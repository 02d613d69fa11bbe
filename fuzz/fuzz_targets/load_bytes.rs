//! A whole recording, loaded then processed and exported like `gyre admit`: never a panic,
//! and the rows of an accepted recording are JSON lines.
#![no_main]

use gyre_engine::admit::Settings;
use gyre_engine::load::{LoadOptions, load_bytes};
use gyre_engine::score::AdvantageMode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks strict or lenient loading and the draw cap.
    let Some((&mode, bytes)) = data.split_first() else {
        return;
    };
    let options = LoadOptions {
        lenient: mode & 1 == 1,
    };
    let Ok(batch) = load_bytes("fuzz.jsonl", bytes, &options) else {
        return;
    };
    let settings = Settings {
        jmax: u32::from(mode >> 1 & 7),
        ..Settings::default()
    };
    let results = gyre_engine::process(&batch, &settings, AdvantageMode::Grpo);
    let mut rows = Vec::new();
    gyre_engine::export::jsonl::write_rows(&batch, &results, &mut rows).expect("rows go to memory");
    for row in rows.split(|&b| b == b'\n').filter(|r| !r.is_empty()) {
        serde_json::from_slice::<serde_json::Value>(row).expect("every row is JSON");
    }
});
