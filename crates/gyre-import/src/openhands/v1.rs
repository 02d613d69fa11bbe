//! OpenHands V1 (agent-sdk) events → the same [`Item`]s as the V0 event stream.
//!
//! A V1 event names its class in `kind` (`SystemPromptEvent`, `MessageEvent`, `ActionEvent`,
//! `ObservationEvent`, …). The model saw what each event's `to_llm_message` gives: the system
//! prompt (and its dynamic context) with the tools, user messages with their extended content,
//! one assistant message per `llm_response_id` (the parallel actions of one response share it),
//! and one tool message per observation. docs/import.md#openhands-v1 has the mapping.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::convo::Turn;
use crate::input::{file_name, typed};
use crate::openai::{Content, Function, WireCall, tool_calls};
use crate::session::Response;
use crate::timestamp::parse_timestamp;
use gyre_engine::record::Source;
use gyre_text::{Message, ToolCall};

use super::conversation::Classified;
use super::events::{Item, StateExtras};
use super::streams::Pos;

/// Why a response whose reasoning the log does not hold is not a target.
pub(super) const HIDDEN_THINKING: &str = "hidden thinking: the log holds a signature or encrypted \
                                          reasoning, not the text";

/// Why a response after a condensation is not a target: V1 condensation replaces forgotten
/// events with a summary, and the importer does not rebuild that view.
pub(super) const CONDENSED: &str = "context condensed by OpenHands: the view after a \
                                    condensation is not reconstructed";

/// One V1 event (the fields used; unknown fields are ignored).
#[derive(Deserialize)]
struct V1Event {
    kind: String,
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    system_prompt: Option<Text>,
    #[serde(default)]
    dynamic_context: Option<Text>,
    #[serde(default)]
    tools: Option<Vec<Value>>,
    #[serde(default)]
    llm_message: Option<LlmMessage>,
    #[serde(default)]
    extended_content: Vec<Text>,
    #[serde(default)]
    thought: Vec<Text>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    thinking_blocks: Vec<Value>,
    #[serde(default)]
    responses_reasoning_item: Option<Value>,
    #[serde(default)]
    action: Option<Value>,
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    tool_call: Option<V1Call>,
    #[serde(default)]
    llm_response_id: Option<String>,
    #[serde(default)]
    observation: Option<Value>,
    #[serde(default)]
    rejection_reason: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    value: Option<Value>,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    detail: Option<String>,
}

/// A `TextContent` (`{"type": "text", "text": …}`).
#[derive(Deserialize)]
struct Text {
    #[serde(default)]
    text: String,
}

/// The `llm_message` of a `MessageEvent`.
#[derive(Deserialize)]
struct LlmMessage {
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    content: Content,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    thinking_blocks: Vec<Value>,
}

/// A `MessageToolCall` (`arguments` is the JSON string the model wrote).
#[derive(Deserialize)]
struct V1Call {
    id: String,
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

/// Event kinds the model never sees.
const BOOKKEEPING: &[&str] = &[
    "PauseEvent",
    "TokenEvent",
    "StreamingDeltaEvent",
    "HookExecutionEvent",
    "CondensationRequest",
    "SecurityAnalyzerEvent",
];

/// A V1 stream's events (in order) → classified items. `model` is the model the conversation
/// ran with, when its `base_state.json` says.
pub(super) fn classify_all(raw: Vec<(Value, Pos)>, model: Option<&str>) -> Vec<Classified> {
    let mut out: Vec<Classified> = Vec::with_capacity(raw.len());
    // Where each response's item is, by `llm_response_id`: its later actions add their calls.
    let mut response_at: HashMap<String, usize> = HashMap::new();
    let mut condensed = false;
    for (i, (v, pos)) in raw.into_iter().enumerate() {
        let e = match typed::<V1Event>(&v) {
            Ok(e) => e,
            Err(problem) => {
                out.push(Classified::new(None, Err(problem), pos));
                continue;
            }
        };
        let item = match e.kind.as_str() {
            "ActionEvent" => match action(&e, i, &pos, model) {
                Err(p) => Err(p),
                Ok((rid, call, response)) => match response_at.get(&rid) {
                    Some(&k) => {
                        if let Ok(Item::Response(r)) = &mut out[k].item {
                            r.message.tool_calls.push(call);
                            if finishes(&e) {
                                r.meta.insert("finish_action".into(), Value::Bool(true));
                            }
                        }
                        Ok(Item::Same)
                    }
                    None => {
                        response_at.insert(rid, out.len());
                        let mut r = response;
                        if condensed {
                            r.not_trainable = Some(CONDENSED.into());
                        }
                        Ok(Item::Response(r))
                    }
                },
            },
            "MessageEvent" if e.source.as_deref() == Some("agent") => {
                message_response(&e, &pos, model).map(|mut r| {
                    if condensed {
                        r.not_trainable = Some(CONDENSED.into());
                    }
                    if let Some(rid) = &e.llm_response_id {
                        response_at.insert(rid.clone(), out.len());
                    }
                    Item::Response(r)
                })
            }
            kind => {
                if kind == "Condensation" || kind == "CondensationSummaryEvent" {
                    condensed = true;
                }
                other(&e, i)
            }
        };
        out.push(Classified::new(e.timestamp.as_deref(), item, pos));
    }
    out
}

/// The metadata every response carries: where it was read and its event id.
fn response_meta(e: &V1Event, pos: &Pos) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("event_id".into(), e.id.clone().unwrap_or(Value::Null));
    m.insert(
        "source_line".into(),
        json!(format!("{}:{}", file_name(&pos.file), pos.line)),
    );
    m.insert(
        "response_id".into(),
        e.llm_response_id.clone().map_or(Value::Null, Value::String),
    );
    m
}

