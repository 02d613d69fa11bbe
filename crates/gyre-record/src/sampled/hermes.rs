//! Hermes / Qwen3 (vLLM `hermes`): `<think>…</think>`, then text and
//! `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>` blocks.

use serde_json::Value;

use super::{FoundCall, Parsed, ToolParser, blocks, lossy, split_think};

/// The Hermes parser.
#[derive(Debug)]
pub struct Hermes;

impl ToolParser for Hermes {
    fn name(&self) -> &'static str {
        "hermes"
    }

    fn parse(&self, text: &[u8], _tools: &[Value]) -> Parsed {
        let (reasoning, rest) = split_think(text, &[]);
        let (content, calls) = blocks(
            text,
            rest,
            b"<tool_call>",
            b"</tool_call>",
            |inner, span| {
                let (name, arguments) = call_of(lossy(inner).trim())?;
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
}

/// `{"name": …, "arguments": {…}}` (arguments may also be `parameters`, or a string holding a
/// JSON object).
pub(super) fn call_of(text: &str) -> Option<(String, Value)> {
    let v: Value = serde_json::from_str(text).ok()?;
    named_call(&v)
}

/// The name and arguments of a parsed `{"name", "arguments" | "parameters"}` object.
pub(super) fn named_call(v: &Value) -> Option<(String, Value)> {
    let name = v.get("name")?.as_str()?.to_owned();
    let arguments = match v.get("arguments").or_else(|| v.get("parameters")) {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(Value::String(s)) => object(s)?,
        Some(o @ Value::Object(_)) => o.clone(),
        Some(_) => return None,
    };
    Some((name, arguments))
}

/// `s` as a JSON object, or `None` (an empty string is no arguments).
pub(super) fn object(s: &str) -> Option<Value> {
    if s.trim().is_empty() {
        return Some(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(s).ok()? {
        o @ Value::Object(_) => Some(o),
        _ => None,
    }
}
