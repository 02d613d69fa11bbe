//! The real binary in a real terminal (tmux): open, replay, help, export, quit.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    socket: std::path::PathBuf,
    /// The inspector's state directory when the test gave none: what one test's inspector
    /// remembers never reaches another test, nor the user's own.
    _state: Option<tempfile::TempDir>,
}

impl Tmux {
    fn available() -> bool {
        Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    fn start(dir: &Path, cmd: &str) -> Tmux {
        let state = tempfile::tempdir().unwrap();
        let mut t = Tmux::start_with_state(dir, cmd, state.path());
        t._state = Some(state);
        t
    }

    /// A session whose inspector remembers its settings in `state` (`XDG_STATE_HOME`; a new
    /// tmux server takes its environment from the command that starts it).
    fn start_with_state(dir: &Path, cmd: &str, state: &Path) -> Tmux {
        let socket = dir.join("tmux.sock");
        let ok = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(["new-session", "-d", "-x", "160", "-y", "45", "-c"])
            .arg(dir)
            .arg(cmd)
            .env_remove("NO_COLOR")
            .env("XDG_STATE_HOME", state)
            .status()
            .unwrap();
        assert!(ok.success(), "tmux new-session");
        Tmux {
            socket,
            _state: None,
        }
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            let ok = Command::new("tmux")
                .arg("-S")
                .arg(&self.socket)
                .args(["send-keys", "-t", "0", k])
                .status()
                .unwrap();
            assert!(ok.success());
            std::thread::sleep(Duration::from_millis(120));
        }
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["capture-pane", "-p", "-t", "0"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn wait_for(&self, what: &str) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(what) {
                return s;
            }
            if start.elapsed() > Duration::from_secs(30) {
                panic!("timed out waiting for {what:?}; screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .status();
    }
}

/// Fails the test when tmux is missing (`.ci/run` installs it).
fn require_tmux() {
    assert!(
        Tmux::available(),
        "tmux is required for the end-to-end test (.ci/run installs it)"
    );
}

/// A temporary directory holding the bundled example as `example.jsonl` (tmux required).
fn example_dir() -> tempfile::TempDir {
    require_tmux();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("example.jsonl"),
        gyre_engine::demo::RECORDING,
    )
    .unwrap();
    dir
}

fn wait_file(p: &Path) -> String {
    let start = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(p) {
            if !s.is_empty() {
                return s;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no {}",
            p.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn inspector_in_tmux_replays_exports_and_quits_with_0() {
    let dir = example_dir();
    let bin = env!("CARGO_BIN_EXE_gyre");
    let t = Tmux::start(
        dir.path(),
        &format!("{bin} inspect example.jsonl --jmax 3; echo EXIT=$? > exit.txt; sleep 30"),
    );
    let s = t.wait_for("draw 3/3");
    assert!(
        s.contains("J_max 3") && s.contains("? help") && s.contains("q quit"),
        "{s}"
    );
    t.keys(&["["]);
    t.wait_for("draw 2/3");
    t.keys(&["{"]);
    t.wait_for("nothing claimed yet");
    t.keys(&["}"]);
    t.wait_for("draw 3/3");
    t.keys(&["+"]);
    t.wait_for("J_max 4");
    t.keys(&["?"]);
    t.wait_for("help · Esc closes");
    t.keys(&["Escape"]);
    let start = Instant::now();
    while t.screen().contains("help · Esc closes") {
        assert!(start.elapsed() < Duration::from_secs(10), "Esc closes help");
        std::thread::sleep(Duration::from_millis(100));
    }
    t.keys(&["e"]);
    t.wait_for("admitted.jsonl");
    t.keys(&["Enter"]);
    t.wait_for("exported");
    t.keys(&["q"]);
    assert_eq!(wait_file(&dir.path().join("exit.txt")).trim(), "EXIT=0");
    // The export is what `gyre admit` writes for the same settings.
    let out = Command::new(bin)
        .current_dir(dir.path())
        .args(["admit", "example.jsonl", "--jmax", "4"])
        .output()
        .unwrap();
    assert_eq!(
        std::fs::read(dir.path().join("admitted.jsonl")).unwrap(),
        out.stdout
    );
}

#[test]
fn invalid_input_shows_the_problem_and_exits_2() {
    require_tmux();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.jsonl"), "{\"kind\":\"request\"}\n").unwrap();
    let bin = env!("CARGO_BIN_EXE_gyre");
    let t = Tmux::start(
        dir.path(),
        &format!("{bin} inspect bad.jsonl; echo EXIT=$? > exit.txt; sleep 30"),
    );
    t.wait_for("could not load");
    t.keys(&["q"]);
    assert_eq!(wait_file(&dir.path().join("exit.txt")).trim(), "EXIT=2");
}

#[test]
fn gyre_without_a_terminal_prints_the_text_demo() {
    let out = Command::new(env!("CARGO_BIN_EXE_gyre")).output().unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("bundled demo"), "{s}");
}

#[test]
fn the_reported_crash_sequence_and_the_new_views_in_a_real_terminal() {
    require_tmux();
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_gyre");
    let t = Tmux::start(
        dir.path(),
        &format!("{bin} inspect --demo synth; echo EXIT=$? > exit.txt; sleep 30"),
    );
    t.wait_for("draw 5/5");
    // `/r14` Enter, Shift-Tab Shift-Tab, `j`: the issue's crash.
    t.keys(&["/", "r", "1", "4"]);
    t.wait_for("search every execution");
    t.keys(&["Enter", "BTab", "BTab", "j", "j", "G"]);
    t.wait_for("match 1/");
    // Why was r14 not drawn?
    t.keys(&["2", "y"]);
    let s = t.wait_for("(not) drawn?");
    assert!(s.contains("Fate of"), "{s}");
    t.keys(&["Escape"]);
    // The whole draw log, zoomed; a settings change and what it moved.
    t.keys(&["3", "r", "z"]);
    t.wait_for("whole log");
    t.keys(&["z", "-"]);
    t.wait_for("J_max 5 → 4");
    t.keys(&["q"]);
    assert_eq!(wait_file(&dir.path().join("exit.txt")).trim(), "EXIT=0");
}

#[test]
fn open_outside_hands_the_terminal_to_the_pager_and_takes_it_back() {
    let dir = example_dir();
    // A pager that reads a line from the terminal: keys typed meanwhile must reach it, not
    // the inspector, and the terminal must be in line mode for `read`.
    std::fs::write(
        dir.path().join("pager.sh"),
        "#!/bin/sh\ncp \"$1\" seen.txt\necho PAGER-OPEN\nread line\necho \"$line\" > typed.txt\n",
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_gyre");
    let t = Tmux::start(
        dir.path(),
        &format!(
            "PAGER='sh ./pager.sh' {bin} inspect example.jsonl; echo EXIT=$? > exit.txt; sleep 30"
        ),
    );
    t.wait_for("draw 4/4");
    t.keys(&["O"]);
    t.wait_for("open outside");
    t.keys(&["w"]);
    t.wait_for("PAGER-OPEN");
    // `s` and `q` would change the seed and quit the inspector if it still read the keys.
    t.keys(&["s", "q", "Enter"]);
    assert_eq!(wait_file(&dir.path().join("typed.txt")).trim(), "sq");
    let s = t.wait_for("back from $PAGER (sh ./pager.sh): why");
    assert!(s.contains("seed 0"), "{s}");
    // What the pager got is what `gyre why` prints for that request.
    let seen = wait_file(&dir.path().join("seen.txt"));
    let request = seen
        .lines()
        .next()
        .and_then(|l| l.split(" · ").nth(1))
        .unwrap()
        .to_string();
    let exec = seen.split(" · ").next().unwrap().to_string();
    let out = Command::new(bin)
        .current_dir(dir.path())
        .args([
            "why",
            "example.jsonl",
            "--execution",
            &exec,
            "--request",
            &request,
        ])
        .output()
        .unwrap();
    assert_eq!(seen, String::from_utf8_lossy(&out.stdout));
    // The inspector reads keys again; then the real less, and back.
    t.keys(&["s"]);
    t.wait_for("seed 1");
    // Ctrl-C in the pager ends the pager, not the inspector.
    t.keys(&["O", "t"]);
    t.wait_for("PAGER-OPEN");
    t.keys(&["C-c"]);
    t.wait_for("$PAGER (sh ./pager.sh) ended with");
    t.keys(&["s"]);
    t.wait_for("seed 2");
    t.keys(&["q"]);
    assert_eq!(wait_file(&dir.path().join("exit.txt")).trim(), "EXIT=0");
}

#[test]
fn less_as_the_pager_comes_back_to_the_inspector() {
    require_tmux();
    assert!(
        Command::new("less")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success()),
        "less is required for this test (.ci/run installs it)"
    );
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_gyre");
    let t = Tmux::start(
        dir.path(),
        &format!(
            "env -u PAGER -u LESS {bin} inspect --demo synth; echo EXIT=$? > exit.txt; sleep 30"
        ),
    );
    t.wait_for("draw 5/5");
    t.keys(&["O", "w"]);
    let s = t.wait_for("(END)");
    assert!(s.contains("winner"), "{s}");
    t.keys(&["q"]);
    t.wait_for("back from $PAGER (less): why");
    t.keys(&["'", "o"]);
    t.wait_for("(> next · < previous");
    t.keys(&["q"]);
    assert_eq!(wait_file(&dir.path().join("exit.txt")).trim(), "EXIT=0");
}

#[test]
fn follow_shows_a_recording_as_it_grows() {
    require_tmux();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("growing.jsonl");
    let text = std::str::from_utf8(gyre_engine::demo::RECORDING).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    // e1 complete, and half of e2's first line: a writer caught mid-line.
    let (head, tail) = lines.split_at(14);
    let half = tail[0].len() / 2;
    std::fs::write(&rec, format!("{}{}", head.concat(), &tail[0][..half])).unwrap();
    let bin = env!("CARGO_BIN_EXE_gyre");
    let t = Tmux::start(
        dir.path(),
        &format!("{bin} inspect --follow growing.jsonl; echo EXIT=$? > exit.txt; sleep 30"),
    );
    let s = t.wait_for("e1");
    assert!(!s.contains("e2") && !s.contains("problem"), "{s}");
    std::fs::write(&rec, text).unwrap();
    let s = t.wait_for("recording grew");
    assert!(s.contains("4 executions (+3)") && s.contains("e4"), "{s}");
    t.keys(&["q"]);
    assert_eq!(wait_file(&dir.path().join("exit.txt")).trim(), "EXIT=0");
}

/// `--follow` on a recording that is appended to in the middle of the path on screen (a new
/// request splits its nodes) and then rewritten shorter: the inspector draws the new tree and
/// path each time and keeps running (both panicked on the next frame).
#[test]
fn follow_survives_a_split_path_and_a_shorter_rewrite() {
    require_tmux();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("split.jsonl");
    let request = |id: &str, input: std::ops::Range<u32>, output: &[u32]| {
        format!(
            "{{\"kind\":\"request\",\"execution\":\"e\",\"id\":\"{id}\",\"input\":{:?},\"output\":{output:?},\"logprobs\":{:?}}}\n",
            input.collect::<Vec<_>>(),
            vec![-1.0; output.len()]
        )
    };
    let head = "{\"kind\":\"header\",\"format\":\"gyre/1\"}\n{\"kind\":\"execution\",\"execution\":\"e\",\"t\":0}\n";
    let (r1, r2) = (
        request("r1", 1..41, &[50, 51, 52]),
        request("r2", 1..6, &[60]),
    );
    let r3 = request("r3", 1..41, &[50, 51, 70]);
    std::fs::write(&rec, format!("{head}{r1}{r3}")).unwrap();
    let bin = env!("CARGO_BIN_EXE_gyre");
    let t = Tmux::start(
        dir.path(),
        &format!("{bin} inspect --follow split.jsonl; echo EXIT=$? > exit.txt; sleep 30"),
    );
    t.wait_for("Tree · e · 2 requests");
    // The cursor on a context token of r1's path, the tree focused.
    t.keys(&["g", "2"]);
    std::fs::write(&rec, format!("{head}{r1}{r3}{r2}")).unwrap();
    let s = t.wait_for("Tree · e · 3 requests");
    assert!(s.contains("r2") && s.contains("recording grew"), "{s}");
    t.keys(&["j", "5", "G"]);
    std::fs::write(&rec, format!("{head}{r1}")).unwrap();
    let s = t.wait_for("Tree · e · 1 request ");
    assert!(
        !dir.path().join("exit.txt").exists(),
        "the inspector exited:\n{s}"
    );
    t.keys(&["q"]);
    assert_eq!(wait_file(&dir.path().join("exit.txt")).trim(), "EXIT=0");
}

/// Each recording's settings, colouring and sort are remembered between runs, in the state
/// directory and never beside the data: flags given win one by one, `--follow` starts from them
/// too, `--fresh` starts clean (and is remembered in turn).
#[test]
fn the_inspector_remembers_each_recordings_settings_between_runs() {
    require_tmux();
    let (data, work, state) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let rec = data.path().join("example.jsonl");
    std::fs::write(&rec, gyre_engine::demo::RECORDING).unwrap();
    let bin = env!("CARGO_BIN_EXE_gyre");
    let mut runs = 0;
    // Opens the recording (from `cd`, by `path`), waits for `shows`, presses `keys`, then
    // quits and checks the exit status.
    let mut run = |cd: &Path, path: &str, flags: &str, shows: &[&str], keys: &[&str]| {
        runs += 1;
        let exit = work.path().join(format!("exit{runs}.txt"));
        let cmd = format!(
            "cd {} && {bin} inspect {path} {flags}; echo EXIT=$? > {}; sleep 30",
            cd.display(),
            exit.display()
        );
        // A tmux server of its own each time: the last one may still be going away.
        let session = work.path().join(format!("session{runs}"));
        std::fs::create_dir(&session).unwrap();
        let t = Tmux::start_with_state(&session, &cmd, state.path());
        let mut screen = String::new();
        for what in shows {
            screen = t.wait_for(what);
        }
        t.keys(keys);
        t.keys(&["q"]);
        assert_eq!(wait_file(&exit).trim(), "EXIT=0", "{screen}");
        screen
    };
    let abs = rec.display().to_string();
    run(work.path(), &abs, "", &["J_max 5 · seed 0 ·"], &[]);
    run(
        work.path(),
        &abs,
        "",
        &["J_max 5 · seed 0 ·"],
        &["s", "s", "+"],
    );
    // The same file by another path is the same recording.
    let s = run(
        data.path(),
        "./example.jsonl",
        "",
        &["J_max 6 · seed 2 ·"],
        &[],
    );
    assert!(
        s.contains("remembered from the last run: seed 2 · J_max 6 (--fresh starts clean)"),
        "{s}"
    );
    run(work.path(), &abs, "--seed 5", &["J_max 6 · seed 5 ·"], &[]);
    // --follow starts from what was remembered too (here the --seed 5 run's).
    run(work.path(), &abs, "--follow", &["J_max 6 · seed 5 ·"], &[]);
    let s = run(work.path(), &abs, "--fresh", &["J_max 5 · seed 0 ·"], &[]);
    assert!(!s.contains("remembered"), "{s}");
    // --fresh was remembered in turn.
    run(work.path(), &abs, "", &["J_max 5 · seed 0 ·"], &[]);

    let beside: Vec<_> = std::fs::read_dir(data.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside, ["example.jsonl"], "nothing beside the data");
    let kept: Vec<_> = std::fs::read_dir(state.path().join("gyre/inspector"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&kept[0]).unwrap()).unwrap();
    let canonical = std::fs::canonicalize(&rec).unwrap();
    assert_eq!(file["inputs"][0], canonical.display().to_string());
    assert_eq!(file["version"], 1);
    assert_eq!(file["settings"]["seed"], 0, "the --fresh run's");
}

/// Without a state directory, or with one that cannot be made, the inspector runs, quits with
/// 0, and says once what it could not do.
#[test]
fn the_inspector_runs_without_a_state_directory() {
    let dir = example_dir();
    let bin = env!("CARGO_BIN_EXE_gyre");
    let t = Tmux::start(
        dir.path(),
        &format!(
            "env -u HOME -u XDG_STATE_HOME {bin} inspect example.jsonl; echo EXIT=$? > exit.txt; sleep 30"
        ),
    );
    t.wait_for("nothing is remembered between runs");
    t.keys(&["q"]);
    assert_eq!(wait_file(&dir.path().join("exit.txt")).trim(), "EXIT=0");

    drop(t);

    // A state directory under a plain file cannot be made, even by root.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("example.jsonl"),
        gyre_engine::demo::RECORDING,
    )
    .unwrap();
    std::fs::write(dir.path().join("plain"), "").unwrap();
    let t = Tmux::start(
        dir.path(),
        &format!(
            "XDG_STATE_HOME={}/plain/state {bin} inspect example.jsonl 2> err.txt; echo EXIT=$? > exit.txt; sleep 30",
            dir.path().display()
        ),
    );
    t.wait_for("J_max 5 · seed 0 ·");
    t.keys(&["q"]);
    assert_eq!(wait_file(&dir.path().join("exit.txt")).trim(), "EXIT=0");
    let err = std::fs::read_to_string(dir.path().join("err.txt")).unwrap();
    assert!(
        err.starts_with(&format!(
            "gyre: could not remember the settings in {}/plain/state/gyre/inspector/",
            dir.path().display()
        )) && err.ends_with(": Not a directory (os error 20)\n")
            && err.lines().count() == 1,
        "{err:?}"
    );
}

/// A trainer's dump imported with `gyre import slime`, audited in the inspector at 80×24: the
/// audit view lists the findings the engine makes, Enter puts the cursor on the first one and
/// the why line says its verdict; then random keys (every key of the audit, the colourings and
/// the panes, but none that quit or hand the terminal to another program) and a clean exit.
#[test]
fn an_imported_trainer_dump_audits_in_a_real_terminal_at_80x24() {
    require_tmux();
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_gyre");
    let dump = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import/slime/dump");
    let out = Command::new(bin)
        .current_dir(dir.path())
        .args(["import", "slime"])
        .arg(&dump)
        .args(["--out", "slime.jsonl"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = Tmux::start(
        dir.path(),
        &format!("{bin} inspect slime.jsonl; echo EXIT=$? > exit.txt; sleep 30"),
    );
    t.wait_for("? help");
    let ok = Command::new("tmux")
        .arg("-S")
        .arg(&t.socket)
        .args(["resize-window", "-t", "0", "-x", "80", "-y", "24"])
        .status()
        .unwrap();
    assert!(ok.success(), "tmux resize-window");
    t.keys(&["A"]);
    let s = t.wait_for("audit: findings");
    assert!(s.contains("false_fork (") && s.contains("samples ·"), "{s}");
    t.keys(&["Home", "Enter"]);
    let s = t.wait_for("audit: forked");
    assert!(s.contains("audit:  trained, agreeing"), "the legend: {s}");
    // A fixed pseudo-random walk (an LCG), the same keys on every run.
    let keys = [
        "A", "Tab", "Enter", "Down", "Up", "c", "Left", "Right", "PageDown", "Home", "End",
        "Escape", "j", "k", "w", "b", "t", "T", "x", "]", "[", "s", "+", "-", "z", "1", "2", "5",
        "6", "D", "R", "y", "?", "g", "G", "h", "l", "'", ">", "n",
    ];
    let mut r: u64 = 35;
    for _ in 0..150 {
        r = r
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        t.keys(&[keys[(r >> 33) as usize % keys.len()]]);
    }
    t.keys(&["Escape", "Escape", "Escape", "q"]);
    assert_eq!(wait_file(&dir.path().join("exit.txt")).trim(), "EXIT=0");
}
