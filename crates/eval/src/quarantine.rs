//! The quarantine file (`spyglass eval --quarantine FILE`): `[[case]]` tables naming cases
//! that run and report but never fail the build, each with a reason and an optional expiry.
//!
//! Pure: the file's text comes in with its name (named in every error) and today's date.

use crate::stats::RunStats;
use chrono::NaiveDate;
use serde::Serialize;
use std::fmt::Write as _;
use thiserror::Error;

/// Why a quarantine file was refused: the file, the entry and the field.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("{file}: {}{}{message}", entry.as_ref().map(|e| format!("{e}: ")).unwrap_or_default(), field.as_ref().map(|f| format!("{f}: ")).unwrap_or_default())]
pub struct QuarantineError {
    pub file: String,
    /// `case #2` or `case "payments/charge"`.
    pub entry: Option<String>,
    pub field: Option<String>,
    pub message: String,
}

/// One quarantined case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `suite/case`.
    pub id: String,
    pub reason: String,
    pub expires: Option<NaiveDate>,
}

impl Entry {
    /// Whether the entry ran out before `today` (it shields the case up to its date).
    pub fn expired(&self, today: NaiveDate) -> bool {
        self.expires.is_some_and(|date| date < today)
    }
}

/// Every entry of a quarantine file, in file order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Quarantine {
    pub file: String,
    pub entries: Vec<Entry>,
}

impl Quarantine {
    /// The entry naming `suite/case` that is still in force on `today`.
    pub fn shields(&self, suite: &str, case: &str, today: NaiveDate) -> Option<&Entry> {
        let id = format!("{suite}/{case}");
        self.entries
            .iter()
            .find(|e| e.id == id && !e.expired(today))
    }

    /// The entries that ran out before `today`.
    pub fn expired(&self, today: NaiveDate) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(move |e| e.expired(today))
    }
}

/// Today's date where the CLI runs: an entry expires after its day there.
pub fn today() -> NaiveDate {
    chrono::Local::now().date_naive()
}

/// What became of one entry in a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Standing {
    pub id: String,
    pub reason: String,
    /// `2026-12-31`.
    pub expires: Option<String>,
    /// Past its date: the case counts again.
    pub expired: bool,
    /// Whether the run had the case at all.
    pub matched: bool,
    pub passed: u32,
    pub judged: u32,
    /// Shielded, judged, and every attempt passed: the entry can go.
    pub can_leave: bool,
}

impl Quarantine {
    /// Every entry against the run's statistics.
    pub fn standings(&self, stats: &RunStats, today: NaiveDate) -> Vec<Standing> {
        self.entries
            .iter()
            .map(|entry| {
                let case = stats.cases.iter().find(|c| c.id == entry.id);
                let (passed, judged) = case.map_or((0, 0), |c| (c.passed, c.judged));
                let expired = entry.expired(today);
                Standing {
                    id: entry.id.clone(),
                    reason: entry.reason.clone(),
                    expires: entry.expires.map(|d| d.format("%Y-%m-%d").to_string()),
                    expired,
                    matched: case.is_some(),
                    passed,
                    judged,
                    can_leave: !expired && judged > 0 && passed == judged,
                }
            })
            .collect()
    }

    /// The printout: per entry in force what its case did, and whether it can leave.
    pub fn render(&self, stats: &RunStats, today: NaiveDate) -> String {
        let clean = |text: &str| spyglass_protocol::sanitize::sanitize(text).into_owned();
        let mut out = format!("Quarantine ({}):\n", clean(&self.file));
        let standings = self.standings(stats, today);
        let width = standings
            .iter()
            .map(|s| s.id.chars().count())
            .max()
            .unwrap_or(0);
        for s in standings.iter().filter(|s| !s.expired && s.matched) {
            let said = if s.can_leave {
                format!(
                    "passed every attempt ({}/{}): can leave quarantine",
                    s.passed, s.judged
                )
            } else if s.judged == 0 {
                "skipped: nothing judged".to_owned()
            } else {
                format!(
                    "{}/{} passed, not counted ({})",
                    s.passed,
                    s.judged,
                    clean(&s.reason)
                )
            };
            let _ = writeln!(out, "  {:<width$}  {said}", clean(&s.id));
        }
        out
    }