/// Whether an action is the agent's `finish` tool.
fn finishes(e: &V1Event) -> bool {
    e.action
        .as_ref()
        .and_then(|a| a.get("kind"))
        .and_then(Value::as_str)
        == Some("FinishAction")
        || e.tool_name.as_deref() == Some("finish")
}

/// A response's reasoning, and why its output is not a target when the log holds only a
/// trace of it: thinking blocks with a signature and no text, redacted thinking, or a Responses
/// API reasoning item holding only encrypted content.
fn reasoning(
    reasoning_content: Option<&str>,
    blocks: &[Value],
    responses_item: Option<&Value>,
) -> (String, Option<String>) {
    let mut text: Vec<String> = Vec::new();
    let mut hidden = false;
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("thinking") => match b.get("thinking").and_then(Value::as_str) {
                Some(t) if !t.is_empty() => text.push(t.to_owned()),
                _ => hidden = true,
            },
            Some("redacted_thinking") => hidden = true,
            _ => {}
        }
    }
    if text.is_empty() {
        if let Some(r) = reasoning_content.filter(|r| !r.is_empty()) {
            text.push(r.to_owned());
        }
    }
    if let Some(item) = responses_item {
        let summary: Vec<&str> = ["content", "summary"]
            .iter()
            .filter_map(|k| item.get(*k).and_then(Value::as_array))
            .flatten()
            .filter_map(|p| p.as_str().or_else(|| p.get("text").and_then(Value::as_str)))
            .collect();
        if text.is_empty() && !summary.is_empty() {
            text.push(summary.join("\n"));
        }
        if summary.is_empty() && item.get("encrypted_content").is_some_and(|c| !c.is_null()) {
            hidden = true;
        }
    }
    let hidden = (hidden && text.is_empty()).then(|| HIDDEN_THINKING.to_owned());
    (text.join("\n"), hidden)
}

/// An `ActionEvent` → its response id, its tool call, and the response it starts when it is
/// the first action of that response.
fn action(
    e: &V1Event,
    i: usize,
    pos: &Pos,
    model: Option<&str>,
) -> Result<(String, ToolCall, Box<Response>), (String, String)> {
    let Some(c) = &e.tool_call else {
        return Err(("missing field `tool_call`".into(), "tool_call".into()));
    };
    let wire = WireCall {
        id: Some(c.id.clone()),
        function: Some(Function {
            name: Some(c.name.clone()),
            arguments: c.arguments.clone(),
        }),
    };
    let call = tool_calls(Some(std::slice::from_ref(&wire))).remove(0);
    let rid = e
        .llm_response_id
        .clone()
        .unwrap_or_else(|| format!("event-{i}"));
    let (thinking, hidden) = reasoning(
        e.reasoning_content.as_deref(),
        &e.thinking_blocks,
        e.responses_reasoning_item.as_ref(),
    );
    let content: Vec<&str> = e.thought.iter().map(|t| t.text.as_str()).collect();
    let mut meta = response_meta(e, pos);
    if finishes(e) {
        meta.insert("finish_action".into(), Value::Bool(true));
    }
    let response = Response {
        not_trainable: hidden,
        context: Vec::new(),
        message: Message {
            reasoning_content: Some(thinking),
            tool_calls: vec![call.clone()],
            ..Message::new("assistant", content.join("\n"))
        },
        agent: "main".into(),
        summary: false,
        t: e.timestamp.as_deref().and_then(parse_timestamp),
        model: model.map(str::to_owned),
        finish: Some("tool_calls".into()),
        meta,
        usage_input: None,
        usage_output: None,
        line: pos.line,
    };
    Ok((rid, call, Box::new(response)))
}

/// An agent `MessageEvent`: a plain-text response.
fn message_response(
    e: &V1Event,
    pos: &Pos,
    model: Option<&str>,
) -> Result<Box<Response>, (String, String)> {
    let Some(m) = &e.llm_message else {
        return Err(("missing field `llm_message`".into(), "llm_message".into()));
    };
    let (thinking, hidden) = reasoning(m.reasoning_content.as_deref(), &m.thinking_blocks, None);
    Ok(Box::new(Response {
        not_trainable: hidden,
        context: Vec::new(),
        message: Message {
            reasoning_content: Some(thinking),
            ..Message::new("assistant", m.content.text())
        },
        agent: "main".into(),
        summary: false,
        t: e.timestamp.as_deref().and_then(parse_timestamp),
        model: model.map(str::to_owned),
        finish: Some("stop".into()),
        meta: response_meta(e, pos),
        usage_input: None,
        usage_output: None,
        line: pos.line,
    }))
}

