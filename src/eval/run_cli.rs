//! `spyglass eval`'s client side, the one eval piece with IO: read and check every suite
//! file, post them to a runtime (the `--url` one, else one started in-process on a loopback
//! port, over the same HTTP path), follow the run to its end, print and write the results.

use super::report::{Counts, json_results, junit_xml, render_table};
use super::suite::{Suite, SuiteError, SuiteErrorKind, parse_suite, plan};
use crate::protocol::ApiError;
use crate::protocol::rest::{EvalRunCreated, EvalRunDetail, EvalRunRequest};
use crate::runtime::RuntimeConfig;
use serde::de::DeserializeOwned;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// How often the run is polled while it goes.
const POLL_EVERY: Duration = Duration::from_millis(100);
/// One request's limit: a runtime that accepted the connection but never answers is as
/// unreachable as one that refused it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Exit status: every case passed or was skipped.
pub const EXIT_OK: u8 = 0;
/// Exit status: some case failed or errored.
pub const EXIT_FAILED: u8 = 1;
/// Exit status: bad usage, a bad suite file, a refused run, an unwritable output file.
pub const EXIT_USAGE: u8 = 2;
/// Exit status: the runtime could not be reached.
pub const EXIT_UNREACHABLE: u8 = 3;

/// What `spyglass eval` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct EvalArgs {
    pub paths: Vec<PathBuf>,
    /// The runtime to run on; `None` starts an embedded one with test mode on.
    pub url: Option<String>,
    /// Sent as a Bearer token to `url`.
    pub api_key: Option<String>,
    pub repeat: u32,
    pub case: Option<String>,
    pub junit: Option<PathBuf>,
    pub json: Option<PathBuf>,
}

#[derive(Debug, Error)]
pub enum EvalCliError {
    /// Every bad suite file, one per line; nothing ran.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Suites(Vec<SuiteError>),
    #[error("{0}")]
    Usage(String),
    #[error("cannot reach the runtime at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("the runtime at {url} answered {status} {code}: {message}")]
    Refused {
        url: String,
        status: u16,
        code: String,
        message: String,
    },
    #[error("cannot start the embedded runtime: {0}")]
    Embedded(std::io::Error),
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl EvalCliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Unreachable { .. } => EXIT_UNREACHABLE,
            _ => EXIT_USAGE,
        }
    }
}

/// The exit status of a finished run.
pub fn exit_code(detail: &EvalRunDetail) -> u8 {
    if Counts::of(&detail.cases).success() {
        EXIT_OK
    } else {
        EXIT_FAILED
    }
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

/// Runs the suites and prints the table to `out` (progress lines go to `log`); writes
/// `--junit` / `--json` files. Answers the finished run; `exit_code` gives its status.
pub async fn run(
    args: &EvalArgs,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<EvalRunDetail, EvalCliError> {
    let read = read_suites(&args.paths)?;
    let suites: Vec<Suite> = read.iter().map(|(suite, _)| suite.clone()).collect();
    let attempts = plan(&suites, args.repeat, args.case.as_deref()).len();
    if attempts == 0 {
        let files: Vec<String> = suites.iter().map(|s| s.file.clone()).collect();
        return Err(EvalCliError::Usage(match &args.case {
            Some(glob) => format!("--case {glob}: no case id matches in {}", files.join(", ")),
            None => "the suites have no cases".to_owned(),
        }));
    }
    let request = EvalRunRequest {
        suites: read
            .iter()
            .map(|(suite, text)| json!({"file": suite.file, "text": text}))
            .collect(),
        repeat: Some(args.repeat.max(1)),
        case: args.case.clone(),
    };
    let (url, embedded) = match &args.url {
        Some(url) => (checked_url(url)?, None),
        None => {
            let config = RuntimeConfig {
                test_mode: true,
                ..RuntimeConfig::default()
            };
            let handle = crate::runtime::start(config, ([127, 0, 0, 1], 0).into())
                .await
                .map_err(EvalCliError::Embedded)?;
            (handle.url(), Some(handle))
        }
    };
    let _ = writeln!(
        log,
        "spyglass eval: {attempts} case attempt(s) from {} suite(s) on {url}{}",
        suites.len(),
        if embedded.is_some() {
            " (embedded)"
        } else {
            ""
        }
    );
    let client = Client::new(&url, args.api_key.as_deref());
    let result = client.run(&request).await;
    if let Some(handle) = embedded {
        handle.shutdown().await;
    }
    let detail = result?;
    let _ = write!(out, "{}", render_table(&detail.cases));
    if let Some(path) = &args.junit {
        write_file(path, &junit_xml(&detail.cases))?;
    }
    if let Some(path) = &args.json {
        write_file(path, &json_results(&detail))?;
    }
    Ok(detail)
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

/// The REST calls of one run against one runtime.
struct Client {
    http: reqwest::Client,
    base: String,
    key: Option<String>,
}

impl Client {
    fn new(base: &str, key: Option<&str>) -> Self {
        Self {
            http: reqwest::Client::builder()
                .timeout(REQUEST_TIMEOUT)
                .build()
                .unwrap_or_default(),
            base: base.to_owned(),
            key: key.map(str::to_owned),
        }
    }

    async fn run(&self, request: &EvalRunRequest) -> Result<EvalRunDetail, EvalCliError> {
        let created: EvalRunCreated = self
            .call(
                self.http
                    .post(format!("{}/v1/evals/runs", self.base))
                    .json(request),
            )
            .await?;
        let path = format!("{}/v1/evals/runs/{}", self.base, created.run_id);
        loop {
            let detail: EvalRunDetail = self.call(self.http.get(&path)).await?;
            if detail.status == "completed" {
                return Ok(detail);
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<T, EvalCliError> {
        let request = match &self.key {
            Some(key) => request.bearer_auth(key),
            None => request,
        };
        let unreachable = |reason: String| EvalCliError::Unreachable {
            url: self.base.clone(),
            reason,
        };
        let response = request
            .send()
            .await
            .map_err(|err| unreachable(describe(&err)))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|err| unreachable(describe(&err)))?;
        if !status.is_success() {
            let (code, message) = match serde_json::from_str::<ApiError>(&text) {
                Ok(error) => (error.code, error.message),
                Err(_) => ("unknown".to_owned(), excerpt(&text)),
            };
            return Err(EvalCliError::Refused {
                url: self.base.clone(),
                status: status.as_u16(),
                code,
                message,
            });
        }
        serde_json::from_str(&text).map_err(|err| EvalCliError::Refused {
            url: self.base.clone(),
            status: status.as_u16(),
            code: "unexpected_body".to_owned(),
            message: format!("not a spyglass answer ({err}): {}", excerpt(&text)),
        })
    }
}

/// reqwest's top-level message ("error sending request") hides the cause; show the chain.
fn describe(err: &reqwest::Error) -> String {
    let mut out = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
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
            assert_eq!(
                checked_url(bad).unwrap_err().exit_code(),
                EXIT_USAGE,
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
        assert_eq!(err.exit_code(), EXIT_USAGE);
        assert_eq!(read_suites(&[good]).unwrap().len(), 1);
    }

    #[test]
    fn long_bodies_are_cut_in_messages() {
        let long = "é".repeat(500);
        let cut = excerpt(&long);
        assert_eq!(cut.chars().count(), 201);
        assert_eq!(excerpt(" short "), "short");
    }
}
