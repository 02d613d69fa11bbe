//! Loading gyre/1 files (SPEC §1): streamed, plain/gzip/zstd, several files in order, parsed in
//! parallel and applied to independent executions in parallel.
//!
//! A reader thread cuts the input into chunks of whole lines (bounded queue, so memory stays
//! flat whatever the file size); each chunk's lines are parsed on the rayon pool, then its
//! records are applied to their executions, one task per execution, in file order.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::sync_channel;

use rayon::prelude::*;
use serde_json::Value;

use super::execution::{Execution, LineRef};
use super::record::{LineError, Parsed, Record, parse_line};

/// A problem (or warning) at a place in the input.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    /// File as given.
    pub file: PathBuf,
    /// 1-based line; 0 for problems with the file as a whole.
    pub line: u64,
    /// What is wrong.
    pub message: String,
    /// The field at fault, when known.
    pub field: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)?;
        } else {
            write!(f, "{}: {}", self.file.display(), self.message)?;
        }
        if let Some(field) = &self.field {
            write!(f, " ({field})")?;
        }
        Ok(())
    }
}

/// Loading failed: the input is invalid (every problem found) or unreadable.
#[derive(Debug)]
pub struct LoadError {
    /// Every problem, in file and line order.
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 20;
        for d in self.diagnostics.iter().take(SHOWN) {
            writeln!(f, "{d}")?;
        }
        if self.diagnostics.len() > SHOWN {
            writeln!(
                f,
                "… and {} more problems (`gyre validate` lists them all)",
                self.diagnostics.len() - SHOWN
            )?;
        }
        write!(
            f,
            "{} problem{} in the input",
            self.diagnostics.len(),
            if self.diagnostics.len() == 1 { "" } else { "s" }
        )
    }
}

impl std::error::Error for LoadError {}

/// How to load.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Skip bad lines (and executions that can no longer be built) with a warning, instead of
    /// failing.
    pub lenient: bool,
}

/// Everything loaded from the input files.
#[derive(Debug, Default)]
pub struct Batch {
    /// The files, in the order given.
    pub files: Vec<PathBuf>,
    /// Each file's header line, when it has one.
    pub headers: Vec<Option<Value>>,
    /// Executions in order of first appearance.
    pub executions: Vec<Execution>,
    /// Warnings (and, with `lenient`, the skipped problems), in input order.
    pub warnings: Vec<Diagnostic>,
    /// Lines skipped under `lenient`.
    pub skipped_lines: u64,
    /// Executions dropped under `lenient` because their tree could not be built.
    pub dropped_executions: Vec<String>,
}

impl Batch {
    /// The first header that names a tokenizer (SPEC §7), with the file it came from.
    pub fn tokenizer_spec(&self) -> Option<(&Value, &Path)> {
        self.headers
            .iter()
            .zip(&self.files)
            .find_map(|(h, f)| Some((h.as_ref()?.get("tokenizer")?, f.as_path())))
    }

    /// Index of execution `id`.
    pub fn execution_index(&self, id: &str) -> Option<usize> {
        self.executions.iter().position(|e| e.id == id)
    }
}

/// Chunk of whole lines handed from the reader to the parsers.
struct Chunk {
    file: u32,
    first_line: u64,
    data: Vec<u8>,
    /// End offset of each line in `data` (line terminators excluded).
    lines: Vec<(usize, usize)>,
}

const CHUNK_BYTES: usize = 256 << 10;

/// One input: a file, or a recording held in memory (the bundled demos).
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// A file on disk.
    File(&'a Path),
    /// Bytes in memory, reported under `name`.
    Memory {
        /// Name used in diagnostics.
        name: &'a str,
        /// The (possibly compressed) recording.
        bytes: &'a [u8],
    },
}

