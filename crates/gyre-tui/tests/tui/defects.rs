//! Defects found using the inspector for real work (issue 22), each pinned: the highlighted
//! candidate `y` explains, links followed from a zoomed pane, every pane reachable at 80×24,
//! the status line while the tokenizer loads, the search field, the header's file name.

use gyre_text::TokenText;
use gyre_tui::app::{Action, App};
use gyre_tui::keys::Command;
use gyre_tui::overlay::Overlay;
use gyre_tui::pane::Pane;

use crate::common::*;

/// Focuses the replay pane and moves its highlight down to a candidate other than the request
/// whose path is shown: that candidate's request.
fn highlight_another_candidate(app: &mut App) -> u32 {
    cmds(app, &[Command::Jump(3), Command::DrawFirst]);
    for _ in 0..20 {
        let r = app.ctx().and_then(|ctx| app.replay.selected_request(&ctx));
        if let Some(r) = r.filter(|&r| Some(r) != app.sel.request) {
            return r;
        }
        cmds(app, &[Command::Down]);
    }
    panic!("the replay pane lists another candidate");
}

#[test]
fn why_explains_the_candidate_highlighted_in_the_replay_pane() {
    let mut app = demo_app(160, 45, false);
    let r = highlight_another_candidate(&mut app);
    cmds(&mut app, &[Command::Why]);
    assert!(
        matches!(app.overlay, Overlay::Why { request, .. } if request == r),
        "{:?}, highlighted r{r}",
        app.overlay
    );
}

#[test]
fn a_link_followed_in_a_zoomed_pane_shows_where_it_leads() {
    let mut app = demo_app(120, 40, false);
    let r = highlight_another_candidate(&mut app);
    cmds(&mut app, &[Command::Zoom]);
    assert!(app.zoom);
    cmds(&mut app, &[Command::Enter]);
    assert!(!app.zoom, "the zoom gives way");
    assert_eq!(app.focus, Pane::Tokens);
    assert_eq!(app.sel.request, Some(r));
    assert_eq!(path_request(&app), Some(r));
}

#[test]
fn every_pane_is_reachable_at_80_by_24() {
    let mut app = demo_app(80, 24, false);
    for n in 1..=6u8 {
        cmds(&mut app, &[Command::Jump(n)]);
        let p = Pane::numbered(n).unwrap();
        assert_eq!(app.focus, p, "key {n}");
        assert!(p.area(&app.areas()).width > 0, "pane {n} on screen");
        let _ = screen(&app);
        if app.zoom {
            cmds(&mut app, &[Command::Zoom]);
        }
    }
    // The detail pane, zoomed, shows the selected request.
    cmds(&mut app, &[Command::Jump(6)]);
    let detail = area_text(&app, app.areas().detail);
    let id = app.ctx().unwrap().id(app.sel.request.unwrap());
    assert!(detail.contains(&id), "{detail}");
}

#[test]
fn the_status_line_says_token_text_is_coming() {
    let mut app = demo_app(120, 40, false);
    app.step(Action::TextLoading("Qwen/Qwen3-0.6B".into()));
    let status = area_text(&app, app.areas().status);
    assert!(
        status.contains("ids shown: token text once Qwen/Qwen3-0.6B loads…"),
        "{status}"
    );
    app.step(Action::Text(TokenText::none()));
    let status = area_text(&app, app.areas().status);
    assert!(!status.contains("ids shown"), "{status}");
    // A tokenizer that fails to load is no longer coming.
    app.step(Action::TextLoading("nope".into()));
    app.step(Action::TextFailed("tokenizer: no such file".into()));
    assert_eq!(app.text_loading, None);
}

#[test]
fn the_search_field_starts_empty() {
    let mut app = demo_app(120, 40, false);
    for _ in 0..2 {
        cmds(&mut app, &[Command::Search]);
        assert!(matches!(&app.overlay, Overlay::Search { field, .. } if field.text.is_empty()));
        for c in "r3".chars() {
            app.step(Action::Input(c));
        }
        cmds(&mut app, &[Command::Enter]);
        let said = &app.message.as_ref().unwrap().text;
        assert!(said.starts_with("/r3: match 1/"), "{said}");
    }
    // n still steps through the last query's matches.
    cmds(&mut app, &[Command::SearchNext]);
    assert!(app.message.as_ref().unwrap().text.starts_with("/r3: match"));
}

#[test]
fn the_header_always_names_the_recording() {
    for w in [80, 120, 160] {
        let app = demo_app(w, 30, false);
        let head = screen(&app).lines().next().unwrap().to_string();
        assert!(head.contains("demo: example.jsonl"), "{w}: {head}");
        assert!(head.contains("draw "), "{w}: {head}");
    }
    let mut app = demo_app(80, 24, false);
    app.label = "/data/runs/2026-12-01/night-shift/swe-bench-verified-run-0042.jsonl".into();
    let head = screen(&app).lines().next().unwrap().to_string();
    assert!(head.contains("swe-bench-verified-run-0042.jsonl"), "{head}");
    assert!(head.contains("J_max 5"), "{head}");
}
