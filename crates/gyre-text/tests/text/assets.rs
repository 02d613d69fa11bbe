//! Model assets as users have them: a Hugging Face model directory (`tokenizer.json` or
//! `.gz`, `tokenizer_config.json` with or without its template, `chat_template.jinja`), a
//! tokenizer file, `--chat-template`, and one plain error for each way they can be wrong.

use std::path::{Path, PathBuf};

use gyre_text::{ChatTemplate, Message, ModelAssets, RenderOptions, TokenText};
use serde_json::Value;

fn qwen3_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/tokenizers/qwen3")
}

/// The bundled Qwen3 config and its template, parsed.
fn qwen3_config() -> (Value, String) {
    let text = std::fs::read_to_string(qwen3_dir().join("tokenizer_config.json")).unwrap();
    let config: Value = serde_json::from_str(&text).unwrap();
    let template = config["chat_template"].as_str().unwrap().to_owned();
    (config, template)
}

/// A model directory laid out as Hugging Face ships models today: the tokenizer gzipped,
/// `tokenizer_config.json` without `chat_template`, the template in `chat_template.jinja`.
fn hf_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        qwen3_dir().join("tokenizer.json.gz"),
        dir.path().join("tokenizer.json.gz"),
    )
    .unwrap();
    let (mut config, template) = qwen3_config();
    config.as_object_mut().unwrap().remove("chat_template");
    std::fs::write(
        dir.path().join("tokenizer_config.json"),
        serde_json::to_string_pretty(&config).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.path().join("chat_template.jinja"), template).unwrap();
    dir
}

fn conversation() -> Vec<Message> {
    vec![
        Message::new("system", "You are terse."),
        Message::new("user", "Say hi."),
        Message::new("assistant", "hi"),
    ]
}

fn render(t: &ChatTemplate) -> String {
    t.render(&conversation(), &[], RenderOptions::generation(false))
        .unwrap()
}

fn error(tokenizer: &str, template: Option<&Path>) -> String {
    let e = ModelAssets::load(tokenizer, template).unwrap_err();
    let text = format!("{e:#}");
    assert!(!text.contains('\n'), "one line: {text}");
    text
}

#[test]
fn a_hugging_face_directory_with_chat_template_jinja_and_a_gzipped_tokenizer() {
    let dir = hf_dir();
    let a = ModelAssets::load(dir.path().to_str().unwrap(), None).unwrap();
    let bundled = ChatTemplate::qwen3().unwrap();
    assert_eq!(render(&a.template), render(&bundled));
    assert_eq!(a.template.eos_token(), Some("<|im_end|>"));
    assert!(a.template_source.ends_with("chat_template.jinja"));
    let file = a.tokenizer_file.unwrap();
    assert_eq!(file.file_name().unwrap(), "tokenizer.json.gz");
    let text = render(&bundled);
    assert_eq!(
        a.tokenizer.encode(&text).unwrap(),
        TokenText::qwen3().unwrap().encode(&text).unwrap()
    );
    // The gzipped file by name, and the same file through a header-style path.
    let by_file = ModelAssets::load(file.to_str().unwrap(), None).unwrap();
    assert_eq!(render(&by_file.template), render(&bundled));
    assert!(TokenText::from_file(&file).unwrap().vocab_size() > 150_000);
}

#[test]
fn the_config_template_wins_over_chat_template_jinja() {
    let dir = hf_dir();
    let (config, template) = qwen3_config();
    std::fs::write(
        dir.path().join("tokenizer_config.json"),
        serde_json::to_string(&config).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.path().join("chat_template.jinja"), "not {{ used").unwrap();
    let a = ModelAssets::load(dir.path().to_str().unwrap(), None).unwrap();
    assert!(
        a.template_source
            .ends_with("tokenizer_config.json (chat_template)")
    );
    assert_eq!(render(&a.template), render(&ChatTemplate::qwen3().unwrap()));
    // chat_template.json ({"chat_template": ...}) when there is neither.
    std::fs::remove_file(dir.path().join("chat_template.jinja")).unwrap();
    let mut bare = config.clone();
    bare.as_object_mut().unwrap().remove("chat_template");
    std::fs::write(
        dir.path().join("tokenizer_config.json"),
        serde_json::to_string(&bare).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("chat_template.json"),
        serde_json::json!({ "chat_template": template }).to_string(),
    )
    .unwrap();
    let b = ModelAssets::load(dir.path().to_str().unwrap(), None).unwrap();
    assert!(
        b.template_source
            .ends_with("chat_template.json (chat_template)")
    );
    assert_eq!(render(&b.template), render(&ChatTemplate::qwen3().unwrap()));
}

