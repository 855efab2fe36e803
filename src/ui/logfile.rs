//! Where the inspector logs: a file under the XDG state directory, never the screen.

use std::path::PathBuf;

/// `$XDG_STATE_HOME/spyglass`, else `~/.local/state/spyglass`, else `./.spyglass-state`.
pub fn log_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("spyglass");
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(home) => PathBuf::from(home).join(".local/state/spyglass"),
        None => PathBuf::from(".spyglass-state"),
    }
}

pub fn log_file() -> PathBuf {
    log_dir().join("spyglass.log")
}
