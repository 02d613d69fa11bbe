//! A conversation → the token ids the policy is fed, with spans by source, putting back the
//! recorded output ids of assistant turns the proxy produced (payload restoration).
//!
//! The context is built in segments. Messages up to the first restored assistant turn are
//! rendered with the chat template as one conversation (tools included) ending with the
//! generation prompt; a restored turn is its recorded output ids verbatim (the end-of-turn token
//! added as template when the output was cut by the token limit); the messages after it are
//! rendered as the template continues a conversation after a generated turn (the separator
//! after the end-of-turn token, then the messages, then the generation prompt). So a request
//! that continues an earlier one starts with exactly that request's input and output, and is
//! recorded in delta form. Assistant turns the proxy did not produce (or that the harness
//! edited) are rendered with the messages around them.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use eyre::{Result, eyre};
use serde_json::Value;

use super::chat::Turn;
use super::payload::Produced;
use gyre_engine::record::Source;
use gyre_text::label::{Part, Span, extend_spans};
use gyre_text::{CachedEncoder, ChatTemplate, Message, RenderOptions, TokenText, python_json};

/// A turn to render, with the outputs it may restore (best first; empty = render it).
#[derive(Clone, Debug)]
pub struct RenderTurn<'a> {
    /// The turn.
    pub turn: &'a Turn,
    /// Recorded outputs this assistant turn is (by call id, or by content, latest first).
    pub candidates: Vec<Arc<Produced>>,
}

/// The built context.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// Every input token.
    pub tokens: Vec<u32>,
    /// Spans over `tokens`.
    pub spans: Vec<Span>,
    /// The output each restored turn put back, in order.
    pub restored: Vec<Arc<Produced>>,
}

/// Rolling hash of a token sequence (the same in [`Produced::input_hash`]).
pub fn extend_hash(h: u64, t: u32) -> u64 {
    h.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(t as u64 + 1)
}

/// [`extend_hash`] over `tokens` from 0.
pub fn hash_tokens(tokens: &[u32]) -> u64 {
    tokens.iter().fold(0, |h, &t| extend_hash(h, t))
}

struct Seg {
    tokens: Vec<u32>,
    spans: Vec<Span>,
}

/// Past this many cached segment tokens the cache is cleared (bounds memory).
const SEG_CACHE_TOKENS: usize = 32 << 20;

/// Renders conversations with one chat template and tokenizer.
pub struct Renderer {
    tmpl: ChatTemplate,
    enc: CachedEncoder,
    /// What the template writes after an assistant turn's end-of-turn token (Qwen3: `"\n"`).
    after_eos: String,
    eos: Option<u32>,
    /// Generation prompts by `enable_thinking`.
    prompts: HashMap<Option<bool>, String>,
    segs: HashMap<u64, Arc<Seg>>,
    seg_tokens: usize,
}

impl Renderer {
    /// A renderer for `tok` (a `tokenizer.json` tokenizer) and `tmpl`; `eos` is the template's
    /// end-of-turn token text.
    pub fn new(tok: TokenText, tmpl: ChatTemplate, eos: Option<&str>) -> Result<Self> {
        let probe = [Message::new("user", "x")];
        let opts = RenderOptions::default();
        let cont = tmpl.render_continuation(&probe, opts)?;
        let plain = tmpl.render(&probe, &[], opts)?;
        let after_eos = cont
            .strip_suffix(&plain)
            .ok_or_else(|| {
                eyre!("this chat template does not continue a conversation after a turn")
            })?
            .to_owned();
        let eos = eos.and_then(|e| tok.token_id(e));
        Ok(Renderer {
            tmpl,
            enc: CachedEncoder::new(tok)?,
            after_eos,
            eos,
            prompts: HashMap::new(),
            segs: HashMap::new(),
            seg_tokens: 0,
        })
    }

    /// The context for `turns` (and `tools`), ending with the generation prompt.
    pub fn context(
        &mut self,
        turns: &[RenderTurn],
        tools: &[Value],
        opts: RenderOptions,
    ) -> Result<Context> {
        let mut ctx = Context::default();
        let mut hash = 0u64;
        let mut pending: Vec<&Turn> = Vec::new();
        let mut first = true;
        for rt in turns {
            if rt.candidates.is_empty() {
                pending.push(rt.turn);
                continue;
            }
            self.push_segment(&mut ctx, &mut hash, &pending, first, tools, opts)?;
            pending.clear();
            first = false;
            // The output sampled right after this very context, if there is one; else the
            // latest with this content (what the policy wrote, even after other edits).
            let len = ctx.tokens.len();
            let out = rt
                .candidates
                .iter()
                .find(|p| p.input_len == len && p.input_hash == hash)
                .unwrap_or(&rt.candidates[0]);
            let mut tokens = out.output.to_vec();
            let mut spans = vec![Span {
                end: tokens.len(),
                source: Source::Assistant,
                call_id: None,
            }];
            if let (false, Some(eos)) = (out.eos, self.eos) {
                tokens.push(eos);
                spans.push(Span {
                    end: tokens.len(),
                    source: Source::Template,
                    call_id: None,
                });
            }
            append(&mut ctx, &mut hash, &tokens, &spans);
            ctx.restored.push(Arc::clone(out));
        }
        self.push_segment(&mut ctx, &mut hash, &pending, first, tools, opts)?;
        Ok(ctx)
    }

