//! OpenAI Chat Completions: requests in, answers and errors out (JSON, or server-sent events
//! shaped as the official clients expect: `chat.completion.chunk` objects, then `[DONE]`).

use serde_json::{Map, Value, json};

use super::chat::{
    ApiError, ChatRequest, ErrorKind, Finish, Reply, Sampling, Turn, flag, opt_f64, opt_i64,
    opt_u64, stop_list, text_of,
};
use gyre_text::{Message, ToolCall};

/// Reads a Chat Completions request body.
pub fn parse(body: &Value) -> Result<ChatRequest, ApiError> {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid("model", "model is required"))?
        .to_owned();
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| ApiError::invalid("messages", "messages must be a list"))?;
    if messages.is_empty() {
        return Err(ApiError::invalid("messages", "messages must not be empty"));
    }
    let turns = messages
        .iter()
        .enumerate()
        .map(|(i, m)| message(m, i).map(Turn::of))
        .collect::<Result<Vec<_>, _>>()?;
    let tools = match body.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(t)) => t.clone(),
        Some(_) => return Err(ApiError::invalid("tools", "tools must be a list")),
    };
    if opt_u64(body, "n")?.is_some_and(|n| n != 1) {
        return Err(ApiError::invalid(
            "n",
            "n must be 1: each sample is its own recorded request",
        ));
    }
    let logprobs = flag(body, "logprobs")?;
    if opt_u64(body, "top_logprobs")?.is_some_and(|k| k > 0) {
        return Err(ApiError::invalid(
            "top_logprobs",
            "top_logprobs is not supported: the proxy asks the upstream for the sampled \
             token's log-prob only (logprobs: true alone returns those)",
        ));
    }
    let stream = flag(body, "stream")?;
    let include_usage = body
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let enable_thinking = body
        .pointer("/chat_template_kwargs/enable_thinking")
        .and_then(Value::as_bool);
    // vLLM's extension: the last message is an assistant turn to continue.
    let prefill = flag(body, "continue_final_message")?;
    if prefill
        && !turns
            .last()
            .is_some_and(|t| t.msg.role == "assistant" && !t.msg.content.trim().is_empty())
    {
        return Err(ApiError::invalid(
            "continue_final_message",
            "continue_final_message needs the last message to be an assistant message with text",
        ));
    }
    let mut meta = Map::new();
    if prefill {
        meta.insert("prefill".into(), true.into());
    }
    Ok(ChatRequest {
        model,
        turns,
        tools,
        sampling: sampling(
            body,
            match opt_u64(body, "max_completion_tokens")? {
                Some(n) => Some(n),
                None => opt_u64(body, "max_tokens")?,
            },
        )?,
        stream,
        include_usage,
        logprobs,
        enable_thinking,
        session: None,
        meta,
        prefill,
    })
}

/// The sampling settings of an OpenAI body (Chat Completions or Responses, which name the
/// token limit differently: `max_tokens` is given).
pub fn sampling(body: &Value, max_tokens: Option<u64>) -> Result<Sampling, ApiError> {
    Ok(Sampling {
        max_tokens,
        temperature: opt_f64(body, "temperature")?,
        top_p: opt_f64(body, "top_p")?,
        top_k: opt_i64(body, "top_k")?,
        min_p: opt_f64(body, "min_p")?,
        repetition_penalty: opt_f64(body, "repetition_penalty")?,
        stop: stop_list(body.get("stop"), "stop")?,
        seed: opt_i64(body, "seed")?,
        presence_penalty: opt_f64(body, "presence_penalty")?,
        frequency_penalty: opt_f64(body, "frequency_penalty")?,
    })
}

fn message(m: &Value, i: usize) -> Result<Message, ApiError> {
    let at = |k: &str| format!("messages[{i}].{k}");
    let role = m
        .get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid(&at("role"), "role is required"))?;
    let content = text_of(m.get("content"), &at("content"))?;
    match role {
        "system" | "developer" => Ok(Message::new("system", content)),
        "user" => Ok(Message::new("user", content)),
        "tool" => {
            let id = m
                .get("tool_call_id")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    ApiError::invalid(&at("tool_call_id"), "tool_call_id is required")
                })?;
            Ok(Message::tool(id, content))
        }
        "assistant" => {
            let reasoning = m
                .get("reasoning_content")
                .or_else(|| m.get("reasoning"))
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
                .map(str::to_owned);
            let calls = match m.get("tool_calls") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(calls)) => calls
                    .iter()
                    .enumerate()
                    .map(|(j, c)| tool_call(c, &at(&format!("tool_calls[{j}]"))))
                    .collect::<Result<_, _>>()?,
                Some(_) => {
                    return Err(ApiError::invalid(
                        &at("tool_calls"),
                        "tool_calls must be a list",
                    ));
                }
            };
            Ok(Message {
                reasoning_content: reasoning,
                tool_calls: calls,
                ..Message::new("assistant", content)
            })
        }
        other => Err(ApiError::invalid(
            &at("role"),
            format!("role {other:?} is not supported"),
        )),
    }
}