impl Input<'_> {
    fn name(&self) -> PathBuf {
        match self {
            Input::File(p) => p.to_path_buf(),
            Input::Memory { name, .. } => PathBuf::from(name),
        }
    }

    fn size(&self) -> u64 {
        match self {
            Input::File(p) => std::fs::metadata(p).map_or(0, |m| m.len()),
            Input::Memory { bytes, .. } => bytes.len() as u64,
        }
    }
}

/// Loads `paths` in order. `progress(done, total)` is called with on-disk bytes read.
pub fn load(
    paths: &[PathBuf],
    options: &LoadOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Batch, LoadError> {
    let inputs: Vec<Input> = paths.iter().map(|p| Input::File(p)).collect();
    load_inputs(&inputs, options, progress)
}

/// Loads a recording held in memory (the bundled demos), as if it were a file named `name`.
pub fn load_bytes(name: &str, bytes: &[u8], options: &LoadOptions) -> Result<Batch, LoadError> {
    load_inputs(&[Input::Memory { name, bytes }], options, &|_, _| {})
}

/// Loads `inputs` in order. `progress(done, total)` is called with (compressed) bytes read.
pub fn load_inputs(
    inputs: &[Input],
    options: &LoadOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Batch, LoadError> {
    let total: u64 = inputs.iter().map(Input::size).sum();
    let done = Arc::new(AtomicU64::new(0));
    let mut state = Loader {
        batch: Batch {
            files: inputs.iter().map(Input::name).collect(),
            headers: vec![None; inputs.len()],
            ..Batch::default()
        },
        slots: Vec::new(),
        index: HashMap::new(),
        dropped: HashMap::new(),
        errors: Vec::new(),
        lenient: options.lenient,
    };
    let (tx, rx) = sync_channel::<Result<Chunk, Diagnostic>>(1);
    // Three stages, one bounded queue between each: read → parse (rayon) → apply. Parsing chunk
    // N+1 overlaps applying chunk N.
    let (parsed_tx, parsed_rx) = sync_channel::<Result<ParsedChunk, Diagnostic>>(1);
    std::thread::scope(|s| {
        let done_reader = Arc::clone(&done);
        s.spawn(move || {
            for (fi, input) in inputs.iter().enumerate() {
                if let Err(d) = read_input(fi as u32, input, &done_reader, &tx) {
                    // A closed channel means the consumer gave up; nothing left to tell.
                    let _ = tx.send(Err(d));
                }
            }
        });
        s.spawn(move || {
            for item in rx {
                if parsed_tx.send(item.map(parse_chunk)).is_err() {
                    return;
                }
            }
        });
        for item in parsed_rx {
            match item {
                Ok(chunk) => state.consume(chunk),
                Err(d) => state.errors.push(d),
            }
            progress(done.load(Ordering::Relaxed), total);
        }
    });
    state.finish()
}

/// Counts on-disk bytes as the (possibly compressed) file is read.
struct Counting<R> {
    inner: R,
    done: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.done.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Opens an input, decompressing by content (gzip and zstd magic numbers), not by name.
fn open<'a>(input: &Input<'a>, done: &Arc<AtomicU64>) -> io::Result<Box<dyn BufRead + Send + 'a>> {
    let source: Box<dyn Read + Send + 'a> = match *input {
        Input::File(path) => Box::new(File::open(path)?),
        Input::Memory { bytes, .. } => Box::new(bytes),
    };
    decompress(BufReader::with_capacity(
        1 << 16,
        Counting {
            inner: source,
            done: Arc::clone(done),
        },
    ))
}

/// Wraps `raw` in a gzip or zstd decoder when its first bytes are their magic numbers (the
/// content decides, not the file name).
pub fn decompress<'a, R: BufRead + Send + 'a>(
    mut raw: R,
) -> io::Result<Box<dyn BufRead + Send + 'a>> {
    let magic = raw.fill_buf()?;
    Ok(if magic.starts_with(&[0x1f, 0x8b]) {
        Box::new(BufReader::with_capacity(
            1 << 16,
            flate2::bufread::MultiGzDecoder::new(raw),
        ))
    } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(BufReader::with_capacity(
            1 << 16,
            zstd::stream::read::Decoder::with_buffer(raw)?,
        ))
    } else {
        Box::new(raw)
    })
}

