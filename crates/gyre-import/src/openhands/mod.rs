//! OpenHands event streams → reconstructed executions (docs/import.md#openhands).
//!
//! V0 (the classic event stream) in three shapes, one execution per event stream:
//! - a JSON document: an array of events, or an object holding one under `events` / `history`
//!   (a saved trajectory);
//! - a session's `events/` folder (one `<id>.json` file per event), or the session folder
//!   holding it;
//! - an evaluation `output.jsonl`: one instance per line (`instance_id`, `instruction`,
//!   `history`, `error`, `test_result`, `metadata`), one execution each.
//!
//! One request per distinct `tool_call_metadata.model_response.id` (the actions of one model
//! response share it); an agent `message`/`finish` action without metadata is a plain-text
//! response and a request of its own. The system prompt is the `system` action (with its tool
//! definitions), the runtime information the model was given is the `recall` observation.
//! Observations become tool results, linked to their call by `tool_call_metadata.tool_call_id`
//! or by `cause` (the id of the action they answer).
//!
//! V1 (agent-sdk) conversations, events with a `kind` (`v1.rs`): a conversation folder of
//! `event-<n>-<uuid>.json` files, or the events in one file; one request per `llm_response_id`.

mod conversation;
mod events;
mod legacy;
mod streams;
mod v1;

use std::path::PathBuf;

use eyre::Result;

use super::session::Session;
use super::sniff::{Fit, Probe, Shape, is_v1_event, v1_events_dir};
use super::{About, Importer, Job};
use streams::{
    is_output_jsonl, is_v1_stream, read_document_stream, read_events_dir, read_output_jsonl,
    read_v1_dir, read_v1_file,
};

/// The OpenHands importer.
pub struct Openhands;

static ABOUT: About = About {
    name: "openhands",
    what: "an OpenHands event stream",
    summary: "OpenHands: an event stream, a session's events/ folder, an evaluation output.jsonl or a \
              V1 (agent-sdk) conversation",
    input: "EVENTS",
    input_help: "A trajectory (JSON array of events), a session's events/ folder (or the session \
                 folder), an evaluation output.jsonl, or a V1 (agent-sdk) conversation folder \
                 (or its events as JSON Lines)",
    many: false,
    directories: true,
    reconstructed: true,
    help: "\
Examples:
  gyre import openhands trajectory.json --out trajectory.jsonl
  gyre import openhands ~/.openhands/sessions/<id>/events --score 0 --out session.jsonl
  gyre import openhands evaluation/outputs/…/output.jsonl --out instances.jsonl
  gyre import openhands ~/.openhands/conversations/<id> --score 1 --out conversation.jsonl

output.jsonl holds one instance per line: one execution each (id = instance_id). docs/import.md
has the mapping.",
};

impl Importer for Openhands {
    type Item = Session;

    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn sniff(&self, probe: &Probe) -> Fit {
        let is_event = |keys: &[&str]| keys.contains(&"action") || keys.contains(&"observation");
        match &probe.shape {
            Shape::Directory { events } => {
                if events.is_some() || probe.path().and_then(v1_events_dir).is_some() {
                    Fit::Yes
                } else {
                    Fit::No
                }
            }
            Shape::Jsonl(_) => {
                let Some(o) = probe.first_object() else {
                    return Fit::No;
                };
                if o.contains_key("instance_id") || is_v1_event(o) {
                    return Fit::Yes;
                }
                for key in ["events", "history"] {
                    if let Some(keys) = probe.element_keys(Some(key)) {
                        return if is_event(&keys) { Fit::Yes } else { Fit::No };
                    }
                }
                if is_event(&o.keys().map(String::as_str).collect::<Vec<_>>()) {
                    Fit::Yes
                } else {
                    Fit::No
                }
            }
            Shape::Document(head) if head.array => match probe.element_keys(None) {
                Some(keys) if is_event(&keys) => Fit::Yes,
                Some(keys) if keys.contains(&"kind") && keys.contains(&"source") => Fit::Yes,
                Some(keys) if keys.is_empty() => Fit::Unknown,
                _ => Fit::No,
            },
            Shape::Document(head) => {
                for key in ["events", "history"] {
                    if head.has(key) {
                        return match head.element(key) {
                            Some([]) => Fit::Unknown,
                            Some(keys) => {
                                if keys.iter().any(|k| k == "action" || k == "observation") {
                                    Fit::Yes
                                } else {
                                    Fit::No
                                }
                            }
                            None => Fit::Unknown,
                        };
                    }
                }
                if (head.has("instance_id") || head.has("instruction")) && !head.has("messages") {
                    Fit::Unknown
                } else {
                    Fit::No
                }
            }
            _ => Fit::No,
        }
    }

    fn read(
        &self,
        inputs: &[PathBuf],
        job: &mut Job,
        emit: &mut dyn FnMut(&mut Job, Session) -> Result<()>,
    ) -> Result<()> {
        for path in inputs {
            if path.is_dir() {
                let session = if v1_events_dir(path).is_some() {
                    read_v1_dir(path, job)?
                } else {
                    read_events_dir(path, job)?
                };
                emit(job, session)?;
                continue;
            }
            let probe = Probe::of(path);
            if is_v1_stream(&probe) {
                let session = read_v1_file(path, job)?;
                emit(job, session)?;
            } else if is_output_jsonl(&probe) {
                read_output_jsonl(path, job, emit)?;
            } else {
                let session = read_document_stream(path, job)?;
                emit(job, session)?;
            }
        }
        Ok(())
    }

    fn records(&self, item: Session, job: &mut Job) -> Result<()> {
        super::session::records(item, job)
    }
}
