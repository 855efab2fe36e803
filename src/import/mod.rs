//! Results files of eval tools (`JUnit` XML, promptfoo results JSON, Inspect AI logs, and
//! `spyglass eval --json`'s own) read into `agent.eval.completed` events: format detection,
//! size bounds and sanitising.
//!
//! Every file is one run: its events share one run id that carries the file's own time,
//! and every string taken from it is made terminal-safe here, before anything shows it.
//! The readers are bounded (bytes read, XML depth, JSON recursion, ZIP entry sizes) so a
//! huge or hostile file is an error, never an exhausted process.

pub mod inspect;
pub mod junit;
pub mod promptfoo;
pub mod spyglass;

use crate::protocol::events::{AgentEvalCompleted, EvalStatus, Event, Frame};
use crate::protocol::json::RawJson;
use crate::sanitize::{sanitize, sanitize_text};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Largest file an import reads: text formats are parsed as a stream, so this bounds time
/// and disk reads, not memory; anything larger is refused before a byte is read.
pub const MAX_FILE_BYTES: u64 = 512 * 1024 * 1024;
/// Longest reason, message or expected/actual text kept per result, in bytes.
pub const MAX_TEXT_BYTES: usize = 8 * 1024;
/// Most results one file may yield; past it the rest is counted as skipped.
pub const MAX_RESULTS: usize = 200_000;
/// How much of a file's start the format is told from.
const SNIFF_BYTES: usize = 64 * 1024;

/// The tools whose files spyglass reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Junit,
    Promptfoo,
    InspectJson,
    InspectEval,
    /// `spyglass eval --json FILE`.
    Spyglass,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Junit => "JUnit XML",
            Self::Promptfoo => "promptfoo results JSON",
            Self::InspectJson => "Inspect AI log (.json)",
            Self::InspectEval => "Inspect AI log (.eval)",
            Self::Spyglass => "spyglass eval results JSON",
        }
    }

    /// The run id's prefix.
    fn tag(self) -> &'static str {
        match self {
            Self::Junit => "junit",
            Self::Promptfoo => "promptfoo",
            Self::InspectJson | Self::InspectEval => "inspect",
            Self::Spyglass => "spyglass",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the formats are, for an error that says what was expected.
const EXPECTED: &str = "expected JUnit XML (<testsuites> or <testsuite>), promptfoo results JSON \
                        (`promptfoo eval -o results.json`), an Inspect AI log (.json or .eval), \
                        or spyglass's own (`spyglass eval --json FILE`)";

/// Why a file could not be imported. Every message names the file (sanitised).
#[derive(Debug, Error)]
pub enum ImportError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {size} bytes is more than the {MAX_FILE_BYTES} bytes an import reads")]
    TooLarge { path: String, size: u64 },
    #[error("{path}: not a results file spyglass can import ({what}); {EXPECTED}")]
    Unknown { path: String, what: String },
    #[error("{path}: damaged {format}: {detail}")]
    Damaged {
        path: String,
        format: Format,
        detail: String,
    },
    #[error("{path}: {format} holds no results to import{why}")]
    Empty {
        path: String,
        format: Format,
        why: String,
    },
}

/// Counts per status, as the tool's own summary gives them or as imported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusCounts {
    pub passed: u64,
    pub failed: u64,
    pub errored: u64,
    pub skipped: u64,
}

impl StatusCounts {
    pub fn of(results: &[AgentEvalCompleted]) -> Self {
        let mut counts = Self::default();
        for result in results {
            match result.status {
                EvalStatus::Passed => counts.passed += 1,
                EvalStatus::Failed => counts.failed += 1,
                EvalStatus::Error => counts.errored += 1,
                EvalStatus::Skipped => counts.skipped += 1,
            }
        }
        counts
    }

    pub fn total(&self) -> u64 {
        self.passed + self.failed + self.errored + self.skipped
    }
}

