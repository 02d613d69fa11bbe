//! OpenAI Responses (`POST /v1/responses`, what Codex CLI and the Agents SDK speak): requests
//! in, answers out (a `response` object, or server-sent events `response.created` …
//! `response.completed` shaped as the official clients accumulate them).
//!
//! The proxy is stateless: the harness sends the whole conversation as `input` items
//! (messages, `reasoning`, `function_call`, `function_call_output`), as Codex CLI does and the
//! Agents SDK does by default. `previous_response_id` and `conversation` are refused: the
//! proxy stores no responses, and a context it cannot see could not be recorded exactly.

use serde_json::{Map, Value, json};

use super::chat::{ApiError, ChatRequest, Finish, Reply, Turn, opt_u64};
use super::openai;
use gyre_text::{Message, ToolCall};

/// Reads a Responses request body.
pub fn parse(body: &Value) -> Result<ChatRequest, ApiError> {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid("model", "model is required"))?
        .to_owned();
    for key in ["previous_response_id", "conversation"] {
        if body.get(key).is_some_and(|v| !v.is_null()) {
            return Err(ApiError::invalid(
                key,
                format!(
                    "{key} is not supported: gyre record keeps no responses, so send the whole \
                     conversation in input (Codex CLI does; with the Agents SDK, leave \
                     previous_response_id and conversation_id unset)"
                ),
            ));
        }
    }
    let mut turns = Vec::new();
    if let Some(instructions) = body.get("instructions").filter(|v| !v.is_null()) {
        let text = instructions
            .as_str()
            .ok_or_else(|| ApiError::invalid("instructions", "instructions must be a string"))?;
        turns.push(Turn::of(Message::new("system", text)));
    }
    match body.get("input") {
        Some(Value::String(s)) => turns.push(Turn::of(Message::new("user", s.clone()))),
        Some(Value::Array(items)) => read_items(items, &mut turns)?,
        _ => {
            return Err(ApiError::invalid(
                "input",
                "input must be a string or a list of items",
            ));
        }
    }
    if !turns.iter().any(|t| t.msg.role != "system") {
        return Err(ApiError::invalid("input", "input must not be empty"));
    }
    let mut meta = Map::new();
    let tools = tools(body.get("tools"), &mut meta)?;
    let logprobs = match body.get("include") {
        None | Some(Value::Null) => false,
        Some(Value::Array(a)) => a
            .iter()
            .any(|v| v.as_str() == Some("message.output_text.logprobs")),
        Some(_) => return Err(ApiError::invalid("include", "include must be a list")),
    };
    if opt_u64(body, "top_logprobs")?.is_some_and(|k| k > 0) {
        return Err(ApiError::invalid(
            "top_logprobs",
            "top_logprobs is not supported: the proxy asks the upstream for the sampled \
             token's log-prob only (include [\"message.output_text.logprobs\"] returns those)",
        ));
    }
    let stream = match body.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ApiError::invalid("stream", "stream must be a boolean")),
    };
    let enable_thinking = body
        .pointer("/chat_template_kwargs/enable_thinking")
        .and_then(Value::as_bool);
    Ok(ChatRequest {
        model,
        turns,
        tools,
        sampling: openai::sampling(body, opt_u64(body, "max_output_tokens")?)?,
        stream,
        include_usage: true,
        logprobs,
        enable_thinking,
        session: None,
        meta,
        prefill: false,
    })
}

