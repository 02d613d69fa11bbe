//! Loading gyre/1 files (docs/format.md §1): streamed, plain/gzip/zstd, several files in order, parsed in
//! parallel and applied to independent executions in parallel.
//!
//! A reader thread cuts the input into chunks of whole lines (bounded queue, so memory stays
//! flat whatever the file size); each chunk's lines are parsed on the rayon pool, then its
//! records are applied to their executions, one task per execution, in file order. A full-form
//! request's input array is read last, per execution and in file order, against the previous
//! input of its agent: the bytes they share are compared, not parsed.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use rayon::prelude::*;
use serde_json::Value;

use super::consume::{self, Route};
use super::execution::{Execution, LineRef};
pub use gyre_format::input::{Diagnostic, KEPT_DIAGNOSTICS};
use gyre_format::input::{MAX_LINE_ENV, decompress, io_reason, max_line_bytes};
use gyre_format::prefix::PrefixReader;
use gyre_format::record::{Deferred, LineError, LineParse, Parsed, Record, parse_line_deferred};
use gyre_format::sanitize;

/// Loading failed: the input is invalid or unreadable.
#[derive(Debug)]
pub struct LoadError {
    /// The problems, in file and line order: the first [`KEPT_DIAGNOSTICS`], then (when there
    /// were more) one [`Diagnostic::omitted`] entry counting the rest.
    pub diagnostics: Vec<Diagnostic>,
    /// Warnings found beside them (kept like [`Batch::warnings`]), for `gyre validate` to list
    /// every finding.
    pub warnings: Vec<Diagnostic>,
    /// Reading stopped at the last of `diagnostics` because [`LoadOptions::max_problems`] were
    /// found: the rest of the input was not read (it may hold more).
    pub stopped: bool,
}

impl LoadError {
    /// How reading stopped, in words, when it stopped early (`None` when every line was read).
    pub fn stopped_note(&self) -> Option<String> {
        if !self.stopped {
            return None;
        }
        let last = self
            .diagnostics
            .iter()
            .rfind(|d| d.omitted_count().is_none())?;
        let name = last.file.display().to_string();
        let file = sanitize(&name);
        Some(format!(
            "reading stopped at {file}:{} after {}; the rest of the input was not read \
             (`gyre validate --max-problems 0` reads to the end and counts every problem)",
            last.line,
            gyre_format::note::plural(self.count() as usize, "problem")
        ))
    }

    /// Problems found, the ones not kept included.
    pub fn count(&self) -> u64 {
        self.diagnostics
            .iter()
            .map(|d| d.omitted_count().unwrap_or(1))
            .sum()
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 20;
        let kept = self
            .diagnostics
            .iter()
            .filter(|d| d.omitted_count().is_none());
        for d in kept.take(SHOWN) {
            writeln!(f, "{d}")?;
        }
        let count = self.count();
        if count > SHOWN as u64 {
            let more = count - SHOWN as u64;
            writeln!(
                f,
                "… and {more} more problem{} (`gyre validate` lists the first {KEPT_DIAGNOSTICS})",
                if more == 1 { "" } else { "s" }
            )?;
        }
        match self.stopped_note() {
            Some(note) => f.write_str(&note),
            None => write!(
                f,
                "{} in the input",
                gyre_format::note::plural(count as usize, "problem")
            ),
        }
    }
}

impl std::error::Error for LoadError {}

/// How to load.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Skip bad lines (and executions that can no longer be built) with a warning, instead of
    /// failing.
    pub lenient: bool,
    /// Stop reading after this many problems (and keep them all); `None` reads every line and
    /// keeps the first [`KEPT_DIAGNOSTICS`]. A flood of bad lines (a small `.zst` expanding to
    /// gigabytes of them) then costs seconds, not the time to read it all. Problems only: under
    /// `lenient` they are skipped lines and reading goes on.
    pub max_problems: Option<u64>,
}

