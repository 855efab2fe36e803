//! `spyglass [--url URL] [--store PATH|memory]`: the inspector on the runtime the config
//! names, else on a test-mode runtime started here (on the default store, like `serve`),
//! whose URL the status bar shows so tests can be pointed at it.

use super::RoleError;
use super::serve::{ServeError, store_choice};
use crate::config::Resolved;
use crate::config::paths::Env;
use crate::runtime::RuntimeConfig;
use crate::ui::{InspectorConfig, Watching, inspector_config};
use std::net::SocketAddr;

/// Runs the inspector with a resolved config until the user quits. `store` is the
/// embedded runtime's `--store` (unused with a URL).
pub async fn run(config: Resolved, store: Option<String>) -> Result<(), RoleError> {
    let (url, embedded) = if let Some(url) = config.url.value.clone() {
        (url, None)
    } else {
        let runtime = RuntimeConfig {
            test_mode: true,
            ..RuntimeConfig::default()
        };
        let runtime = store_choice(store.as_deref(), &Env::from_process())
            .runtime(runtime)
            .map_err(ServeError::from)?;
        let handle = runtime
            .serve(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .map_err(RoleError::Embedded)?;
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
