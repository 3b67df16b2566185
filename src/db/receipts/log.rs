//! The log's columns of the receipts table: each receipt's place in its app's record order
//! (`chain_seq` and its link, migration 10; the encoding is [`crate::model::chain`]) given as it
//! is recorded, the leaf the store's log gave it (`log_index`), and what the checks last noted of
//! its batch (a full read, findings).
//!
//! A receipt is linked in the transaction that records it, under the app's lock: the head — the
//! app's greatest seq — is read with a locking read, the receipts not linked yet (this one, and
//! any an older build recorded) get the next seqs in the order they were recorded. The unique key
//! on `(app_code, chain_seq)` is what makes a fork impossible even without the lock: a second
//! writer's seq collides, and its whole transaction fails.

use sqlx::{AssertSqlSafe, MySqlConnection};

use super::Receipts;
use crate::db::{Context, DbError};
use crate::model::chain::{self, Link, GENESIS};

/// A row of the chain: seq, batch id, manifest hash (the column), link.
type LinkRow = (i64, String, String, String);

fn to_link((seq, batch_id, manifest_sha256, link): LinkRow) -> Link {
    Link {
        seq: seq.max(0) as u64,
        batch_id,
        manifest_sha256,
        link,
    }
}

impl Receipts {
    /// Locks the app's chain head (its greatest seq) for the caller's transaction and returns
    /// it — `(0, genesis)` for an app with no link yet. Taken first in the receipt transaction,
    /// before its receipt is inserted, so that every writer of an app's links takes the head
    /// before any receipt row (no lock-order deadlock with `migrate`'s genesis, which takes it
    /// first too); [`Receipts::link_pending`] links after it.
    pub(crate) async fn lock_head(
        &self,
        tx: &mut MySqlConnection,
        app: &str,
    ) -> Result<(u64, String), DbError> {
        let head: Option<(i64, String)> = sqlx::query_as(AssertSqlSafe(format!(
            "SELECT chain_seq, CAST(chain_link AS CHAR) FROM {} \
             WHERE app_code = ? AND chain_seq IS NOT NULL ORDER BY chain_seq DESC LIMIT 1 FOR UPDATE",
            self.spec.receipts_table()
        )))
        .bind(app)
        .fetch_optional(&mut *tx)
        .await
        .context(|| format!("locking the head of app {app}'s chain"))?;
        Ok(match head {
            Some((seq, link)) => (seq.max(0) as u64, link),
            None => (0, GENESIS.to_string()),
        })
    }

    /// Links the app's receipts that are not linked yet after `head` (what [`Self::lock_head`]
    /// returned in this transaction), in the order they were recorded (`created_at_ms`, then
    /// cursor and batch id). Returns how many it linked.
    pub(crate) async fn link_pending(
        &self,
        tx: &mut MySqlConnection,
        app: &str,
        head: (u64, String),
    ) -> Result<u64, DbError> {
        let table = self.spec.receipts_table();
        let pending: Vec<(String, String)> = sqlx::query_as(AssertSqlSafe(format!(
            "SELECT CAST(batch_id AS CHAR), CAST(manifest_sha256 AS CHAR) FROM {table} \
             WHERE app_code = ? AND chain_seq IS NULL ORDER BY created_at_ms, last_updated_at_ms, last_event_id, batch_id FOR UPDATE"
        )))
        .bind(app)
        .fetch_all(&mut *tx)
        .await
        .context(|| format!("reading app {app}'s receipts not linked yet"))?;
        let (mut seq, mut prev) = head;
        let update = format!(
            "UPDATE {table} SET chain_seq = ?, chain_link = ? \
             WHERE app_code = ? AND batch_id = ? AND chain_seq IS NULL"
        );
        let chain_app = chain::chain_app(app);
        for (batch_id, manifest_sha256) in &pending {
            seq += 1;
            let link = chain::link(
                self.spec.name,
                &chain_app,
                seq,
                &prev,
                batch_id,
                manifest_sha256,
            );
            sqlx::query(AssertSqlSafe(update.clone()))
                .bind(seq as i64)
                .bind(&link)
                .bind(app)
                .bind(batch_id)
                .execute(&mut *tx)
                .await
                .context(|| {
                    format!("linking batch {batch_id} at seq {seq} of app {app}'s chain")
                })?;
            prev = link;
        }
        Ok(pending.len() as u64)
    }

