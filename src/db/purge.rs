//! Deleting what is proven (SPEC §5.5): a source row goes only if it is a member of a receipt
//! that is VERIFIED in the same transaction, and the row is still exactly what was archived —
//! read `FOR UPDATE`, encoded as the archive encodes it, its line's fingerprint equal to the
//! member's. Each chunk of at most 500 members is one transaction of primary-key deletes — never
//! a range delete — that also counts what it deleted on the receipt, with the app's lock
//! re-checked before the commit.
//!
//! Each chunk first locks its receipt row and reads its state and restored mark (SPEC §5.9): a
//! receipt withdrawn meanwhile (another state, or deleted) stops the batch; a batch that
//! `restore --into-source` put back — which marks the receipt in the same transaction as its
//! inserts — is left alone, even when the mark arrived after purge listed the receipt.

use std::collections::HashMap;

use sqlx::{AssertSqlSafe, MySql, MySqlPool, QueryBuilder, Transaction};

use super::lock::{AppLock, Doing, LockLost};
use super::receipts::STATE_VERIFIED;
use super::source::SourceTable;
use super::{Context, DbError};
use crate::failpoint::{FailPoints, Tripped};
use crate::model::batch::Member;
use crate::model::table::TableSpec;

/// At most this many rows per delete transaction.
pub const PURGE_CHUNK: usize = 500;

#[derive(Debug, thiserror::Error)]
pub enum PurgeError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    LockLost(#[from] LockLost),
    #[error("the receipt of batch {batch_id} was withdrawn while purge worked on it ({now}): the rest of its rows stay — run `outbox-archiver verify --batch-id {batch_id}`")]
    Withdrawn { batch_id: String, now: String },
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
    /// Rows another transaction held locked: not looked at, so the receipt is not finished.
    pub busy: u64,
}

#[derive(Debug, Clone)]
pub struct PurgeQueries {
    spec: &'static TableSpec,
    /// How the archive encodes a row: purge encodes each row as it is now the same way.
    source: SourceTable,
}

/// The rows of a chunk as they are now, held to their members: which are exactly what was
/// archived (their line's fingerprint is the member's), which are there but changed, and how
/// many another transaction held locked (not looked at, left for a later run).
struct Compared {
    exact: Vec<String>,
    changed: Vec<String>,
    busy: u64,
}

impl PurgeQueries {
    pub fn new(spec: &'static TableSpec) -> PurgeQueries {
        PurgeQueries {
            spec,
            source: SourceTable::new(spec),
        }
    }

