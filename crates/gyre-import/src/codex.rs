//! Codex CLI rollouts (`rollout-*.jsonl`) → one reconstructed execution
//! (docs/import.md#codex-cli).
//!
//! A rollout logs the Responses API conversation item by item (`response_item`: messages,
//! reasoning, function calls and their outputs), and one `event_msg` `token_count` with `info`
//! when a model response completes. One request per such event: its output is the model items
//! logged since the previous one, its context the conversation before the first of them (the
//! system prompt is `session_meta.base_instructions`). A `compacted` item replaces the history.

use std::path::{Path, PathBuf};

use eyre::Result;
use serde_json::{Map, Value, json};

use super::convo::Turn;
use super::error::diag;
use super::input::{Counter, Lines, file_name, line_values};
use super::mini_swe_agent::HIDDEN_REASONING;
use super::session::{Closure, Response, Session};
use super::sniff::{Fit, Probe};
use super::{About, Importer, Job};
use gyre_engine::record::{ClosureStatus, Source};
use gyre_text::{Message, ToolCall};

/// The Codex CLI importer.
pub struct Codex;

static ABOUT: About = About {
    name: "codex",
    what: "a Codex CLI rollout",
    summary: "A Codex CLI rollout (`rollout-*.jsonl`): one request per model response \
              (`token_count` event)",
    input: "ROLLOUT",
    input_help: "The rollout file (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`)",
    many: false,
    directories: false,
    reconstructed: true,
    help: "\
Examples:
  gyre import codex ~/.codex/sessions/2026/06/18/rollout-2026-06-18T07-23-13-019ed99c.jsonl --out s.jsonl
  gyre import codex rollout.jsonl --score 1 --out s.jsonl --force

The system prompt is the session's base instructions; the tool definitions Codex sent are not in
the rollout. A response whose reasoning is logged only encrypted (or as a summary) is not a
target (hidden reasoning). docs/import.md has the mapping.",
};

/// The items of the response being read, and where it started.
#[derive(Default)]
struct Open {
    /// The conversation before the response's first item.
    context: Vec<u32>,
    content: Vec<String>,
    summaries: Vec<String>,
    raw_reasoning: Vec<String>,
    encrypted: bool,
    calls: Vec<ToolCall>,
    /// Input items logged while the response was open (outputs of its calls): they follow it.
    deferred: Vec<Turn>,
    line: u64,
    t: Option<f64>,
    items: usize,
}

/// The reader's state over the rollout.
#[derive(Default)]
struct State {
    turns: Vec<Turn>,
    history: Vec<u32>,
    responses: Vec<Response>,
    open: Option<Open>,
    /// A `token_count` with no model items before it (a compaction call, when `compacted`
    /// follows): its usage, context, line and time.
    bare: Option<(Value, Vec<u32>, u64, Option<f64>)>,
    model: Option<String>,
    last_total: Option<Value>,
    hidden: u64,
    unplaced_counts: u64,
    compactions: u64,
    compactions_rebuilt: u64,
}

impl State {
    fn push_turn(&mut self, identity: String, msg: Message, source: Source) -> u32 {
        self.turns.push(Turn::new(&identity, msg, source));
        self.turns.len() as u32 - 1
    }

    /// An input item: into the history, or after the open response.
    fn input(&mut self, identity: String, msg: Message, source: Source, images: u32) {
        let mut t = Turn::new(&identity, msg, source);
        t.images = images;
        match &mut self.open {
            Some(o) => o.deferred.push(t),
            None => {
                self.turns.push(t);
                self.history.push(self.turns.len() as u32 - 1);
            }
        }
    }

    fn open_response(&mut self, line: u64, t: Option<f64>) -> &mut Open {
        let history = self.history.clone();
        self.open.get_or_insert_with(|| Open {
            context: history,
            line,
            t,
            ..Open::default()
        })
    }