/// Everything loaded from the input files.
#[derive(Debug, Default)]
pub struct Batch {
    /// The files, in the order given.
    pub files: Vec<PathBuf>,
    /// Each file's header line and its line number, when it has one.
    pub headers: Vec<Option<(Value, u64)>>,
    /// Executions in order of first appearance.
    pub executions: Vec<Execution>,
    /// Warnings (and, with `lenient`, the skipped problems), in input order: the first
    /// [`KEPT_DIAGNOSTICS`], then a [`Diagnostic::omitted`] entry when there were more.
    pub warnings: Vec<Diagnostic>,
    /// Warnings found, the ones not kept included.
    pub warning_count: u64,
    /// Lines skipped under `lenient`.
    pub skipped_lines: u64,
    /// Executions dropped under `lenient` because their tree could not be built.
    pub dropped_executions: Vec<String>,
}

impl Batch {
    /// The first header that names a tokenizer (docs/format.md §7), with the file and line it came from.
    pub fn tokenizer_spec(&self) -> Option<(&Value, &Path, u64)> {
        self.headers.iter().zip(&self.files).find_map(|(h, f)| {
            let (header, line) = h.as_ref()?;
            Some((header.get("tokenizer")?, f.as_path(), *line))
        })
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
    /// Each line, in order.
    lines: Vec<Line>,
}

/// One line of a chunk.
enum Line {
    /// `data[start..end]` (line terminator excluded).
    Text(usize, usize),
    /// Longer than the limit: skipped unread.
    TooLong,
}

/// Bytes read per chunk: large enough that the stages hand over a few hundred chunks for
/// 200 MB (each hand-off wakes threads), small enough that the chunks in flight stay a small
/// part of the tree's memory.
const CHUNK_BYTES: usize = 1 << 20;

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
    /// The first `len` bytes of a file on disk: a recording still being written, read up to its
    /// last complete line (`gyre inspect --follow`).
    Prefix {
        /// The file.
        path: &'a Path,
        /// Bytes to read.
        len: u64,
    },
    /// A stream the caller opens, read as the file `name` (a shard's runs of a recording,
    /// [`crate::runs`]).
    Stream(&'a Stream<'a>),
}

/// Opens the bytes of an [`Input::Stream`] (possibly compressed).
pub trait Opener: Sync {
    /// A fresh reader of the bytes.
    fn open(&self) -> io::Result<Box<dyn Read + Send + '_>>;
}

/// An input read through the caller's opener.
pub struct Stream<'a> {
    /// Name used in diagnostics.
    pub name: &'a Path,
    /// The directory relative paths in its header resolve against (a file's), if any.
    pub dir: Option<&'a Path>,
    /// Bytes the opener will yield, for progress.
    pub size: u64,
    /// Opens it.
    pub open: &'a dyn Opener,
}

