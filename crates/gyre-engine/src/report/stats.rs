//! The readable `gyre stats` table.

use super::plural;
use crate::admit::Settings;
use crate::stats::Stats;

/// The readable `gyre stats` table.
pub fn stats_table(s: &Stats, settings: &Settings) -> String {
    let mut t = String::new();
    let mut line = |k: &str, v: String| t.push_str(&format!("{k:<24} {v}\n"));
    line("executions", s.executions.to_string());
    let reasons: Vec<String> = s
        .excluded_by_reason
        .iter()
        .map(|(r, n)| format!("{r}: {n}"))
        .collect();
    line(
        "  scored/dummy/excluded",
        format!(
            "{} / {} / {}{}",
            s.scored,
            s.dummy,
            s.excluded,
            if reasons.is_empty() {
                String::new()
            } else {
                format!("  ({})", reasons.join(", "))
            }
        ),
    );
    line(
        "requests",
        format!(
            "{}  (after closure {}, reconstructed {})",
            s.requests, s.requests_after_closure, s.requests_reconstructed
        ),
    );
    line("raw tokens", s.raw_tokens.to_string());
    line(
        "tree tokens",
        format!("{}  (dedup {:.2}×)", s.tree_tokens, s.dedup_ratio),
    );
    let sources: Vec<String> = s
        .tokens_by_source
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    line("  by provenance", sources.join(", "));
    line("policy tokens", s.policy_tokens.to_string());
    let classes: Vec<String> = s
        .candidates_by_class
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    line(
        "candidates",
        format!("{}  ({})", s.candidates, classes.join(", ")),
    );
    line("admission", settings.said(", "));
    line(
        "  draws / rows",
        format!(
            "{} / {}  (J_max reached in {})",
            s.draws,
            s.rows,
            plural(s.jmax_reached as usize, "execution")
        ),
    );
    line(
        "  targets",
        format!("{}  (left out {})", s.targets, s.left_out_tokens),
    );
    let share = if s.row_tokens == 0 {
        0.0
    } else {
        100.0 * s.targets as f64 / s.row_tokens as f64
    };
    line(
        "  row tokens",
        format!(
            "{}  ({share:.1}% targets; prefix repeat {:.2}×: their prefix tree holds {})",
            s.row_tokens, s.prefix_repeat, s.row_prefix_tokens
        ),
    );
    line(
        "  forward-backward",
        format!(
            "flat rows {} · tree packs {}  ({:.2}× fewer)",
            s.row_tokens,
            s.tree_pack_tokens,
            if s.tree_pack_tokens == 0 {
                1.0
            } else {
                s.row_tokens as f64 / s.tree_pack_tokens as f64
            }
        ),
    );
    line(
        "divergences in outputs",
        s.divergences_in_outputs.to_string(),
    );
    let branches: Vec<String> = s
        .requests_by_branch
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "root" | "continue"))
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    if !branches.is_empty() {
        line("branches", branches.join(", "));
    }
    if let Some(c) = &s.trained {
        line(
            "trained samples",
            format!("{}  (executions {})", c.samples, c.executions),
        );
        line(
            "  trained tokens",
            format!(
                "{}  (with behaviour log-prob {}, trainer log-prob {}; aux {})",
                c.trained_tokens, c.behaviour_logprobs, c.trainer_logprobs, c.aux_tokens
            ),
        );
    }
    if s.warnings > 0 || s.skipped_lines > 0 {
        line(
            "warnings / skipped",
            format!("{} / {}", s.warnings, s.skipped_lines),
        );
    }
    t
}
