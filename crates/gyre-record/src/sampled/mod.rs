//! Sampled token ids → the assistant message they spell: reasoning, visible text and tool calls,
//! each call located by its token offsets in the output.
//!
//! Every model family writes tool calls and reasoning its own way; each has a parser in its own
//! file behind [`ToolParser`], named as vLLM names it (`--tool-parser`), and chosen from the chat
//! template when not named ([`detect`]). A parser sees the sampled text (special tokens spelled
//! out, the final end-of-turn token removed, cut at the first stop string) and returns byte
//! ranges; [`OutputReader`] turns those into token offsets, so call-id spans and payload
//! restoration work the same for every family.

mod deepseek_v31;
mod dsml;
mod glm45;
mod harmony;
mod hermes;
mod kimi_k2;
mod llama3_json;
mod minimax_m2;
mod qwen3_coder;
mod values;

use std::ops::Range;
use std::sync::Arc;

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
    /// First output token of the call (the token that opens it).
    pub start: u32,
    /// Exclusive end (after the token that closes it).
    pub end: u32,
}

/// What the sampled tokens say.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampled {
    /// Reasoning text, when present.
    pub reasoning: Option<String>,
    /// Visible text, without the tool-call blocks.
    pub content: String,
    /// Tool calls, in order.
    pub calls: Vec<SampledCall>,
    /// The output ends with an end-of-turn token.
    pub eos: bool,
}

/// A call as a parser finds it: by byte range in the sampled text.
#[derive(Clone, Debug, PartialEq)]
pub struct FoundCall {
    /// Tool name.
    pub name: String,
    /// Arguments (a JSON object).
    pub arguments: Value,
    /// Bytes of the call, from its opening marker to past its closing one.
    pub span: Range<usize>,
}

/// What a parser finds in the sampled text.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parsed {
    /// Reasoning text, when present.
    pub reasoning: Option<String>,
    /// Visible text.
    pub content: String,
    /// Tool calls, in order.
    pub calls: Vec<FoundCall>,
}

/// One model family's tool-call and reasoning syntax.
pub trait ToolParser: Send + Sync + std::fmt::Debug {
    /// vLLM's name for the parser (`--tool-parser NAME`).
    fn name(&self) -> &'static str;
    /// Splits `text` (the sampled text, end-of-turn token removed) into reasoning, visible text
    /// and calls; `tools` are the request's tool schemas (Chat Completions shape), which type
    /// argument values in families that write them untyped.
    fn parse(&self, text: &[u8], tools: &[Value]) -> Parsed;
    /// Token texts that end a sample in this family besides the template's end-of-turn token
    /// (gpt-oss: `<|call|>`, `<|return|>`).
    fn end_tokens(&self) -> &'static [&'static str] {
        &[]
    }
    /// The family's call ids are `functions.NAME:IDX` (Kimi K2), which its template and model
    /// expect in tool results; the proxy then issues ids of that form.
    fn indexed_ids(&self) -> bool {
        false
    }
}

/// Every parser, by vLLM name; aliases vLLM also accepts map to the same parser.
pub const PARSERS: &[&str] = &[
    "hermes",
    "qwen3_coder",
    "qwen3_xml",
    "deepseek_v31",
    "deepseek_v32",
    "deepseek_v4",
    "openai",
    "llama3_json",
    "kimi_k2",
    "glm45",
    "glm47",
    "minimax_m2",
];

/// The parser vLLM calls `name`.
pub fn by_name(name: &str) -> Option<Arc<dyn ToolParser>> {
    Some(match name {
        "hermes" => Arc::new(hermes::Hermes),
        "qwen3_coder" | "qwen3_xml" => Arc::new(qwen3_coder::Qwen3Coder),
        "deepseek_v31" => Arc::new(deepseek_v31::DeepSeekV31),
        "deepseek_v32" => Arc::new(dsml::Dsml::V32),
        "deepseek_v4" => Arc::new(dsml::Dsml::V4),
        "openai" => Arc::new(harmony::Harmony),
        "llama3_json" => Arc::new(llama3_json::Llama3Json),
        "kimi_k2" => Arc::new(kimi_k2::KimiK2),
        "glm45" | "glm47" => Arc::new(glm45::Glm45),
        "minimax_m2" => Arc::new(minimax_m2::MiniMaxM2),
        _ => return None,
    })
}

