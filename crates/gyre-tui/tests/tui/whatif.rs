//! The inspector's what-if views, driven through `App::step` and snapshotted from
//! `TestBackend`: the lens colouring and why line, pinned settings and the compare view with
//! flips, the trainer's-eye row, the dashboard, and the lens worked out in the background.

use crate::common::*;
use gyre_engine::admit::{Class, Settings};
use gyre_engine::lens::{self, LensOptions};
use gyre_engine::paint::{ColorMode, Tone};
use gyre_engine::rows;
use gyre_engine::stats::{self, breakdown};
use gyre_tui::app::{App, Jobs};
use gyre_tui::keys::Command as C;
use gyre_tui::overlay::{CompareView, Overlay, RowView};
use gyre_tui::pane::Effect;
use gyre_tui::whatif::SWEEP_JMAX;

/// The demo at 160×45 with a lens of 16 seeds.
fn app() -> App {
    let mut app = demo_app(160, 45, true);
    app.lens_seeds = 16;
    app
}

fn colour_to(app: &mut App, mode: ColorMode) {
    for _ in 0..6 {
        if app.colour == mode {
            return;
        }
        cmds(app, &[C::Colour]);
    }
    panic!("colour {mode:?} is not in the cycle");
}

fn open(app: &mut App, exec: &str, request: &str) {
    let d = app.data.as_ref().unwrap();
    let i = d.batch.execution_index(exec).unwrap();
    let r = d.batch.executions[i].request_index(request).unwrap();
    app.apply(Effect::OpenExec(i));
    app.apply(Effect::SelectRequest(r));
}

#[test]
fn lens_colours_tokens_by_their_share_of_seeds() {
    let mut app = app();
    cmds(
        &mut app,
        &[C::JmaxDown, C::JmaxDown, C::JmaxDown, C::JmaxDown],
    );
    colour_to(&mut app, ColorMode::Lens);
    let w = app
        .whatif()
        .expect("worked out in place when shown (no workers)");
    assert_eq!(w.options.seeds, 16);
    open(&mut app, "e1", "r7");
    // The cursor sits on r7's first output token; the lens is the engine's.
    let d = app.data.as_ref().unwrap();
    let i = app.sel.exec;
    let exec = &d.batch.executions[i];
    let l = lens::execution_lens(
        exec,
        &d.results.outcomes[i],
        &LensOptions {
            seed: 0,
            seeds: 16,
            priority: Class::DEFAULT_PRIORITY.to_vec(),
        },
    );
    let n = exec.requests[exec.request_index("r7").unwrap() as usize].output_node;
    let odds = l.node(n, 1).unwrap();
    let why = why_text(&app);
    assert!(why.contains(&odds.brief()), "{why}");
    assert!(why.contains("left out: J_max reached"), "{why}");
    assert!(why.contains("seed 0: from J_max 2"), "{why}");
    let tone = app
        .ctx()
        .unwrap()
        .exec_view()
        .tone(n, 0, ColorMode::Lens, None);
    assert_eq!(
        tone,
        Tone::Lens(gyre_engine::paint::lens_bucket(odds.fraction()))
    );
    insta::assert_snapshot!("lens_view", screen(&app));
}

