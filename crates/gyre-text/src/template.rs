//! HuggingFace chat templates rendered with `minijinja`, matching `apply_chat_template`.
//!
//! Three things make the output byte-identical to transformers' Jinja environment: blocks are
//! trimmed the same way (`trim_blocks`, `lstrip_blocks`), Python string methods come from
//! `minijinja-contrib`'s pycompat, and `tojson` is Python's `json.dumps(x, ensure_ascii=False)`
//! (insertion order, `", "` and `": "` separators) rather than minijinja's sorted compact JSON.

use std::borrow::Cow;
use std::path::Path;

use eyre::{Result, WrapErr, bail, eyre};
use minijinja::value::Kwargs;
use minijinja::value::ValueKind;
use minijinja::{Environment, Error, ErrorKind, Value, context};
use serde::{Deserialize, Serialize};

use super::tokenizer::TokenText;

/// The Qwen3 `tokenizer_config.json` (holds its chat template).
const QWEN3_CONFIG: &str = include_str!("../../../assets/tokenizers/qwen3/tokenizer_config.json");

/// A chat template that does not compile, or that refuses to render a conversation (its own
/// `raise_exception`, or an operation its Jinja cannot do on these messages): the model's
/// files or the conversation are at fault, not gyre, so commands print it as one plain line.
#[derive(Debug)]
pub struct TemplateError(pub String);

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TemplateError {}

/// One chat message, serialised the way HuggingFace templates expect.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The message text (for an assistant turn: the visible answer, without thinking).
    pub content: String,
    /// An assistant turn's thinking (rendered inside `<think>` by Qwen3-style templates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// An assistant turn's tool calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a `tool` message: the id of the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A message with `role` and `content` only.
    pub fn new(role: &str, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
            reasoning_content: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// A `tool` message answering call `call_id`.
    pub fn tool(call_id: &str, content: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            ..Self::new("tool", content)
        }
    }
}

/// A tool call of an assistant message, serialised in OpenAI form
/// (`{"id", "type": "function", "function": {"name", "arguments"}}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(into = "WireToolCall", from = "WireToolCall")]
pub struct ToolCall {
    /// Call id (not rendered by Qwen3's template, but kept for harness bookkeeping).
    pub id: String,
    /// Function name.
    pub name: String,
    /// Arguments: a JSON object (rendered with `tojson`), or a string rendered verbatim.
    pub arguments: serde_json::Value,
}

#[derive(Clone, Serialize, Deserialize)]
struct WireToolCall {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    function: WireFunction,
}

#[derive(Clone, Serialize, Deserialize)]
struct WireFunction {
    name: String,
    arguments: serde_json::Value,
}

impl From<ToolCall> for WireToolCall {
    fn from(c: ToolCall) -> Self {
        Self {
            id: c.id,
            kind: "function".into(),
            function: WireFunction {
                name: c.name,
                arguments: c.arguments,
            },
        }
    }
}

impl From<WireToolCall> for ToolCall {
    fn from(w: WireToolCall) -> Self {
        Self {
            id: w.id,
            name: w.function.name,
            arguments: w.function.arguments,
        }
    }
}

/// Template switches besides the messages and tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenderOptions {
    /// Append the assistant generation prompt (`<|im_start|>assistant\n`).
    pub add_generation_prompt: bool,
    /// Passed as `enable_thinking` when set (Qwen3: `false` pre-fills an empty `<think>`).
    pub enable_thinking: Option<bool>,
}

impl RenderOptions {
    /// Options with the generation prompt on or off and nothing else.
    pub fn generation(add_generation_prompt: bool) -> Self {
        Self {
            add_generation_prompt,
            enable_thinking: None,
        }
    }
}