impl fmt::Display for StatusCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} errored, {} skipped",
            self.passed, self.failed, self.errored, self.skipped
        )
    }
}

/// What a format reader made of a file, before the run is stamped on it.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Results in file order; suite and case names already set.
    pub results: Vec<AgentEvalCompleted>,
    /// Entries the reader could not make a result of (named in `notes`).
    pub skipped: usize,
    /// Why entries were skipped, at most a few lines.
    pub notes: Vec<String>,
    /// When the run happened, by the file (RFC 3339), if it says.
    pub started: Option<String>,
    /// The tool's own per-status summary, when the file carries one.
    pub summary: Option<StatusCounts>,
    /// The run's own id, when the file names it (spyglass's); else one is made up.
    pub run_id: Option<String>,
}

impl Parsed {
    /// Counts an entry that could not be read, keeping the first few reasons.
    pub(crate) fn skip(&mut self, why: impl Into<String>) {
        self.skipped += 1;
        if self.notes.len() < 5 {
            self.notes.push(why.into());
        }
    }

    /// Adds a result unless the file already gave the most one import takes.
    pub(crate) fn push(&mut self, result: AgentEvalCompleted) {
        if self.results.len() >= MAX_RESULTS {
            self.skip(format!("more than {MAX_RESULTS} results"));
        } else {
            self.results.push(result);
        }
    }
}

/// One file, read: its results as `agent.eval.completed` events of one run.
#[derive(Debug)]
pub struct Imported {
    pub path: PathBuf,
    pub format: Format,
    pub run_id: String,
    /// The run's time (RFC 3339): the file's own, else the file's modification time.
    pub ts: String,
    pub results: Vec<AgentEvalCompleted>,
    pub skipped: usize,
    pub notes: Vec<String>,
    pub summary: Option<StatusCounts>,
}

impl Imported {
    pub fn counts(&self) -> StatusCounts {
        StatusCounts::of(&self.results)
    }

    /// The events as frames stamped with the run's time and `seq` from `first_seq`, for
    /// the inspector offline (`spyglass view`).
    pub fn frames(&self, first_seq: u64) -> Vec<Frame> {
        self.results
            .iter()
            .zip(first_seq..)
            .map(|(result, seq)| Frame {
                seq,
                ts: self.ts.as_str().into(),
                session_id: None,
                event: Event::AgentEvalCompleted(result.clone()),
            })
            .collect()
    }
}

/// A path as a terminal may show it.
pub fn shown_path(path: &Path) -> String {
    sanitize(&path.display().to_string()).into_owned()
}

