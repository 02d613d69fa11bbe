//! `gyre import prime-rl`: a prime-rl run's rollouts (verifiers v1 Episodes,
//! `rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl`) and its trainer's token exports
//! (`token_exports/step_N/rank_R.jsonl`) → one execution per Episode, its sampled nodes as exact
//! requests and each branch prime-rl trained as a `trained` record (docs/import.md#prime-rl).
//!
//! A trace is a message graph: each node names its `parent` and holds only the tokens it adds;
//! a branch (root → leaf) is one training sample. prime-rl trains a sampled node shared by
//! several branches in the first branch only (`orchestrator/trajectories.py`,
//! `iter_trainable_branches`): the later branches hold it as context. Token exports hold, per
//! packed sequence, the trainer's own log-probs; they carry no episode id and are joined to the
//! branches by their tokens.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use eyre::Result;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::dump::{Advantage, Aux, Label, Row, Rows};
use super::error::{bad, diag};
use super::input::{Counter, Lines, typed_values};
use super::session::{self, Closure};
use super::sniff::{Fit, Probe, Shape};
use super::write::{LossAgg, Trainer};
use super::{About, Importer, Job, Progress};
use gyre_engine::record::{ClosureStatus, Source};
use gyre_engine::report::plural;

/// The prime-rl importer.
pub struct PrimeRl;

static ABOUT: About = About {
    name: "prime-rl",
    what: "a prime-rl run's rollouts or token exports",
    summary: "prime-rl rollouts (verifiers v1 traces.jsonl) and token exports: exact requests and the trainer's rows",
    input: "RUN",
    input_help: "A prime-rl output folder (rollouts/, token_exports/), or traces.jsonl and rank_R.jsonl files from one",
    many: true,
    directories: true,
    reconstructed: false,
    help: "\
Examples:
  gyre import prime-rl outputs/run --out run.jsonl
  gyre import prime-rl outputs/run/rollouts/step_12/train/effective/traces.jsonl \\
    outputs/run/token_exports/step_12 --out step12.jsonl

Each Episode of rollouts/step_N/train/effective/ (the cohort prime-rl shipped to its trainer)
is one execution; every sampled node is one request with its exact ids and log-probs, and every
branch prime-rl trained is a `trained` record (a node shared by branches trains in the first
only). train/all/ (every rollout that arrived, errored and rejected ones included) and eval/
are left out of a folder. Token exports are joined to the branches by their tokens and give
the trainer's log-probs. docs/import.md has the mapping.",
};

/// What the import infers because the files are silent (the header's `trainer.inferred`).
const INFERRED: [&str; 5] = [
    "loss_agg: token-mean: prime-rl divides each loss component by its global token count (trainer/rl/loss.py, compute_loss); the files do not record prime-rl's version",
    "loss mask: a branch's sampled tokens, a node shared by several branches in the first of them only (orchestrator/trajectories.py, iter_trainable_branches), less tokens with an `rl` loss weight of 0",
    "loss mask: tokens whose advantage is 0 or absent are left out, as prime-rl's default orchestrator.train.filter_zero_advantages = true does; the traces do not record the setting (a joined token export's rl_weights do)",
    "executions: one per Episode (its id), groups by the Episode's group id; token-export rows that match no branch are their own executions, rows of one step sharing a prompt a group",
    "auxiliary loss: `echo-ce` is prime-rl's ECHO cross-entropy (the `ce` loss weights), reported beside the policy-gradient mask",
];

// ---------------------------------------------------------------------------------------
// The files and where they sit in a run's layout.

/// Which rollouts a `traces.jsonl` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cohort {
    /// `train/effective`: the episodes prime-rl shipped to the trainer.
    Effective,
    /// `train/all`: every rollout that arrived (errored, rejected, never batched included).
    All,
    /// `eval/…`: evaluation rollouts, not training data.
    Eval,
    /// A traces file outside the layout: read as trained.
    Unplaced,
}

/// A file of a run.
#[derive(Clone, Debug)]
enum File {
    Traces {
        path: PathBuf,
        step: Option<u64>,
        cohort: Cohort,
    },
    Export {
        path: PathBuf,
        step: Option<u64>,
        rank: Option<u64>,
    },
}

fn numbered(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    name.strip_prefix(prefix)?
        .strip_suffix(suffix)?
        .parse()
        .ok()
}

/// What `path` is by its place in the layout, else by its first line.
fn classify(path: &Path) -> Option<File> {
    let part = |p: Option<&Path>| {
        p.and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let name = part(Some(path));
    let parent = path.parent();
    let up = |n: usize| {
        let mut p = parent;
        for _ in 0..n {
            p = p.and_then(Path::parent);
        }
        part(p)
    };
    if name == "traces.jsonl" {
        let step = numbered(&up(2), "step_", "");
        let cohort = match (step, up(1).as_str(), up(0).as_str()) {
            (Some(_), "eval", _) => Cohort::Eval,
            (Some(_), "train", "effective") => Cohort::Effective,
            (Some(_), "train", "all") => Cohort::All,
            _ => Cohort::Unplaced,
        };
        return Some(File::Traces {
            path: path.to_path_buf(),
            step,
            cohort,
        });
    }
    if let Some(rank) = numbered(&name, "rank_", ".jsonl") {
        return Some(File::Export {
            path: path.to_path_buf(),
            step: numbered(&up(0), "step_", ""),
            rank: Some(rank),
        });
    }
    let probe = Probe::of(path);
    let o = probe.first_object()?;
    if o.contains_key("traces") {
        Some(File::Traces {
            path: path.to_path_buf(),
            step: None,
            cohort: Cohort::Unplaced,
        })
    } else if o.contains_key("trainer_logprobs") && o.contains_key("token_ids") {
        Some(File::Export {
            path: path.to_path_buf(),
            step: o.get("step").and_then(Value::as_u64),
            rank: o.get("rank").and_then(Value::as_u64),
        })
    } else {
        None
    }
}

/// The run files under a folder (at most 6 levels down), in step order.
fn walk(dir: &Path, depth: usize, out: &mut Vec<File>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() && depth < 6 {
            walk(&p, depth + 1, out);
        } else if p.is_file() {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            let known = matches!(name.as_deref(), Some("traces.jsonl"))
                || name
                    .as_deref()
                    .and_then(|n| numbered(n, "rank_", ".jsonl"))
                    .is_some();
            if known {
                out.extend(classify(&p));
            }
        }
    }
}

