//! The inspector driven through `App::step`, its screens snapshotted from `TestBackend`.

use crate::common::*;
use gyre_engine::provenance::Reason;
use gyre_tui::app::{Action, Phase};
use gyre_tui::keys::Command as C;
use gyre_tui::overlay::{HelpView, Overlay};
use gyre_tui::pane::Pane;
use ratatui::style::{Color, Modifier};

#[test]
fn opens_on_the_execution_with_most_draws_at_draw_n_of_n() {
    let app = demo_app(160, 45, true);
    assert_eq!(app.sel.exec, 0);
    assert_eq!(app.sel.step, app.draws());
    assert!(app.draws() > 1);
    let s = screen(&app);
    assert!(s.contains("draw 4/4"), "{s}");
    assert!(s.contains("J_max 5"));
    assert!(s.contains("? help"));
    assert!(s.contains("q quit"));
    insta::assert_snapshot!("overview", s);
}

#[test]
fn replay_steps_back_and_forward() {
    let mut app = demo_app(160, 45, true);
    cmds(&mut app, &[C::DrawPrev, C::DrawPrev]);
    assert_eq!(app.sel.step, 2);
    let s = screen(&app);
    assert!(s.contains("draw 2/4"));
    insta::assert_snapshot!("replay_draw_2", s);
    cmds(&mut app, &[C::DrawFirst]);
    assert_eq!(app.sel.step, 0);
    let s = screen(&app);
    assert!(s.contains("draw 0/4"));
    assert!(s.contains("nothing claimed yet"));
    cmds(&mut app, &[C::DrawNext]);
    assert_eq!(app.sel.step, 1);
    cmds(&mut app, &[C::DrawLast]);
    assert_eq!(app.sel.step, 4);
    cmds(&mut app, &[C::DrawNext]);
    assert_eq!(app.sel.step, 4, "never past n");
}

#[test]
fn replay_selects_the_drawn_leaf_and_colours_its_targets() {
    let mut app = demo_app(160, 45, true);
    cmds(&mut app, &[C::DrawFirst, C::DrawNext]);
    let d = app.data.as_ref().unwrap();
    let draw = &d.results.admissions[app.sel.exec].draws[0];
    assert_eq!(path_request(&app), Some(draw.chosen));
    // The cursor sits on the first token this draw claimed; the why line says so.
    let why = why_text(&app);
    assert!(why.contains("claimed by draw 1"), "{why}");
    assert!(why.contains("target of this draw"), "{why}");
    // That token is drawn bright green (target of the current draw).
    let buf = render(&app);
    let a = app.areas();
    let found = (a.tokens.y..a.tokens.bottom())
        .any(|y| (a.tokens.x..a.tokens.right()).any(|x| buf[(x, y)].bg == Color::LightGreen));
    assert!(found, "a target of the current draw is highlighted");
}

#[test]
fn why_line_reports_context_sources_and_reasons() {
    let mut app = demo_app(160, 45, true);
    app.step_here(Action::Cmd(C::Search));
    app.step_here(Action::Input('r'));
    app.step_here(Action::Input('1'));
    app.step_here(Action::Cmd(C::Enter));
    app.focus = Pane::Tokens;
    cmds(&mut app, &[C::Home]);
    let why = why_text(&app);
    assert!(why.contains("context:system"), "{why}");
    assert!(why.contains("input token 0 of r1"), "{why}");
    insta::assert_snapshot!("why_context", why);
}

#[test]
fn colour_modes_cycle() {
    let mut app = demo_app(160, 45, true);
    let s = screen(&app);
    assert!(s.contains("colour: claims"));
    cmds(&mut app, &[C::Colour]);
    assert!(screen(&app).contains("colour: logprob"));
    cmds(&mut app, &[C::Colour]);
    assert!(screen(&app).contains("colour: lens"));
    // Flips come only with a pin: without one the cycle goes on to provenance.
    cmds(&mut app, &[C::Colour]);
    let s = screen(&app);
    assert!(s.contains("colour: provenance"));
    assert!(s.contains("system") && s.contains("tool") && s.contains("policy"));
    cmds(&mut app, &[C::Colour]);
    assert!(screen(&app).contains("colour: claims"));
}

