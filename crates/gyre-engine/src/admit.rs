//! Admission (docs/format.md §5): candidates, role classes, weighted seeded draws and the draw log.
//!
//! Randomness: each execution gets its own ChaCha20 stream keyed by
//! `SHA-256("gyre/1 admission" ‖ seed as u64 little-endian ‖ execution id as UTF-8)`.
//! A draw over a class with total weight `W` takes `x = next_u64()`, rejecting
//! `x ≥ 2^64 − (2^64 mod W)` (no modulo bias), and picks the first candidate, in request order,
//! whose cumulative weight exceeds `x mod W`. Nothing depends on other executions or threads.
//! The log keeps `x`, `x mod W` and each candidate's slice of `[0, W)`, so a draw can be
//! checked by hand.

use std::fmt;

use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use sha2::{Digest, Sha256};

use super::execution::Execution;
use super::score::Outcome;
use super::tree::{NodeId, NodeKind, ROOT};
use gyre_format::record::Purpose;

/// Role class of a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// Main agent, task-driving.
    Main,
    /// Main agent, compaction summary.
    MainSummary,
    /// Delegated sub-agent, task-driving.
    Sub,
    /// Delegated sub-agent, summary.
    SubSummary,
}

impl Class {
    /// The four classes in the format's default priority.
    pub const DEFAULT_PRIORITY: [Class; 4] = [
        Class::Main,
        Class::MainSummary,
        Class::Sub,
        Class::SubSummary,
    ];

    /// Class of a request from its agent and purpose.
    pub fn of(agent: &str, purpose: Purpose) -> Class {
        match (agent == "main", purpose) {
            (true, Purpose::Task) => Class::Main,
            (true, Purpose::Summary) => Class::MainSummary,
            (false, Purpose::Task) => Class::Sub,
            (false, Purpose::Summary) => Class::SubSummary,
        }
    }

    /// Name used on the command line and in exports.
    pub fn name(self) -> &'static str {
        match self {
            Class::Main => "main",
            Class::MainSummary => "main-summary",
            Class::Sub => "sub",
            Class::SubSummary => "sub-summary",
        }
    }

    /// Parses a class name.
    pub fn parse(s: &str) -> Option<Class> {
        Class::DEFAULT_PRIORITY.into_iter().find(|c| c.name() == s)
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Admission settings. Each one is a field here and an entry of [`SETTINGS`], which spells it
/// everywhere else.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Base seed (`--seed`).
    pub seed: u64,
    /// Maximum draws per execution; 0 = uncapped (`--jmax`).
    pub jmax: u32,
    /// Classes in priority order, highest first; classes not listed are never drawn.
    pub priority: Vec<Class>,
}

/// One admission setting, with every spelling of it: the key (`key=value` in `gyre diff --a`,
/// the inspector's `:` and remembered settings, JSON reports, the Python keyword argument), the
/// flag (`--key`) and its help, the default, the one parser of its value, and how a line and
/// JSON show it. The binary's flags, the inspector, the Python package and [`Settings`]' own
/// `Default`, `Display`, `to_json` and `set` are built from [`SETTINGS`]; a new setting is a
/// field of [`Settings`] and an entry there.
#[derive(Clone, Copy)]
pub struct Setting {
    /// The key, also the flag's name (`--jmax`) and the JSON field.
    pub key: &'static str,
    /// How a line names it (`J_max`).
    pub label: &'static str,
    /// The flag's help (one line).
    pub help: &'static str,
    /// The flag's value name in help (`N`).
    pub value_name: &'static str,
    /// The default, as [`Setting::parse`] reads it.
    pub default: &'static str,
    /// Sets it from text (`3`, `0`, `main>sub` or `main,sub`); the error says what is wrong.
    pub parse: fn(&mut Settings, &str) -> Result<(), String>,
    /// Its value as [`Setting::parse`] reads it back.
    pub value: fn(&Settings) -> String,
    /// Its value as a line shows it (`uncapped`, `main>sub`).
    pub text: fn(&Settings) -> String,
    /// Its value in JSON reports.
    pub json: fn(&Settings) -> serde_json::Value,
    /// The Python type of its keyword argument, as the stub (`python/gyre/_gyre.pyi`) writes it:
    /// the package takes each setting as a keyword and its stub is generated from this table.
    pub python: &'static str,
}

impl fmt::Debug for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Setting({})", self.key)
    }
}

