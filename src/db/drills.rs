//! The drills table: one row per drilled batch (`restore --drill`), for `status`'s last good
//! drill.

use sqlx::{AssertSqlSafe, MySqlPool};

use super::{Context, DbError};
use crate::model::table::TableSpec;

/// The drills table of one outbox table.
#[derive(Debug, Clone)]
pub(crate) struct Drills {
    spec: &'static TableSpec,
    pool: MySqlPool,
}

impl Drills {
    pub(crate) fn new(pool: &MySqlPool, spec: &'static TableSpec) -> Drills {
        Drills {
            pool: pool.clone(),
            spec,
        }
    }

    /// Records a drill's result (`detail`: what failed; none when it passed).
    pub(crate) async fn record(
        &self,
        app: &str,
        batch_id: &str,
        at_ms: i64,
        detail: Option<&str>,
    ) -> Result<(), DbError> {
        let pool = &self.pool;
        let sql = format!(
            "INSERT INTO {} (app_code, batch_id, drilled_at_ms, ok, detail) VALUES (?, ?, ?, ?, ?)",
            self.spec.drills_table()
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(app)
            .bind(batch_id)
            .bind(at_ms)
            .bind(detail.is_none())
            .bind(detail)
            .execute(pool)
            .await
            .context(|| format!("recording the drill of batch {batch_id}"))?;
        Ok(())
    }

    /// The app's last successful drill: `(batch_id, drilled_at_ms)`.
    pub(crate) async fn last_good(&self, app: &str) -> Result<Option<(String, i64)>, DbError> {
        let pool = &self.pool;
        let sql = format!(
            "SELECT batch_id, drilled_at_ms FROM {} WHERE app_code = ? AND CAST(app_code AS BINARY) = CAST(? AS BINARY) \
             AND ok = TRUE ORDER BY id DESC LIMIT 1",
            self.spec.drills_table()
        );
        // Byte for byte, as the runs (`Runs::last`).
        sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(app)
            .fetch_optional(pool)
            .await
            .context(|| format!("reading the drills of app {app}"))
    }
}
