//! TODO
use super::convo::Builder;
use super::write::Sink;
use super::{Options, Progress, Summary};
use color_eyre::eyre::{Result, bail};
use serde_json::Value;
use std::path::Path;

/// Imports.
pub fn import(
    _input: &Path,
    _opts: &Options,
    _builder: &mut Builder,
    _tokenizer_header: &Value,
    _sink: &mut Sink,
    _progress: &mut dyn FnMut(Progress),
) -> Result<Summary> {
    bail!("not yet")
}
