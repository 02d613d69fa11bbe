//! A place in the input (`LineRef`): which file of an invocation, which line. Its own module so
//! that what an execution holds (requests, samples) can say where it was read without importing
//! the execution.

/// A place in the input: file index (in the order given) and 1-based line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LineRef {
    /// Index into the loaded file list.
    pub file: u32,
    /// 1-based line number.
    pub line: u64,
}
