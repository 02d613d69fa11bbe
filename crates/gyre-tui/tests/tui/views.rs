//! The inspector's second-pass views, driven through `App::step` and snapshotted from
//! `TestBackend`: why (not) drawn, the whole draw log, the scoring story of an excluded
//! execution, the priority editor, search across executions, settings deltas, the run keys,
//! re-serialised text, small terminals, background re-runs and fading messages.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use gyre_engine::admit::Settings;
use gyre_engine::load::{LoadOptions, load_bytes};
use gyre_engine::why::Fate;
use gyre_tui::app::{Action, App, Jobs, Load, Phase};
use gyre_tui::keys::Command as C;
use gyre_tui::overlay::{Overlay, WhyView};
use gyre_tui::pane::Pane;
use gyre_tui::pane::replay::Mode;
use gyre_tui::theme::Theme;

/// The inspector on the bundled synth demo (ids, no tokenizer), at `w`×`h`.
fn synth_app(w: u16, h: u16) -> App {
    let demo = gyre_engine::demo::Demo::Synth;
    let batch = load_bytes(demo.file_name(), demo.bytes(), &LoadOptions::default()).unwrap();
    App::with_batch(
        "synth",
        batch,
        Settings::default(),
        Theme { color: true },
        (w, h),
    )
}

fn open(app: &mut App, exec: &str) {
    let i = app
        .data
        .as_ref()
        .unwrap()
        .batch
        .execution_index(exec)
        .unwrap();
    app.apply(gyre_tui::pane::Effect::OpenExec(i));
}

fn request(app: &App, id: &str) -> u32 {
    app.data.as_ref().unwrap().batch.executions[app.sel.exec]
        .request_index(id)
        .unwrap()
}

#[test]
fn why_overlay_explains_a_request_that_lost_every_draw() {
    let mut app = demo_app(160, 45, true);
    cmds(
        &mut app,
        &[C::JmaxDown, C::JmaxDown, C::JmaxDown, C::JmaxDown],
    );
    let r7 = request(&app, "r7");
    app.apply(gyre_tui::pane::Effect::SelectRequest(r7));
    app.focus = Pane::Tree;
    cmds(&mut app, &[C::Why]);
    assert!(matches!(app.overlay, Overlay::Why(WhyView { request, .. }) if request == r7));
    let s = screen(&app);
    assert!(s.contains("why was r7 (not) drawn?"), "{s}");
    assert!(s.contains("Fate of r7: j_max"), "{s}");
    assert!(
        s.contains("lost every draw until J_max stopped after 1 draw;"),
        "{s}"
    );
    assert!(s.contains("p=0.3846 [8, 13)  winner r3"), "{s}");
    insta::assert_snapshot!("why_overlay", s);
    cmds(&mut app, &[C::Escape]);
    assert_eq!(app.overlay, Overlay::None);
    // From the token pane, `y` explains the request whose output is under the cursor.
    app.focus = Pane::Tokens;
    cmds(&mut app, &[C::End, C::Why]);
    assert!(matches!(app.overlay, Overlay::Why(WhyView { request, .. }) if request == r7));
    let d = app.data.as_ref().unwrap();
    let e = &d.batch.executions[app.sel.exec];
    let w = gyre_engine::why::why(e, &d.results.outcomes[0], &d.results.admissions[0], r7);
    assert_eq!(w.fate, Fate::JMax);
}

#[test]
fn the_whole_draw_log_scrolls_and_marks_the_step() {
    let mut app = demo_app(160, 45, true);
    app.focus = Pane::Replay;
    cmds(
        &mut app,
        &[
            C::ReplayLog,
            C::Zoom,
            C::DrawFirst,
            C::DrawNext,
            C::DrawNext,
        ],
    );
    assert_eq!(app.panes.replay.mode, Mode::Log);
    let s = screen(&app);
    for want in [
        "draw 1/4  class main",
        "random 325990950228498521 mod 13 = 5",
        "▶ draw 2/4",
        "r1[0..4]@7 r3[0..4]@14",
        "stopped: no candidate has unclaimed tokens left",
    ] {
        assert!(s.contains(want), "{want:?}\n{s}");
    }
    insta::assert_snapshot!("replay_log", s);
    // End stops at the last line: the stop line is on screen, at the bottom or above.
    cmds(&mut app, &[C::Zoom, C::End]);
    assert!(screen(&app).contains("stopped: no candidate"));
    let before = app.panes.replay.scroll;
    cmds(&mut app, &[C::End, C::PageDown, C::Down]);
    assert_eq!(
        app.panes.replay.scroll, before,
        "no scrolling past the last line"
    );
}

