//! The one key-binding table: it drives key handling, the key-hint bar, the `?` help overlay
//! and the generated `docs/keys.md`.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Everything a key can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    /// Quit with status 0.
    Quit,
    /// Toggle the help overlay.
    Help,
    /// Close the overlay (or clear the search).
    Escape,
    /// Next pane (screen order).
    FocusNext,
    /// Previous pane.
    FocusPrev,
    /// Focus pane number `n` (1–6).
    Jump(u8),
    /// The focused pane fills the screen (again: back).
    Zoom,
    /// Up one item / row.
    Up,
    /// Down one item / row.
    Down,
    /// Left (collapse in the tree, previous token in the tokens pane).
    Left,
    /// Right (expand in the tree, next token in the tokens pane).
    Right,
    /// Up one page.
    PageUp,
    /// Down one page.
    PageDown,
    /// To the first item / token.
    Home,
    /// To the last item / token.
    End,
    /// Open / jump / confirm.
    Enter,
    /// Next segment (node) of the path.
    NextSegment,
    /// Previous segment of the path.
    PrevSegment,
    /// Tokens: start of the next run of targets.
    NextTarget,
    /// Tokens: start of the previous run of targets.
    PrevTarget,
    /// Tokens: start of the next left-out run.
    NextLeftOut,
    /// Tokens: start of the previous left-out run.
    PrevLeftOut,
    /// Tokens: start of the next context run.
    NextContext,
    /// Tokens: start of the previous context run.
    PrevContext,
    /// Tokens: the next point where another branch leaves the path.
    NextDivergence,
    /// Tokens: the previous such point.
    PrevDivergence,
    /// The command palette: a command by name (with its argument), or a path position.
    Palette,
    /// Replay: one draw forward.
    DrawNext,
    /// Replay: one draw back.
    DrawPrev,
    /// Replay: draw 0/n.
    DrawFirst,
    /// Replay: draw n/n.
    DrawLast,
    /// Replay pane: the draw at the step, or the whole draw log.
    ReplayLog,
    /// Why the selected request (or the one under the cursor) was (not) drawn.
    Why,
    /// Next colouring.
    Colour,
    /// Token boundaries on/off.
    Boundaries,
    /// Detail pane on/off.
    Detail,
    /// Seed + 1 (re-runs the engine).
    SeedUp,
    /// Seed − 1.
    SeedDown,
    /// J_max + 1.
    JmaxUp,
    /// J_max − 1 (0 = uncapped).
    JmaxDown,
    /// Next class priority (presets).
    Priority,
    /// Edit the class priority as an order.
    EditPriority,
    /// Next advantage mode.
    Advantage,
    /// Back to the settings before the last change (re-runs).
    Undo,
    /// The settings change undone last, again.
    Redo,
    /// Next sort order of the executions list.
    Sort,
    /// Next filter of the executions list.
    Filter,
    /// Start a search.
    Search,
    /// Next match.
    SearchNext,
    /// Previous match.
    SearchPrev,
    /// Export the admitted set.
    Export,
    /// Pin the settings on screen to compare later ones with (again: unpin).
    Pin,
    /// What changed since the pin, per execution.
    Compare,
    /// The exported row of the draw at the replay step, as the trainer sees it.
    Row,
    /// The batch dashboard.
    Dashboard,
    /// The copy menu: an id, a segment's text or ids, or a `gyre` command, to the clipboard.
    Copy,
    /// The go-to menu: the next request of a kind (compaction, sub-agent, retry, …) in the tree.
    GoTo,
    /// The next request of the kind chosen last.
    GoNext,
    /// The previous request of that kind.
    GoPrev,
    /// Filter the tree: requests matching the terms, and the items above them.
    TreeFilter,
    /// Open outside: the path's text, the why output or the row in `$PAGER` / `$EDITOR`.
    Outside,
    /// The audit view: the findings on the trained samples by kind, and the execution's
    /// samples.
    Audit,
}

/// A key as written in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    /// A printable character (shift folded in).
    Char(char),
    /// A named key.
    Code(KeyCode),
    /// Ctrl + character.
    Ctrl(char),
}

