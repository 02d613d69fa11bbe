//! `gyre record`: a recording proxy between an unmodified harness and a vLLM or SGLang policy
//! server (docs/record.md).
//!
//! The harness speaks OpenAI Chat Completions, OpenAI Responses or Anthropic Messages to the
//! proxy. The proxy
//! renders each conversation with the model's chat template into token ids, putting back the
//! exact output ids of assistant turns it produced earlier (payload restoration), asks the
//! upstream for a completion of those ids with log-probs, records one gyre/1 `request` per
//! call through [`Recorder`](gyre_engine::recorder::Recorder), and answers the harness in its
//! API's shape. Evaluators, on a separate control listener behind a bearer token,
//! issue executions (each with its own capability URL), close and score them.
//!
//! The parts (private: the crate's API is [`Config`], [`serve`], [`Flavor`] and
//! [`TokenSource`]): `chat` (the API-neutral conversation and errors), `openai`, `responses` and
//! `anthropic` (request parsing, JSON and SSE answers), `render` (conversation → ids and spans), `floor`
//! (a lower bound on a text's token count, to refuse before tokenising), `sampled`
//! (sampled ids → text, reasoning, tool calls), `payload` (what the proxy produced, for
//! restoration), `journal` (executions, agents, the recording), `recording` (the file, and undoing a
//! record whose write failed), `upstream` (the policy server),
//! `control` (the token and capability URLs), `listen` (connection limits and timeouts),
//! `budget` (the memory shared by concurrent requests) and `server` (routes, shutdown).

mod anthropic;
mod budget;
mod chat;
mod control;
mod floor;
mod journal;
mod listen;
mod openai;
mod payload;
mod recording;
mod render;
mod responses;
mod sampled;
mod server;
mod upstream;

pub use control::TokenSource;
pub use server::{Config, serve};
pub use upstream::Flavor;
