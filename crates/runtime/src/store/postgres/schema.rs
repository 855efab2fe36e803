//! The Postgres store's schema: its tables created and migrated under an advisory lock,
//! a newer version refused, and what `spyglass store status` reads of it.

use super::{PgStore, SCHEMA_VERSION, SchemaStatus};
use crate::store::StoreError;
use tokio_postgres::GenericClient;

/// Migration `i` takes the schema from version `i` to `i + 1`; a shipped one is never
/// edited. All the missing ones run in one transaction with the version's update.
pub(super) const MIGRATIONS: &[&str] = &["
    CREATE TABLE spyglass_meta (key text PRIMARY KEY, value text NOT NULL);
    CREATE TABLE spyglass_streams (tenant text PRIMARY KEY, next_seq bigint NOT NULL);
    CREATE TABLE spyglass_events (
        tenant text NOT NULL,
        seq bigint NOT NULL,
        origin text NOT NULL,
        text text NOT NULL,
        ord bigint GENERATED ALWAYS AS IDENTITY,
        PRIMARY KEY (tenant, seq)
    );
    CREATE INDEX spyglass_events_ord ON spyglass_events (ord);
    CREATE TABLE spyglass_state (
        kind text NOT NULL,
        tenant text NOT NULL,
        key text NOT NULL,
        value text NOT NULL,
        PRIMARY KEY (kind, tenant, key)
    );
    CREATE TABLE spyglass_claims (
        tenant text NOT NULL,
        session text NOT NULL,
        tool text NOT NULL,
        consumed bigint NOT NULL,
        PRIMARY KEY (tenant, session, tool)
    );
    CREATE TABLE spyglass_decisions (
        tenant text NOT NULL,
        approval text NOT NULL,
        decision text NOT NULL,
        decided_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant, approval)
    );
"];

/// The advisory lock replicas take turns on while creating or migrating the schema
/// ("SPYGLASS" in ASCII).
pub(super) const SCHEMA_LOCK: i64 = 0x5350_5947_4C41_5353;

/// The state documents `store status` counts as sessions (`runtime::persist::SESSION`).
pub(super) const SESSION_KIND: &str = "session";
impl PgStore {
    /// `spyglass store status`.
    pub async fn status(&self) -> Result<SchemaStatus, StoreError> {
        let client = self.client().await?;
        schema_status(&**client, &self.shown)
            .await
            .map_err(|err| self.sql_error(&err))
    }
    /// Creates or migrates the schema in one transaction, under the advisory lock so
    /// replicas starting together take turns; a newer schema is refused.
    pub(super) async fn migrate(
        &self,
        client: &mut deadpool_postgres::Object,
    ) -> Result<(), StoreError> {
        let sql = |err| self.sql_error(&err);
        let tx = client.transaction().await.map_err(sql)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
            .await
            .map_err(sql)?;
        tx.batch_execute("CREATE TABLE IF NOT EXISTS spyglass_schema (version bigint NOT NULL)")
            .await
            .map_err(sql)?;
        let found: Option<i64> = tx
            .query_one("SELECT max(version) FROM spyglass_schema", &[])
            .await
            .map_err(sql)?
            .get(0);
        let found = found.unwrap_or(0);
        if found > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: self.shown.clone().into(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        if found == SCHEMA_VERSION {
            return Ok(());
        }
        for migration in MIGRATIONS.iter().skip(usize::try_from(found).unwrap_or(0)) {
            tx.batch_execute(migration).await.map_err(sql)?;
        }
        tx.execute("DELETE FROM spyglass_schema", &[])
            .await
            .map_err(sql)?;
        tx.execute(
            "INSERT INTO spyglass_schema (version) VALUES ($1)",
            &[&SCHEMA_VERSION],
        )
        .await
        .map_err(sql)?;
        tx.commit().await.map_err(sql)?;
        tracing::info!(db = %self.shown, from = found, to = SCHEMA_VERSION, "store schema migrated");
        Ok(())
    }
}

/// The schema version and counts, creating nothing.
pub(super) async fn schema_status(
    client: &impl GenericClient,
    shown: &str,
) -> Result<SchemaStatus, tokio_postgres::Error> {
    let exists: bool = client
        .query_one("SELECT to_regclass('spyglass_schema') IS NOT NULL", &[])
        .await?
        .get(0);
    let version: Option<i64> = if exists {
        client
            .query_one("SELECT max(version) FROM spyglass_schema", &[])
            .await?
            .get(0)
    } else {
        None
    };
    let (mut events, mut sessions) = (0, 0);
    // A newer schema's tables may not read as this version's.
    if version.is_some_and(|v| (1..=SCHEMA_VERSION).contains(&v)) {
        events = client
            .query_one("SELECT count(*) FROM spyglass_events", &[])
            .await?
            .get(0);
        sessions = client
            .query_one(
                "SELECT count(*) FROM spyglass_state WHERE kind = $1",
                &[&SESSION_KIND],
            )
            .await?
            .get(0);
    }
    Ok(SchemaStatus {
        shown: shown.to_owned(),
        version,
        supported: SCHEMA_VERSION,
        events,
        sessions,
    })
}
