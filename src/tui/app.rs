//! Inspector state and the one place it changes: [`App::step`].

use std::cell::RefCell;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::Sender;

use tui_tree_widget::TreeState;

use crate::engine::admit::{Class, Settings, Stop};
use crate::engine::execution::Execution;
use crate::engine::export;
use crate::engine::load::Batch;
use crate::engine::score::{AdvantageMode, Outcome};
use crate::engine::{self, Results};

use super::keys::Command;
use super::layout::{Areas, NARROW, areas};
use super::model::{HEADER_BASE, RequestTree};
use super::theme::Theme;
use super::tokens::{Layout, PathIndex, RowStart};
use crate::paint::ColorMode;
use crate::text::TokenText;

/// Advantages as `gyre admit` computes them by default, so exports match byte for byte.
pub const ADVANTAGE: AdvantageMode = AdvantageMode::DrGrpo;

/// A loaded batch and what the engine decided about it, shared with export workers.
pub struct Data {
    /// The records.
    pub batch: Arc<Batch>,
    /// The engine's decisions under the current settings.
    pub results: Arc<Results>,
}

/// Loading state.
#[derive(Clone, Debug, PartialEq)]
pub enum Load {
    /// Reading: bytes done of total.
    Loading {
        /// Bytes read.
        done: u64,
        /// Bytes in all.
        total: u64,
    },
    /// Loading failed.
    Failed(String),
    /// Data is there.
    Ready,
}

/// A pane that can take the focus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pane {
    /// The executions list.
    Executions,
    /// The request tree.
    Tree,
    /// The token path.
    Tokens,
    /// The draw log at the replay step.
    Replay,
    /// Assessments of the execution.
    Assessments,
    /// Tool calls, results, sibling diff.
    Detail,
}

impl Pane {
    const ORDER: [Pane; 6] = [
        Pane::Executions,
        Pane::Tree,
        Pane::Tokens,
        Pane::Replay,
        Pane::Assessments,
        Pane::Detail,
    ];
}

/// An overlay over the panes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Overlay {
    /// Nothing.
    None,
    /// Key help, scrolled.
    Help(u16),
    /// Typing a search.
    Search(String),
    /// Confirming the export path.
    Export(String),
}

/// Sort orders of the executions list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SortKey {
    /// Input order.
    #[default]
    File,
    /// Status, then input order.
    Status,
    /// Reward, highest first.
    Reward,
    /// `L_i`, largest first.
    Targets,
    /// Draws made, most first.
    Draws,
}

impl SortKey {
    fn next(self) -> Self {
        match self {
            SortKey::File => SortKey::Status,
            SortKey::Status => SortKey::Reward,
            SortKey::Reward => SortKey::Targets,
            SortKey::Targets => SortKey::Draws,
            SortKey::Draws => SortKey::File,
        }
    }

    /// Name shown in the pane title.
    pub fn name(self) -> &'static str {
        match self {
            SortKey::File => "input order",
            SortKey::Status => "status",
            SortKey::Reward => "reward",
            SortKey::Targets => "L_i",
            SortKey::Draws => "draws",
        }
    }
}

/// Filters of the executions list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Filter {
    /// Everything.
    #[default]
    All,
    /// Scored only.
    Scored,
    /// Dummy only.
    Dummy,
    /// Excluded only.
    Excluded,
    /// Those whose draws stopped at J_max.
    JmaxReached,
}

impl Filter {
    fn next(self) -> Self {
        match self {
            Filter::All => Filter::Scored,
            Filter::Scored => Filter::Dummy,
            Filter::Dummy => Filter::Excluded,
            Filter::Excluded => Filter::JmaxReached,
            Filter::JmaxReached => Filter::All,
        }
    }

    /// Name shown in the pane title.
    pub fn name(self) -> &'static str {
        match self {
            Filter::All => "all",
            Filter::Scored => "scored",
            Filter::Dummy => "dummy",
            Filter::Excluded => "excluded",
            Filter::JmaxReached => "J_max reached",
        }
    }

    fn keeps(self, o: &Outcome, stop: Stop) -> bool {
        match self {
            Filter::All => true,
            Filter::Scored => matches!(o, Outcome::Scored { .. }),
            Filter::Dummy => matches!(o, Outcome::Dummy),
            Filter::Excluded => matches!(o, Outcome::Excluded(_)),
            Filter::JmaxReached => stop == Stop::JmaxReached,
        }
    }
}

/// A search hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hit {
    /// A request whose id matches.
    Request(u32),
    /// Token positions `start..end` of the current path whose text matches.
    Tokens(u64, u64),
}

/// The current search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Search {
    /// What was searched.
    pub query: String,
    /// Hits: request ids first, then token runs in path order.
    pub hits: Vec<Hit>,
    /// The current hit.
    pub at: usize,
    /// Path the token hits belong to.
    pub request: u32,
    /// The token search stopped early at this many hits.
    pub capped: bool,
}

