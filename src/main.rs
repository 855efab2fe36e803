//! The command line: parse it, pick a role, run it. Nothing else lives here.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use spyglass::client::eval::{self as eval_cli, EvalArgs};
use spyglass::client::tail::{self, Format, Sink};
use spyglass::config::{CliOverrides, Config, Env, Resolved};
use spyglass::runtime::headless::{self, ServeArgs};
use spyglass::sanitize::sanitize_text;
use spyglass::ui::{launch, logfile};
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
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// Runtime to inspect, tail or record (else SPYGLASS_URL, else CODESPAR_BASE_URL; the
    /// inspector with none starts an empty runtime in-process). `eval` reads only this
    /// flag, so a stray variable never sends CI's evals elsewhere.
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
        /// Playback speed: 2 plays twice as fast, 0 as fast as the file reads.
        #[arg(long, default_value_t = 1.0)]
        speed: f64,
    },
}

/// The resolved config (flags > env > file > defaults), or the reason it cannot be had.
fn resolve(cli: &Cli) -> Result<Resolved, ExitCode> {
    Config::resolve(&cli.overrides(), &Env::from_process()).map_err(|e| {
        eprintln!("spyglass: {}", sanitize_text(&e.to_string()));
        ExitCode::from(2)
    })
}

/// `tail` and `record`: the stream of the runtime the config names.
fn stream_role(cli: &Cli, format: Format, sink: Sink) -> ExitCode {
    let config = match resolve(cli) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let Some(url) = config.url.value else {
        eprintln!("spyglass: no runtime to follow: pass --url URL or set SPYGLASS_URL");
        return ExitCode::from(2);
    };
    let key = config.api_key.value.as_ref().map(|k| k.expose().to_owned());
    ExitCode::from(tail::run_cli(&url, key.as_deref(), format, sink))
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
            Err(code) => code,
        };
    }
    match &cli.command {
        None => match resolve(&cli) {
            Ok(config) => match launch::inspect(config) {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("spyglass: {}", sanitize_text(&err.to_string()));
                    ExitCode::FAILURE
                }
            },
            Err(code) => code,
        },
        Some(Command::Demo) => match resolve(&cli) {
            Ok(config) => match launch::demo(config) {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("spyglass demo: {}", sanitize_text(&err.to_string()));
                    ExitCode::FAILURE
                }
            },
            Err(code) => code,
        },
        Some(Command::Serve {
            addr,
            test_mode,
            policy,
        }) => {
            let args = ServeArgs {
                addr: addr.clone(),
                test_mode: *test_mode,
                policy: policy.clone(),
                api_keys: cli.api_key.clone(),
            };
            match headless::run(args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("spyglass serve: {}", sanitize_text(&err.to_string()));
                    ExitCode::from(2)
                }
            }
        }
        Some(Command::Eval {
            paths,
            repeat,
            case,
            junit,
            json,
        }) => {
            let args = EvalArgs {
                paths: paths.clone(),
                api_key: cli.api_key.last().cloned().or_else(|| {
                    Env::from_process()
                        .get("CODESPAR_API_KEY")
                        .map(str::to_owned)
                }),
                repeat: *repeat,
                case: case.clone(),
                junit: junit.clone(),
                json: json.clone(),
            };
            // --url only: a stray SPYGLASS_URL must never send CI's evals elsewhere.
            ExitCode::from(eval_cli::run_cli(&args, cli.url.clone()))
        }
        Some(Command::Tail { json }) => {
            let format = if *json {
                Format::JsonLines
            } else {
                Format::Readable
            };
            stream_role(&cli, format, Sink::Stdout)
        }
        Some(Command::Record { output }) => {
            stream_role(&cli, Format::JsonLines, Sink::File(output.clone()))
        }
        Some(Command::Replay { file, speed }) => match resolve(&cli) {
            Ok(config) => match launch::replay(config, file, *speed) {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("spyglass replay: {}", sanitize_text(&err.to_string()));
                    ExitCode::from(2)
                }
            },
            Err(code) => code,
        },
    }
}
