//! `gyre import slime`: a slime `--dump-details` folder. `rollout_data/{id}.pt` holds a
//! rollout's samples (`torch.save({"rollout_id", "samples": [Sample.to_dict()]})`,
//! `slime/observability/rollout_data_utils.py`); `train_data/{id}.pt` holds what the trainer
//! trained on them (format version 2: `{"format_version", "rollout_id", "samples": [...]}`,
//! `slime/observability/train_data_utils.py`), each train sample naming its rollout sample by
//! `rollout_position`. A sample's `tokens` are prompt + response; `loss_mask` and the log-probs
//! cover the response; `rollout_id` (else `index`) links the samples of one execution.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use eyre::Result;
use serde_json::{Map, Value, json};

use super::dump::field::{Fault, Field};
use super::dump::{self, Advantage, Row, Rows};
use super::error::bad;
use super::sniff::{Fit, Probe, Shape};
use super::write::{LossAgg, Trainer};
use super::{About, Importer, Job, Progress};
use crate::pickle::{Pickle, pt};

static ABOUT: About = About {
    name: "slime",
    what: "a slime --dump-details dump",
    summary: "slime --dump-details rollout and train dumps (.pt): exact requests and the trainer's rows",
    input: "DUMP",
    input_help: "A --dump-details folder (rollout_data/, train_data/), or .pt files from one",
    many: true,
    directories: true,
    reconstructed: false,
    help: "\
Examples:
  gyre import slime /data/dump --out slime.jsonl
  gyre import slime dump/rollout_data/3.pt dump/train_data/3.pt --out step3.jsonl

A rollout dump and the train dump of the same rollout id are read together: the requests
(each run of loss-mask-on response tokens, with its rollout log-probs) come from the rollout
dump, and each train sample becomes a `trained` record with the trainer's mask, log-probs,
reference log-probs and advantages. Evaluation rollouts (eval_<id>.pt) are not training data
and are left out. docs/import.md has the details.",
};

/// The slime importer.
pub struct Slime;

/// The header's trainer: what the dump does not record is the framework's default, said in
/// `inferred`.
const LOSS_AGG: LossAgg = LossAgg::ExecutionMean;

const INFERRED: &[&str] = &[
    "loss_agg: slime's default since 7405851 (May 2026), a token mean per rollout \
         (rollout_mask_sums) averaged over rollouts; the dump does not record \
         --calculate-per-token-loss (token-mean)",
    "requests: a sample's response is cut at the rollout's loss mask; mask-0 tokens (tool \
         output) are context",
    "behaviour log-probs: slime's 0.0 on loss-mask-0 tokens is no value",
    "executions: rollout_id links a rollout's samples; a sample without one is its own \
         execution (by index), as slime's pipeline does",
];

/// One rollout step: its rows, in train-dump order (else rollout-dump order).
pub struct Step(Vec<Row>);

/// The dumps of one file.
enum Dump {
    Rollout(u64, Vec<RolloutSample>),
    Train(u64, Vec<TrainSample>),
}

/// A rollout dump: its file and samples.
type Rollout = (PathBuf, Vec<RolloutSample>);

/// A train dump: its file and samples.
type Train = (PathBuf, Vec<TrainSample>);

/// A `Sample.to_dict()` of a rollout dump.
struct RolloutSample {
    index: Option<i64>,
    group: Option<i64>,
    rollout_id: Option<i64>,
    tokens: Vec<u32>,
    response_length: usize,
    loss_mask: Option<Vec<u8>>,
    logprobs: Option<Vec<f64>>,
    reward: Option<f64>,
    remove: bool,
    meta: Map<String, Value>,
}

/// A sample of a format-2 train dump.
struct TrainSample {
    rollout_position: Option<usize>,
    rollout_id: Option<i64>,
    tokens: Vec<u32>,
    response_length: usize,
    loss_mask: Vec<u8>,
    raw_reward: Option<f64>,
    rollout_logprobs: Option<Vec<f64>>,
    logprobs: Option<Vec<f64>>,
    ref_logprobs: Option<Vec<f64>>,
    advantages: Option<Vec<f64>>,
}