fn read_input(
    fi: u32,
    input: &Input,
    done: &Arc<AtomicU64>,
    tx: &std::sync::mpsc::SyncSender<Result<Chunk, Diagnostic>>,
) -> Result<(), Diagnostic> {
    let diag = |line: u64, e: io::Error| Diagnostic {
        file: input.name(),
        line,
        message: format!("cannot read: {e}"),
        field: None,
    };
    let mut reader = open(input, done).map_err(|e| diag(0, e))?;
    let mut line_no = 0u64;
    loop {
        let mut chunk = Chunk {
            file: fi,
            first_line: line_no + 1,
            data: Vec::with_capacity(CHUNK_BYTES + (CHUNK_BYTES >> 2)),
            lines: Vec::new(),
        };
        let mut eof = false;
        while chunk.data.len() < CHUNK_BYTES {
            let start = chunk.data.len();
            let n = reader
                .read_until(b'\n', &mut chunk.data)
                .map_err(|e| diag(line_no + 1, e))?;
            if n == 0 {
                eof = true;
                break;
            }
            line_no += 1;
            let mut end = chunk.data.len();
            while end > start && matches!(chunk.data[end - 1], b'\n' | b'\r') {
                end -= 1;
            }
            chunk.lines.push((start, end));
        }
        if !chunk.lines.is_empty() && tx.send(Ok(chunk)).is_err() {
            return Ok(());
        }
        if eof {
            return Ok(());
        }
    }
}

/// A chunk's lines parsed (`None` for blank lines), still in file order.
struct ParsedChunk {
    file: u32,
    first_line: u64,
    parsed: Vec<Option<Result<Parsed, LineError>>>,
}

/// Parses a chunk's lines on the rayon pool.
fn parse_chunk(chunk: Chunk) -> ParsedChunk {
    let parsed = chunk
        .lines
        .par_iter()
        .map(|&(s, e)| {
            let line = &chunk.data[s..e];
            (!line.iter().all(u8::is_ascii_whitespace)).then(|| parse_line(line))
        })
        .collect();
    ParsedChunk {
        file: chunk.file,
        first_line: chunk.first_line,
        parsed,
    }
}

/// One execution taken out of its slot with the records a chunk has for it.
type Work = (usize, Execution, Vec<(Record, LineRef)>);

/// Loading state: executions being built, in order of first appearance.
struct Loader {
    batch: Batch,
    /// Executions under construction (taken out while a task applies records to them).
    slots: Vec<Option<Execution>>,
    index: HashMap<String, usize>,
    /// Executions dropped under `lenient`, with the reason.
    dropped: HashMap<usize, String>,
    errors: Vec<Diagnostic>,
    lenient: bool,
}

impl Loader {
    fn diag(&self, at: LineRef, e: LineError) -> Diagnostic {
        Diagnostic {
            file: self.batch.files[at.file as usize].clone(),
            line: at.line,
            message: e.message,
            field: e.field,
        }
    }

    /// A per-line problem: an error, or a counted warning under `lenient`.
    fn problem(&mut self, d: Diagnostic) {
        if self.lenient {
            self.batch.skipped_lines += 1;
            self.batch.warnings.push(Diagnostic {
                message: format!("skipped: {}", d.message),
                ..d
            });
        } else {
            self.errors.push(d);
        }
    }