/// The parser a chat template's source calls for: the family whose tool-call syntax it writes
/// (Hermes when it writes none of the others').
pub fn detect(template: &str) -> &'static str {
    let has = |s: &str| template.contains(s);
    if has("<function=") && has("<parameter=") {
        "qwen3_coder"
    } else if has("tool▁calls▁begin") {
        "deepseek_v31"
    } else if has("｜DSML｜") {
        if has("function_calls") {
            "deepseek_v32"
        } else {
            "deepseek_v4"
        }
    } else if has("<|channel|>") && has("<|call|>") {
        "openai"
    } else if has("<|tool_calls_section_begin|>") {
        "kimi_k2"
    } else if has("<arg_key>") {
        "glm45"
    } else if has("<minimax:tool_call>") {
        "minimax_m2"
    } else if has("<|start_header_id|>") && has("parameters") {
        "llama3_json"
    } else {
        "hermes"
    }
}

/// Reads sampled ids with one tokenizer and one family's parser.
#[derive(Clone, Debug)]
pub struct OutputReader {
    tok: TokenText,
    parser: Arc<dyn ToolParser>,
    /// End-of-turn ids (`<|im_end|>`, `<|endoftext|>`, the template's eos, the family's).
    eos: Vec<u32>,
}

impl OutputReader {
    /// A reader for `tok` with `parser`; `eos` is the template's end-of-turn token text, if it
    /// has one.
    pub fn new(tok: TokenText, eos: Option<&str>, parser: Arc<dyn ToolParser>) -> Self {
        let mut ids: Vec<u32> = ["<|im_end|>", "<|endoftext|>", "<|eot_id|>"]
            .into_iter()
            .chain(eos)
            .chain(parser.end_tokens().iter().copied())
            .filter_map(|t| tok.token_id(t))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        OutputReader {
            tok,
            parser,
            eos: ids,
        }
    }

