//! Inspector state and the one place it changes: [`App::step`].
//!
//! The panes share one [`Selection`] — execution, request, replay step and the generation of
//! the results on screen. An action goes to an overlay, to the app (settings, focus, replay
//! step) or to the focused pane; panes answer with [`Effect`]s, which change the selection;
//! then every pane brings its own state in line with it. A pane's state is keyed by what it was
//! made for, so nothing drawn can belong to an earlier selection.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gyre_engine::Results;
use gyre_engine::admit::{Class, Settings};
use gyre_engine::audit::Audit;
use gyre_engine::lens::{Lens, LensOptions};
use gyre_engine::load::Batch;
use gyre_engine::paint::ColorMode;
use gyre_engine::score::AdvantageMode;
use gyre_engine::stats::{self, Breakdown, Totals};
use gyre_text::TokenText;

use super::audit::{Audited, ExecAudit, has_samples};
use super::history::History;
use super::keys::Command;
use super::layout::{Areas, NARROW, areas};
use super::overlay::{
    Ask, AuditView, CompareView, CopyMenu, Cx, Dash, Edit, ExportPrompt, GoToMenu, HelpView,
    OutsideMenu, Overlay, OverlayView, PaletteView, PriorityEditor, Reply, RowView, SearchView,
    WhyView,
};
use super::palette::Parsed;
use super::pane::detail::Subject;
use super::pane::tokens::PathView;
use super::pane::tree::Landmark;
use super::pane::{Ctx, Effect, Pane, PaneView, Panes};
use super::path::PathIndex;
use super::search::Search;
use super::theme::Theme;
use super::whatif::{Compare, DEFAULT_SEEDS, Pinned, WhatIf};
use super::work::Task;
use gyre_format::named::Named;

pub use super::vocab::{Action, Change, Jobs, Load, Msg, Phase, Rerun, Selection};

/// How long a status message stays.
pub const MESSAGE_TTL: Duration = Duration::from_secs(6);

/// A loaded batch and what the engine decided about it, shared with workers.
pub struct Data {
    /// The records.
    pub batch: Arc<Batch>,
    /// The engine's decisions on screen.
    pub results: Arc<Results>,
    /// Their batch totals.
    pub totals: Totals,
    /// The batch holds `trained` samples (the audit has something to say).
    pub samples: bool,
}

/// A status message and when it was set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The text.
    pub text: String,
    /// When.
    pub at: Instant,
}

/// Everything the screen shows, changed only by [`App::step`].
pub struct App {
    /// Name of the input, for the title.
    pub label: String,
    /// The input as a command line names it, for the commands `Y` copies: the files, or the
    /// bundled demo's file in the repository (`assets/demo/…`).
    pub inputs: Vec<String>,
    /// Text to put on the clipboard: the run loop sends it (OSC 52) and empties this.
    pub clipboard: Option<String>,
    /// What to open in `$PAGER` / `$EDITOR`: the run loop hands the terminal over, runs it and
    /// empties this.
    pub outside: Option<crate::outside::Outside>,
    /// Loading state.
    pub load: Load,
    /// The data, once loaded.
    pub data: Option<Data>,
    /// Settings asked for (the results on screen may still be of earlier ones: see
    /// [`App::rerunning`]).
    pub settings: Settings,
    /// Advantage mode asked for.
    pub advantage: AdvantageMode,
    /// The settings asked for so far, for undo and redo.
    pub history: History,
    /// Priority orders `p` cycles through.
    pub priorities: Vec<Vec<Class>>,
    /// Terminal size.
    pub size: (u16, u16),
    /// Focused pane.
    pub focus: Pane,
    /// The focused pane fills the screen.
    pub zoom: bool,
    /// The zoom was opened only to show a pane the layout leaves out: moving the focus to a
    /// pane the layout shows ends it.
    pub zoom_forced: bool,
    /// Overlay.
    pub overlay: Overlay,
    /// Status message.
    pub message: Option<Message>,
    /// What the last settings change did.
    pub change: Option<Change>,
    /// Palette.
    pub theme: Theme,
    /// Token colouring.
    pub colour: ColorMode,
    /// Shade alternate tokens.
    pub boundaries: bool,
    /// Show the detail pane.
    pub detail: bool,
    /// The shared selection.
    pub sel: Selection,
    /// The panes' own state.
    pub panes: Panes,
    /// Search over every execution.
    pub search: Search,
    /// Quit requested.
    pub quit: bool,
    /// Token text.
    pub text: TokenText,
    /// What the title says about token text.
    pub tokenizer: String,
    /// The tokenizer being loaded while ids are shown, for the status line to say so.
    pub text_loading: Option<String>,
    /// Where exports go.
    pub cwd: PathBuf,
    /// Exports still being written, by path.
    pub exporting: Vec<PathBuf>,
    /// Work goes to workers (the run loop): [`App::step`] hands it out as [`Task`]s, the screen
    /// says "exporting…", and the lens is worked out ahead of being shown. Without, the caller
    /// runs each task at once ([`App::step_here`]) and the lens only when something shows it.
    pub workers: bool,
    /// The tasks this step asks for, handed out when it ends.
    tasks: Vec<Task>,
    /// Seeds the lens looks through (`--seeds`).
    pub lens_seeds: u32,
    /// The latest lens and sweep (it may be of other settings than those on screen: see
    /// [`App::whatif`]).
    pub whatif_done: Option<Arc<WhatIf>>,
    /// The options of the what-if being worked out on a worker.
    pub whatif_pending: Option<LensOptions>,
    /// Its progress.
    pub whatif_progress: Option<(usize, usize)>,
    /// Settings pinned to compare with (`m`).
    pub pinned: Option<Pinned>,
    /// The pin compared with the results on screen, once asked for.
    pub compare: Option<Compare>,
    /// The dashboard's breakdown of the results on screen, by generation, once asked for.
    pub breakdown: Option<(u64, Breakdown)>,
    /// The audit of the batch's trained samples, once worked out (it may be of an earlier
    /// batch: see [`App::audit`]).
    pub audited: Option<Arc<Audited>>,
    /// An audit is being worked out for the batch on screen.
    audit_pending: bool,
    /// The selected execution's samples on its tree with the audit's word on each token.
    pub exec_audit: Option<ExecAudit>,
}

/// The default presets `p` cycles through.
fn presets() -> Vec<Vec<Class>> {
    use Class::*;
    vec![
        Class::DEFAULT_PRIORITY.to_vec(),
        vec![Main, Sub, MainSummary, SubSummary],
        vec![Main, MainSummary],
        vec![Main],
        vec![Sub, SubSummary, Main, MainSummary],
    ]
}

impl App {
    /// A new, still loading inspector.
    pub fn new(label: impl Into<String>, settings: Settings, theme: Theme) -> Self {
        let mut priorities = presets();
        if !priorities.contains(&settings.priority) {
            priorities.insert(0, settings.priority.clone());
        }
        let label = label.into();
        App {
            inputs: vec![label.clone()],
            clipboard: None,
            outside: None,
            label,
            load: Load::Loading {
                phase: Phase::Reading,
                done: 0,
                total: 0,
            },
            data: None,
            history: History::new((settings.clone(), AdvantageMode::DrGrpo)),
            settings,
            advantage: AdvantageMode::DrGrpo,
            priorities,
            size: (120, 40),
            focus: Pane::Tokens,
            zoom: false,
            zoom_forced: false,
            overlay: Overlay::None,
            message: None,
            change: None,
            theme,
            colour: ColorMode::Claims,
            boundaries: true,
            detail: true,
            sel: Selection::default(),
            panes: Panes::default(),
            search: Search::default(),
            quit: false,
            text: TokenText::none(),
            tokenizer: "ids (no tokenizer)".into(),
            text_loading: None,
            cwd: PathBuf::from("."),
            exporting: Vec::new(),
            workers: false,
            tasks: Vec::new(),
            lens_seeds: DEFAULT_SEEDS,
            whatif_done: None,
            whatif_pending: None,
            whatif_progress: None,
            pinned: None,
            compare: None,
            breakdown: None,
            audited: None,
            audit_pending: false,
            exec_audit: None,
        }
    }

