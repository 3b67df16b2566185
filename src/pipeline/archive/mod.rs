//! Archiving one app (SPEC §6 `archive`): resume from the newest VERIFIED receipt, cut delivered
//! rows below the cutoff into bounded batches, publish each (write-once puts + read-back
//! verification), and record its receipt and members atomically. Repeats until caught up, a
//! limit is reached, or shutdown is requested (checked between batches, so a batch is never left
//! half-recorded).
//!
//! Here the app's work as the driver sees it — its source, its outcome, its log appended, the
//! backlog it leaves; [`prepare`] is what a run settles once before its apps; `stages` the
//! three overlapping stages of its batches (built, published, recorded); `record` a batch's
//! receipt and members.

mod prepare;
mod record;
mod stages;

pub(crate) use prepare::{prepare, Unprepared};

use std::time::{Duration, Instant};

use super::apps::{self, Access, AppWork, Apps, Driver, Gate, Population};
use super::budget::Budget;
use super::builder::{self, BuildError, Built};
use super::command::Command;
use super::failure::{Classify, Kind};
use super::home::HomeError;
use super::log;
use super::publish::PublishError;
use super::replicas::LagStop;
use super::{Observer, RunContext};
use crate::db::receipts::Receipts;
use crate::db::record::{Cut, RecordError, Recorder};
use crate::db::source::{Backlog, RowStream, Source, SourceTable};
use crate::db::DbError;
use crate::failpoint::FailPoints;
use crate::model::batch::Limits;
use crate::model::command::CommandName;
use crate::model::format::Cursor;
use crate::model::protection::WritePolicy;
use crate::pipeline::report::details::{self, ArchiveApp};
use crate::pipeline::report::{AppDetails, AppReport, Outcome, Stop, Summary, Unfinished};

#[derive(Debug, Clone)]
pub struct ArchiveOptions {
    pub apps: Apps,
    /// Rows with `updated_at_ms` strictly below this are archived.
    pub cutoff_ms: i64,
    pub limits: Limits,
    pub gzip_level: u32,
    /// Per app: stop after this many batches.
    pub max_batches: Option<u64>,
    /// For the whole run: start no batch after this much time.
    pub max_runtime: Option<Duration>,
    pub dry_run: bool,
    /// Archive the stragglers below the cursor (delivered rows no receipt owns) instead of the
    /// rows after it.
    pub stragglers: bool,
    /// The status literal that means delivered.
    pub delivered_status: String,
    pub lock_prefix: String,
    /// Times an app is tried again after a transient database error.
    pub db_retries: u32,
    /// Apps archived at the same time, each under its own lock.
    pub parallel_apps: usize,
    /// Bytes the batches in flight may hold, all apps together ([`Budget`]).
    pub memory_budget: u64,
    /// Retention, legal hold and storage class of the objects written.
    pub policy: WritePolicy,
    /// `--accept-log-break REASON`: anchor the database's chain over checkpoints it does not
    /// continue, recording the break (README, "The chain of batches").
    pub accept_log_break: Option<String>,
    pub failpoints: FailPoints,
}

impl ArchiveOptions {
    /// Archive `apps` below `cutoff_ms` with the command line's defaults: batches of up to
    /// 50,000 rows or 64 MiB at gzip level 3, no limits, five retries, `DELIVERED`, no lock
    /// prefix, one app at a time.
    pub fn new(apps: Apps, cutoff_ms: i64) -> ArchiveOptions {
        ArchiveOptions {
            apps,
            cutoff_ms,
            limits: Limits {
                max_rows: 50_000,
                max_bytes: 64 << 20,
            },
            gzip_level: 3,
            max_batches: None,
            max_runtime: None,
            dry_run: false,
            stragglers: false,
            delivered_status: "DELIVERED".into(),
            lock_prefix: String::new(),
            db_retries: 5,
            parallel_apps: 1,
            memory_budget: DEFAULT_MEMORY_BUDGET,
            policy: WritePolicy::default(),
            accept_log_break: None,
            failpoints: FailPoints::default(),
        }
    }
}

