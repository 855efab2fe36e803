//! `spyglass tail` and `spyglass record`: the observer stream of the runtime the config
//! names, as lines on stdout (the last 20 events, `-n N`, `--since SEQ` or `--all`, then
//! live) or JSON lines in a file (everything), until Ctrl-C or a closed pipe.

use super::{Client, LogTo, RoleError, start_logging};
use crate::client::Endpoint;
use crate::client::tail::{Format, Lines, TailError, follow, stdout_hangup};
use crate::config::Resolved;
use clap::ArgMatches;
use std::path::PathBuf;

/// Events `tail` prints before following, unless told otherwise.
pub const DEFAULT_LINES: u64 = 20;

/// The flags of `spyglass tail`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TailArgs {
    /// Raw JSON lines instead of readable lines.
    #[arg(long)]
    pub json: bool,
    /// Print the last N events, then follow (default 20; 0: only new ones).
    #[arg(short = 'n', long = "lines", value_name = "N", conflicts_with_all = ["since", "all"])]
    pub lines: Option<u64>,
    /// Print the events after seq SEQ, then follow.
    #[arg(long, value_name = "SEQ", conflicts_with = "all")]
    pub since: Option<u64>,
    /// Print the whole retained history from its first event, then follow.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub client: Client,
}

/// The flags of `spyglass record`.
#[derive(clap::Args, Debug, Clone)]
pub struct RecordArgs {
    /// Output file.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Overwrite the output file when it exists.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub client: Client,
}

/// `spyglass tail`: readable lines (or JSON lines) on stdout.
pub async fn run_tail(args: TailArgs, matches: &ArgMatches) -> Result<(), RoleError> {
    let config = args.client.resolve(None, matches)?;
    start_logging(LogTo::File, false)?;
    let format = if args.json {
        Format::JsonLines
    } else {
        Format::Readable
    };
    let start = match (args.all, args.since, args.lines) {
        (true, _, _) => Start::All,
        (false, Some(seq), _) => Start::Since(seq),
        (false, None, lines) => Start::Last(lines.unwrap_or(DEFAULT_LINES)),
    };
    run(config, format, start, Sink::Stdout).await
}

/// `spyglass record -o FILE`: JSON lines in a file.
pub async fn run_record(args: RecordArgs, matches: &ArgMatches) -> Result<(), RoleError> {
    let config = args.client.resolve(None, matches)?;
    start_logging(LogTo::File, false)?;
    let sink = Sink::File {
        path: args.output,
        force: args.force,
    };
    run(config, Format::JsonLines, Start::All, sink).await
}

/// Where the lines start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The first retained event (`tail --all`, `record`).
    All,
    /// The events after this seq (`tail --since SEQ`).
    Since(u64),
    /// The last N events (`tail -n N`, and `tail` with 20).
    Last(u64),
}

impl Start {
    /// The seq the stream resumes after. The last N are counted back from the newest seq
    /// the runtime holds (a project's seqs have no holes); when that cannot be asked
    /// (the runtime not up yet, `--project '*'` whose seqs are each project's own) the
    /// stream starts at the first event, and the observer says why it cannot connect.
    async fn since(self, endpoint: &Endpoint) -> u64 {
        match self {
            Self::All => 0,
            Self::Since(seq) => seq,
            Self::Last(n) => match endpoint.rest() {
                Ok(rest) if !rest.all_projects() => rest
                    .newest_seq()
                    .await
                    .map_or(0, |newest| newest.saturating_sub(n)),
                _ => 0,
            },
        }
    }
}

/// Where the lines go.
#[derive(Debug, Clone)]
pub enum Sink {
    Stdout,
    /// `record -o FILE`: created once the stream is connected, so an unreachable runtime
    /// leaves an existing file as it was. An existing file is refused unless `force`.
    File {
        path: PathBuf,
        force: bool,
    },
}

pub async fn run(
    config: Resolved,
    format: Format,
    start: Start,
    sink: Sink,
) -> Result<(), RoleError> {
    let Some(url) = config.url.value else {
        return Err(RoleError::Usage(
            "no runtime to follow: pass --url URL or set SPYGLASS_URL".to_owned(),
        ));
    };
    let endpoint = Endpoint {
        url: url.clone(),
        api_key: config.api_key.value.as_ref().map(|k| k.expose().to_owned()),
        project: config.project.value.clone(),
    };
    let stop = async {
        // No Ctrl-C handler (rare) means only a closed pipe ends it.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let stderr = std::io::stderr();
    let lines = Lines {
        format,
        count: None,
        since: start.since(&endpoint).await,
    };
    let ended = match sink {
        Sink::Stdout => {
            let open = || Ok(std::io::BufWriter::new(std::io::stdout().lock()));
            follow(&endpoint, lines, open, stderr, stop, stdout_hangup())
                .await
                .map_err(|err| (err, PathBuf::from("stdout")))
        }
        Sink::File { path, force } => {
            if !force && path.exists() {
                return Err(RoleError::Usage(format!(
                    "{} exists; pass --force to overwrite it",
                    path.display()
                )));
            }
            // A missing directory is bad usage now, not after the runtime answers.
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
                && !dir.is_dir()
            {
                return Err(RoleError::Output {
                    path: path.clone(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("no directory {}", dir.display()),
                    ),
                });
            }
            eprintln!(
                "spyglass record: writing {} from {url} once connected; Ctrl-C stops",
                path.display()
            );
            let open = || {
                let mut options = std::fs::OpenOptions::new();
                options.write(true);
                if force {
                    options.create(true).truncate(true);
                } else {
                    // It did not exist a moment ago: never clobber one made since.
                    options.create_new(true);
                }
                options.open(&path).map(std::io::BufWriter::new)
            };
            follow(&endpoint, lines, open, stderr, stop, std::future::pending())
                .await
                .map_err(|err| (err, path.clone()))
        }
    };
    match ended {
        Ok(_) => Ok(()),
        Err((TailError::Client(err), _)) => Err(RoleError::Client(err)),
        Err((TailError::Open(source), path)) => Err(RoleError::Output { path, source }),
    }
}