    /// Reads the rows of these members (of `app`) as they are now — `FOR UPDATE` inside a
    /// delete transaction, so that they cannot change before they are deleted — encodes each as
    /// the archive does and compares its line's fingerprint with the member's. A row is exact
    /// only if every column is what was archived: status, `updated_at_ms`, payload, all of it.
    /// Members without a fingerprint never reach here (purge fills them from the data object).
    async fn compare<'e, E>(
        &self,
        executor: E,
        app: &str,
        members: &[Member],
        for_update: bool,
    ) -> Result<Compared, DbError>
    where
        E: sqlx::Executor<'e, Database = MySql>,
    {
        let s = self.spec;
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "SELECT {} FROM {} WHERE {} = ",
            s.select_list(),
            s.name,
            s.app_code
        ));
        qb.push_bind(app).push(format!(" AND {} IN (", s.event_id));
        let mut ids = qb.separated(", ");
        for m in members {
            ids.push_bind(m.event_id.as_str());
        }
        // SKIP LOCKED: purge never waits for a row the relay (or anyone) holds, so it can never
        // be one side of a deadlock with it; such rows are counted and left for the next run.
        qb.push(if for_update {
            ") FOR UPDATE SKIP LOCKED"
        } else {
            ")"
        });
        let rows = qb
            .build()
            .fetch_all(executor)
            .await
            .context(|| format!("reading the rows of app {app} to compare before a delete"))?;
        let want: HashMap<&str, &Member> =
            members.iter().map(|m| (m.event_id.as_str(), m)).collect();
        let mut compared = Compared {
            exact: Vec::new(),
            changed: Vec::new(),
            busy: 0,
        };
        for row in self.source.encode(app, &rows)? {
            let now = row.cursor();
            let exact = want.get(now.event_id.as_str()).is_some_and(|m| {
                m.updated_at_ms == now.updated_at_ms
                    && m.fingerprint == Some(crate::model::digest::row_fingerprint(&row.line))
            });
            if exact {
                compared.exact.push(now.event_id);
            } else {
                compared.changed.push(now.event_id);
            }
        }
        compared.changed.sort();
        Ok(compared)
    }

    /// How many of these members would be deleted now (`--dry-run`): rows exactly as archived.
    pub async fn count(
        &self,
        pool: &MySqlPool,
        app: &str,
        members: &[Member],
    ) -> Result<u64, DbError> {
        Ok(self.compare(pool, app, members, false).await?.exact.len() as u64)
    }

    /// Deletes one chunk of a batch's members in one transaction: the receipt is locked and must
    /// still be VERIFIED (and not restored into the source), the rows are locked and compared
    /// with their members, and only rows exactly as archived are deleted, by primary key.
    #[allow(clippy::too_many_arguments)]
    pub async fn purge_chunk(
        &self,
        pool: &MySqlPool,
        app: &str,
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
        let mut tx = pool
            .begin()
            .await
            .context(|| format!("starting a purge transaction of batch {batch_id}"))?;
        let restored_at_ms = self.lock_receipt(&mut tx, app, batch_id).await?;
        if restored_at_ms.is_some() && !include_restored {
            return Ok(Chunk {
                restored: true,
                ..Chunk::default()
            });
        }
        let mut compared = self.compare(&mut *tx, app, members, true).await?;
        let seen = compared.exact.len() + compared.changed.len();
        if seen < members.len() {
            // Gone, or locked by another transaction (skipped): a plain read tells them apart.
            compared.busy = self
                .existing(pool, app, members)
                .await?
                .saturating_sub(seen as u64);
        }
        let deleted = if compared.exact.is_empty() {
            0
        } else {
            self.delete_exact(&mut tx, app, batch_id, &compared.exact)
                .await?
        };
        let sql = format!(
            "UPDATE {} SET purged_rows = purged_rows + ? WHERE app_code = ? AND batch_id = ? AND state = ?",
            self.spec.receipts_table()
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(deleted as i64)
            .bind(app)
            .bind(batch_id)
            .bind(STATE_VERIFIED)
            .execute(&mut *tx)
            .await
            .context(|| format!("counting purged rows of batch {batch_id}"))?;
        if !lock.held_per(&mut *tx).await? {
            return Err(lock.lost(batch_id, Doing::Purging).into());
        }
        failpoints.pass("before-purge-commit")?;
        tx.commit()
            .await
            .context(|| format!("committing a purge chunk of batch {batch_id}"))?;
        Ok(Chunk {
            purged: deleted,
            kept: compared.changed,
            restored: false,
            busy: compared.busy,
        })
    }

    /// The first statement of a delete transaction: locks the batch's receipt row `FOR UPDATE`
    /// and returns its restored mark. A receipt no longer VERIFIED, or gone, is withdrawn.
    async fn lock_receipt(
        &self,
        tx: &mut Transaction<'_, MySql>,
        app: &str,
        batch_id: &str,
    ) -> Result<Option<i64>, PurgeError> {
        let sql = format!(
            "SELECT state, restored_at_ms FROM {} WHERE app_code = ? AND batch_id = ? FOR UPDATE",
            self.spec.receipts_table()
        );
        let receipt: Option<(String, Option<i64>)> = sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(batch_id)
            .fetch_optional(&mut **tx)
            .await
            .context(|| format!("reading the receipt of batch {batch_id}"))?;
        match receipt {
            Some((state, _)) if state != STATE_VERIFIED => Err(PurgeError::Withdrawn {
                batch_id: batch_id.to_string(),
                now: format!("in state {state}"),
            }),
            None => Err(PurgeError::Withdrawn {
                batch_id: batch_id.to_string(),
                now: "deleted".into(),
            }),
            Some((_, restored_at_ms)) => Ok(restored_at_ms),
        }
    }

    /// Deletes the rows found exactly as archived (locked and compared in this transaction), by
    /// primary key, and returns how many went: always all of them, or an error.
    async fn delete_exact(
        &self,
        tx: &mut Transaction<'_, MySql>,
        app: &str,
        batch_id: &str,
        exact: &[String],
    ) -> Result<u64, PurgeError> {
        let s = self.spec;
        let mut qb =
            QueryBuilder::<MySql>::new(format!("DELETE FROM {} WHERE {} = ", s.name, s.app_code));
        qb.push_bind(app).push(format!(" AND {} IN (", s.event_id));
        let mut ids = qb.separated(", ");
        for id in exact {
            ids.push_bind(id.as_str());
        }
        qb.push(")");
        let deleted = qb
            .build()
            .execute(&mut **tx)
            .await
            .context(|| format!("deleting members of batch {batch_id}"))?
            .rows_affected();
        if deleted != exact.len() as u64 {
            // The rows were locked: another count means something this code does not know.
            return Err(PurgeError::Db(DbError::Query {
                context: format!(
                    "deleting members of batch {batch_id}: {deleted} rows went of the {} locked and compared; rolled back",
                    exact.len()
                ),
                source: sqlx::Error::RowNotFound,
            }));
        }
        Ok(deleted)
    }

    /// How many of these members' rows exist now (a plain read, outside the delete transaction:
    /// it does not wait for row locks).
    async fn existing(
        &self,
        pool: &MySqlPool,
        app: &str,
        members: &[Member],
    ) -> Result<u64, DbError> {
        let s = self.spec;
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "SELECT COUNT(*) FROM {} WHERE {} = ",
            s.name, s.app_code
        ));
        qb.push_bind(app).push(format!(" AND {} IN (", s.event_id));
        let mut ids = qb.separated(", ");
        for m in members {
            ids.push_bind(m.event_id.as_str());
        }
        qb.push(")");
        let n: i64 = qb
            .build_query_scalar()
            .fetch_one(pool)
            .await
            .context(|| format!("counting the rows of app {app} a purge chunk left"))?;
        Ok(n.max(0) as u64)
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
    ) -> Result<(), PurgeError> {
        let sql = format!(
            "UPDATE {} SET purged_at_ms = ?, kept_rows = ?{} WHERE app_code = ? AND batch_id = ? AND state = ?",
            self.spec.receipts_table(),
            if include_restored {
                ", restored_at_ms = NULL"
            } else {
                ""
            }
        );
        let marked = sqlx::query(AssertSqlSafe(sql))
            .bind(now_ms)
            .bind(kept as i64)
            .bind(app)
            .bind(batch_id)
            .bind(STATE_VERIFIED)
            .execute(pool)
            .await
            .context(|| format!("marking batch {batch_id} purged"))?
            .rows_affected();
        if marked == 0 {
            return Err(PurgeError::Withdrawn {
                batch_id: batch_id.to_string(),
                now: "no longer VERIFIED when it was to be marked purged".into(),
            });
        }
        Ok(())
    }
}
