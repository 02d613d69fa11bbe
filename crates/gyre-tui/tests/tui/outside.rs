//! `O`: the open-outside menu hands the run loop what to show in `$PAGER` / `$EDITOR`; its
//! texts are those the CLI prints.

use gyre_engine::rows;
use gyre_engine::why;
use gyre_tui::app::{Action, App};
use gyre_tui::keys::Command;
use gyre_tui::outside::{Outside, OutsideItem, run_with};
use gyre_tui::overlay::Overlay;

use crate::common::*;

fn open(app: &mut App, key: char) -> Outside {
    cmds(app, &[Command::Outside]);
    assert!(
        matches!(app.overlay, Overlay::Outside(_)),
        "{:?}",
        app.overlay
    );
    app.step_here(Action::Input(key));
    assert_eq!(app.overlay, Overlay::None);
    app.outside.take().expect("something to open")
}

#[test]
fn w_opens_the_why_output_as_gyre_why_prints_it_in_the_pager() {
    let mut app = demo_app(120, 40, false);
    let r = app.why_request().unwrap();
    let o = open(&mut app, 'w');
    assert!(!o.editor);
    let d = app.data.as_ref().unwrap();
    let i = app.sel.exec;
    let e = &d.batch.executions[i];
    let w = why::why(e, &d.results.outcomes[i], &d.results.admissions[i], r);
    let want: String = w.lines().iter().map(|l| format!("{l}\n")).collect();
    assert_eq!(o.item.text, want);
    assert_eq!(o.item.what, format!("why {}", e.requests[r as usize].id));
}

#[test]
fn upper_case_opens_in_the_editor_and_r_is_the_exported_row() {
    let mut app = demo_app(120, 40, false);
    cmds(&mut app, &[Command::DrawFirst, Command::DrawNext]);
    let o = open(&mut app, 'R');
    assert!(o.editor);
    let d = app.data.as_ref().unwrap();
    let row = rows::draw_row(&d.batch, &d.results, app.sel.exec, 1).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&o.item.text).unwrap();
    assert_eq!(parsed, serde_json::to_value(&row).unwrap());
    // One field per line, the token list on one line.
    assert_eq!(
        o.item.text.lines().count(),
        serde_json::to_value(&row)
            .unwrap()
            .as_object()
            .unwrap()
            .len()
            + 2
    );
}

#[test]
fn t_is_the_whole_path_decoded() {
    let mut app = demo_app(120, 40, false);
    let o = open(&mut app, 't');
    let v = app.path().unwrap();
    let e = &app.data.as_ref().unwrap().batch.executions[app.sel.exec];
    let text = app.text.decode(&v.index.tokens(e, 0..v.index.len));
    // Line for line the decoded path, sanitised (the demo's text holds no control characters
    // but line breaks).
    assert_eq!(o.item.text.trim_end(), text.trim_end());
}

#[test]
fn a_letter_that_opens_nothing_says_which_do() {
    let mut app = demo_app(120, 40, false);
    cmds(&mut app, &[Command::Outside]);
    app.step_here(Action::Input('x'));
    assert!(matches!(app.overlay, Overlay::Outside(_)));
    let m = &app.message.as_ref().unwrap().text;
    assert!(m.starts_with("'x' opens nothing: one of twr"), "{m}");
    assert!(app.outside.is_none());
}

/// `run` hands the file to the program named by the variable (through `sh -c`, so it may hold
/// arguments) and says how it went.
#[test]
fn run_uses_the_pager_variable_and_reports_a_missing_program() {
    let dir = tempfile::tempdir().unwrap();
    let item = OutsideItem {
        key: 'w',
        what: "why r1".into(),
        suffix: "-r1-why.txt".into(),
        text: "line one\nline two\n".into(),
    };
    let o = Outside {
        item: item.clone(),
        editor: false,
    };
    let pager = format!("cp -t {}", dir.path().display());
    let said = run_with(&o, &|k| (k == "PAGER").then(|| pager.clone()));
    assert!(said.starts_with("back from $PAGER (cp -t "), "{said}");
    assert!(said.ends_with("why r1, 2 lines"), "{said}");
    let copied: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(copied.len(), 1);
    let path = copied[0].as_ref().unwrap().path();
    assert!(path.to_string_lossy().ends_with("-r1-why.txt"), "{path:?}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), item.text);
    let said = run_with(&o, &|k| {
        (k == "PAGER").then(|| "gyre-no-such-pager-anywhere".to_string())
    });
    assert!(said.contains("was not found; set PAGER"), "{said}");
    let said = run_with(&Outside { item, editor: true }, &|k| {
        (k == "EDITOR").then(|| "false".to_string())
    });
    assert!(said.starts_with("$EDITOR (false) ended with"), "{said}");
}