#[test]
fn replay_links_move_the_cursor_to_a_claimed_span() {
    let mut app = demo_app(160, 45, true);
    cmds(&mut app, &[C::DrawFirst, C::DrawNext]);
    app.focus = Pane::Replay;
    // The drawn candidate r3 is selected; then come r7 and the spans r1[0..4]@7, r3[0..4]@14.
    cmds(&mut app, &[C::Down, C::Down, C::Down, C::Enter]);
    let r3 = request(&app, "r3");
    assert_eq!(path_request(&app), Some(r3));
    assert_eq!(
        cursor(&app),
        14,
        "r3[0..4]@14: the cursor is on position 14"
    );
    cmds(&mut app, &[C::Up, C::Enter]);
    assert_eq!(cursor(&app), 7);
    // A candidate link selects that candidate's path.
    cmds(&mut app, &[C::Up, C::Enter]);
    assert_eq!(path_request(&app), Some(request(&app, "r7")));
}

#[test]
fn an_excluded_execution_shows_every_assessment_and_why_it_did_not_count() {
    let mut app = synth_app(160, 45);
    open(&mut app, "e0004");
    app.focus = Pane::Assessments;
    cmds(&mut app, &[C::Zoom]);
    let s = screen(&app);
    for want in [
        "closure +192.9 s · completed · committed r18 · patch v2",
        "budget end +3600.0 s",
        "patch v2 · the closure's version · no assessment counts",
        "branch r16, not the committed r18",
        "· failed",
        "after the budget end (+3660.0 s > +3600.0 s)",
    ] {
        assert!(s.contains(want), "{want:?}\n{s}");
    }
    insta::assert_snapshot!("assessments_excluded", s);
    // The detail pane shows the selected assessment's record, absolute times included.
    cmds(&mut app, &[C::Zoom, C::End]);
    let detail = area_text(&app, app.areas().detail);
    assert!(detail.contains("(epoch)"), "{detail}");
    assert!(detail.contains("after the budget end"), "{detail}");
}

#[test]
fn a_group_header_speaks_for_the_whole_group() {
    let mut app = synth_app(160, 45);
    open(&mut app, "e0000");
    let s = area_text(&app, app.areas().assess);
    // The first assessment of v2 is of another branch; the group still holds the reward.
    assert!(
        s.contains("patch v2 · the closure's version · reward 0.61"),
        "{s}"
    );
    assert!(s.contains("patch v1 · not the closure's version"), "{s}");
    assert!(s.contains("◀ reward"), "{s}");
}

#[test]
fn the_priority_editor_reorders_and_drops_classes() {
    let mut app = demo_app(160, 45, true);
    cmds(&mut app, &[C::EditPriority]);
    let s = screen(&app);
    assert!(s.contains("1. main") && s.contains("4. sub-summary"), "{s}");
    insta::assert_snapshot!("priority_editor", s);
    // sub up two places, main-summary dropped.
    for a in [
        Action::Cmd(C::Down),
        Action::Cmd(C::Down),
        Action::Input('K'),
        Action::Input('K'),
        Action::Cmd(C::Down),
        Action::Cmd(C::Down),
        Action::Input(' '),
        Action::Cmd(C::Enter),
    ] {
        app.step_here(a);
    }
    use gyre_engine::admit::Class::*;
    assert_eq!(app.settings.priority, vec![Sub, Main, SubSummary]);
    assert_eq!(
        app.data.as_ref().unwrap().results.settings.priority,
        app.settings.priority
    );
    assert!(screen(&app).contains("priority sub>main>sub-summary"));
    // The last listed class cannot be dropped.
    cmds(&mut app, &[C::EditPriority]);
    for a in [Action::Input(' '), Action::Input('j'), Action::Input(' ')] {
        app.step_here(a);
    }
    app.step_here(Action::Input('j'));
    app.step_here(Action::Input(' '));
    let Overlay::Priority(e) = &app.overlay else {
        panic!("editor open")
    };
    assert_eq!(e.priority().len(), 1);
}

