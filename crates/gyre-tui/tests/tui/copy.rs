//! `Y`: the copy menu puts an id, a segment or a `gyre` command on the clipboard (sent by the
//! run loop as OSC 52) and the status line says what was copied.

use gyre_tui::app::{Action, App};
use gyre_tui::copy::shell_word;
use gyre_tui::keys::Command;
use gyre_tui::overlay::Overlay;

use crate::common::*;

fn copy(app: &mut App, key: char) -> String {
    cmds(app, &[Command::Copy]);
    assert!(matches!(app.overlay, Overlay::Copy(_)), "{:?}", app.overlay);
    app.step_here(Action::Input(key));
    assert_eq!(app.overlay, Overlay::None);
    app.clipboard.take().expect("something copied")
}

fn demo() -> App {
    let mut app = demo_app(120, 40, false);
    app.inputs = vec!["assets/demo/example.jsonl".into()];
    app
}

#[test]
fn y_e_copies_the_execution_id_and_says_so() {
    let mut app = demo();
    let id = app.data.as_ref().unwrap().batch.executions[app.sel.exec]
        .id
        .clone();
    assert_eq!(copy(&mut app, 'e'), id);
    let m = &app.message.as_ref().unwrap().text;
    assert!(
        m.starts_with(&format!(
            "copied to the clipboard (OSC 52), execution id: {id} ("
        )),
        "{m}"
    );
    assert!(screen(&app).contains("copied to the clipboard (OSC 52), execution id"));
}

#[test]
fn the_segment_ids_are_those_under_the_token_cursor() {
    let mut app = demo();
    cmds(&mut app, &[Command::Jump(4), Command::NextSegment]);
    let (d, v) = (app.data.as_ref().unwrap(), app.path().unwrap());
    let exec = &d.batch.executions[app.sel.exec];
    let (n, _) = v.index.node_at(v.cursor);
    let node = &exec.tree.nodes[n as usize];
    let (first, len) = (exec.tree.tokens[node.start as usize], node.len as usize);
    let ids = copy(&mut app, 'i');
    assert!(ids.starts_with(&format!("[{first}")), "{ids}");
    assert_eq!(ids.split(',').count(), len);
}

#[test]
fn the_why_command_names_the_highlighted_candidate_and_the_settings_on_screen() {
    let mut app = demo();
    cmds(&mut app, &[Command::JmaxUp]);
    assert!(!app.rerunning());
    cmds(
        &mut app,
        &[Command::Jump(3), Command::DrawFirst, Command::Down],
    );
    let r = app.why_request().expect("a request");
    let d = app.data.as_ref().unwrap();
    let exec = &d.batch.executions[app.sel.exec];
    let expected = format!(
        "gyre why assets/demo/example.jsonl --execution {} --request {} --jmax 6",
        exec.id, exec.requests[r as usize].id
    );
    assert_eq!(copy(&mut app, 'w'), expected);
}

#[test]
fn the_show_command_carries_the_colouring_and_the_draw() {
    let mut app = demo();
    cmds(
        &mut app,
        &[Command::DrawFirst, Command::DrawNext, Command::Colour],
    );
    let cmd = copy(&mut app, 's');
    assert!(
        cmd.starts_with("gyre show assets/demo/example.jsonl --execution "),
        "{cmd}"
    );
    assert!(cmd.ends_with(" --color logprob --draw 1"), "{cmd}");
}

#[test]
fn at_draw_0_the_show_command_says_it_shows_the_admitted_state() {
    let mut app = demo();
    cmds(&mut app, &[Command::DrawFirst]);
    let cmd = copy(&mut app, 's');
    // `gyre show --draw` counts from 1.
    assert!(!cmd.contains("--draw"), "{cmd}");
    let m = &app.message.as_ref().unwrap().text;
    assert!(
        m.starts_with("copied to the clipboard (OSC 52), gyre show at n/n: "),
        "{m}"
    );
}

#[test]
fn a_letter_the_menu_does_not_list_says_which_do() {
    let mut app = demo();
    cmds(&mut app, &[Command::Copy]);
    app.step_here(Action::Input('z'));
    assert!(matches!(app.overlay, Overlay::Copy(_)));
    assert!(app.clipboard.is_none());
    let m = &app.message.as_ref().unwrap().text;
    assert!(m.starts_with("'z' copies nothing: one of er"), "{m}");
    cmds(&mut app, &[Command::Escape]);
    assert_eq!(app.overlay, Overlay::None);
}

#[test]
fn a_path_with_a_space_is_one_shell_word() {
    assert_eq!(shell_word("runs/a.jsonl"), "runs/a.jsonl");
    assert_eq!(shell_word("my runs/a.jsonl"), "'my runs/a.jsonl'");
    assert_eq!(shell_word("it's"), r"'it'\''s'");
}