impl Setting {
    /// `J_max 7`: its label and its value in `s`.
    pub fn said(&self, s: &Settings) -> String {
        format!("{} {}", self.label, (self.text)(s))
    }

    /// `J_max 5 → 7`: its change from `from` to `to`.
    pub fn change(&self, from: &Settings, to: &Settings) -> String {
        format!("{} → {}", self.said(from), (self.text)(to))
    }

    /// Whether `a` and `b` differ in it.
    pub fn differs(&self, a: &Settings, b: &Settings) -> bool {
        (self.value)(a) != (self.value)(b)
    }
}

/// Every admission setting, in the order lines, JSON and help show them.
pub const SETTINGS: [Setting; 3] = [
    Setting {
        key: "seed",
        label: "seed",
        help: "Seed of the draws (each execution's draws depend only on it and the execution)",
        value_name: "SEED",
        default: "0",
        parse: |s, v| {
            s.seed = v.trim().parse().map_err(|_| {
                format!(
                    "seed={v:?} is not a seed: a seed is a whole number from 0 to {}",
                    u64::MAX
                )
            })?;
            Ok(())
        },
        value: |s| s.seed.to_string(),
        text: |s| s.seed.to_string(),
        json: |s| s.seed.into(),
        python: "int",
    },
    Setting {
        key: "jmax",
        label: "J_max",
        help: "Maximum draws per execution; 0 = uncapped",
        value_name: "JMAX",
        default: "5",
        parse: |s, v| {
            s.jmax = v.trim().parse().map_err(|_| {
                format!(
                    "jmax={v:?} is not a count: J_max is a number of draws per execution: 0 \
                     (uncapped), 1, 2, …"
                )
            })?;
            Ok(())
        },
        value: |s| s.jmax.to_string(),
        text: |s| jmax_text(s.jmax),
        json: |s| s.jmax.into(),
        python: "int",
    },
    Setting {
        key: "priority",
        label: "priority",
        help: "Class priority, highest first; classes left out are never drawn",
        value_name: "PRIORITY",
        default: "main,main-summary,sub,sub-summary",
        parse: |s, v| {
            s.priority = parse_priority(&v.replace('>', ","))?;
            Ok(())
        },
        value: |s| {
            s.priority
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(",")
        },
        text: |s| priority_text(&s.priority),
        json: |s| {
            s.priority
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .into()
        },
        python: "Union[None, str, Sequence[ClassName]]",
    },
];

impl Default for Settings {
    fn default() -> Self {
        // Every field is then set from its entry's default.
        let mut s = Settings {
            seed: 0,
            jmax: 0,
            priority: Vec::new(),
        };
        for setting in &SETTINGS {
            (setting.parse)(&mut s, setting.default).expect("every default parses");
        }
        s
    }
}

impl Settings {
    /// The setting named `key`.
    pub fn setting(key: &str) -> Option<&'static Setting> {
        SETTINGS.iter().find(|s| s.key == key)
    }

    /// The keys [`Settings::set`] takes: `seed, jmax, priority`.
    pub fn keys() -> String {
        SETTINGS.map(|s| s.key).join(", ")
    }

    /// Sets one `key=value` setting as `gyre diff --a/--b` and the inspector's `:` take it:
    /// `seed=3`, `jmax=0` (uncapped), `priority=main>sub` (or `main,sub`).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match Self::setting(key) {
            Some(s) => (s.parse)(self, value),
            None => Err(format!("unknown key {key:?} (keys: {})", Self::keys())),
        }
    }

    /// These settings with `seed=1,jmax=2,priority=main>sub` (any subset, comma-separated)
    /// over them; the first bad pair is the error.
    pub fn with_overrides(&self, pairs: &str) -> Result<Settings, String> {
        let mut out = self.clone();
        for part in pairs.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not key=value (keys: {})", Self::keys()))?;
            out.set(k.trim(), v.trim())?;
        }
        Ok(out)
    }

    /// `{"seed": 0, "jmax": 5, "priority": ["main", …]}`: how JSON reports name them.
    pub fn to_json(&self) -> serde_json::Value {
        SETTINGS
            .iter()
            .map(|s| (s.key.to_owned(), (s.json)(self)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// Every setting as a line names it (`seed 0`, `J_max 5`, …), joined by `separator`.
    pub fn said(&self, separator: &str) -> String {
        SETTINGS.map(|s| s.said(self)).join(separator)
    }

    /// The settings in which `self` and `to` differ, in table order.
    pub fn differing<'a>(
        &'a self,
        to: &'a Settings,
    ) -> impl Iterator<Item = &'static Setting> + 'a {
        SETTINGS.iter().filter(move |s| s.differs(self, to))
    }
}

/// `seed 0 · J_max 5 · priority main>main-summary>sub>sub-summary`: the one way a line names
/// the settings it shows.
impl fmt::Display for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.said(" · "))
    }
}