/// Everything the screen shows, changed only by [`App::step`].
pub struct App {
    /// Name of the input, for the title.
    pub label: String,
    /// Loading state.
    pub load: Load,
    /// The data, once loaded.
    pub data: Option<Data>,
    /// Admission settings the results were made with.
    pub settings: Settings,
    /// Priority orders `p` cycles through.
    pub priorities: Vec<Vec<Class>>,
    /// Terminal size.
    pub size: (u16, u16),
    /// Focused pane.
    pub focus: Pane,
    /// Overlay.
    pub overlay: Overlay,
    /// Last message for the status line.
    pub message: Option<String>,
    /// Palette.
    pub theme: Theme,
    /// Token colouring.
    pub colour: ColorMode,
    /// Shade alternate tokens.
    pub boundaries: bool,
    /// Show the detail pane.
    pub detail: bool,
    /// Executions list: sort order.
    pub sort: SortKey,
    /// Executions list: filter.
    pub filter: Filter,
    /// Executions shown, as indices into the batch.
    pub rows: Vec<usize>,
    /// Selected row of `rows`.
    pub row: usize,
    /// First visible row of the executions list.
    pub row_offset: usize,
    /// Current execution (index into the batch).
    pub cur: usize,
    /// Its request tree.
    pub rtree: RequestTree,
    /// Open tree items.
    pub opened: HashSet<Vec<u32>>,
    /// Selected tree item (display path).
    pub tree_sel: Vec<u32>,
    /// Scroll state of the tree widget (render-time bookkeeping only).
    pub tree_state: RefCell<TreeState<u32>>,
    /// Replay step: draws shown as made (0..=n).
    pub step: u32,
    /// Path of the selected request.
    pub path: PathIndex,
    /// First row of the token pane.
    pub top: RowStart,
    /// Token cursor (path position).
    pub cursor: u64,
    /// Replay pane scroll.
    pub replay_scroll: u16,
    /// Selected assessment (index into the execution's assessments).
    pub assess: usize,
    /// Detail pane scroll.
    pub detail_scroll: u16,
    /// The current search.
    pub search: Option<Search>,
    /// Quit requested.
    pub quit: bool,
    /// Token text.
    pub text: TokenText,
    /// Name of the tokenizer in use.
    pub tokenizer: String,
    /// Where exports go.
    pub cwd: PathBuf,
    /// Exports still being written, by path.
    pub exporting: Vec<PathBuf>,
    /// Where background work reports back; without it, exports are written in place.
    pub jobs: Option<Sender<Action>>,
}

/// One change to the state.
#[derive(Debug)]
pub enum Action {
    /// A bound command.
    Cmd(Command),
    /// A character typed into an overlay's input.
    Input(char),
    /// Backspace in an overlay's input.
    Backspace,
    /// Mouse click at a cell.
    Click(u16, u16),
    /// Mouse wheel at a cell (`true` = down).
    Wheel(u16, u16, bool),
    /// The terminal was resized.
    Resize(u16, u16),
    /// Loading progress in bytes.
    Progress(u64, u64),
    /// Loading finished.
    Loaded(Result<Box<Batch>, String>),
    /// Loading finished and the engine already ran with the app's settings (off the UI thread).
    Processed(Box<(Batch, Results)>),
    /// The tokenizer to show token text with.
    Text(TokenText),
    /// A message for the status line.
    Message(String),
    /// An export finished: its path and the status line to show.
    Exported(PathBuf, String),
}

impl App {
    /// A new, still loading inspector.
    pub fn new(label: impl Into<String>, settings: Settings, theme: Theme) -> Self {
        let mut priorities = vec![
            Class::DEFAULT_PRIORITY.to_vec(),
            vec![
                Class::Main,
                Class::Sub,
                Class::MainSummary,
                Class::SubSummary,
            ],
            vec![Class::Main, Class::MainSummary],
            vec![Class::Main],
            vec![
                Class::Sub,
                Class::SubSummary,
                Class::Main,
                Class::MainSummary,
            ],
        ];
        if !priorities.contains(&settings.priority) {
            priorities.insert(0, settings.priority.clone());
        }
        App {
            label: label.into(),
            load: Load::Loading { done: 0, total: 0 },
            data: None,
            settings,
            priorities,
            size: (120, 40),
            focus: Pane::Tokens,
            overlay: Overlay::None,
            message: None,
            theme,
            colour: ColorMode::Claims,
            boundaries: true,
            detail: true,
            sort: SortKey::File,
            filter: Filter::All,
            rows: Vec::new(),
            row: 0,
            row_offset: 0,
            cur: 0,
            rtree: RequestTree::default(),
            opened: HashSet::new(),
            tree_sel: Vec::new(),
            tree_state: RefCell::new(TreeState::default()),
            step: 0,
            path: PathIndex::default(),
            top: RowStart::default(),
            cursor: 0,
            replay_scroll: 0,
            assess: 0,
            detail_scroll: 0,
            search: None,
            quit: false,
            text: TokenText::none(),
            tokenizer: "none (ids shown as ⟨id⟩)".into(),
            cwd: PathBuf::from("."),
            exporting: Vec::new(),
            jobs: None,
        }
    }

    /// An inspector on an already loaded batch.
    pub fn with_batch(
        label: impl Into<String>,
        batch: Batch,
        settings: Settings,
        theme: Theme,
        size: (u16, u16),
    ) -> Self {
        let mut app = App::new(label, settings, theme);
        app.size = size;
        app.step(Action::Loaded(Ok(Box::new(batch))));
        app
    }

    /// Pane rectangles for the current size.
    pub fn areas(&self) -> Areas {
        areas(self.size, self.detail)
    }

    /// The current execution.
    pub fn exec(&self) -> Option<&Execution> {
        self.data.as_ref().map(|d| &d.batch.executions[self.cur])
    }

    /// The selected request (the chain head for a header).
    pub fn selected_request(&self) -> Option<u32> {
        let last = *self.tree_sel.last()?;
        if last >= HEADER_BASE {
            self.rtree.roots.get((last - HEADER_BASE) as usize).copied()
        } else {
            Some(last)
        }
    }

    /// Number of draws of the current execution.
    pub fn draws(&self) -> u32 {
        self.data
            .as_ref()
            .map_or(0, |d| d.results.admissions[self.cur].draws.len() as u32)
    }

