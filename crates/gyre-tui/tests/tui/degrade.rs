//! Found by driving the binary: small terminals, reconstructed records, replay ends,
//! the screens before the data is there.

use crate::common::*;
use gyre_engine::admit::Settings;
use gyre_engine::load::{LoadOptions, load_bytes};
use gyre_tui::app::{Action, App, Phase};
use gyre_tui::keys::Command as C;
use gyre_tui::overlay::{self, HelpView, Overlay};
use gyre_tui::pane::{Effect, Pane};
use gyre_tui::theme::Theme;
use ratatui::layout::Rect;

fn panes(app: &App) -> Vec<(&'static str, Rect)> {
    let a = app.areas();
    vec![
        ("execs", a.execs),
        ("tree", a.tree),
        ("replay", a.replay),
        ("assess", a.assess),
        ("tokens", a.tokens),
        ("why", a.why),
        ("detail", a.detail),
    ]
}

#[test]
fn small_terminals_keep_every_pane_readable() {
    for (w, h) in [(80, 24), (100, 30), (129, 30)] {
        let mut app = demo_app(w, h, true);
        app.step_here(Action::Resize(w, h));
        let ps = panes(&app);
        for (name, r) in &ps {
            if *name == "detail" {
                assert_eq!(r.width, 0, "{w}x{h}: no room for the detail pane");
                continue;
            }
            assert!(r.width >= 30 && r.height >= 3, "{w}x{h}: {name} is {r:?}");
            for (other, o) in &ps {
                assert!(
                    other == name || !r.intersects(*o),
                    "{w}x{h}: {name} overlaps {other}"
                );
            }
        }
        // The replay pane shows a draw: at least five lines of it.
        assert!(
            app.areas().replay.height >= 7,
            "{w}x{h}: replay {:?}",
            app.areas().replay
        );
        let s = screen(&app);
        // Status words whole, the why line's reason not cut off, the replay pane there.
        for word in ["scored", "dummy", "excluded", "Replay · draw 4/4"] {
            assert!(s.contains(word), "{w}x{h}: {word:?} missing\n{s}");
        }
        assert!(
            why_text(&app).contains("target of this draw"),
            "{w}x{h}\n{s}"
        );
    }
    // At 80 columns a status that does not fit says it is cut.
    let s = screen(&demo_app(80, 24, true));
    assert!(s.contains("dummy (timeou…"), "{s}");
    assert!(s.contains("excluded: open"), "{s}");
    let app = demo_app(100, 30, true);
    insta::assert_snapshot!("small_100x30", screen(&app));
}

/// Tab reaches the detail pane left out of the layout (zoomed): `defects.rs` pins that.
#[test]
fn d_says_why_the_detail_pane_is_left_out() {
    let mut app = demo_app(80, 24, true);
    cmds(&mut app, &[C::Detail, C::Detail]);
    assert!(app.detail);
    assert!(
        app.message
            .as_ref()
            .unwrap()
            .text
            .contains("at least 130 columns"),
        "{:?}",
        app.message
    );
    // Focus on the detail pane, then the terminal shrinks: the focus moves to a visible pane.
    let mut app = demo_app(160, 45, true);
    while app.focus != Pane::Detail {
        cmds(&mut app, &[C::FocusNext]);
    }
    app.step_here(Action::Resize(80, 24));
    assert_eq!(app.focus, Pane::Tokens);
}

#[test]
fn replay_at_either_end_says_so() {
    let mut app = demo_app(160, 45, true);
    cmds(&mut app, &[C::DrawNext]);
    assert_eq!(app.sel.step, 4);
    assert!(
        app.message
            .as_ref()
            .unwrap()
            .text
            .contains("already at draw 4/4")
    );
    cmds(&mut app, &[C::DrawFirst, C::DrawPrev]);
    assert_eq!(app.sel.step, 0);
    assert!(
        app.message
            .as_ref()
            .unwrap()
            .text
            .contains("already at draw 0/4")
    );
}

