//! User configuration: the config file (`$XDG_CONFIG_HOME/spyglass/config.toml`), merged
//! with environment and command-line overrides into one resolved config that remembers
//! where each value came from, and the paths spyglass reads and writes.

pub mod keys;
pub mod theme;

use crate::mask::mask_secret;
use keys::{Action, Key, KeyMap, parse_key};
use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};
use theme::{Theme, ThemeError, ThemeSource};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path}: cannot read it: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path}: not valid TOML: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("config file {path}: unknown key `{key}`; known keys here: {known}")]
    UnknownKey {
        path: PathBuf,
        key: String,
        known: String,
    },
    #[error("config file {path}: `{key}` = {value}: {expected}")]
    BadValue {
        path: PathBuf,
        key: String,
        value: String,
        expected: String,
    },
    #[error("bad key {value:?}: {reason}")]
    BadKey { value: String, reason: String },
    #[error("{0}")]
    Theme(#[from] ThemeError),
}

/// A secret string: never shown by `Debug` or `Display`, only through [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({})", mask_secret(&self.0))
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&mask_secret(&self.0))
    }
}

/// How much of the stream the inspector keeps. Every buffer that grows with the stream
/// is bounded by one of these; what falls off is counted and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct History {
    pub sessions: usize,
    pub calls_per_session: usize,
    pub events: usize,
    pub approvals: usize,
    pub eval_runs: usize,
}

impl Default for History {
    fn default() -> History {
        History {
            sessions: 1_000,
            calls_per_session: 5_000,
            events: 20_000,
            approvals: 1_000,
            eval_runs: 200,
        }
    }
}

impl History {
    pub const KEYS: [&'static str; 5] = [
        "sessions",
        "calls_per_session",
        "events",
        "approvals",
        "eval_runs",
    ];

    /// Above this a bound is surely a typo, and would let memory grow without check.
    pub const MAX: usize = 10_000_000;

    pub fn get(&self, key: &str) -> Option<usize> {
        Some(match key {
            "sessions" => self.sessions,
            "calls_per_session" => self.calls_per_session,
            "events" => self.events,
            "approvals" => self.approvals,
            "eval_runs" => self.eval_runs,
            _ => return None,
        })
    }

    fn slot(&mut self, key: &str) -> Option<&mut usize> {
        Some(match key {
            "sessions" => &mut self.sessions,
            "calls_per_session" => &mut self.calls_per_session,
            "events" => &mut self.events,
            "approvals" => &mut self.approvals,
            "eval_runs" => &mut self.eval_runs,
            _ => return None,
        })
    }
}

const TOP_KEYS: [&str; 6] = ["url", "api_key", "theme", "mouse", "history", "keys"];
pub const DEFAULT_THEME: &str = "dark";

/// What one config file says. Every field is optional: unset means "not from the file".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    pub url: Option<String>,
    pub api_key: Option<Secret>,
    pub theme: Option<String>,
    pub mouse: Option<bool>,
    /// Only the bounds the file sets.
    pub history: Vec<(&'static str, usize)>,
    /// Only the actions the file rebinds.
    pub keys: Vec<(Action, Vec<Key>)>,
}

