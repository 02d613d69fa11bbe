//! Tree navigation by kind (`'` and a letter, then `>` `<`), the tree filter (`F`), and the
//! links between a `Task` call and the sub-agent it started (detail pane, Enter).

use std::collections::BTreeSet;

use gyre_engine::execution::Execution;
use gyre_engine::record::{Actor, Purpose};
use gyre_tui::app::{Action, App};
use gyre_tui::keys::Command;
use gyre_tui::overlay::Overlay;
use gyre_tui::pane::{Effect, Pane};

use crate::common::*;

fn exec(app: &App) -> &Execution {
    &app.data.as_ref().unwrap().batch.executions[app.sel.exec]
}

/// The first execution of the synth demo for which `pick` holds, opened.
fn synth_on(pick: impl Fn(&Execution) -> bool) -> App {
    let mut app = synth_app(160, 48, false);
    let i = app
        .data
        .as_ref()
        .unwrap()
        .batch
        .executions
        .iter()
        .position(pick)
        .expect("the synth demo has such an execution");
    app.apply(Effect::OpenExec(i));
    app
}

fn typed(app: &mut App, s: &str) {
    for c in s.chars() {
        app.step_here(Action::Input(c));
    }
}

fn message(app: &App) -> String {
    app.message
        .as_ref()
        .map(|m| m.text.clone())
        .unwrap_or_default()
}

/// `'` then `key`: the go-to menu closes and the selection moves.
fn go(app: &mut App, key: char) -> Option<u32> {
    cmds(app, &[Command::GoTo]);
    assert!(matches!(app.overlay, Overlay::GoTo(_)), "{:?}", app.overlay);
    app.step_here(Action::Input(key));
    assert_eq!(app.overlay, Overlay::None);
    app.sel.request
}

/// Every stop of `>` from the first, until it comes round again.
fn cycle(app: &mut App, key: char) -> Vec<u32> {
    let first = go(app, key).expect("a first one");
    let mut seen = vec![first];
    for _ in 0..200 {
        cmds(app, &[Command::GoNext]);
        let r = app.sel.request.unwrap();
        if r == first {
            return seen;
        }
        seen.push(r);
    }
    panic!("> never came back round: {seen:?}");
}

/// The first request of every policy agent other than the main one, from the records.
fn sub_agent_roots(e: &Execution) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for (i, r) in e.requests.iter().enumerate() {
        if r.agent != "main" && r.actor == Actor::Policy && seen.insert(r.agent.clone()) {
            out.insert(i as u32);
        }
    }
    out
}

#[test]
fn s_visits_each_sub_agent_root_once_then_wraps() {
    let mut app = synth_on(|e| !sub_agent_roots(e).is_empty());
    let want = sub_agent_roots(exec(&app));
    let seen = cycle(&mut app, 's');
    assert_eq!(seen.iter().copied().collect::<BTreeSet<_>>(), want);
    assert_eq!(seen.len(), want.len(), "each once: {seen:?}");
    assert_eq!(app.focus, Pane::Tree, "the tree shows where it went");
    assert!(
        message(&app).contains("wrapped to the first"),
        "{}",
        message(&app)
    );
}

#[test]
fn o_and_d_visit_the_candidates_and_the_leaves_drawn_so_far() {
    let mut app = synth_on(|e| e.requests.len() > 8);
    let adm = &app.data.as_ref().unwrap().results.admissions[app.sel.exec];
    let candidates: BTreeSet<u32> = adm.candidates.iter().map(|c| c.request).collect();
    let drawn: Vec<u32> = adm.draws.iter().map(|d| d.chosen).collect();
    assert!(drawn.len() >= 2, "needs two draws: {drawn:?}");
    let seen = cycle(&mut app, 'o');
    assert_eq!(seen.iter().copied().collect::<BTreeSet<_>>(), candidates);
    // At draw 1 only the first draw's leaf is drawn.
    cmds(&mut app, &[Command::DrawFirst, Command::DrawNext]);
    assert_eq!(cycle(&mut app, 'd'), vec![drawn[0]]);
    cmds(&mut app, &[Command::DrawFirst]);
    let before = app.sel.request;
    cmds(&mut app, &[Command::GoNext]);
    assert_eq!(app.sel.request, before, "nothing drawn at draw 0");
    assert!(
        message(&app).contains("no drawn in") && message(&app).contains("at draw 0"),
        "{}",
        message(&app)
    );
}