impl Importer for Slime {
    type Item = Step;

    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn trainer(&self, _inputs: &[PathBuf]) -> Result<Option<Trainer>> {
        Ok(Some(Trainer {
            name: "slime".into(),
            version: None,
            loss_agg: LOSS_AGG,
            inferred: INFERRED.iter().map(|s| (*s).to_owned()).collect(),
            meta: None,
        }))
    }

    fn sniff(&self, probe: &Probe) -> Fit {
        match &probe.shape {
            Shape::Zip(names) if names.iter().any(|n| n.ends_with("/data.pkl")) => Fit::Yes,
            // A torch archive cut short: the reader says what is wrong with it.
            Shape::Unreadable(why) if why.starts_with("a zip archive") => Fit::Unknown,
            Shape::Directory { .. } => match probe.path() {
                Some(dir) if !dump_files(dir).is_empty() => Fit::Yes,
                _ => Fit::No,
            },
            _ => Fit::No,
        }
    }

    fn files(&self, inputs: &[PathBuf]) -> Vec<PathBuf> {
        dump::files(inputs, dump_files)
    }

    fn read(
        &self,
        inputs: &[PathBuf],
        job: &mut Job,
        emit: &mut dyn FnMut(&mut Job, Step) -> Result<()>,
    ) -> Result<()> {
        let files = self.files(inputs);
        let mut steps: BTreeMap<u64, (Option<Rollout>, Option<Train>)> = BTreeMap::new();
        let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        let total = files.iter().map(|p| size(p)).sum();
        let mut done = 0;
        for path in files {
            (job.progress)(Progress::Reading { done, total });
            done += size(&path);
            let evaluation = path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("eval_"));
            if evaluation {
                job.log.warn_grouped(
                    "slime-eval",
                    format!(
                        "{}: an evaluation rollout (not training data) is left out",
                        path.display()
                    ),
                );
                continue;
            }
            let dump = read_dump(&path)?;
            let (id, slot) = match dump {
                Dump::Rollout(id, samples) => (id, (Some((path.clone(), samples)), None)),
                Dump::Train(id, samples) => (id, (None, Some((path.clone(), samples)))),
            };
            let entry = steps.entry(id).or_default();
            for (have, new, kind) in [
                (entry.0.is_some() && slot.0.is_some(), &path, "rollout"),
                (entry.1.is_some() && slot.1.is_some(), &path, "train"),
            ] {
                if have {
                    return Err(bad(
                        new,
                        0,
                        format!("a second {kind} dump of rollout {id}"),
                        None,
                    ));
                }
            }
            if slot.0.is_some() {
                entry.0 = slot.0;
            }
            if slot.1.is_some() {
                entry.1 = slot.1;
            }
        }
        for (id, (rollout, train)) in steps {
            let rows = join(id, rollout, train, job)?;
            emit(job, Step(rows))?;
        }
        Ok(())
    }

    fn records(&self, item: Step, job: &mut Job) -> Result<()> {
        Rows::write(item.0, job)
    }
}

/// The `.pt` files of a dump folder (or of its `rollout_data/` or `train_data/` folder), in
/// rollout-id order, rollout dumps first.
fn dump_files(dir: &Path) -> Vec<PathBuf> {
    let list = |d: &Path| -> Vec<PathBuf> {
        let mut v: Vec<(u64, String, PathBuf)> = std::fs::read_dir(d)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "pt") && p.is_file())
                    .map(|p| {
                        let stem = p
                            .file_stem()
                            .map(|s| s.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        (stem.parse().unwrap_or(u64::MAX), stem, p)
                    })
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v.into_iter().map(|(_, _, p)| p).collect()
    };
    let subs: Vec<PathBuf> = ["rollout_data", "train_data"]
        .iter()
        .map(|s| dir.join(s))
        .filter(|d| d.is_dir())
        .collect();
    if subs.is_empty() {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        if matches!(name.as_deref(), Some("rollout_data" | "train_data")) {
            return list(dir);
        }
        return Vec::new();
    }
    subs.iter().flat_map(|d| list(d)).collect()
}

