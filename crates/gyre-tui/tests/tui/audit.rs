//! The audit in the inspector: the samples of an execution on its tree, the `audit` and `gap`
//! colourings with their legends, the audit view's jumps and the why line's verdict, at 80×24.

use gyre_engine::audit::Kind;
use gyre_engine::paint::{ColorMode, Tone};
use gyre_tui::keys::Command as C;
use gyre_tui::overlay::{AuditTab, AuditView, Overlay};
use gyre_tui::vocab::Effect;

use crate::common::*;

/// `c` until the colouring is `mode` (at most once round the cycle).
fn colour(app: &mut gyre_tui::app::App, mode: ColorMode) {
    for _ in 0..ColorMode::ALL.len() {
        if app.colour == mode {
            return;
        }
        cmds(app, &[C::Colour]);
    }
    assert_eq!(app.colour, mode, "c never reaches {}", mode.name());
}

#[test]
fn the_colour_cycle_has_audit_and_gap_only_with_trained_samples() {
    let mut app = audited_app(80, 24, true);
    assert!(app.audit().is_some(), "the audit runs once the batch loads");
    colour(&mut app, ColorMode::Audit);
    let s = screen(&app);
    for label in ["audit:", "trained, agreeing", "trained, not sampled"] {
        assert!(s.contains(label), "no {label:?} in the legend:\n{s}");
    }
    colour(&mut app, ColorMode::Gap);
    let s = screen(&app);
    assert!(s.contains("gap:") && s.contains("Δ≤−1"), "{s}");
    // The demo has no trained sample: c never stops on them.
    let mut demo = demo_app(120, 40, true);
    for _ in 0..2 * ColorMode::ALL.len() {
        cmds(&mut demo, &[C::Colour]);
        assert!(!matches!(demo.colour, ColorMode::Audit | ColorMode::Gap));
    }
    cmds(&mut demo, &[C::Audit]);
    assert_eq!(demo.overlay, Overlay::None);
    assert!(screen(&demo).contains("no trained samples to audit"));
}

#[test]
fn enter_on_a_finding_puts_the_cursor_on_its_first_token_at_80x24() {
    let mut app = audited_app(80, 24, true);
    let audit = app.audit().unwrap();
    let kinds: Vec<Kind> = audit.findings.iter().map(|f| f.kind).collect();
    assert!(kinds.contains(&Kind::TrainedNotSampled), "{kinds:?}");
    assert!(kinds.contains(&Kind::TrainedTwice), "{kinds:?}");
    cmds(&mut app, &[C::Audit]);
    assert!(matches!(app.overlay, Overlay::Audit(_)));
    let s = screen(&app);
    assert!(s.contains("trained_not_sampled (1)"), "{s}");
    assert!(s.contains("trained_twice (1)"), "{s}");
    // The first finding by kind is the tool result sample b trains.
    cmds(&mut app, &[C::Home, C::Enter]);
    assert_eq!(app.overlay, Overlay::None);
    assert_eq!(app.colour, ColorMode::Audit);
    let e1 = app
        .data
        .as_ref()
        .unwrap()
        .batch
        .execution_index("e1")
        .unwrap();
    assert_eq!(app.sel.exec, e1);
    assert_eq!(app.sel.sample, Some(1));
    assert_eq!(path_request(&app), Some(1), "r2's path");
    assert_eq!(cursor(&app), 7, "the first token of the tool result");
    let why = why_text(&app);
    assert!(
        why.contains("audit: trained, not sampled") && why.contains("trained_not_sampled"),
        "{why}"
    );
    assert!(why.contains("sample b trains it"), "{why}");
    // The colour of that token is the engine's tone for it.
    let ctx = app.ctx().unwrap();
    let (n, i) = app.path().unwrap().index.node_at(7);
    assert_eq!(
        ctx.exec_view().tone(n, i, ColorMode::Audit, None),
        Tone::TrainedNotSampled
    );
    assert!(
        screen(&app).contains("sample b"),
        "the token pane names the sample"
    );
}

#[test]
fn the_samples_list_highlights_a_sample_and_the_why_line_gives_the_gap() {
    let mut app = audited_app(80, 24, true);
    let e1 = app
        .data
        .as_ref()
        .unwrap()
        .batch
        .execution_index("e1")
        .unwrap();
    app.apply(Effect::OpenExec(e1));
    cmds(&mut app, &[C::Audit, C::FocusNext]);
    assert!(matches!(
        app.overlay,
        Overlay::Audit(AuditView {
            tab: AuditTab::Samples,
            ..
        })
    ));
    let s = screen(&app);
    assert!(s.contains("a · 7 tokens (3 prompt) · 4 trained"), "{s}");
    // Sample a: highlighted, the cursor on the first token it trains.
    cmds(&mut app, &[C::Home, C::Enter]);
    assert_eq!(app.sel.sample, Some(0));
    assert_eq!(path_request(&app), Some(0));
    assert_eq!(cursor(&app), 3);
    cmds(&mut app, &[C::Right, C::Right]);
    let why = why_text(&app);
    assert!(why.contains("Δ trainer − behaviour −1.400"), "{why}");
    assert!(why.contains("in 2 samples"), "{why}");
    colour(&mut app, ColorMode::Gap);
    let ctx = app.ctx().unwrap();
    let (n, i) = app.path().unwrap().index.node_at(5);
    assert_eq!(
        ctx.exec_view().tone(n, i, ColorMode::Gap, None),
        Tone::Gap(0)
    );
    // Enter on the highlighted sample clears the highlight.
    cmds(&mut app, &[C::Audit, C::FocusNext, C::Home, C::Enter]);
    assert_eq!(app.sel.sample, None);
    // Another execution: no sample is highlighted there.
    cmds(&mut app, &[C::Audit, C::FocusNext, C::Home, C::Enter]);
    assert_eq!(app.sel.sample, Some(0));
    let e2 = app
        .data
        .as_ref()
        .unwrap()
        .batch
        .execution_index("e2")
        .unwrap();
    app.apply(Effect::OpenExec(e2));
    assert_eq!(app.sel.sample, None);
}