    /// Warnings for the log: expired entries (naming them) and entries matching no case.
    pub fn warnings(&self, stats: &RunStats, today: NaiveDate) -> Vec<String> {
        let clean = |text: &str| spyglass_protocol::sanitize::sanitize(text).into_owned();
        self.standings(stats, today)
            .iter()
            .filter_map(|s| {
                if s.expired {
                    Some(format!(
                        "warning: {}: the quarantine of {} expired on {} ({}); its failures count again",
                        clean(&self.file),
                        clean(&s.id),
                        s.expires.as_deref().unwrap_or_default(),
                        clean(&s.reason)
                    ))
                } else if s.matched {
                    None
                } else {
                    Some(format!(
                        "warning: {}: {} matches no case of this run",
                        clean(&self.file),
                        clean(&s.id)
                    ))
                }
            })
            .collect()
    }
}

/// Parses a quarantine file's text.
pub fn parse_quarantine(file: &str, text: &str) -> Result<Quarantine, QuarantineError> {
    let error = |entry: Option<String>, field: Option<&str>, message: String| QuarantineError {
        file: file.to_owned(),
        entry,
        field: field.map(str::to_owned),
        message,
    };
    let table: toml::Table = text
        .parse()
        .map_err(|err: toml::de::Error| error(None, None, err.message().to_owned()))?;
    for key in table.keys() {
        if key != "case" {
            return Err(error(
                None,
                Some(key),
                "unknown key; a quarantine file holds only [[case]] tables".to_owned(),
            ));
        }
    }
    let Some(cases) = table.get("case") else {
        return Ok(Quarantine {
            file: file.to_owned(),
            entries: Vec::new(),
        });
    };
    let toml::Value::Array(cases) = cases else {
        return Err(error(
            None,
            Some("case"),
            "expected [[case]] tables".to_owned(),
        ));
    };
    let mut entries: Vec<Entry> = Vec::new();
    for (index, value) in cases.iter().enumerate() {
        let mut name = format!("case #{}", index + 1);
        let toml::Value::Table(case) = value else {
            return Err(error(Some(name), None, "expected a table".to_owned()));
        };
        let id = match case.get("id") {
            Some(toml::Value::String(id)) => id.clone(),
            Some(other) => {
                return Err(error(
                    Some(name),
                    Some("id"),
                    format!("expected a string, found {}", other.type_str()),
                ));
            }
            None => {
                return Err(error(
                    Some(name),
                    Some("id"),
                    "missing: every entry names its case as \"suite/case\"".to_owned(),
                ));
            }
        };
        if !id.contains('/') || id.starts_with('/') || id.ends_with('/') {
            return Err(error(
                Some(name),
                Some("id"),
                format!("{id:?} is not \"suite/case\""),
            ));
        }
        name = format!("case {id:?}");
        if let Some(first) = entries.iter().position(|e| e.id == id) {
            return Err(error(
                Some(name),
                Some("id"),
                format!("listed twice (case #{} has it too)", first + 1),
            ));
        }
        for key in case.keys() {
            if !matches!(key.as_str(), "id" | "reason" | "expires") {
                return Err(error(
                    Some(name),
                    Some(key),
                    "unknown field; expected id, reason or expires".to_owned(),
                ));
            }
        }
        let reason = match case.get("reason") {
            Some(toml::Value::String(reason)) if !reason.trim().is_empty() => reason.clone(),
            Some(toml::Value::String(_)) | None => {
                return Err(error(
                    Some(name),
                    Some("reason"),
                    "missing: say why the case is quarantined".to_owned(),
                ));
            }
            Some(other) => {
                return Err(error(
                    Some(name),
                    Some("reason"),
                    format!("expected a string, found {}", other.type_str()),
                ));
            }
        };
        let expires = match case.get("expires") {
            None => None,
            Some(value) => Some(read_date(value).ok_or_else(|| {
                error(
                    Some(name.clone()),
                    Some("expires"),
                    format!("expected a date like 2026-12-31, found {value}"),
                )
            })?),
        };
        entries.push(Entry {
            id,
            reason,
            expires,
        });
    }
    Ok(Quarantine {
        file: file.to_owned(),
        entries,
    })
}

