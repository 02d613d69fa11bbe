//! What the proxy produced, kept for payload restoration: a later request's assistant turn is
//! recognised by the call ids the proxy issued, else by its content, and its recorded output ids
//! are put back instead of re-rendering it.
//!
//! A turn is the same turn when it means the same: the same tool names with equal arguments
//! (as JSON values, so key order and spacing do not matter) and the same visible text up to
//! whitespace. Thinking text is not compared: harnesses drop or rewrite it. A turn carrying a
//! call id of the proxy's that means something else was edited: it is rendered from its text.

use std::collections::{HashMap, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use serde_json::Value;

use super::chat::ReplyCall;
use gyre_engine::record::Purpose;
use gyre_text::Message;

/// One output the proxy produced and recorded.
#[derive(Debug)]
pub struct Produced {
    /// Execution it was recorded in.
    pub execution: String,
    /// Agent that made it.
    pub agent: String,
    /// Task or summary.
    pub purpose: Purpose,
    /// The sampled ids.
    pub output: Arc<[u32]>,
    /// The output ends with an end-of-turn token.
    pub eos: bool,
    /// Length of the full input it was sampled after.
    pub input_len: usize,
    /// [`hash_tokens`](super::render::hash_tokens) of that input.
    pub input_hash: u64,
    /// The visible text answered.
    pub content: String,
    /// The tool calls answered (with the ids the proxy issued).
    pub calls: Vec<ReplyCall>,
}

/// What a request's assistant turn is.
#[derive(Clone, Debug)]
pub enum Found {
    /// Outputs of the proxy's this turn is (best first).
    Restore(Vec<Arc<Produced>>),
    /// The turn carries a call id of this output's but was changed.
    Edited(Arc<Produced>),
    /// Not something the proxy produced (or no longer remembered).
    Unknown,
}

/// The outputs kept for restoration, oldest evicted first past a limit.
pub struct Payloads {
    by_call: HashMap<String, Arc<Produced>>,
    by_content: HashMap<u64, Vec<Arc<Produced>>>,
    order: VecDeque<Arc<Produced>>,
    limit: usize,
}

impl Payloads {
    /// Keeps at most `limit` outputs.
    pub fn new(limit: usize) -> Self {
        Payloads {
            by_call: HashMap::new(),
            by_content: HashMap::new(),
            order: VecDeque::new(),
            limit: limit.max(1),
        }
    }

    /// Outputs kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.order.len()
    }

    /// True when nothing is kept.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Remembers `p`.
    pub fn insert(&mut self, p: Arc<Produced>) {
        while self.order.len() >= self.limit {
            match self.order.pop_front() {
                Some(old) => self.unindex(&old),
                None => break,
            }
        }
        for c in &p.calls {
            self.by_call.insert(c.id.clone(), Arc::clone(&p));
        }
        let names: Vec<&str> = p.calls.iter().map(|c| c.name.as_str()).collect();
        self.by_content
            .entry(content_key(&p.content, &names))
            .or_default()
            .push(Arc::clone(&p));
        self.order.push_back(p);
    }

    /// Forgets every output of `execution` (it was closed).
    pub fn forget_execution(&mut self, execution: &str) {
        let (gone, kept): (Vec<_>, Vec<_>) =
            self.order.drain(..).partition(|p| p.execution == execution);
        self.order = kept.into();
        for p in gone {
            self.unindex(&p);
        }
    }

    /// What the assistant message `msg` is.
    pub fn find(&self, msg: &Message) -> Found {
        if msg.role != "assistant" {
            return Found::Unknown;
        }
        if let Some(p) = msg.tool_calls.iter().find_map(|c| self.by_call.get(&c.id)) {
            return if same(p, msg) {
                Found::Restore(vec![Arc::clone(p)])
            } else {
                Found::Edited(Arc::clone(p))
            };
        }
        let names: Vec<&str> = msg.tool_calls.iter().map(|c| c.name.as_str()).collect();
        let found: Vec<Arc<Produced>> = self
            .by_content
            .get(&content_key(&msg.content, &names))
            .map(|v| v.iter().rev().filter(|p| same(p, msg)).cloned().collect())
            .unwrap_or_default();
        if found.is_empty() {
            Found::Unknown
        } else {
            Found::Restore(found)
        }
    }

    fn unindex(&mut self, p: &Arc<Produced>) {
        for c in &p.calls {
            if self.by_call.get(&c.id).is_some_and(|q| Arc::ptr_eq(q, p)) {
                self.by_call.remove(&c.id);
            }
        }
        let names: Vec<&str> = p.calls.iter().map(|c| c.name.as_str()).collect();
        let key = content_key(&p.content, &names);
        if let Some(v) = self.by_content.get_mut(&key) {
            v.retain(|q| !Arc::ptr_eq(q, p));
            if v.is_empty() {
                self.by_content.remove(&key);
            }
        }
    }
}

