//! `spyglass [--url URL]`: the inspector on the runtime the config names, else on a
//! test-mode runtime started here (`--store`, `--policy`, `--addr`, `--approval-ttl`; on
//! the default store, like `serve`), whose URL the status bar shows for tests to use.

use super::serve::{ServeError, store_choice};
use super::{Client, LogTo, RoleError, start_logging};
use crate::config::Resolved;
use crate::config::paths::Env;
use crate::runtime::RuntimeConfig;
use crate::runtime::policy::Policy;
use crate::ui::{InspectorConfig, Watching, inspector_config};
use clap::ArgMatches;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The flags of `spyglass` with no subcommand: the inspector.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct InspectArgs {
    #[command(flatten)]
    pub client: Client,
    #[command(flatten)]
    pub display: Display,
    #[command(flatten)]
    pub embedded: Embedded,
}

/// The inspector's display, for every role that opens it (the inspector, demo, replay,
/// view).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Display {
    /// Colour theme: dark, light, high-contrast, a NAME.toml in the user theme dir, or a
    /// path to a theme file (else the config file's `theme`, else dark).
    #[arg(long, value_name = "NAME")]
    pub theme: Option<String>,
    /// Leave the mouse to the terminal (select and copy text natively).
    #[arg(long = "no-mouse")]
    pub no_mouse: bool,
}

/// The embedded runtime's settings (`spyglass` with no `--url`).
// Doc comments here are the --help text: backticks would print there as-is.
#[expect(clippy::doc_markdown)]
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Embedded {
    /// Where the inspector's embedded runtime (no --url) keeps its state: a SQLite file,
    /// or `memory` (default: $XDG_DATA_HOME/spyglass/runtime.db).
    #[arg(long, value_name = "PATH|memory")]
    pub store: Option<String>,
    /// Policy rules (TOML) for the inspector's embedded runtime (no --url), so its
    /// Approvals tab can fill: calls the rules hold wait there for a decision.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Address for the inspector's embedded runtime (no --url), e.g. 127.0.0.1:8000, so
    /// an exported CODESPAR_BASE_URL stays right across restarts (default: a free port).
    #[arg(long, value_name = "HOST:PORT")]
    pub addr: Option<String>,
    /// How long the embedded runtime (no --url) holds a call for approval before it
    /// expires: 90s, 15m, 2h (default 15m).
    #[arg(long = "approval-ttl", value_name = "DURATION", value_parser = crate::config::parse_duration)]
    pub approval_ttl: Option<Duration>,
}

impl Embedded {
    /// The first flag given, which only the embedded runtime reads.
    fn given(&self) -> Option<&'static str> {
        [
            (self.store.is_some(), "--store"),
            (self.policy.is_some(), "--policy"),
            (self.addr.is_some(), "--addr"),
            (self.approval_ttl.is_some(), "--approval-ttl"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}

/// Resolves the config (`matches`: the command line's, telling a flag from its variable)
/// and runs the inspector until the user quits.
pub async fn run(args: InspectArgs, matches: &ArgMatches) -> Result<(), RoleError> {
    let config = args.client.resolve(Some(&args.display), matches)?;
    start_logging(LogTo::File, true)?;
    inspect(config, args.embedded).await
}

/// Runs the inspector with a resolved config until the user quits. `embedded` configures
/// the runtime started here when the config names none.
async fn inspect(config: Resolved, embedded: Embedded) -> Result<(), RoleError> {
    let (url, embedded) = if let Some(url) = config.url.value.clone() {
        if let Some(flag) = embedded.given() {
            return Err(RoleError::Usage(format!(
                "{flag} sets up the runtime the inspector starts when no runtime is named, but \
                 {} names {url}; drop one of them",
                config.url.source
            )));
        }
        (url, None)
    } else {
        let addr: SocketAddr = match &embedded.addr {
            Some(text) => text.parse().map_err(|_| ServeError::Addr(text.clone()))?,
            None => SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        let policy = match &embedded.policy {
            Some(path) => Policy::load(path).map_err(ServeError::from)?,
            None => Policy::default(),
        };
        let defaults = RuntimeConfig::default();
        let runtime = RuntimeConfig {
            test_mode: true,
            policy,
            approval_ttl: embedded.approval_ttl.unwrap_or(defaults.approval_ttl),
            ..defaults
        };
        // Before the screen is up: a wait for the database is said where it was asked.
        let waiting = |reason: &str| eprintln!("spyglass: waiting for the store: {reason}");
        let runtime = store_choice(embedded.store.as_deref(), &Env::from_process())
            .open(runtime, crate::store::postgres::DEFAULT_POOL_SIZE, &waiting)
            .await
            .map_err(ServeError::from)?;
        let handle = runtime
            .serve(addr)
            .await
            .map_err(|source| ServeError::Listen { addr, source })?;
        (handle.url(), Some(handle))
    };
    tracing::info!(%url, embedded = embedded.is_some(), "inspector starting");
    let inspector = InspectorConfig {
        watching: if embedded.is_some() {
            Watching::Embedded
        } else {
            Watching::Runtime
        },
        ..inspector_config(url, &config)
    };
    let result = crate::ui::run(inspector).await;
    if let Some(handle) = embedded {
        let runtime = handle.runtime();
        handle.shutdown().await;
        runtime.flush_store();
    }
    Ok(result?)
}
