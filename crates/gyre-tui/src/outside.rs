//! Open outside (`O`): the path's text, the why output or the exported row, written to a
//! temporary file and shown in `$PAGER` (a lower-case letter) or `$VISUAL` / `$EDITOR` (upper
//! case). The run loop hands the terminal over ([`run`]) and takes it back after.

use std::io::Write;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use gyre_engine::rows;
use gyre_engine::why;

use super::pane::tokens::PathView;
use super::pane::{Ctx, sanitize};

/// One entry of the open-outside menu.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutsideItem {
    /// The letter that opens it in the pager (upper case: the editor).
    pub key: char,
    /// What it is, for the menu and the status line (`why r12`).
    pub what: String,
    /// The temporary file's name ends so (`-r12-why.txt`): editors pick their syntax by it.
    pub suffix: String,
    /// The text, every line through the one sanitiser.
    pub text: String,
}

/// What the run loop opens: an item, in the pager or the editor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outside {
    /// The item.
    pub item: OutsideItem,
    /// `$VISUAL` / `$EDITOR` rather than `$PAGER`.
    pub editor: bool,
}

/// `text` with every line sanitised (a recording's control characters never reach the
/// terminal through the pager), the line breaks kept.
fn clean(text: &str) -> String {
    text.split('\n')
        .map(|l| sanitize(l.strip_suffix('\r').unwrap_or(l)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The menu for the state on screen: only what there is. `path` is the token path on screen,
/// `why_request` the request `y` explains.
pub fn items(ctx: &Ctx, path: Option<&PathView>, why_request: Option<u32>) -> Vec<OutsideItem> {
    let exec = ctx.exec();
    let mut out = Vec::new();
    let file = |s: &str| {
        s.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(40)
            .collect::<String>()
    };
    if let Some(v) = path {
        let id = &exec.requests[v.index.request as usize].id;
        let mut text = ctx.text.decode(&v.index.tokens(exec, 0..v.index.len));
        if !text.ends_with('\n') {
            text.push('\n');
        }
        out.push(OutsideItem {
            key: 't',
            what: format!("the path's text of {}", sanitize(id)),
            suffix: format!("-{}-path.txt", file(id)),
            text: clean(&text),
        });
    }
    if let Some(r) = why_request {
        let i = ctx.sel.exec;
        let w = why::why(
            exec,
            &ctx.results.outcomes[i],
            &ctx.results.admissions[i],
            r,
        );
        let id = &exec.requests[r as usize].id;
        let mut text = w.lines().join("\n");
        text.push('\n');
        out.push(OutsideItem {
            key: 'w',
            what: format!("why {}", sanitize(id)),
            suffix: format!("-{}-why.txt", file(id)),
            text: clean(&text),
        });
    }
    let draw = ctx.sel.step.max(1);
    if let Some(row) = rows::draw_row(ctx.batch, ctx.results, ctx.sel.exec, draw) {
        out.push(OutsideItem {
            key: 'r',
            what: format!("the row of draw {draw} of {}", sanitize(&exec.id)),
            suffix: format!("-{}-draw{draw}-row.json", file(&exec.id)),
            text: row_text(&row),
        });
    }
    out
}

/// A row as JSON with one field per line, each value as `gyre admit` writes it (a token list
/// on one line, not one number per line), strings through the sanitiser.
fn row_text(row: &rows::Row) -> String {
    let mut buf = Vec::new();
    let fields = match serde_json::to_value(row) {
        Ok(serde_json::Value::Object(fields)) => fields,
        _ => {
            gyre_format::sanitize::write_json_compact(&mut buf, row).expect("to memory");
            buf.push(b'\n');
            return String::from_utf8_lossy(&buf).into_owned();
        }
    };
    buf.extend_from_slice(b"{\n");
    let n = fields.len();
    for (k, (name, v)) in fields.iter().enumerate() {
        buf.extend_from_slice(b"  ");
        gyre_format::sanitize::write_json_compact(&mut buf, name).expect("to memory");
        buf.extend_from_slice(b": ");
        gyre_format::sanitize::write_json_compact(&mut buf, v).expect("to memory");
        buf.extend_from_slice(if k + 1 < n { b",\n" } else { b"\n" });
    }
    buf.extend_from_slice(b"}\n");
    String::from_utf8_lossy(&buf).into_owned()
}

/// The program to run: `$PAGER` (default `less`), or `$VISUAL`, then `$EDITOR` (default `vi`),
/// as git picks them; a blank variable counts as unset.
pub fn program(editor: bool, var: &dyn Fn(&str) -> Option<String>) -> (String, &'static str) {
    let set = |k: &'static str| var(k).filter(|v| !v.trim().is_empty()).map(|v| (v, k));
    if editor {
        set("VISUAL")
            .or_else(|| set("EDITOR"))
            .unwrap_or_else(|| ("vi".into(), "EDITOR"))
    } else {
        set("PAGER").unwrap_or_else(|| ("less".into(), "PAGER"))
    }
}

/// Writes the item to a temporary file and runs the program on it through `sh -c` (the
/// variable may hold arguments: `less -S`, `code --wait`), waiting for it; the file is removed
/// after. The caller has given the terminal up. Returns the status line.
pub fn run(o: &Outside) -> String {
    run_with(o, &|k| std::env::var(k).ok())
}

/// [`run`] with the environment read through `env`.
pub fn run_with(o: &Outside, env: &dyn Fn(&str) -> Option<String>) -> String {
    let (prog, var) = program(o.editor, env);
    let shown = sanitize(&prog);
    let file = tempfile::Builder::new()
        .prefix("gyre-")
        .suffix(&o.item.suffix)
        .tempfile();
    let mut file = match file {
        Ok(f) => f,
        Err(e) => return format!("could not write a temporary file for {}: {e}", o.item.what),
    };
    if let Err(e) = file
        .write_all(o.item.text.as_bytes())
        .and_then(|()| file.flush())
    {
        return format!("could not write {}: {e}", file.path().display());
    }
    // The program shares the inspector's process group, so Ctrl-C there interrupts the
    // inspector too: while it runs, SIGINT only sets a flag here (git does the same for its
    // pager).
    let interrupted = Arc::new(AtomicBool::new(false));
    let guard = signal_hook::flag::register(signal_hook::consts::SIGINT, interrupted).ok();
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("{prog} \"$1\""))
        .arg("gyre")
        .arg(file.path())
        .status();
    if let Some(id) = guard {
        signal_hook::low_level::unregister(id);
    }
    let lines = o.item.text.lines().count();
    match status {
        Ok(s) if s.success() => {
            let edited = if o.editor {
                " (a temporary copy: edits are not read back)"
            } else {
                ""
            };
            format!(
                "back from ${var} ({shown}): {}, {}{edited}",
                o.item.what,
                gyre_format::note::plural(lines, "line")
            )
        }
        // 127: the shell found no such program.
        Ok(s) if s.code() == Some(127) => {
            format!("${var} ({shown}) was not found; set {var} to a program that takes a file name")
        }
        Ok(s) => format!("${var} ({shown}) ended with {s} on {}", o.item.what),
        Err(e) => format!("could not run sh for ${var} ({shown}): {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_is_chosen_as_git_does() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(program(false, &env(&[])), ("less".into(), "PAGER"));
        assert_eq!(
            program(false, &env(&[("PAGER", "most -s")])),
            ("most -s".into(), "PAGER")
        );
        assert_eq!(
            program(false, &env(&[("PAGER", "  ")])),
            ("less".into(), "PAGER")
        );
        assert_eq!(program(true, &env(&[])), ("vi".into(), "EDITOR"));
        assert_eq!(
            program(true, &env(&[("EDITOR", "nano"), ("VISUAL", "code --wait")])),
            ("code --wait".into(), "VISUAL")
        );
        assert_eq!(
            program(true, &env(&[("EDITOR", "nano")])),
            ("nano".into(), "EDITOR")
        );
    }

    #[test]
    fn control_characters_never_reach_the_pager() {
        let t = clean("a\u{1b}]52;c;x\u{7}b\r\nnext\tline\n");
        assert!(!t.chars().any(|c| c.is_control() && c != '\n'), "{t:?}");
        assert_eq!(t.lines().count(), 2);
        assert!(t.starts_with("a␛]52;c;x␇b\n"), "{t:?}");
    }
}
