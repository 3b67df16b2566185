//! Deleting what is proven (SPEC §5.5): a source row goes only if it is a member of a VERIFIED
//! receipt and its status and `updated_at_ms` still equal what was archived. Each chunk of at
//! most 500 members is one transaction of primary-key deletes — never a range delete — that also
//! counts what it deleted on the receipt, with the app's lock re-checked before the commit.
//!
//! Each chunk first locks its receipt row and reads its restored mark (SPEC §5.9): a batch that
//! `restore --into-source` put back — which marks the receipt in the same transaction as its
//! inserts — is left alone, even when the mark arrived after purge listed the receipt.

use sqlx::{AssertSqlSafe, MySqlPool};

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

fn list(n: usize, one: &str) -> String {
    vec![one; n].join(", ")
}

impl PurgeQueries {
    pub fn new(spec: &'static TableSpec) -> PurgeQueries {
        PurgeQueries { spec }
    }

    /// `WHERE` over a chunk: the app, the delivered status, the event ids (the primary key) and
    /// the exact `(event_id, updated_at_ms)` pairs that were archived.
    fn exact(&self, n: usize) -> String {
        let s = self.spec;
        format!(
            "{app} = ? AND {status} = ? AND {id} IN ({ids}) AND ({id}, {upd}) IN ({pairs})",
            app = s.app_code,
            status = s.status,
            id = s.event_id,
            upd = s.updated_at_ms,
            ids = list(n, "?"),
            pairs = list(n, "(?, ?)"),
        )
    }

    fn bind_exact<'q>(
        mut q: sqlx::query::Query<'q, sqlx::MySql, sqlx::mysql::MySqlArguments>,
        app: &'q str,
        status: &'q str,
        members: &'q [Member],
    ) -> sqlx::query::Query<'q, sqlx::MySql, sqlx::mysql::MySqlArguments> {
        q = q.bind(app).bind(status);
        for m in members {
            q = q.bind(&m.event_id);
        }
        for m in members {
            q = q.bind(&m.event_id).bind(m.updated_at_ms);
        }
        q
    }

    /// How many of these members would be deleted now (`--dry-run`).
    pub async fn count(
        &self,
        pool: &MySqlPool,
        app: &str,
        status: &str,
        members: &[Member],
    ) -> Result<u64, DbError> {
        let sql = format!(
            "SELECT COUNT(*) FROM {} WHERE {}",
            self.spec.name,
            self.exact(members.len())
        );
        let q = Self::bind_exact(sqlx::query(AssertSqlSafe(sql)), app, status, members);
        let row = q
            .fetch_one(pool)
            .await
            .context(|| format!("counting purgeable rows of app {app}"))?;
        let n: i64 = sqlx::Row::try_get(&row, 0).context(|| "reading a count".into())?;
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
        let sql = format!("DELETE FROM {} WHERE {}", s.name, self.exact(members.len()));
        let deleted = Self::bind_exact(sqlx::query(AssertSqlSafe(sql)), app, status, members)
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
        let sql = format!(
            "SELECT {id} FROM {table} WHERE {app} = ? AND {id} IN ({ids})",
            id = s.event_id,
            table = s.name,
            app = s.app_code,
            ids = list(members.len(), "?")
        );
        let mut q = sqlx::query_scalar::<_, String>(AssertSqlSafe(sql)).bind(app);
        for m in members {
            q = q.bind(&m.event_id);
        }
        let mut kept = q
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
