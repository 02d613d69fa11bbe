//! Llama 3.x JSON tool calls (vLLM `llama3_json`): the whole answer is
//! `{"name": NAME, "parameters": {…}}` (optionally after `<|python_tag|>`, several separated by
//! `;`); anything else is text. No reasoning.

use serde_json::Value;

use super::hermes::named_call;
use super::{FoundCall, Parsed, ToolParser, lossy};

/// The Llama 3 JSON parser.
#[derive(Debug)]
pub struct Llama3Json;

const PYTHON_TAG: &[u8] = b"<|python_tag|>";

impl ToolParser for Llama3Json {
    fn name(&self) -> &'static str {
        "llama3_json"
    }

    fn parse(&self, text: &[u8], _tools: &[Value]) -> Parsed {
        let text_only = || Parsed {
            reasoning: None,
            content: lossy(text).trim().to_owned(),
            calls: Vec::new(),
        };
        let lead = text.iter().take_while(|b| b.is_ascii_whitespace()).count();
        let mut at = lead;
        if text[at..].starts_with(PYTHON_TAG) {
            at += PYTHON_TAG.len();
        }
        if !text[at..].trim_ascii_start().starts_with(b"{") {
            return text_only();
        }
        let mut calls = Vec::new();
        loop {
            at += text[at..]
                .iter()
                .take_while(|b| b.is_ascii_whitespace())
                .count();
            if at == text.len() {
                break;
            }
            let mut values = serde_json::Deserializer::from_slice(&text[at..]).into_iter::<Value>();
            let Some(Ok(v)) = values.next() else {
                return text_only();
            };
            let end = at + values.byte_offset();
            let Some((name, arguments)) = named_call(&v) else {
                return text_only();
            };
            calls.push(FoundCall {
                name,
                arguments,
                span: at..end,
            });
            at = end
                + text[end..]
                    .iter()
                    .take_while(|b| b.is_ascii_whitespace())
                    .count();
            match text.get(at) {
                Some(b';') => at += 1,
                None => break,
                Some(_) => return text_only(),
            }
        }
        // The span of a single call covers the tag too.
        if let Some(first) = calls.first_mut() {
            first.span.start = lead;
        }
        Parsed {
            reasoning: None,
            content: String::new(),
            calls,
        }
    }

    fn end_tokens(&self) -> &'static [&'static str] {
        &["<|eot_id|>", "<|eom_id|>"]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_json_answer_is_a_call_and_anything_else_text() {
        let text = b"{\"name\": \"bash\", \"parameters\": {\"command\": \"ls\"}}";
        let p = Llama3Json.parse(text, &[]);
        assert_eq!(p.calls.len(), 1);
        assert_eq!(p.calls[0].arguments, json!({"command": "ls"}));
        assert_eq!(p.calls[0].span, 0..text.len());
        let p = Llama3Json.parse(
            b"<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {}}",
            &[],
        );
        assert_eq!(
            p.calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let p = Llama3Json.parse(b"The answer is {\"name\": 1}", &[]);
        assert!(p.calls.is_empty());
        let p = Llama3Json.parse(b"{\"name\": \"a\", \"parameters\": {}} and more", &[]);
        assert!(p.calls.is_empty());
        assert!(p.content.ends_with("and more"));
    }
}
