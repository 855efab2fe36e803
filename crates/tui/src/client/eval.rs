//! `spyglass eval`'s client side: read and check every suite file, post them to a runtime
//! over REST, follow the run to its end, print the table and write the `JUnit` / JSON files.
//! Which runtime (`--url` or one in-process) is the role's choice, not this module's.

use super::{ClientError, RestClient};
use serde_json::json;
use spyglass_eval::compare::{
    CompareError, Comparison, compare_runs, comparison_json, parse_results, render,
};
use spyglass_eval::html::{ReportInput, html_report};
use spyglass_eval::quarantine::{Quarantine, parse_quarantine, today};
use spyglass_eval::report::{json_document, junit_xml, render_table};
use spyglass_eval::stats::{DEFAULT_SIGNIFICANCE, RunStats};
use spyglass_eval::suite::{Suite, SuiteError, SuiteErrorKind, parse_suite, planned_attempts};
use spyglass_protocol::events::EvalScope;
use spyglass_protocol::rest::{EvalRunDetail, EvalRunRequest};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// How often the run is polled while it goes.
const POLL_EVERY: Duration = Duration::from_millis(100);

/// What `spyglass eval` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct EvalArgs {
    pub paths: Vec<PathBuf>,
    /// Sent as a Bearer token to the runtime.
    pub api_key: Option<String>,
    /// Sent as `x-codespar-project`: the project the run and its sessions belong to.
    pub project: Option<String>,
    pub repeat: u32,
    pub case: Option<String>,
    pub junit: Option<PathBuf>,
    pub json: Option<PathBuf>,
    /// An earlier `--json` results file to compare this run with.
    pub baseline: Option<PathBuf>,
    /// Write the self-contained HTML report here.
    pub html: Option<PathBuf>,
    /// A quarantine file: cases that run and report but never fail the build.
    pub quarantine: Option<PathBuf>,
    /// The level a drop against `--baseline` must reach to be a regression (0.05 when
    /// absent).
    pub significance: Option<f64>,
}

impl EvalArgs {
    /// `--significance`, else the default 0.05.
    pub fn alpha(&self) -> f64 {
        self.significance.unwrap_or(DEFAULT_SIGNIFICANCE)
    }
}

/// Failing cases whose session calls the HTML report reads (one request each).
const HTML_TIMELINES: usize = 100;

#[derive(Debug, Error)]
pub enum EvalCliError {
    /// Every bad suite file, one per line; nothing ran.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Suites(Vec<SuiteError>),
    #[error("{0}")]
    Usage(String),
    #[error("cannot reach the runtime at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("the runtime at {url} answered {status} {code}: {message}{}", key_hint(*status))]
    Refused {
        url: String,
        status: u16,
        code: String,
        message: String,
    },
    #[error(transparent)]
    Compare(#[from] CompareError),
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What to do about a runtime refusing the key (the words `tail` uses), else nothing.
fn key_hint(status: u16) -> &'static str {
    match status {
        401 => "; pass --api-key KEY or set CODESPAR_API_KEY",
        403 => "; pass another with --api-key KEY or set CODESPAR_API_KEY",
        _ => "",
    }
}

/// Extensions a suite file has.
const SUITE_EXTENSIONS: [&str; 2] = ["toml", "json"];

/// The suite files `paths` name, and notes for stderr. A directory stands for every
/// `*.toml` file under it, sorted by path; a file named outright that is neither `.toml`
/// nor `.json` (a checker script a shell glob caught) is left out with a note.
pub fn suite_files(paths: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<String>), EvalCliError> {
    let (mut files, mut notes, mut errors) = (Vec::new(), Vec::new(), Vec::new());
    for path in paths {
        if path.is_dir() {
            let mut found = Vec::new();
            match tomls_under(path, &mut found) {
                Ok(()) if found.is_empty() => {
                    return Err(EvalCliError::Usage(format!(
                        "{}: no *.toml suite file under this directory",
                        path.display()
                    )));
                }
                Ok(()) => {
                    found.sort();
                    files.extend(found);
                }
                Err(err) => errors.push(SuiteError {
                    file: path.display().to_string(),
                    case: None,
                    field: None,
                    kind: SuiteErrorKind::Io,
                    message: format!("cannot read the directory: {err}"),
                }),
            }
        } else if path.is_file()
            && !path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| SUITE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
        {
            notes.push(format!(
                "spyglass eval: skipping {}: not a suite file (.toml or .json)",
                path.display()
            ));
        } else {
            files.push(path.clone());
        }
    }
    if !errors.is_empty() {
        return Err(EvalCliError::Suites(errors));
    }
    if files.is_empty() {
        return Err(EvalCliError::Usage(
            "no suite file (.toml or .json) among the paths given".to_owned(),
        ));
    }
    Ok((files, notes))
}

/// Every `*.toml` file under `dir`, subdirectories included (symbolic links to
/// directories are not followed).
fn tomls_under(dir: &Path, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            tomls_under(&path, found)?;
        } else if path.extension().is_some_and(|e| e == "toml") {
            found.push(path);
        }
    }
    Ok(())
}

