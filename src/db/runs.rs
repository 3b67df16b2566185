//! What each run did per app, for `status` ("the last run's outcome") and for operators asking
//! the database rather than the logs.

use sqlx::{AssertSqlSafe, MySqlPool};

use super::{Context, DbError};
use crate::summary::AppReport;
use crate::table::TableSpec;

/// One recorded run of one app.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
pub struct Run {
    pub command: String,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    pub outcome: String,
    pub batches: i64,
    pub row_count: i64,
    pub error: Option<String>,
}

pub async fn record(
    pool: &MySqlPool,
    spec: &TableSpec,
    command: &str,
    report: &AppReport,
    started_at_ms: i64,
    finished_at_ms: i64,
) -> Result<(), DbError> {
    let outcome = serde_json::to_value(report.outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let sql = format!(
        "INSERT INTO {} (app_code, command, started_at_ms, finished_at_ms, outcome, batches, row_count, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        spec.runs_table()
    );
    let app: String = report.app_code.chars().take(32).collect();
    sqlx::query(AssertSqlSafe(sql))
        .bind(app)
        .bind(command)
        .bind(started_at_ms)
        .bind(finished_at_ms)
        .bind(outcome)
        .bind(report.batches as i64)
        .bind(report.rows as i64)
        .bind(&report.error)
        .execute(pool)
        .await
        .context(|| format!("recording the run of app {}", report.app_code))?;
    Ok(())
}

/// Records a run, logging (not returning) a failure: bookkeeping must not change an outcome.
pub async fn note(
    pool: &MySqlPool,
    spec: &TableSpec,
    command: &str,
    report: &AppReport,
    started_at_ms: i64,
    finished_at_ms: i64,
) {
    if let Err(e) = record(pool, spec, command, report, started_at_ms, finished_at_ms).await {
        tracing::warn!(app = report.app_code, error = %e, "could not record the run");
    }
}

/// The app's most recent run of `command`.
pub async fn last(
    pool: &MySqlPool,
    spec: &TableSpec,
    app: &str,
    command: &str,
) -> Result<Option<Run>, DbError> {
    let sql = format!(
        "SELECT command, started_at_ms, finished_at_ms, outcome, batches, row_count, error FROM {} \
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
