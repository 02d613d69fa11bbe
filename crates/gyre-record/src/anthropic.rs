//! Anthropic Messages: requests in, answers and errors out (JSON, or the event stream the
//! official clients and Claude Code read: `message_start`, one `content_block_*` triple per
//! block, `message_delta`, `message_stop`).

use serde_json::{Map, Value, json};

use super::chat::{
    ApiError, ChatRequest, ErrorKind, Finish, Reply, Sampling, Turn, flag, opt_f64, opt_i64,
    opt_u64, stop_list, text_of,
};
use gyre_text::{Message, ToolCall};

/// Reads a Messages request body.
pub fn parse(body: &Value) -> Result<ChatRequest, ApiError> {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid("model", "model is required"))?
        .to_owned();
    let mut turns = Vec::new();
    let mut meta = Map::new();
    let (system, dropped) = system_of(body.get("system"))?;
    if !dropped.is_empty() {
        meta.insert("dropped_system_blocks".into(), dropped.into());
    }
    if !system.is_empty() {
        turns.push(Turn::of(Message::new("system", system)));
    }
    let mut placeholders = Vec::new();
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| ApiError::invalid("messages", "messages must be a list"))?;
    if messages.is_empty() {
        return Err(ApiError::invalid("messages", "messages must not be empty"));
    }
    for (i, m) in messages.iter().enumerate() {
        message(m, i, &mut turns, &mut placeholders)?;
    }
    if !placeholders.is_empty() {
        meta.insert("placeholders".into(), placeholders.into());
    }
    let prefill = messages
        .last()
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str)
        == Some("assistant");
    if prefill {
        check_prefill(turns.last(), messages.len() - 1)?;
        meta.insert("prefill".into(), true.into());
    }
    let tools = match body.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(t)) => t.iter().filter_map(tool).collect(),
        Some(_) => return Err(ApiError::invalid("tools", "tools must be a list")),
    };
    let enable_thinking = match body.pointer("/thinking/type").and_then(Value::as_str) {
        Some("enabled") => Some(true),
        Some("disabled") => Some(false),
        _ => None,
    };
    let session = body
        .pointer("/metadata/user_id")
        .and_then(Value::as_str)
        .and_then(session_of);
    Ok(ChatRequest {
        model,
        turns,
        tools,
        sampling: Sampling {
            max_tokens: opt_u64(body, "max_tokens")?,
            temperature: opt_f64(body, "temperature")?,
            top_p: opt_f64(body, "top_p")?,
            top_k: opt_i64(body, "top_k")?,
            // The Messages API has no min-p or penalties.
            min_p: None,
            repetition_penalty: None,
            stop: stop_list(body.get("stop_sequences"), "stop_sequences")?,
            seed: None,
            presence_penalty: None,
            frequency_penalty: None,
        },
        stream: flag(body, "stream")?,
        include_usage: false,
        logprobs: false,
        enable_thinking,
        session,
        meta,
        prefill,
    })
}

/// A final assistant message is a prefill the model continues (the title call's `{`): it must
/// have text to continue, without trailing whitespace (as the Messages API requires) and
/// without tool calls.
fn check_prefill(last: Option<&Turn>, i: usize) -> Result<(), ApiError> {
    let at = format!("messages[{i}].content");
    let Some(msg) = last.map(|t| &t.msg).filter(|m| m.role == "assistant") else {
        return Err(ApiError::invalid(
            &at,
            "the final assistant message is empty",
        ));
    };
    if !msg.tool_calls.is_empty() {
        return Err(ApiError::invalid(
            &at,
            "a final assistant message is continued as a prefill, so it cannot hold tool_use \
             blocks (send their tool_result in a user message)",
        ));
    }
    if msg.content.trim().is_empty() {
        return Err(ApiError::invalid(
            &at,
            "a final assistant message (a prefill) needs text for the model to continue",
        ));
    }
    if msg.content.trim_end() != msg.content {
        return Err(ApiError::invalid(
            &at,
            "final assistant content cannot end with trailing whitespace",
        ));
    }
    Ok(())
}

/// What Claude Code (2.1.29 and later) puts as `system[0]`: a per-request hash (`cch=…`) that
/// would make every request a new context. Dropped before rendering.
const BILLING_HEADER: &str = "x-anthropic-billing-header:";

/// The system text, and the names of the blocks dropped from it (the billing header).
fn system_of(system: Option<&Value>) -> Result<(String, Vec<Value>), ApiError> {
    let Some(Value::Array(blocks)) = system else {
        return Ok((text_of(system, "system")?, Vec::new()));
    };
    let billing = |b: &Value| {
        b.get("type").and_then(Value::as_str) == Some("text")
            && b.get("text")
                .and_then(Value::as_str)
                .is_some_and(|t| t.trim_start().starts_with(BILLING_HEADER))
    };
    let dropped = blocks.iter().filter(|b| billing(b)).count();
    let kept: Vec<Value> = blocks.iter().filter(|b| !billing(b)).cloned().collect();
    let text = text_of(Some(&Value::Array(kept)), "system")?;
    Ok((
        text,
        vec![Value::from("x-anthropic-billing-header"); dropped],
    ))
}

