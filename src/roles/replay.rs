//! `spyglass replay FILE`: the inspector on a recording, offline. The file is read before
//! the terminal is taken, so a missing one, or one without a single observer frame, is a
//! plain error, not a blank screen.

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
    if let Some(reason) = no_frame(&text) {
        return Err(RoleError::NoFrames {
            path: file.to_path_buf(),
            reason,
        });
    }
    let name = file.display().to_string();
    let inspector = InspectorConfig {
        watching: Watching::Replay { file: name.clone() },
        ..inspector_config(name, &config)
    };
    Ok(run_source(inspector, Source::Replay { text, speed }).await?)
}

/// Why `text` has nothing to play, when not one of its lines decodes as an observer frame:
/// how many lines it has and why the first was refused. None once one line decodes (the
/// rest are reported during playback, as they always were).
fn no_frame(text: &str) -> Option<String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty());
    let Some((number, first)) = lines.next() else {
        return Some("the file has no lines".to_owned());
    };
    let refused = match crate::protocol::decode(first) {
        Ok(_) => return None,
        Err(err) => err.to_string(),
    };
    let mut count = 1usize;
    for (_, line) in lines {
        if crate::protocol::decode(line).is_ok() {
            return None;
        }
        count += 1;
    }
    Some(format!(
        "none of its {count} line(s) is an observer frame (a line `spyglass record` or \
         `tail --json` writes); line {} was refused: {refused}",
        number + 1
    ))
}

#[cfg(test)]
mod tests {
    use super::no_frame;

    #[test]
    fn a_file_without_one_frame_says_how_many_lines_and_why_the_first_failed() {
        assert_eq!(no_frame("\n\n").as_deref(), Some("the file has no lines"));
        let reason = no_frame("\nnot json\n{\"kind\": 1}\n").unwrap_or_default();
        assert!(reason.contains("none of its 2 line(s)"), "{reason}");
        assert!(reason.contains("line 2 was refused"), "{reason}");
    }
}
