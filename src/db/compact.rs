//! Members compaction's one transaction per receipt (README, "Compaction"): the receipt row,
//! its member rows and its superseded rows are locked and read; their `(event_id,
//! updated_at_ms)` pairs must hash to the digest just computed from the data object, read back
//! in full by the caller; then the member rows whose source row is gone are deleted and the
//! digest is written on the receipt — in the same transaction, after the app's lock is
//! confirmed. A crash at any point leaves the members or the digest, never neither.
//!
//! Member rows of rows still in the source table (kept because they changed after archiving,
//! or restored) stay: if such a row is archived again, the supersede rule needs its owner. The
//! source table is only read, without locks; one receipt is one transaction of as many 500-row
//! deletes of its members as the batch has (a 50,000-row batch: 100).

use sqlx::{AssertSqlSafe, MySql, MySqlPool, QueryBuilder, Transaction};

use super::lock::{AppLock, Doing, LockLost};
use super::{Context, DbError};
use crate::failpoint::{FailPoints, Tripped};
use crate::model::format::{self, MembersDigest};
use crate::model::table::TableSpec;

/// Member rows deleted per statement.
const DELETE_CHUNK: usize = 500;

#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("batch {batch_id}: the member rows hash to {in_db}, the data object's rows to {in_data}; nothing compacted — run `outbox-archiver verify --batch-id {batch_id}`")]
    DigestMismatch {
        batch_id: String,
        in_db: String,
        in_data: String,
    },
    #[error(transparent)]
    LockLost(#[from] LockLost),
    #[error(transparent)]
    Failpoint(#[from] Tripped),
}

/// What compacting one receipt did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Compacted {
    /// Member rows deleted.
    pub member_rows: u64,
    /// Member rows kept (their rows are still in the source table).
    pub kept: u64,
    /// False when the receipt was no longer compactable by the time it was locked (restored
    /// or compacted meanwhile): nothing was done.
    pub done: bool,
}

/// The context of an error while compacting a batch: what was being done, and to which batch.
fn compacting(batch_id: &str, what: &str) -> String {
    format!("{what} (compacting batch {batch_id})")
}

#[derive(Debug, Clone)]
pub struct CompactQueries {
    spec: &'static TableSpec,
    pool: MySqlPool,
    /// The batches' receipts: a compaction records its digest on its batch's.
    receipts: super::receipts::Receipts,
    /// The member rows a compaction deletes.
    members: super::members::Members,
}

impl CompactQueries {
    pub fn new(pool: &MySqlPool, spec: &'static TableSpec) -> CompactQueries {
        CompactQueries {
            pool: pool.clone(),
            spec,
            receipts: super::receipts::Receipts::new(pool, spec),
            members: super::members::Members::new(pool, spec),
        }
    }

    /// Compacts one receipt whose data object's pairs hash to `in_data`.
    #[allow(clippy::too_many_arguments)]
    pub async fn compact(
        &self,
        app: &str,
        batch_id: &str,
        in_data: &MembersDigest,
        lock: &AppLock,
        now_ms: i64,
        failpoints: &FailPoints,
    ) -> Result<Compacted, CompactError> {
        let pool = &self.pool;
        let context = |what: &str| compacting(batch_id, what);
        let mut tx = pool
            .begin()
            .await
            .context(|| context("starting the transaction"))?;
        super::layout::hold(&mut tx, self.spec).await?;
        let Some((members, in_db)) = self.lock_and_read(&mut tx, app, batch_id).await? else {
            return Ok(Compacted::default());
        };
        if &in_db != in_data {
            return Err(CompactError::DigestMismatch {
                batch_id: batch_id.to_string(),
                in_db: format!("{} pairs, sha256 {}", in_db.rows, in_db.sha256),
                in_data: format!("{} pairs, sha256 {}", in_data.rows, in_data.sha256),
            });
        }
        let mut deleted = 0;
        for chunk in members.chunks(DELETE_CHUNK) {
            deleted += self.delete_gone(&mut tx, app, batch_id, chunk).await?;
        }
        failpoints.pass("compact-after-delete")?;
        self.receipts
            .mark_compacted(&mut tx, (app, batch_id), in_data, now_ms, deleted)
            .await
            .context(|| context("writing the digest"))?;
        if !lock.held_per(&mut *tx).await? {
            return Err(lock.lost(batch_id, Doing::Compacting).into());
        }
        failpoints.pass("compact-before-commit")?;
        tx.commit().await.context(|| context("committing"))?;
        Ok(Compacted {
            member_rows: deleted,
            kept: (members.len() as u64).saturating_sub(deleted),
            done: true,
        })
    }

