//! DeepSeek V3.1 (vLLM `deepseek_v31`): text, then
//! `<｜tool▁calls▁begin｜>` with `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{JSON}<｜tool▁call▁end｜>`
//! per call and `<｜tool▁calls▁end｜>`; reasoning before `</think>` (the generation prompt holds
//! `<think>` when thinking is on).

use memchr::memmem;
use serde_json::Value;

use super::hermes::object;
use super::{Parsed, Section, ToolParser, lossy, split_think};

/// The DeepSeek V3.1 parser.
#[derive(Debug)]
pub struct DeepSeekV31;

const SECTION: Section = Section {
    open: "<｜tool▁calls▁begin｜>".as_bytes(),
    close: "<｜tool▁calls▁end｜>".as_bytes(),
    call_open: "<｜tool▁call▁begin｜>".as_bytes(),
    call_close: "<｜tool▁call▁end｜>".as_bytes(),
};
const SEP: &[u8] = "<｜tool▁sep｜>".as_bytes();

impl ToolParser for DeepSeekV31 {
    fn name(&self) -> &'static str {
        "deepseek_v31"
    }

    fn parse(&self, text: &[u8], _tools: &[Value]) -> Parsed {
        let (reasoning, rest) = split_think(text, &[]);
        let (content, calls) = SECTION.split(text, rest, |inner| {
            let sep = memmem::find(inner, SEP)?;
            let name = lossy(&inner[..sep]).trim().to_owned();
            let arguments = object(&lossy(&inner[sep + SEP.len()..]))?;
            (!name.is_empty()).then_some((name, arguments))
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

    #[test]
    fn calls_in_the_section_are_read_with_spans() {
        let text = "thought</think>Running it.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>bash\
                    <｜tool▁sep｜>{\"command\": \"ls\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>read\
                    <｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
        let p = DeepSeekV31.parse(text.as_bytes(), &[]);
        assert_eq!(p.reasoning.as_deref(), Some("thought"));
        assert_eq!(p.content, "Running it.");
        assert_eq!(p.calls.len(), 2);
        assert_eq!(p.calls[0].arguments, json!({"command": "ls"}));
        assert_eq!(p.calls[1].name, "read");
        assert!(text[p.calls[0].span.clone()].starts_with("<｜tool▁call▁begin｜>bash"));
        assert!(text[p.calls[1].span.clone()].ends_with("<｜tool▁call▁end｜>"));
        let p = DeepSeekV31.parse(
            "<｜tool▁calls▁begin｜>junk<｜tool▁calls▁end｜>".as_bytes(),
            &[],
        );
        assert!(p.calls.is_empty());
        assert_eq!(p.content, "<｜tool▁calls▁begin｜>junk<｜tool▁calls▁end｜>");
    }
}
