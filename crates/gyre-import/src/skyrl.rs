//! `gyre import skyrl`: SkyRL's `dumped_data/global_step_N_training_input.pkl`
//! (`trainer.dump_data_batch`), a pickled `TrainingInputBatch`
//! (`skyrl/backends/skyrl_train/training_batch.py`): its state holds each field as raw bytes
//! with a NumPy dtype and shape (or, for dtypes NumPy lacks, a `torch.save` archive).
//! Sequences are left-padded (`[PAD… prompt response]`), response tensors right-aligned within
//! the response width, and the last `metadata["pad_size"]` rows are padding (copies of row 0
//! with the loss mask zeroed), left out. The dump holds no execution ids: each row is its own
//! execution, and rows of one prompt (`metadata["policy_prompt_boundaries"]`, else equal prompt
//! tokens) form a group.

use std::collections::HashMap;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use eyre::Result;
use serde_json::{Map, Value, json};

use super::dump::field::{Fault, Field};
use super::dump::{self, Advantage, Row, Rows};
use super::error::bad;
use super::sniff::{Fit, Probe, Shape};
use super::write::{LossAgg, Trainer};
use super::{About, Importer, Job, Progress};
use crate::pickle::{Dtype, Global, NoPersistent, Node, Pickle, Tensor, limits, pt};

static ABOUT: About = About {
    name: "skyrl",
    what: "a SkyRL training-input dump",
    summary: "SkyRL dumped_data/global_step_N_training_input.pkl: exact requests and the trainer's rows",
    input: "DUMP",
    input_help: "global_step_N_training_input.pkl files, or a folder of them (dumped_data/ or the export path)",
    many: true,
    directories: true,
    reconstructed: false,
    help: "\
Examples:
  gyre import skyrl exports/dumped_data --out skyrl.jsonl
  gyre import skyrl exports/dumped_data/global_step_3_training_input.pkl --out step3.jsonl

The dump holds no execution ids: each row is its own execution, and rows of one prompt form a
group. Padding rows (metadata pad_size) are left out. Requests carry the rollout log-probs when
the generator returned them; action_log_probs are the trainer's. docs/import.md has the details.",
};

/// The SkyRL importer.
pub struct Skyrl;

/// The header's trainer: what the dump does not record is the framework's default, said in
/// `inferred`.
const LOSS_AGG: LossAgg = LossAgg::TokenMean;

const INFERRED: &[&str] = &[
    "executions: one per row (the dump holds no execution id); rows of one prompt form a \
         group (metadata policy_prompt_boundaries, else equal prompt tokens)",
    "loss_agg: SkyRL's default loss_reduction, token_mean (the dump does not record it)",
    "requests: a row's response is cut at the tokens the policy sampled: its loss mask, and \
         loss-mask-0 tokens with a rollout log-prob other than 0.0 (a response the overlong \
         filter zeroed); the others (environment output) are context",
    "behaviour log-probs: rollout_logprobs' 0.0 on loss-mask-0 tokens is no value",
];

/// One dump file's rows.
pub struct Batch(Vec<Row>);

impl Importer for Skyrl {
    type Item = Batch;

    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn trainer(&self, _inputs: &[PathBuf]) -> Result<Option<Trainer>> {
        Ok(Some(Trainer {
            name: "skyrl".into(),
            version: None,
            loss_agg: LOSS_AGG,
            inferred: INFERRED.iter().map(|s| (*s).to_owned()).collect(),
            meta: None,
        }))
    }

    fn sniff(&self, probe: &Probe) -> Fit {
        match &probe.shape {
            // A pickle: protocol 2 or later starts with PROTO.
            Shape::Binary => match probe.path().map(pickle_start) {
                Some(true) => Fit::Yes,
                _ => Fit::No,
            },
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
        emit: &mut dyn FnMut(&mut Job, Batch) -> Result<()>,
    ) -> Result<()> {
        let files = self.files(inputs);
        let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        let total = files.iter().map(|p| size(p)).sum();
        let mut done = 0;
        for path in &files {
            (job.progress)(Progress::Reading { done, total });
            done += size(path);
            let rows = read_file(path, job)?;
            emit(job, Batch(rows))?;
        }
        Ok(())
    }

    fn records(&self, item: Batch, job: &mut Job) -> Result<()> {
        Rows::write(item.0, job)
    }
}

/// Whether a file starts like a pickle of protocol 2 to 5.
fn pickle_start(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 2];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| head[0] == 0x80 && (2..=5).contains(&head[1]))
}