    /// Closes the open response as a request with `usage`.
    fn close(&mut self, path: &Path, usage: &Value) {
        let Some(o) = self.open.take() else {
            return;
        };
        let reasoning_tokens = usage
            .get("reasoning_output_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let raw = !o.raw_reasoning.is_empty();
        let reasoning = if raw {
            Some(o.raw_reasoning.join("\n\n"))
        } else if o.summaries.is_empty() {
            None
        } else {
            Some(o.summaries.join("\n\n"))
        };
        let hidden = !raw && (o.encrypted || reasoning_tokens > 0);
        if hidden {
            self.hidden += 1;
        }
        let message = Message {
            role: "assistant".into(),
            content: o.content.join("\n\n"),
            reasoning_content: reasoning,
            tool_calls: o.calls,
            tool_call_id: None,
        };
        let r = self.responses.len();
        let mut turn = Turn::new(&format!("response {r}"), message.clone(), Source::Assistant);
        turn.response = Some(r);
        self.turns.push(turn);
        self.history.push(self.turns.len() as u32 - 1);
        for t in o.deferred {
            self.turns.push(t);
            self.history.push(self.turns.len() as u32 - 1);
        }
        let mut meta = Map::new();
        meta.insert(
            "source_line".into(),
            json!(format!("{}:{}", file_name(path), o.line)),
        );
        meta.insert("items".into(), json!(o.items));
        meta.insert("usage".into(), usage.clone());
        self.responses.push(Response {
            context: o.context,
            message,
            not_trainable: hidden.then(|| HIDDEN_REASONING.to_owned()),
            agent: "main".into(),
            summary: false,
            t: o.t,
            model: self.model.clone(),
            finish: None,
            meta,
            usage_input: usage.get("input_tokens").and_then(Value::as_u64),
            usage_output: usage.get("output_tokens").and_then(Value::as_u64),
            line: o.line,
        });
    }
}

impl Importer for Codex {
    type Item = Session;

    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn sniff(&self, probe: &Probe) -> Fit {
        let Some(o) = probe.first_object() else {
            return Fit::No;
        };
        let kind = o.get("type").and_then(Value::as_str);
        let rollout = o.contains_key("payload")
            && matches!(
                kind,
                Some("session_meta" | "response_item" | "event_msg" | "turn_context" | "compacted")
            );
        if rollout { Fit::Yes } else { Fit::No }
    }

    fn read(
        &self,
        inputs: &[PathBuf],
        job: &mut Job,
        emit: &mut dyn FnMut(&mut Job, Session) -> Result<()>,
    ) -> Result<()> {
        for path in inputs {
            let session = read_rollout(path, job)?;
            emit(job, session)?;
        }
        Ok(())
    }