    /// An inspector on an already loaded batch (the engine runs here).
    pub fn with_batch(
        label: impl Into<String>,
        batch: Batch,
        settings: Settings,
        theme: Theme,
        size: (u16, u16),
    ) -> Self {
        let mut app = App::new(label, settings, theme);
        app.size = size;
        app.step_here(Action::Loaded(Ok(Box::new(batch))));
        app
    }

    /// Pane rectangles for the current size, detail setting and zoom.
    pub fn areas(&self) -> Areas {
        areas(self.size, self.detail, self.zoom.then_some(self.focus))
    }

    /// The pane context (a read-only view of the shared state), once there is an execution.
    pub fn ctx(&self) -> Option<Ctx<'_>> {
        let path = self.path().map(|v| &v.index);
        build_ctx(
            &self.data,
            &self.sel,
            &self.text,
            &self.theme,
            self.view(),
            self.extra_for(path),
        )
    }

    /// What goes with the results on screen: the lens, the pinned results, the subject, the
    /// search, and `path` (the token path on screen).
    fn extra_for<'a>(&'a self, path: Option<&'a PathIndex>) -> Extra<'a> {
        extra(
            &self.data,
            &self.whatif_done,
            &self.pinned,
            self.lens_seeds,
            self.subject(),
            path,
            &self.search,
            (&self.audited, &self.exec_audit, &self.sel),
        )
    }

    /// The lens and sweep of the results on screen, once worked out.
    pub fn whatif(&self) -> Option<&WhatIf> {
        current_whatif(&self.data, &self.whatif_done, self.lens_seeds)
    }

    /// The audit of the batch on screen, once worked out.
    pub fn audit(&self) -> Option<&Audit> {
        current_audit(&self.data, &self.audited)
    }

    /// The pinned results, when they are of the batch on screen.
    pub fn pinned_results(&self) -> Option<&Results> {
        current_pin(&self.data, &self.pinned)
    }

    fn view(&self) -> View {
        View {
            areas: self.areas(),
            focus: self.focus,
            overlay: self.overlay != Overlay::None,
            colour: self.colour,
            boundaries: self.boundaries,
        }
    }

    /// Number of draws of the selected execution.
    pub fn draws(&self) -> u32 {
        self.data.as_ref().map_or(0, |d| {
            d.results
                .admissions
                .get(self.sel.exec)
                .map_or(0, |a| a.draws.len() as u32)
        })
    }

    /// The path on screen, when there is one for the selection.
    pub fn path(&self) -> Option<&PathView> {
        self.panes.tokens.view(&self.sel)
    }

    /// A re-run is under way: the results on screen are of earlier settings.
    pub fn rerunning(&self) -> bool {
        self.data.as_ref().is_some_and(|d| {
            d.results.settings != self.settings || d.results.advantage_mode != self.advantage
        })
    }

    /// What the detail pane is about.
    pub fn subject(&self) -> Subject {
        match (self.focus, self.panes.assess.selected, self.sel.request) {
            (Pane::Assessments, Some(i), _) => Subject::Assessment(i),
            (_, _, Some(r)) => Subject::Request(r),
            _ => Subject::Nothing,
        }
    }

    fn say(&mut self, text: impl Into<String>) {
        self.message = Some(Message {
            text: text.into(),
            at: Instant::now(),
        });
    }

    /// Applies one action, then brings every pane in line with the selection. Work it asks for
    /// (a re-run, a search, the lens, an export) is returned, not done: the run loop hands it to
    /// workers, whose reports come back as actions.
    pub fn step(&mut self, action: Action) -> Vec<Task> {
        match action {
            Action::Resize(w, h) => {
                self.size = (w, h);
                self.panes.tokens.resized();
            }
            Action::Progress(phase, done, total) => {
                if let Load::Loading { .. } = self.load {
                    self.load = Load::Loading { phase, done, total };
                }
            }
            Action::Loaded(Err(e)) => self.load = Load::Failed(e),
            Action::Loaded(Ok(batch)) => {
                let results = gyre_engine::process(&batch, &self.settings, self.advantage);
                self.loaded(Arc::new(*batch), results)
            }
            Action::Processed(batch, results) => {
                let results = self.current(&batch, *results);
                self.loaded(batch, results)
            }
            Action::Grown(batch, results) => self.grown(batch, *results),
            Action::Rerun(r) => self.install(*r),
            Action::Text(t) => {
                // The tokenizer's turn structure is evidence the audit weighs: it runs again.
                if gyre_text::turns::ChatMl::new(&t).is_some() {
                    self.forget_audit();
                }
                self.tokenizer = t.label().to_string();
                self.text = t;
                self.text_loading = None;
                self.panes.tokens.resized();
            }
            Action::TextLoading(name) => {
                self.tokenizer = format!("ids while {name} loads…");
                self.text_loading = Some(name);
            }
            Action::TextFailed(m) => {
                self.text_loading = None;
                self.tokenizer = "ids (the tokenizer failed to load)".into();
                self.say(m);
            }
            Action::Message(m) => self.say(m),
            Action::Exported(path, m) => {
                self.exporting.retain(|p| *p != path);
                self.say(m);
            }
            Action::Found(f) => {
                self.search.receive(f);
                if self.search.go_when_found && !self.search.hits.is_empty() {
                    self.search.go_when_found = false;
                    self.search.at = Some(0);
                    self.goto_hit();
                } else if self.search.go_when_found && self.search.done {
                    self.search.go_when_found = false;
                    let m = format!("/{}: no match", self.search.query);
                    self.say(m);
                }
            }
            Action::Tick(now) => {
                if self
                    .message
                    .as_ref()
                    .is_some_and(|m| now.duration_since(m.at) >= MESSAGE_TTL)
                {
                    self.message = None;
                }
            }
            Action::WhatIf(w) => {
                if self.whatif_pending.as_ref() == Some(&w.options) {
                    self.whatif_pending = None;
                    self.whatif_progress = None;
                }
                // One made for settings left behind since would only displace the current one.
                let current = self.data.as_ref().is_some_and(|d| {
                    w.is_for(
                        &d.batch,
                        &WhatIf::options_for(&d.results.settings, self.lens_seeds),
                    )
                });
                if current {
                    self.whatif_done = Some(w);
                }
            }
            Action::Audited(a) => {
                if self
                    .data
                    .as_ref()
                    .is_some_and(|d| Arc::ptr_eq(&d.batch, &a.batch))
                {
                    self.audited = Some(a);
                    self.audit_pending = false;
                    self.exec_audit = None;
                }
            }
            Action::WhatIfProgress(done, total) => {
                if self.whatif_pending.is_some() {
                    self.whatif_progress = Some((done, total));
                }
            }
            Action::Input(c) => self.edit(Edit::Char(c)),
            Action::Backspace => self.edit(Edit::Backspace),
            Action::ClearField => self.edit(Edit::Clear),
            Action::DeleteWord => self.edit(Edit::DeleteWord),
            Action::Click(x, y) => self.click(x, y),
            Action::Wheel(x, y, down) => self.wheel(x, y, down),
            Action::Cmd(c) => self.command(c),
        }
        self.keep_focus_shown();
        self.sync();
        self.refresh_whatif();
        self.refresh_audit();
        self.refresh_compare();
        self.refresh_breakdown();
        // What was worked out for the overlay reaches it (the dashboard's bars fit new figures).
        self.sync_overlay();
        std::mem::take(&mut self.tasks)
    }

    /// Applies one action and then, on this thread, the work it asks for, feeding what the work
    /// reports back in until nothing is left to do: an inspector without workers (a batch loaded
    /// in place, tests, benchmarks).
    pub fn step_here(&mut self, action: Action) {
        let mut queue: VecDeque<Task> = self.step(action).into();
        while let Some(task) = queue.pop_front() {
            let reports = Mutex::new(Vec::new());
            task.run(&|a| {
                reports.lock().unwrap_or_else(|e| e.into_inner()).push(a);
            });
            for a in reports.into_inner().unwrap_or_else(|e| e.into_inner()) {
                queue.extend(self.step(a));
            }
        }
    }

    /// Counts the dashboard's figures for the results on screen while it is open.
    fn refresh_breakdown(&mut self) {
        if !self.overlay.reads().breakdown {
            return;
        }
        let Some(d) = &self.data else { return };
        if self
            .breakdown
            .as_ref()
            .is_some_and(|(g, _)| *g == self.sel.generation)
        {
            return;
        }
        let b = stats::breakdown(&d.batch, &d.results);
        self.breakdown = Some((self.sel.generation, b));
    }

    /// The dashboard's breakdown, when it is of the results on screen.
    pub fn breakdown(&self) -> Option<&Breakdown> {
        self.breakdown
            .as_ref()
            .filter(|(g, _)| *g == self.sel.generation)
            .map(|(_, b)| b)
    }

    /// The comparison of the pin with the results on screen, when it is up to date.
    pub fn comparison(&self) -> Option<&Compare> {
        self.compare
            .as_ref()
            .filter(|c| c.generation == self.sel.generation)
    }

    /// Whether something on screen reads the lens or the sweep (without workers they are
    /// worked out only then).
    fn whatif_wanted(&self) -> bool {
        self.colour == ColorMode::Lens || self.overlay.reads().whatif
    }

    /// Asks for the lens and sweep of the results on screen when they are missing: always with
    /// workers, else only when something shows them.
    fn refresh_whatif(&mut self) {
        let Some(d) = &self.data else { return };
        let options = WhatIf::options_for(&d.results.settings, self.lens_seeds);
        if self.whatif().is_some() || self.whatif_pending.as_ref() == Some(&options) {
            return;
        }
        if !self.workers && !self.whatif_wanted() {
            return;
        }
        let batch = Arc::clone(&d.batch);
        self.whatif_pending = Some(options.clone());
        if self.workers {
            self.whatif_progress = Some((0, 2 * batch.executions.len()));
        }
        self.tasks.push(Task::WhatIf {
            batch,
            options,
            progress: self.workers,
        });
    }

    /// Asks for the audit of the batch on screen when it holds trained samples and has none.
    fn refresh_audit(&mut self) {
        let Some(d) = &self.data else { return };
        if !d.samples || self.audit_pending || self.audit().is_some() {
            return;
        }
        self.audit_pending = true;
        self.tasks.push(Task::Audit {
            batch: Arc::clone(&d.batch),
            text: self.text.clone(),
        });
        // What was laid out for the old audit waits for the new one.
        self.sync_exec_audit();
    }

    /// Drops the audit and what was laid out from it (a new batch, a new tokenizer).
    fn forget_audit(&mut self) {
        self.audited = None;
        self.audit_pending = false;
        self.exec_audit = None;
    }

    /// Lays the selected execution's samples on its tree once the audit is there, and
    /// highlights the selected sample.
    fn sync_exec_audit(&mut self) {
        let (exec, batch) = (self.sel.exec, self.sel.batch);
        let current = self
            .exec_audit
            .as_ref()
            .is_some_and(|a| a.exec == exec && a.batch == batch);
        let Some(d) = &self.data else { return };
        let audited = self
            .audited
            .as_ref()
            .filter(|a| Arc::ptr_eq(&a.batch, &d.batch));
        let Some(a) = audited else {
            self.exec_audit = None;
            return;
        };
        if exec >= d.batch.executions.len() {
            self.exec_audit = None;
            return;
        }
        if !current {
            self.exec_audit = Some(ExecAudit::of(a, exec, batch));
        }
        if let Some(e) = &mut self.exec_audit {
            let n = d.batch.executions[exec].trained.list.len() as u32;
            self.sel.sample = self.sel.sample.filter(|&s| s < n);
            e.highlight(&d.batch, self.sel.sample);
        }
    }

    /// Compares the pin with the results on screen while the compare view is open.
    fn refresh_compare(&mut self) {
        if !self.overlay.reads().comparison {
            return;
        }
        let (Some(d), Some(p)) = (&self.data, &self.pinned) else {
            return;
        };
        if self
            .compare
            .as_ref()
            .is_some_and(|c| c.generation == self.sel.generation)
        {
            return;
        }
        self.compare = Some(Compare::new(p, &d.results, self.sel.generation));
    }

    /// A resize or a zoom toggled off can hide the focused pane: the focus moves to the tokens,
    /// else to the first pane shown.
    fn keep_focus_shown(&mut self) {
        let shown = self.areas().order();
        if !shown.is_empty() && !shown.contains(&self.focus) {
            self.focus = if shown.contains(&Pane::Tokens) {
                Pane::Tokens
            } else {
                shown[0]
            };
        }
    }

    /// When the next message fades (the run loop wakes then, and only then, while idle).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.message.as_ref().map(|m| m.at + MESSAGE_TTL)
    }

    fn loaded(&mut self, batch: Arc<Batch>, results: Results) {
        let totals = stats::totals(&batch, &results);
        self.data = Some(Data {
            samples: has_samples(&batch),
            batch,
            results: Arc::new(results),
            totals,
        });
        self.forget_audit();
        // A message said while loading (what was remembered) had no status line to show on.
        if let (Load::Loading { .. }, Some(m)) = (&self.load, &mut self.message) {
            m.at = Instant::now();
        }
        self.load = Load::Ready;
        self.change = None;
        self.new_results();
        self.sel.batch += 1;
        // Open on the execution with the most draws (the first such), at draw n/n.
        let d = self.data.as_ref().expect("just set");
        let best = (0..d.batch.executions.len())
            .max_by_key(|&i| (d.results.admissions[i].draws.len(), std::cmp::Reverse(i)));
        if let Some(best) = best {
            self.apply(Effect::OpenExec(best));
        }
    }

    /// `results` when they were made with the settings asked for, else the engine's under them.
    fn current(&self, batch: &Batch, results: Results) -> Results {
        if results.settings == self.settings && results.advantage_mode == self.advantage {
            results
        } else {
            gyre_engine::process(batch, &self.settings, self.advantage)
        }
    }

    /// The followed recording grew: the new batch replaces the old one, the selection stays on
    /// the same execution and request (by id) with every draw shown, and the status line says
    /// what arrived.
    fn grown(&mut self, batch: Arc<Batch>, results: Results) {
        let results = self.current(&batch, results);
        let Some(old) = self.data.take() else {
            return self.loaded(batch, results);
        };
        let old_exec = old.batch.executions.get(self.sel.exec);
        let request_id = old_exec
            .zip(self.sel.request)
            .and_then(|(e, r)| e.requests.get(r as usize))
            .map(|r| r.id.clone());
        let exec = old_exec.and_then(|e| batch.execution_index(&e.id));
        let requests = |b: &Batch| b.executions.iter().map(|e| e.requests.len()).sum::<usize>();
        let (execs, reqs) = (
            (old.batch.executions.len(), batch.executions.len()),
            (requests(&old.batch), requests(&batch)),
        );
        // A rewritten file can also hold less than before: the counts say which.
        let delta = |(was, now): (usize, usize)| now as i64 - was as i64;
        let said = format!(
            "recording {}: {} executions ({:+}), {} requests ({:+})",
            if execs.1 < execs.0 || reqs.1 < reqs.0 {
                "rewritten"
            } else {
                "grew"
            },
            execs.1,
            delta(execs),
            reqs.1,
            delta(reqs),
        );
        let totals = stats::totals(&batch, &results);
        self.data = Some(Data {
            samples: has_samples(&batch),
            batch,
            results: Arc::new(results),
            totals,
        });
        self.forget_audit();
        self.sel.sample = None;
        // The Δ line's figures are of the old batch.
        self.change = None;
        self.new_results();
        // Overlays that name requests of the old batch close at the next sync.
        self.sel.batch += 1;
        match exec {
            Some(i) => {
                let d = self.data.as_ref().expect("just set");
                self.sel.exec = i;
                self.sel.step = d.results.admissions[i].draws.len() as u32;
                let e = &d.batch.executions[i];
                self.sel.request = request_id
                    .and_then(|id| e.request_index(&id))
                    .or_else(|| e.requests.len().checked_sub(1).map(|r| r as u32));
            }
            None => {
                // Gone (or no execution left at all): the first one opens, if any.
                self.sel = Selection {
                    generation: self.sel.generation,
                    batch: self.sel.batch,
                    ..Selection::default()
                };
                self.apply_effect(Effect::OpenExec(0));
            }
        }
        // A pin compares with the old batch: it goes.
        let said = if self.pinned.take().is_some() {
            self.compare = None;
            if self.colour == ColorMode::Flips {
                self.colour = ColorMode::Claims;
            }
            format!("{said} · pin dropped (the recording changed under it)")
        } else {
            said
        };
        // Hits point into the old batch: the same query runs again on the new one.
        if self.search.active() {
            let (query, d) = (
                self.search.query.clone(),
                self.data.as_ref().expect("just set"),
            );
            let batch = Arc::clone(&d.batch);
            let search = self.search.start(&query, &batch, &self.text, self.sel.exec);
            self.tasks.extend(search.map(Task::Search));
        }
        self.say(said);
    }

    /// Brings every pane in line with the selection.
    fn sync(&mut self) {
        self.sync_exec_audit();
        for pane in Pane::ALL {
            self.on_pane(pane, |ctx, p| p.sync(ctx));
        }
        self.sync_overlay();
    }

    /// Brings the open overlay in line with the state, closing it when what it shows is gone.
    fn sync_overlay(&mut self) {
        let mut open = std::mem::replace(&mut self.overlay, Overlay::None);
        let Some(view) = open.view_mut() else { return };
        if view.sync(&self.overlay_cx()) {
            self.overlay = open;
        }
    }

    /// What the overlays read: the screen, the data on screen and what was worked out for it.
    pub fn overlay_cx(&self) -> Cx<'_> {
        Cx {
            theme: &self.theme,
            full: self.areas().full,
            ctx: self.ctx(),
            search: &self.search,
            breakdown: self.breakdown(),
            comparison: self.comparison(),
            whatif: self.whatif(),
            whatif_progress: self.whatif_progress,
            pinned: self
                .pinned_results()
                .and(self.pinned.as_ref())
                .map(|p| p.label.as_str()),
            settings: self.export_settings(),
            cwd: &self.cwd,
            exporting: &self.exporting,
        }
    }

    /// Hands a key, an edit or the wheel to the open overlay, then carries out its reply.
    fn hand_overlay(&mut self, f: impl FnOnce(&mut dyn OverlayView, &Cx) -> Reply) {
        let mut open = std::mem::replace(&mut self.overlay, Overlay::None);
        let Some(view) = open.view_mut() else { return };
        let reply = f(view, &self.overlay_cx());
        if !reply.close {
            self.overlay = open;
        }
        for a in reply.asks {
            self.ask(a);
        }
    }

    /// Does what an overlay asks.
    fn ask(&mut self, a: Ask) {
        match a {
            Ask::Say(m) => self.say(m),
            Ask::Apply(e) => self.apply(e),
            Ask::Colour(c) => self.colour = c,
            Ask::Export { name, force } => self.export(&name, force),
            Ask::Palette(parsed) => self.run_palette(parsed),
            Ask::Priority(new) => {
                if new != self.settings.priority {
                    self.settings.priority = new;
                    if !self.priorities.contains(&self.settings.priority) {
                        self.priorities.push(self.settings.priority.clone());
                    }
                    self.rerun();
                }
            }
            Ask::Jmax(j) => {
                if self.settings.jmax != j {
                    self.settings.jmax = j;
                    self.rerun();
                }
            }
            Ask::Clipboard(text) => self.clipboard = Some(text),
            Ask::Outside(o) => self.outside = Some(o),
            Ask::GoTo(kind, forward) => self.goto(kind, forward),
            Ask::Search(query) => {
                if let Some(d) = &self.data {
                    let batch = Arc::clone(&d.batch);
                    let search = self.search.start(&query, &batch, &self.text, self.sel.exec);
                    self.tasks.extend(search.map(Task::Search));
                }
            }
            Ask::ClearSearch => self.search.clear(),
            Ask::OpenHit(at) => self.open_hit(at),
            Ask::Sample(s) => {
                self.sel.sample = s;
                self.sync();
            }
        }
    }

    /// Enter in the search list: goes to the result chosen, or, while the worker is still
    /// searching and has found nothing yet, to the first one it finds.
    fn open_hit(&mut self, at: usize) {
        if self.search.hits.is_empty() && !self.search.done {
            // Keys faster than the worker: "no match" would be a guess.
            self.search.go_when_found = true;
            let m = format!(
                "/{}: searching… the first match opens when it is found",
                self.search.query
            );
            return self.say(m);
        }
        if self.search.hits.is_empty() {
            let m = format!("/{}: no match", self.search.query);
            return self.say(m);
        }
        self.search.at = Some(at.min(self.search.hits.len() - 1));
        self.goto_hit();
    }

    /// The pane context and the panes, borrowed apart: the one place the context is built for
    /// panes to change. It carries no token path (the tokens pane owns it: see
    /// [`App::on_pane`]).
    fn split(&mut self) -> (Option<Ctx<'_>>, &mut Panes) {
        let view = self.view();
        let extra = extra(
            &self.data,
            &self.whatif_done,
            &self.pinned,
            self.lens_seeds,
            self.subject(),
            None,
            &self.search,
            (&self.audited, &self.exec_audit, &self.sel),
        );
        let ctx = build_ctx(&self.data, &self.sel, &self.text, &self.theme, view, extra);
        (ctx, &mut self.panes)
    }

    /// Runs `f` on pane `which` with its context, which carries the token path on screen for
    /// every pane but the tokens pane.
    fn on_pane<R>(
        &mut self,
        which: Pane,
        f: impl FnOnce(&Ctx, &mut dyn PaneView) -> R,
    ) -> Option<R> {
        let sel = self.sel;
        let (ctx, panes) = self.split();
        let ctx = ctx?;
        let (path, pane) = panes.split(which, &sel);
        Some(f(&Ctx { path, ..ctx }, pane))
    }

    /// Runs `f` with the pane context and the panes, for what one pane alone does.
    fn with_ctx<R>(&mut self, f: impl FnOnce(&Ctx, &mut Panes) -> R) -> Option<R> {
        let (ctx, panes) = self.split();
        Some(f(&ctx?, panes))
    }

    /// Applies an effect (open an execution, show a request at a position, a replay step…)
    /// and brings the panes in line, as a key or click asking for it would.
    pub fn apply(&mut self, e: Effect) {
        self.apply_effect(e);
        self.sync();
    }

    /// Applies a pane's effect to the shared selection.
    fn apply_effect(&mut self, e: Effect) {
        let Some(d) = self.data.as_ref() else { return };
        let n_exec = d.batch.executions.len();
        // An overlay can outlive its execution (`--follow` read the recording shorter).
        let selected = self.sel.exec < n_exec;
        match e {
            Effect::OpenExec(i) if i < n_exec => {
                let exec = &d.batch.executions[i];
                let adm = &d.results.admissions[i];
                // The last draw's leaf, else the committed request, else the last request.
                let first = adm
                    .draws
                    .last()
                    .map(|dr| dr.chosen)
                    .or_else(|| {
                        exec.closure
                            .as_ref()
                            .and_then(|c| c.record.committed.as_deref())
                            .and_then(|id| exec.request_index(id))
                    })
                    .or_else(|| exec.requests.len().checked_sub(1).map(|r| r as u32));
                self.sel.exec = i;
                self.sel.request = first;
                self.sel.step = adm.draws.len() as u32;
                self.sel.sample = None;
            }
            Effect::OpenExec(_) => {}
            Effect::SelectRequest(_) | Effect::ShowPos { .. } | Effect::Step(_) if !selected => {}
            Effect::SelectRequest(r) => {
                if (r as usize) < d.batch.executions[self.sel.exec].requests.len() {
                    self.sel.request = Some(r);
                }
            }
            Effect::ShowPos { request, pos } => {
                self.apply_effect(Effect::SelectRequest(request));
                self.sync();
                self.with_ctx(|ctx, p| p.tokens.set_cursor(ctx, pos));
            }
            Effect::Jump { exec, request, pos } => {
                if exec != self.sel.exec {
                    self.apply_effect(Effect::OpenExec(exec));
                }
                self.apply_effect(Effect::ShowPos { request, pos });
            }
            Effect::Step(k) => {
                let adm = &d.results.admissions[self.sel.exec];
                let k = k.min(adm.draws.len() as u32);
                self.sel.step = k;
                if k == 0 {
                    return;
                }
                let draw = &adm.draws[k as usize - 1];
                let chosen = draw.chosen;
                let exec = &d.batch.executions[self.sel.exec];
                // The cursor goes to the first token this draw claimed.
                let pos = draw
                    .targets
                    .first()
                    .map(|&t| exec.tree.depth_tokens(exec.tree.nodes[t as usize].parent));
                match pos {
                    Some(pos) => self.apply_effect(Effect::ShowPos {
                        request: chosen,
                        pos,
                    }),
                    None => self.apply_effect(Effect::SelectRequest(chosen)),
                }
            }
            Effect::Focus(p) => {
                if self.areas().order().contains(&p) {
                    self.focus = p;
                }
            }
            Effect::Message(m) => self.say(m),
        }
    }

    fn apply_all(&mut self, effects: Vec<Effect>) {
        for e in effects {
            self.apply(e);
        }
    }

    fn command(&mut self, c: Command) {
        if c == Command::Quit {
            self.quit = true;
            if let Some(p) = self.exporting.first() {
                let m = format!("quitting once {} is written…", p.display());
                self.say(m);
            }
            return;
        }
        if self.overlay != Overlay::None {
            self.hand_overlay(|o, cx| o.command(cx, c));
            return;
        }
        if c == Command::Help {
            self.overlay = Overlay::Help(HelpView(0));
            return;
        }
        let Some(d) = self.data.as_ref() else { return };
        if d.batch.executions.is_empty() {
            return;
        }
        match c {
            Command::Escape => {
                if self.search.active() {
                    self.search.clear();
                } else if self.message.is_some() {
                    self.message = None;
                } else {
                    self.change = None;
                }
            }
            Command::FocusNext | Command::FocusPrev => {
                let order = self.tab_order();
                let i = order.iter().position(|p| *p == self.focus).unwrap_or(0);
                let n = order.len();
                if n > 0 {
                    let next = if c == Command::FocusNext {
                        (i + 1) % n
                    } else {
                        (i + n - 1) % n
                    };
                    self.focus_pane(order[next]);
                }
            }
            Command::Jump(n) => {
                if let Some(p) = Pane::numbered(n) {
                    self.focus_pane(p);
                }
            }
            Command::Zoom => {
                self.zoom = !self.zoom;
                self.zoom_forced = false;
                self.panes.tokens.resized();
            }
            Command::DrawNext if self.sel.step >= self.draws() => {
                self.say(format!(
                    "already at draw {0}/{0}: the admitted state ([ steps back)",
                    self.draws()
                ));
            }
            Command::DrawPrev if self.sel.step == 0 => {
                self.say(format!(
                    "already at draw 0/{}: nothing claimed yet (] steps forward)",
                    self.draws()
                ));
            }
            Command::DrawNext => self.apply(Effect::Step(self.sel.step + 1)),
            Command::DrawPrev => self.apply(Effect::Step(self.sel.step - 1)),
            Command::DrawFirst => self.apply(Effect::Step(0)),
            Command::DrawLast => self.apply(Effect::Step(self.draws())),
            Command::ReplayLog => {
                let m = self.panes.replay.toggle_mode();
                self.say(m);
            }
            Command::Why => self.open_why(),
            Command::Colour => {
                let (pin, samples) = (self.pinned_results().is_some(), d.samples);
                self.colour = self.colour.next_of(|m| match m {
                    ColorMode::Flips => pin,
                    ColorMode::Audit | ColorMode::Gap => samples,
                    _ => true,
                });
            }
            Command::Audit => {
                if d.samples {
                    self.overlay = Overlay::Audit(AuditView::default());
                } else {
                    self.say(
                        "no trained samples to audit: the audit reads `trained` records (gyre \
                         import of a trainer's dump, gyre admit --format trained)",
                    );
                }
            }
            Command::Pin => self.pin(),
            Command::Compare => {
                if self.pinned_results().is_some() {
                    self.overlay = Overlay::Compare(CompareView(0));
                } else {
                    self.say("nothing pinned: m pins the settings on screen, then change them");
                }
            }
            Command::Row => self.overlay = Overlay::Row(RowView(0)),
            Command::Dashboard => self.overlay = Overlay::Dashboard(Dash::default()),
            Command::Boundaries => self.boundaries = !self.boundaries,
            Command::Detail => {
                self.detail = !self.detail;
                if self.detail && self.areas().detail.width == 0 {
                    self.say(format!(
                        "the detail pane needs a terminal at least {NARROW} columns wide (6 \
                         shows it zoomed)"
                    ));
                }
                if !self.areas().order().contains(&self.focus) {
                    self.focus = Pane::Tokens;
                }
                self.panes.tokens.resized();
            }
            Command::SeedUp | Command::SeedDown => {
                let old = self.settings.seed;
                // Seeds count from 0: below it there is nothing to step to (wrapping showed
                // 18446744073709551615, a seed nobody means).
                self.settings.seed = if c == Command::SeedUp {
                    old.saturating_add(1)
                } else {
                    old.saturating_sub(1)
                };
                if old == self.settings.seed {
                    self.say(format!("seed {old} is the first seed; s steps up"));
                } else {
                    self.rerun();
                }
            }
            Command::JmaxUp | Command::JmaxDown => {
                let old = self.settings.jmax;
                self.settings.jmax = if c == Command::JmaxUp {
                    old.saturating_add(1)
                } else {
                    old.saturating_sub(1)
                };
                if old != self.settings.jmax {
                    self.rerun();
                }
            }
            Command::Priority => {
                let old = self.settings.priority.clone();
                let i = self
                    .priorities
                    .iter()
                    .position(|p| *p == old)
                    .map_or(0, |i| (i + 1) % self.priorities.len());
                self.settings.priority = self.priorities[i].clone();
                self.rerun();
            }
            Command::EditPriority => {
                self.overlay = Overlay::Priority(PriorityEditor::new(&self.settings.priority));
            }
            Command::Advantage => {
                let old = self.advantage;
                self.advantage = match old {
                    AdvantageMode::DrGrpo => AdvantageMode::Grpo,
                    AdvantageMode::Grpo => AdvantageMode::None,
                    AdvantageMode::None => AdvantageMode::DrGrpo,
                };
                self.rerun();
            }
            Command::Undo | Command::Redo => self.undo_redo(c == Command::Undo),
            Command::Sort => {
                self.panes.execs.next_sort();
                self.sync();
                self.say_sorted();
            }
            Command::Filter => {
                let effects = self.with_ctx(|ctx, p| p.execs.next_filter(ctx));
                self.apply_all(effects.unwrap_or_default());
            }
            Command::Search => {
                // A new query each time (n and N still step through the last one's matches).
                self.overlay = Overlay::Search(SearchView::default())
            }
            Command::SearchNext | Command::SearchPrev => self.search_step(c == Command::SearchNext),
            Command::Export => {
                self.overlay = Overlay::Export(ExportPrompt::new(self.proposed_export()));
            }
            Command::Copy => {
                let (path, why) = (self.path(), self.why_request());
                let items = self
                    .ctx()
                    .map(|ctx| super::copy::items(&ctx, path, why, &self.inputs, self.lens_seeds));
                self.overlay = Overlay::Copy(CopyMenu(items.unwrap_or_default()));
            }
            Command::Outside => {
                let (path, why) = (self.path(), self.why_request());
                let items = self.ctx().map(|ctx| super::outside::items(&ctx, path, why));
                self.overlay = Overlay::Outside(OutsideMenu(items.unwrap_or_default()));
            }
            Command::GoTo => {
                let counts = self.with_ctx(|ctx, p| p.tree.counts(ctx));
                self.overlay = Overlay::GoTo(GoToMenu(counts.unwrap_or_default()));
            }
            Command::GoNext | Command::GoPrev => match self.panes.tree.landmark {
                Some(kind) => self.goto(kind, c == Command::GoNext),
                None => self.say(
                    "no kind chosen yet: ' then a letter picks one (c compaction, s sub-agent, \
                     r retry, v divergence, o candidate, d drawn)",
                ),
            },
            Command::TreeFilter => {
                let now = self
                    .panes
                    .tree
                    .filter
                    .as_ref()
                    .map_or(String::new(), |f| f.query.clone());
                self.overlay = Overlay::Palette(PaletteView::new(format!("tree-filter {now}")))
            }
            Command::Palette => self.overlay = Overlay::Palette(PaletteView::default()),
            Command::NextTarget
            | Command::PrevTarget
            | Command::NextLeftOut
            | Command::PrevLeftOut
            | Command::NextContext
            | Command::PrevContext
            | Command::NextDivergence
            | Command::PrevDivergence => {
                let effects = self.on_pane(Pane::Tokens, |ctx, p| p.command(ctx, c));
                self.apply_all(effects.unwrap_or_default());
            }
            _ => self.pane_command(c),
        }
    }

    /// Selects the next (previous) request of `kind` in the tree and shows the tree.
    fn goto(&mut self, kind: Landmark, forward: bool) {
        let effects = self.with_ctx(|ctx, p| p.tree.goto(ctx, kind, forward));
        let effects = effects.unwrap_or_default();
        let found = effects
            .iter()
            .any(|e| matches!(e, Effect::SelectRequest(_)));
        self.apply_all(effects);
        if found && self.focus != Pane::Tree {
            self.focus_pane(Pane::Tree);
        }
    }

    /// Sets (or, blank, clears) the tree filter.
    fn tree_filter(&mut self, query: &str) {
        let effects = self.with_ctx(|ctx, p| p.tree.set_filter(ctx, Some(query)));
        self.apply_all(effects.unwrap_or_default());
        if self.panes.tree.filter.is_some() && self.focus != Pane::Tree {
            self.focus_pane(Pane::Tree);
        }
    }

    /// `Ctrl-z` / `Ctrl-y`: asks for the settings before (after) the current ones again and
    /// says which change that undoes (redoes).
    fn undo_redo(&mut self, undo: bool) {
        let step = if undo {
            self.history.undo()
        } else {
            self.history.redo()
        };
        let Some((settings, advantage)) = step else {
            return self.say(if undo {
                "nothing to undo: no settings change before this one"
            } else {
                "nothing to redo"
            });
        };
        let what = settings_change((&self.settings, self.advantage), (&settings, advantage));
        let (left_back, left_forward) = self.history.depth();
        if !self.priorities.contains(&settings.priority) {
            self.priorities.push(settings.priority.clone());
        }
        self.settings = settings;
        self.advantage = advantage;
        self.rerun();
        self.say(if undo {
            format!("undo: {what} ({left_back} more to undo · Ctrl-y redoes)")
        } else {
            format!("redo: {what} ({left_forward} more to redo · Ctrl-z undoes)")
        });
    }

    /// The Tab order: the panes of the layout in screen order, then those it leaves out (the
    /// detail pane below {NARROW} columns), which open zoomed.
    fn tab_order(&self) -> Vec<Pane> {
        let mut order = areas(self.size, self.detail, None).order();
        let left_out: Vec<Pane> = Pane::ALL
            .into_iter()
            .filter(|p| !order.contains(p) && self.shown_zoomed(*p))
            .collect();
        order.extend(left_out);
        order
    }

    fn shown_zoomed(&self, p: Pane) -> bool {
        areas(self.size, self.detail, Some(p)).order().contains(&p)
    }

    /// Focuses `p`: in the layout when it has room for it (ending a zoom opened only for a
    /// pane left out), zoomed when the user zoomed, else opened zoomed and said so.
    fn focus_pane(&mut self, p: Pane) {
        let beside = areas(self.size, self.detail, None).order().contains(&p);
        if beside && self.zoom && self.zoom_forced {
            self.zoom = false;
            self.zoom_forced = false;
            self.panes.tokens.resized();
        }
        if beside || (self.zoom && self.shown_zoomed(p)) {
            self.focus = p;
        } else if self.shown_zoomed(p) {
            self.focus = p;
            self.zoom = true;
            self.zoom_forced = true;
            self.panes.tokens.resized();
            self.say(format!(
                "pane {} zoomed: no room for it beside the others at {} columns (z goes back)",
                p.number(),
                self.size.0
            ));
        }
    }

    /// After `o`: the list keeps the selected execution on screen, so the first row (the
    /// largest) may be scrolled away; the status line names it and how to get there.
    fn say_sorted(&mut self) {
        let Some(d) = &self.data else { return };
        let (rows, row) = (&self.panes.execs.rows, self.panes.execs.row);
        let Some(&first) = rows.first() else { return };
        let by = self.panes.execs.sort.name();
        let m = if row == 0 || self.panes.execs.offset == 0 {
            format!("executions by {by}")
        } else {
            format!(
                "executions by {by}: first {} (g in the list goes there) · {} stays selected, row {}/{}",
                gyre_format::sanitize(&d.batch.executions[first].id),
                gyre_format::sanitize(&d.batch.executions[self.sel.exec].id),
                row + 1,
                rows.len()
            )
        };
        self.say(m);
    }

    fn pane_command(&mut self, c: Command) {
        let effects = self.on_pane(self.focus, |ctx, p| p.command(ctx, c));
        let effects = effects.unwrap_or_default();
        // A link followed in a zoomed pane lands in the tokens pane: the zoom gives way to it.
        let lands = effects.iter().any(|e| {
            matches!(
                e,
                Effect::SelectRequest(_)
                    | Effect::ShowPos { .. }
                    | Effect::Jump { .. }
                    | Effect::OpenExec(_)
            )
        });
        if self.zoom && self.focus != Pane::Tokens && lands {
            self.zoom = false;
            self.zoom_forced = false;
            self.focus = Pane::Tokens;
            self.panes.tokens.resized();
        }
        self.apply_all(effects);
    }

    /// `m`: pins the results on screen, or drops the pin.
    fn pin(&mut self) {
        if self.pinned.take().is_some() {
            self.compare = None;
            if self.colour == ColorMode::Flips {
                self.colour = ColorMode::Claims;
            }
            self.say("pin dropped");
            return;
        }
        if self.rerunning() {
            self.say("a re-run is under way: pin once it is on screen");
            return;
        }
        let Some(d) = &self.data else { return };
        let label = self.export_settings();
        self.pinned = Some(Pinned {
            batch: Arc::clone(&d.batch),
            results: Arc::clone(&d.results),
            label: label.clone(),
        });
        self.say(format!(
            "pinned {label}: change settings, then C compares and c colours the flips"
        ));
    }

    /// The request `y` explains: the one whose output is under the token cursor (tokens
    /// focused), the candidate highlighted in the replay pane (replay focused), else the
    /// selected one.
    pub fn why_request(&self) -> Option<u32> {
        let highlighted = (self.focus == Pane::Replay)
            .then(|| {
                let ctx = self.ctx()?;
                self.panes.replay.selected_request(&ctx)
            })
            .flatten();
        let under_cursor = (self.focus == Pane::Tokens)
            .then(|| {
                let d = self.data.as_ref()?;
                let v = self.path()?;
                let exec = &d.batch.executions[self.sel.exec];
                let (n, _) = v.index.node_at(v.cursor);
                let node = &exec.tree.nodes[n as usize];
                (node.kind == gyre_engine::tree::NodeKind::Output).then_some(node.owner)
            })
            .flatten();
        highlighted.or(under_cursor).or(self.sel.request)
    }

    fn open_why(&mut self) {
        match self.why_request() {
            Some(request) => {
                self.overlay = Overlay::Why(WhyView {
                    exec: self.sel.exec,
                    request,
                    scroll: 0,
                    batch: self.sel.batch,
                })
            }
            None => self.say("no request selected"),
        }
    }

    /// Enter in the palette: goes to a position, opens an execution or a request, sets a
    /// setting, or runs a command of the key table as its key would.
    fn run_palette(&mut self, parsed: Parsed) {
        let (e, arg) = match parsed {
            Parsed::Nothing => return,
            Parsed::Unknown(m) => return self.say(m),
            Parsed::Position(n) => return self.goto_position(n),
            Parsed::Run(e, arg) => (e, arg),
        };
        // Alone, `tree-filter` clears the filter (its key opens this field).
        if e.name == "tree-filter" {
            return self.tree_filter(&arg);
        }
        match (e.command, e.arg, arg.is_empty()) {
            (Some(c), _, true) => self.command(c),
            (None, Some(what), true) => self.say(format!(":{} needs {what}: {}", e.name, e.help)),
            (_, Some(_), false) => self.palette_arg(&e.name, &arg),
            (_, None, _) => self.say(format!(":{} takes no argument", e.name)),
        }
    }

    /// `:execution ID`, `:request ID`, `:seed N`, `:jmax N`, `:priority A>B`, `:advantage M`.
    fn palette_arg(&mut self, name: &str, arg: &str) {
        let Some(d) = &self.data else { return };
        match name {
            "goto" => match Landmark::parse(arg) {
                Some(kind) => self.goto(kind, true),
                None => self.say(format!("goto {arg:?}: one of {}", Landmark::names())),
            },
            "execution" => match d.batch.execution_index(arg) {
                Some(i) => self.apply(Effect::OpenExec(i)),
                None => self.say(format!("no execution {arg:?}")),
            },
            "request" => {
                // A batch without executions has nothing selected to look in.
                let Some(exec) = d.batch.executions.get(self.sel.exec) else {
                    self.say(format!("no request {arg:?}: the batch has no executions"));
                    return;
                };
                match exec.request_index(arg) {
                    Some(r) => self.apply(Effect::SelectRequest(r)),
                    None => {
                        let m = format!("no request {arg:?} in {}", exec.id);
                        self.say(m)
                    }
                }
            }
            "advantage" => match AdvantageMode::parse(arg) {
                Some(a) if a == self.advantage => self.say(format!("advantage is {arg} already")),
                Some(a) => {
                    self.advantage = a;
                    self.rerun();
                }
                None => self.say(format!(
                    "advantage {arg:?}: one of {}",
                    AdvantageMode::names()
                )),
            },
            _ => {
                let mut s = self.settings.clone();
                match s.set(name, arg) {
                    Err(m) => self.say(m),
                    Ok(()) if s == self.settings => self.say(format!("{name} is {arg} already")),
                    Ok(()) => {
                        if !self.priorities.contains(&s.priority) {
                            self.priorities.push(s.priority.clone());
                        }
                        self.settings = s;
                        self.rerun();
                    }
                }
            }
        }
    }

    /// Puts the token cursor on path position `n` (1-based) and says where it is.
    fn goto_position(&mut self, n: u64) {
        let (Some(r), Some(len)) = (self.sel.request, self.path().map(|v| v.index.len)) else {
            return self.say("no path on screen to go to a position on");
        };
        if n == 0 {
            return self.say(format!(
                "not a position: 0 (1 to {len}: 1 is the first token)"
            ));
        }
        self.apply(Effect::ShowPos {
            request: r,
            pos: n - 1,
        });
        if let Some(v) = self.path() {
            let m = format!("position {}/{}", v.cursor + 1, v.index.len);
            self.say(m);
        }
    }

    /// A character or edit key while an overlay is open.
    fn edit(&mut self, e: Edit) {
        self.hand_overlay(|o, cx| o.edit(cx, e));
    }

    fn search_step(&mut self, forward: bool) {
        let n = self.search.hits.len();
        if n == 0 {
            self.say(if self.search.active() {
                "no match"
            } else {
                "no search: press / first"
            });
            return;
        }
        self.search.at = Some(match self.search.at {
            None => 0,
            Some(i) if forward => (i + 1) % n,
            Some(i) => (i + n - 1) % n,
        });
        self.goto_hit();
    }

    fn goto_hit(&mut self) {
        let Some(d) = &self.data else { return };
        let Some(at) = self.search.at else { return };
        let Some(hit) = self.search.hits.get(at).copied() else {
            return;
        };
        let e = Search::target(&d.batch, &hit);
        let m = format!(
            "/{}: match {}/{}{}",
            self.search.query,
            at + 1,
            self.search.hits.len(),
            if self.search.done {
                ""
            } else {
                " (still searching)"
            }
        );
        self.apply(e);
        self.sync();
        self.say(m);
    }

    /// Asks the engine to re-run with the current settings (the screen keeps the old results
    /// and says "re-running…" until the results come back).
    fn rerun(&mut self) {
        self.history.asked((self.settings.clone(), self.advantage));
        let Some(d) = &self.data else { return };
        self.tasks.push(Task::Rerun {
            batch: Arc::clone(&d.batch),
            settings: self.settings.clone(),
            advantage: self.advantage,
        });
    }

    /// Puts re-run results on screen, unless newer settings were asked for since. The Δ line
    /// compares them with the results they replace, whatever settings those were made with: a
    /// burst of keys re-runs once per key, and only the last re-run is installed.
    fn install(&mut self, r: Rerun) {
        if r.settings != self.settings || r.advantage != self.advantage {
            return;
        }
        let Some(d) = &mut self.data else { return };
        if !Arc::ptr_eq(&r.batch, &d.batch) {
            return;
        }
        let (from, from_adv) = (d.results.settings.clone(), d.results.advantage_mode);
        if from == r.settings && from_adv == r.advantage {
            // Keys that ended where they started (`+ -`): the results on screen stand.
            self.say(format!(
                "settings back to {}: the results on screen stand",
                self.export_settings()
            ));
            return;
        }
        let i = self.sel.exec;
        let change = d.batch.executions.get(i).map(|e| {
            let exec_totals =
                |res: &Results| stats::execution_totals(e, &res.outcomes[i], &res.admissions[i]);
            Change {
                what: settings_change((&from, from_adv), (&r.settings, r.advantage)),
                settings_before: from.clone(),
                advantage_before: from_adv,
                settings_after: r.settings.clone(),
                advantage_after: r.advantage,
                before: d.totals,
                after: r.totals,
                exec: e.id.clone(),
                exec_before: exec_totals(&d.results),
                exec_after: exec_totals(&r.results),
            }
        });
        d.results = Arc::new(r.results);
        d.totals = r.totals;
        self.sel.step = d
            .results
            .admissions
            .get(i)
            .map_or(0, |a| a.draws.len() as u32);
        self.change = change;
        self.new_results();
    }

    /// Results on screen were replaced: what was worked out for the old ones is stale (by
    /// generation), and the row view, which may now show another (shorter) row, starts again at
    /// its first response token.
    fn new_results(&mut self) {
        self.sel.generation += 1;
        if let Some(o) = self.overlay.view_mut() {
            o.new_results();
        }
    }

    /// `./admitted.jsonl`, or the next free `admitted-N.jsonl`.
    pub fn proposed_export(&self) -> String {
        self.free_name("admitted.jsonl")
    }

    /// `name` when no file (or export under way) has it, else the first free `stem-N.ext`
    /// beside it: `runs.jsonl.gz` → `runs-1.jsonl.gz`.
    pub fn free_name(&self, name: &str) -> String {
        super::overlay::free_name(&self.cwd, &self.exporting, name)
    }

    /// The settings line of exports: what `gyre admit` needs to write the same bytes.
    pub fn export_settings(&self) -> String {
        let s = self
            .data
            .as_ref()
            .map_or(&self.settings, |d| &d.results.settings);
        format!(
            "{s} · advantage {}",
            Named::name(
                self.data
                    .as_ref()
                    .map_or(self.advantage, |d| d.results.advantage_mode)
            )
        )
    }

    fn export(&mut self, name: &str, force: bool) {
        let Some(path) = super::overlay::export_path(&self.cwd, name) else {
            self.say("export cancelled: it needs a file name");
            return;
        };
        if self.rerunning() {
            self.say("a re-run is under way: export once it is on screen");
            return;
        }
        let Some(d) = &self.data else { return };
        let (batch, results) = (Arc::clone(&d.batch), Arc::clone(&d.results));
        let settings = self.export_settings();
        self.exporting.push(path.clone());
        // A big admitted set takes seconds to write: the screen stays live meanwhile.
        if self.workers {
            self.say(format!("exporting to {}…", path.display()));
        }
        self.tasks.push(Task::Export {
            path,
            batch,
            results,
            force,
            settings,
        });
    }

    fn click(&mut self, x: u16, y: u16) {
        if self.overlay != Overlay::None || self.data.is_none() {
            return;
        }
        let Some(pane) = self.areas().pane_at(x, y) else {
            return;
        };
        self.focus = pane;
        let effects = self.on_pane(pane, |ctx, p| p.click(ctx, x, y));
        self.apply_all(effects.unwrap_or_default());
    }

    fn wheel(&mut self, x: u16, y: u16, down: bool) {
        if self.overlay != Overlay::None {
            return self.hand_overlay(|o, cx| o.wheel(cx, down));
        }
        if self.data.is_none() {
            return;
        }
        let Some(pane) = self.areas().pane_at(x, y) else {
            return;
        };
        let effects = self.on_pane(pane, |ctx, p| p.wheel(ctx, down));
        self.apply_all(effects.unwrap_or_default());
    }
}

