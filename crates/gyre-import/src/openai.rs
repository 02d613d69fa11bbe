//! OpenAI-style chat messages, as SWE-agent trajectories, OpenHands' `model_response` and logged
//! vLLM requests hold them: typed, and turned into [`Message`]s and [`Turn`]s.

use serde::Deserialize;
use serde_json::Value;

use super::convo::Turn;
use gyre_engine::record::Source;
use gyre_text::{Message, ToolCall};

/// A chat message (`role`, `content`, tool calls); unknown fields are ignored.
#[derive(Clone, Debug, Deserialize)]
pub struct ChatMessage {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Text, a list of parts, or null.
    #[serde(default)]
    pub content: Content,
    /// Thinking returned separately (vLLM's reasoning parser, litellm).
    #[serde(default)]
    pub reasoning_content: Option<String>,
    /// An assistant message's tool calls.
    #[serde(default)]
    pub tool_calls: Option<Vec<WireCall>>,
    /// A `tool` message's call id.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// SWE-agent's list form of the call id.
    #[serde(default)]
    pub tool_call_ids: Option<Vec<String>>,
}

/// A message's `content`: text, a list of parts, or nothing.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Absent or null.
    #[default]
    None,
    /// Plain text.
    Text(String),
    /// Parts (`{"type": "text", "text": …}`, images, …).
    Parts(Vec<Part>),
}

/// One part of a list `content`.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Part {
    /// A bare string.
    Text(String),
    /// A typed part.
    Typed {
        /// `text`, `image_url`, …
        #[serde(rename = "type")]
        kind: String,
        /// The text of a `text` part.
        #[serde(default)]
        text: Option<String>,
    },
}

impl Content {
    /// The text the model saw: parts joined by newlines, an image as `[image]`, another part
    /// type as `[type]`.
    pub fn text(&self) -> String {
        match self {
            Content::None => String::new(),
            Content::Text(s) => s.clone(),
            Content::Parts(parts) => parts
                .iter()
                .map(|p| match p {
                    Part::Text(s) => s.clone(),
                    Part::Typed { kind, text } => match kind.as_str() {
                        "text" => text.clone().unwrap_or_default(),
                        "image_url" | "image" => "[image]".into(),
                        other => format!("[{other}]"),
                    },
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// A tool call as logged (`{"id", "type": "function", "function": {"name", "arguments"}}`).
#[derive(Clone, Debug, Deserialize)]
pub struct WireCall {
    /// Call id.
    #[serde(default)]
    pub id: Option<String>,
    /// The function called.
    #[serde(default)]
    pub function: Option<Function>,
}

/// The function of a tool call.
#[derive(Clone, Debug, Deserialize)]
pub struct Function {
    /// Function name.
    #[serde(default)]
    pub name: Option<String>,
    /// Arguments: a JSON string (as the API returns them) or an object.
    #[serde(default)]
    pub arguments: Option<Value>,
}

/// Tool calls as the chat template renders them; argument strings holding a JSON object are
/// parsed (templates render objects with `tojson`), a call without an id gets `call_<i>`.
pub fn tool_calls(calls: Option<&[WireCall]>) -> Vec<ToolCall> {
    calls
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let f = c.function.as_ref();
            let args = f
                .and_then(|f| f.arguments.clone())
                .unwrap_or_else(|| Value::Object(Default::default()));
            let arguments = match &args {
                Value::String(s) => match serde_json::from_str::<Value>(s) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => args,
                },
                _ => args,
            };
            ToolCall {
                id: c.id.clone().unwrap_or_else(|| format!("call_{i}")),
                name: f.and_then(|f| f.name.clone()).unwrap_or_default(),
                arguments,
            }
        })
        .collect()
}

impl ChatMessage {
    /// The call id a `tool` message answers (`tool_call_id`, or SWE-agent's `tool_call_ids[0]`).
    pub fn call_id(&self) -> &str {
        self.tool_call_id
            .as_deref()
            .or_else(|| self.tool_call_ids.as_ref()?.first().map(String::as_str))
            .unwrap_or("")
    }

    /// The assistant message as the template renders it (thinking in `reasoning_content`,
    /// empty when not logged so Qwen3-style templates render an empty think block).
    pub fn assistant(&self) -> Message {
        Message {
            role: "assistant".into(),
            content: self.content.text(),
            reasoning_content: Some(self.reasoning_content.clone().unwrap_or_default()),
            tool_calls: tool_calls(self.tool_calls.as_deref()),
            tool_call_id: None,
        }
    }

    /// The message as a turn with the span source of its role; `None` for an unknown role.
    /// `identity` must be unique to the turn within its session.
    pub fn turn(&self, identity: &str) -> Option<Turn> {
        let content = self.content.text();
        let (msg, source) = match self.role.as_str() {
            "system" | "developer" => (Message::new("system", content), Source::System),
            "user" => (Message::new("user", content), Source::User),
            "assistant" => (
                Message {
                    reasoning_content: self.reasoning_content.clone(),
                    ..self.assistant()
                },
                Source::Assistant,
            ),
            "tool" | "function" => (Message::tool(self.call_id(), content), Source::Tool),
            _ => return None,
        };
        Some(Turn::new(identity, msg, source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_in_their_forms() {
        let m: ChatMessage = serde_json::from_value(serde_json::json!({
            "role": "assistant",
            "content": [{"type": "text", "text": "a"}, {"type": "image_url"}, "b"],
            "tool_calls": [{"id": "c1", "type": "function",
                            "function": {"name": "f", "arguments": "{\"x\": 1}"}},
                           {"function": {"name": "g", "arguments": "not json"}}]
        }))
        .unwrap();
        let msg = m.assistant();
        assert_eq!(msg.content, "a\n[image]\nb");
        assert_eq!(msg.tool_calls[0].arguments, serde_json::json!({"x": 1}));
        assert_eq!(msg.tool_calls[1].id, "call_1");
        assert_eq!(msg.tool_calls[1].arguments, "not json");
        let t: ChatMessage = serde_json::from_value(
            serde_json::json!({"role": "tool", "content": null, "tool_call_ids": ["c9"]}),
        )
        .unwrap();
        assert_eq!(t.turn("x").unwrap().msg.tool_call_id.as_deref(), Some("c9"));
        let odd: ChatMessage =
            serde_json::from_value(serde_json::json!({"role": "critic", "content": "x"})).unwrap();
        assert!(odd.turn("x").is_none());
    }
}