/// Reads `path`, tells its format from its content and reads its results. `suite`
/// replaces every suite name the file gives.
pub fn import_file(path: &Path, suite: Option<&str>) -> Result<Imported, ImportError> {
    let name = shown_path(path);
    let read_err = |source| ImportError::Read {
        path: name.clone(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read_err)?;
    if !meta.is_file() {
        return Err(ImportError::Unknown {
            path: name,
            what: "not a regular file".into(),
        });
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ImportError::TooLarge {
            path: name,
            size: meta.len(),
        });
    }
    let mut head = Vec::with_capacity(SNIFF_BYTES.min(meta.len() as usize));
    std::fs::File::open(path)
        .map_err(read_err)?
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(read_err)?;
    let format = detect(&head).map_err(|what| ImportError::Unknown {
        path: name.clone(),
        what: sanitize(&what).into_owned(),
    })?;
    let open = || -> Result<_, ImportError> {
        let file = std::fs::File::open(path).map_err(read_err)?;
        Ok(std::io::BufReader::new(file.take(MAX_FILE_BYTES)))
    };
    let damaged = |detail: String| ImportError::Damaged {
        path: name.clone(),
        format,
        detail: sanitize(&detail).into_owned(),
    };
    let mut parsed = match format {
        Format::Junit => junit::read(open()?).map_err(damaged)?,
        Format::Promptfoo => promptfoo::read(open()?).map_err(damaged)?,
        Format::InspectJson => inspect::read_json(open()?).map_err(damaged)?,
        Format::InspectEval => {
            let file = std::fs::File::open(path).map_err(read_err)?;
            inspect::read_eval(file).map_err(damaged)?
        }
        Format::Spyglass => spyglass::read(open()?).map_err(damaged)?,
    };
    if parsed.results.is_empty() {
        let why = if parsed.skipped > 0 {
            format!(
                ": {} entr{} unreadable ({})",
                parsed.skipped,
                if parsed.skipped == 1 { "y" } else { "ies" },
                parsed.notes.join("; ")
            )
        } else {
            String::new()
        };
        return Err(ImportError::Empty {
            path: name,
            format,
            why: sanitize(&why).into_owned(),
        });
    }
    let ts = parsed
        .started
        .as_deref()
        .and_then(normalise_time)
        .or_else(|| meta.modified().ok().map(system_time))
        .unwrap_or_else(|| system_time(std::time::SystemTime::now()));
    let run_id = match &parsed.run_id {
        Some(id) => sanitize(id).into_owned(),
        None => run_id(format, &ts, path, &parsed),
    };
    for result in &mut parsed.results {
        if let Some(suite) = suite {
            suite.clone_into(&mut result.suite);
        }
        result.run_id = Some(run_id.clone());
        clean(result);
    }
    Ok(Imported {
        path: path.to_path_buf(),
        format,
        run_id,
        ts,
        results: parsed.results,
        skipped: parsed.skipped,
        notes: parsed
            .notes
            .iter()
            .map(|note| sanitize(note).into_owned())
            .collect(),
        summary: parsed.summary,
    })
}

