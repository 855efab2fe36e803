//! Where the inspector logs: a file under the XDG state directory, never the screen, with
//! secrets masked on the way in.

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

/// The subscriber the inspector logs through: plain text into `file`, every line passed
/// through `MaskingWriter` so an API key or bearer token never lands on disk.
pub fn file_subscriber(
    file: std::fs::File,
    filter: tracing_subscriber::EnvFilter,
) -> impl tracing::Subscriber + Send + Sync {
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(crate::mask::MaskingWriter(file)))
        .finish()
}
