//! An OpenHands event whose `timestamp` is no time is read without one, and the import says so:
//! a counted warning naming the file and line, in the event streams before and after the V1
//! agent-sdk.

use crate::common::*;
use serde_json::Value;

/// Writes `events` to `name` in a new folder, the events at `bad` with the timestamp `text`: as
/// JSON Lines, or (`.json`) as a JSON array, one event a line.
fn with_bad_time(
    name: &str,
    events: Vec<Value>,
    bad: &[usize],
    text: &str,
) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    let lines: Vec<String> = events
        .into_iter()
        .enumerate()
        .map(|(i, mut e)| {
            if bad.contains(&i) {
                e["timestamp"] = Value::String(text.into());
            }
            e.to_string()
        })
        .collect();
    let body = if name.ends_with(".json") {
        format!("[\n{}\n]\n", lines.join(",\n"))
    } else {
        lines.iter().map(|l| format!("{l}\n")).collect()
    };
    std::fs::write(&p, body).unwrap();
    (dir, p)
}

fn timestamp_warnings(warnings: &[String]) -> Vec<&String> {
    warnings
        .iter()
        .filter(|w| w.contains("timestamp"))
        .collect()
}

#[test]
fn a_malformed_timestamp_of_an_event_stream_is_a_warning_at_its_line() {
    let text = std::fs::read_to_string(fixture("openhands/basic.json")).unwrap();
    let events: Vec<Value> = serde_json::from_str(&text).unwrap();
    let (_good_dir, good) = with_bad_time("events.json", events.clone(), &[], "");
    let (_g, _, clean) = import("openhands", &good, true, None);
    assert!(
        timestamp_warnings(&clean.warnings).is_empty(),
        "{:?}",
        clean.warnings
    );
    let (_bad_dir, bad) = with_bad_time("events.json", events, &[1, 2], "yesterday at noon");
    let (_b, out, summary) = import("openhands", &bad, true, None);
    let found = timestamp_warnings(&summary.warnings);
    assert_eq!(found.len(), 1, "{:?}", summary.warnings);
    assert!(
        found[0].starts_with(&format!("{}:", bad.display())),
        "{found:?}"
    );
    assert!(
        found[0].contains("timestamp \"yesterday at noon\" is not an RFC 3339 time"),
        "{found:?}"
    );
    assert!(found[0].ends_with("(and 1 more like it)"), "{found:?}");
    // The import itself is the same as without the bad times, but for them.
    assert_eq!(summary.requests, clean.requests);
    load(&out);
}

#[test]
fn a_malformed_timestamp_of_a_v1_conversation_is_a_warning_at_its_line() {
    let dir = fixture("openhands/v1-conversation/events");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    let events: Vec<Value> = names
        .iter()
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    let (_d, bad) = with_bad_time("events.jsonl", events, &[3], "2026-13-01T00:00:00Z");
    let (_b, _, summary) = import("openhands", &bad, true, None);
    let found = timestamp_warnings(&summary.warnings);
    assert_eq!(found.len(), 1, "{:?}", summary.warnings);
    assert!(
        found[0].starts_with(&format!(
            "{}:4: timestamp \"2026-13-01T00:00:00Z\" is not an RFC 3339 time",
            bad.display()
        )),
        "{found:?}"
    );
}
