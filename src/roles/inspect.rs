//! `spyglass [--url URL]`: the inspector on the runtime the config names, else on a
//! test-mode runtime started here (`--store`, `--policy`, `--addr`, `--approval-ttl`; on
//! the default store, like `serve`), whose URL the status bar shows for tests to use.

use super::RoleError;
use super::serve::{ServeError, store_choice};
use crate::config::Resolved;
use crate::config::paths::Env;
use crate::runtime::RuntimeConfig;
use crate::runtime::policy::Policy;
use crate::ui::{InspectorConfig, Watching, inspector_config};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The embedded runtime's settings (`spyglass` with no `--url`).
#[derive(Debug, Clone, Default)]
pub struct Embedded {
    /// `--store`: a `SQLite` file or `memory` (default: the data dir's `runtime.db`).
    pub store: Option<String>,
    /// `--policy`: rules that may hold calls for approval.
    pub policy: Option<PathBuf>,
    /// `--addr`: a fixed address (default: a free loopback port).
    pub addr: Option<String>,
    /// `--approval-ttl` (default 15 min).
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

/// Runs the inspector with a resolved config until the user quits. `embedded` configures
/// the runtime started here when the config names none.
pub async fn run(config: Resolved, embedded: Embedded) -> Result<(), RoleError> {
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
