//! What the inspector remembers of a recording between runs: the settings (seed, J_max,
//! priority, advantage mode), the token colouring and the executions' sort order.
//!
//! One small JSON file per recording, in the user's state directory
//! (`$XDG_STATE_HOME/gyre/inspector/`, else `$HOME/.local/state/gyre/inspector/`), named by the
//! SHA-256 of the recording's identity: never beside the data, which may be read-only, shared,
//! or under version control. The file is read before the engine first runs, so the first frame
//! already shows the remembered settings; settings given on the command line win, one by one;
//! `--fresh` does not read it. It is written when the inspector quits, atomically, whatever it
//! held before (a file that does not parse is replaced).

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use gyre_engine::admit::{SETTINGS, Settings};
use gyre_engine::paint::ColorMode;
use gyre_engine::score::AdvantageMode;
use gyre_format::named::Named;

use crate::app::App;
use crate::history::History;
pub use crate::input::{Explicit, Remember};
use crate::input::{Input, Options};
use crate::pane::executions::SortKey;
use crate::vocab::{Action, Load};

/// The layout of the file. A file of another version is ignored (and replaced at quit).
pub const VERSION: u64 = 1;

/// What is remembered of one recording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remembered {
    /// Seed, J_max, priority.
    pub settings: Settings,
    /// Advantage mode.
    pub advantage: AdvantageMode,
    /// Token colouring (never `Flips`: the pin it compares with is not remembered).
    pub colour: ColorMode,
    /// Executions' sort order.
    pub sort: SortKey,
}

impl Remembered {
    /// What `app` would leave behind if it quit now: the settings asked for (a re-run may still
    /// be under way), the colouring and the sort.
    pub fn of(app: &App) -> Remembered {
        Remembered {
            settings: app.settings.clone(),
            advantage: app.advantage,
            // The app itself falls back to claims when the pin goes.
            colour: match app.colour {
                ColorMode::Flips => ColorMode::Claims,
                c => c,
            },
            sort: app.panes.execs.sort,
        }
    }

    /// The file's JSON: `version`, `inputs` (for a person reading it; the file name is what
    /// finds it), and every value by its one spelling.
    pub fn to_json(&self, inputs: &[String]) -> Value {
        json!({
            "version": VERSION,
            "inputs": inputs,
            "settings": self.settings.to_json(),
            "advantage": self.advantage.name(),
            "colour": self.colour.name(),
            "sort": self.sort.name(),
        })
    }

    /// Reads a file's text; the error says what is wrong with it.
    pub fn from_json(text: &str) -> Result<Remembered, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
        match v.get("version").and_then(Value::as_u64) {
            Some(VERSION) => {}
            Some(n) => return Err(format!("version {n}, not {VERSION}")),
            None => return Err("no version".into()),
        }
        let name = |key: &str| {
            v.get(key)
                .and_then(Value::as_str)
                .ok_or_else(|| format!("no {key}"))
        };
        let advantage = name("advantage")?;
        let colour = name("colour")?;
        let sort = name("sort")?;
        Ok(Remembered {
            settings: settings_from_json(v.get("settings").ok_or("no settings")?)?,
            advantage: AdvantageMode::parse(advantage).ok_or_else(|| {
                format!(
                    "unknown advantage mode {advantage:?} (modes: {})",
                    AdvantageMode::names()
                )
            })?,
            colour: ColorMode::ALL
                .into_iter()
                .find(|&c| c != ColorMode::Flips && c.name() == colour)
                .ok_or_else(|| format!("unknown colouring {colour:?}"))?,
            sort: SortKey::ALL
                .into_iter()
                .find(|s| s.name() == sort)
                .ok_or_else(|| format!("unknown sort order {sort:?}"))?,
        })
    }
}

/// Settings from the object [`Settings::to_json`] writes, through [`Settings::set`] so the file
/// and `:seed 3` read the same words; every key must be there.
fn settings_from_json(v: &Value) -> Result<Settings, String> {
    let obj = v.as_object().ok_or("settings is not an object")?;
    let mut s = Settings::default();
    for (key, value) in obj {
        let text = match value {
            Value::Number(n) => n.to_string(),
            Value::String(t) => t.clone(),
            Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().ok_or(format!("settings.{key} holds a non-name")))
                .collect::<Result<Vec<_>, _>>()?
                .join(","),
            _ => return Err(format!("settings.{key} is neither a number nor names")),
        };
        s.set(key, &text)?;
    }
    for key in SETTINGS.map(|s| s.key) {
        if !obj.contains_key(key) {
            return Err(format!("no settings.{key}"));
        }
    }
    Ok(s)
}

