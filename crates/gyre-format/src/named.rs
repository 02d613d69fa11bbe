//! Closed sets of values that people type: one spelling per value, owned by the type, so the
//! command line, the inspector, JSON and the Python package read and write the same words.

/// A value from a closed set, with the name it is typed and printed as.
pub trait Named: Copy + Sized + 'static {
    /// Every value, in the order help texts list them.
    const ALL: &'static [Self];

    /// The name (`drgrpo`, `claude-code`, `main-summary`).
    fn name(self) -> &'static str;

    /// One line for `--help` (empty when the name says it all).
    fn help(self) -> &'static str {
        ""
    }

    /// The value called `name`, if any.
    fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.name() == name)
    }

    /// Every name, comma-separated, for error messages (`drgrpo, grpo, none`).
    fn names() -> String {
        let names: Vec<&str> = Self::ALL.iter().map(|v| v.name()).collect();
        names.join(", ")
    }
}
