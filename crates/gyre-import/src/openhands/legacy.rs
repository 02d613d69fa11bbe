//! OpenHands before function calling (CodeAct's text actions, 2024: the issue resolver's
//! `output.jsonl`, early evaluation histories). Two things differ from today's events:
//! - an event may be **flat**: `{"command": …, "thought": …, "action": "run"}`, its arguments
//!   beside `action` instead of under `args` (observations likewise, without `extras`), and
//!   without `source`, `id` or `timestamp`;
//! - the model answered in text, and OpenHands kept the **parsed action**, not the text: a
//!   later prompt showed it again as CodeAct renders an action (`thought`, then the command in
//!   `<execute_bash>` tags), and an observation as a user message starting `OBSERVATION:`.
//!
//! The contexts are rebuilt the way CodeAct showed them; the sampled text itself is not in the
//! log, so those responses are never targets (docs/import.md#openhands).

use serde_json::{Map, Value};

/// Why a response rebuilt from a parsed text action is not a target.
pub(super) const NOT_SAMPLED_TEXT: &str = "OpenHands kept CodeAct's parsed action, not the \
     model's text: rebuilt as CodeAct showed it in later prompts";

/// Keys every event has whatever its kind; the rest of a flat event is its arguments.
const EVENT_KEYS: &[&str] = &[
    "id",
    "timestamp",
    "source",
    "message",
    "cause",
    "action",
    "observation",
    "content",
    "tool_call_metadata",
    "llm_metrics",
];

/// A flat event in today's shape: an action's fields under `args`, an observation's under
/// `extras`, and an action without `source` given the one OpenHands would have written (a
/// message is the user's unless it waits for an answer — CodeAct's own messages do — and
/// every other action is the agent's). An event already in today's shape is left alone.
pub(super) fn lift(v: &mut Value) {
    let Some(o) = v.as_object_mut() else {
        return;
    };
    // `args: null` is no arguments: the flat fields are still the action's.
    let absent = |k: &str| o.get(k).is_none_or(Value::is_null);
    let flat_action = o.contains_key("action") && absent("args");
    let flat_observation = o.contains_key("observation") && absent("extras");
    if !(flat_action || flat_observation) {
        return;
    }
    let fields: Map<String, Value> = o
        .iter()
        .filter(|(k, _)| {
            !EVENT_KEYS.contains(&k.as_str()) && !matches!(k.as_str(), "args" | "extras")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    o.retain(|k, _| EVENT_KEYS.contains(&k.as_str()));
    if flat_action {
        if !o.contains_key("source") {
            let asks = fields.get("wait_for_response") == Some(&Value::Bool(true));
            let user = o.get("action").and_then(Value::as_str) == Some("message") && !asks;
            o.insert(
                "source".into(),
                Value::from(if user { "user" } else { "agent" }),
            );
        }
        // A message's text is its `content` (kept at the top level above).
        let mut args = fields;
        if let Some(c) = o.remove("content") {
            args.insert("content".into(), c);
        }
        o.insert("args".into(), Value::Object(args));
    } else {
        o.insert("extras".into(), Value::Object(fields));
    }
}

/// The text CodeAct showed for an agent's parsed action in later prompts, for the actions
/// that were text (`None` for any other).
pub(super) fn action_text(action: &str, args: &Value) -> Option<String> {
    let s = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
    let tagged = |tag: &str, body: &str| format!("{}\n<{tag}>\n{body}\n</{tag}>", s("thought"));
    Some(match action {
        "run" => tagged("execute_bash", s("command")),
        "run_ipython" => tagged("execute_ipython", s("code")),
        "browse_interactive" => tagged("execute_browse", s("browser_actions")),
        "delegate" => tagged(
            "execute_browse",
            args.get("inputs")
                .and_then(|i| i.get("task"))
                .and_then(Value::as_str)
                .unwrap_or(""),
        ),
        _ => return None,
    })
}

/// The user message CodeAct made of an observation that answers a text action.
pub(super) fn observation_text(observation: &str, content: &str, extras: &Value) -> String {
    let mut text = format!("OBSERVATION:\n{content}");
    match observation {
        "run" => {
            let n = |k: &str| extras.get(k).map_or_else(String::new, Value::to_string);
            text.push_str(&format!(
                "\n[Command {} finished with exit code {}]",
                n("command_id"),
                n("exit_code")
            ));
        }
        "error" => text.push_str("\n[Error occurred in processing last action]"),
        _ => {}
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flat_events_take_todays_shape_and_a_source() {
        let mut task =
            json!({"content": "Fix it", "wait_for_response": false, "action": "message"});
        lift(&mut task);
        assert_eq!(
            task,
            json!({"action": "message", "source": "user",
                   "args": {"content": "Fix it", "wait_for_response": false}})
        );
        let mut ask =
            json!({"content": "Which file?", "wait_for_response": true, "action": "message"});
        lift(&mut ask);
        assert_eq!(ask["source"], "agent");
        let mut run = json!({"command": "ls", "thought": "Look.", "action": "run"});
        lift(&mut run);
        assert_eq!(run["source"], "agent");
        assert_eq!(run["args"], json!({"command": "ls", "thought": "Look."}));
        let mut obs =
            json!({"content": "a\r\n", "command_id": -1, "exit_code": 0, "observation": "run"});
        lift(&mut obs);
        assert_eq!(
            obs,
            json!({"content": "a\r\n", "observation": "run",
                   "extras": {"command_id": -1, "exit_code": 0}})
        );
        // Today's shape is left alone.
        let today = json!({"source": "agent", "action": "run", "args": {"command": "ls"}});
        let mut same = today.clone();
        lift(&mut same);
        assert_eq!(same, today);
    }

    #[test]
    fn text_actions_and_observations_read_as_codeact_showed_them() {
        let args = json!({"command": "touch LICENSE", "thought": "Create it."});
        assert_eq!(
            action_text("run", &args).unwrap(),
            "Create it.\n<execute_bash>\ntouch LICENSE\n</execute_bash>"
        );
        assert_eq!(
            action_text("run_ipython", &json!({"code": "print(1)", "thought": ""})).unwrap(),
            "\n<execute_ipython>\nprint(1)\n</execute_ipython>"
        );
        assert!(action_text("finish", &json!({})).is_none());
        assert_eq!(
            observation_text("run", "ok", &json!({"command_id": -1, "exit_code": 2})),
            "OBSERVATION:\nok\n[Command -1 finished with exit code 2]"
        );
        assert_eq!(
            observation_text("run_ipython", "1", &json!({})),
            "OBSERVATION:\n1"
        );
    }
}