impl Config {
    /// Read and check a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let src = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Config::parse(&src, path)
    }

    /// Check config text; `path` names the file in errors.
    pub fn parse(src: &str, path: &Path) -> Result<Config, ConfigError> {
        let table: toml::Table = toml::from_str(src).map_err(|e| ConfigError::Syntax {
            path: path.to_path_buf(),
            message: e.message().to_string(),
        })?;
        let bad = |key: &str, value: &toml::Value, expected: &str| ConfigError::BadValue {
            path: path.to_path_buf(),
            key: key.to_string(),
            value: shown_value(key, value),
            expected: expected.to_string(),
        };
        let unknown = |key: String, known: &[&str]| ConfigError::UnknownKey {
            path: path.to_path_buf(),
            key,
            known: known.join(", "),
        };

        let mut config = Config::default();
        for (key, value) in &table {
            match key.as_str() {
                "url" => {
                    let url = value
                        .as_str()
                        .filter(|s| s.starts_with("http://") || s.starts_with("https://"))
                        .ok_or_else(|| {
                            bad(
                                key,
                                value,
                                "expected a runtime URL starting with http:// or https://",
                            )
                        })?;
                    config.url = Some(url.trim_end_matches('/').to_string());
                }
                "api_key" => {
                    let k = value
                        .as_str()
                        .filter(|s| !s.trim().is_empty())
                        .ok_or_else(|| bad(key, value, "expected a non-empty string"))?;
                    config.api_key = Some(Secret::new(k.trim()));
                }
                "theme" => {
                    let t = value
                        .as_str()
                        .filter(|s| !s.trim().is_empty())
                        .ok_or_else(|| {
                            bad(key, value, "expected a theme name (dark, light, high-contrast, or a file under the theme dir) or a path")
                        })?;
                    config.theme = Some(t.trim().to_string());
                }
                "mouse" => {
                    let m = value
                        .as_bool()
                        .ok_or_else(|| bad(key, value, "expected true or false"))?;
                    config.mouse = Some(m);
                }
                "history" => {
                    let t = value
                        .as_table()
                        .ok_or_else(|| bad(key, value, "expected a table: [history]"))?;
                    for (name, v) in t {
                        let full = format!("history.{name}");
                        let Some(&name) = History::KEYS.iter().find(|k| **k == name.as_str())
                        else {
                            return Err(unknown(full, &History::KEYS));
                        };
                        let n = v
                            .as_integer()
                            .and_then(|i| usize::try_from(i).ok())
                            .filter(|n| (1..=History::MAX).contains(n))
                            .ok_or_else(|| {
                                bad(
                                    &full,
                                    v,
                                    &format!("expected a whole number from 1 to {}", History::MAX),
                                )
                            })?;
                        config.history.push((name, n));
                    }
                }
                "keys" => {
                    let t = value
                        .as_table()
                        .ok_or_else(|| bad(key, value, "expected a table: [keys]"))?;
                    for (name, v) in t {
                        let full = format!("keys.{name}");
                        let Some(action) = Action::from_name(name) else {
                            let names: Vec<&str> = Action::ALL.map(Action::name).to_vec();
                            return Err(unknown(full, &names));
                        };
                        let texts: Vec<&str> = match v {
                            toml::Value::String(s) => vec![s.as_str()],
                            toml::Value::Array(items) => items
                                .iter()
                                .map(|i| i.as_str())
                                .collect::<Option<Vec<_>>>()
                                .ok_or_else(|| {
                                    bad(&full, v, "expected a key string or a list of them")
                                })?,
                            _ => {
                                return Err(bad(
                                    &full,
                                    v,
                                    "expected a key string or a list of them",
                                ));
                            }
                        };
                        let parsed = texts
                            .into_iter()
                            .map(|text| {
                                parse_key(text).map_err(|e| match e {
                                    ConfigError::BadKey { reason, .. } => bad(&full, v, &reason),
                                    other => other,
                                })
                            })
                            .collect::<Result<Vec<_>, _>>()?;
                        config.keys.push((action, parsed));
                    }
                }
                _ => return Err(unknown(key.clone(), &TOP_KEYS)),
            }
        }
        Ok(config)
    }
}

/// A value as an error message shows it: secrets masked.
fn shown_value(key: &str, value: &toml::Value) -> String {
    match (key, value) {
        ("api_key", toml::Value::String(s)) => format!("{:?}", mask_secret(s)),
        _ => value.to_string(),
    }
}

/// The environment, captured once so resolution is a pure function (and testable).
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: HashMap<String, String>,
}

