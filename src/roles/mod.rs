//! What the command line can run, one module per role (inspect, demo, replay, serve, eval,
//! tail/record, import/view, store): each owns its `clap::Args` and an `async fn` on main's
//! one tokio runtime, failing with `RoleError`. Here: the flags the client roles share.
//! A flag a role does not take is refused by clap; a role's flags go after its name.
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
pub mod usage;

use crate::client::ClientError;
use crate::client::eval::EvalCliError;
use crate::config::{CliOverrides, Config, ConfigError, Env, Paths, Resolved, Setting, Source};
use crate::import::ImportError;
use crate::runtime::PolicyError;
use crate::ui::UiError;
use clap::ArgMatches;
use clap::parser::ValueSource;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The variable `--url` falls back to first.
pub const URL_VAR: &str = "SPYGLASS_URL";
/// The variable `--url` falls back to when `SPYGLASS_URL` is not set.
pub const BASE_URL_VAR: &str = "CODESPAR_BASE_URL";
/// The variable `--api-key` falls back to.
pub const API_KEY_VAR: &str = "CODESPAR_API_KEY";
/// The variable `--project` falls back to.
pub const PROJECT_VAR: &str = "SPYGLASS_PROJECT";

/// The flags of every role that follows a runtime and reads the config file (the
/// inspector, demo, replay, view, tail, record, import): which runtime, as whom, for which
/// project, and `--print-config`. clap reads each flag's variable when the flag is absent.
// Doc comments here are the --help text: backticks would print there as-is.
#[expect(clippy::doc_markdown)]
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Client {
    /// Runtime to inspect, tail or record (else SPYGLASS_URL, else CODESPAR_BASE_URL; the
    /// inspector with none starts an empty runtime in-process).
    #[arg(long, env = URL_VAR, hide_env = true)]
    pub url: Option<String>,
    /// CODESPAR_BASE_URL as clap reads it: the variable is the interface, so the flag is
    /// hidden.
    #[arg(long = "codespar-base-url", env = BASE_URL_VAR, hide = true)]
    pub base_url: Option<String>,
    /// API key, sent as a Bearer token: the last one given (else CODESPAR_API_KEY).
    #[arg(long = "api-key", env = API_KEY_VAR, hide_env = true, action = clap::ArgAction::Append)]
    pub api_key: Vec<String>,
    /// Project to act for: sent as the x-codespar-project header (else SPYGLASS_PROJECT,
    /// else the config file's `project`, else the runtime's default project).
    #[arg(long, env = PROJECT_VAR, hide_env = true, value_name = "ID")]
    pub project: Option<String>,
    /// Print the resolved configuration, where each value came from and every path
    /// spyglass uses, then exit.
    #[arg(long = "print-config")]
    pub print_config: bool,
}

impl Client {
    /// The config the role runs with: these flags (or their variables) over the config file
    /// over the defaults; `display` for the roles that open the inspector. `matches` are
    /// the role's own, which tell a flag from its variable.
    pub fn resolve(
        &self,
        display: Option<&inspect::Display>,
        matches: &ArgMatches,
    ) -> Result<Resolved, RoleError> {
        let overrides = CliOverrides {
            url: given(self.url.as_ref(), matches, "url", "--url", URL_VAR).or_else(|| {
                given(
                    self.base_url.as_ref(),
                    matches,
                    "base_url",
                    "--url",
                    BASE_URL_VAR,
                )
            }),
            api_key: given(
                self.api_key.last(),
                matches,
                "api_key",
                "--api-key",
                API_KEY_VAR,
            ),
            project: given(
                self.project.as_ref(),
                matches,
                "project",
                "--project",
                PROJECT_VAR,
            ),
            theme: display.and_then(|d| d.theme.clone()),
            no_mouse: display.is_some_and(|d| d.no_mouse),
        };
        Ok(Config::resolve(&overrides, &Env::from_process())?)
    }
}

/// An empty variable counts as unset, as it always has: a flag's variable that is set but
/// empty is taken from clap before it parses, so the flag reads as not given.
pub fn unset_empty_vars(command: clap::Command) -> clap::Command {
    command
        .mut_args(|arg| {
            let empty = arg
                .get_env()
                .and_then(std::env::var_os)
                .is_some_and(|value| value.is_empty());
            if empty {
                arg.env(None::<&'static str>)
            } else {
                arg
            }
        })
        .mut_subcommands(unset_empty_vars)
}

/// A flag's value with where clap found it: the flag `flag`, or the variable `var`.
pub fn given(
    value: Option<&String>,
    matches: &ArgMatches,
    id: &str,
    flag: &'static str,
    var: &'static str,
) -> Option<Setting<String>> {
    let source = match matches.value_source(id)? {
        ValueSource::CommandLine => Source::Flag(flag),
        ValueSource::EnvVariable => Source::Env(var),
        _ => return None,
    };
    value.map(|value| Setting {
        value: value.clone(),
        source,
    })
}

/// Logs go to the file `--help` names. The inspector's roles stop when it cannot be
/// opened (as they always have); `eval`, `tail` and `record` say so and run on unlogged,
/// so an unwritable home never fails a CI job.
pub fn start_logging(to: LogTo, required: bool) -> Result<(), RoleError> {
    let path = Paths::from_env(&Env::from_process())
        .log_file
        .unwrap_or_else(crate::ui::logfile::log_file);
    match init_logging(to, &path) {
        Err(err) if !required => {
            eprintln!("spyglass: logging off: {err}");
            Ok(())
        }
        other => other,
    }
}

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
        attempts: u64,
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
    /// `replay` of a file none of whose lines is an observer frame.
    #[error("nothing to replay in {path}: {reason}")]
    NoFrames { path: PathBuf, reason: String },
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
            | Self::NoFrames { .. }
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
