//! Evals: suite files and their checks, judging a case's run (the one IO here is the
//! `command` assertion's checker program), the CLI's printouts (table, `JUnit` XML, JSON,
//! HTML) and the bounded pass-rate history. The runner that drives the runtime lives in
//! the runtime; these pieces are shared.

pub mod assert;
pub mod command;
pub mod compare;
pub mod compose;
#[cfg(any(test, feature = "test-support"))]
pub mod fixtures;
pub mod history;
pub mod html;
pub mod judge;
pub mod quarantine;
pub mod report;
pub mod script;
pub mod stats;
pub mod suite;

pub use assert::{CaseResult, CaseRun, evaluate};

pub use history::{EvalHistory, HistorySettings};
pub use suite::{Case, Suite, SuiteError, load_suite, parse_suite};