/// The step of a dump file's name (`global_step_12_training_input.pkl` → 12).
fn step_of(path: &Path) -> Option<u64> {
    path.file_name()?
        .to_str()?
        .strip_prefix("global_step_")?
        .strip_suffix("_training_input.pkl")?
        .parse()
        .ok()
}

/// The dumps in a folder (or in its `dumped_data/`), in step order.
fn dump_files(dir: &Path) -> Vec<PathBuf> {
    let inner = dir.join("dumped_data");
    let dir = if inner.is_dir() {
        inner
    } else {
        dir.to_path_buf()
    };
    let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter_map(|p| Some((step_of(&p)?, p)))
                .filter(|(_, p)| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

/// A field of the batch, decoded.
fn field_tensor(f: &Field) -> Result<Tensor, Fault> {
    let format = f.get("format").map(|v| v.str()).transpose()?;
    match format {
        // `_serialize_tensor`'s fast path (and the legacy format without a `format` key).
        Some("numpy") | None => {
            let dtype_f = f.need("dtype")?;
            let name = dtype_f.str()?;
            let dtype = Dtype::of_numpy(name)
                .ok_or_else(|| dtype_f.fault(format!("unknown tensor dtype `{name}`")))?;
            let shape: Vec<usize> = f
                .need("shape")?
                .ints()?
                .into_iter()
                .map(|n| usize::try_from(n).map_err(|_| f.fault("a negative dimension")))
                .collect::<Result<_, _>>()?;
            let data = f.need("data")?;
            let Node::Bytes(bytes) = data.p.node(data.id) else {
                return Err(data.fault("is not bytes"));
            };
            Tensor::contiguous(dtype, shape, bytes.clone()).map_err(|e| data.fault(e))
        }
        // The fallback for dtypes NumPy lacks (bfloat16): a torch.save archive of the tensor.
        Some("torch") => {
            let data = f.need("data")?;
            let Node::Bytes(bytes) = data.p.node(data.id) else {
                return Err(data.fault("is not bytes"));
            };
            let inner = pt::read(Cursor::new(bytes.as_slice())).map_err(|e| data.fault(e))?;
            match inner.node(inner.root()) {
                Node::Tensor(t) => Ok(t.clone()),
                other => Err(data.fault(format!("holds a {}, not a tensor", other.kind()))),
            }
        }
        Some(other) => Err(f.fault(format!("tensor format `{other}`"))),
    }
}

/// The batch's fields (tensor lists such as `pixel_values` are not read) and metadata.
struct Decoded<'a> {
    fields: HashMap<String, Tensor>,
    metadata: Option<Field<'a>>,
    rows: usize,
}

fn decode(p: &Pickle) -> Result<Decoded<'_>, Fault> {
    let root = Field::root(p);
    let state = match p.node(p.root()) {
        Node::Batch {
            class: Global::TrainingInputBatch,
            state,
        } => Field {
            p,
            id: *state,
            path: String::new(),
        },
        other => {
            return Err(root.fault(format!(
                "the pickle holds a {}, not a SkyRL TrainingInputBatch",
                other.kind()
            )));
        }
    };
    let batch = state.need("batch_dict")?;
    let mut fields = HashMap::new();
    for key in p.keys(batch.id) {
        let Some(f) = batch.get(key) else { continue };
        if f.get("format").and_then(|v| v.str().ok()) == Some("tensor_list") {
            continue;
        }
        fields.insert(key.to_owned(), field_tensor(&f)?);
    }
    let rows = state.need("batch_size")?.int()?;
    Ok(Decoded {
        fields,
        metadata: state.get("metadata"),
        rows: usize::try_from(rows).map_err(|_| state.fault("a negative batch size"))?,
    })
}

/// Reads one dump into its rows (padding left out).
fn read_file(path: &Path, job: &mut Job) -> Result<Vec<Row>> {
    let size = std::fs::metadata(path)
        .map_err(|e| bad(path, 0, super::input::io_reason(&e), None))?
        .len();
    if size > limits::PICKLE_BYTES {
        return Err(bad(
            path,
            0,
            format!("{size} bytes, more than the {} read", limits::PICKLE_BYTES),
            None,
        ));
    }
    let data = std::fs::read(path).map_err(|e| bad(path, 0, super::input::io_reason(&e), None))?;
    let pickle =
        Pickle::read(&data, &mut NoPersistent).map_err(|e| bad(path, 0, e.to_string(), None))?;
    drop(data);
    let decoded = decode(&pickle).map_err(|(m, f)| bad(path, 0, m, Some(&f)))?;
    rows(path, &decoded, job).map_err(|(m, f)| bad(path, 0, m, Some(&f)))
}

