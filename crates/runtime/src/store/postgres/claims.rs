//! The Postgres store's decisions taken once for every replica: which entry of a stateful
//! mock a call gets, and which decision on an approval stands (or its expiry).

use super::{Decided, PgStore};
use crate::store::StoreError;

impl PgStore {
    /// Takes the next entry of a stateful mock of `total` entries: `Some(index)` (from 0)
    /// served to this call alone, `None` when all are taken.
    pub async fn claim(
        &self,
        tenant: &str,
        session: &str,
        tool: &str,
        total: u32,
    ) -> Result<Option<u32>, StoreError> {
        if total == 0 {
            return Ok(None);
        }
        let client = self.client().await?;
        let sql = |err| self.sql_error(&err);
        // The row lock `ON CONFLICT DO UPDATE` takes makes the claims of one entry queue
        // up; each re-reads `consumed` after the one before it commits.
        let take = client
            .prepare_cached(
                "INSERT INTO spyglass_claims (tenant, session, tool, consumed)
                 VALUES ($1, $2, $3, 1)
                 ON CONFLICT (tenant, session, tool) DO UPDATE
                 SET consumed = spyglass_claims.consumed + 1
                 WHERE spyglass_claims.consumed < $4::bigint
                 RETURNING consumed",
            )
            .await
            .map_err(sql)?;
        let row = client
            .query_opt(&take, &[&tenant, &session, &tool, &i64::from(total)])
            .await
            .map_err(sql)?;
        Ok(row.and_then(|row| u32::try_from(row.get::<_, i64>(0) - 1).ok()))
    }

    /// Each tool's entries taken in a session.
    pub async fn claimed(
        &self,
        tenant: &str,
        session: &str,
    ) -> Result<Vec<(String, u32)>, StoreError> {
        let client = self.client().await?;
        let sql = |err| self.sql_error(&err);
        let read = client
            .prepare_cached(
                "SELECT tool, consumed FROM spyglass_claims
                 WHERE tenant = $1 AND session = $2 ORDER BY tool",
            )
            .await
            .map_err(sql)?;
        Ok(client
            .query(&read, &[&tenant, &session])
            .await
            .map_err(sql)?
            .iter()
            .map(|row| {
                let consumed: i64 = row.get(1);
                (row.get(0), u32::try_from(consumed).unwrap_or(u32::MAX))
            })
            .collect())
    }

    /// Decides an approval once for every replica: the first decision before
    /// `expires_at_ms` (Unix ms, judged by the database's clock) wins.
    pub async fn decide(
        &self,
        tenant: &str,
        approval: &str,
        decision: &str,
        expires_at_ms: i64,
    ) -> Result<Decided, StoreError> {
        let client = self.client().await?;
        let sql = |err| self.sql_error(&err);
        // A concurrent insert of the same key makes this one wait for its commit, then
        // do nothing: the read after it sees the winner.
        let insert = client
            .prepare_cached(
                "INSERT INTO spyglass_decisions (tenant, approval, decision, decided_at)
                 SELECT $1, $2, $3, now()
                 WHERE $4::bigint > (extract(epoch FROM now()) * 1000)::bigint
                 ON CONFLICT (tenant, approval) DO NOTHING
                 RETURNING decision",
            )
            .await
            .map_err(sql)?;
        if client
            .query_opt(&insert, &[&tenant, &approval, &decision, &expires_at_ms])
            .await
            .map_err(sql)?
            .is_some()
        {
            return Ok(Decided::Won);
        }
        let read = client
            .prepare_cached(
                "SELECT decision FROM spyglass_decisions WHERE tenant = $1 AND approval = $2",
            )
            .await
            .map_err(sql)?;
        Ok(
            match client
                .query_opt(&read, &[&tenant, &approval])
                .await
                .map_err(sql)?
            {
                Some(row) => Decided::Already(row.get(0)),
                None => Decided::Expired,
            },
        )
    }
}
