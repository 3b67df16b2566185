//! `<prefix>_kept` (migration 21): the rows purge kept because they are not what their batch
//! holds while their version still is — changed in place, or holding a value in a column the
//! batch's lines lack (a column added since). The store must hold every value a deleted row
//! held, so such a row is never deleted on its batch's word: purge marks it in the transaction
//! that deletes the batch's other rows, the next archive run archives it again as it is now (a
//! batch of its own, as stragglers are, the older version superseded) and clears the mark in
//! that batch's receipt transaction, and purge deletes it by the new batch.

use std::collections::HashSet;

use sqlx::{AssertSqlSafe, MySql, MySqlPool, QueryBuilder, Transaction};

use super::{Context, DbError};
use crate::model::format::Cursor;
use crate::model::table::TableSpec;

/// One row purge kept: its member's version and batch, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeptRow {
    pub event_id: String,
    pub updated_at_ms: i64,
    pub reason: String,
}

/// How many rows of an app are kept for one reason, waiting to be archived again.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct KeptCount {
    pub app_code: String,
    pub reason: String,
    pub rows: u64,
}

/// The kept rows of `spec`'s batches.
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    pool: MySqlPool,
    spec: &'static TableSpec,
}

impl Kept {
    pub(crate) fn new(pool: &MySqlPool, spec: &'static TableSpec) -> Kept {
        Kept {
            pool: pool.clone(),
            spec,
        }
    }

    /// Marks `rows` of batch `batch_id` kept, in the purge transaction that found them (a row
    /// marked before keeps its first mark).
    pub(crate) async fn mark(
        &self,
        tx: &mut Transaction<'_, MySql>,
        app: &str,
        batch_id: &str,
        rows: &[KeptRow],
        now_ms: i64,
    ) -> Result<(), DbError> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "INSERT IGNORE INTO {} (app_code, event_id, updated_at_ms, batch_id, reason, kept_at_ms) ",
            self.spec.kept_table()
        ));
        qb.push_values(rows, |mut row, k| {
            row.push_bind(app)
                .push_bind(k.event_id.as_str())
                .push_bind(k.updated_at_ms)
                .push_bind(batch_id)
                .push_bind(truncated(&k.reason))
                .push_bind(now_ms);
        });
        qb.build()
            .execute(&mut **tx)
            .await
            .context(|| format!("marking the rows purge kept of batch {batch_id}"))?;
        Ok(())
    }

    /// The next `limit` kept rows of `app` after `after`, in cursor order (one range of the
    /// cursor index): the keys archive reads again.
    pub(crate) async fn page(
        &self,
        app: &str,
        after: Option<&Cursor>,
        limit: u32,
    ) -> Result<Vec<Cursor>, DbError> {
        let table = self.spec.kept_table();
        let (from_ms, from_id) = match after {
            Some(c) => (c.updated_at_ms, c.event_id.as_str()),
            None => (i64::MIN, ""),
        };
        let sql = format!(
            "SELECT CAST(event_id AS CHAR), updated_at_ms FROM {table} \
             WHERE app_code = ? AND (updated_at_ms > ? OR (updated_at_ms = ? AND event_id > ?)) \
             ORDER BY updated_at_ms, event_id LIMIT ?"
        );
        let rows: Vec<(String, i64)> = sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(from_ms)
            .bind(from_ms)
            .bind(from_id)
            .bind(limit)
            .fetch_all(&self.pool)
            .await
            .context(|| format!("reading the rows purge kept of app {app}"))?;
        let mut keys: Vec<Cursor> = rows
            .into_iter()
            .map(|(event_id, updated_at_ms)| Cursor {
                updated_at_ms,
                event_id,
            })
            .collect();
        // A row kept from two batches (marked, archived again, kept again) is one key.
        keys.dedup();
        Ok(keys)
    }

    /// `verb` (`SELECT … FROM`, `DELETE FROM`) the kept table's rows of `app` among `ids`.
    fn of_ids(&self, verb: &str, app: &str, ids: &[&str]) -> QueryBuilder<MySql> {
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "{verb} {} WHERE app_code = ",
            self.spec.kept_table()
        ));
        qb.push_bind(app).push(" AND event_id IN (");
        let mut list = qb.separated(", ");
        for id in ids {
            list.push_bind(*id);
        }
        qb.push(")");
        qb
    }

    /// Of these event ids of `app`, the `(event_id, batch_id)` of each kept member: in the
    /// receipt transaction, the older versions a batch of them may supersede at the same
    /// `updated_at_ms`.
    pub(crate) async fn among(
        &self,
        tx: &mut Transaction<'_, MySql>,
        app: &str,
        ids: &[&str],
    ) -> Result<HashSet<(String, String)>, DbError> {
        if ids.is_empty() {
            return Ok(HashSet::new());
        }
        let mut qb = self.of_ids(
            "SELECT CAST(event_id AS CHAR), CAST(batch_id AS CHAR) FROM",
            app,
            ids,
        );
        let rows: Vec<(String, String)> = qb
            .build_query_as()
            .fetch_all(&mut **tx)
            .await
            .context(|| format!("reading the kept rows of app {app}"))?;
        Ok(rows.into_iter().collect())
    }

    /// Clears the marks of these event ids of `app`: in the receipt transaction of the batch
    /// that archived them again (or, from archive, of rows whose kept version is gone from the
    /// table: changed again, or deleted — another batch takes them, or nothing is left to keep).
    pub(crate) async fn clear<'e, E>(
        &self,
        executor: E,
        app: &str,
        ids: &[&str],
    ) -> Result<u64, DbError>
    where
        E: sqlx::Executor<'e, Database = MySql>,
    {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut qb = self.of_ids("DELETE FROM", app, ids);
        Ok(qb
            .build()
            .execute(executor)
            .await
            .context(|| format!("clearing the kept rows of app {app}"))?
            .rows_affected())
    }

    /// The kept rows waiting to be archived again, per app and reason (`status`): as many rows
    /// as are waiting, never the history.
    pub(crate) async fn counts(&self, apps: &[String]) -> Result<Vec<KeptCount>, DbError> {
        if apps.is_empty() {
            return Ok(Vec::new());
        }
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "SELECT CAST(app_code AS CHAR), CAST(reason AS CHAR), COUNT(*) FROM {} WHERE app_code IN (",
            self.spec.kept_table()
        ));
        let mut list = qb.separated(", ");
        for app in apps {
            list.push_bind(app.as_str());
        }
        qb.push(") GROUP BY app_code, reason ORDER BY app_code, reason");
        let rows: Vec<(String, String, i64)> = qb
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .context(|| "counting the rows purge kept".into())?;
        Ok(rows
            .into_iter()
            .map(|(app_code, reason, rows)| KeptCount {
                app_code,
                reason,
                rows: rows as u64,
            })
            .collect())
    }
}

/// A reason within the column's 255 characters (on a character boundary).
fn truncated(reason: &str) -> &str {
    match reason.char_indices().nth(255) {
        Some((at, _)) => &reason[..at],
        None => reason,
    }
}

#[cfg(test)]
mod tests {
    use super::truncated;

    #[test]
    fn a_reason_is_cut_at_255_characters_on_a_boundary() {
        assert_eq!(truncated("changed"), "changed");
        let long = "é".repeat(300);
        assert_eq!(truncated(&long).chars().count(), 255);
    }
}