#[test]
fn a_pin_compares_settings_and_colours_the_flips() {
    let mut app = app();
    cmds(&mut app, &[C::Compare]);
    assert_eq!(app.overlay, Overlay::None);
    assert!(
        app.message
            .as_ref()
            .unwrap()
            .text
            .starts_with("nothing pinned")
    );
    cmds(&mut app, &[C::Pin]);
    assert!(app.pinned.is_some());
    cmds(
        &mut app,
        &[
            C::JmaxDown,
            C::JmaxDown,
            C::JmaxDown,
            C::JmaxDown,
            C::Compare,
        ],
    );
    assert_eq!(app.overlay, Overlay::Compare(CompareView(0)));
    let s = screen(&app);
    assert!(s.contains("A: seed 0 · J_max 5"), "{s}");
    assert!(s.contains("B: seed 0 · J_max 1"), "{s}");
    // The listed lines are `gyre diff`'s.
    let d = app.data.as_ref().unwrap();
    let pinned = app.pinned.as_ref().unwrap();
    let diff = gyre_engine::diff::diff(
        gyre_engine::diff::Side {
            batch: &d.batch,
            results: &pinned.results,
        },
        gyre_engine::diff::Side {
            batch: &d.batch,
            results: &d.results,
        },
    );
    let lines = gyre_engine::report::diff_lines(&diff, "a", "b");
    for (_, row) in &lines.table {
        assert!(s.contains(row.as_str()), "{row}\n{s}");
    }
    insta::assert_snapshot!("compare_view", s);
    // Enter opens the first listed execution on its first flip, coloured by flips.
    let first = gyre_tui::overlay::compare::listed(&diff)[0];
    cmds(&mut app, &[C::Enter]);
    assert_eq!(app.overlay, Overlay::None);
    assert_eq!(app.sel.exec, first);
    assert_eq!(app.colour, ColorMode::Flips);
    let ctx = app.ctx().unwrap();
    let v = app.path().unwrap();
    let (n, k) = v.index.node_at(v.cursor);
    assert_eq!(
        ctx.exec_view().tone(n, k, ColorMode::Flips, None),
        Tone::Lost
    );
    assert!(why_text(&app).contains("(flips)"), "{}", why_text(&app));
    // Dropping the pin leaves the flips colouring.
    cmds(&mut app, &[C::Pin]);
    assert!(app.pinned.is_none());
    assert_eq!(app.colour, ColorMode::Claims);
}

#[test]
fn the_row_view_shows_the_exported_row() {
    let mut app = app();
    open(&mut app, "e1", "r3");
    app.apply(Effect::Step(2));
    cmds(&mut app, &[C::Row]);
    let d = app.data.as_ref().unwrap();
    let row = rows::draw_row(&d.batch, &d.results, app.sel.exec, 2).unwrap();
    assert_eq!(
        row,
        rows::execution_rows(&d.batch, &d.results, app.sel.exec)[1],
        "the row of draw 2 is the second exported row"
    );
    let s = screen(&app);
    assert!(s.contains(&format!("prompt_len {}", row.prompt_len)), "{s}");
    assert!(s.contains(&format!("L_i {}", row.exec_targets)), "{s}");
    assert!(s.contains("loss weight = advantage × mask ÷ L_i"), "{s}");
    // The first response token's id, mask and log-prob, as exported.
    let first = row.tokens[row.prompt_len as usize];
    let lp = row.logprobs.as_ref().unwrap()[0];
    let line = s
        .lines()
        .find(|l| {
            l.contains(&format!(" {}  ", row.prompt_len + 1)) && l.contains(&first.to_string())
        })
        .unwrap_or_else(|| panic!("the first response token's row\n{s}"));
    assert!(line.contains(&format!("{lp:.4}")), "{line}");
    insta::assert_snapshot!("row_view", s);
    // [ and ] show the other draws' rows.
    cmds(&mut app, &[C::DrawPrev]);
    assert_eq!(app.sel.step, 1);
    assert!(matches!(app.overlay, Overlay::Row(RowView(0))));
    let s = screen(&app);
    assert!(s.contains("draw 1/"), "{s}");
    cmds(&mut app, &[C::Row]);
    assert_eq!(app.overlay, Overlay::None);
}