impl Key {
    /// How the key is written in help.
    pub fn label(self) -> String {
        match self {
            Key::Char(' ') => "Space".into(),
            Key::Char(c) => c.to_string(),
            Key::Ctrl(c) => format!("Ctrl-{c}"),
            Key::Code(code) => match code {
                KeyCode::Up => "↑".into(),
                KeyCode::Down => "↓".into(),
                KeyCode::Left => "←".into(),
                KeyCode::Right => "→".into(),
                KeyCode::PageUp => "PgUp".into(),
                KeyCode::PageDown => "PgDn".into(),
                KeyCode::Home => "Home".into(),
                KeyCode::End => "End".into(),
                KeyCode::Enter => "Enter".into(),
                KeyCode::Esc => "Esc".into(),
                KeyCode::Tab => "Tab".into(),
                KeyCode::BackTab => "Shift-Tab".into(),
                other => format!("{other:?}"),
            },
        }
    }

    fn matches(self, ev: &KeyEvent) -> bool {
        match self {
            Key::Char(c) => {
                ev.code == KeyCode::Char(c)
                    && !ev
                        .modifiers
                        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
            }
            Key::Ctrl(c) => {
                ev.code == KeyCode::Char(c) && ev.modifiers.contains(KeyModifiers::CONTROL)
            }
            Key::Code(code) => ev.code == code,
        }
    }
}

/// A row of the table.
#[derive(Clone, Copy, Debug)]
pub struct Binding {
    /// Keys that trigger it.
    pub keys: &'static [Key],
    /// What it does.
    pub command: Command,
    /// Group in the help overlay.
    pub group: &'static str,
    /// One-line description.
    pub help: &'static str,
    /// Short label in the hint bar (`None` = not shown there).
    pub hint: Option<&'static str>,
}

use Key::{Char as C, Code};