const RECONSTRUCTED: &str = concat!(
    r#"{"kind":"request","execution":"e","id":"r1","input":[1,2,3],"output":[4,5],"meta":{"reconstructed":true}}"#,
    "\n",
    r#"{"kind":"request","execution":"e","id":"r2","input":[1,2,3,4,5,6],"output":[7],"logprobs":[-0.5]}"#,
    "\n",
    r#"{"kind":"closure","execution":"e","status":"completed","t":10}"#,
    "\n",
);

#[test]
fn reconstructed_records_say_so_in_the_why_line_and_the_detail() {
    let batch = load_bytes(
        "rec.jsonl",
        RECONSTRUCTED.as_bytes(),
        &LoadOptions::default(),
    )
    .expect("loads");
    let mut app = App::with_batch(
        "rec.jsonl",
        batch,
        Settings::default(),
        Theme { color: true },
        (160, 45),
    );
    let exec = &app.data.as_ref().unwrap().batch.executions[0];
    let r1 = exec.request_index("r1").unwrap();
    let r2 = exec.request_index("r2").unwrap();
    app.apply(Effect::SelectRequest(r1));
    app.focus = Pane::Tokens;
    // The cursor starts on r1's first output token.
    let s = screen(&app);
    let why = why_text(&app);
    assert!(why.contains("output token 0 of r1"), "{why}");
    assert!(why.contains("reconstructed, not recorded"), "{why}");
    let a = app.areas();
    let detail: String = s
        .lines()
        .skip(a.detail.y as usize)
        .map(|l| l.chars().skip(a.detail.x as usize).collect::<String>())
        .collect();
    assert!(detail.contains("reconstructed, not recorded"), "{s}");
    // A recorded request says nothing of the kind, even where its context came from r1.
    app.apply(Effect::SelectRequest(r2));
    let s = screen(&app);
    assert!(why_text(&app).contains("output token 0 of r2"), "{s}");
    assert!(!s.contains("reconstructed, not recorded"), "{s}");
    cmds(&mut app, &[C::Home]);
    let why = why_text(&app);
    assert!(why.contains("input token 0 of r1"), "{why}");
    assert!(why.contains("reconstructed, not recorded"), "{why}");
}

#[test]
fn help_works_while_loading_and_only_live_keys_are_hinted() {
    let mut app = App::new("big.jsonl", Settings::default(), Theme { color: true });
    app.step_here(Action::Resize(100, 30));
    app.step_here(Action::Progress(Phase::Reading, 1, 2));
    let s = screen(&app);
    let hints = s.lines().last().unwrap();
    assert_eq!(hints.trim(), "? help  q quit", "{s}");
    cmds(&mut app, &[C::Help]);
    assert_eq!(app.overlay, Overlay::Help(HelpView(0)));
    assert!(screen(&app).contains("help · Esc closes"));
    cmds(&mut app, &[C::Escape]);
    assert_eq!(app.overlay, Overlay::None);
    app.step_here(Action::Loaded(
        Err("bad.jsonl:1: missing field `id`".into()),
    ));
    let s = screen(&app);
    assert!(s.contains("q quits (exit status 2)"), "{s}");
    assert_eq!(s.lines().last().unwrap().trim(), "? help  q quit");
}

#[test]
fn sibling_diff_counts_tokens_after_the_split() {
    let app = demo_app(160, 45, true);
    let s = screen(&app);
    assert!(s.contains("this s1"), "{s}");
    assert!(s.contains("(7 tokens after"), "{s}");
    assert!(s.contains("sibling r1 "), "{s}");
}

#[test]
fn help_scrolls_to_its_last_line_and_no_further() {
    let mut app = demo_app(80, 24, true);
    cmds(&mut app, &[C::Help]);
    for _ in 0..200 {
        cmds(&mut app, &[C::Down]);
    }
    let max = overlay::help_max_scroll(&app.theme, app.areas().full);
    assert!(max > 0, "80x24 cannot show the whole help");
    assert_eq!(app.overlay, Overlay::Help(HelpView(max)));
    assert!(screen(&app).contains("Esc or ? closes this overlay."));
    cmds(&mut app, &[C::Up]);
    assert_eq!(
        app.overlay,
        Overlay::Help(HelpView(max - 1)),
        "one key back is one line back"
    );
    app.step_here(Action::Wheel(10, 10, true));
    app.step_here(Action::Wheel(10, 10, true));
    assert_eq!(app.overlay, Overlay::Help(HelpView(max)));
    app.step_here(Action::Resize(200, 60));
    assert_eq!(
        app.overlay,
        Overlay::Help(HelpView(overlay::help_max_scroll(
            &app.theme,
            app.areas().full
        )))
    );
}