    fn consume(&mut self, chunk: ParsedChunk) {
        let ParsedChunk {
            file,
            first_line,
            parsed,
        } = chunk;
        // Route records to executions in file order; remember which executions this chunk
        // touches so each can be built by its own task.
        let mut groups: Vec<(usize, Vec<(Record, LineRef)>)> = Vec::new();
        let mut group_of: HashMap<usize, usize> = HashMap::new();
        for (i, p) in parsed.into_iter().enumerate() {
            let at = LineRef {
                file,
                line: first_line + i as u64,
            };
            let parsed = match p {
                None => continue,
                Some(Ok(p)) => p,
                Some(Err(e)) => {
                    let d = self.diag(at, e);
                    self.problem(d);
                    continue;
                }
            };
            for w in parsed.warnings {
                let d = self.diag(
                    at,
                    LineError {
                        message: w,
                        field: None,
                    },
                );
                self.batch.warnings.push(d);
            }
            let exec_id = match &parsed.record {
                Record::Header(h) => {
                    if at.line != 1 {
                        let d = self.diag(
                            at,
                            LineError {
                                message: "header is not on the first line; read anyway".into(),
                                field: None,
                            },
                        );
                        self.batch.warnings.push(d);
                    }
                    let slot = &mut self.batch.headers[at.file as usize];
                    if slot.is_none() {
                        *slot = Some(h.clone());
                    }
                    continue;
                }
                Record::Unknown(_) => continue,
                r => r
                    .execution()
                    .expect("records other than header carry an execution"),
            };
            let idx = match self.index.get(exec_id) {
                Some(&i) => i,
                None => {
                    let i = self.slots.len();
                    self.slots
                        .push(Some(Execution::new(exec_id.to_owned(), at)));
                    self.index.insert(exec_id.to_owned(), i);
                    i
                }
            };
            if self.dropped.contains_key(&idx) {
                self.batch.skipped_lines += 1;
                continue;
            }
            let g = *group_of.entry(idx).or_insert_with(|| {
                groups.push((idx, Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push((parsed.record, at));
        }
        let mut work: Vec<Work> = groups
            .into_iter()
            .map(|(idx, recs)| {
                let exec = self.slots[idx].take().expect("execution slot is filled");
                (idx, exec, recs)
            })
            .collect();
        let results: Vec<Vec<(LineRef, LineError)>> = work
            .par_iter_mut()
            .map(|(_, exec, recs)| {
                let mut errs = Vec::new();
                for (rec, at) in recs.drain(..) {
                    if let Err(e) = exec.apply(rec, at) {
                        errs.push((at, e));
                    }
                }
                errs
            })
            .collect();
        for ((idx, exec, _), errs) in work.into_iter().zip(results) {
            self.slots[idx] = Some(exec);
            for (at, e) in errs {
                let unbuildable = e.field.as_deref() == Some("extends");
                let d = self.diag(at, e);
                if self.lenient && unbuildable && !self.dropped.contains_key(&idx) {
                    self.dropped.insert(idx, d.to_string());
                }
                self.problem(d);
            }
        }
    }

    fn finish(mut self) -> Result<Batch, LoadError> {
        if !self.errors.is_empty() {
            self.errors.sort_by(|a, b| {
                (self.batch.files.iter().position(|f| f == &a.file), a.line)
                    .cmp(&(self.batch.files.iter().position(|f| f == &b.file), b.line))
            });
            return Err(LoadError {
                diagnostics: self.errors,
            });
        }
        for (idx, slot) in self.slots.into_iter().enumerate() {
            let mut exec = slot.expect("execution slot is filled");
            exec.finish_loading();
            match self.dropped.get(&idx) {
                Some(why) => {
                    self.batch.warnings.push(Diagnostic {
                        file: self.batch.files[exec.first_seen.file as usize].clone(),
                        line: exec.first_seen.line,
                        message: format!(
                            "execution {:?} dropped: its tree cannot be built ({why})",
                            exec.id
                        ),
                        field: None,
                    });
                    self.batch.dropped_executions.push(exec.id);
                }
                None => self.batch.executions.push(exec),
            }
        }
        Ok(self.batch)
    }
}
