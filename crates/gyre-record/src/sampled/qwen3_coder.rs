//! Qwen3-Coder and Qwen3.5 / 3.6 (vLLM `qwen3_coder`, alias `qwen3_xml`): XML inside Qwen's
//! `<tool_call>` tokens, `<function=NAME>` with `<parameter=KEY>\nVALUE\n</parameter>`, values
//! untyped in the text and typed by the tool's schema; `<think>` reasoning (Qwen3.5 prefills
//! `<think>` and may open a call before `</think>`).

use memchr::memmem;
use serde_json::Value;

use super::values::{Untyped, arguments};
use super::{FoundCall, Parsed, ToolParser, blocks, lossy, split_think};

/// The Qwen3-Coder XML parser.
#[derive(Debug)]
pub struct Qwen3Coder;

impl ToolParser for Qwen3Coder {
    fn name(&self) -> &'static str {
        "qwen3_coder"
    }

    fn parse(&self, text: &[u8], tools: &[Value]) -> Parsed {
        let (reasoning, rest) = split_think(text, &[b"<tool_call>"]);
        let (content, calls) = blocks(
            text,
            rest,
            b"<tool_call>",
            b"</tool_call>",
            |inner, span| {
                // One block holds one call (two functions in one block is not the syntax).
                let mut found = functions(inner, tools);
                (found.len() == 1).then(|| {
                    let (name, arguments) = found.remove(0);
                    vec![FoundCall {
                        name,
                        arguments,
                        span,
                    }]
                })
            },
        );
        Parsed {
            reasoning,
            content,
            calls,
        }
    }
}

/// Each `<function=NAME>…</function>` in a block, or none when the block is not that shape.
fn functions(inner: &[u8], tools: &[Value]) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = memmem::find(&inner[at..], b"<function=") {
        let name_start = at + i + b"<function=".len();
        let Some(gt) = memchr::memchr(b'>', &inner[name_start..]) else {
            return Vec::new();
        };
        let name = lossy(&inner[name_start..name_start + gt]).trim().to_owned();
        let body_start = name_start + gt + 1;
        let body_end = memmem::find(&inner[body_start..], b"</function>")
            .map_or(inner.len(), |j| body_start + j);
        if name.is_empty() {
            return Vec::new();
        }
        let body = &inner[body_start..body_end];
        let pairs = parameters(body);
        out.push((name.clone(), arguments(pairs, tools, &name, Untyped::Text)));
        at = (body_end + b"</function>".len()).min(inner.len());
    }
    out
}

/// `<parameter=K>\nV\n</parameter>` pairs (a missing `</parameter>` ends at the next parameter,
/// as vLLM reads it); one newline each side of the value belongs to the syntax.
fn parameters(body: &[u8]) -> Vec<(String, &str)> {
    const OPEN: &[u8] = b"<parameter=";
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = memmem::find(&body[at..], OPEN) {
        let k_start = at + i + OPEN.len();
        let Some(gt) = memchr::memchr(b'>', &body[k_start..]) else {
            break;
        };
        let key = lossy(&body[k_start..k_start + gt]).trim().to_owned();
        let v_start = k_start + gt + 1;
        let rest = &body[v_start..];
        let close = memmem::find(rest, b"</parameter>");
        let next = memmem::find(rest, OPEN);
        let v_end = match (close, next) {
            (Some(c), Some(n)) => c.min(n),
            (Some(c), None) => c,
            (None, Some(n)) => n,
            (None, None) => rest.len(),
        };
        let raw = std::str::from_utf8(&rest[..v_end]).unwrap_or_default();
        let raw = raw.strip_prefix('\n').unwrap_or(raw);
        let raw = raw.strip_suffix('\n').unwrap_or(raw);
        out.push((key, raw));
        at = v_start + v_end;
        if close == Some(v_end) {
            at += b"</parameter>".len();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn xml_calls_are_typed_by_the_schema() {
        let tools = [
            json!({"type": "function", "function": {"name": "bash", "parameters": {
            "properties": {"command": {"type": "string"}, "step": {"type": "integer"}}}}}),
        ];
        let text = "Running it.\n<tool_call>\n<function=bash>\n<parameter=command>\necho 1\nline 2\n\
                    </parameter>\n<parameter=step>\n3\n</parameter>\n</function>\n</tool_call>\n\
                    <tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n\
                    </function>\n</tool_call>";
        let p = Qwen3Coder.parse(text.as_bytes(), &tools);
        assert_eq!(p.content, "Running it.");
        assert_eq!(p.reasoning, None);
        assert_eq!(p.calls.len(), 2);
        assert_eq!(p.calls[0].name, "bash");
        assert_eq!(
            p.calls[0].arguments,
            json!({"command": "echo 1\nline 2", "step": 3})
        );
        assert_eq!(p.calls[1].arguments, json!({"command": "ls"}));
        assert!(text[p.calls[0].span.clone()].starts_with("<tool_call>"));
        assert!(text[p.calls[1].span.clone()].ends_with("</tool_call>"));
    }

    #[test]
    fn qwen35_reasoning_ends_at_think_close_or_at_a_call() {
        let p = Qwen3Coder.parse(b"plan\n</think>\n\nok", &[]);
        assert_eq!(
            (p.reasoning.as_deref(), p.content.as_str()),
            (Some("plan"), "ok")
        );
        let t = b"<think>\nplan\n<tool_call>\n<function=f>\n</function>\n</tool_call>";
        let p = Qwen3Coder.parse(t, &[]);
        assert_eq!(p.reasoning.as_deref(), Some("plan"));
        assert_eq!(p.calls.len(), 1);
        assert_eq!(p.calls[0].arguments, json!({}));
        // Not the shape: stays text.
        let p = Qwen3Coder.parse(b"<tool_call>\n{\"name\": \"f\"}\n</tool_call>", &[]);
        assert!(p.calls.is_empty());
        assert!(p.content.contains("<tool_call>"));
    }
}
