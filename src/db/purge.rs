//! Deleting what is proven (SPEC §5.5): a source row goes only if it is a member of a VERIFIED
//! receipt and its status and `updated_at_ms` still equal what was archived. Each chunk of at
//! most 500 members is one transaction of primary-key deletes — never a range delete — that also
//! counts what it deleted on the receipt, with the app's lock re-checked before the commit.
//!
//! Each chunk first locks its receipt row and reads its restored mark (SPEC §5.9): a batch that
//! `restore --into-source` put back — which marks the receipt in the same transaction as its
//! inserts — is left alone, even when the mark arrived after purge listed the receipt.

use sqlx::{AssertSqlSafe, MySql, MySqlPool, QueryBuilder};

use super::lock::AppLock;
use super::{Context, DbError};
use crate::batch::Member;
use crate::failpoint::{FailPoints, Tripped};
use crate::table::TableSpec;

/// At most this many rows per delete transaction.
pub const PURGE_CHUNK: usize = 500;

#[derive(Debug, thiserror::Error)]
pub enum PurgeError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("lost advisory lock {lock} while purging batch {batch_id}; the chunk was rolled back")]
    LockLost { lock: String, batch_id: String },
    #[error(transparent)]
    Failpoint(#[from] Tripped),
}

/// What one chunk did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chunk {
    pub purged: u64,
    /// Members whose row is still there: changed since it was archived, so kept.
    pub kept: Vec<String>,
    /// The receipt is marked restored into the source: nothing was deleted.
    pub restored: bool,
}

#[derive(Debug, Clone)]
pub struct PurgeQueries {
    spec: &'static TableSpec,
}

impl PurgeQueries {
    pub fn new(spec: &'static TableSpec) -> PurgeQueries {
        PurgeQueries { spec }
    }

    /// Appends `{table} AS w` joined with the chunk's exact `(event_id, updated_at_ms)` pairs —
    /// a derived table of one `SELECT` per member — on the app and the primary key, and the
    /// `WHERE` on the delivered status: exactly the rows whose key and version were archived.
    ///
    /// A join, not `(event_id, updated_at_ms) IN (…)`: with 500 pairs the server compares each
    /// row against the list, which cost purge about 14 µs of database CPU per row (README,
    /// "Performance"); the join is one primary-key lookup per member. Portable to MySQL 8.
    fn push_exact(
        &self,
        qb: &mut QueryBuilder<MySql>,
        app: &str,
        status: &str,
        members: &[Member],
    ) {
        let s = self.spec;
        qb.push(format!(" {} AS w JOIN (", s.name));
        for (i, m) in members.iter().enumerate() {
            qb.push(if i == 0 {
                "SELECT "
            } else {
                " UNION ALL SELECT "
            });
            qb.push_bind(m.event_id.clone());
            qb.push(if i == 0 { " AS event_id, " } else { ", " });
            qb.push_bind(m.updated_at_ms);
            if i == 0 {
                qb.push(" AS updated_at_ms");
            }
        }
        qb.push(format!(
            ") AS m ON w.{app_code} = ",
            app_code = s.app_code
        ))
        .push_bind(app.to_string())
        .push(format!(
            " AND w.{event_id} = m.event_id AND w.{updated} = m.updated_at_ms WHERE w.{status_col} = ",
            event_id = s.event_id,
            updated = s.updated_at_ms,
            status_col = s.status
        ))
        .push_bind(status.to_string());
    }

    /// How many of these members would be deleted now (`--dry-run`).
    pub async fn count(
        &self,
        pool: &MySqlPool,
        app: &str,
        status: &str,
        members: &[Member],
    ) -> Result<u64, DbError> {
        let mut qb = QueryBuilder::<MySql>::new("SELECT COUNT(*) FROM");
        self.push_exact(&mut qb, app, status, members);
        let n: i64 = qb
            .build_query_scalar()
            .fetch_one(pool)
            .await
            .context(|| format!("counting purgeable rows of app {app}"))?;
        Ok(n as u64)
    }