/// `given` with the remembered value of each setting the command line did not give.
pub fn merge(given: &Settings, explicit: Explicit, remembered: &Settings) -> Settings {
    let mut out = given.clone();
    for (i, s) in SETTINGS.iter().enumerate() {
        if !explicit.has(i) {
            (s.parse)(&mut out, &(s.value)(remembered)).expect("a setting's value parses back");
        }
    }
    out
}

/// The state directory from the values of `XDG_STATE_HOME` and `HOME`. A relative value is
/// ignored (the XDG rule), so the answer never depends on the working directory, which is often
/// where the data is; `None` when neither gives one.
pub fn state_dir_from(xdg_state_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let absolute = |v: Option<OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    absolute(xdg_state_home)
        .or_else(|| absolute(home).map(|h| h.join(".local").join("state")))
        .map(|d| d.join("gyre").join("inspector"))
}

/// The state directory of this process's environment.
pub fn state_dir() -> Option<PathBuf> {
    state_dir_from(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"))
}

/// What names a recording, and its inputs as a person reads them: the canonical absolute paths
/// of the files in order, NUL-separated (so `a b` and `b a` are two recordings, and a path
/// written another way is the same one), or `demo:FILE` for a bundled demo.
pub fn identity(input: &Input) -> io::Result<(Vec<u8>, Vec<String>)> {
    match input {
        Input::Demo(demo) => {
            let id = format!("demo:{}", demo.file_name());
            Ok((id.clone().into_bytes(), vec![id]))
        }
        Input::Files(files) => {
            let mut id = Vec::new();
            let mut shown = Vec::new();
            for (i, f) in files.iter().enumerate() {
                let path = fs::canonicalize(f)?;
                if i > 0 {
                    id.push(0);
                }
                id.extend_from_slice(path.as_os_str().as_encoded_bytes());
                shown.push(path.display().to_string());
            }
            Ok((id, shown))
        }
    }
}

/// `HEX.json`: the SHA-256 of `identity`, so the name says nothing of the paths.
pub fn file_name(identity: &[u8]) -> String {
    let hash = Sha256::digest(identity);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("{hex}.json")
}

/// Writes `bytes` to `path` through a temporary file in the same directory renamed over it: a
/// reader (another inspector starting) sees the old file or the new one, never half of one.
/// Missing directories are created with the user's default permissions.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    // The process id keeps two inspectors quitting at once off each other's temporary file.
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// One run's remembering: read at start ([`Memory::start`]), shown on the app
/// ([`Memory::apply`]), written at quit ([`Memory::finish`]).
#[derive(Clone, Debug, Default)]
pub struct Memory {
    /// The file; `None` when nothing is remembered this run.
    file: Option<PathBuf>,
    /// The inputs, written into the file for a person reading it.
    inputs: Vec<String>,
    /// What was read, when it was.
    restored: Option<Remembered>,
    /// The settings it changed, each in its one spelling (`seed 3`).
    changed: Vec<String>,
    /// What `--fresh` is, for the restored message (`gyre` alone has no flags).
    fresh_hint: String,
    /// A problem to say instead (no state directory, a file that does not parse).
    note: Option<String>,
}

impl Memory {
    /// Reads what is remembered of `opts.input` from the user's state directory and puts it
    /// into `opts` (the settings the loader admits with) under the explicit settings.
    pub fn start(opts: &mut Options) -> Memory {
        match opts.remember {
            Remember::Nothing => Memory::default(),
            _ => Memory::start_in(state_dir(), opts),
        }
    }

    /// [`Memory::start`] with the state directory given (`None`: there is none).
    pub fn start_in(dir: Option<PathBuf>, opts: &mut Options) -> Memory {
        let mut memory = Memory::default();
        if opts.remember == Remember::Nothing {
            return memory;
        }
        let Some(dir) = dir else {
            memory.note = Some(
                "nothing is remembered between runs: neither XDG_STATE_HOME nor HOME is an \
                 absolute directory"
                    .into(),
            );
            return memory;
        };
        // An input that cannot be resolved will not load either: the loader says why.
        let Ok((id, inputs)) = identity(&opts.input) else {
            return memory;
        };
        let file = dir.join(file_name(&id));
        memory.inputs = inputs;
        memory.fresh_hint = match &opts.input {
            Input::Demo(d) => format!("gyre inspect --demo {} --fresh", d.name()),
            Input::Files(_) => "--fresh".into(),
        };
        if let Remember::Restore(explicit) = opts.remember {
            match fs::read_to_string(&file) {
                Ok(text) => match Remembered::from_json(&text) {
                    Ok(r) => {
                        let settings = merge(&opts.settings, explicit, &r.settings);
                        memory.changed = settings_said(&opts.settings, &settings);
                        opts.settings = settings;
                        opts.advantage = r.advantage;
                        memory.restored = Some(r);
                    }
                    Err(why) => {
                        memory.note = Some(format!(
                            "ignored {}: {why}; it is written anew at quit",
                            file.display()
                        ))
                    }
                },
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    memory.note = Some(format!(
                        "could not read {}: {e}; it is written anew at quit",
                        file.display()
                    ))
                }
            }
        }
        memory.file = Some(file);
        memory
    }

    /// The file this run reads and writes, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Puts the remembered advantage mode, colouring and sort on a new `app` (made with the
    /// settings [`Memory::start`] chose) and says on the status line what was restored, or
    /// what went wrong.
    pub fn apply(&self, app: &mut App) {
        if let Some(r) = &self.restored {
            let mut parts = self.changed.clone();
            if r.advantage != app.advantage {
                parts.push(format!("advantage {}", r.advantage.name()));
                app.advantage = r.advantage;
                // Undo starts from where this run starts.
                app.history = History::new((app.settings.clone(), r.advantage));
            }
            if r.colour != app.colour {
                parts.push(format!("colour {}", r.colour.name()));
                app.colour = r.colour;
            }
            if r.sort != app.panes.execs.sort {
                parts.push(format!("sort {}", r.sort.name()));
                app.panes.execs.sort = r.sort;
            }
            if !parts.is_empty() {
                app.step(Action::Message(format!(
                    "remembered from the last run: {} ({} starts clean)",
                    parts.join(" · "),
                    self.fresh_hint
                )));
            }
        }
        if let Some(note) = &self.note {
            app.step(Action::Message(note.clone()));
        }
    }

    /// Writes what `app` leaves behind into the file.
    pub fn save(&self, app: &App) -> io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let json = Remembered::of(app).to_json(&self.inputs);
        let mut text = serde_json::to_string_pretty(&json).map_err(io::Error::other)?;
        text.push('\n');
        write_atomically(file, text.as_bytes())
    }

    /// At the end of a run, once the terminal is restored: saves when the user quit a
    /// recording that loaded. A failure is one line on stderr, never a failed run.
    pub fn finish(&self, app: &App) {
        if !app.quit || matches!(app.load, Load::Failed(_)) {
            return;
        }
        if let (Err(e), Some(file)) = (self.save(app), &self.file) {
            gyre_format::note!(
                "gyre: could not remember the settings in {}: {e}",
                file.display()
            );
        }
    }
}

