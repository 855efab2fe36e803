//! `spyglass replay FILE`: the inspector on a recording, offline. The file is read before
//! the terminal is taken, so a missing one is a plain error, not a blank screen.

use super::inspect::Display;
use super::{Client, LogTo, RoleError, start_logging};
use crate::ui::{InspectorConfig, Source, Watching, inspector_config, run_source};
use clap::ArgMatches;
use std::path::PathBuf;

/// The flags of `spyglass replay`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReplayArgs {
    pub file: PathBuf,
    /// Playback speed: 2 plays twice as fast, 0 as fast as the file reads.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    #[command(flatten)]
    pub client: Client,
    #[command(flatten)]
    pub display: Display,
}

/// Checks the speed and reads the file, then plays it until the user quits.
pub async fn run(args: ReplayArgs, matches: &ArgMatches) -> Result<(), RoleError> {
    let config = args.client.resolve(Some(&args.display), matches)?;
    start_logging(LogTo::File, true)?;
    let (file, speed) = (args.file.as_path(), args.speed);
    if !(speed.is_finite() && speed >= 0.0) {
        return Err(RoleError::Usage(format!(
            "--speed must be a number of 0 or more (0 plays as fast as possible), not {speed}"
        )));
    }
    let text = crate::client::replay::load(file).map_err(|source| RoleError::Recording {
        path: file.to_path_buf(),
        source,
    })?;
    let name = file.display().to_string();
    let inspector = InspectorConfig {
        watching: Watching::Replay { file: name.clone() },
        ..inspector_config(name, &config)
    };
    Ok(run_source(inspector, Source::Replay { text, speed }).await?)
}
