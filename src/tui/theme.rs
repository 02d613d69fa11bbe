//! Colours and styles. One palette, with a monochrome variant for `NO_COLOR` that keeps every
//! distinction visible through bold, underline, reverse and strike-through.

use ratatui::style::{Color, Modifier, Style};

use crate::engine::provenance::Reason;
use crate::engine::record::Source;

/// How tokens are coloured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ColourMode {
    /// Claim state at the replay step (the default).
    #[default]
    Claims,
    /// Where each token came from.
    Provenance,
    /// Behaviour log-prob of policy tokens.
    Heat,
}

impl ColourMode {
    /// The next mode in the cycle.
    pub fn next(self) -> Self {
        match self {
            ColourMode::Claims => ColourMode::Provenance,
            ColourMode::Provenance => ColourMode::Heat,
            ColourMode::Heat => ColourMode::Claims,
        }
    }

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            ColourMode::Claims => "claims",
            ColourMode::Provenance => "provenance",
            ColourMode::Heat => "log-prob heat",
        }
    }
}

/// What a token is, for colouring: everything a style needs.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLook<'a> {
    /// The engine's reason at the replay step.
    pub reason: &'a Reason,
    /// The draw being shown (0 = none yet).
    pub step: u32,
    /// Behaviour log-prob, for policy output tokens that have one.
    pub logprob: Option<f64>,
    /// Output token of some request (policy or not).
    pub output: bool,
}

/// The palette.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Theme {
    /// Colours allowed (`NO_COLOR` unset).
    pub color: bool,
}

const ORANGE: Color = Color::Indexed(208);