    /// Deletes one chunk of a batch's members in one transaction.
    #[allow(clippy::too_many_arguments)]
    pub async fn purge_chunk(
        &self,
        pool: &MySqlPool,
        app: &str,
        status: &str,
        batch_id: &str,
        members: &[Member],
        lock: &AppLock,
        include_restored: bool,
        failpoints: &FailPoints,
    ) -> Result<Chunk, PurgeError> {
        assert!(
            members.len() <= PURGE_CHUNK,
            "purge chunks hold at most {PURGE_CHUNK} rows"
        );
        let s = self.spec;
        let mut tx = pool
            .begin()
            .await
            .context(|| format!("starting a purge transaction of batch {batch_id}"))?;
        let sql = format!(
            "SELECT restored_at_ms FROM {} WHERE app_code = ? AND batch_id = ? FOR UPDATE",
            s.receipts_table()
        );
        let restored: Option<Option<i64>> = sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(app)
            .bind(batch_id)
            .fetch_optional(&mut *tx)
            .await
            .context(|| format!("reading the restored mark of batch {batch_id}"))?;
        if restored.flatten().is_some() && !include_restored {
            return Ok(Chunk {
                restored: true,
                ..Chunk::default()
            });
        }
        let mut qb = QueryBuilder::<MySql>::new("DELETE w FROM");
        self.push_exact(&mut qb, app, status, members);
        let deleted = qb
            .build()
            .execute(&mut *tx)
            .await
            .context(|| format!("deleting members of batch {batch_id}"))?
            .rows_affected();
        // Every member deleted: nothing was kept, and no need to look.
        let kept = if deleted as usize == members.len() {
            Vec::new()
        } else {
            self.kept(&mut tx, app, batch_id, members).await?
        };
        let sql = format!(
            "UPDATE {} SET purged_rows = purged_rows + ? WHERE app_code = ? AND batch_id = ?",
            s.receipts_table()
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(deleted as i64)
            .bind(app)
            .bind(batch_id)
            .execute(&mut *tx)
            .await
            .context(|| format!("counting purged rows of batch {batch_id}"))?;
        if !lock.held_per(&mut *tx).await? {
            return Err(PurgeError::LockLost {
                lock: lock.name().to_string(),
                batch_id: batch_id.to_string(),
            });
        }
        failpoints.pass("before-purge-commit")?;
        tx.commit()
            .await
            .context(|| format!("committing a purge chunk of batch {batch_id}"))?;
        Ok(Chunk {
            purged: deleted,
            kept,
            restored: false,
        })
    }

    /// Members whose row is still there after the delete: changed since archiving, so kept.
    async fn kept(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
        app: &str,
        batch_id: &str,
        members: &[Member],
    ) -> Result<Vec<String>, DbError> {
        let s = self.spec;
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "SELECT {} FROM {} WHERE {} = ",
            s.event_id, s.name, s.app_code
        ));
        qb.push_bind(app).push(format!(" AND {} IN (", s.event_id));
        let mut ids = qb.separated(", ");
        for m in members {
            ids.push_bind(m.event_id.as_str());
        }
        qb.push(")");
        let mut kept: Vec<String> = qb
            .build_query_scalar()
            .fetch_all(&mut **tx)
            .await
            .context(|| format!("finding kept rows of batch {batch_id}"))?;
        kept.sort();
        Ok(kept)
    }

    /// Marks a batch done: every member deleted or kept. A rerun skips it. `include_restored`:
    /// a restored batch purged again on purpose is no longer restored.
    pub async fn finish(
        &self,
        pool: &MySqlPool,
        app: &str,
        batch_id: &str,
        kept: u64,
        include_restored: bool,
        now_ms: i64,
    ) -> Result<(), DbError> {
        let sql = format!(
            "UPDATE {} SET purged_at_ms = ?, kept_rows = ?{} WHERE app_code = ? AND batch_id = ?",
            self.spec.receipts_table(),
            if include_restored {
                ", restored_at_ms = NULL"
            } else {
                ""
            }
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(now_ms)
            .bind(kept as i64)
            .bind(app)
            .bind(batch_id)
            .execute(pool)
            .await
            .context(|| format!("marking batch {batch_id} purged"))?;
        Ok(())
    }
}