/// Input items → turns. An assistant turn is the run of `reasoning`, assistant `message` and
/// `function_call` items one response produced (in that order); the next `reasoning`, or a
/// message after a call, starts another.
fn read_items(items: &[Value], turns: &mut Vec<Turn>) -> Result<(), ApiError> {
    let mut open: Option<Message> = None;
    let close = |open: &mut Option<Message>, turns: &mut Vec<Turn>| {
        if let Some(m) = open.take() {
            turns.push(Turn::of(m));
        }
    };
    for (i, item) in items.iter().enumerate() {
        let at = |k: &str| format!("input[{i}].{k}");
        let role = item.get("role").and_then(Value::as_str);
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(if role.is_some() { "message" } else { "" });
        match (kind, role) {
            ("message", Some("assistant")) => {
                let text = content_text(item.get("content"), &at("content"))?;
                if open
                    .as_ref()
                    .is_some_and(|m| !m.tool_calls.is_empty() || !m.content.is_empty())
                {
                    close(&mut open, turns);
                }
                let m = open.get_or_insert_with(|| Message::new("assistant", ""));
                m.content = text;
            }
            ("message", Some(role @ ("user" | "system" | "developer"))) => {
                close(&mut open, turns);
                let text = content_text(item.get("content"), &at("content"))?;
                let role = if role == "user" { "user" } else { "system" };
                turns.push(Turn::of(Message::new(role, text)));
            }
            ("message", other) => {
                return Err(ApiError::invalid(
                    &at("role"),
                    match other {
                        Some(role) => format!("role {role:?} is not supported"),
                        None => "role is required".to_owned(),
                    },
                ));
            }
            ("reasoning", _) => {
                close(&mut open, turns);
                let text = reasoning_text(item);
                let m = open.get_or_insert_with(|| Message::new("assistant", ""));
                m.reasoning_content = (!text.is_empty()).then_some(text);
            }
            ("function_call", _) => {
                let call_id = str_field(item, "call_id", &at("call_id"))?;
                let name = str_field(item, "name", &at("name"))?;
                let arguments = match item.get("arguments") {
                    Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                        Ok(v @ Value::Object(_)) => v,
                        _ => Value::String(s.clone()),
                    },
                    None | Some(Value::Null) => Value::Object(Map::new()),
                    Some(_) => {
                        return Err(ApiError::invalid(
                            &at("arguments"),
                            "arguments must be a JSON string",
                        ));
                    }
                };
                open.get_or_insert_with(|| Message::new("assistant", ""))
                    .tool_calls
                    .push(ToolCall {
                        id: call_id.to_owned(),
                        name: name.to_owned(),
                        arguments,
                    });
            }
            ("function_call_output", _) => {
                close(&mut open, turns);
                let call_id = str_field(item, "call_id", &at("call_id"))?;
                let output = content_text(item.get("output"), &at("output"))?;
                turns.push(Turn::of(Message::tool(call_id, output)));
            }
            (other, _) => {
                return Err(ApiError::invalid(
                    &at("type"),
                    format!(
                        "input item type {other:?} is not supported: gyre record takes \
                         message, reasoning, function_call and function_call_output items"
                    ),
                ));
            }
        }
    }
    close(&mut open, turns);
    Ok(())
}

fn str_field<'a>(item: &'a Value, key: &str, at: &str) -> Result<&'a str, ApiError> {
    item.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid(at, format!("{key} is required")))
}

/// A message's or a tool output's text: a string, or a list of text parts (`input_text`,
/// `output_text`, `text`, `refusal`); images and files are refused (the policy reads text).
fn content_text(content: Option<&Value>, param: &str) -> Result<String, ApiError> {
    let parts = match content {
        None | Some(Value::Null) => return Ok(String::new()),
        Some(Value::String(s)) => return Ok(s.clone()),
        Some(Value::Array(parts)) => parts,
        Some(_) => {
            let field = param.rsplit('.').next().unwrap_or(param);
            return Err(ApiError::invalid(
                param,
                format!("{field} must be a string or a list of parts"),
            ));
        }
    };
    let mut out = String::new();
    for (i, p) in parts.iter().enumerate() {
        let kind = p.get("type").and_then(Value::as_str);
        let key = match kind {
            Some("input_text" | "output_text" | "text") => "text",
            Some("refusal") => "refusal",
            other => {
                return Err(ApiError::invalid(
                    &format!("{param}[{i}].type"),
                    format!(
                        "content part type {} is not supported: gyre record feeds the policy \
                         text only",
                        other.map_or("(none)".into(), |t| format!("{t:?}"))
                    ),
                ));
            }
        };
        out.push_str(p.get(key).and_then(Value::as_str).ok_or_else(|| {
            ApiError::invalid(&format!("{param}[{i}].{key}"), format!("{key} is missing"))
        })?);
    }
    Ok(out)
}

