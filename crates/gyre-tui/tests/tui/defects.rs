//! Defects found using the inspector for real work (issue 22), each pinned: the highlighted
//! candidate `y` explains, links followed from a zoomed pane, every pane reachable at 80×24
//! (by number and by Tab, zoomed or not),
//! the status line while the tokenizer loads, the search field (and Enter before its worker
//! answers), the header's file name.

use gyre_text::TokenText;
use gyre_tui::app::{Action, App};
use gyre_tui::keys::Command;
use gyre_tui::overlay::{Overlay, SearchView, WhyView};
use gyre_tui::pane::Pane;

use crate::common::*;

/// Focuses the replay pane and moves its highlight down to a candidate other than the request
/// whose path is shown: that candidate's request.
fn highlight_another_candidate(app: &mut App) -> u32 {
    cmds(app, &[Command::Jump(3), Command::DrawFirst]);
    for _ in 0..20 {
        let r = app
            .ctx()
            .and_then(|ctx| app.panes.replay.selected_request(&ctx));
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
        matches!(app.overlay, Overlay::Why(WhyView { request, .. }) if request == r),
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
        assert!(app.areas().of(p).width > 0, "pane {n} on screen");
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
fn tab_reaches_every_pane_at_80_by_24_and_zoomed() {
    use std::collections::BTreeSet;
    for zoomed in [false, true] {
        let mut app = demo_app(80, 24, false);
        if zoomed {
            cmds(&mut app, &[Command::Zoom]);
        }
        let mut seen = BTreeSet::new();
        for _ in 0..6 {
            cmds(&mut app, &[Command::FocusNext]);
            assert!(
                app.areas().of(app.focus).width > 0,
                "{:?} on screen",
                app.focus
            );
            seen.insert(app.focus.number());
        }
        assert_eq!(seen.len(), 6, "zoomed {zoomed}: Tab reached {seen:?}");
        assert_eq!(
            app.zoom, zoomed,
            "back where it started, the zoom is as it was"
        );
    }
    // Tab onto the detail pane zooms it only while it is focused; 5 leaves it unzoomed.
    let mut app = demo_app(80, 24, false);
    cmds(&mut app, &[Command::Jump(6)]);
    assert!(app.zoom);
    cmds(&mut app, &[Command::Jump(5)]);
    assert!(!app.zoom);
    assert_eq!(app.focus, Pane::Tokens);
}

#[test]
fn the_status_line_says_token_text_is_coming() {
    let mut app = demo_app(120, 40, false);
    app.step_here(Action::TextLoading("Qwen/Qwen3-0.6B".into()));
    let status = area_text(&app, app.areas().status);
    assert!(
        status.contains("ids shown: token text once Qwen/Qwen3-0.6B loads…"),
        "{status}"
    );
    app.step_here(Action::Text(TokenText::none()));
    let status = area_text(&app, app.areas().status);
    assert!(!status.contains("ids shown"), "{status}");
    // A tokenizer that fails to load is no longer coming.
    app.step_here(Action::TextLoading("nope".into()));
    app.step_here(Action::TextFailed("tokenizer: no such file".into()));
    assert_eq!(app.text_loading, None);
}

#[test]
fn the_search_field_starts_empty() {
    let mut app = demo_app(120, 40, false);
    for _ in 0..2 {
        cmds(&mut app, &[Command::Search]);
        assert!(
            matches!(&app.overlay, Overlay::Search(SearchView { field, .. }) if field.text.is_empty())
        );
        for c in "r3".chars() {
            app.step_here(Action::Input(c));
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

#[test]
fn the_replay_stop_line_spells_the_weight_as_compare_does() {
    let mut app = demo_app(160, 45, false);
    cmds(
        &mut app,
        &[Command::JmaxDown, Command::JmaxDown, Command::JmaxDown],
    );
    cmds(
        &mut app,
        &[Command::JmaxDown, Command::Jump(3), Command::Zoom],
    );
    let replay = area_text(&app, app.areas().replay);
    let l = app.ctx().unwrap().admission().targets();
    let w = gyre_engine::report::weight_text(gyre_engine::loss::target_weight(l));
    assert!(replay.contains(&format!("· weight {w} ·")), "{replay}");
}

#[test]
fn the_compare_batch_line_is_whole_at_160_columns() {
    let mut app = synth_app(160, 45, false);
    cmds(
        &mut app,
        &[Command::Pin, Command::JmaxDown, Command::Compare],
    );
    let s = screen(&app).replace(['║', '\n'], " ");
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(s.contains("status change"), "{s}");
}

#[test]
fn end_in_the_tokens_fills_the_pane_and_w_says_when_it_is_at_the_end() {
    let mut app = synth_app(120, 40, false);
    cmds(&mut app, &[Command::Jump(5), Command::End]);
    let a = app.areas().tokens;
    let buf = render(&app);
    let row = |y: u16| {
        (a.x + 1..a.right() - 1)
            .map(|x| buf[(x, y)].symbol().to_string())
            .collect::<String>()
    };
    assert!(
        path_len(&app) > 400,
        "a path longer than the pane: {}",
        path_len(&app)
    );
    assert!(
        !row(a.bottom() - 2).trim().is_empty(),
        "the last row at the bottom"
    );
    cmds(&mut app, &[Command::NextSegment]);
    let said = &app.message.as_ref().unwrap().text;
    assert!(said.starts_with("already in the last segment"), "{said}");
}

#[test]
fn a_dashboard_chart_says_when_more_bars_follow() {
    let mut app = synth_app(60, 16, false);
    cmds(&mut app, &[Command::Dashboard]);
    let s = screen(&app);
    assert!(s.contains("more after"), "{s}");
}

#[test]
fn after_a_sort_the_status_line_names_the_first_row() {
    let mut app = synth_app(80, 24, false);
    cmds(&mut app, &[Command::Jump(1), Command::End]);
    let mut said = Vec::new();
    for _ in 0..5 {
        cmds(&mut app, &[Command::Sort]);
        let m = app.message.as_ref().unwrap().text.clone();
        assert!(m.starts_with("executions by "), "{m}");
        said.push(m);
    }
    let first = app.panes.execs.rows[0];
    let id = &app.data.as_ref().unwrap().batch.executions[first].id;
    assert!(
        said.iter().any(|m| m.contains(&format!("first {id}"))) || app.panes.execs.offset == 0,
        "{said:?}"
    );
}

/// `S` at seed 0 stays at seed 0 and says so (it wrapped to 18446744073709551615).
#[test]
fn seed_down_at_seed_0_stays_and_says_so() {
    let mut app = demo_app(120, 40, false);
    assert_eq!(app.settings.seed, 0);
    cmds(&mut app, &[Command::SeedDown]);
    assert_eq!(app.settings.seed, 0);
    let said = &app.message.as_ref().unwrap().text;
    assert!(said.starts_with("seed 0 is the first seed"), "{said}");
    assert!(!screen(&app).contains("18446744073709551615"));
    cmds(&mut app, &[Command::SeedUp, Command::SeedDown]);
    assert_eq!(app.settings.seed, 0);
}

/// `/r20` and Enter faster than the search worker: it said "/r20: no match" (found driving the
/// inspector in tmux, where keys arrive at once); now the first match opens when it is found.
#[test]
fn enter_before_the_search_worker_answers_opens_the_first_match() {
    let mut app = demo_app(120, 40, false);
    let (jobs, rx) = gyre_tui::app::Jobs::channel();
    let d = app.data.as_ref().unwrap();
    let id = d.batch.executions[(app.sel.exec + 1) % d.batch.executions.len()]
        .id
        .clone();
    cmds_on(&mut app, &jobs, &[Command::Search]);
    for c in id.chars() {
        step_on(&mut app, &jobs, Action::Input(c));
    }
    cmds_on(&mut app, &jobs, &[Command::Enter]);
    let m = app.message.as_ref().unwrap().text.clone();
    assert_eq!(
        m,
        format!("/{id}: searching… the first match opens when it is found")
    );
    pump_until(&mut app, &jobs, &rx, |a| a.search.done);
    assert_eq!(app.search.at, Some(0));
    let m = app.message.as_ref().unwrap().text.clone();
    assert!(m.starts_with(&format!("/{id}: match 1/")), "{m}");
    // A query nothing matches says so once the worker is done.
    cmds_on(&mut app, &jobs, &[Command::Search]);
    for c in "zzqx".chars() {
        step_on(&mut app, &jobs, Action::Input(c));
    }
    cmds_on(&mut app, &jobs, &[Command::Enter]);
    pump_until(&mut app, &jobs, &rx, |a| a.search.done);
    assert_eq!(app.message.as_ref().unwrap().text, "/zzqx: no match");
}
