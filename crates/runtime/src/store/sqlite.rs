//! The `SQLite` engine of `Store`: one file in WAL mode, schema versioned by `user_version`
//! with ordered migrations; a damaged file or a newer schema is an error, never a reset.

use super::journal::JournaledStore;
use super::{StateWrite, Store, StoreError, StoredEvent, StoredRecord, StoredStream};
use rusqlite::{Connection, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Migration `i` takes a store from schema version `i` to `i + 1`; a shipped one is never
/// edited, stores of every earlier version open through the rest. Seqs count per tenant,
/// so an event is `(tenant, seq)`; `ord` is the stamping order across tenants. Version 2
/// adds the runtime's state as JSON documents by `(kind, tenant, key)`: sessions, their
/// counters (a row of their own, so a call rewrites a few bytes, not the mock table),
/// approvals, eval runs, suite documents and outcomes. Version 3 changes no table: the
/// journal beside the file (`store::journal`) may hold call records, which a version
/// before it cannot read, so such a version refuses the file instead of misreading it.
const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE events (
        ord INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL,
        seq INTEGER NOT NULL,
        frame TEXT NOT NULL,
        UNIQUE (tenant, seq)
    );
    CREATE TABLE tenants (tenant TEXT PRIMARY KEY, next_seq INTEGER NOT NULL);
",
    "
    CREATE TABLE state (
        kind TEXT NOT NULL,
        tenant TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (kind, tenant, key)
    ) WITHOUT ROWID;
",
    "
    -- The journal's call records (tag 4): no table changes.
",
];

/// The bytes the write-ahead log is cut back to when a checkpoint rewinds it: about the
/// 1,000 pages `SQLite` checkpoints at, so a burst of large commits does not leave a large
/// file behind it (`journal_size_limit`).
pub const WAL_SIZE_LIMIT: i64 = 4 * 1024 * 1024;

/// The schema version this build writes.
// A handful of migrations: the cast cannot wrap.
#[expect(clippy::cast_possible_wrap)]
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub struct SqliteStore {
    path: PathBuf,
    conn: Mutex<Connection>,
    /// When `held` was last recorded (at most once a second after commits).
    held_at: Mutex<Option<std::time::Instant>>,
}

/// How often, at most, a commit records what the file holds (`SqliteStore::record_held`).
const RECORD_HELD_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// What the file held at its last commit, recorded beside it (`F.held`), outside its
/// write-ahead log: a reopen finding less (the `-wal` lost or damaged, an older copy put
/// back) is refused rather than silently starting from less. `seqs` is the sum of every
/// tenant's next seq, which never goes down.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Held {
    epoch: String,
    seqs: u64,
    at: String,
}

/// Where the record of what `path` held lives.
pub fn held_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".held");
    PathBuf::from(name)
}

/// The epoch and the sum of next seqs the connection's file holds.
fn holds(conn: &Connection) -> rusqlite::Result<(Option<String>, u64)> {
    let epoch: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = 'epoch'", [], |row| {
            row.get(0)
        })
        .optional()?;
    let seqs: i64 = conn.query_row(
        "SELECT coalesce(sum(next_seq), 0) FROM tenants",
        [],
        |row| row.get(0),
    )?;
    Ok((epoch, u64::try_from(seqs).unwrap_or(0)))
}

// The connection has nothing a reader of the Debug output needs.
#[expect(clippy::missing_fields_in_debug)]
impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