    /// The family parser in use.
    pub fn parser(&self) -> &dyn ToolParser {
        &*self.parser
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

    /// Parses sampled `ids` into reasoning, text and tool calls (`tools`: the request's tool
    /// schemas). The text ends before the first of `stops` (the request's stop strings) it
    /// holds, as vLLM and SGLang cut it: the ids keep the tokens that spell the stop string,
    /// the text does not.
    pub fn read(
        &self,
        ids: &[u32],
        stops: &[String],
        tools: &[Value],
    ) -> Result<Sampled, ApiError> {
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
        let parsed = self.parser.parse(&bytes, tools);
        // A call starts at the token holding its first byte and ends after the token holding
        // its last.
        let first_token = |byte: usize| (starts.partition_point(|&s| s <= byte) - 1) as u32;
        let end_token = |byte: usize| starts.partition_point(|&s| s < byte) as u32;
        let calls = parsed
            .calls
            .into_iter()
            .map(|c| SampledCall {
                start: first_token(c.span.start),
                end: end_token(c.span.end),
                name: c.name,
                arguments: c.arguments,
            })
            .collect();
        Ok(Sampled {
            reasoning: parsed.reasoning,
            content: parsed.content,
            calls,
            eos,
        })
    }
}

/// Text outside the calls, for parsers whose visible text is "everything but the call blocks".
/// Pieces are separated by the template's newlines, which are not part of the text.
pub(crate) fn push_text(content: &mut String, piece: &[u8]) {
    let piece = lossy(piece);
    let piece = piece.trim_matches('\n');
    if piece.trim().is_empty() {
        return;
    }
    if !content.is_empty() {
        content.push('\n');
    }
    content.push_str(piece);
}

pub(crate) fn lossy(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// The reasoning of `<think>…</think>` families and where the rest starts: `<think>` may be
/// in the sampled text or already in the generation prompt (then only `</think>` is sampled);
/// a sample cut while thinking is all reasoning. `also_ends`: markers that end reasoning
/// without `</think>` (a tool call opened while thinking, as Qwen3.5 and GLM do).
pub(crate) fn split_think(bytes: &[u8], also_ends: &[&[u8]]) -> (Option<String>, usize) {
    const OPEN: &[u8] = b"<think>";
    const CLOSE: &[u8] = b"</think>";
    let opened = trimmed_start(bytes).starts_with(OPEN);
    let inner_of = |head: &[u8]| -> String {
        let inner = match memmem::find(head, OPEN)
            .filter(|&o| head[..o].iter().all(u8::is_ascii_whitespace))
        {
            Some(o) => &head[o + OPEN.len()..],
            None => head,
        };
        lossy(inner).trim_matches('\n').to_owned()
    };
    if let Some(close) = memmem::find(bytes, CLOSE) {
        return (Some(inner_of(&bytes[..close])), close + CLOSE.len());
    }
    if opened {
        let end = also_ends
            .iter()
            .filter_map(|m| memmem::find(bytes, m))
            .min()
            .unwrap_or(bytes.len());
        return (Some(inner_of(&bytes[..end])), end);
    }
    (None, 0)
}

pub(crate) fn trimmed_start(bytes: &[u8]) -> &[u8] {
    let n = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &bytes[n..]
}

/// `text[from..]` split at every `open … close` block: the visible text between blocks, and
/// each block's inner bytes handed to `call` with its span (a block `call` rejects stays text,
/// as vLLM leaves it; an unclosed block is text).
pub(crate) fn blocks(
    text: &[u8],
    from: usize,
    open: &[u8],
    close: &[u8],
    mut call: impl FnMut(&[u8], Range<usize>) -> Option<Vec<FoundCall>>,
) -> (String, Vec<FoundCall>) {
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut at = from;
    while let Some(i) = memmem::find(&text[at..], open) {
        let start = at + i;
        let inner_start = start + open.len();
        let Some(j) = memmem::find(&text[inner_start..], close) else {
            break;
        };
        let end = inner_start + j + close.len();
        match call(&text[inner_start..inner_start + j], start..end) {
            Some(found) => {
                push_text(&mut content, &text[at..start]);
                calls.extend(found);
            }
            None => push_text(&mut content, &text[at..end]),
        }
        at = end;
    }
    push_text(&mut content, &text[at..]);
    (content, calls)
}

/// A family's tool-call section: one `open … close` span holding `call_open … call_close`
/// calls (DeepSeek V3.1, Kimi K2).
pub(crate) struct Section {
    pub open: &'static [u8],
    pub close: &'static [u8],
    pub call_open: &'static [u8],
    pub call_close: &'static [u8],
}

impl Section {
    /// The visible text around the first section in `text[from..]` and the calls in it (`call`
    /// reads one call's inner bytes into name, arguments and written id); a section without
    /// one valid call stays text, and an unclosed section runs to the end (a sample cut there).
    pub(crate) fn split(
        &self,
        text: &[u8],
        from: usize,
        call: impl Fn(&[u8]) -> Option<(String, Value)>,
    ) -> (String, Vec<FoundCall>) {
        let mut content = String::new();
        let Some(i) = memmem::find(&text[from..], self.open) else {
            push_text(&mut content, &text[from..]);
            return (content, Vec::new());
        };
        let open = from + i;
        let inner_start = open + self.open.len();
        let close = memmem::find(&text[inner_start..], self.close).map(|j| inner_start + j);
        let inner_end = close.unwrap_or(text.len());
        let mut calls = Vec::new();
        let mut at = inner_start;
        while let Some(j) = memmem::find(&text[at..inner_end], self.call_open) {
            let start = at + j;
            let body = start + self.call_open.len();
            let Some(k) = memmem::find(&text[body..inner_end], self.call_close) else {
                break;
            };
            let end = body + k + self.call_close.len();
            if let Some((name, arguments)) = call(&text[body..body + k]) {
                calls.push(FoundCall {
                    name,
                    arguments,
                    span: start..end,
                });
            }
            at = end;
        }
        let after = close.map_or(text.len(), |c| c + self.close.len());
        if calls.is_empty() {
            push_text(&mut content, &text[from..after]);
        } else {
            push_text(&mut content, &text[from..open]);
        }
        push_text(&mut content, &text[after..]);
        (content, calls)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader() -> OutputReader {
        OutputReader::new(
            TokenText::qwen3().unwrap(),
            Some("<|im_end|>"),
            Arc::new(hermes::Hermes),
        )
    }

    #[test]
    fn thinking_text_and_calls_are_read_with_token_offsets() {
        let r = reader();
        let text = "<think>\nplan\n</think>\n\nRunning it.\n<tool_call>\n{\"name\": \"bash\", \
                    \"arguments\": {\"cmd\": \"ls\"}}\n</tool_call><|im_end|>";
        let ids = r.tok.encode(text).unwrap();
        let s = r.read(&ids, &[], &[]).unwrap();
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
        let s = r.read(&ids, &[], &[]).unwrap();
        assert!(s.calls.is_empty() && !s.eos);
        assert_eq!(s.content, "Hi\n<tool_call>\n{not json}\n</tool_call>");
        let ids = r.tok.encode("<think>\nstill going").unwrap();
        let s = r.read(&ids, &[], &[]).unwrap();
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
        let s = r.read(&ids, &stops, &[]).unwrap();
        assert_eq!(s.content, "alpha \n beta ");
        assert_eq!(s.reasoning.as_deref(), Some("ok"));
        assert_eq!(s.calls.len(), 1);
        // A stop string inside the thinking leaves no visible text.
        let s = r.read(&ids, &["ok".to_owned()], &[]).unwrap();
        assert_eq!((s.reasoning.as_deref(), s.content.as_str()), (Some(""), ""));
        assert!(s.calls.is_empty());
    }

    #[test]
    fn every_name_has_a_parser_and_templates_pick_their_family() {
        for name in PARSERS {
            assert!(by_name(name).is_some(), "{name}");
        }
        assert!(by_name("qwen25").is_none());
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/models");
        for (template, want) in [
            ("qwen3-coder/chat_template.jinja", "qwen3_coder"),
            ("qwen3.5/chat_template.jinja", "qwen3_coder"),
            ("deepseek-v3.1/chat_template.jinja", "deepseek_v31"),
            ("gpt-oss/chat_template.jinja", "openai"),
            (
                "llama3/chat_template.llama-3.1-8b-instruct.jinja",
                "llama3_json",
            ),
            ("kimi-k2/chat_template.jinja", "kimi_k2"),
            (
                "glm-4.x/chat_template.glm-4.6.llama-cpp-patched.jinja",
                "glm45",
            ),
            (
                "glm-4.x/chat_template.glm-4.7-flash.llama-cpp-patched.jinja",
                "glm45",
            ),
            ("minimax-m2/chat_template.jinja", "minimax_m2"),
        ] {
            let source = std::fs::read_to_string(format!("{dir}/{template}")).unwrap();
            assert_eq!(detect(&source), want, "{template}");
        }
        let qwen3 = gyre_text::ChatTemplate::qwen3().unwrap();
        assert_eq!(detect(qwen3.source()), "hermes");
    }

    #[test]
    fn an_id_outside_the_vocabulary_is_an_upstream_error() {
        let e = reader().read(&[1, 999_999_999], &[], &[]).unwrap_err();
        assert_eq!(e.kind, super::super::chat::ErrorKind::Upstream);
    }
}