/// The key bindings.
pub const BINDINGS: &[Binding] = &[
    Binding {
        keys: &[C('?')],
        command: Command::Help,
        group: "General",
        help: "help: keys and a glossary",
        hint: Some("help"),
    },
    Binding {
        keys: &[C('q'), Key::Ctrl('c')],
        command: Command::Quit,
        group: "General",
        help: "quit (exit status 0)",
        hint: Some("quit"),
    },
    Binding {
        keys: &[Code(KeyCode::Esc)],
        command: Command::Escape,
        group: "General",
        help: "close the overlay / clear the search / clear the message",
        hint: None,
    },
    Binding {
        keys: &[Code(KeyCode::Tab)],
        command: Command::FocusNext,
        group: "General",
        help: "next pane in screen order, left-out ones zoomed",
        hint: Some("pane"),
    },
    Binding {
        keys: &[Code(KeyCode::BackTab)],
        command: Command::FocusPrev,
        group: "General",
        help: "previous pane",
        hint: None,
    },
    Binding {
        keys: &[C('1'), C('2'), C('3'), C('4'), C('5'), C('6')],
        command: Command::Jump(0),
        group: "General",
        help: "go to pane 1–6 (numbers in the pane titles)",
        hint: None,
    },
    Binding {
        keys: &[C('z')],
        command: Command::Zoom,
        group: "General",
        help: "zoom: the focused pane fills the screen (again: back)",
        hint: Some("zoom"),
    },
    Binding {
        keys: &[C(':')],
        command: Command::Palette,
        group: "General",
        help: "command palette: any command of this table by name (Tab completes, ↑ ↓ \
               choose), execution ID, request ID, seed N, jmax N, priority A>B, advantage \
               MODE, or a number: that path position (1-based)",
        hint: None,
    },
    Binding {
        keys: &[C('k'), Code(KeyCode::Up)],
        command: Command::Up,
        group: "Move",
        help: "up (item, link, or token row)",
        hint: None,
    },
    Binding {
        keys: &[C('j'), Code(KeyCode::Down)],
        command: Command::Down,
        group: "Move",
        help: "down (item, link, or token row)",
        hint: None,
    },
    Binding {
        keys: &[C('h'), Code(KeyCode::Left)],
        command: Command::Left,
        group: "Move",
        help: "left: collapse (tree), previous token (tokens)",
        hint: None,
    },
    Binding {
        keys: &[C('l'), Code(KeyCode::Right)],
        command: Command::Right,
        group: "Move",
        help: "right: expand (tree), next token (tokens)",
        hint: None,
    },
    Binding {
        keys: &[Code(KeyCode::PageUp), Key::Ctrl('u')],
        command: Command::PageUp,
        group: "Move",
        help: "page up (mouse wheel scrolls)",
        hint: None,
    },
    Binding {
        keys: &[Code(KeyCode::PageDown), Key::Ctrl('d')],
        command: Command::PageDown,
        group: "Move",
        help: "page down",
        hint: None,
    },
    Binding {
        keys: &[C('g'), Code(KeyCode::Home)],
        command: Command::Home,
        group: "Move",
        help: "first item / token / line",
        hint: None,
    },
    Binding {
        keys: &[C('G'), Code(KeyCode::End)],
        command: Command::End,
        group: "Move",
        help: "last item / token / line",
        hint: None,
    },
    Binding {
        keys: &[Code(KeyCode::Enter)],
        command: Command::Enter,
        group: "Move",
        help: "open execution / toggle node / follow a link (replay spans, candidates, assessments, \
               a sub-agent and the call that started it in the detail pane)",
        hint: None,
    },
    Binding {
        keys: &[C('\'')],
        command: Command::GoTo,
        group: "Tree",
        help: "go to the next request of a kind: c compaction, s sub-agent root, r retry, v \
               divergence, o candidate, d drawn leaf (upper case: the previous one), in tree \
               order, wrapping round",
        hint: None,
    },
    Binding {
        keys: &[C('>')],
        command: Command::GoNext,
        group: "Tree",
        help: "the next request of the kind chosen last with '",
        hint: None,
    },
    Binding {
        keys: &[C('<')],
        command: Command::GoPrev,
        group: "Tree",
        help: "the previous request of that kind",
        hint: None,
    },
    Binding {
        keys: &[C('F')],
        command: Command::TreeFilter,
        group: "Tree",
        help: "filter the tree: requests matching every term (an id, agent, finish reason, \
               model or tool name, or compaction, sub-agent, retry, divergence, candidate, \
               drawn, summary, evaluator, after-closure) and the items above them; empty \
               clears it",
        hint: None,
    },
    Binding {
        keys: &[C('w')],
        command: Command::NextSegment,
        group: "Tokens",
        help: "next segment (node) of the path",
        hint: None,
    },
    Binding {
        keys: &[C('b')],
        command: Command::PrevSegment,
        group: "Tokens",
        help: "previous segment of the path",
        hint: None,
    },
    Binding {
        keys: &[C('t')],
        command: Command::NextTarget,
        group: "Tokens",
        help: "next run of targets (at the replay step)",
        hint: None,
    },
    Binding {
        keys: &[C('T')],
        command: Command::PrevTarget,
        group: "Tokens",
        help: "previous run of targets",
        hint: None,
    },
    Binding {
        keys: &[C('u')],
        command: Command::NextLeftOut,
        group: "Tokens",
        help: "next left-out run (J_max or priority)",
        hint: None,
    },
    Binding {
        keys: &[C('U')],
        command: Command::PrevLeftOut,
        group: "Tokens",
        help: "previous left-out run",
        hint: None,
    },
    Binding {
        keys: &[C('x')],
        command: Command::NextContext,
        group: "Tokens",
        help: "next context run",
        hint: None,
    },
    Binding {
        keys: &[C('X')],
        command: Command::PrevContext,
        group: "Tokens",
        help: "previous context run",
        hint: None,
    },
    Binding {
        keys: &[C('v')],
        command: Command::NextDivergence,
        group: "Tokens",
        help: "next divergence (another branch leaves the path)",
        hint: None,
    },
    Binding {
        keys: &[C('V')],
        command: Command::PrevDivergence,
        group: "Tokens",
        help: "previous divergence",
        hint: None,
    },
    Binding {
        keys: &[C(']')],
        command: Command::DrawNext,
        group: "Replay",
        help: "one draw forward",
        hint: Some("draw"),
    },
    Binding {
        keys: &[C('[')],
        command: Command::DrawPrev,
        group: "Replay",
        help: "one draw back",
        hint: None,
    },
    Binding {
        keys: &[C('{')],
        command: Command::DrawFirst,
        group: "Replay",
        help: "draw 0/n: nothing claimed yet",
        hint: None,
    },
    Binding {
        keys: &[C('}')],
        command: Command::DrawLast,
        group: "Replay",
        help: "draw n/n: the admitted state",
        hint: Some("first/last"),
    },
    Binding {
        keys: &[C('r')],
        command: Command::ReplayLog,
        group: "Replay",
        help: "replay pane: this draw / the whole draw log",
        hint: None,
    },
    Binding {
        keys: &[C('y')],
        command: Command::Why,
        group: "Replay",
        help: "why the request (under the cursor, or selected) was (not) drawn",
        hint: Some("why"),
    },
    Binding {
        keys: &[C('s')],
        command: Command::SeedUp,
        group: "Engine (re-runs in the background)",
        help: "seed + 1",
        hint: Some("seed"),
    },
    Binding {
        keys: &[C('S')],
        command: Command::SeedDown,
        group: "Engine (re-runs in the background)",
        help: "seed − 1 (not below 0)",
        hint: None,
    },
    Binding {
        keys: &[C('+'), C('=')],
        command: Command::JmaxUp,
        group: "Engine (re-runs in the background)",
        help: "J_max + 1",
        hint: Some("J_max"),
    },
    Binding {
        keys: &[C('-')],
        command: Command::JmaxDown,
        group: "Engine (re-runs in the background)",
        help: "J_max − 1 (below 1: uncapped)",
        hint: None,
    },
    Binding {
        keys: &[C('p')],
        command: Command::Priority,
        group: "Engine (re-runs in the background)",
        help: "next class priority (presets)",
        hint: Some("priority"),
    },
    Binding {
        keys: &[C('P')],
        command: Command::EditPriority,
        group: "Engine (re-runs in the background)",
        help: "edit the class priority: order, drop, add",
        hint: None,
    },
    Binding {
        keys: &[C('a')],
        command: Command::Advantage,
        group: "Engine (re-runs in the background)",
        help: "advantage: drgrpo / grpo / none",
        hint: None,
    },
    Binding {
        keys: &[Key::Ctrl('z')],
        command: Command::Undo,
        group: "Engine (re-runs in the background)",
        help: "undo the last settings change (seed, J_max, priority, advantage)",
        hint: None,
    },
    Binding {
        keys: &[Key::Ctrl('y')],
        command: Command::Redo,
        group: "Engine (re-runs in the background)",
        help: "redo the settings change undone last",
        hint: None,
    },
    Binding {
        keys: &[C('c')],
        command: Command::Colour,
        group: "View",
        help: "colour tokens by: claims / logprob heat / lens (share of seeds a target) / flips \
               vs the pin / audit verdict / trainer − behaviour gap (the last two with trained \
               samples) / provenance",
        hint: Some("colour"),
    },
    Binding {
        keys: &[C('B')],
        command: Command::Boundaries,
        group: "View",
        help: "token boundaries (alternating shade) on/off",
        hint: None,
    },
    Binding {
        keys: &[C('d')],
        command: Command::Detail,
        group: "View",
        help: "detail pane (fate, tool calls, results, sibling diff) on/off",
        hint: Some("detail"),
    },
    Binding {
        keys: &[C('o')],
        command: Command::Sort,
        group: "View",
        help: "executions: next sort order",
        hint: Some("sort"),
    },
    Binding {
        keys: &[C('f')],
        command: Command::Filter,
        group: "View",
        help: "executions: next filter",
        hint: Some("filter"),
    },
    Binding {
        keys: &[C('/')],
        command: Command::Search,
        group: "Search",
        help: "search every execution (token text, request and execution ids)",
        hint: Some("search"),
    },
    Binding {
        keys: &[C('n')],
        command: Command::SearchNext,
        group: "Search",
        help: "next match",
        hint: None,
    },
    Binding {
        keys: &[C('N')],
        command: Command::SearchPrev,
        group: "Search",
        help: "previous match",
        hint: None,
    },
    Binding {
        keys: &[C('e')],
        command: Command::Export,
        group: "Export",
        help: "export the admitted set (as `gyre admit`)",
        hint: Some("export"),
    },
    Binding {
        keys: &[C('m')],
        command: Command::Pin,
        group: "What-if",
        help: "pin the settings on screen (again: unpin); change settings, then C compares and \
               c colours the tokens that flip",
        hint: Some("pin"),
    },
    Binding {
        keys: &[C('C')],
        command: Command::Compare,
        group: "What-if",
        help: "compare with the pin: batch totals and each execution's Δ rows, Δ L_i, Δ weight, \
               flips (Enter opens one, colouring its flips)",
        hint: None,
    },
    Binding {
        keys: &[C('R')],
        command: Command::Row,
        group: "What-if",
        help: "the trainer's-eye row of the draw at the replay step: tokens, loss_mask, \
               logprobs and each token's loss weight (advantage × mask ÷ L_i) as a heat map",
        hint: Some("row"),
    },
    Binding {
        keys: &[C('D')],
        command: Command::Dashboard,
        group: "What-if",
        help: "dashboard: tokens by provenance, left-out tokens by reason, rows per execution, \
               rewards and advantages per group, cost and coverage per J_max (Enter on a bar \
               jumps to an example)",
        hint: Some("dashboard"),
    },
    Binding {
        keys: &[C('Y')],
        command: Command::Copy,
        group: "Copy and open outside",
        help: "copy to the clipboard through OSC 52 (over ssh too; in tmux: set -g \
               set-clipboard on): the execution id, the request id, the text or the ids of the \
               segment under the token cursor, or the gyre show / why / replay command for what \
               is on screen; a letter picks",
        hint: None,
    },
    Binding {
        keys: &[C('O')],
        command: Command::Outside,
        group: "Copy and open outside",
        help: "open outside: the path's text, the why output (as gyre why prints it) or the \
               exported row of the replay step, in $PAGER (default less; upper-case letter: \
               $VISUAL or $EDITOR, default vi) on a temporary copy; the inspector comes back \
               when it exits",
        hint: None,
    },
    Binding {
        keys: &[C('A')],
        command: Command::Audit,
        group: "Audit (trained samples)",
        help: "audit view: the findings on the trainer's samples by kind (Enter puts the token \
               cursor on the first token of one) and the execution's samples (Enter highlights \
               the tokens one holds; Tab switches); c colours tokens by audit verdict and by \
               the trainer − behaviour log-prob gap, and the why line says the verdict",
        hint: Some("audit"),
    },
];