/// Reads and checks every file (all problems reported, not just the first) and gives the
/// suites with the text to send.
pub fn read_suites(paths: &[PathBuf]) -> Result<Vec<(Suite, String)>, EvalCliError> {
    let mut suites = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        match read_one(path) {
            Ok(pair) => suites.push(pair),
            Err(err) => errors.push(err),
        }
    }
    if errors.is_empty() {
        Ok(suites)
    } else {
        Err(EvalCliError::Suites(errors))
    }
}

fn read_one(path: &Path) -> Result<(Suite, String), SuiteError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| SuiteError {
        file: file.clone(),
        case: None,
        field: None,
        kind: SuiteErrorKind::Io,
        message: format!("cannot read the file: {err}"),
    })?;
    let suite = parse_suite(&file, &text)?;
    Ok((suite, text))
}

/// A checked run request, ready to post.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub request: EvalRunRequest,
    pub suites: usize,
    /// Case attempts the run will make (cases matching `--case`, times `--repeat`).
    pub attempts: u64,
    /// `--baseline`, read and checked before anything runs: its file name and run.
    pub baseline: Option<(String, EvalRunDetail)>,
    /// `--quarantine`, read and checked before anything runs.
    pub quarantine: Option<Quarantine>,
    /// `--significance` (or its default).
    pub alpha: f64,
    /// Paths left out (not suite files), one line each for stderr.
    pub notes: Vec<String>,
}

impl Prepared {
    /// Whether a case's failures count: not while a quarantine entry in force names it.
    pub fn counts(&self, suite: &str, case: &str) -> bool {
        let today = today();
        self.quarantine
            .as_ref()
            .is_none_or(|q| q.shields(suite, case, today).is_none())
    }
}

/// Reads a `--quarantine` file; every error names the file, the entry and the field.
pub fn read_quarantine(path: &Path) -> Result<Quarantine, EvalCliError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|err| EvalCliError::Usage(format!("{file}: cannot read the file: {err}")))?;
    parse_quarantine(&file, &text).map_err(|err| EvalCliError::Usage(err.to_string()))
}

/// Reads a `--json` results file; every error names it.
pub fn read_results(path: &Path) -> Result<EvalRunDetail, CompareError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| CompareError::Read {
        file: file.clone(),
        reason: err.to_string(),
    })?;
    parse_results(&file, &text)
}

/// `spyglass eval compare A B`: the comparison of two results files at significance
/// `alpha`, nothing run.
pub fn compare_files(
    baseline: &Path,
    current: &Path,
    alpha: f64,
) -> Result<(Comparison, String), EvalCliError> {
    let (before, after) = (read_results(baseline)?, read_results(current)?);
    let (a, b) = (
        baseline.display().to_string(),
        current.display().to_string(),
    );
    let comparison = compare_runs(&a, &before, &b, &after, alpha)?;
    let text = render(&comparison, &a);
    Ok((comparison, text))
}

/// The finished run against `--baseline`, when one was given.
pub fn against_baseline(
    prepared: &Prepared,
    detail: &EvalRunDetail,
) -> Result<Option<Comparison>, EvalCliError> {
    let Some((file, baseline)) = &prepared.baseline else {
        return Ok(None);
    };
    Ok(Some(compare_runs(
        file,
        baseline,
        "this run",
        detail,
        prepared.alpha,
    )?))
}