/// `archive` — the CronJob (SPEC §6): the run prepared once (the store probed for write-once,
/// the table's columns read), then every app through the driver's gate (safe code, lock), each
/// app's batches archived by [`Archiver`].
pub(crate) async fn run(
    ctx: &RunContext,
    opts: &ArchiveOptions,
    observer: &dyn Observer,
) -> Summary {
    let before = ctx.store_stats();
    let mut summary = Summary::new(CommandName::Archive);
    summary.table = Some(ctx.spec.name.to_string());
    summary.store = Some(ctx.store.location().to_string());
    summary.dry_run = Some(opts.dry_run);
    summary.cutoff_ms = Some(opts.cutoff_ms);
    let apps = match apps::resolve(ctx, &opts.apps, &Population::Source).await {
        Ok(apps) => apps,
        Err(e) => return summary.without_apps(e),
    };
    let prepared = match prepare(ctx, opts, &apps).await {
        Ok(prepared) => prepared,
        Err(Unprepared::Unusable(e)) => return Summary::unusable(CommandName::Archive, e),
        Err(Unprepared::Failed(e)) => {
            summary.error = Some(e);
            return summary.settle();
        }
        Err(Unprepared::WithoutApps(e, conditional_put)) => {
            summary.conditional_put = conditional_put;
            return summary.without_apps(e);
        }
    };
    summary.conditional_put = prepared.conditional_put;
    if !apps.is_empty() {
        tracing::info!(
            apps = apps.len(),
            at_once = opts.parallel_apps.min(apps.len()),
            memory_budget_mib = opts.memory_budget >> 20,
            "archiving"
        );
    }
    let deadline = opts.max_runtime.map(|d| Instant::now() + d);
    let archiver =
        Archiver::new(ctx, opts, observer, deadline).on(prepared.definition, prepared.columns);
    let gate = Gate::Lock {
        prefix: &opts.lock_prefix,
        dry_run: opts.dry_run,
    };
    let driver = Driver::new(ctx, CommandName::Archive, gate)
        .retries(opts.db_retries)
        .until(deadline)
        .noting_runs()
        .parallel(opts.parallel_apps);
    summary.apps = driver.run(apps, &archiver).await;
    summary.store_requests = ctx.store_activity(&before);
    summary.settle()
}

#[async_trait::async_trait]
impl Command for ArchiveOptions {
    const NAME: CommandName = CommandName::Archive;
    type Context = RunContext;
    fn apps(&self) -> Option<&Apps> {
        Some(&self.apps)
    }
    fn writes(&self) -> bool {
        !self.dry_run
    }
    async fn run(&self, ctx: &RunContext, observer: &dyn Observer) -> Summary {
        run(ctx, self, observer).await
    }
}

/// `--memory-budget`'s default: with the process's own needs (runtime, clients, buffers,
/// allocator pages: about 40 MiB) a run stays within 128 MiB however many apps it archives at
/// once — 123 MiB over 4M rows of day-long 22,000-row batches, where 80 MiB peaked at 136 MiB,
/// and no slower (BENCHMARKS.md, 2026-12-02).
pub(crate) const DEFAULT_MEMORY_BUDGET: u64 = 48 << 20;