/// What differs between two settings and advantage modes, each in its one spelling:
/// `J_max 5 → 10`, `seed 0 → 2 · priority main>sub → main`.
pub fn settings_change(from: (&Settings, AdvantageMode), to: (&Settings, AdvantageMode)) -> String {
    let ((a, a_adv), (b, b_adv)) = (from, to);
    let mut parts: Vec<String> = a.differing(b).map(|s| s.change(a, b)).collect();
    if a_adv != b_adv {
        parts.push(format!(
            "advantage {} → {}",
            Named::name(a_adv),
            Named::name(b_adv)
        ));
    }
    if parts.is_empty() {
        "settings unchanged".into()
    } else {
        parts.join(" · ")
    }
}

/// The view settings a [`Ctx`] carries.
#[derive(Clone, Copy)]
struct View {
    areas: Areas,
    focus: Pane,
    overlay: bool,
    colour: ColorMode,
    boundaries: bool,
}

/// What a [`Ctx`] carries beside the results on screen.
struct Extra<'a> {
    lens: Option<&'a Lens>,
    pinned: Option<&'a Results>,
    subject: Subject,
    path: Option<&'a PathIndex>,
    search: &'a Search,
    audit: Option<&'a Audit>,
    exec_audit: Option<&'a ExecAudit>,
}