    /// Applies one action.
    pub fn step(&mut self, action: Action) {
        match action {
            Action::Resize(w, h) => {
                self.size = (w, h);
                if self.focus == Pane::Detail && self.areas().detail.width == 0 {
                    self.focus = Pane::Tokens;
                }
                if let Overlay::Help(s) = self.overlay {
                    self.overlay = Overlay::Help(s.min(super::ui::help_max_scroll(self)));
                }
                self.keep_cursor_visible();
                self.keep_row_visible();
            }
            Action::Progress(done, total) => {
                if let Load::Loading { .. } = self.load {
                    self.load = Load::Loading { done, total };
                }
            }
            Action::Loaded(Err(e)) => self.load = Load::Failed(e),
            Action::Loaded(Ok(batch)) => {
                let results = engine::process(&batch, &self.settings, ADVANTAGE);
                self.loaded(*batch, results)
            }
            Action::Processed(b) => {
                let (batch, results) = *b;
                if results.settings == self.settings {
                    self.loaded(batch, results)
                } else {
                    let results = engine::process(&batch, &self.settings, ADVANTAGE);
                    self.loaded(batch, results)
                }
            }
            Action::Text(t) => {
                self.tokenizer = t.label().to_string();
                self.text = t;
                self.keep_cursor_visible();
            }
            Action::Message(m) => self.message = Some(m),
            Action::Exported(path, m) => {
                self.exporting.retain(|p| *p != path);
                self.message = Some(m);
            }
            Action::Input(c) => match &mut self.overlay {
                Overlay::Search(s) | Overlay::Export(s) => s.push(c),
                _ => {}
            },
            Action::Backspace => match &mut self.overlay {
                Overlay::Search(s) | Overlay::Export(s) => {
                    s.pop();
                }
                _ => {}
            },
            Action::Click(x, y) => self.click(x, y),
            Action::Wheel(x, y, down) => self.wheel(x, y, down),
            Action::Cmd(c) => self.command(c),
        }
    }

    fn loaded(&mut self, batch: Batch, results: Results) {
        self.data = Some(Data {
            batch: Arc::new(batch),
            results: Arc::new(results),
        });
        self.load = Load::Ready;
        self.refilter();
        // Open on the execution with the most draws (the first such), at draw n/n.
        let d = self.data.as_ref().expect("just set");
        let best = (0..d.batch.executions.len())
            .max_by_key(|&i| (d.results.admissions[i].draws.len(), std::cmp::Reverse(i)))
            .unwrap_or(0);
        if !d.batch.executions.is_empty() {
            self.open_exec(best);
            if let Some(r) = self.rows.iter().position(|&i| i == best) {
                self.row = r;
            }
            self.keep_row_visible();
            let n = self.draws();
            self.set_step(n);
        }
    }

    fn refilter(&mut self) {
        let Some(d) = &self.data else { return };
        let r = &d.results;
        let mut rows: Vec<usize> = (0..d.batch.executions.len())
            .filter(|&i| self.filter.keeps(&r.outcomes[i], r.admissions[i].stop))
            .collect();
        let status_rank = |o: &Outcome| match o {
            Outcome::Scored { .. } => 0,
            Outcome::Dummy => 1,
            Outcome::Excluded(_) => 2,
        };
        match self.sort {
            SortKey::File => {}
            SortKey::Status => rows.sort_by_key(|&i| status_rank(&r.outcomes[i])),
            SortKey::Reward => rows.sort_by(|&a, &b| {
                let ra = r.outcomes[a].reward().unwrap_or(f64::NEG_INFINITY);
                let rb = r.outcomes[b].reward().unwrap_or(f64::NEG_INFINITY);
                rb.total_cmp(&ra)
            }),
            SortKey::Targets => rows.sort_by_key(|&i| std::cmp::Reverse(r.admissions[i].targets())),
            SortKey::Draws => rows.sort_by_key(|&i| std::cmp::Reverse(r.admissions[i].draws.len())),
        }
        self.rows = rows;
        self.row = self.rows.iter().position(|&i| i == self.cur).unwrap_or(0);
        self.row_offset = 0;
        self.keep_row_visible();
    }

    /// Opens execution `i`: its tree, fully expanded, on its committed or last request.
    fn open_exec(&mut self, i: usize) {
        let Some(d) = &self.data else { return };
        self.cur = i;
        let exec = &d.batch.executions[i];
        self.rtree = RequestTree::new(exec);
        self.opened.clear();
        for p in &self.rtree.paths {
            for k in 1..p.len() {
                self.opened.insert(p[..k].to_vec());
            }
        }
        for k in 0..self.rtree.roots.len() {
            self.opened.insert(vec![HEADER_BASE + k as u32]);
        }
        *self.tree_state.borrow_mut() = TreeState::default();
        self.step = d.results.admissions[i].draws.len() as u32;
        self.assess = 0;
        self.replay_scroll = 0;
        self.search = None;
        let first = if exec.requests.is_empty() {
            None
        } else {
            // The last draw's leaf, else the committed request, else the last request.
            let adm = &d.results.admissions[i];
            adm.draws
                .last()
                .map(|dr| dr.chosen)
                .or_else(|| {
                    exec.closure
                        .as_ref()
                        .and_then(|c| c.record.committed.as_deref())
                        .and_then(|id| exec.request_index(id))
                })
                .or(Some(exec.requests.len() as u32 - 1))
        };
        match first {
            Some(r) => self.select_request(r),
            None => {
                self.tree_sel.clear();
                self.path = PathIndex::default();
                self.cursor = 0;
                self.top = RowStart::default();
            }
        }
    }

