//! What the command line can run, one module per role (inspect, demo, replay, serve, eval,
//! tail/record, import/view, store): each an `async fn` on main's one tokio runtime,
//! failing with `RoleError`.
//!
//! `RoleError::exit_code` is the whole CLI's table of exit statuses: 0 done, 1 failed (an
//! eval case failed or errored, the terminal or a runtime broke, a store failed or has no
//! schema or a newer one), 2 bad usage or bad input
//! (flags, URL, config, suite, recording or results files to import), 3 the runtime cannot
//! be reached.

pub mod demo;
pub mod eval;
pub mod import;
pub mod inspect;
pub mod replay;
pub mod serve;
pub mod store;
pub mod tail;

use crate::client::ClientError;
use crate::client::eval::EvalCliError;
use crate::config::ConfigError;
use crate::import::ImportError;
use crate::runtime::PolicyError;
use crate::ui::UiError;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Exit status: the role did what it was asked.
pub const EXIT_OK: u8 = 0;
/// Exit status: it ran and something failed (an eval case, the terminal, the runtime).
pub const EXIT_FAILED: u8 = 1;
/// Exit status: bad usage or bad input; nothing ran.
pub const EXIT_USAGE: u8 = 2;
/// Exit status: the runtime could not be reached.
pub const EXIT_UNREACHABLE: u8 = 3;

/// Why a role stopped short.
#[derive(Debug, Error)]
pub enum RoleError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Ui(#[from] UiError),
    #[error(transparent)]
    Eval(#[from] EvalCliError),
    #[error(transparent)]
    Serve(#[from] serve::ServeError),
    #[error(transparent)]
    Import(#[from] ImportError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// `store status` found no schema, or a newer one: printed, and exit 1.
    #[error("{0}")]
    Schema(String),
    #[error("{failed} failed and {errored} errored of {attempts} case attempt(s)")]
    CasesFailed {
        failed: u32,
        errored: u32,
        attempts: usize,
    },
    #[error("{regressions} regression(s) against the baseline {baseline}")]
    Regressions {
        regressions: usize,
        baseline: String,
    },
    #[error("{failing} case(s) fail or are flaky in {file}")]
    FailingCases { failing: usize, file: String },
    #[error("the demo policy does not parse: {0}")]
    DemoPolicy(PolicyError),
    #[error("cannot start the async runtime: {0}")]
    Tokio(std::io::Error),
    #[error("cannot start the embedded runtime on 127.0.0.1: {0}")]
    Embedded(std::io::Error),
    #[error("cannot open the log file {path}: {source}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read the recording {path}: {source}")]
    Recording {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot create {path}: {source}")]
    Output {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl RoleError {
    /// The process exit status for this error: the CLI's one table.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Config(_)
            | Self::Usage(_)
            | Self::Recording { .. }
            | Self::Output { .. }
            | Self::Import(_) => EXIT_USAGE,
            Self::Client(err) | Self::Ui(UiError::Client(err)) => client_code(err),
            Self::Eval(err) => match err {
                EvalCliError::Unreachable { .. } => EXIT_UNREACHABLE,
                EvalCliError::Suites(_)
                | EvalCliError::Usage(_)
                | EvalCliError::Refused { .. }
                | EvalCliError::Compare(_)
                | EvalCliError::Write { .. } => EXIT_USAGE,
            },
            Self::Serve(err) => match err {
                serve::ServeError::Signal(_) => EXIT_FAILED,
                serve::ServeError::Addr(_)
                | serve::ServeError::GrpcAddr(_)
                | serve::ServeError::Policy(_)
                | serve::ServeError::KeysFile { .. }
                | serve::ServeError::Binding(_)
                | serve::ServeError::Listen { .. }
                | serve::ServeError::Store(_)
                | serve::ServeError::StorePool(_)
                | serve::ServeError::Models(_) => EXIT_USAGE,
            },
            Self::Ui(UiError::Io(_))
            | Self::CasesFailed { .. }
            | Self::Regressions { .. }
            | Self::FailingCases { .. }
            | Self::DemoPolicy(_)
            | Self::Store(_)
            | Self::Schema(_)
            | Self::Tokio(_)
            | Self::Embedded(_)
            | Self::Log { .. } => EXIT_FAILED,
        }
    }
}

fn client_code(err: &ClientError) -> u8 {
    match err {
        ClientError::Url(_)
        | ClientError::Project(_)
        | ClientError::Key(_)
        | ClientError::Api { .. }
        | ClientError::Rejected { .. } => EXIT_USAGE,
        ClientError::Http(_) | ClientError::WebSocket(_) | ClientError::Unreachable { .. } => {
            EXIT_UNREACHABLE
        }
    }
}

/// Where a role's logs go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogTo {
    /// The log file: the screen belongs to the inspector or to the role's output.
    File,
    /// stderr: `serve` runs headless and its log is what its operator watches.
    Stderr,
}

/// The one place logging starts, for every role: masked on the way out (no API key or
/// bearer token is written anywhere), level from `SPYGLASS_LOG` (`serve` also reads
/// `RUST_LOG`, as it always has).
pub fn init_logging(to: LogTo, path: &Path) -> Result<(), RoleError> {
    let level = |vars: &[&str]| {
        vars.iter()
            .find_map(|var| tracing_subscriber::EnvFilter::try_from_env(var).ok())
            .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("info"))
    };
    // A second subscriber (tests, embedding) is not an error worth stopping for.
    let _ = match to {
        LogTo::File => {
            let open = || -> std::io::Result<std::fs::File> {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
            };
            let file = open().map_err(|source| RoleError::Log {
                path: path.to_path_buf(),
                source,
            })?;
            let subscriber = crate::ui::logfile::file_subscriber(file, level(&["SPYGLASS_LOG"]));
            tracing::subscriber::set_global_default(subscriber)
        }
        LogTo::Stderr => {
            let subscriber = tracing_subscriber::fmt()
                .with_env_filter(level(&["SPYGLASS_LOG", "RUST_LOG"]))
                .with_writer(|| crate::mask::MaskingWriter(std::io::stderr()))
                .finish();
            tracing::subscriber::set_global_default(subscriber)
        }
    };
    Ok(())
}
