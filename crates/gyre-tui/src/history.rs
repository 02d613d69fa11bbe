//! Settings history: what undo (`Ctrl-z`) and redo (`Ctrl-y`) step through.

use gyre_engine::admit::Settings;
use gyre_engine::score::AdvantageMode;

/// Settings and advantage mode, as one re-run is asked for.
pub type Asked = (Settings, AdvantageMode);

/// The settings asked for, in order: those before the current ones, the current ones, and
/// those undone since (a new change drops them, as in an editor).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    current: Asked,
    back: Vec<Asked>,
    forward: Vec<Asked>,
}

impl History {
    /// A history that starts at `start`.
    pub fn new(start: Asked) -> Self {
        History {
            current: start,
            back: Vec::new(),
            forward: Vec::new(),
        }
    }

    /// `now` was asked for: the current settings go on the undo list unless nothing changed.
    pub fn asked(&mut self, now: Asked) {
        if now != self.current {
            self.back.push(std::mem::replace(&mut self.current, now));
            self.forward.clear();
        }
    }

    /// Steps back: the settings to ask for, if there is anything to undo.
    pub fn undo(&mut self) -> Option<Asked> {
        let prev = self.back.pop()?;
        self.forward
            .push(std::mem::replace(&mut self.current, prev.clone()));
        Some(prev)
    }

    /// Steps forward again after an undo.
    pub fn redo(&mut self) -> Option<Asked> {
        let next = self.forward.pop()?;
        self.back
            .push(std::mem::replace(&mut self.current, next.clone()));
        Some(next)
    }

    /// Changes that can be undone, and redone.
    pub fn depth(&self) -> (usize, usize) {
        (self.back.len(), self.forward.len())
    }
}
