//! Search across every execution: execution ids, request ids and token text on every branch
//! of every tree. It runs on a worker while the query is typed, sending hits as they are found;
//! a newer query cancels the older one.
//!
//! Token text is matched within a tree node (a run of tokens stored once), so a match that
//! straddles two nodes of a path is not found.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use gyre_engine::load::Batch;
use gyre_engine::tree::{NodeId, ROOT};
use gyre_text::{TokenText, sanitize};

use super::vocab::Effect;
pub use super::vocab::{Found, Hit};

/// Most hits kept for one query.
pub const MAX_HITS: usize = 10_000;

/// A search to run, on a worker or in place: a query (lower case) over a batch.
#[derive(Debug)]
pub struct Query {
    batch: Arc<Batch>,
    text: TokenText,
    q: String,
    /// The execution searched first (the one open).
    first: usize,
    serial: u64,
    /// The newest query's serial: this one stops once it moves on.
    latest: Arc<AtomicU64>,
}

impl Query {
    /// Runs the search, reporting hits through `found` one execution at a time.
    pub fn run(self, found: &mut dyn FnMut(Found)) {
        run(
            &self.batch,
            &self.text,
            &self.q,
            self.first,
            self.serial,
            &self.latest,
            found,
        );
    }
}

/// The search state.
#[derive(Debug, Default)]
pub struct Search {
    /// The query.
    pub query: String,
    /// Hits so far: the execution open when it started first, then the others in order.
    pub hits: Vec<Hit>,
    /// The search is over.
    pub done: bool,
    /// It stopped at [`MAX_HITS`].
    pub capped: bool,
    /// The hit `n`/`N` are at.
    pub at: Option<usize>,
    /// Enter came before the first hit: the first one found is gone to.
    pub go_when_found: bool,
    serial: u64,
    latest: Arc<AtomicU64>,
}

impl Search {
    /// Whether there is a query.
    pub fn active(&self) -> bool {
        !self.query.is_empty()
    }

    /// Forgets the query and its hits, and stops any worker.
    pub fn clear(&mut self) {
        self.start_serial();
        self.query.clear();
        self.hits.clear();
        self.done = true;
        self.capped = false;
        self.at = None;
        self.go_when_found = false;
    }

    fn start_serial(&mut self) -> u64 {
        self.serial += 1;
        self.latest.store(self.serial, Ordering::Relaxed);
        self.serial
    }

    /// Starts searching for `query`: the search to run (none for an empty query), whose hits
    /// come back through [`Search::receive`].
    pub fn start(
        &mut self,
        query: &str,
        batch: &Arc<Batch>,
        text: &TokenText,
        first: usize,
    ) -> Option<Query> {
        self.clear();
        if query.is_empty() {
            return None;
        }
        self.query = query.to_string();
        self.done = false;
        Some(Query {
            batch: Arc::clone(batch),
            text: text.clone(),
            q: query.to_lowercase(),
            first,
            serial: self.serial,
            latest: Arc::clone(&self.latest),
        })
    }

    /// Takes hits from a worker (those of an older query are dropped).
    pub fn receive(&mut self, f: Found) {
        if f.serial != self.serial {
            return;
        }
        self.hits.extend(f.hits);
        self.done = f.done;
        self.capped |= f.capped;
    }

    /// One line on how the search stands.
    pub fn status(&self) -> String {
        if !self.active() {
            return "type to search token text, request ids and execution ids".into();
        }
        let mut execs: Vec<usize> = self.hits.iter().map(Hit::exec).collect();
        execs.dedup();
        execs.sort_unstable();
        execs.dedup();
        format!(
            "{} match{} in {} execution{}{}",
            self.hits.len(),
            if self.hits.len() == 1 { "" } else { "es" },
            execs.len(),
            if execs.len() == 1 { "" } else { "s" },
            if !self.done {
                " · searching…"
            } else if self.capped {
                " · stopped at 10000"
            } else {
                ""
            }
        )
    }

    /// Token hits in execution `exec`, by node (the token pane highlights them).
    pub fn node_hits(&self, exec: usize) -> HashMap<NodeId, Vec<(u32, u32)>> {
        let mut out: HashMap<NodeId, Vec<(u32, u32)>> = HashMap::new();
        for h in &self.hits {
            if let Hit::Tokens {
                exec: e,
                node,
                start,
                end,
            } = *h
            {
                if e == exec {
                    out.entry(node).or_default().push((start, end));
                }
            }
        }
        out
    }