#[test]
fn settings_changes_show_what_moved() {
    let mut app = demo_app(160, 45, true);
    let s = screen(&app);
    assert!(s.contains("rows 6 · targets 31 · left out 0 · B 3"), "{s}");
    cmds(
        &mut app,
        &[C::JmaxDown, C::JmaxDown, C::JmaxDown, C::JmaxDown],
    );
    let s = screen(&app);
    assert!(s.contains("rows 3 · targets 14 · left out 17 · B 3"), "{s}");
    insta::assert_snapshot!(
        "change_line",
        s.lines().rev().nth(1).unwrap().trim_end().to_string()
    );
    cmds(&mut app, &[C::Advantage]);
    let s = screen(&app);
    assert!(s.contains("adv grpo"), "{s}");
    assert!(
        s.contains("advantage drgrpo → grpo: rows, targets and left-out tokens unchanged"),
        "{s}"
    );
    // The export says which advantage it used.
    cmds(&mut app, &[C::Export]);
    assert!(screen(&app).contains("advantage grpo"));
}

#[test]
fn re_runs_happen_off_the_ui_thread() {
    let mut app = demo_app(160, 45, true);
    let (jobs, rx) = Jobs::channel();
    let generation = app.sel.generation;
    cmds_on(&mut app, &jobs, &[C::SeedUp, C::SeedUp]);
    assert!(app.rerunning());
    assert!(screen(&app).contains("re-running…"));
    assert_eq!(
        app.sel.generation, generation,
        "the old results stay on screen"
    );
    // Two re-runs were asked for; only the one of the current settings is installed.
    pump_until(&mut app, &jobs, &rx, |app| !app.rerunning());
    assert_eq!(app.data.as_ref().unwrap().results.settings.seed, 2);
    assert_eq!(app.sel.generation, generation + 1);
    assert!(!screen(&app).contains("re-running…"));
}

#[test]
fn search_lists_results_from_every_execution_as_you_type() {
    let mut app = demo_app(160, 45, true);
    cmds(&mut app, &[C::Search]);
    app.step_here(Action::Input('r'));
    app.step_here(Action::Input('1'));
    let s = screen(&app);
    assert!(s.contains("matches in 4 executions"), "{s}");
    insta::assert_snapshot!("search_results", s);
    // Choose the third result and go there.
    cmds(&mut app, &[C::Down, C::Down, C::Enter]);
    assert_eq!(app.search.at, Some(2));
    let e = &app.data.as_ref().unwrap().batch.executions[app.sel.exec];
    assert_eq!(e.id, "e3");
    cmds(&mut app, &[C::SearchNext]);
    assert_eq!(app.search.at, Some(3));
    cmds(&mut app, &[C::Escape]);
    assert!(!app.search.active());
}

#[test]
fn run_keys_and_go_to_position() {
    let mut app = demo_app(160, 45, true);
    let r7 = request(&app, "r7");
    app.apply(gyre_tui::pane::Effect::SelectRequest(r7));
    app.focus = Pane::Tokens;
    cmds(&mut app, &[C::Home, C::NextTarget]);
    let first_target = cursor(&app);
    assert!(first_target > 0);
    let kind_at = |app: &App| {
        let d = app.data.as_ref().unwrap();
        let exec = &d.batch.executions[app.sel.exec];
        let (n, _) = app.path().unwrap().index.node_at(cursor(app));
        exec.tree.nodes[n as usize].kind
    };
    use gyre_engine::tree::NodeKind;
    assert_eq!(kind_at(&app), NodeKind::Output);
    cmds(&mut app, &[C::NextContext]);
    assert_ne!(kind_at(&app), NodeKind::Output);
    cmds(&mut app, &[C::PrevTarget]);
    assert_eq!(cursor(&app), first_target);
    // `:3` goes to position 3 (1-based): the cursor is on path position 2.
    cmds(&mut app, &[C::Palette]);
    app.step_here(Action::Input('3'));
    app.step_here(Action::Cmd(C::Enter));
    assert_eq!(cursor(&app), 2);
    assert!(why_text(&app).contains("position 3/"), "{}", why_text(&app));
    // Nothing left out at J_max 5: the key says so.
    cmds(&mut app, &[C::NextLeftOut]);
    assert!(
        app.message
            .as_ref()
            .unwrap()
            .text
            .contains("no later left-out run")
    );
}

#[test]
fn re_serialised_assistant_text_says_so_in_the_why_line() {
    let mut app = synth_app(160, 45);
    open(&mut app, "e0000");
    let r5 = request(&app, "r5");
    app.apply(gyre_tui::pane::Effect::SelectRequest(r5));
    app.focus = Pane::Tokens;
    cmds(&mut app, &[C::Home]);
    let mut found = false;
    for _ in 0..20 {
        cmds(&mut app, &[C::NextDivergence]);
        if why_text(&app).contains("harness re-serialised") {
            found = true;
            break;
        }
    }
    let why = why_text(&app);
    assert!(found, "{why}");
    assert!(
        why.contains(
            "harness re-serialised r4's output here; diverges at its token 78; not sampled in \
             this context"
        ),
        "{why}"
    );
}

