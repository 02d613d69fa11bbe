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
    /// Next pane.
    FocusNext,
    /// Previous pane.
    FocusPrev,
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
    /// Replay: one draw forward.
    DrawNext,
    /// Replay: one draw back.
    DrawPrev,
    /// Replay: draw 0/n.
    DrawFirst,
    /// Replay: draw n/n.
    DrawLast,
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
    /// Next class priority.
    Priority,
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
        help: "help (this overlay)",
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
        help: "close the overlay / clear the search",
        hint: None,
    },
    Binding {
        keys: &[Code(KeyCode::Tab)],
        command: Command::FocusNext,
        group: "General",
        help: "next pane (mouse: click a pane)",
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
        keys: &[C('k'), Code(KeyCode::Up)],
        command: Command::Up,
        group: "Move",
        help: "up (item, or token row)",
        hint: None,
    },
    Binding {
        keys: &[C('j'), Code(KeyCode::Down)],
        command: Command::Down,
        group: "Move",
        help: "down (item, or token row)",
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
        help: "first item / token",
        hint: None,
    },
    Binding {
        keys: &[C('G'), Code(KeyCode::End)],
        command: Command::End,
        group: "Move",
        help: "last item / token",
        hint: None,
    },
    Binding {
        keys: &[Code(KeyCode::Enter)],
        command: Command::Enter,
        group: "Move",
        help: "open execution / toggle node / go to branch",
        hint: None,
    },
    Binding {
        keys: &[C('w')],
        command: Command::NextSegment,
        group: "Move",
        help: "tokens: next segment (node) of the path",
        hint: None,
    },
    Binding {
        keys: &[C('b')],
        command: Command::PrevSegment,
        group: "Move",
        help: "tokens: previous segment of the path",
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
        keys: &[C('s')],
        command: Command::SeedUp,
        group: "Engine (re-runs at once)",
        help: "seed + 1",
        hint: Some("seed"),
    },
    Binding {
        keys: &[C('S')],
        command: Command::SeedDown,
        group: "Engine (re-runs at once)",
        help: "seed − 1",
        hint: None,
    },
    Binding {
        keys: &[C('+'), C('=')],
        command: Command::JmaxUp,
        group: "Engine (re-runs at once)",
        help: "J_max + 1",
        hint: Some("J_max"),
    },
    Binding {
        keys: &[C('-')],
        command: Command::JmaxDown,
        group: "Engine (re-runs at once)",
        help: "J_max − 1 (below 1: uncapped)",
        hint: None,
    },
    Binding {
        keys: &[C('p')],
        command: Command::Priority,
        group: "Engine (re-runs at once)",
        help: "next class priority",
        hint: Some("priority"),
    },
    Binding {
        keys: &[C('c')],
        command: Command::Colour,
        group: "View",
        help: "colour tokens by: claims / logprob heat / provenance",
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
        help: "detail pane (tool calls, results, sibling diff) on/off",
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
        help: "search token text and request ids",
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
];

/// The command bound to a key event, if any.
pub fn command_for(ev: &KeyEvent) -> Option<Command> {
    BINDINGS
        .iter()
        .find(|b| b.keys.iter().any(|k| k.matches(ev)))
        .map(|b| b.command)
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
        "# gyre inspector keys\n\nGenerated from the key-binding table (`src/tui/keys.rs`) by \
         `cargo test --test tui_keys`; do not edit by hand.\n",
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
         on it; the wheel scrolls the pane under the pointer.\n",
    );
    s
}