/// Every run file of the inputs: folders walked, files as given; traces before exports, each
/// in step order.
fn scan(inputs: &[PathBuf]) -> Vec<File> {
    let mut files = Vec::new();
    for p in inputs {
        if p.is_dir() {
            walk(p, 0, &mut files);
        } else {
            files.push(classify(p).unwrap_or(File::Traces {
                path: p.clone(),
                step: None,
                cohort: Cohort::Unplaced,
            }));
        }
    }
    let key = |f: &File| match f {
        File::Traces { step, .. } => (0, step.unwrap_or(u64::MAX), 0),
        File::Export { step, rank, .. } => (1, step.unwrap_or(u64::MAX), rank.unwrap_or(u64::MAX)),
    };
    files.sort_by_key(key);
    files
}

/// Whether a file of a scanned folder is left out: `all` and `eval` traces in a folder (a file
/// named on the command line is read, eval excepted).
fn left_out(f: &File, inputs: &[PathBuf]) -> Option<&'static str> {
    let File::Traces { path, cohort, .. } = f else {
        return None;
    };
    let named = inputs.iter().any(|i| i == path);
    match cohort {
        Cohort::Eval => Some("evaluation rollouts (not training data)"),
        Cohort::All if !named => Some(
            "every rollout that arrived, errored and rejected ones included (the trainer trained on train/effective)",
        ),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------
// The files' records, as verifiers 0.4.0 and prime-rl write them.

#[derive(Deserialize)]
struct Episode {
    id: String,
    #[serde(default)]
    group: Option<GroupInfo>,
    #[serde(default)]
    run: Option<RunInfo>,
    #[serde(default)]
    ok: bool,
    #[serde(default)]
    is_timeout: bool,
    #[serde(default)]
    traces: Vec<Trace>,
}

#[derive(Deserialize)]
struct GroupInfo {
    id: String,
}

#[derive(Deserialize)]
struct RunInfo {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    work: Option<WorkInfo>,
}

#[derive(Deserialize)]
struct WorkInfo {
    #[serde(rename = "type")]
    kind: String,
    step: u64,
}

#[derive(Deserialize)]
struct Trace {
    id: String,
    #[serde(default)]
    agent: Option<AgentInfo>,
    #[serde(default)]
    nodes: Vec<Node>,
    #[serde(default)]
    rewards: HashMap<String, Option<Reward>>,
    #[serde(default)]
    ok: bool,
}

#[derive(Deserialize)]
struct VersionInfo {
    version: String,
}

#[derive(Deserialize)]
struct AgentInfo {
    #[serde(default = "agent_name")]
    name: String,
    #[serde(default = "yes")]
    trainable: bool,
}

fn agent_name() -> String {
    "agent".into()
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
struct Reward {
    score: f64,
    #[serde(default = "one")]
    weight: f64,
}

fn one() -> f64 {
    1.0
}

#[derive(Deserialize)]
struct Node {
    #[serde(default)]
    parent: Option<usize>,
    message: Message,
    #[serde(default)]
    token_ids: Vec<u32>,
    #[serde(default)]
    mask: Vec<bool>,
    #[serde(default)]
    is_content: Vec<bool>,
    #[serde(default)]
    logprobs: Vec<Option<f64>>,
    #[serde(default)]
    advantages: Option<Vec<Option<f64>>>,
    #[serde(default)]
    reference_logprobs: Option<Vec<Option<f64>>>,
    #[serde(default)]
    trainer_logprobs: Option<Vec<Option<f64>>>,
    #[serde(default)]
    loss_weights: Option<HashMap<String, Vec<f64>>>,
    #[serde(default)]
    semantic_parents: Vec<Link>,
}

#[derive(Deserialize)]
struct Message {
    role: String,
    #[serde(default)]
    tool_call_id: Option<String>,
}

#[derive(Deserialize)]
struct Link {
    #[serde(rename = "type")]
    kind: String,
}

/// One packed sequence of a token export (`trainer/rl/token_export.py`).
#[derive(Deserialize)]
struct Export {
    #[serde(default)]
    step: Option<u64>,
    token_ids: Vec<u32>,
    loss_mask: Vec<bool>,
    advantages: Vec<Option<f64>>,
    inference_logprobs: Vec<Option<f64>>,
    trainer_logprobs: Vec<Option<f64>>,
    #[serde(default)]
    mismatch_kl: Option<Vec<Option<f64>>>,
    #[serde(default)]
    rl_weights: Option<Vec<Option<f64>>>,
    #[serde(default)]
    ce_weights: Option<Vec<Option<f64>>>,
}

impl Export {
    /// Every per-token column must have one value per token.
    fn check(&self) -> Result<(), (String, &'static str)> {
        let n = self.token_ids.len();
        let cols: [(&'static str, Option<usize>); 7] = [
            ("loss_mask", Some(self.loss_mask.len())),
            ("advantages", Some(self.advantages.len())),
            ("inference_logprobs", Some(self.inference_logprobs.len())),
            ("trainer_logprobs", Some(self.trainer_logprobs.len())),
            ("mismatch_kl", self.mismatch_kl.as_ref().map(Vec::len)),
            ("rl_weights", self.rl_weights.as_ref().map(Vec::len)),
            ("ce_weights", self.ce_weights.as_ref().map(Vec::len)),
        ];
        for (field, len) in cols {
            if let Some(len) = len.filter(|&l| l != n) {
                return Err((format!("{len} values for {n} tokens"), field));
            }
        }
        Ok(())
    }

    /// The policy-gradient mask: the loss mask less tokens with an `rl` weight of 0.
    fn pg_mask(&self) -> Vec<bool> {
        self.loss_mask
            .iter()
            .enumerate()
            .map(|(i, &m)| m && weight(&self.rl_weights, i).is_none_or(|w| w != 0.0))
            .collect()
    }

    /// The join key: the tokens up to the last loss-mask token.
    fn key(&self) -> Option<&[u32]> {
        let last = self.loss_mask.iter().rposition(|&m| m)?;
        Some(&self.token_ids[..=last])
    }
}

fn weight(w: &Option<Vec<Option<f64>>>, i: usize) -> Option<f64> {
    w.as_ref().and_then(|w| w[i])
}

/// A token export row, read.
struct ExportRow {
    file: PathBuf,
    line: u64,
    index: u64,
    rank: Option<u64>,
    step: Option<u64>,
    row: Export,
}

// ---------------------------------------------------------------------------------------
// Reading.

/// One execution: its rows (per branch) and how it ended.
pub struct Item {
    rows: Vec<Row>,
    execution: String,
    file: PathBuf,
    line: u64,
    status: ClosureStatus,
    score: Option<f64>,
    meta: Map<String, Value>,
}

/// What the reading counts for the summary's warnings.
#[derive(Default)]
struct Tally {
    unjoined_samples: u64,
    mask_differs: u64,
    zero_advantage: u64,
    untrained_traces: u64,
    eval_episodes: u64,
}

impl Importer for PrimeRl {
    type Item = Item;

    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn sniff(&self, probe: &Probe) -> Fit {
        match (&probe.shape, probe.first_object()) {
            (Shape::Jsonl(_), Some(o)) => {
                let traces = o.get("traces").is_some_and(Value::is_array);
                let export = o.contains_key("trainer_logprobs") && o.contains_key("token_ids");
                if traces || export { Fit::Yes } else { Fit::No }
            }
            (Shape::Directory { .. }, _) => match probe.path() {
                Some(dir) if !scan(&[dir.to_path_buf()]).is_empty() => Fit::Yes,
                _ => Fit::No,
            },
            _ => Fit::No,
        }
    }

    fn files(&self, inputs: &[PathBuf]) -> Vec<PathBuf> {
        scan(inputs)
            .into_iter()
            .filter(|f| left_out(f, inputs).is_none())
            .map(|f| match f {
                File::Traces { path, .. } | File::Export { path, .. } => path,
            })
            .collect()
    }

    fn trainer(&self, inputs: &[PathBuf]) -> Result<Option<Trainer>> {
        // verifiers' version, when the first trace says it (prime-rl's is in no file).
        let verifiers = scan(inputs).into_iter().find_map(|f| match f {
            File::Traces { path, .. } => first_verifiers_version(&path),
            File::Export { .. } => None,
        });
        let meta = verifiers.map(|v| json!({ "verifiers": v }));
        Ok(Some(Trainer {
            name: "prime-rl".into(),
            version: None,
            loss_agg: LossAgg::TokenMean,
            inferred: INFERRED.iter().map(|s| (*s).to_owned()).collect(),
            meta,
        }))
    }

    fn read(
        &self,
        inputs: &[PathBuf],
        job: &mut Job,
        emit: &mut dyn FnMut(&mut Job, Item) -> Result<()>,
    ) -> Result<()> {
        let all = scan(inputs);
        if all.is_empty() {
            return Err(bad(
                &inputs[0],
                0,
                "nothing to import: no rollouts/step_N/…/traces.jsonl nor token_exports/step_N/rank_R.jsonl in the folder",
                None,
            ));
        }
        let mut files = Vec::new();
        let mut first_left_out = None;
        for f in all {
            match (left_out(&f, inputs), &f) {
                (Some(why), File::Traces { path, .. }) => {
                    job.log.warn_grouped(
                        "prime-rl-left-out",
                        format!("{}: left out: {why}", path.display()),
                    );
                    first_left_out.get_or_insert((path.clone(), why));
                }
                _ => files.push(f),
            }
        }
        if let (true, Some((path, why))) = (files.is_empty(), first_left_out) {
            return Err(bad(
                &path,
                0,
                format!("nothing to import: these are {why}, which are left out"),
                None,
            ));
        }
        let total: u64 = files
            .iter()
            .map(|f| match f {
                File::Traces { path, .. } | File::Export { path, .. } => {
                    std::fs::metadata(path).map_or(0, |m| m.len())
                }
            })
            .sum();
        let counter = Counter::default();
        let exports = read_exports(&files, job, &counter, total)?;
        let mut by_key: HashMap<&[u32], Vec<usize>> = HashMap::new();
        for (i, e) in exports.iter().enumerate() {
            if let Some(k) = e.row.key() {
                by_key.entry(k).or_default().push(i);
            }
        }
        let mut used = vec![false; exports.len()];
        let mut tally = Tally::default();
        let mut seen: HashSet<String> = HashSet::new();
        for f in &files {
            let File::Traces { path, step, cohort } = f else {
                continue;
            };
            let mut index = 0u64;
            typed_values(path, &counter, total, job, &mut |job, n, ep: Episode| {
                let at = Place {
                    file: path,
                    line: n,
                    index,
                    step: *step,
                };
                index += 1;
                let eval = ep.run.as_ref().is_some_and(|r| {
                    r.kind == "eval" || r.work.as_ref().is_some_and(|w| w.kind == "eval")
                });
                if eval {
                    tally.eval_episodes += 1;
                    return Ok(());
                }
                if !seen.insert(ep.id.clone()) {
                    job.log.warn_grouped(
                        "prime-rl-repeat",
                        format!(
                            "{}:{n}: episode {} was already read (an `all` file repeats the \
                             `effective` one): read once",
                            path.display(),
                            gyre_format::sanitize::sanitize(&ep.id)
                        ),
                    );
                    return Ok(());
                }
                let trained = matches!(cohort, Cohort::Effective | Cohort::Unplaced);
                let mut item = match episode_rows(&ep, &at, trained) {
                    Ok(item) => item,
                    Err((msg, field)) => {
                        job.log.problem(diag(path, n, msg, Some(&field)));
                        return Ok(());
                    }
                };
                join(&mut item, &exports, &by_key, &mut used, &mut tally);
                tally.untrained_traces += item
                    .meta
                    .get("untrained_traces")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                if job.log.has_problems() {
                    return Ok(());
                }
                emit(job, item)
            })?;
        }
        // Export rows no branch matched: each is its own execution.
        let mut groups: HashMap<(Option<u64>, Vec<u32>), usize> = HashMap::new();
        let mut unjoined = 0u64;
        for (i, e) in exports.iter().enumerate() {
            if used[i] {
                continue;
            }
            unjoined += 1;
            let row = export_row(e, &mut groups);
            let execution = row.execution.clone();
            if !job.log.has_problems() {
                emit(
                    job,
                    Item {
                        rows: vec![row],
                        execution,
                        file: e.file.clone(),
                        line: e.line,
                        status: ClosureStatus::Completed,
                        score: None,
                        meta: Map::new(),
                    },
                )?;
            }
        }
        (job.progress)(Progress::Reading { done: total, total });
        warn(job, &tally, unjoined, exports.len());
        Ok(())
    }

    fn records(&self, item: Item, job: &mut Job) -> Result<()> {
        let at = super::write::At {
            file: &item.file,
            line: item.line,
        };
        Rows::write(item.rows, job)?;
        let closure = Closure {
            t: 0.0,
            status: item.status,
            artifact: if item.score.is_some() {
                json!("episode")
            } else {
                Value::Null
            },
            version: item.score.map(|_| json!(1)),
            meta: item.meta,
        };
        session::write_end(
            job,
            &item.execution,
            &closure,
            item.score,
            "prime-rl reward",
            at,
        )
    }
}

/// The summary's warnings.
fn warn(job: &mut Job, t: &Tally, unjoined: u64, exports: usize) {
    if unjoined > 0 {
        job.log.warn_important(format!(
            "{} of the token exports match no branch of the traces read (by their tokens): \
             each is its own execution, rows of one step sharing a prompt a group",
            plural(unjoined as usize, "row")
        ));
    }
    if exports == 0 {
        job.log.warn(
            "no token exports (token_exports/step_N/rank_R.jsonl, written with \
             trainer.enable_token_export): the trained records have no trainer log-probs",
        );
    } else if t.unjoined_samples > 0 {
        job.log.warn(format!(
            "{} no token-export row: no trainer log-probs for them",
            plural(t.unjoined_samples as usize, "trained sample has")
        ));
    }
    if t.mask_differs > 0 {
        job.log.warn_important(format!(
            "{}: the token export's loss mask differs from the one the traces give; the \
             export's (what the trainer used) is written",
            plural(t.mask_differs as usize, "sample")
        ));
    }
    if t.zero_advantage > 0 {
        job.log.warn(format!(
            "{} with advantage 0 or none are left out of the loss mask (prime-rl's \
             filter_zero_advantages)",
            plural(t.zero_advantage as usize, "sampled token")
        ));
    }
    if t.untrained_traces > 0 {
        job.log.warn(format!(
            "{} (errored, not trainable, or from an `all` file): requests only, no trained records",
            plural(t.untrained_traces as usize, "trace was not trained")
        ));
    }
    if t.eval_episodes > 0 {
        job.log.warn(format!(
            "{} left out (not training data)",
            plural(t.eval_episodes as usize, "evaluation episode")
        ));
    }
}

/// `traces[0].verifiers.version` of a traces file's first line.
fn first_verifiers_version(path: &Path) -> Option<String> {
    #[derive(Deserialize)]
    struct Head {
        traces: Vec<HeadTrace>,
    }
    #[derive(Deserialize)]
    struct HeadTrace {
        verifiers: Option<VersionInfo>,
    }
    let counter = Counter::default();
    let mut lines = Lines::open(path, &counter).ok()?;
    let (_, text) = lines.next_line()?.ok()?;
    let head: Head = serde_json::from_str(text).ok()?;
    Some(head.traces.into_iter().next()?.verifiers?.version)
}

fn read_exports(
    files: &[File],
    job: &mut Job,
    counter: &Counter,
    total: u64,
) -> Result<Vec<ExportRow>> {
    let mut out = Vec::new();
    for f in files {
        let File::Export { path, step, rank } = f else {
            continue;
        };
        let mut index = 0;
        typed_values(path, counter, total, job, &mut |job, n, row: Export| {
            if let Err((msg, field)) = row.check() {
                job.log.problem(diag(path, n, msg, Some(field)));
                return Ok(());
            }
            out.push(ExportRow {
                file: path.clone(),
                line: n,
                index,
                rank: *rank,
                step: row.step.or(*step),
                row,
            });
            index += 1;
            Ok(())
        })?;
    }
    Ok(out)
}

/// Where an episode was read.
struct Place<'a> {
    file: &'a Path,
    line: u64,
    index: u64,
    step: Option<u64>,
}

type Fault = (String, String);

/// Checks a trace's graph: parents inside it and no loop; per-node arrays of the right length.
fn check_trace(t: &Trace, ti: usize) -> Result<(), Fault> {
    let n = t.nodes.len();
    for (i, node) in t.nodes.iter().enumerate() {
        let at = |f: &str| format!("traces[{ti}].nodes[{i}].{f}");
        if let Some(p) = node.parent {
            if p >= n {
                return Err((format!("{p}, and the trace has {n} nodes"), at("parent")));
            }
        }
        // A parent chain longer than the graph is a loop.
        let mut steps = 0;
        let mut cur = node.parent;
        while let Some(p) = cur {
            steps += 1;
            if steps > n {
                return Err(("the parent chain loops".into(), at("parent")));
            }
            cur = t.nodes[p].parent;
        }
        let tokens = node.token_ids.len();
        if node.mask.len() != tokens {
            return Err((
                format!("{} values for {tokens} tokens", node.mask.len()),
                at("mask"),
            ));
        }
        let on = node.mask.iter().filter(|&&m| m).count();
        let per_sampled = [
            ("logprobs", Some(&node.logprobs)),
            ("advantages", node.advantages.as_ref()),
            ("reference_logprobs", node.reference_logprobs.as_ref()),
            ("trainer_logprobs", node.trainer_logprobs.as_ref()),
        ];
        for (f, v) in per_sampled {
            if let Some(v) = v.filter(|v| v.len() != on) {
                return Err((
                    format!("{} values for {on} sampled (mask-on) tokens", v.len()),
                    at(f),
                ));
            }
        }
        if let Some(k) = node.logprobs.iter().position(Option::is_none) {
            return Err((
                "null: a sampled token without its log-prob (gyre/1 needs each)".into(),
                at(&format!("logprobs[{k}]")),
            ));
        }
        for (name, w) in node.loss_weights.iter().flatten() {
            if w.len() != tokens {
                return Err((
                    format!("{} values for {tokens} tokens", w.len()),
                    at(&format!("loss_weights.{name}")),
                ));
            }
        }
    }
    Ok(())
}

/// The root of node `i`.
fn root(t: &Trace, mut i: usize) -> usize {
    while let Some(p) = t.nodes[i].parent {
        i = p;
    }
    i
}

/// Root-to-leaf paths, one per leaf (a node no node names as parent), in leaf order.
fn branches(t: &Trace) -> Vec<Vec<usize>> {
    let parents: HashSet<usize> = t.nodes.iter().filter_map(|n| n.parent).collect();
    (0..t.nodes.len())
        .filter(|i| !parents.contains(i))
        .map(|leaf| {
            let mut path = vec![leaf];
            let mut cur = t.nodes[leaf].parent;
            while let Some(p) = cur {
                path.push(p);
                cur = t.nodes[p].parent;
            }
            path.reverse();
            path
        })
        .collect()
}

/// The agent of each root: the first root's tree (and any other that is not a delegation)
/// is the trace's agent; a tree one of whose nodes a `subagent_call` link enters is a
/// sub-agent, `sub-<root>`.
fn agents(t: &Trace, base: &str) -> HashMap<usize, String> {
    let mut out = HashMap::new();
    for (i, n) in t.nodes.iter().enumerate() {
        let r = root(t, i);
        let delegated = n.semantic_parents.iter().any(|l| l.kind == "subagent_call");
        let entry = out.entry(r).or_insert_with(|| base.to_owned());
        if delegated {
            *entry = format!("{}sub-{r}", if base == "main" { "" } else { base });
        }
    }
    out
}

/// The source of a node's tokens by its role; scaffold (when the renderer marked content) is
/// template.
fn labels_of(node: &Node, start: usize, sampled_node: bool, out: &mut Vec<Label>) {
    let source = match node.message.role.as_str() {
        "system" => Source::System,
        "user" => Source::User,
        "tool" => Source::Tool,
        "assistant" if !sampled_node => Source::Assistant,
        _ => Source::Template,
    };
    let call_id = (source == Source::Tool)
        .then(|| node.message.tool_call_id.clone())
        .flatten();
    let content = node.is_content.len() == node.token_ids.len();
    for (k, _) in node.token_ids.iter().enumerate() {
        let s = if (content && !node.is_content[k]) || (sampled_node && !node.mask[k]) {
            Source::Template
        } else {
            source
        };
        let cid = (s == Source::Tool).then(|| call_id.clone()).flatten();
        match out.last_mut() {
            Some(l) if l.source == s && l.call_id == cid => l.end = start + k + 1,
            _ => out.push(Label {
                end: start + k + 1,
                source: s,
                call_id: cid,
            }),
        }
    }
}

/// An episode's rows: one per branch of each trace holding a sampled token; trained ones (a
/// clean trainable trace of a trained cohort) with prime-rl's loss mask.
fn episode_rows(ep: &Episode, at: &Place, trained_cohort: bool) -> Result<Item, Fault> {
    let execution = ep.id.clone();
    let group = ep.group.as_ref().map(|g| json!(g.id));
    let step = at.step.or_else(|| {
        ep.run
            .as_ref()
            .and_then(|r| r.work.as_ref())
            .map(|w| w.step)
    });
    let main_name = ep
        .traces
        .first()
        .and_then(|t| t.agent.as_ref())
        .map_or_else(agent_name, |a| a.name.clone());
    let mut rows = Vec::new();
    let mut score = None;
    let mut untrained = 0u64;
    for (ti, t) in ep.traces.iter().enumerate() {
        check_trace(t, ti)?;
        let agent = t.agent.as_ref();
        let name = agent.map_or_else(agent_name, |a| a.name.clone());
        let trains = trained_cohort && t.ok && agent.is_none_or(|a| a.trainable);
        if !trains && t.nodes.iter().any(|n| n.mask.iter().any(|&m| m)) {
            untrained += 1;
        }
        let reward = (!t.rewards.is_empty()).then(|| {
            t.rewards
                .values()
                .flatten()
                .map(|r| r.score * r.weight)
                .sum::<f64>()
        });
        if score.is_none() && (trains || ti == ep.traces.len() - 1) {
            score = reward;
        }
        let base = if name == main_name {
            "main".to_owned()
        } else {
            name.clone()
        };
        let agents = agents(t, &base);
        // prime-rl's first-branch rule, per loss stream.
        let mut trained_nodes: HashSet<usize> = HashSet::new();
        let mut ce_nodes: HashSet<usize> = HashSet::new();
        for (bi, path) in branches(t).into_iter().enumerate() {
            let mut row = Row {
                execution: execution.clone(),
                sample: if ti == 0 {
                    bi.to_string()
                } else {
                    format!("{ti}:{bi}")
                },
                group: group.clone(),
                step,
                file: at.file.display().to_string(),
                index: at.index,
                agent: agents.get(&path[0]).cloned(),
                reward,
                ..Row::default()
            };
            let (mut sampled, mut first, mut pg, mut ce) = (vec![], vec![], vec![], vec![]);
            let (mut behaviour, mut reference, mut trainer, mut adv) =
                (vec![], vec![], vec![], vec![]);
            let mut zero_adv = 0u64;
            for &i in &path {
                let node = &t.nodes[i];
                let is_sampled = node.mask.iter().any(|&m| m);
                let first_here = !(is_sampled && trained_nodes.contains(&i));
                if is_sampled && trains {
                    trained_nodes.insert(i);
                }
                labels_of(node, row.tokens.len(), is_sampled, &mut row.labels);
                row.tokens.extend(&node.token_ids);
                let rl = node.loss_weights.as_ref().and_then(|w| w.get("rl"));
                let ce_w = node.loss_weights.as_ref().and_then(|w| w.get("ce"));
                let ce_first = ce_w.is_some() && !ce_nodes.contains(&i);
                if trains && ce_w.is_some_and(|w| w.iter().any(|&x| x != 0.0)) {
                    ce_nodes.insert(i);
                }
                let mut k = 0;
                for (j, &m) in node.mask.iter().enumerate() {
                    let pick = |v: Option<&Vec<Option<f64>>>| {
                        if m { v.and_then(|v| v[k]) } else { None }
                    };
                    let a = pick(node.advantages.as_ref());
                    let on = m && first_here;
                    let rl_on = rl.is_none_or(|w| w[j] != 0.0);
                    let adv_on = a.is_some_and(|a| a != 0.0);
                    if on && rl_on && !adv_on {
                        zero_adv += 1;
                    }
                    sampled.push(u8::from(m));
                    first.push(on);
                    pg.push(u8::from(on && rl_on && adv_on));
                    ce.push(u8::from(ce_first && ce_w.is_some_and(|w| w[j] != 0.0)));
                    behaviour.push(if m { node.logprobs[k] } else { None });
                    reference.push(pick(node.reference_logprobs.as_ref()));
                    trainer.push(pick(node.trainer_logprobs.as_ref()));
                    adv.push(a);
                    k += usize::from(m);
                }
            }
            let Some(prompt_len) = sampled.iter().position(|&m| m == 1) else {
                continue;
            };
            row.prompt_len = prompt_len;
            let cut = |v: Vec<Option<f64>>| v[prompt_len..].to_vec();
            row.sampled = sampled[prompt_len..].to_vec();
            row.loss_mask = pg[prompt_len..].to_vec();
            row.behaviour = Some(cut(behaviour));
            let any = |t: &Trace, f: fn(&Node) -> bool| path.iter().any(|&i| f(&t.nodes[i]));
            row.reference = any(t, |n| n.reference_logprobs.is_some()).then(|| cut(reference));
            row.trainer = any(t, |n| n.trainer_logprobs.is_some()).then(|| cut(trainer));
            let adv = cut(adv);
            row.advantage = advantage(&adv, &row.sampled);
            let aux = ce[prompt_len..].to_vec();
            if aux.contains(&1) {
                row.aux = Some(Aux {
                    loss: "echo-ce".into(),
                    mask: aux,
                });
            }
            row.requests_only = !trains || (!row.loss_mask.contains(&1) && row.aux.is_none());
            if !row.requests_only && zero_adv > 0 {
                row.meta
                    .insert("zero_advantage_tokens".into(), json!(zero_adv));
            }
            row.meta.insert("trace".into(), json!(t.id));
            row.meta.insert("branch".into(), json!(bi));
            row.meta.insert("leaf".into(), json!(path[path.len() - 1]));
            // The join key: the tokens up to the last token of prime-rl's own mask.
            if let Some(last) = first.iter().rposition(|&m| m) {
                row.meta.insert("key_len".into(), json!(last + 1));
            }
            rows.push(row);
        }
    }
    let status = if ep.is_timeout {
        ClosureStatus::Timeout
    } else if ep.ok {
        ClosureStatus::Completed
    } else {
        ClosureStatus::Error
    };
    let mut meta = Map::new();
    if untrained > 0 {
        meta.insert("untrained_traces".into(), json!(untrained));
    }
    Ok(Item {
        rows,
        execution,
        file: at.file.to_path_buf(),
        line: at.line,
        status,
        score,
        meta,
    })
}

/// One number when every sampled token carries the same advantage, else per token.
fn advantage(adv: &[Option<f64>], sampled: &[u8]) -> Option<Advantage> {
    let on: Vec<Option<f64>> = adv
        .iter()
        .zip(sampled)
        .filter(|(_, s)| **s == 1)
        .map(|(a, _)| *a)
        .collect();
    match on.first() {
        None => None,
        Some(&Some(a)) if on.iter().all(|&v| v == Some(a)) => Some(Advantage::Sample(a)),
        _ if on.iter().all(Option::is_none) => None,
        _ => Some(Advantage::PerToken(adv.to_vec())),
    }
}

/// Gives each trained row its token-export row: the first unused one whose tokens up to its
/// last loss-mask token are the row's up to the last token of prime-rl's mask (the same step
/// first).
fn join(
    item: &mut Item,
    exports: &[ExportRow],
    by_key: &HashMap<&[u32], Vec<usize>>,
    used: &mut [bool],
    tally: &mut Tally,
) {
    for row in item.rows.iter_mut() {
        let key_len = row
            .meta
            .remove("key_len")
            .and_then(|v| v.as_u64())
            .map(|v| v as usize);
        if row.requests_only {
            continue;
        }
        tally.zero_advantage += row
            .meta
            .get("zero_advantage_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let found = key_len.and_then(|n| {
            let candidates = by_key.get(&row.tokens[..n])?;
            let free = |&&i: &&usize| !used[i];
            candidates
                .iter()
                .filter(free)
                .find(|&&i| exports[i].step == row.step)
                .or_else(|| candidates.iter().find(free))
                .copied()
        });
        let Some(i) = found else {
            tally.unjoined_samples += 1;
            continue;
        };
        used[i] = true;
        let e = &exports[i];
        let p = row.prompt_len;
        let n = row.tokens.len().min(e.row.token_ids.len());
        let resp = p..n;
        let pad = |v: Vec<Option<f64>>| {
            let mut v = v;
            v.resize(row.tokens.len() - p, None);
            v
        };
        let pg: Vec<u8> = e.row.pg_mask()[resp.clone()]
            .iter()
            .map(|&m| u8::from(m))
            .chain(std::iter::repeat(0))
            .take(row.tokens.len() - p)
            .collect();
        if pg != row.loss_mask {
            tally.mask_differs += 1;
            row.loss_mask = pg;
        }
        // Position 0 of a sequence holds no log-prob (the trainer's shift pads it).
        let trainer: Vec<Option<f64>> = resp
            .clone()
            .map(|j| {
                if j == 0 {
                    None
                } else {
                    e.row.trainer_logprobs[j]
                }
            })
            .collect();
        row.trainer = Some(pad(trainer));
        let behaviour: Vec<Option<f64>> = resp
            .clone()
            .zip(&row.sampled)
            .map(|(j, &s)| {
                if s == 1 {
                    e.row.inference_logprobs[j]
                } else {
                    None
                }
            })
            .collect();
        row.behaviour = Some(pad(behaviour));
        let ce: Vec<u8> = resp
            .clone()
            .map(|j| u8::from(weight(&e.row.ce_weights, j).is_some_and(|w| w != 0.0)))
            .chain(std::iter::repeat(0))
            .take(row.tokens.len() - p)
            .collect();
        row.aux = ce.contains(&1).then(|| Aux {
            loss: "echo-ce".into(),
            mask: ce,
        });
        row.meta.insert(
            "token_export".into(),
            json!(format!("{}:{}", e.file.display(), e.line)),
        );
    }
}

/// A token-export row no branch matched, as a row of its own execution.
fn export_row(e: &ExportRow, groups: &mut HashMap<(Option<u64>, Vec<u32>), usize>) -> Row {
    let r = &e.row;
    let step = e.step;
    let rank = e
        .rank
        .map_or_else(|| "rank".to_owned(), |r| format!("rank_{r}"));
    let where_ = match step {
        Some(s) => format!("step_{s}/{rank}"),
        None => rank,
    };
    let execution = format!("{where_}:{}", e.line);
    let prompt_len = r
        .loss_mask
        .iter()
        .position(|&m| m)
        .unwrap_or(r.token_ids.len());
    let next = groups.len() + 1;
    let g = *groups
        .entry((step, r.token_ids[..prompt_len].to_vec()))
        .or_insert(next);
    let group = match step {
        Some(s) => format!("step_{s}:prompt{g}"),
        None => format!("prompt{g}"),
    };
    let resp = prompt_len..r.token_ids.len();
    let sampled: Vec<u8> = r.loss_mask[resp.clone()]
        .iter()
        .map(|&m| u8::from(m))
        .collect();
    let on = |j: usize, v: Option<f64>| if r.loss_mask[j] { v } else { None };
    let adv: Vec<Option<f64>> = resp.clone().map(|j| on(j, r.advantages[j])).collect();
    let ce: Vec<u8> = resp
        .clone()
        .map(|j| u8::from(weight(&r.ce_weights, j).is_some_and(|w| w != 0.0)))
        .collect();
    let mut meta = Map::new();
    meta.insert(
        "token_export".into(),
        json!(format!("{}:{}", e.file.display(), e.line)),
    );
    Row {
        execution,
        sample: "0".into(),
        group: Some(json!(group)),
        step,
        file: e.file.display().to_string(),
        index: e.index,
        tokens: r.token_ids.clone(),
        prompt_len,
        loss_mask: r.pg_mask()[resp.clone()]
            .iter()
            .map(|&m| u8::from(m))
            .collect(),
        behaviour: Some(
            resp.clone()
                .map(|j| on(j, r.inference_logprobs[j]))
                .collect(),
        ),
        trainer: Some(
            resp.clone()
                .map(|j| if j == 0 { None } else { r.trainer_logprobs[j] })
                .collect(),
        ),
        advantage: advantage(&adv, &sampled),
        aux: ce.contains(&1).then(|| Aux {
            loss: "echo-ce".into(),
            mask: ce,
        }),
        sampled,
        meta,
        ..Row::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(parent: Option<usize>, n: usize, sampled: bool) -> Node {
        Node {
            parent,
            message: Message {
                role: if sampled { "assistant" } else { "user" }.into(),
                tool_call_id: None,
            },
            token_ids: (0..n as u32).collect(),
            mask: vec![sampled; n],
            is_content: Vec::new(),
            logprobs: if sampled {
                vec![Some(-0.5); n]
            } else {
                Vec::new()
            },
            advantages: sampled.then(|| vec![Some(1.0); n]),
            reference_logprobs: None,
            trainer_logprobs: None,
            loss_weights: None,
            semantic_parents: Vec::new(),
        }
    }

    fn trace(nodes: Vec<Node>) -> Trace {
        Trace {
            id: "t".into(),
            agent: None,
            nodes,
            rewards: HashMap::new(),
            ok: true,
        }
    }

    /// The rows of a trained episode holding `t` alone.
    fn rows_of(t: Trace) -> Item {
        let ep = Episode {
            id: "e".into(),
            group: None,
            run: None,
            ok: true,
            is_timeout: false,
            traces: vec![t],
        };
        let at = Place {
            file: Path::new("traces.jsonl"),
            line: 1,
            index: 0,
            step: Some(1),
        };
        episode_rows(&ep, &at, true).unwrap()
    }

    #[test]
    fn a_shared_node_trains_in_the_first_branch_only() {
        // 0 user → 1 answer (shared) → {2 user → 3 answer, 4 user → 5 answer}.
        let t = trace(vec![
            node(None, 2, false),
            node(Some(0), 3, true),
            node(Some(1), 1, false),
            node(Some(2), 2, true),
            node(Some(1), 1, false),
            node(Some(4), 4, true),
        ]);
        assert_eq!(branches(&t), [vec![0, 1, 2, 3], vec![0, 1, 4, 5]]);
        let item = rows_of(t);
        let masks: Vec<&[u8]> = item.rows.iter().map(|r| r.loss_mask.as_slice()).collect();
        assert_eq!(masks, [&[1, 1, 1, 0, 1, 1][..], &[0, 0, 0, 0, 1, 1, 1, 1]]);
        // Both branches sample the shared node: the second holds it as context.
        assert_eq!(item.rows[1].sampled[..3], [1, 1, 1]);
        assert_eq!(item.rows[1].trained_tokens(), 4);
    }

    #[test]
    fn zero_advantages_and_loops_are_seen() {
        let mut t = trace(vec![node(None, 2, false), node(Some(0), 3, true)]);
        t.nodes[1].advantages = Some(vec![Some(0.0), None, Some(0.5)]);
        let item = rows_of(t);
        assert_eq!(item.rows[0].loss_mask, [0, 0, 1]);
        let looped = trace(vec![node(Some(1), 1, false), node(Some(0), 1, true)]);
        let err = check_trace(&looped, 0).unwrap_err();
        assert_eq!(err.1, "traces[0].nodes[0].parent");
    }
}