    /// Locks the receipt row, if it is still compactable (`None` if not: restored or compacted
    /// meanwhile), then its member rows, and reads them and its superseded rows: the member
    /// rows' pairs, and the digest of all their pairs as the database holds them.
    async fn lock_and_read(
        &self,
        tx: &mut Transaction<'_, MySql>,
        app: &str,
        batch_id: &str,
    ) -> Result<Option<(Vec<(String, i64)>, MembersDigest)>, DbError> {
        let spec = self.spec;
        let context = |what: &str| compacting(batch_id, what);
        let sql = format!(
            "SELECT 1 FROM {} WHERE app_code = ? AND batch_id = ? AND {} FOR UPDATE",
            spec.receipts_table(),
            super::receipts::rule::COMPACTABLE
        );
        let eligible: Option<i32> = sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(app)
            .bind(batch_id)
            .fetch_optional(&mut **tx)
            .await
            .context(|| context("locking the receipt"))?;
        if eligible.is_none() {
            return Ok(None);
        }
        // The member rows locked (the role may delete them); the superseded rows read as they
        // are (only archive writes them, under the app's lock this run holds — and MySQL wants
        // more than SELECT for a locking read).
        let sql = format!(
            "SELECT event_id, updated_at_ms FROM {} WHERE app_code = ? AND batch_id = ? FOR UPDATE",
            spec.members_table()
        );
        let members: Vec<(String, i64)> = sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(batch_id)
            .fetch_all(&mut **tx)
            .await
            .context(|| context("reading the member rows"))?;
        let sql = format!(
            "SELECT event_id, updated_at_ms FROM {} WHERE app_code = ? AND batch_id = ?",
            spec.superseded_table()
        );
        let superseded: Vec<(String, i64)> = sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(batch_id)
            .fetch_all(&mut **tx)
            .await
            .context(|| context("reading the superseded rows"))?;
        let in_db = format::members_digest(
            members
                .iter()
                .chain(&superseded)
                .map(|(e, u)| (e.as_str(), *u)),
        );
        Ok(Some((members, in_db)))
    }

    /// Deletes the member rows of one chunk (at most [`DELETE_CHUNK`]) whose source row is gone;
    /// returns how many went.
    async fn delete_gone(
        &self,
        tx: &mut Transaction<'_, MySql>,
        app: &str,
        batch_id: &str,
        chunk: &[(String, i64)],
    ) -> Result<u64, DbError> {
        let spec = self.spec;
        let context = |what: &str| compacting(batch_id, what);
        // Which of them are still in the source (kept, or restored): a plain read, which locks
        // nothing in the live table; then the others' member rows go by primary key, 500 a
        // statement, in this transaction.
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "SELECT {event} FROM {source} WHERE {app_col} = ",
            event = spec.event_id,
            source = spec.name,
            app_col = spec.app_code,
        ));
        qb.push_bind(app)
            .push(format!(" AND {} IN (", spec.event_id));
        let mut ids = qb.separated(", ");
        for (event_id, _) in chunk {
            ids.push_bind(event_id.as_str());
        }
        qb.push(")");
        let present: std::collections::HashSet<String> = qb
            .build_query_scalar()
            .fetch_all(&mut **tx)
            .await
            .context(|| context("looking for member rows still in the source table"))?
            .into_iter()
            .collect();
        let gone: Vec<&str> = chunk
            .iter()
            .map(|(e, _)| e.as_str())
            .filter(|e| !present.contains(*e))
            .collect();
        if gone.is_empty() {
            return Ok(0);
        }
        self.members
            .delete(tx, app, batch_id, &gone)
            .await
            .context(|| context("deleting member rows"))
    }

    /// How many of a batch's member rows belong to rows no longer in the source table (what
    /// compaction would delete), by a plain read.
    pub(crate) async fn members_gone_from_source(
        &self,
        app: &str,
        batch_id: &str,
    ) -> Result<u64, DbError> {
        let pool = &self.pool;
        let spec = self.spec;
        let sql = format!(
            "SELECT COUNT(*) FROM {members} AS m LEFT JOIN {source} AS s \
             ON s.{app_col} = ? AND s.{event_col} = m.event_id \
             WHERE m.app_code = ? AND m.batch_id = ? AND s.{event_col} IS NULL",
            members = spec.members_table(),
            source = spec.name,
            app_col = spec.app_code,
            event_col = spec.event_id,
        );
        let n: i64 = sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(app)
            .bind(app)
            .bind(batch_id)
            .fetch_one(pool)
            .await
            .context(|| format!("counting the member rows batch {batch_id} would lose"))?;
        Ok(n.max(0) as u64)
    }

    /// Bytes per member row, data and indexes, as information_schema estimates the members
    /// table (for `status`'s bytes saved); `None` on an empty table.
    pub(crate) async fn bytes_per_member(&self) -> Result<Option<f64>, DbError> {
        let pool = &self.pool;
        let sized: Vec<(u64, u64)> = super::schema_rows(
            pool,
            "SELECT CAST(COALESCE(table_rows, 0) AS UNSIGNED), \
             CAST(COALESCE(data_length, 0) + COALESCE(index_length, 0) AS UNSIGNED) \
             FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
            &[&self.spec.members_table()],
        )
        .await
        .context(|| "sizing the members table".into())?;
        Ok(sized
            .first()
            .and_then(|&(rows, bytes)| (rows > 0).then(|| bytes as f64 / rows as f64)))
    }
}
