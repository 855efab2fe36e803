//! `spyglass serve`: the runtime alone, headless, logging to stderr until Ctrl-C. Owns its
//! flags, and through clap the variables that stand for them (test mode, extra API keys).

use super::{LogTo, RoleError, start_logging};
use crate::config::paths::{Env, store_file};
use crate::runtime::llm::settings::{ProviderFlags, ProviderSettings};
use crate::runtime::{Policy, PolicyError, RuntimeConfig};
use crate::store::{StoreChoice, StoreError};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use thiserror::Error;

/// The flags of `spyglass serve`. clap reads `CODESPAR_TEST_MODE_ENABLED`,
/// `SPYGLASS_ALLOW_COMMAND_ASSERTIONS`, `SPYGLASS_STORE_POOL` and `SPYGLASS_API_KEYS` with
/// the flags they stand for.
// Doc comments here are the --help text: backticks would print there as-is.
#[expect(clippy::doc_markdown)]
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub addr: String,
    /// Enable test mode (mocks allowed); also CODESPAR_TEST_MODE_ENABLED=true|1.
    #[arg(long, env = "CODESPAR_TEST_MODE_ENABLED", hide_env = true, value_parser = switch)]
    pub test_mode: bool,
    /// Policy rules, TOML.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// An API key the runtime accepts; repeatable. KEY=p1,p2 binds the key to those
    /// projects. SPYGLASS_API_KEYS adds more: keys comma-separated, and KEY=p1,p2 entries
    /// separated by `;`.
    #[arg(long = "api-key", action = clap::ArgAction::Append)]
    pub api_key: Vec<String>,
    /// SPYGLASS_API_KEYS as clap reads it: the variable is the interface, so the flag is
    /// hidden. Its keys add to --api-key's.
    #[arg(long = "api-keys", env = "SPYGLASS_API_KEYS", hide = true)]
    pub api_keys: Option<String>,
    /// Bytes the runtime retains (events and sessions) before evicting the oldest;
    /// default 268435456 (256 MiB).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_retained_bytes: Option<u64>,
    /// Closed sessions older than this (e.g. 90m, 12h, 7d) are dropped, oldest first;
    /// default 7d.
    #[arg(long, value_name = "AGE", value_parser = crate::config::parse_duration)]
    pub retain_closed: Option<Duration>,
    /// API keys, one a line: KEY, or KEY=project1,project2 to bind the key to those
    /// projects (blank lines and # comments skipped).
    #[arg(long, value_name = "FILE")]
    pub keys_file: Option<PathBuf>,
    /// A browser origin (scheme://host[:port], or *) allowed to call the runtime;
    /// repeatable. Any other Origin header is refused 403.
    #[arg(long = "allow-origin", value_name = "ORIGIN", action = clap::ArgAction::Append)]
    pub allow_origin: Vec<String>,
    /// A Host name a loopback-bound runtime answers besides localhost and loopback
    /// addresses; repeatable.
    #[arg(long = "allow-host", value_name = "HOST", action = clap::ArgAction::Append)]
    pub allow_host: Vec<String>,
    /// Also take OTLP/gRPC trace exports on this address (4317 is the convention);
    /// off unless given. OTLP/HTTP is always on the main port at /v1/traces.
    #[arg(long, value_name = "HOST:PORT")]
    pub otlp_grpc_addr: Option<String>,
    /// Open connections in total (kept below the descriptor limit).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Open connections per client IP.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_ip: u32,
    /// Where the runtime keeps its state: a SQLite file (sessions, counters, approvals,
    /// evals and the event stream go on after a restart), a postgres:// URL (one
    /// database shared by replicas), or `memory` (nothing survives the process).
    /// Default: $XDG_DATA_HOME/spyglass/runtime.db.
    #[arg(long, value_name = "PATH|URL|memory")]
    pub store: Option<String>,
    /// Connections to a postgres:// store at most (also SPYGLASS_STORE_POOL; default
    /// 16). A store call waiting over 5s for a free one fails (it never hangs).
    #[arg(long = "store-pool", value_name = "N", env = "SPYGLASS_STORE_POOL", hide_env = true, value_parser = pool_size)]
    pub store_pool: Option<usize>,
    /// How long a held call waits for a decision before it expires: 90s, 15m, 2h
    /// (default 15m).
    #[arg(long = "approval-ttl", value_name = "DURATION", value_parser = crate::config::parse_duration)]
    pub approval_ttl: Option<Duration>,
    /// Where the openai provider answers (an OpenAI-compatible /v1 URL: Ollama, vLLM,
    /// LiteLLM...), or PROVIDER=URL (openai, anthropic); repeatable. Keys come from
    /// OPENAI_API_KEY and ANTHROPIC_API_KEY only.
    #[arg(long = "model-base-url", value_name = "URL", action = clap::ArgAction::Append)]
    pub model_base_url: Vec<String>,
    /// Record every model exchange into DIR as a cassette.
    #[arg(long, value_name = "DIR")]
    pub model_record: Option<PathBuf>,
    /// Serve model exchanges from the cassettes in DIR, with no network.
    #[arg(long, value_name = "DIR")]
    pub model_replay: Option<PathBuf>,
    /// Model prices, TOML: one table per model name with input and output, dollars
    /// per million tokens.
    #[arg(long, value_name = "FILE")]
    pub model_prices: Option<PathBuf>,
    /// A model a session may name (e.g. gpt-4o-mini, llama3*); repeatable. None given:
    /// any model of a configured provider.
    #[arg(long = "model-allow", value_name = "MODEL", action = clap::ArgAction::Append)]
    pub model_allow: Vec<String>,
    /// Let eval suites posted to this runtime use command assertions, which run
    /// programs on this host; also SPYGLASS_ALLOW_COMMAND_ASSERTIONS=true|1. Off: such a
    /// suite is refused 403 command_assertions_disabled.
    #[arg(long, env = "SPYGLASS_ALLOW_COMMAND_ASSERTIONS", hide_env = true, value_parser = switch)]
    pub allow_command_assertions: bool,
    /// Open a SQLite store that holds less than it last recorded holding (its -wal file
    /// lost or damaged, an older copy put back) and go on from what it holds. Without
    /// it such a store is refused, naming the file.
    #[arg(long)]
    pub accept_store_loss: bool,
}