/// The text the policy sees for an image or a document block at `at` (it is fed text only), and
/// a note of it for the record's `meta.placeholders`; `None` for any other block.
fn placeholder(b: &Value, at: &str, notes: &mut Vec<Value>) -> Option<String> {
    let kind = b.get("type").and_then(Value::as_str)?;
    if kind != "image" && kind != "document" {
        return None;
    }
    let media = b
        .pointer("/source/media_type")
        .and_then(Value::as_str)
        .unwrap_or("unknown type");
    notes.push(json!({"at": at, "type": kind, "media_type": media}));
    Some(format!(
        "[{kind} omitted: {media}; this model reads text only]"
    ))
}

/// A `tool_result`'s content as text: text parts as they are, images and documents as
/// placeholders.
fn tool_result_text(
    content: Option<&Value>,
    at: &str,
    notes: &mut Vec<Value>,
) -> Result<String, ApiError> {
    let Some(Value::Array(parts)) = content else {
        return text_of(content, at);
    };
    let mut out = String::new();
    for (k, p) in parts.iter().enumerate() {
        let pat = format!("{at}[{k}]");
        if let Some(text) = placeholder(p, &pat, notes) {
            out.push_str(&text);
            continue;
        }
        match p.get("type").and_then(Value::as_str) {
            Some("text") => out.push_str(
                p.get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ApiError::invalid(&format!("{pat}.text"), "text is missing"))?,
            ),
            other => {
                return Err(ApiError::invalid(
                    &format!("{pat}.type"),
                    format!(
                        "content part type {} is not supported in a tool result",
                        other.map_or("(none)".into(), |t| format!("{t:?}"))
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// The Claude Code session in `metadata.user_id`: a JSON object string with `session_id`
/// (2.1.78 and later), else the `_session_<uuid>` end of `user_<hash>_account_<uuid>_session_<uuid>`.
fn session_of(user_id: &str) -> Option<String> {
    let session = if user_id.trim_start().starts_with('{') {
        let v: Value = serde_json::from_str(user_id).ok()?;
        v.get("session_id")?.as_str()?.to_owned()
    } else {
        user_id.rsplit_once("session_")?.1.to_owned()
    };
    Some(session).filter(|s| !s.is_empty())
}

/// A tool in OpenAI function form (server tools without an input schema are left out: the
/// policy cannot call them).
fn tool(t: &Value) -> Option<Value> {
    let name = t.get("name")?.as_str()?;
    let schema = t.get("input_schema")?;
    let mut function = Map::new();
    function.insert("name".into(), name.into());
    if let Some(d) = t.get("description") {
        function.insert("description".into(), d.clone());
    }
    function.insert("parameters".into(), schema.clone());
    Some(json!({"type": "function", "function": function}))
}

fn blocks(content: Option<&Value>, at: &str) -> Result<Vec<Value>, ApiError> {
    match content {
        Some(Value::String(s)) => Ok(vec![json!({"type": "text", "text": s})]),
        Some(Value::Array(b)) => Ok(b.clone()),
        _ => Err(ApiError::invalid(
            at,
            "content must be a string or a list of blocks",
        )),
    }
}

fn message(
    m: &Value,
    i: usize,
    turns: &mut Vec<Turn>,
    notes: &mut Vec<Value>,
) -> Result<(), ApiError> {
    let at = |k: &str| format!("messages[{i}].{k}");
    let role = m.get("role").and_then(Value::as_str);
    let blocks = blocks(m.get("content"), &at("content"))?;
    match role {
        Some("user") => {
            let mut text: Option<String> = None;
            let flush = |text: &mut Option<String>, turns: &mut Vec<Turn>| {
                if let Some(t) = text.take() {
                    turns.push(Turn::of(Message::new("user", t)));
                }
            };
            for (j, b) in blocks.iter().enumerate() {
                let bat = at(&format!("content[{j}]"));
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let t = b.get("text").and_then(Value::as_str).unwrap_or_default();
                        match &mut text {
                            Some(acc) => {
                                acc.push('\n');
                                acc.push_str(t);
                            }
                            None => text = Some(t.to_owned()),
                        }
                    }
                    Some("image" | "document") => {
                        let t = placeholder(b, &bat, notes).unwrap_or_default();
                        match &mut text {
                            Some(acc) => {
                                acc.push('\n');
                                acc.push_str(&t);
                            }
                            None => text = Some(t),
                        }
                    }
                    Some("tool_result") => {
                        flush(&mut text, turns);
                        let id = b
                            .get("tool_use_id")
                            .and_then(Value::as_str)
                            .ok_or_else(|| {
                                ApiError::invalid(
                                    &format!("{bat}.tool_use_id"),
                                    "tool_use_id is required",
                                )
                            })?;
                        let content =
                            tool_result_text(b.get("content"), &format!("{bat}.content"), notes)?;
                        turns.push(Turn::of(Message::tool(id, content)));
                    }
                    other => {
                        return Err(ApiError::invalid(
                            &format!("{bat}.type"),
                            format!(
                                "block type {} is not supported in user turns: gyre record \
                                 feeds the policy text only",
                                other.map_or("(none)".into(), |t| format!("{t:?}"))
                            ),
                        ));
                    }
                }
            }
            flush(&mut text, turns);
            Ok(())
        }
        Some("assistant") => {
            let mut msg = Message::new("assistant", "");
            let mut texts: Vec<&str> = Vec::new();
            for (j, b) in blocks.iter().enumerate() {
                let bat = at(&format!("content[{j}]"));
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        texts.push(b.get("text").and_then(Value::as_str).unwrap_or_default())
                    }
                    Some("thinking") => {
                        let t = b
                            .get("thinking")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        if !t.is_empty() {
                            msg.reasoning_content = Some(t.to_owned());
                        }
                    }
                    Some("redacted_thinking") => {}
                    Some("tool_use") => {
                        let id = b.get("id").and_then(Value::as_str).ok_or_else(|| {
                            ApiError::invalid(&format!("{bat}.id"), "the tool_use id is required")
                        })?;
                        let name = b.get("name").and_then(Value::as_str).ok_or_else(|| {
                            ApiError::invalid(&format!("{bat}.name"), "the tool name is required")
                        })?;
                        msg.tool_calls.push(ToolCall {
                            id: id.to_owned(),
                            name: name.to_owned(),
                            arguments: b.get("input").cloned().unwrap_or(json!({})),
                        });
                    }
                    other => {
                        return Err(ApiError::invalid(
                            &format!("{bat}.type"),
                            format!(
                                "block type {} is not supported in assistant turns",
                                other.map_or("(none)".into(), |t| format!("{t:?}"))
                            ),
                        ));
                    }
                }
            }
            msg.content = texts.join("\n");
            turns.push(Turn::of(msg));
            Ok(())
        }
        _ => Err(ApiError::invalid(
            &at("role"),
            "role must be \"user\" or \"assistant\"",
        )),
    }
}

fn stop_reason(f: &Finish) -> &'static str {
    match f {
        Finish::Stop => "end_turn",
        Finish::StopSequence(_) => "stop_sequence",
        Finish::Length => "max_tokens",
        Finish::ToolCalls => "tool_use",
    }
}

fn stop_sequence(f: &Finish) -> Value {
    match f {
        Finish::StopSequence(s) => s.clone().into(),
        _ => Value::Null,
    }
}

fn content_blocks(r: &Reply) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(t) = &r.reasoning {
        out.push(json!({"type": "thinking", "thinking": t, "signature": ""}));
    }
    if !r.content.is_empty() {
        out.push(json!({"type": "text", "text": r.content}));
    }
    for c in &r.calls {
        out.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}));
    }
    out
}

