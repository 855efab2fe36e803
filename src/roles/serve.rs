//! `spyglass serve`: the runtime alone, headless, logging to stderr until Ctrl-C. Reads
//! the environment's test-mode switch and extra API keys; the CLI only parses flags.

use super::RoleError;
use crate::config::paths::{Env, store_file};
use crate::runtime::{Policy, PolicyError, RuntimeConfig};
use crate::store::{StoreChoice, StoreError};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use thiserror::Error;

/// The flags of `spyglass serve`.
#[derive(Debug, Clone, Default)]
pub struct ServeArgs {
    pub addr: String,
    pub test_mode: bool,
    pub policy: Option<PathBuf>,
    /// `--api-key` flags (`KEY` or `KEY=p1,p2`); `SPYGLASS_API_KEYS` adds to them.
    pub api_keys: Vec<String>,
    /// `--max-retained-bytes`: the runtime's byte budget; `None` keeps the default.
    pub max_retained_bytes: Option<usize>,
    /// `--retain-closed`: how long closed sessions are kept; `None` keeps the default.
    pub retain_closed: Option<Duration>,
    /// `--keys-file`: one `KEY` or `KEY=p1,p2` a line.
    pub keys_file: Option<PathBuf>,
    pub allow_origins: Vec<String>,
    pub allow_hosts: Vec<String>,
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    /// `--store PATH|memory|postgres://…`; `None` is the default file
    /// (`config::paths::store_file`).
    pub store: Option<String>,
    /// `--store-pool`: connections to a Postgres store at most; `None`: the
    /// `SPYGLASS_STORE_POOL` variable, else `store::postgres::DEFAULT_POOL_SIZE`.
    pub store_pool: Option<usize>,
    /// How long a held call waits for a decision before it expires (default 15 min).
    pub approval_ttl: Option<std::time::Duration>,
    /// `--model-base-url`, `--model-record`, `--model-replay`, `--model-prices`.
    pub models: crate::runtime::model::settings::ModelFlags,
    /// `--otlp-grpc-addr`: OTLP/gRPC trace export on its own port; off when `None`.
    pub otlp_grpc_addr: Option<String>,
    /// `--allow-command-assertions` (or `SPYGLASS_ALLOW_COMMAND_ASSERTIONS`): eval suites
    /// posted here may run checker programs on this host.
    pub allow_command_assertions: bool,
}

