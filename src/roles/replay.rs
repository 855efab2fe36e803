//! `spyglass replay FILE`: the inspector on a recording, offline. The file is read before
//! the terminal is taken, so a missing one is a plain error, not a blank screen.

use super::RoleError;
use crate::config::Resolved;
use crate::ui::{InspectorConfig, Source, Watching, inspector_config, run_source};
use std::path::Path;

/// Checks the speed and reads the file, then plays it until the user quits.
pub async fn run(config: Resolved, file: &Path, speed: f64) -> Result<(), RoleError> {
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