fn rows(path: &Path, d: &Decoded, job: &mut Job) -> Result<Vec<Row>, Fault> {
    let fault = |field: &str, m: String| (m, field.to_owned());
    let need = |key: &str| {
        d.fields
            .get(key)
            .ok_or_else(|| fault(&format!("batch_dict.{key}"), "missing".into()))
    };
    let meta_int = |key: &str| -> Result<Option<i64>, Fault> {
        d.metadata
            .as_ref()
            .and_then(|m| m.get(key))
            .map(|v| v.int())
            .transpose()
    };
    let sequences = need("sequences")?;
    let attention = need("attention_mask")?;
    let response_mask = need("response_mask")?;
    let loss_mask = need("loss_mask")?;
    let width = |t: &Tensor, key: &str| -> Result<usize, Fault> {
        match t.shape.as_slice() {
            [b, w] if *b == d.rows => Ok(*w),
            s => Err(fault(
                &format!("batch_dict.{key}"),
                format!("shape {s:?}, not ({}, width)", d.rows),
            )),
        }
    };
    let seq_w = width(sequences, "sequences")?;
    if width(attention, "attention_mask")? != seq_w {
        return Err(fault(
            "batch_dict.attention_mask",
            "not as wide as sequences".into(),
        ));
    }
    let resp_w = width(response_mask, "response_mask")?;
    let optional = [
        "loss_mask",
        "action_log_probs",
        "base_action_log_probs",
        "rollout_logprobs",
        "advantages",
    ];
    for key in optional {
        if let Some(t) = d.fields.get(key) {
            if width(t, key)? != resp_w {
                return Err(fault(
                    &format!("batch_dict.{key}"),
                    format!("{} wide, the response is {resp_w}", t.shape[1]),
                ));
            }
        }
    }
    let pad = match meta_int("pad_size")? {
        Some(n) => usize::try_from(n)
            .ok()
            .filter(|n| *n <= d.rows)
            .ok_or_else(|| fault("metadata.pad_size", format!("{n} for {} rows", d.rows)))?,
        None => {
            job.log.warn_grouped(
                "skyrl-pad",
                format!(
                    "{}: no metadata pad_size: every row is taken as a sample",
                    path.display()
                ),
            );
            0
        }
    };
    if pad > 0 {
        job.log.warn_grouped(
            "skyrl-padding",
            format!(
                "{}: {} left out (metadata pad_size)",
                path.display(),
                gyre_engine::report::plural(pad, "padding row")
            ),
        );
    }
    let step = step_of(path);
    if !d.fields.contains_key("rollout_logprobs") {
        job.log.warn_grouped(
            "skyrl-no-behaviour",
            format!(
                "{}: no rollout_logprobs (the generator returned none): its requests have no \
                 log-probs and are marked meta.reconstructed",
                path.display()
            ),
        );
    }
    let groups = groups(d, pad, [sequences, attention, response_mask])?;
    let name = path.display().to_string();
    let prefix = step.map_or_else(|| name.clone(), |s| s.to_string());
    let mut out = Vec::with_capacity(d.rows - pad);
    for (i, group) in groups.iter().enumerate() {
        let at = |key: &str| format!("batch_dict.{key}[{i}]");
        let row_of = |t: &Tensor| {
            t.row(i)
                .ok_or_else(|| fault(&at("?"), "missing row".into()))
        };
        let seq = dump::token_ids(
            &row_of(sequences)?
                .ints()
                .map_err(|e| fault(&at("sequences"), e))?,
        )
        .map_err(|e| fault(&at("sequences"), e))?;
        let attn = dump::mask(&row_of(attention)?.floats())
            .map_err(|e| fault(&at("attention_mask"), e))?;
        let resp = dump::mask(&row_of(response_mask)?.floats())
            .map_err(|e| fault(&at("response_mask"), e))?;
        let left = attn.iter().take_while(|m| **m == 0).count();
        if attn[left..].contains(&0) {
            return Err(fault(
                &at("attention_mask"),
                "not left-padded (a 0 after the first 1)".into(),
            ));
        }
        let r_len = resp.iter().filter(|m| **m == 1).count();
        if resp[resp_w - r_len..].contains(&0) {
            return Err(fault(&at("response_mask"), "not right-aligned".into()));
        }
        if r_len > seq_w - left {
            return Err(fault(
                &at("response_mask"),
                format!("{r_len} response tokens in {} real ones", seq_w - left),
            ));
        }
        let tail = |t: &Tensor| -> Result<Vec<f64>, Fault> {
            let v = row_of(t)?.floats();
            Ok(v[resp_w - r_len..].to_vec())
        };
        let lm = dump::mask(&tail(loss_mask)?).map_err(|e| fault(&at("loss_mask"), e))?;
        let opt = |key: &str| -> Result<Option<Vec<f64>>, Fault> {
            d.fields.get(key).map(tail).transpose()
        };
        let all = |v: Vec<f64>| v.into_iter().map(Some).collect::<Vec<_>>();
        let rollout = opt("rollout_logprobs")?;
        // What the policy sampled: the loss mask, and the mask-0 tokens that hold a rollout
        // log-prob. SkyRL writes 0.0 on observation tokens and an added EOS, and its overlong
        // filter zeroes a truncated response's mask but keeps its log-probs: those tokens were
        // sampled and not trained, which the audit must see.
        let sampled: Vec<u8> = match &rollout {
            Some(v) => lm
                .iter()
                .zip(v)
                .map(|(&m, &x)| u8::from(m == 1 || x != 0.0))
                .collect(),
            None => lm.clone(),
        };
        let behaviour = rollout.map(|v| dump::behaviour(&v, &sampled));
        let mut meta = Map::new();
        if left > 0 {
            meta.insert("padding".into(), json!(left));
        }
        out.push(Row {
            execution: format!("{prefix}:{i}"),
            sample: i.to_string(),
            group: Some(Value::String(format!("{prefix}:{group}"))),
            step,
            file: name.clone(),
            index: i as u64,
            tokens: seq[left..].to_vec(),
            prompt_len: seq_w - left - r_len,
            sampled,
            loss_mask: lm,
            behaviour,
            trainer: opt("action_log_probs")?.map(all),
            reference: opt("base_action_log_probs")?.map(all),
            advantage: opt("advantages")?.map(|v| Advantage::PerToken(all(v))),
            reward: None,
            meta,
            ..Row::default()
        });
    }
    Ok(out)
}

