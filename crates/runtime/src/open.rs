//! Building a runtime on a store: `--store`'s choice opened (memory, a `SQLite` file behind
//! its journal, a shared Postgres database), the log continuing the stored stream and state.
//!
//! The store modules know rows; this is the one place that puts a runtime on them.

use crate::log::{EventLog, Logged, StoreWriter};
use crate::store::journal::{Journal, JournaledStore};
#[cfg(feature = "postgres")]
use crate::store::postgres;
use crate::store::{SqliteStore, Store, StoreChoice, StoreError};
use crate::{Runtime, RuntimeConfig};
use std::path::Path;
use std::sync::Arc;

impl StoreChoice {
    /// The runtime this choice makes: in memory, or continuing the store's stream. A
    /// Postgres store is opened by `open` (it connects, and may wait for the database).
    pub fn runtime(&self, config: RuntimeConfig) -> Result<Runtime, StoreError> {
        match self {
            StoreChoice::Memory => Ok(Runtime::new(config)),
            StoreChoice::File(path) => open_runtime(config, path),
            StoreChoice::Postgres(_) => Err(StoreError::Postgres {
                shown: self.shown(),
                reason: "a Postgres store is not available here; keep a SQLite file or memory, or point this at a runtime on Postgres with --url".to_owned(),
            }),
        }
    }

    /// `runtime`, and for a Postgres store a replica on it (`runtime::open_shared`) with a
    /// pool of `pool` connections, waiting while the database is unreachable (`on_wait`
    /// told why at each retry).
    // Without Postgres nothing here waits, but callers await it the same in every build.
    #[cfg_attr(not(feature = "postgres"), expect(clippy::unused_async))]
    pub async fn open(
        &self,
        config: RuntimeConfig,
        pool: usize,
        on_wait: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Runtime, StoreError> {
        let StoreChoice::Postgres(url) = self else {
            return self.runtime(config);
        };
        #[cfg(feature = "postgres")]
        {
            let settings = postgres::PgSettings {
                pool_size: pool,
                replica: format!("{}_{:08x}", std::process::id(), fastrand::u32(..)),
            };
            let store = postgres::PgStore::connect(url, settings, on_wait).await?;
            crate::open_shared(config, Arc::new(store)).await
        }
        #[cfg(not(feature = "postgres"))]
        {
            let _ = (url, config, pool, on_wait);
            Err(StoreError::Postgres {
                shown: self.shown(),
                reason: "this spyglass was built without Postgres support (the `postgres` feature, on by default); build it with that feature, or keep a SQLite file or memory".to_owned(),
            })
        }
    }
}

/// Opens (or creates) the `SQLite` store at `path` and a runtime continuing its stream.
/// What the journal holds past the database is replayed into it first (`journal`), and
/// the runtime's answers then wait for the journal, not for `SQLite`.
pub fn open_runtime(config: RuntimeConfig, path: &Path) -> Result<Runtime, StoreError> {
    let sqlite = SqliteStore::open_checked(path, config.accept_store_loss)?;
    let journal = Journal::recover(path, &sqlite)?;
    runtime_journaled(config, Arc::new(sqlite), journal)
}

/// A runtime whose event log continues `store`'s stream and writes every new event to it
/// (each answer waits for the commit holding what it did).
pub fn runtime_on(config: RuntimeConfig, store: Arc<dyn Store>) -> Result<Runtime, StoreError> {
    let reads = Arc::clone(&store);
    runtime_with(config, &*reads, None, move || StoreWriter::spawn(store))
}

/// `runtime_on` for a store behind `journal`: answers wait for the journal, and the
/// writer commits to `store` from it.
pub(crate) fn runtime_journaled(
    config: RuntimeConfig,
    store: Arc<dyn JournaledStore>,
    journal: Arc<Journal>,
) -> Result<Runtime, StoreError> {
    let reads = Arc::clone(&store);
    let writes = Arc::clone(&journal);
    runtime_with(config, &*reads, Some(journal), move || {
        StoreWriter::spawn_journaled(store, writes)
    })
}

/// The runtime on `store`, its log written by the writer `spawn` starts, and with
/// answers waiting for `journal` when there is one.
fn runtime_with(
    config: RuntimeConfig,
    store: &dyn Store,
    journal: Option<Arc<Journal>>,
    spawn: impl FnOnce() -> std::io::Result<StoreWriter>,
) -> Result<Runtime, StoreError> {
    let retained = config.retained_events.max(1);
    let stream = store.stream(&crate::log::new_epoch(), retained)?;
    let restored: Vec<Logged> = stream
        .events
        .into_iter()
        .filter_map(|e| Logged::restore(&e.text, e.tenant))
        .collect();
    let state = store.state()?;
    let path = store.describe();
    let writer = spawn().map_err(|source| StoreError::Thread { path, source })?;
    // The writer is in place before the history goes back, so what the capacity or the
    // byte budget evicts on the way in leaves the file too.
    let runtime = Runtime::with_log(config, move |config, budget| {
        let log = EventLog::new(config.retained_events, config.subscriber_queue, budget)
            .continuing(stream.epoch, stream.next_seqs)
            .with_writer(writer);
        match journal {
            Some(journal) => log.with_journal(journal),
            None => log,
        }
        .with_history(restored)
    });
    runtime.restore_state(state);
    if let Some(before_commit) = runtime.inner.log.before_commit() {
        // Held weakly: the writer thread must not keep the runtime alive.
        let weak = Arc::downgrade(&runtime.inner);
        let _ = before_commit.set(Box::new(move || {
            let Some(inner) = weak.upgrade() else {
                return false;
            };
            let runtime = Runtime { inner };
            runtime.write_moved_counters();
            if let Some(Err(err)) = runtime.inner.log.write_journal() {
                tracing::error!(%err, "store journal write failed; retried with the next");
            }
            true
        }));
    }
    Ok(runtime)
}

impl Runtime {
    /// Waits until every event so far is committed to the store (a clean shutdown, a
    /// test that reopens the file). Without a store it returns at once.
    pub fn flush_store(&self) {
        self.write_moved_counters();
        self.inner.log.flush();
    }

    /// A clean stop (`serve` on Ctrl-C or SIGTERM): everything committed, then the store
    /// closed, so a `SQLite` file holds it all without its write-ahead log or journal.
    /// Nothing may be written after it.
    pub fn close_store(&self) {
        self.write_moved_counters();
        self.inner.log.close_store();
    }
}

#[cfg(test)]
mod journal_tests;
#[cfg(test)]
mod refused_tests;
#[cfg(test)]
mod tests;
