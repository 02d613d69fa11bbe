//! The request tree: one item per request, nested where the token tree branches, each with the
//! reason it branches (from [`gyre_engine::branches`]) and its part in the draws.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::StatefulWidget;
use tui_tree_widget::{Tree, TreeItem, TreeState};

use gyre_engine::branches::{self, Link, Place};
use gyre_engine::execution::Execution;
use gyre_engine::record::{Actor, Purpose};

use super::{Ctx, Effect, Pane, PaneView, fit_line, sanitize};
use crate::keys::Command;

/// Identifiers at or above this are chain headers, not requests.
pub const HEADER_BASE: u32 = u32::MAX - (1 << 20);

/// A kind of request the tree jumps between (`'` and a letter, then `>` `<`), as its labels
/// mark them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Landmark {
    /// A compaction: the summary call (`⇢ compaction summary`) or the context it started.
    Compaction,
    /// The first request of a sub-agent.
    SubAgent,
    /// A retry on the same context (`↳ retry of`).
    Retry,
    /// A branch inside an earlier output or with another context (`↳ diverges`, `↳ other
    /// context`).
    Divergence,
    /// A candidate leaf (`○ candidate` or drawn).
    Candidate,
    /// A leaf drawn by the replay step (`● draw k`).
    Drawn,
}

impl Landmark {
    /// Every kind, in menu order.
    pub const ALL: [Landmark; 6] = [
        Landmark::Compaction,
        Landmark::SubAgent,
        Landmark::Retry,
        Landmark::Divergence,
        Landmark::Candidate,
        Landmark::Drawn,
    ];

    /// Its letter in the go-to menu (upper case: the previous one).
    pub fn key(self) -> char {
        match self {
            Landmark::Compaction => 'c',
            Landmark::SubAgent => 's',
            Landmark::Retry => 'r',
            Landmark::Divergence => 'v',
            Landmark::Candidate => 'o',
            Landmark::Drawn => 'd',
        }
    }

    /// Its name (the palette's `goto NAME`, tree filter terms, messages).
    pub fn name(self) -> &'static str {
        match self {
            Landmark::Compaction => "compaction",
            Landmark::SubAgent => "sub-agent",
            Landmark::Retry => "retry",
            Landmark::Divergence => "divergence",
            Landmark::Candidate => "candidate",
            Landmark::Drawn => "drawn",
        }
    }

    /// The kind named `s` (`subagent` too), if any.
    pub fn parse(s: &str) -> Option<Landmark> {
        let s = s.trim().to_lowercase();
        let s = if s == "subagent" {
            "sub-agent".into()
        } else {
            s
        };
        Landmark::ALL.into_iter().find(|l| l.name() == s)
    }

    /// The names, for messages (`compaction, sub-agent, …`).
    pub fn names() -> String {
        Landmark::ALL
            .iter()
            .map(|l| l.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether request `r` is one.
    fn holds(self, ctx: &Ctx, places: &[Place], marks: &Marks, r: u32) -> bool {
        let req = &ctx.exec().requests[r as usize];
        match self {
            Landmark::Compaction => {
                req.purpose == Purpose::Summary || places[r as usize].link == Link::Compaction
            }
            // A sub-agent whose context shares a prefix with an earlier one's branches off it,
            // not at the root: its first request is where it starts either way.
            Landmark::SubAgent => {
                places[r as usize].link == Link::SubAgent || marks.sub_agent_firsts.contains(&r)
            }
            Landmark::Retry => matches!(places[r as usize].link, Link::Retry { .. }),
            Landmark::Divergence => matches!(
                places[r as usize].link,
                Link::Diverge { .. } | Link::ContextBranch { .. }
            ),
            Landmark::Candidate => marks.candidates.contains(&r),
            Landmark::Drawn => marks.drawn.contains(&r),
        }
    }
}

/// What the kinds need to know of the whole execution, worked out once per question (so a
/// question about every request stays linear in them).
struct Marks {
    /// The first request of each policy agent other than the main one.
    sub_agent_firsts: HashSet<u32>,
    /// Candidate leaves.
    candidates: HashSet<u32>,
    /// Leaves drawn up to the replay step.
    drawn: HashSet<u32>,
}

impl Marks {
    fn new(ctx: &Ctx) -> Marks {
        let mut seen = HashSet::new();
        let sub_agent_firsts = ctx
            .exec()
            .requests
            .iter()
            .enumerate()
            .filter(|(_, q)| {
                q.agent != "main" && q.actor == Actor::Policy && seen.insert(q.agent.as_str())
            })
            .map(|(i, _)| i as u32)
            .collect();
        let adm = ctx.admission();
        Marks {
            sub_agent_firsts,
            candidates: adm.candidates.iter().map(|c| c.request).collect(),
            drawn: adm
                .draws
                .iter()
                .take(ctx.sel.step as usize)
                .map(|d| d.chosen)
                .collect(),
        }
    }
}

/// The tree filter: requests matching every term are shown, with the items above them.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// As typed.
    pub query: String,
    /// What the matches were worked out for: (batch, execution, results generation, step).
    key: Option<(u64, usize, u64, u32)>,
    /// Requests matching every term.
    matches: HashSet<u32>,
    /// Display items shown: the matches and every item above one.
    shown: HashSet<u32>,
}

