//! The command line: parse it, build the one tokio runtime, run the role on it, and print
//! the role's error once with its exit code (`roles::RoleError`). Nothing else lives here.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use spyglass::client::eval::EvalArgs;
use spyglass::client::tail::Format;
use spyglass::config::{CliOverrides, Config, Env, Paths, Resolved};
use spyglass::roles::eval::FailOn;
use spyglass::roles::serve::ServeArgs;
use spyglass::roles::tail::Sink;
use spyglass::roles::{self, LogTo, RoleError};
use spyglass::sanitize::sanitize_text;
use spyglass::ui::logfile;
use std::path::PathBuf;
use std::process::ExitCode;

// The runtime frees most of a call's allocations on another worker thread than the one
// that made them (an event leaves the log ring long after its call); glibc's arenas made
// that the largest cost of a mocked execute under 32 connections (docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(
    name = "spyglass",
    version,
    about = "A terminal inspector for AI-agent test sessions, and the test-mode runtime it watches",
    long_about = None
)]
// Doc comments here are the --help text: backticks would print there as-is.
#[expect(clippy::doc_markdown)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// Runtime to inspect, tail or record (else SPYGLASS_URL, else CODESPAR_BASE_URL; the
    /// inspector with none starts an empty runtime in-process). `eval` reads only this
    /// flag, so a stray variable never sends CI's evals elsewhere.
    #[arg(long, global = true)]
    url: Option<String>,

    /// API key. The inspector sends the last one given as a Bearer token (else
    /// CODESPAR_API_KEY); `serve` accepts every one given (repeatable; KEY=p1,p2 binds a
    /// key to those projects; also SPYGLASS_API_KEYS: keys comma-separated, and
    /// `KEY=p1,p2` entries separated by `;`).
    #[arg(long = "api-key", global = true, action = clap::ArgAction::Append)]
    api_key: Vec<String>,

    /// Project the inspector, tail, record, eval and import act for: sent as the
    /// x-codespar-project header (else SPYGLASS_PROJECT, else the config file's
    /// `project`, else the runtime's default project).
    #[arg(long, global = true, value_name = "ID")]
    project: Option<String>,

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

    /// Where the inspector's embedded runtime (no --url) keeps its state: a SQLite file,
    /// or `memory` (default: $XDG_DATA_HOME/spyglass/runtime.db).
    #[arg(long, value_name = "PATH|memory")]
    store: Option<String>,

    /// Policy rules (TOML) for the inspector's embedded runtime (no --url), so its
    /// Approvals tab can fill: calls the rules hold wait there for a decision.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,

    /// Address for the inspector's embedded runtime (no --url), e.g. 127.0.0.1:8000, so
    /// an exported CODESPAR_BASE_URL stays right across restarts (default: a free port).
    #[arg(long, value_name = "HOST:PORT")]
    addr: Option<String>,

    /// How long the embedded runtime (no --url) holds a call for approval before it
    /// expires: 90s, 15m, 2h (default 15m).
    #[arg(long = "approval-ttl", value_name = "DURATION", value_parser = spyglass::config::parse_duration)]
    approval_ttl: Option<std::time::Duration>,
}

impl Cli {
    fn overrides(&self) -> CliOverrides {
        CliOverrides {
            url: self.url.clone(),
            api_key: self.api_key.last().cloned(),
            project: self.project.clone(),
            theme: self.theme.clone(),
            no_mouse: self.no_mouse,
        }
    }
}

