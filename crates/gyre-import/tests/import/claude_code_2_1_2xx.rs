//! Claude Code as it logs today (2.1.205+), on excerpts of two real sessions
//! (`tests/fixtures/import/claude-code-2.1.2xx/`, provenance beside them): attachment lines,
//! thinking logged as a bare signature, and a manual `/compact` whose later lines point back
//! past the summary.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use gyre_text::TokenText;
use serde_json::{Value, json};

use super::common::*;

const HEAD: &str = "claude-code-2.1.2xx/omp-2.1.205-head.jsonl";
const EDITS: &str = "claude-code-2.1.2xx/omp-2.1.215-edits.jsonl";

/// Every labelled piece of every request as (request id, span source, decoded text), read off
/// the records as written (a delta record's spans cover only its new tokens), so each piece of
/// context appears once: in the request that first had it.
fn pieces(out: &Path, tok: &TokenText) -> Vec<(String, String, String)> {
    let mut all = Vec::new();
    for r in lines(out).into_iter().filter(|r| r["kind"] == "request") {
        let input: Vec<u32> = r["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        let mut start = 0;
        for s in r["spans"].as_array().unwrap() {
            let end = s["end"].as_u64().unwrap() as usize;
            all.push((
                r["id"].as_str().unwrap().to_owned(),
                s["source"].as_str().unwrap().to_owned(),
                tok.decode(&input[start..end]),
            ));
            start = end;
        }
    }
    all
}

/// The request that first had `needle`, and the source of the pieces holding it (one source
/// for all: the same attachment text repeated is labelled alike).
fn placed<'a>(pieces: &'a [(String, String, String)], needle: &str) -> (&'a str, &'a str) {
    let hits: Vec<_> = pieces.iter().filter(|p| p.2.contains(needle)).collect();
    assert!(!hits.is_empty(), "{needle:?} is in no context");
    assert!(
        hits.iter().all(|h| h.1 == hits[0].1),
        "{needle:?}: {hits:?}"
    );
    (hits[0].0.as_str(), hits[0].1.as_str())
}