#[test]
fn the_dashboard_counts_every_token_and_jumps_to_examples() {
    let mut app = app();
    cmds(&mut app, &[C::Dashboard]);
    let b = app
        .breakdown()
        .expect("counted when the dashboard opens")
        .clone();
    let d = app.data.as_ref().unwrap();
    let st = stats::stats(&d.batch, &d.results);
    assert_eq!(
        b.provenance.iter().map(|x| x.tokens).sum::<u64>(),
        st.tree_tokens
    );
    let target = b.provenance.iter().find(|x| x.label == "target").unwrap();
    assert_eq!(target.tokens, st.targets);
    let left: u64 = b.left_out[..2].iter().map(|x| x.tokens).sum();
    assert_eq!(left, st.left_out_tokens);
    assert_eq!(b, breakdown(&d.batch, &d.results));
    assert!(
        app.whatif().is_some(),
        "the sweep is worked out for the cost chart"
    );
    insta::assert_snapshot!("dashboard", screen(&app));
    // Tab to the rows chart, the third execution, Enter opens it.
    cmds(
        &mut app,
        &[C::FocusNext, C::FocusNext, C::Right, C::Right, C::Enter],
    );
    assert_eq!(app.overlay, Overlay::None);
    assert_eq!(app.sel.exec, 2);
    // The first token counted as tool output is shown, the cursor on it.
    cmds(&mut app, &[C::Dashboard]);
    let tool = b.provenance.iter().position(|x| x.label == "tool").unwrap();
    let mut c = vec![C::Right; tool];
    c.push(C::Enter);
    cmds(&mut app, &c);
    let ex = b.provenance[tool].example.unwrap();
    assert_eq!(app.sel.exec, ex.exec);
    let v = app.path().unwrap();
    assert_eq!(v.index.node_at(v.cursor), (ex.node, ex.index));
    // On the cost chart Enter re-runs with the J_max chosen.
    cmds(&mut app, &[C::Dashboard, C::FocusPrev, C::Home, C::Enter]);
    assert_eq!(app.settings.jmax, SWEEP_JMAX[0]);
    assert_eq!(app.data.as_ref().unwrap().results.settings.jmax, 1);
}

#[test]
fn the_lens_is_worked_out_in_the_background_with_progress() {
    let mut app = app();
    let (jobs, rx) = Jobs::channel();
    cmds_on(&mut app, &jobs, &[C::SeedUp]);
    pump_until(&mut app, &jobs, &rx, |app| {
        !app.rerunning() && app.whatif().is_some()
    });
    let w = app.whatif().unwrap();
    assert_eq!(w.options.seed, 1);
    // Same figures as the engine's own sweep under those settings.
    let d = app.data.as_ref().unwrap();
    let s = gyre_engine::sweep::sweep(&d.batch, &w.sweep.options);
    assert_eq!(s, w.sweep);
    colour_to(&mut app, ColorMode::Lens);
    assert!(!screen(&app).contains("lens computing"));
    // A priority change makes the lens stale until the new one arrives.
    cmds_on(&mut app, &jobs, &[C::Priority]);
    pump_until(&mut app, &jobs, &rx, |app| !app.rerunning());
    let new = Settings {
        seed: 1,
        priority: app.settings.priority.clone(),
        ..Settings::default()
    };
    assert_eq!(app.data.as_ref().unwrap().results.settings, new);
    pump_until(&mut app, &jobs, &rx, |app| app.whatif().is_some());
    assert_eq!(app.whatif().unwrap().options.priority, new.priority);
}

#[test]
fn a_what_if_for_settings_left_behind_is_dropped() {
    let mut app = app();
    colour_to(&mut app, ColorMode::Lens);
    let current = app
        .whatif_done
        .clone()
        .expect("worked out for the lens colouring");
    let d = app.data.as_ref().unwrap();
    let mut old = d.results.settings.clone();
    old.seed = 9;
    let stale = gyre_tui::whatif::WhatIf::compute(
        std::sync::Arc::clone(&d.batch),
        gyre_tui::whatif::WhatIf::options_for(&old, 16),
        &|_, _| {},
    );
    app.step_here(gyre_tui::app::Action::WhatIf(std::sync::Arc::new(stale)));
    assert!(std::sync::Arc::ptr_eq(
        app.whatif_done.as_ref().unwrap(),
        &current
    ));
    assert!(app.whatif().is_some());
}

/// The synth demo at `w`×`h`, its lens over 4 seeds.
fn synth_lens_app(w: u16, h: u16) -> App {
    let mut app = synth_app(w, h, false);
    app.lens_seeds = 4;
    app
}

#[test]
fn dashboard_bars_go_to_the_first_token_they_count() {
    // Splits give the head of a node the new id: the first node in id order holding template
    // or system tokens is not the one at the start of the path.
    let mut app = synth_lens_app(160, 45);
    for (label, pos) in [("template", 0), ("system", 3)] {
        cmds(&mut app, &[C::Dashboard]);
        let b = app.breakdown().unwrap();
        let at = b.provenance.iter().position(|x| x.label == label).unwrap();
        let mut c = vec![C::Home];
        c.extend(vec![C::Right; at]);
        c.push(C::Enter);
        cmds(&mut app, &c);
        assert_eq!(app.sel.exec, 0, "{label}");
        assert_eq!(cursor(&app), pos, "{label}: {}", why_text(&app));
        assert!(
            why_text(&app).contains(&format!("span {label}")),
            "{}",
            why_text(&app)
        );
    }
}

