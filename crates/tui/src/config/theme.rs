//! Colour themes: semantic roles (ok, warn, error, selection, bars…) mapped to terminal
//! colours. The built-in themes are the files in `themes/`, compiled in; a user theme file
//! names a `base` and overrides only the roles it sets.

use ratatui::style::{Color, Modifier, Style};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// WCAG 2 AA's least contrast ratio for normal text.
pub const MIN_CONTRAST: f64 = 4.5;

/// A colour as the usual terminal palette (xterm's) shows it; None for the terminal's own
/// default, which only the terminal knows.
pub fn rgb(colour: Color) -> Option<(u8, u8, u8)> {
    Some(match colour {
        Color::Reset => return None,
        Color::Black => (0, 0, 0),
        Color::Red => (205, 0, 0),
        Color::Green => (0, 205, 0),
        Color::Yellow => (205, 205, 0),
        Color::Blue => (0, 0, 238),
        Color::Magenta => (205, 0, 205),
        Color::Cyan => (0, 205, 205),
        Color::Gray => (229, 229, 229),
        Color::DarkGray => (127, 127, 127),
        Color::LightRed => (255, 0, 0),
        Color::LightGreen => (0, 255, 0),
        Color::LightYellow => (255, 255, 0),
        Color::LightBlue => (92, 92, 255),
        Color::LightMagenta => (255, 0, 255),
        Color::LightCyan => (0, 255, 255),
        Color::White => (255, 255, 255),
        Color::Rgb(r, g, b) => (r, g, b),
        Color::Indexed(i) => indexed(i),
    })
}

/// The 256-colour palette: the 16 basic colours, a 6×6×6 cube, 24 greys.
fn indexed(i: u8) -> (u8, u8, u8) {
    const BASIC: [Color; 16] = [
        Color::Black,
        Color::Red,
        Color::Green,
        Color::Yellow,
        Color::Blue,
        Color::Magenta,
        Color::Cyan,
        Color::Gray,
        Color::DarkGray,
        Color::LightRed,
        Color::LightGreen,
        Color::LightYellow,
        Color::LightBlue,
        Color::LightMagenta,
        Color::LightCyan,
        Color::White,
    ];
    match i {
        0..=15 => rgb(BASIC[usize::from(i)]).unwrap_or((0, 0, 0)),
        16..=231 => {
            let level = |n: u8| if n == 0 { 0 } else { 55 + n * 40 };
            let n = i - 16;
            (level(n / 36), level((n / 6) % 6), level(n % 6))
        }
        _ => {
            let grey = 8 + (i - 232) * 10;
            (grey, grey, grey)
        }
    }
}

/// Whether a cell's symbol is something to read: not blank, not a box-drawing line or a
/// block element, whose foreground is a drawn colour (a bar, a border), not text.
fn is_text(symbol: &str) -> bool {
    symbol
        .chars()
        .any(|c| !c.is_whitespace() && !('\u{2500}'..='\u{259f}').contains(&c))
}

/// WCAG 2 relative luminance.
fn luminance((r, g, b): (u8, u8, u8)) -> f64 {
    let channel = |c: u8| {
        let c = f64::from(c) / 255.0;
        if c <= 0.039_28 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)
}

/// WCAG 2 contrast ratio (1 to 21) of two colours; None when either is the terminal's
/// default.
pub fn contrast(a: Color, b: Color) -> Option<f64> {
    let (la, lb) = (luminance(rgb(a)?), luminance(rgb(b)?));
    let (hi, lo) = if la >= lb { (la, lb) } else { (lb, la) };
    Some((hi + 0.05) / (lo + 0.05))
}

/// One semantic colour role. The UI asks for a role, never for a literal colour, so a
/// theme file can restyle everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Text,
    Muted,
    Accent,
    Ok,
    Warn,
    Error,
    SelectionFg,
    SelectionBg,
    Bar,
    BarError,
    Border,
    Title,
    StatusBg,
    StatusFg,
    Gauge,
    GaugeExhausted,
    JsonKey,
    JsonString,
    JsonNumber,
    JsonLiteral,
    JsonPunct,
}