impl Filter {
    /// Whether request `r` matches every term: a kind's name (compaction, sub-agent, retry,
    /// divergence, candidate, drawn; also summary, evaluator, after-closure), else a
    /// case-blind part of its id, agent, finish reason, model or a tool call's name.
    fn holds(&self, ctx: &Ctx, places: &[Place], marks: &Marks, r: u32) -> bool {
        let req = &ctx.exec().requests[r as usize];
        self.query.split_whitespace().all(|term| {
            let term = term.to_lowercase();
            if let Some(l) = Landmark::parse(&term) {
                return l.holds(ctx, places, marks, r);
            }
            match term.as_str() {
                "summary" => return req.purpose == Purpose::Summary,
                "evaluator" => return req.actor == Actor::Evaluator,
                "after-closure" => return req.after_closure,
                _ => {}
            }
            let has = |s: &str| s.to_lowercase().contains(&term);
            has(&req.id)
                || has(&req.agent)
                || req.finish.as_deref().is_some_and(has)
                || req.model.as_deref().is_some_and(has)
                || req
                    .tool_calls
                    .iter()
                    .any(|c| c.name.as_deref().is_some_and(has))
        })
    }
}

/// An item of the display tree (a chain header or a request).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DNode {
    /// Request index, or `HEADER_BASE + k` for the k-th root chain.
    pub id: u32,
    /// Items nested under it.
    pub children: Vec<DNode>,
}

/// The requests of one execution arranged for display: a chain of continuations shown flat,
/// branches nested under the request they leave.
#[derive(Clone, Debug, Default)]
pub struct RequestTree {
    /// Why each request is where it is (engine facts).
    pub places: Vec<Place>,
    /// The continuation shown at the same level (the one with the largest subtree).
    pub primary: Vec<Option<u32>>,
    /// Other children, nested under the request.
    pub branches: Vec<Vec<u32>>,
    /// Heads of root-level chains, in request order.
    pub roots: Vec<u32>,
    /// Display path (identifiers from the top) per request.
    pub paths: Vec<Vec<u32>>,
    /// The display tree: one item per chain header at the top.
    pub display: Vec<DNode>,
}