/// `5`, or `uncapped` for 0.
pub fn jmax_text(jmax: u32) -> String {
    if jmax == 0 {
        "uncapped".into()
    } else {
        jmax.to_string()
    }
}

/// `main>main-summary>sub>sub-summary`.
pub fn priority_text(p: &[Class]) -> String {
    p.iter().map(|c| c.name()).collect::<Vec<_>>().join(">")
}

/// Parses `main,main-summary,sub,sub-summary` (any order, any subset, no repeats).
pub fn parse_priority(s: &str) -> Result<Vec<Class>, String> {
    let mut out = Vec::new();
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let class = Class::parse(name).ok_or_else(|| {
            format!("unknown class {name:?} (classes: main, main-summary, sub, sub-summary)")
        })?;
        if out.contains(&class) {
            return Err(format!("class {name:?} is listed twice"));
        }
        out.push(class);
    }
    if out.is_empty() {
        return Err("the priority lists no class".into());
    }
    Ok(out)
}

/// A candidate leaf (docs/format.md §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Request index.
    pub request: u32,
    /// Its class.
    pub class: Class,
}

/// One candidate's standing at a draw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Weighted {
    /// Request index.
    pub request: u32,
    /// Unclaimed trainable tokens on its path.
    pub weight: u64,
    /// Start of its slice of `[0, total)`: it is chosen when the draw's point falls in
    /// `from..from + weight` (slices follow request order).
    pub from: u64,
}

impl Weighted {
    /// End of its slice (exclusive).
    pub fn to(&self) -> u64 {
        self.from + self.weight
    }
}

/// One draw of the log: what was drawn from, what was chosen, what it fixed.
#[derive(Clone, Debug, PartialEq)]
pub struct Draw {
    /// The class drawn from (the highest-priority class with weight left).
    pub class: Class,
    /// Every candidate of that class with weight > 0, in request order.
    pub candidates: Vec<Weighted>,
    /// Sum of their weights.
    pub total: u64,
    /// The accepted `next_u64()` of the generator (values rejected against modulo bias are not
    /// kept; see [`Draw::rejected`]).
    pub random: u64,
    /// `random mod total`: the point whose slice holds the chosen leaf.
    pub point: u64,
    /// Values drawn and rejected before `random` (almost always 0).
    pub rejected: u32,
    /// The chosen leaf (request index).
    pub chosen: u32,
    /// Trainable nodes fixed as this draw's targets, in path order.
    pub targets: Vec<NodeId>,
    /// Number of target tokens.
    pub target_tokens: u64,
    /// Length of the chosen path (`I + O`).
    pub path_tokens: u64,
}

impl Draw {
    /// Probability the chosen leaf had (or any candidate `i` of the log).
    pub fn probability(&self, w: &Weighted) -> f64 {
        w.weight as f64 / self.total as f64
    }
}

/// Why admission stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// `J_max` draws were made.
    JmaxReached,
    /// No candidate of a listed class had weight left.
    Exhausted,
    /// The execution is not admitted by draws (excluded or dummy).
    NotDrawn,
}

/// The admission of one execution: candidates, the draw log and who claimed what.
#[derive(Clone, Debug)]
pub struct Admission {
    /// Every candidate leaf, in request order.
    pub candidates: Vec<Candidate>,
    /// The draws, in order (draw `k` is `draws[k-1]`).
    pub draws: Vec<Draw>,
    /// For each tree node: the 1-based draw that claimed it (trainable nodes only).
    pub claimed_by: Vec<Option<u32>>,
    /// Why drawing stopped.
    pub stop: Stop,
    /// The class priority the draws used.
    pub priority: Vec<Class>,
    /// For each tree node: it lies on the path of a candidate whose class is in the priority
    /// (so an unclaimed trainable node there was left out by J_max, not by the priority).
    pub drawable: Vec<bool>,
}

impl Admission {
    /// `L_i`: admitted targets (docs/format.md §6).
    pub fn targets(&self) -> u64 {
        self.draws.iter().map(|d| d.target_tokens).sum()
    }
}