#[test]
fn replay_and_detail_scroll_no_further_than_their_text() {
    let mut app = demo_app(160, 45, true);
    for pane in [Pane::Replay, Pane::Detail] {
        app.focus = pane;
        for _ in 0..500 {
            cmds(&mut app, &[C::Down]);
        }
        let at_end = if pane == Pane::Replay {
            app.panes.replay.scroll
        } else {
            app.panes.detail.scroll
        };
        assert!(at_end < 40, "{pane:?} scrolled to {at_end}");
        cmds(&mut app, &[C::Home]);
        cmds(&mut app, &[C::End]);
        let end = if pane == Pane::Replay {
            app.panes.replay.scroll
        } else {
            app.panes.detail.scroll
        };
        assert_eq!(end, at_end, "{pane:?}: End goes to the same place");
        // The pane still shows text there.
        let a = app.areas();
        let r = if pane == Pane::Replay {
            a.replay
        } else {
            a.detail
        };
        let buf = render(&app);
        let first_row: String = (r.x + 1..r.right() - 1)
            .map(|x| buf[(x, r.y + 1)].symbol().to_string())
            .collect();
        assert!(
            !first_row.trim().is_empty(),
            "{pane:?} shows nothing at its end"
        );
    }
}

#[test]
fn an_empty_filter_says_so_and_the_title_names_the_filter_first() {
    let mut app = demo_app(120, 35, true);
    // all → scored → dummy → excluded → J_max reached: nothing in the demo stops at J_max.
    cmds(&mut app, &[C::Filter, C::Filter, C::Filter, C::Filter]);
    assert!(app.panes.execs.rows.is_empty());
    let s = screen(&app);
    assert!(s.contains("Executions 0/4 · J_max reached ·"), "{s}");
    assert!(s.contains("no execution matches filter"), "{s}");
    // Keys on the empty list do nothing and break nothing.
    app.focus = Pane::Executions;
    cmds(&mut app, &[C::Down, C::End, C::Enter]);
    cmds(&mut app, &[C::Filter]);
    assert_eq!(app.panes.execs.rows.len(), 4);
}

#[test]
fn the_export_prompt_shows_the_file_and_its_keys_on_small_terminals() {
    for (w, h) in [(80, 24), (100, 30), (160, 45)] {
        let mut app = demo_app(w, h, true);
        cmds(&mut app, &[C::Export]);
        let s = screen(&app);
        for want in [
            "file: admitted",
            "Enter writes",
            "Esc cancels",
            "advantage drgrpo",
        ] {
            assert!(s.contains(want), "{w}x{h}: {want:?} missing\n{s}");
        }
        cmds(&mut app, &[C::Escape]);
        assert_eq!(app.overlay, Overlay::None);
    }
}

#[test]
fn the_why_line_of_a_reconstructed_token_is_never_cut_off() {
    let demo = gyre_engine::demo::Demo::ClaudeCode;
    let batch = load_bytes(demo.file_name(), demo.bytes(), &LoadOptions::default()).unwrap();
    let text = gyre_text::resolve_tokenizer(None, batch.tokenizer_spec()).unwrap();
    let mut app = App::new("claude-code", Settings::default(), Theme { color: true });
    app.step_here(Action::Text(text));
    app.step_here(Action::Loaded(Ok(Box::new(batch))));
    for (w, h) in [
        (80, 24),
        (110, 35),
        (129, 40),
        (130, 40),
        (160, 45),
        (200, 55),
    ] {
        app.step_here(Action::Resize(w, h));
        let a = app.areas();
        let s = screen(&app);
        let why = why_text(&app);
        assert!(why.contains("reconstructed, not recorded"), "{w}x{h}\n{s}");
        assert!(
            why.contains("position"),
            "{w}x{h}: the why line is cut\n{s}"
        );
        // A long execution id gives way to the status.
        let execs: String = s
            .lines()
            .skip(a.execs.y as usize)
            .take(a.execs.height as usize)
            .map(|l| l.chars().take(a.execs.right() as usize).collect::<String>())
            .collect();
        assert!(execs.contains("scored"), "{w}x{h}: no status\n{s}");
    }
}

