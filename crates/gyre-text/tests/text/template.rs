//! Chat template rendering and tokenisation against ids frozen from transformers'
//! `apply_chat_template` (see tests/reference/chat_template_ids.py).

use gyre_text::{ChatTemplate, Message, RenderOptions, TokenText};

fn case_inputs(
    messages: &str,
    tools: &str,
    gen_prompt: bool,
    thinking: Option<bool>,
) -> (Vec<Message>, Vec<serde_json::Value>, RenderOptions) {
    let messages: Vec<Message> = serde_json::from_str(messages).unwrap();
    let tools: Vec<serde_json::Value> = serde_json::from_str(tools).unwrap();
    let opts = RenderOptions {
        add_generation_prompt: gen_prompt,
        enable_thinking: thinking,
    };
    (messages, tools, opts)
}

#[test]
fn renders_text_like_transformers() {
    let tmpl = ChatTemplate::qwen3().unwrap();
    for &(name, messages, tools, gen_prompt, thinking, text, _) in CASES {
        let (messages, tools, opts) = case_inputs(messages, tools, gen_prompt, thinking);
        let got = tmpl.render(&messages, &tools, opts).unwrap();
        assert_eq!(got, text, "case {name}");
    }
}

#[test]
fn tokenises_like_transformers() {
    let tok = TokenText::qwen3().unwrap();
    let tmpl = ChatTemplate::qwen3().unwrap();
    for &(name, messages, tools, gen_prompt, thinking, _, ids) in CASES {
        let (messages, tools, opts) = case_inputs(messages, tools, gen_prompt, thinking);
        let got = tmpl.render_tokens(&tok, &messages, &tools, opts).unwrap();
        assert_eq!(got, ids, "case {name}");
        assert_eq!(
            tok.decode(&got),
            CASES.iter().find(|c| c.0 == name).unwrap().5
        );
    }
}

#[test]
fn assistant_output_is_the_tail_of_a_full_render() {
    let tmpl = ChatTemplate::qwen3().unwrap();
    let &(_, messages, tools, gen_prompt, thinking, text, _) =
        CASES.iter().find(|c| c.0 == "assistant_turn_last").unwrap();
    let (messages, _, _) = case_inputs(messages, tools, gen_prompt, thinking);
    let out = tmpl
        .render_assistant_output(&messages[1], RenderOptions::default())
        .unwrap();
    assert_eq!(
        out,
        "<think>\nCheck the build.\n</think>\n\nRunning it.\n<tool_call>\n{\"name\": \"bash\", \
         \"arguments\": {\"command\": \"make -j2 && ./run --flag=\\\"é\\\"\"}}\n</tool_call><|im_end|>"
    );
    // The reference render of [user, assistant] ends with the generation prompt, this output,
    // then the template's newline.
    assert!(text.ends_with(&format!("<|im_start|>assistant\n{out}\n")));
}

#[test]
fn continuation_matches_a_full_render() {
    let tmpl = ChatTemplate::qwen3().unwrap();
    let &(_, messages, tools, gen_prompt, thinking, text, _) = CASES
        .iter()
        .find(|c| c.0 == "tools_call_result_thinking")
        .unwrap();
    let (messages, _, opts) = case_inputs(messages, tools, gen_prompt, thinking);
    // After the second assistant turn (messages[4]) the harness appends the two tool results
    // and the generation prompt; the reference render ends with exactly that.
    let cont = tmpl
        .render_continuation(&messages[4], &messages[5..], opts)
        .unwrap();
    assert!(cont.starts_with('\n'));
    assert!(text.ends_with(&cont), "{cont:?}");
    let out = tmpl
        .render_assistant_output(&messages[4], RenderOptions::default())
        .unwrap();
    assert!(text.ends_with(&format!("{out}{cont}")));
}

