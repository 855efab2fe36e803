//! `spyglass import FILE…` posts other tools' results (`crate::import`) to a runtime as
//! `agent.eval.completed` events; `spyglass view FILE…` opens the inspector on them offline.
//!
//! Every file is read before anything is sent or the terminal is taken: one unknown or
//! damaged file stops the command with exit 2 and nothing posted.

use super::inspect::Display;
use super::{Client, LogTo, RoleError, start_logging};
use crate::client::Endpoint;
use crate::import::{Imported, import_file, shown_path};
use crate::protocol::events::{Frame, encode};
use crate::ui::{InspectorConfig, Source, Tab, Watching, inspector_config, run_source};
use clap::ArgMatches;
use std::io::Write;
use std::path::PathBuf;

/// Largest `POST /v1/events` body sent, well under the runtime's default 1 MiB limit.
const BATCH_BYTES: usize = 512 * 1024;

/// What to import, or view: the files, and the suite name to give their results.
#[derive(clap::Args, Debug, Clone)]
pub struct ImportArgs {
    /// Results files.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Suite name for every result, instead of the one each file gives.
    #[arg(long)]
    pub suite: Option<String>,
}

/// The flags of `spyglass import`.
// Doc comments here are the --help text: backticks would print there as-is.
#[expect(clippy::doc_markdown)]
#[derive(clap::Args, Debug, Clone)]
pub struct ImportCli {
    #[command(flatten)]
    pub source: ImportArgs,
    /// Import into the SQLite store at PATH (an embedded runtime on it) instead of a
    /// runtime at a URL: the history `spyglass eval --store PATH` reads.
    #[arg(long, value_name = "PATH")]
    pub store: Option<PathBuf>,
    #[command(flatten)]
    pub client: Client,
}

/// The flags of `spyglass view`.
#[derive(clap::Args, Debug, Clone)]
pub struct ViewArgs {
    #[command(flatten)]
    pub source: ImportArgs,
    #[command(flatten)]
    pub client: Client,
    #[command(flatten)]
    pub display: Display,
}

/// Reads every file, or stops at the first one that cannot be read.
pub fn read_all(args: &ImportArgs) -> Result<Vec<Imported>, RoleError> {
    args.files
        .iter()
        .map(|path| import_file(path, args.suite.as_deref()).map_err(RoleError::from))
        .collect()
}

/// One line per file: what it was, what it held, what was skipped. Text is sanitised.
pub fn describe(imported: &Imported, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{}: {}, run {}, {}: {}",
        shown_path(&imported.path),
        imported.format,
        imported.run_id,
        imported.ts,
        imported.counts()
    )?;
    if let Some(summary) = imported.summary
        && summary != imported.counts()
    {
        writeln!(out, "  the file's own summary says {summary}")?;
    }
    if imported.skipped > 0 {
        writeln!(
            out,
            "  skipped {} unreadable entr{}: {}",
            imported.skipped,
            if imported.skipped == 1 { "y" } else { "ies" },
            imported.notes.join("; ")
        )?;
    }
    Ok(())
}

/// The events of one file as JSON, without stamps: the runtime stamps what it ingests.
fn bodies(imported: &Imported) -> Vec<String> {
    imported
        .results
        .iter()
        .map(|result| {
            let mut value = serde_json::to_value(result).unwrap_or_default();
            if let Some(map) = value.as_object_mut() {
                map.insert("kind".into(), "agent.eval.completed".into());
            }
            value.to_string()
        })
        .collect()
}