/// The command bound to a key event, if any (the digit keys give the pane they name).
pub fn command_for(ev: &KeyEvent) -> Option<Command> {
    let b = BINDINGS
        .iter()
        .find(|b| b.keys.iter().any(|k| k.matches(ev)))?;
    Some(match (b.command, ev.code) {
        (Command::Jump(_), KeyCode::Char(c)) => Command::Jump(c.to_digit(10).unwrap_or(1) as u8),
        (c, _) => c,
    })
}

/// Keys of a binding, written for people (`k ↑`).
pub fn keys_label(b: &Binding) -> String {
    b.keys
        .iter()
        .map(|k| k.label())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The hint bar entries: (keys, label), `?` and `q` first.
pub fn hints() -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> = Vec::new();
    // Bindings that share a hint label are shown together (`]/[ draw`).
    for b in BINDINGS {
        if let Some(h) = b.hint {
            let key = b.keys[0].label();
            let pair = match b.command {
                Command::DrawNext => "]/[".to_string(),
                Command::DrawLast => "{/}".to_string(),
                Command::SeedUp => "s/S".to_string(),
                Command::JmaxUp => "+/-".to_string(),
                Command::Jump(_) => "1-6".to_string(),
                _ => key,
            };
            out.push((pair, h));
        }
    }
    out
}