#[derive(Subcommand, Debug, Clone)]
// Doc comments here are the --help text: backticks would print there as-is. One value is
// parsed per process, so Serve's size (its many flags) costs nothing worth a Box.
// (`allow`, not `expect`: whether Serve is the large variant depends on the other
// variants, and the eval variant is as large in some builds.)
#[expect(clippy::doc_markdown)]
#[allow(clippy::large_enum_variant)]
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
        /// Bytes the runtime retains (events and sessions) before evicting the oldest;
        /// default 268435456 (256 MiB).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1024..))]
        max_retained_bytes: Option<u64>,
        /// Closed sessions older than this (e.g. 90m, 12h, 7d) are dropped, oldest first;
        /// default 7d.
        #[arg(long, value_name = "AGE", value_parser = spyglass::config::parse_duration)]
        retain_closed: Option<std::time::Duration>,
        /// API keys, one a line: KEY, or KEY=project1,project2 to bind the key to those
        /// projects (blank lines and # comments skipped).
        #[arg(long, value_name = "FILE")]
        keys_file: Option<PathBuf>,
        /// A browser origin (scheme://host[:port], or *) allowed to call the runtime;
        /// repeatable. Any other Origin header is refused 403.
        #[arg(long = "allow-origin", value_name = "ORIGIN", action = clap::ArgAction::Append)]
        allow_origin: Vec<String>,
        /// A Host name a loopback-bound runtime answers besides localhost and loopback
        /// addresses; repeatable.
        #[arg(long = "allow-host", value_name = "HOST", action = clap::ArgAction::Append)]
        allow_host: Vec<String>,
        /// Also take OTLP/gRPC trace exports on this address (4317 is the convention);
        /// off unless given. OTLP/HTTP is always on the main port at /v1/traces.
        #[arg(long, value_name = "HOST:PORT")]
        otlp_grpc_addr: Option<String>,
        /// Open connections in total (kept below the descriptor limit).
        #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
        max_connections: u32,
        /// Open connections per client IP.
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
        max_connections_per_ip: u32,
        /// Where the runtime keeps its state: a SQLite file (sessions, counters, approvals,
        /// evals and the event stream go on after a restart), a postgres:// URL (one
        /// database shared by replicas), or `memory` (nothing survives the process).
        /// Default: $XDG_DATA_HOME/spyglass/runtime.db.
        #[arg(long, value_name = "PATH|URL|memory")]
        store: Option<String>,
        /// Connections to a postgres:// store at most (also SPYGLASS_STORE_POOL; default
        /// 16). A store call waiting over 5s for a free one fails (it never hangs).
        #[arg(long = "store-pool", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
        store_pool: Option<u32>,
        /// How long a held call waits for a decision before it expires: 90s, 15m, 2h
        /// (default 15m).
        #[arg(long = "approval-ttl", value_name = "DURATION", value_parser = spyglass::config::parse_duration)]
        approval_ttl: Option<std::time::Duration>,
        /// Where the openai provider answers (an OpenAI-compatible /v1 URL: Ollama, vLLM,
        /// LiteLLM...), or PROVIDER=URL (openai, anthropic); repeatable. Keys come from
        /// OPENAI_API_KEY and ANTHROPIC_API_KEY only.
        #[arg(long = "model-base-url", value_name = "URL", action = clap::ArgAction::Append)]
        model_base_url: Vec<String>,
        /// Record every model exchange into DIR as a cassette.
        #[arg(long, value_name = "DIR")]
        model_record: Option<PathBuf>,
        /// Serve model exchanges from the cassettes in DIR, with no network.
        #[arg(long, value_name = "DIR")]
        model_replay: Option<PathBuf>,
        /// Model prices, TOML: one table per model name with input and output, dollars
        /// per million tokens.
        #[arg(long, value_name = "FILE")]
        model_prices: Option<PathBuf>,
        /// A model a session may name (e.g. gpt-4o-mini, llama3*); repeatable. None given:
        /// any model of a configured provider.
        #[arg(long = "model-allow", value_name = "MODEL", action = clap::ArgAction::Append)]
        model_allow: Vec<String>,
        /// Let eval suites posted to this runtime use command assertions, which run
        /// programs on this host; also SPYGLASS_ALLOW_COMMAND_ASSERTIONS=true|1. Off: such a
        /// suite is refused 403 command_assertions_disabled.
        #[arg(long)]
        allow_command_assertions: bool,
        /// The inspector's global flags, which serve does not read: declared here, hidden,
        /// so `serve --help` lists only what serve uses and giving one is refused.
        #[command(flatten)]
        unused: ServeIgnores,
    },
    /// Run eval suite files on a runtime and print per-suite and per-case results.
    ///
    /// Runs on the runtime given by --url only (SPYGLASS_URL and CODESPAR_BASE_URL are not
    /// read, so a stray variable never sends CI's evals elsewhere); without --url it starts
    /// an embedded runtime with test mode on. Exit status: 0 when nothing failed or
    /// errored, 1 when something did, 2 for bad usage or a bad suite file, 3 when the
    /// runtime cannot be reached.
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Eval {
        #[command(subcommand)]
        command: Option<EvalCommand>,
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
        /// Keep the embedded runtime's eval history in this SQLite file, so runs (a CI
        /// job keeping the file as a cache) accumulate pass rates and flaky cases.
        #[arg(long, value_name = "PATH")]
        store: Option<PathBuf>,
        /// After the run, print per case its last N outcomes (default 10) from the
        /// embedded runtime's history (with --store, across runs).
        #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "10")]
        history: Option<usize>,
        #[command(flatten)]
        unused: DisplayIgnores,
        /// Compare with an earlier run's --json file: print per case what changed (newly
        /// failing, fixed, newly flaky, new, removed).
        #[arg(long, value_name = "FILE")]
        baseline: Option<PathBuf>,
        /// What exits 1: any failed or errored case, or only a regression against
        /// --baseline (a case that passed there fails or is flaky now).
        #[arg(long, value_enum, default_value_t = FailOn::Any)]
        fail_on: FailOn,
        /// Write a self-contained HTML report here (suite table, assertions with expected
        /// against actual, failing cases' timelines, pass-rate trend; no network).
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
    },
    /// Print the observer stream, one line per event.
    Tail {
        /// Raw JSON lines instead of readable lines.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        unused: DisplayIgnores,
    },
    /// Save the observer stream as JSON lines.
    Record {
        /// Output file.
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
        /// Overwrite the output file when it exists.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        unused: DisplayIgnores,
    },
    /// Post other eval tools' results to a runtime as eval results: JUnit XML, promptfoo
    /// results JSON, Inspect AI logs (.json, .eval).
    ///
    /// The format is told from each file's content. Every file is one run, at the time the
    /// file gives. All files are read first: an unknown or damaged one stops the import
    /// with exit 2 and nothing posted. Runtime from --url, else SPYGLASS_URL, else
    /// CODESPAR_BASE_URL.
    Import {
        /// Results files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Suite name for every result, instead of the one each file gives.
        #[arg(long)]
        suite: Option<String>,
        /// Import into the SQLite store at PATH (an embedded runtime on it) instead of a
        /// runtime at a URL: the history `spyglass eval --store PATH` reads.
        #[arg(long, value_name = "PATH")]
        store: Option<PathBuf>,
        #[command(flatten)]
        unused: DisplayIgnores,
    },
    /// Open the inspector offline on other eval tools' results files (as `import` reads).
    View {
        /// Results files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Suite name for every result, instead of the one each file gives.
        #[arg(long)]
        suite: Option<String>,
    },
    /// Operate a Postgres store (postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE): create
    /// or migrate its schema, or print its status.
    Store {
        #[command(subcommand)]
        command: StoreCommand,
    },
    /// Open the inspector on a recorded file, offline.
    Replay {
        file: PathBuf,
        /// Playback speed: 2 plays twice as fast, 0 as fast as the file reads.
        #[arg(long, default_value_t = 1.0)]
        speed: f64,
    },
}

