//! The bundled demo recordings are what their documented commands write, and load cleanly.

use gyre_engine::demo;
use gyre_engine::load::{LoadOptions, load_bytes};
use gyre_synth::{SynthOptions, write_synth};

#[test]
fn synth_demo_is_reproducible_from_its_command() {
    assert!(demo::SYNTH_COMMAND.ends_with("--executions 8 --seed 0"));
    let mut expected = Vec::new();
    let opts = SynthOptions {
        executions: 8,
        seed: 0,
        ..SynthOptions::default()
    };
    write_synth(&opts, &mut expected).unwrap();
    let bundled = zstd::decode_all(demo::SYNTH_RECORDING).unwrap();
    assert!(
        bundled == expected,
        "assets/demo/inspector.jsonl.zst is stale: rerun its command"
    );
}

#[test]
fn bundled_demos_load_without_warnings() {
    for (name, bytes) in [
        (demo::NAME, demo::RECORDING),
        (demo::SYNTH_NAME, demo::SYNTH_RECORDING),
    ] {
        let batch = load_bytes(name, bytes, &LoadOptions::default()).unwrap();
        assert!(batch.warnings.is_empty(), "{name}: {:?}", batch.warnings);
        assert!(!batch.executions.is_empty());
    }
}
