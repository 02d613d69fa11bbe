//! Tokens as text (SPEC §7): terminal-safe strings, token ids → text, chat templates.

pub mod encode;
pub mod resolve;
pub mod sanitize;
pub mod template;
pub mod tokenizer;

pub use encode::CachedEncoder;
pub use resolve::resolve as resolve_tokenizer;
pub use sanitize::sanitize;
pub use template::{ChatTemplate, Message, RenderOptions, ToolCall};
pub use tokenizer::TokenText;
