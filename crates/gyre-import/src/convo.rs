//! Conversation → tokens with spans, through the chat template, with or without payload
//! restoration (the paper's payload cache).
//!
//! A context is a list of [`Turn`]s. With restoration, an assistant turn that is the recorded
//! response of an earlier request is not rendered: that request's output tokens are put back
//! verbatim, and the messages between two such turns are rendered as the template continues a
//! conversation after a generated turn ([`ChatTemplate::render_continuation`]). Without
//! restoration the whole conversation is rendered at once, as a harness that re-serialises its
//! history would (Qwen3's template then drops earlier `<think>` blocks).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::rc::Rc;

use eyre::{Result, WrapErr};
use serde_json::Value;

use gyre_engine::record::Source;
use gyre_text::CachedEncoder;
use gyre_text::label::{Part, Span, extend_spans};
use gyre_text::{ChatTemplate, Message, RenderOptions, TokenText};

/// One message of a conversation, with what its content is and where it came from.
#[derive(Clone, Debug)]
pub struct Turn {
    /// Identity (for caching rendered pieces): equal keys must mean equal turns.
    pub key: u64,
    /// The message as the chat template sees it.
    pub msg: Message,
    /// Span source of the message's content (`user`, `tool`, `summary`, `system`, `assistant`).
    pub source: Source,
    /// For an assistant turn that is a recorded response: the index of its request.
    pub response: Option<usize>,
    /// Images the provider saw in this message that the log shows only as `[image]` (the usage
    /// check allows for them).
    pub images: u32,
}

impl Turn {
    /// A turn whose key is derived from `identity` (any string unique to this turn).
    pub fn new(identity: &str, msg: Message, source: Source) -> Self {
        Self {
            key: hash_str(identity),
            msg,
            source,
            response: None,
            images: 0,
        }
    }
}

/// 64-bit hash of a string (turn identities, segment keys).
pub fn hash_str(s: &str) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// A tool call as offsets into an output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallRange {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// First output token.
    pub start: usize,
    /// Exclusive end.
    pub end: usize,
}

/// An assistant turn rendered and tokenised as the model would have generated it.
#[derive(Clone, Debug)]
pub struct Output {
    /// The rendered text (Qwen3: `<think>\n…\n</think>\n\n…<|im_end|>`).
    pub text: String,
    /// Its tokens.
    pub tokens: Vec<u32>,
    /// Tool calls as token offsets.
    pub tool_calls: Vec<CallRange>,
    /// Tool calls as byte ranges of `text`.
    pub call_bytes: Vec<(usize, usize)>,
}

/// A context built for one request.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// Every input token.
    pub tokens: Vec<u32>,
    /// Spans over `tokens`.
    pub spans: Vec<Span>,
}

struct Seg {
    tokens: Vec<u32>,
    spans: Vec<Span>,
}

/// Renders turns into token contexts and assistant messages into outputs.
pub struct Builder {
    enc: CachedEncoder,
    tmpl: ChatTemplate,
    gen_prompt: String,
    eos_tail: String,
    segs: HashMap<u64, Rc<Seg>>,
    harness_outputs: HashMap<u64, Rc<Output>>,
    /// Byte range of the tool definitions in a rendering that starts with a given first
    /// message, by (tools, first turn) hash.
    tool_ranges: HashMap<u64, Option<(usize, usize)>>,
}

impl Builder {
    /// A builder over a tokenizer and a chat template.
    pub fn new(tok: TokenText, tmpl: ChatTemplate) -> Result<Self> {
        let opts = RenderOptions::default();
        let gen_prompt = tmpl.generation_prompt(opts)?;
        let out = tmpl.render_assistant_output(&Message::new("assistant", "\u{1}"), opts)?;
        let eos_tail = out
            .rsplit_once('\u{1}')
            .map(|(_, t)| t.to_owned())
            .unwrap_or_default();
        Ok(Self {
            enc: CachedEncoder::new(tok)?,
            tmpl,
            gen_prompt,
            eos_tail,
            segs: HashMap::new(),
            harness_outputs: HashMap::new(),
            tool_ranges: HashMap::new(),
        })
    }

