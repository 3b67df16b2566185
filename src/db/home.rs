//! The archive's home (SPEC §5.13): the store a table's archive was bound to when its first
//! batch was archived, and each explicit move since — one row each, the newest current. Rows
//! are numbered 1, 2, 3, … by the runs that write them, so two runs binding (or moving) at once
//! cannot both commit: the second meets a duplicate key and reads what the first wrote.

use sqlx::{AssertSqlSafe, MySqlPool};

use super::{Context, DbError};
use crate::model::table::TableSpec;

/// One binding of the archive to a store.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
pub struct Home {
    /// 1 for the first home, one more for each move.
    pub id: i64,
    /// The location as the archiver prints it (`s3://bucket/prefix`, `file:///path`).
    pub store: String,
    /// Also in the store's marker object: what tells this archive's store from any other.
    pub archive_id: String,
    pub marker_key: String,
    pub bound_at_ms: i64,
    /// A move's old home, and the operator's reason (`None`: the first home).
    pub moved_from: Option<String>,
    pub reason: Option<String>,
    pub run_id: Option<String>,
}

/// The home table of one outbox table.
#[derive(Debug, Clone)]
pub(crate) struct Homes {
    spec: &'static TableSpec,
    pool: MySqlPool,
}

impl Homes {
    pub(crate) fn new(pool: &MySqlPool, spec: &'static TableSpec) -> Homes {
        Homes {
            pool: pool.clone(),
            spec,
        }
    }

    /// The archive's home now: the newest binding, or `None` before the first batch.
    pub(crate) async fn current(&self) -> Result<Option<Home>, DbError> {
        let pool = &self.pool;
        let sql = format!(
            "SELECT id, CAST(store AS CHAR) AS store, CAST(archive_id AS CHAR) AS archive_id, \
             CAST(marker_key AS CHAR) AS marker_key, bound_at_ms, CAST(moved_from AS CHAR) AS moved_from, \
             CAST(reason AS CHAR) AS reason, CAST(run_id AS CHAR) AS run_id \
             FROM {} ORDER BY id DESC LIMIT 1",
            self.spec.home_table()
        );
        sqlx::query_as(AssertSqlSafe(sql))
            .fetch_optional(pool)
            .await
            .context(|| format!("reading the home of {}'s archive", self.spec.name))
    }

    /// Records `home` (its `id` one more than the current one's, or 1), through `executor` (a
    /// relocation's transaction). `Ok(false)`: another run recorded that id first — read
    /// [`Homes::current`] again.
    pub(crate) async fn insert<'e, E>(&self, executor: E, home: &Home) -> Result<bool, DbError>
    where
        E: sqlx::Executor<'e, Database = sqlx::MySql>,
    {
        let sql = format!(
            "INSERT INTO {} (id, store, archive_id, marker_key, bound_at_ms, moved_from, reason, run_id) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            self.spec.home_table()
        );
        let inserted = sqlx::query(AssertSqlSafe(sql))
            .bind(home.id)
            .bind(&home.store)
            .bind(&home.archive_id)
            .bind(&home.marker_key)
            .bind(home.bound_at_ms)
            .bind(&home.moved_from)
            .bind(&home.reason)
            .bind(&home.run_id)
            .execute(executor)
            .await;
        match inserted {
            Ok(_) => Ok(true),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Ok(false),
            Err(e) => {
                Err(e).context(|| format!("recording the home of {}'s archive", self.spec.name))
            }
        }
    }

    /// Takes back a first binding that turned out to be another archive's store (its marker was
    /// there already): nothing was archived under it yet.
    pub(crate) async fn withdraw(&self, home: &Home) -> Result<(), DbError> {
        let pool = &self.pool;
        let sql = format!(
            "DELETE FROM {} WHERE id = ? AND archive_id = ?",
            self.spec.home_table()
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(home.id)
            .bind(&home.archive_id)
            .execute(pool)
            .await
            .context(|| format!("withdrawing the home of {}'s archive", self.spec.name))?;
        Ok(())
    }

    /// The newest receipt's data object (key and size) of up to `apps` apps (all with `None`):
    /// what a store that holds this archive must hold. Bounded reads whatever the archive's age
    /// — the apps by the primary key's prefix, each app's newest receipt by the cursor index —
    /// and the newest batches, the last a lifecycle rule would expire or move to a cold class.
    pub(crate) async fn newest_data_objects(
        &self,
        apps: Option<u32>,
    ) -> Result<Vec<(String, u64)>, DbError> {
        let pool = &self.pool;
        let table = self.spec.receipts_table();
        let listed: Vec<String> = match apps {
            Some(n) => {
                sqlx::query_scalar(AssertSqlSafe(format!(
                    "SELECT DISTINCT CAST(app_code AS CHAR) FROM {table} LIMIT ?"
                )))
                .bind(n)
                .fetch_all(pool)
                .await
            }
            None => {
                sqlx::query_scalar(AssertSqlSafe(format!(
                    "SELECT DISTINCT CAST(app_code AS CHAR) FROM {table}"
                )))
                .fetch_all(pool)
                .await
            }
        }
        .context(|| format!("listing the apps of {table}"))?;
        let sql = format!(
            "SELECT CAST(data_object_key AS CHAR), compressed_bytes FROM {table} FORCE INDEX ({}) \
             WHERE app_code = ? AND state = ? ORDER BY last_updated_at_ms DESC, last_event_id DESC LIMIT 1",
            self.spec.cursor_index()
        );
        let mut out = Vec::new();
        for app in listed {
            let newest: Option<(String, i64)> = sqlx::query_as(AssertSqlSafe(sql.clone()))
                .bind(&app)
                .bind(crate::model::receipt::STATE_VERIFIED)
                .fetch_optional(pool)
                .await
                .context(|| format!("reading the newest receipt of app {app}"))?;
            out.extend(newest.map(|(key, size)| (key, size.max(0) as u64)));
        }
        Ok(out)
    }
}