/// The format a file's first bytes show, or what the file looked like instead.
pub fn detect(head: &[u8]) -> Result<Format, String> {
    if head.starts_with(b"PK\x03\x04") {
        return Ok(Format::InspectEval);
    }
    if head.is_empty() {
        return Err("the file is empty".into());
    }
    let text = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let start = text
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .ok_or("the file is blank")?;
    let text = &text[start..];
    // A multi-byte character cut at the sniff's end is not a reason to refuse the file.
    let valid = match std::str::from_utf8(text) {
        Ok(s) => s,
        Err(err) if err.error_len().is_none() => {
            std::str::from_utf8(&text[..err.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return Err("not UTF-8 text, nor a ZIP archive".into()),
    };
    match valid.as_bytes().first() {
        Some(b'<') => junit::sniff(valid).map(|()| Format::Junit),
        Some(b'{') => sniff_json(valid),
        Some(b'[')
            if valid[1..]
                .trim_start()
                .starts_with(|c: char| "{[\"]-".contains(c) || c.is_ascii_digit()) =>
        {
            Err("a JSON array, not one tool's results object".into())
        }
        _ => Err("text that is neither XML nor JSON".into()),
    }
}

/// promptfoo writes `evalId` first, Inspect AI `version`, `status`, then `eval`, spyglass
/// `run_id`, `status`, `suites`: whichever top-of-file key comes first decides.
fn sniff_json(text: &str) -> Result<Format, String> {
    let key = |name: &str| {
        let quoted = format!("\"{name}\"");
        text.match_indices(&quoted).find_map(|(at, _)| {
            let rest = text[at + quoted.len()..].trim_start();
            rest.starts_with(':').then_some(at)
        })
    };
    let promptfoo = ["evalId", "shareableUrl"]
        .iter()
        .filter_map(|k| key(k))
        .min();
    let inspect = key("eval").filter(|_| key("status").is_some() || key("samples").is_some());
    // spyglass's starts with its `run_id` (Inspect AI's is inside its `eval`, later).
    let spyglass = key("run_id").filter(|_| key("suites").is_some() && key("cases").is_some());
    if let Some(at) = spyglass
        && promptfoo.into_iter().chain(inspect).all(|other| at < other)
    {
        return Ok(Format::Spyglass);
    }
    match (promptfoo, inspect) {
        (Some(p), Some(i)) if i < p => Ok(Format::InspectJson),
        (Some(_), _) => Ok(Format::Promptfoo),
        (None, Some(_)) => Ok(Format::InspectJson),
        (None, None) => Err(
            "a JSON object with neither promptfoo's `evalId`, Inspect AI's `eval` and `status`, \
             nor spyglass's `run_id`, `suites` and `cases`"
                .into(),
        ),
    }
}

/// Text cut to `MAX_TEXT_BYTES` on a character boundary, marked when cut.
pub(crate) fn bounded(text: &str) -> String {
    if text.len() <= MAX_TEXT_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_TEXT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// A JSON string value for `expected`/`actual`, bounded.
pub(crate) fn text_json(text: &str) -> RawJson {
    RawJson::from_value(&serde_json::Value::String(bounded(text)))
}

/// Every string of a result made safe for a terminal: names and reasons on one line,
/// assertion messages and expected/actual text keeping their line breaks.
fn clean(result: &mut AgentEvalCompleted) {
    let line = |s: &mut String| {
        if let std::borrow::Cow::Owned(clean) = sanitize(s) {
            *s = clean;
        }
    };
    line(&mut result.suite);
    line(&mut result.case);
    if let Some(reason) = &mut result.reason {
        line(reason);
    }
    for assertion in &mut result.assertions {
        line(&mut assertion.kind);
        if let Some(message) = &mut assertion.message
            && let std::borrow::Cow::Owned(clean) = sanitize_text(message)
        {
            *message = clean;
        }
        for value in [&mut assertion.expected, &mut assertion.actual] {
            if let Some(clean) = clean_json(value) {
                *value = clean;
            }
        }
    }
}

/// A JSON value with every string in it sanitised; `None` when nothing changed.
fn clean_json(value: &RawJson) -> Option<RawJson> {
    fn walk(value: &mut serde_json::Value) -> bool {
        match value {
            serde_json::Value::String(s) => match sanitize_text(s) {
                std::borrow::Cow::Owned(clean) => {
                    *s = clean;
                    true
                }
                std::borrow::Cow::Borrowed(_) => false,
            },
            serde_json::Value::Array(items) => items.iter_mut().fold(false, |c, v| walk(v) | c),
            serde_json::Value::Object(map) => map.values_mut().fold(false, |c, v| walk(v) | c),
            _ => false,
        }
    }
    let mut parsed = value.to_value();
    walk(&mut parsed).then(|| RawJson::from_value(&parsed))
}

/// An instant any tool wrote, as RFC 3339 UTC with microseconds; a time without offset
/// (pytest's local `timestamp`) is read as UTC.
pub fn normalise_time(text: &str) -> Option<String> {
    use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};
    let text = text.trim();
    let utc = DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"]
                .iter()
                .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
                .map(|t| t.and_utc())
        })?;
    Some(utc.to_rfc3339_opts(SecondsFormat::Micros, true))
}

fn system_time(time: std::time::SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time).to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// `<tool>-<time>-<hash>`: the same file imported twice names the same run; two files of
/// one second differ by their content.
fn run_id(format: Format, ts: &str, path: &Path, parsed: &Parsed) -> String {
    // FNV-1a over the file name and the results' names and statuses: stable across
    // processes and platforms, which std's hasher does not promise.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    feed(path.file_name().map_or(&[][..], |n| n.as_encoded_bytes()));
    for result in &parsed.results {
        feed(result.suite.as_bytes());
        feed(result.case.as_bytes());
        feed(result.status.as_str().as_bytes());
    }
    let stamp: String = ts
        .chars()
        .take(19)
        .filter(char::is_ascii_alphanumeric)
        .collect();
    format!("{}-{stamp}-{:08x}", format.tag(), hash as u32)
}

#[cfg(test)]
mod tests;
