//! Undo and redo of settings changes (`Ctrl-z`, `Ctrl-y`).

use gyre_tui::app::App;
use gyre_tui::keys::Command;

use crate::common::*;

fn said(app: &App) -> String {
    app.message
        .as_ref()
        .map(|m| m.text.clone())
        .unwrap_or_default()
}

fn shown_jmax(app: &App) -> u32 {
    app.data.as_ref().unwrap().results.settings.jmax
}

#[test]
fn undo_steps_back_through_the_changes_and_redo_forward() {
    let mut app = demo_app(120, 40, false);
    cmds(
        &mut app,
        &[Command::JmaxUp, Command::JmaxUp, Command::SeedUp],
    );
    cmds(&mut app, &[Command::Undo]);
    assert_eq!((app.settings.seed, shown_jmax(&app)), (0, 7));
    assert_eq!(
        said(&app),
        "undo: seed 1 → 0 (2 more to undo · Ctrl-y redoes)"
    );
    cmds(&mut app, &[Command::Undo, Command::Undo]);
    assert_eq!(shown_jmax(&app), 5);
    assert!(app.change.as_ref().unwrap().what.contains("J_max 6 → 5"));
    cmds(&mut app, &[Command::Undo]);
    assert_eq!(
        said(&app),
        "nothing to undo: no settings change before this one"
    );
    cmds(&mut app, &[Command::Redo]);
    assert_eq!(shown_jmax(&app), 6);
    assert_eq!(
        said(&app),
        "redo: J_max 5 → 6 (2 more to redo · Ctrl-z undoes)"
    );
}

#[test]
fn a_new_change_after_an_undo_drops_what_redo_would_bring_back() {
    let mut app = demo_app(120, 40, false);
    cmds(
        &mut app,
        &[Command::JmaxUp, Command::Undo, Command::Advantage],
    );
    cmds(&mut app, &[Command::Redo]);
    assert_eq!(said(&app), "nothing to redo");
    assert_eq!(shown_jmax(&app), 5);
    cmds(&mut app, &[Command::Undo]);
    let d = app.data.as_ref().unwrap();
    assert_eq!(
        d.results.advantage_mode,
        gyre_engine::score::AdvantageMode::DrGrpo
    );
}

#[test]
fn the_palette_and_the_priority_editor_are_undone_too() {
    let mut app = demo_app(120, 40, false);
    cmds(&mut app, &[Command::Palette]);
    for c in "jmax 2".chars() {
        app.step_here(gyre_tui::app::Action::Input(c));
    }
    cmds(
        &mut app,
        &[Command::Enter, Command::Priority, Command::Undo],
    );
    assert_eq!(
        app.settings.priority,
        gyre_engine::admit::Settings::default().priority
    );
    cmds(&mut app, &[Command::Undo]);
    assert_eq!(shown_jmax(&app), 5);
}
