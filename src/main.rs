//! The command line: parse it, pick a role, run it. Nothing else lives here.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use spyglass::client::eval::{self as eval_cli, EvalArgs};
use spyglass::client::tail::{self, Format, Sink};
use spyglass::config::{CliOverrides, Config, Env};
use spyglass::model::Limits;
use spyglass::ui::{InspectorConfig, logfile};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "spyglass",
    version,
    about = "A terminal inspector for AI-agent test sessions, and the test-mode runtime it watches",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// Runtime to inspect (else SPYGLASS_URL, else CODESPAR_BASE_URL; with none, an
    /// empty runtime is started in-process).
    #[arg(long, global = true)]
    url: Option<String>,

    /// API key. The inspector sends the last one given as a Bearer token (else
    /// CODESPAR_API_KEY); `serve` accepts every one given (repeatable; also
    /// SPYGLASS_API_KEYS, comma-separated).
    #[arg(long = "api-key", global = true, action = clap::ArgAction::Append)]
    api_key: Vec<String>,

    /// Colour theme: dark, light, high-contrast, a NAME.toml in the user theme dir, or a
    /// path to a theme file (else the config file's `theme`, else dark).
    #[arg(long, global = true, value_name = "NAME")]
    theme: Option<String>,

    /// Leave the mouse to the terminal (select and copy text natively).
    #[arg(long = "no-mouse", global = true)]
    no_mouse: bool,

    /// Print the resolved configuration, where each value came from and every path
    /// spyglass uses, then exit.
    #[arg(long = "print-config", global = true)]
    print_config: bool,
}

