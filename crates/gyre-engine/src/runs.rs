//! Reading one shard's share of a recording where it lies, with no copy of the rest.
//!
//! An [`index`] pass over a recording routes each line as [`crate::shard::split`] does (to the
//! shard of its execution; headers and lines naming no execution to shard 0) but keeps no
//! bytes: it returns, per shard, the runs of consecutive lines that shard needs (byte ranges
//! with their line numbers). A shard then loads its runs of every input ([`load_parts`]): the
//! ranges are read in place ([`Part::open`]: a plain file with seeks, a compressed one
//! decompressed with the rest discarded) and every other line is a blank line, so each line
//! keeps its number and errors name `file:line` as one load of the whole file would.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::load::{self, Input, Opener, Stream};
use super::route::route;

/// Consecutive lines of one file that go to one shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    /// Byte offset of the first line in the (decompressed) recording.
    pub offset: u64,
    /// Bytes of the run, line terminators included.
    pub len: u64,
    /// Number (1-based) of its first line.
    pub line: u64,
    /// Lines in the run.
    pub lines: u64,
}

/// One recording indexed for `shards` shards.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Index {
    /// Per shard, its runs in file order.
    pub runs: Vec<Vec<Run>>,
    /// Bytes of the (decompressed) recording.
    pub bytes: u64,
    /// Lines in it.
    pub lines: u64,
    /// It is gzip or zstd: its shards read it whole (decompressing) and keep their runs.
    pub compressed: bool,
}

/// A UTF-8 byte-order mark, which the loader skips at the start of a file.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Bytes read per parallel routing step.
const INDEX_CHUNK: usize = 4 << 20;

fn compressed(magic: &[u8]) -> bool {
    magic.starts_with(&[0x1f, 0x8b]) || magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd])
}

/// Adds a line to a shard's runs, extending the last run when the line follows it.
fn push(runs: &mut Vec<Run>, offset: u64, len: u64, line: u64) {
    if let Some(last) = runs.last_mut() {
        if last.offset + last.len == offset && last.line + last.lines == line {
            last.len += len;
            last.lines += 1;
            return;
        }
    }
    runs.push(Run {
        offset,
        len,
        line,
        lines: 1,
    });
}

/// Indexes one recording (plain, gzip or zstd, by content) for `shards` shards: per shard,
/// the runs of lines it loads (see the module docs). A file the loader refuses as a whole (a
/// JSON array, a pretty-printed document) goes to shard 0 whole, so it is reported once.
pub fn index(input: impl Read + Send, shards: u32) -> io::Result<Index> {
    let shards = shards.max(1);
    let mut raw = BufReader::with_capacity(1 << 16, input);
    let is_compressed = compressed(raw.fill_buf()?);
    let mut reader = gyre_format::input::decompress(raw)?;
    let max_line = gyre_format::input::max_line_bytes();
    let mut index = Index {
        runs: vec![Vec::new(); shards as usize],
        compressed: is_compressed,
        ..Index::default()
    };
    let mut data: Vec<u8> = Vec::with_capacity(INDEX_CHUNK + (INDEX_CHUNK >> 2));
    let (mut offset, mut line, mut first) = (0u64, 1u64, true);
    loop {
        let want = data.len() + INDEX_CHUNK;
        let eof = fill(&mut *reader, &mut data, want)?;
        if first && refused_whole(&data) {
            let (len, lines) = measure(&data, &mut *reader)?;
            index.runs[0].push(Run {
                offset: 0,
                len,
                line: 1,
                lines,
            });
            index.bytes = len;
            index.lines = lines;
            return Ok(index);
        }
        first = false;
        let mut lines: Vec<(usize, usize)> = Vec::new();
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', &data) {
            lines.push((start, nl + 1));
            start = nl + 1;
        }
        if eof && start < data.len() {
            lines.push((start, data.len()));
            start = data.len();
        }
        if lines.is_empty() && data.len() > max_line {
            // A line past the loader's limit: its shard reports it; skipped unbuffered here.
            let len = data.len() as u64 + skip_line(&mut *reader)?;
            push(&mut index.runs[0], offset, len, line);
            offset += len;
            line += 1;
            data.clear();
            continue;
        }
        let routes: Vec<Option<u32>> = lines
            .par_iter()
            .map(|&(s, e)| {
                let mut text = &data[s..e];
                if offset == 0 && s == 0 {
                    // The loader reads a first line past its byte-order mark.
                    text = text.strip_prefix(BOM).unwrap_or(text);
                }
                while let [rest @ .., b'\n' | b'\r'] = text {
                    text = rest;
                }
                if text.len() > max_line {
                    Some(0)
                } else {
                    route(text, shards)
                }
            })
            .collect();
        for (&(s, e), to) in lines.iter().zip(routes) {
            if let Some(k) = to {
                push(
                    &mut index.runs[k as usize],
                    offset + s as u64,
                    (e - s) as u64,
                    line,
                );
            }
            line += 1;
        }
        offset += start as u64;
        data.drain(..start);
        if eof {
            index.bytes = offset;
            index.lines = line - 1;
            return Ok(index);
        }
    }
}

