//! `<prefix>_added_values`: per batch, what its rows held in a column its lines lack — one added to
//! the table after the batch was archived — when purge deleted them (SPEC §4, §5.16): written in
//! the transaction of the delete that relied on it, read by later chunks of the batch and by
//! restore, which writes the value back.

use sqlx::{AssertSqlSafe, MySql};

use super::{Context, DbError};
use crate::model::table::TableSpec;

/// One value recorded with a batch.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct AddedValue {
    pub column_name: String,
    /// How the value is encoded (a [`crate::model::table::Kind`]'s name).
    pub encoding: String,
    /// The value as JSON text, as a line would hold it.
    pub value_json: String,
}

/// The recorded values of `spec`'s batches.
/// (It holds no pool: every read and write runs on the executor its caller gives — the delete's
/// transaction, or the pool for restore's read.)
#[derive(Debug, Clone, Copy)]
pub(crate) struct AddedValues {
    spec: &'static TableSpec,
}

impl AddedValues {
    pub(crate) fn new(spec: &'static TableSpec) -> AddedValues {
        AddedValues { spec }
    }

    /// The batches of `app` whose deleted rows' values an older build recorded here alone (the
    /// store does not hold them), each with the columns: at most `limit`, by batch id.
    pub(crate) async fn batches_of_app(
        &self,
        pool: &sqlx::Pool<MySql>,
        app: &str,
        limit: u32,
    ) -> Result<Vec<(String, String)>, DbError> {
        let sql = format!(
            "SELECT CAST(batch_id AS CHAR), CAST(GROUP_CONCAT(column_name ORDER BY column_name SEPARATOR ', ') AS CHAR) \
             FROM {} WHERE app_code = ? GROUP BY batch_id ORDER BY batch_id LIMIT ?",
            self.spec.added_values_table()
        );
        sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(limit)
            .fetch_all(pool)
            .await
            .context(|| format!("reading the values recorded of app {app}'s deleted rows"))
    }

    /// The values recorded with batch `batch_id` of `app` (one primary-key range).
    pub(crate) async fn of_batch<'e, E>(
        &self,
        executor: E,
        app: &str,
        batch_id: &str,
    ) -> Result<Vec<AddedValue>, DbError>
    where
        E: sqlx::Executor<'e, Database = MySql>,
    {
        let sql = format!(
            "SELECT CAST(column_name AS CHAR) AS column_name, CAST(encoding AS CHAR) AS encoding, \
             CAST(value_json AS CHAR) AS value_json FROM {} WHERE app_code = ? AND batch_id = ?",
            self.spec.added_values_table()
        );
        sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(batch_id)
            .fetch_all(executor)
            .await
            .context(|| format!("reading the added columns' values of batch {batch_id}"))
    }
}
