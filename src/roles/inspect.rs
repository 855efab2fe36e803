//! `spyglass [--url URL]`: the inspector on the runtime the config names, else on an empty
//! test-mode runtime started here, whose URL the status bar shows so tests can be pointed at it.

use super::RoleError;
use crate::config::Resolved;
use crate::runtime::{RuntimeConfig, embedded};
use crate::ui::{InspectorConfig, Watching, inspector_config};

/// Runs the inspector with a resolved config until the user quits.
pub async fn run(config: Resolved) -> Result<(), RoleError> {
    let (url, embedded) = if let Some(url) = config.url.value.clone() {
        (url, None)
    } else {
        let runtime = RuntimeConfig {
            test_mode: true,
            ..RuntimeConfig::default()
        };
        let handle = embedded(runtime, None).await.map_err(RoleError::Embedded)?;
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
        handle.shutdown().await;
    }
    Ok(result?)
}