impl fmt::Debug for Stream<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("name", &self.name)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl Input<'_> {
    fn name(&self) -> PathBuf {
        match self {
            Input::File(p) => p.to_path_buf(),
            Input::Memory { name, .. } => PathBuf::from(name),
            Input::Prefix { path, .. } => path.to_path_buf(),
            Input::Stream(s) => s.name.to_path_buf(),
        }
    }

    fn size(&self) -> u64 {
        match self {
            Input::File(p) => std::fs::metadata(p).map_or(0, |m| m.len()),
            Input::Memory { bytes, .. } => bytes.len() as u64,
            Input::Prefix { len, .. } => *len,
            Input::Stream(s) => s.size,
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
    let max_problems = options.max_problems.filter(|&n| n > 0 && !options.lenient);
    let mut state = Loader {
        batch: Batch {
            files: inputs.iter().map(Input::name).collect(),
            headers: vec![None; inputs.len()],
            ..Batch::default()
        },
        dirs: inputs
            .iter()
            .map(|i| match i {
                Input::File(p) | Input::Prefix { path: p, .. } => {
                    Some(p.parent().unwrap_or(Path::new("")).to_path_buf())
                }
                Input::Memory { .. } => None,
                Input::Stream(s) => s.dir.map(Path::to_path_buf),
            })
            .collect(),
        slots: Vec::new(),
        index: HashMap::new(),
        dropped: HashMap::new(),
        errors: Kept::new(max_problems.map_or(KEPT_DIAGNOSTICS, |n| {
            usize::try_from(n).map_or(KEPT_DIAGNOSTICS, |n| n.max(KEPT_DIAGNOSTICS))
        })),
        warnings: Kept::default(),
        lenient: options.lenient,
        stopped: false,
    };
    let (tx, rx) = sync_channel::<Result<Chunk, (u32, Diagnostic)>>(1);
    // Three stages, one bounded queue between each: read → parse (rayon) → apply. Parsing chunk
    // N+1 overlaps applying chunk N. Parsed chunks' buffers go back to the reader, which fills
    // them again instead of faulting in fresh pages.
    let (parsed_tx, parsed_rx) = sync_channel::<Result<ParsedChunk, (u32, Diagnostic)>>(1);
    let (spare_tx, spare_rx) = sync_channel::<Vec<u8>>(1);
    // Likewise the input arrays the apply stage is done with, for the parser to read into.
    let (spent_tx, spent_rx) = sync_channel::<Vec<Vec<u32>>>(1);
    std::thread::scope(|s| {
        let done_reader = Arc::clone(&done);
        s.spawn(move || {
            for (fi, input) in inputs.iter().enumerate() {
                if let Err(d) = read_input(fi as u32, input, &done_reader, &tx, &spare_rx) {
                    // A closed channel means the consumer gave up; nothing left to tell.
                    let _ = tx.send(Err((fi as u32, d)));
                }
            }
        });
        s.spawn(move || {
            let mut inputs = Inputs::default();
            let mut pool: Vec<Vec<u32>> = Vec::new();
            for item in rx {
                while let Ok(spent) = spent_rx.try_recv() {
                    pool.extend(spent);
                }
                pool.truncate(POOLED_INPUTS);
                let parsed = item.map(|chunk| {
                    let parsed = parse_chunk(&chunk, &mut inputs, &mut pool);
                    // The reader may have a buffer already; then this one is freed.
                    let _ = spare_tx.try_send(chunk.data);
                    parsed
                });
                if parsed_tx.send(parsed).is_err() {
                    return;
                }
            }
        });
        // Leaving the loop drops the receiver: the parser's next send fails, it ends and drops
        // its receiver, and so does the reader (at most one chunk in each queue is wasted).
        for item in parsed_rx {
            match item {
                Ok(chunk) => state.consume(chunk, &spent_tx),
                Err((file, d)) => state.errors.push(file, d),
            }
            progress(done.load(Ordering::Relaxed), total);
            if let Some(max) = max_problems {
                if state.errors.count >= max {
                    state.errors.keep_first(max);
                    state.stopped = true;
                    break;
                }
            }
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
        Input::Prefix { path, len } => Box::new(File::open(path)?.take(len)),
        Input::Stream(s) => s.open.open()?,
    };
    decompress(BufReader::with_capacity(
        1 << 16,
        Counting {
            inner: source,
            done: Arc::clone(done),
        },
    ))
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

fn read_input(
    fi: u32,
    input: &Input,
    done: &Arc<AtomicU64>,
    tx: &std::sync::mpsc::SyncSender<Result<Chunk, (u32, Diagnostic)>>,
    spare: &Receiver<Vec<u8>>,
) -> Result<(), Diagnostic> {
    let diag = |line: u64, message: String| Diagnostic {
        file: input.name(),
        line,
        message,
        field: None,
    };
    let cannot_read =
        |line: u64, e: io::Error| diag(line, format!("cannot read: {}", io_reason(&e)));
    let mut reader = open(input, done).map_err(|e| cannot_read(0, e))?;
    let max_line = max_line_bytes();
    // A UTF-8 byte-order mark (written by some Windows tools) is not part of the first record.
    if reader
        .fill_buf()
        .map_err(|e| cannot_read(1, e))?
        .starts_with(BOM)
    {
        reader.consume(BOM.len());
    }
    let first = reader.fill_buf().map_err(|e| cannot_read(1, e))?;
    if first.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return Err(diag(
            1,
            "this is a JSON array, not JSONL: write one record per line \
             (e.g. `jq -c '.[]' FILE > FILE.jsonl`)"
                .into(),
        ));
    }
    let mut line_no = 0u64;
    // The start of a line the previous chunk ended inside.
    let mut carry: Vec<u8> = Vec::new();
    let mut eof = false;
    while !eof {
        let mut data = spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK_BYTES + (CHUNK_BYTES >> 2)));
        data.clear();
        data.extend_from_slice(&carry);
        carry.clear();
        // Whole blocks straight into the chunk (the BufReader steps aside for reads larger
        // than its buffer); a line longer than a chunk grows it, up to one byte over the limit,
        // which tells a line at the limit from a longer one.
        let mut searched = 0;
        let mut want = (data.len() + CHUNK_BYTES / 2).max(CHUNK_BYTES);
        loop {
            eof = fill(&mut *reader, &mut data, want).map_err(|e| cannot_read(line_no + 1, e))?;
            if eof || memchr::memchr(b'\n', &data[searched..]).is_some() || data.len() > max_line {
                break;
            }
            searched = data.len();
            want = (data.len() + CHUNK_BYTES).min(max_line + 1);
        }
        let mut chunk = Chunk {
            file: fi,
            first_line: line_no + 1,
            data: Vec::new(),
            lines: Vec::new(),
        };
        let mut start = 0;
        loop {
            let end = match memchr::memchr(b'\n', &data[start..]) {
                Some(i) => start + i,
                None if eof && start < data.len() => data.len(),
                None => break,
            };
            line_no += 1;
            if end - start > max_line {
                chunk.lines.push(Line::TooLong);
            } else {
                let mut text_end = end;
                while text_end > start && matches!(data[text_end - 1], b'\n' | b'\r') {
                    text_end -= 1;
                }
                if line_no == 1 && data[start..text_end].trim_ascii() == b"{" {
                    return Err(diag(
                        1,
                        "this is one pretty-printed JSON document, not JSONL: write one record \
                         per line (e.g. `jq -c . FILE > FILE.jsonl`)"
                            .into(),
                    ));
                }
                chunk.lines.push(Line::Text(start, text_end));
            }
            start = (end + 1).min(data.len());
        }
        if data.len() - start > max_line {
            // A line past the limit: skipped unread beyond the bytes that showed it.
            line_no += 1;
            chunk.lines.push(Line::TooLong);
            skip_line(&mut reader).map_err(|e| cannot_read(line_no, e))?;
        } else {
            carry.extend_from_slice(&data[start..]);
        }
        data.truncate(start);
        chunk.data = data;
        if !chunk.lines.is_empty() && tx.send(Ok(chunk)).is_err() {
            return Ok(());
        }
    }
    Ok(())
}

/// Reads into `data` until it holds `want` bytes; `true` when the input ended first.
fn fill(reader: &mut dyn BufRead, data: &mut Vec<u8>, want: usize) -> io::Result<bool> {
    while data.len() < want {
        data.reserve(want - data.len());
        if Read::take(&mut *reader, (want - data.len()) as u64).read_to_end(data)? == 0 {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Reads past the rest of a line without keeping it.
fn skip_line(reader: &mut dyn BufRead) -> io::Result<()> {
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match memchr::memchr(b'\n', buf) {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    }
}

/// A chunk's lines parsed (`None` for blank lines), still in file order.
struct ParsedChunk {
    file: u32,
    first_line: u64,
    parsed: Vec<Option<Result<Parsed, LineError>>>,
}

/// Per execution, the readers of its agents' full-form inputs, most recently used first.
type Inputs = HashMap<String, Readers>;

/// One execution's readers: per agent, the reader holding its last input.
type Readers = Vec<(String, PrefixReader)>;

/// Spent input arrays kept for the parser to read into.
const POOLED_INPUTS: usize = 16;

/// The smallest spent input array kept (in tokens): smaller ones are cheap to allocate.
const REUSED_INPUT: usize = 16 << 10;

/// Agents per execution whose last input is remembered (a main agent and the sub-agents it
/// switches between); the least recently used is forgotten first.
const AGENTS_REMEMBERED: usize = 4;

/// One execution's deferred requests in a chunk (line index, line and request, in file
/// order), with its readers.
struct Group<'a> {
    execution: String,
    readers: Readers,
    requests: Vec<(usize, &'a [u8], Deferred)>,
    /// Spent input arrays to read into.
    buffers: Vec<Vec<u32>>,
}

/// Parses a chunk's lines on the rayon pool: every line but the input arrays of full-form
/// requests in parallel, then those arrays one execution per task, in file order, each against
/// the previous input of its agent (`inputs`, kept from chunk to chunk until the execution's
/// closure), into the allocations of `pool` while it has some.
fn parse_chunk(chunk: &Chunk, inputs: &mut Inputs, pool: &mut Vec<Vec<u32>>) -> ParsedChunk {
    let max_line = max_line_bytes();
    let text = |line: &Line| match *line {
        Line::Text(s, e) => Some(&chunk.data[s..e]),
        Line::TooLong => None,
    };
    let first_pass: Vec<Option<LineParse>> = chunk
        .lines
        .par_iter()
        .map(|line| match text(line) {
            Some(line) => {
                (!line.iter().all(u8::is_ascii_whitespace)).then(|| parse_line_deferred(line))
            }
            None => Some(LineParse::Read(Err(LineError {
                message: format!(
                    "line is longer than the limit of {} MiB, not read (set {MAX_LINE_ENV} to \
                     a larger number of MiB to raise it)",
                    max_line >> 20
                ),
                field: None,
            }))),
        })
        .collect();
    let mut parsed = Vec::with_capacity(first_pass.len());
    let mut groups: Vec<Group> = Vec::new();
    let mut group_of: HashMap<String, usize> = HashMap::new();
    let mut closed: Vec<String> = Vec::new();
    for (i, (line, first)) in chunk.lines.iter().zip(first_pass).enumerate() {
        match first {
            None => parsed.push(None),
            Some(LineParse::Read(r)) => {
                if let Ok(Parsed {
                    record: Record::Closure(c),
                    ..
                }) = &r
                {
                    closed.push(c.execution.clone());
                }
                parsed.push(Some(r));
            }
            // Filled in below, once the input is read.
            Some(LineParse::Deferred(d)) => {
                parsed.push(None);
                let g = match group_of.get(d.execution()) {
                    Some(&g) => g,
                    None => {
                        let execution = d.execution().to_owned();
                        groups.push(Group {
                            readers: inputs.remove(&execution).unwrap_or_default(),
                            execution: execution.clone(),
                            requests: Vec::new(),
                            buffers: Vec::new(),
                        });
                        group_of.insert(execution, groups.len() - 1);
                        groups.len() - 1
                    }
                };
                groups[g]
                    .requests
                    .push((i, text(line).unwrap_or_default(), d));
            }
        }
    }
    for group in &mut groups {
        let n = group.requests.len().min(pool.len());
        group.buffers = pool.split_off(pool.len() - n);
    }
    let read = |group: &mut Group| {
        let (readers, buffers) = (&mut group.readers, &mut group.buffers);
        group
            .requests
            .drain(..)
            .map(|(i, line, d)| {
                let into = buffers.pop().unwrap_or_default();
                let ids = reader_for(readers, d.agent()).read(d.input(line), into);
                (i, d.finish(line, ids))
            })
            .collect::<Vec<_>>()
    };
    // One execution (a recording written execution by execution) is read on this thread,
    // without waking the pool.
    let read_back: Vec<Vec<(usize, Result<Parsed, LineError>)>> = if groups.len() == 1 {
        groups.iter_mut().map(read).collect()
    } else {
        groups.par_iter_mut().map(read).collect()
    };
    for (i, r) in read_back.into_iter().flatten() {
        parsed[i] = Some(r);
    }
    for group in groups {
        inputs.insert(group.execution, group.readers);
    }
    for execution in closed {
        inputs.remove(&execution);
    }
    ParsedChunk {
        file: chunk.file,
        first_line: chunk.first_line,
        parsed,
    }
}

/// The reader of `agent`'s inputs, moved to the front (made when the agent is new, forgetting
/// the least recently used beyond [`AGENTS_REMEMBERED`]).
fn reader_for<'a>(readers: &'a mut Readers, agent: &str) -> &'a mut PrefixReader {
    match readers.iter().position(|(a, _)| a == agent) {
        Some(i) => readers[..=i].rotate_right(1),
        None => {
            readers.truncate(AGENTS_REMEMBERED - 1);
            readers.insert(0, (agent.to_owned(), PrefixReader::default()));
        }
    }
    &mut readers[0].1
}

/// A record that could not be applied: where and why.
type ApplyError = (LineRef, LineError);

/// One execution taken out of its slot with the records a chunk has for it.
type Work = (usize, Execution, Vec<(Record, LineRef)>);

/// The first `limit` diagnostics by place in the input ([`KEPT_DIAGNOSTICS`] unless reading
/// stops at a larger [`LoadOptions::max_problems`]), and a count of all.
struct Kept {
    /// With the file's index, for ordering.
    list: Vec<(u32, Diagnostic)>,
    count: u64,
    limit: usize,
}

impl Default for Kept {
    fn default() -> Self {
        Self::new(KEPT_DIAGNOSTICS)
    }
}

impl Kept {
    fn new(limit: usize) -> Self {
        Self {
            list: Vec::new(),
            count: 0,
            limit,
        }
    }

    fn push(&mut self, file: u32, d: Diagnostic) {
        self.count += 1;
        self.list.push((file, d));
        if self.list.len() >= 2 * self.limit {
            self.trim();
        }
    }

    /// Keeps the first by file and line (stable: a line's diagnostics stay in order).
    fn trim(&mut self) {
        self.list.sort_by_key(|(file, d)| (*file, d.line));
        self.list.truncate(self.limit);
    }

    fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Keeps the first `n` (by file and line) and counts only them: reading stopped there.
    fn keep_first(&mut self, n: u64) {
        self.list.sort_by_key(|(file, d)| (*file, d.line));
        self.list.truncate(usize::try_from(n).unwrap_or(usize::MAX));
        self.count = self.list.len() as u64;
    }

    /// The kept diagnostics in order, then an [`Diagnostic::omitted`] entry for the rest.
    fn into_vec(mut self) -> Vec<Diagnostic> {
        self.trim();
        let omitted = self.count - self.list.len() as u64;
        let mut out: Vec<Diagnostic> = self.list.into_iter().map(|(_, d)| d).collect();
        if omitted > 0 {
            out.push(Diagnostic::omitted(omitted));
        }
        out
    }
}

/// Loading state: executions being built, in order of first appearance.
struct Loader {
    batch: Batch,
    /// Per input: the directory relative tokenizer paths are resolved against (`None` for
    /// recordings held in memory).
    dirs: Vec<Option<PathBuf>>,
    /// Executions under construction (taken out while a task applies records to them).
    slots: Vec<Option<Execution>>,
    index: HashMap<String, usize>,
    /// Executions dropped under `lenient`, with the reason.
    dropped: HashMap<usize, String>,
    errors: Kept,
    warnings: Kept,
    lenient: bool,
    /// Reading stopped early at [`LoadOptions::max_problems`].
    stopped: bool,
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
    fn problem(&mut self, at: LineRef, d: Diagnostic) {
        if self.lenient {
            self.batch.skipped_lines += 1;
            self.warnings.push(
                at.file,
                Diagnostic {
                    message: format!("skipped: {}", d.message),
                    ..d
                },
            );
        } else {
            self.errors.push(at.file, d);
        }
    }

    fn warn(&mut self, at: LineRef, message: String) {
        let d = self.diag(
            at,
            LineError {
                message,
                field: None,
            },
        );
        self.warnings.push(at.file, d);
    }

    /// Applies a chunk's records; the requests' spent input arrays go to `spent` (when the
    /// parse stage has room for them).
    fn consume(&mut self, chunk: ParsedChunk, spent_tx: &SyncSender<Vec<Vec<u32>>>) {
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
                    self.problem(at, d);
                    continue;
                }
            };
            for w in parsed.warnings {
                self.warn(at, w);
            }
            let exec_id = match consume::route(&parsed.record) {
                Route::Header(h) => {
                    let check =
                        consume::check_header(h, at.line, self.dirs[at.file as usize].as_deref());
                    if let Some(w) = check.warning {
                        self.warn(at, w);
                    }
                    if let Some(e) = check.problem {
                        let d = self.diag(at, e);
                        self.problem(at, d);
                        continue;
                    }
                    let slot = &mut self.batch.headers[at.file as usize];
                    if slot.is_none() {
                        *slot = Some((h.clone(), at.line));
                    }
                    continue;
                }
                Route::Ignored => continue,
                Route::Execution(id) => id,
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
        let files = &self.batch.files;
        let apply = |(_, exec, recs): &mut Work| {
            let mut errs = Vec::new();
            let mut spent = Vec::new();
            for (rec, at) in recs.drain(..) {
                let place = |first: LineRef| {
                    let file = files[first.file as usize].display();
                    Some(format!("{file}:{}", first.line))
                };
                if let Err(e) = consume::apply(exec, rec, at, &mut spent, place) {
                    errs.push((at, e));
                }
            }
            exec.compact();
            (errs, spent)
        };
        // One execution is built on this thread, without waking the pool.
        let results: Vec<(Vec<ApplyError>, Vec<Vec<u32>>)> = if work.len() == 1 {
            work.iter_mut().map(apply).collect()
        } else {
            work.par_iter_mut().map(apply).collect()
        };
        let mut spent_inputs = Vec::new();
        for ((idx, exec, _), (errs, spent)) in work.into_iter().zip(results) {
            spent_inputs.extend(spent);
            self.slots[idx] = Some(exec);
            for (at, e) in errs {
                let unbuildable = e.field.as_deref() == Some("extends");
                let d = self.diag(at, e);
                if self.lenient && unbuildable && !self.dropped.contains_key(&idx) {
                    self.dropped.insert(idx, d.to_string());
                }
                self.problem(at, d);
            }
        }
        // A full queue means the parser has enough.
        spent_inputs.retain(|ids| ids.capacity() >= REUSED_INPUT);
        if !spent_inputs.is_empty() {
            let _ = spent_tx.try_send(spent_inputs);
        }
    }

    fn finish(mut self) -> Result<Batch, LoadError> {
        if !self.errors.is_empty() {
            return Err(LoadError {
                diagnostics: self.errors.into_vec(),
                warnings: self.warnings.into_vec(),
                stopped: self.stopped,
            });
        }
        drop(std::mem::take(&mut self.index));
        let mut dropped: Vec<(usize, String)> = self.dropped.drain().collect();
        dropped.sort_unstable();
        for (idx, why) in dropped {
            let exec = self.slots[idx].take().expect("execution slot is filled");
            let at = exec.first_seen;
            self.warnings.push(
                at.file,
                Diagnostic {
                    file: self.batch.files[at.file as usize].clone(),
                    line: at.line,
                    message: format!(
                        "execution \"{}\" dropped: its tree cannot be built ({why})",
                        exec.id
                    ),
                    field: None,
                },
            );
            self.batch.dropped_executions.push(exec.id);
        }
        // Collected in place: the slots' buffer becomes the executions' (no second copy of
        // every execution at the peak).
        self.batch.executions = self
            .slots
            .into_iter()
            .filter_map(|slot| {
                let mut exec = slot?;
                exec.finish_loading();
                Some(exec)
            })
            .collect();
        self.batch.warning_count = self.warnings.count;
        self.batch.warnings = self.warnings.into_vec();
        Ok(self.batch)
    }
}
