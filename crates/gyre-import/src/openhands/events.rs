//! One OpenHands event: its typed form (as `event_to_dict` writes it) and what it contributes
//! to the model's conversation. The `system` action is recognised before anything depends on the
//! event's source (OpenHands writes it with `"source": "agent"`).

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::convo::Turn;
use crate::input::{file_name, sub_path, typed};
use crate::openai::ChatMessage;
use crate::session::Response;
use crate::timestamp::parse_timestamp;
use gyre_engine::record::Source;
use gyre_text::Message;

use super::conversation::Classified;
use super::legacy::{self, NOT_SAMPLED_TEXT};
use super::streams::Pos;

/// An event id: an integer, sometimes written as a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct EventId(pub(super) i64);

impl<'de> Deserialize<'de> for EventId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(i) => Ok(EventId(i)),
            Raw::Text(s) => {
                s.trim().parse().map(EventId).map_err(|_| {
                    serde::de::Error::custom(format!("event id {s:?} is not a number"))
                })
            }
        }
    }
}

/// One event, as `event_to_dict` writes it (the fields used).
#[derive(Deserialize)]
pub(super) struct Event {
    #[serde(default)]
    id: Option<EventId>,
    #[serde(default)]
    pub(super) timestamp: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    cause: Option<EventId>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    observation: Option<String>,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    extras: Option<Value>,
    #[serde(default)]
    tool_call_metadata: Option<ToolCallMetadata>,
}

#[derive(Deserialize)]
struct ToolCallMetadata {
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    model_response: Option<ModelResponse>,
}

#[derive(Deserialize)]
struct ModelResponse {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<ModelChoice>,
    #[serde(default)]
    usage: Option<Value>,
}

