//! `docs/keys.md` is generated from the key-binding table and must match it.

#[test]
fn keys_md_matches_the_binding_table() {
    let generated = gyre_tui::keys::markdown();
    let path = concat!(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../.."),
        "/docs/keys.md"
    );
    if std::env::var_os("GYRE_WRITE_KEYS").is_some() || !std::path::Path::new(path).exists() {
        std::fs::create_dir_all(concat!(
            concat!(env!("CARGO_MANIFEST_DIR"), "/../.."),
            "/docs"
        ))
        .unwrap();
        std::fs::write(path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap();
    assert_eq!(
        committed, generated,
        "run GYRE_WRITE_KEYS=1 cargo test --test tui_keys"
    );
}

#[test]
fn hint_bar_starts_with_help_and_quit() {
    let h = gyre_tui::keys::hints();
    assert_eq!(h[0], ("?".to_string(), "help"));
    assert_eq!(h[1], ("q".to_string(), "quit"));
}

#[test]
fn no_key_is_bound_twice() {
    let mut seen = std::collections::HashSet::new();
    for b in gyre_tui::keys::BINDINGS {
        for k in b.keys {
            assert!(seen.insert(format!("{k:?}")), "{k:?} bound twice");
        }
    }
}