#[test]
fn chat_template_overrides_the_tokenizers_own() {
    let dir = hf_dir();
    let own = dir.path().join("other.jinja");
    std::fs::write(
        &own,
        "{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token }}{% endfor %}",
    )
    .unwrap();
    let want = "[system]You are terse.<|im_end|>[user]Say hi.<|im_end|>[assistant]hi<|im_end|>";
    // Beside a directory's tokenizer: the special tokens still come from its config.
    let a = ModelAssets::load(dir.path().to_str().unwrap(), Some(&own)).unwrap();
    assert_eq!(render(&a.template), want);
    assert_eq!(a.template_source, own.display().to_string());
    // With the bundled tokenizer (Qwen3-Coder's case): the bundled special tokens.
    let b = ModelAssets::load("qwen3", Some(&own)).unwrap();
    assert_eq!(render(&b.template), want);
    assert!(b.tokenizer_file.is_none());
    // A tokenizer_config.json given as the template file: its chat_template.
    let c = ModelAssets::load("qwen3", Some(&qwen3_dir().join("tokenizer_config.json"))).unwrap();
    assert_eq!(render(&c.template), render(&ChatTemplate::qwen3().unwrap()));
}

#[test]
fn each_missing_or_wrong_asset_is_one_line_naming_it() {
    let dir = hf_dir();
    let d = dir.path().to_str().unwrap();
    std::fs::remove_file(dir.path().join("chat_template.jinja")).unwrap();
    let e = error(d, None);
    assert!(
        e.contains("no chat template") && e.contains("--chat-template"),
        "{e}"
    );
    std::fs::remove_file(dir.path().join("tokenizer_config.json")).unwrap();
    assert!(
        error(d, None).contains("it has no tokenizer_config.json"),
        "{}",
        error(d, None)
    );

    let only_sp = tempfile::tempdir().unwrap();
    std::fs::write(only_sp.path().join("tokenizer.model"), b"sentencepiece").unwrap();
    let e = error(only_sp.path().to_str().unwrap(), None);
    assert!(
        e.contains("holds tokenizer.model but no tokenizer.json"),
        "{e}"
    );
    let empty = tempfile::tempdir().unwrap();
    let e = error(empty.path().to_str().unwrap(), None);
    assert!(
        e.contains("holds no tokenizer.json or tokenizer.json.gz"),
        "{e}"
    );

    let e = error("qwen9", None);
    assert!(
        e.contains("no such file or directory (bundled tokenizers: qwen3)"),
        "{e}"
    );

    // A file that claims to be gzip but is not.
    let bad_gz = empty.path().join("tokenizer.json.gz");
    std::fs::write(&bad_gz, [0x1f, 0x8b, 0, 1, 2, 3]).unwrap();
    let e = error(bad_gz.to_str().unwrap(), None);
    assert!(e.contains("is not a readable gzip file"), "{e}");

    let broken = empty.path().join("broken.jinja");
    std::fs::write(&broken, "{% for %}").unwrap();
    let e = error("qwen3", Some(&broken));
    assert!(
        e.contains("broken.jinja") && e.contains("does not compile"),
        "{e}"
    );
    let e = error("qwen3", Some(&empty.path().join("none.jinja")));
    assert!(e.contains("none.jinja: no such file"), "{e}");
    let e = error("qwen3", Some(Path::new("/dev/zero")));
    assert!(e.contains("is not a regular file"), "{e}");
    let json_without = empty.path().join("t.json");
    std::fs::write(&json_without, "{\"bos_token\": \"<s>\"}").unwrap();
    let e = error("qwen3", Some(&json_without));
    assert!(e.contains("JSON without a chat_template"), "{e}");
}

