//! Where each app stands (SPEC §6 `status`): the cursor and its age, receipts and archived rows,
//! rows awaiting purge, superseded rows and restored batches, the backlog below the cutoff (rows
//! and oldest age), and the last runs.
//!
//! Cheap on a 100M-row table: the backlog is one index range count and one index dive on the
//! retention index; everything else reads the receipts (one row per batch) and the runs table.

use super::apps::{self, Access, AppWork, Apps, Driver, Gate, Population};
use super::command::Command;
use super::DbContext;
use crate::db::receipts::Receipts;
use crate::db::source::SourceTable;
use crate::db::DbError;
use crate::model::command::CommandName;
use crate::pipeline::report::details::{GoodDrill, StatusApp};
use crate::pipeline::report::{AppDetails, AppReport, Outcome, Summary};

#[derive(Debug, Clone)]
pub struct StatusOptions {
    pub apps: Apps,
    pub cutoff_ms: i64,
    /// Purge's `--grace`, to tell rows purge takes next from rows that still wait.
    pub grace_ms: i64,
    pub delivered_status: String,
}

/// `status` — per app, where it stands: the typed report, which `output` prints as JSON or as
/// a table on a terminal.
pub(crate) async fn run(ctx: &DbContext, opts: &StatusOptions) -> Summary {
    let mut summary = Summary::new(CommandName::Status);
    summary.table = Some(ctx.spec.name.to_string());
    summary.cutoff_ms = Some(opts.cutoff_ms);
    let apps = match apps::resolve(ctx, &opts.apps, &Population::SourceAndReceipts).await {
        Ok(apps) => apps,
        Err(e) => return summary.without_apps(e),
    };
    let status = Status::new(ctx, opts.cutoff_ms, opts.grace_ms, &opts.delivered_status);
    let driver = Driver::new(ctx, CommandName::Status, Gate::Open);
    summary.apps = driver.run(apps, &status).await;
    summary.settle()
}

#[async_trait::async_trait]
impl Command for StatusOptions {
    const NAME: CommandName = CommandName::Status;
    type Context = DbContext;
    fn apps(&self) -> Option<&Apps> {
        Some(&self.apps)
    }
    async fn run(&self, ctx: &DbContext, _: &dyn super::Observer) -> Summary {
        run(ctx, self).await
    }
}

/// Status's look at one app.
pub(crate) struct Status<'a> {
    ctx: &'a DbContext,
    cutoff_ms: i64,
    /// Purge's `--grace`: rows of receipts verified more recently wait.
    grace_ms: i64,
    delivered_status: &'a str,
    receipts: Receipts,
    pages: SourceTable,
}

#[async_trait::async_trait]
impl AppWork for Status<'_> {
    fn start(&self, app: &str) -> AppReport {
        AppReport::new(app, Outcome::Done)
    }

    async fn work(&self, app: &str, _: Access<'_>, mut report: AppReport) -> AppReport {
        match self.app_status(app).await {
            Ok(status) => {
                report.batches = status.receipts as u64;
                report.rows = status.archived_rows as u64;
                report.details = Some(AppDetails::Status(Box::new(status)));
            }
            Err(e) => {
                report.outcome = Outcome::Failed;
                report.error = Some(e.to_string());
            }
        }
        report
    }
}

impl<'a> Status<'a> {
    pub(crate) fn new(
        ctx: &'a DbContext,
        cutoff_ms: i64,
        grace_ms: i64,
        delivered_status: &'a str,
    ) -> Status<'a> {
        Status {
            ctx,
            cutoff_ms,
            grace_ms,
            delivered_status,
            receipts: ctx.tables.receipts.clone(),
            pages: ctx.tables.source.clone(),
        }
    }

    async fn app_status(&self, app: &str) -> Result<StatusApp, DbError> {
        let now = self.ctx.now();
        let cursor = self.receipts.latest_cursor(app).await?;
        let totals = self.receipts.totals(app).await?;
        let backlog = self
            .pages
            .backlog(app, self.delivered_status, cursor.as_ref(), self.cutoff_ms)
            .await?;
        let last_good_drill = self.ctx.tables.drills.last_good(app).await?;
        let (in_grace, first_in_grace) = self.receipts.in_grace(app, now - self.grace_ms).await?;
        let runs = &self.ctx.tables.runs;
        let kept: std::collections::BTreeMap<String, u64> = self
            .ctx
            .tables
            .kept
            .counts(&[app.to_string()])
            .await?
            .into_iter()
            .map(|k| (k.reason, k.rows))
            .collect();
        Ok(StatusApp {
            kept_rows: kept.values().sum(),
            kept_by_reason: kept,
            cursor_age_ms: cursor.as_ref().map(|c| now - c.updated_at_ms),
            cursor,
            receipts: totals.receipts,
            archived_rows: totals.archived_rows,
            awaiting_purge_rows: totals.awaiting_purge_rows,
            awaiting_purge_eligible_rows: (totals.awaiting_purge_rows - in_grace as i64).max(0),
            awaiting_purge_in_grace_rows: in_grace as i64,
            purge_eligible_from_ms: first_in_grace.map(|ms| ms + self.grace_ms),
            superseded_rows: totals.superseded_rows,
            restored_batches: totals.restored_batches,
            backlog_rows: backlog.rows,
            oldest_backlog_ms: backlog.oldest_ms,
            oldest_backlog_age_ms: backlog.oldest_ms.map(|ms| now - ms),
            last_run: runs.last(app, CommandName::Archive.as_str()).await?,
            last_purge: runs.last(app, CommandName::Purge.as_str()).await?,
            last_good_drill: last_good_drill.map(|(batch_id, drilled_at_ms)| GoodDrill {
                batch_id,
                drilled_at_ms,
            }),
            compacted_receipts: totals.compacted_receipts,
            compacted_member_rows: totals.compacted_member_rows,
            compacted_bytes_saved: match totals.compacted_member_rows {
                0 => Some(0),
                rows => self
                    .ctx
                    .tables
                    .compact
                    .bytes_per_member()
                    .await?
                    .map(|per_row| (per_row * rows as f64) as u64),
            },
        })
    }
}
