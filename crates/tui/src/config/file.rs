//! The config file: its shape as serde types that refuse unknown keys, then one validation
//! pass that turns each raw value into a checked setting or an error naming file, key and value.

use super::keys::{Action, Key, parse_key};
use super::{ConfigError, History, Secret};
use serde::Deserialize;
use spyglass_protocol::mask::mask_secret;
use std::collections::BTreeMap;
use std::path::Path;

pub const DEFAULT_THEME: &str = "dark";

/// What one config file says. Every field is optional: unset means "not from the file".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    pub url: Option<String>,
    pub api_key: Option<Secret>,
    /// The project (`x-codespar-project`) the clients act for.
    pub project: Option<String>,
    pub theme: Option<String>,
    pub mouse: Option<bool>,
    /// Only the bounds the file sets.
    pub history: Vec<(&'static str, usize)>,
    /// Only the actions the file rebinds.
    pub keys: Vec<(Action, Vec<Key>)>,
}

/// The file's keys. Values stay raw TOML so a wrong kind is reported by the validation
/// pass with the key, the value and what was expected, not by serde's generic message.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    url: Option<toml::Value>,
    api_key: Option<toml::Value>,
    project: Option<toml::Value>,
    theme: Option<toml::Value>,
    mouse: Option<toml::Value>,
    history: Option<toml::Value>,
    keys: Option<toml::Value>,
}

/// `[history]`: one bound per key of [`History::KEYS`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHistory {
    sessions: Option<toml::Value>,
    calls_per_session: Option<toml::Value>,
    events: Option<toml::Value>,
    approvals: Option<toml::Value>,
    eval_runs: Option<toml::Value>,
    max_mib: Option<toml::Value>,
}

impl RawHistory {
    fn entries(self) -> [(&'static str, Option<toml::Value>); 6] {
        [
            ("sessions", self.sessions),
            ("calls_per_session", self.calls_per_session),
            ("events", self.events),
            ("approvals", self.approvals),
            ("eval_runs", self.eval_runs),
            ("max_mib", self.max_mib),
        ]
    }
}

/// Reads a table into `T`, an unknown key reported as `prefix.key` with the known ones.
fn strict<T: serde::de::DeserializeOwned>(
    path: &Path,
    prefix: &str,
    table: toml::Table,
) -> Result<T, ConfigError> {
    T::deserialize(toml::Value::Table(table)).map_err(|err| {
        let message = err.message();
        match unknown_field(message) {
            Some((key, known)) => ConfigError::UnknownKey {
                path: path.to_path_buf(),
                key: format!("{prefix}{key}"),
                known,
            },
            None => ConfigError::Syntax {
                path: path.to_path_buf(),
                message: message.to_string(),
            },
        }
    })
}

/// The key and the expected names of serde's "unknown field `k`, expected one of `a`, `b`".
fn unknown_field(message: &str) -> Option<(String, String)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (key, rest) = rest.split_once('`')?;
    let known: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
    Some((key.to_string(), known.join(", ")))
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
        let raw: RawConfig = strict(path, "", table)?;
        let bad = |key: &str, value: &toml::Value, expected: &str| ConfigError::BadValue {
            path: path.to_path_buf(),
            key: key.to_string(),
            value: shown_value(key, value),
            expected: expected.to_string(),
        };

