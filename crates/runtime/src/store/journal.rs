//! The `SQLite` store's journal: what an answer waits for, and where events stay while
//! the rings hold them. Events and documents go to append-only segment files next to the
//! database, one `write` per group of answers; documents reach `SQLite` in large commits,
//! events only past the journal's bound or at a clean close; at open it is replayed.
//!
//! A record is `[payload length: u32 LE][CRC-32 of the payload: u32 LE][payload]`; the
//! payload is a tag byte (`1` event, `2` document put, `3` document delete, `4` a
//! `tool.called` event answered with a result) and its fields, each string as
//! `[length: u32 LE][bytes]` (the last one to the record's end). A record that does not
//! check ends its segment (a write torn by a power cut): the ones before it are replayed,
//! the rest is reported and left out. One that checks but does not read (a newer
//! version's) is reported and skipped.

use super::{SqliteStore, StateWrite, Store, StoreError, StoredEvent, StoredRecord};
use crate::log::Logged;
use spyglass_protocol::events::{CallSource, Counter, Outcome, ToolCalled};
use spyglass_protocol::{Event, Frame, RawJson};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A segment past this size is closed and a new one started.
pub const SEGMENT_BYTES: u64 = 4 * 1024 * 1024;

/// Closed segments a journal keeps at most: events stay in the journal while the rings
/// may hold them (a closed segment is deleted once none of its events is retained), and
/// past this many the oldest one's retained events move into the database. 256 MiB, the
/// runtime's default byte budget: at most what memory may hold.
pub const KEEP_CLOSED: usize = 64;

/// Records, and their bytes, that a failing disk keeps waiting at most (the oldest go
/// past either); the same bounds as the writer's.
const MAX_UNWRITTEN: usize = 65_536;
const MAX_UNWRITTEN_BYTES: usize = 64 * 1024 * 1024;

/// The most records an emptied group keeps room for, to take the next group's.
const SPARE_RECORDS: usize = 4096;

const EVENT: u8 = 1;
const PUT: u8 = 2;
const DELETE: u8 = 3;
/// A `tool.called` event answered with a result, as its fields (`encode_call`).
const CALL: u8 = 4;

/// What the log hands the store, in the order it happened.
pub enum Record {
    Event(Arc<Logged>),
    State(StateWrite),
    /// Every record before this one is in segments up to this one's number.
    SegmentEnd(u64),
}

impl Record {
    /// Bytes it holds, for the bound on what waits for a failing disk.
    fn bytes(&self) -> usize {
        match self {
            Record::Event(logged) => logged.bytes(),
            Record::State(StateWrite::Put(r) | StateWrite::Delete(r)) => {
                r.kind.len() + r.tenant.len() + r.key.len() + r.value.len()
            }
            Record::SegmentEnd(_) => 0,
        }
    }
}

/// The segment being written.
struct Segment {
    number: u64,
    file: File,
    len: u64,
    /// Records whose write failed: written before anything newer.
    unwritten: Vec<Record>,
    /// An empty queue with room, the last group's (`write_out`).
    spare: Vec<Record>,
    buf: Vec<u8>,
}

/// Each tenant's newest seq the log evicted, one atomic per tenant the log stores into as
/// it evicts (no record per eviction); the store's writer reads them at each commit to
/// know which segments still hold retained events. A replay never needs them: the stream
/// is cut to the retained count at open.
#[derive(Default)]
pub struct Evictions(Mutex<Vec<(Arc<str>, Arc<AtomicU64>)>>);

impl Evictions {
    /// A tenant's own counter, at its first eviction (of `seq`: the writer never reads a
    /// counter that has not counted one).
    pub fn register(&self, tenant: Arc<str>, seq: u64) -> Arc<AtomicU64> {
        let upto = Arc::new(AtomicU64::new(seq));
        lock(&self.0).push((tenant, Arc::clone(&upto)));
        upto
    }