#[test]
fn tab_follows_the_screen_and_digits_jump() {
    let mut app = demo_app(160, 45, true);
    app.focus = Pane::Executions;
    let mut seen = vec![app.focus];
    for _ in 0..5 {
        cmds(&mut app, &[C::FocusNext]);
        seen.push(app.focus);
    }
    assert_eq!(
        seen,
        [
            Pane::Executions,
            Pane::Tree,
            Pane::Replay,
            Pane::Assessments,
            Pane::Tokens,
            Pane::Detail
        ]
    );
    let mut app = demo_app(80, 24, true);
    app.focus = Pane::Executions;
    cmds(&mut app, &[C::FocusNext, C::FocusNext]);
    assert_eq!(
        app.focus,
        Pane::Tokens,
        "narrow: the tokens are left of the replay"
    );
    cmds(&mut app, &[C::Jump(3)]);
    assert_eq!(app.focus, Pane::Replay);
    // The detail pane has no room beside the others: 6 shows it zoomed.
    cmds(&mut app, &[C::Jump(6)]);
    assert_eq!(app.focus, Pane::Detail);
    assert!(app.zoom);
    assert!(app.message.as_ref().unwrap().text.contains("pane 6 zoomed"));
}

#[test]
fn small_terminals_say_what_they_need_and_zoom_gives_a_pane_the_screen() {
    let mut app = demo_app(40, 10, true);
    let s = screen(&app);
    assert!(
        s.contains("terminal too small") && s.contains("need 60×16"),
        "{s}"
    );
    insta::assert_snapshot!("too_small", s);
    app.step_here(Action::Resize(80, 24));
    app.focus = Pane::Tokens;
    cmds(&mut app, &[C::Zoom]);
    let a = app.areas();
    assert_eq!(a.tokens.width, 80);
    assert_eq!(a.execs.width, 0);
    assert!(a.why.height > 0, "the why line stays with the tokens");
}

#[test]
fn messages_fade_and_esc_clears_them() {
    let mut app = demo_app(160, 45, true);
    cmds(&mut app, &[C::DrawNext]);
    assert!(app.message.is_some());
    app.step_here(Action::Tick(Instant::now()));
    assert!(app.message.is_some(), "not yet");
    app.step_here(Action::Tick(Instant::now() + Duration::from_secs(7)));
    assert!(app.message.is_none());
    cmds(&mut app, &[C::DrawNext, C::Escape]);
    assert!(app.message.is_none());
}

#[test]
fn loading_names_its_phase_and_an_empty_recording_says_so() {
    let mut app = App::new("big.jsonl", Settings::default(), Theme { color: true });
    app.step_here(Action::Resize(100, 30));
    app.step_here(Action::Progress(Phase::Admitting, 12, 32));
    assert!(screen(&app).contains("scoring and admitting: 12/32 executions"));
    let batch = load_bytes(
        "empty.jsonl",
        b"{\"kind\":\"header\",\"format\":\"gyre/1\"}\n",
        &LoadOptions::default(),
    )
    .unwrap();
    let results = gyre_engine::process(
        &batch,
        &Settings::default(),
        gyre_engine::score::AdvantageMode::DrGrpo,
    );
    app.step_here(Action::Processed(Arc::new(batch), Box::new(results)));
    assert_eq!(app.load, Load::Ready);
    for c in gyre_tui::keys::BINDINGS.iter().map(|b| b.command) {
        app.step_here(Action::Cmd(c));
    }
    assert!(screen(&app).contains("the input holds no execution"));
}

#[test]
fn a_terminal_smaller_than_the_app_knows_is_drawn_cut_not_out_of_bounds() {
    // The resize event is still on its way when the frame is drawn.
    let wide = gyre_text::TokenText::from_vocab(
        (0..100).map(|_| "漢字漢字漢字漢字".to_string()).collect(),
    );
    for overlay in [
        C::Boundaries,
        C::Help,
        C::Search,
        C::Export,
        C::Why,
        C::EditPriority,
    ] {
        let mut app = demo_app(98, 40, true);
        app.step_here(Action::Text(wide.clone()));
        cmds(&mut app, &[overlay]);
        let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(98, 15)).unwrap();
        t.draw(|f| gyre_tui::ui::render(&app, f)).unwrap();
        let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(300, 90)).unwrap();
        t.draw(|f| gyre_tui::ui::render(&app, f)).unwrap();
    }
}
