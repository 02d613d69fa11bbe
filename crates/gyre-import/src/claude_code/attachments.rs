//! Claude Code 2.1 `attachment` lines: what Claude Code adds to the conversation beside the
//! user's prompt (CLAUDE.md files, skill and agent listings, edited-file notes, hook context,
//! prompts queued while the model worked, background-task results, …).
//!
//! Claude Code turns each attachment into user-side content when it builds the API request:
//! text wrapped in `<system-reminder>` tags, merged into the user message it follows (after that
//! message's tool results), and, for an `@`-mentioned file or folder, a `Read` (or `ls`) call
//! with its result. The log holds the attachment's fields, not Claude Code's own wording around
//! them: gyre writes the logged fields in the same place and structure with a short lead line
//! of its own (docs/import.md#claude-code). Some types are never sent to the model (permission
//! lists, hook bookkeeping); types whose content the log does not hold are named in a warning.

use serde_json::Value;

use gyre_engine::record::Source;

/// What one attachment becomes in the context.
#[derive(Clone, Debug)]
pub(crate) enum Attach {
    /// User-side text (already wrapped in `<system-reminder>`), labelled `source`.
    Text {
        /// The text the model read.
        text: String,
        /// Span source: `user` for prompts the user typed, `tool` for background-task
        /// results, `system` for what the harness adds.
        source: Source,
    },
    /// A harness-made tool call and its result (an `@`-mentioned file or folder).
    Call {
        /// Tool name.
        name: String,
        /// Its input.
        input: Value,
        /// The result the model read.
        result: String,
    },
    /// Claude Code sends nothing to the model for it.
    Silent,
    /// Its content is not in the log (or the type is unknown): not placed, named in a warning.
    Unplaced,
}

/// Types Claude Code never sends to the model.
const SILENT: [&str; 16] = [
    "command_permissions",
    "hook_system_message",
    "hook_cancelled",
    "hook_error_during_execution",
    "hook_non_blocking_error",
    "hook_permission_decision",
    "hook_deferred_tool",
    "edited_image_file",
    "already_read_file",
    "context_tip",
    "structured_output",
    "max_turns_reached",
    "goal_status",
    "context_efficiency",
    "fold_nudge",
    "teammate_shutdown_batch",
];

/// Hook events whose success output Claude Code shows the model.
const SHOWN_HOOKS: [&str; 3] = ["SessionStart", "UserPromptSubmit", "UserPromptExpansion"];

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn scalar(v: &Value, key: &str) -> String {
    match v.get(key) {
        Some(Value::String(x)) => x.clone(),
        Some(Value::Null) | None => String::new(),
        Some(x) => x.to_string(),
    }
}

/// `<system-reminder>` around `text`, as Claude Code wraps every attachment's text.
pub(crate) fn reminder(text: &str) -> String {
    format!("<system-reminder>\n{text}\n</system-reminder>")
}

fn text(body: String, source: Source) -> Attach {
    if body.trim().is_empty() {
        Attach::Silent
    } else {
        Attach::Text {
            text: reminder(&body),
            source,
        }
    }
}

fn harness(body: String) -> Attach {
    text(body, Source::System)
}

