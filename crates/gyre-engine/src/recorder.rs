//! Recording a run as it happens (docs/format.md §1): every record is checked as the loader would check
//! it before it is written, and a request that continues an earlier one of its execution is
//! written in delta form (`extends`) automatically.
//!
//! The recorder keeps each open execution's engine state (its shared-prefix tree, request ids)
//! so it refuses what the loader would refuse (a request id used twice, a second closure, a
//! bad `extends`) and finds the request a new input continues: the latest request with the
//! longest `input + output` that is a prefix of the new input (found by prefix hashes, then
//! checked token for token against the tree). A closure releases the execution's tree; ids
//! are remembered so a request after closure is still checked for duplicates.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use serde_json::{Map, Value};

use super::execution::{Execution, LineRef};
use super::load::{self, LoadOptions};
use super::record::{LineError, Record};
use super::write::{
    AssessmentOut, ClosureOut, ExecutionOut, Gyre1, HeaderOut, Line, LineWriter, RequestOut,
    SpanOut, TrainedOut,
};

/// Why a record was not written.
#[derive(Debug)]
pub enum RecordError {
    /// The record is invalid; nothing was written.
    Invalid(LineError),
    /// Writing failed.
    Io(io::Error),
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::Invalid(e) => match &e.field {
                Some(field) => write!(f, "{} ({field})", e.message),
                None => f.write_str(&e.message),
            },
            RecordError::Io(e) => write!(f, "writing the recording: {e}"),
        }
    }
}

impl std::error::Error for RecordError {}

impl From<io::Error> for RecordError {
    fn from(e: io::Error) -> Self {
        RecordError::Io(e)
    }
}

impl From<LineError> for RecordError {
    fn from(e: LineError) -> Self {
        RecordError::Invalid(e)
    }
}

fn invalid(message: impl Into<String>, field: &str) -> RecordError {
    RecordError::Invalid(LineError {
        message: message.into(),
        field: Some(field.into()),
    })
}

/// How a request was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// The request it extends (delta form), when one was found.
    pub extends: Option<String>,
    /// Input tokens written (the new ones in delta form).
    pub input_tokens: usize,
}

/// State of one execution seen by the recorder.
enum State {
    /// Still open: the engine's execution, and per request `(path length, path hash)`.
    Open {
        exec: Box<Execution>,
        paths: Vec<(u32, u64)>,
    },
    /// Closed: only the request ids (to refuse duplicates after closure).
    Closed(HashSet<String>),
}

/// Writes gyre/1 records, checked, with automatic delta encoding.
pub struct Recorder<W: Write> {
    out: LineWriter<W>,
    executions: HashMap<String, State>,
    delta: bool,
    line: u64,
}

/// Rolling hash of a token prefix: `h' = h * K + (t + 1)`; equality is then checked exactly.
fn extend_hash(h: u64, t: u32) -> u64 {
    h.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(t as u64 + 1)
}

fn path_hash(tokens: &[u32]) -> u64 {
    tokens.iter().fold(0, |h, &t| extend_hash(h, t))
}

impl<W: Write> Recorder<W> {
    /// A recorder writing to `out`, choosing delta form where a request continues another.
    pub fn new(out: W) -> Self {
        Recorder {
            out: LineWriter::new(out),
            executions: HashMap::new(),
            delta: true,
            line: 0,
        }
    }

    /// Writes every request in full form instead (`false`), or delta form where possible.
    pub fn with_delta(mut self, delta: bool) -> Self {
        self.delta = delta;
        self
    }

    /// Lines written so far (by this recorder).
    pub fn lines(&self) -> u64 {
        self.out.lines()
    }

    /// Writes the header line: only as the first line.
    pub fn header(
        &mut self,
        tokenizer: Option<&Value>,
        meta: Option<&Map<String, Value>>,
    ) -> Result<(), RecordError> {
        self.header_line(&HeaderOut {
            format: Gyre1,
            tokenizer,
            trainer: None,
            meta,
        })
    }