impl Role {
    pub const ALL: [Role; 21] = [
        Role::Text,
        Role::Muted,
        Role::Accent,
        Role::Ok,
        Role::Warn,
        Role::Error,
        Role::SelectionFg,
        Role::SelectionBg,
        Role::Bar,
        Role::BarError,
        Role::Border,
        Role::Title,
        Role::StatusBg,
        Role::StatusFg,
        Role::Gauge,
        Role::GaugeExhausted,
        Role::JsonKey,
        Role::JsonString,
        Role::JsonNumber,
        Role::JsonLiteral,
        Role::JsonPunct,
    ];

    /// The role's key in a theme file.
    pub fn key(self) -> &'static str {
        match self {
            Role::Text => "text",
            Role::Muted => "muted",
            Role::Accent => "accent",
            Role::Ok => "ok",
            Role::Warn => "warn",
            Role::Error => "error",
            Role::SelectionFg => "selection_fg",
            Role::SelectionBg => "selection_bg",
            Role::Bar => "bar",
            Role::BarError => "bar_error",
            Role::Border => "border",
            Role::Title => "title",
            Role::StatusBg => "status_bg",
            Role::StatusFg => "status_fg",
            Role::Gauge => "gauge",
            Role::GaugeExhausted => "gauge_exhausted",
            Role::JsonKey => "json_key",
            Role::JsonString => "json_string",
            Role::JsonNumber => "json_number",
            Role::JsonLiteral => "json_literal",
            Role::JsonPunct => "json_punct",
        }
    }

    pub fn from_key(key: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.key() == key)
    }

    /// What the role colours, for docs and `--print-config`.
    pub fn meaning(self) -> &'static str {
        match self {
            Role::Text => "ordinary text",
            Role::Muted => "secondary text, expired or disabled rows",
            Role::Accent => "highlights, active tab, keys in hints",
            Role::Ok => "success: passed, approved, connected",
            Role::Warn => "attention: pending, reconnecting, flaky",
            Role::Error => "failure: envelopes, denied, errors",
            Role::SelectionFg => "text of the selected row",
            Role::SelectionBg => "background of the selected row",
            Role::Bar => "timeline bars",
            Role::BarError => "timeline bars of calls that failed",
            Role::Border => "block borders",
            Role::Title => "block titles",
            Role::StatusBg => "status bar background",
            Role::StatusFg => "status bar text",
            Role::Gauge => "gauges: mock consumption, pass rate",
            Role::GaugeExhausted => "gauge of an exhausted mock",
            Role::JsonKey => "JSON in detail panes: object keys",
            Role::JsonString => "JSON in detail panes: string values",
            Role::JsonNumber => "JSON in detail panes: numbers",
            Role::JsonLiteral => "JSON in detail panes: true, false, null",
            Role::JsonPunct => "JSON in detail panes: braces, brackets, commas, colons",
        }
    }
}

/// Names of the themes compiled into the binary, default first.
pub const BUILTIN_NAMES: [&str; 3] = ["dark", "light", "high-contrast"];

/// The built-in theme files, compiled in so the binary works from any directory.
const BUILTIN_FILES: [(&str, &str); 3] = [
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
];

/// Keys a theme file may hold besides the roles.
const META_KEYS: [&str; 2] = ["name", "base"];

/// A resolved theme: every role has a colour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Theme {
    pub name: String,
    pub text: Color,
    pub muted: Color,
    pub accent: Color,
    pub ok: Color,
    pub warn: Color,
    pub error: Color,
    pub selection_fg: Color,
    pub selection_bg: Color,
    pub bar: Color,
    pub bar_error: Color,
    pub border: Color,
    pub title: Color,
    pub status_bg: Color,
    pub status_fg: Color,
    pub gauge: Color,
    pub gauge_exhausted: Color,
    pub json_key: Color,
    pub json_string: Color,
    pub json_number: Color,
    pub json_literal: Color,
    pub json_punct: Color,
}

/// Where a theme came from, for `--print-config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThemeSource {
    BuiltIn(&'static str),
    File(PathBuf),
}