/// Reads and checks every file and the case filter; nothing is sent yet.
pub fn prepare(args: &EvalArgs) -> Result<Prepared, EvalCliError> {
    if let Some(err) = args
        .case
        .as_deref()
        .and_then(|g| spyglass_protocol::glob::check_pattern(g).err())
    {
        return Err(EvalCliError::Usage(format!("--case: {err}")));
    }
    let (files, notes) = suite_files(&args.paths)?;
    let read = read_suites(&files)?;
    let suites: Vec<Suite> = read.iter().map(|(suite, _)| suite.clone()).collect();
    let attempts = planned_attempts(&suites, args.repeat, args.case.as_deref());
    if attempts == 0 {
        let files: Vec<String> = suites.iter().map(|s| s.file.clone()).collect();
        return Err(EvalCliError::Usage(match &args.case {
            Some(glob) => format!("--case {glob}: no case id matches in {}", files.join(", ")),
            None => "the suites have no cases".to_owned(),
        }));
    }
    let alpha = args.alpha();
    if !(alpha > 0.0 && alpha < 1.0) {
        return Err(EvalCliError::Usage(format!(
            "--significance {alpha}: expected a level between 0 and 1, like 0.05"
        )));
    }
    let baseline = match &args.baseline {
        Some(path) => Some((path.display().to_string(), read_results(path)?)),
        None => None,
    };
    let quarantine = match &args.quarantine {
        Some(path) => Some(read_quarantine(path)?),
        None => None,
    };
    Ok(Prepared {
        notes,
        baseline,
        quarantine,
        alpha,
        request: EvalRunRequest {
            suites: read
                .iter()
                .map(|(suite, text)| json!({"file": suite.file, "text": text}))
                .collect(),
            repeat: Some(args.repeat.max(1)),
            case: args.case.clone(),
            scope: EvalScope::Suite,
        },
        suites: suites.len(),
        attempts,
    })
}