fn tool_call(c: &Value, at: &str) -> Result<ToolCall, ApiError> {
    let id = c
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid(&format!("{at}.id"), "the call id is required"))?;
    let f = c
        .get("function")
        .ok_or_else(|| ApiError::invalid(&format!("{at}.function"), "function is required"))?;
    let name = f
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid(&format!("{at}.function.name"), "name is required"))?;
    // Arguments come as a JSON string; the template renders them as an object when they parse.
    let arguments = match f.get("arguments") {
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => v,
            _ => Value::String(s.clone()),
        },
        Some(v @ Value::Object(_)) => v.clone(),
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(_) => {
            return Err(ApiError::invalid(
                &format!("{at}.function.arguments"),
                "arguments must be a JSON string",
            ));
        }
    };
    Ok(ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments,
    })
}

fn finish_reason(f: &Finish) -> &'static str {
    match f {
        Finish::Stop | Finish::StopSequence(_) => "stop",
        Finish::Length => "length",
        Finish::ToolCalls => "tool_calls",
    }
}

fn usage(r: &Reply) -> Value {
    json!({
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "total_tokens": r.prompt_tokens + r.completion_tokens,
    })
}

fn logprobs(r: &Reply, want: bool) -> Value {
    if !want {
        return Value::Null;
    }
    let content: Vec<Value> = r
        .logprobs
        .iter()
        .map(|t| {
            json!({"token": t.token, "logprob": t.logprob, "bytes": t.bytes, "top_logprobs": []})
        })
        .collect();
    json!({ "content": content, "refusal": null })
}

fn calls_json(r: &Reply, with_index: bool) -> Vec<Value> {
    r.calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut v = json!({
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments.to_string()},
            });
            if with_index {
                v["index"] = i.into();
            }
            v
        })
        .collect()
}

/// The `chat.completion` object.
pub fn response(r: &Reply, want_logprobs: bool) -> Value {
    let mut message = json!({
        "role": "assistant",
        "content": if r.content.is_empty() && !r.calls.is_empty() { Value::Null } else { r.content.clone().into() },
    });
    if let Some(reasoning) = &r.reasoning {
        message["reasoning_content"] = reasoning.clone().into();
    }
    if !r.calls.is_empty() {
        message["tool_calls"] = calls_json(r, false).into();
    }
    json!({
        "id": r.id,
        "object": "chat.completion",
        "created": r.created,
        "model": r.model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": logprobs(r, want_logprobs),
            "finish_reason": finish_reason(&r.finish),
        }],
        "usage": usage(r),
    })
}

/// The answer as server-sent events: the role, the thinking, the text, each tool call whole,
/// the finish reason, the usage (when asked), then `[DONE]`.
pub fn stream(r: &Reply, want_logprobs: bool, include_usage: bool) -> String {
    let chunk = |delta: Value, finish: Option<&str>, lp: Value| {
        json!({
            "id": r.id,
            "object": "chat.completion.chunk",
            "created": r.created,
            "model": r.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": lp, "finish_reason": finish}],
        })
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        None,
        Value::Null,
    )];
    if let Some(reasoning) = &r.reasoning {
        events.push(chunk(
            json!({"reasoning_content": reasoning}),
            None,
            Value::Null,
        ));
    }
    if !r.content.is_empty() || want_logprobs {
        events.push(chunk(
            json!({"content": r.content}),
            None,
            logprobs(r, want_logprobs),
        ));
    }
    for call in calls_json(r, true) {
        events.push(chunk(json!({"tool_calls": [call]}), None, Value::Null));
    }
    events.push(chunk(
        json!({}),
        Some(finish_reason(&r.finish)),
        Value::Null,
    ));
    if include_usage {
        events.push(json!({
            "id": r.id,
            "object": "chat.completion.chunk",
            "created": r.created,
            "model": r.model,
            "choices": [],
            "usage": usage(r),
        }));
    }
    let mut out = String::new();
    for e in events {
        out.push_str("data: ");
        out.push_str(&e.to_string());
        out.push_str("\n\n");
    }
    out.push_str("data: [DONE]\n\n");
    out
}

