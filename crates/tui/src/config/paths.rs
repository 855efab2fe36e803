//! Every path spyglass reads or writes, resolved once from the XDG base directories: the
//! config file, the theme dir and the log file. Relative XDG values are ignored (XDG spec).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The variables the paths come from, captured once so resolution is a pure function (and
/// testable). Variables that stand for a flag are clap's to read, with the flag.
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: HashMap<String, String>,
}

impl Env {
    const NAMES: [&'static str; 4] = ["XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "HOME"];

    /// The path variables, from this process.
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

/// The runtime's default store (`serve`, the inspector's embedded runtime):
/// `$XDG_DATA_HOME/spyglass/runtime.db`, else under `$HOME/.local/share`. `None` when
/// neither is set: then the runtime keeps its state in memory.
pub fn store_file(env: &Env) -> Option<PathBuf> {
    env.base_dir("XDG_DATA_HOME", ".local/share")
        .map(|d| d.join("spyglass").join("runtime.db"))
}

/// Where logs go when neither `XDG_STATE_HOME` (absolute) nor HOME is set: the working
/// directory, so spyglass still runs.
pub const LOCAL_STATE_DIR: &str = ".spyglass-state";

impl Paths {
    /// The log file, else one under [`LOCAL_STATE_DIR`].
    pub fn log_file_or_local(&self) -> PathBuf {
        self.log_file
            .clone()
            .unwrap_or_else(|| Path::new(LOCAL_STATE_DIR).join("spyglass.log"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_lives_under_xdg_data_home_else_home() {
        let env = Env::from_pairs(&[("XDG_DATA_HOME", "/data"), ("HOME", "/home/u")]);
        assert_eq!(
            store_file(&env),
            Some(PathBuf::from("/data/spyglass/runtime.db"))
        );
        let env = Env::from_pairs(&[("XDG_DATA_HOME", "rel"), ("HOME", "/home/u")]);
        assert_eq!(
            store_file(&env),
            Some(PathBuf::from("/home/u/.local/share/spyglass/runtime.db"))
        );
        assert_eq!(store_file(&Env::default()), None);
    }
}