/// Reads the files, posts each one's events to the runtime in batches, and prints a line
/// per file on stdout. Imported failures are not the command's failure: exit 0. With
/// `store`, the runtime is an embedded one on that file (its history is what
/// `eval --store` reads), stopped and flushed once every file is in.
pub async fn run(cli: ImportCli, matches: &ArgMatches) -> Result<(), RoleError> {
    let config = cli.client.resolve(None, matches)?;
    start_logging(LogTo::File, false)?;
    let (args, store) = (cli.source, cli.store);
    let mut imported = read_all(&args)?;
    // History is in the order results arrive: each file's go in at the time the file
    // records (RFC 3339 UTC, so text order is time order), not in command-line order.
    imported.sort_by(|a, b| a.ts.cmp(&b.ts));
    let Some(path) = store else {
        let Some(url) = config.url.value else {
            return Err(RoleError::Usage(
                "no runtime to import into: pass --url URL, set SPYGLASS_URL or pass --store PATH \
                 (`spyglass view FILE` opens them offline)"
                    .to_owned(),
            ));
        };
        let endpoint = Endpoint {
            url,
            api_key: config.api_key.value.as_ref().map(|k| k.expose().to_owned()),
            project: config.project.value.clone(),
        };
        let to = endpoint.url.clone();
        return post_all(&imported, &endpoint, &to).await;
    };
    if matches!(config.url.source, crate::config::Source::Flag(_)) {
        return Err(RoleError::Usage(
            "--store imports into an embedded runtime on that file; --url names another runtime: pass one of them".to_owned(),
        ));
    }
    let runtime = crate::store::StoreChoice::File(path.clone())
        .runtime(crate::runtime::RuntimeConfig::default())
        .map_err(super::serve::ServeError::from)?;
    let handle = runtime
        .serve(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .map_err(RoleError::Embedded)?;
    let endpoint = Endpoint {
        project: config.project.value.clone(),
        ..Endpoint::new(&handle.url())
    };
    // The embedded runtime's URL is gone with it: the store is where the results are.
    let result = post_all(&imported, &endpoint, &shown_path(&path)).await;
    let runtime = handle.runtime();
    handle.shutdown().await;
    runtime.flush_store();
    result
}

/// Posts every file's events to the runtime at `endpoint`, a line per file on stdout
/// saying they went `to` (its URL, or the store an embedded one keeps them in).
async fn post_all(imported: &[Imported], endpoint: &Endpoint, to: &str) -> Result<(), RoleError> {
    let rest = endpoint.rest()?;
    let mut out = std::io::stdout().lock();
    for file in imported {
        let mut sent = 0;
        let mut held = 0;
        let mut batch = String::from("[");
        for body in bodies(file) {
            if batch.len() > 1 && batch.len() + body.len() > BATCH_BYTES {
                batch.push(']');
                let posted = rest
                    .post_events(std::mem::replace(&mut batch, "[".into()))
                    .await?;
                sent += posted.accepted;
                held += posted.duplicates;
            }
            if batch.len() > 1 {
                batch.push(',');
            }
            batch.push_str(&body);
        }
        if batch.len() > 1 {
            batch.push(']');
            let posted = rest.post_events(batch).await?;
            sent += posted.accepted;
            held += posted.duplicates;
        }
        let _ = describe(file, &mut out);
        let _ = writeln!(out, "  posted {sent} event(s) to {to}");
        if held > 0 {
            let _ = writeln!(
                out,
                "  {held} result(s) of run {} were already there (imported before): not counted again",
                file.run_id
            );
        }
    }
    Ok(())
}

/// The frames of every file, one run after another, as the JSON lines a replay plays.
pub fn replay_text(imported: &[Imported]) -> String {
    frames(imported)
        .iter()
        .map(|frame| encode(frame) + "\n")
        .collect()
}

/// Reads the files, says on stderr what they held, and opens the inspector on their
/// events as `replay` does, with nothing to send to, on the Evals tab.
pub async fn view(view: ViewArgs, matches: &ArgMatches) -> Result<(), RoleError> {
    let config = view.client.resolve(Some(&view.display), matches)?;
    start_logging(LogTo::File, true)?;
    let imported = read_all(&view.source)?;
    let mut err = std::io::stderr().lock();
    for file in &imported {
        let _ = describe(file, &mut err);
    }
    drop(err);
    let name = imported
        .iter()
        .map(|file| shown_path(&file.path))
        .collect::<Vec<_>>()
        .join(", ");
    // Results are what there is to see: open where they show.
    let inspector = InspectorConfig {
        watching: Watching::Replay { file: name.clone() },
        tab: Tab::Evals,
        ..inspector_config(name, &config)
    };
    let text = replay_text(&imported);
    Ok(run_source(inspector, Source::Replay { text, speed: 0.0 }).await?)
}

/// Every file's frames, `seq` counting on from one file to the next.
pub fn frames(imported: &[Imported]) -> Vec<Frame> {
    let mut seq = 1;
    let mut frames = Vec::new();
    for file in imported {
        frames.extend(file.frames(seq));
        seq += file.results.len() as u64;
    }
    frames
}
