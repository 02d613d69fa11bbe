//! The draw log of one execution, as `gyre replay` prints it (text and JSON).

use serde_json::json;

use super::{outcome_text, plural};
use crate::admit::Stop;
use crate::load::Batch;
use crate::process::Results;
use crate::rows;
use crate::score::{self, Outcome};
use crate::why::prob_text;
use gyre_format::sanitize;

/// Target runs of every draw of execution `i`, merged like the export's `targets`.
pub fn draw_runs(batch: &Batch, results: &Results, i: usize) -> Vec<Vec<rows::TargetRun>> {
    let (exec, adm) = (&batch.executions[i], &results.admissions[i]);
    (1..=adm.draws.len() as u32)
        .map(|k| rows::draw_targets(exec, adm, k))
        .collect()
}

/// The readable draw log of execution `i` (ids made safe for a terminal).
pub fn replay_text(batch: &Batch, results: &Results, i: usize) -> String {
    let exec = &batch.executions[i];
    let adm = &results.admissions[i];
    let outcome = &results.outcomes[i];
    let s = &results.settings;
    let mut t = format!(
        "execution {} · {} · {} · {s}\n",
        sanitize(&exec.id),
        outcome_text(outcome),
        plural(adm.candidates.len(), "candidate"),
    );
    let n = adm.draws.len();
    let runs_of = draw_runs(batch, results, i);
    for (k, d) in adm.draws.iter().enumerate() {
        t.push_str(&format!(
            "draw {}/{n}  class {}  ({} with weight left, total {})\n",
            k + 1,
            d.class,
            plural(d.candidates.len(), "candidate"),
            d.total
        ));
        t.push_str(&format!(
            "  random {} mod {} = {}{}\n",
            d.random,
            d.total,
            d.point,
            if d.rejected > 0 {
                format!(
                    "  ({} earlier values rejected against modulo bias)",
                    d.rejected
                )
            } else {
                String::new()
            }
        ));
        let slice_w = d
            .candidates
            .iter()
            .map(|w| format!("[{}, {})", w.from, w.to()).len())
            .max()
            .unwrap_or(0);
        for w in &d.candidates {
            let r = &exec.requests[w.request as usize];
            t.push_str(&format!(
                "  {} {:<12} w={:>8}  p={:<7} {:<slice_w$}{}\n",
                if w.request == d.chosen { "●" } else { "○" },
                sanitize(&r.id),
                w.weight,
                prob_text(d.probability(w)),
                format!("[{}, {})", w.from, w.to()),
                if w.request == d.chosen {
                    "  ◀ chosen"
                } else {
                    ""
                }
            ));
        }
        let runs: Vec<String> = runs_of[k]
            .iter()
            .map(|r| {
                format!(
                    "{}[{}..{}]@{}",
                    sanitize(&r.request),
                    r.offset,
                    r.offset + r.len,
                    r.pos
                )
            })
            .collect();
        t.push_str(&format!(
            "  fixed {} targets on a {}-token path: {}\n",
            d.target_tokens,
            d.path_tokens,
            runs.join(" ")
        ));
    }
    let stop = match adm.stop {
        Stop::JmaxReached => "J_max reached".to_string(),
        Stop::Exhausted => "no candidate has unclaimed tokens left".to_string(),
        Stop::NotDrawn => match outcome {
            Outcome::Dummy => "dummy: one zero-reward placeholder, no draws".to_string(),
            _ => "excluded: nothing admitted".to_string(),
        },
    };
    let l = adm.targets();
    t.push_str(&format!(
        "stopped: {stop} · L_i = {l} · weight {} · B = {}\n",
        crate::loss::target_weight(l),
        results.batch_executions
    ));
    t
}

/// The draw log of execution `i` as JSON.
pub fn replay_json(batch: &Batch, results: &Results, i: usize) -> serde_json::Value {
    let exec = &batch.executions[i];
    let adm = &results.admissions[i];
    let outcome = &results.outcomes[i];
    let id = |r: u32| exec.requests[r as usize].id.as_str();
    let views = score::assessment_views(exec, outcome);
    let runs_of = draw_runs(batch, results, i);
    json!({
        "execution": exec.id,
        "status": outcome.label(),
        "reason": match outcome { Outcome::Excluded(e) => Some(e.to_string()), _ => None },
        "reward": outcome.reward(),
        "seed": results.settings.seed,
        "jmax": results.settings.jmax,
        "priority": results.settings.priority.iter().map(|c| c.name()).collect::<Vec<_>>(),
        "candidates": adm.candidates.iter().map(|c| json!({"request": id(c.request), "class": c.class.name()})).collect::<Vec<_>>(),
        "draws": adm.draws.iter().enumerate().map(|(k, d)| json!({
            "draw": k + 1,
            "class": d.class.name(),
            "total": d.total,
            "random": d.random,
            "point": d.point,
            "rejected": d.rejected,
            "candidates": d.candidates.iter().map(|w| json!({
                "request": id(w.request), "weight": w.weight, "p": d.probability(w),
            })).collect::<Vec<_>>(),
            // Each candidate's slice of [0, total), in the order of `candidates`.
            "slices": d.candidates.iter().map(|w| [w.from, w.to()]).collect::<Vec<_>>(),
            "chosen": id(d.chosen),
            "target_tokens": d.target_tokens,
            "path_tokens": d.path_tokens,
            "targets": runs_of[k],
        })).collect::<Vec<_>>(),
        "stop": match adm.stop { Stop::JmaxReached => "jmax", Stop::Exhausted => "exhausted", Stop::NotDrawn => "not-drawn" },
        "exec_targets": adm.targets(),
        "assessments": exec.assessments.iter().zip(&views).map(|(a, v)| json!({
            "line": a.at.line, "artifact": a.record.artifact, "version": a.record.version,
            "status": if a.record.valid { "valid" } else { "failed" }, "score": a.record.score,
            "t": a.record.t, "in_budget": v.in_budget, "matches_closure": v.matches_closure,
            "is_reward": v.is_reward,
        })).collect::<Vec<_>>(),
    })
}
