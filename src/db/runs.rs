//! What each run did per app, for `history` ("why did last night's run do nothing?") and
//! `status` ("the last run's outcome"): every run of a command that works on the archive — lock
//! skips and dry runs included — with its run id, store, why it ended and what it found.

use sqlx::{AssertSqlSafe, MySqlPool};

use super::{Context, DbError};
use crate::model::command::CommandName;
use crate::model::ending::{Ending, Outcome};
use crate::model::table::TableSpec;

/// One recorded run of one app (`app_code` empty: the run as a whole — a command that could not
/// start, or worked no app).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
pub struct Run {
    pub app_code: String,
    #[sqlx(try_from = "String")]
    pub command: Recorded<CommandName>,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    #[sqlx(try_from = "String")]
    pub outcome: Recorded<Outcome>,
    pub batches: i64,
    pub row_count: i64,
    pub error: Option<String>,
    /// `None` on runs recorded before migration 11.
    pub run_id: Option<String>,
    pub store: Option<String>,
    #[sqlx(try_from = "Option<String>")]
    pub stop_reason: RecordedEnding,
    pub dry_run: bool,
    /// What the run found, as recorded: `{"count": n, "first": […]}`.
    #[serde(serialize_with = "as_json")]
    pub findings: Option<String>,
    /// The object versions the run recorded anew (relocate, verify --batch-id), with their
    /// evidence: read from their own table by `history`, not a column of this one.
    #[sqlx(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded_versions: Option<super::object_versions::RecordedVersions>,
}

/// A name the runs table holds: one this build knows, or another build's (a command or an
/// outcome added since), shown as it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded<T> {
    Known(T),
    Other(String),
}

/// What the runs table's names are read as.
pub trait RecordedName: Sized + Copy {
    fn read(name: &str) -> Option<Self>;
    fn name(self) -> &'static str;
}

impl RecordedName for CommandName {
    fn read(name: &str) -> Option<Self> {
        CommandName::parse(name)
    }

    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl RecordedName for Outcome {
    fn read(name: &str) -> Option<Self> {
        Outcome::parse(name)
    }

    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl<T: RecordedName> Recorded<T> {
    /// Whether the run recorded `known`.
    pub fn is(&self, known: T) -> bool
    where
        T: PartialEq,
    {
        matches!(self, Recorded::Known(t) if *t == known)
    }
}

impl<T: RecordedName> From<String> for Recorded<T> {
    fn from(name: String) -> Self {
        match T::read(&name) {
            Some(known) => Recorded::Known(known),
            None => Recorded::Other(name),
        }
    }
}

impl<T: RecordedName> std::fmt::Display for Recorded<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Recorded::Known(known) => f.write_str(known.name()),
            Recorded::Other(name) => f.write_str(name),
        }
    }
}

impl<T: RecordedName> serde::Serialize for Recorded<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Why a recorded run ended, read back ([`Ending::parse`]); `None` on runs recorded before the
/// column.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct RecordedEnding(pub Option<Ending>);

impl From<Option<String>> for RecordedEnding {
    fn from(said: Option<String>) -> Self {
        RecordedEnding(said.as_deref().map(Ending::parse))
    }
}

/// The recorded findings as the JSON they are, not as a string of it.
fn as_json<S: serde::Serializer>(text: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    text.as_deref()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
        .serialize(s)
}

/// One app's run, as it is recorded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record<'a> {
    pub app: &'a str,
    pub command: CommandName,
    pub outcome: Outcome,
    pub batches: u64,
    pub rows: u64,
    pub error: Option<&'a str>,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    pub run_id: &'a str,
    pub store: Option<&'a str>,
    pub stop_reason: Option<&'a Ending>,
    pub dry_run: bool,
    /// The findings, as JSON (see [`findings_json`]).
    pub findings: Option<&'a str>,
}

/// At most this many findings are kept with a run; the count says how many there were.
pub(crate) const FINDINGS_KEPT: usize = 20;

/// `{"count": n, "first": [the first FINDINGS_KEPT]}`, or `None` for none.
pub(crate) fn findings_json<T: serde::Serialize>(findings: &[T]) -> Option<String> {
    if findings.is_empty() {
        return None;
    }
    let first = &findings[..findings.len().min(FINDINGS_KEPT)];
    serde_json::to_string(&serde_json::json!({ "count": findings.len(), "first": first })).ok()
}