/// Every bundled family's template: what follows a tool-call turn, cut out by
/// `render_continuation`, is the tail of the whole conversation's rendering, with no second
/// system block (gpt-oss and Llama 3 open every rendering with one).
#[test]
fn continuations_are_the_tail_of_a_whole_rendering_in_every_family() {
    let models = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/models");
    for (dir, template, system) in [
        ("gpt-oss", "chat_template.jinja", "<|start|>system"),
        (
            "llama3",
            "tokenizer_config.json",
            "<|start_header_id|>system",
        ),
        (
            "deepseek-v3.1",
            "chat_template.jinja",
            "<｜begin▁of▁sentence｜>",
        ),
        ("qwen3-coder", "chat_template.jinja", "<|im_start|>system"),
        ("qwen3.5", "chat_template.jinja", "<|im_start|>system"),
        ("kimi-k2", "chat_template.jinja", "<|im_system|>system"),
        ("minimax-m2", "chat_template.jinja", "]~b]system"),
        (
            "glm-4.x",
            "chat_template.glm-4.6.llama-cpp-patched.jinja",
            "[gMASK]",
        ),
    ] {
        let path = std::path::Path::new(models).join(dir).join(template);
        let config = std::path::Path::new(models)
            .join(dir)
            .join("tokenizer_config.json");
        let tmpl = if template.ends_with(".json") {
            ChatTemplate::from_config_file(&path).unwrap()
        } else {
            let config = std::fs::read_to_string(&config)
                .ok()
                .map(|c| serde_json::from_str::<serde_json::Value>(&c).unwrap());
            ChatTemplate::from_source(std::fs::read_to_string(&path).unwrap(), config.as_ref())
                .unwrap()
        };
        let mut call = Message::new("assistant", "");
        call.tool_calls.push(gyre_text::ToolCall {
            id: "functions.bash:0".into(),
            name: "bash".into(),
            arguments: serde_json::json!({"command": "ls"}),
        });
        let messages = [
            Message::new("system", "Be brief."),
            Message::new("user", "List the files."),
            call,
            Message::tool("functions.bash:0", "a.txt"),
        ];
        let opts = RenderOptions::generation(true);
        let whole = tmpl.render(&messages, &[], opts).unwrap();
        let cont = tmpl
            .render_continuation(&messages[2], &messages[3..], opts)
            .unwrap();
        assert!(cont.contains("a.txt"), "{dir}: {cont:?}");
        assert!(
            whole.ends_with(&cont),
            "{dir}: {cont:?} is not the end of {whole:?}"
        );
        assert!(!cont.contains(system), "{dir}: {cont:?}");
        // Nothing of the call turn is written again.
        assert!(!cont.contains("\"command\""), "{dir}: {cont:?}");
    }
}

#[test]
fn tojson_matches_python_json_dumps() {
    let src = "{{ x | tojson }}|{{ x | tojson(indent=2) }}".to_owned();
    let tmpl = ChatTemplate::new(
        format!("{{% set x = messages[0].tool_calls[0].function.arguments %}}{src}"),
        None,
        None,
    )
    .unwrap();
    let msg: Message = serde_json::from_str(
        r#"{"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function",
            "function": {"name": "f", "arguments": {"z": [1, 2.5, null, true], "a": {"ü": "\"\n\t\u0001"}, "e": {}}}}]}"#,
    )
    .unwrap();
    let got = tmpl.render(&[msg], &[], RenderOptions::default()).unwrap();
    assert_eq!(
        got,
        "{\"z\": [1, 2.5, null, true], \"a\": {\"ü\": \"\\\"\\n\\t\\u0001\"}, \"e\": {}}|{\n  \"z\": [\n    1,\n    2.5,\n    null,\n    true\n  ],\n  \"a\": {\n    \"ü\": \"\\\"\\n\\t\\u0001\"\n  },\n  \"e\": {}\n}"
    );
}