/// A compiled chat template plus the special-token strings it may reference.
pub struct ChatTemplate {
    env: Environment<'static>,
    /// The Jinja source (which family's syntax it writes picks the tool parser).
    source: String,
    /// The template concatenates tool-call arguments as text (DeepSeek V3.1) instead of
    /// writing a mapping with `tojson`: arguments are passed as JSON strings.
    string_arguments: bool,
    bos_token: Option<String>,
    eos_token: Option<String>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("eos_token", &self.eos_token)
            .finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// The bundled Qwen3 template.
    pub fn qwen3() -> Result<Self> {
        Self::from_config_json(QWEN3_CONFIG)
    }

    /// The template's Jinja source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The end-of-sequence token text from the config (Qwen3: `<|im_end|>`), if any.
    pub fn eos_token(&self) -> Option<&str> {
        self.eos_token.as_deref()
    }

    /// From a `tokenizer_config.json` file.
    pub fn from_config_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .wrap_err_with(|| format!("reading {}", path.display()))?;
        Self::from_config_json(&text).wrap_err_with(|| format!("in {}", path.display()))
    }

    /// From the text of a `tokenizer_config.json`: its `chat_template` (a string, or a list of
    /// `{name, template}` of which `default` is used) and its `bos_token` / `eos_token`.
    pub fn from_config_json(config: &str) -> Result<Self> {
        let v: serde_json::Value =
            serde_json::from_str(config).wrap_err("tokenizer_config.json is not JSON")?;
        let Some(template) = config_template(&v)? else {
            bail!("tokenizer_config.json has no chat_template");
        };
        Self::from_source(template, Some(&v))
    }

    /// From template source (a `chat_template.jinja`), with the `bos_token` / `eos_token` of
    /// `config`, the model's parsed `tokenizer_config.json`, when there is one.
    pub fn from_source(source: String, config: Option<&serde_json::Value>) -> Result<Self> {
        let (bos, eos) = config.map(special_tokens).unwrap_or_default();
        Self::new(source, bos, eos)
    }

    /// The bundled Qwen3 special tokens around another template's source (`--chat-template`
    /// with the bundled tokenizer, as Qwen3-Coder runs).
    pub fn with_qwen3_tokens(source: String) -> Result<Self> {
        let config = serde_json::from_str(QWEN3_CONFIG).wrap_err("bundled qwen3 config")?;
        Self::from_source(source, Some(&config))
    }

    /// From template source and the special-token strings it may use.
    pub fn new(
        source: String,
        bos_token: Option<String>,
        eos_token: Option<String>,
    ) -> Result<Self> {
        let mut env = Environment::new();
        // transformers renders with trim_blocks and lstrip_blocks on.
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        // Python's Jinja finds `none` not iterable (minijinja iterates it as empty): templates
        // guard `tools | length` with `tools is iterable`, and transformers passes `tools=None`.
        env.add_test("iterable", |v: &Value| !v.is_none() && v.try_iter().is_ok());
        env.add_filter("tojson", tojson);
        env.add_filter("string", py_str);
        env.add_function("raise_exception", |msg: String| -> Result<Value, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, msg))
        });
        // transformers' one extra global: the current local date and time, formatted.
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned("chat", source.clone())
            .map_err(|e| TemplateError(format!("chat template does not compile: {e}")))?;
        Ok(Self {
            env,
            source,
            bos_token,
            eos_token,
            string_arguments: false,
        }
        .with_argument_form())
    }

    /// Finds which form of tool-call arguments the template takes: a mapping (what vLLM and
    /// transformers pass), else a JSON string when only that renders.
    fn with_argument_form(mut self) -> Self {
        let probe = |arguments: serde_json::Value| {
            let mut call = Message::new("assistant", "");
            call.tool_calls.push(ToolCall {
                id: "call_0".into(),
                name: "f".into(),
                arguments,
            });
            [Message::new("user", "x"), call]
        };
        let opts = RenderOptions::default();
        let args = serde_json::json!({"a": 1});
        if self.render(&probe(args.clone()), &[], opts).is_err()
            && self
                .render(&probe(python_json(&args).into()), &[], opts)
                .is_ok()
        {
            self.string_arguments = true;
        }
        self
    }

    /// Renders `messages` (with `tools` as JSON schemas; empty = none), like transformers'
    /// `apply_chat_template(messages, tools=tools or None, tokenize=False, ...)`.
    pub fn render(
        &self,
        messages: &[Message],
        tools: &[serde_json::Value],
        opts: RenderOptions,
    ) -> Result<String> {
        let tmpl = self.env.get_template("chat").map_err(|e| eyre!("{e:#}"))?;
        let tools = (!tools.is_empty()).then_some(tools);
        let messages = if self.string_arguments {
            Cow::Owned(messages.iter().map(with_string_arguments).collect())
        } else {
            Cow::Borrowed(messages)
        };
        let ctx = context! {
            messages => Value::from_serialize(&*messages),
            tools => Value::from_serialize(tools),
            add_generation_prompt => opts.add_generation_prompt,
            bos_token => self.bos_token.as_deref(),
            eos_token => self.eos_token.as_deref(),
        };
        let ctx = match opts.enable_thinking {
            Some(on) => context! { enable_thinking => on, ..ctx },
            None => ctx,
        };
        tmpl.render(ctx)
            .map_err(|e| TemplateError(format!("rendering the chat template: {e}")).into())
    }

    /// [`render`](Self::render), then tokenised with `tok` (special tokens recognised).
    pub fn render_tokens(
        &self,
        tok: &TokenText,
        messages: &[Message],
        tools: &[serde_json::Value],
        opts: RenderOptions,
    ) -> Result<Vec<u32>> {
        tok.encode(&self.render(messages, tools, opts)?)
    }

    /// The text a model generates for the assistant turn `msg`: everything the template writes
    /// for it after the generation prompt, up to and including the end-of-turn token (Qwen3:
    /// `<think>\n…\n</think>\n\ntext\n<tool_call>\n{…}\n</tool_call><|im_end|>`).
    pub fn render_assistant_output(&self, msg: &Message, opts: RenderOptions) -> Result<String> {
        let user = Message::new("user", "x");
        let prompt = self.render(
            std::slice::from_ref(&user),
            &[],
            RenderOptions {
                add_generation_prompt: true,
                ..opts
            },
        )?;
        let full = self.render(
            &[user, msg.clone()],
            &[],
            RenderOptions {
                add_generation_prompt: false,
                ..opts
            },
        )?;
        let Some(rest) = full.strip_prefix(&prompt) else {
            bail!(
                "this chat template does not render an assistant turn after its generation prompt"
            );
        };
        Ok(
            match self
                .eos_token
                .as_deref()
                .and_then(|e| rest.rfind(e).map(|i| i + e.len()))
            {
                Some(end) => rest[..end].to_owned(),
                None => rest.to_owned(),
            },
        )
    }

    /// The generation prompt alone (Qwen3: `<|im_start|>assistant\n`), as the template appends
    /// it after the last message.
    pub fn generation_prompt(&self, opts: RenderOptions) -> Result<String> {
        let user = [Message::new("user", "x")];
        let with = self.render(
            &user,
            &[],
            RenderOptions {
                add_generation_prompt: true,
                ..opts
            },
        )?;
        let without = self.render(
            &user,
            &[],
            RenderOptions {
                add_generation_prompt: false,
                ..opts
            },
        )?;
        with.strip_prefix(&without)
            .map(str::to_owned)
            .ok_or_else(|| eyre!("this chat template's generation prompt is not a plain suffix"))
    }

    /// The text a harness's next turns add after the generated assistant turn `turn`, whose
    /// sampled tokens are already in the context: `messages` (tool results, user turns…) as the
    /// template writes them after `turn` in a whole conversation, then the generation prompt
    /// if asked for.
    ///
    /// Templates differ in what surrounds a turn (gpt-oss and Llama 3 open every rendering with
    /// a system block, DeepSeek V3.1 writes tool results straight after the end-of-sentence
    /// token), so the continuation is cut out of a whole rendering: `[user, turn, messages…]`
    /// after as many turn ends ([`TURN_ENDS`], the template's eos) as `[user, turn]` holds. A
    /// template that writes no turn end (GLM) is cut where the two renderings part. `turn` is
    /// rendered without its reasoning, which templates may drop or refuse next to content.
    pub fn render_continuation(
        &self,
        turn: &Message,
        messages: &[Message],
        opts: RenderOptions,
    ) -> Result<String> {
        let mut turn = turn.clone();
        turn.reasoning_content = None;
        let mut convo = vec![Message::new("user", "x"), turn];
        let base = self.render(
            &convo,
            &[],
            RenderOptions {
                add_generation_prompt: false,
                ..opts
            },
        )?;
        convo.extend_from_slice(messages);
        let whole = self.render(&convo, &[], opts)?;
        let ends: Vec<&str> = TURN_ENDS
            .iter()
            .copied()
            .chain(self.eos_token.as_deref())
            .collect();
        let n = turn_ends(&base, &ends).count();
        let cut = if n == 0 {
            common_prefix_len(&base, &whole)
        } else {
            turn_ends(&whole, &ends).nth(n - 1).ok_or_else(|| {
                eyre!(
                    "this chat template renders the turn before the new messages differently                      once they follow, so the conversation cannot be continued after it"
                )
            })?
        };
        Ok(whole[cut..].to_owned())
    }
}

