//! One test binary for the heavy runs that read this process's own memory or load it: the
//! chaos proxy, the stalled subscriber's resident memory, and every bench body once.

#[path = "../support/mod.rs"]
mod support;

mod bench_smoke;
mod chaos;
mod slow_subscriber;
mod store_growth;

/// `slow_subscriber` reads this process's resident memory, so nothing else may run beside
/// it: it holds this lock for writing, every other test here for reading.
pub static PROCESS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());
