//! spyglass's own results file (`spyglass eval --json FILE`): the run detail the runtime
//! answers `GET /v1/evals/runs/:id` with, read by `spyglass_eval::compare::parse_results`.

use super::{Parsed, StatusCounts};
use crate::eval::compare::{CompareError, parse_results};
use std::io::Read;

/// Reads the file's run: its results in file order, its own run id and per-status counts.
/// Sections other versions add beside the run (`stats`, `comparison`) are left unread.
pub fn read(mut input: impl Read) -> Result<Parsed, String> {
    let mut text = String::new();
    input
        .read_to_string(&mut text)
        .map_err(|err| format!("cannot read: {err}"))?;
    let detail = parse_results("", &text).map_err(|err| match err {
        CompareError::NotResults { reason, .. } => {
            format!("JSON does not parse as a spyglass eval run: {reason}")
        }
        CompareError::Unfinished { run_id, .. } => {
            format!("the run {run_id} is still running; only a completed run is read")
        }
        other => other.to_string(),
    })?;
    let mut parsed = Parsed {
        run_id: Some(detail.run_id).filter(|id| !id.trim().is_empty()),
        summary: Some(StatusCounts {
            passed: u64::from(detail.passed),
            failed: u64::from(detail.failed),
            errored: u64::from(detail.errored),
            skipped: u64::from(detail.skipped),
        }),
        ..Parsed::default()
    };
    for case in detail.cases {
        parsed.push(case.result);
    }
    Ok(parsed)
}
