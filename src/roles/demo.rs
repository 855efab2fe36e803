//! `spyglass demo`: the demo's runtime on a free loopback port, its workload driving it in
//! the background, and the inspector on it until the user quits.

use super::RoleError;
use crate::config::Resolved;
use crate::demo::{Pace, drive, runtime_config};
use crate::ui::{InspectorConfig, Watching, inspector_config};

/// The inspector runs with the user's resolved config (theme, keys, history limits,
/// mouse); only the URL is the demo's.
pub async fn run(config: Resolved) -> Result<(), RoleError> {
    let runtime = runtime_config().map_err(RoleError::DemoPolicy)?;
    let handle = crate::runtime::embedded(runtime, None)
        .await
        .map_err(RoleError::Embedded)?;
    let url = handle.url();
    tracing::info!(%url, "demo runtime listening");
    let workload = tokio::spawn({
        let url = url.clone();
        async move {
            if let Err(e) = drive(&url, None, Pace::default()).await {
                tracing::warn!(error = %e, "demo workload stopped");
            }
        }
    });
    let inspector = InspectorConfig {
        // The demo runtime has no keys; a configured one belongs to another runtime.
        api_key: None,
        watching: Watching::Demo,
        ..inspector_config(url, &config)
    };
    let result = crate::ui::run(inspector).await;
    workload.abort();
    handle.shutdown().await;
    Ok(result?)
}