/// A TOML local date (`2026-12-31`) or a string holding one.
fn read_date(value: &toml::Value) -> Option<NaiveDate> {
    match value {
        toml::Value::Datetime(datetime) if datetime.time.is_none() && datetime.offset.is_none() => {
            let date = datetime.date?;
            NaiveDate::from_ymd_opt(
                i32::from(date.year),
                u32::from(date.month),
                u32::from(date.day),
            )
        }
        toml::Value::String(text) => NaiveDate::parse_from_str(text, "%Y-%m-%d").ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(text: &str) -> NaiveDate {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn entries_shield_their_case_until_they_expire() {
        let q = parse_quarantine(
            "q.toml",
            "[[case]]\nid = \"payments/charge\"\nreason = \"model flakes on amounts\"\nexpires = 2026-12-31\n\n[[case]]\nid = \"payments/refund\"\nreason = \"upstream bug\"\n",
        )
        .unwrap();
        assert_eq!(q.entries.len(), 2);
        assert_eq!(q.entries[0].expires, Some(day("2026-12-31")));
        assert!(q.shields("payments", "charge", day("2026-12-31")).is_some());
        assert!(q.shields("payments", "charge", day("2027-01-01")).is_none());
        assert!(q.shields("payments", "refund", day("2099-01-01")).is_some());
        assert!(q.shields("payments", "other", day("2026-01-01")).is_none());
        assert_eq!(q.expired(day("2027-01-01")).count(), 1);
        assert!(parse_quarantine("e.toml", "").unwrap().entries.is_empty());
        // Against a run: refund passed every attempt; charge failed one; it is 2027.
        let records: Vec<spyglass_protocol::events::AgentEvalCompleted> = [
            ("refund", true),
            ("refund", true),
            ("charge", true),
            ("charge", false),
        ]
        .into_iter()
        .map(
            |(case, pass)| spyglass_protocol::events::AgentEvalCompleted {
                suite: "payments".into(),
                case: case.into(),
                pass,
                status: if pass {
                    spyglass_protocol::events::EvalStatus::Passed
                } else {
                    spyglass_protocol::events::EvalStatus::Failed
                },
                ..Default::default()
            },
        )
        .collect();
        let stats = RunStats::of(&records);
        assert_eq!(
            q.render(&stats, day("2026-06-01")),
            "Quarantine (q.toml):\n  payments/charge  1/2 passed, not counted (model flakes on amounts)\n  payments/refund  passed every attempt (2/2): can leave quarantine\n"
        );
        assert!(q.warnings(&stats, day("2026-06-01")).is_empty());
        assert_eq!(
            q.warnings(&stats, day("2027-01-01")),
            [
                "warning: q.toml: the quarantine of payments/charge expired on 2026-12-31 (model flakes on amounts); its failures count again"
            ]
        );
    }

    #[test]
    fn a_bad_file_names_the_file_the_entry_and_the_field() {
        let err = |text: &str| parse_quarantine("q.toml", text).unwrap_err().to_string();
        assert_eq!(
            err("[[case]]\nreason = \"x\"\n"),
            "q.toml: case #1: id: missing: every entry names its case as \"suite/case\""
        );
        assert_eq!(
            err("[[case]]\nid = \"charge\"\nreason = \"x\"\n"),
            "q.toml: case #1: id: \"charge\" is not \"suite/case\""
        );
        assert_eq!(
            err("[[case]]\nid = \"p/c\"\n"),
            "q.toml: case \"p/c\": reason: missing: say why the case is quarantined"
        );
        assert_eq!(
            err("[[case]]\nid = \"p/c\"\nreason = \"x\"\nexpires = \"soon\"\n"),
            "q.toml: case \"p/c\": expires: expected a date like 2026-12-31, found \"soon\""
        );
        assert_eq!(
            err("[[case]]\nid = \"p/c\"\nreason = \"x\"\nuntil = 1\n"),
            "q.toml: case \"p/c\": until: unknown field; expected id, reason or expires"
        );
        assert_eq!(
            err("[[case]]\nid = \"p/c\"\nreason = \"x\"\n[[case]]\nid = \"p/c\"\nreason = \"y\"\n"),
            "q.toml: case \"p/c\": id: listed twice (case #1 has it too)"
        );
        assert_eq!(
            err("cases = 1\n"),
            "q.toml: cases: unknown key; a quarantine file holds only [[case]] tables"
        );
        assert!(err("[[case]\n").starts_with("q.toml: "));
        // A string date is read too.
        let q = parse_quarantine(
            "q.toml",
            "[[case]]\nid = \"p/c\"\nreason = \"x\"\nexpires = \"2026-01-02\"\n",
        )
        .unwrap();
        assert_eq!(q.entries[0].expires, Some(day("2026-01-02")));
    }
}