/// The `message` object.
pub fn response(r: &Reply) -> Value {
    json!({
        "id": r.id,
        "type": "message",
        "role": "assistant",
        "model": r.model,
        "content": content_blocks(r),
        "stop_reason": stop_reason(&r.finish),
        "stop_sequence": stop_sequence(&r.finish),
        "usage": {"input_tokens": r.prompt_tokens, "output_tokens": r.completion_tokens},
    })
}

/// The answer as the Messages event stream.
pub fn stream(r: &Reply) -> String {
    let mut out = String::new();
    let mut event = |name: &str, data: Value| {
        out.push_str("event: ");
        out.push_str(name);
        out.push_str("\ndata: ");
        out.push_str(&data.to_string());
        out.push_str("\n\n");
    };
    event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": r.id, "type": "message", "role": "assistant", "model": r.model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": r.prompt_tokens, "output_tokens": 1},
        }}),
    );
    for (index, block) in content_blocks(r).into_iter().enumerate() {
        let (start, delta) = match block["type"].as_str() {
            Some("thinking") => (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                vec![
                    json!({"type": "thinking_delta", "thinking": block["thinking"]}),
                    json!({"type": "signature_delta", "signature": ""}),
                ],
            ),
            Some("text") => (
                json!({"type": "text", "text": ""}),
                vec![json!({"type": "text_delta", "text": block["text"]})],
            ),
            _ => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                vec![
                    json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
                ],
            ),
        };
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        );
        for d in delta {
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": d}),
            );
        }
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    event(
        "message_delta",
        json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason(&r.finish), "stop_sequence": stop_sequence(&r.finish)},
            "usage": {"output_tokens": r.completion_tokens}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    out
}