/// Candidates of the execution open, from the admission.
fn candidates(app: &App) -> BTreeSet<u32> {
    app.data.as_ref().unwrap().results.admissions[app.sel.exec]
        .candidates
        .iter()
        .map(|c| c.request)
        .collect()
}

#[test]
fn upper_case_and_less_than_go_backwards() {
    let mut app = synth_app(160, 48, false);
    let n = app.data.as_ref().unwrap().batch.executions.len();
    let i = (0..n)
        .find(|&i| {
            app.data.as_ref().unwrap().results.admissions[i]
                .candidates
                .len()
                >= 3
        })
        .expect("an execution with three candidates");
    app.apply(Effect::OpenExec(i));
    let forward = cycle(&mut app, 'o');
    assert!(forward.len() >= 3);
    let last = go(&mut app, 'O');
    // Round the cycle: the one before the first stop is the last.
    assert_eq!(last, forward.last().copied(), "{forward:?}");
    cmds(&mut app, &[Command::GoPrev]);
    assert_eq!(app.sel.request, Some(forward[forward.len() - 2]));
}

#[test]
fn c_stops_at_every_compaction_summary() {
    let mut app = synth_on(|e| e.requests.iter().any(|r| r.purpose == Purpose::Summary));
    let summaries: BTreeSet<u32> = exec(&app)
        .requests
        .iter()
        .enumerate()
        .filter(|(_, r)| r.purpose == Purpose::Summary)
        .map(|(i, _)| i as u32)
        .collect();
    let seen: BTreeSet<u32> = cycle(&mut app, 'c').into_iter().collect();
    assert!(summaries.is_subset(&seen), "{summaries:?} ⊄ {seen:?}");
}

#[test]
fn a_letter_that_names_no_kind_says_which_do() {
    let mut app = synth_app(120, 40, false);
    cmds(&mut app, &[Command::GoTo]);
    app.step_here(Action::Input('z'));
    assert!(matches!(app.overlay, Overlay::GoTo(_)));
    assert!(message(&app).contains("one of csrvod"), "{}", message(&app));
    cmds(&mut app, &[Command::Escape]);
    cmds(&mut app, &[Command::GoNext]);
    assert!(
        message(&app).starts_with("no kind chosen yet"),
        "{}",
        message(&app)
    );
}

/// `F`, the terms, Enter.
fn filter(app: &mut App, terms: &str) {
    cmds(app, &[Command::TreeFilter]);
    app.step_here(Action::ClearField);
    typed(app, &format!("tree-filter {terms}"));
    cmds(app, &[Command::Enter]);
    assert_eq!(app.overlay, Overlay::None);
}

#[test]
fn the_filter_keeps_the_matches_and_the_items_above_them() {
    let mut app = synth_on(|e| {
        e.requests.iter().any(|r| {
            r.tool_calls
                .iter()
                .any(|c| c.name.as_deref() == Some("Task"))
        })
    });
    let want: BTreeSet<u32> = exec(&app)
        .requests
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            r.tool_calls
                .iter()
                .any(|c| c.name.as_deref().is_some_and(|n| n.contains("Task")))
        })
        .map(|(i, _)| i as u32)
        .collect();
    filter(&mut app, "task");
    assert!(message(&app).starts_with(&format!("tree filter \"task\": {} of", want.len())));
    assert!(
        want.contains(&app.sel.request.unwrap()),
        "a match is selected"
    );
    let rows = app.panes.tree.visible();
    let shown: BTreeSet<u32> = rows
        .iter()
        .filter_map(|p| app.panes.tree.rtree.request_of(p))
        .collect();
    assert!(want.is_subset(&shown));
    // Every row is a match or leads to one.
    for p in &rows {
        let below_match = rows
            .iter()
            .any(|q| q.starts_with(p) && want.contains(q.last().unwrap()));
        assert!(below_match, "row {p:?} leads to no match");
    }
    let title = screen(&app);
    assert!(
        title.contains(&format!("Tree · filter \"task\": {} of", want.len())),
        "{title}"
    );
    // go-to stays among the matches.
    let seen = cycle(&mut app, 's');
    assert!(seen.iter().all(|r| want.contains(r)) || seen.is_empty());
    // An empty filter clears it.
    filter(&mut app, "");
    assert!(app.panes.tree.filter.is_none());
    assert_eq!(message(&app), "tree filter cleared");
}