    /// Each tenant and its newest evicted seq.
    pub fn each(&self, mut f: impl FnMut(&str, u64)) {
        for (tenant, upto) in lock(&self.0).iter() {
            f(tenant, upto.load(Ordering::Relaxed));
        }
    }
}

pub struct Journal {
    /// The database's path: segment `n` is `<path>-redo-<n>`.
    db: PathBuf,
    /// Pushed by the log, not yet written.
    pending: Mutex<Vec<Record>>,
    segment: Mutex<Segment>,
    /// Written, in file order, for the store's writer to commit.
    written: Mutex<Vec<Record>>,
    /// What the log evicted, per tenant.
    evictions: Evictions,
    /// `SEGMENT_BYTES` and `KEEP_CLOSED`, smaller in tests.
    segment_bytes: u64,
    keep_closed: usize,
    /// `fail_writes`.
    #[cfg(test)]
    failing: std::sync::atomic::AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A store behind a journal (`SQLite`'s): what the writer thread commits from the
/// journal, which keeps the events the rings hold.
pub trait JournaledStore: Store {
    /// `Store::append` for a store behind the journal: `events` are only those the journal
    /// moved here, and `next_seqs` says where each tenant's seqs stand though the rest of
    /// its events are not here.
    fn append_journaled(
        &self,
        events: &[StoredEvent],
        next_seqs: &[(String, u64)],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<(), StoreError>;
}

/// Segment `number` of the store at `db`.
pub(crate) fn segment_path(db: &Path, number: u64) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(format!("-redo-{number}"));
    PathBuf::from(name)
}

/// The segments of the store at `db` on disk, oldest first.
pub(crate) fn segments(db: &Path) -> std::io::Result<Vec<(u64, PathBuf)>> {
    let dir = db
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let Some(name) = db.file_name().and_then(|n| n.to_str()) else {
        return Ok(Vec::new());
    };
    let prefix = format!("{name}-redo-");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let file_name = entry.file_name();
        let Some(number) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        found.push((number, entry.path()));
    }
    found.sort_unstable();
    Ok(found)
}

fn put_u32(buf: &mut Vec<u8>, value: u32) {
    buf.extend_from_slice(&value.to_le_bytes());
}

/// `[0]` for none, else `[1]` and the value.
fn put_opt_u32(buf: &mut Vec<u8>, value: Option<u32>) {
    match value {
        None => buf.push(0),
        Some(value) => {
            buf.push(1);
            put_u32(buf, value);
        }
    }
}

/// A `tool.called` event answered with `result`, as its fields rather than its wire
/// text: an answer's path writes these bytes and never encodes the text, which is made
/// when the event is read back (a replay, a move into the database) or a subscriber
/// asks for it. Every field is written, so the text read back is the one `encode` gives.
fn encode_call(buf: &mut Vec<u8>, logged: &Logged, call: &ToolCalled, result: &RawJson) {
    let ToolCalled {
        call_id,
        tool,
        input,
        outcome: _,
        started_at,
        duration,
        counter,
        source,
        iteration,
    } = call;
    let frame = &logged.frame;
    buf.push(CALL);
    put_str(buf, &logged.tenant);
    buf.extend_from_slice(&frame.seq.to_le_bytes());
    put_str(buf, &frame.ts);
    match &frame.session_id {
        None => buf.push(0),
        Some(id) => {
            buf.push(1);
            put_str(buf, id);
        }
    }
    put_str(buf, call_id);
    put_str(buf, tool);
    put_str(buf, input.get());
    put_str(buf, result.get());
    put_str(buf, started_at);
    buf.extend_from_slice(&duration.to_bits().to_le_bytes());
    match counter {
        None => buf.push(0),
        Some(Counter {
            consumed,
            total,
            rule,
            fallback,
        }) => {
            buf.push(1 | u8::from(*fallback) << 1);
            put_u32(buf, *consumed);
            put_opt_u32(buf, *total);
            put_opt_u32(buf, *rule);
        }
    }
    buf.push(match source {
        CallSource::Execute => 0,
        CallSource::Send => 1,
    });
    put_opt_u32(buf, *iteration);
}

/// What `encode_call` wrote, as the event's stored text; `None` where it does not read.
fn decode_call(fields: &mut Fields<'_>) -> Option<StoredEvent> {
    let tenant = fields.str()?;
    let seq = fields.u64()?;
    let ts = fields.str()?;
    let session_id = match fields.byte()? {
        0 => None,
        1 => Some(fields.str()?.into()),
        _ => return None,
    };
    let call_id = fields.str()?.into();
    let tool = fields.str()?.into();
    let input = RawJson::from_string(fields.str()?).ok()?;
    let result = RawJson::from_string(fields.str()?).ok()?;
    let started_at = fields.str()?.into();
    let duration = f64::from_bits(fields.u64()?);
    let counter = match fields.byte()? {
        0 => None,
        flags @ (1 | 3) => Some(Counter {
            consumed: fields.u32_value()?,
            total: fields.opt_u32().ok()?,
            rule: fields.opt_u32().ok()?,
            fallback: flags == 3,
        }),
        _ => return None,
    };
    let source = match fields.byte()? {
        0 => CallSource::Execute,
        1 => CallSource::Send,
        _ => return None,
    };
    let iteration = fields.opt_u32().ok()?;
    if !fields.0.is_empty() {
        return None;
    }
    let frame = Frame {
        seq,
        ts: ts.into(),
        session_id,
        event: Event::ToolCalled(ToolCalled {
            call_id,
            tool,
            input,
            outcome: Outcome::Result(result),
            started_at,
            duration,
            counter,
            source,
            iteration,
        }),
    };
    Some(StoredEvent {
        tenant,
        seq,
        text: spyglass_protocol::encode(&frame),
    })
}

fn put_str(buf: &mut Vec<u8>, text: &str) {
    // A string longer than 4 GiB cannot reach here: request bodies are bounded far below.
    buf.extend_from_slice(&u32::try_from(text.len()).unwrap_or(u32::MAX).to_le_bytes());
    buf.extend_from_slice(text.as_bytes());
}

/// Appends `record`'s bytes to `buf`; false for one the file does not take (evictions,
/// segment ends).
fn encode(record: &Record, buf: &mut Vec<u8>) -> bool {
    let start = buf.len();
    buf.extend_from_slice(&[0; 8]);
    match record {
        Record::Event(logged) => match &logged.frame.event {
            Event::ToolCalled(call) if let Outcome::Result(result) = &call.outcome => {
                encode_call(buf, logged, call, result);
            }
            _ => {
                buf.push(EVENT);
                put_str(buf, &logged.tenant);
                buf.extend_from_slice(&logged.frame.seq.to_le_bytes());
                buf.extend_from_slice(logged.text().as_bytes());
            }
        },
        Record::State(write) => {
            let (tag, r) = match write {
                StateWrite::Put(r) => (PUT, r),
                StateWrite::Delete(r) => (DELETE, r),
            };
            buf.push(tag);
            put_str(buf, &r.kind);
            put_str(buf, &r.tenant);
            put_str(buf, &r.key);
            if tag == PUT {
                buf.extend_from_slice(r.value.as_bytes());
            }
        }
        Record::SegmentEnd(_) => {
            buf.truncate(start);
            return false;
        }
    }
    let payload = &buf[start + 8..];
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let crc = crc32fast::hash(payload);
    buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    true
}

/// What one segment's bytes replay.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Replayed {
    pub(crate) events: Vec<StoredEvent>,
    pub(crate) writes: Vec<StateWrite>,
    /// Bytes past the last record that checked (a torn or damaged tail).
    pub(crate) dropped: usize,
    /// Records that checked but did not read (a newer version's), skipped.
    pub(crate) unreadable: usize,
}