impl RequestTree {
    /// The request tree of `exec`.
    pub fn new(exec: &Execution) -> Self {
        let places = branches::places(exec);
        let n = places.len();
        let mut roots = Vec::new();
        let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, place) in places.iter().enumerate() {
            match place.parent {
                None => roots.push(i as u32),
                Some(p) => children[p as usize].push(i as u32),
            }
        }
        let mut size = vec![1usize; n];
        for i in (0..n).rev() {
            if let Some(p) = places[i].parent {
                size[p as usize] += size[i];
            }
        }
        let mut primary = vec![None; n];
        let mut branches = vec![Vec::new(); n];
        for (i, kids) in children.into_iter().enumerate() {
            let p = kids
                .iter()
                .copied()
                .max_by_key(|&c| (size[c as usize], std::cmp::Reverse(c)));
            primary[i] = p;
            branches[i] = kids.into_iter().filter(|&c| Some(c) != p).collect();
        }
        let mut t = RequestTree {
            places,
            primary,
            branches,
            roots,
            paths: vec![Vec::new(); n],
            display: Vec::new(),
        };
        let display: Vec<DNode> = t
            .roots
            .iter()
            .enumerate()
            .map(|(k, &root)| DNode {
                id: HEADER_BASE + k as u32,
                children: t.chain_items(root),
            })
            .collect();
        let mut stack: Vec<(&DNode, Vec<u32>)> = display.iter().map(|d| (d, vec![d.id])).collect();
        while let Some((d, p)) = stack.pop() {
            if d.id < HEADER_BASE {
                t.paths[d.id as usize] = p.clone();
            }
            for c in &d.children {
                let mut q = p.clone();
                q.push(c.id);
                stack.push((c, q));
            }
        }
        t.display = display;
        t
    }

    /// The chain starting at `head`: it, its primary continuation, and so on.
    pub fn chain(&self, head: u32) -> Vec<u32> {
        let mut out = vec![head];
        let mut cur = head;
        while let Some(next) = self.primary[cur as usize] {
            out.push(next);
            cur = next;
        }
        out
    }

    fn chain_items(&self, head: u32) -> Vec<DNode> {
        self.chain(head)
            .into_iter()
            .map(|r| DNode {
                id: r,
                children: self.branches[r as usize]
                    .iter()
                    .map(|&b| self.branch_item(b))
                    .collect(),
            })
            .collect()
    }

    fn branch_item(&self, b: u32) -> DNode {
        let mut children: Vec<DNode> = self.branches[b as usize]
            .iter()
            .map(|&bb| self.branch_item(bb))
            .collect();
        if let Some(next) = self.primary[b as usize] {
            children.extend(self.chain_items(next));
        }
        DNode { id: b, children }
    }

    /// Requests in the subtree of a display item (itself included).
    pub fn count(d: &DNode) -> usize {
        let own = usize::from(d.id < HEADER_BASE);
        own + d.children.iter().map(RequestTree::count).sum::<usize>()
    }

    /// The request an item stands for (a header stands for its chain's head).
    pub fn request_of(&self, item: &[u32]) -> Option<u32> {
        let last = *item.last()?;
        if last >= HEADER_BASE {
            self.roots.get((last - HEADER_BASE) as usize).copied()
        } else {
            Some(last)
        }
    }

    fn node(&self, p: &[u32]) -> Option<&DNode> {
        let mut level = &self.display;
        let mut node = None;
        for id in p {
            let d = level.iter().find(|d| d.id == *id)?;
            node = Some(d);
            level = &d.children;
        }
        node
    }

    /// Whether the item at `p` has children.
    pub fn has_children(&self, p: &[u32]) -> bool {
        self.node(p).is_some_and(|d| !d.children.is_empty())
    }
}

/// The tree pane's state.
#[derive(Debug, Default)]
pub struct TreePane {
    /// (batch, execution) the tree is of.
    exec: Option<(u64, usize)>,
    /// The display tree.
    pub rtree: RequestTree,
    /// Open items.
    pub opened: HashSet<Vec<u32>>,
    /// The selected item (display path).
    pub selected: Vec<u32>,
    /// Scroll state of the tree widget (render-time bookkeeping only).
    state: RefCell<TreeState<u32>>,
    /// The tree filter, when one is set.
    pub filter: Option<Filter>,
    /// The kind `>` and `<` go to.
    pub landmark: Option<Landmark>,
}

impl TreePane {
    /// The request of the selected item.
    pub fn selected_request(&self) -> Option<u32> {
        self.rtree.request_of(&self.selected)
    }

