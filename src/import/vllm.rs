//! TODO
use super::convo::Builder;
use super::write::Sink;
use super::{Progress, Summary};
use color_eyre::eyre::{Result, bail};
use serde_json::Value;
use std::path::PathBuf;

/// Imports.
pub fn import(
    _files: &[PathBuf],
    _builder: &mut Builder,
    _tokenizer_header: &Value,
    _sink: &mut Sink,
    _progress: &mut dyn FnMut(Progress),
) -> Result<Summary> {
    bail!("not yet")
}