impl Theme {
    /// From the environment: colours unless `NO_COLOR` is set to a non-empty value.
    pub fn from_env() -> Self {
        Theme {
            color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    fn pick(&self, colour: Style, mono: Style) -> Style {
        if self.color { colour } else { mono }
    }

    /// Selected row of a list or tree (visible without colour).
    pub fn selected(&self, focused: bool) -> Style {
        if !self.color {
            return Style::new().add_modifier(Modifier::REVERSED);
        }
        if focused {
            Style::new().bg(Color::Blue).fg(Color::White).add_modifier(Modifier::BOLD)
        } else {
            Style::new().bg(Color::Indexed(238))
        }
    }

    /// Border of a pane.
    pub fn border(&self, focused: bool) -> Style {
        match (focused, self.color) {
            (true, true) => Style::new().fg(Color::Cyan),
            (true, false) => Style::new().add_modifier(Modifier::BOLD),
            (false, true) => Style::new().fg(Color::DarkGray),
            (false, false) => Style::new(),
        }
    }

    /// Secondary text.
    pub fn dim(&self) -> Style {
        self.pick(Style::new().fg(Color::DarkGray), Style::new().add_modifier(Modifier::DIM))
    }

    /// Emphasis.
    pub fn strong(&self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }

    /// Good news (scored, valid, chosen).
    pub fn good(&self) -> Style {
        self.pick(Style::new().fg(Color::Green), Style::new().add_modifier(Modifier::BOLD))
    }

    /// Bad news (excluded, failed).
    pub fn bad(&self) -> Style {
        self.pick(Style::new().fg(Color::Red), Style::new().add_modifier(Modifier::UNDERLINED))
    }

    /// Warnings (dummy, left out).
    pub fn warn(&self) -> Style {
        self.pick(Style::new().fg(ORANGE), Style::new().add_modifier(Modifier::ITALIC))
    }

    /// Markers in the tree (branches).
    pub fn marker(&self) -> Style {
        self.pick(Style::new().fg(Color::Magenta), Style::new().add_modifier(Modifier::ITALIC))
    }

    /// Key names in the hint bar and help.
    pub fn key(&self) -> Style {
        self.pick(
            Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
            Style::new().add_modifier(Modifier::BOLD),
        )
    }

    /// The token under the cursor (added on top of its own style).
    pub fn cursor(&self, base: Style) -> Style {
        if self.color {
            base.bg(Color::Yellow).fg(Color::Black).add_modifier(Modifier::BOLD)
        } else {
            base.add_modifier(Modifier::REVERSED)
        }
    }

    /// A search match.
    pub fn found(&self, base: Style) -> Style {
        if self.color {
            base.bg(Color::Magenta).fg(Color::White)
        } else {
            base.add_modifier(Modifier::UNDERLINED | Modifier::ITALIC)
        }
    }

    /// Alternating background marking token boundaries.
    pub fn boundary(&self, base: Style, odd: bool) -> Style {
        if self.color && odd && base.bg.is_none() {
            base.bg(Color::Indexed(236))
        } else {
            base
        }
    }

    /// Colour of a context source (provenance mode and legends).
    pub fn source(&self, s: Source) -> Style {
        if !self.color {
            return Style::new().add_modifier(Modifier::DIM);
        }
        Style::new().fg(match s {
            Source::System => Color::Blue,
            Source::User => Color::Cyan,
            Source::Tool => Color::Yellow,
            Source::Assistant => Color::Magenta,
            Source::Critique => Color::LightRed,
            Source::Summary => Color::LightMagenta,
            Source::Template => Color::Indexed(242),
            Source::Context => Color::Gray,
        })
    }

    /// Policy output in provenance mode.
    pub fn policy(&self) -> Style {
        self.pick(
            Style::new().fg(Color::LightGreen).add_modifier(Modifier::BOLD),
            Style::new().add_modifier(Modifier::BOLD),
        )
    }

    /// The style of one token.
    pub fn token(&self, mode: ColourMode, look: &TokenLook<'_>) -> Style {
        match (mode, look.reason) {
            (_, Reason::Context(s)) => {
                if mode == ColourMode::Provenance {
                    self.source(*s)
                } else {
                    self.dim()
                }
            }
            (_, Reason::AfterClosure) => self.pick(
                Style::new().fg(Color::DarkGray).add_modifier(Modifier::CROSSED_OUT),
                Style::new().add_modifier(Modifier::CROSSED_OUT | Modifier::DIM),
            ),
            (_, Reason::EvaluatorOutput) => self.pick(
                Style::new().fg(Color::Red).add_modifier(Modifier::DIM),
                Style::new().add_modifier(Modifier::DIM | Modifier::ITALIC),
            ),
            (ColourMode::Provenance, _) => self.policy(),
            (ColourMode::Heat, _) => self.heat(look.logprob),
            (ColourMode::Claims, r) => self.claim(r, look.step),
        }
    }

    /// Claim-state style of a trainable token.
    pub fn claim(&self, r: &Reason, step: u32) -> Style {
        let c = self.color;
        match r {
            Reason::Claimed { draw, .. } if *draw == step => {
                if c {
                    Style::new().bg(Color::LightGreen).fg(Color::Black).add_modifier(Modifier::BOLD)
                } else {
                    Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
                }
            }
            Reason::Claimed { .. } => self.pick(Style::new().fg(Color::Green), Style::new().add_modifier(Modifier::BOLD)),
            Reason::NotYetClaimed => self.pick(Style::new().fg(Color::White), Style::new()),
            Reason::LeftOutJmax | Reason::LeftOutClass => self.pick(
                Style::new().fg(ORANGE),
                Style::new().add_modifier(Modifier::ITALIC | Modifier::UNDERLINED),
            ),
            Reason::Excluded(_) => self.pick(
                Style::new().fg(Color::Red).add_modifier(Modifier::CROSSED_OUT),
                Style::new().add_modifier(Modifier::CROSSED_OUT),
            ),
            Reason::Dummy => self.pick(Style::new().fg(Color::Indexed(245)).add_modifier(Modifier::ITALIC), Style::new().add_modifier(Modifier::ITALIC)),
            _ => self.dim(),
        }
    }

    /// Heat-map style for a behaviour log-prob (probability buckets).
    pub fn heat(&self, lp: Option<f64>) -> Style {
        let Some(lp) = lp else {
            return self.pick(Style::new().fg(Color::Gray).add_modifier(Modifier::ITALIC), Style::new().add_modifier(Modifier::ITALIC));
        };
        let p = lp.exp();
        if !self.color {
            return if p < 0.1 {
                Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
            } else if p < 0.5 {
                Style::new().add_modifier(Modifier::UNDERLINED)
            } else {
                Style::new()
            };
        }
        let colour = HEAT
            .iter()
            .find(|(min, _)| p >= *min)
            .map_or(Color::Red, |(_, c)| *c);
        Style::new().fg(colour)
    }
}

/// Heat buckets: probability at least `min` → colour.
pub const HEAT: [(f64, Color); 5] = [
    (0.9, Color::Indexed(46)),
    (0.6, Color::Indexed(154)),
    (0.3, Color::Indexed(226)),
    (0.1, Color::Indexed(208)),
    (0.0, Color::Indexed(196)),
];
