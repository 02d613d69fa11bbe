/// A simulated Claude-Code-style harness writing gyre/1 recordings (`gyre synth`).
pub mod synth;
/// Tokens as text: terminal sanitising, token ids → text, chat templates (SPEC §7).
pub mod text;