impl SqliteStore {
    /// Opens the store at `path`, creating it (and its directory) if missing, and brings
    /// its schema up to `SCHEMA_VERSION`. A read-only or full disk is named as such.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        Self::open_checked(path, false)
    }

    /// `open`, refusing a file that holds less than it last recorded holding
    /// (`StoreError::Shrunk`) unless `accept_loss` (`--accept-store-loss`), which goes on
    /// from what it holds and records that.
    pub fn open_checked(path: &Path, accept_loss: bool) -> Result<SqliteStore, StoreError> {
        let store = Self::open_file(path).map_err(|err| disk_problem(path, err))?;
        store.check_held(accept_loss)?;
        Ok(store)
    }

    /// Compares what the file holds with what it last recorded holding.
    fn check_held(&self, accept_loss: bool) -> Result<(), StoreError> {
        let record = held_path(&self.path);
        let Ok(text) = std::fs::read_to_string(&record) else {
            return Ok(());
        };
        let conn = self.conn();
        let (epoch, seqs) = holds(&conn).map_err(|source| StoreError::Corrupt {
            path: self.path.clone(),
            source,
        })?;
        let shrunk = match serde_json::from_str::<Held>(&text) {
            Ok(held) if epoch.as_deref() == Some(held.epoch.as_str()) && seqs >= held.seqs => None,
            Ok(held) => Some(StoreError::Shrunk {
                path: self.path.clone(),
                record: record.clone(),
                held: format!("{} events of stream {}", held.seqs, held.epoch),
                holds: match &epoch {
                    Some(epoch) => format!("it holds {seqs} events of stream {epoch}"),
                    None => "it holds no stream".to_owned(),
                },
                at: held.at,
            }),
            Err(err) => Some(StoreError::Shrunk {
                path: self.path.clone(),
                record: record.clone(),
                held: format!("an unreadable record ({err})"),
                holds: format!("it holds {seqs} events"),
                at: "an unknown time".to_owned(),
            }),
        };
        match shrunk {
            Some(err) if !accept_loss => Err(err),
            Some(err) => {
                tracing::warn!(%err, "store loss accepted (--accept-store-loss)");
                let _ = std::fs::remove_file(&record);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Records what the file holds now beside it (`held_path`): written whole to a
    /// temporary file and renamed over the record, so a record is never half written.
    /// `force` records even within `RECORD_HELD_EVERY` of the last.
    fn record_held(&self, conn: &Connection, force: bool) {
        {
            let mut at = self.held_at.lock().unwrap_or_else(PoisonError::into_inner);
            if !force && at.is_some_and(|t| t.elapsed() < RECORD_HELD_EVERY) {
                return;
            }
            *at = Some(std::time::Instant::now());
        }
        let Ok((Some(epoch), seqs)) = holds(conn) else {
            return;
        };
        let held = Held {
            epoch,
            seqs,
            at: spyglass_protocol::now_rfc3339(),
        };
        let record = held_path(&self.path);
        let mut tmp = record.clone().into_os_string();
        tmp.push(".tmp");
        let written = serde_json::to_vec(&held)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&tmp, bytes))
            .and_then(|()| std::fs::rename(&tmp, &record));
        if let Err(err) = written {
            tracing::warn!(%err, record = %record.display(), "could not record what the store holds");
        }
    }

    fn open_file(path: &Path) -> Result<SqliteStore, StoreError> {
        let path = path.to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Dir {
                path: path.clone(),
                source,
            })?;
        }
        let conn = Connection::open(&path).map_err(|source| StoreError::Open {
            path: path.clone(),
            source,
        })?;
        // One runtime per store: two would stamp the same seqs. EXCLUSIVE locking holds
        // the file from the first write until the connection closes, and a second
        // runtime's first read finds it busy.
        // A runtime that just stopped may take a moment to close the file; one still
        // running is refused after this.
        conn.busy_timeout(std::time::Duration::from_secs(2))
            .and_then(|()| conn.pragma_update(None, "locking_mode", "EXCLUSIVE"))
            .map_err(|source| StoreError::Open {
                path: path.clone(),
                source,
            })?;
        // The first read of the file is where SQLite finds it is not a database.
        // Only SQLite's own verdict calls the file damaged: an I/O error reading it (a
        // read-only or failing disk) is the disk's, and `open` names that.
        let corrupt = |source: rusqlite::Error| match source.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy) => StoreError::Locked { path: path.clone() },
            Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt)
            | None => StoreError::Corrupt {
                path: path.clone(),
                source,
            },
            Some(_) => StoreError::Open {
                path: path.clone(),
                source,
            },
        };
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(corrupt)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path,
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        let check: String = conn
            .query_row("PRAGMA quick_check", [], |row| row.get(0))
            .map_err(corrupt)?;
        if check != "ok" {
            return Err(corrupt(rusqlite::Error::InvalidQuery).map_path_note(&check));
        }
        // WAL: readers never wait for the writer, and a commit is one append to the log.
        // NORMAL: a commit survives the process being killed; only power loss may take
        // the last ones (docs/RELIABILITY.md).
        conn.pragma_update(None, "journal_mode", "WAL")
            .and_then(|()| conn.pragma_update(None, "synchronous", "NORMAL"))
            // The log is rewound at each checkpoint but keeps its size, the largest any
            // commit between two checkpoints made it; cut back to this at a rewind.
            .and_then(|()| conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT))
            // A write takes the exclusive lock now, not at the first event.
            .and_then(|()| conn.execute_batch("BEGIN IMMEDIATE; COMMIT;"))
            .map_err(|source| {
                if source.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) {
                    StoreError::Locked { path: path.clone() }
                } else {
                    StoreError::Open {
                        path: path.clone(),
                        source,
                    }
                }
            })?;
        let store = SqliteStore {
            path,
            conn: Mutex::new(conn),
            held_at: Mutex::new(None),
        };
        store.migrate(version)?;
        Ok(store)
    }

    /// Each tenant's newest seq in the events table (a journal's replay skips what is
    /// there; the tenants' next seqs also count events only the journal holds).
    pub fn newest_stored_seqs(&self) -> Result<Vec<(String, u64)>, StoreError> {
        tenant_seqs(
            &self.conn(),
            "SELECT tenant, MAX(seq) FROM events GROUP BY tenant",
            0,
        )
        .map_err(|source| StoreError::Corrupt {
            path: self.path.clone(),
            source,
        })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write_error(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Write {
            path: self.path.clone(),
            source,
        }
    }

    /// Applies every migration after `from`, each in its own transaction with its
    /// version bump, so a store is never left between two versions.
    fn migrate(&self, from: i64) -> Result<(), StoreError> {
        let mut conn = self.conn();
        for (index, sql) in MIGRATIONS.iter().enumerate().skip(from.max(0) as usize) {
            let tx = conn.transaction().map_err(|e| self.write_error(e))?;
            tx.execute_batch(sql).map_err(|e| self.write_error(e))?;
            tx.pragma_update(
                None,
                "user_version",
                i64::try_from(index + 1).unwrap_or(i64::MAX),
            )
            .map_err(|e| self.write_error(e))?;
            tx.commit().map_err(|e| self.write_error(e))?;
        }
        Ok(())
    }
}