/// `strftime_now` as transformers provides it (Llama 3.x writes today's date with it).
#[test]
fn strftime_now_is_the_local_date() {
    let t = ChatTemplate::from_source(
        "{{ strftime_now(\"%Y\") }}|{{ strftime_now(\"%d %b %Y\") }}".into(),
        None,
    )
    .unwrap();
    let text = render(&t);
    let (year, date) = text.split_once('|').unwrap();
    assert_eq!(year.len(), 4, "{text}");
    assert!(year.bytes().all(|b| b.is_ascii_digit()), "{text}");
    assert!(date.ends_with(year) && date.len() == 11, "{text}");
    let bad = ChatTemplate::from_source("{{ strftime_now(\"%Q\") }}".into(), None).unwrap();
    let e = bad
        .render(&conversation(), &[], RenderOptions::generation(false))
        .unwrap_err();
    assert!(
        format!("{e:#}").contains("not a valid strftime format"),
        "{e:#}"
    );
}

/// The model files of `tests/fixtures/models/NAME` (a template, a config; licences beside them).
fn fixture_model(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/models")
        .join(name)
}

/// `text` with the date gpt-oss's template writes (`strftime_now`, today) set to 2026-01-02.
fn fixed_date(text: &str) -> String {
    let at = text.find("Current date: ").expect("a date line") + "Current date: ".len();
    format!("{}2026-01-02{}", &text[..at], &text[at + 10..])
}