/// Reads one `.pt` file: a rollout or a train dump.
fn read_dump(path: &Path) -> Result<Dump> {
    let file =
        std::fs::File::open(path).map_err(|e| bad(path, 0, super::input::io_reason(&e), None))?;
    let pickle = pt::read(std::io::BufReader::new(file)).map_err(|e| bad(path, 0, e, None))?;
    parse_dump(&pickle).map_err(|(msg, field)| bad(path, 0, msg, Some(&field)))
}

fn parse_dump(p: &Pickle) -> Result<Dump, Fault> {
    let root = Field::root(p);
    let rollout_id = root.need("rollout_id")?;
    let id = u64::try_from(rollout_id.int()?).map_err(|_| rollout_id.fault("is negative"))?;
    let samples = root.need("samples")?.items()?;
    match root.get("format_version") {
        None => samples
            .iter()
            .map(rollout_sample)
            .collect::<Result<_, _>>()
            .map(|s| Dump::Rollout(id, s)),
        Some(v) if v.int()? == 2 => samples
            .iter()
            .map(train_sample)
            .collect::<Result<_, _>>()
            .map(|s| Dump::Train(id, s)),
        Some(v) => Err(v.fault(format!(
            "train dump format version {} (version 2 is read)",
            v.json()
        ))),
    }
}

fn opt_int(f: &Field, key: &str) -> Result<Option<i64>, Fault> {
    f.get(key).map(|v| v.int()).transpose()
}

fn count(f: &Field) -> Result<usize, Fault> {
    usize::try_from(f.int()?).map_err(|_| f.fault("is negative"))
}

fn masks(f: &Field) -> Result<Vec<u8>, Fault> {
    dump::mask(&f.floats()?).map_err(|e| f.fault(e))
}

fn tokens(f: &Field) -> Result<Vec<u32>, Fault> {
    dump::token_ids(&f.ints()?).map_err(|e| f.fault(e))
}

fn rollout_sample(f: &Field) -> Result<RolloutSample, Fault> {
    let tokens_f = f.need("tokens")?;
    let tokens = tokens(&tokens_f)?;
    let response_length_f = f.need("response_length")?;
    let response_length = count(&response_length_f)?;
    if response_length > tokens.len() {
        return Err(response_length_f.fault(format!(
            "{response_length}, longer than the sample's {} tokens",
            tokens.len()
        )));
    }
    let mut meta = Map::new();
    let reward = match f.get("reward") {
        None => None,
        Some(r) => match r.float() {
            Ok(v) => Some(v),
            // A dict of rewards (`--reward-key` picks one): kept as it is.
            Err(_) => {
                meta.insert("reward".into(), r.json());
                None
            }
        },
    };
    for key in ["status", "label", "weight_versions", "metadata"] {
        if let Some(v) = f.get(key) {
            meta.insert(key.into(), v.json());
        }
    }
    Ok(RolloutSample {
        index: opt_int(f, "index")?,
        group: opt_int(f, "group_index")?,
        rollout_id: opt_int(f, "rollout_id")?,
        tokens,
        response_length,
        loss_mask: f.get("loss_mask").map(|m| masks(&m)).transpose()?,
        logprobs: f.get("rollout_log_probs").map(|v| v.floats()).transpose()?,
        reward,
        remove: f.get("remove_sample").map(|v| v.int()).transpose()? == Some(1),
        meta,
    })
}

fn train_sample(f: &Field) -> Result<TrainSample, Fault> {
    let tokens = tokens(&f.need("tokens")?)?;
    let response_length_f = f.need("response_lengths")?;
    let response_length = count(&response_length_f)?;
    if response_length > tokens.len() {
        return Err(response_length_f.fault(format!(
            "{response_length}, longer than the sample's {} tokens",
            tokens.len()
        )));
    }
    let floats = |key: &str| f.get(key).map(|v| v.floats()).transpose();
    Ok(TrainSample {
        rollout_position: f.get("rollout_position").map(|v| count(&v)).transpose()?,
        rollout_id: opt_int(f, "rollout_ids")?,
        tokens,
        response_length,
        loss_mask: masks(&f.need("loss_masks")?)?,
        raw_reward: f.get("local_raw_reward").and_then(|v| v.float().ok()),
        rollout_logprobs: floats("rollout_log_probs")?,
        logprobs: floats("log_probs")?,
        ref_logprobs: floats("ref_log_probs")?,
        advantages: floats("advantages")?,
    })
}