/// `spyglass eval`'s subcommands.
#[derive(Subcommand, Debug, Clone)]
enum EvalCommand {
    /// Print what changed per case between two --json results files, running nothing.
    ///
    /// Exit status: 1 when a case of CURRENT fails or is flaky (with --fail-on
    /// regression: only when one passed in BASELINE), 2 for a file that cannot be read.
    Compare {
        /// The earlier run's --json file.
        baseline: PathBuf,
        /// The later run's --json file.
        current: PathBuf,
        /// What exits 1: any failing or flaky case of CURRENT, or only a regression.
        #[arg(long, value_enum, default_value_t = FailOn::Any)]
        fail_on: FailOn,
    },
}

/// `spyglass store`'s subcommands.
#[derive(Subcommand, Debug, Clone)]
// Doc comments here are the --help text: backticks would print there as-is.
#[expect(clippy::doc_markdown)]
enum StoreCommand {
    /// Create the spyglass schema in the database, or migrate it to this version; prints
    /// the version. Waits (saying so) while the database is unreachable.
    Migrate {
        /// The database: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE.
        #[arg(long, value_name = "URL", required = true)]
        store: String,
        #[command(flatten)]
        unused: ServeIgnores,
    },
    /// Print the database's schema version, whether this spyglass supports it, and how
    /// many events and sessions it holds. Exit status 1 when it has no spyglass schema
    /// or a newer one, or cannot be reached.
    Status {
        /// The database: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE.
        #[arg(long, value_name = "URL", required = true)]
        store: String,
        #[command(flatten)]
        unused: ServeIgnores,
    },
}

/// Global flags with the same ids, so clap does not add the real ones to `serve`.
#[derive(clap::Args, Debug, Clone)]
struct ServeIgnores {
    #[arg(long, hide = true)]
    url: Option<String>,
    #[arg(long, hide = true)]
    theme: Option<String>,
    #[arg(long, hide = true)]
    project: Option<String>,
    #[arg(long = "no-mouse", hide = true)]
    no_mouse: bool,
    #[arg(long = "print-config", hide = true)]
    print_config: bool,
}