/// The audit of the batch on screen, once worked out.
fn current_audit<'a>(data: &Option<Data>, audited: &'a Option<Arc<Audited>>) -> Option<&'a Audit> {
    let d = data.as_ref()?;
    audited
        .as_ref()
        .filter(|a| Arc::ptr_eq(&a.batch, &d.batch))
        .map(|a| &a.audit)
}

/// The selected execution's audit, when it is of the selection on screen.
fn current_exec_audit<'a>(e: &'a Option<ExecAudit>, sel: &Selection) -> Option<&'a ExecAudit> {
    e.as_ref()
        .filter(|a| a.exec == sel.exec && a.batch == sel.batch)
}

/// The what-if made for the results on screen, if it is there yet.
fn current_whatif<'a>(
    data: &Option<Data>,
    done: &'a Option<Arc<WhatIf>>,
    seeds: u32,
) -> Option<&'a WhatIf> {
    let d = data.as_ref()?;
    let want = WhatIf::options_for(&d.results.settings, seeds);
    done.as_deref().filter(|w| w.is_for(&d.batch, &want))
}

/// What a [`Ctx`] carries beside the results on screen (field by field, so the panes can be
/// borrowed apart).
#[allow(clippy::too_many_arguments)]
fn extra<'a>(
    data: &Option<Data>,
    done: &'a Option<Arc<WhatIf>>,
    pinned: &'a Option<Pinned>,
    seeds: u32,
    subject: Subject,
    path: Option<&'a PathIndex>,
    search: &'a Search,
    audit: (&'a Option<Arc<Audited>>, &'a Option<ExecAudit>, &Selection),
) -> Extra<'a> {
    Extra {
        lens: current_whatif(data, done, seeds).map(|w| &w.lens),
        pinned: current_pin(data, pinned),
        subject,
        path,
        search,
        audit: current_audit(data, audit.0),
        exec_audit: current_exec_audit(audit.1, audit.2),
    }
}

/// The pinned results, when they are of the batch on screen.
fn current_pin<'a>(data: &Option<Data>, pinned: &'a Option<Pinned>) -> Option<&'a Results> {
    let d = data.as_ref()?;
    pinned
        .as_ref()
        .filter(|p| Arc::ptr_eq(&p.batch, &d.batch))
        .map(|p| &*p.results)
}

fn build_ctx<'a>(
    data: &'a Option<Data>,
    sel: &'a Selection,
    text: &'a TokenText,
    theme: &'a Theme,
    v: View,
    extra: Extra<'a>,
) -> Option<Ctx<'a>> {
    let d = data.as_ref()?;
    if sel.exec >= d.batch.executions.len() {
        return None;
    }
    Some(Ctx {
        batch: &d.batch,
        results: &d.results,
        sel,
        text,
        theme,
        areas: v.areas,
        focus: v.focus,
        overlay: v.overlay,
        colour: v.colour,
        boundaries: v.boundaries,
        lens: extra.lens,
        pinned: extra.pinned,
        subject: extra.subject,
        path: extra.path,
        search: extra.search,
        audit: extra.audit,
        exec_audit: extra.exec_audit,
    })
}
