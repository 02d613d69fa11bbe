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
        out
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
        fn item(
            d: &DNode,
            room: usize,
            label: &dyn Fn(u32) -> Line<'static>,
            header: &dyn Fn(&DNode) -> Line<'static>,
        ) -> Option<TreeItem<'static, u32>> {
            let children: Vec<TreeItem<'static, u32>> = d
                .children
                .iter()
                .filter_map(|c| item(c, room.saturating_sub(2), label, header))
                .collect();
            let text = if d.id >= HEADER_BASE {
                header(d)
            } else {
                label(d.id)
            };
            let text = fit_line(text.spans, room.saturating_sub(2));
            TreeItem::new(d.id, text, children).ok()
        }
        let room = area.width.saturating_sub(2) as usize;
        let items: Vec<TreeItem<'static, u32>> = rtree
            .display
            .iter()
            .filter_map(|d| item(d, room, &label, &header))
            .collect();
        let block = ctx.block(
            Pane::Tree,
            format!(
                " Tree · {} · {} request{} ",
                sanitize(&exec.id),
                exec.requests.len(),
                if exec.requests.len() == 1 { "" } else { "s" }
            ),
        );
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
