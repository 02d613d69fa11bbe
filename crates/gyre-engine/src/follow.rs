//! Following a growing recording for online RL: executions are admitted as they settle, in
//! steps of whole groups, each step's batch exactly what `gyre admit` would read from a file
//! holding only its executions' lines (docs/decisions.md, "Online admission").
//!
//! The file is read from where the last read stopped, complete lines only (a writer half-way
//! through a line is read again at the next poll), so a poll costs the bytes appended. Each line
//! is checked and applied as the loader applies it. An execution is *settled* once no later line
//! can change its rows (docs/format.md §1, §4):
//!
//! * its `execution` record has been read (a later one would set its start, budget and group;
//!   after it, a second one is an error), and
//! * it is closed, and either the closure has no artifact (dummy), or its first valid
//!   assessment of the closure's state within budget has been read (a later assessment comes
//!   later in file order and never displaces it), or the recording's clock (the largest `t` read)
//!   has passed its budget end plus `grace_s` (excluded: no valid reward by budget end).
//!
//! Lines after a closure never change a settled execution's rows except one: a valid assessment
//! of the closure's state with `t` within budget, read after the clock had passed the budget end
//! (an evaluator writing out of time order). Before the execution is handed out it simply counts
//! (the step is processed on what was read); after, it is reported in [`Follower::late`]. A
//! request after closure is outside the execution (§1) and an assessment after the reward changes
//! nothing; both are still checked (ids, `extends`), as the loader would. A second `execution`
//! or `closure` record is the loader's error.
//!
//! A group is complete when `group_size` executions of it have settled; a step holds
//! `executions / group_size` complete groups, in the order they completed. [`Follower::finish`]
//! reads the rest and hands out every execution still held, settled as the whole file settles
//! them.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::execution::{Execution, LineRef};
use super::load::{Batch, Diagnostic, KEPT_DIAGNOSTICS, io_reason, max_line_bytes};
use super::record::{LineError, Record, parse_line};
use super::score::{self, Exclusion, Outcome, group_key};

/// How to follow: the trainer's group size and step size, and how long past a budget end the
/// clock must be before an unassessed execution is excluded.
#[derive(Clone, Debug, PartialEq)]
pub struct FollowOptions {
    /// Executions per GRPO group (every execution needs a `group` when it is above 1; at 1,
    /// every execution is its own group).
    pub group_size: usize,
    /// Executions per step: a multiple of `group_size` (whole groups, excluded members
    /// included; `B` is the step's scored and dummy executions).
    pub executions: usize,
    /// Seconds of recording time past an execution's budget end before it is settled as
    /// excluded for want of a valid assessment (0: as soon as a later `t` is read).
    pub grace_s: f64,
}

impl FollowOptions {
    /// Checks the options: positive sizes, `executions` a multiple of `group_size`, a finite
    /// grace ≥ 0.
    pub fn check(&self) -> Result<(), String> {
        if self.group_size == 0 {
            return Err("group_size must be at least 1".into());
        }
        if self.executions == 0 || self.executions % self.group_size != 0 {
            return Err(format!(
                "executions={} must be a positive multiple of group_size={}: a step holds \
                 whole groups",
                self.executions, self.group_size
            ));
        }
        if !(self.grace_s.is_finite() && self.grace_s >= 0.0) {
            return Err(format!(
                "grace_s must be a finite number ≥ 0, not {}",
                self.grace_s
            ));
        }
        Ok(())
    }
}

/// Following failed: the file cannot be read, was truncated or rewritten, or holds a line the
/// loader would refuse.
#[derive(Clone, Debug, PartialEq)]
pub struct FollowError(pub Diagnostic);

impl fmt::Display for FollowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for FollowError {}

/// A step handed out: whole groups of settled executions.
#[derive(Debug)]
pub struct FollowStep {
    /// Its executions, in order of first appearance in the recording, with the recording's
    /// header: what loading a file of exactly their lines gives.
    pub batch: Batch,
    /// Groups of the step that have fewer than `group_size` executions (only in the steps of
    /// [`Follower::finish`]), as JSON text.
    pub incomplete_groups: Vec<String>,
}

/// What settles an execution, and what is kept of it once handed out.
#[derive(Clone, Debug)]
enum Fate {
    /// Its rows are fixed (scored, dummy, or open/unassessed at the end of the file).
    Fixed,
    /// Excluded because the clock passed `end` with no valid assessment of the closure's
    /// artifact/version/branch.
    ExcludedByClock {
        end: f64,
        artifact: Value,
        version: Value,
        committed: Option<String>,
    },
}

/// An execution handed out in a step: enough to check and judge its later lines.
struct Handed {
    fate: Fate,
    requests: HashMap<String, LineRef>,
    closure_at: Option<LineRef>,
}

/// An execution still held.
struct Held {
    exec: Execution,
    group: Option<String>,
    settled: bool,
}

/// A group being filled.
#[derive(Default)]
struct Group {
    members: Vec<String>,
    settled: usize,
    queued: bool,
}

