//! `gyre import slime|skyrl` on the command line: the trainer dumps import, validate, say what
//! was inferred, and a hostile dump is one line, exit 2, no output.

use std::process::Command;

use crate::import_common::fixture;

fn gyre(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn dumps_import_and_validate() {
    let dir = tempfile::tempdir().unwrap();
    for (source, input, said) in [
        (
            "slime",
            "slime/dump",
            "10 trained samples (106 mask-on tokens: 106 with a behaviour log-prob, 106 with the trainer's)",
        ),
        (
            "skyrl",
            "skyrl/dumped_data",
            "10 trained samples (85 mask-on tokens: 54 with a behaviour log-prob, 85 with the trainer's)",
        ),
    ] {
        let out = dir.path().join(format!("{source}.jsonl"));
        let input = fixture(input);
        let (code, err) = gyre(&[
            "import",
            source,
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains(said), "{err}");
        assert!(err.contains("gyre: inferred: "), "{err}");
        let (code, err) = gyre(&["validate", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
    }
}

#[test]
fn hostile_dumps_are_one_line_exit_2_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    for (source, input) in [
        ("slime", "slime/hostile/truncated.pt"),
        ("slime", "slime/hostile/unknown-global.pt"),
        ("slime", "slime/hostile/unknown-dtype.pt"),
        ("skyrl", "skyrl/hostile/truncated.pkl"),
        ("skyrl", "skyrl/hostile/unknown-global.pkl"),
        ("skyrl", "skyrl/hostile/unknown-dtype.pkl"),
    ] {
        let input = fixture(input);
        let (code, err) = gyre(&[
            "import",
            source,
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with(input.to_str().unwrap()), "{err}");
        assert!(!out.exists());
    }
}