    /// Writes a header line of any content (one naming its `trainer`, docs/format.md §9):
    /// only as the first line.
    pub fn header_line(&mut self, header: &HeaderOut) -> Result<(), RecordError> {
        if self.line > 0 {
            return Err(invalid(
                "the header must be the first line of a recording",
                "kind",
            ));
        }
        let line = Line::Header(header.clone());
        line.check()?;
        self.emit(&line)
    }

    /// Writes a `trained` record (docs/format.md §9). Its request pieces are checked against
    /// the execution's requests, whose tree a closure releases: write an execution's
    /// samples before its closure.
    pub fn trained(&mut self, rec: &TrainedOut) -> Result<(), RecordError> {
        if let Some(State::Closed(_)) = self.executions.get(rec.execution) {
            return Err(invalid(
                format!(
                    "execution {:?} is already closed: a recorder writes an execution's \
                     trained records before its closure",
                    rec.execution
                ),
                "kind",
            ));
        }
        self.apply_and_emit(rec.execution, &Line::Trained(rec.clone()))
    }

    /// Writes an `execution` line.
    pub fn execution(&mut self, rec: &ExecutionOut) -> Result<(), RecordError> {
        self.apply_and_emit(rec.execution, &Line::Execution(rec.clone()))
    }

    /// Writes a `request`. `rec.input` is the full input; with `rec.extends` unset and delta
    /// form on, the recorder picks the request it continues and writes only the new tokens
    /// (spans are shifted accordingly). An explicit `rec.extends` is written as given.
    pub fn request(&mut self, rec: &RequestOut) -> Result<Written, RecordError> {
        let continued = match (&rec.extends, self.delta) {
            (None, true) => self.continued(rec.execution, rec.input),
            _ => None,
        };
        let Some((id, len)) = continued else {
            self.apply_and_emit(rec.execution, &Line::Request(rec.clone()))?;
            self.remember_path(rec.execution, rec.input, rec.output, rec.extends);
            return Ok(Written {
                extends: rec.extends.map(str::to_owned),
                input_tokens: rec.input.len(),
            });
        };
        let spans: Vec<SpanOut> = rec
            .spans
            .iter()
            .filter(|s| s.end as usize > len)
            .map(|s| SpanOut {
                end: s.end - len as u32,
                ..s.clone()
            })
            .collect();
        let delta = RequestOut {
            extends: Some(&id),
            input: &rec.input[len..],
            spans: &spans,
            ..rec.clone()
        };
        self.apply_and_emit(rec.execution, &Line::Request(delta))?;
        self.remember_path(rec.execution, rec.input, rec.output, None);
        Ok(Written {
            extends: Some(id),
            input_tokens: rec.input.len() - len,
        })
    }

    /// Writes an `assessment`.
    pub fn assessment(&mut self, rec: &AssessmentOut) -> Result<(), RecordError> {
        self.apply_and_emit(rec.execution, &Line::Assessment(rec.clone()))
    }

    /// Writes a `closure`; the execution's tree is released.
    pub fn closure(&mut self, rec: &ClosureOut) -> Result<(), RecordError> {
        self.apply_and_emit(rec.execution, &Line::Closure(rec.clone()))?;
        if let Some(state) = self.executions.get_mut(rec.execution) {
            if let State::Open { exec, .. } = state {
                let ids = exec.requests.iter().map(|r| r.id.clone()).collect();
                *state = State::Closed(ids);
            }
        }
        Ok(())
    }

    /// Whether `execution` has a record in this recording (written here or read by
    /// [`append`](Recorder::append)), so a writer can pick ids that are still free.
    pub fn knows_execution(&self, execution: &str) -> bool {
        self.executions.contains_key(execution)
    }