/// Why an app's run failed.
#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error(transparent)]
    Publish(#[from] PublishError),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("batch {0} already has a VERIFIED receipt although its rows lie after the cursor; nothing written — run `outbox-archiver verify --batch-id {0}`")]
    AlreadyRecorded(String),
    /// The batch's receipt was set by hand to a state this tool never writes: its rows lie
    /// after the cursor (which counts VERIFIED receipts only) and are that batch again.
    #[error("batch {batch_id} has a receipt in state {state}, which this tool never writes (someone set it by hand): the app's cursor counts only VERIFIED receipts, so its rows come round as that batch again and the app stops there, writing nothing. Check the batch (`outbox-archiver verify --app APP` reports receipts not VERIFIED), then set its state back to VERIFIED — or, to archive its rows again, delete the receipt and its member rows and accept the removal with `outbox-archiver archive --accept-log-break REASON` (README, Recovering from a finding)")]
    NotVerified { batch_id: String, state: String },
    /// Waiting for the replicas before the receipt transaction ended the app's work; the
    /// batch's objects are written and will be accepted by the next run.
    #[error(transparent)]
    Replica(#[from] LagStop),
    /// The archive could not be bound to the store before its first batch.
    #[error(transparent)]
    Home(#[from] HomeError),
    /// The store's log holds batches the database has no receipt of (a restore from a
    /// backup): nothing is cut until `recover` records them again.
    #[error("{0}")]
    Behind(log::Behind),
    #[error(transparent)]
    Log(#[from] log::LogError),
}

impl Classify for AppError {
    fn kind(&self) -> Kind {
        match self {
            AppError::Db(e) => e.kind(),
            AppError::Build(e) => e.kind(),
            AppError::Publish(e) => e.kind(),
            AppError::Record(e) => e.kind(),
            AppError::AlreadyRecorded(_) | AppError::NotVerified { .. } => Kind::Fatal,
            AppError::Replica(e) => e.kind(),
            AppError::Home(HomeError::Db(e)) => e.kind(),
            AppError::Home(_) | AppError::Behind(_) => Kind::Fatal,
            AppError::Log(e) => e.kind(),
        }
    }

    fn stop_reason(&self) -> Option<Stop> {
        match self {
            AppError::Replica(e) => e.stop_reason(),
            _ => None,
        }
    }
}

/// The archive's work for one app.
pub(crate) struct Archiver<'a> {
    ctx: &'a RunContext,
    opts: &'a ArchiveOptions,
    observer: &'a dyn Observer,
    pages: SourceTable,
    receipts: Receipts,
    recorder: Recorder,
    deadline: Option<Instant>,
    /// Shared by every app of the run.
    budget: Budget,
    /// The source table's definition when the run held it to its columns ([`prepare`]): a
    /// receipt is recorded only while it is the same, or the columns are.
    definition: String,
    /// The batches' columns, named by each manifest ([`prepare`]).
    columns: Option<crate::model::batch_columns::SharedColumns>,
}

#[async_trait::async_trait]
impl AppWork for Archiver<'_> {
    fn start(&self, app: &str) -> AppReport {
        AppReport::new(app, Outcome::UpToDate)
    }

    async fn work(&self, app: &str, access: Access<'_>, mut report: AppReport) -> AppReport {
        let mut details = ArchiveApp::default();
        let result = self.archive(app, access, &mut report, &mut details).await;
        if let Ok(outcome) = result {
            report.outcome = outcome;
            if !self.opts.stragglers {
                details.backlog = self.backlog_left(app, &report).await;
            }
        }
        let lost_lock = matches!(&result, Err(e) if e.kind() == Kind::LostLock);
        // Behind the store: the log is `recover`'s to settle, not the append's (which would
        // call the batches the database lacks a fork).
        let behind = matches!(&result, Err(AppError::Behind(_)));
        // Shutdown while waiting for the replicas is a clean stop: the batch in hand is written
        // but not recorded; the next run accepts its objects and records it.
        report.end("archiving", result.map(drop), Unfinished::default());
        // Appended writes too: not once the lock is lost (the archiver that holds it anchors).
        if !self.opts.dry_run && !lost_lock && !behind {
            self.append_to_log(app, &mut report, &mut details).await;
        }
        report.details = Some(AppDetails::Archive(details));
        report
    }
}

impl<'a> Archiver<'a> {
    pub(crate) fn new(
        ctx: &'a RunContext,
        opts: &'a ArchiveOptions,
        observer: &'a dyn Observer,
        deadline: Option<Instant>,
    ) -> Archiver<'a> {
        Archiver {
            ctx,
            opts,
            observer,
            pages: ctx.tables.source.clone(),
            receipts: ctx.tables.receipts.clone(),
            recorder: Recorder::new(&ctx.db.pool, ctx.spec),
            deadline,
            budget: Budget::new(opts.memory_budget),
            definition: String::new(),
            columns: None,
        }
    }

    /// The archiver of a run whose table had `definition`, and `columns`, when its columns were
    /// checked.
    pub(crate) fn on(
        mut self,
        definition: String,
        columns: crate::model::batch_columns::SharedColumns,
    ) -> Archiver<'a> {
        self.definition = definition;
        self.columns = Some(columns);
        self
    }

    /// Appends the app's new receipts to its log in the store, whatever the run's outcome: what
    /// was recorded is logged. A failure fails the app (the next run appends them); a log that
    /// holds leaves the database does not is said, and left as it is.
    async fn append_to_log(&self, app: &str, report: &mut AppReport, details: &mut ArchiveApp) {
        let accept = self.opts.accept_log_break.as_deref();
        match log::append(self.ctx, app, &self.opts.policy, accept).await {
            Ok(appended) => {
                if let Some(key) = &appended.written {
                    tracing::info!(
                        app,
                        key = %key,
                        leaves = appended.leaves,
                        size = appended.size,
                        "log appended"
                    );
                }
                details.log.size = (appended.size > 0).then_some(appended.size);
                details.log.checkpoint = appended.written;
                details.log.break_record = appended.break_accepted;
            }
            Err(e) => {
                tracing::error!(app, error = %e, "could not append to the log");
                if let log::LogError::Refused { detail, .. } = &e {
                    details.log.disagreement = Some(detail.clone());
                }
                if report.error.is_none() {
                    report.fail(&e);
                }
            }
        }
    }

    /// Delivered rows of `app` below the cutoff after `after`: one index range count.
    /// The total of the progress lines, where they want one: worth a count, never worth failing
    /// the app over.
    async fn progress_total(&self, app: &str, source: &Source) -> Option<u64> {
        match source {
            Source::After(after) if self.observer.wants_totals() => self
                .backlog(app, after.as_ref())
                .await
                .ok()
                .map(|b| b.rows.max(0) as u64),
            _ => None,
        }
    }

    async fn backlog(&self, app: &str, after: Option<&Cursor>) -> Result<Backlog, DbError> {
        let status = &self.opts.delivered_status;
        self.pages
            .backlog(app, status, after, self.opts.cutoff_ms)
            .await
    }

    /// What is left after the run — delivered rows below the cutoff after the cursor, and the age
    /// of the oldest — so every archive run reports (and exports) the backlog an operator alerts
    /// on, not only `status`. One index range count; a failure to count is logged, not fatal.
    async fn backlog_left(&self, app: &str, report: &AppReport) -> Option<details::Backlog> {
        match self.backlog(app, report.cursor_after.as_ref()).await {
            Ok(backlog) => {
                let now = self.ctx.now();
                Some(details::Backlog {
                    backlog_rows: backlog.rows,
                    oldest_backlog_age_ms: backlog.oldest_ms.map(|ms| now - ms),
                })
            }
            Err(e) => {
                tracing::warn!(app, error = %e, "could not count the backlog left");
                None
            }
        }
    }

    fn stop_reason(&self, batches: u64) -> Option<Stop> {
        let max_batches = self.opts.max_batches.is_some_and(|max| batches >= max);
        match self.ctx.stop_reason(None) {
            Some(stop) => Some(stop),
            None if max_batches => Some(Stop::MaxBatches),
            None => self.ctx.stop_reason(self.deadline),
        }
    }

    /// The app's rows, from the cursor on (or its stragglers below it); `None`: nothing to do.
    async fn source(&self, app: &str, report: &mut AppReport) -> Result<Option<Source>, AppError> {
        let cursor = self.receipts.latest_cursor(app).await?;
        report.cursor_before = cursor.clone();
        report.cursor_after = cursor.clone();
        Ok(match (self.opts.stragglers, cursor) {
            // Stragglers lie at or below the cursor; their batches never move it.
            (true, Some(upto)) => Some(Source::Stragglers { upto }),
            (true, None) => None,
            (false, cursor) => Some(Source::After(cursor)),
        })
    }

    async fn archive(
        &self,
        app: &str,
        access: Access<'_>,
        report: &mut AppReport,
        details: &mut ArchiveApp,
    ) -> Result<Outcome, AppError> {
        if let Access::Locked(_) = access {
            // Under the app's lock: the home may have moved since the run opened the store.
            super::home::still_home(self.ctx).await?;
        }
        // A database restored from a backup would cut, from its older cursor, rows the store
        // holds in batches already: not before `recover`, unless the operator accepts the break
        // (the store's leaves stay, the rows are archived again in other batches).
        if self.opts.accept_log_break.is_none() {
            if let Some(behind) = log::behind_to_append(self.ctx, app).await? {
                return Err(AppError::Behind(behind));
            }
        }
        let Some(source) = self.source(app, report).await? else {
            return Ok(Outcome::UpToDate);
        };
        self.observer
            .start(app, "rows", self.progress_total(app, &source).await);
        let batches = self.batches(app, source);
        let cut = match self.opts.stragglers {
            true => Cut::Stragglers,
            false => Cut::AfterCursor,
        };
        let mut outcome = self
            .overlap(app, access, batches, cut, report, details)
            .await?;
        // The rows purge kept (changed in place, or holding a column added since): once the
        // app is caught up, archived again as they are now, in batches of their own as
        // stragglers are, so that purge can delete them.
        if outcome == Outcome::UpToDate
            && report.cursor_after.is_some()
            && !self.ctx.tables.kept.page(app, None, 1).await?.is_empty()
        {
            let before = report.rows;
            let kept = self.batches(app, Source::Kept);
            outcome = self
                .overlap(app, access, kept, Cut::Stragglers, report, details)
                .await?;
            details.kept_rows_archived_again += report.rows - before;
        }
        self.observer.finish(app);
        Ok(match outcome {
            Outcome::UpToDate if report.batches > 0 && self.opts.dry_run => Outcome::Planned,
            Outcome::UpToDate if report.batches > 0 => Outcome::Archived,
            other => other,
        })
    }

    /// The app's rows from `source`, read a page at a time and cut into compressed batches by
    /// tasks of their own, ahead of the batches being published (within the run's budget).
    fn batches(&self, app: &str, source: Source) -> Batches {
        let rows = RowStream::spawn(
            self.pages.clone(),
            app.to_string(),
            self.opts.delivered_status.clone(),
            source,
            self.opts.cutoff_ms,
            self.opts.failpoints.clone(),
        );
        builder::spawn(
            rows,
            self.ctx.spec,
            self.opts.limits,
            self.opts.gzip_level,
            self.budget.clone(),
        )
    }
}

/// The app's batches as the builder hands them over, in cursor order.
type Batches = tokio::sync::mpsc::Receiver<Result<Built, BuildError>>;
