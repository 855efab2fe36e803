//! Inspect AI logs, the `.json` format and the `.eval` ZIP (entries zstd- or
//! deflate-compressed): task, samples per epoch, scorer values, target, output and usage.

use super::{Parsed, bounded, text_json};
use crate::protocol::events::{AgentEvalCompleted, AssertionResult, EvalStatus, Tokens};
use crate::protocol::json::RawJson;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::io::{BufRead, Read, Seek};

/// Largest ZIP entry read, uncompressed: a sample with its whole transcript fits many
/// times over; a zip bomb does not get to inflate past it.
pub const MAX_ENTRY_BYTES: u64 = 64 * 1024 * 1024;
/// Most entries an `.eval` archive may list.
pub const MAX_ENTRIES: usize = 500_000;

#[derive(Deserialize, Default)]
#[serde(default)]
struct Log {
    status: Option<String>,
    eval: Option<Spec>,
    stats: Stats,
    error: Option<LogError>,
    samples: Option<Vec<Box<RawValue>>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Spec {
    task: Option<String>,
    model: Option<String>,
    created: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Stats {
    started_at: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct LogError {
    message: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Sample {
    id: Value,
    epoch: Option<u32>,
    target: Value,
    output: Option<Output>,
    scores: Option<BTreeMap<String, Score>>,
    error: Option<LogError>,
    total_time: Option<f64>,
    model_usage: BTreeMap<String, Usage>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Output {
    model: Option<String>,
    completion: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Score {
    value: Value,
    answer: Option<String>,
    explanation: Option<String>,
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(default)]
#[expect(clippy::struct_field_names, reason = "Inspect AI's own field names")]
struct Usage {
    input_tokens: u64,
    output_tokens: u64,
    total_tokens: u64,
}

/// A `.json` log, read as a stream: transcripts and events are skipped unkept.
pub fn read_json(input: impl BufRead) -> Result<Parsed, String> {
    let log: Log =
        serde_json::from_reader(input).map_err(|err| format!("JSON does not parse: {err}"))?;
    let spec = log
        .eval
        .as_ref()
        .ok_or("no `eval` object (task and model); is it an Inspect AI log?")?;
    let task = task_name(spec);
    let model = spec.model.clone();
    let mut parsed = Parsed {
        started: spec.created.clone().or(log.stats.started_at.clone()),
        ..Parsed::default()
    };
    let samples = log.samples.unwrap_or_default();
    if samples.is_empty() {
        return Err(no_samples(log.status.as_deref(), log.error.as_ref()));
    }
    for (index, raw) in samples.iter().enumerate() {
        match serde_json::from_str::<Sample>(raw.get()) {
            Ok(sample) => parsed.push(result(&task, model.as_deref(), sample)),
            Err(err) => parsed.skip(format!("sample {index}: {err}")),
        }
    }
    Ok(parsed)
}

fn task_name(spec: &Spec) -> String {
    spec.task
        .clone()
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| "inspect".into())
}

fn no_samples(status: Option<&str>, error: Option<&LogError>) -> String {
    let mut text = format!(
        "the log has no samples (status {})",
        status.unwrap_or("unknown")
    );
    if let Some(message) = error.and_then(|e| e.message.as_deref()) {
        text.push_str(": ");
        text.push_str(&bounded(message.lines().next().unwrap_or_default()));
    }
    text
}

/// One entry of the archive, bounded, parsed as `T`.
fn entry<T: DeserializeOwned, R: Read + Seek>(
    zip: &mut zip::ZipArchive<R>,
    index: usize,
) -> Result<T, String> {
    let file = zip.by_index(index).map_err(|err| err.to_string())?;
    if file.size() > MAX_ENTRY_BYTES {
        return Err(format!(
            "{} bytes uncompressed, more than {MAX_ENTRY_BYTES}",
            file.size()
        ));
    }
    // The declared size may lie; the read stops at the bound either way.
    let mut bytes = Vec::new();
    file.take(MAX_ENTRY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| format!("cannot decompress: {err}"))?;
    if bytes.len() as u64 > MAX_ENTRY_BYTES {
        return Err(format!("inflates past {MAX_ENTRY_BYTES} bytes"));
    }
    serde_json::from_slice(&bytes).map_err(|err| format!("JSON does not parse: {err}"))
}

fn find(zip: &zip::ZipArchive<impl Read + Seek>, name: &str) -> Option<usize> {
    zip.index_for_name(name)
}

/// An `.eval` archive: `header.json` (else `_journal/start.json` of a run still going)
/// for the task, then every `samples/*.json`, else `summaries.json`.
pub fn read_eval(input: impl Read + Seek) -> Result<Parsed, String> {
    let mut zip = zip::ZipArchive::new(input)
        .map_err(|err| format!("not a readable ZIP archive (truncated?): {err}"))?;
    if zip.len() > MAX_ENTRIES {
        return Err(format!("{} entries, more than {MAX_ENTRIES}", zip.len()));
    }
    let header = find(&zip, "header.json")
        .or_else(|| find(&zip, "_journal/start.json"))
        .ok_or("a ZIP archive without `header.json`: not an Inspect AI .eval log")?;
    let log: Log = entry(&mut zip, header).map_err(|err| format!("header.json: {err}"))?;
    let spec = log
        .eval
        .as_ref()
        .ok_or("header.json has no `eval` object (task and model)")?;
    let task = task_name(spec);
    let model = spec.model.clone();
    let mut parsed = Parsed {
        started: spec.created.clone().or(log.stats.started_at.clone()),
        ..Parsed::default()
    };
    let samples: Vec<(usize, String)> = (0..zip.len())
        .filter_map(|i| {
            let name = zip.name_for_index(i)?.ok()?;
            (name.starts_with("samples/") && name.ends_with(".json"))
                .then(|| (i, name.into_owned()))
        })
        .collect();
    if samples.is_empty() {
        // Without sample files the summaries still hold ids, scores, errors and usage.
        let Some(at) = find(&zip, "summaries.json") else {
            return Err(no_samples(log.status.as_deref(), log.error.as_ref()));
        };
        let summaries: Vec<Box<RawValue>> =
            entry(&mut zip, at).map_err(|err| format!("summaries.json: {err}"))?;
        for (index, raw) in summaries.iter().enumerate() {
            match serde_json::from_str::<Sample>(raw.get()) {
                Ok(sample) => parsed.push(result(&task, model.as_deref(), sample)),
                Err(err) => parsed.skip(format!("summary {index}: {err}")),
            }
        }
        return Ok(parsed);
    }
    for (index, name) in samples {
        match entry::<Sample, _>(&mut zip, index) {
            Ok(sample) => parsed.push(result(&task, model.as_deref(), sample)),
            Err(err) => parsed.skip(format!("{name}: {err}")),
        }
    }
    Ok(parsed)
}

/// What one scorer's value says: pass or not, and as a number (C 1, P 0.5, I and N 0).
fn judge(value: &Value) -> (bool, Option<f64>) {
    match value {
        Value::String(s) => match s.as_str() {
            "C" => (true, Some(1.0)),
            "P" => (false, Some(0.5)),
            "I" | "N" => (false, Some(0.0)),
            other => match other.parse::<f64>() {
                Ok(n) if n.is_finite() => (n >= 1.0, Some(n)),
                _ => (false, None),
            },
        },
        Value::Bool(b) => (*b, Some(if *b { 1.0 } else { 0.0 })),
        Value::Number(n) => {
            let n = n.as_f64().filter(|n| n.is_finite());
            (n.is_some_and(|n| n >= 1.0), n)
        }
        // A scorer of several values passes when every one does.
        Value::Object(map) if !map.is_empty() => {
            let judged: Vec<_> = map.values().map(judge).collect();
            let pass = judged.iter().all(|(pass, _)| *pass);
            let numbers: Vec<f64> = judged.iter().filter_map(|(_, n)| *n).collect();
            let mean =
                (!numbers.is_empty()).then(|| numbers.iter().sum::<f64>() / numbers.len() as f64);
            (pass, mean)
        }
        _ => (false, None),
    }
}

fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn result(task: &str, model: Option<&str>, sample: Sample) -> AgentEvalCompleted {
    let case = match &sample.id {
        Value::String(s) => s.clone(),
        Value::Null => "sample".into(),
        other => other.to_string(),
    };
    let usage = sample
        .model_usage
        .values()
        .fold(Tokens::default(), |sum, u| Tokens {
            prompt: sum.prompt + u.input_tokens,
            completion: sum.completion + u.output_tokens,
            total: sum.total + u.total_tokens,
        });
    let model = sample
        .output
        .as_ref()
        .and_then(|o| o.model.clone())
        .or_else(|| model.map(str::to_owned))
        .or_else(|| sample.model_usage.keys().next().cloned());
    let output = sample.output.as_ref().and_then(|o| o.completion.clone());
    let target = match &sample.target {
        Value::Array(items) => items.iter().map(value_text).collect::<Vec<_>>().join(" | "),
        Value::Null => String::new(),
        other => value_text(other),
    };
    let scores = sample.scores.unwrap_or_default();
    let mut numbers = Vec::new();
    let mut failing = None;
    let assertions: Vec<AssertionResult> = scores
        .iter()
        .map(|(scorer, score)| {
            let (pass, number) = judge(&score.value);
            numbers.extend(number);
            let value = value_text(&score.value);
            if !pass && failing.is_none() {
                failing = Some(match &score.answer {
                    Some(answer) => format!("{scorer}: {value} (answer: {answer})"),
                    None => format!("{scorer}: {value}"),
                });
            }
            let mut message = format!("{scorer} scored {value}");
            if let Some(model) = &model {
                message.push_str(&format!(" on {model}"));
            }
            if let Some(explanation) = score.explanation.as_deref().filter(|e| !e.is_empty()) {
                message.push_str(": ");
                message.push_str(&bounded(explanation));
            }
            AssertionResult {
                kind: scorer.clone(),
                pass,
                expected: text_json(&target),
                actual: score
                    .answer
                    .as_deref()
                    .or(output.as_deref())
                    .map_or_else(RawJson::null, text_json),
                message: Some(message),
                errored: false,
            }
        })
        .collect();
    let (status, reason) = if let Some(error) = &sample.error {
        let message = error.message.as_deref().unwrap_or("the sample errored");
        (EvalStatus::Error, Some(message.to_owned()))
    } else if assertions.is_empty() {
        (EvalStatus::Skipped, Some("not scored".to_owned()))
    } else if let Some(failing) = failing {
        (EvalStatus::Failed, Some(failing))
    } else {
        (EvalStatus::Passed, None)
    };
    AgentEvalCompleted {
        suite: task.to_owned(),
        case,
        status,
        pass: status == EvalStatus::Passed,
        score: (!numbers.is_empty()).then(|| numbers.iter().sum::<f64>() / numbers.len() as f64),
        reason: reason.map(|r| bounded(r.lines().next().unwrap_or_default())),
        tokens: usage,
        duration: sample
            .total_time
            .filter(|t| t.is_finite() && *t >= 0.0)
            .map_or(0.0, |t| t * 1000.0),
        attempt: sample.epoch,
        assertions,
        ..AgentEvalCompleted::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::StatusCounts;

    const JSON: &str = include_str!("../../tests/fixtures/imports/inspect.json");
    const EVAL: &[u8] = include_bytes!("../../tests/fixtures/imports/inspect.eval");

    /// Inspect's own summary: (completed samples, accuracy) of the one scorer.
    fn summary(results: &Value) -> (u64, f64) {
        let completed = results["completed_samples"].as_u64().expect("completed");
        let accuracy = results["scores"][0]["metrics"]["accuracy"]["value"]
            .as_f64()
            .expect("accuracy");
        (completed, accuracy)
    }

    fn check(parsed: &Parsed, completed: u64, accuracy: f64) {
        let counts = StatusCounts::of(&parsed.results);
        assert_eq!(counts.total(), completed);
        assert_eq!(counts.passed, (accuracy * completed as f64).round() as u64);
        assert_eq!((counts.passed, counts.failed, counts.errored), (4, 2, 0));
        let capital = parsed
            .results
            .iter()
            .find(|r| r.case == "capital" && r.attempt == Some(2))
            .expect("capital epoch 2");
        assert_eq!(capital.suite, "arithmetic");
        assert_eq!(capital.status, EvalStatus::Failed);
        assert_eq!(
            capital.reason.as_deref(),
            Some("match: I (answer: Rio de Janeiro)")
        );
        assert_eq!(capital.assertions[0].expected.get(), "\"Brasilia\"");
        assert_eq!(capital.assertions[0].actual.get(), "\"Rio de Janeiro\"");
        assert!(
            capital.assertions[0]
                .message
                .as_deref()
                .is_some_and(|m| m.contains("mockllm/model"))
        );
        assert_eq!(capital.tokens.total, 6);
        assert!(capital.duration > 0.0);
    }

    #[test]
    fn json_log_counts_match_inspect_accuracy() {
        let parsed = read_json(JSON.as_bytes()).expect("parses");
        let whole: Value = serde_json::from_str(JSON).expect("json");
        let (completed, accuracy) = summary(&whole["results"]);
        check(&parsed, completed, accuracy);
        assert_eq!(parsed.skipped, 0);
        assert_eq!(parsed.started.as_deref(), Some("2026-11-23T20:22:04+00:00"));
    }

    #[test]
    fn eval_log_counts_match_inspect_accuracy() {
        let parsed = read_eval(std::io::Cursor::new(EVAL)).expect("parses");
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(EVAL)).expect("zip");
        let at = zip.index_for_name("header.json").expect("header");
        let header: Value = entry(&mut zip, at).expect("header");
        let (completed, accuracy) = summary(&header["results"]);
        check(&parsed, completed, accuracy);
    }

    /// Older inspect-ai wrote deflate entries: the same log repacked that way reads alike,
    /// and with its sample files gone it falls back to the summaries.
    #[test]
    fn deflate_archive_and_summaries_fallback() {
        use std::io::Write;
        let mut source = zip::ZipArchive::new(std::io::Cursor::new(EVAL)).expect("zip");
        for keep_samples in [true, false] {
            let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
            let options = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated);
            for i in 0..source.len() {
                let mut file = source.by_index(i).expect("entry");
                let name = file.name().expect("name").into_owned();
                if !keep_samples && name.starts_with("samples/") {
                    continue;
                }
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes).expect("read");
                out.start_file(name, options).expect("start");
                out.write_all(&bytes).expect("write");
            }
            let bytes = out.finish().expect("finish").into_inner();
            let parsed = read_eval(std::io::Cursor::new(bytes)).expect("parses");
            let counts = StatusCounts::of(&parsed.results);
            assert_eq!(
                (counts.passed, counts.failed),
                (4, 2),
                "samples kept: {keep_samples}"
            );
        }
    }

    #[test]
    fn truncated_archive_and_damaged_sample() {
        let err = read_eval(std::io::Cursor::new(&EVAL[..EVAL.len() / 2])).expect_err("cut");
        assert!(err.contains("not a readable ZIP archive"), "{err}");
        let err = read_json(&JSON.as_bytes()[..JSON.len() / 3]).expect_err("cut");
        assert!(err.contains("JSON does not parse"), "{err}");
    }

    #[test]
    fn errored_and_unscored_samples() {
        let text = r#"{"version":2,"status":"error","eval":{"task":"t","model":"m"},"samples":[
            {"id":1,"epoch":1,"target":["a","b"],"scores":{},"error":{"message":"boom\ntrace"}},
            {"id":2,"epoch":1,"target":"x"},
            {"id":3,"epoch":1,"target":"x","scores":{"s":{"value":{"a":1,"b":0.5}}}},
            {"id":4,"epoch":"one"}]}"#;
        let parsed = read_json(text.as_bytes()).expect("parses");
        let statuses: Vec<_> = parsed
            .results
            .iter()
            .map(|r| (r.case.as_str(), r.status))
            .collect();
        assert_eq!(
            statuses,
            [
                ("1", EvalStatus::Error),
                ("2", EvalStatus::Skipped),
                ("3", EvalStatus::Failed)
            ]
        );
        assert_eq!(parsed.results[0].reason.as_deref(), Some("boom"));
        assert_eq!(parsed.results[2].score, Some(0.75));
        assert_eq!(parsed.skipped, 1);
    }
}
