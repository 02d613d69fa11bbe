//! A conversation → the token ids the policy is fed, with spans by source, putting back the
//! recorded output ids of assistant turns the proxy produced (payload restoration).
//!
//! The context is built in segments. Messages up to the first restored assistant turn are
//! rendered with the chat template as one conversation (tools included) ending with the
//! generation prompt; a restored turn is its recorded output ids verbatim (the end-of-turn token
//! added as template when the output was cut by the token limit); the messages after it are
//! rendered as the template writes them after that turn in a whole conversation
//! ([`ChatTemplate::render_continuation`]: what follows the turn's end, then the messages, then
//! the generation prompt; no second system block, whatever the family). So a request
//! that continues an earlier one starts with exactly that request's input and output, and is
//! recorded in delta form. Assistant turns the proxy did not produce (or that the harness
//! edited) are rendered with the messages around them. A final assistant turn given as a
//! prefill is left open: the context ends with its text, not with an end-of-turn token and a
//! new generation prompt (transformers' `continue_final_message`).
//!
//! All segments are rendered to text first and the context's length is bounded from below
//! ([`TokenFloor`]) before any is tokenised, so a conversation that cannot fit the context
//! costs no tokenising. The renderer is shared by concurrent requests: its caches are behind
//! locks held only to look up or store an entry, never while rendering or tokenising.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

use eyre::{Result, eyre};
use serde_json::Value;

use super::chat::Turn;
use super::floor::TokenFloor;
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

/// How a context ends and how long it may be.
#[derive(Clone, Copy, Debug, Default)]
pub struct Shape {
    /// Template options (the generation prompt is always added, except after a prefill).
    pub opts: RenderOptions,
    /// The last turn is an assistant prefill to continue.
    pub prefill: bool,
    /// Refuse, before tokenising, a context that is surely at least this many tokens.
    pub limit: Option<usize>,
}

/// A conversation refused before tokenising: even the lower bound on its length does not fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TooLong {
    /// Tokens it is at least.
    pub at_least: usize,
    /// The limit it was held to.
    pub limit: usize,
    /// Bytes of rendered text behind the bound.
    pub text_bytes: usize,
    /// Bytes of the tokenizer's longest token.
    pub max_token_bytes: usize,
}

impl std::fmt::Display for TooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "This model's maximum context length (max_model_len) is {} tokens. However, your \
             messages are at least {} tokens ({} bytes of rendered text, and no token is longer \
             than {} bytes). Please reduce the length of the messages. (Refused before \
             tokenising; nothing was recorded.)",
            self.limit, self.at_least, self.text_bytes, self.max_token_bytes
        )
    }
}

impl std::error::Error for TooLong {}

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

#[derive(Default)]
struct SegCache {
    segs: HashMap<u64, Arc<Seg>>,
    tokens: usize,
}