#[test]
fn live_engine_settings_rerun() {
    let mut app = demo_app(160, 45, true);
    cmds(
        &mut app,
        &[C::JmaxDown, C::JmaxDown, C::JmaxDown, C::JmaxDown],
    );
    assert_eq!(app.settings.jmax, 1);
    assert_eq!(app.draws(), 1);
    let s = screen(&app);
    assert!(s.contains("J_max 1"));
    assert!(s.contains("draw 1/1"));
    assert!(why_text(&app).contains("J_max reached"), "{s}");
    // The change line says what the cap did to the batch and to this execution.
    assert!(
        s.contains("J_max 2 → 1: rows 4 → 3 (−1)") && s.contains("e1: L_i 13 → 8 (−5)"),
        "{s}"
    );
    // The tokens the cap left out say so.
    let d = app.data.as_ref().unwrap();
    let exec = &d.batch.executions[app.sel.exec];
    let adm = &d.results.admissions[app.sel.exec];
    let left_out = (0..exec.tree.nodes.len() as u32).any(|n| {
        gyre_engine::provenance::node_reason(exec, &d.results.outcomes[app.sel.exec], adm, n, None)
            == Some(Reason::LeftOutJmax)
    });
    assert!(left_out);
    cmds(&mut app, &[C::JmaxDown]);
    assert_eq!(app.settings.jmax, 0);
    assert!(screen(&app).contains("J_max uncapped"));
    cmds(&mut app, &[C::SeedUp]);
    assert_eq!(app.settings.seed, 1);
    assert!(screen(&app).contains("seed 1"));
    cmds(&mut app, &[C::Priority]);
    assert!(screen(&app).contains("priority main>sub>main-summary>sub-summary"));
}

#[test]
fn help_overlay_opens_and_escape_closes() {
    let mut app = demo_app(160, 45, true);
    cmds(&mut app, &[C::Help]);
    assert_eq!(app.overlay, Overlay::Help(HelpView(0)));
    let s = screen(&app);
    insta::assert_snapshot!("help", s);
    // Scrolled to its end, the help has shown every key and every glossary term.
    let mut seen = s.replace(['│', '║'], " ");
    for _ in 0..60 {
        cmds(&mut app, &[C::Down]);
        seen.push_str(&screen(&app).replace(['│', '║'], " "));
    }
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let seen = words(&seen);
    for b in gyre_tui::keys::BINDINGS {
        let first = b
            .help
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(seen.contains(&first), "help lists {:?}", b.command);
    }
    // Each key and term stands apart from its text ("first seen therea context token…").
    for (term, text) in gyre_tui::keys::GLOSSARY {
        let first = text.split_whitespace().next().unwrap();
        assert!(
            seen.contains(&format!("{term} {first}")),
            "the glossary explains {term}"
        );
    }
    for (key, text) in gyre_tui::keys::EDIT_KEYS {
        let first = text.split_whitespace().next().unwrap();
        assert!(seen.contains(&format!("{key} {first}")), "help lists {key}");
    }
    cmds(&mut app, &[C::Escape]);
    assert_eq!(app.overlay, Overlay::None);
}

#[test]
fn search_finds_request_ids_and_tokens_in_every_execution() {
    let mut app = demo_app(160, 45, true);
    app.step_here(Action::Cmd(C::Search));
    for c in "r7".chars() {
        app.step_here(Action::Input(c));
    }
    // The results list fills while typing; the open execution's hits come first.
    let s = screen(&app);
    assert!(s.contains("search every execution"), "{s}");
    assert!(s.contains("r7 · request id"), "{s}");
    app.step_here(Action::Cmd(C::Enter));
    let d = app.data.as_ref().unwrap();
    let r7 = d.batch.executions[app.sel.exec]
        .request_index("r7")
        .unwrap();
    assert_eq!(path_request(&app), Some(r7));
    // Token text: ⟨92⟩ is in r7's path (the critique), and nowhere else.
    app.step_here(Action::Cmd(C::Search));
    for _ in 0..2 {
        app.step_here(Action::Backspace);
    }
    for c in "⟨92⟩".chars() {
        app.step_here(Action::Input(c));
    }
    app.step_here(Action::Cmd(C::Enter));
    // v1's output (the evaluator) and the critique in r7's context.
    assert_eq!(app.search.hits.len(), 2);
    let exec = &app.data.as_ref().unwrap().batch.executions[app.sel.exec];
    let v = app.path().expect("a path");
    assert_eq!(v.index.token(exec, v.cursor), 92);
    assert!(screen(&app).contains("match 1/2"));
    // Another execution's id: the jump opens it.
    app.step_here(Action::Cmd(C::Search));
    app.step_here(Action::ClearField);
    for c in "e4".chars() {
        app.step_here(Action::Input(c));
    }
    app.step_here(Action::Cmd(C::Enter));
    let d = app.data.as_ref().unwrap();
    assert_eq!(d.batch.executions[app.sel.exec].id, "e4");
    app.step_here(Action::Cmd(C::SearchNext));
    // One Esc clears the search (and its highlights).
    app.step_here(Action::Cmd(C::Escape));
    assert!(!app.search.active());
    assert!(app.search.hits.is_empty());
}

