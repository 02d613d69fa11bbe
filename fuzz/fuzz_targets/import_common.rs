//! Shared by the `import_<source>` targets: the input bytes become a log file, `gyre import
//! <source>` runs on it (strict or lenient by the first byte), and whatever it accepts must load
//! as a valid gyre/1 recording. Never a panic, never an output that does not validate.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use gyre_engine::load::{LoadOptions, load};
use gyre_import::convo::Builder;
use gyre_import::write::Sink;
use gyre_import::{Options, import, importer, load_tokenizer};
use gyre_text::{ChatTemplate, TokenText};

/// The bundled Qwen3 tokenizer, parsed once per process (it takes seconds), and the header's
/// `tokenizer` value.
fn tokenizer() -> &'static (TokenText, serde_json::Value) {
    static T: OnceLock<(TokenText, serde_json::Value)> = OnceLock::new();
    T.get_or_init(|| {
        let (tok, _, value) = load_tokenizer("qwen3").expect("the bundled tokenizer loads");
        (tok, value)
    })
}

/// Loads what every case shares before the first case runs (libFuzzer's `init`): parsing the
/// tokenizer takes seconds (more under the sanitizer), and counted in the first case it made
/// that case look like a hang.
pub fn init() {
    tokenizer();
    scratch();
}

/// A directory of this process's own, made once.
fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("gyre-fuzz-import-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("scratch directory");
        d
    })
}

/// Imports `data` (its first byte picks strict or lenient) as a `source` log named `name`.
pub fn run(source: &str, name: &str, data: &[u8]) {
    let Some((&mode, bytes)) = data.split_first() else {
        return;
    };
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = scratch().join(N.fetch_add(1, Ordering::Relaxed).to_string());
    std::fs::create_dir_all(&dir).expect("case directory");
    let input = dir.join(name);
    std::fs::write(&input, bytes).expect("input written");
    let out = dir.join("out.jsonl");
    let (tok, value) = tokenizer();
    let opts = Options {
        lenient: mode & 1 == 1,
        restore: mode & 2 == 0,
        ..Options::default()
    };
    let source = importer(source).expect("a known source");
    let template = ChatTemplate::qwen3().expect("the bundled template compiles");
    let mut builder = Builder::new(tok.clone(), template).expect("builder");
    let sink = Sink::open(&out, true).expect("output opened");
    let imported = import(
        source,
        std::slice::from_ref(&input),
        &opts,
        &mut builder,
        value,
        sink,
        &mut |_| {},
    );
    if imported.is_ok() {
        if let Err(e) = load(std::slice::from_ref(&out), &LoadOptions::default(), &|_, _| {}) {
            panic!(
                "{} import wrote records that do not validate: {e}",
                source.about().name
            );
        }
    } else {
        assert!(!out.exists(), "a failed import left its output");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
