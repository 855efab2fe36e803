//! The Postgres store's stream and documents: reading them at open and while following,
//! and the writer's commits, each one statement on the writer's own connection.

use super::pool::{Attempt, connect_attempt, to_i64, to_u64};
use super::{CHANNEL, PgStore};
use crate::log::Logged;
use crate::store::{StateWrite, Store, StoreError, StoredEvent, StoredRecord, StoredStream};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use tokio_postgres::NoTls;

/// A statement's parameter.
pub(super) type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);

/// What a batch's commit writes: its statement (`commit_sql`) has only these parts, so
/// Postgres plans and starts no part a batch does not use (most batches are events alone).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "four independent parts, each present or not"
)]
pub(super) struct Parts {
    events: bool,
    evict: bool,
    put: bool,
    delete: bool,
}

/// One batch's commit in one statement (so one round trip, no `BEGIN`/`COMMIT`), with the
/// parts in `parts`, parameters numbered in this order:
/// - events: each tenant's seqs taken on its stream row, locked until the statement
///   commits (tenants in name order, so two replicas' batches never wait on each other in
///   a cycle); the events inserted with their seqs, each text written around its seq here
///   (`head || seq || tail`, or `head` alone when `tail` is null; the seqs are new, so a
///   plain insert, without `ON CONFLICT`'s check of the index first); when the flag is set,
///   one notification per tenant. The rows returned are each tenant's next seq.
/// - evict: each tenant's events in `(after, upto]` deleted (a bounded range, so an index
///   scan: `seq <= upto` alone was planned as a scan of the whole table);
/// - put / delete: the state documents, each key once, in key order.
///
/// Data-modifying `WITH` parts all run, in this order, whatever the outer query reads.
pub(super) fn commit_sql(parts: Parts) -> String {
    let mut n = 0;
    let mut next = || {
        n += 1;
        format!("${n}")
    };
    let mut with = Vec::new();
    let mut select = "SELECT NULL::text, NULL::bigint, NULL::text WHERE false".to_owned();
    if parts.events {
        let (tenants, counts, origin) = (next(), next(), next());
        let (ts, backs, heads, tails) = (next(), next(), next(), next());
        let (notify, channel) = (next(), next());
        with.push(format!(
            "taken AS (
                 INSERT INTO spyglass_streams (tenant, next_seq)
                 SELECT t, 1 + n FROM unnest({tenants}::text[], {counts}::bigint[]) AS c(t, n)
                 ORDER BY t
                 ON CONFLICT (tenant) DO UPDATE
                 SET next_seq = spyglass_streams.next_seq + excluded.next_seq - 1
                 RETURNING tenant, next_seq
             )"
        ));
        with.push(format!(
            "added AS (
                 INSERT INTO spyglass_events (tenant, seq, origin, text)
                 SELECT e.t, taken.next_seq - e.back, {origin},
                        CASE WHEN e.tail IS NULL THEN e.head
                             ELSE e.head || (taken.next_seq - e.back) || e.tail END
                 FROM unnest({ts}::text[], {backs}::bigint[], {heads}::text[], {tails}::text[])
                      WITH ORDINALITY AS e(t, back, head, tail, i)
                 JOIN taken ON taken.tenant = e.t
                 ORDER BY e.i
             )"
        ));
        select = format!(
            "SELECT tenant, next_seq,
                    CASE WHEN {notify} THEN pg_notify({channel}, {origin} || E'\\t' || tenant)::text END
             FROM taken"
        );
    }
    if parts.evict {
        let (tenants, after, upto) = (next(), next(), next());
        with.push(format!(
            "evicted AS (
                 DELETE FROM spyglass_events AS x
                 USING unnest({tenants}::text[], {after}::bigint[], {upto}::bigint[])
                       AS d(tenant, after, upto)
                 WHERE x.tenant = d.tenant AND x.seq > d.after AND x.seq <= d.upto
             )"
        ));
    }
    if parts.put {
        let (kinds, tenants, keys, values) = (next(), next(), next(), next());
        with.push(format!(
            "put AS (
                 INSERT INTO spyglass_state (kind, tenant, key, value)
                 SELECT * FROM unnest({kinds}::text[], {tenants}::text[], {keys}::text[], {values}::text[])
                 ON CONFLICT (kind, tenant, key) DO UPDATE SET value = excluded.value
             )"
        ));
    }
    if parts.delete {
        let (kinds, tenants, keys) = (next(), next(), next());
        with.push(format!(
            "deleted AS (
                 DELETE FROM spyglass_state AS s
                 USING unnest({kinds}::text[], {tenants}::text[], {keys}::text[]) AS d(kind, tenant, key)
                 WHERE s.kind = d.kind AND s.tenant = d.tenant AND s.key = d.key
             )"
        ));
    }
    if with.is_empty() {
        return select;
    }
    format!("WITH {} {select}", with.join(", "))
}
impl PgStore {
    /// The stream as stored (like `Store::stream`, for a runtime opening on it).
    pub async fn open_stream(
        &self,
        fresh_epoch: &str,
        retained: usize,
    ) -> Result<StoredStream, StoreError> {
        let client = self.client().await?;
        let sql = |err| self.sql_error(&err);
        let put = client
            .prepare_cached(
                "INSERT INTO spyglass_meta (key, value) VALUES ('epoch', $1)
                 ON CONFLICT (key) DO NOTHING",
            )
            .await
            .map_err(sql)?;
        client.execute(&put, &[&fresh_epoch]).await.map_err(sql)?;
        let epoch: String = client
            .query_one("SELECT value FROM spyglass_meta WHERE key = 'epoch'", &[])
            .await
            .map_err(sql)?
            .get(0);
        let next_seqs = client
            .query(
                "SELECT tenant, next_seq FROM spyglass_streams ORDER BY tenant",
                &[],
            )
            .await
            .map_err(sql)?
            .iter()
            .map(|row| (row.get::<_, String>(0), to_u64(row.get::<_, i64>(1).max(1))))
            .collect();
        let limit = i64::try_from(retained).unwrap_or(i64::MAX);
        let newest = client
            .prepare_cached(
                "SELECT tenant, seq, text FROM
                   (SELECT tenant, seq, text, ord FROM spyglass_events ORDER BY ord DESC LIMIT $1) AS newest
                 ORDER BY ord",
            )
            .await
            .map_err(sql)?;
        let events = client
            .query(&newest, &[&limit])
            .await
            .map_err(sql)?
            .iter()
            .map(|row| StoredEvent {
                tenant: row.get(0),
                seq: to_u64(row.get(1)),
                text: row.get(2),
            })
            .collect();
        Ok(StoredStream {
            epoch,
            next_seqs,
            events,
        })
    }

