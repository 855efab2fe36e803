//! `spyglass tail` and `spyglass record`: the observer stream of the runtime the config
//! names, as lines on stdout or JSON lines in a file, until Ctrl-C or a closed pipe.

use super::RoleError;
use crate::client::tail::{Format, tail};
use crate::config::Resolved;
use std::path::PathBuf;

/// Where the lines go.
#[derive(Debug, Clone)]
pub enum Sink {
    Stdout,
    /// `record -o FILE`, created (or truncated) before anything is read.
    File(PathBuf),
}

pub async fn run(config: Resolved, format: Format, sink: Sink) -> Result<(), RoleError> {
    let Some(url) = config.url.value else {
        return Err(RoleError::Usage(
            "no runtime to follow: pass --url URL or set SPYGLASS_URL".to_owned(),
        ));
    };
    let key = config.api_key.value.as_ref().map(|k| k.expose().to_owned());
    let stop = async {
        // No Ctrl-C handler (rare) means only a closed pipe ends it.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let stderr = std::io::stderr();
    match sink {
        Sink::Stdout => {
            let out = std::io::BufWriter::new(std::io::stdout().lock());
            tail(&url, key.as_deref(), format, None, out, stderr, stop).await?;
        }
        Sink::File(path) => {
            let file = std::fs::File::create(&path).map_err(|source| RoleError::Output {
                path: path.clone(),
                source,
            })?;
            eprintln!(
                "spyglass record: writing {} from {url}; Ctrl-C stops",
                path.display()
            );
            let out = std::io::BufWriter::new(file);
            tail(&url, key.as_deref(), format, None, out, stderr, stop).await?;
        }
    }
    Ok(())
}