#[test]
fn filter_terms_combine_and_kinds_are_terms() {
    let mut app = synth_on(|e| !sub_agent_roots(e).is_empty());
    let roots = sub_agent_roots(exec(&app));
    filter(&mut app, "sub-agent");
    assert!(
        message(&app).starts_with(&format!("tree filter \"sub-agent\": {} of", roots.len())),
        "{}",
        message(&app)
    );
    // Both terms hold: candidates of the main agent.
    let want = candidates(&app)
        .into_iter()
        .filter(|&r| exec(&app).requests[r as usize].agent == "main")
        .count();
    filter(&mut app, "candidate MAIN");
    assert!(
        message(&app).starts_with(&format!("tree filter \"candidate MAIN\": {want} of")),
        "{}",
        message(&app)
    );
    filter(&mut app, "no-such-thing");
    assert!(
        message(&app).contains("no request matches"),
        "{}",
        message(&app)
    );
}

/// Opens the detail pane on the selected request, scrolled to the top, and presses Enter.
fn follow(app: &mut App) -> String {
    cmds(app, &[Command::Jump(6), Command::Home, Command::Enter]);
    message(app)
}

#[test]
fn enter_on_a_task_call_opens_the_sub_agent_and_back() {
    let mut app = synth_on(|e| !sub_agent_roots(e).is_empty());
    let e = exec(&app);
    // The link, from the records: the sub-agent's meta.task_call_id, the request that made it.
    let (root, call_id) = sub_agent_roots(e)
        .into_iter()
        .find_map(|r| {
            let id = e.requests[r as usize].meta.as_ref()?.get("task_call_id")?;
            Some((r, id.as_str()?.to_string()))
        })
        .expect("synth writes meta.task_call_id");
    let caller = e
        .requests
        .iter()
        .position(|r| r.tool_calls.iter().any(|c| c.id == call_id))
        .expect("the call is in an output") as u32;
    let agent = e.requests[root as usize].agent.clone();
    app.apply(Effect::SelectRequest(caller));
    let shown = screen(&app);
    assert!(
        shown.contains(&format!("⇒ Task call {call_id} started sub-agent {agent}")),
        "{shown}"
    );
    let said = follow(&mut app);
    assert_eq!(app.sel.request, Some(root), "{said}");
    assert!(said.starts_with(&format!("sub-agent {agent}: ")), "{said}");
    let shown = screen(&app);
    assert!(
        shown.contains(&format!(
            "⇐ sub-agent {agent} was started by Task call {call_id}"
        )),
        "{shown}"
    );
    follow(&mut app);
    assert_eq!(app.sel.request, Some(caller));
}

#[test]
fn enter_where_no_link_is_in_view_says_so() {
    let mut app = synth_on(|e| e.requests.len() > 2);
    app.apply(Effect::SelectRequest(0));
    let said = follow(&mut app);
    assert_eq!(app.sel.request, Some(0));
    assert!(said.starts_with("nothing to follow here"), "{said}");
}

#[test]
fn a_click_on_any_row_of_a_wrapped_link_follows_it() {
    // Narrow enough that the link line wraps in the detail pane.
    let mut app = synth_on(|e| !sub_agent_roots(e).is_empty());
    app.step_here(Action::Resize(132, 48));
    let e = exec(&app);
    let root = *sub_agent_roots(e).iter().next().unwrap();
    let call_id = e.requests[root as usize].meta.as_ref().unwrap()["task_call_id"]
        .as_str()
        .unwrap()
        .to_string();
    let caller = e
        .requests
        .iter()
        .position(|r| r.tool_calls.iter().any(|c| c.id == call_id))
        .unwrap() as u32;
    app.apply(Effect::SelectRequest(caller));
    let a = app.areas().detail;
    assert!(a.width > 0, "the detail pane is on screen at 132 columns");
    let buf = render(&app);
    let row_text = |y: u16| -> String { (a.x..a.right()).map(|x| buf[(x, y)].symbol()).collect() };
    let first = (a.y..a.bottom())
        .find(|&y| row_text(y).contains("⇒ Task call"))
        .expect("the link is in view");
    // Its second row (the line wraps at this width) is a part of the same link.
    assert!(
        !row_text(first).contains("Enter follows"),
        "wraps: {}",
        row_text(first)
    );
    app.step_here(Action::Click(a.x + 3, first + 1));
    assert_eq!(app.sel.request, Some(root));
}
