//! Tokens as text (SPEC §7): terminal-safe strings, token ids → text, chat templates.

pub mod encode;
pub mod sanitize;
pub mod template;
pub mod tokenizer;

pub use encode::CachedEncoder;
pub use sanitize::sanitize;
pub use template::{ChatTemplate, Message, RenderOptions, ToolCall};
pub use tokenizer::TokenText;