/// A `reasoning` item's text: its `content` (`reasoning_text` parts, the model's own words)
/// when present, else its summary. An `encrypted_content` alone carries no text gyre can read.
fn reasoning_text(item: &Value) -> String {
    let texts = |key: &str| -> Vec<&str> {
        item.get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect()
            })
            .unwrap_or_default()
    };
    let content = texts("content");
    if content.is_empty() {
        texts("summary").join("\n\n")
    } else {
        content.join("")
    }
}

/// Function tools in Chat Completions form (`{"type": "function", "function": {…}}`); other
/// tool types (web search, built-in shell, custom grammars) have no syntax in an open model's
/// template, so they are left out and named in the record's `meta.dropped_tools`.
fn tools(v: Option<&Value>, meta: &mut Map<String, Value>) -> Result<Vec<Value>, ApiError> {
    let list = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(t)) => t,
        Some(_) => return Err(ApiError::invalid("tools", "tools must be a list")),
    };
    let mut out = Vec::new();
    let mut dropped = Vec::new();
    for (i, t) in list.iter().enumerate() {
        match t.get("type").and_then(Value::as_str) {
            Some("function") => {
                let name = t.get("name").and_then(Value::as_str).ok_or_else(|| {
                    ApiError::invalid(&format!("tools[{i}].name"), "name is required")
                })?;
                // `strict` is OpenAI's constrained decoding, not part of the schema the
                // template shows (vLLM leaves it out too).
                let mut f = json!({"name": name});
                for key in ["description", "parameters"] {
                    if let Some(v) = t.get(key).filter(|v| !v.is_null()) {
                        f[key] = v.clone();
                    }
                }
                out.push(json!({"type": "function", "function": f}));
            }
            other => dropped.push(Value::from(other.unwrap_or("(none)"))),
        }
    }
    if !dropped.is_empty() {
        meta.insert("dropped_tools".into(), dropped.into());
    }
    Ok(out)
}

/// The ids of a reply's output items, derived from the response id (`resp_X` → `rs_X`,
/// `msg_X`, `fc_X_i`).
fn item_id(r: &Reply, prefix: &str) -> String {
    let tail = r.id.strip_prefix("resp_").unwrap_or(&r.id);
    format!("{prefix}_{tail}")
}

fn logprobs_json(r: &Reply, want: bool) -> Value {
    if !want {
        return json!([]);
    }
    r.logprobs
        .iter()
        .map(|t| json!({"token": t.token, "logprob": t.logprob, "bytes": t.bytes, "top_logprobs": []}))
        .collect::<Vec<_>>()
        .into()
}

/// The reply's output items, each as `response.completed` holds it.
fn items(r: &Reply, want_logprobs: bool) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(reasoning) = &r.reasoning {
        out.push(json!({
            "type": "reasoning", "id": item_id(r, "rs"), "status": "completed", "summary": [],
            "content": [{"type": "reasoning_text", "text": reasoning}],
        }));
    }
    if !r.content.is_empty() || r.calls.is_empty() {
        out.push(json!({
            "type": "message", "id": item_id(r, "msg"), "role": "assistant",
            "status": status(r),
            "content": [{"type": "output_text", "text": r.content, "annotations": [],
                         "logprobs": logprobs_json(r, want_logprobs)}],
        }));
    }
    for (i, c) in r.calls.iter().enumerate() {
        out.push(json!({
            "type": "function_call", "id": format!("{}_{i}", item_id(r, "fc")),
            "call_id": c.id, "name": c.name, "arguments": c.arguments.to_string(),
            "status": "completed",
        }));
    }
    out
}

