//! Sampled token ids → the assistant message they spell: thinking, visible text and tool calls
//! (Qwen3 / Hermes: `<think>…</think>` and `<tool_call>{"name", "arguments"}</tool_call>`),
//! with each call's token offsets in the output.

use memchr::memmem;
use serde_json::Value;

use super::chat::ApiError;
use gyre_text::TokenText;

/// A tool call found in the sampled tokens.
#[derive(Clone, Debug, PartialEq)]
pub struct SampledCall {
    /// Tool name.
    pub name: String,
    /// Arguments (a JSON object).
    pub arguments: Value,
    /// First output token of the call (the `<tool_call>` token).
    pub start: u32,
    /// Exclusive end (after the `</tool_call>` token).
    pub end: u32,
}

/// What the sampled tokens say.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampled {
    /// Thinking text (inside `<think>`), when present.
    pub reasoning: Option<String>,
    /// Visible text, without the tool-call blocks.
    pub content: String,
    /// Tool calls, in order.
    pub calls: Vec<SampledCall>,
    /// The output ends with an end-of-turn token.
    pub eos: bool,
}

/// Reads sampled ids with one tokenizer.
#[derive(Clone, Debug)]
pub struct OutputReader {
    tok: TokenText,
    /// End-of-turn ids (`<|im_end|>`, `<|endoftext|>`, the template's eos).
    eos: Vec<u32>,
}

const THINK_OPEN: &[u8] = b"<think>";
const THINK_CLOSE: &[u8] = b"</think>";
const CALL_OPEN: &[u8] = b"<tool_call>";
const CALL_CLOSE: &[u8] = b"</tool_call>";

impl OutputReader {
    /// A reader for `tok`; `eos` is the template's end-of-turn token text, if it has one.
    pub fn new(tok: TokenText, eos: Option<&str>) -> Self {
        let mut ids: Vec<u32> = ["<|im_end|>", "<|endoftext|>", "<|eot_id|>"]
            .into_iter()
            .chain(eos)
            .filter_map(|t| tok.token_id(t))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        OutputReader { tok, eos: ids }
    }

    /// Whether `id` ends a turn.
    pub fn is_eos(&self, id: u32) -> bool {
        self.eos.contains(&id)
    }

    /// The bytes of each of `ids` (an id outside the vocabulary is an upstream error: the
    /// proxy and the policy disagree on the tokenizer).
    pub fn pieces<'a>(&'a self, ids: &[u32]) -> Result<Vec<&'a [u8]>, ApiError> {
        ids.iter()
            .map(|&id| {
                self.tok.piece_bytes(id).ok_or_else(|| {
                    ApiError::upstream(format!(
                        "the upstream sampled token id {id}, which tokenizer {} does not have \
                         (does --tokenizer match the served model?)",
                        self.tok.label()
                    ))
                })
            })
            .collect()
    }

    /// Parses sampled `ids` into thinking, text and tool calls. The text ends before the first
    /// of `stops` (the request's stop strings) it holds, as vLLM and SGLang cut it: the ids
    /// keep the tokens that spell the stop string, the text does not.
    pub fn read(&self, ids: &[u32], stops: &[String]) -> Result<Sampled, ApiError> {
        let eos = ids.last().is_some_and(|&id| self.is_eos(id));
        let body = if eos { &ids[..ids.len() - 1] } else { ids };
        let pieces = self.pieces(body)?;
        let mut starts = Vec::with_capacity(pieces.len());
        let mut bytes = Vec::new();
        for p in &pieces {
            starts.push(bytes.len());
            bytes.extend_from_slice(p);
        }
        if let Some(cut) = stops
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| memmem::find(&bytes, s.as_bytes()))
            .min()
        {
            bytes.truncate(cut);
        }
        // Thinking: `<think>…</think>`, or only `</think>` when the template opened it.
        let (reasoning, rest_at) = match memmem::find(&bytes, THINK_CLOSE) {
            Some(close) => {
                let head = &bytes[..close];
                let open = memmem::find(head, THINK_OPEN)
                    .filter(|&o| bytes[..o].iter().all(u8::is_ascii_whitespace));
                let inner = match open {
                    Some(o) => &head[o + THINK_OPEN.len()..],
                    None => head,
                };
                (
                    Some(lossy(inner).trim_matches('\n').to_owned()),
                    close + THINK_CLOSE.len(),
                )
            }
            None if trimmed_start(&bytes).starts_with(THINK_OPEN) => {
                // Cut off while thinking.
                let o = memmem::find(&bytes, THINK_OPEN).unwrap_or(0);
                let inner = lossy(&bytes[o + THINK_OPEN.len()..]);
                (Some(inner.trim_matches('\n').to_owned()), bytes.len())
            }
            None => (None, 0),
        };
        let token_at = |byte: usize| starts.partition_point(|&s| s < byte) as u32;
        let mut content = String::new();
        let mut calls = Vec::new();
        let mut at = rest_at;
        while let Some(i) = memmem::find(&bytes[at..], CALL_OPEN) {
            let open = at + i;
            let Some(j) = memmem::find(&bytes[open..], CALL_CLOSE) else {
                break;
            };
            let close = open + j + CALL_CLOSE.len();
            let inner = lossy(&bytes[open + CALL_OPEN.len()..open + j]);
            match call_of(inner.trim()) {
                Some((name, arguments)) => {
                    push_text(&mut content, &lossy(&bytes[at..open]));
                    calls.push(SampledCall {
                        name,
                        arguments,
                        start: token_at(open),
                        end: token_at(close),
                    });
                }
                // Not a call (vLLM's Hermes parser leaves such blocks in the text too).
                None => push_text(&mut content, &lossy(&bytes[at..close])),
            }
            at = close;
        }
        push_text(&mut content, &lossy(&bytes[at..]));
        Ok(Sampled {
            reasoning,
            content,
            calls,
            eos,
        })
    }
}