    /// Whether request `id` is already used in `execution`.
    pub fn knows_request(&self, execution: &str, id: &str) -> bool {
        match self.executions.get(execution) {
            Some(State::Open { exec, .. }) => exec.requests.iter().any(|r| r.id == id),
            Some(State::Closed(ids)) => ids.contains(id),
            None => false,
        }
    }

    /// Flushes what was written.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flushes and gives the writer back.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out.into_inner())
    }

    /// The latest request of `execution` with the longest path that is a prefix of `input`:
    /// its id and path length.
    fn continued(&self, execution: &str, input: &[u32]) -> Option<(String, usize)> {
        let Some(State::Open { exec, paths }) = self.executions.get(execution) else {
            return None;
        };
        let mut lengths: Vec<u32> = paths
            .iter()
            .map(|&(len, _)| len)
            .filter(|&len| len > 0 && len as usize <= input.len())
            .collect();
        if lengths.is_empty() {
            return None;
        }
        lengths.sort_unstable();
        lengths.dedup();
        // Prefix hashes of the input at the lengths some request's path has.
        let mut at: HashMap<u32, u64> = HashMap::with_capacity(lengths.len());
        let mut h = 0u64;
        let mut next = 0;
        for (i, &t) in input.iter().enumerate() {
            h = extend_hash(h, t);
            if lengths[next] as usize == i + 1 {
                at.insert(lengths[next], h);
                next += 1;
                if next == lengths.len() {
                    break;
                }
            }
        }
        let mut best: Vec<usize> = (0..paths.len())
            .filter(|&q| at.get(&paths[q].0) == Some(&paths[q].1))
            .collect();
        // Longest first, then latest.
        best.sort_by_key(|&q| (std::cmp::Reverse(paths[q].0), std::cmp::Reverse(q)));
        best.into_iter().find_map(|q| {
            let len = paths[q].0 as usize;
            (exec.path_tokens(q as u32) == input[..len]).then(|| (exec.requests[q].id.clone(), len))
        })
    }

    fn remember_path(
        &mut self,
        execution: &str,
        input: &[u32],
        output: &[u32],
        extends: Option<&str>,
    ) {
        let Some(State::Open { exec, paths }) = self.executions.get_mut(execution) else {
            return;
        };
        debug_assert_eq!(paths.len() + 1, exec.requests.len());
        let idx = paths.len() as u32;
        // With an explicit `extends`, `input` holds only the new tokens: hash the whole path.
        let hash = match extends {
            Some(_) => path_hash(&exec.path_tokens(idx)),
            None => output
                .iter()
                .fold(path_hash(input), |h, &t| extend_hash(h, t)),
        };
        let r = &exec.requests[idx as usize];
        paths.push((r.input_len + r.output_len, hash));
    }

    /// Checks `line` as the loader would, applies it to its execution, then writes it.
    fn apply_and_emit(&mut self, execution: &str, line: &Line) -> Result<(), RecordError> {
        let parsed = line.check()?;
        let at = LineRef {
            file: 0,
            line: self.line + 1,
        };
        let state = self
            .executions
            .entry(execution.to_owned())
            .or_insert_with(|| State::Open {
                exec: Box::new(Execution::new(execution.to_owned(), at)),
                paths: Vec::new(),
            });
        match state {
            State::Open { exec, .. } => exec.apply(parsed.record, at)?,
            State::Closed(ids) => match parsed.record {
                Record::Request(r) if !ids.insert(r.id.clone()) => {
                    return Err(invalid(
                        format!(
                            "request id {:?} is already used in execution {execution:?}",
                            r.id
                        ),
                        "id",
                    ));
                }
                Record::Closure(_) => {
                    return Err(invalid(
                        format!("execution {execution:?} already has a closure"),
                        "kind",
                    ));
                }
                _ => {}
            },
        }
        self.emit(line)
    }

    fn emit(&mut self, line: &Line) -> Result<(), RecordError> {
        self.out.write(line)?;
        self.line += 1;
        Ok(())
    }
}