/// A payload that runs short or holds a value no writer writes.
struct Short;

/// A reader over one record's payload; `None` where it runs short.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }

    fn u32(&mut self) -> Option<usize> {
        let bytes: [u8; 4] = self.take(4)?.try_into().ok()?;
        usize::try_from(u32::from_le_bytes(bytes)).ok()
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u32_value(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    /// `put_opt_u32`'s value; `Err` where it does not read.
    fn opt_u32(&mut self) -> Result<Option<u32>, Short> {
        match self.byte().ok_or(Short)? {
            0 => Ok(None),
            1 => Ok(Some(self.u32_value().ok_or(Short)?)),
            _ => Err(Short),
        }
    }

    fn str(&mut self) -> Option<String> {
        let n = self.u32()?;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }

    fn rest(&mut self) -> Option<String> {
        String::from_utf8(std::mem::take(&mut self.0).to_vec()).ok()
    }
}

/// The records of one segment's bytes, up to the first that does not check.
pub(crate) fn decode(bytes: &[u8]) -> Replayed {
    let mut out = Replayed::default();
    let mut at = 0;
    while at < bytes.len() {
        let payload = (|| {
            let mut head = Fields(bytes.get(at..)?);
            let len = head.u32()?;
            let crc = u32::try_from(head.u32()?).ok()?;
            let payload = head.take(len)?;
            (crc32fast::hash(payload) == crc).then_some(payload)
        })();
        let Some(payload) = payload else {
            out.dropped = bytes.len() - at;
            break;
        };
        match read_payload(payload) {
            Some(Ok(write)) => out.writes.push(write),
            Some(Err(event)) => out.events.push(event),
            None => out.unreadable += 1,
        }
        at += 8 + payload.len();
    }
    out
}

/// One checked record's payload: a document write, or an event.
fn read_payload(payload: &[u8]) -> Option<Result<StateWrite, StoredEvent>> {
    let mut fields = Fields(payload);
    let tag = fields.byte()?;
    Some(match tag {
        EVENT => {
            let tenant = fields.str()?;
            let seq = fields.u64()?;
            Err(StoredEvent {
                tenant,
                seq,
                text: fields.rest()?,
            })
        }
        CALL => Err(decode_call(&mut fields)?),
        PUT | DELETE => {
            let r = StoredRecord {
                kind: fields.str()?,
                tenant: fields.str()?,
                key: fields.str()?,
                value: if tag == PUT {
                    fields.rest()?
                } else {
                    String::new()
                },
            };
            Ok(if tag == PUT {
                StateWrite::Put(r)
            } else {
                StateWrite::Delete(r)
            })
        }
        _ => return None,
    })
}

/// How many of the oldest of these records must go to keep the rest within
/// `MAX_UNWRITTEN` and `MAX_UNWRITTEN_BYTES`.
fn excess(records: &[Record]) -> usize {
    let (mut kept, mut bytes) = (0, 0usize);
    for record in records.iter().rev() {
        if kept == MAX_UNWRITTEN || bytes + record.bytes() > MAX_UNWRITTEN_BYTES {
            break;
        }
        kept += 1;
        bytes += record.bytes();
    }
    records.len() - kept
}

fn journal_error(path: &Path, source: &std::io::Error) -> StoreError {
    match source.kind() {
        std::io::ErrorKind::StorageFull => StoreError::Full {
            path: path.to_path_buf(),
        },
        std::io::ErrorKind::ReadOnlyFilesystem | std::io::ErrorKind::PermissionDenied => {
            StoreError::ReadOnly {
                path: path.to_path_buf(),
                reason: source.to_string(),
            }
        }
        _ => StoreError::Journal {
            path: path.to_path_buf(),
            reason: source.to_string(),
        },
    }
}

impl Journal {
    /// Replays into `store` what the journal of the store at `db` holds (all of it: what
    /// `SQLite` already has is skipped or written again to the same effect), deletes the
    /// replayed segments and starts a new one.
    pub fn recover(db: &Path, store: &SqliteStore) -> Result<Arc<Journal>, StoreError> {
        Self::recover_with(db, store, SEGMENT_BYTES, KEEP_CLOSED)
    }

    /// `recover`, closing segments past `segment_bytes` and keeping `keep_closed`.
    pub(crate) fn recover_with(
        db: &Path,
        store: &SqliteStore,
        segment_bytes: u64,
        keep_closed: usize,
    ) -> Result<Arc<Journal>, StoreError> {
        let found = segments(db).map_err(|e| journal_error(db, &e))?;
        let mut next_number = 1;
        if !found.is_empty() {
            // The events table's newest, not the tenants' next seqs: those run past what
            // stayed in the journal.
            let mut next: HashMap<String, u64> = store
                .newest_stored_seqs()?
                .into_iter()
                .map(|(tenant, seq)| (tenant, seq + 1))
                .collect();
            for (number, path) in found {
                let bytes = std::fs::read(&path).map_err(|e| journal_error(&path, &e))?;
                let mut replayed = decode(&bytes);
                if replayed.unreadable > 0 {
                    tracing::warn!(
                        path = %path.display(),
                        records = replayed.unreadable,
                        "the store's journal holds records this version cannot read (written by a newer one?); they are left out"
                    );
                }
                if replayed.dropped > 0 {
                    tracing::warn!(
                        path = %path.display(),
                        bytes = replayed.dropped,
                        "the store's journal ends in a record that does not check (a write torn by a crash); what follows it is left out"
                    );
                }
                // An event the database has (moved there before a crash left its segment
                // behind) is not written again: it would move to the end of the order.
                replayed.events.retain(|event| {
                    let at = next.entry(event.tenant.clone()).or_insert(1);
                    let new = event.seq >= *at;
                    if new {
                        *at = event.seq + 1;
                    }
                    new
                });
                store.append(&replayed.events, &[], &replayed.writes)?;
                std::fs::remove_file(&path).map_err(|e| journal_error(&path, &e))?;
                next_number = number + 1;
            }
        }
        let path = segment_path(db, next_number);
        let file = File::create(&path).map_err(|e| journal_error(&path, &e))?;
        Ok(Arc::new(Journal {
            db: db.to_path_buf(),
            pending: Mutex::new(Vec::new()),
            segment: Mutex::new(Segment {
                number: next_number,
                file,
                len: 0,
                unwritten: Vec::new(),
                spare: Vec::new(),
                buf: Vec::new(),
            }),
            written: Mutex::new(Vec::new()),
            evictions: Evictions::default(),
            segment_bytes,
            keep_closed,
            #[cfg(test)]
            failing: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// What the log evicted, per tenant.
    pub fn evictions(&self) -> &Evictions {
        &self.evictions
    }

    /// Closed segments kept at most before the oldest one's events move (`KEEP_CLOSED`).
    pub fn keep_closed(&self) -> usize {
        self.keep_closed
    }

    /// The number of the segment being written.
    pub fn current(&self) -> u64 {
        lock(&self.segment).number
    }

    /// The events of segment `number` that `retained` keeps (by tenant and seq), read
    /// back from its file; `None` where it cannot be read (a warning says so, and the
    /// segment must stay for a reopen to replay).
    pub fn retained_events(
        &self,
        number: u64,
        retained: impl Fn(&str, u64) -> bool,
    ) -> Option<Vec<StoredEvent>> {
        let path = segment_path(&self.db, number);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let mut events = decode(&bytes).events;
                events.retain(|e| retained(&e.tenant, e.seq));
                Some(events)
            }
            Err(err) => {
                tracing::warn!(%err, path = %path.display(), "cannot read a journal segment back; it stays for the next open to replay");
                None
            }
        }
    }

    /// Deletes segment `number`.
    pub fn remove(&self, number: u64) {
        let path = segment_path(&self.db, number);
        if let Err(err) = std::fs::remove_file(&path)
            && err.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(%err, path = %path.display(), "cannot delete a journal segment");
        }
    }

    /// Queues a record; the next `write_out` writes it.
    pub fn push(&self, record: Record) {
        lock(&self.pending).push(record);
    }

    /// Writes everything pushed so far, in one `write`, and hands it to the store's
    /// writer: once this returns `Ok` it survives the process being killed. Whoever
    /// comes while a write is under way waits for it, then writes what came since. A
    /// failed write keeps the whole group for the next one.
    pub fn write_out(&self) -> Result<(), String> {
        self.write_group(None)
    }

    /// `write_out` for a log that takes back what was not written: `written` sees each
    /// group written, in file order; a failed write keeps only the group's documents for
    /// the next one and hands its events to `refused`, which takes back every event not
    /// written (`take_pending_events`). Both run while no other write can start, so what
    /// they see is in file order and nothing newer is written under them.
    pub fn write_out_with(
        &self,
        written: &dyn Fn(&[Record]),
        refused: &dyn Fn(Vec<Arc<Logged>>),
    ) -> Result<(), String> {
        self.write_group(Some((written, refused)))
    }

    /// The events pushed and not yet written, out of the queue (its documents stay):
    /// a log taking back what a failed write refused takes these with it.
    pub fn take_pending_events(&self) -> Vec<Arc<Logged>> {
        let mut pending = lock(&self.pending);
        let mut events = Vec::new();
        pending.retain(|record| match record {
            Record::Event(logged) => {
                events.push(Arc::clone(logged));
                false
            }
            _ => true,
        });
        events
    }

    /// A test's full disk: while set, every write fails as a full disk's does.
    #[cfg(test)]
    pub(crate) fn fail_writes(&self, failing: bool) {
        self.failing.store(failing, Ordering::Relaxed);
    }

    #[expect(clippy::type_complexity)]
    fn write_group(
        &self,
        hooks: Option<(&dyn Fn(&[Record]), &dyn Fn(Vec<Arc<Logged>>))>,
    ) -> Result<(), String> {
        let mut segment = lock(&self.segment);
        // The queue takes the last group's room, so neither grows anew at every group.
        let mut pushed = std::mem::take(&mut segment.spare);
        std::mem::swap(&mut *lock(&self.pending), &mut pushed);
        if pushed.is_empty() && segment.unwritten.is_empty() {
            segment.spare = pushed;
            return Ok(());
        }
        let mut group = std::mem::take(&mut segment.unwritten);
        if group.is_empty() {
            group = pushed;
        } else {
            group.append(&mut pushed);
        }
        let mut buf = std::mem::take(&mut segment.buf);
        buf.clear();
        for record in &group {
            encode(record, &mut buf);
        }
        let size = buf.len() as u64;
        #[cfg(test)]
        let result = if self.failing.load(Ordering::Relaxed) {
            Err(std::io::Error::from(std::io::ErrorKind::StorageFull))
        } else {
            segment.file.write_all_at(&buf, segment.len)
        };
        #[cfg(not(test))]
        let result = segment.file.write_all_at(&buf, segment.len);
        // The buffer keeps its room for the next group, up to a segment's size.
        if size <= self.segment_bytes {
            segment.buf = buf;
        }
        match result {
            Ok(()) => {
                segment.len += size;
                if let Some((written, _)) = hooks {
                    written(&group);
                }
                let mut written = lock(&self.written);
                written.append(&mut group);
                if group.capacity() <= SPARE_RECORDS {
                    segment.spare = group;
                }
                if segment.len >= self.segment_bytes {
                    let number = segment.number + 1;
                    let path = segment_path(&self.db, number);
                    match File::create(&path) {
                        Ok(file) => {
                            written.push(Record::SegmentEnd(segment.number));
                            segment.number = number;
                            segment.file = file;
                            segment.len = 0;
                        }
                        // The segment grows on; the next write tries again.
                        Err(err) => {
                            tracing::warn!(%err, path = %path.display(), "cannot start a new journal segment");
                        }
                    }
                }
                Ok(())
            }
            Err(err) => {
                // Written again at the same place by the next write: the whole group, or
                // only its documents when the log takes its events back.
                if let Some((_, refused)) = hooks {
                    let mut events = Vec::new();
                    group.retain(|record| match record {
                        Record::Event(logged) => {
                            events.push(Arc::clone(logged));
                            false
                        }
                        _ => true,
                    });
                    refused(events);
                }
                let over = excess(&group);
                if over > 0 {
                    tracing::warn!(
                        dropped = over,
                        "store's disk failing: the oldest records waiting for it dropped"
                    );
                    group.drain(..over);
                }
                segment.unwritten = group;
                let reason = if err.kind() == std::io::ErrorKind::StorageFull {
                    "the disk is full".to_owned()
                } else {
                    err.to_string()
                };
                Err(format!(
                    "cannot write its journal {}: {reason}",
                    segment_path(&self.db, segment.number).display()
                ))
            }
        }
    }

    /// Moves what was written since the last call, in file order, into `into` (empty:
    /// the writer's own, so the room stays between commits).
    pub fn take_written(&self, into: &mut Vec<Record>) {
        std::mem::swap(&mut *lock(&self.written), into);
    }

    /// Empties the segment being written (`SQLite` has committed all it holds and nothing
    /// new came): at a clean close, so a reopen has nothing to replay.
    pub fn clear(&self) {
        let mut segment = lock(&self.segment);
        if !lock(&self.pending).is_empty() || !segment.unwritten.is_empty() {
            return;
        }
        if segment.file.set_len(0).is_ok() {
            segment.len = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_damaged_record_ends_what_its_segment_replays() {
        let mut buf = Vec::new();
        for n in 0..3 {
            let record = Record::State(StateWrite::Put(StoredRecord {
                kind: "k".into(),
                tenant: "t\u{1b}[2J".into(),
                key: format!("key{n}"),
                value: "{}".into(),
            }));
            assert!(encode(&record, &mut buf));
        }
        assert!(
            !encode(&Record::SegmentEnd(1), &mut buf),
            "not for the file"
        );
        let all = decode(&buf);
        assert_eq!(all.writes.len(), 3);
        assert_eq!(all.dropped, 0);
        let StateWrite::Put(first) = &all.writes[0] else {
            panic!("a put")
        };
        assert_eq!(first.tenant, "t\u{1b}[2J", "bytes as they were");
        // A flipped bit in the second record's payload: only the first is replayed.
        let second = buf.len() / 3;
        buf[second + 12] ^= 1;
        let damaged = decode(&buf);
        assert_eq!(damaged.writes.len(), 1);
        assert_eq!(damaged.dropped, buf.len() - second);
        // A length past the end, and garbage shorter than a header.
        assert_eq!(decode(&[255, 255, 255, 255, 0, 0, 0, 0, 1]).dropped, 9);
        assert_eq!(decode(&[1, 2]).dropped, 2);
        assert_eq!(decode(&[]), Replayed::default());
        // Noise never panics and never reads past its end.
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..2000 {
            let noise: Vec<u8> = (0..rng.usize(0..64)).map(|_| rng.u8(..)).collect();
            assert!(decode(&noise).dropped <= noise.len());
        }
    }

    /// A string from pieces a hostile client might send: escapes, quotes, controls,
    /// multibyte text, and nothing at all.
    fn hostile(rng: &mut fastrand::Rng) -> String {
        const PIECES: [&str; 9] = [
            "pay",
            "\u{1b}[2J",
            "\"",
            "\\",
            "\n\t\u{0}",
            "é✓𝄞",
            "}",
            "{\"a\":",
            "x",
        ];
        (0..rng.usize(0..5))
            .map(|_| PIECES[rng.usize(..PIECES.len())])
            .collect()
    }

    /// JSON text of some shape, with hostile strings in it.
    fn some_json(rng: &mut fastrand::Rng) -> String {
        let value = match rng.u8(..6) {
            0 => json!(null),
            1 => json!(hostile(rng)),
            2 => json!(rng.i64(..)),
            3 => json!(rng.f64() * 1e6),
            4 => json!({ hostile(rng): [hostile(rng), {"n": rng.u32(..)}], "k": true }),
            _ => json!([[[{ "deep": hostile(rng) }]]]),
        };
        serde_json::to_string(&value).unwrap()
    }

    #[test]
    fn a_call_record_reads_back_as_the_text_its_event_encodes_to() {
        use spyglass_protocol::events::{CallSource, Counter, ToolCalled};
        let log = crate::log::EventLog::new(64, 4, Arc::new(crate::log::Budget::new(usize::MAX)));
        let mut rng = fastrand::Rng::with_seed(11);
        let opt = |rng: &mut fastrand::Rng| rng.bool().then(|| rng.u32(..));
        let mut calls = 0;
        for n in 0..3000 {
            let outcome = if n % 10 == 9 {
                // An envelope: written as the event's text, as every other kind is.
                Outcome::Envelope(Box::new(spyglass_protocol::Envelope::PolicyDenied {
                    rule_id: hostile(&mut rng),
                    message: hostile(&mut rng),
                }))
            } else {
                calls += 1;
                Outcome::Result(RawJson::from_text(&some_json(&mut rng)).unwrap())
            };
            let event = Event::ToolCalled(ToolCalled {
                call_id: hostile(&mut rng).into(),
                tool: hostile(&mut rng).into(),
                input: RawJson::from_text(&some_json(&mut rng)).unwrap(),
                outcome,
                started_at: hostile(&mut rng).into(),
                duration: match rng.u8(..4) {
                    0 => f64::NAN,
                    1 => 0.0,
                    _ => rng.f64() * 1000.0,
                },
                counter: rng.bool().then(|| Counter {
                    consumed: rng.u32(..),
                    total: opt(&mut rng),
                    rule: opt(&mut rng),
                    fallback: rng.bool(),
                }),
                source: if rng.bool() {
                    CallSource::Send
                } else {
                    CallSource::Execute
                },
                iteration: opt(&mut rng),
            });
            let tenant = hostile(&mut rng);
            let session = rng.bool().then(|| hostile(&mut rng));
            let logged = log.append(tenant.as_str().into(), session, event);
            let mut buf = Vec::new();
            assert!(encode(&Record::Event(Arc::clone(&logged)), &mut buf));
            let read = decode(&buf);
            assert_eq!((read.dropped, read.unreadable), (0, 0));
            assert_eq!(
                read.events,
                vec![StoredEvent {
                    tenant,
                    seq: logged.frame.seq,
                    text: spyglass_protocol::encode(&logged.frame),
                }]
            );
        }
        assert!(calls > 2500, "most were results: {calls}");
    }

    #[test]
    fn a_record_that_checks_but_does_not_read_is_skipped_and_counted() {
        let put = |key: &str| {
            Record::State(StateWrite::Put(StoredRecord {
                kind: "k".into(),
                tenant: "t".into(),
                key: key.into(),
                value: "{}".into(),
            }))
        };
        let mut buf = Vec::new();
        encode(&put("a"), &mut buf);
        // Checked records this version cannot read: an unknown tag, and a call record
        // cut short inside its fields (its checksum made over what is there).
        for payload in [vec![9, 1, 2, 3], vec![CALL, 1, 0, 0, 0, b't']] {
            buf.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_le_bytes());
            buf.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
            buf.extend_from_slice(&payload);
        }
        encode(&put("b"), &mut buf);
        let read = decode(&buf);
        assert_eq!((read.unreadable, read.dropped), (2, 0));
        let keys: Vec<&str> = read
            .writes
            .iter()
            .map(|w| match w {
                StateWrite::Put(r) | StateWrite::Delete(r) => r.key.as_str(),
            })
            .collect();
        assert_eq!(keys, ["a", "b"], "the records around them replay");
    }
}