/// `docs/keys.md`, generated from the table.
pub fn markdown() -> String {
    let mut s = String::from(
        "# gyre inspector keys\n\nGenerated from the key-binding table (`crates/gyre-tui/src/keys.rs`) by \
         `cargo test -p gyre-tui --test tui`; do not edit by hand.\n",
    );
    let mut group = "";
    for b in BINDINGS {
        if b.group != group {
            group = b.group;
            s.push_str(&format!("\n## {group}\n\n| keys | action |\n|---|---|\n"));
        }
        let keys: Vec<String> = b.keys.iter().map(|k| format!("`{}`", k.label())).collect();
        s.push_str(&format!(
            "| {} | {} |\n",
            keys.join(" "),
            b.help.replace('|', "\\|")
        ));
    }
    s.push_str(
        "\n## Mouse\n\nClick a pane to focus it, a row to select it, a token to put the cursor \
         on it, a link (a candidate, a target span, an assessment) to follow it; the wheel \
         scrolls the pane under the pointer.\n",
    );
    s.push_str("\n## Input fields\n\n| keys | action |\n|---|---|\n");
    for (k, v) in EDIT_KEYS {
        s.push_str(&format!("| `{k}` | {v} |\n"));
    }
    s.push_str("\n## Glossary\n\n");
    for (k, v) in GLOSSARY {
        s.push_str(&format!("- **{k}**: {v}\n"));
    }
    s
}