/// Runs a prepared request on the runtime at `url`, prints the table to `out` (a progress
/// line goes to `log`) and writes `--junit` / `--json`. Answers the finished run.
pub async fn run(
    args: &EvalArgs,
    prepared: &Prepared,
    url: &str,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<EvalRunDetail, EvalCliError> {
    for note in &prepared.notes {
        let _ = writeln!(log, "{note}");
    }
    let url = checked_url(url)?;
    let client = RestClient::scoped(&url, args.api_key.as_deref(), args.project.as_deref())
        .map_err(|err| match err {
            ClientError::Key(reason) => EvalCliError::Usage(format!("--api-key: {reason}")),
            other => EvalCliError::Usage(other.to_string()),
        })?;
    let _ = writeln!(
        log,
        "spyglass eval: {} case attempt(s) from {} suite(s) on {url}",
        prepared.attempts, prepared.suites
    );
    let failed = |err: ClientError| match err {
        ClientError::Api {
            status,
            code,
            message,
        } => EvalCliError::Refused {
            url: url.clone(),
            status,
            code,
            message,
        },
        ClientError::Http(err) => EvalCliError::Unreachable {
            reason: describe(&err, &url),
            url: url.clone(),
        },
        other => EvalCliError::Unreachable {
            url: url.clone(),
            reason: other.to_string(),
        },
    };
    let created = client
        .start_eval_run(&prepared.request)
        .await
        .map_err(failed)?;
    let detail = loop {
        let detail = client.eval_run(&created.run_id).await.map_err(failed)?;
        if detail.status == "completed" {
            break detail;
        }
        tokio::time::sleep(POLL_EVERY).await;
    };
    let _ = write!(out, "{}", render_table(&detail.cases));
    let mut sections = serde_json::Map::new();
    if let (Some(comparison), Some((file, _))) =
        (against_baseline(prepared, &detail)?, &prepared.baseline)
    {
        let _ = write!(out, "\n{}", render(&comparison, file));
        let counted = comparison.regressions_where(|c| prepared.counts(&c.suite, &c.case));
        sections.insert(
            "comparison".into(),
            comparison_json(&comparison, file, prepared.alpha, counted),
        );
    }
    if let Some(quarantine) = &prepared.quarantine {
        let stats = RunStats::of(detail.cases.iter().map(|r| &r.result));
        let today = today();
        let _ = write!(out, "\n{}", quarantine.render(&stats, today));
        for warning in quarantine.warnings(&stats, today) {
            let _ = writeln!(log, "{warning}");
        }
        sections.insert(
            "quarantine".into(),
            json!({"file": quarantine.file, "entries": quarantine.standings(&stats, today)}),
        );
    }
    if let Some(path) = &args.junit {
        write_file(path, &junit_xml(&detail.cases))?;
    }
    if let Some(path) = &args.json {
        write_file(path, &json_document(&detail, sections))?;
    }
    if let Some(path) = &args.html {
        let report = html_input(&client, &detail).await;
        write_file(path, &html_report(&report))?;
    }
    Ok(detail)
}

/// What the HTML report needs beyond the run: the suites' trends and the failing cases'
/// calls. A read that fails leaves its part out, saying why, rather than the report.
async fn html_input(client: &RestClient, detail: &EvalRunDetail) -> ReportInput {
    let trends = match client.eval_summary(None).await {
        Ok(summary) => summary
            .suites
            .into_iter()
            .filter(|s| detail.suites.contains(&s.suite))
            .map(|s| (s.suite, s.trend))
            .collect(),
        Err(_) => BTreeMap::new(),
    };
    let mut timelines = BTreeMap::new();
    let failing = detail.cases.iter().filter(|c| {
        matches!(
            c.result.status,
            spyglass_protocol::events::EvalStatus::Failed
                | spyglass_protocol::events::EvalStatus::Error
        )
    });
    for record in failing.take(HTML_TIMELINES) {
        let Some(id) = &record.session_id else {
            continue;
        };
        let calls = client
            .session_calls(id)
            .await
            .map_err(|err| err.to_string());
        timelines.insert(id.clone(), calls);
    }
    ReportInput {
        detail: detail.clone(),
        trends,
        timelines,
        generated_at: spyglass_protocol::now_rfc3339(),
    }
}

fn checked_url(url: &str) -> Result<String, EvalCliError> {
    let trimmed = url.trim().trim_end_matches('/');
    match reqwest::Url::parse(trimmed) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => Ok(trimmed.to_owned()),
        _ => Err(EvalCliError::Usage(format!(
            "--url {url} is not an http:// or https:// URL"
        ))),
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), EvalCliError> {
    std::fs::write(path, text).map_err(|source| EvalCliError::Write {
        path: path.to_owned(),
        source,
    })
}

/// reqwest's top-level message ("error sending request") hides the cause: a refused
/// connection in `tail`'s words, asking whether the runtime runs at `url`; else the chain.
fn describe(err: &reqwest::Error, url: &str) -> String {
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            let host = err.url().and_then(|u| u.host_str()).unwrap_or("the host");
            return format!("connection refused by {host}; is `spyglass serve` running at {url}?");
        }
        source = cause.source();
    }
    let mut out = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_must_be_http() {
        assert_eq!(
            checked_url("http://127.0.0.1:8000/").unwrap(),
            "http://127.0.0.1:8000"
        );
        for bad in ["127.0.0.1:8000", "ftp://x", "", "http//x"] {
            assert!(
                matches!(checked_url(bad), Err(EvalCliError::Usage(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn every_bad_file_is_reported_and_nothing_is_read_past_them() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.toml");
        std::fs::write(
            &good,
            "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n",
        )
        .unwrap();
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "suite = \"s\"\n[[case]]\ninput = \"x\"\n").unwrap();
        let missing = dir.path().join("missing.toml");
        let err = read_suites(&[good.clone(), bad, missing]).unwrap_err();
        let text = err.to_string();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.contains("bad.toml: case #1: id: missing"), "{text}");
        assert!(
            text.contains("missing.toml: cannot read the file"),
            "{text}"
        );
        assert!(matches!(err, EvalCliError::Suites(ref all) if all.len() == 2));
        assert_eq!(read_suites(&[good]).unwrap().len(), 1);
    }
}