/// The loader refuses the whole file (a JSON array, or a first line that is a lone `{`).
fn refused_whole(data: &[u8]) -> bool {
    let text = data.strip_prefix(BOM).unwrap_or(data);
    let first_line = text.split(|&b| b == b'\n').next().unwrap_or_default();
    text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') || first_line.trim_ascii() == b"{"
}

/// Bytes and lines of `head` followed by the rest of `reader`.
fn measure(head: &[u8], reader: &mut dyn BufRead) -> io::Result<(u64, u64)> {
    let mut bytes = head.len() as u64;
    let mut newlines = memchr::memchr_iter(b'\n', head).count() as u64;
    let mut last = head.last().copied();
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok((
                bytes,
                newlines + u64::from(last.is_some_and(|b| b != b'\n')),
            ));
        }
        newlines += memchr::memchr_iter(b'\n', buf).count() as u64;
        last = buf.last().copied();
        let n = buf.len();
        bytes += n as u64;
        reader.consume(n);
    }
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

/// Reads past the rest of a line, newline included; returns the bytes passed.
fn skip_line(reader: &mut dyn BufRead) -> io::Result<u64> {
    let mut passed = 0u64;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(passed);
        }
        match memchr::memchr(b'\n', buf) {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(passed + i as u64 + 1);
            }
            None => {
                let n = buf.len();
                reader.consume(n);
                passed += n as u64;
            }
        }
    }
}

/// Where a recording's bytes are.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// A file (plain, gzip or zstd).
    File(&'a Path),
    /// Bytes in memory (plain, gzip or zstd).
    Memory(&'a [u8]),
}

/// One shard's runs of one recording (from [`index`]), to load with its other parts.
#[derive(Clone, Copy, Debug)]
pub struct Part<'a> {
    /// Name in diagnostics (a file's path).
    pub name: &'a Path,
    /// The recording.
    pub source: Source<'a>,
    /// The runs to read, in file order; `None` reads the whole recording (a shard that holds
    /// every execution of it). A part with no runs does not open its source.
    pub runs: Option<&'a [Run]>,
    /// Counts the recording's bytes read (the file's bytes, compressed where it is).
    pub read: &'a AtomicU64,
}

impl<'a> Part<'a> {
    /// Opens the part: the runs' bytes, read in place, with a blank line for every line of the
    /// recording that is not in them.
    pub fn open(&self) -> io::Result<Box<dyn Read + Send + 'a>> {
        let counted = |inner| Counting {
            inner,
            read: self.read,
        };
        let Some(runs) = self.runs else {
            return Ok(match self.source {
                Source::File(path) => Box::new(counted(File::open(path)?)),
                Source::Memory(bytes) => {
                    self.read.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                    Box::new(bytes)
                }
            });
        };
        if runs.is_empty() {
            return Ok(Box::new(io::empty()));
        }
        let bytes = match self.source {
            Source::File(path) => {
                let mut file = BufReader::with_capacity(1 << 16, counted(File::open(path)?));
                if compressed(file.fill_buf()?) {
                    Bytes::Stream(gyre_format::input::decompress(file)?)
                } else {
                    Bytes::Seek(file)
                }
            }
            Source::Memory(bytes) if compressed(bytes) => {
                self.read.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                Bytes::Stream(gyre_format::input::decompress(bytes)?)
            }
            Source::Memory(bytes) => Bytes::Memory(bytes),
        };
        Ok(Box::new(RunsReader {
            bytes,
            runs,
            next: 0,
            pos: 0,
            line: 1,
            pad: 0,
            left: 0,
            read: self.read,
        }))
    }

    /// Bytes it reads: its runs', or the whole recording's.
    pub fn size(&self) -> u64 {
        match (self.runs, self.source) {
            (Some(runs), _) => runs.iter().map(|r| r.len).sum(),
            (None, Source::File(path)) => std::fs::metadata(path).map_or(0, |m| m.len()),
            (None, Source::Memory(bytes)) => bytes.len() as u64,
        }
    }
}