impl Env {
    const NAMES: [&'static str; 6] = [
        "SPYGLASS_URL",
        "CODESPAR_BASE_URL",
        "CODESPAR_API_KEY",
        "XDG_CONFIG_HOME",
        "XDG_STATE_HOME",
        "HOME",
    ];

    /// The variables spyglass reads, from this process.
    pub fn from_process() -> Env {
        let vars = Env::NAMES
            .into_iter()
            .filter_map(|n| std::env::var(n).ok().map(|v| (n.to_string(), v)))
            .collect();
        Env { vars }
    }

    pub fn from_pairs(pairs: &[(&str, &str)]) -> Env {
        Env {
            vars: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// A set, non-empty variable.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// An XDG base directory, else `$HOME/fallback`. XDG variables must be absolute
    /// paths; a relative one is ignored, as the XDG spec says.
    fn base_dir(&self, xdg: &str, fallback: &str) -> Option<PathBuf> {
        self.get(xdg)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| self.get("HOME").map(|h| Path::new(h).join(fallback)))
    }
}

/// Every path spyglass uses. `None` when neither the XDG variable nor HOME is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    pub config_file: Option<PathBuf>,
    pub theme_dir: Option<PathBuf>,
    pub log_file: Option<PathBuf>,
}

impl Paths {
    pub fn from_env(env: &Env) -> Paths {
        let config_dir = env
            .base_dir("XDG_CONFIG_HOME", ".config")
            .map(|d| d.join("spyglass"));
        let state_dir = env
            .base_dir("XDG_STATE_HOME", ".local/state")
            .map(|d| d.join("spyglass"));
        Paths {
            config_file: config_dir.as_ref().map(|d| d.join("config.toml")),
            theme_dir: config_dir.map(|d| d.join("themes")),
            log_file: state_dir.map(|d| d.join("spyglass.log")),
        }
    }
}

/// Settings given on the command line; they win over everything else.
#[derive(Debug, Clone, Default)]
pub struct CliOverrides {
    pub url: Option<String>,
    pub api_key: Option<String>,
    pub theme: Option<String>,
    pub no_mouse: bool,
}