/// Follows one growing gyre/1 file (see the module docs).
pub struct Follower {
    path: PathBuf,
    file: File,
    identity: Option<(u64, u64)>,
    options: FollowOptions,
    max_line: usize,
    /// Bytes of complete lines read.
    offset: u64,
    /// Lines read.
    line: u64,
    /// The first bytes and the last bytes read (up to 64 each), checked again at every poll.
    head: Vec<u8>,
    tail: Vec<u8>,
    clock: f64,
    header: Option<(Value, u64)>,
    held: HashMap<String, Held>,
    groups: HashMap<String, Group>,
    /// Complete groups, in the order they completed.
    ready: VecDeque<String>,
    /// Closed executions with a budget and no reward yet, by budget end (+ grace).
    waiting: BTreeMap<(u64, String), ()>,
    handed: HashMap<String, Handed>,
    handed_groups: HashSet<String>,
    late: Vec<Diagnostic>,
    late_lines: u64,
    warnings: Vec<Diagnostic>,
    warning_count: u64,
    failed: Option<FollowError>,
    finished: bool,
    open: Vec<String>,
}

/// Bytes of the file's start and of the end of what was read kept to notice a rewrite.
const WITNESS: usize = 64;

/// Most bytes read per read call.
const READ_CHUNK: usize = 1 << 20;

/// `f64` as a key that sorts like the number.
fn order_key(f: f64) -> u64 {
    let b = f.to_bits();
    if b >> 63 == 1 { !b } else { b | 1 << 63 }
}

