//! `spyglass serve`: the runtime alone, headless, logging to stderr until Ctrl-C. Reads
//! the environment's test-mode switch and extra API keys; the CLI only parses flags.

use super::RoleError;
use crate::config::paths::{Env, store_file};
use crate::runtime::{Policy, PolicyError, RuntimeConfig};
use crate::store::{StoreChoice, StoreError};
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
    /// `--store PATH|memory`; `None` is the default file (`config::paths::store_file`).
    pub store: Option<String>,
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
    #[error(transparent)]
    Store(#[from] StoreError),
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

/// Whether `serve` without `--store` keeps its state in `store_file`. Off while the store
/// keeps only the event stream: a reopened stream whose sessions are gone would show the
/// inspector sessions the runtime no longer knows, with no reset to say so. It turns on
/// when sessions, counters and approvals are kept too (issue 16, step 2).
const DEFAULT_TO_FILE: bool = false;

/// `--store`, else the default file (when on), else memory.
fn store_choice(flag: Option<&str>, env: &Env) -> StoreChoice {
    match flag {
        Some(flag) => StoreChoice::parse(flag),
        None if DEFAULT_TO_FILE => store_file(env).map_or(StoreChoice::Memory, StoreChoice::File),
        None => StoreChoice::Memory,
    }
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
        ..RuntimeConfig::default()
    };
    let test_mode = config.test_mode;
    let auth = !config.api_keys.is_empty();
    let store = store_choice(args.store.as_deref(), &Env::from_process());
    let runtime = store.runtime(config).map_err(ServeError::from)?;
    let handle = runtime
        .serve(addr)
        .await
        .map_err(|source| ServeError::Listen { addr, source })?;
    let kept = match &store {
        StoreChoice::Memory => "memory".to_owned(),
        StoreChoice::File(path) => path.display().to_string(),
    };
    eprintln!(
        "spyglass runtime on {} (test mode {}, auth {}, store {kept}); observe at {}",
        handle.url(),
        if test_mode { "on" } else { "off" },
        if auth { "on" } else { "off" },
        handle.observe_url()
    );
    let signal = tokio::signal::ctrl_c().await.map_err(ServeError::Signal);
    eprintln!("spyglass runtime: shutting down");
    handle.shutdown().await;
    runtime.flush_store();
    Ok(signal?)
}