        let mut config = Config::default();
        if let Some(value) = &raw.url {
            let url = value
                .as_str()
                .filter(|s| s.starts_with("http://") || s.starts_with("https://"))
                .ok_or_else(|| {
                    bad(
                        "url",
                        value,
                        "expected a runtime URL starting with http:// or https://",
                    )
                })?;
            config.url = Some(url.trim_end_matches('/').to_string());
        }
        if let Some(value) = &raw.api_key {
            let key = non_empty(value)
                .ok_or_else(|| bad("api_key", value, "expected a non-empty string"))?;
            config.api_key = Some(Secret::new(key));
        }
        if let Some(value) = &raw.project {
            let project = value
                .as_str()
                .filter(|s| super::valid_project(s))
                .ok_or_else(|| bad("project", value, super::PROJECT_EXPECTED))?;
            config.project = Some(project.to_owned());
        }
        if let Some(value) = &raw.theme {
            let theme = non_empty(value).ok_or_else(|| {
                bad(
                    "theme",
                    value,
                    "expected a theme name (dark, light, high-contrast, or a file under the theme dir) or a path",
                )
            })?;
            config.theme = Some(theme.to_string());
        }
        if let Some(value) = &raw.mouse {
            let mouse = value
                .as_bool()
                .ok_or_else(|| bad("mouse", value, "expected true or false"))?;
            config.mouse = Some(mouse);
        }
        if let Some(value) = raw.history {
            let toml::Value::Table(table) = value else {
                return Err(bad("history", &value, "expected a table: [history]"));
            };
            let history: RawHistory = strict(path, "history.", table)?;
            for (name, value) in history.entries() {
                let Some(value) = value else { continue };
                let full = format!("history.{name}");
                let max = History::max(name);
                let n = value
                    .as_integer()
                    .and_then(|i| usize::try_from(i).ok())
                    .filter(|n| (1..=max).contains(n))
                    .ok_or_else(|| {
                        bad(
                            &full,
                            &value,
                            &format!("expected a whole number from 1 to {max}"),
                        )
                    })?;
                config.history.push((name, n));
            }
        }
        if let Some(value) = raw.keys {
            let toml::Value::Table(table) = value else {
                return Err(bad("keys", &value, "expected a table: [keys]"));
            };
            config.keys = read_keys(path, table, &bad)?;
            let mut map = super::keys::KeyMap::default();
            for (action, keys) in &config.keys {
                map.bind(*action, keys.clone());
            }
            if let Some(c) = map.first_conflict() {
                return Err(ConfigError::KeyConflict {
                    path: path.to_path_buf(),
                    key: c.key,
                    first: c.first.name(),
                    second: c.second.name(),
                    place: c.place,
                });
            }
        }
        Ok(config)
    }
}

/// `[keys]`: a map from action names (the set [`Action::ALL`] defines) to key lists.
fn read_keys(
    path: &Path,
    table: toml::Table,
    bad: &dyn Fn(&str, &toml::Value, &str) -> ConfigError,
) -> Result<Vec<(Action, Vec<Key>)>, ConfigError> {
    let table: BTreeMap<String, toml::Value> = table.into_iter().collect();
    let mut out = Vec::new();
    for (name, value) in table {
        let full = format!("keys.{name}");
        let Some(action) = Action::from_name(&name) else {
            let names: Vec<&str> = Action::ALL.map(Action::name).to_vec();
            return Err(ConfigError::UnknownKey {
                path: path.to_path_buf(),
                key: full,
                known: names.join(", "),
            });
        };
        let texts: Vec<&str> = match &value {
            toml::Value::String(s) => vec![s.as_str()],
            toml::Value::Array(items) => items
                .iter()
                .map(toml::Value::as_str)
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad(&full, &value, "expected a key string or a list of them"))?,
            _ => {
                return Err(bad(
                    &full,
                    &value,
                    "expected a key string or a list of them",
                ));
            }
        };
        let parsed = texts
            .into_iter()
            .map(|text| {
                parse_key(text).map_err(|e| match e {
                    ConfigError::BadKey { reason, .. } => bad(&full, &value, &reason),
                    other => other,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.push((action, parsed));
    }
    Ok(out)
}

fn non_empty(value: &toml::Value) -> Option<&str> {
    value.as_str().map(str::trim).filter(|s| !s.is_empty())
}

/// A value as an error message shows it: secrets masked.
fn shown_value(key: &str, value: &toml::Value) -> String {
    match (key, value) {
        ("api_key", toml::Value::String(s)) => format!("{:?}", mask_secret(s)),
        _ => value.to_string(),
    }
}