    /// Links every app's receipts not linked yet (the genesis backfill of `migrate`): one
    /// transaction per app. Returns the receipts linked.
    pub(crate) async fn backfill(&self) -> Result<u64, DbError> {
        let pool = &self.pool;
        let apps: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT DISTINCT app_code FROM {} WHERE chain_seq IS NULL",
            self.spec.receipts_table()
        )))
        .fetch_all(pool)
        .await
        .context(|| "finding receipts not linked yet".into())?;
        let mut linked = 0;
        for app in apps {
            let mut tx = pool
                .begin()
                .await
                .context(|| format!("starting to link app {app}'s receipts"))?;
            crate::db::layout::hold(&mut tx, self.spec).await?;
            let head = self.lock_head(&mut tx, &app).await?;
            linked += self.link_pending(&mut tx, &app, head).await?;
            tx.commit()
                .await
                .context(|| format!("committing app {app}'s links"))?;
        }
        Ok(linked)
    }

    /// The app's last link, if any receipt is linked.
    pub async fn head(&self, app: &str) -> Result<Option<Link>, DbError> {
        let pool = &self.pool;
        let row: Option<LinkRow> = sqlx::query_as(AssertSqlSafe(format!(
            "SELECT chain_seq, CAST(batch_id AS CHAR), CAST(manifest_sha256 AS CHAR), CAST(chain_link AS CHAR) \
             FROM {} WHERE app_code = ? AND chain_seq IS NOT NULL ORDER BY chain_seq DESC LIMIT 1",
            self.spec.receipts_table()
        )))
        .bind(app)
        .fetch_optional(pool)
        .await
        .context(|| format!("reading the head of app {app}'s chain"))?;
        Ok(row.map(to_link))
    }

    /// The app's links `from..=to`, in order (those the database has).
    pub async fn links(&self, app: &str, from: u64, to: u64) -> Result<Vec<Link>, DbError> {
        let pool = &self.pool;
        let rows: Vec<LinkRow> = sqlx::query_as(AssertSqlSafe(format!(
            "SELECT chain_seq, CAST(batch_id AS CHAR), CAST(manifest_sha256 AS CHAR), CAST(chain_link AS CHAR) \
             FROM {} WHERE app_code = ? AND chain_seq BETWEEN ? AND ? ORDER BY chain_seq",
            self.spec.receipts_table()
        )))
        .bind(app)
        .bind(from as i64)
        .bind(to as i64)
        .fetch_all(pool)
        .await
        .context(|| format!("reading app {app}'s links {from}..{to}"))?;
        Ok(rows.into_iter().map(to_link).collect())
    }

    /// The app's last leaf the database knows: its index and the chain seq of its receipt.
    pub(crate) async fn last_logged(&self, app: &str) -> Result<Option<(u64, u64)>, DbError> {
        let pool = &self.pool;
        let row: Option<(i64, Option<i64>)> = sqlx::query_as(AssertSqlSafe(format!(
            "SELECT log_index, chain_seq FROM {} WHERE app_code = ? AND log_index IS NOT NULL \
             ORDER BY log_index DESC LIMIT 1",
            self.spec.receipts_table()
        )))
        .bind(app)
        .fetch_optional(pool)
        .await
        .context(|| format!("reading the last leaf of app {app}'s log"))?;
        Ok(row.map(|(i, seq)| (i.max(0) as u64, seq.unwrap_or(0).max(0) as u64)))
    }

    /// Records the leaves the store's log now holds: `(batch id, leaf)` of the app's receipts,
    /// each only if it has none yet; in one transaction. Returns the receipts given a leaf.
    pub(crate) async fn set_leaves(
        &self,
        app: &str,
        leaves: &[(String, u64)],
    ) -> Result<u64, DbError> {
        let pool = &self.pool;
        let table = self.spec.receipts_table();
        let mut tx = pool
            .begin()
            .await
            .context(|| format!("starting to record app {app}'s leaves"))?;
        crate::db::layout::hold(&mut tx, self.spec).await?;
        let mut set = 0;
        for chunk in leaves.chunks(500) {
            let cases = "WHEN ? THEN ? ".repeat(chunk.len());
            let ids = vec!["?"; chunk.len()].join(", ");
            let mut q = sqlx::query(AssertSqlSafe(format!(
                "UPDATE {table} SET log_index = CASE batch_id {cases}END \
                 WHERE app_code = ? AND log_index IS NULL AND batch_id IN ({ids})"
            )));
            for (batch, leaf) in chunk {
                q = q.bind(batch).bind(*leaf as i64);
            }
            q = q.bind(app);
            for (batch, _) in chunk {
                q = q.bind(batch);
            }
            set += q
                .execute(&mut *tx)
                .await
                .context(|| format!("recording app {app}'s leaves"))?
                .rows_affected();
        }
        tx.commit()
            .await
            .context(|| format!("committing app {app}'s leaves"))?;
        Ok(set)
    }

    /// Records that `verify` read the batch's objects in full at `at_ms` and found them whole.
    pub(crate) async fn record_full_verification(
        &self,
        app: &str,
        batch_id: &str,
        at_ms: i64,
        how: &str,
    ) -> Result<(), DbError> {
        let pool = &self.pool;
        sqlx::query(AssertSqlSafe(format!(
            "UPDATE {} SET full_verified_at_ms = ?, full_verified_how = ? WHERE app_code = ? AND batch_id = ?",
            self.spec.receipts_table()
        )))
        .bind(at_ms)
        .bind(how)
        .bind(app)
        .bind(batch_id)
        .execute(pool)
        .await
        .context(|| format!("recording the verification of batch {batch_id}"))?;
        Ok(())
    }

    /// Records that a check of the batch at `at_ms` found it other than recorded, and what it
    /// found (`findings`: JSON, as a run's findings are kept — migration 17).
    pub(crate) async fn record_findings(
        &self,
        app: &str,
        batch_id: &str,
        at_ms: i64,
        findings: &str,
    ) -> Result<(), DbError> {
        let pool = &self.pool;
        sqlx::query(AssertSqlSafe(format!(
            "UPDATE {} SET last_findings_at_ms = ?, last_findings = ? WHERE app_code = ? AND batch_id = ?",
            self.spec.receipts_table()
        )))
        .bind(at_ms)
        .bind(findings)
        .bind(app)
        .bind(batch_id)
        .execute(pool)
        .await
        .context(|| format!("recording the findings of batch {batch_id}"))?;
        Ok(())
    }
}
