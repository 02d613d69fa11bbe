/// Tokens as text: terminal sanitising, token ids → text, chat templates (SPEC §7).
pub mod text;