impl fmt::Display for ThemeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThemeSource::BuiltIn(name) => write!(f, "built-in theme {name}"),
            ThemeSource::File(path) => write!(f, "{}", path.display()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ThemeError {
    #[error("theme file {path}: cannot read it: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("theme file {origin}: not valid TOML: {message}")]
    Syntax { origin: String, message: String },
    #[error(
        "theme file {origin}: unknown role `{role}` (= {value}); roles are: {}",
        role_list()
    )]
    UnknownRole {
        origin: String,
        role: String,
        value: String,
    },
    #[error(
        "theme file {origin}: role `{role}` has a bad colour {value}: use a name like \"red\" or \"lightblue\", \"#rrggbb\", or an index 0-255"
    )]
    BadColour {
        origin: String,
        role: String,
        value: String,
    },
    #[error("theme file {origin}: `{key}` must be a string, not {value}")]
    BadMeta {
        origin: String,
        key: String,
        value: String,
    },
    #[error("theme file {origin}: base `{base}` is not a built-in theme ({})", BUILTIN_NAMES.join(", "))]
    UnknownBase { origin: String, base: String },
    #[error("theme file {origin}: roles not set: {}", missing.join(", "))]
    MissingRoles {
        origin: String,
        missing: Vec<&'static str>,
    },
    #[error("no theme named `{name}`: built-in themes are {}; user themes are read from {searched}", BUILTIN_NAMES.join(", "))]
    UnknownTheme { name: String, searched: String },
}

fn role_list() -> String {
    Role::ALL.map(Role::key).join(", ")
}

/// A theme file, checked but not yet laid over its base.
struct ThemeFile {
    name: Option<String>,
    base: Option<String>,
    colours: Vec<(Role, Color)>,
}

impl ThemeFile {
    fn parse(src: &str, origin: &str) -> Result<ThemeFile, ThemeError> {
        let table: toml::Table = toml::from_str(src).map_err(|e| ThemeError::Syntax {
            origin: origin.to_string(),
            message: e.message().to_string(),
        })?;
        let mut file = ThemeFile {
            name: None,
            base: None,
            colours: Vec::new(),
        };
        for (key, value) in &table {
            if META_KEYS.contains(&key.as_str()) {
                let Some(s) = value.as_str() else {
                    return Err(ThemeError::BadMeta {
                        origin: origin.to_string(),
                        key: key.clone(),
                        value: value.to_string(),
                    });
                };
                if key == "name" {
                    file.name = Some(s.to_string());
                } else {
                    file.base = Some(s.to_string());
                }
                continue;
            }
            let Some(role) = Role::from_key(key) else {
                return Err(ThemeError::UnknownRole {
                    origin: origin.to_string(),
                    role: key.clone(),
                    value: value.to_string(),
                });
            };
            let colour = parse_colour(value).ok_or_else(|| ThemeError::BadColour {
                origin: origin.to_string(),
                role: key.clone(),
                value: value.to_string(),
            })?;
            file.colours.push((role, colour));
        }
        Ok(file)
    }
}

/// A colour from a theme file: a ratatui colour name, "#rrggbb", or an index 0-255
/// (as an integer or a string).
pub fn parse_colour(value: &toml::Value) -> Option<Color> {
    match value {
        toml::Value::Integer(i) => u8::try_from(*i).ok().map(Color::Indexed),
        toml::Value::String(s) => Color::from_str(s.trim()).ok(),
        _ => None,
    }
}

impl Theme {
    /// A built-in theme by name.
    pub fn named(name: &str) -> Result<Theme, ThemeError> {
        let Some((name, src)) = BUILTIN_FILES.iter().find(|(n, _)| *n == name) else {
            return Err(ThemeError::UnknownTheme {
                name: name.to_string(),
                searched: "(built-ins only)".to_string(),
            });
        };
        Theme::parse_complete(src, &format!("themes/{name}.toml (built-in)"), name)
    }