impl Cli {
    fn overrides(&self) -> CliOverrides {
        CliOverrides {
            url: self.url.clone(),
            api_key: self.api_key.last().cloned(),
            theme: self.theme.clone(),
            no_mouse: self.no_mouse,
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Start a runtime in-process with a scripted workload and open the inspector on it.
    Demo,
    /// Run the test-mode runtime alone, headless.
    Serve {
        /// Address to bind.
        #[arg(long, default_value = "127.0.0.1:8000")]
        addr: String,
        /// Enable test mode (mocks allowed); also CODESPAR_TEST_MODE_ENABLED=true|1.
        #[arg(long)]
        test_mode: bool,
        /// Policy rules, TOML.
        #[arg(long)]
        policy: Option<PathBuf>,
    },
    /// Run eval suite files on a runtime and print per-suite and per-case results.
    ///
    /// Runs on the runtime given by --url only (SPYGLASS_URL and CODESPAR_BASE_URL are not
    /// read, so a stray variable never sends CI's evals elsewhere); without --url it starts
    /// an embedded runtime with test mode on. Exit status: 0 when nothing failed or
    /// errored, 1 when something did, 2 for bad usage or a bad suite file, 3 when the
    /// runtime cannot be reached.
    Eval {
        /// Suite files (TOML or JSON).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Run every case K times.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        repeat: u32,
        /// Only cases whose id matches this glob.
        #[arg(long)]
        case: Option<String>,
        /// Write JUnit XML here.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Write the results as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Print the observer stream, one line per event.
    Tail {
        /// Raw JSON lines instead of readable lines.
        #[arg(long)]
        json: bool,
    },
    /// Save the observer stream as JSON lines.
    Record {
        /// Output file.
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
    },
    /// Open the inspector on a recorded file, offline.
    Replay {
        file: PathBuf,
        /// Playback speed multiplier.
        #[arg(long, default_value_t = 1.0)]
        speed: f64,
    },
}

/// A role this build does not have yet: say so, and which piece of work brings it.
fn not_yet(what: &str, issue: &str) -> ExitCode {
    eprintln!("spyglass {what}: not implemented yet ({issue})");
    ExitCode::from(2)
}

/// Logs go to a file so nothing reaches the screen the inspector draws on.
fn init_logging() -> anyhow::Result<std::path::PathBuf> {
    let path = logfile::log_file();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    let filter = tracing_subscriber::EnvFilter::try_from_env("SPYGLASS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing::subscriber::set_global_default(logfile::file_subscriber(file, filter))?;
    Ok(path)
}

/// First non-empty of: the flag, then each environment variable in order.
fn first_set(flag: Option<String>, vars: &[&str]) -> Option<String> {
    flag.filter(|v| !v.trim().is_empty()).or_else(|| {
        vars.iter()
            .filter_map(|v| std::env::var(v).ok())
            .find(|v| !v.trim().is_empty())
    })
}

fn demo() -> ExitCode {
    let result = init_logging().and_then(|_| {
        let runtime = tokio::runtime::Runtime::new()?;
        runtime.block_on(spyglass::demo::run(Limits::default()))?;
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("spyglass demo: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// `tail` and `record`: the stream of the runtime at --url / SPYGLASS_URL / CODESPAR_BASE_URL.
fn stream_role(
    url: Option<String>,
    api_key: Option<String>,
    format: Format,
    sink: Sink,
) -> ExitCode {
    let Some(url) = first_set(url, &["SPYGLASS_URL", "CODESPAR_BASE_URL"]) else {
        eprintln!("spyglass: no runtime to follow: pass --url URL or set SPYGLASS_URL");
        return ExitCode::from(2);
    };
    let api_key = first_set(api_key, &["CODESPAR_API_KEY"]);
    ExitCode::from(tail::run_cli(&url, api_key.as_deref(), format, sink))
}

fn inspect(url: Option<String>, api_key: Option<String>) -> anyhow::Result<ExitCode> {
    let url = first_set(url, &["SPYGLASS_URL", "CODESPAR_BASE_URL"]);
    let api_key = first_set(api_key, &["CODESPAR_API_KEY"]);
    let log = init_logging().map_err(|e| {
        anyhow::anyhow!(
            "cannot open the log file {}: {e}",
            logfile::log_file().display()
        )
    })?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        // With no runtime named, start an empty one in-process (test mode on) and show its
        // URL in the status bar, so tests can be pointed at it.
        let (url, embedded) = match url {
            Some(url) => (url, None),
            None => {
                let config = spyglass::runtime::RuntimeConfig {
                    test_mode: true,
                    ..spyglass::runtime::RuntimeConfig::default()
                };
                let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
                let handle = spyglass::runtime::start(config, addr).await.map_err(|e| {
                    anyhow::anyhow!("cannot start the embedded runtime on 127.0.0.1: {e}")
                })?;
                (handle.url(), Some(handle))
            }
        };
        tracing::info!(%url, embedded = embedded.is_some(), log = %log.display(), "inspector starting");
        let result = spyglass::ui::run(InspectorConfig {
            url,
            api_key,
            limits: Limits::default(),
        })
        .await;
        if let Some(handle) = embedded {
            handle.shutdown().await;
        }
        result.map_err(anyhow::Error::from)
    })?;
    Ok(ExitCode::SUCCESS)
}

fn parse_cli() -> Cli {
    let help = format!(
        "Logs are written to {} (SPYGLASS_LOG sets the level), never to the screen.",
        logfile::log_file().display()
    );
    let matches = Cli::command().after_help(help).get_matches();
    match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(err) => err.exit(),
    }
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

fn serve(
    addr: &str,
    test_mode: bool,
    policy: Option<PathBuf>,
    keys: Vec<String>,
) -> anyhow::Result<()> {
    use anyhow::Context;
    use spyglass::runtime::{Policy, RuntimeConfig};
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let addr: std::net::SocketAddr = addr
        .parse()
        .with_context(|| format!("--addr {addr} is not HOST:PORT (e.g. 127.0.0.1:8000)"))?;
    let policy = match policy {
        Some(path) => Policy::load(&path)?,
        None => Policy::default(),
    };
    let config = RuntimeConfig {
        test_mode: test_mode || env_test_mode(),
        policy,
        api_keys: api_keys(keys),
        ..RuntimeConfig::default()
    };
    let test_mode = config.test_mode;
    let auth = !config.api_keys.is_empty();
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let handle = spyglass::runtime::start(config, addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        eprintln!(
            "spyglass runtime on {} (test mode {}, auth {}); observe at {}",
            handle.url(),
            if test_mode { "on" } else { "off" },
            if auth { "on" } else { "off" },
            handle.observe_url()
        );
        tokio::signal::ctrl_c()
            .await
            .context("cannot listen for Ctrl-C")?;
        eprintln!("spyglass runtime: shutting down");
        handle.shutdown().await;
        Ok(())
    })
}

/// `spyglass eval`: check the files, then run them on `url`, else on a runtime started
/// here (test mode on, loopback port) through the same REST calls.
fn eval(args: EvalArgs, url: Option<String>) -> ExitCode {
    let fail = |err: eval_cli::EvalCliError| {
        eprintln!("spyglass eval: {err}");
        ExitCode::from(err.exit_code())
    };
    let prepared = match eval_cli::prepare(&args) {
        Ok(prepared) => prepared,
        Err(err) => return fail(err),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("spyglass eval: cannot start the async runtime: {err}");
            return ExitCode::from(eval_cli::EXIT_USAGE);
        }
    };
    runtime.block_on(async move {
        let (url, embedded) = match url {
            Some(url) => (url, None),
            None => {
                let config = spyglass::runtime::RuntimeConfig {
                    test_mode: true,
                    ..spyglass::runtime::RuntimeConfig::default()
                };
                let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
                match spyglass::runtime::start(config, addr).await {
                    Ok(handle) => {
                        eprintln!("spyglass eval: embedded runtime on {}", handle.url());
                        (handle.url(), Some(handle))
                    }
                    Err(err) => {
                        eprintln!("spyglass eval: cannot start the embedded runtime: {err}");
                        return ExitCode::from(eval_cli::EXIT_USAGE);
                    }
                }
            }
        };
        let (mut out, mut log) = (std::io::stdout(), std::io::stderr());
        let result = eval_cli::run(&args, &prepared, &url, &mut out, &mut log).await;
        if let Some(handle) = embedded {
            handle.shutdown().await;
        }
        match result {
            Ok(detail) => ExitCode::from(eval_cli::exit_code(&detail)),
            Err(err) => fail(err),
        }
    })
}

fn main() -> ExitCode {
    let cli = parse_cli();
    if cli.print_config {
        return match Config::resolve(&cli.overrides(), &Env::from_process()) {
            Ok(resolved) => {
                print!("{}", resolved.print_config());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("spyglass: {e}");
                ExitCode::from(2)
            }
        };
    }
    match cli.command {
        None => match inspect(cli.url, cli.api_key.last().cloned()) {
            Ok(code) => code,
            Err(err) => {
                eprintln!("spyglass: {err:#}");
                ExitCode::FAILURE
            }
        },
        Some(Command::Demo) => demo(),
        Some(Command::Serve {
            addr,
            test_mode,
            policy,
        }) => match serve(&addr, test_mode, policy, cli.api_key) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("spyglass serve: {err:#}");
                ExitCode::from(2)
            }
        },
        Some(Command::Eval {
            paths,
            repeat,
            case,
            junit,
            json,
        }) => eval(
            EvalArgs {
                paths,
                api_key: first_set(cli.api_key.last().cloned(), &["CODESPAR_API_KEY"]),
                repeat,
                case,
                junit,
                json,
            },
            cli.url,
        ),
        Some(Command::Tail { json }) => {
            let format = if json {
                Format::JsonLines
            } else {
                Format::Readable
            };
            stream_role(cli.url, cli.api_key.last().cloned(), format, Sink::Stdout)
        }
        Some(Command::Record { output }) => stream_role(
            cli.url,
            cli.api_key.last().cloned(),
            Format::JsonLines,
            Sink::File(output),
        ),
        Some(Command::Replay { .. }) => not_yet("replay", "Demo and the newcomer's path"),
    }
}