    fn records(&self, item: Session, job: &mut Job) -> Result<()> {
        super::session::records(item, job)
    }
}

/// The text of a message's `content` parts (`input_text`, `output_text`; an image as
/// `[image]`), and how many images.
fn parts_text(content: &Value) -> (String, u32) {
    match content {
        Value::String(s) => (s.clone(), 0),
        Value::Array(parts) => {
            let mut images = 0;
            let text: Vec<String> = parts
                .iter()
                .map(|p| {
                    let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
                    match p.get("text").and_then(Value::as_str) {
                        Some(t) => t.to_owned(),
                        None if kind.contains("image") => {
                            images += 1;
                            "[image]".into()
                        }
                        None => format!("[{kind}]"),
                    }
                })
                .collect();
            (text.join("\n"), images)
        }
        _ => (String::new(), 0),
    }
}

/// A tool output as the text the model saw.
fn output_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => match o.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => parts_text(other).0,
            None => v.to_string(),
        },
        Value::Array(_) => parts_text(v).0,
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Arguments as the template renders them: a JSON-object string parsed, else as logged.
fn arguments(v: Option<&Value>) -> Value {
    match v {
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(o @ Value::Object(_)) => o,
            _ => Value::String(s.clone()),
        },
        Some(other) => other.clone(),
        None => Value::Object(Map::new()),
    }
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Reads a rollout into its [`Session`].
fn read_rollout(path: &Path, job: &mut Job) -> Result<Session> {
    let mut lines = Lines::open(path, &Counter::default())?;
    let mut st = State::default();
    let mut id: Option<String> = None;
    let mut meta = Map::new();
    meta.insert("source".into(), json!("codex"));
    meta.insert("reconstructed".into(), Value::Bool(true));
    let (mut t0, mut t1): (Option<f64>, Option<f64>) = (None, None);
    let mut last_event: Option<String> = None;
    while let Some(next) = lines.next_line() {
        let (n, text) = match next {
            Ok(x) => x,
            Err(d) => {
                job.log.problem(d);
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        let (values, err) = line_values(text);
        if let Some(e) = err {
            job.log.problem(diag(path, n, e, None));
            continue;
        }
        for line in values {
            let t = str_at(&line, "timestamp").and_then(super::parse_timestamp);
            if let Some(t) = t {
                t0 = Some(t0.map_or(t, |a| a.min(t)));
                t1 = Some(t1.map_or(t, |a| a.max(t)));
            }
            let kind = str_at(&line, "type").unwrap_or("");
            let p = line.get("payload").cloned().unwrap_or(Value::Null);
            if kind != "compacted" && kind != "event_msg" {
                if let Some((_, _, l, _)) = st.bare.take() {
                    st.unplaced_counts += 1;
                    job.log.warn_grouped(
                        "codex-bare-count",
                        format!(
                            "{}:{l}: a token_count with no model items before it is not a \
                             request (the response's items are not in the rollout)",
                            file_name(path)
                        ),
                    );
                }
            }
            match kind {
                "session_meta" => {
                    id = str_at(&p, "id").map(str::to_owned);
                    for k in ["cwd", "cli_version", "originator", "model_provider"] {
                        if let Some(v) = p.get(k) {
                            meta.insert(k.into(), v.clone());
                        }
                    }
                    let instructions = p
                        .get("base_instructions")
                        .map(|b| str_at(b, "text").map_or_else(|| output_text(b), str::to_owned))
                        .or_else(|| str_at(&p, "instructions").map(str::to_owned));
                    if let Some(text) = instructions.filter(|s| !s.is_empty()) {
                        if st.history.is_empty() {
                            let k = st.push_turn(
                                "system".into(),
                                Message::new("system", text),
                                Source::System,
                            );
                            st.history.push(k);
                        }
                    }
                }
                "turn_context" => {
                    if let Some(m) = str_at(&p, "model") {
                        st.model = Some(m.to_owned());
                    }
                }
                "response_item" => {
                    let item = str_at(&p, "type").unwrap_or("");
                    let ident = format!("line {n}");
                    match item {
                        "message" => {
                            let role = str_at(&p, "role").unwrap_or("");
                            let (text, images) =
                                parts_text(p.get("content").unwrap_or(&Value::Null));
                            match role {
                                "assistant" => {
                                    let o = st.open_response(n, t);
                                    o.items += 1;
                                    o.content.push(text);
                                }
                                "developer" | "system" => st.input(
                                    ident,
                                    Message::new("system", text),
                                    Source::System,
                                    images,
                                ),
                                _ => st.input(
                                    ident,
                                    Message::new("user", text),
                                    Source::User,
                                    images,
                                ),
                            }
                        }
                        "reasoning" => {
                            let o = st.open_response(n, t);
                            o.items += 1;
                            for s in p
                                .get("summary")
                                .and_then(Value::as_array)
                                .into_iter()
                                .flatten()
                            {
                                if let Some(text) = str_at(s, "text") {
                                    o.summaries.push(text.to_owned());
                                }
                            }
                            for c in p
                                .get("content")
                                .and_then(Value::as_array)
                                .into_iter()
                                .flatten()
                            {
                                if let Some(text) = str_at(c, "text") {
                                    o.raw_reasoning.push(text.to_owned());
                                }
                            }
                            if str_at(&p, "encrypted_content").is_some_and(|e| !e.is_empty()) {
                                o.encrypted = true;
                            }
                        }
                        "function_call" | "custom_tool_call" | "local_shell_call"
                        | "tool_search_call" | "web_search_call" => {
                            let name = str_at(&p, "name")
                                .map(str::to_owned)
                                .unwrap_or_else(|| item.trim_end_matches("_call").to_owned());
                            let args = match item {
                                "function_call" => arguments(p.get("arguments")),
                                "custom_tool_call" => {
                                    p.get("input").cloned().unwrap_or(Value::Null)
                                }
                                "local_shell_call" | "web_search_call" => {
                                    p.get("action").cloned().unwrap_or(Value::Null)
                                }
                                _ => arguments(p.get("arguments")),
                            };
                            let call_id = str_at(&p, "call_id")
                                .or_else(|| str_at(&p, "id"))
                                .unwrap_or("")
                                .to_owned();
                            let o = st.open_response(n, t);
                            o.items += 1;
                            o.calls.push(ToolCall {
                                id: call_id,
                                name,
                                arguments: args,
                            });
                        }
                        "function_call_output"
                        | "custom_tool_call_output"
                        | "tool_search_output"
                        | "local_shell_call_output" => {
                            let call_id = str_at(&p, "call_id").unwrap_or("").to_owned();
                            let text = match item {
                                "tool_search_output" => {
                                    p.get("tools").map(Value::to_string).unwrap_or_default()
                                }
                                _ => output_text(p.get("output").unwrap_or(&Value::Null)),
                            };
                            st.input(ident, Message::tool(&call_id, text), Source::Tool, 0);
                        }
                        other => job.log.warn_grouped(
                            "codex-unknown-item",
                            format!(
                                "{}:{n}: response items of type `{}` are not reconstructed",
                                file_name(path),
                                gyre_text::sanitize(other)
                            ),
                        ),
                    }
                }
                "event_msg" => {
                    let ev = str_at(&p, "type").unwrap_or("");
                    if ev == "token_count" {
                        let Some(info) = p.get("info").filter(|i| !i.is_null()) else {
                            continue;
                        };
                        // The same totals again: the event repeated, not a new response.
                        let total = info.get("total_token_usage").cloned();
                        if total.is_some() && total == st.last_total {
                            continue;
                        }
                        st.last_total = total;
                        let usage = info.get("last_token_usage").cloned().unwrap_or(Value::Null);
                        if st.open.is_some() {
                            st.close(path, &usage);
                        } else {
                            st.bare = Some((usage, st.history.clone(), n, t));
                        }
                    } else if !ev.is_empty() {
                        last_event = Some(ev.to_owned());
                    }
                }
                "compacted" => {
                    st.compactions += 1;
                    let summary = str_at(&p, "message").unwrap_or("").to_owned();
                    // A response still open has no usage of its own: close it first.
                    if st.open.is_some() {
                        st.close(path, &Value::Null);
                    }
                    if let Some((usage, context, l, at)) = st.bare.take() {
                        let message = Message::new("assistant", summary.clone());
                        let mut meta = Map::new();
                        meta.insert(
                            "source_line".into(),
                            json!(format!("{}:{l}", file_name(path))),
                        );
                        meta.insert("compaction".into(), Value::Bool(true));
                        meta.insert("usage".into(), usage.clone());
                        st.responses.push(Response {
                            context,
                            message,
                            not_trainable: None,
                            agent: "main".into(),
                            summary: true,
                            t: at,
                            model: st.model.clone(),
                            finish: None,
                            meta,
                            usage_input: usage.get("input_tokens").and_then(Value::as_u64),
                            usage_output: usage.get("output_tokens").and_then(Value::as_u64),
                            line: l,
                        });
                    }
                    compact(&mut st, &p, &summary, n, path, job);
                }
                _ => {}
            }
        }
    }
    if let Some((items, line)) = st.open.as_ref().map(|o| (o.items, o.line)) {
        st.close(path, &Value::Null);
        job.log.warn(format!(
            "{}:{line}: the last response ({items} items) has no token_count after it (the \
             rollout ends mid-response); it is a request without usage",
            file_name(path)
        ));
    }
    job.log.check()?;
    let execution = id.unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "rollout".into())
    });
    if st.hidden > 0 {
        job.log.warn(format!(
            "{execution}: {} of {} responses are not targets: Codex logged their reasoning only \
             encrypted or as a summary (hidden reasoning)",
            st.hidden,
            st.responses.len()
        ));
    }
    if st.turns.first().is_none_or(|t| t.source != Source::System) {
        meta.insert("system_prompt".into(), json!("not in the rollout"));
    }
    meta.insert(
        "tools".into(),
        json!("not in the rollout (Codex does not log the tool definitions it sends)"),
    );
    if st.compactions > 0 {
        meta.insert("compactions".into(), json!(st.compactions));
    }
    let task = st
        .turns
        .iter()
        .filter(|t| t.source == Source::User)
        .map(|t| t.msg.content.clone())
        .find(|c| !c.starts_with("# AGENTS.md") && !c.starts_with("<environment_context>"))
        .map(|c| c.chars().take(500).collect());
    let mut cmeta = Map::new();
    if let Some(e) = last_event {
        cmeta.insert("last_event".into(), json!(e));
    }
    let status = match cmeta.get("last_event").and_then(Value::as_str) {
        Some("turn_aborted") => ClosureStatus::Error,
        _ => ClosureStatus::Completed,
    };
    Ok(Session {
        execution,
        file: path.to_path_buf(),
        line: 0,
        t: t0.unwrap_or(0.0),
        task,
        meta,
        turns: st.turns,
        tools: Vec::new(),
        responses: st.responses,
        closure: Closure {
            t: t1.unwrap_or(0.0),
            status,
            artifact: json!("session"),
            version: Some(json!(1)),
            meta: cmeta,
        },
        group: None,
        scored: true,
    })
}