fn status(r: &Reply) -> &'static str {
    match r.finish {
        Finish::Length => "incomplete",
        _ => "completed",
    }
}

/// The `response` object, with `output` and `status` as given.
fn envelope(r: &Reply, output: Vec<Value>, status: &str) -> Value {
    let incomplete = (status == "incomplete").then(|| json!({"reason": "max_output_tokens"}));
    json!({
        "id": r.id, "object": "response", "created_at": r.created, "status": status,
        "model": r.model, "output": output, "error": null, "incomplete_details": incomplete,
        "instructions": null, "metadata": {}, "parallel_tool_calls": true,
        "tool_choice": "auto", "tools": [], "store": false, "previous_response_id": null,
        "text": {"format": {"type": "text"}}, "truncation": "disabled",
        "usage": {
            "input_tokens": r.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": r.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": r.prompt_tokens + r.completion_tokens,
        },
    })
}

/// The `response` object.
pub fn response(r: &Reply, want_logprobs: bool) -> Value {
    envelope(r, items(r, want_logprobs), status(r))
}

/// The answer as server-sent events: `response.created`, `response.in_progress`, each output
/// item added, its text or arguments as one delta, done, then `response.completed` (or
/// `response.incomplete` at the token limit) holding the whole response.
pub fn stream(r: &Reply, want_logprobs: bool) -> String {
    let mut events: Vec<(&str, Value)> = vec![
        (
            "response.created",
            json!({"response": envelope(r, Vec::new(), "in_progress")}),
        ),
        (
            "response.in_progress",
            json!({"response": envelope(r, Vec::new(), "in_progress")}),
        ),
    ];
    for (index, item) in items(r, want_logprobs).into_iter().enumerate() {
        let id = item["id"].clone();
        let mut added = item.clone();
        added["status"] = "in_progress".into();
        match item["type"].as_str() {
            Some("reasoning") => {
                added["content"] = json!([]);
                events.push((
                    "response.output_item.added",
                    json!({"output_index": index, "item": added}),
                ));
                let text = item["content"][0]["text"].clone();
                events.push((
                    "response.reasoning_text.delta",
                    json!({"item_id": id,
                    "output_index": index, "content_index": 0, "delta": text}),
                ));
                events.push((
                    "response.reasoning_text.done",
                    json!({"item_id": id,
                    "output_index": index, "content_index": 0, "text": text}),
                ));
            }
            Some("message") => {
                added["content"] = json!([]);
                events.push((
                    "response.output_item.added",
                    json!({"output_index": index, "item": added}),
                ));
                let part = item["content"][0].clone();
                let mut empty = part.clone();
                empty["text"] = "".into();
                empty["logprobs"] = json!([]);
                events.push((
                    "response.content_part.added",
                    json!({"item_id": id,
                    "output_index": index, "content_index": 0, "part": empty}),
                ));
                events.push((
                    "response.output_text.delta",
                    json!({"item_id": id,
                    "output_index": index, "content_index": 0, "delta": part["text"],
                    "logprobs": part["logprobs"]}),
                ));
                events.push((
                    "response.output_text.done",
                    json!({"item_id": id,
                    "output_index": index, "content_index": 0, "text": part["text"],
                    "logprobs": part["logprobs"]}),
                ));
                events.push((
                    "response.content_part.done",
                    json!({"item_id": id,
                    "output_index": index, "content_index": 0, "part": part}),
                ));
            }
            _ => {
                added["arguments"] = "".into();
                events.push((
                    "response.output_item.added",
                    json!({"output_index": index, "item": added}),
                ));
                events.push((
                    "response.function_call_arguments.delta",
                    json!({"item_id": id,
                    "output_index": index, "delta": item["arguments"]}),
                ));
                events.push((
                    "response.function_call_arguments.done",
                    json!({"item_id": id,
                    "output_index": index, "name": item["name"], "arguments": item["arguments"]}),
                ));
            }
        }
        events.push((
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        ));
    }
    let last = match r.finish {
        Finish::Length => "response.incomplete",
        _ => "response.completed",
    };
    events.push((last, json!({"response": response(r, want_logprobs)})));
    let mut out = String::new();
    for (seq, (kind, mut data)) in events.into_iter().enumerate() {
        data["type"] = kind.into();
        data["sequence_number"] = seq.into();
        out.push_str("event: ");
        out.push_str(kind);
        out.push_str("\ndata: ");
        out.push_str(&data.to_string());
        out.push_str("\n\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_of_one_response_are_one_assistant_turn_and_outputs_are_tool_turns() {
        let body = json!({
            "model": "m", "instructions": "Be brief.",
            "input": [
                {"role": "user", "content": "List."},
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "sum"}],
                 "content": [{"type": "reasoning_text", "text": "plan"}]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Listing."}]},
                {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{\"d\": \".\"}"},
                {"type": "function_call", "call_id": "call_2", "name": "pwd", "arguments": ""},
                {"type": "function_call_output", "call_id": "call_1", "output": "a"},
                {"type": "function_call_output", "call_id": "call_2",
                 "output": [{"type": "input_text", "text": "/"}]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "More."}]},
            ],
            "tools": [{"type": "function", "name": "ls", "parameters": {"type": "object"}},
                      {"type": "web_search"}],
        });
        let req = parse(&body).unwrap();
        let roles: Vec<&str> = req.turns.iter().map(|t| t.msg.role.as_str()).collect();
        assert_eq!(
            roles,
            [
                "system",
                "user",
                "assistant",
                "tool",
                "tool",
                "assistant",
                "user"
            ]
        );
        let a = &req.turns[2].msg;
        assert_eq!(a.reasoning_content.as_deref(), Some("plan"));
        assert_eq!(a.content, "Listing.");
        assert_eq!(a.tool_calls.len(), 2);
        assert_eq!(a.tool_calls[0].arguments, json!({"d": "."}));
        assert_eq!(a.tool_calls[1].arguments, json!(""));
        assert_eq!(req.turns[4].msg.content, "/");
        assert_eq!(
            req.tools,
            [json!({"type": "function", "function": {"name": "ls",
            "parameters": {"type": "object"}}})]
        );
        assert_eq!(req.meta["dropped_tools"], json!(["web_search"]));
    }

    #[test]
    fn stored_state_and_unknown_items_are_refused_by_name() {
        let e = parse(&json!({"model": "m", "input": "hi", "previous_response_id": "resp_1"}))
            .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("previous_response_id"));
        let e = parse(&json!({"model": "m", "input": [{"type": "item_reference", "id": "x"}]}))
            .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("input[0].type"));
        let e = parse(&json!({"model": "m", "input": []})).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("input"));
    }

    #[test]
    fn the_stream_ends_with_the_whole_response() {
        let r = Reply {
            id: "resp_abc".into(),
            created: 1,
            model: "m".into(),
            reasoning: Some("think".into()),
            content: "Hi".into(),
            calls: vec![super::super::chat::ReplyCall {
                id: "call_1".into(),
                name: "ls".into(),
                arguments: json!({}),
            }],
            finish: Finish::ToolCalls,
            prompt_tokens: 3,
            completion_tokens: 4,
            logprobs: Vec::new(),
        };
        let text = stream(&r, false);
        let events: Vec<Value> = text
            .split("\n\n")
            .filter_map(|e| e.split_once("\ndata: "))
            .map(|(_, d)| serde_json::from_str(d).unwrap())
            .collect();
        assert_eq!(events[0]["type"], "response.created");
        let last = events.last().unwrap();
        assert_eq!(last["type"], "response.completed");
        assert_eq!(last["response"], response(&r, false));
        let kinds: Vec<&str> = last["response"]["output"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["reasoning", "message", "function_call"]);
        assert!(
            events
                .iter()
                .enumerate()
                .all(|(i, e)| e["sequence_number"] == i)
        );
    }
}