/// Loads a shard's parts (one per recording, in the order the recordings were given) as one
/// load of those recordings would load the shard's executions.
pub fn load_parts(
    parts: &[Part],
    options: &load::LoadOptions,
) -> Result<load::Batch, load::LoadError> {
    let streams: Vec<Stream> = parts
        .iter()
        .map(|p| Stream {
            name: p.name,
            dir: match p.source {
                Source::File(path) => Some(path.parent().unwrap_or(Path::new(""))),
                Source::Memory(_) => None,
            },
            size: p.size(),
            open: p,
        })
        .collect();
    let inputs: Vec<Input> = streams.iter().map(Input::Stream).collect();
    load::load_inputs(&inputs, options, &|_, _| {})
}

impl Opener for Part<'_> {
    fn open(&self) -> io::Result<Box<dyn Read + Send + '_>> {
        Part::open(self)
    }
}

/// Counts the bytes read from a file.
struct Counting<'a, R> {
    inner: R,
    read: &'a AtomicU64,
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl<R: Seek> Seek for Counting<'_, R> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        self.inner.seek(to)
    }
}

/// A recording's bytes, as a part reads them.
enum Bytes<'a> {
    /// A plain file: runs are reached by seeking.
    Seek(BufReader<Counting<'a, File>>),
    /// A compressed recording: read from the start, what lies between runs discarded.
    Stream(Box<dyn BufRead + Send + 'a>),
    /// Plain bytes in memory.
    Memory(&'a [u8]),
}

/// Reads a part (see [`Part::open`]).
struct RunsReader<'a> {
    bytes: Bytes<'a>,
    runs: &'a [Run],
    /// The next run.
    next: usize,
    /// Offset of the next byte in the recording.
    pos: u64,
    /// Number of the next line written.
    line: u64,
    /// Blank lines to write before the current run.
    pad: u64,
    /// Bytes of the current run still to read.
    left: u64,
    read: &'a AtomicU64,
}

impl RunsReader<'_> {
    /// Moves to `offset` (never back: runs come in file order).
    fn skip_to(&mut self, offset: u64) -> io::Result<()> {
        let gap = offset
            .checked_sub(self.pos)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "runs out of order"))?;
        match &mut self.bytes {
            Bytes::Seek(file) => {
                let gap = i64::try_from(gap)
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "run past 2^63"))?;
                file.seek_relative(gap)?;
            }
            Bytes::Stream(reader) => {
                let skipped = io::copy(&mut Read::take(&mut *reader, gap), &mut io::sink())?;
                if skipped < gap {
                    return Err(changed());
                }
            }
            Bytes::Memory(_) => {}
        }
        self.pos = offset;
        Ok(())
    }
}

/// The recording is shorter than its index says.
fn changed() -> io::Error {
    io::Error::other("the recording is shorter than when it was indexed (was it rewritten?)")
}