/// The settings that differ between `from` and `to`, as `seed 3`, `J_max 7`, `priority main`.
fn settings_said(from: &Settings, to: &Settings) -> Vec<String> {
    from.differing(to).map(|s| s.said(to)).collect()
}

#[cfg(test)]
mod tests {
    use gyre_engine::admit::Class;
    use gyre_engine::demo::Demo;

    use super::*;
    use crate::theme::Theme;

    /// Settings from `key=value` pairs, the rest default (so a new setting changes no test).
    fn with(pairs: &str) -> Settings {
        Settings::default().with_overrides(pairs).unwrap()
    }

    fn opts(input: Input, settings: Settings, remember: Remember) -> Options {
        Options {
            input,
            settings,
            advantage: AdvantageMode::DrGrpo,
            lenient: false,
            tokenizer: None,
            follow: false,
            seeds: 1,
            remember,
        }
    }

    fn app_for(opts: &Options) -> App {
        App::new("test", opts.settings.clone(), Theme { color: false })
    }

    fn said(app: &App) -> String {
        app.message
            .as_ref()
            .map(|m| m.text.clone())
            .unwrap_or_default()
    }

    /// A recording in its own directory and a separate state directory.
    struct Dirs {
        data: tempfile::TempDir,
        state: tempfile::TempDir,
    }

    impl Dirs {
        fn new() -> Dirs {
            let data = tempfile::tempdir().unwrap();
            fs::write(data.path().join("run.jsonl"), gyre_engine::demo::RECORDING).unwrap();
            Dirs {
                data,
                state: tempfile::tempdir().unwrap(),
            }
        }