    /// Selects request `r` in the tree and shows its path, cursor on its output.
    pub fn select_request(&mut self, r: u32) {
        let Some(p) = self.rtree.paths.get(r as usize).cloned() else {
            return;
        };
        for k in 1..p.len() {
            self.opened.insert(p[..k].to_vec());
        }
        self.tree_sel = p;
        self.show_path(r);
    }

    fn show_path(&mut self, r: u32) {
        let Some(d) = &self.data else { return };
        let exec = &d.batch.executions[self.cur];
        if self.path.request == r && !self.path.nodes.is_empty() {
            return;
        }
        self.path = PathIndex::new(exec, r);
        self.detail_scroll = 0;
        let input_len = exec.requests[r as usize].input_len as u64;
        self.cursor = input_len.min(self.path.len.saturating_sub(1));
        self.top = RowStart::default();
        self.center_cursor();
    }

    fn set_step(&mut self, k: u32) {
        let n = self.draws();
        let k = k.min(n);
        self.step = k;
        self.replay_scroll = 0;
        if k == 0 {
            return;
        }
        let Some(d) = &self.data else { return };
        let draw = &d.results.admissions[self.cur].draws[k as usize - 1];
        let chosen = draw.chosen;
        let first_target = draw.targets.first().copied();
        self.select_request(chosen);
        // Cursor on the first token this draw claimed.
        if let Some(t) = first_target {
            if let Some(seg) = self.path.nodes.iter().position(|&n| n == t) {
                self.cursor = self.path.seg_start(seg);
                self.keep_cursor_visible();
            }
        }
    }

    fn rerun(&mut self, what: &str) {
        let Some(d) = &mut self.data else { return };
        d.results = Arc::new(engine::process(&d.batch, &self.settings, ADVANTAGE));
        let draws: usize = d.results.admissions.iter().map(|a| a.draws.len()).sum();
        self.message = Some(format!(
            "{what} → engine re-ran: {draws} draws in {} executions",
            d.batch.executions.len()
        ));
        let cur = self.cur;
        self.refilter();
        self.cur = cur;
        let n = self.draws();
        self.set_step(n);
    }

    fn command(&mut self, c: Command) {
        // Overlays take their keys first.
        match (&self.overlay, c) {
            (_, Command::Quit) => {
                self.quit = true;
                if let Some(p) = self.exporting.first() {
                    self.message = Some(format!("quitting once {} is written…", p.display()));
                }
                return;
            }
            (Overlay::Help(_), Command::Help | Command::Escape) => {
                self.overlay = Overlay::None;
                return;
            }
            (Overlay::Help(s), Command::Down | Command::PageDown) => {
                let s = s.saturating_add(if c == Command::Down { 1 } else { 10 });
                self.overlay = Overlay::Help(s.min(super::ui::help_max_scroll(self)));
                return;
            }
            (Overlay::Help(s), Command::Up | Command::PageUp) => {
                self.overlay =
                    Overlay::Help(s.saturating_sub(if c == Command::Up { 1 } else { 10 }));
                return;
            }
            (Overlay::Help(_), _) => return,
            (Overlay::Search(_) | Overlay::Export(_), Command::Escape) => {
                self.overlay = Overlay::None;
                return;
            }
            (Overlay::Search(q), Command::Enter) => {
                let q = q.clone();
                self.overlay = Overlay::None;
                self.run_search(&q);
                return;
            }
            (Overlay::Export(p), Command::Enter) => {
                let p = p.clone();
                self.overlay = Overlay::None;
                self.export(&p);
                return;
            }
            (Overlay::Search(_) | Overlay::Export(_), _) => return,
            (Overlay::None, _) => {}
        }
        if self.data.is_none() && c != Command::Help {
            return;
        }
        match c {
            Command::Help => self.overlay = Overlay::Help(0),
            Command::Escape => {
                if self.search.take().is_none() {
                    self.message = None;
                }
            }
            Command::FocusNext | Command::FocusPrev => {
                let a = self.areas();
                let order: Vec<Pane> = Pane::ORDER
                    .into_iter()
                    .filter(|p| *p != Pane::Detail || a.detail.width > 0)
                    .collect();
                let i = order.iter().position(|p| *p == self.focus).unwrap_or(0);
                let n = order.len();
                self.focus = order[if c == Command::FocusNext {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                }];
            }
            Command::DrawNext if self.step == self.draws() => {
                self.message = Some(format!(
                    "already at draw {0}/{0}: the admitted state ([ steps back)",
                    self.step
                ));
            }
            Command::DrawPrev if self.step == 0 => {
                self.message = Some(format!(
                    "already at draw 0/{}: nothing claimed yet (] steps forward)",
                    self.draws()
                ));
            }
            Command::DrawNext => self.set_step(self.step + 1),
            Command::DrawPrev => self.set_step(self.step - 1),
            Command::DrawFirst => self.set_step(0),
            Command::DrawLast => self.set_step(self.draws()),
            Command::Colour => self.colour = self.colour.next(),
            Command::Boundaries => self.boundaries = !self.boundaries,
            Command::Detail => {
                self.detail = !self.detail;
                if !self.detail && self.focus == Pane::Detail {
                    self.focus = Pane::Tokens;
                }
                if self.detail && self.areas().detail.width == 0 {
                    self.message = Some(format!(
                        "the detail pane needs a terminal at least {NARROW} columns wide"
                    ));
                }
                self.keep_cursor_visible();
            }
            Command::SeedUp => {
                self.settings.seed = self.settings.seed.wrapping_add(1);
                self.rerun(&format!("seed {}", self.settings.seed));
            }
            Command::SeedDown => {
                self.settings.seed = self.settings.seed.wrapping_sub(1);
                self.rerun(&format!("seed {}", self.settings.seed));
            }
            Command::JmaxUp => {
                self.settings.jmax = self.settings.jmax.saturating_add(1);
                self.rerun(&format!("J_max {}", jmax_text(self.settings.jmax)));
            }
            Command::JmaxDown => {
                self.settings.jmax = self.settings.jmax.saturating_sub(1);
                self.rerun(&format!("J_max {}", jmax_text(self.settings.jmax)));
            }
            Command::Priority => {
                let i = self
                    .priorities
                    .iter()
                    .position(|p| *p == self.settings.priority)
                    .map_or(0, |i| (i + 1) % self.priorities.len());
                self.settings.priority = self.priorities[i].clone();
                self.rerun(&format!(
                    "priority {}",
                    priority_text(&self.settings.priority)
                ));
            }
            Command::Sort => {
                self.sort = self.sort.next();
                self.refilter();
            }
            Command::Filter => {
                self.filter = self.filter.next();
                self.refilter();
                if let Some(&i) = self.rows.first() {
                    if !self.rows.contains(&self.cur) {
                        self.open_exec(i);
                    }
                }
            }
            Command::Search => self.overlay = Overlay::Search(String::new()),
            Command::SearchNext => self.search_step(true),
            Command::SearchPrev => self.search_step(false),
            Command::Export => self.overlay = Overlay::Export(self.proposed_export()),
            _ => self.pane_command(c),
        }
    }