    /// Where a hit is: the execution, request and path position to show.
    pub fn target(batch: &Batch, h: &Hit) -> Effect {
        match *h {
            Hit::Execution(e) => Effect::OpenExec(e),
            Hit::Request { exec, request } => Effect::Jump {
                exec,
                request,
                pos: batch.executions[exec].requests[request as usize].input_len as u64,
            },
            Hit::Tokens {
                exec, node, start, ..
            } => {
                let tree = &batch.executions[exec].tree;
                let n = &tree.nodes[node as usize];
                Effect::Jump {
                    exec,
                    request: n.owner,
                    pos: tree.depth_tokens(n.parent) + start as u64,
                }
            }
        }
    }

    /// A hit in one line: `e0003 · r17 · position 813 · "…text…"`.
    pub fn describe(&self, batch: &Batch, text: &TokenText, h: &Hit) -> String {
        let exec = &batch.executions[h.exec()];
        let eid = sanitize(&exec.id);
        match *h {
            Hit::Execution(_) => format!("{eid} · execution id"),
            Hit::Request { request, .. } => {
                format!(
                    "{eid} · {} · request id",
                    sanitize(&exec.requests[request as usize].id)
                )
            }
            Hit::Tokens {
                node, start, end, ..
            } => {
                let tree = &exec.tree;
                let n = &tree.nodes[node as usize];
                let toks = tree.node_tokens(node);
                let lo = start.saturating_sub(6) as usize;
                let hi = (end as usize + 10).min(toks.len());
                let text = text.decode(&toks[lo..hi]);
                format!(
                    "{eid} · {} · position {} · \"{}\"",
                    sanitize(&exec.requests[n.owner as usize].id),
                    tree.depth_tokens(n.parent) + start as u64 + 1,
                    sanitize(&text.replace('\n', " "))
                )
            }
        }
    }
}

/// Searches every execution (`first` first) for `q` (lower case), reporting hits through
/// `found` one execution at a time; stops when `latest` moves past `serial`.
fn run(
    batch: &Batch,
    text: &TokenText,
    q: &str,
    first: usize,
    serial: u64,
    latest: &AtomicU64,
    found: &mut dyn FnMut(Found),
) {
    let n = batch.executions.len();
    let order = std::iter::once(first).chain((0..n).filter(|&e| e != first));
    let mut total = 0usize;
    for e in order.filter(|&e| e < n) {
        if latest.load(Ordering::Relaxed) != serial {
            return;
        }
        let exec = &batch.executions[e];
        let mut hits = Vec::new();
        if exec.id.to_lowercase().contains(q) {
            hits.push(Hit::Execution(e));
        }
        for (i, r) in exec.requests.iter().enumerate() {
            if r.id.to_lowercase().contains(q) {
                hits.push(Hit::Request {
                    exec: e,
                    request: i as u32,
                });
            }
        }
        // Nodes depth first, so hits follow the paths they are on.
        let tree = &exec.tree;
        let mut stack = vec![ROOT];
        let mut lower = String::new();
        let mut owner: Vec<u32> = Vec::new();
        while let Some(node) = stack.pop() {
            stack.extend(tree.nodes[node as usize].children.iter().rev());
            let toks = tree.node_tokens(node);
            if toks.is_empty() {
                continue;
            }
            lower.clear();
            owner.clear();
            for (k, piece) in text.display_pieces(toks).iter().enumerate() {
                let l = piece.to_lowercase();
                owner.extend(std::iter::repeat_n(k as u32, l.len()));
                lower.push_str(&l);
            }
            let mut from = 0;
            while let Some(i) = lower[from..].find(q) {
                let s = from + i;
                let end = s + q.len();
                hits.push(Hit::Tokens {
                    exec: e,
                    node,
                    start: owner[s],
                    end: owner[end - 1] + 1,
                });
                from = end;
                while !lower.is_char_boundary(from) {
                    from += 1;
                }
                if total + hits.len() >= MAX_HITS {
                    break;
                }
            }
            if total + hits.len() >= MAX_HITS {
                break;
            }
        }
        total += hits.len();
        let capped = total >= MAX_HITS;
        found(Found {
            serial,
            hits,
            done: capped,
            capped,
        });
        if capped {
            return;
        }
    }
    found(Found {
        serial,
        hits: Vec::new(),
        done: true,
        capped: false,
    });
}
