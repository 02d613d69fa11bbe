//! gpt-oss Harmony (vLLM tool parser `openai`, reasoning `openai_gptoss`): the sample is a run
//! of messages `<|channel|>C<|message|>…<|end|><|start|>assistant<|channel|>…`, the first one's
//! `<|start|>assistant` being the generation prompt. `analysis` is reasoning, `final` (and
//! `commentary` without a recipient) is visible text, `commentary to=functions.NAME` with a JSON
//! body is a call; a sample ends with `<|call|>` (a call) or `<|return|>` (the answer).

use memchr::memmem;
use serde_json::Value;

use super::hermes::object;
use super::{FoundCall, Parsed, ToolParser, lossy, push_text};

/// The Harmony parser.
#[derive(Debug)]
pub struct Harmony;

const START: &[u8] = b"<|start|>";
const MESSAGE: &[u8] = b"<|message|>";
const CHANNEL: &[u8] = b"<|channel|>";
const BODY_ENDS: [&[u8]; 3] = [b"<|end|>", b"<|call|>", b"<|return|>"];

impl ToolParser for Harmony {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn parse(&self, text: &[u8], _tools: &[Value]) -> Parsed {
        let mut reasoning: Option<String> = None;
        let mut content = String::new();
        let mut calls = Vec::new();
        let mut at = 0;
        while at < text.len() {
            let next = memmem::find(&text[at + 1..], START).map_or(text.len(), |i| at + 1 + i);
            let msg = &text[at..next];
            let Some(m) = memmem::find(msg, MESSAGE) else {
                // No body: not a message (a cut sample, or text outside the format).
                push_text(&mut content, msg);
                at = next;
                continue;
            };
            let header = &msg[..m];
            let body_start = m + MESSAGE.len();
            let body_len = BODY_ENDS
                .iter()
                .filter_map(|e| memmem::find(&msg[body_start..], e))
                .min()
                .unwrap_or(msg.len() - body_start);
            let body = &msg[body_start..body_start + body_len];
            let channel = word_after(header, CHANNEL);
            let recipient = word_after(header, b"to=");
            match (channel.as_deref(), recipient.as_deref()) {
                (Some("analysis"), None) => {
                    let r = reasoning.get_or_insert_with(String::new);
                    if !r.is_empty() {
                        r.push('\n');
                    }
                    r.push_str(&lossy(body));
                }
                (_, Some(to)) if to.starts_with("functions.") => {
                    let name = to["functions.".len()..].to_owned();
                    match object(&lossy(body)).filter(|_| !name.is_empty()) {
                        Some(arguments) => calls.push(FoundCall {
                            name,
                            arguments,
                            span: at..at + body_start + body_len,
                        }),
                        None => push_text(&mut content, body),
                    }
                }
                _ => push_text(&mut content, body),
            }
            at = next;
        }
        Parsed {
            reasoning,
            content,
            calls,
        }
    }

    fn end_tokens(&self) -> &'static [&'static str] {
        &["<|call|>", "<|return|>"]
    }
}

/// The word after `key` in a header (up to a space or the next special token).
fn word_after(header: &[u8], key: &[u8]) -> Option<String> {
    let i = memmem::find(header, key)? + key.len();
    let rest = &header[i..];
    let end = rest
        .iter()
        .position(|&b| b == b' ' || b == b'<')
        .unwrap_or(rest.len());
    Some(lossy(&rest[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn channels_become_reasoning_text_and_calls() {
        let text = "<|channel|>analysis<|message|>Need ls.<|end|><|start|>assistant<|channel|>\
                    commentary to=functions.bash <|constrain|>json<|message|>{\"command\": \"ls\"}";
        let p = Harmony.parse(text.as_bytes(), &[]);
        assert_eq!(p.reasoning.as_deref(), Some("Need ls."));
        assert_eq!(p.content, "");
        assert_eq!(p.calls.len(), 1);
        assert_eq!(p.calls[0].name, "bash");
        assert_eq!(p.calls[0].arguments, json!({"command": "ls"}));
        assert!(text[p.calls[0].span.clone()].starts_with("<|start|>assistant"));
        // The recipient in the role part, as the template re-renders it.
        let text = "<|channel|>analysis<|message|>a<|end|><|start|>assistant to=functions.read\
                    <|channel|>commentary json<|message|>{}<|call|>";
        let p = Harmony.parse(text.as_bytes(), &[]);
        assert_eq!(p.calls[0].name, "read");
        let text = "<|channel|>analysis<|message|>ok<|end|><|start|>assistant<|channel|>final\
                    <|message|>Done.";
        let p = Harmony.parse(text.as_bytes(), &[]);
        assert_eq!(
            (p.reasoning.as_deref(), p.content.as_str()),
            (Some("ok"), "Done.")
        );
        assert!(p.calls.is_empty());
    }
}
