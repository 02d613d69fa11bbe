//! `LineError`: what is wrong with one line and which field, the error of every per-line reader
//! (records, `trained` records); below them all, so none imports another for it.

/// A problem with one line: what is wrong and, when known, which field.
#[derive(Clone, Debug, PartialEq)]
pub struct LineError {
    /// What is wrong.
    pub message: String,
    /// The field at fault (a JSON path such as `input[3]`).
    pub field: Option<String>,
}

impl LineError {
    pub(crate) fn new(message: impl Into<String>, field: impl Into<String>) -> Self {
        LineError {
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// A required field that is absent.
    pub(crate) fn missing(field: &str) -> Self {
        LineError::new(format!("missing field `{field}`"), field)
    }
}