/// The `(tenant, seq)` rows `sql` selects, each seq at least `least`.
fn tenant_seqs(conn: &Connection, sql: &str, least: i64) -> rusqlite::Result<Vec<(String, u64)>> {
    let mut statement = conn.prepare(sql)?;
    statement
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, i64>(1)?.max(least).unsigned_abs(),
            ))
        })?
        .collect()
}

/// Turns a failure to open or first write a store into what the disk says, when it says
/// something: `SQLite`'s own read-only and full codes, else a probe of the file and its
/// directory (`SQLite` reports a read-only directory as "unable to open"). Other errors
/// pass as they are.
fn disk_problem(path: &Path, err: StoreError) -> StoreError {
    use std::io::ErrorKind;
    let code = match &err {
        StoreError::Open { source, .. } | StoreError::Write { source, .. } => {
            source.sqlite_error_code()
        }
        StoreError::Dir { source, .. } => match source.kind() {
            ErrorKind::ReadOnlyFilesystem | ErrorKind::PermissionDenied => {
                return StoreError::ReadOnly {
                    path: path.to_path_buf(),
                    reason: source.to_string(),
                };
            }
            ErrorKind::StorageFull => {
                return StoreError::Full {
                    path: path.to_path_buf(),
                };
            }
            _ => return err,
        },
        _ => return err,
    };
    match code {
        Some(rusqlite::ErrorCode::DiskFull) => StoreError::Full {
            path: path.to_path_buf(),
        },
        Some(
            rusqlite::ErrorCode::ReadOnly
            | rusqlite::ErrorCode::CannotOpen
            | rusqlite::ErrorCode::PermissionDenied
            | rusqlite::ErrorCode::SystemIoFailure,
        ) => match probe(path) {
            Some(io) if io.kind() == ErrorKind::StorageFull => StoreError::Full {
                path: path.to_path_buf(),
            },
            Some(io) => StoreError::ReadOnly {
                path: path.to_path_buf(),
                reason: io.to_string(),
            },
            None if code == Some(rusqlite::ErrorCode::ReadOnly) => StoreError::ReadOnly {
                path: path.to_path_buf(),
                reason: "SQLite opened it read-only".to_owned(),
            },
            None => err,
        },
        _ => err,
    }
}

