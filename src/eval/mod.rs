//! Evals: suite files and their checks, judging a case's run, the CLI's printouts (table,
//! JUnit XML, JSON) and the bounded pass-rate history, all without IO; the runner that
//! drives them lives in the runtime, and `run_cli` (the one part with IO) is its client.

pub mod assert;
pub mod history;
pub mod report;
pub mod run_cli;
pub mod suite;

pub use assert::{CaseResult, CaseRun, evaluate};

pub use history::{EvalHistory, HistorySettings};
pub use suite::{Case, Suite, SuiteError, load_suite, parse_suite};