/// `msg` with every tool call's arguments a JSON string (as Python's `json.dumps` writes it).
fn with_string_arguments(msg: &Message) -> Message {
    let mut msg = msg.clone();
    for c in &mut msg.tool_calls {
        if !c.arguments.is_string() {
            c.arguments = python_json(&c.arguments).into();
        }
    }
    msg
}

/// Texts that end a turn in the families gyre knows (Qwen, Llama 3, gpt-oss, DeepSeek,
/// MiniMax): where a continuation starts after a generated turn.
pub const TURN_ENDS: &[&str] = &[
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end|>",
    "<|call|>",
    "<|return|>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// The byte offsets just after each turn end in `text`, left to right.
fn turn_ends<'a>(text: &'a str, ends: &'a [&str]) -> impl Iterator<Item = usize> + 'a {
    let mut at = 0;
    std::iter::from_fn(move || {
        let (i, len) = ends
            .iter()
            .filter_map(|e| text[at..].find(e).map(|i| (at + i, e.len())))
            .min()?;
        at = i + len;
        Some(at)
    })
}

/// Length in bytes of the longest common prefix of `a` and `b`, at a char boundary.
fn common_prefix_len(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !a.is_char_boundary(n) {
        n -= 1;
    }
    n
}

/// The Jinja source a config-style JSON object (`tokenizer_config.json`, `chat_template.json`)
/// holds under `chat_template`: a string, or a list of `{name, template}` of which `default` is
/// used; `None` when it has no `chat_template`. A list with a `tool_use` template is refused:
/// transformers renders requests with tools through it and the others through `default`, and
/// gyre renders every request with one template (docs/decisions.md).
pub fn config_template(config: &serde_json::Value) -> Result<Option<String>> {
    let list = match config.get("chat_template") {
        Some(serde_json::Value::String(s)) => return Ok(Some(s.clone())),
        Some(serde_json::Value::Array(list)) => list,
        _ => return Ok(None),
    };
    let named = |name: &str| {
        list.iter()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some(name))
            .and_then(|t| t.get("template")?.as_str())
    };
    let names: Vec<&str> = list
        .iter()
        .filter_map(|t| t.get("name")?.as_str())
        .collect();
    let names = names.join(", ");
    match (named("default"), named("tool_use")) {
        (Some(_), Some(_)) => bail!(
            "chat_template is a list of named templates ({names}) and gyre renders one template \
             for every request, not tool_use for those with tools as transformers does: save \
             the one to use as a .jinja file and pass --chat-template FILE"
        ),
        (Some(source), None) => Ok(Some(source.to_owned())),
        (None, _) => bail!(
            "chat_template is a list of named templates ({names}) without \"default\": save the \
             one to use as a .jinja file and pass --chat-template FILE"
        ),
    }
}