/// Text of a prompt: a string, or content blocks (text joined by newlines, images as `[image]`).
fn prompt_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(p)) => p.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| match s(b, "type") {
                "text" => s(b, "text").to_owned(),
                "image" => "[image]".to_owned(),
                other => format!("[{other}]"),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// A file's text as the `Read` tool shows it: each line after its number and a tab.
fn numbered(content: &str, start: u64) -> String {
    content
        .split('\n')
        .enumerate()
        .map(|(i, l)| format!("{}\t{l}", start + i as u64))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the attachment `a` (a line's `attachment` object) becomes.
pub(crate) fn attachment(a: &Value) -> Attach {
    let kind = s(a, "type");
    if SILENT.contains(&kind) {
        return Attach::Silent;
    }
    match kind {
        "nested_memory" => {
            let c = a.get("content").unwrap_or(&Value::Null);
            let path = match s(c, "path") {
                "" => s(a, "path"),
                p => p,
            };
            harness(format!("Contents of {path}:\n\n{}", s(c, "content")))
        }
        "edited_text_file" => {
            let (file, snippet) = (s(a, "filename"), s(a, "snippet"));
            harness(if snippet.is_empty() {
                format!("Note: {file} was modified (the diff is not shown).")
            } else {
                format!(
                    "Note: {file} was modified. The relevant changes (shown with line \
                     numbers):\n{snippet}"
                )
            })
        }
        "skill_listing" => match s(a, "content") {
            "" => Attach::Silent,
            c => harness(format!(
                "The following skills are available for use with the Skill tool:\n\n{c}"
            )),
        },
        "agent_listing_delta" => {
            let mut parts = Vec::new();
            let added = strings(a, "addedLines");
            if !added.is_empty() {
                let lead = if a.get("isInitial").and_then(Value::as_bool) == Some(true) {
                    "Available agent types for the Agent tool:"
                } else {
                    "New agent types are now available for the Agent tool:"
                };
                parts.push(format!("{lead}\n{}", added.join("\n")));
            }
            let removed = strings(a, "removedTypes");
            if !removed.is_empty() {
                let list: Vec<String> = removed.iter().map(|t| format!("- {t}")).collect();
                parts.push(format!(
                    "The following agent types are no longer available:\n{}",
                    list.join("\n")
                ));
            }
            harness(parts.join("\n\n"))
        }
        "deferred_tools_delta" => {
            let mut parts = Vec::new();
            let added = strings(a, "addedLines");
            if !added.is_empty() {
                parts.push(format!(
                    "The following deferred tools are now available (their schemas are not \
                     loaded):\n{}",
                    added.join("\n")
                ));
            }
            let removed = strings(a, "removedNames");
            if !removed.is_empty() {
                parts.push(format!(
                    "The following deferred tools are no longer available:\n{}",
                    removed.join("\n")
                ));
            }
            harness(parts.join("\n\n"))
        }
        "mcp_instructions_delta" => {
            let mut parts = Vec::new();
            let added = strings(a, "addedBlocks");
            if !added.is_empty() {
                parts.push(format!(
                    "# MCP Server Instructions\n\n{}",
                    added.join("\n\n")
                ));
            }
            let removed = strings(a, "removedNames");
            if !removed.is_empty() {
                parts.push(format!(
                    "The following MCP servers have disconnected:\n{}",
                    removed.join("\n")
                ));
            }
            harness(parts.join("\n\n"))
        }
        "task_reminder" => {
            let items: Vec<String> = a
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|t| {
                    format!(
                        "#{}. [{}] {}",
                        scalar(t, "id"),
                        s(t, "status"),
                        s(t, "subject")
                    )
                })
                .collect();
            let mut body = "The task tools haven't been used recently.".to_owned();
            if !items.is_empty() {
                body.push_str(&format!(
                    "\n\nHere are the existing tasks:\n\n{}",
                    items.join("\n")
                ));
            }
            harness(body)
        }
        "todo_reminder" => {
            let items: Vec<String> = a
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, t)| format!("{}. [{}] {}", i + 1, s(t, "status"), s(t, "content")))
                .collect();
            let mut body = "The TodoWrite tool hasn't been used recently.".to_owned();
            if !items.is_empty() {
                body.push_str(&format!(
                    "\n\nHere are the existing contents of your todo list:\n\n[{}]",
                    items.join("\n")
                ));
            }
            harness(body)
        }
        "hook_success" => {
            let content = s(a, "content");
            if !SHOWN_HOOKS.contains(&s(a, "hookEvent")) || content.is_empty() {
                Attach::Silent
            } else {
                harness(format!("{} hook success: {content}", s(a, "hookName")))
            }
        }
        "hook_additional_context" => {
            let lines = strings(a, "content");
            if lines.is_empty() {
                Attach::Silent
            } else {
                harness(format!(
                    "{} hook additional context: {}",
                    s(a, "hookName"),
                    lines.join("\n")
                ))
            }
        }
        "hook_blocking_error" => {
            let e = a.get("blockingError").unwrap_or(&Value::Null);
            harness(format!(
                "{} hook blocking error from command: \"{}\": {}",
                s(a, "hookName"),
                s(e, "command"),
                s(e, "blockingError")
            ))
        }
        "hook_stopped_continuation" => harness(format!(
            "{} hook stopped continuation: {}",
            s(a, "hookName"),
            s(a, "message")
        )),
        "async_hook_response" => {
            let r = a.get("response").unwrap_or(&Value::Null);
            let context = r
                .get("hookSpecificOutput")
                .map(|h| s(h, "additionalContext"))
                .unwrap_or("");
            let parts: Vec<&str> = [s(r, "systemMessage"), context]
                .into_iter()
                .filter(|p| !p.is_empty())
                .collect();
            harness(parts.join("\n\n"))
        }
        "queued_command" => {
            if a.get("renderedByBatchHead").and_then(Value::as_bool) == Some(true) {
                return Attach::Silent;
            }
            let origin = a.get("origin").map(|o| s(o, "kind")).unwrap_or("");
            let notification =
                origin == "task-notification" || s(a, "commandMode") == "task-notification";
            let prompt = prompt_text(a.get("prompt"));
            if notification {
                // A background task (sub-agent, shell) reporting back: a tool's result.
                text(prompt, Source::Tool)
            } else if prompt.trim().is_empty() {
                Attach::Silent
            } else {
                text(
                    format!("The user sent a new message while you were working:\n{prompt}"),
                    Source::User,
                )
            }
        }
        "critical_system_reminder" => harness(s(a, "content").to_owned()),
        "date_change" => harness(format!(
            "The date has changed. Today's date is now {}.",
            s(a, "newDate")
        )),
        "opened_file_in_ide" => harness(format!(
            "The user opened the file {} in the IDE.",
            s(a, "filename")
        )),
        "selected_lines_in_ide" => harness(format!(
            "The user selected the lines {} to {} from {}:\n{}",
            scalar(a, "lineStart"),
            scalar(a, "lineEnd"),
            s(a, "filename"),
            s(a, "content")
        )),
        "compact_file_reference" => harness(format!(
            "Note: {} was read before the last conversation was summarized, but the contents \
             are too large to include.",
            s(a, "filename")
        )),
        "plan_file_reference" => harness(format!(
            "A plan file exists from plan mode at: {}\n\nPlan contents:\n\n{}",
            s(a, "planFilePath"),
            s(a, "planContent")
        )),
        "invoked_skills" => {
            let skills: Vec<String> = a
                .get("skills")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|k| {
                    format!(
                        "### Skill: {}\nPath: {}\n\n{}",
                        s(k, "name"),
                        s(k, "path"),
                        s(k, "content")
                    )
                })
                .collect();
            if skills.is_empty() {
                Attach::Silent
            } else {
                harness(format!(
                    "The following skills were invoked earlier in this session:\n\n{}",
                    skills.join("\n\n---\n\n")
                ))
            }
        }
        "relevant_memories" => {
            let memories: Vec<String> = a
                .get("memories")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|m| {
                    let header = match s(m, "header") {
                        "" => s(m, "path"),
                        h => h,
                    };
                    format!("{header}\n\n{}", s(m, "content"))
                })
                .collect();
            harness(memories.join("\n\n"))
        }
        "task_status" => {
            let (id, desc) = (s(a, "taskId"), s(a, "description"));
            let mut body = match s(a, "status") {
                "killed" => format!("Task \"{desc}\" ({id}) was stopped by the user."),
                "running" => format!("Background agent \"{desc}\" ({id}) is still running."),
                status => format!(
                    "Task {id} (type: {}) (status: {status}) (description: {desc})",
                    s(a, "taskType")
                ),
            };
            for (key, lead) in [("deltaSummary", "Delta"), ("outputFilePath", "Output file")] {
                if let Some(x) = a.get(key).and_then(Value::as_str) {
                    body.push_str(&format!(" {lead}: {x}"));
                }
            }
            text(body, Source::Tool)
        }
        "token_usage" => harness(format!(
            "Token usage: {}/{}; {} remaining",
            scalar(a, "used"),
            scalar(a, "total"),
            scalar(a, "remaining")
        )),
        "budget_usd" => harness(format!(
            "USD budget: ${}/${}; ${} remaining",
            scalar(a, "used"),
            scalar(a, "total"),
            scalar(a, "remaining")
        )),
        "file" => {
            let c = a.get("content").unwrap_or(&Value::Null);
            let result = match s(c, "type") {
                "text" => {
                    let f = c.get("file").unwrap_or(&Value::Null);
                    let start = f.get("startLine").and_then(Value::as_u64).unwrap_or(1);
                    numbered(s(f, "content"), start)
                }
                "" => return Attach::Unplaced,
                other => format!("[{other}]"),
            };
            Attach::Call {
                name: "Read".into(),
                input: serde_json::json!({ "file_path": s(a, "filename") }),
                result,
            }
        }
        "directory" => {
            let path = s(a, "path");
            Attach::Call {
                name: "Bash".into(),
                input: serde_json::json!({
                    "command": format!("ls {path}"),
                    "description": format!("Lists files in {path}"),
                }),
                result: s(a, "content").to_owned(),
            }
        }
        _ => Attach::Unplaced,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text_of(a: Attach) -> (String, Source) {
        match a {
            Attach::Text { text, source } => (text, source),
            other => panic!("not text: {other:?}"),
        }
    }

    #[test]
    fn memory_and_edits_are_harness_reminders() {
        let (t, src) = text_of(attachment(&json!({
            "type": "nested_memory", "path": "/r/CLAUDE.md",
            "content": {"path": "/r/CLAUDE.md", "content": "Use tabs."}
        })));
        assert_eq!(
            t,
            "<system-reminder>\nContents of /r/CLAUDE.md:\n\nUse tabs.\n</system-reminder>"
        );
        assert_eq!(src, Source::System);
        let (t, _) = text_of(attachment(&json!({
            "type": "edited_text_file", "filename": "a.rs", "snippet": "5\tfn main() {}"
        })));
        assert!(t.ends_with("(shown with line numbers):\n5\tfn main() {}\n</system-reminder>"));
    }

    #[test]
    fn queued_prompts_are_the_user_and_notifications_a_tool() {
        let (t, src) = text_of(attachment(&json!({
            "type": "queued_command", "prompt": "also fix the docs", "commandMode": "prompt"
        })));
        assert!(t.contains("also fix the docs"));
        assert_eq!(src, Source::User);
        let (t, src) = text_of(attachment(&json!({
            "type": "queued_command", "commandMode": "task-notification",
            "prompt": "<task-notification>done</task-notification>"
        })));
        assert!(t.contains("<task-notification>done"));
        assert_eq!(src, Source::Tool);
    }

    #[test]
    fn hooks_and_bookkeeping() {
        let silent = |v: Value| matches!(attachment(&v), Attach::Silent);
        assert!(silent(
            json!({"type": "command_permissions", "allowedTools": []})
        ));
        assert!(silent(json!({"type": "hook_success", "hookEvent": "Stop",
                              "hookName": "Stop", "content": "ok"})));
        assert!(silent(
            json!({"type": "hook_success", "hookEvent": "SessionStart",
                              "hookName": "SessionStart:startup", "content": ""})
        ));
        assert!(matches!(
            attachment(&json!({"type": "plan_mode", "planFilePath": "/p"})),
            Attach::Unplaced
        ));
        let (t, _) = text_of(attachment(&json!({
            "type": "hook_additional_context", "hookName": "PostToolUse:Edit",
            "content": ["lint: ok"]
        })));
        assert!(t.contains("PostToolUse:Edit hook additional context: lint: ok"));
    }

    #[test]
    fn a_mentioned_file_is_a_read_call() {
        match attachment(&json!({
            "type": "file", "filename": "/r/a.txt",
            "content": {"type": "text", "file": {"content": "x\ny", "startLine": 1}}
        })) {
            Attach::Call {
                name,
                input,
                result,
            } => {
                assert_eq!(name, "Read");
                assert_eq!(input["file_path"], "/r/a.txt");
                assert_eq!(result, "1\tx\n2\ty");
            }
            other => panic!("{other:?}"),
        }
    }
}