    /// Renders `turns` as one segment (the conversation's start when `first`, else a
    /// continuation after a generated turn) ending with the generation prompt, and appends it.
    fn push_segment(
        &mut self,
        ctx: &mut Context,
        hash: &mut u64,
        turns: &[&Turn],
        first: bool,
        tools: &[Value],
        opts: RenderOptions,
    ) -> Result<()> {
        let tools = if first { tools } else { &[] };
        let key = segment_key(turns, first, tools, opts);
        let seg = match self.segs.get(&key) {
            Some(s) => Arc::clone(s),
            None => {
                let seg = Arc::new(self.render_segment(turns, first, tools, opts)?);
                if self.seg_tokens > SEG_CACHE_TOKENS {
                    self.segs.clear();
                    self.seg_tokens = 0;
                }
                self.seg_tokens += seg.tokens.len();
                self.segs.insert(key, Arc::clone(&seg));
                seg
            }
        };
        append(ctx, hash, &seg.tokens, &seg.spans);
        Ok(())
    }

    fn render_segment(
        &mut self,
        turns: &[&Turn],
        first: bool,
        tools: &[Value],
        opts: RenderOptions,
    ) -> Result<Seg> {
        let msgs: Vec<Message> = turns.iter().map(|t| t.msg.clone()).collect();
        let gen_opts = RenderOptions {
            add_generation_prompt: true,
            ..opts
        };
        let text = match (first, msgs.is_empty()) {
            (true, false) => self.tmpl.render(&msgs, tools, gen_opts)?,
            (true, true) => self.prompt(opts)?,
            (false, true) => {
                let prompt = self.prompt(opts)?;
                format!("{}{prompt}", self.after_eos)
            }
            (false, false) => self.tmpl.render_continuation(&msgs, gen_opts)?,
        };
        let parts = parts(&text, turns, tools);
        let (tokens, spans) = self.enc.encode_labelled(&text, &parts)?;
        Ok(Seg { spans, tokens })
    }

    fn prompt(&mut self, opts: RenderOptions) -> Result<String> {
        if let Some(p) = self.prompts.get(&opts.enable_thinking) {
            return Ok(p.clone());
        }
        let p = self.tmpl.generation_prompt(opts)?;
        self.prompts.insert(opts.enable_thinking, p.clone());
        Ok(p)
    }
}

fn segment_key(turns: &[&Turn], first: bool, tools: &[Value], opts: RenderOptions) -> u64 {
    let mut h = DefaultHasher::new();
    (first, opts.enable_thinking).hash(&mut h);
    for t in turns {
        t.source.hash(&mut h);
        t.msg.role.hash(&mut h);
        t.msg.content.hash(&mut h);
        t.msg.reasoning_content.hash(&mut h);
        t.msg.tool_call_id.hash(&mut h);
        for c in &t.msg.tool_calls {
            (&c.id, &c.name, c.arguments.to_string()).hash(&mut h);
        }
    }
    for tool in tools {
        tool.to_string().hash(&mut h);
    }
    h.finish()
}

fn append(ctx: &mut Context, hash: &mut u64, tokens: &[u32], spans: &[Span]) {
    let base = ctx.tokens.len();
    for &t in tokens {
        *hash = extend_hash(*hash, t);
    }
    ctx.tokens.extend_from_slice(tokens);
    extend_spans(&mut ctx.spans, base, spans);
}

