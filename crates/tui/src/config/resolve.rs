//! Resolution: every setting is the first of flag, environment, config file and default
//! that is set, remembered with its source so `--print-config` can say where it came from.

use super::keys::{Action, KeyMap};
use super::paths::{Env, Paths};
use super::theme::{Theme, ThemeSource};
use super::{Config, ConfigError, DEFAULT_THEME, History, Secret};
use std::fmt;

/// Settings the command line gave: a flag, or the variable clap read for it when the flag
/// was absent, each with that source. They win over the config file and the defaults.
#[derive(Debug, Clone, Default)]
pub struct CliOverrides {
    pub url: Option<Setting<String>>,
    pub api_key: Option<Setting<String>>,
    pub project: Option<Setting<String>>,
    pub theme: Option<String>,
    pub no_mouse: bool,
}

/// A given setting as a candidate for [`first_of`].
fn given<T: Clone>(setting: Option<&Setting<T>>) -> (Source, Option<T>) {
    setting.map_or((Source::Default, None), |s| {
        (s.source.clone(), Some(s.value.clone()))
    })
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

/// The first candidate that is set, in order of precedence, else `default`.
pub fn first_of<T>(
    candidates: impl IntoIterator<Item = (Source, Option<T>)>,
    default: T,
) -> Setting<T> {
    candidates
        .into_iter()
        .find_map(|(source, value)| value.map(|value| Setting { value, source }))
        .unwrap_or(Setting {
            value: default,
            source: Source::Default,
        })
}

/// The config the program runs with: flags over environment over file over defaults.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// `None`: no runtime named, so the inspector starts an embedded one.
    pub url: Setting<Option<String>>,
    pub api_key: Setting<Option<Secret>>,
    /// The project the clients act for (`x-codespar-project`); None: the default one.
    pub project: Setting<Option<String>>,
    pub theme_name: Setting<String>,
    pub theme: Theme,
    pub theme_source: ThemeSource,
    pub mouse: Setting<bool>,
    pub history: History,
    /// The source of each bound, in the order of [`History::KEYS`].
    pub(super) history_sources: [Source; 6],
    pub keys: KeyMap,
    pub(super) keys_from_file: Vec<Action>,
    pub paths: Paths,
    /// Whether the config file existed (a missing file is not an error).
    pub config_file_found: bool,
    /// Things that work but should be changed, e.g. an API key in the config file.
    pub warnings: Vec<String>,
}

impl Config {
    /// Load the config file named by `env` (if it exists) and merge it with the flags
    /// (and the variables clap read for them). Errors: a file that exists but is broken, a theme that
    /// cannot be found or read.
    pub fn resolve(cli: &CliOverrides, env: &Env) -> Result<Resolved, ConfigError> {
        let paths = Paths::from_env(env);
        let (file, found) = match &paths.config_file {
            Some(path) if path.is_file() => (Config::load(path)?, true),
            _ => (Config::default(), false),
        };
        file.resolve_with(cli, paths, found)
    }

    /// Merge this file's settings with the flags (and the variables clap read for them).
    pub fn resolve_with(
        self,
        cli: &CliOverrides,
        paths: Paths,
        config_file_found: bool,
    ) -> Result<Resolved, ConfigError> {
        let mut warnings = Vec::new();

        let url = first_of(
            [given(cli.url.as_ref()), (Source::File, self.url)]
                .map(|(source, value)| (source, value.map(Some))),
            None,
        );

        if self.api_key.is_some() {
            warnings.push(
                "api_key is set in the config file: prefer the CODESPAR_API_KEY environment \
                 variable, so the key is not left in a file"
                    .to_string(),
            );
        }
        let api_key = first_of(
            [
                {
                    let (source, key) = given(cli.api_key.as_ref());
                    (source, key.map(Secret::new))
                },
                (Source::File, self.api_key),
            ]
            .map(|(source, value)| (source, value.map(Some))),
            None,
        );

        let project = first_of(
            [given(cli.project.as_ref()), (Source::File, self.project)]
                .map(|(source, value)| (source, value.map(Some))),
            None,
        );
        if let Some(value) = &project.value
            && !super::valid_project(value)
        {
            return Err(ConfigError::Setting {
                name: project.source.to_string(),
                message: format!(
                    "{:?}: {}",
                    spyglass_protocol::sanitize::sanitize(value),
                    super::PROJECT_EXPECTED
                ),
            });
        }

        let theme_name = first_of(
            [
                (Source::Flag("--theme"), cli.theme.clone()),
                (Source::File, self.theme),
            ],
            DEFAULT_THEME.to_string(),
        );
        let (theme, theme_source) = Theme::resolve(&theme_name.value, paths.theme_dir.as_deref())?;

        let mouse = first_of(
            [
                (Source::Flag("--no-mouse"), cli.no_mouse.then_some(false)),
                (Source::File, self.mouse),
            ],
            true,
        );

        let defaults = History::default();
        let mut history = History::default();
        let history_sources = History::KEYS.map(|name| {
            let from_file = self
                .history
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v);
            let setting = first_of(
                [(Source::File, from_file)],
                defaults.get(name).unwrap_or_default(),
            );
            if let Some(slot) = history.slot(name) {
                *slot = setting.value;
            }
            setting.source
        });

        // Key bindings come from the file or the defaults only; `KeyMap` holds the defaults.
        let mut keys = KeyMap::default();
        let mut keys_from_file = Vec::new();
        for (action, bound) in self.keys {
            keys.bind(action, bound);
            keys_from_file.push(action);
        }

        Ok(Resolved {
            url,
            api_key,
            project,
            theme_name,
            theme,
            theme_source,
            mouse,
            history,
            history_sources,
            keys,
            keys_from_file,
            paths,
            config_file_found,
            warnings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_of_takes_the_first_set_candidate_and_names_it() {
        let s = first_of(
            [
                (Source::Flag("--x"), None),
                (Source::Env("X"), Some(2)),
                (Source::File, Some(3)),
            ],
            0,
        );
        assert_eq!(
            s,
            Setting {
                value: 2,
                source: Source::Env("X")
            }
        );
        let s = first_of([(Source::File, None::<i32>)], 7);
        assert_eq!(
            s,
            Setting {
                value: 7,
                source: Source::Default
            }
        );
    }
}