    /// Visible items (display paths), as the tree widget shows them.
    pub fn visible(&self) -> Vec<Vec<u32>> {
        fn walk(
            d: &DNode,
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
        if let Some(f) = &self.filter {
            out.retain(|p| p.iter().all(|id| f.shown.contains(id)));
        }
        out
    }

    /// Every request in display order (open or not).
    fn display_order(&self) -> Vec<u32> {
        fn walk(d: &DNode, out: &mut Vec<u32>) {
            if d.id < HEADER_BASE {
                out.push(d.id);
            }
            for c in &d.children {
                walk(c, out);
            }
        }
        let mut out = Vec::new();
        for d in &self.rtree.display {
            walk(d, &mut out);
        }
        out
    }

    /// Selects the next (`forward`) or previous request of kind `kind` after the selected one,
    /// in display order, wrapping round; among the filter's matches when one is set. The kind is
    /// kept for `>` and `<`.
    pub fn goto(&mut self, ctx: &Ctx, kind: Landmark, forward: bool) -> Vec<Effect> {
        self.landmark = Some(kind);
        let places = &self.rtree.places;
        let marks = Marks::new(ctx);
        let order = self.display_order();
        // Places in `order` of the requests of the kind.
        let found: Vec<usize> = (0..order.len())
            .filter(|&i| kind.holds(ctx, places, &marks, order[i]))
            .filter(|&i| {
                self.filter
                    .as_ref()
                    .is_none_or(|f| f.matches.contains(&order[i]))
            })
            .collect();
        let filtered = if self.filter.is_some() {
            " among the filter's matches (F, then an empty filter, clears it)"
        } else {
            ""
        };
        if found.is_empty() {
            let extra = match kind {
                Landmark::Drawn if ctx.sel.step == 0 => " at draw 0 (} goes to the last draw)",
                _ => "",
            };
            return vec![Effect::Message(format!(
                "no {} in {}{extra}{filtered}",
                kind.name(),
                sanitize(&ctx.exec().id)
            ))];
        }
        let here = self
            .selected_request()
            .and_then(|s| order.iter().position(|&r| r == s));
        let (k, wrapped) = match (here, forward) {
            (None, true) => (0, false),
            (None, false) => (found.len() - 1, false),
            (Some(h), true) => match found.iter().position(|&i| i > h) {
                Some(k) => (k, false),
                None => (0, true),
            },
            (Some(h), false) => match found.iter().rposition(|&i| i < h) {
                Some(k) => (k, false),
                None => (found.len() - 1, true),
            },
        };
        let r = order[found[k]];
        let mut m = format!(
            "{} {}/{}: {} (> next · < previous",
            kind.name(),
            k + 1,
            found.len(),
            sanitize(&ctx.exec().requests[r as usize].id)
        );
        if wrapped {
            m.push_str(if forward {
                "; wrapped to the first"
            } else {
                "; wrapped to the last"
            });
        }
        m.push(')');
        m.push_str(filtered);
        vec![Effect::SelectRequest(r), Effect::Message(m)]
    }

    /// How many requests of each kind the execution has (the go-to menu).
    pub fn counts(&self, ctx: &Ctx) -> Vec<(Landmark, usize)> {
        let places = &self.rtree.places;
        let marks = Marks::new(ctx);
        Landmark::ALL
            .into_iter()
            .map(|l| {
                let n = (0..places.len() as u32)
                    .filter(|&r| l.holds(ctx, places, &marks, r))
                    .count();
                (l, n)
            })
            .collect()
    }

    /// Sets the tree filter (`None` or blank: clears it); selects the first match when the
    /// selection is not one.
    pub fn set_filter(&mut self, ctx: &Ctx, query: Option<&str>) -> Vec<Effect> {
        let query = query.map(str::trim).filter(|q| !q.is_empty());
        let Some(query) = query else {
            let had = self.filter.take().is_some();
            return vec![Effect::Message(
                if had {
                    "tree filter cleared"
                } else {
                    "no tree filter set"
                }
                .into(),
            )];
        };
        self.filter = Some(Filter {
            query: query.to_string(),
            ..Filter::default()
        });
        self.refilter(ctx);
        let f = self.filter.as_ref().expect("just set");
        let n = f.matches.len();
        let mut out = Vec::new();
        if n == 0 {
            out.push(Effect::Message(format!(
                "tree filter {query:?}: no request matches (terms: an id, agent, finish, model                  or tool name, or {}; F edits it)",
                Landmark::names()
            )));
            return out;
        }
        if !self
            .selected_request()
            .is_some_and(|r| f.matches.contains(&r))
        {
            let first = self
                .display_order()
                .into_iter()
                .find(|r| f.matches.contains(r));
            out.extend(first.map(Effect::SelectRequest));
        }
        out.push(Effect::Message(format!(
            "tree filter {query:?}: {n} of {} requests (F edits it, empty clears)",
            self.rtree.places.len()
        )));
        out
    }

    /// Works the filter's matches out again when the execution, results or step changed.
    fn refilter(&mut self, ctx: &Ctx) {
        let key = (
            ctx.sel.batch,
            ctx.sel.exec,
            ctx.sel.generation,
            ctx.sel.step,
        );
        let Some(f) = self.filter.as_mut() else {
            return;
        };
        if f.key == Some(key) {
            return;
        }
        f.key = Some(key);
        let places = &self.rtree.places;
        let marks = Marks::new(ctx);
        f.matches = (0..places.len() as u32)
            .filter(|&r| f.holds(ctx, places, &marks, r))
            .collect();
        f.shown.clear();
        for &r in &f.matches {
            let p = &self.rtree.paths[r as usize];
            f.shown.extend(p.iter().copied());
            // The items above a match are open, so the match shows.
            for k in 1..p.len() {
                self.opened.insert(p[..k].to_vec());
            }
        }
    }

    fn select(&mut self, p: Vec<u32>) -> Vec<Effect> {
        self.selected = p;
        self.selected_request()
            .map(Effect::SelectRequest)
            .into_iter()
            .collect()
    }

    fn toggle(&mut self, p: Vec<u32>) {
        if self.rtree.has_children(&p) && !self.opened.remove(&p) {
            self.opened.insert(p);
        }
    }
}

impl PaneView for TreePane {
    /// Brings the tree in line with the selected execution and request.
    fn sync(&mut self, ctx: &Ctx) {
        if self.exec != Some((ctx.sel.batch, ctx.sel.exec)) {
            self.exec = Some((ctx.sel.batch, ctx.sel.exec));
            self.rtree = RequestTree::new(ctx.exec());
            self.opened.clear();
            for p in &self.rtree.paths {
                for k in 1..p.len() {
                    self.opened.insert(p[..k].to_vec());
                }
            }
            for k in 0..self.rtree.roots.len() {
                self.opened.insert(vec![HEADER_BASE + k as u32]);
            }
            self.selected.clear();
            *self.state.borrow_mut() = TreeState::default();
        }
        if self.rtree.request_of(&self.selected) != ctx.sel.request {
            match ctx
                .sel
                .request
                .and_then(|r| self.rtree.paths.get(r as usize))
            {
                Some(p) => {
                    let p = p.clone();
                    for k in 1..p.len() {
                        self.opened.insert(p[..k].to_vec());
                    }
                    self.selected = p;
                }
                None => self.selected.clear(),
            }
        }
        self.refilter(ctx);
    }

