//! MiniMax M2 / M2.1 / M2.5 (vLLM `minimax_m2`): `<minimax:tool_call>` blocks, each holding one
//! or more `<invoke name="NAME">` calls of `<parameter name="K">V</parameter>`, strings raw and
//! other values JSON; reasoning `<think>…</think>`, `<think>` prefilled by the generation
//! prompt; `[e~[` ends a turn.

use memchr::memmem;
use serde_json::{Map, Value};

use super::values::{Untyped, param_type, typed};
use super::{FoundCall, Parsed, ToolParser, blocks, lossy, split_think};

/// The MiniMax M2 parser.
#[derive(Debug)]
pub struct MiniMaxM2;

impl ToolParser for MiniMaxM2 {
    fn name(&self) -> &'static str {
        "minimax_m2"
    }

    fn parse(&self, text: &[u8], tools: &[Value]) -> Parsed {
        let (reasoning, rest) = split_think(text, &[b"<minimax:tool_call>"]);
        let (content, calls) = blocks(
            text,
            rest,
            b"<minimax:tool_call>",
            b"</minimax:tool_call>",
            |inner, span| {
                let inner_start = span.start + b"<minimax:tool_call>".len();
                let found = INVOKE.read(inner, |tool, key, _, raw| {
                    typed(raw, param_type(tools, tool, key), Untyped::JsonOrText)
                });
                spanned(found, inner_start, span)
            },
        );
        Parsed {
            reasoning,
            content,
            calls,
        }
    }

    fn end_tokens(&self) -> &'static [&'static str] {
        &["[e~["]
    }
}

/// The markers of an XML-like invoke syntax (MiniMax's, DeepSeek's DSML).
pub(super) struct Invoke {
    /// Opens a call, up to its quoted name: `<invoke name=`.
    pub open: &'static [u8],
    /// Closes a call.
    pub close: &'static [u8],
    /// Opens a parameter, up to its quoted name.
    pub param: &'static [u8],
    /// Closes a parameter.
    pub param_close: &'static [u8],
}

impl Invoke {
    /// Each invoke in a block with its byte range in the block, or `None` when the block
    /// holds none or one is malformed. `value(tool, key, tag, raw)` reads a parameter: `tag`
    /// is the rest of its opening tag (DSML's `string="…"`), `raw` its text.
    pub(super) fn read(
        &self,
        inner: &[u8],
        value: impl Fn(&str, &str, &str, &str) -> Value,
    ) -> Option<Vec<(String, Value, std::ops::Range<usize>)>> {
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(i) = memmem::find(&inner[at..], self.open) {
            let start = at + i;
            let (name, body_start) = attribute(inner, start + self.open.len())?;
            let body_len = memmem::find(&inner[body_start..], self.close)?;
            let body = &inner[body_start..body_start + body_len];
            let end = body_start + body_len + self.close.len();
            let mut args = Map::new();
            let mut p = 0;
            while let Some(j) = memmem::find(&body[p..], self.param) {
                let tag_start = p + j + self.param.len();
                let (key, v_start) = attribute(body, tag_start)?;
                let tag = lossy(&body[tag_start..v_start]);
                let v_len = memmem::find(&body[v_start..], self.param_close)?;
                let raw = std::str::from_utf8(&body[v_start..v_start + v_len]).ok()?;
                let v = value(&name, &key, &tag, raw);
                args.insert(key, v);
                p = v_start + v_len + self.param_close.len();
            }
            out.push((name, Value::Object(args), start..end));
            at = end;
        }
        (!out.is_empty()).then_some(out)
    }
}

const INVOKE: Invoke = Invoke {
    open: b"<invoke name=",
    close: b"</invoke>",
    param: b"<parameter name=",
    param_close: b"</parameter>",
};

/// A quoted (or bare) attribute value at `at`, up to the tag's `>`; returns it and the index
/// after `>`. Anything after the first attribute (DSML's `string="…"`) is left to the caller.
fn attribute(bytes: &[u8], at: usize) -> Option<(String, usize)> {
    let gt = memchr::memchr(b'>', &bytes[at..])? + at;
    let tag = lossy(&bytes[at..gt]);
    let tag = tag.trim();
    let value = match tag.strip_prefix('"') {
        Some(rest) => &rest[..rest.find('"')?],
        None => tag.split_whitespace().next()?,
    };
    (!value.is_empty()).then(|| (value.to_owned(), gt + 1))
}

/// Calls at their byte ranges in the text: one call takes its whole block, several split it
/// (the first from the block's opening marker, the last to its closing one).
pub(super) fn spanned(
    found: Option<Vec<(String, Value, std::ops::Range<usize>)>>,
    inner_start: usize,
    block: std::ops::Range<usize>,
) -> Option<Vec<FoundCall>> {
    let found = found?;
    let n = found.len();
    Some(
        found
            .into_iter()
            .enumerate()
            .map(|(i, (name, arguments, r))| {
                let start = if i == 0 {
                    block.start
                } else {
                    inner_start + r.start
                };
                let end = if i + 1 == n {
                    block.end
                } else {
                    inner_start + r.end
                };
                FoundCall {
                    name,
                    arguments,
                    span: start..end,
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn several_invokes_in_one_block_are_several_calls() {
        let tools = [json!({"name": "grep", "parameters": {"properties": {
            "pattern": {"type": "string"}}}})];
        let text = "I'll search.\n</think>\n\nSearching.\n<minimax:tool_call>\n<invoke name=\"grep\">\n\
                    <parameter name=\"pattern\">42</parameter>\n<parameter name=\"max\">5\
                    </parameter>\n</invoke>\n<invoke name=\"ls\">\n</invoke>\n</minimax:tool_call>";
        let p = MiniMaxM2.parse(text.as_bytes(), &tools);
        assert_eq!(p.reasoning.as_deref(), Some("I'll search."));
        assert_eq!(p.content, "Searching.");
        assert_eq!(p.calls.len(), 2);
        assert_eq!(p.calls[0].arguments, json!({"pattern": "42", "max": 5}));
        assert_eq!(
            (p.calls[1].name.as_str(), &p.calls[1].arguments),
            ("ls", &json!({}))
        );
        let first = &text[p.calls[0].span.clone()];
        let second = &text[p.calls[1].span.clone()];
        assert!(first.starts_with("<minimax:tool_call>") && first.ends_with("</invoke>"));
        assert!(second.starts_with("<invoke name=\"ls\">"));
        assert!(second.ends_with("</minimax:tool_call>"));
        assert!(p.calls[0].span.end <= p.calls[1].span.start);
    }
}