        fn input(&self) -> Input {
            Input::Files(vec![self.data.path().join("run.jsonl")])
        }

        fn state(&self) -> Option<PathBuf> {
            Some(self.state.path().join("gyre").join("inspector"))
        }

        /// Runs the inspector's start and quit around `change` (what the user did).
        fn run(&self, settings: Settings, remember: Remember, change: impl Fn(&mut App)) -> App {
            let mut o = opts(self.input(), settings, remember);
            let memory = Memory::start_in(self.state(), &mut o);
            let mut app = app_for(&o);
            memory.apply(&mut app);
            change(&mut app);
            app.quit = true;
            memory.finish(&app);
            app
        }
    }

    #[test]
    fn what_is_remembered_reads_back_the_same() {
        let r = Remembered {
            settings: with("seed=3, jmax=0, priority=main>sub"),
            advantage: AdvantageMode::Grpo,
            colour: ColorMode::Lens,
            sort: SortKey::Targets,
        };
        let text = r.to_json(&["/data/run.jsonl".into()]).to_string();
        assert_eq!(Remembered::from_json(&text), Ok(r));
        // Every sort order and colouring a run can leave behind reads back.
        for sort in SortKey::ALL {
            for colour in ColorMode::ALL {
                let app = {
                    let mut app = App::new("t", Settings::default(), Theme { color: false });
                    app.panes.execs.sort = sort;
                    app.colour = colour;
                    app
                };
                let r = Remembered::of(&app);
                let back = Remembered::from_json(&r.to_json(&[]).to_string()).unwrap();
                assert_eq!(back, r);
            }
        }
    }

