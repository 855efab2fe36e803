//! Colours by meaning. Views ask the `Theme` for a role (ok, warn, error, muted, accent,
//! selection, bar) and never name a colour; theme files plug in here.

use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub ok: Color,
    pub warn: Color,
    pub error: Color,
    pub muted: Color,
    pub accent: Color,
    pub selection_fg: Color,
    pub selection_bg: Color,
    pub bar: Color,
}

impl Default for Theme {
    fn default() -> Self {
        Self::dark()
    }
}

impl Theme {
    pub fn dark() -> Self {
        Self {
            ok: Color::Green,
            warn: Color::Yellow,
            error: Color::Red,
            muted: Color::DarkGray,
            accent: Color::Cyan,
            selection_fg: Color::Black,
            selection_bg: Color::Cyan,
            bar: Color::Blue,
        }
    }

    pub fn ok(&self) -> Style {
        Style::new().fg(self.ok)
    }

    pub fn warn(&self) -> Style {
        Style::new().fg(self.warn)
    }

    pub fn error(&self) -> Style {
        Style::new().fg(self.error)
    }

    pub fn muted(&self) -> Style {
        Style::new().fg(self.muted)
    }

    pub fn accent(&self) -> Style {
        Style::new().fg(self.accent)
    }

    pub fn title(&self) -> Style {
        Style::new().fg(self.accent).add_modifier(Modifier::BOLD)
    }

    pub fn selection(&self) -> Style {
        Style::new().fg(self.selection_fg).bg(self.selection_bg)
    }

    pub fn bar(&self) -> Style {
        Style::new().fg(self.bar)
    }

    /// The colour an envelope code (or a plain success, `None`) is shown in.
    pub fn outcome(&self, code: Option<&str>) -> Style {
        match code {
            None => self.ok(),
            Some("approval_required") => self.warn(),
            Some(_) => self.error(),
        }
    }
}
