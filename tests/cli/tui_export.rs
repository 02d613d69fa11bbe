//! `e` in the inspector writes exactly what `gyre admit` writes.

use std::process::Command;

use crate::tui_common::*;
use gyre_tui::app::{Action, App, Jobs};
use gyre_tui::keys::Command as C;
use gyre_tui::overlay::Overlay;

#[test]
fn export_writes_the_bytes_gyre_admit_writes() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = demo_app(160, 45, true);
    app.cwd = dir.path().to_path_buf();
    // Change the settings first: the export follows what is on screen.
    cmds(&mut app, &[C::SeedUp, C::SeedUp, C::JmaxDown, C::JmaxDown]);
    cmds(&mut app, &[C::Export]);
    assert!(screen(&app).contains("admitted.jsonl"));
    app.step_here(Action::Cmd(C::Enter));
    let path = dir.path().join("admitted.jsonl");
    let written = std::fs::read(&path).expect("export written");
    let msg = app.message.clone().unwrap().text;
    assert!(
        msg.contains("rows") && msg.contains("admitted.jsonl"),
        "{msg}"
    );

    let demo = dir.path().join("example.jsonl");
    std::fs::write(&demo, gyre_engine::demo::RECORDING).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args([
            "admit",
            demo.to_str().unwrap(),
            "--seed",
            "2",
            "--jmax",
            "3",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(written, out.stdout, "TUI export == gyre admit");
    let rows = written.iter().filter(|&&b| b == b'\n').count();
    assert!(msg.starts_with(&format!("exported {rows} rows")), "{msg}");

    // A second export proposes the next free name.
    cmds(&mut app, &[C::Export]);
    assert!(screen(&app).contains("admitted-1.jsonl"));
    app.step_here(Action::Cmd(C::Enter));
    assert!(dir.path().join("admitted-1.jsonl").exists());
    // A name that exists: the prompt offers to overwrite or to take the next free name.
    cmds(&mut app, &[C::Export]);
    app.step_here(Action::ClearField);
    for c in "sub/admitted.jsonl".chars() {
        app.step_here(Action::Input(c));
    }
    // Every Ctrl-W deletes a word: the extension, the name, the directory.
    let field = |app: &App| match &app.overlay {
        Overlay::Export(p) => p.field.text.clone(),
        other => panic!("the export prompt is open, not {other:?}"),
    };
    for after in ["sub/admitted.", "sub/", ""] {
        app.step_here(Action::DeleteWord);
        assert_eq!(field(&app), after);
    }
    app.step_here(Action::ClearField);
    for c in "admitted.jsonl".chars() {
        app.step_here(Action::Input(c));
    }
    app.step_here(Action::Cmd(C::Enter));
    let s = screen(&app);
    assert!(s.contains("exists") && s.contains("overwrite"), "{s}");
    assert!(s.contains("admitted-2.jsonl"), "{s}");
    app.step_here(Action::Input('n'));
    assert!(dir.path().join("admitted-2.jsonl").exists());
    // The new name offered is the one typed, numbered.
    std::fs::write(dir.path().join("run7.jsonl.gz"), "").unwrap();
    cmds(&mut app, &[C::Export]);
    app.step_here(Action::ClearField);
    for c in "run7.jsonl.gz".chars() {
        app.step_here(Action::Input(c));
    }
    app.step_here(Action::Cmd(C::Enter));
    let s = screen(&app);
    assert!(s.contains("n write run7-1.jsonl.gz instead"), "{s}");
    app.step_here(Action::Cmd(C::Escape));
    app.step_here(Action::Cmd(C::Escape));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        written,
        "never overwritten unasked"
    );
    // Overwriting, when asked, writes the current settings' rows.
    cmds(&mut app, &[C::SeedUp, C::Export]);
    app.step_here(Action::ClearField);
    for c in "admitted.jsonl".chars() {
        app.step_here(Action::Input(c));
    }
    app.step_here(Action::Cmd(C::Enter));
    app.step_here(Action::Input('o'));
    assert!(
        app.message.as_ref().unwrap().text.starts_with("exported"),
        "{:?}",
        app.message
    );
    let out = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args([
            "admit",
            demo.to_str().unwrap(),
            "--seed",
            "3",
            "--jmax",
            "3",
        ])
        .output()
        .unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), out.stdout);
}

#[test]
fn export_runs_on_a_worker_and_reports_back_through_step() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = demo_app(160, 45, true);
    app.cwd = dir.path().to_path_buf();
    let (jobs, rx) = Jobs::channel();
    cmds_on(&mut app, &jobs, &[C::Export]);
    step_on(&mut app, &jobs, Action::Cmd(C::Enter));
    let path = dir.path().join("admitted.jsonl");
    assert_eq!(app.exporting, vec![path.clone()]);
    assert!(
        app.message
            .as_ref()
            .unwrap()
            .text
            .starts_with("exporting to"),
        "{:?}",
        app.message
    );
    // A second export while the first is written proposes another name.
    assert_eq!(app.proposed_export(), "admitted-1.jsonl");
    // Quitting waits for the file (the run loop keeps going while `exporting` is not empty).
    cmds_on(&mut app, &jobs, &[C::Quit]);
    assert!(
        app.message
            .as_ref()
            .unwrap()
            .text
            .starts_with("quitting once")
    );
    pump_until(&mut app, &jobs, &rx, |app| app.exporting.is_empty());
    let msg = app.message.clone().unwrap().text;
    assert!(
        msg.starts_with("exported ") && msg.contains("admitted.jsonl"),
        "{msg}"
    );
    assert!(path.exists());
}

#[test]
fn export_never_writes_to_the_screen() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = demo_app(160, 45, true);
    app.cwd = dir.path().to_path_buf();
    cmds(&mut app, &[C::Export]);
    app.step_here(Action::ClearField);
    app.step_here(Action::Input('-'));
    app.step_here(Action::Cmd(C::Enter));
    assert!(
        app.message
            .as_ref()
            .unwrap()
            .text
            .contains("needs a file name"),
        "{:?}",
        app.message
    );
    assert!(app.exporting.is_empty());
}