    fn pane_command(&mut self, c: Command) {
        match self.focus {
            Pane::Executions => self.exec_command(c),
            Pane::Tree => self.tree_command(c),
            Pane::Tokens => self.token_command(c),
            Pane::Replay => self.scroll_replay(c),
            Pane::Assessments => self.assess_command(c),
            Pane::Detail => self.scroll_detail(c),
        }
    }

    fn scroll_replay(&mut self, c: Command) {
        let r = self.areas().replay;
        let max =
            super::ui::scroll_limit(&super::ui::replay_lines(self), r.width.saturating_sub(2));
        self.replay_scroll = scroll(self.replay_scroll, c, r.height.saturating_sub(2)).min(max);
    }

    fn scroll_detail(&mut self, c: Command) {
        let r = self.areas().detail;
        let max = super::ui::scroll_limit(&super::detail::lines(self), r.width.saturating_sub(2));
        self.detail_scroll = scroll(self.detail_scroll, c, r.height.saturating_sub(2)).min(max);
    }

    fn exec_command(&mut self, c: Command) {
        if self.rows.is_empty() {
            return;
        }
        let page = self.areas().execs.height.saturating_sub(3).max(1) as usize;
        let last = self.rows.len() - 1;
        let row = match c {
            Command::Up => self.row.saturating_sub(1),
            Command::Down => (self.row + 1).min(last),
            Command::PageUp => self.row.saturating_sub(page),
            Command::PageDown => (self.row + page).min(last),
            Command::Home => 0,
            Command::End => last,
            Command::Enter | Command::Right => {
                self.focus = Pane::Tree;
                return;
            }
            _ => return,
        };
        self.select_row(row);
    }

    fn select_row(&mut self, row: usize) {
        if row >= self.rows.len() {
            return;
        }
        self.row = row;
        self.keep_row_visible();
        let i = self.rows[row];
        if i != self.cur || self.tree_sel.is_empty() {
            self.open_exec(i);
        }
    }

    fn keep_row_visible(&mut self) {
        let h = self.areas().execs.height.saturating_sub(3).max(1) as usize;
        if self.row < self.row_offset {
            self.row_offset = self.row;
        } else if self.row >= self.row_offset + h {
            self.row_offset = self.row + 1 - h;
        }
    }

    /// Visible tree rows (display paths), as the tree widget shows them.
    pub fn tree_rows(&self) -> Vec<Vec<u32>> {
        fn walk(
            d: &super::model::DNode,
            prefix: &mut Vec<u32>,
            opened: &HashSet<Vec<u32>>,
            out: &mut Vec<Vec<u32>>,
        ) {
            prefix.push(d.id);
            out.push(prefix.clone());
            if !d.children.is_empty() && opened.contains(prefix.as_slice()) {
                for c in &d.children {
                    walk(c, prefix, opened, out);
                }
            }
            prefix.pop();
        }
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        for d in &self.rtree.display {
            walk(d, &mut prefix, &self.opened, &mut out);
        }
        out
    }

    fn tree_command(&mut self, c: Command) {
        let rows = self.tree_rows();
        if rows.is_empty() {
            return;
        }
        let i = rows.iter().position(|r| *r == self.tree_sel).unwrap_or(0);
        let page = self.areas().tree.height.saturating_sub(2).max(1) as usize;
        let last = rows.len() - 1;
        let target = match c {
            Command::Up => i.saturating_sub(1),
            Command::Down => (i + 1).min(last),
            Command::PageUp => i.saturating_sub(page),
            Command::PageDown => (i + page).min(last),
            Command::Home => 0,
            Command::End => last,
            Command::Left => {
                let sel = self.tree_sel.clone();
                if self.has_children(&sel) && self.opened.contains(&sel) {
                    self.opened.remove(&sel);
                } else if sel.len() > 1 {
                    self.select_tree_path(sel[..sel.len() - 1].to_vec());
                }
                return;
            }
            Command::Right => {
                let sel = self.tree_sel.clone();
                if self.has_children(&sel) {
                    self.opened.insert(sel);
                }
                return;
            }
            Command::Enter => {
                let sel = self.tree_sel.clone();
                if self.has_children(&sel) && !self.opened.remove(&sel) {
                    self.opened.insert(sel);
                }
                return;
            }
            _ => return,
        };
        self.select_tree_path(rows[target].clone());
    }

