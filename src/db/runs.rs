//! What each run did per app, for `status` ("the last run's outcome") and for operators asking
//! the database rather than the logs.

use sqlx::{AssertSqlSafe, MySqlPool};

use super::{Context, DbError};
use crate::model::table::TableSpec;

/// One recorded run of one app (`app_code` empty: the run as a whole — doctor, or a command that
/// could not start).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
pub struct Run {
    pub app_code: String,
    pub command: String,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    pub outcome: String,
    pub batches: i64,
    pub row_count: i64,
    pub error: Option<String>,
}

/// One app's run, as it is recorded.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    pub app: &'a str,
    pub command: &'a str,
    pub outcome: &'a str,
    pub batches: u64,
    pub rows: u64,
    pub error: Option<&'a str>,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
}

/// The runs table of one outbox table.
#[derive(Debug, Clone)]
pub struct Runs {
    spec: &'static TableSpec,
}

impl Runs {
    pub fn new(spec: &'static TableSpec) -> Runs {
        Runs { spec }
    }

    pub async fn record(&self, pool: &MySqlPool, run: &Record<'_>) -> Result<(), DbError> {
        let spec = self.spec;
        let sql = format!(
        "INSERT INTO {} (app_code, command, started_at_ms, finished_at_ms, outcome, batches, row_count, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        spec.runs_table()
    );
        let app: String = run.app.chars().take(32).collect();
        sqlx::query(AssertSqlSafe(sql))
            .bind(app)
            .bind(run.command)
            .bind(run.started_at_ms)
            .bind(run.finished_at_ms)
            .bind(run.outcome)
            .bind(run.batches as i64)
            .bind(run.rows as i64)
            .bind(run.error)
            .execute(pool)
            .await
            .context(|| format!("recording the run of app {}", run.app))?;
        Ok(())
    }

    /// Records a run, logging (not returning) a failure: bookkeeping must not change an outcome.
    pub async fn note(&self, pool: &MySqlPool, run: &Record<'_>) {
        if let Err(e) = self.record(pool, run).await {
            tracing::warn!(app = run.app, error = %e, "could not record the run");
        }
    }

    /// The app's most recent run of `command`.
    pub async fn last(
        &self,
        pool: &MySqlPool,
        app: &str,
        command: &str,
    ) -> Result<Option<Run>, DbError> {
        let spec = self.spec;
        let sql = format!(
        "SELECT CAST(app_code AS CHAR) AS app_code, command, started_at_ms, finished_at_ms, outcome, batches, row_count, error FROM {} \
         WHERE app_code = ? AND command = ? ORDER BY id DESC LIMIT 1",
        spec.runs_table()
    );
        sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(command)
            .fetch_optional(pool)
            .await
            .context(|| format!("reading the last run of app {app}"))
    }

    /// The most recent runs, newest first: of `app` and of `command` where given.
    pub async fn recent(
        &self,
        pool: &MySqlPool,
        app: Option<&str>,
        command: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Run>, DbError> {
        let mut qb = sqlx::QueryBuilder::<sqlx::MySql>::new(format!(
            "SELECT CAST(app_code AS CHAR) AS app_code, command, started_at_ms, finished_at_ms, outcome, batches, row_count, error \
             FROM {} WHERE 1 = 1",
            self.spec.runs_table()
        ));
        if let Some(app) = app {
            qb.push(" AND app_code = ").push_bind(app);
        }
        if let Some(command) = command {
            qb.push(" AND command = ").push_bind(command);
        }
        qb.push(" ORDER BY id DESC LIMIT ").push_bind(limit);
        qb.build_query_as()
            .fetch_all(pool)
            .await
            .context(|| "reading the runs".into())
    }
}
