//! The command palette (`:`): commands that take an argument (`execution e0012`, `jmax 3`),
//! every command of the key table by name, and a number for a path position.

use super::keys::{BINDINGS, Command, keys_label};

/// A command the palette lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// What is typed (`jmax`, `seed-up`).
    pub name: String,
    /// The argument it takes, as help writes it (`N`), if any.
    pub arg: Option<&'static str>,
    /// Its keys (`s`), for a command of the key table.
    pub keys: String,
    /// One-line description.
    pub help: &'static str,
    /// The key table's command it runs without an argument (`None`: it needs one).
    pub command: Option<Command>,
}

/// Commands with an argument: name, argument, help.
const WITH_ARG: &[(&str, &str, &str)] = &[
    ("execution", "ID", "open the execution with this id"),
    (
        "request",
        "ID",
        "show the path of this request (of the execution open)",
    ),
    ("seed", "N", "set the seed (re-runs)"),
    ("jmax", "N", "set J_max, 0 = uncapped (re-runs)"),
    (
        "priority",
        "A>B…",
        "set the class priority (main, main-summary, sub, sub-summary); alone: the next \
         preset (re-runs)",
    ),
    (
        "advantage",
        "MODE",
        "set the advantage mode (drgrpo, grpo, none); alone: the next one (re-runs)",
    ),
    (
        "goto",
        "KIND",
        "select the next request of a kind in the tree: compaction, sub-agent, retry, \
         divergence, candidate, drawn",
    ),
    (
        "tree-filter",
        "TERMS",
        "show the requests matching every term (an id, agent, finish, model or tool name, or \
         a kind) and the items above them; alone: clear the filter",
    ),
];

/// `SeedUp` → `seed-up`.
fn kebab(c: Command) -> String {
    let mut out = String::new();
    for ch in format!("{c:?}").chars() {
        if ch.is_ascii_uppercase() && !out.is_empty() {
            out.push('-');
        }
        out.push(ch.to_ascii_lowercase());
    }
    out
}

/// Every entry: those with an argument, then the key table's commands in its order (the pane
/// digits, which `1`–`6` already are, and the palette itself left out). A key-table command
/// whose name takes an argument too (`priority`, `advantage`) is one entry: alone it runs as
/// its key does.
pub fn entries() -> Vec<Entry> {
    let bound: Vec<Entry> = BINDINGS
        .iter()
        .filter(|b| !matches!(b.command, Command::Jump(_) | Command::Palette))
        .map(|b| Entry {
            name: kebab(b.command),
            arg: None,
            keys: keys_label(b),
            help: b.help,
            command: Some(b.command),
        })
        .collect();
    let with_arg: Vec<Entry> = WITH_ARG
        .iter()
        .map(|&(name, arg, help)| {
            let key = bound.iter().find(|e| e.name == name);
            Entry {
                name: name.into(),
                arg: Some(arg),
                keys: key.map_or(String::new(), |e| e.keys.clone()),
                help,
                command: key.and_then(|e| e.command),
            }
        })
        .collect();
    let rest: Vec<Entry> = bound
        .into_iter()
        .filter(|e| !with_arg.iter().any(|w| w.name == e.name))
        .collect();
    with_arg.into_iter().chain(rest).collect()
}

/// The entries whose name starts with the first word typed (all of them for an empty field).
pub fn matches(typed: &str) -> Vec<Entry> {
    let word = typed.split_whitespace().next().unwrap_or("").to_lowercase();
    entries()
        .into_iter()
        .filter(|e| e.name.starts_with(&word))
        .collect()
}

/// What the typed text asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Nothing typed.
    Nothing,
    /// A path position (1-based, as typed).
    Position(u64),
    /// An entry and its argument (empty when none was typed).
    Run(Entry, String),
    /// No entry has that name: the line to show.
    Unknown(String),
}

/// Parses the field: a number, else an entry named exactly by the first word, else the entry
/// chosen in the list (`at`) among those the word starts.
pub fn parse(typed: &str, at: usize) -> Parsed {
    let typed = typed.trim();
    if typed.is_empty() {
        return Parsed::Nothing;
    }
    if let Ok(n) = typed.parse::<u64>() {
        return Parsed::Position(n);
    }
    let (word, arg) = typed.split_once(char::is_whitespace).unwrap_or((typed, ""));
    let word = word.to_lowercase();
    let found = matches(&word);
    let entry = found
        .iter()
        .find(|e| e.name == word)
        .or_else(|| found.get(at.min(found.len().saturating_sub(1))));
    match entry {
        Some(e) => Parsed::Run(e.clone(), arg.trim().to_string()),
        None => Parsed::Unknown(format!(":{word}: no such command (: alone lists them)")),
    }
}

/// The field after Tab: the first word completed to the chosen entry's name (and a space when
/// it takes an argument).
pub fn complete(typed: &str, at: usize) -> Option<String> {
    let found = matches(typed);
    let e = found.get(at.min(found.len().saturating_sub(1)))?;
    Some(if e.arg.is_some() {
        format!("{} ", e.name)
    } else {
        e.name.clone()
    })
}
