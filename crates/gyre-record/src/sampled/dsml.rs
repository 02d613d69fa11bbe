//! DeepSeek V3.2 and V4 DSML (vLLM `deepseek_v32`, `deepseek_v4`): a
//! `<｜DSML｜function_calls>` (V3.2) or `<｜DSML｜tool_calls>` (V4) block of
//! `<｜DSML｜invoke name="NAME">` calls with
//! `<｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>`: the `string`
//! attribute says whether V is raw text or JSON. Reasoning `<think>…</think>` (prefilled when
//! thinking); `<｜end▁of▁sentence｜>` ends a turn.

use serde_json::Value;

use super::minimax_m2::{Invoke, spanned};
use super::{Parsed, ToolParser, blocks, split_think};

/// The DSML parser, by the block name its version writes.
#[derive(Debug)]
pub enum Dsml {
    /// DeepSeek V3.2: `function_calls`.
    V32,
    /// DeepSeek V4: `tool_calls`.
    V4,
}

const INVOKE: Invoke = Invoke {
    open: "<｜DSML｜invoke name=".as_bytes(),
    close: "</｜DSML｜invoke>".as_bytes(),
    param: "<｜DSML｜parameter name=".as_bytes(),
    param_close: "</｜DSML｜parameter>".as_bytes(),
};

impl Dsml {
    fn markers(&self) -> (&'static [u8], &'static [u8]) {
        match self {
            Dsml::V32 => (
                "<｜DSML｜function_calls>".as_bytes(),
                "</｜DSML｜function_calls>".as_bytes(),
            ),
            Dsml::V4 => (
                "<｜DSML｜tool_calls>".as_bytes(),
                "</｜DSML｜tool_calls>".as_bytes(),
            ),
        }
    }
}

impl ToolParser for Dsml {
    fn name(&self) -> &'static str {
        match self {
            Dsml::V32 => "deepseek_v32",
            Dsml::V4 => "deepseek_v4",
        }
    }

    fn parse(&self, text: &[u8], _tools: &[Value]) -> Parsed {
        let (open, close) = self.markers();
        let (reasoning, rest) = split_think(text, &[open]);
        let (content, calls) = blocks(text, rest, open, close, |inner, span| {
            let found = INVOKE.read(inner, |_, _, tag, raw| {
                if tag.contains("string=\"false\"") {
                    serde_json::from_str(raw.trim())
                        .unwrap_or_else(|_| Value::String(raw.to_owned()))
                } else {
                    Value::String(raw.to_owned())
                }
            });
            spanned(found, span.start + open.len(), span)
        });
        Parsed {
            reasoning,
            content,
            calls,
        }
    }

    fn end_tokens(&self) -> &'static [&'static str] {
        &["<｜end▁of▁sentence｜>"]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample(block: &str) -> String {
        format!(
            "weigh it</think>Checking.\n\n<｜DSML｜{block}>\n<｜DSML｜invoke name=\"get\">\n\
             <｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n\
             <｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n\
             </｜DSML｜invoke>\n<｜DSML｜invoke name=\"now\">\n</｜DSML｜invoke>\n</｜DSML｜{block}>"
        )
    }

    #[test]
    fn the_string_attribute_types_each_value_and_the_block_name_is_the_version() {
        for (parser, block, other) in [
            (Dsml::V32, "function_calls", "tool_calls"),
            (Dsml::V4, "tool_calls", "function_calls"),
        ] {
            let text = sample(block);
            let p = parser.parse(text.as_bytes(), &[]);
            assert_eq!(p.reasoning.as_deref(), Some("weigh it"));
            assert_eq!(p.content, "Checking.");
            assert_eq!(p.calls.len(), 2);
            assert_eq!(p.calls[0].arguments, json!({"city": "Paris", "days": 3}));
            assert_eq!(p.calls[1].name, "now");
            assert!(text[p.calls[1].span.clone()].ends_with(&format!("</｜DSML｜{block}>")));
            // The other version's block is text to this one.
            assert!(parser.parse(sample(other).as_bytes(), &[]).calls.is_empty());
        }
    }
}