/// The inspector's display flags, which the line-printing roles (eval, tail, record,
/// import) do not read: declared hidden so their `--help` stays theirs and giving one is
/// refused rather than silently ignored.
#[derive(clap::Args, Debug, Clone)]
struct DisplayIgnores {
    #[arg(long, hide = true)]
    theme: Option<String>,
    #[arg(long = "no-mouse", hide = true)]
    no_mouse: bool,
}

impl DisplayIgnores {
    /// The first one given, as its flag.
    fn given(&self) -> Option<&'static str> {
        if self.theme.is_some() {
            Some("--theme")
        } else if self.no_mouse {
            Some("--no-mouse")
        } else {
            None
        }
    }
}

impl ServeIgnores {
    /// The first one given, as its flag.
    fn given(&self) -> Option<&'static str> {
        [
            (self.url.is_some(), "--url"),
            (self.theme.is_some(), "--theme"),
            (self.project.is_some(), "--project"),
            (self.no_mouse, "--no-mouse"),
            (self.print_config, "--print-config"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}

impl Command {
    /// How errors name the role: `spyglass <role>: <message>`.
    fn name(&self) -> &'static str {
        match self {
            Command::Demo => "demo",
            Command::Serve { .. } => "serve",
            Command::Eval { .. } => "eval",
            Command::Tail { .. } => "tail",
            Command::Record { .. } => "record",
            Command::Replay { .. } => "replay",
            Command::Store {
                command: StoreCommand::Migrate { .. },
            } => "store migrate",
            Command::Store {
                command: StoreCommand::Status { .. },
            } => "store status",
            Command::Import { .. } => "import",
            Command::View { .. } => "view",
        }
    }
}

/// The resolved config: flags > env > file > defaults.
fn resolve(cli: &Cli) -> Result<Resolved, RoleError> {
    Ok(Config::resolve(&cli.overrides(), &Env::from_process())?)
}

/// The role's future, with its config resolved and its logging started, nothing run yet.
async fn run(cli: Cli) -> Result<(), RoleError> {
    let Some(command) = cli.command.clone() else {
        let config = resolve(&cli)?;
        start_logging(LogTo::File, true)?;
        let embedded = roles::inspect::Embedded {
            store: cli.store.clone(),
            policy: cli.policy.clone(),
            addr: cli.addr.clone(),
            approval_ttl: cli.approval_ttl,
        };
        return roles::inspect::run(config, embedded).await;
    };
    match command {
        Command::Demo => {
            let config = resolve(&cli)?;
            start_logging(LogTo::File, true)?;
            roles::demo::run(config).await
        }
        Command::Serve {
            addr,
            test_mode,
            policy,
            max_retained_bytes,
            retain_closed,
            keys_file,
            allow_origin,
            allow_host,
            max_connections,
            max_connections_per_ip,
            otlp_grpc_addr,
            store,
            store_pool,
            approval_ttl,
            model_base_url,
            model_record,
            model_replay,
            model_prices,
            model_allow,
            allow_command_assertions,
            unused,
        } => {
            if let Some(flag) = unused.given() {
                return Err(RoleError::Usage(format!(
                    "serve does not read {flag}; `spyglass serve --help` lists what it does"
                )));
            }
            start_logging(LogTo::Stderr, true)?;
            let args = ServeArgs {
                addr,
                test_mode,
                policy,
                store,
                store_pool: store_pool.map(|n| n as usize),
                api_keys: cli.api_key.clone(),
                max_retained_bytes: max_retained_bytes
                    .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
                retain_closed,
                keys_file,
                allow_origins: allow_origin,
                allow_hosts: allow_host,
                max_connections: max_connections as usize,
                max_connections_per_ip: max_connections_per_ip as usize,
                approval_ttl,
                models: spyglass::runtime::model::settings::ModelFlags {
                    base_urls: model_base_url,
                    record: model_record,
                    replay: model_replay,
                    prices: model_prices,
                    allow: model_allow,
                },
                otlp_grpc_addr,
                allow_command_assertions,
            };
            roles::serve::run(args).await
        }
        Command::Eval {
            command:
                Some(EvalCommand::Compare {
                    baseline,
                    current,
                    fail_on,
                }),
            ..
        } => {
            start_logging(LogTo::File, false)?;
            roles::eval::compare(&baseline, &current, fail_on)
        }
        Command::Eval {
            command: None,
            paths,
            repeat,
            case,
            junit,
            json,
            store,
            history,
            unused,
            baseline,
            fail_on,
            html,
        } => {
            refuse_unread("eval", unused.given())?;
            start_logging(LogTo::File, false)?;
            let args = EvalArgs {
                paths,
                api_key: cli.api_key.last().cloned().or_else(|| {
                    Env::from_process()
                        .get("CODESPAR_API_KEY")
                        .map(str::to_owned)
                }),
                project: cli.project.clone().or_else(|| {
                    Env::from_process()
                        .get("SPYGLASS_PROJECT")
                        .map(str::to_owned)
                }),
                repeat,
                case,
                junit,
                json,
                baseline,
                html,
            };
            // --url only: a stray SPYGLASS_URL must never send CI's evals elsewhere.
            roles::eval::run(args, cli.url.clone(), store, history, fail_on).await
        }
        Command::Tail { json, unused } => {
            refuse_unread("tail", unused.given())?;
            let config = resolve(&cli)?;
            start_logging(LogTo::File, false)?;
            let format = if json {
                Format::JsonLines
            } else {
                Format::Readable
            };
            roles::tail::run(config, format, Sink::Stdout).await
        }
        Command::Record {
            output,
            force,
            unused,
        } => {
            refuse_unread("record", unused.given())?;
            let config = resolve(&cli)?;
            start_logging(LogTo::File, false)?;
            roles::tail::run(
                config,
                Format::JsonLines,
                Sink::File {
                    path: output,
                    force,
                },
            )
            .await
        }
        Command::Store { command } => {
            let (url, unused, migrate) = match command {
                StoreCommand::Migrate { store, unused } => (store, unused, true),
                StoreCommand::Status { store, unused } => (store, unused, false),
            };
            if let Some(flag) = unused.given() {
                return Err(RoleError::Usage(format!(
                    "store does not read {flag}; `spyglass store --help` lists what it does"
                )));
            }
            start_logging(LogTo::File, false)?;
            if migrate {
                roles::store::migrate(&url).await
            } else {
                roles::store::status(&url).await
            }
        }
        Command::Replay { file, speed } => {
            let config = resolve(&cli)?;
            start_logging(LogTo::File, true)?;
            roles::replay::run(config, &file, speed).await
        }
        Command::Import {
            files,
            suite,
            store,
            unused,
        } => {
            refuse_unread("import", unused.given())?;
            let config = resolve(&cli)?;
            start_logging(LogTo::File, false)?;
            roles::import::run(config, roles::import::ImportArgs { files, suite }, store).await
        }
        Command::View { files, suite } => {
            let config = resolve(&cli)?;
            start_logging(LogTo::File, true)?;
            roles::import::view(config, roles::import::ImportArgs { files, suite }).await
        }
    }
}

/// A display flag given to a role that prints lines: bad usage, said plainly.
fn refuse_unread(role: &str, flag: Option<&'static str>) -> Result<(), RoleError> {
    match flag {
        Some(flag) => Err(RoleError::Usage(format!(
            "{role} does not read {flag} (it sets the inspector's display); `spyglass {role} --help` lists what it does"
        ))),
        None => Ok(()),
    }
}

/// Logs go to the file `--help` names. The inspector's roles stop when it cannot be
/// opened (as they always have); `eval`, `tail` and `record` say so and run on unlogged,
/// so an unwritable home never fails a CI job.
fn start_logging(to: LogTo, required: bool) -> Result<(), RoleError> {
    let path = Paths::from_env(&Env::from_process())
        .log_file
        .unwrap_or_else(logfile::log_file);
    match roles::init_logging(to, &path) {
        Err(err) if !required => {
            eprintln!("spyglass: logging off: {err}");
            Ok(())
        }
        other => other,
    }
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

fn main() -> ExitCode {
    let cli = parse_cli();
    if cli.print_config {
        return match resolve(&cli) {
            Ok(resolved) => {
                print!("{}", resolved.print_config());
                ExitCode::SUCCESS
            }
            Err(err) => fail("spyglass", &err),
        };
    }
    let prefix = match &cli.command {
        Some(command) => format!("spyglass {}", command.name()),
        None => "spyglass".to_owned(),
    };
    // The one tokio runtime: every role runs on it, and every in-process runtime too.
    let tokio = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(tokio) => tokio,
        Err(err) => return fail(&prefix, &RoleError::Tokio(err)),
    };
    let result = tokio.block_on(run(cli));
    // A tail's observer may be mid-dial, a demo's workload mid-request: do not wait.
    tokio.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(&prefix, &err),
    }
}

/// Errors are printed here and only here.
fn fail(prefix: &str, err: &RoleError) -> ExitCode {
    eprintln!("{prefix}: {}", sanitize_text(&err.to_string()));
    ExitCode::from(err.exit_code())
}
