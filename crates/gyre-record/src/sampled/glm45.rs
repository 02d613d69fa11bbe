//! GLM-4.5 / 4.6 / 4.7 (vLLM `glm45`, `glm47`): `<tool_call>NAME` then
//! `<arg_key>K</arg_key><arg_value>V</arg_value>` pairs and `</tool_call>` (4.5/4.6 put a newline
//! after the name and each pair, 4.7 none), strings raw and other values JSON; `<think>…</think>`
//! reasoning, which a `<tool_call>` also ends. GLM has no end-of-message token: the model stops
//! by writing the next role token.

use memchr::memmem;
use serde_json::Value;

use super::values::{Untyped, arguments};
use super::{FoundCall, Parsed, ToolParser, blocks, lossy, split_think};

/// The GLM-4.5 / 4.7 parser (one syntax; the newlines are optional).
#[derive(Debug)]
pub struct Glm45;

const KEY_OPEN: &[u8] = b"<arg_key>";
const KEY_CLOSE: &[u8] = b"</arg_key>";
const VALUE_OPEN: &[u8] = b"<arg_value>";
const VALUE_CLOSE: &[u8] = b"</arg_value>";

impl ToolParser for Glm45 {
    fn name(&self) -> &'static str {
        "glm45"
    }

    fn parse(&self, text: &[u8], tools: &[Value]) -> Parsed {
        let (reasoning, rest) = split_think(text, &[b"<tool_call>"]);
        let (content, calls) = blocks(
            text,
            rest,
            b"<tool_call>",
            b"</tool_call>",
            |inner, span| {
                let (name, arguments) = call(inner, tools)?;
                Some(vec![FoundCall {
                    name,
                    arguments,
                    span,
                }])
            },
        );
        Parsed {
            reasoning,
            content,
            calls,
        }
    }

    fn end_tokens(&self) -> &'static [&'static str] {
        &["<|user|>", "<|observation|>", "<|endoftext|>"]
    }
}

/// `NAME<arg_key>…` inside one block: the name runs to the first key (or the block's end), and
/// each key is followed, after optional whitespace, by its value.
fn call(inner: &[u8], tools: &[Value]) -> Option<(String, Value)> {
    let name_end = memmem::find(inner, KEY_OPEN).unwrap_or(inner.len());
    let name = lossy(&inner[..name_end]).trim().to_owned();
    if name.is_empty() || name.contains(['<', '>', '{']) {
        return None;
    }
    let mut pairs = Vec::new();
    let mut at = name_end;
    while let Some(i) = memmem::find(&inner[at..], KEY_OPEN) {
        let k_start = at + i + KEY_OPEN.len();
        let k_len = memmem::find(&inner[k_start..], KEY_CLOSE)?;
        let key = lossy(&inner[k_start..k_start + k_len]).trim().to_owned();
        let after_key = k_start + k_len + KEY_CLOSE.len();
        let v_open = after_key
            + inner[after_key..]
                .iter()
                .take_while(|b| b.is_ascii_whitespace())
                .count();
        if !inner[v_open..].starts_with(VALUE_OPEN) {
            return None;
        }
        let v_start = v_open + VALUE_OPEN.len();
        let v_len = memmem::find(&inner[v_start..], VALUE_CLOSE)?;
        let raw = std::str::from_utf8(&inner[v_start..v_start + v_len]).ok()?;
        pairs.push((key, raw));
        at = v_start + v_len + VALUE_CLOSE.len();
    }
    Some((
        name.clone(),
        arguments(pairs, tools, &name, Untyped::JsonOrText),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_layouts_read_and_values_are_json_unless_the_schema_says_string() {
        let tools = [
            json!({"type": "function", "function": {"name": "edit", "parameters": {
            "properties": {"path": {"type": "string"}, "line": {"type": "integer"}}}}}),
        ];
        let v45 = "\n<think>find it</think>\nEditing.\n<tool_call>edit\n<arg_key>path</arg_key>\n\
                   <arg_value>12</arg_value>\n<arg_key>line</arg_key>\n<arg_value>3</arg_value>\n\
                   <arg_key>opts</arg_key>\n<arg_value>{\"a\": [1]}</arg_value>\n</tool_call>";
        let v47 = "<think>find it</think>Editing.<tool_call>edit<arg_key>path</arg_key>\
                   <arg_value>12</arg_value><arg_key>line</arg_key><arg_value>3</arg_value>\
                   <arg_key>opts</arg_key><arg_value>{\"a\": [1]}</arg_value></tool_call>";
        for text in [v45, v47] {
            let p = Glm45.parse(text.as_bytes(), &tools);
            assert_eq!(p.reasoning.as_deref(), Some("find it"));
            assert_eq!(p.content, "Editing.");
            assert_eq!(p.calls.len(), 1);
            assert_eq!(p.calls[0].name, "edit");
            assert_eq!(
                p.calls[0].arguments,
                json!({"path": "12", "line": 3, "opts": {"a": [1]}})
            );
            assert!(text[p.calls[0].span.clone()].starts_with("<tool_call>edit"));
        }
        // A Hermes-style JSON block is not GLM's syntax.
        let p = Glm45.parse(b"<tool_call>{\"name\": \"f\"}</tool_call>", &[]);
        assert!(p.calls.is_empty());
    }
}