/// A `tokenizer_config.json`'s `bos_token` and `eos_token`: a string, or an `AddedToken`
/// object's `content`.
fn special_tokens(config: &serde_json::Value) -> (Option<String>, Option<String>) {
    let token = |key: &str| match config.get(key) {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(serde_json::Value::Object(o)) => {
            o.get("content").and_then(|c| c.as_str()).map(str::to_owned)
        }
        _ => None,
    };
    (token("bos_token"), token("eos_token"))
}

/// `strftime_now(format)` as transformers defines it for templates (Llama 3.x writes
/// `Today Date: {{ strftime_now("%d %b %Y") }}`): the local time in C `strftime` notation.
fn strftime_now(format: String) -> Result<Value, Error> {
    use std::fmt::Write as _;
    let mut out = String::new();
    write!(out, "{}", chrono::Local::now().format(&format)).map_err(|_| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("strftime_now: {format:?} is not a valid strftime format"),
        )
    })?;
    Ok(Value::from(out))
}

/// Python's `str(value)`, which Jinja's `string` filter is: a list or mapping is written as
/// Python's repr (`['a', True, None]`, Qwen3-Coder's `<required>` and non-string tool
/// arguments), not minijinja's JSON-like `["a", true, none]`.
fn py_str(value: &Value) -> String {
    match value.kind() {
        ValueKind::String => value.as_str().unwrap_or_default().to_owned(),
        ValueKind::Undefined => String::new(),
        _ => {
            let mut out = String::new();
            py_repr(value, &mut out);
            out
        }
    }
}