    fn has_children(&self, p: &[u32]) -> bool {
        let mut level = &self.rtree.display;
        let mut node = None;
        for id in p {
            match level.iter().find(|d| d.id == *id) {
                Some(d) => {
                    node = Some(d);
                    level = &d.children;
                }
                None => return false,
            }
        }
        node.is_some_and(|d| !d.children.is_empty())
    }

    fn select_tree_path(&mut self, p: Vec<u32>) {
        self.tree_sel = p;
        if let Some(r) = self.selected_request() {
            self.show_path(r);
        }
    }

    fn token_command(&mut self, c: Command) {
        let len = self.path.len;
        if len == 0 {
            return;
        }
        let a = self.areas();
        let h = a.tokens.height.saturating_sub(2).max(1) as i64;
        match c {
            Command::Left => self.cursor = self.cursor.saturating_sub(1),
            Command::Right => self.cursor = (self.cursor + 1).min(len - 1),
            Command::Home => self.cursor = 0,
            Command::End => self.cursor = len - 1,
            Command::Up | Command::Down | Command::PageUp | Command::PageDown => {
                let delta = match c {
                    Command::Up => -1,
                    Command::Down => 1,
                    Command::PageUp => -h,
                    _ => h,
                };
                self.cursor = self.cursor_by_rows(delta);
                if matches!(c, Command::PageUp | Command::PageDown) {
                    let Some(d) = &self.data else { return };
                    let exec = &d.batch.executions[self.cur];
                    let mut l = Layout::new(
                        exec,
                        &self.path,
                        &self.text,
                        a.tokens.width.saturating_sub(2),
                    );
                    self.top = l.move_rows(self.top, delta);
                }
            }
            Command::NextSegment => {
                let (seg, _) = self.path.locate(self.cursor);
                if seg + 1 < self.path.nodes.len() {
                    self.cursor = self.path.seg_start(seg + 1);
                }
            }
            Command::PrevSegment => {
                let (seg, off) = self.path.locate(self.cursor);
                self.cursor = if off > 0 || seg == 0 {
                    self.path.seg_start(seg)
                } else {
                    self.path.seg_start(seg - 1)
                };
            }
            _ => return,
        }
        self.keep_cursor_visible();
    }

    /// The token `delta` rows below (above) the cursor, at about the same column.
    fn cursor_by_rows(&self, delta: i64) -> u64 {
        let Some(d) = &self.data else {
            return self.cursor;
        };
        let exec = &d.batch.executions[self.cur];
        let w = self.areas().tokens.width.saturating_sub(2);
        let mut l = Layout::new(exec, &self.path, &self.text, w);
        let row = l.row_of(self.cursor);
        let x = l
            .rows(row, 1, true)
            .first()
            .and_then(|r| r.cells.iter().find(|c| c.pos == self.cursor).map(|c| c.x))
            .unwrap_or(0);
        let target = l.move_rows(row, delta);
        if target == row {
            return if delta > 0 {
                self.cursor.max(self.last_pos_of_row(&mut l, row))
            } else {
                self.cursor
            };
        }
        let rows = l.rows(target, 1, true);
        let Some(r) = rows.first() else {
            return self.cursor;
        };
        r.cells
            .iter()
            .rev()
            .find(|c| c.x <= x)
            .or(r.cells.first())
            .map_or(target.pos, |c| c.pos)
    }

    fn last_pos_of_row(&self, l: &mut Layout<'_>, row: RowStart) -> u64 {
        l.rows(row, 1, true)
            .first()
            .and_then(|r| r.cells.last())
            .map_or(self.cursor, |c| c.pos)
    }

    /// Scrolls the token view so the cursor is on screen.
    pub fn keep_cursor_visible(&mut self) {
        let Some(d) = &self.data else { return };
        if self.path.len == 0 {
            return;
        }
        let exec = &d.batch.executions[self.cur];
        let a = areas(self.size, self.detail);
        let w = a.tokens.width.saturating_sub(2);
        let h = a.tokens.height.saturating_sub(2).max(1) as usize;
        let mut l = Layout::new(exec, &self.path, &self.text, w);
        let cur_row = l.row_of(self.cursor);
        if cur_row < self.top {
            self.top = cur_row;
            return;
        }
        // Within a page or two below: scroll just enough; further: recentre.
        let rows = l.rows(self.top, h * 2, false);
        if let Some(i) = rows.iter().position(|r| r.start == cur_row) {
            if i >= h {
                self.top = rows[i + 1 - h].start;
            }
            return;
        }
        self.top = l.move_rows(cur_row, -((h / 3) as i64));
    }

    fn center_cursor(&mut self) {
        let Some(d) = &self.data else { return };
        if self.path.len == 0 {
            return;
        }
        let exec = &d.batch.executions[self.cur];
        let a = areas(self.size, self.detail);
        let w = a.tokens.width.saturating_sub(2);
        let h = a.tokens.height.saturating_sub(2).max(1) as i64;
        let mut l = Layout::new(exec, &self.path, &self.text, w);
        let cur_row = l.row_of(self.cursor);
        self.top = l.move_rows(cur_row, -(h / 3));
    }