#[test]
fn executions_sort_filter_and_mouse() {
    let mut app = demo_app(160, 45, true);
    cmds(&mut app, &[C::Filter, C::Filter, C::Filter]);
    assert_eq!(app.panes.execs.filter.name(), "excluded");
    assert_eq!(app.panes.execs.rows.len(), 1);
    let s = screen(&app);
    assert!(s.contains("excluded: open"));
    cmds(&mut app, &[C::Filter, C::Filter, C::Sort, C::Sort, C::Sort]);
    assert_eq!(app.panes.execs.sort.name(), "L_i");
    // Click the second execution row (border + header above it).
    let a = app.areas();
    app.step_here(Action::Click(a.execs.x + 2, a.execs.y + 3));
    assert_eq!(app.focus, Pane::Executions);
    assert_eq!(app.sel.exec, app.panes.execs.rows[1]);
    // Keyboard selection works too.
    cmds(&mut app, &[C::Home]);
    assert_eq!(app.sel.exec, app.panes.execs.rows[0]);
}

#[test]
fn tree_navigation_and_click() {
    let mut app = demo_app(160, 45, true);
    app.focus = Pane::Tree;
    let _ = render(&app);
    cmds(&mut app, &[C::Home]);
    assert!(app.panes.tree.selected.len() == 1, "header selected");
    cmds(&mut app, &[C::Down]);
    let d = app.data.as_ref().unwrap();
    let r1 = d.batch.executions[app.sel.exec]
        .request_index("r1")
        .unwrap();
    assert_eq!(app.panes.tree.selected_request(), Some(r1));
    assert_eq!(path_request(&app), Some(r1));
    // r3 (a retry of r2) is nested under r1; r2 continues the line below it. Click r2.
    let _ = render(&app);
    let a = app.areas();
    app.step_here(Action::Click(a.tree.x + 6, a.tree.y + 4));
    let exec = &app.data.as_ref().unwrap().batch.executions[app.sel.exec];
    let (r2, r3) = (
        exec.request_index("r2").unwrap(),
        exec.request_index("r3").unwrap(),
    );
    assert_eq!(app.panes.tree.selected_request(), Some(r2));
    // Keys: up goes to r3, nested under r1.
    cmds(&mut app, &[C::Up]);
    assert_eq!(app.panes.tree.selected_request(), Some(r3));
    assert_eq!(app.panes.tree.selected.len(), 3);
    // Left on a leaf goes to its parent; Left on an open parent closes it.
    cmds(&mut app, &[C::Left]);
    assert_eq!(app.panes.tree.selected_request(), Some(r1));
    cmds(&mut app, &[C::Left]);
    assert!(!app.panes.tree.opened.contains(&app.panes.tree.selected));
    cmds(&mut app, &[C::Down]);
    assert_eq!(
        app.panes.tree.selected_request(),
        Some(r2),
        "r3 hidden once r1 is closed"
    );
}

#[test]
fn token_cursor_moves_and_mouse_selects_tokens() {
    let mut app = demo_app(160, 45, true);
    app.focus = Pane::Tokens;
    cmds(&mut app, &[C::Home, C::Right, C::Right]);
    assert_eq!(cursor(&app), 2);
    cmds(&mut app, &[C::NextSegment]);
    assert!(cursor(&app) > 2);
    cmds(&mut app, &[C::End]);
    assert_eq!(cursor(&app), path_len(&app) - 1);
    let a = app.areas();
    // ⟨1⟩ is three cells wide; x+1 is inside the first token.
    app.step_here(Action::Click(a.tokens.x + 2, a.tokens.y + 1));
    assert_eq!(cursor(&app), 0);
    assert_eq!(app.focus, Pane::Tokens);
}

#[test]
fn assessments_jump_to_their_branch() {
    let mut app = demo_app(160, 45, true);
    app.focus = Pane::Assessments;
    cmds(&mut app, &[C::End, C::Enter]);
    let d = app.data.as_ref().unwrap();
    let r7 = d.batch.executions[app.sel.exec]
        .request_index("r7")
        .unwrap();
    assert_eq!(path_request(&app), Some(r7));
    assert!(screen(&app).contains("◀ reward"));
}

#[test]
fn no_color_keeps_selection_and_claims_visible() {
    let mut app = demo_app(160, 45, false);
    cmds(&mut app, &[C::DrawFirst, C::DrawNext]);
    let buf = render(&app);
    let mut colours = 0;
    let mut reversed = 0;
    let mut bold_underlined = 0;
    for c in buf.content() {
        if c.fg != Color::Reset || c.bg != Color::Reset {
            colours += 1;
        }
        if c.modifier.contains(Modifier::REVERSED) {
            reversed += 1;
        }
        if c.modifier.contains(Modifier::BOLD | Modifier::UNDERLINED) {
            bold_underlined += 1;
        }
    }
    assert_eq!(colours, 0, "NO_COLOR: no colour at all");
    assert!(reversed > 0, "selection still visible");
    assert!(bold_underlined > 0, "targets of the draw still visible");
}

