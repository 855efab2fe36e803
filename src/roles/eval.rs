//! `spyglass eval`: check the suite files, then run them on the `--url` runtime, else on an
//! embedded one (test mode on, in memory or on `--store`) through the same REST calls;
//! print the history with `--history`; exit 1 when a case failed (a quarantined one never
//! counts; with `--fail-on regression`, only a significant drop against `--baseline`).

use super::serve::ServeError;
use super::{API_KEY_VAR, LogTo, PROJECT_VAR, RoleError, start_logging};
use crate::client::eval::{EvalArgs, against_baseline, compare_files, prepare, run as run_suites};
use crate::eval::compare::Standing;
use crate::eval::report::Counts;
use crate::eval::stats::rate_with_interval;
use crate::protocol::events::EvalStatus;
use crate::runtime::{DEFAULT_TENANT, Runtime, RuntimeConfig};
use crate::store::StoreChoice;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The flags of `spyglass eval`.
// Doc comments here are the --help text: backticks would print there as-is.
#[expect(clippy::doc_markdown)]
#[derive(clap::Args, Debug, Clone)]
pub struct EvalCli {
    #[command(subcommand)]
    pub command: Option<EvalCommand>,
    /// Suite files (TOML or JSON), or directories: every *.toml under one, sorted by
    /// path. Other files named outright (a checker script) are skipped with a note.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Run every case K times.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Only cases whose id matches this glob.
    #[arg(long)]
    pub case: Option<String>,
    /// Write JUnit XML here.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Keep the embedded runtime's eval history in this SQLite file, so runs (a CI
    /// job keeping the file as a cache) accumulate pass rates and flaky cases.
    #[arg(long, value_name = "PATH")]
    pub store: Option<PathBuf>,
    /// After the run, print per case its last N outcomes (default 10) from the
    /// embedded runtime's history (with --store, across runs).
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "10")]
    pub history: Option<usize>,
    /// Compare with an earlier run's --json file: print per case what changed (newly
    /// failing, newly flaky, worse, inconclusive, fixed, new, removed), with the
    /// one-sided Fisher exact p-value of each drop in its pass count.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// What exits 1: any failed or errored case, or only a regression against
    /// --baseline (a drop significant at --significance, or every attempt flipped from
    /// pass to fail).
    #[arg(long, value_enum, default_value_t = FailOn::Any)]
    pub fail_on: FailOn,
    /// The level a drop against --baseline must reach to be a regression.
    #[arg(long, value_name = "ALPHA", default_value_t = 0.05, value_parser = significance)]
    pub significance: f64,
    /// A TOML file of [[case]] tables (id = "suite/case", reason, optional expires):
    /// those cases run and report but never fail the build.
    #[arg(long, value_name = "FILE")]
    pub quarantine: Option<PathBuf>,
    /// Write a self-contained HTML report here (suite table, assertions with expected
    /// against actual, failing cases' timelines, pass-rate trend; no network).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Runtime to run the suites on: this flag only (SPYGLASS_URL and CODESPAR_BASE_URL
    /// are not read, so a stray variable never sends CI's evals elsewhere).
    #[arg(long)]
    pub url: Option<String>,
    /// API key, sent as a Bearer token: the last one given (else CODESPAR_API_KEY).
    #[arg(long = "api-key", env = API_KEY_VAR, hide_env = true, action = clap::ArgAction::Append)]
    pub api_key: Vec<String>,
    /// Project the run and its sessions belong to: sent as the x-codespar-project header
    /// (else SPYGLASS_PROJECT, else the runtime's default project).
    #[arg(long, env = PROJECT_VAR, hide_env = true, value_name = "ID")]
    pub project: Option<String>,
}