    /// Keys while focused.
    fn command(&mut self, ctx: &Ctx, c: Command) -> Vec<Effect> {
        let rows = self.visible();
        if rows.is_empty() {
            return Vec::new();
        }
        let i = rows.iter().position(|r| *r == self.selected).unwrap_or(0);
        let page = ctx.areas.tree.height.saturating_sub(2).max(1) as usize;
        let last = rows.len() - 1;
        let target = match c {
            Command::Up => i.saturating_sub(1),
            Command::Down => (i + 1).min(last),
            Command::PageUp => i.saturating_sub(page),
            Command::PageDown => (i + page).min(last),
            Command::Home => 0,
            Command::End => last,
            Command::Left => {
                let sel = self.selected.clone();
                if self.rtree.has_children(&sel) && self.opened.contains(&sel) {
                    self.opened.remove(&sel);
                    return Vec::new();
                }
                if sel.len() > 1 {
                    return self.select(sel[..sel.len() - 1].to_vec());
                }
                return Vec::new();
            }
            Command::Right => {
                if self.rtree.has_children(&self.selected) {
                    self.opened.insert(self.selected.clone());
                }
                return Vec::new();
            }
            Command::Enter => {
                self.toggle(self.selected.clone());
                return Vec::new();
            }
            _ => return Vec::new(),
        };
        self.select(rows[target].clone())
    }

