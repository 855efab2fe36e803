//! Where the inspector logs: a file under the XDG state directory, never the screen, with
//! secrets masked on the way in.

use crate::config::{Env, Paths};
use std::path::PathBuf;

/// The log file of this process's environment, resolved by the one XDG resolver
/// (`config::paths`) so `--help`, `--print-config` and the logger name the same file.
pub fn log_file() -> PathBuf {
    log_file_in(&Env::from_process())
}

/// The log file `env` names.
pub fn log_file_in(env: &Env) -> PathBuf {
    Paths::from_env(env).log_file_or_local()
}

/// The directory [`log_file`] lives in.
pub fn log_dir() -> PathBuf {
    let file = log_file();
    file.parent().map(PathBuf::from).unwrap_or_default()
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
        .with_writer(std::sync::Mutex::new(
            spyglass_protocol::mask::MaskingWriter(file),
        ))
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_state_home_is_ignored_as_config_ignores_it() {
        let env = Env::from_pairs(&[("HOME", "/home/u"), ("XDG_STATE_HOME", "rel/state")]);
        let expected = PathBuf::from("/home/u/.local/state/spyglass/spyglass.log");
        assert_eq!(log_file_in(&env), expected);
        assert_eq!(Paths::from_env(&env).log_file, Some(expected));

        let env = Env::from_pairs(&[("XDG_STATE_HOME", "/abs")]);
        assert_eq!(
            log_file_in(&env),
            PathBuf::from("/abs/spyglass/spyglass.log")
        );
        // Nothing usable at all: the working directory, not an error.
        let env = Env::from_pairs(&[("XDG_STATE_HOME", "rel")]);
        assert_eq!(
            log_file_in(&env),
            PathBuf::from(".spyglass-state/spyglass.log")
        );
        assert_eq!(Paths::from_env(&env).log_file, None);
    }
}