    /// Forgets every rendered piece: turn keys are unique within one session only, so a builder
    /// shared by several sessions forgets between them.
    pub fn forget(&mut self) {
        self.segs.clear();
        self.harness_outputs.clear();
        self.tool_ranges.clear();
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &TokenText {
        self.enc.tokenizer()
    }

    /// Renders `msg` as the template renders a generated assistant turn, tokenised, with its
    /// tool calls located.
    pub fn output(&mut self, msg: &Message) -> Result<Output> {
        let opts = RenderOptions::default();
        let text = self.tmpl.render_assistant_output(msg, opts)?;
        let call_bytes = self.call_bytes(msg, &text)?;
        let (tokens, starts) = self.enc.encode_with_starts(&text)?;
        let tool_calls = msg
            .tool_calls
            .iter()
            .zip(&call_bytes)
            .map(|(c, &(s, e))| CallRange {
                id: c.id.clone(),
                name: c.name.clone(),
                start: starts.partition_point(|&b| b < s),
                end: starts.partition_point(|&b| b < e),
            })
            .collect();
        Ok(Output {
            text,
            tokens,
            tool_calls,
            call_bytes,
        })
    }

    /// Byte ranges of each tool call in `text` (the rendering of `msg`): the template appends
    /// calls one after the other, so rendering the message with its first `i` calls shows where
    /// call `i` starts and ends.
    fn call_bytes(&self, msg: &Message, text: &str) -> Result<Vec<(usize, usize)>> {
        let n = msg.tool_calls.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let opts = RenderOptions::default();
        let mut cut = Vec::with_capacity(n + 1);
        for i in 0..=n {
            let partial = if i == n {
                text.to_owned()
            } else {
                let mut m = msg.clone();
                m.tool_calls.truncate(i);
                self.tmpl.render_assistant_output(&m, opts)?
            };
            let body = partial
                .strip_suffix(self.eos_tail.as_str())
                .unwrap_or(&partial);
            if !text.starts_with(body) {
                return Ok(search_calls(text, n));
            }
            cut.push(body.len());
        }
        Ok((0..n)
            .map(|i| {
                let (s, e) = (cut[i], cut[i + 1]);
                let skip = text[s..e].len() - text[s..e].trim_start_matches('\n').len();
                (s + skip, e)
            })
            .collect())
    }

    /// The output a harness-written assistant turn would render to (cached by turn key).
    fn harness_output(&mut self, turn: &Turn) -> Result<Rc<Output>> {
        if let Some(o) = self.harness_outputs.get(&turn.key) {
            return Ok(Rc::clone(o));
        }
        let o = Rc::new(self.output(&turn.msg)?);
        self.harness_outputs.insert(turn.key, Rc::clone(&o));
        Ok(o)
    }

    /// The context of a request whose conversation so far is `turns`, ending with the
    /// generation prompt; `tools` are the tool definitions the harness sent (rendered where the
    /// template puts them, labelled `system`). With `restore`, assistant turns that are
    /// recorded responses (their `response` index has an entry in `outputs`) are their recorded
    /// output tokens.
    pub fn context(
        &mut self,
        turns: &[&Turn],
        outputs: &[Option<Rc<Output>>],
        restore: bool,
        tools: &[Value],
    ) -> Result<Context> {
        if !restore {
            let msgs: Vec<Message> = turns.iter().map(|t| t.msg.clone()).collect();
            let text = render_or_prompt(&self.tmpl, &msgs, tools, &self.gen_prompt)?;
            let mut parts = self.parts(&text, turns, outputs)?;
            self.add_tools_part(&mut parts, &text, turns.first().copied(), tools)?;
            let (tokens, spans) = self.enc.encode_labelled(&text, &parts)?;
            return Ok(Context { tokens, spans });
        }
        let mut ctx = Context::default();
        let mut pending: Vec<&Turn> = Vec::new();
        let mut after: Option<&Turn> = None;
        for &turn in turns {
            let restored = turn
                .response
                .and_then(|r| outputs.get(r).and_then(|o| o.as_ref()));
            match restored {
                Some(out) => {
                    self.push_rendered(&mut ctx, &pending, after, outputs, tools)?;
                    pending.clear();
                    after = Some(turn);
                    let n = ctx.tokens.len();
                    ctx.tokens.extend_from_slice(&out.tokens);
                    extend_spans(
                        &mut ctx.spans,
                        n,
                        &[Span {
                            end: out.tokens.len(),
                            source: Source::Assistant,
                            call_id: None,
                        }],
                    );
                }
                None => pending.push(turn),
            }
        }
        self.push_rendered(&mut ctx, &pending, after, outputs, tools)?;
        Ok(ctx)
    }

    /// Labels the tool definitions in `text` (a rendering starting with `first`) `system`: where
    /// the rendering of the first message with `tools` differs from its rendering without them.
    fn add_tools_part(
        &mut self,
        parts: &mut Vec<Part>,
        text: &str,
        first: Option<&Turn>,
        tools: &[Value],
    ) -> Result<()> {
        if tools.is_empty() {
            return Ok(());
        }
        let mut h = DefaultHasher::new();
        serde_json::to_string(tools)
            .unwrap_or_default()
            .hash(&mut h);
        first.map(|t| t.key).hash(&mut h);
        let key = h.finish();
        let range = match self.tool_ranges.get(&key) {
            Some(r) => *r,
            None => {
                let msgs: Vec<Message> = first.map(|t| t.msg.clone()).into_iter().collect();
                let opts = RenderOptions::default();
                // A template may refuse the first message alone with tools (Llama 3 puts
                // them in the first user message, and raises without one): the tool text is
                // then left labelled as the turn it sits in.
                let with = self.tmpl.render(&msgs, tools, opts).ok();
                let without = if msgs.is_empty() {
                    Some(String::new())
                } else {
                    self.tmpl.render(&msgs, &[], opts).ok()
                };
                let r = with.zip(without).and_then(|(with, without)| {
                    let pre = common_prefix(&with, &without);
                    let room = with.len().min(without.len()) - pre;
                    let suf = common_suffix(&with[pre..], &without[pre..]).min(room);
                    (with.len() - suf > pre && text.starts_with(&with[..with.len() - suf]))
                        .then_some((pre, with.len() - suf))
                });
                self.tool_ranges.insert(key, r);
                r
            }
        };
        if let Some((start, end)) = range {
            let at = parts.partition_point(|p| p.end <= start);
            // Keep parts disjoint: the tools block sits between the system text and the rest.
            if parts.get(at).is_none_or(|p| p.start >= end) {
                parts.insert(
                    at,
                    Part {
                        start,
                        end,
                        source: Source::System,
                        call_id: None,
                    },
                );
            }
        }
        Ok(())
    }

    /// Renders `turns` as one segment (the conversation's start, or a continuation `after` a
    /// restored turn) ending with the generation prompt, and appends it.
    fn push_rendered(
        &mut self,
        ctx: &mut Context,
        turns: &[&Turn],
        after: Option<&Turn>,
        outputs: &[Option<Rc<Output>>],
        tools: &[Value],
    ) -> Result<()> {
        let first = after.is_none();
        let mut h = DefaultHasher::new();
        first.hash(&mut h);
        // A continuation is cut out of a rendering that holds the turn it follows.
        for t in after.into_iter().chain(turns.iter().copied()) {
            t.key.hash(&mut h);
        }
        if first && !tools.is_empty() {
            serde_json::to_string(tools)
                .unwrap_or_default()
                .hash(&mut h);
        }
        let key = h.finish();
        let seg = match self.segs.get(&key) {
            Some(s) => Rc::clone(s),
            None => {
                let msgs: Vec<Message> = turns.iter().map(|t| t.msg.clone()).collect();
                let text = match after {
                    None => render_or_prompt(&self.tmpl, &msgs, tools, &self.gen_prompt)?,
                    Some(turn) => self.tmpl.render_continuation(
                        &turn.msg,
                        &msgs,
                        RenderOptions::generation(true),
                    )?,
                };
                let mut parts = self.parts(&text, turns, outputs)?;
                if first {
                    self.add_tools_part(&mut parts, &text, turns.first().copied(), tools)?;
                }
                let (tokens, spans) = self.enc.encode_labelled(&text, &parts)?;
                let seg = Rc::new(Seg { tokens, spans });
                self.segs.insert(key, Rc::clone(&seg));
                seg
            }
        };
        let n = ctx.tokens.len();
        ctx.tokens.extend_from_slice(&seg.tokens);
        extend_spans(&mut ctx.spans, n, &seg.spans);
        Ok(())
    }

    /// Labelled byte ranges of `turns` in `text` (searched in order). An assistant turn is one
    /// `assistant` range from its first to its last rendered piece.
    fn parts(
        &mut self,
        text: &str,
        turns: &[&Turn],
        outputs: &[Option<Rc<Output>>],
    ) -> Result<Vec<Part>> {
        let mut parts = Vec::with_capacity(turns.len());
        let mut cursor = 0;
        for &turn in turns {
            if turn.msg.role != "assistant" {
                if turn.msg.content.is_empty() {
                    continue;
                }
                if let Some(i) = text[cursor..].find(turn.msg.content.as_str()) {
                    let start = cursor + i;
                    cursor = start + turn.msg.content.len();
                    parts.push(Part {
                        start,
                        end: cursor,
                        source: turn.source,
                        call_id: turn.msg.tool_call_id.clone(),
                    });
                }
                continue;
            }
            let out = match turn
                .response
                .and_then(|r| outputs.get(r).cloned().flatten())
            {
                Some(o) => o,
                None => self.harness_output(turn)?,
            };
            let mut pieces: Vec<&str> = Vec::new();
            if let Some(r) = turn.msg.reasoning_content.as_deref() {
                pieces.push(r.trim_matches('\n'));
            }
            pieces.push(turn.msg.content.trim_start_matches('\n'));
            for &(s, e) in &out.call_bytes {
                pieces.push(&out.text[s..e]);
            }
            let mut range: Option<(usize, usize)> = None;
            for p in pieces.into_iter().filter(|p| !p.is_empty()) {
                if let Some(i) = text[cursor..].find(p) {
                    let start = cursor + i;
                    cursor = start + p.len();
                    range = Some((range.map_or(start, |r| r.0), cursor));
                }
            }
            if let Some((start, end)) = range {
                parts.push(Part {
                    start,
                    end,
                    source: turn.source,
                    call_id: None,
                });
            }
        }
        Ok(parts)
    }

    /// Renders a whole conversation (with `tools`) with the generation prompt and labels it, as
    /// [`context`](Self::context) does without restoration.
    pub fn render_labelled(
        &mut self,
        turns: &[&Turn],
        tools: &[Value],
    ) -> Result<(Vec<u32>, Vec<Span>)> {
        let msgs: Vec<Message> = turns.iter().map(|t| t.msg.clone()).collect();
        let text = self
            .tmpl
            .render(&msgs, tools, RenderOptions::generation(true))
            .wrap_err("rendering the request's messages")?;
        let mut parts = self.parts(&text, turns, &[])?;
        self.add_tools_part(&mut parts, &text, turns.first().copied(), tools)?;
        self.enc.encode_labelled(&text, &parts)
    }
}

/// The conversation rendered with the generation prompt (the prompt alone when it is empty).
fn render_or_prompt(
    tmpl: &ChatTemplate,
    msgs: &[Message],
    tools: &[Value],
    gen_prompt: &str,
) -> Result<String> {
    if msgs.is_empty() && tools.is_empty() {
        return Ok(gen_prompt.to_owned());
    }
    tmpl.render(msgs, tools, RenderOptions::generation(true))
}

fn common_prefix(a: &str, b: &str) -> usize {
    let n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    (0..=n).rev().find(|&i| a.is_char_boundary(i)).unwrap_or(0)
}

fn common_suffix(a: &str, b: &str) -> usize {
    let n = a
        .bytes()
        .rev()
        .zip(b.bytes().rev())
        .take_while(|(x, y)| x == y)
        .count();
    (0..=n)
        .rev()
        .find(|&i| a.is_char_boundary(a.len() - i))
        .unwrap_or(0)
}

/// Fallback for templates that do not append calls one by one: the last `n` `<tool_call>` …
/// `</tool_call>` ranges of `text`.
fn search_calls(text: &str, n: usize) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(i) = text[at..].find("<tool_call>") {
        let s = at + i;
        let e = text[s..]
            .find("</tool_call>")
            .map_or(text.len(), |j| s + j + "</tool_call>".len());
        found.push((s, e));
        at = e;
    }
    let skip = found.len().saturating_sub(n);
    let mut v: Vec<_> = found.into_iter().skip(skip).collect();
    v.resize(n, (0, 0));
    v
}