/// The error body: `{"error": {"message", "type", "param", "code"}}`.
pub fn error(e: &ApiError) -> Value {
    let kind = match e.kind {
        ErrorKind::InvalidRequest => "invalid_request_error",
        ErrorKind::Unauthorized => "authentication_error",
        ErrorKind::Forbidden => "permission_error",
        ErrorKind::NotFound => "not_found_error",
        ErrorKind::Conflict => "conflict_error",
        ErrorKind::TooLarge => "request_too_large",
        ErrorKind::Upstream => "upstream_error",
        ErrorKind::Timeout => "timeout_error",
        ErrorKind::Internal => "server_error",
        ErrorKind::Unavailable => "service_unavailable",
    };
    json!({"error": {"message": e.message, "type": kind, "param": e.param, "code": null}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{ReplyCall, TokenLogprob};

    fn reply() -> Reply {
        Reply {
            id: "chatcmpl-1".into(),
            created: 7,
            model: "m".into(),
            reasoning: Some("think".into()),
            content: "Hi".into(),
            calls: vec![ReplyCall {
                id: "call_1".into(),
                name: "bash".into(),
                arguments: json!({"cmd": "ls"}),
            }],
            finish: Finish::ToolCalls,
            prompt_tokens: 3,
            completion_tokens: 2,
            logprobs: vec![TokenLogprob {
                token: "Hi".into(),
                bytes: b"Hi".to_vec(),
                logprob: -0.5,
            }],
        }
    }

    #[test]
    fn a_request_with_a_compact_tool_call_is_read() {
        let body = json!({"model": "m", "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "bash", "arguments": "{\"cmd\":\"ls\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"}],
            "max_completion_tokens": 9, "stop": "END"});
        let r = parse(&body).unwrap();
        assert_eq!(r.turns[0].msg.role, "system");
        assert_eq!(r.turns[2].msg.tool_calls[0].arguments, json!({"cmd": "ls"}));
        assert_eq!(r.turns[3].msg.tool_call_id.as_deref(), Some("call_1"));
        assert_eq!(r.sampling.max_tokens, Some(9));
        assert_eq!(r.sampling.stop, ["END"]);
        let bad = json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "x"}}]}]});
        assert_eq!(
            parse(&bad).unwrap_err().param.as_deref(),
            Some("messages[0].content[0].type")
        );
        assert!(parse(&json!({"model": "m", "messages": [], "n": 2})).is_err());
    }

    #[test]
    fn top_logprobs_is_refused_by_name_and_zero_is_the_sampled_token_only() {
        let ask = |k: u64| {
            parse(
                &json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                "logprobs": true, "top_logprobs": k, "min_p": 0.1, "repetition_penalty": 1.2}),
            )
        };
        let e = ask(3).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidRequest);
        assert_eq!(e.param.as_deref(), Some("top_logprobs"));
        let r = ask(0).unwrap();
        assert!(r.logprobs);
        assert_eq!(
            (r.sampling.min_p, r.sampling.repetition_penalty),
            (Some(0.1), Some(1.2))
        );
    }

    #[test]
    fn streamed_chunks_add_up_to_the_response() {
        let r = reply();
        let text = stream(&r, true, true);
        assert!(text.ends_with("data: [DONE]\n\n"));
        let chunks: Vec<Value> = text
            .split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        let content: String = chunks
            .iter()
            .filter_map(|c| c.pointer("/choices/0/delta/content")?.as_str())
            .collect();
        assert_eq!(content, "Hi");
        let call = chunks
            .iter()
            .find_map(|c| c.pointer("/choices/0/delta/tool_calls/0"))
            .unwrap();
        assert_eq!(call["function"]["arguments"], r#"{"cmd":"ls"}"#);
        assert_eq!(chunks.last().unwrap()["usage"]["total_tokens"], 5);
        let whole = response(&r, false);
        assert_eq!(whole["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(whole["choices"][0]["message"]["reasoning_content"], "think");
    }
}
