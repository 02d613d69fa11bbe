//! The words the inspector's parts share: the one [`Selection`] every pane follows, the panes'
//! names ([`Pane`]) and answers ([`Effect`]), the [`Action`]s that change the state, and what
//! background work reports ([`Msg`], [`Jobs`], [`Found`], [`Rerun`]). It sits below the panes,
//! the overlays, search and the app, and imports none of them, so every one of them can speak
//! it without an import loop.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Instant;

use gyre_engine::Results;
use gyre_engine::admit::Settings;
use gyre_engine::load::Batch;
use gyre_engine::score::AdvantageMode;
use gyre_engine::stats::Totals;
use gyre_engine::tree::NodeId;
use gyre_text::TokenText;

use crate::audit::Audited;
use crate::keys::Command;
use crate::whatif::WhatIf;

/// The one selection every pane follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// Execution index.
    pub exec: usize,
    /// The request whose path is shown.
    pub request: Option<u32>,
    /// Replay step: draws shown as made (`0..=n`).
    pub step: u32,
    /// Generation of the results on screen (each re-run makes a new one).
    pub generation: u64,
    /// Generation of the batch on screen (a recording read again under `--follow` makes a new
    /// one): indices into executions, requests and tree nodes hold only within one.
    pub batch: u64,
    /// The trained sample highlighted (an index into the execution's samples).
    pub sample: Option<u32>,
}

/// What is being loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Reading records: bytes.
    Reading,
    /// Scoring and admitting: executions.
    Admitting,
}

/// Loading state.
#[derive(Clone, Debug, PartialEq)]
pub enum Load {
    /// Working on `phase`: `done` of `total`.
    Loading {
        /// The phase.
        phase: Phase,
        /// Done so far.
        done: u64,
        /// In all.
        total: u64,
    },
    /// Loading failed.
    Failed(String),
    /// Data is there.
    Ready,
}

/// A pane that can take the focus; numbered as the keys `1`–`6` jump to them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pane {
    /// The executions list.
    Executions,
    /// The request tree.
    Tree,
    /// The draw log at the replay step.
    Replay,
    /// Assessments and the closure.
    Assessments,
    /// The token path.
    Tokens,
    /// Fate, tool calls, results, sibling diff.
    Detail,
}

impl Pane {
    /// Every pane, in number order.
    pub const ALL: [Pane; 6] = [
        Pane::Executions,
        Pane::Tree,
        Pane::Replay,
        Pane::Assessments,
        Pane::Tokens,
        Pane::Detail,
    ];

    /// The key that jumps here (`1`–`6`).
    pub fn number(self) -> u8 {
        Pane::ALL.iter().position(|&p| p == self).unwrap_or(0) as u8 + 1
    }

    /// The pane numbered `n`.
    pub fn numbered(n: u8) -> Option<Pane> {
        Pane::ALL.get((n as usize).checked_sub(1)?).copied()
    }
}

/// A change a pane asks for; the app applies it to the shared selection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Open execution `i` (index into the batch).
    OpenExec(usize),
    /// Show request `r`'s path, cursor on its output.
    SelectRequest(u32),
    /// Show request `r`'s path with the cursor at path position `pos`.
    ShowPos {
        /// The request.
        request: u32,
        /// Path position.
        pos: u64,
    },
    /// Open execution `exec` on request `request` at `pos`.
    Jump {
        /// Execution index.
        exec: usize,
        /// The request.
        request: u32,
        /// Path position.
        pos: u64,
    },
    /// Show the draw log at step `k`.
    Step(u32),
    /// Move the focus.
    Focus(Pane),
    /// A status message.
    Message(String),
}

/// What a settings change did: batch and execution figures of the results shown before and of
/// those shown after, with the settings of each (a burst of keys can put several changes
/// between the two: the line names them all, never only the last key's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The change, from the settings before to those after (`J_max 5 → 10`).
    pub what: String,
    /// Settings of the results shown before.
    pub settings_before: Settings,
    /// Their advantage mode.
    pub advantage_before: AdvantageMode,
    /// Settings of the results shown after.
    pub settings_after: Settings,
    /// Their advantage mode.
    pub advantage_after: AdvantageMode,
    /// Batch totals before.
    pub before: Totals,
    /// Batch totals after.
    pub after: Totals,
    /// The selected execution's id.
    pub exec: String,
    /// Its totals before.
    pub exec_before: Totals,
    /// Its totals after.
    pub exec_after: Totals,
}