/// The error body: `{"type": "error", "error": {"type", "message"}}`.
pub fn error(e: &ApiError) -> Value {
    let kind = match e.kind {
        ErrorKind::InvalidRequest | ErrorKind::Conflict => "invalid_request_error",
        ErrorKind::TooLarge => "request_too_large",
        ErrorKind::Unauthorized => "authentication_error",
        ErrorKind::Forbidden => "permission_error",
        ErrorKind::NotFound => "not_found_error",
        ErrorKind::Upstream | ErrorKind::Internal => "api_error",
        ErrorKind::Timeout => "timeout_error",
        ErrorKind::Unavailable => "overloaded_error",
    };
    let message = match &e.param {
        Some(p) => format!("{p}: {}", e.message),
        None => e.message.clone(),
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::ReplyCall;

    #[test]
    fn claude_codes_billing_header_is_dropped_and_images_become_placeholders() {
        let body = json!({
            "model": "m", "max_tokens": 32000,
            "system": [
                {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.205; cch=9f1e2;"},
                {"type": "text", "text": "You are Claude Code."},
            ],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "look"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                    {"type": "text", "text": "page 1"},
                    {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "AA=="}}]}]},
            ],
        });
        let r = parse(&body).unwrap();
        assert_eq!(r.turns[0].msg.content, "You are Claude Code.");
        assert_eq!(
            r.meta["dropped_system_blocks"],
            json!(["x-anthropic-billing-header"])
        );
        assert_eq!(
            r.turns[1].msg.content,
            "look\n[image omitted: image/png; this model reads text only]"
        );
        assert_eq!(
            r.turns[3].msg.content,
            "page 1[document omitted: application/pdf; this model reads text only]"
        );
        assert_eq!(
            r.meta["placeholders"],
            json!([
                {"at": "messages[0].content[1]", "type": "image", "media_type": "image/png"},
                {"at": "messages[2].content[0].content[1]", "type": "document",
                 "media_type": "application/pdf"},
            ])
        );
        // Other parts of a tool result are still refused, by path.
        let mut bad = body.clone();
        bad["messages"][2]["content"][0]["content"][0] = json!({"type": "audio"});
        assert_eq!(
            parse(&bad).unwrap_err().param.as_deref(),
            Some("messages[2].content[0].content[0].type")
        );
    }

    #[test]
    fn tool_results_become_tool_messages_and_claude_code_sessions_are_found() {
        let body = json!({"model": "claude", "max_tokens": 100, "system": [{"type": "text", "text": "S"}],
            "metadata": {"user_id": "user_ab_account_cd_session_0f9f-11"},
            "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}},
                      {"type": "web_search_20250305", "name": "web_search"}],
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"},
                    {"type": "text", "text": "ok"},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"cmd": "ls"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "a.txt"}]}, {"type": "text", "text": "next"}]}]});
        let r = parse(&body).unwrap();
        let roles: Vec<&str> = r.turns.iter().map(|t| t.msg.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
        assert_eq!(r.turns[2].msg.reasoning_content.as_deref(), Some("t"));
        assert_eq!(r.turns[3].msg.tool_call_id.as_deref(), Some("toolu_1"));
        assert_eq!(r.tools.len(), 1);
        assert_eq!(r.session.as_deref(), Some("0f9f-11"));
        // Claude Code 2.1.78+: a JSON object as a string.
        let id = r#"{"device_id":"5ab1","account_uuid":"","session_id":"54c1-77"}"#;
        assert_eq!(session_of(id).as_deref(), Some("54c1-77"));
        assert_eq!(session_of(r#"{"device_id":"5ab1"}"#), None);
        assert_eq!(session_of("{not json"), None);
        assert_eq!(r.sampling.max_tokens, Some(100));
    }

    #[test]
    fn the_stream_carries_every_block() {
        let r = Reply {
            id: "msg_1".into(),
            created: 0,
            model: "m".into(),
            reasoning: None,
            content: "Hi".into(),
            calls: vec![ReplyCall {
                id: "toolu_1".into(),
                name: "Bash".into(),
                arguments: json!({"cmd": "ls"}),
            }],
            finish: Finish::ToolCalls,
            prompt_tokens: 4,
            completion_tokens: 3,
            logprobs: Vec::new(),
        };
        let s = stream(&r);
        assert!(s.starts_with("event: message_start\n"));
        assert!(s.contains(r#""partial_json":"{\"cmd\":\"ls\"}""#));
        assert!(s.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
        assert_eq!(response(&r)["stop_reason"], "tool_use");
    }
}