    #[test]
    fn a_run_starts_where_the_last_one_quit() {
        let dirs = Dirs::new();
        let first = dirs.run(
            Settings::default(),
            Remember::Restore(Explicit::default()),
            |app| {
                app.settings.seed = 2;
                app.settings.jmax = 6;
                app.advantage = AdvantageMode::None;
                app.colour = ColorMode::Lens;
                app.panes.execs.next_sort();
            },
        );
        assert_eq!(
            said(&first),
            "",
            "nothing was remembered before the first run"
        );
        let mut o = opts(
            dirs.input(),
            Settings::default(),
            Remember::Restore(Explicit::default()),
        );
        let memory = Memory::start_in(dirs.state(), &mut o);
        // The loader admits with these: the first frame shows them.
        assert_eq!((o.settings.seed, o.settings.jmax), (2, 6));
        assert_eq!(o.advantage, AdvantageMode::None);
        let mut app = app_for(&o);
        memory.apply(&mut app);
        assert_eq!(
            (app.advantage, app.colour, app.panes.execs.sort),
            (AdvantageMode::None, ColorMode::Lens, SortKey::Status)
        );
        assert_eq!(
            said(&app),
            "remembered from the last run: seed 2 · J_max 6 · advantage none · colour lens · \
             sort status (--fresh starts clean)"
        );
        // Undo does not step back past the start of this run.
        assert_eq!(app.history.undo(), None);
        let file = fs::read_to_string(memory.file().unwrap()).unwrap();
        let v: Value = serde_json::from_str(&file).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["settings"]["priority"][0], "main");
        assert_eq!(v["colour"], "lens");
        assert_eq!(v["sort"], "status");
        let canonical = fs::canonicalize(dirs.data.path().join("run.jsonl")).unwrap();
        assert_eq!(v["inputs"], json!([canonical.display().to_string()]));
    }

    #[test]
    fn settings_given_on_the_command_line_win_one_by_one() {
        let remembered = with("seed=2, jmax=6, priority=sub");
        let given = with("seed=0, jmax=3, priority=main");
        let seed_only = Explicit::given(|k| k == "seed");
        // `--seed 0` is explicit even though 0 is the default.
        assert_eq!(
            merge(&given, seed_only, &remembered),
            with("seed=0, jmax=6, priority=sub")
        );
        let all = Explicit::given(|_| true);
        assert_eq!(merge(&given, all, &remembered), given);
        assert_eq!(merge(&given, Explicit::default(), &remembered), remembered);

        let dirs = Dirs::new();
        dirs.run(
            Settings::default(),
            Remember::Restore(Explicit::default()),
            |app| {
                app.settings = remembered.clone();
            },
        );
        let five = Settings {
            seed: 5,
            ..Settings::default()
        };
        let mut o = opts(dirs.input(), five, Remember::Restore(seed_only));
        let memory = Memory::start_in(dirs.state(), &mut o);
        assert_eq!((o.settings.seed, o.settings.jmax), (5, 6));
        let mut app = app_for(&o);
        memory.apply(&mut app);
        assert_eq!(
            said(&app),
            "remembered from the last run: J_max 6 · priority sub (--fresh starts clean)"
        );
        // `p` cycles from the remembered priority, though it is none of the presets.
        assert!(app.priorities.contains(&vec![Class::Sub]));
    }

    #[test]
    fn fresh_reads_nothing_and_still_saves() {
        let dirs = Dirs::new();
        dirs.run(
            Settings::default(),
            Remember::Restore(Explicit::default()),
            |app| {
                app.settings.seed = 9;
            },
        );
        let app = dirs.run(Settings::default(), Remember::Fresh, |app| {
            app.settings.jmax = 1;
        });
        assert_eq!((app.settings.seed, said(&app)), (0, String::new()));
        let mut o = opts(
            dirs.input(),
            Settings::default(),
            Remember::Restore(Explicit::default()),
        );
        Memory::start_in(dirs.state(), &mut o);
        assert_eq!((o.settings.seed, o.settings.jmax), (0, 1));
    }

    #[test]
    fn a_file_that_does_not_parse_is_named_ignored_and_replaced() {
        let cases = [
            ("{\"version\": 1, \"sett", "not JSON"),
            ("[]", "no version"),
            (
                "{\"version\": 2, \"settings\": {\"seed\": 1, \"jmax\": 1, \"priority\": [\"main\"]}}",
                "version 2, not 1",
            ),
            (
                "{\"version\": 1, \"settings\": {\"seed\": 1, \"jmax\": 1, \"priority\": [\"boss\"]}, \
                 \"advantage\": \"grpo\", \"colour\": \"lens\", \"sort\": \"status\"}",
                "unknown class \"boss\"",
            ),
            (
                "{\"version\": 1, \"settings\": {\"seed\": 1, \"jmax\": 1, \"priority\": [\"main\"]}, \
                 \"advantage\": \"grpo\", \"colour\": \"mauve\", \"sort\": \"status\"}",
                "unknown colouring \"mauve\"",
            ),
            (
                "{\"version\": 1, \"settings\": {\"seed\": 1, \"jmax\": 1, \"priority\": [\"main\"]}, \
                 \"advantage\": \"grpo\", \"colour\": \"flips vs pin\", \"sort\": \"status\"}",
                "unknown colouring",
            ),
            (
                "{\"version\": 1, \"settings\": {\"seed\": 1, \"jmax\": 1}, \
                 \"advantage\": \"grpo\", \"colour\": \"lens\", \"sort\": \"status\"}",
                "no settings.priority",
            ),
            (
                "{\"version\": 1, \"settings\": {\"seed\": -1, \"jmax\": 1, \"priority\": [\"main\"]}, \
                 \"advantage\": \"grpo\", \"colour\": \"lens\", \"sort\": \"status\"}",
                "is not a seed",
            ),
        ];
        for (text, why) in cases {
            let dirs = Dirs::new();
            let mut o = opts(
                dirs.input(),
                Settings::default(),
                Remember::Restore(Explicit::default()),
            );
            let file = Memory::start_in(dirs.state(), &mut o)
                .file()
                .unwrap()
                .to_path_buf();
            fs::create_dir_all(file.parent().unwrap()).unwrap();
            fs::write(&file, text).unwrap();
            let app = dirs.run(
                Settings::default(),
                Remember::Restore(Explicit::default()),
                |app| {
                    app.settings.seed = 4;
                },
            );
            assert_eq!(app.settings.jmax, 5, "{text}: nothing was taken from it");
            let message = said(&app);
            assert!(
                message.starts_with(&format!("ignored {}: ", file.display()))
                    && message.contains(why)
                    && message.ends_with("it is written anew at quit"),
                "{text}: {message}"
            );
            let replaced = Remembered::from_json(&fs::read_to_string(&file).unwrap()).unwrap();
            assert_eq!(replaced.settings.seed, 4);
        }
    }

    #[test]
    fn the_file_is_in_the_state_directory_never_beside_the_data() {
        let dirs = Dirs::new();
        let app = dirs.run(
            Settings::default(),
            Remember::Restore(Explicit::default()),
            |app| {
                app.settings.seed = 1;
            },
        );
        assert!(app.quit);
        let beside: Vec<_> = fs::read_dir(dirs.data.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(beside, vec![OsString::from("run.jsonl")]);
        let kept: Vec<_> = fs::read_dir(dirs.state().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(kept.len(), 1, "{kept:?}: one file, no temporary left");
        assert!(
            kept[0].ends_with(".json") && kept[0].len() == 64 + 5,
            "{kept:?}"
        );

        // Where the state directory is, and that a relative value (which would make it depend
        // on the working directory, often the data's) is never used.
        let some = |s: &str| Some(OsString::from(s));
        assert_eq!(
            state_dir_from(some("/s"), some("/h")),
            Some(PathBuf::from("/s/gyre/inspector"))
        );
        assert_eq!(
            state_dir_from(None, some("/h")),
            Some(PathBuf::from("/h/.local/state/gyre/inspector"))
        );
        assert_eq!(
            state_dir_from(some("state"), some("/h")),
            Some(PathBuf::from("/h/.local/state/gyre/inspector"))
        );
        assert_eq!(state_dir_from(some(""), some("")), None);
        assert_eq!(state_dir_from(some("s"), some("h")), None);
        assert_eq!(state_dir_from(None, None), None);
    }

    #[test]
    fn without_a_state_directory_nothing_is_remembered_and_it_says_so() {
        let dirs = Dirs::new();
        let mut o = opts(
            dirs.input(),
            Settings::default(),
            Remember::Restore(Explicit::default()),
        );
        let memory = Memory::start_in(None, &mut o);
        assert_eq!(memory.file(), None);
        let mut app = app_for(&o);
        memory.apply(&mut app);
        assert!(said(&app).starts_with("nothing is remembered between runs"));
        app.quit = true;
        memory.save(&app).unwrap();
        memory.finish(&app);
        // Tests and benchmarks: nothing read, nothing said, nothing written.
        let mut o = opts(dirs.input(), Settings::default(), Remember::Nothing);
        let memory = Memory::start_in(dirs.state(), &mut o);
        assert_eq!(memory.file(), None);
        let mut app = app_for(&o);
        memory.apply(&mut app);
        assert_eq!(said(&app), "");
    }

    #[test]
    fn a_state_directory_that_cannot_be_made_fails_the_save_only() {
        let dirs = Dirs::new();
        let blocked = dirs.state.path().join("a-file");
        fs::write(&blocked, "").unwrap();
        let mut o = opts(
            dirs.input(),
            Settings::default(),
            Remember::Restore(Explicit::default()),
        );
        let memory = Memory::start_in(Some(blocked.join("gyre")), &mut o);
        let mut app = app_for(&o);
        memory.apply(&mut app);
        app.quit = true;
        // `finish` says this on stderr (the end-to-end test reads it) and returns.
        assert_eq!(
            memory.save(&app).unwrap_err().kind(),
            io::ErrorKind::NotADirectory
        );
    }

    #[test]
    fn the_identity_is_the_canonical_paths_in_order() {
        let dirs = Dirs::new();
        let (a, b) = (
            dirs.data.path().join("run.jsonl"),
            dirs.data.path().join("b.jsonl"),
        );
        fs::write(&b, "").unwrap();
        let id = |files: &[PathBuf]| identity(&Input::Files(files.to_vec())).unwrap().0;
        let ab = id(&[a.clone(), b.clone()]);
        assert_eq!(ab, id(&[a.clone(), b.clone()]), "stable");
        assert_ne!(ab, id(&[b.clone(), a.clone()]), "order-sensitive");
        assert_ne!(ab, id(std::slice::from_ref(&a)));
        // The same file written another way is the same recording.
        let dotted = dirs.data.path().join(".").join("run.jsonl");
        assert_eq!(id(std::slice::from_ref(&a)), id(&[dotted]));
        let mut expected = fs::canonicalize(&a)
            .unwrap()
            .into_os_string()
            .into_encoded_bytes();
        expected.push(0);
        expected.extend(
            fs::canonicalize(&b)
                .unwrap()
                .into_os_string()
                .into_encoded_bytes(),
        );
        assert_eq!(ab, expected);
        // The name is the SHA-256 of it, in hex: the same on every machine and release.
        assert_eq!(
            file_name(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.json"
        );
        let demo = Demo::default();
        let (id, shown) = identity(&Input::Demo(demo)).unwrap();
        assert_eq!(id, format!("demo:{}", demo.file_name()).into_bytes());
        assert_eq!(shown, vec![format!("demo:{}", demo.file_name())]);
        assert!(identity(&Input::Files(vec![dirs.data.path().join("missing")])).is_err());
    }
}
