//! Each app's log identity (migration 15, SPEC §5.16): the folder its log of batches is kept
//! under in the store, recorded once — when the log begins, or, for a log an older build began,
//! the first time a command needs it — and read back by every command after, never derived
//! again from the source's collation. App codes and folders compare byte for byte; the unique
//! key on the folder keeps two apps from ever sharing a log.

use sqlx::{AssertSqlSafe, MySqlPool};

use super::{Context, DbError};
use crate::model::table::TableSpec;

/// How an identity came to be recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum How {
    /// The log began with the record (before its first object was written).
    Begun,
    /// A log an older build began, found in the store.
    Found,
}

impl How {
    fn as_str(self) -> &'static str {
        match self {
            How::Begun => "begun",
            How::Found => "found",
        }
    }
}

/// What recording an identity came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// The app's folder (this one, or the one recorded for it first by another run).
    Folder(String),
    /// The folder is another app's already (recorded by a run at the same time).
    Taken { by: String },
}

/// The log identities of one outbox table's apps.
#[derive(Debug, Clone)]
pub(crate) struct LogIdentities {
    spec: &'static TableSpec,
    pool: MySqlPool,
}

impl LogIdentities {
    pub(crate) fn new(pool: &MySqlPool, spec: &'static TableSpec) -> LogIdentities {
        LogIdentities {
            pool: pool.clone(),
            spec,
        }
    }

    /// The folder recorded for `app` (exactly this spelling), if any.
    pub(crate) async fn folder_of(&self, app: &str) -> Result<Option<String>, DbError> {
        let pool = &self.pool;
        sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT CAST(folder AS CHAR) FROM {} WHERE app_code = ?",
            self.spec.logs_table()
        )))
        .bind(app)
        .fetch_optional(pool)
        .await
        .context(|| format!("reading app {app}'s log identity"))
    }

    /// The app `folder` is recorded for, if any.
    pub(crate) async fn app_of(&self, folder: &str) -> Result<Option<String>, DbError> {
        let pool = &self.pool;
        sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT CAST(app_code AS CHAR) FROM {} WHERE folder = ?",
            self.spec.logs_table()
        )))
        .bind(folder)
        .fetch_optional(pool)
        .await
        .context(|| format!("reading whose log folder {folder} is"))
    }

    /// Every identity recorded: `(app, folder)`, one row per app that has a log.
    pub(crate) async fn all(&self) -> Result<Vec<(String, String)>, DbError> {
        let pool = &self.pool;
        sqlx::query_as(AssertSqlSafe(format!(
            "SELECT CAST(app_code AS CHAR), CAST(folder AS CHAR) FROM {} ORDER BY app_code",
            self.spec.logs_table()
        )))
        .fetch_all(pool)
        .await
        .context(|| "reading the apps' log identities".into())
    }

    /// Records `folder` as `app`'s log identity, once: where a run recorded the app first, its
    /// folder is the answer; where the folder is another app's, [`Recorded::Taken`].
    pub(crate) async fn record(
        &self,
        app: &str,
        folder: &str,
        how: How,
        now_ms: i64,
    ) -> Result<Recorded, DbError> {
        let pool = &self.pool;
        let inserted = sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO {} (app_code, folder, how, recorded_at_ms) VALUES (?, ?, ?, ?)",
            self.spec.logs_table()
        )))
        .bind(app)
        .bind(folder)
        .bind(how.as_str())
        .bind(now_ms)
        .execute(pool)
        .await;
        match inserted {
            Ok(_) => {
                tracing::info!(
                    app,
                    folder,
                    how = how.as_str(),
                    "the app's log identity is recorded"
                );
                Ok(Recorded::Folder(folder.to_string()))
            }
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                if let Some(recorded) = self.folder_of(app).await? {
                    return Ok(Recorded::Folder(recorded));
                }
                let by = self.app_of(folder).await?.unwrap_or_default();
                Ok(Recorded::Taken { by })
            }
            Err(e) => Err(e).context(|| format!("recording app {app}'s log identity")),
        }
    }
}