fn raw_lines(p: &str) -> Vec<Value> {
    std::fs::read_to_string(fixture(p))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Attachment lines become the user-side content Claude Code makes of them, labelled as what
/// the harness added (`system`), in the request after them; the ones Claude Code never sends
/// (hook bookkeeping, permission lists) are not in any context. Before, all ten were dropped.
#[test]
fn attachments_are_in_the_context_where_claude_code_puts_them() {
    let (_d, out, summary) = claude_code(&fixture(HEAD), true, None);
    assert_eq!(summary.requests, 10);
    let tok = TokenText::qwen3().unwrap();
    let pieces = pieces(&out, &tok);
    let attachment = |n: usize| raw_lines(HEAD)[n - 1]["attachment"].clone();
    // Line 12: the skill listing; 10: the agent listing; 11: MCP instructions; 39: CLAUDE.md
    // rules read for a nested directory (`nested_memory`).
    let skills = attachment(12)["content"].as_str().unwrap().to_owned();
    let agents = attachment(10)["addedLines"][0].as_str().unwrap().to_owned();
    let mcp = attachment(11)["addedBlocks"][0]
        .as_str()
        .unwrap()
        .to_owned();
    let memory = attachment(39)["content"]["content"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| attachment(39)["content"].to_string());
    for (what, text, request) in [
        ("skill listing", &skills, "r1"),
        ("agent listing", &agents, "r1"),
        ("MCP instructions", &mcp, "r1"),
        ("nested CLAUDE.md", &memory, "r9"),
    ] {
        let needle: String = text.lines().find(|l| l.len() > 30).unwrap().into();
        let (first, source) = placed(&pieces, &needle);
        assert_eq!((first, source), (request, "system"), "{what}: {needle:?}");
    }
    // A SessionStart hook's system message is shown to the user, not sent to the model.
    let shown = attachment(7)["content"].as_str().unwrap().trim().to_owned();
    assert!(!pieces.iter().any(|p| p.2.contains(&shown)), "{shown}");
    check_requests(&out, &tok);
}

/// Two `edited_text_file` attachments (9 KB of file snippets) grow the log's own usage by 8,889
/// tokens between two requests; the reconstruction now grows by most of that (it grew 490 when
/// attachments were dropped), and the snippets are in the context.
#[test]
fn edited_file_attachments_grow_the_context_as_the_usage_does() {
    let (_d, out, _) = claude_code(&fixture(EDITS), true, None);
    let tok = TokenText::qwen3().unwrap();
    let full = requests(&out);
    assert_eq!(full.len(), 6);
    let usage = |r: &Value| {
        let u = &r["meta"]["usage"];
        [
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ]
        .iter()
        .map(|k| u[k].as_u64().unwrap())
        .sum::<u64>()
    };
    let (r3, r4) = (&full[2], &full[3]);
    let logged = usage(&r4.0) - usage(&r3.0);
    assert_eq!(logged, 8889);
    let rebuilt = (r4.1.len() - r3.1.len()) as u64;
    assert!(
        rebuilt * 2 > logged && rebuilt < logged,
        "the context grew {rebuilt} tokens, the usage {logged}"
    );
    let pieces = pieces(&out, &tok);
    for n in [11, 12] {
        let snippet = raw_lines(EDITS)[n - 1]["attachment"]["snippet"]
            .as_str()
            .unwrap()
            .to_owned();
        let needle = snippet.lines().nth(6).unwrap();
        assert!(
            pieces
                .iter()
                .any(|p| p.0 == "r4" && p.1 == "system" && p.2.contains(needle)),
            "line {n}: {needle:?}"
        );
    }
}

/// Responses whose thinking is logged as `""` with a signature are not targets (the reasoning
/// is unknown), exactly those, with a reason; the others are untouched; the summary counts them.
#[test]
fn hidden_thinking_is_not_trainable_and_only_there() {
    let (_d, out, summary) = claude_code(&fixture(HEAD), true, None);
    let mut hidden: BTreeSet<String> = BTreeSet::new();
    for v in raw_lines(HEAD).iter().filter(|v| v["type"] == "assistant") {
        let m = &v["message"];
        let bare =
            m["content"].as_array().unwrap().iter().any(|b| {
                b["type"] == "thinking" && b["thinking"] == "" && b["signature"].is_string()
            });
        if bare {
            hidden.insert(m["id"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(hidden.len(), 6);
    let mut marked = BTreeSet::new();
    let mut reasons = HashMap::new();
    for (r, _) in requests(&out) {
        if let Some(why) = r["not_trainable"].as_str() {
            marked.insert(r["meta"]["message_id"].as_str().unwrap().to_owned());
            *reasons.entry(why.to_owned()).or_insert(0u64) += 1;
        }
    }
    assert_eq!(marked, hidden);
    assert_eq!(reasons.len(), 1);
    assert!(reasons.keys().all(|w| w.starts_with("hidden thinking")));
    assert_eq!(summary.not_trainable.values().sum::<u64>(), 6);
    // The engine's trainable tokens are the other four outputs, no more.
    let trainable: u64 = requests(&out)
        .iter()
        .filter(|(r, _)| r.get("not_trainable").is_none())
        .map(|(r, _)| r["output"].as_array().unwrap().len() as u64)
        .sum();
    let s = stats(&load(&out));
    assert_eq!(s.requests, 10);
    assert_eq!(s.policy_tokens, trainable);
}

/// A manual `/compact` (Claude Code 2.1.217) writes a boundary and the summary, but the lines
/// after it keep pointing at the last line before it. Made from the real 2.1.205 excerpt by
/// compacting after line 38 the way 2.1.217 logs it. The requests after the boundary start
/// from the summary (labelled `summary`) and hold nothing from before it; before, they
/// extended the whole pre-compaction context and the summary was in none.
#[test]
fn a_manual_compact_starts_the_context_from_the_summary() {
    let src = raw_lines(HEAD);
    let last_before = src[37]["uuid"].as_str().unwrap().to_owned();
    let boundary = json!({
        "type": "system", "subtype": "compact_boundary", "uuid": "b0000000-0000-4000-8000-000000000001",
        "parentUuid": null, "logicalParentUuid": last_before, "isSidechain": false,
        "timestamp": src[37]["timestamp"], "sessionId": src[37]["sessionId"],
        "content": "Conversation compacted", "level": "info",
        "compactMetadata": {"trigger": "manual", "preTokens": 44000}
    });
    let summary_text = "This session is being continued from a previous conversation. \
                        COMPACT-SUMMARY-MARKER: the user asked to fix the prompt rendering.";
    let summary_line = json!({
        "type": "user", "uuid": "b0000000-0000-4000-8000-000000000002",
        "parentUuid": "b0000000-0000-4000-8000-000000000001", "isSidechain": false,
        "isCompactSummary": true, "timestamp": src[37]["timestamp"],
        "sessionId": src[37]["sessionId"],
        "message": {"role": "user", "content": summary_text}
    });
    let mut lines_out: Vec<String> = src[..38].iter().map(Value::to_string).collect();
    lines_out.push(boundary.to_string());
    lines_out.push(summary_line.to_string());
    lines_out.extend(src[38..].iter().map(Value::to_string));
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("compacted.jsonl");
    std::fs::write(&session, lines_out.join("\n") + "\n").unwrap();

    let (_d, out, summary) = claude_code(&session, true, None);
    assert_eq!(summary.requests, 10);
    assert!(
        summary
            .warnings
            .iter()
            .any(|w| w.contains("after a compaction named a parent from before it")),
        "{:?}",
        summary.warnings
    );
    let tok = TokenText::qwen3().unwrap();
    let first_prompt = src[7]["message"]["content"].as_str().unwrap();
    let first_prompt = &first_prompt[..40];
    for (r, ids) in requests(&out) {
        let text = tok.decode(&ids);
        let after = ["r9", "r10"].contains(&r["id"].as_str().unwrap());
        assert_eq!(
            text.contains("COMPACT-SUMMARY-MARKER"),
            after,
            "{}",
            r["id"]
        );
        assert_eq!(text.contains(first_prompt), !after, "{}", r["id"]);
        if r["id"] == "r9" {
            assert!(
                r.get("extends").is_none(),
                "a compaction starts a new context"
            );
        }
    }
    let pieces = pieces(&out, &tok);
    assert_eq!(placed(&pieces, "COMPACT-SUMMARY-MARKER"), ("r9", "summary"));
}
