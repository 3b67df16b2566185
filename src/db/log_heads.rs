//! The tree heads each app's log was published at (migration 18; README, "What each party
//! keeps"): a row per checkpoint an archive run wrote, inserted and never updated. The largest
//! is the head the store's checkpoint may not fall behind; the store keeps the same heads
//! write-once, so a rollback of one is found by the other.

use sqlx::{AssertSqlSafe, MySqlPool};

use super::{Context, DbError};
use crate::model::table::TableSpec;

/// The heads recorded for one outbox table's apps.
#[derive(Debug, Clone)]
pub(crate) struct LogHeads {
    spec: &'static TableSpec,
    pool: MySqlPool,
}

impl LogHeads {
    pub(crate) fn new(pool: &MySqlPool, spec: &'static TableSpec) -> LogHeads {
        LogHeads {
            pool: pool.clone(),
            spec,
        }
    }

    /// The largest head recorded for `app`: its size and base64 root. One primary-key read.
    pub(crate) async fn largest(&self, app: &str) -> Result<Option<(u64, String)>, DbError> {
        let pool = &self.pool;
        let row: Option<(i64, String)> = sqlx::query_as(AssertSqlSafe(format!(
            "SELECT size, CAST(root AS CHAR) FROM {} WHERE app_code = ? ORDER BY size DESC LIMIT 1",
            self.spec.log_heads_table()
        )))
        .bind(app)
        .fetch_optional(pool)
        .await
        .context(|| format!("reading the largest tree head of app {app}'s log"))?;
        Ok(row.map(|(size, root)| (size as u64, root)))
    }

    /// Records that `app`'s log was published (or verified whole) at `size` leaves with `root`.
    /// A head recorded already at that size is left as it is: the check that reads it back
    /// compares roots.
    pub(crate) async fn record(
        &self,
        app: &str,
        size: u64,
        root: &str,
        now_ms: i64,
    ) -> Result<(), DbError> {
        let pool = &self.pool;
        sqlx::query(AssertSqlSafe(format!(
            "INSERT IGNORE INTO {} (app_code, size, root, recorded_at_ms) VALUES (?, ?, ?, ?)",
            self.spec.log_heads_table()
        )))
        .bind(app)
        .bind(size as i64)
        .bind(root)
        .bind(now_ms)
        .execute(pool)
        .await
        .context(|| format!("recording a tree head of app {app}'s log"))?;
        Ok(())
    }
}