/// Whether node `n` holds trainable tokens (policy output of a request inside the execution).
pub fn trainable_node(exec: &Execution, n: NodeId) -> bool {
    let node = &exec.tree.nodes[n as usize];
    node.kind == NodeKind::Output && exec.requests[node.owner as usize].trainable()
}

/// Candidate leaves: trainable requests with no other trainable output below their output.
pub fn candidates(exec: &Execution) -> Vec<Candidate> {
    let tree = &exec.tree;
    // below[n]: some trainable output lies strictly below n. Children can be younger or older
    // than their parent (splits insert heads), so walk an explicit post-order.
    let mut below = vec![false; tree.nodes.len()];
    let mut order = Vec::with_capacity(tree.nodes.len());
    let mut stack = vec![ROOT];
    while let Some(n) = stack.pop() {
        order.push(n);
        stack.extend_from_slice(&tree.nodes[n as usize].children);
    }
    for &n in order.iter().rev() {
        let node = &tree.nodes[n as usize];
        below[n as usize] = node
            .children
            .iter()
            .any(|&c| below[c as usize] || trainable_node(exec, c));
    }
    exec.requests
        .iter()
        .enumerate()
        .filter(|(_, r)| r.trainable() && !below[r.output_node as usize])
        .map(|(i, r)| Candidate {
            request: i as u32,
            class: Class::of(&r.agent, r.purpose),
        })
        .collect()
}

/// The per-execution generator (see the module docs).
pub fn execution_rng(seed: u64, execution: &str) -> ChaCha20Rng {
    let mut h = Sha256::new();
    h.update(b"gyre/1 admission");
    h.update(seed.to_le_bytes());
    h.update(execution.as_bytes());
    ChaCha20Rng::from_seed(h.finalize().into())
}

/// A uniform integer in `0..n` without modulo bias: the accepted `next_u64()`, it mod `n`,
/// and how many values were rejected first.
fn below_n(rng: &mut ChaCha20Rng, n: u64) -> (u64, u64, u32) {
    let zone = u64::MAX - (u64::MAX - n + 1) % n;
    let mut rejected = 0;
    loop {
        let x = rng.next_u64();
        if x <= zone {
            return (x, x % n, rejected);
        }
        rejected += 1;
    }
}

/// What admission needs of an execution whatever the settings: its candidates, the trainable
/// nodes on each candidate's path and the candidates each such node lies under. Built once,
/// it admits under any seed, J_max and priority ([`Prepared::run`]); a sweep over settings
/// reuses it.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// Every candidate leaf, in request order.
    pub candidates: Vec<Candidate>,
    /// Trainable nodes on each candidate's path, in path order.
    paths: Vec<Vec<NodeId>>,
    /// For each trainable node on some path: the candidates whose path holds it
    /// (`under[under_at[n]..under_at[n + 1]]`).
    under_at: Vec<u32>,
    under: Vec<u32>,
    /// Unclaimed trainable tokens of each candidate before any draw.
    weights: Vec<u64>,
    /// Length of each candidate's path (`I + O`).
    path_tokens: Vec<u64>,
}

/// Why admission stopped and what each draw took, without the per-node claims.
#[derive(Clone, Debug, PartialEq)]
pub struct Drawn {
    /// The draws, in order.
    pub draws: Vec<Draw>,
    /// For each tree node: the 1-based draw that claimed it.
    pub claimed_by: Vec<Option<u32>>,
    /// Why drawing stopped.
    pub stop: Stop,
}

impl Prepared {
    /// Prepares execution `exec`.
    pub fn new(exec: &Execution) -> Self {
        let tree = &exec.tree;
        let candidates = candidates(exec);
        let paths: Vec<Vec<NodeId>> = candidates
            .iter()
            .map(|c| {
                tree.path_nodes(exec.requests[c.request as usize].output_node)
                    .into_iter()
                    .filter(|&n| trainable_node(exec, n))
                    .collect()
            })
            .collect();
        let mut under_at = vec![0u32; tree.nodes.len() + 1];
        for path in &paths {
            for &n in path {
                under_at[n as usize + 1] += 1;
            }
        }
        for n in 0..tree.nodes.len() {
            under_at[n + 1] += under_at[n];
        }
        let mut fill = under_at.clone();
        let mut under = vec![0u32; *under_at.last().unwrap_or(&0) as usize];
        for (ci, path) in paths.iter().enumerate() {
            for &n in path {
                under[fill[n as usize] as usize] = ci as u32;
                fill[n as usize] += 1;
            }
        }
        let weights = paths
            .iter()
            .map(|p| p.iter().map(|&n| tree.nodes[n as usize].len as u64).sum())
            .collect();
        let path_tokens = candidates
            .iter()
            .map(|c| tree.depth_tokens(exec.requests[c.request as usize].output_node))
            .collect();
        Prepared {
            candidates,
            paths,
            under_at,
            under,
            weights,
            path_tokens,
        }
    }

