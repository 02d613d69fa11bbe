//! The command palette (`:`): the key table's commands by name, commands with an argument,
//! completion, and a number for a path position.

use std::sync::Arc;

use gyre_engine::admit::Settings;
use gyre_engine::load::{LoadOptions, load_bytes};
use gyre_engine::score::AdvantageMode;
use gyre_tui::app::{Action, App};
use gyre_tui::keys::{BINDINGS, Command};
use gyre_tui::overlay::{Overlay, PaletteView};
use gyre_tui::palette::entries;

use crate::common::*;

/// `:` then `text`, then `end` (Enter, Tab…).
fn palette(app: &mut App, text: &str, end: &[Command]) {
    cmds(app, &[Command::Palette]);
    for c in text.chars() {
        app.step_here(Action::Input(c));
    }
    cmds(app, end);
}

fn said(app: &App) -> String {
    app.message
        .as_ref()
        .map(|m| m.text.clone())
        .unwrap_or_default()
}

#[test]
fn it_lists_every_command_of_the_key_table_once() {
    let names: Vec<String> = entries().into_iter().map(|e| e.name).collect();
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    for b in BINDINGS {
        if matches!(b.command, Command::Jump(_) | Command::Palette) {
            continue;
        }
        assert!(
            entries().iter().any(|e| e.command == Some(b.command)),
            "{:?} is not in the palette",
            b.command
        );
    }
}

#[test]
fn jmax_n_re_runs_and_the_change_line_names_it() {
    let mut app = demo_app(120, 40, false);
    palette(&mut app, "jmax 3", &[Command::Enter]);
    assert_eq!(app.overlay, Overlay::None);
    assert_eq!(app.settings.jmax, 3);
    let d = app.data.as_ref().unwrap();
    assert_eq!(d.results.settings.jmax, 3);
    assert!(app.change.as_ref().unwrap().what.contains("J_max 5 → 3"));
    palette(&mut app, "jmax x", &[Command::Enter]);
    assert!(said(&app).contains("is not a count"), "{}", said(&app));
    palette(&mut app, "jmax 3", &[Command::Enter]);
    assert_eq!(said(&app), "jmax is 3 already");
}

#[test]
fn execution_and_request_open_what_they_name() {
    let mut app = demo_app(120, 40, false);
    let d = app.data.as_ref().unwrap();
    let other = (app.sel.exec + 1) % d.batch.executions.len();
    let id = d.batch.executions[other].id.clone();
    let request = d.batch.executions[other].requests[0].id.clone();
    palette(&mut app, &format!("execution {id}"), &[Command::Enter]);
    assert_eq!(app.sel.exec, other);
    palette(&mut app, &format!("request {request}"), &[Command::Enter]);
    assert_eq!(app.sel.request, Some(0));
    assert_eq!(path_request(&app), Some(0));
    palette(&mut app, "execution nope", &[Command::Enter]);
    assert_eq!(said(&app), "no execution \"nope\"");
}

/// `:request` typed while a followed recording is read back to no execution (a file rewritten
/// from the start) says so on Enter: it indexed the selected execution, which no longer
/// existed, and panicked (found by the random sessions on a one-line recording).
#[test]
fn request_on_a_batch_without_executions_is_a_message() {
    let mut app = demo_app(80, 24, false);
    let empty = load_bytes("example.jsonl", b"", &LoadOptions::default()).expect("loads");
    assert!(empty.executions.is_empty());
    let results = gyre_engine::process(&empty, &Settings::default(), AdvantageMode::DrGrpo);
    palette(&mut app, "request r1", &[]);
    app.step_here(Action::Grown(Arc::new(empty), Box::new(results)));
    cmds(&mut app, &[Command::Enter]);
    assert_eq!(said(&app), "no request \"r1\": the batch has no executions");
    // Every palette entry, with an argument of each shape, the same way.
    let args = ["", "1", "r1", "x", "main>sub", "grpo", "first-divergence"];
    for e in entries() {
        for arg in args {
            let mut app = demo_app(80, 24, false);
            let empty = load_bytes("example.jsonl", b"", &LoadOptions::default()).expect("loads");
            let results = gyre_engine::process(&empty, &Settings::default(), AdvantageMode::DrGrpo);
            palette(&mut app, format!("{} {arg}", e.name).trim_end(), &[]);
            app.step_here(Action::Grown(Arc::new(empty), Box::new(results)));
            cmds(&mut app, &[Command::Enter]);
            render(&app);
            assert!(
                app.data.as_ref().unwrap().batch.executions.is_empty(),
                ":{} {arg}",
                e.name
            );
        }
    }
}

#[test]
fn tab_completes_and_a_command_runs_as_its_key_would() {
    let mut app = demo_app(120, 40, false);
    palette(&mut app, "jm", &[Command::FocusNext]);
    assert!(
        matches!(&app.overlay, Overlay::Palette(PaletteView { field, .. }) if field.text == "jmax "),
        "{:?}",
        app.overlay
    );
    cmds(&mut app, &[Command::Escape]);
    palette(&mut app, "seed-up", &[Command::Enter]);
    assert_eq!(app.settings.seed, 1);
    palette(&mut app, "dashboard", &[Command::Enter]);
    assert!(matches!(app.overlay, Overlay::Dashboard(_)));
}

#[test]
fn down_chooses_and_a_name_typed_whole_wins() {
    let mut app = demo_app(120, 40, false);
    // `seed` (with an argument), then `seed-up`, `seed-down` in the key table's order.
    palette(&mut app, "se", &[Command::Down, Command::Down]);
    assert!(screen(&app).contains("▶ seed-down"), "{}", screen(&app));
    cmds(&mut app, &[Command::Up, Command::Enter]);
    assert_eq!(app.settings.seed, 1, "seed-up, chosen, ran");
    // `seed` names an entry exactly: it runs (needing its argument), not the one chosen.
    palette(&mut app, "seed", &[Command::Down, Command::Enter]);
    assert_eq!(app.settings.seed, 1);
    assert!(said(&app).starts_with(":seed needs N"), "{}", said(&app));
}

#[test]
fn a_number_goes_to_that_position_and_a_stranger_says_so() {
    let mut app = demo_app(80, 24, false);
    palette(&mut app, "2", &[Command::Enter]);
    assert_eq!(cursor(&app), 1);
    palette(&mut app, "frob", &[Command::Enter]);
    assert_eq!(said(&app), ":frob: no such command (: alone lists them)");
}

#[test]
fn the_palette_is_whole_at_80_by_24() {
    let mut app = demo_app(80, 24, false);
    palette(&mut app, "", &[]);
    let s = screen(&app);
    assert!(s.contains(": █"), "{s}");
    assert!(s.contains("▶ execution ID"), "{s}");
    assert!(s.contains("Tab completes"), "{s}");
}
