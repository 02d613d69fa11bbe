//! Token ids → display text with the bundled Qwen3 tokenizer, inline vocabularies and the
//! fallback. The split-character ids are Qwen3's own (tests/reference/chat_template_ids.py).

use std::path::Path;

use gyre_text::{TokenText, sanitize};

fn shown(tok: &TokenText, ids: &[u32]) -> Vec<String> {
    tok.display_pieces(ids)
        .into_iter()
        .map(|c| c.into_owned())
        .collect()
}

#[test]
fn cjk_character_split_over_two_tokens_shows_on_the_first() {
    let tok = TokenText::qwen3().unwrap();
    assert_eq!(tok.encode("龘").unwrap(), [82912, 246]);
    assert_eq!(shown(&tok, &[82912, 246]), ["龘", ""]);
    assert_eq!(tok.piece_bytes(82912), Some(&[0xE9, 0xBE][..]));
}

#[test]
fn emoji_split_over_three_tokens() {
    let tok = TokenText::qwen3().unwrap();
    assert_eq!(tok.encode("a🫠b").unwrap(), [64, 9284, 104, 254, 65]);
    assert_eq!(
        shown(&tok, &[64, 9284, 104, 254, 65]),
        ["a", "🫠", "", "", "b"]
    );
    // 👩‍💻: the joiner is itself split over two tokens.
    let ids = [145233, 378, 235, 145851];
    assert_eq!(shown(&tok, &ids), ["👩", "\u{200D}", "", "💻"]);
    assert_eq!(tok.decode(&ids), "👩‍💻");
}

#[test]
fn unfinished_and_stray_bytes_show_as_hex() {
    let tok = TokenText::qwen3().unwrap();
    // Cut off by the end of the slice: shown where the character began.
    assert_eq!(shown(&tok, &[64, 9284, 104]), ["a", "⟨f0 9f ab⟩", ""]);
    // Continuation bytes with no lead byte before them.
    assert_eq!(shown(&tok, &[104, 254, 65]), ["⟨ab⟩", "⟨a0⟩", "b"]);
    // Interrupted by a complete token.
    assert_eq!(shown(&tok, &[9284, 65]), ["⟨f0 9f⟩", "b"]);
    // Interrupted by an unknown id.
    assert_eq!(shown(&tok, &[82912, 4_000_000]), ["⟨e9 be⟩", "⟨4000000⟩"]);
}

#[test]
fn specials_and_unknown_ids() {
    let tok = TokenText::qwen3().unwrap();
    assert_eq!(
        shown(&tok, &[151644, 872, 198, 151667, 151645]),
        ["<|im_start|>", "user", "\n", "<think>", "<|im_end|>"]
    );
    assert_eq!(shown(&tok, &[151669, 200_000]), ["⟨151669⟩", "⟨200000⟩"]);
    assert_eq!(tok.piece_bytes(151669), None);
    assert_eq!(tok.vocab_size(), 151669);
    assert_eq!(tok.token_id("<|im_start|>"), Some(151644));
}

#[test]
fn encode_recognises_special_tokens() {
    let tok = TokenText::qwen3().unwrap();
    let text = "<|im_start|>user\nrun `ls -la`<|im_end|>\n<|im_start|>assistant\n<think>\n";
    let ids = tok.encode(text).unwrap();
    assert_eq!(&ids[..3], [151644, 872, 198]);
    assert!(ids.contains(&151667));
    assert_eq!(tok.decode(&ids), text);
}

#[test]
fn window_equals_slice_of_full_display() {
    let tok = TokenText::qwen3().unwrap();
    let ids = tok.encode("x 龘🫠 y 𠜎 👩‍💻 <|im_end|> é z 🧌🥲").unwrap();
    let full = shown(&tok, &ids);
    for start in 0..=ids.len() {
        for end in start..=ids.len() {
            let win: Vec<String> = tok
                .display_window(&ids, start..end)
                .into_iter()
                .map(|c| c.into_owned())
                .collect();
            assert_eq!(win, full[start..end], "window {start}..{end}");
        }
    }
}

#[test]
fn fallback_and_inline_vocabulary() {
    let none = TokenText::none();
    assert!(!none.has_vocabulary());
    assert_eq!(shown(&none, &[0, 1234]), ["⟨0⟩", "⟨1234⟩"]);
    assert!(none.encode("x").is_err());

    let header = serde_json::json!({"vocab": ["<|im_start|>", "user", "\n", "hi\u{1b}"]});
    let tok = TokenText::from_header(&header, Path::new(".")).unwrap();
    assert_eq!(
        shown(&tok, &[0, 1, 2, 3, 9]),
        ["<|im_start|>", "user", "\n", "hi\u{1b}", "⟨9⟩"]
    );
    assert_eq!(sanitize(&tok.decode(&[2, 3])), "⏎hi␛");
    assert!(TokenText::from_header(&serde_json::json!({"vocab": [1]}), Path::new(".")).is_err());
    assert!(TokenText::from_header(&serde_json::json!(7), Path::new(".")).is_err());
}

#[test]
fn by_name_and_by_path() {
    assert_eq!(
        TokenText::from_arg("qwen3", Path::new("/"))
            .unwrap()
            .label(),
        "qwen3"
    );
    assert_eq!(
        TokenText::from_header(&serde_json::json!("qwen3"), Path::new("."))
            .unwrap()
            .label(),
        "qwen3"
    );
    assert!(TokenText::bundled("llama").is_err());

    // A small tokenizer.json next to a "recording", referenced relatively.
    let dir = tempfile::tempdir().unwrap();
    let json = r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [
        {"id": 3, "content": "<eot>", "single_word": false, "lstrip": false, "rstrip": false,
         "normalized": false, "special": true}],
      "normalizer": null,
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
      "post_processor": null,
      "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
      "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
        "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
        "vocab": {"h": 0, "i": 1, "Ċ": 2}, "merges": []}}"#;
    std::fs::write(dir.path().join("tok.json"), json).unwrap();
    let header = serde_json::json!({"path": "tok.json"});
    let tok = TokenText::from_header(&header, dir.path()).unwrap();
    assert_eq!(
        shown(&tok, &[0, 1, 2, 3, 4]),
        ["h", "i", "\n", "<eot>", "⟨4⟩"]
    );
    assert_eq!(tok.encode("hi\n<eot>").unwrap(), [0, 1, 2, 3]);
    let by_arg = TokenText::from_arg("tok.json", dir.path()).unwrap();
    assert_eq!(by_arg.decode(&[1, 0]), "ih");
    assert!(TokenText::from_arg("missing.json", dir.path()).is_err());
}
