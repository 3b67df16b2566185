//! The members table (one row per archived source row: the version `purge` may delete) and the
//! superseded table (older versions of rows whose member row a later batch took over, SPEC
//! §5.10). Written only inside the receipt transaction ([`super::record`]).
//!
//! Member rows are clustered by batch in archive order (`app_code, batch_id, updated_at_ms,
//! event_id`): a batch's rows go in at the end of its app's range, and every list of a batch's
//! members is one range of the table. A unique key on `(app_code, event_id)` keeps a row in at
//! most one batch; its entries carry the batch and version (InnoDB appends the primary key), so
//! looking a version up by event id reads no row.

use std::collections::{HashMap, HashSet};

use sqlx::{AssertSqlSafe, MySql, MySqlPool, QueryBuilder, Transaction};

use super::{Context, DbError};
use crate::model::batch::{Member, Superseded};
use crate::model::digest::RowFingerprint;
use crate::model::table::TableSpec;

/// A member row as the receipt transaction reads it back.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct MemberRow {
    pub event_id: String,
    pub updated_at_ms: i64,
    pub batch_id: String,
    pub row_sha256: Option<Vec<u8>>,
}

impl MemberRow {
    pub(crate) fn fingerprint(&self) -> Option<RowFingerprint> {
        self.row_sha256
            .as_deref()
            .and_then(RowFingerprint::from_slice)
    }
}

/// What a member row records besides its key and version: the batch that owns it (whose
/// receipt holds the manifest hash and verification time).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Owner<'a> {
    pub app_code: &'a str,
    pub batch_id: &'a str,
}

/// Whether an insert of member rows stops at a row another batch owns, or keeps it as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnDuplicate {
    /// Plain `INSERT`: a key that exists fails the statement (error 1062), which InnoDB rolls
    /// back alone — the transaction goes on. The common case, and the cheapest statement.
    Fail,
    /// A key that exists is left as it is (a no-op update); the read-back decides whose it is.
    Keep,
}

/// The members and superseded tables of one outbox table.
#[derive(Debug, Clone)]
pub(crate) struct Members {
    spec: &'static TableSpec,
    pool: MySqlPool,
}

impl Members {
    pub(crate) fn new(pool: &MySqlPool, spec: &'static TableSpec) -> Members {
        Members {
            pool: pool.clone(),
            spec,
        }
    }

    /// The batches whose member or superseded rows name `event_id` of `app` (primary-key
    /// lookups).
    pub(crate) async fn batches_naming(
        &self,
        app: &str,
        event_id: &str,
    ) -> Result<Vec<String>, DbError> {
        let sql = format!(
            "SELECT batch_id FROM {} WHERE app_code = ? AND event_id = ? \
             UNION SELECT batch_id FROM {} WHERE app_code = ? AND event_id = ?",
            self.spec.members_table(),
            self.spec.superseded_table()
        );
        sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(app)
            .bind(event_id)
            .bind(app)
            .bind(event_id)
            .fetch_all(&self.pool)
            .await
            .context(|| format!("looking up event {event_id:?} of app {app} in the members"))
    }

    /// The batch whose member row holds `event_id` of `app` now (at most one: the event index):
    /// the batch a restore takes the row from. None once no member row names it (compacted).
    pub(crate) async fn batch_holding(
        &self,
        app: &str,
        event_id: &str,
    ) -> Result<Option<String>, DbError> {
        let sql = format!(
            "SELECT batch_id FROM {} WHERE app_code = ? AND event_id = ?",
            self.spec.members_table()
        );
        sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(app)
            .bind(event_id)
            .fetch_optional(&self.pool)
            .await
            .context(|| format!("looking up the batch holding event {event_id:?} of app {app}"))
    }