/// Each sample row's group: `p<k>` for the k-th of `metadata.policy_prompt_boundaries`, else
/// the first row with the same prompt tokens (`row<j>`).
fn groups(d: &Decoded, pad: usize, [seq, attn, resp]: [&Tensor; 3]) -> Result<Vec<String>, Fault> {
    let n = d.rows - pad;
    if let Some(b) = d
        .metadata
        .as_ref()
        .and_then(|m| m.get("policy_prompt_boundaries"))
    {
        let mut out = vec![String::new(); n];
        for (k, pair) in b.items()?.iter().enumerate() {
            let se = pair.ints()?;
            let [s, e] = se.as_slice() else {
                return Err(pair.fault("not a (start, end) pair"));
            };
            let (s, e) = (
                usize::try_from(*s).unwrap_or(usize::MAX),
                usize::try_from(*e).unwrap_or(usize::MAX),
            );
            if s > e || e > n {
                return Err(pair.fault(format!("({s}, {e}) outside the {n} sample rows")));
            }
            for slot in &mut out[s..e] {
                *slot = format!("p{k}");
            }
        }
        if let Some(i) = out.iter().position(String::is_empty) {
            return Err(b.fault(format!("row {i} is in no prompt's boundaries")));
        }
        return Ok(out);
    }
    // Without boundaries: rows sharing the prompt (sequence minus padding and response).
    let mut first: HashMap<Vec<i64>, usize> = HashMap::new();
    (0..n)
        .map(|i| {
            let row = |t: &Tensor| t.row(i).map(|r| r.floats()).unwrap_or_default();
            let ids = seq
                .row(i)
                .map(|r| r.ints().unwrap_or_default())
                .unwrap_or_default();
            let left = row(attn).iter().take_while(|m| **m == 0.0).count();
            let r_len = row(resp).iter().filter(|m| **m == 1.0).count();
            let prompt = ids[left..ids.len().saturating_sub(r_len).max(left)].to_vec();
            Ok(format!("row{}", *first.entry(prompt).or_insert(i)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_come_from_file_names() {
        assert_eq!(
            step_of(Path::new("d/global_step_12_training_input.pkl")),
            Some(12)
        );
        assert_eq!(step_of(Path::new("global_step_x_training_input.pkl")), None);
    }
}