#[cfg(unix)]
fn identity(m: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn identity(_: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

impl Follower {
    /// Starts following the recording at `path` (nothing is read until [`Follower::poll`]).
    pub fn open(path: &Path, options: FollowOptions) -> Result<Follower, FollowError> {
        let fail = |e: io::Error| {
            FollowError(Diagnostic {
                file: path.to_path_buf(),
                line: 0,
                message: format!("cannot follow: {}", io_reason(&e)),
                field: None,
            })
        };
        options.check().map_err(|message| {
            FollowError(Diagnostic {
                file: path.to_path_buf(),
                line: 0,
                message,
                field: None,
            })
        })?;
        let file = File::open(path).map_err(fail)?;
        let meta = file.metadata().map_err(fail)?;
        if meta.is_dir() {
            return Err(fail(io::Error::from(io::ErrorKind::IsADirectory)));
        }
        Ok(Follower {
            path: path.to_path_buf(),
            identity: identity(&meta),
            file,
            options,
            max_line: max_line_bytes(),
            offset: 0,
            line: 0,
            head: Vec::new(),
            tail: Vec::new(),
            clock: f64::NEG_INFINITY,
            header: None,
            held: HashMap::new(),
            groups: HashMap::new(),
            ready: VecDeque::new(),
            waiting: BTreeMap::new(),
            handed: HashMap::new(),
            handed_groups: HashSet::new(),
            late: Vec::new(),
            late_lines: 0,
            warnings: Vec::new(),
            warning_count: 0,
            failed: None,
            finished: false,
            open: Vec::new(),
        })
    }

    /// The file followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lines read so far.
    pub fn lines(&self) -> u64 {
        self.line
    }

    /// Bytes of complete lines read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Executions read and not yet handed out in a step.
    pub fn pending(&self) -> usize {
        self.held.len()
    }

    /// The recording's clock: the largest `t` read (`None` before any).
    pub fn clock(&self) -> Option<f64> {
        self.clock.is_finite().then_some(self.clock)
    }

    /// Lines that arrived for an execution already handed out and that `gyre admit` over the
    /// whole file would score differently (see the module docs), as diagnostics.
    pub fn late(&self) -> &[Diagnostic] {
        &self.late
    }

    /// Lines read for executions already handed out (requests after closure, assessments after
    /// the reward), which change nothing; [`Follower::late`] included.
    pub fn late_lines(&self) -> u64 {
        self.late_lines
    }

    /// Warnings (unknown kinds and sources, a header not on line 1): the first
    /// [`KEPT_DIAGNOSTICS`].
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// Warnings found, the ones not kept included.
    pub fn warning_count(&self) -> u64 {
        self.warning_count
    }

    /// After [`Follower::finish`]: executions that never closed (excluded, `open`), in order of
    /// first appearance. They are in the last steps' batches and yield no rows.
    pub fn open_executions(&self) -> &[String] {
        &self.open
    }

    /// Whether [`Follower::finish`] was called.
    pub fn finished(&self) -> bool {
        self.finished
    }

    fn error(&self, line: u64, message: impl Into<String>, field: Option<String>) -> FollowError {
        FollowError(Diagnostic {
            file: self.path.clone(),
            line,
            message: message.into(),
            field,
        })
    }

    fn line_error(&self, line: u64, e: LineError) -> FollowError {
        self.error(line, e.message, e.field)
    }

    fn warn(&mut self, line: u64, message: String) {
        self.warning_count += 1;
        if self.warnings.len() < KEPT_DIAGNOSTICS {
            self.warnings.push(Diagnostic {
                file: self.path.clone(),
                line,
                message,
                field: None,
            });
        }
    }

    /// Reads the complete lines appended since the last poll and applies them; then hands out
    /// a step when enough groups are complete. Call it again for further steps: one step per
    /// call, and `None` when there is none yet. An error is final: every later call returns it.
    pub fn poll(&mut self) -> Result<Option<FollowStep>, FollowError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.finished {
            return Err(self.error(0, "finish() was called: nothing more is read", None));
        }
        if let Err(e) = self.read(false) {
            self.failed = Some(e.clone());
            return Err(e);
        }
        Ok(self.next_step())
    }

    /// Reads to the end of the file (a last line without a newline included, as the loader
    /// reads it), settles every execution still held as the whole file settles it, and hands
    /// them all out: complete groups first, in the order they completed, then the others in
    /// order of first appearance, in steps of whole groups. Executions that never closed are in
    /// these steps (they yield no rows) and listed by [`Follower::open_executions`].
    pub fn finish(&mut self) -> Result<Vec<FollowStep>, FollowError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.finished {
            return Ok(Vec::new());
        }
        if let Err(e) = self.read(true) {
            self.failed = Some(e.clone());
            return Err(e);
        }
        self.finished = true;
        let mut open: Vec<(LineRef, String)> = self
            .held
            .values()
            .filter(|h| h.exec.closure.is_none())
            .map(|h| (h.exec.first_seen, h.exec.id.clone()))
            .collect();
        open.sort_unstable();
        self.open = open.into_iter().map(|(_, id)| id).collect();
        // Nothing more can be read: every execution's rows are now fixed.
        let mut unsettled: Vec<(LineRef, String)> = self
            .held
            .values()
            .filter(|h| !h.settled)
            .map(|h| (h.exec.first_seen, h.exec.id.clone()))
            .collect();
        unsettled.sort_unstable();
        for (_, id) in unsettled {
            self.settle(&id);
        }
        let mut steps = Vec::new();
        while let Some(step) = self.next_step() {
            steps.push(step);
        }
        self.ready.clear();
        // The rest: every execution still held, by group, groups in order of first appearance.
        let mut rest: Vec<&Held> = self.held.values().collect();
        rest.sort_by_key(|h| h.exec.first_seen);
        let mut order: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        for h in rest {
            let key = h.group.clone().unwrap_or_else(|| singleton_key(&h.exec.id));
            if seen.insert(key.clone()) {
                order.push(key);
            }
        }
        let per_step = self.options.executions / self.options.group_size;
        for keys in order.chunks(per_step.max(1)) {
            let members: Vec<String> = keys
                .iter()
                .flat_map(|k| match self.groups.get(k) {
                    Some(g) => g.members.clone(),
                    None => vec![singleton_id(k).to_owned()],
                })
                .collect();
            let incomplete = keys
                .iter()
                .filter(|k| {
                    self.groups
                        .get(*k)
                        .is_none_or(|g| g.members.len() < self.options.group_size)
                })
                .map(|k| display_group(k))
                .collect();
            steps.push(self.hand_out(keys, &members, incomplete));
        }
        Ok(steps)
    }

    /// Checks that the file is still the one being read and reads its new complete lines (all
    /// of it with `to_end`).
    fn read(&mut self, to_end: bool) -> Result<(), FollowError> {
        let io_err = |s: &Self, what: &str, e: io::Error| {
            s.error(0, format!("{what}: {}", io_reason(&e)), None)
        };
        let meta = std::fs::metadata(&self.path).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                self.error(0, "the recording being followed was removed", None)
            } else {
                io_err(self, "cannot follow", e)
            }
        })?;
        if identity(&meta) != self.identity {
            return Err(self.error(
                0,
                "the recording being followed was replaced by another file (rewritten or \
                 moved); follow the new one from its start",
                None,
            ));
        }
        let len = meta.len();
        if len < self.offset {
            return Err(self.error(
                0,
                format!(
                    "the recording being followed was truncated to {len} bytes after {} had \
                     been read (lines 1–{}); rows already handed out may not match it any more",
                    self.offset, self.line
                ),
                None,
            ));
        }
        self.check_witnesses()
            .map_err(|e| io_err(self, "cannot read the recording", e))?;
        if len == self.offset {
            return Ok(());
        }
        let mut file = self
            .file
            .try_clone()
            .map_err(|e| io_err(self, "cannot read the recording", e))?;
        file.seek(SeekFrom::Start(self.offset))
            .map_err(|e| io_err(self, "cannot read the recording", e))?;
        let mut reader = file.take(len - self.offset);
        let mut buf: Vec<u8> = Vec::new();
        let mut chunk = vec![0u8; READ_CHUNK];
        loop {
            let n = reader
                .read(&mut chunk)
                .map_err(|e| io_err(self, "cannot read the recording", e))?;
            if n == 0 {
                break;
            }
            let scan_from = buf.len();
            buf.extend_from_slice(&chunk[..n]);
            if self.offset == 0 && scan_from == 0 && is_compressed(&buf) {
                return Err(self.error(
                    1,
                    "the recording is compressed: only plain JSONL can be followed while it is \
                     written",
                    None,
                ));
            }
            let mut start = 0;
            let mut from = scan_from;
            while let Some(i) = memchr::memchr(b'\n', &buf[from..]) {
                let end = from + i;
                self.take_line(&buf[start..end], end + 1 - start)?;
                start = end + 1;
                from = start;
            }
            buf.drain(..start);
            if buf.len() > self.max_line {
                return Err(self.error(
                    self.line + 1,
                    format!(
                        "line is longer than the limit of {} MiB (set {} to a larger number of \
                         MiB to raise it)",
                        self.max_line >> 20,
                        super::load::MAX_LINE_ENV
                    ),
                    None,
                ));
            }
        }
        if to_end && !buf.is_empty() {
            let n = buf.len();
            self.take_line(&buf, n)?;
        }
        Ok(())
    }

    /// Re-reads the first and the last bytes read: a file rewritten in place under the same
    /// name and no shorter is noticed there.
    fn check_witnesses(&self) -> io::Result<()> {
        let mut file = &self.file;
        let mut check = |at: u64, want: &[u8]| -> io::Result<bool> {
            if want.is_empty() {
                return Ok(true);
            }
            let mut got = vec![0u8; want.len()];
            file.seek(SeekFrom::Start(at))?;
            file.read_exact(&mut got)?;
            Ok(got == want)
        };
        if !check(0, &self.head)? || !check(self.offset - self.tail.len() as u64, &self.tail)? {
            return Err(io::Error::other(
                "the part already read changed: the file was rewritten in place; follow it \
                 again from its start",
            ));
        }
        Ok(())
    }

    /// One line of `consumed` bytes (its newline included) read whole.
    fn take_line(&mut self, raw: &[u8], consumed: usize) -> Result<(), FollowError> {
        self.line += 1;
        let at = self.line;
        if self.head.len() < WITNESS {
            let want = WITNESS - self.head.len();
            let mut bytes = raw.to_vec();
            if raw.len() < consumed {
                bytes.push(b'\n');
            }
            self.head.extend_from_slice(&bytes[..want.min(bytes.len())]);
        }
        self.offset += consumed as u64;
        let mut tail = std::mem::take(&mut self.tail);
        tail.extend_from_slice(raw);
        if raw.len() < consumed {
            tail.push(b'\n');
        }
        let cut = tail.len().saturating_sub(WITNESS);
        self.tail = tail.split_off(cut);
        let mut line = raw;
        if at == 1 {
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
            if line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
                return Err(self.error(
                    1,
                    "this is a JSON array, not JSONL: write one record per line \
                     (e.g. `jq -c '.[]' FILE > FILE.jsonl`)",
                    None,
                ));
            }
        }
        while let [rest @ .., b'\r'] = line {
            line = rest;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        if at == 1 && line.trim_ascii() == b"{" {
            return Err(self.error(
                1,
                "this is one pretty-printed JSON document, not JSONL: write one record per \
                 line (e.g. `jq -c . FILE > FILE.jsonl`)",
                None,
            ));
        }
        let parsed = parse_line(line).map_err(|e| self.line_error(at, e))?;
        for w in parsed.warnings {
            self.warn(at, w);
        }
        self.apply(parsed.record, at)
    }

    fn apply(&mut self, record: Record, at: u64) -> Result<(), FollowError> {
        let t = match &record {
            Record::Execution(r) => Some(r.t),
            Record::Request(r) => r.t,
            Record::Assessment(r) => Some(r.t),
            Record::Closure(r) => Some(r.t),
            Record::Trained(_) | Record::Header(_) | Record::Unknown(_) => None,
        };
        let id = match &record {
            Record::Header(h) => {
                if at != 1 {
                    self.warn(at, "header is not on the first line; read anyway".into());
                }
                self.check_tokenizer(h, at)?;
                if self.header.is_none() {
                    self.header = Some((h.clone(), at));
                }
                return Ok(());
            }
            Record::Unknown(_) => return Ok(()),
            r => r.execution().unwrap_or_default().to_owned(),
        };
        let here = LineRef { file: 0, line: at };
        if self.handed.contains_key(&id) {
            self.apply_late(&id, record, here)?;
        } else {
            let held = self.held.entry(id.clone()).or_insert_with(|| Held {
                exec: Execution::new(id.clone(), here),
                group: None,
                settled: false,
            });
            let earlier = held.exec.clash(&record);
            let declares = matches!(record, Record::Execution(_));
            if let Err(mut e) = held.exec.apply(record, here) {
                if let Some(first) = earlier {
                    e.message = format!(
                        "{} (first at {}:{})",
                        e.message,
                        self.path.display(),
                        first.line
                    );
                }
                return Err(self.line_error(at, e));
            }
            if declares {
                self.join_group(&id, at)?;
            }
            self.check_settled(&id);
        }
        if let Some(t) = t.filter(|t| *t > self.clock) {
            self.clock = t;
            self.settle_by_clock();
        }
        Ok(())
    }

    /// A header's `tokenizer` path must name a readable file (docs/format.md §7), as the
    /// loader checks it.
    fn check_tokenizer(&self, header: &Value, at: u64) -> Result<(), FollowError> {
        let Some(spec) = header.get("tokenizer") else {
            return Ok(());
        };
        let Some(path) = gyre_format::tokenizer_spec::header_path(spec) else {
            return Ok(());
        };
        let dir = self.path.parent().unwrap_or(Path::new(""));
        let resolved = gyre_format::tokenizer_spec::resolve_path(dir, path);
        match gyre_format::tokenizer_spec::check_file(&resolved) {
            Ok(_) => Ok(()),
            Err(why) => Err(self.error(
                at,
                format!("tokenizer path \"{path}\": {why}"),
                Some("tokenizer.path".into()),
            )),
        }
    }

    /// Files execution `id` (whose `execution` record was just read) under its group.
    fn join_group(&mut self, id: &str, at: u64) -> Result<(), FollowError> {
        let size = self.options.group_size;
        let Some(held) = self.held.get_mut(id) else {
            return Ok(());
        };
        let key = match held.exec.group() {
            Some(g) => group_key(g),
            None if size == 1 => singleton_key(id),
            None => {
                return Err(self.error(
                    at,
                    format!(
                        "execution \"{id}\" has no group, but the follower was told groups of \
                         {size} (group_size=1 follows executions one by one)"
                    ),
                    Some("group".into()),
                ));
            }
        };
        held.group = Some(key.clone());
        if self.handed_groups.contains(&key) {
            return Err(self.error(
                at,
                format!(
                    "execution \"{id}\" joins group {} after it was handed out complete with \
                     {size} executions",
                    display_group(&key)
                ),
                Some("group".into()),
            ));
        }
        let group = self.groups.entry(key.clone()).or_default();
        if group.members.len() >= size {
            return Err(self.error(
                at,
                format!(
                    "group {} has more than group_size={size} executions (\"{id}\" is one too \
                     many)",
                    display_group(&key)
                ),
                Some("group".into()),
            ));
        }
        group.members.push(id.to_owned());
        Ok(())
    }

    /// Settles execution `id` when its rows can no longer change (the clock aside: see
    /// [`Follower::settle_by_clock`]), and queues its group when that completes it.
    fn check_settled(&mut self, id: &str) {
        let Some(held) = self.held.get_mut(id) else {
            return;
        };
        if held.settled || held.exec.info.is_none() {
            return;
        }
        let exec = &held.exec;
        let settled = match score::score(exec) {
            Outcome::Scored { .. } | Outcome::Dummy => true,
            Outcome::Excluded(Exclusion::Open) => false,
            Outcome::Excluded(Exclusion::NoValidReward) => {
                if let Some(b) = exec.budget() {
                    let end = exec.start() + b + self.options.grace_s;
                    if self.clock > end {
                        true
                    } else {
                        self.waiting.insert((order_key(end), id.to_owned()), ());
                        false
                    }
                } else {
                    false
                }
            }
        };
        if settled {
            self.settle(id);
        }
    }

    /// Settles the executions whose budget end (+ grace) the clock has passed.
    fn settle_by_clock(&mut self) {
        let clock = self.clock;
        while let Some(((key, _), ())) = self.waiting.first_key_value() {
            if *key >= order_key(clock) {
                break;
            }
            let Some(((_, id), ())) = self.waiting.pop_first() else {
                break;
            };
            if self.held.get(&id).is_some_and(|h| !h.settled) {
                self.settle(&id);
            }
        }
    }

    fn settle(&mut self, id: &str) {
        let Some(held) = self.held.get_mut(id) else {
            return;
        };
        held.settled = true;
        let Some(key) = held.group.clone() else {
            return;
        };
        let size = self.options.group_size;
        if let Some(g) = self.groups.get_mut(&key) {
            g.settled += 1;
            if g.settled == size && g.members.len() == size && !g.queued {
                g.queued = true;
                self.ready.push_back(key);
            }
        }
    }

    /// A line of an execution already handed out: checked, then judged (see the module docs).
    fn apply_late(&mut self, id: &str, record: Record, at: LineRef) -> Result<(), FollowError> {
        self.late_lines += 1;
        let path = self.path.display().to_string();
        let Some(h) = self.handed.get_mut(id) else {
            return Ok(());
        };
        let fail = |message: String, field: &str| {
            Err(FollowError(Diagnostic {
                file: PathBuf::from(&path),
                line: at.line,
                message,
                field: Some(field.into()),
            }))
        };
        match record {
            Record::Execution(_) => {
                fail(format!("execution \"{id}\" is declared twice"), "execution")
            }
            Record::Closure(_) => {
                let first = h
                    .closure_at
                    .map_or(String::new(), |c| format!(" (first at {path}:{})", c.line));
                fail(
                    format!("execution \"{id}\" already has a closure{first}"),
                    "kind",
                )
            }
            Record::Request(r) => {
                if let Some(first) = h.requests.get(&r.id) {
                    return fail(
                        format!(
                            "request id \"{}\" is already used in execution \"{id}\" (first at \
                             {path}:{})",
                            r.id, first.line
                        ),
                        "id",
                    );
                }
                if let Some(e) = r.extends.as_ref().filter(|e| !h.requests.contains_key(*e)) {
                    return fail(
                        format!(
                            "extends names \"{e}\", which is not an earlier request of \
                             execution \"{id}\""
                        ),
                        "extends",
                    );
                }
                h.requests.insert(r.id.clone(), at);
                Ok(())
            }
            Record::Assessment(a) => {
                if let Fate::ExcludedByClock {
                    end,
                    artifact,
                    version,
                    committed,
                } = &h.fate
                {
                    let branch_ok = match (&a.branch, committed) {
                        (Some(b), Some(c)) => b == c,
                        _ => true,
                    };
                    if a.valid
                        && a.t <= *end
                        && &a.artifact == artifact
                        && &a.version == version
                        && branch_ok
                    {
                        self.late.push(Diagnostic {
                            file: PathBuf::from(&path),
                            line: at.line,
                            message: format!(
                                "execution \"{id}\" was handed out excluded (the recording's \
                                 clock had passed its budget end {end} with no valid \
                                 assessment), but this valid assessment has t = {} within the \
                                 budget: `gyre admit` over the whole file scores it",
                                a.t
                            ),
                            field: None,
                        });
                    }
                }
                Ok(())
            }
            // A trainer's rows (docs/format.md §9) change no admission decision.
            Record::Trained(_) | Record::Header(_) | Record::Unknown(_) => Ok(()),
        }
    }

    /// The next step when enough groups are complete.
    fn next_step(&mut self) -> Option<FollowStep> {
        let per_step = self.options.executions / self.options.group_size;
        if self.ready.len() < per_step {
            return None;
        }
        let keys: Vec<String> = self.ready.drain(..per_step).collect();
        let members: Vec<String> = keys
            .iter()
            .flat_map(|k| {
                self.groups
                    .get(k)
                    .map(|g| g.members.clone())
                    .unwrap_or_default()
            })
            .collect();
        Some(self.hand_out(&keys, &members, Vec::new()))
    }

    /// Takes `members` (of groups `keys`) out of the follower as a step.
    fn hand_out(
        &mut self,
        keys: &[String],
        members: &[String],
        incomplete: Vec<String>,
    ) -> FollowStep {
        let mut executions: Vec<Execution> = Vec::with_capacity(members.len());
        for id in members {
            let Some(held) = self.held.remove(id) else {
                continue;
            };
            let mut exec = held.exec;
            let fate = match (score::score(&exec), &exec.closure, exec.budget()) {
                (Outcome::Excluded(Exclusion::NoValidReward), Some(c), Some(b)) => {
                    Fate::ExcludedByClock {
                        end: exec.start() + b,
                        artifact: c.record.artifact.clone().unwrap_or(Value::Null),
                        version: c.record.version.clone().unwrap_or(Value::Null),
                        committed: c.record.committed.clone(),
                    }
                }
                _ => Fate::Fixed,
            };
            self.handed.insert(
                id.clone(),
                Handed {
                    fate,
                    requests: exec.requests.iter().map(|r| (r.id.clone(), r.at)).collect(),
                    closure_at: exec.closure.as_ref().map(|c| c.at),
                },
            );
            exec.finish_loading();
            executions.push(exec);
        }
        for k in keys {
            self.groups.remove(k);
            self.handed_groups.insert(k.clone());
        }
        self.waiting
            .retain(|(_, id), ()| self.held.contains_key(id));
        executions.sort_by_key(|e| e.first_seen);
        FollowStep {
            batch: Batch {
                files: vec![self.path.clone()],
                headers: vec![self.header.clone()],
                executions,
                ..Batch::default()
            },
            incomplete_groups: incomplete,
        }
    }
}