#[test]
fn dashboard_keeps_the_selected_bar_in_view_on_small_terminals() {
    // 80×24: twelve provenance bars do not fit; the selected one stays on screen.
    let mut app = synth_lens_app(80, 24);
    cmds(&mut app, &[C::Dashboard, C::End]);
    let last = app.breakdown().unwrap().provenance.last().unwrap().label;
    // (The footer names it too: look inside the focused chart's thick border.)
    let s = screen(&app);
    assert!(s.contains(&format!("┃{last}")), "{s}");
    // The left-out chart too.
    cmds(&mut app, &[C::FocusNext, C::End]);
    let s = screen(&app);
    assert!(s.contains("┃dummy execution"), "{s}");
    // 60×16: too low for every chart; the focused one fills the box, the axes show.
    let mut app = synth_lens_app(60, 16);
    cmds(&mut app, &[C::Dashboard, C::FocusPrev]);
    let s = screen(&app);
    assert!(s.contains('∞') && s.contains("100%"), "{s}");
    cmds(&mut app, &[C::FocusPrev]);
    let s = screen(&app);
    assert!(s.contains("groups"), "{s}");
    cmds(&mut app, &[C::FocusPrev]);
    assert!(screen(&app).contains("rows per execution"));
    cmds(&mut app, &[C::FocusPrev, C::End]);
    let s = screen(&app);
    assert!(s.contains("┃dummy execution"), "{s}");
}

#[test]
fn the_row_view_keeps_its_numbers_on_a_narrow_terminal() {
    let mut app = synth_lens_app(60, 16);
    cmds(&mut app, &[C::Row]);
    let d = app.data.as_ref().unwrap();
    let row = rows::draw_row(&d.batch, &d.results, app.sel.exec, app.sel.step).unwrap();
    let s = screen(&app);
    assert!(s.contains("loss weight"), "{s}");
    // The first response token's row: position, id, mask, log-prob and weight all shown.
    let first = row.tokens[row.prompt_len as usize];
    let lp = row.logprobs.as_ref().unwrap()[0];
    let line = s
        .lines()
        .find(|l| l.contains(&format!("{} ", row.prompt_len + 1)) && l.contains(&first.to_string()))
        .unwrap_or_else(|| panic!("the first response token's row\n{s}"));
    let w = row.advantage.flatten().unwrap_or(1.0) * row.weight;
    let w = if w.abs() >= 1e-3 {
        format!("{w:+.4}")
    } else {
        format!("{w:+.3e}")
    };
    assert!(line.contains(&format!("{lp:.4}")), "{line}");
    assert!(line.contains(&w), "{line}\n{s}");
}

#[test]
fn the_lens_progress_shows_beside_what_a_change_did() {
    let mut app = app();
    colour_to(&mut app, ColorMode::Lens);
    let (jobs, rx) = Jobs::channel();
    cmds_on(&mut app, &jobs, &[C::SeedUp]);
    // The re-run lands (and starts the new lens): the status line says what changed and that
    // the lens colouring waits for the worker.
    pump_until(&mut app, &jobs, &rx, |app| !app.rerunning());
    assert!(app.whatif().is_none());
    let status = screen(&app)
        .lines()
        .nth(app.size.1 as usize - 2)
        .unwrap()
        .to_string();
    assert!(status.contains("Δ seed 0 → 1"), "{status}");
    assert!(
        status.contains("lens: looking through 16 seeds…"),
        "{status}"
    );
    pump_until(&mut app, &jobs, &rx, |app| app.whatif().is_some());
    let status = screen(&app)
        .lines()
        .nth(app.size.1 as usize - 2)
        .unwrap()
        .to_string();
    assert!(!status.contains("looking through"), "{status}");
}