/// Replaces the history after a `compacted` item: with its `replacement_history` when logged,
/// else with the system prompt, the earlier user messages and the summary (Codex's own rebuild;
/// its wording around the summary is not in the rollout, and a warning says so).
fn compact(st: &mut State, p: &Value, summary: &str, n: u64, path: &Path, job: &mut Job) {
    let system: Vec<u32> = st
        .history
        .first()
        .copied()
        .filter(|&k| st.turns[k as usize].source == Source::System)
        .into_iter()
        .collect();
    if let Some(items) = p.get("replacement_history").and_then(Value::as_array) {
        let mut history = system;
        for (i, item) in items.iter().enumerate() {
            let ident = format!("line {n} replacement {i}");
            let (msg, source) = match str_at(item, "type") {
                Some("message") => {
                    let (text, _) = parts_text(item.get("content").unwrap_or(&Value::Null));
                    let source = if !summary.is_empty() && text.contains(summary) {
                        Source::Summary
                    } else {
                        Source::User
                    };
                    match str_at(item, "role") {
                        Some("assistant") => (Message::new("assistant", text), Source::Assistant),
                        Some("developer" | "system") => {
                            (Message::new("system", text), Source::System)
                        }
                        _ => (Message::new("user", text), source),
                    }
                }
                // Encrypted compaction state (remote compaction) holds no text.
                Some(other) => {
                    job.log.warn_grouped(
                        "codex-replacement-item",
                        format!(
                            "{}:{n}: a `{}` item of the compacted history holds no text and \
                             stands as `[{0}]`",
                            file_name(path),
                            gyre_text::sanitize(other)
                        ),
                    );
                    (Message::new("user", format!("[{other}]")), Source::User)
                }
                None => continue,
            };
            let k = st.push_turn(ident, msg, source);
            history.push(k);
        }
        st.history = history;
        return;
    }
    st.compactions_rebuilt += 1;
    job.log.warn_grouped(
        "codex-compaction-rebuilt",
        format!(
            "{}:{n}: the compacted item has no replacement_history: the history after it is the \
             system prompt, the earlier user messages and the summary (Codex's wording around \
             the summary is not in the rollout)",
            file_name(path)
        ),
    );
    let mut history = system;
    history.extend(
        st.history
            .iter()
            .copied()
            .filter(|&k| st.turns[k as usize].source == Source::User),
    );
    let k = st.push_turn(
        format!("line {n} summary"),
        Message::new("user", summary.to_owned()),
        Source::Summary,
    );
    history.push(k);
    st.history = history;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_outputs_and_arguments() {
        assert_eq!(output_text(&json!("ok")), "ok");
        assert_eq!(output_text(&json!({"content": "x", "success": true})), "x");
        assert_eq!(
            output_text(&json!([{"type": "input_text", "text": "a"}, {"type": "input_image"}])),
            "a\n[image]"
        );
        assert_eq!(
            arguments(Some(&json!("{\"cmd\": \"ls\"}"))),
            json!({"cmd": "ls"})
        );
        assert_eq!(
            arguments(Some(&json!("*** Begin Patch"))),
            json!("*** Begin Patch")
        );
    }
}