/// Where the messages' contents (and the tool schemas, as `system`) are in `text`, searched in
/// order; everything else the template wrote is `template`. An assistant turn is one range from
/// its first to its last rendered piece.
fn parts(text: &str, turns: &[&Turn], tools: &[Value]) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut cursor = 0;
    for tool in tools {
        let json = python_json(tool);
        if let Some(i) = text[cursor..].find(&json) {
            let start = cursor + i;
            cursor = start + json.len();
            parts.push(Part {
                start,
                end: cursor,
                source: Source::System,
                call_id: None,
            });
        }
    }
    let tool_parts = parts.len();
    let mut cursor = 0;
    for turn in turns {
        let msg = &turn.msg;
        let mut pieces: Vec<String> = Vec::new();
        if let Some(r) = &msg.reasoning_content {
            pieces.push(r.trim_matches('\n').to_owned());
        }
        pieces.push(msg.content.trim_matches('\n').to_owned());
        for c in &msg.tool_calls {
            pieces.push(Value::from(c.name.as_str()).to_string());
            if let Value::Object(_) = c.arguments {
                pieces.push(python_json(&c.arguments));
            }
        }
        let mut range: Option<(usize, usize)> = None;
        for p in pieces.iter().filter(|p| !p.trim().is_empty()) {
            if let Some(start) = find_outside(text, p, cursor, &parts[..tool_parts]) {
                cursor = start + p.len();
                range = Some((range.map_or(start, |r| r.0), cursor));
            }
        }
        if let Some((start, end)) = range {
            parts.push(Part {
                start,
                end,
                source: turn.source,
                call_id: msg.tool_call_id.clone(),
            });
        }
    }
    parts.sort_by_key(|p| p.start);
    // Keep parts disjoint (a message quoting a tool schema): the earlier one wins.
    let mut out: Vec<Part> = Vec::with_capacity(parts.len());
    for p in parts {
        if out.last().is_none_or(|last| last.end <= p.start) {
            out.push(p);
        }
    }
    out
}

/// The first occurrence of `needle` in `text` at or after `from` that does not overlap one of
/// `taken` (a message's text also found inside a tool schema).
fn find_outside(text: &str, needle: &str, mut from: usize, taken: &[Part]) -> Option<usize> {
    loop {
        let start = from + text[from..].find(needle)?;
        let end = start + needle.len();
        match taken.iter().find(|p| p.start < end && start < p.end) {
            Some(p) => from = p.end,
            None => return Some(start),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyre_engine::record::Purpose;

    fn turn(role: &str, content: &str) -> Turn {
        Turn::of(Message::new(role, content))
    }

    fn plain<'a>(turns: &'a [Turn]) -> Vec<RenderTurn<'a>> {
        turns
            .iter()
            .map(|turn| RenderTurn {
                turn,
                candidates: Vec::new(),
            })
            .collect()
    }

    #[test]
    fn a_restored_turn_continues_the_earlier_call_exactly() {
        let tok = TokenText::qwen3().unwrap();
        let tmpl = ChatTemplate::qwen3().unwrap();
        let mut r = Renderer::new(
            tok.clone(),
            ChatTemplate::qwen3().unwrap(),
            Some("<|im_end|>"),
        )
        .unwrap();
        let opts = RenderOptions::generation(true);
        let first = [turn("system", "Be brief."), turn("user", "Say hi.")];
        let ctx1 = r.context(&plain(&first), &[], opts).unwrap();
        let msgs: Vec<Message> = first.iter().map(|t| t.msg.clone()).collect();
        assert_eq!(
            ctx1.tokens,
            tmpl.render_tokens(&tok, &msgs, &[], opts).unwrap()
        );
        let sources: Vec<Source> = ctx1.spans.iter().map(|s| s.source).collect();
        assert!(sources.contains(&Source::System) && sources.contains(&Source::User));
        assert_eq!(ctx1.spans.last().unwrap().end, ctx1.tokens.len());

        let output = tok
            .encode("<think>\nhm\n</think>\n\nHi  there<|im_end|>")
            .unwrap();
        let produced = Arc::new(Produced {
            execution: "e1".into(),
            agent: "main".into(),
            purpose: Purpose::Task,
            output: Arc::from(output.clone()),
            eos: true,
            input_len: ctx1.tokens.len(),
            input_hash: hash_tokens(&ctx1.tokens),
            content: "Hi  there".into(),
            calls: Vec::new(),
        });
        // The harness sends the turn back trimmed and without the thinking.
        let second = [
            turn("system", "Be brief."),
            turn("user", "Say hi."),
            turn("assistant", "Hi there"),
            turn("user", "Again."),
        ];
        let mut rt = plain(&second);
        rt[2].candidates = vec![produced];
        let ctx2 = r.context(&rt, &[], opts).unwrap();
        let mut prefix = ctx1.tokens.clone();
        prefix.extend_from_slice(&output);
        assert_eq!(ctx2.tokens[..prefix.len()], prefix[..]);
        assert_eq!(
            tok.decode(&ctx2.tokens[prefix.len()..]),
            "\n<|im_start|>user\nAgain.<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(ctx2.restored.len(), 1);
        // Re-rendered instead, the history would differ (Qwen3 drops the earlier thinking).
        let rerendered = r.context(&plain(&second), &[], opts).unwrap();
        assert_ne!(rerendered.tokens[..prefix.len()], prefix[..]);
    }
}
