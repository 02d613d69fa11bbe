//! Request bodies whose shape costs the most memory per byte, and the proxy's memory as Linux
//! reports it: shared by the memory test (`record_adversary.rs`) and `benches/record_memory.rs`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

/// A chat-completions body of about `bytes` made of many tiny user messages (each a JSON object
/// of its own: the most tree per byte).
pub fn small_messages(bytes: usize) -> String {
    let n = bytes / 36;
    let messages: Vec<Value> = (0..n)
        .map(|i| json!({"role": "user", "content": format!("m{}", i % 1000)}))
        .collect();
    json!({"model": "p", "max_tokens": 4, "messages": messages}).to_string()
}

/// A chat-completions body of about `bytes` made of assistant tool calls whose arguments are
/// JSON objects of many small fields (parsed into a tree each).
pub fn tool_arguments(bytes: usize) -> String {
    let per_call = 64 << 10;
    let fields: serde_json::Map<String, Value> = (0..per_call / 12)
        .map(|i| (format!("k{i}"), Value::from(i % 10)))
        .collect();
    let arguments = Value::Object(fields).to_string();
    // Escaped as a JSON string in the body, the arguments take more room than their text.
    let calls = (bytes / Value::from(arguments.as_str()).to_string().len()).max(1);
    let mut messages = vec![json!({"role": "user", "content": "run them"})];
    for c in 0..calls {
        let id = format!("call_{c}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function",
             "function": {"name": "bash", "arguments": arguments}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": "ok"}));
    }
    json!({"model": "p", "max_tokens": 4, "messages": messages,
        "tools": [{"type": "function", "function": {"name": "bash", "description": "Run.",
            "parameters": {"type": "object"}}}]})
    .to_string()
}

/// POSTs `body` to `base` + `/v1/chat/completions` on a fresh connection; the status.
pub fn post(base: &str, body: &str) -> u16 {
    let addr = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    // Refused early (413), the rest of the body may meet a closed socket.
    let _ = s
        .write_all(head.as_bytes())
        .and_then(|()| s.write_all(body.as_bytes()));
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    text.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {:?}", &text[..text.len().min(300)]))
}

/// A field of `/proc/PID/status` in KiB (`VmHWM`: peak resident memory; `VmRSS`: now).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}