    /// A click at a cell: selects the item there (a second click toggles it).
    fn click(&mut self, _ctx: &Ctx, x: u16, y: u16) -> Vec<Effect> {
        let hit = self
            .state
            .borrow()
            .rendered_at(Position { x, y })
            .map(<[u32]>::to_vec);
        match hit {
            Some(p) => {
                if p == self.selected {
                    self.toggle(p.clone());
                }
                self.select(p)
            }
            None => Vec::new(),
        }
    }

    /// The wheel over the pane.
    fn wheel(&mut self, ctx: &Ctx, down: bool) -> Vec<Effect> {
        let c = if down { Command::Down } else { Command::Up };
        let mut out = Vec::new();
        for _ in 0..3 {
            out = self.command(ctx, c);
        }
        out
    }

    /// Draws the tree.
    fn render(&self, ctx: &Ctx, area: Rect, buf: &mut Buffer) {
        let exec = ctx.exec();
        let adm = ctx.admission();
        let t = ctx.theme;
        let rtree = &self.rtree;
        let mut chosen: HashMap<u32, Vec<u32>> = HashMap::new();
        for (k, dr) in adm.draws.iter().enumerate() {
            if (k as u32) < ctx.sel.step {
                chosen.entry(dr.chosen).or_default().push(k as u32 + 1);
            }
        }
        let candidates: HashSet<u32> = adm.candidates.iter().map(|c| c.request).collect();
        let label = |r: u32| -> Line<'static> {
            let req = &exec.requests[r as usize];
            let mut spans = vec![Span::styled(sanitize(&req.id), t.strong())];
            if let Some(ks) = chosen.get(&r) {
                let ks: Vec<String> = ks.iter().map(|k| k.to_string()).collect();
                spans.push(Span::styled(format!(" ● draw {}", ks.join(",")), t.good()));
            } else if candidates.contains(&r) {
                spans.push(Span::styled(" ○ candidate", t.dim()));
            }
            let id = |i: u32| sanitize(&exec.requests[i as usize].id);
            match &rtree.places[r as usize].link {
                Link::Retry { of } => spans.push(Span::styled(
                    format!(" ↳ retry of {} (same context)", id(*of)),
                    t.marker(),
                )),
                Link::Diverge { of, offset } => spans.push(Span::styled(
                    format!(" ↳ diverges inside {}'s output at token {offset}", id(*of)),
                    t.marker(),
                )),
                Link::ContextBranch { other, .. } => spans.push(Span::styled(
                    format!(" ↳ other context than {}", id(*other)),
                    t.marker(),
                )),
                _ => {}
            }
            if req.purpose == Purpose::Summary {
                spans.push(Span::styled(" ⇢ compaction summary", t.marker()));
            }
            if req.after_closure {
                spans.push(Span::styled(" ✗ after closure", t.bad()));
            }
            if req.actor == Actor::Evaluator {
                spans.push(Span::styled(" evaluator", t.bad()));
            }
            let purpose = match req.purpose {
                Purpose::Task => "task",
                Purpose::Summary => "summary",
            };
            spans.push(Span::styled(
                format!(
                    " {}/{} in {} out {}{}",
                    sanitize(&req.agent),
                    purpose,
                    req.input_len,
                    req.output_len,
                    req.finish
                        .as_deref()
                        .map(|f| format!(" {}", sanitize(f)))
                        .unwrap_or_default()
                ),
                t.dim(),
            ));
            if req.reconstructed() {
                spans.push(Span::styled(" (reconstructed)", t.dim()));
            }
            Line::from(spans)
        };
        let header = |d: &DNode| -> Line<'static> {
            let k = (d.id - HEADER_BASE) as usize;
            let root = rtree.roots[k];
            let req = &exec.requests[root as usize];
            let what = match rtree.places[root as usize].link {
                Link::SubAgent => format!("⟨sub-agent {} at the root⟩", sanitize(&req.agent)),
                Link::Compaction => "⟨compacted context⟩ ⇢ compaction".to_string(),
                Link::NewContext => "⟨new main context⟩".to_string(),
                Link::Evaluator => "⟨evaluator context⟩".to_string(),
                Link::Retry { of } => format!(
                    "⟨{} context⟩ ↳ retry of {}",
                    sanitize(&req.agent),
                    sanitize(&exec.requests[of as usize].id)
                ),
                _ => format!("⟨{} context⟩", sanitize(&req.agent)),
            };
            let n = RequestTree::count(d);
            Line::from(vec![
                Span::styled(what, t.marker()),
                Span::styled(
                    format!(
                        " {} tok in · {n} request{}",
                        req.input_len,
                        if n == 1 { "" } else { "s" }
                    ),
                    t.dim(),
                ),
            ])
        };
        // Each item is cut to what the widget leaves it (two columns per level and the open /
        // closed mark), ending in `…`.
        // With a filter, items that only lead to a match are dimmed.
        struct Look<'a> {
            room: usize,
            label: &'a dyn Fn(u32) -> Line<'static>,
            header: &'a dyn Fn(&DNode) -> Line<'static>,
            filter: Option<&'a Filter>,
            dim: ratatui::style::Style,
        }
        fn item(d: &DNode, room: usize, look: &Look) -> Option<TreeItem<'static, u32>> {
            if look.filter.is_some_and(|f| !f.shown.contains(&d.id)) {
                return None;
            }
            let children: Vec<TreeItem<'static, u32>> = d
                .children
                .iter()
                .filter_map(|c| item(c, room.saturating_sub(2), look))
                .collect();
            let mut text = if d.id >= HEADER_BASE {
                (look.header)(d)
            } else {
                (look.label)(d.id)
            };
            if look.filter.is_some_and(|f| !f.matches.contains(&d.id)) {
                text = text.patch_style(look.dim);
            }
            let text = fit_line(text.spans, room.saturating_sub(2));
            TreeItem::new(d.id, text, children).ok()
        }
        let look = Look {
            room: area.width.saturating_sub(2) as usize,
            label: &label,
            header: &header,
            filter: self.filter.as_ref(),
            dim: t.dim(),
        };
        let items: Vec<TreeItem<'static, u32>> = rtree
            .display
            .iter()
            .filter_map(|d| item(d, look.room, &look))
            .collect();
        let filter = self
            .filter
            .as_ref()
            .map(|f| format!("filter {:?}: {} of ", sanitize(&f.query), f.matches.len()))
            .unwrap_or_default();
        let count = format!(
            "{} request{}",
            exec.requests.len(),
            if exec.requests.len() == 1 { "" } else { "s" }
        );
        // A filter goes first: a long execution id is what the border cuts.
        let title = if filter.is_empty() {
            format!(" Tree · {} · {count} ", sanitize(&exec.id))
        } else {
            format!(" Tree · {filter}{count} · {} ", sanitize(&exec.id))
        };
        let block = ctx.block(Pane::Tree, title);
        let Ok(widget) = Tree::new(&items) else {
            return;
        };
        let widget = widget
            .block(block)
            .highlight_style(t.selected(ctx.focused(Pane::Tree)))
            .node_closed_symbol("▸ ")
            .node_open_symbol("▾ ")
            .node_no_children_symbol("  ");
        let mut state = self.state.borrow_mut();
        for p in &self.opened {
            state.open(p.clone());
        }
        let stale: Vec<Vec<u32>> = state
            .opened()
            .iter()
            .filter(|p| !self.opened.contains(*p))
            .cloned()
            .collect();
        for p in stale {
            state.close(&p);
        }
        if state.selected() != self.selected.as_slice() {
            state.select(self.selected.clone());
        }
        StatefulWidget::render(widget, area, buf, &mut *state);
    }
}