/// Whether the file can be opened for writing and its directory can take a new page:
/// the io error of the first step that fails (read-only, permission, full), if any.
fn probe(path: &Path) -> Option<std::io::Error> {
    use std::io::{ErrorKind, Write};
    if path.exists()
        && let Err(err) = std::fs::OpenOptions::new().append(true).open(path)
    {
        return Some(err);
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let probe = dir.join(format!(".spyglass-probe-{}", std::process::id()));
    let result = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .and_then(|mut file| {
            file.write_all(&[0; 4096])?;
            file.sync_all()
        });
    let _ = std::fs::remove_file(&probe);
    result.err().filter(|err| {
        matches!(
            err.kind(),
            ErrorKind::ReadOnlyFilesystem | ErrorKind::PermissionDenied | ErrorKind::StorageFull
        )
    })
}

trait PathNote {
    fn map_path_note(self, note: &str) -> Self;
}

impl PathNote for StoreError {
    /// A failed integrity check has no `SQLite` error to carry; its report is the reason.
    fn map_path_note(self, note: &str) -> Self {
        match self {
            StoreError::Corrupt { path, .. } => StoreError::Corrupt {
                path,
                source: rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
                    Some(note.chars().take(200).collect()),
                ),
            },
            other => other,
        }
    }
}

impl Store for SqliteStore {
    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn stream(&self, fresh_epoch: &str, retained: usize) -> Result<StoredStream, StoreError> {
        let conn = self.conn();
        let read = |source| StoreError::Corrupt {
            path: self.path.clone(),
            source,
        };
        let epoch: Option<String> = conn
            .query_row("SELECT value FROM meta WHERE key = 'epoch'", [], |row| {
                row.get(0)
            })
            .optional()
            .map_err(read)?;
        let epoch = if let Some(epoch) = epoch {
            epoch
        } else {
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('epoch', ?1)",
                params![fresh_epoch],
            )
            .map_err(|e| self.write_error(e))?;
            fresh_epoch.to_owned()
        };
        let next_seqs = tenant_seqs(
            &conn,
            "SELECT tenant, next_seq FROM tenants ORDER BY tenant",
            1,
        )
        .map_err(read)?;
        let limit = i64::try_from(retained).unwrap_or(i64::MAX);
        let mut statement = conn
            .prepare(
                "SELECT ord, tenant, seq, frame FROM
                   (SELECT ord, tenant, seq, frame FROM events ORDER BY ord DESC LIMIT ?1)
                 ORDER BY ord",
            )
            .map_err(read)?;
        let rows = statement
            .query_map(params![limit], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    StoredEvent {
                        tenant: row.get(1)?,
                        seq: row.get::<_, i64>(2)?.max(0) as u64,
                        text: row.get(3)?,
                    },
                ))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(read)?;
        drop(statement);
        // Appends mirror the rings' evictions, so more than `retained` rows only remain
        // after a write that failed: what the log will not hold leaves the file here,
        // once, not on every commit.
        if let Some((oldest, _)) = rows
            .first()
            .filter(|_| i64::try_from(rows.len()).unwrap_or(i64::MAX) >= limit)
        {
            conn.execute("DELETE FROM events WHERE ord < ?1", params![oldest])
                .map_err(|e| self.write_error(e))?;
        }
        let events = rows.into_iter().map(|(_, event)| event).collect();
        Ok(StoredStream {
            epoch,
            next_seqs,
            events,
        })
    }

    fn state(&self) -> Result<Vec<StoredRecord>, StoreError> {
        let conn = self.conn();
        conn.prepare("SELECT kind, tenant, key, value FROM state ORDER BY kind, tenant, key")
            .and_then(|mut statement| {
                statement
                    .query_map([], |row| {
                        Ok(StoredRecord {
                            kind: row.get(0)?,
                            tenant: row.get(1)?,
                            key: row.get(2)?,
                            value: row.get(3)?,
                        })
                    })
                    .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            })
            .map_err(|source| StoreError::Corrupt {
                path: self.path.clone(),
                source,
            })
    }

    fn append(
        &self,
        events: &[StoredEvent],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<(), StoreError> {
        self.append_journaled(events, &[], evicted, state)
    }

    /// The write-ahead log checkpointed into the database and truncated, then what the
    /// file holds recorded: after a clean stop the file alone holds everything.
    fn close(&self) -> Result<(), StoreError> {
        let conn = self.conn();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(|e| self.write_error(e))?;
        self.record_held(&conn, true);
        Ok(())
    }
}