    /// A theme file that must set every role itself (the built-ins are such files).
    fn parse_complete(src: &str, origin: &str, default_name: &str) -> Result<Theme, ThemeError> {
        let file = ThemeFile::parse(src, origin)?;
        let missing: Vec<&'static str> = Role::ALL
            .into_iter()
            .filter(|r| !file.colours.iter().any(|(set, _)| set == r))
            .map(Role::key)
            .collect();
        if !missing.is_empty() {
            return Err(ThemeError::MissingRoles {
                origin: origin.to_string(),
                missing,
            });
        }
        let mut theme = Theme::plain();
        theme.name = file.name.unwrap_or_else(|| default_name.to_string());
        for (role, colour) in file.colours {
            theme.set(role, colour);
        }
        Ok(theme)
    }

    /// A user theme: its `base` (default "dark") with the roles the file sets laid over it.
    /// `origin` names the file in errors.
    pub fn parse_user(src: &str, origin: &str, default_name: &str) -> Result<Theme, ThemeError> {
        let file = ThemeFile::parse(src, origin)?;
        let base_name = file.base.as_deref().unwrap_or(BUILTIN_NAMES[0]);
        if !BUILTIN_NAMES.contains(&base_name) {
            return Err(ThemeError::UnknownBase {
                origin: origin.to_string(),
                base: base_name.to_string(),
            });
        }
        let mut theme = Theme::named(base_name)?;
        theme.name = file.name.unwrap_or_else(|| default_name.to_string());
        for (role, colour) in file.colours {
            theme.set(role, colour);
        }
        Ok(theme)
    }

