//! `gyre inspect --follow FILE`: a recording still being written (by `gyre record` or a rollout
//! worker's `Recorder`) is read again whenever it grows, up to its last complete line, and the
//! engine re-runs on it; the inspector keeps its selection by id.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use gyre_engine::load::{self, Input, LoadOptions};

use super::input::{Options, load_text};
use super::vocab::{Action, Jobs, Phase};

/// How often the file's size is looked at.
pub const POLL: Duration = Duration::from_millis(500);

/// Length of the part of `path` that ends with its last newline (0 when it has none yet): a
/// writer may be half-way through a line.
pub fn complete_len(path: &Path) -> io::Result<u64> {
    let mut f = File::open(path)?;
    let mut end = f.metadata()?.len();
    let mut buf = vec![0u8; 1 << 16];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// Whether `path` starts like a gzip or zstd stream, which cannot be read up to a line that is
/// still being written.
pub fn is_compressed(path: &Path) -> io::Result<bool> {
    let mut magic = [0u8; 4];
    let n = File::open(path)?.read(&mut magic)?;
    let magic = &magic[..n];
    Ok(magic.starts_with(&[0x1f, 0x8b]) || magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]))
}

/// Reads `path` now and again each time its complete part changes, for as long as the inspector
/// runs (the thread ends with the process). Until a read succeeds, each read is a load like any
/// other (a failure shows on the loading screen); after that a read that fails (a broken line
/// appended) keeps the last good state on screen and says why.
pub fn follow(opts: &Options, path: &Path, jobs: &Jobs) {
    let mut seen = None;
    let mut shown = false;
    loop {
        match complete_len(path) {
            Ok(len) if Some(len) != seen => {
                seen = Some(len);
                let progress = |done: u64, total: u64| {
                    jobs.send(Action::Progress(Phase::Reading, done, total))
                };
                let options = LoadOptions {
                    lenient: opts.lenient,
                    max_problems: Some(load::KEPT_DIAGNOSTICS as u64),
                };
                match load::load_inputs(&[Input::Prefix { path, len }], &options, &progress) {
                    Ok(batch) => {
                        let results = gyre_engine::process(&batch, &opts.settings, opts.advantage);
                        let batch = Arc::new(batch);
                        if shown {
                            jobs.send(Action::Grown(batch, Box::new(results)));
                        } else {
                            shown = true;
                            jobs.send(Action::Processed(Arc::clone(&batch), Box::new(results)));
                            load_text(opts, &batch, jobs);
                        }
                    }
                    Err(e) if shown => jobs.send(Action::Message(format!(
                        "--follow: {} could not be read again ({}); showing the last good state",
                        path.display(),
                        e.to_string().lines().next().unwrap_or("")
                    ))),
                    Err(e) => jobs.send(Action::Loaded(Err(e.to_string()))),
                }
            }
            Ok(_) => {}
            Err(e) => jobs.send(Action::Message(format!(
                "--follow: {}: {e}",
                path.display()
            ))),
        }
        thread::sleep(POLL);
    }
}