    /// Every state document (like `Store::state`).
    pub async fn open_state(&self) -> Result<Vec<StoredRecord>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT kind, tenant, key, value FROM spyglass_state ORDER BY kind, tenant, key",
                &[],
            )
            .await
            .map_err(|err| self.sql_error(&err))?;
        Ok(rows
            .iter()
            .map(|row| StoredRecord {
                kind: row.get(0),
                tenant: row.get(1),
                key: row.get(2),
                value: row.get(3),
            })
            .collect())
    }
    /// Up to `limit` of a tenant's events with seq over `after`, in seq order, with the
    /// replica that wrote each.
    pub async fn events_after(
        &self,
        tenant: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(StoredEvent, String)>, StoreError> {
        let client = self.client().await?;
        let sql = |err| self.sql_error(&err);
        let read = client
            .prepare_cached(
                "SELECT seq, text, origin FROM spyglass_events
                 WHERE tenant = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            )
            .await
            .map_err(sql)?;
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Ok(client
            .query(&read, &[&tenant, &after, &limit])
            .await
            .map_err(sql)?
            .iter()
            .map(|row| {
                (
                    StoredEvent {
                        tenant: tenant.to_owned(),
                        seq: to_u64(row.get(0)),
                        text: row.get(1),
                    },
                    row.get(2),
                )
            })
            .collect())
    }

    /// Each tenant's newest seq.
    pub async fn heads(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT tenant, next_seq - 1 FROM spyglass_streams ORDER BY tenant",
                &[],
            )
            .await
            .map_err(|err| self.sql_error(&err))?;
        Ok(rows
            .iter()
            .map(|row| (row.get(0), to_u64(row.get(1))))
            .collect())
    }

    /// One state document.
    pub async fn record(
        &self,
        kind: &str,
        tenant: &str,
        key: &str,
    ) -> Result<Option<StoredRecord>, StoreError> {
        let client = self.client().await?;
        let sql = |err| self.sql_error(&err);
        let read = client
            .prepare_cached(
                "SELECT value FROM spyglass_state WHERE kind = $1 AND tenant = $2 AND key = $3",
            )
            .await
            .map_err(sql)?;
        Ok(client
            .query_opt(&read, &[&kind, &tenant, &key])
            .await
            .map_err(sql)?
            .map(|row| StoredRecord {
                kind: kind.to_owned(),
                tenant: tenant.to_owned(),
                key: key.to_owned(),
                value: row.get(0),
            }))
    }
    /// A pooled connection, or an error saying why none came within `POOL_WAIT`.
    /// The writer thread's own connection (`OwnConnection`), with the commit statement
    /// prepared on it; the URL's timeouts and options as the pool's connections have them.
    pub(super) fn open_own(&self) -> Result<OwnConnection, StoreError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| self.error(format!("cannot start the writer's runtime: {err}")))?;
        let client = rt.block_on(async {
            let (client, connection) = self.config.connect(NoTls).await.map_err(|err| {
                let reason = match connect_attempt(&err) {
                    Attempt::Wait(reason) => format!("database unreachable: {reason}"),
                    Attempt::Fail(reason) => reason,
                };
                self.error(reason)
            })?;
            // Polled whenever the writer waits on this runtime; ends with the connection.
            tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok::<_, StoreError>(client)
        })?;
        Ok(OwnConnection {
            rt: Some(rt),
            client,
            statements: HashMap::new(),
        })
    }
    /// The events (already stamped), evictions and state of one batch, in `tx`.
    pub(super) async fn write_batch(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        events: &[StoredEvent],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<(), tokio_postgres::Error> {
        if !events.is_empty() {
            let insert = tx
                .prepare_cached(
                    "INSERT INTO spyglass_events (tenant, seq, origin, text)
                     SELECT t, s, $3, x FROM unnest($1::text[], $2::bigint[], $4::text[]) AS e(t, s, x)
                     ON CONFLICT (tenant, seq) DO NOTHING",
                )
                .await?;
            let tenants: Vec<&str> = events.iter().map(|e| &*e.tenant).collect();
            let seqs: Vec<i64> = events.iter().map(|e| to_i64(e.seq)).collect();
            let texts: Vec<&str> = events.iter().map(|e| e.text.as_str()).collect();
            tx.execute(&insert, &[&tenants, &seqs, &self.replica, &texts])
                .await?;
        }
        if !evicted.is_empty() {
            let delete = tx
                .prepare_cached(
                    "DELETE FROM spyglass_events AS e
                     USING unnest($1::text[], $2::bigint[]) AS d(tenant, upto)
                     WHERE e.tenant = d.tenant AND e.seq <= d.upto",
                )
                .await?;
            let tenants: Vec<&str> = evicted.iter().map(|(t, _)| t.as_str()).collect();
            let upto: Vec<i64> = evicted.iter().map(|(_, s)| to_i64(*s)).collect();
            tx.execute(&delete, &[&tenants, &upto]).await?;
        }
        // Each document's last write only, so one statement of puts and one of deletes
        // touch each row once, in key order.
        let writes = last_writes(state);
        let columns = |put: bool| {
            let mut cols: [Vec<&str>; 4] = Default::default();
            for write in &writes {
                if let (StateWrite::Put(r), true) | (StateWrite::Delete(r), false) = (write, put) {
                    cols[0].push(&r.kind);
                    cols[1].push(&r.tenant);
                    cols[2].push(&r.key);
                    cols[3].push(&r.value);
                }
            }
            cols
        };
        let [kinds, tenants, keys, values] = columns(true);
        if !kinds.is_empty() {
            let put = tx
                .prepare_cached(
                    "INSERT INTO spyglass_state (kind, tenant, key, value)
                     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
                     ON CONFLICT (kind, tenant, key) DO UPDATE SET value = excluded.value",
                )
                .await?;
            tx.execute(&put, &[&kinds, &tenants, &keys, &values])
                .await?;
        }
        let [kinds, tenants, keys, _] = columns(false);
        if !kinds.is_empty() {
            let delete = tx
                .prepare_cached(
                    "DELETE FROM spyglass_state AS s
                     USING unnest($1::text[], $2::text[], $3::text[]) AS d(kind, tenant, key)
                     WHERE s.kind = d.kind AND s.tenant = d.tenant AND s.key = d.key",
                )
                .await?;
            tx.execute(&delete, &[&kinds, &tenants, &keys]).await?;
        }
        Ok(())
    }

    /// `append_stamping` on the runtime, in two round trips: `BEGIN` with the seqs, then
    /// every write with `COMMIT`, each pipelined (sent together, answered in order). The
    /// commit's latency is what the answers waiting on it wait: one round trip a
    /// statement made it six.
    pub(super) async fn stamp_and_write(
        &self,
        events: &[Arc<Logged>],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<Vec<u64>, StoreError> {
        if events.is_empty() && evicted.is_empty() && state.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        self.commit_on(Via::Pooled(&client), events, evicted, state)
            .await
    }

    /// One batch's commit (`commit_sql`) on `via`: the events' seqs, in order.
    pub(super) async fn commit_on(
        &self,
        via: Via<'_>,
        events: &[Arc<Logged>],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<Vec<u64>, StoreError> {
        let sql = |err| self.sql_error(&err);
        let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
        for event in events {
            *counts.entry(&*event.tenant).or_default() += 1;
        }
        let tenants: Vec<&str> = counts.keys().copied().collect();
        let ns: Vec<i64> = counts.values().copied().collect();
        // Each event's distance back from its tenant's next seq after the commit.
        let mut backs = Vec::with_capacity(events.len());
        let mut heads = Vec::with_capacity(events.len());
        let mut tails: Vec<Option<String>> = Vec::with_capacity(events.len());
        for event in events {
            let left = counts.get_mut(&*event.tenant).map_or(0, |n| {
                let left = *n;
                *n -= 1;
                left
            });
            backs.push(left);
            let (mut text, at) = spyglass_protocol::encode_around_seq(&event.frame);
            tails.push(at.map(|at| {
                let tail = text.get(at + 1..).unwrap_or_default().to_owned();
                text.truncate(at);
                tail
            }));
            heads.push(text);
        }
        let event_tenants: Vec<&str> = events.iter().map(|e| &*e.tenant).collect();
        let evicted_tenants: Vec<&str> = evicted.iter().map(|(t, _)| t.as_str()).collect();
        let evicted_upto: Vec<i64> = evicted.iter().map(|(_, s)| to_i64(*s)).collect();
        // Where each tenant's last eviction this store made ended: its events up to there
        // are gone (they committed before it evicted them, and so did every seq before).
        let evicted_after: Vec<i64> = {
            let done = self
                .evicted_upto
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            evicted
                .iter()
                .map(|(t, upto)| to_i64(done.get(t).copied().unwrap_or(0).min(*upto)))
                .collect()
        };
        // Each document's last write only, so the puts and the deletes touch each row
        // once, in key order.
        let writes = last_writes(state);
        let mut puts: [Vec<&str>; 4] = Default::default();
        let mut deletes: [Vec<&str>; 3] = Default::default();
        for write in &writes {
            match write {
                StateWrite::Put(r) => {
                    puts[0].push(&r.kind);
                    puts[1].push(&r.tenant);
                    puts[2].push(&r.key);
                    puts[3].push(&r.value);
                }
                StateWrite::Delete(r) => {
                    deletes[0].push(&r.kind);
                    deletes[1].push(&r.tenant);
                    deletes[2].push(&r.key);
                }
            }
        }
        let parts = Parts {
            events: !events.is_empty(),
            evict: !evicted.is_empty(),
            put: !puts[0].is_empty(),
            delete: !deletes[0].is_empty(),
        };
        let notify = parts.events && self.notify_now();
        let mut params: Vec<Param<'_>> = Vec::with_capacity(18);
        if parts.events {
            params.extend::<[Param<'_>; 9]>([
                &tenants,
                &ns,
                &self.replica,
                &event_tenants,
                &backs,
                &heads,
                &tails,
                &notify,
                &CHANNEL,
            ]);
        }
        if parts.evict {
            params.extend::<[Param<'_>; 3]>([&evicted_tenants, &evicted_after, &evicted_upto]);
        }
        if parts.put {
            params.extend::<[Param<'_>; 4]>([&puts[0], &puts[1], &puts[2], &puts[3]]);
        }
        if parts.delete {
            params.extend::<[Param<'_>; 3]>([&deletes[0], &deletes[1], &deletes[2]]);
        }
        let (client, statement) = match via {
            // Prepared once per connection (cached): no round trip after its first batch.
            Via::Pooled(client) => {
                let statement = client
                    .prepare_cached(&commit_sql(parts))
                    .await
                    .map_err(sql)?;
                (&***client, statement)
            }
            Via::Own(client, statements) => {
                let statement = if let Some(statement) = statements.get(&parts) {
                    statement.clone()
                } else {
                    let statement = client.prepare(&commit_sql(parts)).await.map_err(sql)?;
                    statements.insert(parts, statement.clone());
                    statement
                };
                (client, statement)
            }
        };
        let rows = client.query(&statement, &params).await.map_err(sql)?;
        if parts.evict {
            let mut done = self
                .evicted_upto
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for (tenant, upto) in evicted {
                let end = done.entry(tenant.clone()).or_default();
                *end = (*end).max(*upto);
            }
        }
        let mut next: BTreeMap<&str, i64> = BTreeMap::new();
        for row in &rows {
            let tenant: &str = row.get(0);
            let after: i64 = row.get(1);
            if let Some(&name) = tenants.iter().find(|t| **t == tenant) {
                next.insert(name, after);
            }
        }
        let mut seqs = Vec::with_capacity(events.len());
        for (event, back) in events.iter().zip(&backs) {
            let Some(after) = next.get(&*event.tenant) else {
                return Err(self.error(format!(
                    "the database gave no seq for tenant {}",
                    event.tenant
                )));
            };
            seqs.push(to_u64(after - back));
        }
        Ok(seqs)
    }

    /// `append` (events stamped by the caller) on the runtime.
    pub(super) async fn write_stamped(
        &self,
        events: &[StoredEvent],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<(), StoreError> {
        if events.is_empty() && evicted.is_empty() && state.is_empty() {
            return Ok(());
        }
        let mut client = self.client().await?;
        let sql = |err| self.sql_error(&err);
        let tx = client.transaction().await.map_err(sql)?;
        let mut newest: BTreeMap<&str, i64> = BTreeMap::new();
        for event in events {
            let seq = to_i64(event.seq);
            let upto = newest.entry(&*event.tenant).or_insert(seq);
            *upto = (*upto).max(seq);
        }
        let next = tx
            .prepare_cached(
                "INSERT INTO spyglass_streams (tenant, next_seq) VALUES ($1, $2::bigint + 1)
                 ON CONFLICT (tenant) DO UPDATE
                 SET next_seq = GREATEST(spyglass_streams.next_seq, excluded.next_seq)",
            )
            .await
            .map_err(sql)?;
        for (tenant, seq) in &newest {
            tx.execute(&next, &[tenant, seq]).await.map_err(sql)?;
        }
        self.write_batch(&tx, events, evicted, state)
            .await
            .map_err(sql)?;
        tx.commit().await.map_err(sql)
    }
}

impl Store for PgStore {
    fn describe(&self) -> String {
        self.shown.clone()
    }

    fn stream(&self, fresh_epoch: &str, retained: usize) -> Result<StoredStream, StoreError> {
        self.block(self.open_stream(fresh_epoch, retained))
    }

    fn append(
        &self,
        events: &[StoredEvent],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<(), StoreError> {
        self.block(self.write_stamped(events, evicted, state))
    }

    fn state(&self) -> Result<Vec<StoredRecord>, StoreError> {
        self.block(self.open_state())
    }
}

impl PgStore {
    /// `append` with the seqs decided here, as only a store shared by several runtimes
    /// does: each event's seq is taken in the same transaction (its tenant's next, in the
    /// order given) and its text encoded with it. Returns the seqs, in the order of
    /// `events`. The log's writer thread commits on a connection of its own; a caller
    /// inside a tokio runtime, on a pooled one.
    pub fn append_stamping(
        &self,
        events: &[Arc<Logged>],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<Vec<u64>, StoreError> {
        if tokio::runtime::Handle::try_current().is_ok() {
            // Not the writer thread (a caller inside a runtime): a pooled connection.
            return self.block(self.stamp_and_write(events, evicted, state));
        }
        if events.is_empty() && evicted.is_empty() && state.is_empty() {
            return Ok(Vec::new());
        }
        let mut own = self
            .own
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if own.is_none() {
            *own = Some(self.open_own()?);
        }
        let Some(OwnConnection {
            rt: Some(rt),
            client,
            statements,
        }) = own.as_mut()
        else {
            return Err(self.error("the writer's connection is gone".to_owned()));
        };
        let result =
            rt.block_on(self.commit_on(Via::Own(client, statements), events, evicted, state));
        if result.is_err() && client.is_closed() {
            // Made again at the next commit (the writer retries what failed).
            *own = None;
        }
        result
    }
}
/// The writer thread's own connection, driven on that thread by a one-thread runtime of
/// its own: a commit's round trip wakes no other thread (through the pool, the request
/// went to the connection's task on a worker and its answer came back to the writer,
/// two thread wake-ups a round trip).
pub(super) struct OwnConnection {
    /// Always `Some` until dropped.
    pub(super) rt: Option<tokio::runtime::Runtime>,
    pub(super) client: tokio_postgres::Client,
    /// Each statement `commit_sql` made, prepared on `client`.
    pub(super) statements: HashMap<Parts, tokio_postgres::Statement>,
}
/// The connection a commit runs on.
pub(super) enum Via<'a> {
    Pooled(&'a deadpool_postgres::Object),
    Own(
        &'a tokio_postgres::Client,
        &'a mut HashMap<Parts, tokio_postgres::Statement>,
    ),
}

impl Drop for OwnConnection {
    fn drop(&mut self) {
        // The store may go last on a worker of another runtime, where dropping a runtime
        // the plain way panics.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// The last write to each document, in key order: the batch's outcome is the same (a
/// later write to a key replaces an earlier one), and two replicas' commits lock the
/// rows they share in one order, so neither waits on the other in a cycle.
pub(super) fn last_writes(state: &[StateWrite]) -> Vec<&StateWrite> {
    let mut last: BTreeMap<(&str, &str, &str), &StateWrite> = BTreeMap::new();
    for write in state {
        let (StateWrite::Put(r) | StateWrite::Delete(r)) = write;
        last.insert((&r.kind, &r.tenant, &r.key), write);
    }
    last.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_writes_each_document_once_as_its_last_write_says() {
        let doc = |key: &str, value: &str| StoredRecord {
            kind: "session".into(),
            tenant: "t".into(),
            key: key.into(),
            value: value.into(),
        };
        let state = [
            StateWrite::Put(doc("b", "1")),
            StateWrite::Put(doc("a", "1")),
            StateWrite::Delete(doc("b", "")),
            StateWrite::Put(doc("a", "2")),
        ];
        assert_eq!(
            last_writes(&state),
            vec![
                &StateWrite::Put(doc("a", "2")),
                &StateWrite::Delete(doc("b", ""))
            ]
        );
    }
}