/// Every other event: the system prompt, user messages, observations, state and errors.
fn other(e: &V1Event, i: usize) -> Result<Item, (String, String)> {
    let identity = format!("event {i}");
    let kind = e.kind.as_str();
    Ok(match kind {
        "SystemPromptEvent" => {
            let Some(p) = &e.system_prompt else {
                return Err((
                    "missing field `system_prompt`".into(),
                    "system_prompt".into(),
                ));
            };
            // The dynamic context is a second text block of the same system message.
            let mut content = p.text.clone();
            if let Some(d) = e.dynamic_context.as_ref().filter(|d| !d.text.is_empty()) {
                content.push('\n');
                content.push_str(&d.text);
            }
            let tools: Vec<Value> = e.tools.iter().flatten().map(tool_schema).collect();
            let mut meta = Map::new();
            meta.insert("openhands_format".into(), json!("v1"));
            if !tools.is_empty() {
                meta.insert(
                    "tool_parameters".into(),
                    json!("not in V1 events: tools carry their name and description only"),
                );
            }
            Item::System {
                content,
                tools,
                meta,
            }
        }
        "MessageEvent" => {
            let Some(m) = &e.llm_message else {
                return Err(("missing field `llm_message`".into(), "llm_message".into()));
            };
            let mut content = m.content.text();
            for x in &e.extended_content {
                if !content.is_empty() {
                    content.push('\n');
                }
                content.push_str(&x.text);
            }
            match m.role.as_deref() {
                Some("system") => Item::Turn(Turn::new(
                    &identity,
                    Message::new("system", content),
                    Source::System,
                )),
                _ => Item::Turn(Turn::new(
                    &identity,
                    Message::new("user", content),
                    Source::User,
                )),
            }
        }
        "ObservationEvent" | "UserRejectObservation" | "AgentErrorEvent" => {
            let Some(call) = &e.tool_call_id else {
                return Ok(Item::Skip(format!("{kind} without a tool_call_id")));
            };
            let text = match kind {
                "UserRejectObservation" => format!(
                    "Action rejected: {}",
                    e.rejection_reason.as_deref().unwrap_or("")
                ),
                "AgentErrorEvent" => e.error.clone().unwrap_or_default(),
                _ => {
                    let content = e
                        .observation
                        .as_ref()
                        .and_then(|o| o.get("content"))
                        .cloned()
                        .unwrap_or(Value::Null);
                    typed::<Content>(&content)
                        .map(|c| c.text())
                        .unwrap_or_else(|_| {
                            content
                                .as_str()
                                .map_or_else(|| content.to_string(), str::to_owned)
                        })
                }
            };
            Item::Turn(Turn::new(
                &identity,
                Message::tool(call, text),
                Source::Tool,
            ))
        }
        "ConversationStateUpdateEvent" => {
            let status = match (e.key.as_deref(), &e.value) {
                (Some("execution_status"), Some(Value::String(s))) => Some(s.clone()),
                (Some("full_state"), Some(v)) => v
                    .get("execution_status")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                _ => None,
            };
            match status {
                Some(s) if s == "stuck" => Item::State(StateExtras {
                    agent_state: Some("error".into()),
                    reason: Some("stuck: OpenHands stopped a repeating agent".into()),
                }),
                Some(s) => Item::State(StateExtras {
                    agent_state: Some(s),
                    reason: None,
                }),
                None => Item::Bookkeeping,
            }
        }
        "ConversationErrorEvent" => Item::State(StateExtras {
            agent_state: Some("error".into()),
            reason: Some(
                [e.code.as_deref(), e.detail.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(": "),
            ),
        }),
        "ConversationIterationLimitEvent" => Item::State(StateExtras {
            agent_state: Some("error".into()),
            reason: Some("maximum iteration limit reached".into()),
        }),
        k if BOOKKEEPING.contains(&k) => Item::Bookkeeping,
        k => Item::Skip(k.to_owned()),
    })
}

/// A V1 `ToolDefinition` as the OpenAI tool the template renders: its name and description.
/// The parameter schema is built from the action class at run time and is not in the event,
/// so the tool has an empty one (the session's metadata says so).
fn tool_schema(t: &Value) -> Value {
    if t.get("function").is_some() {
        return t.clone();
    }
    let name = ["name", "title"]
        .iter()
        .find_map(|k| t.get(*k).and_then(Value::as_str))
        .unwrap_or("");
    let description = t.get("description").and_then(Value::as_str).unwrap_or("");
    let parameters = t
        .get("parameters")
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    json!({"type": "function", "function": {
        "name": name, "description": description, "parameters": parameters}})
}
