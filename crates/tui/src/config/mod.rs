//! User configuration: the config file (`$XDG_CONFIG_HOME/spyglass/config.toml`), merged
//! with the command line's settings into one resolved config that remembers where each
//! value came from, and the paths spyglass reads and writes.
//!
//! By concern: `file` reads and checks the config file, `paths` resolves every XDG path,
//! `resolve` merges the flags (and the variables clap read for them, each named as its
//! source), file and defaults, `print` renders
//! `--print-config`; `keys` and `theme` own key bindings and colours.

pub mod file;
pub mod keys;

pub mod paths;
pub mod print;
pub mod resolve;
pub mod theme;

use spyglass_protocol::mask::mask_secret;
use std::fmt;
use std::path::PathBuf;
use theme::ThemeError;

pub use file::{Config, DEFAULT_THEME};
pub use paths::{Env, Paths};
pub use resolve::{CliOverrides, Resolved, Setting, Source};

/// What a project id must be, for errors: the runtime reads it from a header.
pub const PROJECT_EXPECTED: &str =
    "expected a project id: 1 to 128 visible ASCII characters (e.g. prj_0123456789abcdef)";

/// Whether `text` can be a project id: it travels as the `x-codespar-project` header.
pub fn valid_project(text: &str) -> bool {
    (1..=128).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_graphic())
}

/// A duration as a flag gives it: a number with a unit (`90s`, `15m`, `2h`, `7d`, `500ms`),
/// or bare seconds. Zero is refused: a setting that expires at once is never what was meant.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 90s, 15m, 2h)"))?;
    let millis = match unit {
        "ms" => Some(number),
        "" | "s" => number.checked_mul(1000),
        "m" => number.checked_mul(60_000),
        "h" => number.checked_mul(3_600_000),
        "d" => number.checked_mul(86_400_000),
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?}; use ms, s, m, h or d (e.g. 90s, 15m, 7d)"
            ));
        }
    }
    .ok_or_else(|| format!("{text:?} is too long a duration"))?;
    if millis == 0 {
        return Err(format!("{text:?}: a duration must be more than zero"));
    }
    Ok(std::time::Duration::from_millis(millis))
}

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
    #[error(
        "config file {path}: [keys] binds `{key}` to both `{first}` and `{second}`, and both \
         apply {place}; give one of them another key"
    )]
    KeyConflict {
        path: PathBuf,
        key: String,
        first: &'static str,
        second: &'static str,
        place: &'static str,
    },
    #[error("bad key {value:?}: {reason}")]
    BadKey { value: String, reason: String },
    /// A flag's or variable's value that cannot be used; `name` says which (its source).
    #[error("{name}: {message}")]
    Setting { name: String, message: String },
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
    /// Mebibytes the inspector's model may retain in all (`model::Limits::bytes`).
    pub max_mib: usize,
}

impl Default for History {
    fn default() -> History {
        History {
            sessions: 1_000,
            calls_per_session: 5_000,
            events: 20_000,
            approvals: 1_000,
            eval_runs: 200,
            max_mib: 256,
        }
    }
}

impl History {
    pub const KEYS: [&'static str; 6] = [
        "sessions",
        "calls_per_session",
        "events",
        "approvals",
        "eval_runs",
        "max_mib",
    ];

    /// Above this a bound is surely a typo, and would let memory grow without check.
    pub const MAX: usize = 10_000_000;

    /// Above this a byte budget (64 GiB) is surely a typo too.
    pub const MAX_MIB: usize = 65_536;

    /// The largest value `key` accepts (all start at 1).
    pub fn max(key: &str) -> usize {
        if key == "max_mib" {
            Self::MAX_MIB
        } else {
            Self::MAX
        }
    }

    /// `max_mib` in bytes, as the model counts them.
    pub fn bytes(&self) -> usize {
        self.max_mib.saturating_mul(1024 * 1024)
    }