/// At 80 columns a settings change still shows every figure it moved, the selected
/// execution's `L_i` last among them: the Δ line takes the key-hint row below when one row is
/// not enough (it was cut after the batch's left-out tokens).
#[test]
fn the_change_line_keeps_the_selected_execution_on_a_narrow_terminal() {
    let synth = || synth_app(80, 24, true);
    for (w, h) in [(80, 24), (100, 30), (120, 35)] {
        let mut app = synth();
        app.step_here(Action::Resize(w, h));
        cmds(&mut app, &[C::JmaxDown]);
        let s = screen(&app);
        let rows: Vec<&str> = s.lines().collect();
        let bottom = format!(
            "{} {}",
            rows[rows.len() - 2].trim(),
            rows[rows.len() - 1].trim()
        );
        for part in [
            "J_max 5 → 4",
            "rows 19 → 16 (−3)",
            "left out 337 → 635",
            "L_i 1551 → 1374 (−177)",
        ] {
            assert!(
                bottom.contains(part),
                "{w}x{h}: {part:?} missing from {bottom:?}"
            );
        }
        // Esc hides it, and the key hints come back.
        cmds(&mut app, &[C::Escape]);
        let s = screen(&app);
        assert!(
            s.lines().last().unwrap().contains("? help"),
            "{w}x{h}:\n{s}"
        );
    }
}

/// Text a pane cuts ends in `…`: on a narrow terminal every pane title and every tree row is
/// the one drawn on a wide terminal, or a prefix of it followed by `…` (the tree widget and
/// block titles used to stop at the border mid-word or mid-number: `in 45` for `in 4523`).
#[test]
fn cut_titles_and_tree_rows_end_in_an_ellipsis() {
    let open = |w: u16, pane: u8| {
        let mut app = synth_app(w, 40, true);
        cmds(&mut app, &[C::Jump(pane), C::Zoom]);
        let s = screen(&app);
        // The zoomed pane's rows, borders and trailing blanks left out.
        let border = |c: char| "│┃─━┌┐└┘┏┓┗┛ ".contains(c);
        s.lines()
            .skip(1)
            .take(36)
            .map(|l| l.trim_matches(border).to_string())
            .collect::<Vec<_>>()
    };
    for pane in 1..=5 {
        let wide = open(250, pane);
        for w in [60, 67, 73, 80, 91, 104] {
            let narrow = open(w, pane);
            // The title, and for the tree every row.
            let rows = if pane == 2 { narrow.len() } else { 1 };
            for (k, (n, full)) in narrow.iter().zip(&wide).take(rows).enumerate() {
                let ok = n == full || n.strip_suffix('…').is_some_and(|p| full.starts_with(p));
                assert!(
                    ok,
                    "pane {pane} at {w} columns, row {k}: {n:?} is not {full:?} cut with …"
                );
            }
        }
    }
}

/// The drawn candidate stays in view when the terminal gets shorter (only the width used to
/// re-scroll the replay pane): draw 3 of e0001 in the synth demo draws its fourth candidate.
#[test]
fn the_drawn_candidate_stays_in_view_when_the_terminal_gets_shorter() {
    let mut app = synth_app(100, 40, true);
    app.apply(Effect::OpenExec(1));
    app.apply(Effect::Step(3));
    let drawn = "● r15";
    assert!(area_text(&app, app.areas().replay).contains(drawn));
    for h in [24, 20, 30, 16] {
        app.step_here(Action::Resize(100, h));
        let replay = area_text(&app, app.areas().replay);
        assert!(replay.contains(drawn), "100x{h}:\n{replay}");
    }
}