/// One step of a context being built: a segment (cached, or its text to tokenise) or a
/// restored turn.
enum Step<'t, 'a> {
    Cached(Arc<Seg>),
    Render {
        key: u64,
        text: String,
        turns: Vec<&'t Turn>,
        tools: &'a [Value],
    },
    Restore(&'a [Arc<Produced>]),
}

/// Renders conversations with one chat template and tokenizer; shared by concurrent requests.
pub struct Renderer {
    tmpl: ChatTemplate,
    enc: CachedEncoder,
    floor: Option<TokenFloor>,
    eos: Option<u32>,
    /// Generation prompts by `enable_thinking`.
    prompts: Mutex<HashMap<Option<bool>, String>>,
    segs: Mutex<SegCache>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The caches are only extended or cleared whole: a panic elsewhere leaves them valid.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Renderer {
    /// A renderer for `tok` (a `tokenizer.json` tokenizer) and `tmpl`; `eos` is the template's
    /// end-of-turn token text.
    pub fn new(tok: TokenText, tmpl: ChatTemplate, eos: Option<&str>) -> Result<Self> {
        let eos = eos.and_then(|e| tok.token_id(e));
        Ok(Renderer {
            tmpl,
            floor: TokenFloor::of(&tok),
            enc: CachedEncoder::new(tok)?,
            eos,
            prompts: Mutex::new(HashMap::new()),
            segs: Mutex::new(SegCache::default()),
        })
    }

    /// The length bound this renderer applies before tokenising (`None`: the tokenizer's
    /// normaliser can delete text, so there is none).
    pub fn floor(&self) -> Option<TokenFloor> {
        self.floor
    }

    /// The context for `turns` (and `tools`), ending with the generation prompt (or inside
    /// the prefill). A [`TooLong`] error when it surely exceeds `shape.limit`.
    pub fn context(&self, turns: &[RenderTurn], tools: &[Value], shape: Shape) -> Result<Context> {
        let opts = shape.opts;
        // Plan: every segment rendered to text (or found cached) before any is tokenised.
        let mut steps: Vec<Step> = Vec::new();
        let mut pending: Vec<&Turn> = Vec::new();
        let mut after: Option<&Turn> = None;
        for rt in turns {
            if rt.candidates.is_empty() {
                pending.push(rt.turn);
                continue;
            }
            steps.push(self.plan_segment(
                std::mem::take(&mut pending),
                after,
                tools,
                opts,
                false,
            )?);
            after = Some(rt.turn);
            steps.push(Step::Restore(&rt.candidates));
        }
        steps.push(self.plan_segment(pending, after, tools, opts, shape.prefill)?);
        if let (Some(limit), Some(floor)) = (shape.limit, self.floor) {
            let mut at_least = 0;
            let mut text_bytes = 0;
            for step in &steps {
                at_least += match step {
                    Step::Cached(seg) => seg.tokens.len(),
                    Step::Render { text, .. } => {
                        text_bytes += text.len();
                        floor.min_tokens(text)
                    }
                    Step::Restore(candidates) => candidates
                        .iter()
                        .map(|p| p.output.len() + usize::from(!p.eos && self.eos.is_some()))
                        .min()
                        .unwrap_or(0),
                };
            }
            if at_least >= limit {
                return Err(TooLong {
                    at_least,
                    limit,
                    text_bytes,
                    max_token_bytes: floor.max_token_bytes,
                }
                .into());
            }
        }
        let mut ctx = Context::default();
        let mut hash = 0u64;
        // The end-of-turn token a restored output closed with. Templates without turn ends
        // (GLM) open the next turn with the role token the model stopped on, which the
        // restored output already holds: it is not written twice.
        let mut ended_with: Option<u32> = None;
        for step in steps {
            let skip = |tokens: &[u32]| {
                usize::from(ended_with.is_some() && tokens.first().copied() == ended_with)
            };
            match step {
                Step::Cached(seg) => {
                    let n = skip(&seg.tokens);
                    append_from(&mut ctx, &mut hash, &seg.tokens, &seg.spans, n);
                }
                Step::Render {
                    key,
                    text,
                    turns,
                    tools,
                } => {
                    let parts = parts(&text, &turns, tools);
                    let (tokens, spans) = self.enc.encode_labelled(&text, &parts)?;
                    drop(text);
                    let n = skip(&tokens);
                    append_from(&mut ctx, &mut hash, &tokens, &spans, n);
                    let seg = Arc::new(Seg { tokens, spans });
                    let mut cache = lock(&self.segs);
                    if cache.tokens > SEG_CACHE_TOKENS {
                        cache.segs.clear();
                        cache.tokens = 0;
                    }
                    cache.tokens += seg.tokens.len();
                    cache.segs.insert(key, seg);
                }
                Step::Restore(candidates) => {
                    // The output sampled right after this very context, if there is one; else
                    // the latest with this content (what the policy wrote, even after other
                    // edits).
                    let len = ctx.tokens.len();
                    let out = candidates
                        .iter()
                        .find(|p| p.input_len == len && p.input_hash == hash)
                        .unwrap_or(&candidates[0]);
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
                    ended_with = tokens.last().copied();
                    ctx.restored.push(Arc::clone(out));
                    continue;
                }
            }
            ended_with = None;
        }
        Ok(ctx)
    }

    /// `turns` as one segment (the conversation's start, or a continuation `after` a restored
    /// turn) ending with the generation prompt, or inside the last turn when it is a
    /// `prefill`: found in the cache, else rendered to text.
    fn plan_segment<'t, 'a>(
        &self,
        turns: Vec<&'t Turn>,
        after: Option<&Turn>,
        tools: &'a [Value],
        opts: RenderOptions,
        prefill: bool,
    ) -> Result<Step<'t, 'a>> {
        let tools = if after.is_none() { tools } else { &[] };
        let key = segment_key(&turns, after, tools, opts, prefill);
        if let Some(seg) = lock(&self.segs).segs.get(&key) {
            return Ok(Step::Cached(Arc::clone(seg)));
        }
        let text = self.render_text(&turns, after, tools, opts, prefill)?;
        Ok(Step::Render {
            key,
            text,
            turns,
            tools,
        })
    }

    fn render_text(
        &self,
        turns: &[&Turn],
        after: Option<&Turn>,
        tools: &[Value],
        opts: RenderOptions,
        prefill: bool,
    ) -> Result<String> {
        let msgs: Vec<Message> = turns.iter().map(|t| t.msg.clone()).collect();
        let gen_opts = RenderOptions {
            add_generation_prompt: !prefill,
            ..opts
        };
        let text = match after {
            None if msgs.is_empty() => self.prompt(opts)?,
            None => self.tmpl.render(&msgs, tools, gen_opts)?,
            Some(turn) => self.tmpl.render_continuation(&turn.msg, &msgs, gen_opts)?,
        };
        if !prefill {
            return Ok(text);
        }
        // Cut after the prefill's text, as transformers' continue_final_message does: what the
        // template writes after it (the end-of-turn token) is not there, so the model goes on.
        let last = msgs
            .last()
            .filter(|m| m.role == "assistant")
            .ok_or_else(|| eyre!("a prefill must be the last turn, an assistant one"))?;
        let content = last.content.trim_end();
        if content.trim().is_empty() {
            return Err(eyre!("the final assistant turn (a prefill) has no text"));
        }
        let end = text.rfind(content).ok_or_else(|| {
            eyre!(
                "the chat template does not write the final assistant turn's text, so it cannot \
                 be continued as a prefill"
            )
        })? + content.len();
        let mut text = text;
        text.truncate(end);
        Ok(text)
    }

    fn prompt(&self, opts: RenderOptions) -> Result<String> {
        if let Some(p) = lock(&self.prompts).get(&opts.enable_thinking) {
            return Ok(p.clone());
        }
        let p = self.tmpl.generation_prompt(opts)?;
        lock(&self.prompts).insert(opts.enable_thinking, p.clone());
        Ok(p)
    }
}

fn segment_key(
    turns: &[&Turn],
    after: Option<&Turn>,
    tools: &[Value],
    opts: RenderOptions,
    prefill: bool,
) -> u64 {
    let mut h = DefaultHasher::new();
    (after.is_none(), opts.enable_thinking, prefill).hash(&mut h);
    // A continuation is cut out of a rendering that holds the turn it follows.
    for t in after.into_iter().chain(turns.iter().copied()) {
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

/// [`append`] without the first `skip` tokens of the segment (their spans shortened).
fn append_from(ctx: &mut Context, hash: &mut u64, tokens: &[u32], spans: &[Span], skip: usize) {
    if skip == 0 {
        return append(ctx, hash, tokens, spans);
    }
    let spans: Vec<Span> = spans
        .iter()
        .filter(|s| s.end > skip)
        .map(|s| Span {
            end: s.end - skip,
            ..s.clone()
        })
        .collect();
    append(ctx, hash, &tokens[skip..], &spans);
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

    /// A main-agent output sampled on `input`, ending on its stop token.
    fn produced(input: &[u32], output: &[u32], content: &str) -> Arc<Produced> {
        Arc::new(Produced {
            execution: "e1".into(),
            agent: "main".into(),
            purpose: Purpose::Task,
            output: Arc::from(output.to_vec()),
            eos: true,
            input_len: input.len(),
            input_hash: hash_tokens(input),
            content: content.into(),
            calls: Vec::new(),
        })
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
        let r = Renderer::new(
            tok.clone(),
            ChatTemplate::qwen3().unwrap(),
            Some("<|im_end|>"),
        )
        .unwrap();
        let opts = RenderOptions::generation(true);
        let shape = Shape {
            opts,
            ..Shape::default()
        };
        let first = [turn("system", "Be brief."), turn("user", "Say hi.")];
        let ctx1 = r.context(&plain(&first), &[], shape).unwrap();
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
        let produced = produced(&ctx1.tokens, &output, "Hi  there");
        // The harness sends the turn back trimmed and without the thinking.
        let second = [
            turn("system", "Be brief."),
            turn("user", "Say hi."),
            turn("assistant", "Hi there"),
            turn("user", "Again."),
        ];
        let mut rt = plain(&second);
        rt[2].candidates = vec![produced];
        let ctx2 = r.context(&rt, &[], shape).unwrap();
        let mut prefix = ctx1.tokens.clone();
        prefix.extend_from_slice(&output);
        assert_eq!(ctx2.tokens[..prefix.len()], prefix[..]);
        assert_eq!(
            tok.decode(&ctx2.tokens[prefix.len()..]),
            "\n<|im_start|>user\nAgain.<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(ctx2.restored.len(), 1);
        // Re-rendered instead, the history would differ (Qwen3 drops the earlier thinking).
        let rerendered = r.context(&plain(&second), &[], shape).unwrap();
        assert_ne!(rerendered.tokens[..prefix.len()], prefix[..]);
    }

    /// A template without turn ends (GLM's shape, here on Qwen3 tokens): the model stops on the
    /// next turn's role token, which the restored output holds, so the continuation starts
    /// after it instead of writing it again.
    #[test]
    fn a_stop_on_the_next_role_token_is_not_written_twice() {
        let tok = TokenText::qwen3().unwrap();
        let source = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}{% endfor %}\
                      {% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
        let tmpl = ChatTemplate::new(source.into(), None, None).unwrap();
        let r = Renderer::new(tok.clone(), tmpl, None).unwrap();
        let shape = Shape {
            opts: RenderOptions::generation(true),
            ..Shape::default()
        };
        let first = [turn("user", "Say hi.")];
        let ctx1 = r.context(&plain(&first), &[], shape).unwrap();
        let output = tok.encode("Hi there<|im_start|>").unwrap();
        let produced = produced(&ctx1.tokens, &output, "Hi there");
        let second = [
            turn("user", "Say hi."),
            turn("assistant", "Hi there"),
            turn("user", "Again."),
        ];
        let mut rt = plain(&second);
        rt[1].candidates = vec![produced];
        let ctx2 = r.context(&rt, &[], shape).unwrap();
        assert_eq!(
            tok.decode(&ctx2.tokens),
            "<|im_start|>user\nSay hi.<|im_start|>assistant\nHi there<|im_start|>user\nAgain.\
             <|im_start|>assistant\n"
        );
        assert_eq!(ctx2.spans.last().unwrap().end, ctx2.tokens.len());
    }

    fn qwen3() -> Renderer {
        Renderer::new(
            TokenText::qwen3().unwrap(),
            ChatTemplate::qwen3().unwrap(),
            Some("<|im_end|>"),
        )
        .unwrap()
    }

    #[test]
    fn a_prefill_is_continued_not_closed() {
        let tok = TokenText::qwen3().unwrap();
        let r = qwen3();
        let turns = [turn("user", "Name this chat."), turn("assistant", "{")];
        let shape = Shape {
            opts: RenderOptions::generation(true),
            prefill: true,
            limit: None,
        };
        let ctx = r.context(&plain(&turns), &[], shape).unwrap();
        assert_eq!(
            tok.decode(&ctx.tokens),
            "<|im_start|>user\nName this chat.<|im_end|>\n<|im_start|>assistant\n\
             <think>\n\n</think>\n\n{"
        );
        // The prefill's text is the assistant's; the context ends with it.
        let last = ctx.spans.last().unwrap();
        assert_eq!(
            (last.end, last.source),
            (ctx.tokens.len(), Source::Assistant)
        );
        // Without the flag the turn is closed and a new one opened.
        let closed = r
            .context(
                &plain(&turns),
                &[],
                Shape {
                    prefill: false,
                    ..shape
                },
            )
            .unwrap();
        assert!(
            tok.decode(&closed.tokens)
                .ends_with("{<|im_end|>\n<|im_start|>assistant\n")
        );
    }

    #[test]
    fn a_conversation_surely_too_long_is_refused_before_tokenising() {
        let r = qwen3();
        let floor = r.floor().unwrap();
        let text = "y".repeat(floor.max_token_bytes * 1000);
        let turns = [turn("user", &text)];
        let shape = |limit| Shape {
            opts: RenderOptions::generation(true),
            prefill: false,
            limit: Some(limit),
        };
        let err = r.context(&plain(&turns), &[], shape(1000)).unwrap_err();
        let too_long = err.downcast_ref::<TooLong>().unwrap();
        assert!(too_long.at_least >= 1000 && too_long.text_bytes > text.len());
        // Within the bound it is tokenised, and really is longer than the bound said.
        let ctx = r.context(&plain(&turns), &[], shape(1_000_000)).unwrap();
        assert!(ctx.tokens.len() >= 1000);
    }
}