/// `spyglass eval`'s subcommands.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum EvalCommand {
    /// Print what changed per case between two --json results files, running nothing.
    ///
    /// Exit status: 1 when a case of CURRENT fails or is flaky (with --fail-on
    /// regression: only when one passed in BASELINE), 2 for a file that cannot be read.
    Compare {
        /// The earlier run's --json file.
        baseline: PathBuf,
        /// The later run's --json file.
        current: PathBuf,
        /// What exits 1: any failing or flaky case of CURRENT, or only a regression.
        #[arg(long, value_enum, default_value_t = FailOn::Any)]
        fail_on: FailOn,
        /// The level a drop must reach to be a regression.
        #[arg(long, value_name = "ALPHA", default_value_t = 0.05, value_parser = significance)]
        significance: f64,
    },
}

/// `--significance`: a level strictly between 0 and 1.
fn significance(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(alpha) if alpha > 0.0 && alpha < 1.0 => Ok(alpha),
        _ => Err(format!(
            "{text:?} is not a level between 0 and 1, like 0.05"
        )),
    }
}

/// `spyglass eval`: the suites' run, or `eval compare`.
pub async fn main(cli: EvalCli) -> Result<(), RoleError> {
    start_logging(LogTo::File, false)?;
    if let Some(EvalCommand::Compare {
        baseline,
        current,
        fail_on,
        significance,
    }) = &cli.command
    {
        return compare(baseline, current, *fail_on, *significance);
    }
    let args = EvalArgs {
        api_key: cli.api_key.last().cloned(),
        project: cli.project,
        paths: cli.paths,
        repeat: cli.repeat,
        case: cli.case,
        junit: cli.junit,
        json: cli.json,
        baseline: cli.baseline,
        html: cli.html,
        quarantine: cli.quarantine,
        significance: Some(cli.significance),
    };
    run(args, cli.url, cli.store, cli.history, cli.fail_on).await
}

/// What makes `spyglass eval` exit 1 (`--fail-on`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// Any case failed or errored.
    #[default]
    Any,
    /// A case's pass count dropped significantly against the baseline, or every attempt
    /// flipped from pass to fail (needs `--baseline`).
    Regression,
}

/// `spyglass eval compare A B`: prints what changed from A to B; exits 1 as `fail_on`
/// says (any failed or errored case of B, or a regression).
pub fn compare(
    baseline: &std::path::Path,
    current: &std::path::Path,
    fail_on: FailOn,
    significance: f64,
) -> Result<(), RoleError> {
    let (comparison, text) = compare_files(baseline, current, significance)?;
    let _ = std::io::stdout().write_all(text.as_bytes());
    let regressions = comparison.regressions();
    let failing = comparison
        .cases
        .iter()
        .filter(|c| matches!(c.after, Some(Standing::Failed | Standing::Flaky { .. })))
        .count();
    if regressions > 0 {
        Err(RoleError::Regressions {
            regressions,
            baseline: baseline.display().to_string(),
        })
    } else if fail_on == FailOn::Any && failing > 0 {
        Err(RoleError::FailingCases {
            failing,
            file: current.display().to_string(),
        })
    } else {
        Ok(())
    }
}