/// Where a resolved value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    File,
    Env(&'static str),
    Flag(&'static str),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File => f.write_str("config file"),
            Source::Env(name) => write!(f, "env {name}"),
            Source::Flag(flag) => write!(f, "flag {flag}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Setting<T> {
    pub value: T,
    pub source: Source,
}

/// The config the program runs with: flags over environment over file over defaults.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// `None`: no runtime named, so the inspector starts an embedded one.
    pub url: Setting<Option<String>>,
    pub api_key: Setting<Option<Secret>>,
    pub theme_name: Setting<String>,
    pub theme: Theme,
    pub theme_source: ThemeSource,
    pub mouse: Setting<bool>,
    pub history: History,
    history_from_file: Vec<&'static str>,
    pub keys: KeyMap,
    keys_from_file: Vec<Action>,
    pub paths: Paths,
    /// Whether the config file existed (a missing file is not an error).
    pub config_file_found: bool,
    /// Things that work but should be changed, e.g. an API key in the config file.
    pub warnings: Vec<String>,
}

impl Config {
    /// Load the config file named by `env` (if it exists) and merge it with the
    /// environment and the flags. Errors: a file that exists but is broken, a theme that
    /// cannot be found or read.
    pub fn resolve(cli: &CliOverrides, env: &Env) -> Result<Resolved, ConfigError> {
        let paths = Paths::from_env(env);
        let (file, found) = match &paths.config_file {
            Some(path) if path.is_file() => (Config::load(path)?, true),
            _ => (Config::default(), false),
        };
        file.resolve_with(cli, env, paths, found)
    }

    /// Merge this file's settings with the environment and the flags.
    pub fn resolve_with(
        self,
        cli: &CliOverrides,
        env: &Env,
        paths: Paths,
        config_file_found: bool,
    ) -> Result<Resolved, ConfigError> {
        let mut warnings = Vec::new();

        let url = if let Some(u) = &cli.url {
            Setting {
                value: Some(u.clone()),
                source: Source::Flag("--url"),
            }
        } else if let Some(u) = env.get("SPYGLASS_URL") {
            Setting {
                value: Some(u.to_string()),
                source: Source::Env("SPYGLASS_URL"),
            }
        } else if let Some(u) = env.get("CODESPAR_BASE_URL") {
            Setting {
                value: Some(u.to_string()),
                source: Source::Env("CODESPAR_BASE_URL"),
            }
        } else if let Some(u) = self.url {
            Setting {
                value: Some(u),
                source: Source::File,
            }
        } else {
            Setting {
                value: None,
                source: Source::Default,
            }
        };

        if self.api_key.is_some() {
            warnings.push(
                "api_key is set in the config file: prefer the CODESPAR_API_KEY environment \
                 variable, so the key is not left in a file"
                    .to_string(),
            );
        }
        let api_key = if let Some(k) = &cli.api_key {
            Setting {
                value: Some(Secret::new(k.clone())),
                source: Source::Flag("--api-key"),
            }
        } else if let Some(k) = env.get("CODESPAR_API_KEY") {
            Setting {
                value: Some(Secret::new(k)),
                source: Source::Env("CODESPAR_API_KEY"),
            }
        } else if let Some(k) = self.api_key {
            Setting {
                value: Some(k),
                source: Source::File,
            }
        } else {
            Setting {
                value: None,
                source: Source::Default,
            }
        };

        let theme_name = if let Some(t) = &cli.theme {
            Setting {
                value: t.clone(),
                source: Source::Flag("--theme"),
            }
        } else if let Some(t) = self.theme {
            Setting {
                value: t,
                source: Source::File,
            }
        } else {
            Setting {
                value: DEFAULT_THEME.to_string(),
                source: Source::Default,
            }
        };
        let (theme, theme_source) = Theme::resolve(&theme_name.value, paths.theme_dir.as_deref())?;

        let mouse = if cli.no_mouse {
            Setting {
                value: false,
                source: Source::Flag("--no-mouse"),
            }
        } else if let Some(m) = self.mouse {
            Setting {
                value: m,
                source: Source::File,
            }
        } else {
            Setting {
                value: true,
                source: Source::Default,
            }
        };

        let mut history = History::default();
        let mut history_from_file = Vec::new();
        for (name, n) in self.history {
            if let Some(slot) = history.slot(name) {
                *slot = n;
                history_from_file.push(name);
            }
        }

        let mut keys = KeyMap::default();
        let mut keys_from_file = Vec::new();
        for (action, bound) in self.keys {
            keys.bind(action, bound);
            keys_from_file.push(action);
        }

        Ok(Resolved {
            url,
            api_key,
            theme_name,
            theme,
            theme_source,
            mouse,
            history,
            history_from_file,
            keys,
            keys_from_file,
            paths,
            config_file_found,
            warnings,
        })
    }
}

impl Resolved {
    /// The text of `spyglass --print-config`: every setting with where it came from, and
    /// every path. The API key is masked.
    pub fn print_config(&self) -> String {
        let mut out = String::from(
            "spyglass configuration (flags > environment > config file > defaults)\n\nsettings:\n",
        );
        let mut line = |name: &str, value: &str, source: &dyn fmt::Display| {
            let _ = writeln!(out, "  {name:<26} {value:<36} ({source})");
        };
        let url = self
            .url
            .value
            .clone()
            .unwrap_or_else(|| "(none: start an embedded runtime)".to_string());
        let key = self
            .api_key
            .value
            .as_ref()
            .map_or_else(|| "(none)".to_string(), ToString::to_string);
        let theme = match &self.theme_source {
            ThemeSource::BuiltIn(_) => self.theme_name.value.clone(),
            ThemeSource::File(path) => format!("{} ({})", self.theme_name.value, path.display()),
        };

        line("url", &url, &self.url.source);
        line("api_key", &key, &self.api_key.source);
        line("theme", &theme, &self.theme_name.source);
        line("mouse", &self.mouse.value.to_string(), &self.mouse.source);
        for name in History::KEYS {
            let value = self.history.get(name).unwrap_or_default().to_string();
            let source = if self.history_from_file.contains(&name) {
                Source::File
            } else {
                Source::Default
            };
            line(&format!("history.{name}"), &value, &source);
        }

        out.push_str("\nkeys:\n");
        for action in Action::ALL {
            let source = if self.keys_from_file.contains(&action) {
                Source::File
            } else {
                Source::Default
            };
            let _ = writeln!(
                out,
                "  {:<26} {:<36} ({source})",
                format!("keys.{}", action.name()),
                self.keys.describe(action)
            );
        }

        let path_or = |p: &Option<PathBuf>| {
            p.as_ref().map_or_else(
                || "(none: HOME is not set)".to_string(),
                |p| p.display().to_string(),
            )
        };
        out.push_str("\npaths:\n");
        let config_note = if self.config_file_found {
            "found"
        } else {
            "not found: defaults used"
        };
        let _ = writeln!(
            out,
            "  {:<26} {} ({config_note})",
            "config file",
            path_or(&self.paths.config_file)
        );
        let _ = writeln!(
            out,
            "  {:<26} {}",
            "theme dir",
            path_or(&self.paths.theme_dir)
        );
        let _ = writeln!(out, "  {:<26} {}", "theme in use", self.theme_source);
        let _ = writeln!(
            out,
            "  {:<26} {}",
            "log file",
            path_or(&self.paths.log_file)
        );

        if !self.warnings.is_empty() {
            out.push_str("\nwarnings:\n");
            for w in &self.warnings {
                let _ = writeln!(out, "  {w}");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::{KeyCode, KeyModifiers};
    use ratatui::style::Color;

    /// A fake home with XDG dirs under it, and the Env pointing there.
    struct Home {
        dir: tempfile::TempDir,
    }

    impl Home {
        fn new() -> Home {
            Home {
                dir: tempfile::tempdir().unwrap(),
            }
        }
        fn env(&self, extra: &[(&str, &str)]) -> Env {
            let home = self.dir.path().to_str().unwrap().to_string();
            let mut pairs: Vec<(&str, &str)> = vec![("HOME", home.as_str())];
            pairs.extend_from_slice(extra);
            Env::from_pairs(&pairs)
        }
        fn config_dir(&self) -> PathBuf {
            self.dir.path().join(".config/spyglass")
        }
        fn write_config(&self, text: &str) -> PathBuf {
            std::fs::create_dir_all(self.config_dir()).unwrap();
            let path = self.config_dir().join("config.toml");
            std::fs::write(&path, text).unwrap();
            path
        }
    }

    const FULL: &str = r##"
url = "http://127.0.0.1:9000/"
theme = "light"
mouse = false

[history]
sessions = 50
calls_per_session = 60
events = 70
approvals = 80
eval_runs = 90

[keys]
quit = ["ctrl-q", "Q"]
approve = "A"
help = "f1"
next_tab = "Tab"
"##;

    #[test]
    fn a_full_file_is_read() {
        let home = Home::new();
        home.write_config(FULL);
        let r = Config::resolve(&CliOverrides::default(), &home.env(&[])).unwrap();
        assert!(r.config_file_found);
        assert_eq!(r.url.value.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(r.url.source, Source::File);
        assert_eq!(r.theme, Theme::named("light").unwrap());
        assert_eq!(r.theme_name.source, Source::File);
        assert!(!r.mouse.value);
        assert_eq!(
            r.history,
            History {
                sessions: 50,
                calls_per_session: 60,
                events: 70,
                approvals: 80,
                eval_runs: 90
            }
        );
        assert_eq!(
            r.keys.keys(Action::Quit),
            &[
                (KeyCode::Char('q'), KeyModifiers::CONTROL),
                (KeyCode::Char('Q'), KeyModifiers::NONE)
            ]
        );
        assert_eq!(r.keys.describe(Action::Approve), "A");
        assert_eq!(r.keys.describe(Action::Help), "f1");
        // Untouched actions keep their defaults.
        assert_eq!(r.keys.describe(Action::Deny), "d");
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn no_file_means_defaults() {
        let home = Home::new();
        let r = Config::resolve(&CliOverrides::default(), &home.env(&[])).unwrap();
        assert!(!r.config_file_found);
        assert_eq!(r.url.value, None);
        assert_eq!(r.theme, Theme::named("dark").unwrap());
        assert_eq!(r.theme_name.source, Source::Default);
        assert!(r.mouse.value);
        assert_eq!(r.history, History::default());
        assert_eq!(r.keys, KeyMap::default());
    }

    #[test]
    fn a_partial_file_keeps_defaults_for_the_rest() {
        let home = Home::new();
        home.write_config("[history]\nevents = 5\n");
        let r = Config::resolve(&CliOverrides::default(), &home.env(&[])).unwrap();
        assert_eq!(r.history.events, 5);
        assert_eq!(r.history.sessions, History::default().sessions);
        assert_eq!(r.theme_name.value, "dark");
        let text = r.print_config();
        assert!(text.contains("history.events"), "{text}");
        let events_line = text.lines().find(|l| l.contains("history.events")).unwrap();
        assert!(events_line.contains("(config file)"), "{events_line}");
        let sessions_line = text
            .lines()
            .find(|l| l.contains("history.sessions"))
            .unwrap();
        assert!(sessions_line.contains("(default)"), "{sessions_line}");
    }

    #[test]
    fn flags_beat_env_beat_file() {
        let home = Home::new();
        home.write_config("url = \"http://file:1\"\ntheme = \"light\"\nmouse = true\n");
        let env = home.env(&[
            ("CODESPAR_BASE_URL", "http://codespar:2"),
            ("CODESPAR_API_KEY", "csk_test_fromenv"),
        ]);
        let r = Config::resolve(&CliOverrides::default(), &env).unwrap();
        assert_eq!(r.url.value.as_deref(), Some("http://codespar:2"));
        assert_eq!(r.url.source, Source::Env("CODESPAR_BASE_URL"));
        assert_eq!(
            r.api_key.value.as_ref().map(Secret::expose),
            Some("csk_test_fromenv")
        );

        let env = home.env(&[
            ("CODESPAR_BASE_URL", "http://codespar:2"),
            ("SPYGLASS_URL", "http://spyglass:3"),
        ]);
        let r = Config::resolve(&CliOverrides::default(), &env).unwrap();
        assert_eq!(r.url.source, Source::Env("SPYGLASS_URL"));

        let cli = CliOverrides {
            url: Some("http://flag:4".into()),
            api_key: Some("csk_live_flag".into()),
            theme: Some("high-contrast".into()),
            no_mouse: true,
        };
        let r = Config::resolve(&cli, &env).unwrap();
        assert_eq!(r.url.value.as_deref(), Some("http://flag:4"));
        assert_eq!(r.url.source, Source::Flag("--url"));
        assert_eq!(r.api_key.source, Source::Flag("--api-key"));
        assert_eq!(r.theme, Theme::named("high-contrast").unwrap());
        assert_eq!(r.theme_name.source, Source::Flag("--theme"));
        assert!(!r.mouse.value);
        assert_eq!(r.mouse.source, Source::Flag("--no-mouse"));
    }

    #[test]
    fn xdg_dirs_win_over_home_and_relative_ones_are_ignored() {
        let env = Env::from_pairs(&[
            ("HOME", "/home/u"),
            ("XDG_CONFIG_HOME", "/cfg"),
            ("XDG_STATE_HOME", "/state"),
        ]);
        let p = Paths::from_env(&env);
        assert_eq!(
            p.config_file,
            Some(PathBuf::from("/cfg/spyglass/config.toml"))
        );
        assert_eq!(p.theme_dir, Some(PathBuf::from("/cfg/spyglass/themes")));
        assert_eq!(
            p.log_file,
            Some(PathBuf::from("/state/spyglass/spyglass.log"))
        );

        let env = Env::from_pairs(&[
            ("HOME", "/home/u"),
            ("XDG_CONFIG_HOME", "rel"),
            ("XDG_STATE_HOME", ""),
        ]);
        let p = Paths::from_env(&env);
        assert_eq!(
            p.config_file,
            Some(PathBuf::from("/home/u/.config/spyglass/config.toml"))
        );
        assert_eq!(
            p.log_file,
            Some(PathBuf::from("/home/u/.local/state/spyglass/spyglass.log"))
        );

        let p = Paths::from_env(&Env::default());
        assert_eq!(p.config_file, None);
        // With no home at all, spyglass still runs on defaults.
        let r = Config::resolve(&CliOverrides::default(), &Env::default()).unwrap();
        assert!(r.print_config().contains("(none: HOME is not set)"));
    }

    #[test]
    fn print_config_lists_values_sources_and_every_path_with_the_key_masked() {
        let home = Home::new();
        home.write_config("api_key = \"csk_test_secret123\"\n");
        let env = home.env(&[("XDG_STATE_HOME", "/var/state")]);
        let r = Config::resolve(&CliOverrides::default(), &env).unwrap();
        let text = r.print_config();
        assert!(!text.contains("secret123"), "key leaked:\n{text}");
        assert!(
            !format!("{r:?}").contains("secret123"),
            "key leaked in Debug"
        );
        assert!(text.contains("csk_test_****"), "{text}");
        let config_path = home.config_dir().join("config.toml");
        assert!(
            text.contains(&format!("{} (found)", config_path.display())),
            "{text}"
        );
        assert!(
            text.contains(&home.config_dir().join("themes").display().to_string()),
            "{text}"
        );
        assert!(text.contains("/var/state/spyglass/spyglass.log"), "{text}");
        assert!(text.contains("built-in theme dark"), "{text}");
        assert!(text.contains("keys.approve"), "{text}");
        assert!(
            text.contains("CODESPAR_API_KEY"),
            "warns to use the env var:\n{text}"
        );
        assert!(text.contains("(none: start an embedded runtime)"), "{text}");
    }

    #[test]
    fn a_user_theme_in_the_theme_dir_is_found_by_name() {
        let home = Home::new();
        home.write_config("theme = \"mine\"\n");
        std::fs::create_dir_all(home.config_dir().join("themes")).unwrap();
        std::fs::write(
            home.config_dir().join("themes/mine.toml"),
            "base = \"light\"\nok = \"#00ff00\"",
        )
        .unwrap();
        let r = Config::resolve(&CliOverrides::default(), &home.env(&[])).unwrap();
        assert_eq!(r.theme.ok, Color::Rgb(0, 255, 0));
        assert_eq!(r.theme.text, Theme::named("light").unwrap().text);
        assert!(r.print_config().contains("mine.toml"));
    }

    #[test]
    fn a_missing_theme_is_an_error_naming_it() {
        let home = Home::new();
        let cli = CliOverrides {
            theme: Some("solarized".into()),
            ..Default::default()
        };
        let err = Config::resolve(&cli, &home.env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("solarized") && err.contains("themes"), "{err}");
    }

    fn parse_err(text: &str) -> String {
        Config::parse(text, Path::new("/etc/x/config.toml"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn broken_toml_names_the_file() {
        let err = parse_err("url = \"http://x\n[history");
        assert!(
            err.contains("/etc/x/config.toml") && err.contains("not valid TOML"),
            "{err}"
        );
        let home = Home::new();
        home.write_config("theme = ");
        let err = Config::resolve(&CliOverrides::default(), &home.env(&[])).unwrap_err();
        assert!(matches!(err, ConfigError::Syntax { .. }), "{err}");
    }

    #[test]
    fn unknown_keys_are_rejected_by_name() {
        for (text, key) in [
            ("colour = \"red\"", "`colour`"),
            ("[history]\nsesions = 3", "`history.sesions`"),
            ("[keys]\napprove_all = \"A\"", "`keys.approve_all`"),
        ] {
            let err = parse_err(text);
            assert!(
                err.contains(key) && err.contains("/etc/x/config.toml"),
                "{text}: {err}"
            );
        }
        assert!(
            parse_err("[keys]\naprove = \"a\"").contains("approve"),
            "lists the real names"
        );
    }

    #[test]
    fn bad_values_name_file_key_and_value() {
        for (text, key, value) in [
            ("url = \"localhost:8000\"", "`url`", "\"localhost:8000\""),
            ("url = 8000", "`url`", "8000"),
            ("mouse = \"yes\"", "`mouse`", "\"yes\""),
            ("theme = \"\"", "`theme`", "\"\""),
            ("history = 5", "`history`", "5"),
            ("[history]\nevents = 0", "`history.events`", "= 0"),
            ("[history]\nevents = -4", "`history.events`", "-4"),
            (
                "[history]\nevents = \"many\"",
                "`history.events`",
                "\"many\"",
            ),
            (
                "[history]\nevents = 99999999999",
                "`history.events`",
                "99999999999",
            ),
            ("[keys]\nquit = \"hyper-q\"", "`keys.quit`", "\"hyper-q\""),
            (
                "[keys]\nquit = [\"q\", \"enterr\"]",
                "`keys.quit`",
                "\"enterr\"",
            ),
            ("[keys]\nquit = 1", "`keys.quit`", "1"),
        ] {
            let err = parse_err(text);
            assert!(
                err.contains("/etc/x/config.toml") && err.contains(key) && err.contains(value),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn a_bad_api_key_value_is_not_echoed_in_full() {
        let err = parse_err("api_key = 42");
        assert!(err.contains("`api_key`"), "{err}");
        // A string key is always accepted; errors elsewhere never show it.
        let c = Config::parse("api_key = \"csk_live_zzz\"", Path::new("c.toml")).unwrap();
        assert!(!format!("{c:?}").contains("zzz"));
    }

    #[test]
    fn an_empty_key_list_unbinds_the_action() {
        let c = Config::parse("[keys]\nsort = []", Path::new("c.toml")).unwrap();
        let r = c
            .resolve_with(
                &CliOverrides::default(),
                &Env::default(),
                Paths::from_env(&Env::default()),
                true,
            )
            .unwrap();
        assert_eq!(r.keys.describe(Action::Sort), "(unbound)");
    }

    #[test]
    fn the_config_doc_matches_the_code() {
        let doc =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/CONFIG.md"))
                .unwrap();
        let map = KeyMap::default();
        for action in Action::ALL {
            let keys: Vec<String> = map
                .describe(action)
                .split(", ")
                .map(|k| format!("`{k}`"))
                .collect();
            let row = format!("| `{}` | {} |", action.name(), keys.join(", "));
            let row = row.trim_end_matches(" |").to_owned() + " | ";
            assert!(doc.contains(&row), "docs/CONFIG.md lacks the row {row}");
        }
        for role in theme::Role::ALL {
            let row = format!("| `{}` | {} |", role.key(), role.meaning());
            assert!(doc.contains(&row), "docs/CONFIG.md lacks the row {row}");
        }
        let defaults = History::default();
        for key in History::KEYS {
            let line = format!("{key} = {}", defaults.get(key).unwrap());
            assert!(doc.contains(&line), "docs/CONFIG.md lacks `{line}`");
        }
    }
}