impl Read for RunsReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.pad > 0 {
                let n = (self.pad.min(buf.len() as u64)) as usize;
                buf[..n].fill(b'\n');
                self.pad -= n as u64;
                return Ok(n);
            }
            if self.left > 0 {
                let want = (self.left.min(buf.len() as u64)) as usize;
                let n = match &mut self.bytes {
                    Bytes::Seek(file) => file.read(&mut buf[..want])?,
                    Bytes::Stream(reader) => reader.read(&mut buf[..want])?,
                    Bytes::Memory(bytes) => {
                        let from = usize::try_from(self.pos).unwrap_or(usize::MAX);
                        let got = bytes.get(from..).unwrap_or_default();
                        let n = want.min(got.len());
                        buf[..n].copy_from_slice(&got[..n]);
                        self.read.fetch_add(n as u64, Ordering::Relaxed);
                        n
                    }
                };
                if n == 0 {
                    return Err(changed());
                }
                self.left -= n as u64;
                self.pos += n as u64;
                return Ok(n);
            }
            let Some(&run) = self.runs.get(self.next) else {
                return Ok(0);
            };
            self.next += 1;
            if run.line < self.line {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "runs out of order",
                ));
            }
            self.pad = run.line - self.line;
            self.line = run.line + run.lines;
            self.skip_to(run.offset)?;
            self.left = run.len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{LoadOptions, load_inputs};
    use crate::route::shard_of;
    use crate::shard::{self, combine, process_shard, summarize};
    use crate::{admit::Settings, rows::execution_rows, score::AdvantageMode};
    use std::collections::HashMap;

    fn lines(recs: &[&str]) -> Vec<u8> {
        recs.iter()
            .flat_map(|l| [l.as_bytes(), b"\n"].concat())
            .collect()
    }

    /// Two files; executions interleaved within and spread over both; a header, a blank line, a
    /// line with escapes and one with its fields in another order.
    fn recording() -> Vec<(String, Vec<u8>)> {
        let a = lines(&[
            r#"{"kind":"header","format":"gyre/1"}"#,
            r#"{"kind":"execution","execution":"a","t":0,"group":"g1"}"#,
            r#"{"kind":"execution","execution":"b","t":0,"group":"g1"}"#,
            r#"{"kind":"request","execution":"a","id":"r1","input":[1,2],"output":[3,4],"logprobs":[-0.1,-0.2]}"#,
            r#"{"kind":"request","execution":"b","id":"r1","input":[1,2],"output":[5],"logprobs":[-0.3],"meta":{"note":"a \"quoted\" ] } [ {"}}"#,
            "",
            r#"{"execution":7,"t":0,"group":"g2","kind":"execution"}"#,
            r#"{"kind":"request","execution":7,"id":"r1","input":[9],"output":[8],"logprobs":[-0.5]}"#,
            r#"{"kind":"request","execution":"d","id":"r1","input":[1],"output":[2],"logprobs":[-0.5]}"#,
        ]);
        let b = lines(&[
            r#"{"kind":"request","execution":"a","id":"r2","extends":"r1","input":[6],"output":[7],"logprobs":[-0.7]}"#,
            r#"{"kind":"closure","execution":"b","t":5,"status":"completed","artifact":"p","version":1}"#,
            r#"{"kind":"closure","execution":"a","t":5,"status":"completed","artifact":"p","version":1}"#,
            r#"{"kind":"assessment","execution":"a","artifact":"p","version":1,"status":"valid","score":0.3,"t":6}"#,
            r#"{"kind":"assessment","execution":"b","artifact":"p","version":1,"status":"valid","score":0.9,"t":6}"#,
            r#"{"kind":"closure","execution":"7","t":5,"status":"completed"}"#,
            r#"{"kind":"execution","execution":"c","t":0,"group":"g2"}"#,
            r#"{"kind":"request","execution":"c","id":"r1","input":[9],"output":[8, 8],"logprobs":[-0.5,-0.25]}"#,
            r#"{"kind":"closure","execution":"c","t":5,"status":"completed","artifact":"p","version":2}"#,
            r#"{"kind":"assessment","execution":"c","artifact":"p","version":2,"status":"valid","score":1,"t":6}"#,
        ]);
        vec![("a.jsonl".into(), a), ("b.jsonl".into(), b)]
    }

    fn load_all(files: &[(String, Vec<u8>)]) -> load::Batch {
        let inputs: Vec<Input> = files
            .iter()
            .map(|(name, bytes)| Input::Memory { name, bytes })
            .collect();
        load_inputs(&inputs, &LoadOptions::default(), &|_, _| {}).expect("loads")
    }

    fn rows(batch: &load::Batch, results: &crate::process::Results) -> Vec<crate::rows::Row> {
        (0..batch.executions.len())
            .flat_map(|i| execution_rows(batch, results, i))
            .collect()
    }

    #[test]
    fn runs_read_in_place_give_the_unsharded_rows() {
        let files = recording();
        let whole = load_all(&files);
        let settings = Settings::default();
        let mode = AdvantageMode::DrGrpo;
        let expected = rows(&whole, &crate::process::process(&whole, &settings, mode));
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<_> = files
            .iter()
            .enumerate()
            .map(|(i, (name, bytes))| {
                let p = dir.path().join(name);
                // The second file compressed: its shards decompress it and keep their runs.
                let bytes = if i == 1 {
                    zstd::encode_all(&bytes[..], 3).unwrap()
                } else {
                    bytes.clone()
                };
                std::fs::write(&p, bytes).unwrap();
                p
            })
            .collect();
        for shards in 1..=4u32 {
            let indexes: Vec<Index> = paths
                .iter()
                .map(|p| index(File::open(p).unwrap(), shards).unwrap())
                .collect();
            assert!(indexes[1].compressed && !indexes[0].compressed);
            assert_eq!(indexes[0].lines, 9);
            let read = AtomicU64::new(0);
            let mut got = Vec::new();
            let mut summaries = Vec::new();
            let mut batches = Vec::new();
            for k in 0..shards as usize {
                let parts: Vec<Part> = paths
                    .iter()
                    .zip(&files)
                    .zip(&indexes)
                    .map(|((p, (name, _)), ix)| Part {
                        name: Path::new(name),
                        source: Source::File(p),
                        runs: Some(&ix.runs[k]),
                        read: &read,
                    })
                    .collect();
                let batch = load_parts(&parts, &LoadOptions::default()).unwrap();
                summaries.push(summarize(&batch));
                batches.push(batch);
            }
            let stats = combine(&summaries).unwrap();
            for b in &batches {
                got.extend(rows(b, &process_shard(b, &settings, mode, &stats).unwrap()));
            }
            let rank: HashMap<&str, usize> = stats
                .order
                .iter()
                .enumerate()
                .map(|(i, id)| (id.as_str(), i))
                .collect();
            got.sort_by_key(|r| (rank[r.execution.as_str()], r.draw));
            assert_eq!(got, expected, "{shards} shards");
            // The plain file is read once over all shards (each its runs), up to read-ahead.
            assert!(read.load(Ordering::Relaxed) > 0);
        }
    }

    #[test]
    fn a_shard_reads_only_its_runs() {
        let files = recording();
        let ix = index(&files[0].1[..], 2).unwrap();
        let total: u64 = ix.runs.iter().flatten().map(|r| r.len).sum();
        assert_eq!(
            total + 1,
            files[0].1.len() as u64,
            "every line once but the blank one"
        );
        for (k, runs) in ix.runs.iter().enumerate() {
            let read = AtomicU64::new(0);
            let part = Part {
                name: Path::new("a.jsonl"),
                source: Source::Memory(&files[0].1),
                runs: Some(runs),
                read: &read,
            };
            let mut text = String::new();
            part.open().unwrap().read_to_string(&mut text).unwrap();
            assert_eq!(read.load(Ordering::Relaxed), part.size());
            let split = &shard::split(&files[0].1[..], 2).unwrap()[k];
            // The part is split's part: same lines in the same places.
            let trimmed = |s: &[u8]| s.iter().rposition(|&b| b != b'\n').map_or(0, |i| i + 1);
            assert_eq!(
                &text.as_bytes()[..trimmed(text.as_bytes())],
                &split[..trimmed(split)],
                "shard {k}"
            );
        }
    }

    #[test]
    fn a_file_refused_whole_goes_to_one_shard() {
        let array = b"[\n{\"kind\":\"execution\",\"execution\":\"a\",\"t\":0},\n]\n";
        let ix = index(&array[..], 3).unwrap();
        assert_eq!(ix.runs[0].len(), 1);
        assert_eq!(ix.runs[0][0].len, array.len() as u64);
        assert_eq!(ix.lines, 3);
        assert!(ix.runs[1].is_empty() && ix.runs[2].is_empty());
        // A byte-order mark does not move line 1 to another shard than its execution's.
        let bom = [
            &b"\xEF\xBB\xBF"[..],
            br#"{"kind":"execution","execution":"zz","t":0}"#,
            b"\n",
            br#"{"kind":"closure","execution":"zz","t":1}"#,
        ]
        .concat();
        let ix = index(&bom[..], 5).unwrap();
        let k = shard_of("zz", 5) as usize;
        assert_eq!(ix.runs[k].len(), 1, "{ix:?}");
        assert_eq!(ix.runs[k][0].lines, 2);
    }

    #[test]
    fn a_rewritten_file_is_an_error_not_a_short_read() {
        let files = recording();
        let ix = index(&files[1].1[..], 1).unwrap();
        let read = AtomicU64::new(0);
        let short = &files[1].1[..files[1].1.len() / 2];
        let part = Part {
            name: Path::new("b.jsonl"),
            source: Source::Memory(short),
            runs: Some(&ix.runs[0]),
            read: &read,
        };
        let e = load_parts(&[part], &LoadOptions::default()).unwrap_err();
        assert!(
            e.to_string().contains("shorter than when it was indexed"),
            "{e}"
        );
    }
}
