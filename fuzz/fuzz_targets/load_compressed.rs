//! A recording read through the gzip and zstd decoders: the input compressed (lines cut at
//! decoder buffer edges must read as from a plain file) or raw after a magic number (corrupt
//! and truncated streams must be errors, never panics or hangs).
#![no_main]

use std::io::Write;

use gyre_engine::load::{LoadOptions, load_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, bytes)) = data.split_first() else {
        return;
    };
    let options = LoadOptions::default();
    let stream = match mode % 4 {
        0 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(bytes).expect("in memory");
            e.finish().expect("in memory")
        }
        1 => zstd::encode_all(bytes, 1).expect("in memory"),
        2 => [&[0x1f, 0x8b][..], bytes].concat(),
        _ => [&[0x28, 0xb5, 0x2f, 0xfd][..], bytes].concat(),
    };
    let read = load_bytes("fuzz.jsonl.z", &stream, &options);
    // One layer is decompressed (by content): bytes that themselves start with a magic number
    // read differently plain than inside a compressed stream.
    let magic = bytes.starts_with(&[0x1f, 0x8b]) || bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]);
    if mode % 4 < 2 && !magic {
        // Compressed faithfully: the same verdict and the same executions as the plain bytes.
        let plain = load_bytes("fuzz.jsonl.z", bytes, &options);
        match (read, plain) {
            (Ok(a), Ok(b)) => {
                let ids = |b: &gyre_engine::load::Batch| {
                    b.executions.iter().map(|e| e.id.clone()).collect::<Vec<_>>()
                };
                assert_eq!(ids(&a), ids(&b));
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!("compressed {:?} vs plain {:?}", a.is_ok(), b.is_ok()),
        }
    }
});
