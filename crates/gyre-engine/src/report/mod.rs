//! Plain-text and JSON reports of what the engine decided, shared by the command line, the
//! inspector and the bindings: the stats table, the draw log, and the small phrases they share.

mod diff;
mod replay;
mod stats;
mod sweep;

pub use diff::{DiffLines, diff_json, diff_lines, diff_text, weight_text};
pub use replay::{draw_runs, replay_json, replay_text};
pub use stats::stats_table;
pub use sweep::{sweep_json, sweep_text};

use crate::score::Outcome;

pub use gyre_format::note::plural;

pub use crate::admit::{jmax_text, priority_text};

/// `scored, reward 0.5`, `dummy (no assessable work), reward 0`, `excluded: open`.
pub fn outcome_text(o: &Outcome) -> String {
    match o {
        Outcome::Scored { reward, .. } => format!("scored, reward {reward}"),
        Outcome::Dummy => "dummy (no assessable work), reward 0".into(),
        Outcome::Excluded(e) => format!("excluded: {e}"),
    }
}