fn all(values: Vec<f64>) -> Vec<Option<f64>> {
    values.into_iter().map(Some).collect()
}

/// The rows of one rollout id: each train sample joined with its rollout sample (by
/// `rollout_position`), or the rollout samples alone when there is no train dump.
fn join(
    id: u64,
    rollout: Option<Rollout>,
    train: Option<Train>,
    job: &mut Job,
) -> Result<Vec<Row>> {
    let (rollout_file, rollout) = match rollout {
        Some((f, r)) => (Some(f), r),
        None => (None, Vec::new()),
    };
    let execution = |r: Option<&RolloutSample>, t: Option<&TrainSample>| -> Option<String> {
        let link = r
            .and_then(|r| r.rollout_id.or(r.index))
            .or_else(|| t.and_then(|t| t.rollout_id))?;
        Some(format!("{id}:{link}"))
    };
    let Some((train_file, train)) = train else {
        let Some(file) = rollout_file else {
            return Ok(Vec::new());
        };
        return rollout
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let exec = execution(Some(r), None).ok_or_else(|| no_link(&file, i))?;
                row(id, &file, i, exec, Some(r), None)
            })
            .collect();
    };
    if rollout_file.is_none() {
        job.log.warn_grouped(
            "slime-train-only",
            format!(
                "{}: no rollout dump of rollout {id} beside it: its requests are cut by the \
                 trainer's loss mask (tokens the trainer masked out become context)",
                train_file.display()
            ),
        );
    }
    train
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let r = match (t.rollout_position, rollout_file.is_some()) {
                (Some(pos), true) => Some(rollout.get(pos).ok_or_else(|| {
                    bad(
                        &train_file,
                        0,
                        format!(
                            "rollout_position {pos}, and the rollout dump holds {} samples",
                            rollout.len()
                        ),
                        Some(&format!("samples[{i}].rollout_position")),
                    )
                })?),
                (None, true) => {
                    return Err(bad(
                        &train_file,
                        0,
                        "no rollout_position: the train sample cannot be matched to its \
                         rollout sample",
                        Some(&format!("samples[{i}]")),
                    ));
                }
                (_, false) => None,
            };
            if let Some(r) = r {
                if r.tokens != t.tokens {
                    return Err(bad(
                        &train_file,
                        0,
                        format!(
                            "the tokens differ from those of rollout sample {} ({} vs {} tokens)",
                            t.rollout_position.unwrap_or_default(),
                            t.tokens.len(),
                            r.tokens.len()
                        ),
                        Some(&format!("samples[{i}].tokens")),
                    ));
                }
            }
            let exec = execution(r, Some(t)).ok_or_else(|| no_link(&train_file, i))?;
            row(id, &train_file, i, exec, r, Some(t))
        })
        .collect()
}

fn no_link(file: &Path, i: usize) -> eyre::Report {
    bad(
        file,
        0,
        "neither rollout_id nor index: the sample's execution is unknown",
        Some(&format!("samples[{i}]")),
    )
}