impl JournaledStore for SqliteStore {
    fn append_journaled(
        &self,
        events: &[StoredEvent],
        next_seqs: &[(String, u64)],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<(), StoreError> {
        if events.is_empty() && next_seqs.is_empty() && evicted.is_empty() && state.is_empty() {
            return Ok(());
        }
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| self.write_error(e))?;
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO events (tenant, seq, frame) VALUES (?1, ?2, ?3)",
                )
                .map_err(|e| self.write_error(e))?;
            let mut next = tx
                .prepare_cached(
                    "INSERT INTO tenants (tenant, next_seq) VALUES (?1, ?2)
                     ON CONFLICT (tenant) DO UPDATE
                     SET next_seq = MAX(next_seq, excluded.next_seq)",
                )
                .map_err(|e| self.write_error(e))?;
            // Each tenant's next seq once per batch, not once per event.
            let mut newest: Vec<(&str, i64)> = Vec::new();
            for event in events {
                let seq = i64::try_from(event.seq).unwrap_or(i64::MAX);
                insert
                    .execute(params![event.tenant, seq, event.text])
                    .map_err(|e| self.write_error(e))?;
                match newest.iter_mut().find(|(t, _)| *t == event.tenant) {
                    Some((_, upto)) => *upto = (*upto).max(seq),
                    None => newest.push((&event.tenant, seq)),
                }
            }
            for (tenant, seq) in newest {
                next.execute(params![tenant, seq.saturating_add(1)])
                    .map_err(|e| self.write_error(e))?;
            }
            for (tenant, seq) in next_seqs {
                let seq = i64::try_from(*seq).unwrap_or(i64::MAX);
                next.execute(params![tenant, seq])
                    .map_err(|e| self.write_error(e))?;
            }
            // The file holds what the rings hold: a tenant's evictions are its oldest.
            let mut evict = tx
                .prepare_cached("DELETE FROM events WHERE tenant = ?1 AND seq <= ?2")
                .map_err(|e| self.write_error(e))?;
            for (tenant, seq) in evicted {
                let seq = i64::try_from(*seq).unwrap_or(i64::MAX);
                evict
                    .execute(params![tenant, seq])
                    .map_err(|e| self.write_error(e))?;
            }
            let mut put = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO state (kind, tenant, key, value) VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(|e| self.write_error(e))?;
            let mut delete = tx
                .prepare_cached("DELETE FROM state WHERE kind = ?1 AND tenant = ?2 AND key = ?3")
                .map_err(|e| self.write_error(e))?;
            for write in state {
                match write {
                    StateWrite::Put(r) => put.execute(params![r.kind, r.tenant, r.key, r.value]),
                    StateWrite::Delete(r) => delete.execute(params![r.kind, r.tenant, r.key]),
                }
                .map_err(|e| self.write_error(e))?;
            }
        }
        tx.commit().map_err(|e| self.write_error(e))?;
        self.record_held(&conn, false);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(tenant: &str, seq: u64) -> StoredEvent {
        StoredEvent {
            tenant: tenant.into(),
            seq,
            text: format!(r#"{{"kind":"session.closed","seq":{seq},"ts":"t"}}"#),
        }
    }

    fn kept(stream: &StoredStream) -> Vec<(&str, u64)> {
        stream
            .events
            .iter()
            .map(|e| (e.tenant.as_str(), e.seq))
            .collect()
    }

    #[test]
    fn a_reopened_store_keeps_its_epoch_and_newest_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/runtime.db");
        let store = SqliteStore::open(&path).unwrap();
        let first = store.stream("ep_1", 3).unwrap();
        assert_eq!(first.epoch, "ep_1");
        assert!(first.next_seqs.is_empty());
        store
            .append(
                &(1..=5).map(|seq| event("default", seq)).collect::<Vec<_>>(),
                &[],
                &[],
            )
            .unwrap();
        drop(store);
        let store = SqliteStore::open(&path).unwrap();
        let again = store.stream("ep_2", 3).unwrap();
        assert_eq!(again.epoch, "ep_1", "the stream continues");
        assert_eq!(again.next_seqs, [("default".to_owned(), 6)]);
        assert_eq!(
            kept(&again),
            [("default", 3), ("default", 4), ("default", 5)]
        );
    }

    #[test]
    fn what_the_file_held_is_recorded_and_a_damaged_record_refuses_until_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runtime.db");
        let store = SqliteStore::open(&path).unwrap();
        store.stream("ep_1", 10).unwrap();
        let events: Vec<_> = (1..=5).map(|seq| event("default", seq)).collect();
        store.append(&events, &[], &[]).unwrap();
        store.close().unwrap();
        drop(store);
        let record = held_path(&path);
        let held: Held = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
        assert_eq!((held.epoch.as_str(), held.seqs), ("ep_1", 6));
        // The same file opens; a record saying more than it holds, or one that cannot
        // be read, does not.
        drop(SqliteStore::open(&path).unwrap());
        for text in [
            r#"{"epoch":"ep_1","seqs":7,"at":"2026-11-28T00:00:00Z"}"#,
            r#"{"epoch":"ep_0","seqs":1,"at":"2026-11-28T00:00:00Z"}"#,
            "{\"epoch\":",
            "",
        ] {
            std::fs::write(&record, text).unwrap();
            let err = SqliteStore::open(&path).unwrap_err();
            assert!(matches!(err, StoreError::Shrunk { .. }), "{text}: {err}");
            assert!(err.to_string().contains("--accept-store-loss"), "{err}");
        }
        // Accepted, the store opens and forgets the record; it is written anew.
        let store = SqliteStore::open_checked(&path, true).unwrap();
        assert!(!record.exists());
        store.close().unwrap();
        drop(store);
        drop(SqliteStore::open(&path).unwrap());
    }

    #[test]
    fn tenants_keep_their_own_seqs_order_and_evictions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runtime.db");
        let store = SqliteStore::open(&path).unwrap();
        store.stream("ep_1", 100).unwrap();
        let batch = [
            event("a", 1),
            event("b", 1),
            event("a", 2),
            event("b", 2),
            event("a", 3),
        ];
        store.append(&batch, &[], &[]).unwrap();
        // a's two oldest left the ring: they leave the file, b's seq 1 and 2 stay.
        store
            .append(&[event("b", 3)], &[("a".into(), 2)], &[])
            .unwrap();
        // A tenant whose every event was evicted still goes on from its own seq.
        store.append(&[], &[("b".into(), 3)], &[]).unwrap();
        drop(store);
        let again = SqliteStore::open(&path)
            .unwrap()
            .stream("ep_2", 100)
            .unwrap();
        assert_eq!(kept(&again), [("a", 3)]);
        assert_eq!(again.next_seqs, [("a".to_owned(), 4), ("b".to_owned(), 4)]);
    }

    #[test]
    fn a_damaged_file_and_a_newer_schema_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.db");
        std::fs::write(&junk, vec![0x5a; 8192]).unwrap();
        let err = SqliteStore::open(&junk).unwrap_err().to_string();
        assert!(err.contains("junk.db") && err.contains("damaged"), "{err}");
        assert_eq!(
            std::fs::read(&junk).unwrap(),
            vec![0x5a; 8192],
            "left as it was"
        );

        let newer = dir.path().join("newer.db");
        Connection::open(&newer)
            .unwrap()
            .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        let err = SqliteStore::open(&newer).unwrap_err().to_string();
        assert!(
            err.contains("newer.db") && err.contains("newer than this spyglass"),
            "{err}"
        );
    }

    #[test]
    fn a_store_held_by_another_runtime_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("held.db");
        let first = SqliteStore::open(&path).unwrap();
        first.stream("ep_1", 10).unwrap();
        let err = SqliteStore::open(&path).unwrap_err().to_string();
        assert!(
            err.contains("held.db") && err.contains("in use by another spyglass runtime"),
            "{err}"
        );
        drop(first);
        SqliteStore::open(&path).expect("free again once the first one closed");
    }
}