    pub fn get(&self, key: &str) -> Option<usize> {
        Some(match key {
            "sessions" => self.sessions,
            "calls_per_session" => self.calls_per_session,
            "events" => self.events,
            "approvals" => self.approvals,
            "eval_runs" => self.eval_runs,
            "max_mib" => self.max_mib,
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
            "max_mib" => &mut self.max_mib,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::keys::{Action, KeyMap};
    use super::theme::Theme;
    use super::*;
    use ratatui::crossterm::event::{KeyCode, KeyModifiers};
    use ratatui::style::Color;
    use std::path::Path;

    #[test]
    fn durations_take_units_or_bare_seconds_and_refuse_the_rest() {
        use std::time::Duration;
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_mins(15)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_hours(2)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_hours(168)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        // A multi-byte unit, a sign, a fraction, nothing: refused, never a panic.
        for bad in [
            "",
            "m",
            "0s",
            "-5s",
            "1.5m",
            "10w",
            "7é",
            "é",
            "99999999999999999999h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was taken");
        }
        assert!(
            parse_duration("10w")
                .unwrap_err()
                .contains("use ms, s, m, h or d")
        );
    }

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

    const FULL: &str = r#"
url = "http://127.0.0.1:9000/"
theme = "light"
mouse = false

[history]
sessions = 50
calls_per_session = 60
events = 70
approvals = 80
eval_runs = 90
max_mib = 100

[keys]
quit = ["ctrl-q", "Q"]
approve = "A"
help = "f1"
next_tab = "Tab"
"#;

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
                eval_runs: 90,
                max_mib: 100,
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
    fn max_mib_sets_the_inspector_byte_budget() {
        let home = Home::new();
        home.write_config("[history]\nmax_mib = 64\n");
        let r = Config::resolve(&CliOverrides::default(), &home.env(&[])).unwrap();
        assert_eq!(r.history.max_mib, 64);
        assert_eq!(r.history.bytes(), 64 * 1024 * 1024);
        assert_eq!(crate::ui::run::limits(&r.history).bytes, 64 * 1024 * 1024);
        // Unset, the model's own default: one number, not two that could drift.
        assert_eq!(
            crate::ui::run::limits(&History::default()).bytes,
            crate::model::Limits::default().bytes
        );
        let err = parse_err("[history]\nmax_mib = 65537");
        assert!(
            err.contains("expected a whole number from 1 to 65536"),
            "{err}"
        );
        assert!(
            parse_err("[history]\nevents = 0").contains("from 1 to 10000000"),
            "the other keys keep their bound"
        );
    }

    #[test]
    fn flags_beat_env_beat_file() {
        let home = Home::new();
        home.write_config("url = \"http://file:1\"\ntheme = \"light\"\nmouse = true\n");
        let setting = |value: &str, source| {
            Some(Setting {
                value: value.to_owned(),
                source,
            })
        };
        let r = Config::resolve(&CliOverrides::default(), &home.env(&[])).unwrap();
        assert_eq!(r.url.value.as_deref(), Some("http://file:1"));
        assert_eq!(r.url.source, Source::File);

        // A variable clap read for the flag wins over the file, and keeps its name.
        let cli = CliOverrides {
            url: setting("http://codespar:2", Source::Env("CODESPAR_BASE_URL")),
            api_key: setting("csk_test_fromenv", Source::Env("CODESPAR_API_KEY")),
            ..CliOverrides::default()
        };
        let r = Config::resolve(&cli, &home.env(&[])).unwrap();
        assert_eq!(r.url.value.as_deref(), Some("http://codespar:2"));
        assert_eq!(r.url.source, Source::Env("CODESPAR_BASE_URL"));
        assert_eq!(
            r.api_key.value.as_ref().map(Secret::expose),
            Some("csk_test_fromenv")
        );
        assert_eq!(r.api_key.source, Source::Env("CODESPAR_API_KEY"));

        let cli = CliOverrides {
            url: setting("http://flag:4", Source::Flag("--url")),
            api_key: setting("csk_live_flag", Source::Flag("--api-key")),
            project: None,
            theme: Some("high-contrast".into()),
            no_mouse: true,
        };
        let r = Config::resolve(&cli, &home.env(&[])).unwrap();
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
            ("[history]\nmax_mib = 0", "`history.max_mib`", "= 0"),
            ("[history]\nmax_mib = 65537", "`history.max_mib`", "65537"),
            ("[history]\nmax_mib = 2.5", "`history.max_mib`", "2.5"),
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
                Paths::from_env(&Env::default()),
                true,
            )
            .unwrap();
        assert_eq!(r.keys.describe(Action::Sort), "(unbound)");
    }

    #[test]
    fn the_config_doc_matches_the_code() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/CONFIG.md"))
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
