//! Tokens as text (docs/format.md §7): terminal-safe strings, token ids → text, chat templates.

pub mod assets;
mod encode;
pub mod label;
pub mod resolve;
mod template;
pub mod tokenizer;
pub mod turns;

pub use assets::ModelAssets;
pub use encode::CachedEncoder;
/// The one terminal sanitiser (it lives in the format layer, below the engine).
pub use gyre_format::sanitize;
pub use resolve::resolve as resolve_tokenizer;
pub use template::{
    ChatTemplate, Message, RenderOptions, TURN_ENDS, TemplateError, ToolCall, python_json,
};
pub use tokenizer::TokenText;