/// Keys of the input fields (search, export, the command palette).
pub const EDIT_KEYS: &[(&str, &str)] = &[
    ("Enter", "confirm"),
    ("Esc", "cancel (search: clear it)"),
    ("Backspace", "delete a character"),
    ("Ctrl-u", "clear the field"),
    ("Ctrl-w", "delete the word before the cursor"),
    (
        "↑ ↓",
        "search: choose a result; palette: choose a command; priority editor: choose a class",
    ),
    ("Tab", "palette: complete the command's name"),
    ("K J", "priority editor: move the class up / down"),
    ("Space", "priority editor: drop the class / put it back"),
];

/// Terms the screens use, explained (help overlay and `docs/keys.md`).
pub const GLOSSARY: &[(&str, &str)] = &[
    (
        "L_i",
        "targets admitted in execution i; each target's loss is divided by it (docs/format.md §6)",
    ),
    (
        "B",
        "executions that count in the batch loss: scored and dummy",
    ),
    ("d/c", "draws made / candidate leaves of the execution"),
    (
        "adv",
        "group advantage: reward − the group's mean (drgrpo; grpo also ÷ std)",
    ),
    (
        "candidate",
        "a policy request with no other policy output below it: its path may be drawn",
    ),
    (
        "w, p, slice",
        "a candidate's weight (its unclaimed trainable path tokens), its probability in the \
         draw, and its part of [0, total): the draw picks the slice holding random mod total",
    ),
    (
        "first seen there",
        "a context token belongs to the request whose input first brought it into the tree",
    ),
    (
        "span kinds",
        "system, user, tool, assistant (harness-written), critique, summary, template, \
         context: where a context token came from; never trainable",
    ),
    (
        "r1[0..36]@756",
        "output tokens 0..36 of r1 sit at path position 756 (0-based offsets, as in the export)",
    ),
    (
        "positions",
        "path positions (the cursor, a number in the palette) are 1-based; offsets inside a request \
         (output token 3 of r7, r1[0..36], diverges at token 78) are 0-based, as in records \
         and exports",
    ),
    (
        "lens",
        "over N seeds from the current one (--seeds, default 64): the share under which a \
         token is a target at this J_max and priority, and the J_max from which it always is",
    ),
    (
        "flips",
        "tokens that change sides between the pinned settings and those on screen: +target now, \
         −target under the pin only",
    ),
    (
        "loss weight",
        "what a target's token loss is multiplied by in the batch loss: advantage × mask ÷ L_i \
         (then ÷ B for the batch)",
    ),
    (
        "divergence",
        "a point where another branch leaves this path: a retry, another context, or a \
         re-serialised output",
    ),
    (
        "sample",
        "a training row a trainer wrote (a trained record, docs/format.md §9): its tokens laid on \
         the tree, its loss mask; the audit checks them against what the policy sampled",
    ),
    (
        "gap",
        "trainer − behaviour log-prob of a trained token, in nats: below 0 the trainer finds \
         it less likely than the sampler did; the audit's bound is 1 nat",
    ),
];