impl Recorder<BufWriter<File>> {
    /// A recorder writing a new file at `path` (an existing file is an error).
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().write(true).create_new(true).open(path)?;
        Ok(Recorder::new(BufWriter::with_capacity(1 << 20, file)))
    }

    /// Like [`create`](Self::create), but the file is readable and writable by its owner only
    /// (mode 0600 on Unix, set when it is created, so no other user can open it meanwhile):
    /// a proxy's recording holds every prompt of every execution.
    pub fn create_private(path: &Path) -> io::Result<Self> {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(path)?;
        Ok(Recorder::new(BufWriter::with_capacity(1 << 20, file)))
    }

    /// A recorder appending to the recording at `path` (created when missing): the file is
    /// read first, so ids, closures and delta encoding continue where it left off. A last line
    /// cut short (a writer killed mid-line) is removed; an invalid recording is an error.
    pub fn append(path: &Path) -> Result<Self, AppendError> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(AppendError::Io)?;
        let len = file.metadata().map_err(AppendError::Io)?.len();
        let mut magic = [0u8; 4];
        let n = file.read(&mut magic).map_err(AppendError::Io)?;
        if magic[..n].starts_with(&[0x1f, 0x8b])
            || magic[..n].starts_with(&[0x28, 0xb5, 0x2f, 0xfd])
        {
            return Err(AppendError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} is compressed; records can only be appended to plain JSONL",
                    path.display()
                ),
            )));
        }
        if len > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(len - 1))
                .map_err(AppendError::Io)?;
            file.read_exact(&mut last).map_err(AppendError::Io)?;
            if last[0] != b'\n' {
                truncate_partial_line(&mut file, len).map_err(AppendError::Io)?;
            }
        }
        let batch = load::load(&[path.to_path_buf()], &LoadOptions::default(), &|_, _| {})
            .map_err(AppendError::Invalid)?;
        let mut executions = HashMap::new();
        for exec in batch.executions {
            let id = exec.id.clone();
            let state = if exec.closure.is_some() {
                State::Closed(exec.requests.iter().map(|r| r.id.clone()).collect())
            } else {
                let paths = (0..exec.requests.len() as u32)
                    .map(|q| {
                        let r = &exec.requests[q as usize];
                        (r.input_len + r.output_len, path_hash(&exec.path_tokens(q)))
                    })
                    .collect();
                State::Open {
                    exec: Box::new(exec),
                    paths,
                }
            };
            executions.insert(id, state);
        }
        let lines = count_lines(path).map_err(AppendError::Io)?;
        Ok(Recorder {
            out: LineWriter::new(BufWriter::with_capacity(1 << 20, file)),
            executions,
            delta: true,
            line: lines,
        })
    }
}

/// Why a recording could not be reopened for appending.
#[derive(Debug)]
pub enum AppendError {
    /// Reading or writing the file failed.
    Io(io::Error),
    /// The existing recording is invalid.
    Invalid(load::LoadError),
}

impl fmt::Display for AppendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppendError::Io(e) => write!(f, "{e}"),
            AppendError::Invalid(e) => write!(f, "the recording to append to is invalid:\n{e}"),
        }
    }
}

impl std::error::Error for AppendError {}

/// Cuts the file back to its last newline.
fn truncate_partial_line(file: &mut File, len: u64) -> io::Result<()> {
    const BLOCK: u64 = 1 << 16;
    let mut end = len;
    let mut buf = vec![0u8; BLOCK as usize];
    while end > 0 {
        let start = end.saturating_sub(BLOCK);
        file.seek(SeekFrom::Start(start))?;
        let n = (end - start) as usize;
        file.read_exact(&mut buf[..n])?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b == b'\n') {
            return file.set_len(start + i as u64 + 1);
        }
        end = start;
    }
    file.set_len(0)
}

fn count_lines(path: &Path) -> io::Result<u64> {
    let mut file = File::open(path)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut lines = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(lines);
        }
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
    }
}