#[test]
fn resize_relayouts() {
    let mut app = demo_app(160, 45, true);
    app.step_here(Action::Resize(80, 24));
    let s = screen(&app);
    assert_eq!(s.lines().count(), 24);
    assert!(s.contains("? help"));
    insta::assert_snapshot!("small_80x24", s);
    app.step_here(Action::Resize(200, 60));
    assert_eq!(screen(&app).lines().count(), 60);
}

#[test]
fn token_text_never_writes_escape_sequences() {
    let mut app = demo_app(160, 45, true);
    let vocab = (0..100)
        .map(|id| format!("\x1b[31m{id}\x07\u{202e}\r\n\t"))
        .collect();
    app.step_here(Action::Text(gyre_text::TokenText::from_vocab(vocab)));
    let buf = render(&app);
    for c in buf.content() {
        assert!(
            !c.symbol()
                .chars()
                .any(|ch| ch.is_control() || ch == '\u{202e}'),
            "cell {:?} holds a control character",
            c.symbol()
        );
    }
    assert!(text(&buf).contains("␛[31m"));
}

#[test]
fn quit_sets_the_flag() {
    let mut app = demo_app(160, 45, true);
    cmds(&mut app, &[C::Quit]);
    assert!(app.quit);
}

#[test]
fn bundled_demo_opens_with_qwen3_text() {
    let demo = gyre_engine::demo::Demo::default();
    let batch =
        gyre_engine::load::load_bytes(demo.file_name(), demo.bytes(), &Default::default()).unwrap();
    let text = gyre_text::resolve_tokenizer(None, batch.tokenizer_spec())
        .expect("the demo names a bundled tokenizer");
    assert_eq!(text.label(), "qwen3");
    let mut app = gyre_tui::app::App::new(
        "demo",
        Default::default(),
        gyre_tui::theme::Theme { color: true },
    );
    app.step_here(Action::Resize(200, 55));
    app.step_here(Action::Text(text));
    app.step_here(Action::Loaded(Ok(Box::new(batch))));
    assert!(app.draws() > 1);
    let s = screen(&app);
    assert!(s.contains("tokens: qwen3"));
    assert!(s.contains("<|im_start|>") || s.contains("<think>"), "{s}");
    assert!(s.contains("sub-agent") && s.contains("compaction"), "{s}");
    assert!(
        s.contains("↳ retry of") && s.contains("diverges inside"),
        "{s}"
    );
}

#[test]
fn loading_shows_a_gauge_and_q_still_quits() {
    let mut app = gyre_tui::app::App::new(
        "big.jsonl",
        Default::default(),
        gyre_tui::theme::Theme { color: true },
    );
    app.step_here(Action::Resize(100, 30));
    app.step_here(Action::Progress(Phase::Reading, 25_000_000, 100_000_000));
    let s = screen(&app);
    assert!(s.contains("loading big.jsonl"), "{s}");
    assert!(s.contains("25.0 / 100.0 MB"), "{s}");
    assert!(s.contains("? help"));
    // Keys other than q do nothing yet; q quits.
    cmds(&mut app, &[C::DrawPrev, C::Colour, C::Export]);
    assert_eq!(app.overlay, Overlay::None);
    cmds(&mut app, &[C::Quit]);
    assert!(app.quit);
}

#[test]
fn a_load_error_is_shown() {
    let mut app = gyre_tui::app::App::new(
        "bad.jsonl",
        Default::default(),
        gyre_tui::theme::Theme { color: false },
    );
    app.step_here(Action::Resize(100, 30));
    app.step_here(Action::Loaded(
        Err("bad.jsonl:1: missing field `id`".into()),
    ));
    let s = screen(&app);
    assert!(
        s.contains("could not load") && s.contains("bad.jsonl:1"),
        "{s}"
    );
}

#[test]
fn no_color_tells_every_provenance_apart() {
    use gyre_engine::paint::{ColorMode, Tone};
    let t = gyre_tui::theme::Theme { color: false };
    for mode in ColorMode::ALL {
        let styles: Vec<_> = Tone::legend(mode)
            .into_iter()
            .map(|tone| t.tone(tone))
            .collect();
        for (i, a) in styles.iter().enumerate() {
            for b in &styles[i + 1..] {
                assert_ne!(a, b, "{mode:?}: two tones look the same without colour");
            }
        }
    }
}
