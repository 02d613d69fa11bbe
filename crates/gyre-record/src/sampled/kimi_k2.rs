//! Kimi K2 (vLLM `kimi_k2`): text, then a `<|tool_calls_section_begin|>` section of
//! `<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{JSON}<|tool_call_end|>`
//! calls; the id `functions.NAME:IDX` names the tool (the proxy issues ids of that form, unique
//! per recording, since the model numbers its calls from 0 in every turn). K2-Thinking and
//! K2.5 reason in `<think>…</think>` first (K2.5 prefills `<think>`), and may open the section
//! before `</think>`.

use memchr::memmem;
use serde_json::Value;

use super::hermes::object;
use super::{Parsed, Section, ToolParser, lossy, split_think};

/// The Kimi K2 parser.
#[derive(Debug)]
pub struct KimiK2;

const SECTION: Section = Section {
    open: b"<|tool_calls_section_begin|>",
    close: b"<|tool_calls_section_end|>",
    call_open: b"<|tool_call_begin|>",
    call_close: b"<|tool_call_end|>",
};
const ARGUMENTS: &[u8] = b"<|tool_call_argument_begin|>";

impl ToolParser for KimiK2 {
    fn name(&self) -> &'static str {
        "kimi_k2"
    }

    fn parse(&self, text: &[u8], _tools: &[Value]) -> Parsed {
        let (reasoning, rest) = split_think(text, &[SECTION.open]);
        let (content, calls) = SECTION.split(text, rest, |inner| {
            let sep = memmem::find(inner, ARGUMENTS)?;
            let id = lossy(&inner[..sep]).trim().to_owned();
            let arguments = object(&lossy(&inner[sep + ARGUMENTS.len()..]))?;
            let name = name_of(&id)?.to_owned();
            Some((name, arguments))
        });
        Parsed {
            reasoning,
            content,
            calls,
        }
    }

    fn end_tokens(&self) -> &'static [&'static str] {
        &["<|im_end|>"]
    }

    fn indexed_ids(&self) -> bool {
        true
    }
}

/// The tool a `functions.NAME:IDX` id names (vLLM reads `NAME` between the first `.` and the
/// last `:`; an id without the index is not the syntax).
fn name_of(id: &str) -> Option<&str> {
    let (head, idx) = id.rsplit_once(':')?;
    idx.parse::<u32>().ok()?;
    let name = head.split_once('.').map_or(head, |(_, n)| n);
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_written_id_names_the_tool() {
        let text = "<think>look first</think>Listing.<|tool_calls_section_begin|>\
                    <|tool_call_begin|>functions.bash:0<|tool_call_argument_begin|>\
                    {\"command\": \"ls\"}<|tool_call_end|><|tool_call_begin|>functions.read_file:1\
                    <|tool_call_argument_begin|>{\"path\": \"a\"}<|tool_call_end|>\
                    <|tool_calls_section_end|>";
        let p = KimiK2.parse(text.as_bytes(), &[]);
        assert_eq!(p.reasoning.as_deref(), Some("look first"));
        assert_eq!(p.content, "Listing.");
        assert_eq!(p.calls.len(), 2);
        assert_eq!(p.calls[0].name, "bash");
        assert_eq!(p.calls[1].name, "read_file");
        assert_eq!(p.calls[1].arguments, json!({"path": "a"}));
        assert!(text[p.calls[1].span.clone()].starts_with("<|tool_call_begin|>functions.read"));
        // A section opened while thinking ends the reasoning.
        let text = "<think>plan<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0\
                    <|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>";
        let p = KimiK2.parse(text.as_bytes(), &[]);
        assert_eq!((p.reasoning.as_deref(), p.calls.len()), (Some("plan"), 1));
        // An id without its index is not a call.
        let text = "<|tool_calls_section_begin|><|tool_call_begin|>functions.f\
                    <|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>";
        assert!(KimiK2.parse(text.as_bytes(), &[]).calls.is_empty());
    }
}