/// Prints the table to stdout and progress to stderr. `url` is `--url` only: a stray
/// `SPYGLASS_URL` must never send CI's evals elsewhere. `store` keeps the embedded
/// runtime's state (its eval history) in a file; `history` prints that many outcomes per
/// case after the run. With `FailOn::Regression` only a regression against
/// `--baseline` exits 1.
pub async fn run(
    args: EvalArgs,
    url: Option<String>,
    store: Option<PathBuf>,
    history: Option<usize>,
    fail_on: FailOn,
) -> Result<(), RoleError> {
    if fail_on == FailOn::Regression && args.baseline.is_none() {
        return Err(RoleError::Usage(
            "--fail-on regression needs --baseline FILE (an earlier --json results file)"
                .to_owned(),
        ));
    }
    if url.is_some() && (store.is_some() || history.is_some()) {
        return Err(RoleError::Usage(
            "--store and --history are for the embedded runtime; a --url runtime keeps its own store (spyglass serve --store)".to_owned(),
        ));
    }
    let prepared = prepare(&args)?;
    let (url, embedded) = if let Some(url) = url {
        (url, None)
    } else {
        let config = RuntimeConfig {
            test_mode: true,
            // Judge assertions and real-model cases read the provider settings from the
            // environment (OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_*).
            models: crate::runtime::llm::settings::ProviderSettings::resolve(
                &crate::runtime::llm::settings::ProviderFlags::default(),
                |name| std::env::var(name).ok(),
            )
            .map_err(ServeError::from)?,
            // The user runs their own files on their own machine: the checker programs
            // those files name are theirs to run (a runtime at --url decides for itself).
            allow_command_assertions: true,
            ..RuntimeConfig::default()
        };
        let choice = store.map_or(StoreChoice::Memory, StoreChoice::File);
        let runtime = choice.runtime(config).map_err(ServeError::from)?;
        let handle = runtime
            .serve(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .map_err(RoleError::Embedded)?;
        eprintln!("spyglass eval: embedded runtime on {}", handle.url());
        (handle.url(), Some(handle))
    };
    let (mut out, mut log) = (std::io::stdout(), std::io::stderr());
    let result = run_suites(&args, &prepared, &url, &mut out, &mut log).await;
    if let Some(handle) = embedded {
        let runtime = handle.runtime();
        handle.shutdown().await;
        runtime.flush_store();
        if let Some(last) = history {
            let _ = out.write_all(history_table(&runtime, last).as_bytes());
        }
    }
    let detail = result?;
    if fail_on == FailOn::Regression {
        // A quarantined case's regression is reported, never counted.
        let regressions = against_baseline(&prepared, &detail)?.map_or(0, |comparison| {
            comparison.regressions_where(|c| prepared.counts(&c.suite, &c.case))
        });
        return if regressions == 0 {
            Ok(())
        } else {
            Err(RoleError::Regressions {
                regressions,
                baseline: prepared
                    .baseline
                    .as_ref()
                    .map(|(file, _)| file.clone())
                    .unwrap_or_default(),
            })
        };
    }
    // A quarantined case's failures are reported, never counted.
    let counts = Counts::of(
        detail
            .cases
            .iter()
            .filter(|r| prepared.counts(&r.result.suite, &r.result.case)),
    );
    if counts.success() {
        Ok(())
    } else {
        Err(RoleError::CasesFailed {
            failed: counts.failed,
            errored: counts.errored,
            attempts: prepared.attempts,
        })
    }
}

/// Per case its last `last` outcomes, oldest first (`P` passed, `F` failed, `E` errored,
/// `S` skipped), how many of the judged ones passed (`—` when every one was skipped), and
/// that pass rate with its 95 % Wilson interval.
fn history_table(runtime: &Runtime, last: usize) -> String {
    let rows = runtime.eval_outcomes(DEFAULT_TENANT);
    let mut text = format!("\nHistory (last {last} outcomes per case, oldest first):\n");
    let width = rows
        .iter()
        .map(|(suite, case, _)| suite.chars().count() + case.chars().count() + 3)
        .max()
        .unwrap_or(0);
    for (suite, case, outcomes) in rows {
        let shown = &outcomes[outcomes.len().saturating_sub(last.max(1))..];
        let marks: String = shown
            .iter()
            .map(|status| match status {
                EvalStatus::Passed => 'P',
                EvalStatus::Failed => 'F',
                EvalStatus::Error => 'E',
                EvalStatus::Skipped => 'S',
            })
            .collect();
        let passed = shown.iter().filter(|s| **s == EvalStatus::Passed).count();
        let judged = shown.iter().filter(|s| **s != EvalStatus::Skipped).count();
        let rate = rate_with_interval(
            u32::try_from(passed).unwrap_or(u32::MAX),
            u32::try_from(judged).unwrap_or(u32::MAX),
        );
        let name = crate::sanitize::sanitize(&format!("{suite} / {case}")).into_owned();
        // A skip judges nothing: a case only ever skipped has no count to give.
        let count = if judged == 0 {
            "—".to_owned()
        } else {
            format!("{passed}/{judged} passed")
        };
        text.push_str(&format!(
            "  {name:<width$}  {marks:<last$}  {rate:<16}  {count}\n"
        ));
    }
    text
}
