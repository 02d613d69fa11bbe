//! Admitting one batch in shards, on as many machines as there are shards.
//!
//! Executions are independent (docs/format.md §5); only `B` (§6) and group advantages (§4) depend on
//! other executions. A sharded admission therefore runs in three steps:
//!
//! 1. [`split`] each input file into one part per shard: every line goes to the shard of its
//!    execution ([`shard_of`]) and is left blank in the others, so each part keeps the line
//!    numbers of the file it came from (errors still name `file:line`), and an execution whose
//!    records are spread over several files finds all of them, in order, in its shard's parts.
//!    Headers, and lines that name no execution or cannot be read, go to shard 0.
//! 2. Load each shard's parts (in file order) and [`summarize`] it: per execution, where it
//!    first appears, its group and its reward. [`combine`] the summaries into [`BatchStats`]:
//!    `B` and each group's mean and standard deviation, summed over the executions in the order
//!    one load of all inputs would hold them, so every value is bit for bit the unsharded one.
//! 3. [`process_shard`] each shard with those statistics: its rows are exactly the rows one
//!    `gyre admit` over all inputs writes for those executions.
//!
//! Group members need not share a shard: their statistics travel in [`BatchStats`].

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::{self, BufRead, BufReader, Read};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::admit::Settings;
use super::load::Batch;
use super::route::route;
pub use super::route::shard_of;
use super::score::{self, AdvantageMode};
use crate::process::Results;

/// Lines routed per parallel step.
const SPLIT_CHUNK: usize = 4 << 20;

/// Splits one recording (plain, gzip or zstd, by content) into `shards` parts of plain JSONL:
/// part `k` holds the lines of the executions of shard `k` where they were, and an empty line
/// in place of every other line (see the module docs).
pub fn split(input: impl Read + Send, shards: u32) -> io::Result<Vec<Vec<u8>>> {
    let shards = shards.max(1);
    let mut reader = gyre_format::input::decompress(BufReader::with_capacity(1 << 16, input))?;
    let mut parts = vec![Vec::new(); shards as usize];
    let mut data = Vec::with_capacity(SPLIT_CHUNK + (SPLIT_CHUNK >> 2));
    loop {
        data.clear();
        let mut lines = Vec::new();
        while data.len() < SPLIT_CHUNK {
            let start = data.len();
            if reader.read_until(b'\n', &mut data)? == 0 {
                break;
            }
            let mut end = data.len();
            while end > start && matches!(data[end - 1], b'\n' | b'\r') {
                end -= 1;
            }
            lines.push((start, end));
        }
        if lines.is_empty() {
            return Ok(parts);
        }
        let routes: Vec<Option<u32>> = lines
            .par_iter()
            .map(|&(s, e)| route(&data[s..e], shards))
            .collect();
        for (&(s, e), to) in lines.iter().zip(routes) {
            for (k, part) in parts.iter_mut().enumerate() {
                if to == Some(k as u32) {
                    part.extend_from_slice(&data[s..e]);
                }
                part.push(b'\n');
            }
        }
    }
}

/// What one execution contributes to the batch-wide quantities.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExecutionSummary {
    /// Execution id.
    pub execution: String,
    /// Index of the file where it first appears (in the order the inputs were given).
    pub file: u32,
    /// Line of its first record there.
    pub line: u64,
    /// Its group, as the key groups compare by (the group's JSON text).
    pub group: Option<String>,
    /// Its reward; `None` when excluded (it does not count in `B`).
    pub reward: Option<f64>,
}

/// What one shard contributes: its executions, in the order its load holds them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardSummary {
    /// One entry per execution.
    pub executions: Vec<ExecutionSummary>,
}

/// Scores every execution of a shard and summarises what crosses shard boundaries.
pub fn summarize(batch: &Batch) -> ShardSummary {
    ShardSummary {
        executions: batch
            .executions
            .par_iter()
            .map(|e| ExecutionSummary {
                execution: e.id.clone(),
                file: e.first_seen.file,
                line: e.first_seen.line,
                group: e.group().map(score::group_key),
                reward: score::score(e).reward(),
            })
            .collect(),
    }
}

/// `B` and group statistics of a whole batch, from the summaries of all its shards.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchStats {
    /// `B`: executions that count (scored and dummy), over every shard.
    pub batch_executions: u64,
    /// Per group key: mean and standard deviation of the rewards of its counted executions.
    pub groups: BTreeMap<String, (f64, f64)>,
    /// Every execution id in the order one load of all inputs holds them (the order of the
    /// rows `gyre admit` writes).
    pub order: Vec<String>,
}

/// Sharded admission went wrong: the shards do not fit together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardError(pub String);

impl fmt::Display for ShardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ShardError {}