#[derive(Deserialize)]
struct ModelChoice {
    message: ChatMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

/// `args` of the `system` action (`SystemMessageAction`).
#[derive(Deserialize)]
struct SystemArgs {
    #[serde(default)]
    content: String,
    #[serde(default)]
    tools: Option<Vec<Value>>,
    #[serde(default)]
    openhands_version: Option<String>,
    #[serde(default)]
    agent_class: Option<String>,
}

/// `args` of `message` and `finish` actions.
#[derive(Deserialize, Default)]
struct TextArgs {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    thought: Option<String>,
    #[serde(default)]
    final_thought: Option<String>,
}

/// `extras` of a `recall` observation (`RecallObservation`).
#[derive(Deserialize, Default)]
struct RecallExtras {
    #[serde(default)]
    recall_type: Option<String>,
    #[serde(default)]
    repo_name: Option<String>,
    #[serde(default)]
    repo_directory: Option<String>,
    #[serde(default)]
    repo_branch: Option<String>,
    #[serde(default)]
    repo_instructions: Option<String>,
    #[serde(default)]
    runtime_hosts: Option<Map<String, Value>>,
    #[serde(default)]
    additional_agent_instructions: Option<String>,
    #[serde(default)]
    date: Option<String>,
    #[serde(default)]
    custom_secrets_descriptions: Option<Map<String, Value>>,
    #[serde(default)]
    conversation_instructions: Option<String>,
    #[serde(default)]
    working_dir: Option<String>,
    #[serde(default)]
    microagent_knowledge: Vec<Knowledge>,
}

#[derive(Deserialize)]
struct Knowledge {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    trigger: Option<String>,
    #[serde(default)]
    content: Option<String>,
}

/// `extras` of `agent_state_changed`.
#[derive(Deserialize, Default)]
pub(super) struct StateExtras {
    #[serde(default)]
    pub(super) agent_state: Option<String>,
    #[serde(default)]
    pub(super) reason: Option<String>,
}

/// What an event contributes to the model's conversation.
pub(super) enum Item {
    /// The system prompt and the tool definitions sent with every call.
    System {
        content: String,
        tools: Vec<Value>,
        meta: Map<String, Value>,
    },
    /// A message turn (user, tool result, recalled runtime information).
    Turn(Turn),
    /// A model response (its first event).
    Response(Box<Response>),
    /// A response already counted (another action of the same model response).
    Same,
    /// The agent finished (`finish` action).
    Finish,
    /// The agent's state changed.
    State(StateExtras),
    /// Bookkeeping the model never sees (`null` observations, the `recall` request, state
    /// changes asked for).
    Bookkeeping,
    /// An event the model may have seen in some form that is not reconstructed (a command the
    /// user ran, a condensation): named for the warning.
    Skip(String),
}

/// A stream's events, classified in order (a response's later actions and an observation's
/// call are found through the events before them).
pub(super) fn classify_all(events: &[(Event, Pos)]) -> Vec<Classified> {
    let mut call_of_event = HashMap::new();
    let mut seen = HashMap::new();
    // A stream with agent commands and no function-calling metadata anywhere is from before
    // function calling: the model answered in text, and its actions are rebuilt from their
    // parsed fields. (A stream whose agent only ever answered in plain messages is not.)
    let no_args = Value::Null;
    let mut text_era = TextEra {
        on: !events.iter().any(|(e, _)| e.tool_call_metadata.is_some())
            && events.iter().any(|(e, _)| {
                e.source.as_deref() == Some("agent")
                    && e.action.as_deref().is_some_and(|a| {
                        legacy::action_text(a, e.args.as_ref().unwrap_or(&no_args)).is_some()
                    })
            }),
        actions: false,
    };
    events
        .iter()
        .enumerate()
        .map(|(i, (e, pos))| {
            let item = classify(e, i, pos, &mut call_of_event, &mut seen, &mut text_era);
            Classified::new(e.timestamp.as_deref(), item, pos.clone())
        })
        .collect()
}

/// Whether a stream is from before function calling, and whether it has had an action the
/// model wrote as text (observations answer those as user messages).
struct TextEra {
    on: bool,
    actions: bool,
}

/// What an event is. The `system` action is checked before anything depends on the event's
/// source: OpenHands writes it with `source: "agent"`.
fn classify(
    e: &Event,
    i: usize,
    pos: &Pos,
    call_of_event: &mut HashMap<EventId, String>,
    responses_seen: &mut HashMap<String, usize>,
    text_era: &mut TextEra,
) -> Result<Item, (String, String)> {
    let identity = format!("event {i}");
    let source = e.source.as_deref().unwrap_or("");
    let t = e.timestamp.as_deref().and_then(parse_timestamp);
    let meta = |extra: &[(&str, Value)]| {
        let mut m = Map::new();
        m.insert("event_id".into(), json!(e.id.map(|i| i.0)));
        m.insert(
            "source_line".into(),
            json!(format!("{}:{}", file_name(&pos.file), pos.line)),
        );
        for (k, v) in extra {
            m.insert((*k).into(), v.clone());
        }
        m
    };
    let args = |path: &str| -> Result<TextArgs, (String, String)> {
        match &e.args {
            Some(a) => typed::<TextArgs>(a).map_err(|(m, p)| (m, sub_path(path, &p))),
            None => Ok(TextArgs::default()),
        }
    };
    if let Some(action) = e.action.as_deref() {
        if action == "system" {
            let a: SystemArgs = match &e.args {
                Some(a) => typed(a).map_err(|(m, p)| (m, sub_path("args", &p)))?,
                None => return Err(("missing field `args`".into(), "args".into())),
            };
            let mut m = Map::new();
            if let Some(v) = a.openhands_version {
                m.insert("openhands_version".into(), json!(v));
            }
            if let Some(c) = a.agent_class {
                m.insert("agent_class".into(), json!(c));
            }
            return Ok(Item::System {
                content: a.content,
                tools: a.tools.unwrap_or_default(),
                meta: m,
            });
        }
        if source == "agent" {
            if let Some(tcm) = &e.tool_call_metadata {
                if let (Some(id), Some(c)) = (e.id, &tcm.tool_call_id) {
                    call_of_event.insert(id, c.clone());
                }
                let Some(mr) = &tcm.model_response else {
                    return Err((
                        "tool_call_metadata without model_response".into(),
                        "tool_call_metadata.model_response".into(),
                    ));
                };
                let rid = mr.id.clone().unwrap_or_else(|| format!("event-{i}"));
                if responses_seen.contains_key(&rid) {
                    return Ok(if action == "finish" {
                        Item::Finish
                    } else {
                        Item::Same
                    });
                }
                let Some(choice) = mr.choices.first() else {
                    return Err((
                        "model_response has no choices[0].message".into(),
                        "tool_call_metadata.model_response.choices".into(),
                    ));
                };
                responses_seen.insert(rid.clone(), i);
                let mut m = meta(&[("response_id", json!(rid))]);
                if let Some(u) = &mr.usage {
                    m.insert("usage".into(), u.clone());
                }
                let usage_input = mr
                    .usage
                    .as_ref()
                    .and_then(|u| u.get("prompt_tokens"))
                    .and_then(Value::as_u64);
                if action == "finish" {
                    m.insert("finish_action".into(), Value::Bool(true));
                }
                return Ok(Item::Response(Box::new(Response {
                    not_trainable: None,
                    context: Vec::new(),
                    message: choice.message.assistant(),
                    agent: "main".into(),
                    summary: false,
                    t,
                    model: mr.model.clone(),
                    finish: choice.finish_reason.clone(),
                    meta: m,
                    usage_input,
                    usage_output: None,
                    line: pos.line,
                })));
            }
            let no_args = Value::Null;
            let written = text_era
                .on
                .then(|| legacy::action_text(action, e.args.as_ref().unwrap_or(&no_args)))
                .flatten();
            if let Some(text) = written {
                text_era.actions = true;
                return Ok(Item::Response(Box::new(Response {
                    not_trainable: Some(NOT_SAMPLED_TEXT.into()),
                    context: Vec::new(),
                    message: Message {
                        reasoning_content: Some(String::new()),
                        ..Message::new("assistant", text)
                    },
                    agent: "main".into(),
                    summary: false,
                    t,
                    model: None,
                    finish: None,
                    meta: meta(&[("response_id", Value::Null), ("text_action", json!(action))]),
                    usage_input: None,
                    usage_output: None,
                    line: pos.line,
                })));
            }
            if action == "message" || action == "finish" {
                // A plain-text model response (OpenHands keeps no metadata for it).
                let a = args("args")?;
                let content = [a.content, a.thought, a.final_thought]
                    .into_iter()
                    .flatten()
                    .find(|s| !s.is_empty())
                    .or_else(|| e.message.clone())
                    .unwrap_or_default();
                let mut m = meta(&[("response_id", Value::Null)]);
                if action == "finish" {
                    m.insert("finish_action".into(), Value::Bool(true));
                }
                return Ok(Item::Response(Box::new(Response {
                    // Before function calling, a message or finish is what CodeAct parsed
                    // out of the model's text, not the text.
                    not_trainable: text_era.on.then(|| NOT_SAMPLED_TEXT.into()),
                    context: Vec::new(),
                    message: Message {
                        reasoning_content: Some(String::new()),
                        ..Message::new("assistant", content)
                    },
                    agent: "main".into(),
                    summary: false,
                    t,
                    model: None,
                    finish: None,
                    meta: m,
                    usage_input: None,
                    usage_output: None,
                    line: pos.line,
                })));
            }
            return Ok(Item::Skip(format!("{source} action {action:?}")));
        }
        if action == "message" && source == "user" {
            let a = args("args")?;
            let content = a.content.or_else(|| e.message.clone()).unwrap_or_default();
            return Ok(Item::Turn(Turn::new(
                &identity,
                Message::new("user", content),
                Source::User,
            )));
        }
        if matches!(action, "recall" | "change_agent_state") {
            return Ok(Item::Bookkeeping);
        }
        return Ok(Item::Skip(format!("{source} action {action:?}")));
    }
    let Some(obs) = e.observation.as_deref() else {
        return Err((
            "neither an action nor an observation".into(),
            "action".into(),
        ));
    };
    let extras = e.extras.clone().unwrap_or(Value::Null);
    match obs {
        "agent_state_changed" => {
            let s: StateExtras = typed(&extras).unwrap_or_default();
            return Ok(Item::State(s));
        }
        "recall" => {
            let r: RecallExtras = typed(&extras).map_err(|(m, p)| (m, sub_path("extras", &p)))?;
            return Ok(match recall_text(&r) {
                Some(text) => Item::Turn(Turn::new(
                    &identity,
                    Message::new("user", text),
                    Source::User,
                )),
                None => Item::Bookkeeping,
            });
        }
        "null" => return Ok(Item::Bookkeeping),
        _ => {}
    }
    let call = e
        .tool_call_metadata
        .as_ref()
        .and_then(|m| m.tool_call_id.clone())
        .or_else(|| e.cause.and_then(|c| call_of_event.get(&c).cloned()));
    let mut content = e
        .content
        .clone()
        .or_else(|| e.message.clone())
        .unwrap_or_default();
    if call.is_none() && text_era.actions {
        return Ok(Item::Turn(Turn::new(
            &identity,
            Message::new("user", legacy::observation_text(obs, &content, &extras)),
            Source::Tool,
        )));
    }
    if obs == "error" {
        // What OpenHands appends when it shows an error to the model.
        content.push_str("\n[Error occurred in processing last action]");
    }
    if obs == "run" {
        // A command's output reaches the model between the shell metadata's prefix and suffix
        // (`[The command completed with exit code 0.]`).
        let meta = extras.get("metadata");
        let part = |k: &str| {
            meta.and_then(|m| m.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        content = format!("{}{content}{}", part("prefix"), part("suffix"));
    }
    Ok(match call {
        Some(call) => Item::Turn(Turn::new(
            &identity,
            Message::tool(&call, content),
            Source::Tool,
        )),
        None if obs == "error" || obs == "condense" => Item::Turn(Turn::new(
            &identity,
            Message::new("user", content),
            if obs == "condense" {
                Source::Summary
            } else {
                Source::User
            },
        )),
        None => Item::Skip(format!("observation {obs:?} without a call")),
    })
}

/// The runtime information a `recall` observation gave the model, rendered from its fields as
/// OpenHands' prompt extensions lay them out (tagged sections; their exact wording is not in
/// the log). `None` when it carries nothing.
fn recall_text(r: &RecallExtras) -> Option<String> {
    let nonempty = |s: &Option<String>| {
        s.as_deref()
            .filter(|s| !s.trim().is_empty())
            .map(str::to_owned)
    };
    let mut parts = Vec::new();
    if r.recall_type.as_deref() != Some("knowledge") {
        let (name, dir) = (nonempty(&r.repo_name), nonempty(&r.repo_directory));
        if name.is_some() || dir.is_some() {
            let branch = nonempty(&r.repo_branch)
                .map(|b| format!(" (branch {b})"))
                .unwrap_or_default();
            parts.push(format!(
                "<REPOSITORY_INFO>\nRepository {}{branch} is checked out in {}.\n</REPOSITORY_INFO>",
                name.unwrap_or_default(),
                dir.unwrap_or_default()
            ));
        }
        if let Some(i) = nonempty(&r.repo_instructions) {
            parts.push(format!(
                "<REPOSITORY_INSTRUCTIONS>\n{i}\n</REPOSITORY_INSTRUCTIONS>"
            ));
        }
        let mut runtime = Vec::new();
        if let Some(hosts) = r.runtime_hosts.as_ref().filter(|h| !h.is_empty()) {
            runtime.push("Hosts for web applications (use their ports):".to_owned());
            for (host, port) in hosts {
                runtime.push(format!("* {host} (port {port})"));
            }
        }
        if let Some(a) = nonempty(&r.additional_agent_instructions) {
            runtime.push(a);
        }
        if let Some(secrets) = r
            .custom_secrets_descriptions
            .as_ref()
            .filter(|s| !s.is_empty())
        {
            runtime.push("<CUSTOM_SECRETS>".to_owned());
            for (name, desc) in secrets {
                let desc = desc
                    .as_str()
                    .map_or_else(|| desc.to_string(), str::to_owned);
                runtime.push(format!("* ${name}: {desc}"));
            }
            runtime.push("</CUSTOM_SECRETS>".to_owned());
        }
        if let Some(d) = nonempty(&r.working_dir) {
            runtime.push(format!("Working directory: {d}"));
        }
        if let Some(d) = nonempty(&r.date) {
            runtime.push(format!("Today's date is {d} (UTC)."));
        }
        if !runtime.is_empty() {
            parts.push(format!(
                "<RUNTIME_INFORMATION>\n{}\n</RUNTIME_INFORMATION>",
                runtime.join("\n")
            ));
        }
        if let Some(c) = nonempty(&r.conversation_instructions) {
            parts.push(format!(
                "<CONVERSATION_INSTRUCTIONS>\n{c}\n</CONVERSATION_INSTRUCTIONS>"
            ));
        }
    }
    for k in &r.microagent_knowledge {
        let Some(content) = nonempty(&k.content) else {
            continue;
        };
        let why = match (nonempty(&k.trigger), nonempty(&k.name)) {
            (Some(t), _) => format!("Matched by the keyword \"{t}\":"),
            (None, Some(n)) => format!("From {n}:"),
            (None, None) => String::new(),
        };
        parts.push(format!("<EXTRA_INFO>\n{why}\n\n{content}\n</EXTRA_INFO>"));
    }
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_renders_its_fields() {
        let r: RecallExtras = serde_json::from_value(json!({
            "recall_type": "workspace_context", "repo_name": "o/r", "repo_directory": "/w/r",
            "runtime_hosts": {"http://localhost:51234": 51234}, "date": "2025-05-01",
            "microagent_knowledge": [{"name": "gh", "trigger": "github", "content": "Use gh."}]
        }))
        .unwrap();
        let t = recall_text(&r).unwrap();
        assert!(t.starts_with("<REPOSITORY_INFO>\nRepository o/r is checked out in /w/r."));
        assert!(t.contains("* http://localhost:51234 (port 51234)"));
        assert!(t.contains("Today's date is 2025-05-01 (UTC)."));
        assert!(t.ends_with("Matched by the keyword \"github\":\n\nUse gh.\n</EXTRA_INFO>"));
        assert!(recall_text(&RecallExtras::default()).is_none());
    }
}