/// Whether `bytes` start like a gzip or zstd stream.
fn is_compressed(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b]) || bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd])
}

/// The group key of an execution that is its own group (JSON text never starts with `#`).
fn singleton_key(id: &str) -> String {
    format!("#{id}")
}

fn singleton_id(key: &str) -> &str {
    key.strip_prefix('#').unwrap_or(key)
}

/// A group key as a person reads it: the group's JSON text, or `(execution X alone)`.
fn display_group(key: &str) -> String {
    match key.strip_prefix('#') {
        Some(id) => format!("(execution \"{id}\" alone)"),
        None => key.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::export::{Row, execution_rows};
    use crate::load::{LoadOptions, load_bytes};
    use crate::recgen::{self, GenOptions};
    use crate::score::AdvantageMode;

    /// 64 random executions in groups of 4 with every scoring fate (a request after closure
    /// included), their records interleaved round-robin so that groups complete out of order.
    fn lines(seed: u64) -> Vec<Vec<u8>> {
        let execs = recgen::generate(&GenOptions {
            executions: 64,
            turns: 3,
            seed,
            ..GenOptions::default()
        });
        let mut out = Vec::new();
        let longest = execs.iter().map(|e| e.records.len()).max().unwrap_or(0);
        for i in 0..longest + 5 {
            for (k, e) in execs.iter().enumerate() {
                // Executions start at different times, so some lag far behind.
                let Some(i) = i.checked_sub(k % 5) else {
                    continue;
                };
                if i < e.records.len() {
                    let mut line = Vec::new();
                    recgen::write_record(e, i, false, &mut line).unwrap();
                    out.push(line);
                }
            }
        }
        out
    }

    fn rows_of(batch: &Batch) -> Vec<Row> {
        let results = crate::process(batch, &Default::default(), AdvantageMode::DrGrpo);
        (0..batch.executions.len())
            .flat_map(|i| execution_rows(batch, &results, i))
            .collect()
    }

    fn execution_of(line: &[u8]) -> String {
        let v: Value = serde_json::from_slice(line).unwrap();
        v["execution"].as_str().unwrap().to_owned()
    }

    /// Follows `lines` appended in pieces that cut lines anywhere; the steps, the follower.
    fn follow_pieces(lines: &[Vec<u8>], grace_s: f64) -> (Vec<FollowStep>, usize, Follower) {
        let all: Vec<u8> = lines.concat();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        let mut file = File::create(&path).unwrap();
        let options = FollowOptions {
            group_size: 4,
            executions: 8,
            grace_s,
        };
        let mut f = Follower::open(&path, options).unwrap();
        let mut steps = Vec::new();
        for piece in all.chunks(997) {
            file.write_all(piece).unwrap();
            file.flush().unwrap();
            while let Some(step) = f.poll().unwrap() {
                assert_eq!(step.batch.executions.len(), 8);
                steps.push(step);
            }
        }
        let online = steps.len();
        steps.extend(f.finish().unwrap());
        (steps, online, f)
    }

    /// The executions of `step` and `gyre admit`'s batch over exactly their lines.
    fn reference(lines: &[Vec<u8>], step: &FollowStep) -> (HashSet<String>, Batch) {
        let ids: HashSet<String> = step.batch.executions.iter().map(|e| e.id.clone()).collect();
        let own: Vec<u8> = lines
            .iter()
            .filter(|l| ids.contains(&execution_of(l)))
            .flatten()
            .copied()
            .collect();
        let batch = load_bytes("run.jsonl", &own, &LoadOptions::default()).unwrap();
        (ids, batch)
    }

    #[test]
    fn steps_are_gyre_admit_over_their_executions_lines() {
        for seed in [1, 2, 3] {
            let lines = lines(seed);
            // recgen's times are not one clock (an assessment at t = 601 of one execution comes
            // before another's at t = 100): a large grace settles by assessments only.
            let (steps, online, f) = follow_pieces(&lines, 1e9);
            assert!(
                online >= 1,
                "seed {seed}: some groups settle before the end"
            );
            let mut seen = HashSet::new();
            for (k, step) in steps.iter().enumerate() {
                let (ids, want) = reference(&lines, step);
                for id in &ids {
                    assert!(seen.insert(id.clone()), "{id} handed out twice");
                }
                let groups: HashSet<String> = step
                    .batch
                    .executions
                    .iter()
                    .map(|e| group_key(e.group().unwrap()))
                    .collect();
                if k < online {
                    assert_eq!(groups.len(), 2, "two whole groups per step");
                }
                assert_eq!(
                    rows_of(&step.batch),
                    rows_of(&want),
                    "seed {seed}, step {k}"
                );
            }
            assert_eq!(seen.len(), 64);
            assert!(f.late().is_empty());
            let all: Vec<u8> = lines.concat();
            let batch = load_bytes("run.jsonl", &all, &LoadOptions::default()).unwrap();
            let results = crate::process(&batch, &Default::default(), AdvantageMode::DrGrpo);
            let want: Vec<&String> = batch
                .executions
                .iter()
                .zip(&results.outcomes)
                .filter(|(_, o)| **o == Outcome::Excluded(Exclusion::Open))
                .map(|(e, _)| &e.id)
                .collect();
            assert_eq!(f.open_executions().iter().collect::<Vec<_>>(), want);
        }
    }

    #[test]
    fn a_step_differs_from_gyre_admit_only_where_a_late_line_says_so() {
        let mut reported = 0;
        for seed in [1, 2, 3] {
            let lines = lines(seed);
            let (steps, _, f) = follow_pieces(&lines, 0.0);
            let late: Vec<String> = f.late().iter().map(|d| d.message.clone()).collect();
            reported += late.len();
            for step in &steps {
                let (ids, want) = reference(&lines, step);
                if rows_of(&step.batch) != rows_of(&want) {
                    assert!(
                        ids.iter().any(|id| late
                            .iter()
                            .any(|m| m.starts_with(&format!("execution \"{id}\" was handed out")))),
                        "seed {seed}: a step differs with no late line naming one of {ids:?}"
                    );
                }
            }
        }
        assert!(
            reported > 0,
            "recgen's out-of-order times give late assessments"
        );
    }

    fn follow_text(
        text: &str,
        group_size: usize,
        executions: usize,
    ) -> (PathBuf, Follower, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        std::fs::write(&path, text).unwrap();
        let f = Follower::open(
            &path,
            FollowOptions {
                group_size,
                executions,
                grace_s: 0.0,
            },
        )
        .unwrap();
        (path, f, dir)
    }

    const ONE: &str = concat!(
        r#"{"kind":"execution","execution":"a","t":0,"budget_s":10,"group":"g"}"#,
        "\n",
        r#"{"kind":"request","execution":"a","id":"r1","input":[1,2],"output":[3],"logprobs":[-0.5],"t":1}"#,
        "\n",
        r#"{"kind":"closure","execution":"a","t":2,"status":"completed","artifact":"p","version":1}"#,
        "\n",
    );

    #[test]
    fn the_clock_excludes_and_a_late_assessment_is_reported() {
        let (path, mut f, _dir) = follow_text(ONE, 1, 1);
        assert!(
            f.poll().unwrap().is_none(),
            "closed, not assessed, clock 2 < 10"
        );
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        // Another execution's line moves the clock past a's budget end: a is excluded.
        writeln!(
            file,
            r#"{{"kind":"execution","execution":"b","t":11,"group":"h"}}"#
        )
        .unwrap();
        let step = f.poll().unwrap().expect("a settles by the clock");
        assert_eq!(step.batch.executions[0].id, "a");
        assert!(rows_of(&step.batch).is_empty());
        // A request after closure is outside the execution: read, checked, harmless.
        writeln!(
            file,
            r#"{{"kind":"request","execution":"a","id":"r2","extends":"r1","input":[4],"output":[5],"logprobs":[-0.1],"t":12}}"#
        )
        .unwrap();
        assert!(f.poll().unwrap().is_none());
        assert_eq!((f.late_lines(), f.late().len()), (1, 0));
        writeln!(
            file,
            r#"{{"kind":"assessment","execution":"a","artifact":"p","version":1,"status":"valid","score":1,"t":9}}"#
        )
        .unwrap();
        assert!(f.poll().unwrap().is_none());
        assert_eq!(f.late().len(), 1);
        assert!(
            f.late()[0]
                .to_string()
                .contains(":6: execution \"a\" was handed out excluded")
        );
        // A second closure of a handed-out execution is the loader's error, naming its line.
        writeln!(
            file,
            r#"{{"kind":"closure","execution":"a","t":12,"status":"completed"}}"#
        )
        .unwrap();
        let e = f.poll().unwrap_err().to_string();
        assert!(
            e.ends_with(
                ":7: execution \"a\" already has a closure (first at {}:3) (kind)"
                    .replace("{}", &path.display().to_string())
                    .as_str()
            ),
            "{e}"
        );
        assert_eq!(f.poll().unwrap_err().to_string(), e, "an error is final");
    }

    #[test]
    fn a_rewritten_or_truncated_file_is_an_error() {
        let (path, mut f, _dir) = follow_text(ONE, 1, 1);
        assert!(f.poll().unwrap().is_none());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(10)
            .unwrap();
        let e = f.poll().unwrap_err().to_string();
        assert!(e.contains("truncated to 10 bytes after"), "{e}");

        let (path, mut f, _dir) = follow_text(ONE, 1, 1);
        assert!(f.poll().unwrap().is_none());
        // Same length, changed within the first bytes.
        let rewritten = ONE.replacen("\"a\"", "\"A\"", 1);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .write_all(rewritten.as_bytes())
            .unwrap();
        let e = f.poll().unwrap_err().to_string();
        assert!(e.contains("rewritten in place"), "{e}");
    }

    #[test]
    fn groups_must_fit_the_declared_size() {
        let text = concat!(
            r#"{"kind":"execution","execution":"a","t":0,"group":"g"}"#,
            "\n",
            r#"{"kind":"execution","execution":"b","t":0,"group":"g"}"#,
            "\n",
            r#"{"kind":"execution","execution":"c","t":0}"#,
            "\n",
        );
        let (_p, mut f, _dir) = follow_text(text, 1, 1);
        let e = f.poll().unwrap_err().to_string();
        assert!(
            e.contains(":2: group \"g\" has more than group_size=1 executions"),
            "{e}"
        );
        let (_p, mut f, _dir) = follow_text(text, 2, 2);
        let e = f.poll().unwrap_err().to_string();
        assert!(e.contains(":3: execution \"c\" has no group"), "{e}");
        let bad = FollowOptions {
            group_size: 4,
            executions: 6,
            grace_s: 0.0,
        };
        assert!(
            bad.check()
                .unwrap_err()
                .contains("multiple of group_size=4")
        );
    }

    #[test]
    fn a_partial_last_line_waits_and_finish_reads_it() {
        let cut = ONE.len() - 10;
        let (path, mut f, _dir) = follow_text(&ONE[..cut], 1, 1);
        assert!(f.poll().unwrap().is_none());
        assert_eq!(f.lines(), 2);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(&ONE.as_bytes()[cut..ONE.len() - 1]).unwrap();
        assert!(f.poll().unwrap().is_none());
        assert_eq!(f.lines(), 2, "still no newline");
        let steps = f.finish().unwrap();
        assert_eq!(f.lines(), 3);
        assert_eq!(steps.len(), 1);
        assert!(steps[0].batch.executions[0].closure.is_some());
        assert!(f.open_executions().is_empty());
    }
}