    /// Runs the draw loop of docs/format.md §5 for `exec` (the execution this was prepared from).
    pub fn run(&self, exec: &Execution, settings: &Settings) -> Drawn {
        let tree = &exec.tree;
        let mut claimed_by = vec![None; tree.nodes.len()];
        let mut weights = self.weights.clone();
        let mut rng = execution_rng(settings.seed, &exec.id);
        let mut draws = Vec::new();
        let stop = loop {
            if settings.jmax > 0 && draws.len() as u32 >= settings.jmax {
                break Stop::JmaxReached;
            }
            let Some(class) = settings.priority.iter().copied().find(|&cl| {
                self.candidates
                    .iter()
                    .zip(&weights)
                    .any(|(c, &w)| c.class == cl && w > 0)
            }) else {
                break Stop::Exhausted;
            };
            let mut total = 0;
            let pool: Vec<(usize, Weighted)> = self
                .candidates
                .iter()
                .zip(&weights)
                .enumerate()
                .filter(|(_, (c, w))| c.class == class && **w > 0)
                .map(|(ci, (c, &w))| {
                    let from = total;
                    total += w;
                    (
                        ci,
                        Weighted {
                            request: c.request,
                            weight: w,
                            from,
                        },
                    )
                })
                .collect();
            let (random, point, rejected) = below_n(&mut rng, total);
            let (ci, chosen) = pool
                .iter()
                .find(|(_, w)| point < w.to())
                .copied()
                .expect("point < total lands in some slice");
            let k = draws.len() as u32 + 1;
            let mut targets = Vec::new();
            let mut target_tokens = 0;
            for &n in &self.paths[ci] {
                if claimed_by[n as usize].is_none() {
                    claimed_by[n as usize] = Some(k);
                    targets.push(n);
                    let len = tree.nodes[n as usize].len as u64;
                    target_tokens += len;
                    let (a, b) = (self.under_at[n as usize], self.under_at[n as usize + 1]);
                    for &other in &self.under[a as usize..b as usize] {
                        weights[other as usize] -= len;
                    }
                }
            }
            draws.push(Draw {
                class,
                candidates: pool.into_iter().map(|(_, w)| w).collect(),
                total,
                random,
                point,
                rejected,
                chosen: chosen.request,
                targets,
                target_tokens,
                path_tokens: self.path_tokens[ci],
            });
        };
        Drawn {
            draws,
            claimed_by,
            stop,
        }
    }
}

/// Runs admission for one execution (docs/format.md §5).
pub fn admit(exec: &Execution, outcome: &Outcome, settings: &Settings) -> Admission {
    admit_prepared(exec, &Prepared::new(exec), outcome, settings)
}

/// [`admit`] with the settings-independent part already prepared.
pub fn admit_prepared(
    exec: &Execution,
    prepared: &Prepared,
    outcome: &Outcome,
    settings: &Settings,
) -> Admission {
    let drawable = drawable_nodes(exec, &prepared.candidates, &settings.priority);
    let (draws, claimed_by, stop) = if matches!(outcome, Outcome::Scored { .. }) {
        let d = prepared.run(exec, settings);
        (d.draws, d.claimed_by, d.stop)
    } else {
        (
            Vec::new(),
            vec![None; exec.tree.nodes.len()],
            Stop::NotDrawn,
        )
    };
    Admission {
        candidates: prepared.candidates.clone(),
        draws,
        claimed_by,
        stop,
        priority: settings.priority.clone(),
        drawable,
    }
}

/// Nodes on the path of some candidate whose class the priority lists.
pub fn drawable_nodes(exec: &Execution, candidates: &[Candidate], priority: &[Class]) -> Vec<bool> {
    let mut on = vec![false; exec.tree.nodes.len()];
    for c in candidates.iter().filter(|c| priority.contains(&c.class)) {
        let mut n = exec.requests[c.request as usize].output_node;
        // Paths share prefixes: stop at the first node another candidate already marked.
        while n != ROOT && !on[n as usize] {
            on[n as usize] = true;
            n = exec.tree.nodes[n as usize].parent;
        }
    }
    on
}