/// The findings a run recorded, read back: how many, and the first [`FINDINGS_KEPT`].
#[derive(Debug, Clone, serde::Deserialize)]
pub(crate) struct RecordedFindings {
    pub count: u64,
    #[serde(default)]
    pub first: Vec<RecordedFinding>,
}

/// One recorded finding, as far as a table line names it.
#[derive(Debug, Clone, serde::Deserialize)]
pub(crate) struct RecordedFinding {
    pub kind: Option<String>,
    pub batch_id: Option<String>,
    pub event_id: Option<String>,
}

impl Run {
    /// What the run found, as recorded (`None`: nothing, or nothing readable).
    pub(crate) fn recorded_findings(&self) -> Option<RecordedFindings> {
        serde_json::from_str(self.findings.as_deref()?).ok()
    }
}

/// How far apart the clocks of the hosts that record runs may be, for `history --since`.
const CLOCK_SKEW_MS: i64 = 10 * 60_000;

/// Which runs `history` reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunFilter<'a> {
    pub app: Option<&'a str>,
    pub command: Option<&'a str>,
    /// Runs started at or after this instant (epoch ms).
    pub since_ms: Option<i64>,
    /// Runs started before this instant (epoch ms).
    pub until_ms: Option<i64>,
    pub limit: u32,
}

/// What every read of the runs selects, in [`Run`]'s order.
const COLUMNS: &str =
    "CAST(app_code AS CHAR) AS app_code, command_name AS command, started_at_ms, finished_at_ms, \
     outcome, batches, row_count, error, CAST(run_id AS CHAR) AS run_id, store, stop_reason, \
     dry_run, findings";

/// The runs table of one outbox table.
#[derive(Debug, Clone)]
pub(crate) struct Runs {
    spec: &'static TableSpec,
    pool: MySqlPool,
}

impl Runs {
    pub(crate) fn new(pool: &MySqlPool, spec: &'static TableSpec) -> Runs {
        Runs {
            pool: pool.clone(),
            spec,
        }
    }

    pub(crate) async fn record(&self, run: &Record<'_>) -> Result<(), DbError> {
        let pool = &self.pool;
        let sql = format!(
            "INSERT INTO {} (app_code, command_name, started_at_ms, finished_at_ms, outcome, batches, \
             row_count, error, run_id, store, stop_reason, dry_run, worked, findings) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            self.spec.runs_table()
        );
        // Within the columns, whatever a message holds (strict mode refuses a longer value, and
        // the run would go unrecorded).
        let app: String = run.app.chars().take(32).collect();
        let reason: Option<String> = run
            .stop_reason
            .map(|r| r.to_string().chars().take(255).collect());
        let store: Option<String> = run.store.map(|s| s.chars().take(1024).collect());
        let error: Option<String> = run.error.map(|e| e.chars().take(16_000).collect());
        let worked = !run.dry_run && run.outcome != Outcome::SkippedLocked;
        sqlx::query(AssertSqlSafe(sql))
            .bind(app)
            .bind(run.command.as_str())
            .bind(run.started_at_ms)
            .bind(run.finished_at_ms)
            .bind(run.outcome.as_str())
            .bind(run.batches as i64)
            .bind(run.rows as i64)
            .bind(error)
            .bind(run.run_id)
            .bind(store)
            .bind(reason)
            .bind(run.dry_run)
            .bind(worked)
            .bind(run.findings)
            .execute(pool)
            .await
            .context(|| format!("recording the run of app {}", run.app))?;
        Ok(())
    }

    /// Records a run, logging (not returning) a failure: bookkeeping must not change an outcome.
    pub(crate) async fn note(&self, run: &Record<'_>) {
        if let Err(e) = self.record(run).await {
            tracing::warn!(app = run.app, error = %e, "could not record the run");
        }
    }