/// Python's `repr(value)` for the JSON-shaped values templates receive.
fn py_repr(value: &Value, out: &mut String) {
    match value.kind() {
        ValueKind::None | ValueKind::Undefined => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::String => py_repr_str(value.as_str().unwrap_or_default(), out),
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            for (i, item) in value.try_iter().into_iter().flatten().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_repr(&item, out);
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            for (i, key) in value.try_iter().into_iter().flatten().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_repr(&key, out);
                out.push_str(": ");
                py_repr(&value.get_item(&key).unwrap_or_default(), out);
            }
            out.push('}');
        }
        _ => out.push_str(&value.to_string()),
    }
}

/// A string as Python's `repr` quotes it: single quotes unless it holds `'` and no `"`.
fn py_repr_str(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                use std::fmt::Write as _;
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// Python's `json.dumps(value, ensure_ascii=False, indent=indent)`.
fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    if kwargs.get::<Option<bool>>("ensure_ascii")? == Some(true) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "tojson(ensure_ascii=True) is not supported",
        ));
    }
    kwargs.assert_all_used()?;
    let mut out = Vec::new();
    let res = match indent {
        Some(n) => {
            let pad = vec![b' '; n];
            let fmt = serde_json::ser::PrettyFormatter::with_indent(&pad);
            value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, fmt))
        }
        None => value.serialize(&mut serde_json::Serializer::with_formatter(
            &mut out,
            PyFormatter,
        )),
    };
    res.map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    let text = String::from_utf8(out)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    Ok(Value::from_safe_string(text))
}

/// `value` as Python's `json.dumps(value, ensure_ascii=False)` writes it: what a template's
/// `tojson` puts in the prompt (used to find tool schemas in rendered text).
pub fn python_json(value: &serde_json::Value) -> String {
    let mut out = Vec::new();
    // Writing a JSON value into memory cannot fail.
    serde::Serialize::serialize(
        value,
        &mut serde_json::Serializer::with_formatter(&mut out, PyFormatter),
    )
    .expect("a JSON value serialises into memory");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// `json.dumps` default separators: `", "` between items, `": "` after keys.
struct PyFormatter;

impl serde_json::ser::Formatter for PyFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}