/// (name, messages JSON, tools JSON, add_generation_prompt, enable_thinking, text, ids)
/// Generated by tests/reference/chat_template_ids.py.
type Case = (
    &'static str,
    &'static str,
    &'static str,
    bool,
    Option<bool>,
    &'static str,
    &'static [u32],
);
#[rustfmt::skip]
const CASES: &[Case] = &[
    ("plain_generation_prompt", r####"[{"role": "system", "content": "You are a careful coding agent."}, {"role": "user", "content": "Why does `cargo test` fail on CI but not locally?"}]"####,
     r####"[]"####, true, None,
     r####"<|im_start|>system
You are a careful coding agent.<|im_end|>
<|im_start|>user
Why does `cargo test` fail on CI but not locally?<|im_end|>
<|im_start|>assistant
"####,
     &[151644, 8948, 198, 2610, 525, 264, 16585, 10822, 8315, 13, 151645, 198, 151644, 872, 198, 10234, 1558, 1565, 66715, 1273, 63, 3690, 389, 20694, 714, 537, 23490, 30, 151645, 198, 151644, 77091, 198]),
    ("tools_call_result_thinking", r####"[{"role": "system", "content": "You are a coding agent working in /repo."}, {"role": "user", "content": "Fix the failing test in src/parse.rs (the one about «quotes» 引号)."}, {"role": "assistant", "content": "Let me run the tests first.", "reasoning_content": "I should reproduce the failure before touching code.", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": {"command": "cargo test parse -- --nocapture", "timeout": 120}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "running 3 tests\ntest parse::quotes ... FAILED\n\tassertion failed: left == right\n"}, {"role": "assistant", "content": "", "reasoning_content": "Two reads in parallel.", "tool_calls": [{"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": {"path": "src/parse.rs", "offset": 40}}}, {"id": "call_3", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"tests/quotes.rs\"}"}}]}, {"role": "tool", "tool_call_id": "call_2", "content": "40\tfn unquote(s: &str) -> String {\n41\t    s.trim_matches('\"').to_owned()\n42\t}"}, {"role": "tool", "tool_call_id": "call_3", "content": "1\t#[test]\n2\tfn quotes() { assert_eq!(unquote(\"«a»\"), \"a\"); }"}]"####,
     r####"[{"type": "function", "function": {"name": "bash", "description": "Run a shell command in the repository.", "parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "The command, e.g. `cargo test`."}, "timeout": {"type": "integer", "description": "Seconds before it is killed."}}, "required": ["command"]}}}, {"type": "function", "function": {"name": "read_file", "description": "Read a file; returns numbered lines.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}}, "required": ["path"]}}}]"####, true, None,
     r####"<|im_start|>system
You are a coding agent working in /repo.

# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{"type": "function", "function": {"name": "bash", "description": "Run a shell command in the repository.", "parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "The command, e.g. `cargo test`."}, "timeout": {"type": "integer", "description": "Seconds before it is killed."}}, "required": ["command"]}}}
{"type": "function", "function": {"name": "read_file", "description": "Read a file; returns numbered lines.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}}, "required": ["path"]}}}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
<|im_start|>user
Fix the failing test in src/parse.rs (the one about «quotes» 引号).<|im_end|>
<|im_start|>assistant
<think>
I should reproduce the failure before touching code.
</think>

Let me run the tests first.
<tool_call>
{"name": "bash", "arguments": {"command": "cargo test parse -- --nocapture", "timeout": 120}}
</tool_call><|im_end|>
<|im_start|>user
<tool_response>
running 3 tests
test parse::quotes ... FAILED
	assertion failed: left == right

</tool_response><|im_end|>
<|im_start|>assistant
<think>
Two reads in parallel.
</think>

<tool_call>
{"name": "read_file", "arguments": {"path": "src/parse.rs", "offset": 40}}
</tool_call>
<tool_call>
{"name": "read_file", "arguments": {"path":"tests/quotes.rs"}}
</tool_call><|im_end|>
<|im_start|>user
<tool_response>
40	fn unquote(s: &str) -> String {
41	    s.trim_matches('"').to_owned()
42	}
</tool_response>
<tool_response>
1	#[test]
2	fn quotes() { assert_eq!(unquote("«a»"), "a"); }
</tool_response><|im_end|>
<|im_start|>assistant
"####,
     &[151644, 8948, 198, 2610, 525, 264, 10822, 8315, 3238, 304, 608, 23476, 382, 2, 13852, 271, 2610, 1231, 1618, 825, 476, 803, 5746, 311, 7789, 448, 279, 1196, 3239, 382, 2610, 525, 3897, 448, 729, 32628, 2878, 366, 15918, 1472, 15918, 29, 11874, 9492, 510, 27, 15918, 397, 4913, 1313, 788, 330, 1688, 497, 330, 1688, 788, 5212, 606, 788, 330, 46216, 497, 330, 4684, 788, 330, 6727, 264, 12528, 3210, 304, 279, 12542, 10465, 330, 13786, 788, 5212, 1313, 788, 330, 1700, 497, 330, 13193, 788, 5212, 5631, 788, 5212, 1313, 788, 330, 917, 497, 330, 4684, 788, 330, 785, 3210, 11, 384, 1302, 13, 1565, 66715, 1273, 63, 1189, 2137, 330, 14150, 788, 5212, 1313, 788, 330, 11662, 497, 330, 4684, 788, 330, 15343, 1573, 432, 374, 7425, 1189, 38154, 330, 6279, 788, 4383, 5631, 1341, 3417, 532, 4913, 1313, 788, 330, 1688, 497, 330, 1688, 788, 5212, 606, 788, 330, 878, 2458, 497, 330, 4684, 788, 330, 4418, 264, 1034, 26, 4675, 48826, 5128, 10465, 330, 13786, 788, 5212, 1313, 788, 330, 1700, 497, 330, 13193, 788, 5212, 2343, 788, 5212, 1313, 788, 330, 917, 14345, 330, 3176, 788, 5212, 1313, 788, 330, 11662, 9207, 2137, 330, 6279, 788, 4383, 2343, 1341, 3417, 532, 522, 15918, 1339, 2461, 1817, 729, 1618, 11, 470, 264, 2951, 1633, 448, 729, 829, 323, 5977, 2878, 220, 151657, 151658, 11874, 9492, 510, 151657, 198, 4913, 606, 788, 366, 1688, 11494, 8066, 330, 16370, 788, 366, 2116, 56080, 40432, 31296, 151658, 151645, 198, 151644, 872, 198, 25958, 279, 21394, 1273, 304, 2286, 14, 6400, 25638, 320, 1782, 825, 911, 12486, 53282, 12992, 52506, 243, 17992, 568, 151645, 198, 151644, 77091, 198, 151667, 198, 40, 1265, 22800, 279, 7901, 1573, 30587, 2038, 624, 151668, 271, 10061, 752, 1598, 279, 7032, 1156, 624, 151657, 198, 4913, 606, 788, 330, 46216, 497, 330, 16370, 788, 5212, 5631, 788, 330, 66715, 1273, 4715, 1177, 1177, 47991, 11850, 497, 330, 14150, 788, 220, 16, 17, 15, 11248, 151658, 151645, 198, 151644, 872, 198, 151665, 198, 27173, 220, 18, 7032, 198, 1944, 4715, 486, 53282, 2503, 49671, 198, 6948, 290, 4641, 25, 2115, 621, 1290, 271, 151666, 151645, 198, 151644, 77091, 198, 151667, 198, 11613, 15804, 304, 15279, 624, 151668, 271, 151657, 198, 4913, 606, 788, 330, 878, 2458, 497, 330, 16370, 788, 5212, 2343, 788, 330, 3548, 14, 6400, 25638, 497, 330, 3176, 788, 220, 19, 15, 11248, 151658, 198, 151657, 198, 4913, 606, 788, 330, 878, 2458, 497, 330, 16370, 788, 5212, 2343, 3252, 23841, 14, 53282, 25638, 95642, 151658, 151645, 198, 151644, 872, 198, 151665, 198, 19, 15, 40095, 650, 2949, 1141, 25, 609, 495, 8, 1464, 923, 341, 19, 16, 2760, 274, 16419, 38344, 32756, 1823, 983, 51973, 741, 19, 17, 197, 532, 151666, 198, 151665, 198, 16, 197, 13353, 1944, 921, 17, 40095, 17194, 368, 314, 2060, 10714, 10297, 359, 2949, 445, 23703, 64, 12992, 3975, 330, 64, 5038, 456, 151666, 151645, 198, 151644, 77091, 198]),
    ("multi_turn_history_thinking", r####"[{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "<think>\nEasy arithmetic.\n</think>\n\n4."}, {"role": "user", "content": "And in binary? 🤖"}, {"role": "assistant", "content": "100", "reasoning_content": "4 = 0b100."}]"####,
     r####"[]"####, false, None,
     r####"<|im_start|>user
What is 2+2?<|im_end|>
<|im_start|>assistant
4.<|im_end|>
<|im_start|>user
And in binary? 🤖<|im_end|>
<|im_start|>assistant
<think>
4 = 0b100.
</think>

100<|im_end|>
"####,
     &[151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198, 19, 13, 151645, 198, 151644, 872, 198, 3036, 304, 7868, 30, 11162, 97, 244, 151645, 198, 151644, 77091, 198, 151667, 198, 19, 284, 220, 15, 65, 16, 15, 15, 624, 151668, 271, 16, 15, 15, 151645, 198]),
    ("no_thinking_prompt", r####"[{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Name a prime > 10."}]"####,
     r####"[]"####, true, Some(false),
     r####"<|im_start|>system
Answer briefly.<|im_end|>
<|im_start|>user
Name a prime > 10.<|im_end|>
<|im_start|>assistant
<think>

</think>

"####,
     &[151644, 8948, 198, 16141, 26753, 13, 151645, 198, 151644, 872, 198, 675, 264, 10250, 861, 220, 16, 15, 13, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271]),
    ("assistant_turn_last", r####"[{"role": "user", "content": "x"}, {"role": "assistant", "content": "Running it.", "reasoning_content": "Check the build.", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "bash", "arguments": {"command": "make -j2 && ./run --flag=\"é\""}}}]}]"####,
     r####"[{"type": "function", "function": {"name": "bash", "description": "Run a shell command in the repository.", "parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "The command, e.g. `cargo test`."}, "timeout": {"type": "integer", "description": "Seconds before it is killed."}}, "required": ["command"]}}}, {"type": "function", "function": {"name": "read_file", "description": "Read a file; returns numbered lines.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}}, "required": ["path"]}}}]"####, false, None,
     r####"<|im_start|>system
# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{"type": "function", "function": {"name": "bash", "description": "Run a shell command in the repository.", "parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "The command, e.g. `cargo test`."}, "timeout": {"type": "integer", "description": "Seconds before it is killed."}}, "required": ["command"]}}}
{"type": "function", "function": {"name": "read_file", "description": "Read a file; returns numbered lines.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}}, "required": ["path"]}}}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
<|im_start|>user
x<|im_end|>
<|im_start|>assistant
<think>
Check the build.
</think>

Running it.
<tool_call>
{"name": "bash", "arguments": {"command": "make -j2 && ./run --flag=\"é\""}}
</tool_call><|im_end|>
"####,
     &[151644, 8948, 198, 2, 13852, 271, 2610, 1231, 1618, 825, 476, 803, 5746, 311, 7789, 448, 279, 1196, 3239, 382, 2610, 525, 3897, 448, 729, 32628, 2878, 366, 15918, 1472, 15918, 29, 11874, 9492, 510, 27, 15918, 397, 4913, 1313, 788, 330, 1688, 497, 330, 1688, 788, 5212, 606, 788, 330, 46216, 497, 330, 4684, 788, 330, 6727, 264, 12528, 3210, 304, 279, 12542, 10465, 330, 13786, 788, 5212, 1313, 788, 330, 1700, 497, 330, 13193, 788, 5212, 5631, 788, 5212, 1313, 788, 330, 917, 497, 330, 4684, 788, 330, 785, 3210, 11, 384, 1302, 13, 1565, 66715, 1273, 63, 1189, 2137, 330, 14150, 788, 5212, 1313, 788, 330, 11662, 497, 330, 4684, 788, 330, 15343, 1573, 432, 374, 7425, 1189, 38154, 330, 6279, 788, 4383, 5631, 1341, 3417, 532, 4913, 1313, 788, 330, 1688, 497, 330, 1688, 788, 5212, 606, 788, 330, 878, 2458, 497, 330, 4684, 788, 330, 4418, 264, 1034, 26, 4675, 48826, 5128, 10465, 330, 13786, 788, 5212, 1313, 788, 330, 1700, 497, 330, 13193, 788, 5212, 2343, 788, 5212, 1313, 788, 330, 917, 14345, 330, 3176, 788, 5212, 1313, 788, 330, 11662, 9207, 2137, 330, 6279, 788, 4383, 2343, 1341, 3417, 532, 522, 15918, 1339, 2461, 1817, 729, 1618, 11, 470, 264, 2951, 1633, 448, 729, 829, 323, 5977, 2878, 220, 151657, 151658, 11874, 9492, 510, 151657, 198, 4913, 606, 788, 366, 1688, 11494, 8066, 330, 16370, 788, 366, 2116, 56080, 40432, 31296, 151658, 151645, 198, 151644, 872, 198, 87, 151645, 198, 151644, 77091, 198, 151667, 198, 3973, 279, 1936, 624, 151668, 271, 18990, 432, 624, 151657, 198, 4913, 606, 788, 330, 46216, 497, 330, 16370, 788, 5212, 5631, 788, 330, 6927, 481, 73, 17, 1009, 12991, 6108, 1177, 9903, 4070, 963, 2105, 95642, 151658, 151645, 198]),
];

/// Jinja's `string` filter is Python's `str()`: lists and mappings in Python's repr, booleans
/// and `None` capitalised (Qwen3-Coder writes `<required>['path']</required>` with it), and
/// `none is iterable` is false, as in Python's Jinja.
#[test]
fn string_and_iterable_are_pythons() {
    let t = ChatTemplate::from_source(
        "{{ [1, 'a', true, none, {'k': \"it's\", 'n': 'a\\\\b\\n'}] | string }}|{{ false | string \
         }}|{{ none | string }}|{{ 'x' | string }}|{{ (none is iterable) | string }}|{{ ([] is \
         iterable) | string }}"
            .into(),
        None,
    )
    .unwrap();
    let text = t
        .render(
            &[Message::new("user", "x")],
            &[],
            RenderOptions::generation(false),
        )
        .unwrap();
    assert_eq!(
        text,
        "[1, 'a', True, None, {'k': \"it's\", 'n': 'a\\\\b\\n'}]|False|None|x|False|True"
    );
}