fn row(
    id: u64,
    file: &Path,
    index: usize,
    execution: String,
    r: Option<&RolloutSample>,
    t: Option<&TrainSample>,
) -> Result<Row> {
    let (tokens, response_length) = match (t, r) {
        (Some(t), _) => (t.tokens.clone(), t.response_length),
        (None, Some(r)) => (r.tokens.clone(), r.response_length),
        (None, None) => (Vec::new(), 0),
    };
    let prompt_len = tokens.len() - response_length;
    let all_on = vec![1u8; response_length];
    // The policy's tokens: the rollout's own mask (slime gives tool output 0); without a
    // rollout dump, the trainer's.
    let sampled = match (r, t) {
        (Some(r), _) => r.loss_mask.clone().unwrap_or_else(|| all_on.clone()),
        (None, Some(t)) => t.loss_mask.clone(),
        (None, None) => Vec::new(),
    };
    // What the trainer's loss ran over: the train dump's mask; else what slime's
    // `_convert_samples_to_train_data` makes of the rollout's (all on when absent, all off for
    // a removed sample).
    let loss_mask = match (t, r) {
        (Some(t), _) => t.loss_mask.clone(),
        (None, Some(r)) if r.remove => vec![0; response_length],
        (None, Some(r)) => r.loss_mask.clone().unwrap_or(all_on),
        (None, None) => Vec::new(),
    };
    let behaviour_values = r
        .and_then(|r| r.logprobs.clone())
        .or_else(|| t.and_then(|t| t.rollout_logprobs.clone()));
    let behaviour = behaviour_values
        .map(|v| {
            if v.len() == sampled.len() {
                Ok(dump::behaviour(&v, &sampled))
            } else {
                Err(bad(
                    file,
                    0,
                    format!(
                        "{} rollout log-probs for a response of {response_length} tokens",
                        v.len()
                    ),
                    Some(&format!("samples[{index}].rollout_log_probs")),
                ))
            }
        })
        .transpose()?;
    let mut meta = r.map(|r| r.meta.clone()).unwrap_or_default();
    if let (Some(r), Some(_)) = (r, t) {
        meta.insert("rollout_index".into(), json!(r.index));
    }
    let row = Row {
        execution,
        sample: match (t, r) {
            (Some(t), _) => t.rollout_position.unwrap_or(index).to_string(),
            _ => index.to_string(),
        },
        group: r.and_then(|r| r.group).map(|g| json!(format!("{id}:{g}"))),
        step: Some(id),
        file: file.display().to_string(),
        index: index as u64,
        tokens,
        prompt_len,
        sampled,
        loss_mask,
        behaviour,
        trainer: t.and_then(|t| t.logprobs.clone()).map(all),
        reference: t.and_then(|t| t.ref_logprobs.clone()).map(all),
        advantage: t
            .and_then(|t| t.advantages.clone())
            .map(|a| Advantage::PerToken(all(a))),
        reward: r
            .and_then(|r| r.reward)
            .or_else(|| t.and_then(|t| t.raw_reward)),
        meta,
        ..Row::default()
    };
    row.check()
        .map_err(|(msg, field)| bad(file, 0, msg, Some(&format!("samples[{index}].{field}"))))?;
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(p: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/import/slime")
            .join(p)
    }

    #[test]
    fn the_dump_folder_lists_rollouts_then_trains_in_id_order() {
        let files = Slime.files(&[fixture("dump")]);
        let names: Vec<String> = files
            .iter()
            .map(|p| {
                let parent = p.parent().and_then(Path::file_name).unwrap_or_default();
                format!(
                    "{}/{}",
                    parent.to_string_lossy(),
                    p.file_name().unwrap_or_default().to_string_lossy()
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                "rollout_data/0.pt",
                "rollout_data/1.pt",
                "train_data/0.pt",
                "train_data/1.pt"
            ]
        );
    }

    #[test]
    fn a_rollout_and_its_train_dump_join_by_position() {
        let Dump::Rollout(0, rollout) = read_dump(&fixture("dump/rollout_data/0.pt")).unwrap()
        else {
            panic!("not rollout 0");
        };
        let Dump::Train(0, train) = read_dump(&fixture("dump/train_data/0.pt")).unwrap() else {
            panic!("not train 0");
        };
        assert_eq!((rollout.len(), train.len()), (5, 5));
        // The multi-turn sample: model turn, tool output (mask 0), model turn.
        let r = &rollout[3];
        assert_eq!(r.rollout_id, Some(2));
        let mask = r.loss_mask.clone().unwrap();
        assert_eq!(mask.iter().filter(|m| **m == 0).count(), 20);
        let t = train
            .iter()
            .find(|t| t.rollout_position == Some(3))
            .unwrap();
        let row = row(0, Path::new("t.pt"), 3, "0:2".into(), Some(r), Some(t)).unwrap();
        assert_eq!(row.segments().len(), 1);
        assert_eq!(row.trained_tokens(), 5);
        let b = row.behaviour.unwrap();
        assert_eq!(b.iter().filter(|v| v.is_some()).count(), 5);
        assert!(row.trainer.unwrap().iter().all(Option::is_some));
    }
}