    fn assess_command(&mut self, c: Command) {
        let Some(exec) = self.exec() else { return };
        let n = exec.assessments.len();
        if n == 0 {
            return;
        }
        match c {
            Command::Up => self.assess = self.assess.saturating_sub(1),
            Command::Down => self.assess = (self.assess + 1).min(n - 1),
            Command::Home => self.assess = 0,
            Command::End => self.assess = n - 1,
            Command::Enter => self.jump_to_branch(),
            _ => {}
        }
    }

    /// Selects the branch (request) the selected assessment refers to.
    fn jump_to_branch(&mut self) {
        let Some(exec) = self.exec() else { return };
        let order = super::ui::assessment_order(exec);
        let Some(&ai) = order.get(self.assess) else {
            return;
        };
        let branch = exec.assessments[ai].record.branch.clone();
        let target = branch.as_deref().map(|b| exec.request_index(b));
        match (branch, target) {
            (Some(b), Some(Some(r))) => {
                self.select_request(r);
                self.focus = Pane::Tree;
                self.message = Some(format!("assessment → branch {b}"));
            }
            (Some(b), _) => {
                self.message = Some(format!("branch {b:?} is not a request of this execution"))
            }
            (None, _) => self.message = Some("this assessment names no branch".into()),
        }
    }

    fn run_search(&mut self, q: &str) {
        if q.is_empty() {
            self.search = None;
            return;
        }
        let Some(d) = &self.data else { return };
        let exec = &d.batch.executions[self.cur];
        let ql = q.to_lowercase();
        let mut hits: Vec<Hit> = exec
            .requests
            .iter()
            .enumerate()
            .filter(|(_, r)| r.id.to_lowercase().contains(&ql))
            .map(|(i, _)| Hit::Request(i as u32))
            .collect();
        const MAX_HITS: usize = 10_000;
        let mut capped = false;
        // Token text of the path, searched across token boundaries.
        let mut text = String::new();
        let mut owner: Vec<u64> = Vec::new();
        let ids = self.path.tokens(exec, 0..self.path.len);
        for (pos, piece) in self.text.display_pieces(&ids).iter().enumerate() {
            let t = piece.to_lowercase();
            owner.extend(std::iter::repeat_n(pos as u64, t.len()));
            text.push_str(&t);
        }
        let mut from = 0;
        while let Some(i) = text[from..].find(&ql) {
            let s = from + i;
            let e = s + ql.len();
            hits.push(Hit::Tokens(owner[s], owner[e - 1] + 1));
            if hits.len() >= MAX_HITS {
                capped = true;
                break;
            }
            from = s + ql.len().max(1);
            while !text.is_char_boundary(from) {
                from += 1;
            }
        }
        if hits.is_empty() {
            self.message = Some(format!(
                "/{q}: no match in {} (request ids and this path)",
                exec.id
            ));
            self.search = None;
            return;
        }
        // Start at the first token hit at or after the cursor, else the first hit.
        let at = hits
            .iter()
            .position(|h| matches!(h, Hit::Tokens(s, _) if *s >= self.cursor))
            .unwrap_or(0);
        self.search = Some(Search {
            query: q.to_string(),
            hits,
            at,
            request: self.path.request,
            capped,
        });
        self.goto_hit();
    }

    fn search_step(&mut self, forward: bool) {
        let Some(s) = &mut self.search else {
            self.message = Some("no search: press / first".into());
            return;
        };
        let n = s.hits.len();
        s.at = if forward {
            (s.at + 1) % n
        } else {
            (s.at + n - 1) % n
        };
        self.goto_hit();
    }

    fn goto_hit(&mut self) {
        let Some(s) = &self.search else { return };
        let hit = s.hits[s.at];
        let msg = format!(
            "/{}: match {}/{}{}",
            s.query,
            s.at + 1,
            s.hits.len(),
            if s.capped { " (stopped at 10000)" } else { "" }
        );
        let path_req = s.request;
        match hit {
            Hit::Request(r) => {
                self.select_request(r);
                if let Some(s) = &mut self.search {
                    s.request = path_req;
                }
            }
            Hit::Tokens(p, _) => {
                if self.path.request != path_req {
                    self.select_request(path_req);
                }
                self.cursor = p;
                self.keep_cursor_visible();
            }
        }
        self.message = Some(msg);
    }

    /// `./admitted.jsonl`, or the next free `admitted-N.jsonl`.
    pub fn proposed_export(&self) -> String {
        let free = |name: &str| {
            let p = self.cwd.join(name);
            !p.exists() && !self.exporting.contains(&p)
        };
        if free("admitted.jsonl") {
            return "admitted.jsonl".into();
        }
        (1..)
            .map(|n| format!("admitted-{n}.jsonl"))
            .find(|n| free(n))
            .expect("some name is free")
    }

    fn export(&mut self, name: &str) {
        let Some(d) = &self.data else { return };
        let name = name.trim();
        if name.is_empty() {
            self.message = Some("export cancelled: no file name".into());
            return;
        }
        let path = if Path::new(name).is_absolute() {
            PathBuf::from(name)
        } else {
            self.cwd.join(name)
        };
        let (batch, results) = (Arc::clone(&d.batch), Arc::clone(&d.results));
        let settings = format!(
            "seed {} · J_max {} · priority {}",
            self.settings.seed,
            jmax_text(self.settings.jmax),
            priority_text(&self.settings.priority)
        );
        let write = {
            let path = path.clone();
            move || {
                let m = match export::write_file(&batch, &results, &path, false) {
                    Ok(rows) => format!(
                        "exported {rows} rows ({} executions, B = {}) to {} · {settings}",
                        batch.executions.len(),
                        results.batch_executions,
                        path.display(),
                    ),
                    Err(e) => format!("export failed: {e}"),
                };
                Action::Exported(path, m)
            }
        };
        self.exporting.push(path.clone());
        match &self.jobs {
            // A big admitted set takes seconds to write: the screen stays live meanwhile.
            Some(tx) => {
                let tx = tx.clone();
                self.message = Some(format!("exporting to {}…", path.display()));
                std::thread::spawn(move || {
                    let _ = tx.send(write());
                });
            }
            None => {
                let done = write();
                self.step(done);
            }
        }
    }