/// Text with every run of whitespace made one space, ends trimmed.
pub fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn content_key(content: &str, names: &[&str]) -> u64 {
    let mut h = DefaultHasher::new();
    collapse(content).hash(&mut h);
    names.hash(&mut h);
    h.finish()
}

/// `msg` means what `p` answered (calls by name and argument value, text up to whitespace).
fn same(p: &Produced, msg: &Message) -> bool {
    p.calls.len() == msg.tool_calls.len()
        && p.calls
            .iter()
            .zip(&msg.tool_calls)
            .all(|(a, b)| a.name == b.name && same_arguments(&a.arguments, &b.arguments))
        && collapse(&p.content) == collapse(&msg.content)
}

/// Arguments as sent back: an object, or (OpenAI) a string holding one.
fn same_arguments(ours: &Value, theirs: &Value) -> bool {
    match theirs {
        Value::String(s) => serde_json::from_str::<Value>(s).is_ok_and(|v| v == *ours),
        v => v == ours,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyre_text::ToolCall;
    use serde_json::json;

    fn produced(exec: &str, content: &str, call: Option<(&str, Value)>) -> Arc<Produced> {
        Arc::new(Produced {
            execution: exec.into(),
            agent: "main".into(),
            purpose: Purpose::Task,
            output: Arc::from(vec![1, 2, 3]),
            eos: true,
            input_len: 0,
            input_hash: 0,
            content: content.into(),
            calls: call
                .into_iter()
                .map(|(id, args)| ReplyCall {
                    id: id.into(),
                    name: "bash".into(),
                    arguments: args,
                })
                .collect(),
        })
    }

    fn assistant(content: &str, call: Option<(&str, Value)>) -> Message {
        Message {
            tool_calls: call
                .into_iter()
                .map(|(id, arguments)| ToolCall {
                    id: id.into(),
                    name: "bash".into(),
                    arguments,
                })
                .collect(),
            ..Message::new("assistant", content)
        }
    }

    #[test]
    fn a_reserialised_call_is_found_and_an_edited_one_is_not_restored() {
        let mut p = Payloads::new(10);
        p.insert(produced(
            "e1",
            "Running.",
            Some(("call_a", json!({"cmd": "ls", "n": 1}))),
        ));
        let compact = assistant(
            "Running.  ",
            Some(("call_a", Value::from(r#"{"n":1,"cmd":"ls"}"#))),
        );
        assert!(matches!(p.find(&compact), Found::Restore(v) if v.len() == 1));
        let edited = assistant("Running.", Some(("call_a", json!({"cmd": "rm"}))));
        assert!(matches!(p.find(&edited), Found::Edited(_)));
        let by_content = assistant("Running.", Some(("other_id", json!({"n": 1, "cmd": "ls"}))));
        assert!(matches!(p.find(&by_content), Found::Restore(_)));
        assert!(matches!(
            p.find(&assistant("Something else", None)),
            Found::Unknown
        ));
        p.forget_execution("e1");
        assert!(p.is_empty());
        assert!(matches!(p.find(&compact), Found::Unknown));
    }

    #[test]
    fn the_oldest_output_goes_first_past_the_limit() {
        let mut p = Payloads::new(2);
        for text in ["one", "two", "three"] {
            p.insert(produced("e1", text, None));
        }
        assert_eq!(p.len(), 2);
        assert!(matches!(p.find(&assistant("one", None)), Found::Unknown));
        assert!(matches!(
            p.find(&assistant("three", None)),
            Found::Restore(_)
        ));
    }
}
