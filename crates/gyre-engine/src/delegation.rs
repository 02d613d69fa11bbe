//! Which tool call started which sub-agent: a sub-agent's requests name the call in
//! `meta.task_call_id` (docs/format.md §1; `gyre import claude-code` and `gyre synth` write it),
//! and that call is one of an earlier request's `tool_calls`.
//!
//! The link is read from the records, never guessed from tool names or timing: a sub-agent no
//! request links has no delegation, and a call id no output holds links nothing.

use std::collections::HashMap;

use super::execution::Execution;

/// A tool call that started a sub-agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delegation {
    /// The request whose output made the call.
    pub request: u32,
    /// Index of the call in that request's `tool_calls`.
    pub call: usize,
    /// The call's id.
    pub call_id: String,
    /// The call's tool name (`Task`, `Agent`, …), when recorded.
    pub tool: Option<String>,
    /// The sub-agent it started.
    pub agent: String,
    /// The sub-agent's first request (in request order).
    pub first: u32,
    /// How many requests the sub-agent made.
    pub requests: u32,
}

/// The `meta.task_call_id` of a request, when it is a string.
fn task_call_id(meta: Option<&serde_json::Value>) -> Option<&str> {
    meta?.get("task_call_id")?.as_str()
}

/// Every delegation of `exec`, ordered by the calling request and the call's place in it.
/// A sub-agent is linked by the first of its requests that names a call; requests of the main
/// agent never start a delegation of their own.
pub fn delegations(exec: &Execution) -> Vec<Delegation> {
    let mut calls: HashMap<&str, (u32, usize)> = HashMap::new();
    for (i, r) in exec.requests.iter().enumerate() {
        for (k, c) in r.tool_calls.iter().enumerate() {
            calls.entry(c.id.as_str()).or_insert((i as u32, k));
        }
    }
    // Per sub-agent: its first request, its request count, the call it names.
    let mut agents: Vec<(&str, u32, u32, Option<&str>)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, r) in exec.requests.iter().enumerate() {
        if r.agent == "main" {
            continue;
        }
        let k = *index.entry(r.agent.as_str()).or_insert_with(|| {
            agents.push((r.agent.as_str(), i as u32, 0, None));
            agents.len() - 1
        });
        let a = &mut agents[k];
        a.2 += 1;
        if a.3.is_none() {
            a.3 = task_call_id(r.meta.as_ref());
        }
    }
    let mut out: Vec<Delegation> = agents
        .into_iter()
        .filter_map(|(agent, first, requests, call)| {
            let call_id = call?;
            let &(request, k) = calls.get(call_id)?;
            // A call made after the sub-agent began cannot have started it.
            (request < first).then(|| Delegation {
                request,
                call: k,
                call_id: call_id.to_owned(),
                tool: exec.requests[request as usize].tool_calls[k].name.clone(),
                agent: agent.to_owned(),
                first,
                requests,
            })
        })
        .collect();
    out.sort_by_key(|d| (d.request, d.call, d.first));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{LoadOptions, load_bytes};

    fn exec(lines: &[String]) -> Execution {
        let text = lines.join("\n") + "\n";
        let batch = load_bytes("t.jsonl", text.as_bytes(), &LoadOptions::default())
            .expect("the test recording loads");
        batch.executions.into_iter().next().expect("one execution")
    }

    fn header() -> String {
        r#"{"kind":"header","format":"gyre/1"}"#.to_string()
    }

    fn request(id: &str, agent: &str, input: &str, calls: &str, meta: &str) -> String {
        format!(
            r#"{{"kind":"request","execution":"e","id":"{id}","agent":"{agent}","input":{input},"output":[7,8,9],"logprobs":[-0.1,-0.2,-0.3],"spans":[],"tool_calls":{calls}{meta}}}"#
        )
    }

    #[test]
    fn a_sub_agent_links_to_the_call_its_requests_name() {
        let e = exec(&[
            header(),
            request(
                "r0",
                "main",
                "[1,2]",
                r#"[{"id":"c1","name":"Task","start":0,"end":3}]"#,
                "",
            ),
            request(
                "r1",
                "sub-1",
                "[5]",
                "[]",
                r#","meta":{"task_call_id":"c1"}"#,
            ),
            request(
                "r2",
                "sub-1",
                "[5,7,8,9,6]",
                "[]",
                r#","meta":{"task_call_id":"c1"}"#,
            ),
            request(
                "r3",
                "sub-2",
                "[4]",
                "[]",
                r#","meta":{"task_call_id":"nope"}"#,
            ),
            request("r4", "sub-3", "[3]", "[]", ""),
        ]);
        let d = delegations(&e);
        assert_eq!(
            d,
            vec![Delegation {
                request: 0,
                call: 0,
                call_id: "c1".into(),
                tool: Some("Task".into()),
                agent: "sub-1".into(),
                first: 1,
                requests: 2,
            }]
        );
    }

    #[test]
    fn a_call_made_after_the_sub_agent_began_links_nothing() {
        let e = exec(&[
            header(),
            request(
                "r0",
                "sub-1",
                "[5]",
                "[]",
                r#","meta":{"task_call_id":"c1"}"#,
            ),
            request(
                "r1",
                "main",
                "[1,2]",
                r#"[{"id":"c1","name":"Task","start":0,"end":3}]"#,
                "",
            ),
        ]);
        assert!(delegations(&e).is_empty());
    }
}
