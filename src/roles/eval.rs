//! `spyglass eval`: check the suite files, then run them on the `--url` runtime, else on an
//! embedded one (test mode on) through the same REST calls; exit 1 when a case failed.

use super::RoleError;
use crate::client::eval::{EvalArgs, prepare, run as run_suites};
use crate::eval::report::Counts;
use crate::runtime::{RuntimeConfig, embedded};

/// Prints the table to stdout and progress to stderr. `url` is `--url` only: a stray
/// `SPYGLASS_URL` must never send CI's evals elsewhere.
pub async fn run(args: EvalArgs, url: Option<String>) -> Result<(), RoleError> {
    let prepared = prepare(&args)?;
    let (url, embedded) = if let Some(url) = url {
        (url, None)
    } else {
        let config = RuntimeConfig {
            test_mode: true,
            ..RuntimeConfig::default()
        };
        let handle = embedded(config, None).await.map_err(RoleError::Embedded)?;
        eprintln!("spyglass eval: embedded runtime on {}", handle.url());
        (handle.url(), Some(handle))
    };
    let (mut out, mut log) = (std::io::stdout(), std::io::stderr());
    let result = run_suites(&args, &prepared, &url, &mut out, &mut log).await;
    if let Some(handle) = embedded {
        handle.shutdown().await;
    }
    let counts = Counts::of(&result?.cases);
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