    /// Deletes the member rows `event_ids` of batch `batch_id` of `app` (a compaction's: rows
    /// gone from the source), in `tx`. Returns how many went.
    pub(crate) async fn delete(
        &self,
        tx: &mut Transaction<'_, MySql>,
        app: &str,
        batch_id: &str,
        event_ids: &[&str],
    ) -> Result<u64, sqlx::Error> {
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "DELETE FROM {} WHERE app_code = ",
            self.spec.members_table()
        ));
        qb.push_bind(app)
            .push(" AND batch_id = ")
            .push_bind(batch_id)
            .push(" AND event_id IN (");
        let mut ids = qb.separated(", ");
        for event_id in event_ids {
            ids.push_bind(*event_id);
        }
        qb.push(")");
        Ok(qb.build().execute(&mut **tx).await?.rows_affected())
    }

    /// The members a receipt recorded, as `(event_id, updated_at_ms)`.
    pub(crate) async fn members_of(
        &self,
        app: &str,
        batch_id: &str,
    ) -> Result<Vec<Member>, DbError> {
        let pool = &self.pool;
        self.versions_in(pool, &self.spec.members_table(), app, batch_id)
            .await
            .context(|| format!("reading the members of batch {batch_id}"))
    }

    /// The `(event_id, updated_at_ms)` of a receipt's members, without their fingerprints: what
    /// the straggler scan holds the source's keys to.
    pub(crate) async fn versions_of(
        &self,
        app: &str,
        batch_id: &str,
    ) -> Result<Vec<(String, i64)>, DbError> {
        let sql = format!(
            "SELECT event_id, updated_at_ms FROM {} WHERE app_code = ? AND batch_id = ?",
            self.spec.members_table()
        );
        sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(batch_id)
            .fetch_all(&self.pool)
            .await
            .context(|| format!("reading the members of batch {batch_id}"))
    }

    /// The older versions of rows in a batch that later batches superseded.
    pub(crate) async fn superseded_of(
        &self,
        app: &str,
        batch_id: &str,
    ) -> Result<Vec<Member>, DbError> {
        let pool = &self.pool;
        self.versions_in(pool, &self.spec.superseded_table(), app, batch_id)
            .await
            .context(|| format!("reading the superseded rows of batch {batch_id}"))
    }

    /// Every row version a batch holds and the database vouches for: its members, and the older
    /// versions a later batch superseded. What `verify` and `restore` compare a data object's
    /// rows with.
    pub(crate) async fn proven_members_of(
        &self,
        app: &str,
        batch_id: &str,
    ) -> Result<Vec<Member>, DbError> {
        let mut members = self.members_of(app, batch_id).await?;
        members.extend(self.superseded_of(app, batch_id).await?);
        Ok(members)
    }

    async fn versions_in<'e>(
        &self,
        executor: impl sqlx::Executor<'e, Database = MySql>,
        table: &str,
        app: &str,
        batch_id: &str,
    ) -> Result<Vec<Member>, sqlx::Error> {
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "SELECT event_id, updated_at_ms, row_sha256 FROM {table} WHERE app_code = "
        ));
        qb.push_bind(app)
            .push(" AND batch_id = ")
            .push_bind(batch_id);
        let rows: Vec<(String, i64, Option<Vec<u8>>)> =
            qb.build_query_as().fetch_all(executor).await?;
        Ok(rows
            .into_iter()
            .map(|(event_id, updated_at_ms, fingerprint)| Member {
                event_id,
                updated_at_ms,
                fingerprint: fingerprint.as_deref().and_then(RowFingerprint::from_slice),
            })
            .collect())
    }

    /// Of these event ids of an app, the `(event_id, updated_at_ms)` versions members hold.
    pub(crate) async fn versions_among(
        &self,
        app: &str,
        event_ids: impl Iterator<Item = &str>,
    ) -> Result<HashSet<(String, i64)>, DbError> {
        let rows = self.versions(app, None, event_ids).await;
        let rows = rows.context(|| format!("looking up members of app {app}"))?;
        Ok(rows.into_iter().collect())
    }

    /// Of these event ids of an app, those whose member row belongs to another batch than
    /// `batch_id`, with the version that batch holds.
    pub(crate) async fn owned_elsewhere(
        &self,
        app: &str,
        batch_id: &str,
        event_ids: impl Iterator<Item = &str>,
    ) -> Result<HashMap<String, i64>, DbError> {
        let rows = self.versions(app, Some(batch_id), event_ids).await;
        let rows = rows.context(|| format!("looking up members of app {app} in other batches"))?;
        Ok(rows.into_iter().collect())
    }

    /// `(event_id, updated_at_ms)` of the member rows of these event ids of an app, those of
    /// batch `not_of` left out.
    async fn versions(
        &self,
        app: &str,
        not_of: Option<&str>,
        event_ids: impl Iterator<Item = &str>,
    ) -> Result<Vec<(String, i64)>, sqlx::Error> {
        let pool = &self.pool;
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "SELECT event_id, updated_at_ms FROM {} WHERE app_code = ",
            self.spec.members_table()
        ));
        qb.push_bind(app);
        if let Some(batch_id) = not_of {
            qb.push(" AND batch_id <> ").push_bind(batch_id);
        }
        qb.push(" AND event_id IN (");
        let mut ids = qb.separated(", ");
        for id in event_ids {
            ids.push_bind(id);
        }
        qb.push(")");
        qb.build_query_as().fetch_all(pool).await
    }

    /// Inserts member rows owned by `owner`, in the order given (a batch's rows come in archive
    /// order, its primary key's: each goes in after the one before).
    pub(crate) async fn insert(
        &self,
        tx: &mut Transaction<'_, MySql>,
        owner: Owner<'_>,
        members: &[Member],
        on_duplicate: OnDuplicate,
    ) -> Result<(), sqlx::Error> {
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "INSERT INTO {} (app_code, event_id, updated_at_ms, batch_id, row_sha256) ",
            self.spec.members_table()
        ));
        qb.push_values(members, |mut row, m| {
            row.push_bind(owner.app_code)
                .push_bind(m.event_id.as_str())
                .push_bind(m.updated_at_ms)
                .push_bind(owner.batch_id)
                .push_bind(m.fingerprint.as_ref().map(|f| &f.0[..]));
        });
        if on_duplicate == OnDuplicate::Keep {
            qb.push(" ON DUPLICATE KEY UPDATE event_id = event_id");
        }
        qb.build().execute(&mut **tx).await.map(|_| ())
    }

    /// Every member row a batch owns — key, version and fingerprint — as they are inside `tx`:
    /// one range of the primary key.
    pub(crate) async fn versions_of_batch(
        &self,
        tx: &mut Transaction<'_, MySql>,
        app: &str,
        batch_id: &str,
    ) -> Result<Vec<Member>, sqlx::Error> {
        self.versions_in(&mut **tx, &self.spec.members_table(), app, batch_id)
            .await
    }

    /// The member rows of these event ids of an app, as they are inside `tx`.
    pub(crate) async fn read_back(
        &self,
        tx: &mut Transaction<'_, MySql>,
        app: &str,
        members: &[Member],
    ) -> Result<Vec<MemberRow>, sqlx::Error> {
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "SELECT event_id, updated_at_ms, batch_id, row_sha256 FROM {} WHERE app_code = ",
            self.spec.members_table()
        ));
        qb.push_bind(app).push(" AND event_id IN (");
        let mut ids = qb.separated(", ");
        for m in members {
            ids.push_bind(m.event_id.as_str());
        }
        qb.push(")");
        qb.build_query_as().fetch_all(&mut **tx).await
    }

    /// Keeps `older` versions as their own batches' in the superseded table and deletes their
    /// member rows (exactly those versions); returns how many member rows went.
    pub(crate) async fn retire(
        &self,
        tx: &mut Transaction<'_, MySql>,
        app: &str,
        superseded_by: &str,
        at_ms: i64,
        older: &[Superseded],
    ) -> Result<u64, sqlx::Error> {
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "INSERT INTO {} (app_code, event_id, updated_at_ms, batch_id, superseded_by, superseded_at_ms, row_sha256) ",
            self.spec.superseded_table()
        ));
        qb.push_values(older, |mut row, o| {
            row.push_bind(app)
                .push_bind(o.event_id.as_str())
                .push_bind(o.updated_at_ms)
                .push_bind(o.batch_id.as_str())
                .push_bind(superseded_by)
                .push_bind(at_ms)
                .push_bind(o.fingerprint.map(|f| f.0.to_vec()));
        });
        qb.build().execute(&mut **tx).await?;

        let mut qb = QueryBuilder::<MySql>::new(format!(
            "DELETE FROM {} WHERE app_code = ",
            self.spec.members_table()
        ));
        qb.push_bind(app).push(" AND event_id IN (");
        let mut ids = qb.separated(", ");
        for o in older {
            ids.push_bind(o.event_id.as_str());
        }
        qb.push(") AND (event_id, updated_at_ms, batch_id) IN (");
        let mut versions = qb.separated(", ");
        for o in older {
            versions.push("(");
            versions.push_bind_unseparated(o.event_id.as_str());
            versions.push_unseparated(", ");
            versions.push_bind_unseparated(o.updated_at_ms);
            versions.push_unseparated(", ");
            versions.push_bind_unseparated(o.batch_id.as_str());
            versions.push_unseparated(")");
        }
        qb.push(")");
        Ok(qb.build().execute(&mut **tx).await?.rows_affected())
    }
}
