//! `spyglass serve`: the runtime alone, headless, logging to stderr until Ctrl-C. Reads
//! the environment's test-mode switch and extra API keys; the CLI only parses flags.

use super::RoleError;
use crate::runtime::{Policy, PolicyError, RuntimeConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use thiserror::Error;

/// The flags of `spyglass serve`.
#[derive(Debug, Clone, Default)]
pub struct ServeArgs {
    pub addr: String,
    pub test_mode: bool,
    pub policy: Option<PathBuf>,
    /// `--api-key` flags; `SPYGLASS_API_KEYS` adds to them.
    pub api_keys: Vec<String>,
    /// `--max-retained-bytes`: the runtime's byte budget; `None` keeps the default.
    pub max_retained_bytes: Option<usize>,
}

#[derive(Debug, Error)]
pub enum ServeError {
    #[error("--addr {0} is not HOST:PORT (e.g. 127.0.0.1:8000)")]
    Addr(String),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot listen for Ctrl-C: {0}")]
    Signal(std::io::Error),
}

/// `CODESPAR_TEST_MODE_ENABLED`: `true` or `1`, in any case, turns test mode on.
fn env_test_mode() -> bool {
    std::env::var("CODESPAR_TEST_MODE_ENABLED")
        .map(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1"))
        .unwrap_or(false)
}

/// `--api-key` flags plus `SPYGLASS_API_KEYS` (comma-separated), blanks dropped.
fn api_keys(flags: Vec<String>) -> Vec<String> {
    let env = std::env::var("SPYGLASS_API_KEYS").unwrap_or_default();
    flags
        .into_iter()
        .chain(env.split(',').map(str::to_owned))
        .map(|k| k.trim().to_owned())
        .filter(|k| !k.is_empty())
        .collect()
}

/// Serves until Ctrl-C.
pub async fn run(args: ServeArgs) -> Result<(), RoleError> {
    let addr: SocketAddr = args
        .addr
        .parse()
        .map_err(|_| ServeError::Addr(args.addr.clone()))?;
    let policy = match &args.policy {
        Some(path) => Policy::load(path).map_err(ServeError::from)?,
        None => Policy::default(),
    };
    let config = RuntimeConfig {
        test_mode: args.test_mode || env_test_mode(),
        policy,
        api_keys: api_keys(args.api_keys),
        max_retained_bytes: args
            .max_retained_bytes
            .unwrap_or(RuntimeConfig::default().max_retained_bytes),
        ..RuntimeConfig::default()
    };
    let test_mode = config.test_mode;
    let auth = !config.api_keys.is_empty();
    let handle = crate::runtime::start(config, addr)
        .await
        .map_err(|source| ServeError::Listen { addr, source })?;
    eprintln!(
        "spyglass runtime on {} (test mode {}, auth {}); observe at {}",
        handle.url(),
        if test_mode { "on" } else { "off" },
        if auth { "on" } else { "off" },
        handle.observe_url()
    );
    let signal = tokio::signal::ctrl_c().await.map_err(ServeError::Signal);
    eprintln!("spyglass runtime: shutting down");
    handle.shutdown().await;
    Ok(signal?)
}