#[derive(Debug, Error)]
pub enum ServeError {
    #[error("--addr {0} is not HOST:PORT (e.g. 127.0.0.1:8000)")]
    Addr(String),
    #[error("--otlp-grpc-addr {0} is not HOST:PORT (e.g. 127.0.0.1:4317)")]
    GrpcAddr(String),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot read --keys-file {path}: {source}")]
    KeysFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}: a bound key needs at least one project (KEY=project1,project2)")]
    Binding(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    StorePool(String),
    #[error(transparent)]
    Models(#[from] crate::runtime::model::settings::ModelSettingsError),
    #[error("cannot listen for Ctrl-C: {0}")]
    Signal(std::io::Error),
}

/// `CODESPAR_TEST_MODE_ENABLED`: `true` or `1`, in any case, turns test mode on.
fn env_test_mode() -> bool {
    std::env::var("CODESPAR_TEST_MODE_ENABLED")
        .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1"))
}

/// `SPYGLASS_ALLOW_COMMAND_ASSERTIONS`: `true` or `1`, in any case, lets eval suites run
/// checker programs on this host.
fn env_allow_commands() -> bool {
    std::env::var("SPYGLASS_ALLOW_COMMAND_ASSERTIONS")
        .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1"))
}

/// Every key `serve` accepts: plain ones, and ones bound to projects.
#[derive(Debug, Default, PartialEq)]
pub struct Keys {
    pub plain: Vec<String>,
    pub bound: Vec<(String, Vec<String>)>,
}

impl Keys {
    /// Adds one `KEY` or `KEY=p1,p2` (blank ignored; a key named twice gets the union
    /// of its projects).
    fn add(&mut self, entry: &str) -> Result<(), ServeError> {
        let entry = entry.trim();
        let Some((key, projects)) = entry.split_once('=') else {
            if !entry.is_empty() {
                self.plain.push(entry.to_owned());
            }
            return Ok(());
        };
        let key = key.trim();
        let projects: Vec<String> = projects
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        if key.is_empty() || projects.is_empty() {
            // The key itself stays out of the message: it is a secret.
            return Err(ServeError::Binding("an --api-key binding".to_owned()));
        }
        match self.bound.iter_mut().find(|(k, _)| k == key) {
            Some((_, known)) => known.extend(projects),
            None => self.bound.push((key.to_owned(), projects)),
        }
        Ok(())
    }

    /// `--api-key` flags, then `SPYGLASS_API_KEYS` (`;` separates entries; an entry with
    /// no `=` is comma-separated plain keys, as before bindings), then the keys file.
    pub fn gather(flags: &[String], env: &str, file: Option<&str>) -> Result<Keys, ServeError> {
        let mut keys = Keys::default();
        for flag in flags {
            keys.add(flag)?;
        }
        for entry in env.split(';') {
            if entry.contains('=') {
                keys.add(entry)?;
            } else {
                for key in entry.split(',') {
                    keys.add(key)?;
                }
            }
        }
        for line in file.unwrap_or_default().lines() {
            let line = line.trim();
            if !line.starts_with('#') {
                keys.add(line)?;
            }
        }
        // A key both plain and bound is bound: the narrower reading wins.
        let bound = &keys.bound;
        keys.plain.retain(|k| !bound.iter().any(|(b, _)| b == k));
        Ok(keys)
    }
}

/// Whether `serve` and the inspector's embedded runtime without `--store` keep their
/// state in `store_file`: on since the store keeps sessions, counters, approvals and
/// evals with the stream, so a restart continues where the runtime stopped.
const DEFAULT_TO_FILE: bool = true;

/// `--store`, else the default file (when on and a data directory is known), else memory.
pub(crate) fn store_choice(flag: Option<&str>, env: &Env) -> StoreChoice {
    match flag {
        Some(flag) => StoreChoice::parse(flag),
        None if DEFAULT_TO_FILE => store_file(env).map_or(StoreChoice::Memory, StoreChoice::File),
        None => StoreChoice::Memory,
    }
}

/// The most `--store-pool` (or `SPYGLASS_STORE_POOL`) may ask: well past what one
/// replica's calls can use, and below a default server's `max_connections` (100) only
/// for a handful of replicas, so a typo does not exhaust the database.
pub const MAX_STORE_POOL: usize = 1000;

/// The Postgres pool's size: `--store-pool`, else `SPYGLASS_STORE_POOL` (`env`), else the
/// default; refused for a store that is not Postgres (it would be silently ignored).
pub fn store_pool(
    flag: Option<usize>,
    env: Option<&str>,
    store: &StoreChoice,
) -> Result<usize, ServeError> {
    let size = match (flag, env.map(str::trim).filter(|v| !v.is_empty())) {
        (Some(n), _) => Some(n),
        (None, Some(text)) => Some(
            text.parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_STORE_POOL).contains(n))
                .ok_or_else(|| {
                    ServeError::StorePool(format!(
                        "SPYGLASS_STORE_POOL={text} is not a connection count from 1 to {MAX_STORE_POOL}"
                    ))
                })?,
        ),
        (None, None) => None,
    };
    match (size, store) {
        (Some(n), StoreChoice::Postgres(_)) => Ok(n),
        (None, _) => Ok(crate::store::postgres::DEFAULT_POOL_SIZE),
        (Some(_), other) => Err(ServeError::StorePool(format!(
            "--store-pool (or SPYGLASS_STORE_POOL) sizes a postgres:// store's connection pool; the store here is {}",
            other.shown()
        ))),
    }
}