    fn pane_at(&self, x: u16, y: u16) -> Option<Pane> {
        let a = self.areas();
        let p = ratatui::layout::Position { x, y };
        [
            (a.execs, Pane::Executions),
            (a.tree, Pane::Tree),
            (a.tokens, Pane::Tokens),
            (a.replay, Pane::Replay),
            (a.assess, Pane::Assessments),
            (a.detail, Pane::Detail),
        ]
        .into_iter()
        .find(|(r, _)| r.contains(p))
        .map(|(_, pane)| pane)
    }

    fn click(&mut self, x: u16, y: u16) {
        if self.overlay != Overlay::None || self.data.is_none() {
            return;
        }
        let Some(pane) = self.pane_at(x, y) else {
            return;
        };
        self.focus = pane;
        let a = self.areas();
        match pane {
            // Border and header row above the first execution.
            Pane::Executions if y >= a.execs.y + 2 => {
                let row = self.row_offset + (y - a.execs.y - 2) as usize;
                self.select_row(row);
            }
            Pane::Tree => {
                let hit = self
                    .tree_state
                    .borrow()
                    .rendered_at(ratatui::layout::Position { x, y })
                    .map(<[u32]>::to_vec);
                if let Some(p) = hit {
                    if p == self.tree_sel && self.has_children(&p) && !self.opened.remove(&p) {
                        self.opened.insert(p.clone());
                    }
                    self.select_tree_path(p);
                }
            }
            Pane::Tokens => {
                if let Some(pos) = self.token_at(x, y) {
                    self.cursor = pos;
                }
            }
            Pane::Assessments if y > a.assess.y => {
                if let Some(exec) = self.exec() {
                    let rows = super::ui::assessment_rows(exec);
                    // The pane scrolls to keep the selection visible; undo that.
                    let sel_line = rows
                        .iter()
                        .position(|r| *r == Some(self.assess))
                        .unwrap_or(0)
                        + usize::from(exec.assessments.is_empty());
                    let scroll = super::ui::assessment_scroll(sel_line, a.assess.height) as usize;
                    let i = (y - a.assess.y - 1) as usize + scroll;
                    if let Some(Some(k)) = rows.get(i) {
                        self.assess = *k;
                    }
                }
            }
            _ => {}
        }
    }

    /// Path position of the token drawn at a cell of the token pane.
    pub fn token_at(&self, x: u16, y: u16) -> Option<u64> {
        let d = self.data.as_ref()?;
        let a = self.areas();
        let inner_x = x.checked_sub(a.tokens.x + 1)?;
        let inner_y = y.checked_sub(a.tokens.y + 1)? as usize;
        let exec = &d.batch.executions[self.cur];
        let mut l = Layout::new(
            exec,
            &self.path,
            &self.text,
            a.tokens.width.saturating_sub(2),
        );
        let rows = l.rows(self.top, inner_y + 1, true);
        let row = rows.get(inner_y)?;
        row.cells
            .iter()
            .rev()
            .find(|c| c.x <= inner_x)
            .map(|c| c.pos)
    }

    fn wheel(&mut self, x: u16, y: u16, down: bool) {
        if self.data.is_none() {
            return;
        }
        if let Overlay::Help(s) = self.overlay {
            self.overlay = Overlay::Help(if down {
                s.saturating_add(3).min(super::ui::help_max_scroll(self))
            } else {
                s.saturating_sub(3)
            });
            return;
        }
        let Some(pane) = self.pane_at(x, y) else {
            return;
        };
        let dir = if down { Command::Down } else { Command::Up };
        match pane {
            Pane::Tokens => {
                let Some(d) = &self.data else { return };
                let exec = &d.batch.executions[self.cur];
                let w = self.areas().tokens.width.saturating_sub(2);
                let mut l = Layout::new(exec, &self.path, &self.text, w);
                self.top = l.move_rows(self.top, if down { 3 } else { -3 });
            }
            Pane::Executions => {
                for _ in 0..3 {
                    self.exec_command(dir);
                }
            }
            Pane::Tree => {
                for _ in 0..3 {
                    self.tree_command(dir);
                }
            }
            Pane::Replay => {
                for _ in 0..3 {
                    self.scroll_replay(dir);
                }
            }
            Pane::Detail => {
                for _ in 0..3 {
                    self.scroll_detail(dir);
                }
            }
            Pane::Assessments => self.assess_command(dir),
        }
    }
}

fn scroll(v: u16, c: Command, page: u16) -> u16 {
    match c {
        Command::Up => v.saturating_sub(1),
        Command::Down => v.saturating_add(1),
        Command::PageUp => v.saturating_sub(page.max(1)),
        Command::PageDown => v.saturating_add(page.max(1)),
        Command::Home => 0,
        Command::End => u16::MAX,
        _ => v,
    }
}

/// `J_max` as shown: a number, or `uncapped` for 0.
pub fn jmax_text(j: u32) -> String {
    if j == 0 {
        "uncapped".into()
    } else {
        j.to_string()
    }
}

/// A priority as `main>main-summary>…`.
pub fn priority_text(p: &[Class]) -> String {
    p.iter().map(|c| c.name()).collect::<Vec<_>>().join(">")
}