/// Combines the summaries of every shard of a batch (in any order).
pub fn combine(summaries: &[ShardSummary]) -> Result<BatchStats, ShardError> {
    let mut all: Vec<&ExecutionSummary> = summaries.iter().flat_map(|s| &s.executions).collect();
    all.sort_by_key(|e| (e.file, e.line));
    let mut seen: HashMap<&str, ()> = HashMap::with_capacity(all.len());
    for e in &all {
        if seen.insert(&e.execution, ()).is_some() {
            return Err(ShardError(format!(
                "execution {:?} is in more than one shard: the parts were not split by execution",
                e.execution
            )));
        }
    }
    let groups = score::group_stats(
        all.iter()
            .filter_map(|e| Some((e.group.clone()?, e.reward?))),
    );
    Ok(BatchStats {
        batch_executions: all.iter().filter(|e| e.reward.is_some()).count() as u64,
        groups: groups.into_iter().collect(),
        order: all.iter().map(|e| e.execution.clone()).collect(),
    })
}

/// Scores and admits one shard with the batch-wide `stats` (from [`combine`]): its rows are
/// the rows an unsharded admission of the whole batch gives these executions.
pub fn process_shard(
    batch: &Batch,
    settings: &Settings,
    mode: AdvantageMode,
    stats: &BatchStats,
) -> Result<Results, ShardError> {
    let mut results = crate::process::process(batch, settings, mode);
    if results.batch_executions > stats.batch_executions {
        return Err(ShardError(format!(
            "this shard has {} counted executions but the batch statistics only {}: they come \
             from another batch",
            results.batch_executions, stats.batch_executions
        )));
    }
    results.batch_executions = stats.batch_executions;
    if mode == AdvantageMode::None {
        return Ok(results);
    }
    for ((e, o), adv) in batch
        .executions
        .iter()
        .zip(&results.outcomes)
        .zip(&mut results.advantages)
    {
        let (Some(group), Some(reward)) = (e.group(), o.reward()) else {
            continue;
        };
        let key = score::group_key(group);
        let Some(&stat) = stats.groups.get(&key) else {
            return Err(ShardError(format!(
                "group {key} of execution {:?} is not in the batch statistics: they come from \
                 another batch",
                e.id
            )));
        };
        *adv = Some(score::advantage(reward, stat, mode));
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{Input, LoadOptions, load_inputs};
    use crate::rows::execution_rows;

    fn lines(recs: &[&str]) -> Vec<u8> {
        recs.iter()
            .flat_map(|l| [l.as_bytes(), b"\n"].concat())
            .collect()
    }

    /// Two files; executions spread over both (a delta request in the second file extends one
    /// in the first); groups spread over shards; a dummy, an excluded one, a header.
    fn recording() -> Vec<(String, Vec<u8>)> {
        let a = lines(&[
            r#"{"kind":"header","format":"gyre/1"}"#,
            r#"{"kind":"execution","execution":"a","t":0,"group":"g1"}"#,
            r#"{"kind":"request","execution":"a","id":"r1","input":[1,2],"output":[3,4],"logprobs":[-0.1,-0.2]}"#,
            r#"{"kind":"execution","execution":"b","t":0,"group":"g1"}"#,
            r#"{"kind":"request","execution":"b","id":"r1","input":[1,2],"output":[5],"logprobs":[-0.3]}"#,
            r#"{"kind":"execution","execution":7,"t":0,"group":"g2"}"#,
            r#"{"kind":"request","execution":7,"id":"r1","input":[9],"output":[8],"logprobs":[-0.5]}"#,
            "",
            r#"{"kind":"request","execution":"d","id":"r1","input":[1],"output":[2],"logprobs":[-0.5]}"#,
        ]);
        let b = lines(&[
            r#"{"kind":"request","execution":"a","id":"r2","extends":"r1","input":[6],"output":[7],"logprobs":[-0.7]}"#,
            r#"{"kind":"closure","execution":"a","t":5,"status":"completed","artifact":"p","version":1}"#,
            r#"{"kind":"assessment","execution":"a","artifact":"p","version":1,"status":"valid","score":0.3,"t":6}"#,
            r#"{"kind":"closure","execution":"b","t":5,"status":"completed","artifact":"p","version":1}"#,
            r#"{"kind":"assessment","execution":"b","artifact":"p","version":1,"status":"valid","score":0.9,"t":6}"#,
            r#"{"kind":"closure","execution":"7","t":5,"status":"completed"}"#,
            r#"{"kind":"execution","execution":"c","t":0,"group":"g2"}"#,
            r#"{"kind":"request","execution":"c","id":"r1","input":[9],"output":[8, 8],"logprobs":[-0.5,-0.25]}"#,
            r#"{"kind":"closure","execution":"c","t":5,"status":"completed","artifact":"p","version":2}"#,
            r#"{"kind":"assessment","execution":"c","artifact":"p","version":2,"status":"valid","score":1,"t":6}"#,
        ]);
        vec![("a.jsonl".into(), a), ("b.jsonl".into(), b)]
    }

    fn load(files: &[(String, Vec<u8>)]) -> Batch {
        let inputs: Vec<Input> = files
            .iter()
            .map(|(name, bytes)| Input::Memory { name, bytes })
            .collect();
        load_inputs(&inputs, &LoadOptions::default(), &|_, _| {}).expect("loads")
    }

    fn all_rows(batch: &Batch, results: &Results) -> Vec<crate::rows::Row> {
        (0..batch.executions.len())
            .flat_map(|i| execution_rows(batch, results, i))
            .collect()
    }

    #[test]
    fn sharded_rows_equal_the_unsharded_rows() {
        let files = recording();
        let whole = load(&files);
        for mode in [
            AdvantageMode::DrGrpo,
            AdvantageMode::Grpo,
            AdvantageMode::None,
        ] {
            let settings = Settings::default();
            let expected = all_rows(&whole, &crate::process::process(&whole, &settings, mode));
            for shards in 1..=5 {
                let parts: Vec<Vec<Vec<u8>>> = files
                    .iter()
                    .map(|(_, b)| split(&b[..], shards).unwrap())
                    .collect();
                let batches: Vec<Batch> = (0..shards as usize)
                    .map(|k| {
                        load(
                            &files
                                .iter()
                                .zip(&parts)
                                .map(|((name, _), p)| (name.clone(), p[k].clone()))
                                .collect::<Vec<_>>(),
                        )
                    })
                    .collect();
                let summaries: Vec<ShardSummary> = batches.iter().map(summarize).collect();
                let stats = combine(&summaries).unwrap();
                assert_eq!(
                    stats.batch_executions, 4,
                    "a, b, c, 7 (dummy) count; d is open"
                );
                let mut got = Vec::new();
                for b in &batches {
                    got.extend(all_rows(
                        b,
                        &process_shard(b, &settings, mode, &stats).unwrap(),
                    ));
                }
                let rank: HashMap<&str, usize> = stats
                    .order
                    .iter()
                    .enumerate()
                    .map(|(i, id)| (id.as_str(), i))
                    .collect();
                got.sort_by_key(|r| (rank[r.execution.as_str()], r.draw));
                assert_eq!(got, expected, "{shards} shards, {mode:?}");
            }
        }
    }

    #[test]
    fn parts_keep_line_numbers_and_every_line_lands_once() {
        let files = recording();
        let parts = split(&files[0].1[..], 3).unwrap();
        let original: Vec<&[u8]> = files[0].1.split(|&b| b == b'\n').collect();
        for p in &parts {
            assert_eq!(p.split(|&b| b == b'\n').count(), original.len());
        }
        for (i, line) in original.iter().enumerate().filter(|(_, l)| !l.is_empty()) {
            let holders = parts
                .iter()
                .filter(|p| p.split(|&b| b == b'\n').nth(i) == Some(line))
                .count();
            assert_eq!(holders, 1, "line {}", i + 1);
        }
        // The header goes to shard 0 only.
        assert!(parts[0].starts_with(br#"{"kind":"header""#));
    }

    #[test]
    fn errors_keep_file_and_line_in_their_shard() {
        let bad = lines(&[
            r#"{"kind":"execution","execution":"a","t":0}"#,
            r#"{"kind":"request","execution":"a","id":"r1","input":[1],"output":[2],"logprobs":[]}"#,
            "{not json",
        ]);
        let parts = split(&bad[..], 4).unwrap();
        let mut messages = Vec::new();
        for p in &parts {
            let input = [Input::Memory {
                name: "bad.jsonl",
                bytes: p,
            }];
            if let Err(e) = load_inputs(&input, &LoadOptions::default(), &|_, _| {}) {
                messages.extend(e.diagnostics.iter().map(|d| (d.line, d.to_string())));
            }
        }
        messages.sort();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(
            messages[0]
                .1
                .starts_with("bad.jsonl:2: logprobs has 0 entries")
        );
        assert!(messages[1].1.starts_with("bad.jsonl:3: malformed JSON"));
    }

    #[test]
    fn compressed_inputs_split_like_plain_ones() {
        let files = recording();
        let zst = zstd::encode_all(&files[1].1[..], 3).unwrap();
        assert_eq!(
            split(&zst[..], 3).unwrap(),
            split(&files[1].1[..], 3).unwrap()
        );
    }

    #[test]
    fn stats_from_another_batch_are_refused() {
        let files = recording();
        let whole = load(&files);
        let stats = combine(&[summarize(&whole)]).unwrap();
        let other = BatchStats {
            batch_executions: 1,
            ..stats.clone()
        };
        let settings = Settings::default();
        assert!(process_shard(&whole, &settings, AdvantageMode::DrGrpo, &other).is_err());
        let no_groups = BatchStats {
            groups: BTreeMap::new(),
            ..stats
        };
        let e = process_shard(&whole, &settings, AdvantageMode::DrGrpo, &no_groups).unwrap_err();
        assert!(e.0.contains("group \"g1\""), "{e}");
        let twice = combine(&[summarize(&whole), summarize(&whole)]).unwrap_err();
        assert!(twice.0.contains("more than one shard"), "{twice}");
    }

    #[test]
    fn shard_of_is_stable() {
        // FNV-1a of "a" is 0xaf63dc4c8601ec8c.
        assert_eq!(
            shard_of("a", u32::MAX),
            (0xaf63dc4c8601ec8cu64 % u32::MAX as u64) as u32
        );
        assert_eq!(shard_of("anything", 1), 0);
        assert_eq!(shard_of("x", 0), 0);
    }
}