/// A switch's variable: `true` or `1`, in any case, turns it on; anything else leaves it
/// off. (The flag itself reaches here as `true`, its absence as `false`.)
#[expect(clippy::unnecessary_wraps)] // clap's value parsers return a Result
fn switch(text: &str) -> Result<bool, String> {
    Ok(matches!(
        text.trim().to_ascii_lowercase().as_str(),
        "true" | "1"
    ))
}

/// `--store-pool N` (or `SPYGLASS_STORE_POOL=N`): a connection count from 1 to
/// [`MAX_STORE_POOL`].
fn pool_size(text: &str) -> Result<usize, String> {
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=MAX_STORE_POOL).contains(n))
        .ok_or_else(|| {
            format!(
                "not a connection count from 1 to {MAX_STORE_POOL} (--store-pool, or SPYGLASS_STORE_POOL)"
            )
        })
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
    Models(#[from] crate::runtime::llm::settings::ProviderSettingsError),
    #[error("cannot listen for Ctrl-C: {0}")]
    Signal(std::io::Error),
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

/// The Postgres pool's size: `--store-pool` (or `SPYGLASS_STORE_POOL`), else the default;
/// refused for a store that is not Postgres (it would be silently ignored).
pub fn store_pool(size: Option<usize>, store: &StoreChoice) -> Result<usize, ServeError> {
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
    let stop = Stop::install().map_err(ServeError::Signal)?;
    start_logging(LogTo::Stderr, true)?;
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
    let keys = Keys::gather(
        &args.api_key,
        args.api_keys.as_deref().unwrap_or_default(),
        file.as_deref(),
    )?;
    let models = ProviderFlags {
        base_urls: args.model_base_url,
        record: args.model_record,
        replay: args.model_replay,
        prices: args.model_prices,
        allow: args.model_allow,
    };
    let config = RuntimeConfig {
        test_mode: args.test_mode,
        policy,
        max_retained_bytes: args
            .max_retained_bytes
            .map_or(RuntimeConfig::default().max_retained_bytes, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            }),
        retain_closed_sessions: args
            .retain_closed
            .unwrap_or(RuntimeConfig::default().retain_closed_sessions),
        api_keys: keys.plain,
        key_projects: keys.bound,
        allowed_origins: args.allow_origin,
        allowed_hosts: args.allow_host,
        max_connections: args.max_connections as usize,
        max_connections_per_ip: args.max_connections_per_ip as usize,
        approval_ttl: args
            .approval_ttl
            .unwrap_or(RuntimeConfig::default().approval_ttl),
        models: ProviderSettings::resolve(&models, |name| std::env::var(name).ok())
            .map_err(ServeError::from)?,
        allow_command_assertions: args.allow_command_assertions,
        accept_store_loss: args.accept_store_loss,
        ..RuntimeConfig::default()
    };
    let test_mode = config.test_mode;
    let commands = config.allow_command_assertions;
    let auth = !config.api_keys.is_empty() || !config.key_projects.is_empty();
    let store = store_choice(args.store.as_deref(), &Env::from_process());
    let pool = store_pool(args.store_pool, &store)?;
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
    let signal = stop.wait().await.map_err(ServeError::Signal);
    eprintln!("spyglass runtime: shutting down");
    if let Some(grpc) = grpc {
        grpc.shutdown().await;
    }
    handle.shutdown().await;
    runtime.close_store();
    Ok(signal?)
}

/// Ctrl-C (SIGINT) or SIGTERM (what `kill`, systemd and container runtimes send): either
/// is a clean stop, the store closed before the process ends. Installed before the
/// runtime announces itself, so a signal sent once it is up is never the default one.
struct Stop {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Stop {
    fn install() -> std::io::Result<Stop> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Stop {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    async fn wait(mut self) -> std::io::Result<()> {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
        Ok(())
    }
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
