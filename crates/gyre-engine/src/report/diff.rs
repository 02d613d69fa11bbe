//! `gyre diff` as text and JSON.

use serde_json::{Value, json};

use super::plural;
use crate::diff::{Diff, ExecutionDiff, Flip};

fn delta(a: u64, b: u64) -> String {
    let d = b as i128 - a as i128;
    if d == 0 {
        format!("{a}")
    } else {
        format!("{a} → {b} ({d:+})")
    }
}

/// `1/L_i` with four significant digits: how every report (and the inspector) spells a weight.
pub fn weight_text(w: f64) -> String {
    if w == 0.0 {
        "0".into()
    } else if w >= 1e-3 {
        format!("{w:.4}")
    } else {
        format!("{w:.3e}")
    }
}

fn flip_text(f: &Flip) -> String {
    format!(
        "{}{}[{}..{}]",
        if f.to_target { "+" } else { "−" },
        gyre_format::sanitize(&f.request),
        f.offset,
        f.offset + f.len
    )
}

fn status(s: Option<&str>) -> &str {
    s.unwrap_or("absent")
}

/// The readable `gyre diff` in pieces: the settings and batch lines, then one table row per
/// execution that changed with its index in [`Diff::executions`] (the table header first, at
/// index `None`), then a closing note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffLines {
    /// `A: …`, `B: …`, the batch totals.
    pub head: Vec<String>,
    /// The table: its header (`None`), then a row per changed execution.
    pub table: Vec<(Option<usize>, String)>,
    /// `(3 executions unchanged)` or `no execution changed (…)`.
    pub tail: Option<String>,
}

/// `gyre diff`'s text, in pieces (see [`DiffLines`]).
pub fn diff_lines(d: &Diff, a: &str, b: &str) -> DiffLines {
    let to_target = d.total(|e| e.flips_to_target);
    let to_left_out = d.total(|e| e.flips_to_left_out);
    let head = vec![
        format!("A: {a}"),
        format!("B: {b}"),
        format!(
            "batch: rows {} · targets {} · B {} · flips {} tokens (+{to_target} become targets, −{to_left_out} left out) · {}",
            delta(d.total(|e| e.rows_a), d.total(|e| e.rows_b)),
            delta(d.total(|e| e.targets_a), d.total(|e| e.targets_b)),
            delta(d.batch_executions_a, d.batch_executions_b),
            to_target + to_left_out,
            plural(d.status_changes(), "status change"),
        ),
    ];
    let changed: Vec<(usize, &ExecutionDiff)> = d
        .executions
        .iter()
        .enumerate()
        .filter(|(_, e)| e.changed())
        .collect();
    let same = d.executions.len() - changed.len();
    if changed.is_empty() {
        return DiffLines {
            head,
            table: Vec::new(),
            tail: Some(format!(
                "no execution changed ({} compared)",
                d.executions.len()
            )),
        };
    }
    let rows: Vec<[String; 6]> = changed
        .iter()
        .map(|(_, e)| {
            let st = if e.status_a == e.status_b {
                status(e.status_a).to_owned()
            } else {
                format!("{} → {}", status(e.status_a), status(e.status_b))
            };
            let weight = if e.weight_a == e.weight_b {
                weight_text(e.weight_a)
            } else {
                format!("{} → {}", weight_text(e.weight_a), weight_text(e.weight_b))
            };
            let mut flips: Vec<String> = e.first_flips.iter().map(flip_text).collect();
            let shown: u64 = e.first_flips.iter().map(|f| f.len as u64).sum();
            if shown < e.flips() {
                flips.push("…".into());
            }
            [
                gyre_format::sanitize(&e.execution).into_owned(),
                st,
                delta(e.rows_a, e.rows_b),
                delta(e.targets_a, e.targets_b),
                weight,
                if e.flips() == 0 {
                    "-".into()
                } else {
                    format!(
                        "+{} −{}  {}",
                        e.flips_to_target,
                        e.flips_to_left_out,
                        flips.join(" ")
                    )
                },
            ]
        })
        .collect();
    let header = [
        "execution",
        "status",
        "rows",
        "L_i",
        "weight 1/L_i",
        "flips",
    ];
    let widths: Vec<usize> = (0..5)
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain([header[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: [&str; 6]| {
        let mut l = String::new();
        for (c, cell) in cells.iter().enumerate() {
            if c < 5 {
                l.push_str(&format!("{cell:<w$}  ", w = widths[c]));
            } else {
                l.push_str(cell);
            }
        }
        l.trim_end().to_owned()
    };
    let mut table = vec![(None, line(header))];
    for ((i, _), r) in changed.iter().zip(&rows) {
        table.push((Some(*i), line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]])));
    }
    DiffLines {
        head,
        table,
        tail: (same > 0).then(|| format!("({} unchanged)", plural(same, "execution"))),
    }
}

/// The readable `gyre diff`: batch totals, then one line per execution that changed.
pub fn diff_text(d: &Diff, a: &str, b: &str) -> String {
    let l = diff_lines(d, a, b);
    let mut t = String::new();
    for h in &l.head {
        t.push_str(h);
        t.push('\n');
    }
    if !l.table.is_empty() {
        t.push('\n');
    }
    for (_, row) in &l.table {
        t.push_str(row);
        t.push('\n');
    }
    if let Some(tail) = &l.tail {
        t.push_str(tail);
        t.push('\n');
    }
    t
}

/// `gyre diff --json`.
pub fn diff_json(d: &Diff, a: Value, b: Value) -> Value {
    json!({
        "a": a,
        "b": b,
        "totals": {
            "rows_a": d.total(|e| e.rows_a),
            "rows_b": d.total(|e| e.rows_b),
            "targets_a": d.total(|e| e.targets_a),
            "targets_b": d.total(|e| e.targets_b),
            "batch_executions_a": d.batch_executions_a,
            "batch_executions_b": d.batch_executions_b,
            "flips": d.total(ExecutionDiff::flips),
            "flips_to_target": d.total(|e| e.flips_to_target),
            "flips_to_left_out": d.total(|e| e.flips_to_left_out),
            "status_changes": d.status_changes(),
            "executions_changed": d.executions.iter().filter(|e| e.changed()).count(),
        },
        "executions": d.executions.iter().map(|e| {
            let mut v = serde_json::to_value(e).expect("serialisable");
            v["flips"] = json!(e.flips());
            v["delta_targets"] = json!(e.targets_b as i128 - e.targets_a as i128);
            v["delta_rows"] = json!(e.rows_b as i128 - e.rows_a as i128);
            v["delta_weight"] = json!(e.weight_b - e.weight_a);
            v
        }).collect::<Vec<_>>(),
    })
}