    /// A user theme file on disk.
    pub fn load_file(path: &Path) -> Result<Theme, ThemeError> {
        let src = std::fs::read_to_string(path).map_err(|source| ThemeError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let stem = path.file_stem().map_or_else(
            || "custom".to_string(),
            |s| s.to_string_lossy().into_owned(),
        );
        Theme::parse_user(&src, &path.display().to_string(), &stem)
    }

    /// Find a theme the way `--theme` and the config's `theme` key name it: a path (has a
    /// `/` or ends in `.toml`), else `THEME_DIR/NAME.toml` when that exists (so a user may
    /// shadow a built-in), else a built-in name.
    pub fn resolve(
        spec: &str,
        theme_dir: Option<&Path>,
    ) -> Result<(Theme, ThemeSource), ThemeError> {
        // Case matters: `--theme x.TOML` is a name (and an unknown one), as it always was.
        #[expect(clippy::case_sensitive_file_extension_comparisons)]
        let is_file = spec.contains('/') || spec.ends_with(".toml");
        if is_file {
            let path = PathBuf::from(spec);
            return Ok((Theme::load_file(&path)?, ThemeSource::File(path)));
        }
        if let Some(dir) = theme_dir {
            let path = dir.join(format!("{spec}.toml"));
            if path.is_file() {
                return Ok((Theme::load_file(&path)?, ThemeSource::File(path)));
            }
        }
        if let Some(name) = BUILTIN_NAMES.iter().find(|n| **n == spec) {
            return Ok((Theme::named(name)?, ThemeSource::BuiltIn(name)));
        }
        Err(ThemeError::UnknownTheme {
            name: spec.to_string(),
            searched: theme_dir.map_or_else(
                || "(no theme directory: HOME is not set)".to_string(),
                |d| d.display().to_string(),
            ),
        })
    }

    /// The terminal's own colours for every role: what is left if even the built-in
    /// theme could not be read (a test guarantees it can).
    pub fn plain() -> Theme {
        Theme {
            name: "plain".to_string(),
            text: Color::Reset,
            muted: Color::DarkGray,
            accent: Color::Cyan,
            ok: Color::Green,
            warn: Color::Yellow,
            error: Color::Red,
            selection_fg: Color::Black,
            selection_bg: Color::White,
            bar: Color::Blue,
            bar_error: Color::Red,
            border: Color::Reset,
            title: Color::Reset,
            status_bg: Color::Reset,
            status_fg: Color::Reset,
            gauge: Color::Green,
            gauge_exhausted: Color::Red,
            json_key: Color::Reset,
            json_string: Color::Reset,
            json_number: Color::Reset,
            json_literal: Color::Reset,
            json_punct: Color::Reset,
        }
    }

    pub fn color(&self, role: Role) -> Color {
        match role {
            Role::Text => self.text,
            Role::Muted => self.muted,
            Role::Accent => self.accent,
            Role::Ok => self.ok,
            Role::Warn => self.warn,
            Role::Error => self.error,
            Role::SelectionFg => self.selection_fg,
            Role::SelectionBg => self.selection_bg,
            Role::Bar => self.bar,
            Role::BarError => self.bar_error,
            Role::Border => self.border,
            Role::Title => self.title,
            Role::StatusBg => self.status_bg,
            Role::StatusFg => self.status_fg,
            Role::Gauge => self.gauge,
            Role::GaugeExhausted => self.gauge_exhausted,
            Role::JsonKey => self.json_key,
            Role::JsonString => self.json_string,
            Role::JsonNumber => self.json_number,
            Role::JsonLiteral => self.json_literal,
            Role::JsonPunct => self.json_punct,
        }
    }

    fn set(&mut self, role: Role, colour: Color) {
        let slot = match role {
            Role::Text => &mut self.text,
            Role::Muted => &mut self.muted,
            Role::Accent => &mut self.accent,
            Role::Ok => &mut self.ok,
            Role::Warn => &mut self.warn,
            Role::Error => &mut self.error,
            Role::SelectionFg => &mut self.selection_fg,
            Role::SelectionBg => &mut self.selection_bg,
            Role::Bar => &mut self.bar,
            Role::BarError => &mut self.bar_error,
            Role::Border => &mut self.border,
            Role::Title => &mut self.title,
            Role::StatusBg => &mut self.status_bg,
            Role::StatusFg => &mut self.status_fg,
            Role::Gauge => &mut self.gauge,
            Role::GaugeExhausted => &mut self.gauge_exhausted,
            Role::JsonKey => &mut self.json_key,
            Role::JsonString => &mut self.json_string,
            Role::JsonNumber => &mut self.json_number,
            Role::JsonLiteral => &mut self.json_literal,
            Role::JsonPunct => &mut self.json_punct,
        };
        *slot = colour;
    }

    /// Foreground in the role's colour; background roles colour the background instead.
    pub fn style(&self, role: Role) -> Style {
        match role {
            Role::SelectionBg | Role::StatusBg => Style::new().bg(self.color(role)),
            _ => Style::new().fg(self.color(role)),
        }
    }

    /// Makes every cell of `buf` that has both colours set readable: where a role's
    /// colour meets a background it was not chosen for (an `active` in green on the
    /// selected row's light background, an accent on the status bar) and their contrast is
    /// under WCAG AA's 4.5:1, the text takes that background's own foreground (the
    /// selection's or the status bar's), else black or white, whichever reads better.
    /// Cells drawn reversed, or with the terminal's default colours, are left alone: their
    /// colours are the terminal's to choose.
    pub fn keep_readable(&self, buf: &mut ratatui::buffer::Buffer) {
        let mut last: Option<(Color, Color, Color)> = None;
        for cell in &mut buf.content {
            let (fg, bg) = (cell.fg, cell.bg);
            if fg == Color::Reset
                || bg == Color::Reset
                || cell.modifier.contains(Modifier::REVERSED)
                || !is_text(cell.symbol())
            {
                continue;
            }
            let fixed = match last {
                Some((f, b, to)) if f == fg && b == bg => to,
                _ => {
                    let to = self.readable_on(fg, bg);
                    last = Some((fg, bg, to));
                    to
                }
            };
            cell.fg = fixed;
        }
    }

    /// `fg` when it reads on `bg` (contrast at least 4.5:1), else a colour that does.
    pub fn readable_on(&self, fg: Color, bg: Color) -> Color {
        if contrast(fg, bg).is_none_or(|ratio| ratio >= MIN_CONTRAST) {
            return fg;
        }
        let own = if bg == self.selection_bg {
            Some(self.selection_fg)
        } else if bg == self.status_bg {
            Some(self.status_fg)
        } else {
            None
        };
        if let Some(own) = own
            && contrast(own, bg).is_some_and(|ratio| ratio >= MIN_CONTRAST)
        {
            return own;
        }
        let on_black = contrast(Color::Black, bg).unwrap_or(0.0);
        let on_white = contrast(Color::White, bg).unwrap_or(0.0);
        if on_black >= on_white {
            Color::Black
        } else {
            Color::White
        }
    }

    /// The selected row.
    pub fn selection(&self) -> Style {
        Style::new().fg(self.selection_fg).bg(self.selection_bg)
    }

    /// The status bar.
    pub fn status_bar(&self) -> Style {
        Style::new().fg(self.status_fg).bg(self.status_bg)
    }

    // Shorthands for the roles views use most; each is `style(role)`.

    pub fn text(&self) -> Style {
        self.style(Role::Text)
    }

    pub fn muted(&self) -> Style {
        self.style(Role::Muted)
    }

    pub fn accent(&self) -> Style {
        self.style(Role::Accent)
    }

    pub fn ok(&self) -> Style {
        self.style(Role::Ok)
    }

    pub fn warn(&self) -> Style {
        self.style(Role::Warn)
    }

    pub fn error(&self) -> Style {
        self.style(Role::Error)
    }

    pub fn bar(&self) -> Style {
        self.style(Role::Bar)
    }

    pub fn border(&self) -> Style {
        self.style(Role::Border)
    }

    /// Block titles: the title colour, bold.
    pub fn title(&self) -> Style {
        self.style(Role::Title).add_modifier(Modifier::BOLD)
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

impl Default for Theme {
    fn default() -> Theme {
        Theme::named(BUILTIN_NAMES[0]).unwrap_or_else(|_| Theme::plain())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contrast_follows_wcag() {
        assert!((contrast(Color::Black, Color::White).unwrap() - 21.0).abs() < 1e-9);
        assert!((contrast(Color::Green, Color::Green).unwrap() - 1.0).abs() < 1e-9);
        assert_eq!(contrast(Color::Reset, Color::White), None);
        // #767676 on white is the textbook 4.54:1.
        let grey = contrast(Color::Rgb(0x76, 0x76, 0x76), Color::White).unwrap();
        assert!((grey - 4.54).abs() < 0.01, "{grey}");
        assert_eq!(rgb(Color::Indexed(111)), Some((135, 175, 255)));
        assert_eq!(rgb(Color::Indexed(244)), Some((128, 128, 128)));
    }

    #[test]
    fn every_builtin_theme_pairs_and_every_role_on_them_read_at_aa() {
        for name in BUILTIN_NAMES {
            let theme = Theme::named(name).unwrap();
            for (fg, bg, what) in [
                (theme.selection_fg, theme.selection_bg, "selection"),
                (theme.status_fg, theme.status_bg, "status bar"),
            ] {
                let ratio = contrast(fg, bg).unwrap();
                assert!(ratio >= MIN_CONTRAST, "{name} {what}: {ratio:.2}");
            }
            for role in Role::ALL {
                for bg in [theme.selection_bg, theme.status_bg] {
                    let shown = theme.readable_on(theme.color(role), bg);
                    let ratio = contrast(shown, bg).unwrap_or(21.0);
                    assert!(
                        ratio >= MIN_CONTRAST,
                        "{name} {role:?} on {bg:?}: {ratio:.2}"
                    );
                }
            }
        }
    }
    /// Detail panes draw JSON on the terminal's own background: each built-in theme's
    /// JSON colours read at AA on the background it is made for (black for dark and
    /// high-contrast, white for light).
    #[test]
    fn json_colours_read_on_the_background_each_theme_is_made_for() {
        for (name, page) in [
            ("dark", Color::Black),
            ("high-contrast", Color::Black),
            ("light", Color::White),
        ] {
            let theme = Theme::named(name).unwrap();
            for role in [
                Role::JsonKey,
                Role::JsonString,
                Role::JsonNumber,
                Role::JsonLiteral,
                Role::JsonPunct,
            ] {
                let ratio = contrast(theme.color(role), page).unwrap();
                assert!(ratio >= MIN_CONTRAST, "{name} {role:?}: {ratio:.2}");
            }
        }
    }

    use std::collections::BTreeSet;

    /// Read from the source tree, not the compiled-in copy, so a theme added to `themes/`
    /// without being registered is caught too.
    fn theme_files_on_disk() -> Vec<(String, String)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("themes");
        let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .map(|p| {
                let name = p.file_stem().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read_to_string(&p).unwrap())
            })
            .collect();
        files.sort();
        files
    }

    #[test]
    fn every_theme_file_sets_exactly_every_role() {
        let files = theme_files_on_disk();
        assert!(files.len() >= 3, "themes/ holds {} files", files.len());
        let roles: BTreeSet<&str> = Role::ALL.map(Role::key).into_iter().collect();
        assert_eq!(roles.len(), Role::ALL.len(), "two roles share a key");
        for (name, src) in &files {
            let table: toml::Table = toml::from_str(src).unwrap();
            let keys: BTreeSet<&str> = table
                .keys()
                .map(String::as_str)
                .filter(|k| !META_KEYS.contains(k))
                .collect();
            let missing: Vec<_> = roles.difference(&keys).collect();
            let extra: Vec<_> = keys.difference(&roles).collect();
            assert!(missing.is_empty(), "{name}.toml lacks roles {missing:?}");
            assert!(extra.is_empty(), "{name}.toml has unknown roles {extra:?}");
            assert!(
                !table.contains_key("base"),
                "{name}.toml is built-in: no base"
            );
            assert!(
                BUILTIN_NAMES.contains(&name.as_str()),
                "{name}.toml is not compiled in"
            );
            let theme = Theme::named(name).unwrap();
            assert_eq!(&theme.name, name);
        }
    }

    #[test]
    fn builtin_themes_differ_and_dark_is_default() {
        let dark = Theme::named("dark").unwrap();
        let light = Theme::named("light").unwrap();
        let hc = Theme::named("high-contrast").unwrap();
        assert_eq!(Theme::default(), dark);
        assert_ne!(dark, light);
        assert_ne!(dark, hc);
        // Selected rows must be readable in every theme.
        for t in [&dark, &light, &hc] {
            assert_ne!(t.selection_fg, t.selection_bg, "{}", t.name);
            assert_ne!(t.status_fg, t.status_bg, "{}", t.name);
        }
    }

    #[test]
    fn each_role_reads_and_writes_its_own_field() {
        let mut theme = Theme::plain();
        for (i, role) in Role::ALL.into_iter().enumerate() {
            theme.set(role, Color::Indexed(i as u8 + 100));
        }
        for (i, role) in Role::ALL.into_iter().enumerate() {
            assert_eq!(theme.color(role), Color::Indexed(i as u8 + 100), "{role:?}");
            assert_eq!(Role::from_key(role.key()), Some(role));
        }
    }

    #[test]
    fn colours_by_name_hex_and_index() {
        let theme = Theme::parse_user(
            "ok = \"lightblue\"\nwarn = \"#ff8000\"\nerror = 196\nmuted = \"244\"\ntext = \"dark gray\"",
            "t.toml",
            "t",
        )
        .unwrap();
        assert_eq!(theme.ok, Color::LightBlue);
        assert_eq!(theme.warn, Color::Rgb(255, 128, 0));
        assert_eq!(theme.error, Color::Indexed(196));
        assert_eq!(theme.muted, Color::Indexed(244));
        assert_eq!(theme.text, Color::DarkGray);
    }

    #[test]
    fn user_theme_overrides_only_the_roles_it_sets() {
        let light = Theme::named("light").unwrap();
        let theme = Theme::parse_user(
            "base = \"light\"\nname = \"mine\"\naccent = \"magenta\"\nbar = \"#010203\"",
            "mine.toml",
            "x",
        )
        .unwrap();
        assert_eq!(theme.name, "mine");
        assert_eq!(theme.accent, Color::Magenta);
        assert_eq!(theme.bar, Color::Rgb(1, 2, 3));
        for role in Role::ALL {
            if role != Role::Accent && role != Role::Bar {
                assert_eq!(theme.color(role), light.color(role), "{role:?}");
            }
        }
        // No base means the default theme underneath.
        let on_dark = Theme::parse_user("ok = \"white\"", "w.toml", "w").unwrap();
        assert_eq!(on_dark.ok, Color::White);
        assert_eq!(on_dark.error, Theme::named("dark").unwrap().error);
        assert_eq!(on_dark.name, "w");
    }

    #[test]
    fn bad_colour_names_file_role_and_value() {
        let err = Theme::parse_user("warn = \"orangeish\"", "/home/u/mine.toml", "m")
            .unwrap_err()
            .to_string();
        assert!(err.contains("/home/u/mine.toml"), "{err}");
        assert!(err.contains("`warn`"), "{err}");
        assert!(err.contains("\"orangeish\""), "{err}");
        for bad in ["\"#12345\"", "256", "-1", "true", "[1, 2]", "\"#gggggg\""] {
            let src = format!("ok = {bad}");
            let err = Theme::parse_user(&src, "f.toml", "f").unwrap_err();
            assert!(
                matches!(&err, ThemeError::BadColour { role, .. } if role == "ok"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn unknown_role_names_file_role_and_value() {
        let err = Theme::parse_user("acent = \"red\"", "/t/typo.toml", "t")
            .unwrap_err()
            .to_string();
        assert!(err.contains("/t/typo.toml"), "{err}");
        assert!(err.contains("`acent`"), "{err}");
        assert!(err.contains("\"red\""), "{err}");
        assert!(err.contains("accent"), "lists the real roles: {err}");
    }

    #[test]
    fn broken_toml_unknown_base_and_bad_meta_are_errors() {
        let err = Theme::parse_user("ok = \"red", "b.toml", "b").unwrap_err();
        assert!(matches!(err, ThemeError::Syntax { .. }), "{err}");
        assert!(err.to_string().contains("b.toml"));
        let err = Theme::parse_user("base = \"solarized\"", "b.toml", "b").unwrap_err();
        assert!(err.to_string().contains("solarized"), "{err}");
        let err = Theme::parse_user("base = 3", "b.toml", "b").unwrap_err();
        assert!(matches!(err, ThemeError::BadMeta { .. }), "{err}");
    }

    #[test]
    fn a_builtin_missing_a_role_is_rejected() {
        let err = Theme::parse_complete("text = \"red\"", "x.toml", "x").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("gauge_exhausted"), "{msg}");
        assert!(!msg.contains("text,"), "{msg}");
    }

    #[test]
    fn resolve_by_path_user_dir_then_builtin() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("dark.toml"), "error = \"#ff0000\"").unwrap();
        std::fs::write(dir.path().join("ocean.toml"), "base = \"light\"\nbar = 27").unwrap();

        let (t, src) = Theme::resolve("ocean", Some(dir.path())).unwrap();
        assert_eq!(t.bar, Color::Indexed(27));
        assert_eq!(src, ThemeSource::File(dir.path().join("ocean.toml")));

        // A user file shadows the built-in of the same name.
        let (t, _) = Theme::resolve("dark", Some(dir.path())).unwrap();
        assert_eq!(t.error, Color::Rgb(255, 0, 0));

        let (t, src) = Theme::resolve("light", Some(dir.path())).unwrap();
        assert_eq!(t, Theme::named("light").unwrap());
        assert_eq!(src, ThemeSource::BuiltIn("light"));

        let path = dir.path().join("ocean.toml");
        let (t, _) = Theme::resolve(path.to_str().unwrap(), None).unwrap();
        assert_eq!(t.name, "ocean");

        let err = Theme::resolve("nope", Some(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("nope") && err.contains("high-contrast"),
            "{err}"
        );
        let err = Theme::resolve("/no/such/theme.toml", None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/no/such/theme.toml"), "{err}");
    }
}
