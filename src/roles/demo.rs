//! `spyglass demo`: the demo's runtime on a free loopback port, its workload driving it in
//! the background, and the inspector on it until the user quits.

use super::inspect::Display;
use super::{Client, LogTo, RoleError, start_logging};
use crate::demo::{Pace, drive, runtime_config};
use crate::ui::{InspectorConfig, Watching, inspector_config};
use clap::ArgMatches;

/// The flags of `spyglass demo`: the inspector's (its runtime is the demo's own).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DemoArgs {
    #[command(flatten)]
    pub client: Client,
    #[command(flatten)]
    pub display: Display,
}

/// The inspector runs with the user's resolved config (theme, keys, history limits,
/// mouse); only the URL is the demo's.
pub async fn run(args: DemoArgs, matches: &ArgMatches) -> Result<(), RoleError> {
    let config = args.client.resolve(Some(&args.display), matches)?;
    start_logging(LogTo::File, true)?;
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