/// `{"name": …, "arguments": {…}}` (arguments may also be a string holding a JSON object).
fn call_of(text: &str) -> Option<(String, Value)> {
    let v: Value = serde_json::from_str(text).ok()?;
    let name = v.get("name")?.as_str()?.to_owned();
    let arguments = match v.get("arguments").or_else(|| v.get("parameters")) {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s).ok()? {
            o @ Value::Object(_) => o,
            _ => return None,
        },
        Some(o @ Value::Object(_)) => o.clone(),
        Some(_) => return None,
    };
    Some((name, arguments))
}

/// Appends a piece of visible text: pieces are separated by the template's newlines, which
/// are not part of the text.
fn push_text(content: &mut String, piece: &str) {
    let piece = piece.trim_matches('\n');
    if piece.trim().is_empty() {
        return;
    }
    if !content.is_empty() {
        content.push('\n');
    }
    content.push_str(piece);
}

fn lossy(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

fn trimmed_start(bytes: &[u8]) -> &[u8] {
    let n = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &bytes[n..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader() -> OutputReader {
        OutputReader::new(TokenText::qwen3().unwrap(), Some("<|im_end|>"))
    }

    #[test]
    fn thinking_text_and_calls_are_read_with_token_offsets() {
        let r = reader();
        let text = "<think>\nplan\n</think>\n\nRunning it.\n<tool_call>\n{\"name\": \"bash\", \
                    \"arguments\": {\"cmd\": \"ls\"}}\n</tool_call><|im_end|>";
        let ids = r.tok.encode(text).unwrap();
        let s = r.read(&ids, &[]).unwrap();
        assert_eq!(s.reasoning.as_deref(), Some("plan"));
        assert_eq!(s.content, "Running it.");
        assert!(s.eos);
        assert_eq!(s.calls.len(), 1);
        let c = &s.calls[0];
        assert_eq!(c.name, "bash");
        assert_eq!(c.arguments, serde_json::json!({"cmd": "ls"}));
        let call_text = r.tok.decode(&ids[c.start as usize..c.end as usize]);
        assert!(call_text.starts_with("<tool_call>") && call_text.ends_with("</tool_call>"));
    }

    #[test]
    fn a_broken_call_stays_text_and_a_cut_thought_is_reasoning() {
        let r = reader();
        let ids = r
            .tok
            .encode("Hi\n<tool_call>\n{not json}\n</tool_call>")
            .unwrap();
        let s = r.read(&ids, &[]).unwrap();
        assert!(s.calls.is_empty() && !s.eos);
        assert_eq!(s.content, "Hi\n<tool_call>\n{not json}\n</tool_call>");
        let ids = r.tok.encode("<think>\nstill going").unwrap();
        let s = r.read(&ids, &[]).unwrap();
        assert_eq!(s.reasoning.as_deref(), Some("still going"));
        assert_eq!(s.content, "");
    }

    #[test]
    fn the_text_ends_before_the_first_stop_string_and_calls_before_it_stay() {
        let r = reader();
        let text = "<think>\nok\n</think>\n\nalpha <tool_call>\n{\"name\": \"bash\", \
                    \"arguments\": {}}\n</tool_call> beta END gamma END";
        let ids = r.tok.encode(text).unwrap();
        let stops = ["END".to_owned(), "delta".to_owned()];
        let s = r.read(&ids, &stops).unwrap();
        assert_eq!(s.content, "alpha \n beta ");
        assert_eq!(s.reasoning.as_deref(), Some("ok"));
        assert_eq!(s.calls.len(), 1);
        // A stop string inside the thinking leaves no visible text.
        let s = r.read(&ids, &["ok".to_owned()]).unwrap();
        assert_eq!((s.reasoning.as_deref(), s.content.as_str()), (Some(""), ""));
        assert!(s.calls.is_empty());
    }

    #[test]
    fn an_id_outside_the_vocabulary_is_an_upstream_error() {
        let e = reader().read(&[1, 999_999_999], &[]).unwrap_err();
        assert_eq!(e.kind, super::super::chat::ErrorKind::Upstream);
    }
}