    /// The app's most recent run of `command` that worked it: not a dry run, not a run that
    /// found the app's lock held by another process.
    pub(crate) async fn last(&self, app: &str, command: &str) -> Result<Option<Run>, DbError> {
        let pool = &self.pool;
        let sql = format!(
            "SELECT {COLUMNS} FROM {} WHERE app_code = ? AND CAST(app_code AS BINARY) = CAST(? AS BINARY) \
             AND command_name = ? AND worked = TRUE ORDER BY id DESC LIMIT 1",
            self.spec.runs_table()
        );
        // Byte for byte: apps whose codes differ only in case are two where the source's app
        // codes compare case-sensitively (runs are recorded under the app's one spelling).
        sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(app)
            .bind(command)
            .fetch_optional(pool)
            .await
            .context(|| format!("reading the last run of app {app}"))
    }

    /// Whether any run of `app` is recorded (its run-level rows aside).
    pub(crate) async fn knows_app(&self, app: &str) -> Result<bool, DbError> {
        let pool = &self.pool;
        let sql = format!(
            "SELECT COUNT(*) FROM (SELECT 1 FROM {} WHERE app_code = ? LIMIT 1) AS r",
            self.spec.runs_table()
        );
        let n: i64 = sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(app)
            .fetch_one(pool)
            .await
            .context(|| format!("looking for runs of app {app}"))?;
        Ok(n > 0)
    }

    /// The most recent runs, newest first, that `filter` lets through. By key: the app's and
    /// command's index where given, and with `since_ms` a lower bound on the id found by a
    /// binary search of the primary key ([`Self::first_finished_from`]), so that a few runs of
    /// last night are found without reading the years before them.
    pub(crate) async fn recent(&self, filter: &RunFilter<'_>) -> Result<Vec<Run>, DbError> {
        let pool = &self.pool;
        let mut qb = sqlx::QueryBuilder::<sqlx::MySql>::new(format!(
            "SELECT {COLUMNS} FROM {} WHERE 1 = 1",
            self.spec.runs_table()
        ));
        if let Some(app) = filter.app {
            qb.push(" AND app_code = ").push_bind(app);
        }
        if let Some(command) = filter.command {
            qb.push(" AND command_name = ").push_bind(command);
        }
        if let Some(since) = filter.since_ms {
            // A run is recorded as it ends, after it started: none that started at `since` or
            // later was recorded before the first run that ended then (less the clocks' skew).
            if let Some(id) = self.first_finished_from(since - CLOCK_SKEW_MS).await? {
                qb.push(" AND id >= ").push_bind(id);
            }
            qb.push(" AND started_at_ms >= ").push_bind(since);
        }
        if let Some(until) = filter.until_ms {
            qb.push(" AND started_at_ms < ").push_bind(until);
        }
        qb.push(" ORDER BY id DESC LIMIT ").push_bind(filter.limit);
        qb.build_query_as()
            .fetch_all(pool)
            .await
            .context(|| "reading the runs".into())
    }

    /// The id of the first run recorded that ended at `ms` or later, by a binary search of the
    /// primary key (ids follow the order runs were recorded in, which is the order they ended):
    /// about 2 log2(runs) point reads. None when no run ended then.
    async fn first_finished_from(&self, ms: i64) -> Result<Option<i64>, DbError> {
        let pool = &self.pool;
        let table = self.spec.runs_table();
        let first =
            format!("SELECT id, finished_at_ms FROM {table} WHERE id >= ? ORDER BY id LIMIT 1");
        let next = |from: i64| {
            sqlx::query_as::<_, (i64, i64)>(AssertSqlSafe(first.clone()))
                .bind(from)
                .fetch_optional(pool)
        };
        let last: Option<i64> =
            sqlx::query_scalar(AssertSqlSafe(format!("SELECT MAX(id) FROM {table}")))
                .fetch_one(pool)
                .await
                .context(|| "reading the runs".into())?;
        // Every run below `low` ended before `ms`; `found` is the first run at or above `high`
        // that ended at `ms` or later, if one was seen.
        let (mut low, mut high, mut found) = (0i64, last.unwrap_or(0) + 1, None);
        while low < high {
            let mid = low + (high - low) / 2;
            match next(mid).await.context(|| "reading the runs".into())? {
                Some((id, finished)) if finished < ms => low = id + 1,
                Some((id, _)) => {
                    found = Some(id);
                    high = mid;
                }
                None => high = mid,
            }
        }
        Ok(found)
    }
}