/// Results of an engine re-run for `settings`.
#[derive(Debug)]
pub struct Rerun {
    /// The batch they were made on.
    pub batch: Arc<Batch>,
    /// What they were made with.
    pub settings: Settings,
    /// Advantage mode.
    pub advantage: AdvantageMode,
    /// The results.
    pub results: Results,
    /// Their totals.
    pub totals: Totals,
}

/// What the run loop waits for: a terminal event, or the report of background work.
#[derive(Debug)]
pub enum Msg {
    /// A terminal event (key, mouse, resize).
    Term(crossterm::event::Event),
    /// Background work finished (or made progress).
    Done(Action),
}

/// Where background work (loading, re-runs, search, exports) reports back.
#[derive(Clone, Debug)]
pub struct Jobs(Sender<Msg>);

impl Jobs {
    /// A handle and the receiving end the run loop (or a test) reads.
    pub fn channel() -> (Jobs, Receiver<Msg>) {
        let (tx, rx) = channel();
        (Jobs(tx), rx)
    }

    /// Reports an action (ignored once the inspector has quit).
    pub fn send(&self, a: Action) {
        let _ = self.0.send(Msg::Done(a));
    }

    /// Forwards a terminal event; false once nobody listens.
    pub fn term(&self, ev: crossterm::event::Event) -> bool {
        self.0.send(Msg::Term(ev)).is_ok()
    }
}

/// One change to the state.
#[derive(Debug)]
pub enum Action {
    /// A bound command.
    Cmd(Command),
    /// A character typed into an overlay.
    Input(char),
    /// Backspace in an overlay's field.
    Backspace,
    /// Ctrl-U in an overlay's field.
    ClearField,
    /// Ctrl-W in an overlay's field.
    DeleteWord,
    /// Mouse click at a cell.
    Click(u16, u16),
    /// Mouse wheel at a cell (`true` = down).
    Wheel(u16, u16, bool),
    /// The terminal was resized.
    Resize(u16, u16),
    /// Loading progress: phase, done, total.
    Progress(Phase, u64, u64),
    /// Loading finished (the engine runs here, on the caller's thread).
    Loaded(Result<Box<Batch>, String>),
    /// Loading finished and the engine already ran (off the UI thread).
    Processed(Arc<Batch>, Box<Results>),
    /// The followed recording grew: its new contents, admitted (`--follow`).
    Grown(Arc<Batch>, Box<Results>),
    /// A re-run finished.
    Rerun(Box<Rerun>),
    /// The tokenizer to show token text with.
    Text(TokenText),
    /// A tokenizer is being loaded (ids are shown meanwhile).
    TextLoading(String),
    /// The tokenizer could not be loaded: why (ids stay on screen).
    TextFailed(String),
    /// A message for the status line.
    Message(String),
    /// An export finished: its path and the status line to show.
    Exported(PathBuf, String),
    /// Search hits from a worker.
    Found(Found),
    /// The clock: messages older than `app::MESSAGE_TTL` fade.
    Tick(Instant),
    /// The lens and sweep of a batch, worked out in the background.
    WhatIf(Arc<WhatIf>),
    /// Their progress: done of total.
    WhatIfProgress(usize, usize),
    /// The audit of a batch's trained samples, worked out in the background.
    Audited(Arc<Audited>),
}

/// One match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hit {
    /// An execution whose id matches.
    Execution(usize),
    /// A request whose id matches.
    Request {
        /// Execution index.
        exec: usize,
        /// Request index.
        request: u32,
    },
    /// Tokens `start..end` of a tree node whose text matches.
    Tokens {
        /// Execution index.
        exec: usize,
        /// The node.
        node: NodeId,
        /// First token (in the node).
        start: u32,
        /// One past the last token.
        end: u32,
    },
}

impl Hit {
    /// The execution it is in.
    pub fn exec(&self) -> usize {
        match *self {
            Hit::Execution(e) | Hit::Request { exec: e, .. } | Hit::Tokens { exec: e, .. } => e,
        }
    }
}

/// Hits found by a worker for query number `serial`.
#[derive(Debug)]
pub struct Found {
    /// The query they answer.
    pub serial: u64,
    /// New hits, in order.
    pub hits: Vec<Hit>,
    /// The search is over.
    pub done: bool,
    /// It stopped at `search::MAX_HITS`.
    pub capped: bool,
}
