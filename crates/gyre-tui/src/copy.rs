//! What `Y` offers to copy: ids, the segment under the token cursor, and the `gyre` commands
//! that print what is on screen, each behind a letter of the copy menu.

use gyre_engine::admit::Settings;
use gyre_engine::paint::ColorMode;

use super::pane::Ctx;
use super::pane::tokens::PathView;
use super::whatif::DEFAULT_SEEDS;

/// One entry of the copy menu.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyItem {
    /// The letter that copies it.
    pub key: char,
    /// What it is, for the menu and the status line (`execution id`).
    pub what: &'static str,
    /// The text that goes to the clipboard (unsanitised: it is sent base64-encoded).
    pub text: String,
}

/// The menu for the state on screen: only what there is (no request, no path: fewer entries).
/// `path` is the token path on screen, `why_request` the request `y` explains, `inputs` the input as a
/// command line names it and `lens_seeds` the seeds the lens looks through.
pub fn items(
    ctx: &Ctx,
    path: Option<&PathView>,
    why_request: Option<u32>,
    inputs: &[String],
    lens_seeds: u32,
) -> Vec<CopyItem> {
    let exec = ctx.exec();
    let mut out = Vec::new();
    let mut push = |key, what, text: String| out.push(CopyItem { key, what, text });
    push('e', "execution id", exec.id.clone());
    let request = |r: u32| exec.requests.get(r as usize).map(|q| q.id.clone());
    if let Some(id) = ctx.sel.request.and_then(request) {
        push('r', "request id", id);
    }
    if let Some(v) = path {
        let (n, _) = v.index.node_at(v.cursor);
        let node = &exec.tree.nodes[n as usize];
        let ids = &exec.tree.tokens[node.start as usize..(node.start + node.len) as usize];
        push('t', "segment text", ctx.text.decode(ids));
        let list: Vec<String> = ids.iter().map(u32::to_string).collect();
        push('i', "segment ids", format!("[{}]", list.join(", ")));
    }
    // The commands print what the results on screen were made with, not settings still
    // re-running.
    let head = |cmd: &str| {
        let mut words = vec!["gyre".to_string(), cmd.to_string()];
        words.extend(inputs.iter().map(|f| shell_word(f)));
        words.push(format!("--execution {}", shell_word(&exec.id)));
        words
    };
    let settings = settings_flags(&ctx.results.settings);
    if let Some(id) = ctx.sel.request.and_then(request) {
        let mut show = head("show");
        show.push(format!("--request {}", shell_word(&id)));
        show.extend(settings.iter().cloned());
        match ctx.colour {
            // `gyre show` has no pin to compare with.
            ColorMode::Flips => {}
            ColorMode::Lens if lens_seeds != DEFAULT_SEEDS => {
                show.push(format!("--color lens --seeds {}", lens_seeds));
            }
            c => show.push(format!("--color {}", c.name())),
        }
        // `gyre show --draw` counts from 1: at draw 0 (nothing claimed yet) the menu says the
        // command shows the admitted state instead.
        let what = match ctx.sel.step {
            0 => "gyre show at n/n",
            k if k < ctx.draws() => {
                show.push(format!("--draw {k}"));
                "gyre show command"
            }
            _ => "gyre show command",
        };
        push('s', what, show.join(" "));
    }
    if let Some(id) = why_request.and_then(request) {
        let mut why = head("why");
        why.push(format!("--request {}", shell_word(&id)));
        why.extend(settings.iter().cloned());
        push('w', "gyre why command", why.join(" "));
    }
    let mut replay = head("replay");
    replay.extend(settings);
    push('p', "gyre replay command", replay.join(" "));
    out
}

/// The admission flags that differ from the defaults (`--jmax 3`).
fn settings_flags(s: &Settings) -> Vec<String> {
    let default = Settings::default();
    let mut out = Vec::new();
    if s.seed != default.seed {
        out.push(format!("--seed {}", s.seed));
    }
    if s.jmax != default.jmax {
        out.push(format!("--jmax {}", s.jmax));
    }
    if s.priority != default.priority {
        let names: Vec<&str> = s.priority.iter().map(|c| c.name()).collect();
        out.push(format!("--priority {}", names.join(",")));
    }
    out
}

pub use gyre_format::sanitize::shell_word;

/// The status line after a copy: what, how long, and its start.
pub fn said(item: &CopyItem) -> String {
    let chars = item.text.chars().count();
    let lines = item.text.lines().count();
    let first = item.text.lines().next().unwrap_or("");
    let preview: String = first.chars().take(48).collect();
    let cut = preview.chars().count() < chars;
    format!(
        "copied to the clipboard (OSC 52), {}: {}{} ({}{})",
        item.what,
        preview,
        if cut { "…" } else { "" },
        gyre_format::note::plural(chars, "character"),
        if lines > 1 {
            format!(", {lines} lines")
        } else {
            String::new()
        }
    )
}