/// Serves until Ctrl-C.
pub async fn run(args: ServeArgs) -> Result<(), RoleError> {
    let addr: SocketAddr = args
        .addr
        .parse()
        .map_err(|_| ServeError::Addr(args.addr.clone()))?;
    let grpc_addr: Option<SocketAddr> = match &args.otlp_grpc_addr {
        Some(text) => Some(
            text.parse()
                .map_err(|_| ServeError::GrpcAddr(text.clone()))?,
        ),
        None => None,
    };
    let policy = match &args.policy {
        Some(path) => Policy::load(path).map_err(ServeError::from)?,
        None => Policy::default(),
    };
    let file = match &args.keys_file {
        Some(path) => {
            Some(
                std::fs::read_to_string(path).map_err(|source| ServeError::KeysFile {
                    path: path.clone(),
                    source,
                })?,
            )
        }
        None => None,
    };
    let env = std::env::var("SPYGLASS_API_KEYS").unwrap_or_default();
    let keys = Keys::gather(&args.api_keys, &env, file.as_deref())?;
    let config = RuntimeConfig {
        test_mode: args.test_mode || env_test_mode(),
        policy,
        max_retained_bytes: args
            .max_retained_bytes
            .unwrap_or(RuntimeConfig::default().max_retained_bytes),
        retain_closed_sessions: args
            .retain_closed
            .unwrap_or(RuntimeConfig::default().retain_closed_sessions),
        api_keys: keys.plain,
        key_projects: keys.bound,
        allowed_origins: args.allow_origins,
        allowed_hosts: args.allow_hosts,
        max_connections: args.max_connections,
        max_connections_per_ip: args.max_connections_per_ip,
        approval_ttl: args
            .approval_ttl
            .unwrap_or(RuntimeConfig::default().approval_ttl),
        models: crate::runtime::model::settings::ModelSettings::resolve(&args.models, |name| {
            std::env::var(name).ok()
        })
        .map_err(ServeError::from)?,
        allow_command_assertions: args.allow_command_assertions || env_allow_commands(),
        ..RuntimeConfig::default()
    };
    let test_mode = config.test_mode;
    let commands = config.allow_command_assertions;
    let auth = !config.api_keys.is_empty() || !config.key_projects.is_empty();
    let store = store_choice(args.store.as_deref(), &Env::from_process());
    let pool = store_pool(
        args.store_pool,
        std::env::var("SPYGLASS_STORE_POOL").ok().as_deref(),
        &store,
    )?;
    let shown = store.shown();
    let waiting = move |reason: &str| {
        eprintln!("spyglass runtime: waiting for the store at {shown}: {reason}");
    };
    let runtime = store
        .open(config, pool, &waiting)
        .await
        .map_err(ServeError::from)?;
    let handle = runtime
        .serve(addr)
        .await
        .map_err(|source| ServeError::Listen { addr, source })?;
    let kept = match &store {
        StoreChoice::Postgres(_) => format!("{}, pool {pool}", store.shown()),
        _ => store.shown(),
    };
    eprintln!(
        "spyglass runtime on {} (test mode {}, auth {}, store {kept}); observe at {}",
        handle.url(),
        if test_mode { "on" } else { "off" },
        if auth { "on" } else { "off" },
        handle.observe_url()
    );
    if commands {
        eprintln!(
            "spyglass runtime: eval suites posted here may run programs on this host (command assertions allowed)"
        );
    }
    let grpc = match grpc_addr {
        Some(addr) => {
            let grpc = runtime
                .serve_otlp_grpc(addr)
                .await
                .map_err(|source| ServeError::Listen { addr, source })?;
            eprintln!("spyglass runtime: OTLP/gRPC traces on {}", grpc.url());
            Some(grpc)
        }
        None => None,
    };
    let signal = tokio::signal::ctrl_c().await.map_err(ServeError::Signal);
    eprintln!("spyglass runtime: shutting down");
    if let Some(grpc) = grpc {
        grpc.shutdown().await;
    }
    handle.shutdown().await;
    runtime.flush_store();
    Ok(signal?)
}

#[cfg(test)]
mod tests {
    use super::Keys;

    #[test]
    fn keys_from_flags_env_and_file() {
        let keys = Keys::gather(
            &["k1".into(), "k2=p1, p2".into()],
            "k3,k4;k5=p3,p4; k6",
            Some("# comment\n\nk7=p5\nk8\nk2=p6\n"),
        )
        .unwrap();
        assert_eq!(keys.plain, ["k1", "k3", "k4", "k6", "k8"]);
        assert_eq!(
            keys.bound,
            [
                (
                    "k2".to_owned(),
                    vec!["p1".to_owned(), "p2".into(), "p6".into()]
                ),
                ("k5".to_owned(), vec!["p3".to_owned(), "p4".into()]),
                ("k7".to_owned(), vec!["p5".to_owned()]),
            ]
        );
        // The old comma-separated form is unchanged.
        assert_eq!(
            Keys::gather(&[], "a, b,,c", None).unwrap().plain,
            ["a", "b", "c"]
        );
        assert!(Keys::gather(&["k=".into()], "", None).is_err());
        assert!(Keys::gather(&[], "=p1", None).is_err());
    }
}