/// A tool call, its result and the tools, in the shapes harnesses send.
fn tool_conversation() -> (Vec<Message>, Vec<Value>) {
    let call = gyre_text::ToolCall {
        id: "c1".into(),
        name: "ls".into(),
        arguments: serde_json::json!({"path": "/tmp"}),
    };
    let messages = vec![
        Message::new("user", "List /tmp."),
        Message {
            tool_calls: vec![call],
            ..Message::new("assistant", "")
        },
        Message::tool("c1", "a.txt"),
    ];
    let tools = vec![serde_json::json!({"type": "function", "function": {
        "name": "ls", "description": "List files.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}})];
    (messages, tools)
}

/// gpt-oss as Hugging Face ships it: `tokenizer_config.json` without a template (its special
/// tokens are `<|startoftext|>` / `<|return|>`), `chat_template.jinja` beside it. The expected
/// text is Python Jinja2's rendering of the same template (transformers' settings).
#[test]
fn a_gpt_oss_directory_renders_its_chat_template_jinja() {
    let dir = tempfile::tempdir().unwrap();
    for f in ["tokenizer_config.json", "chat_template.jinja"] {
        std::fs::copy(fixture_model("gpt-oss").join(f), dir.path().join(f)).unwrap();
    }
    // Any tokenizer.json serves to render text; gpt-oss's own is 4 MB gzipped.
    std::fs::copy(
        qwen3_dir().join("tokenizer.json.gz"),
        dir.path().join("tokenizer.json.gz"),
    )
    .unwrap();
    let a = ModelAssets::load(dir.path().to_str().unwrap(), None).unwrap();
    assert!(a.template_source.ends_with("chat_template.jinja"));
    assert_eq!(a.template.eos_token(), Some("<|return|>"));
    let system = "<|start|>system<|message|>You are ChatGPT, a large language model trained by \
                  OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: 2026-01-02\n\nReasoning: \
                  medium\n\n# Valid channels: analysis, commentary, final. Channel must be \
                  included for every message.";
    assert_eq!(
        fixed_date(&render(&a.template)),
        format!(
            "{system}<|end|><|start|>developer<|message|># Instructions\n\nYou are terse.\n\n\
             <|end|><|start|>user<|message|>Say hi.<|end|><|start|>assistant<|channel|>final\
             <|message|>hi<|return|>"
        )
    );
    let (messages, tools) = tool_conversation();
    let text = a
        .template
        .render(&messages, &tools, RenderOptions::generation(true))
        .unwrap();
    assert_eq!(
        fixed_date(&text),
        format!(
            "{system}\nCalls to these tools must go to the commentary channel: 'functions'.\
             <|end|><|start|>developer<|message|># Tools\n\n## functions\n\nnamespace \
             functions {{\n\n// List files.\ntype ls = (_: {{\npath: string,\n}}) => any;\n\n\
             }} // namespace functions<|end|><|start|>user<|message|>List /tmp.<|end|>\
             <|start|>assistant to=functions.ls<|channel|>commentary json<|message|>\
             {{\"path\": \"/tmp\"}}<|call|><|start|>functions.ls to=assistant<|channel|>\
             commentary<|message|>\"a.txt\"<|end|><|start|>assistant"
        )
    );
}

/// Qwen3-Coder's template on the bundled Qwen3 tokenizer (`--chat-template`), with and without
/// tools: it guards `tools | length` with `tools is iterable`, which Python's Jinja answers
/// false for `tools=None` (minijinja's own test says true, and the render failed).
#[test]
fn qwen3_coder_runs_on_the_qwen3_tokenizer_with_and_without_tools() {
    let file = fixture_model("qwen3-coder").join("chat_template.jinja");
    let a = ModelAssets::load("qwen3", Some(&file)).unwrap();
    assert_eq!(
        render(&a.template),
        "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nSay hi.<|im_end|>\n\
         <|im_start|>assistant\nhi<|im_end|>\n"
    );
    let (messages, tools) = tool_conversation();
    let text = a
        .template
        .render(&messages, &tools, RenderOptions::generation(true))
        .unwrap();
    assert!(
        text.starts_with(
            "<|im_start|>system\nYou are Qwen, a helpful AI assistant that can interact with a \
             computer to solve tasks.\n\nYou have access to the following functions:\n\n<tools>\
             \n<function>\n<name>ls</name>\n<description>List files.</description>\n\
             <parameters>\n<parameter>\n<name>path</name>\n<type>string</type>\n</parameter>\n\
             <required>['path']</required>\n</parameters>\n</function>\n</tools>"
        ),
        "{text}"
    );
    assert!(
        text.ends_with(
            "<|im_start|>user\nList /tmp.<|im_end|>\n<|im_start|>assistant\n<tool_call>\n\
             <function=ls>\n<parameter=path>\n/tmp\n</parameter>\n</function>\n</tool_call>\
             <|im_end|>\n<|im_start|>user\n<tool_response>\na.txt\n</tool_response>\n\
             <|im_end|>\n<|im_start|>assistant\n"
        ),
        "{text}"
    );
}

/// A config whose `chat_template` is a list of named templates: `default` is used alone; with
/// a `tool_use` template beside it (transformers' pick for requests with tools) or without a
/// `default`, it is one line naming the file and pointing at `--chat-template`.
#[test]
fn a_list_of_named_templates() {
    let dir = hf_dir();
    std::fs::remove_file(dir.path().join("chat_template.jinja")).unwrap();
    let (mut config, template) = qwen3_config();
    let write = |config: &Value| {
        std::fs::write(
            dir.path().join("tokenizer_config.json"),
            serde_json::to_string(config).unwrap(),
        )
        .unwrap()
    };
    let d = dir.path().to_str().unwrap();
    config["chat_template"] = serde_json::json!([{"name": "default", "template": template}]);
    write(&config);
    let a = ModelAssets::load(d, None).unwrap();
    assert_eq!(render(&a.template), render(&ChatTemplate::qwen3().unwrap()));
    config["chat_template"] = serde_json::json!([
        {"name": "default", "template": template}, {"name": "tool_use", "template": "T"}]);
    write(&config);
    let e = error(d, None);
    assert!(
        e.contains(
            "tokenizer_config.json: chat_template is a list of named templates (default, tool_use)"
        ) && e.contains("--chat-template FILE"),
        "{e}"
    );
    config["chat_template"] = serde_json::json!([{"name": "rag", "template": template}]);
    write(&config);
    let e = error(d, None);
    assert!(
        e.contains("tokenizer_config.json: chat_template is a list of named templates (rag) without \"default\""),
        "{e}"
    );
}
