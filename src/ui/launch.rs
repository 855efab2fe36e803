//! The inspector roles from start to end: open the (masked) log file, start an embedded
//! runtime when no URL is given (or the demo's), run the UI with the resolved config.

use super::action::KeyMap;
use super::app::Watching;
use super::run::{InspectorConfig, Source, UiError, run, run_source};
use super::theme::Theme;
use crate::config::{History, Resolved};
use crate::model::Limits;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum LaunchError {
    #[error("cannot open the log file {path}: {source}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the async runtime: {0}")]
    Tokio(std::io::Error),
    #[error("cannot start the embedded runtime on 127.0.0.1: {0}")]
    Embedded(std::io::Error),
    #[error("cannot read the recording {path}: {source}")]
    Recording {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--speed must be a number of 0 or more (0 plays as fast as possible), not {0}")]
    Speed(f64),
    #[error(transparent)]
    Ui(#[from] UiError),
    #[error(transparent)]
    Demo(#[from] crate::demo::RunError),
}

/// The model's bounds from the config's `[history]`.
pub fn limits(history: &History) -> Limits {
    Limits {
        sessions: history.sessions,
        calls_per_session: history.calls_per_session,
        approvals: history.approvals,
        eval_runs: history.eval_runs,
        events: history.events,
        ..Limits::default()
    }
}

/// Logs go to a file, masked, so nothing reaches the screen the inspector draws on and no
/// key reaches the disk.
fn init_logging(path: &Path) -> Result<(), LaunchError> {
    let open = || -> std::io::Result<std::fs::File> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    };
    let file = open().map_err(|source| LaunchError::Log {
        path: path.to_path_buf(),
        source,
    })?;
    let filter = tracing_subscriber::EnvFilter::try_from_env("SPYGLASS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // A second subscriber (tests, embedding) is not an error worth stopping for.
    let _ = tracing::subscriber::set_global_default(super::logfile::file_subscriber(file, filter));
    Ok(())
}

/// Who decisions are sent as: the login name, else "spyglass".
fn user() -> String {
    ["USER", "LOGNAME", "USERNAME"]
        .into_iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "spyglass".to_owned())
}

fn log_path(config: &Resolved) -> PathBuf {
    config
        .paths
        .log_file
        .clone()
        .unwrap_or_else(super::logfile::log_file)
}

/// `spyglass demo`: the demo runtime and workload with the inspector on top, run with the
/// user's resolved config, until the user quits.
pub fn demo(config: Resolved) -> Result<(), LaunchError> {
    init_logging(&log_path(&config))?;
    let runtime = tokio::runtime::Runtime::new().map_err(LaunchError::Tokio)?;
    runtime.block_on(crate::demo::run(&config))?;
    Ok(())
}

/// Runs the inspector with a resolved config until the user quits.
pub fn inspect(config: Resolved) -> Result<(), LaunchError> {
    let log = log_path(&config);
    init_logging(&log)?;
    let runtime = tokio::runtime::Runtime::new().map_err(LaunchError::Tokio)?;
    runtime.block_on(async move {
        // With no runtime named, start an empty one in-process (test mode on) and show its
        // URL in the status bar, so tests can be pointed at it.
        let (url, embedded) = match config.url.value.clone() {
            Some(url) => (url, None),
            None => {
                let rt = crate::runtime::RuntimeConfig {
                    test_mode: true,
                    ..crate::runtime::RuntimeConfig::default()
                };
                let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
                let handle = crate::runtime::start(rt, addr)
                    .await
                    .map_err(LaunchError::Embedded)?;
                (handle.url(), Some(handle))
            }
        };
        tracing::info!(%url, embedded = embedded.is_some(), log = %log.display(), "inspector starting");
        let inspector = InspectorConfig {
            watching: if embedded.is_some() {
                Watching::Embedded
            } else {
                Watching::Runtime
            },
            ..inspector_config(url, &config)
        };
        let result = run(inspector).await;
        if let Some(handle) = embedded {
            handle.shutdown().await;
        }
        result.map_err(LaunchError::from)
    })
}

/// The UI's settings from a resolved config.
pub fn inspector_config(url: String, config: &Resolved) -> InspectorConfig {
    InspectorConfig {
        url,
        api_key: config.api_key.value.as_ref().map(|k| k.expose().to_owned()),
        limits: limits(&config.history),
        theme: Theme::clone(&config.theme),
        keys: KeyMap::clone(&config.keys),
        mouse: config.mouse.value,
        user: user(),
        watching: Watching::Runtime,
    }
}

/// `spyglass replay FILE`: the inspector on a recording, offline. The file is read before
/// the terminal is taken, so a missing one is a plain error, not a blank screen.
pub fn replay(config: Resolved, file: &Path, speed: f64) -> Result<(), LaunchError> {
    if !(speed.is_finite() && speed >= 0.0) {
        return Err(LaunchError::Speed(speed));
    }
    let text = crate::client::replay::load(file).map_err(|source| LaunchError::Recording {
        path: file.to_path_buf(),
        source,
    })?;
    init_logging(&log_path(&config))?;
    let runtime = tokio::runtime::Runtime::new().map_err(LaunchError::Tokio)?;
    let name = file.display().to_string();
    let inspector = InspectorConfig {
        watching: Watching::Replay { file: name.clone() },
        ..inspector_config(name, &config)
    };
    runtime
        .block_on(run_source(inspector, Source::Replay { text, speed }))
        .map_err(LaunchError::from)
}
