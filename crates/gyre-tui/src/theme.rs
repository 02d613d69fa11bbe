//! Colours and styles. One palette, with a monochrome variant for `NO_COLOR` that keeps every
//! distinction visible through bold, underline, reverse and strike-through.

use ratatui::style::{Color, Modifier, Style};

use gyre_engine::paint::Tone;
use gyre_engine::record::Source;

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
            Style::new()
                .bg(Color::Blue)
                .fg(Color::White)
                .add_modifier(Modifier::BOLD)
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
        self.pick(
            Style::new().fg(Color::DarkGray),
            Style::new().add_modifier(Modifier::DIM),
        )
    }

    /// Emphasis.
    pub fn strong(&self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }

    /// Good news (scored, valid, chosen).
    pub fn good(&self) -> Style {
        self.pick(
            Style::new().fg(Color::Green),
            Style::new().add_modifier(Modifier::BOLD),
        )
    }

    /// Bad news (excluded, failed).
    pub fn bad(&self) -> Style {
        self.pick(
            Style::new().fg(Color::Red),
            Style::new().add_modifier(Modifier::UNDERLINED),
        )
    }

    /// Warnings (dummy, left out).
    pub fn warn(&self) -> Style {
        self.pick(
            Style::new().fg(ORANGE),
            Style::new().add_modifier(Modifier::ITALIC),
        )
    }

    /// Markers in the tree (branches).
    pub fn marker(&self) -> Style {
        self.pick(
            Style::new().fg(Color::Magenta),
            Style::new().add_modifier(Modifier::ITALIC),
        )
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
            base.bg(Color::Yellow)
                .fg(Color::Black)
                .add_modifier(Modifier::BOLD)
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

    /// A token as the highlighted trained sample holds it (`held`: 0 not in it, then
    /// `audit::IN_SAMPLE`, `audit::TRAINED_BY_SAMPLE`): the rest fades, what it trains is
    /// underlined.
    pub fn in_sample(&self, base: Style, held: u8) -> Style {
        match held {
            0 => base.add_modifier(Modifier::DIM),
            crate::audit::TRAINED_BY_SAMPLE => base.add_modifier(Modifier::UNDERLINED),
            _ => base,
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

    /// The style of a token tone; the same hues `gyre show` writes (the binary's `show::ansi`).
    pub fn tone(&self, tone: Tone) -> Style {
        use Source::*;
        let s = Style::new();
        if !self.color {
            return match tone {
                Tone::ThisDraw => s.add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
                Tone::Claimed | Tone::Policy => s.add_modifier(Modifier::BOLD),
                Tone::Unclaimed => s,
                Tone::LeftOut => s.add_modifier(Modifier::ITALIC | Modifier::UNDERLINED),
                Tone::Excluded => s.add_modifier(Modifier::CROSSED_OUT),
                Tone::AfterClosure => s.add_modifier(Modifier::CROSSED_OUT | Modifier::DIM),
                Tone::NotTrainable => s.add_modifier(Modifier::DIM | Modifier::ITALIC),
                Tone::Evaluator => s.add_modifier(Modifier::BOLD | Modifier::ITALIC),
                // Each context kind its own attributes, so provenance reads without colour.
                Tone::Context(System) => s.add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
                Tone::Context(User) => s.add_modifier(Modifier::UNDERLINED),
                Tone::Context(Tool) => s.add_modifier(Modifier::ITALIC),
                Tone::Context(Assistant) => s.add_modifier(Modifier::ITALIC | Modifier::UNDERLINED),
                Tone::Context(Critique) => s.add_modifier(Modifier::DIM | Modifier::ITALIC),
                Tone::Context(Summary) => s.add_modifier(Modifier::DIM | Modifier::UNDERLINED),
                Tone::Context(Template) => {
                    s.add_modifier(Modifier::DIM | Modifier::ITALIC | Modifier::UNDERLINED)
                }
                Tone::Context(Context) => s.add_modifier(Modifier::DIM),
                // Emphasis grows as the log-prob falls, one look per bucket.
                Tone::Heat(0) => s,
                Tone::Heat(1) => s.add_modifier(Modifier::DIM | Modifier::UNDERLINED),
                Tone::Heat(2) => s.add_modifier(Modifier::UNDERLINED),
                Tone::Heat(3) => s.add_modifier(Modifier::BOLD),
                Tone::Heat(_) => s.add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
                Tone::NoLogprob => s.add_modifier(Modifier::ITALIC),
                Tone::Lens(0) => s.add_modifier(Modifier::ITALIC | Modifier::CROSSED_OUT),
                Tone::Lens(1) => s.add_modifier(Modifier::ITALIC),
                Tone::Lens(2) => s,
                Tone::Lens(3) => s.add_modifier(Modifier::BOLD),
                Tone::Lens(_) => s.add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
                Tone::LensPending => s.add_modifier(Modifier::DIM | Modifier::ITALIC),
                Tone::Gained => s.add_modifier(Modifier::BOLD | Modifier::REVERSED),
                Tone::Lost => s.add_modifier(Modifier::CROSSED_OUT | Modifier::REVERSED),
                Tone::Kept => s.add_modifier(Modifier::BOLD),
                Tone::Agreeing => s.add_modifier(Modifier::BOLD),
                Tone::TrainedNotSampled => s.add_modifier(Modifier::REVERSED | Modifier::BOLD),
                Tone::SampledNotTrained => s.add_modifier(Modifier::UNDERLINED | Modifier::ITALIC),
                Tone::TrainedTwice => s.add_modifier(Modifier::REVERSED),
                Tone::Forked => s.add_modifier(Modifier::UNDERLINED | Modifier::BOLD),
                Tone::Untrained => s.add_modifier(Modifier::DIM | Modifier::ITALIC),
                Tone::InNoSample => s.add_modifier(Modifier::DIM | Modifier::CROSSED_OUT),
                // The gap: italic below 0, plain around it, bold above; reversed at the bound.
                Tone::Gap(0) => s.add_modifier(Modifier::REVERSED | Modifier::ITALIC),
                Tone::Gap(1) => s.add_modifier(Modifier::ITALIC | Modifier::UNDERLINED),
                Tone::Gap(2) => s.add_modifier(Modifier::ITALIC),
                Tone::Gap(3) => s,
                Tone::Gap(4) => s.add_modifier(Modifier::UNDERLINED),
                Tone::Gap(5) => s.add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
                Tone::Gap(_) => s.add_modifier(Modifier::REVERSED | Modifier::BOLD),
                Tone::NoGap => s.add_modifier(Modifier::DIM),
                Tone::AuditPending => s.add_modifier(Modifier::DIM | Modifier::ITALIC),
            };
        }
        match tone {
            Tone::Context(System) => s.fg(Color::Blue),
            Tone::Context(User) => s.fg(Color::Cyan),
            Tone::Context(Tool) => s.fg(Color::Yellow),
            Tone::Context(Assistant) => s.fg(Color::Magenta),
            Tone::Context(Critique) => s.fg(Color::Indexed(174)),
            Tone::Context(Summary) => s.fg(Color::Indexed(141)),
            Tone::Context(Template) => s.fg(Color::DarkGray),
            Tone::Context(Context) => s.fg(Color::Gray).add_modifier(Modifier::DIM),
            Tone::Policy => s.fg(Color::LightGreen).add_modifier(Modifier::BOLD),
            Tone::Evaluator => s.fg(Color::LightRed),
            Tone::AfterClosure => s.fg(Color::DarkGray).add_modifier(Modifier::CROSSED_OUT),
            Tone::NotTrainable => s.fg(Color::Green).add_modifier(Modifier::DIM),
            Tone::ThisDraw => s
                .fg(Color::Black)
                .bg(Color::LightGreen)
                .add_modifier(Modifier::BOLD),
            Tone::Claimed => s.fg(Color::Green),
            Tone::Unclaimed => s.fg(Color::White),
            Tone::LeftOut => s.fg(ORANGE),
            Tone::Excluded => s.fg(Color::Red).add_modifier(Modifier::CROSSED_OUT),
            Tone::Heat(0) => s.fg(Color::Indexed(46)),
            Tone::Heat(1) => s.fg(Color::Indexed(154)),
            Tone::Heat(2) => s.fg(Color::Indexed(220)),
            Tone::Heat(3) => s.fg(ORANGE),
            Tone::Heat(_) => s.fg(Color::Indexed(196)),
            Tone::NoLogprob => s.fg(Color::Gray).add_modifier(Modifier::UNDERLINED),
            Tone::Lens(0) => s.fg(Color::Indexed(196)),
            Tone::Lens(1) => s.fg(ORANGE),
            Tone::Lens(2) => s.fg(Color::Indexed(220)),
            Tone::Lens(3) => s.fg(Color::Indexed(154)),
            Tone::Lens(_) => s.fg(Color::Indexed(46)).add_modifier(Modifier::BOLD),
            Tone::LensPending => s.fg(Color::Gray).add_modifier(Modifier::ITALIC),
            Tone::Gained => s
                .fg(Color::Black)
                .bg(Color::LightGreen)
                .add_modifier(Modifier::BOLD),
            Tone::Lost => s
                .fg(Color::Black)
                .bg(Color::LightRed)
                .add_modifier(Modifier::BOLD),
            Tone::Kept => s.fg(Color::Green),
            Tone::Agreeing => s.fg(Color::Green),
            Tone::TrainedNotSampled => s
                .fg(Color::Black)
                .bg(Color::LightRed)
                .add_modifier(Modifier::BOLD),
            Tone::SampledNotTrained => s.fg(Color::Indexed(220)).add_modifier(Modifier::UNDERLINED),
            Tone::TrainedTwice => s
                .fg(Color::Black)
                .bg(Color::LightMagenta)
                .add_modifier(Modifier::BOLD),
            Tone::Forked => s.fg(Color::Black).bg(Color::LightCyan),
            Tone::Untrained => s.fg(Color::DarkGray).add_modifier(Modifier::ITALIC),
            Tone::InNoSample => s.fg(Color::DarkGray).add_modifier(Modifier::DIM),
            // A diverging scale: blue where the trainer is less sure than the sampler, red
            // where it is surer, grey around 0.
            Tone::Gap(0) => s.fg(Color::Indexed(33)).add_modifier(Modifier::BOLD),
            Tone::Gap(1) => s.fg(Color::Indexed(75)),
            Tone::Gap(2) => s.fg(Color::Indexed(117)),
            Tone::Gap(3) => s.fg(Color::Indexed(250)),
            Tone::Gap(4) => s.fg(Color::Indexed(217)),
            Tone::Gap(5) => s.fg(Color::Indexed(209)),
            Tone::Gap(_) => s.fg(Color::Indexed(196)).add_modifier(Modifier::BOLD),
            Tone::NoGap => s.fg(Color::DarkGray).add_modifier(Modifier::DIM),
            Tone::AuditPending => s.fg(Color::Gray).add_modifier(Modifier::ITALIC),
        }
    }
}
