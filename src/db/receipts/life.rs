//! A receipt's life after it is recorded, as the receipts table is written — each in the caller's
//! transaction, the one that did what the receipt now says: a purge chunk's rows counted and the
//! batch marked purged, rows restored into the source, the member rows compacted to a digest,
//! the objects recorded under a new identity. Every write of the receipts table is this
//! repository's ([`super::Receipts`]); the other repositories call these.

use sqlx::{AssertSqlSafe, MySqlConnection};

use super::Receipts;
use crate::db::object_versions::NewVersions;
use crate::db::{Context, DbError};
use crate::model::format::MembersDigest;
use crate::model::receipt::STATE_VERIFIED;

impl Receipts {
    /// Adds `rows` deleted by a purge chunk to the batch's purged rows (while it is VERIFIED).
    pub(crate) async fn count_purged(
        &self,
        tx: &mut MySqlConnection,
        app: &str,
        batch_id: &str,
        rows: u64,
    ) -> Result<(), DbError> {
        let sql = format!(
            "UPDATE {} SET purged_rows = purged_rows + ? WHERE app_code = ? AND batch_id = ? AND state = ?",
            self.spec.receipts_table()
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(rows as i64)
            .bind(app)
            .bind(batch_id)
            .bind(STATE_VERIFIED)
            .execute(&mut *tx)
            .await
            .context(|| format!("counting purged rows of batch {batch_id}"))?;
        Ok(())
    }

    /// Marks the batch purged at `now_ms`, `kept` of its rows kept (a newer version in the
    /// source); `clear_restored`: the rows a restore put back are gone again. `false`: the
    /// receipt is no longer VERIFIED (nothing written).
    pub(crate) async fn mark_purged(
        &self,
        tx: &mut MySqlConnection,
        (app, batch_id): (&str, &str),
        now_ms: i64,
        kept: u64,
        clear_restored: bool,
    ) -> Result<bool, DbError> {
        let sql = format!(
            "UPDATE {} SET purged_at_ms = ?, kept_rows = ?{} WHERE app_code = ? AND batch_id = ? AND state = ?",
            self.spec.receipts_table(),
            if clear_restored {
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
            .execute(&mut *tx)
            .await
            .context(|| format!("marking batch {batch_id} purged"))?
            .rows_affected();
        Ok(marked > 0)
    }

    /// Marks the batch restored into the source at `now_ms` (kept if it already was), not
    /// purged, `inserted` rows fewer purged.
    pub(crate) async fn mark_restored(
        &self,
        tx: &mut MySqlConnection,
        app: &str,
        batch_id: &str,
        now_ms: i64,
        inserted: u64,
    ) -> Result<(), DbError> {
        let sql = format!(
            "UPDATE {} SET restored_at_ms = COALESCE(restored_at_ms, ?), purged_at_ms = NULL, \
             purged_rows = GREATEST(purged_rows - ?, 0) WHERE app_code = ? AND batch_id = ?",
            self.spec.receipts_table()
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(now_ms)
            .bind(inserted as i64)
            .bind(app)
            .bind(batch_id)
            .execute(&mut *tx)
            .await
            .context(|| format!("marking batch {batch_id} restored into the source"))?;
        Ok(())
    }

    /// Records that the batch's member rows were compacted at `now_ms` to `digest`
    /// (`deleted` member rows gone). The caller says what failed (compaction's own context).
    pub(crate) async fn mark_compacted(
        &self,
        tx: &mut MySqlConnection,
        (app, batch_id): (&str, &str),
        digest: &MembersDigest,
        now_ms: i64,
        deleted: u64,
    ) -> Result<(), sqlx::Error> {
        let sql = format!(
            "UPDATE {} SET members_digest_sha256 = ?, members_digest_rows = ?, compacted_at_ms = ?, \
             compacted_member_rows = ? WHERE app_code = ? AND batch_id = ?",
            self.spec.receipts_table()
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(&digest.sha256)
            .bind(digest.rows as i64)
            .bind(now_ms)
            .bind(deleted as i64)
            .bind(app)
            .bind(batch_id)
            .execute(&mut *tx)
            .await?;
        Ok(())
    }

    /// The receipt takes `v`'s new object identity, only if it still holds the old one (another
    /// run may have recorded meanwhile). `false`: it held another; nothing written.
    pub(crate) async fn take_versions(
        &self,
        tx: &mut MySqlConnection,
        v: &NewVersions,
    ) -> Result<bool, DbError> {
        let sql = format!(
            "UPDATE {} SET data_etag = ?, data_version_id = ?, manifest_etag = ?, success_etag = ? \
             WHERE app_code = ? AND batch_id = ? AND data_etag <=> ? AND data_version_id <=> ? \
             AND manifest_etag <=> ? AND success_etag <=> ?",
            self.spec.receipts_table()
        );
        let updated = sqlx::query(AssertSqlSafe(sql))
            .bind(&v.new_data_etag)
            .bind(&v.new_data_version_id)
            .bind(&v.new_manifest_etag)
            .bind(&v.new_success_etag)
            .bind(&v.app_code)
            .bind(&v.batch_id)
            .bind(&v.old_data_etag)
            .bind(&v.old_data_version_id)
            .bind(&v.old_manifest_etag)
            .bind(&v.old_success_etag)
            .execute(&mut *tx)
            .await
            .context(|| format!("recording the new versions of batch {}", v.batch_id))?;
        Ok(updated.rows_affected() == 1)
    }

    /// Every receipt takes the new identity its row of `versions` (the object versions table)
    /// recorded in run `run_id` for `cause` (one statement).
    pub(crate) async fn take_recorded_versions(
        &self,
        tx: &mut MySqlConnection,
        versions: &str,
        run_id: &str,
        cause: &str,
    ) -> Result<(), DbError> {
        let sql = format!(
            "UPDATE {receipts} r JOIN {versions} v ON v.app_code = r.app_code AND v.batch_id = r.batch_id \
             SET r.data_etag = v.new_data_etag, r.data_version_id = v.new_data_version_id, \
             r.manifest_etag = v.new_manifest_etag, r.success_etag = v.new_success_etag \
             WHERE v.run_id = ? AND v.cause = ?",
            receipts = self.spec.receipts_table(),
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(run_id)
            .bind(cause)
            .execute(&mut *tx)
            .await
            .context(|| "recording the copy's object versions on the receipts".into())?;
        Ok(())
    }
}
