//! The command line: parse it, build the one tokio runtime, run the role on it, and print
//! the role's error once with its exit code (`roles::RoleError`). Nothing else lives here.

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use spyglass::roles::{self, Client, RoleError, inspect::Display, usage};
use spyglass::sanitize::sanitize_text;
use spyglass::ui::logfile;
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
    long_about = None,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    inspect: roles::inspect::InspectArgs,
}

// Doc comments here are the --help text: backticks would print there as-is. One value is
// parsed per process, so Serve's size (its many flags) costs nothing worth a Box.
#[expect(clippy::doc_markdown)]
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Start a runtime in-process with a scripted workload and open the inspector on it.
    Demo(roles::demo::DemoArgs),
    /// Run the test-mode runtime alone, headless.
    Serve(roles::serve::ServeArgs),
    /// Run eval suite files on a runtime and print per-suite and per-case results.
    ///
    /// Runs on the runtime given by --url only (SPYGLASS_URL and CODESPAR_BASE_URL are not
    /// read, so a stray variable never sends CI's evals elsewhere); without --url it starts
    /// an embedded runtime with test mode on. Exit status: 0 when nothing failed or
    /// errored, 1 when something did, 2 for bad usage or a bad suite file, 3 when the
    /// runtime cannot be reached.
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Eval(roles::eval::EvalCli),
    /// Print the observer stream, one line per event.
    Tail(roles::tail::TailArgs),
    /// Save the observer stream as JSON lines.
    Record(roles::tail::RecordArgs),
    /// Post other eval tools' results to a runtime as eval results: JUnit XML, promptfoo
    /// results JSON, Inspect AI logs (.json, .eval).
    ///
    /// The format is told from each file's content. Every file is one run, at the time the
    /// file gives. All files are read first: an unknown or damaged one stops the import
    /// with exit 2 and nothing posted. Runtime from --url, else SPYGLASS_URL, else
    /// CODESPAR_BASE_URL.
    Import(roles::import::ImportCli),
    /// Open the inspector offline on other eval tools' results files (as `import` reads).
    View(roles::import::ViewArgs),
    /// Operate a Postgres store (postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE): create
    /// or migrate its schema, or print its status.
    Store(roles::store::StoreArgs),
    /// Open the inspector on a recorded file, offline.
    Replay(roles::replay::ReplayArgs),
}

impl Cli {
    /// The config flags of a role that reads the config file, and its display flags.
    fn settings(&self) -> Option<(&Client, Option<&Display>)> {
        match &self.command {
            None => Some((&self.inspect.client, Some(&self.inspect.display))),
            Some(Command::Demo(a)) => Some((&a.client, Some(&a.display))),
            Some(Command::Replay(a)) => Some((&a.client, Some(&a.display))),
            Some(Command::View(a)) => Some((&a.client, Some(&a.display))),
            Some(
                Command::Tail(roles::tail::TailArgs { client, .. })
                | Command::Record(roles::tail::RecordArgs { client, .. })
                | Command::Import(roles::import::ImportCli { client, .. }),
            ) => Some((client, None)),
            Some(Command::Serve(_) | Command::Eval(_) | Command::Store(_)) => None,
        }
    }
}

/// The role's future; `matches` (the role's own) tell a flag from its variable.
async fn run(cli: Cli, matches: &ArgMatches) -> Result<(), RoleError> {
    match cli.command {
        None => roles::inspect::run(cli.inspect, matches).await,
        Some(Command::Demo(args)) => roles::demo::run(args, matches).await,
        Some(Command::Serve(args)) => roles::serve::run(args).await,
        Some(Command::Eval(args)) => roles::eval::main(args).await,
        Some(Command::Tail(args)) => roles::tail::run_tail(args, matches).await,
        Some(Command::Record(args)) => roles::tail::run_record(args, matches).await,
        Some(Command::Import(args)) => roles::import::run(args, matches).await,
        Some(Command::View(args)) => roles::import::view(args, matches).await,
        Some(Command::Store(args)) => roles::store::run(args).await,
        Some(Command::Replay(args)) => roles::replay::run(args, matches).await,
    }
}

fn main() -> ExitCode {
    let help = format!(
        "Logs are written to {} (SPYGLASS_LOG sets the level), never to the screen.",
        logfile::log_file().display()
    );
    let command = roles::unset_empty_vars(Cli::command().after_help(help));
    let names = usage::role_names(&command);
    let matches = match command.try_get_matches() {
        Ok(matches) => matches,
        Err(err) => return usage::refuse(&err, &names),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(err) => return usage::refuse(&err, &names),
    };
    let (prefix, role) = usage::role_of(&matches);
    if let Some((client, display)) = cli.settings().filter(|(c, _)| c.print_config) {
        let printed = client
            .resolve(display, role)
            .map(|c| print!("{}", c.print_config()));
        return printed.map_or_else(|err| fail("spyglass", &err), |()| ExitCode::SUCCESS);
    }
    // The one tokio runtime: every role runs on it, and every in-process runtime too.
    let tokio = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(tokio) => tokio,
        Err(err) => return fail(&prefix, &RoleError::Tokio(err)),
    };
    let result = tokio.block_on(run(cli, role));
    // A tail's observer may be mid-dial, a demo's workload mid-request: do not wait.
    tokio.shutdown_background();
    result.map_or_else(|err| fail(&prefix, &err), |()| ExitCode::SUCCESS)
}

/// Errors are printed here and only here.
fn fail(prefix: &str, err: &RoleError) -> ExitCode {
    eprintln!("{prefix}: {}", sanitize_text(&err.to_string()));
    ExitCode::from(err.exit_code())
}
