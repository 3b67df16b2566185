//! Purging one app (SPEC §6 `purge`, §5.9): source rows that are exact members of VERIFIED
//! receipts older than the grace period go, receipt by receipt, in primary-key transactions of at
//! most 500 rows. A member whose row changed since it was archived is kept and reported. A
//! receipt whose members are all deleted or kept is marked done, so a rerun does no work twice;
//! an interrupted receipt is simply continued.
//!
//! Deletion rests on fresh proof: right before deleting any row of a batch, its three objects
//! are looked at — by HEAD (present, the receipt's sizes, the store's own checksum where it
//! reports one) by default, by a full re-read with [`ObjectCheck::Read`] — and a batch whose
//! objects are gone or different is not purged. [`ObjectCheck::Trusted`] skips the look. A batch
//! restored into the source is never purged again on its receipt (unless `include_restored`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use super::apps::{self, Access, AppWork, Apps, Driver, Gate, Population};
use super::command::Command;
use super::failure::{Classify, Kind};
use super::log::{Log, LogError, Prover};
use super::replicas::LagStop;
use super::verifier::{Finding, FindingKind};
use super::{Observer, RunContext};
use crate::db::lock::AppLock;
use crate::db::members::Members;
use crate::db::purge::{Chunk, ChunkOf, Finished, PurgeError, PurgeQueries, PURGE_CHUNK};
use crate::db::receipts::{ReceiptScope, Receipts};
use crate::db::DbError;
use crate::failpoint::FailPoints;
use crate::model::batch::Member;
use crate::model::command::CommandName;
use crate::model::receipt::Receipt;
use crate::model::table::TableSpec;
use crate::pipeline::log::finding::{LogFinding, Problem};
use crate::pipeline::report::details::{ObjectCheck, PlannedPurge, PurgeApp, PurgeRun};
use crate::pipeline::report::{
    AppDetails, AppReport, Outcome, RunDetails, Stop, Summary, Unfinished,
};

mod proof;

#[derive(Debug, Clone)]
pub struct PurgeOptions {
    pub apps: Apps,
    /// Only receipts verified longer ago than this.
    pub grace_ms: i64,
    pub max_rows_per_second: Option<u64>,
    pub max_runtime: Option<Duration>,
    /// Count what would go; delete nothing.
    pub dry_run: bool,
    /// How a batch's objects are looked at right before its rows are deleted.
    pub objects: ObjectCheck,
    /// Purge batches restored into the source too (their mark is otherwise honoured).
    pub include_restored: bool,
    pub delivered_status: String,
    pub lock_prefix: String,
    /// Times an app is tried again after a transient database error.
    pub db_retries: u32,
    /// Apps purged at the same time (`--parallel-apps`; 0 or 1: one at a time).
    pub parallel_apps: usize,
    pub failpoints: FailPoints,
}

/// `purge` — deletes source rows that are exact members of VERIFIED receipts older than the
/// grace period (SPEC §6), under the same per-app lock as `archive`, after looking at each
/// batch's objects (SPEC §5.9): every app through the driver, each by [`Purger`].
pub(crate) async fn run(ctx: &RunContext, opts: &PurgeOptions, observer: &dyn Observer) -> Summary {
    let before = ctx.store_stats();
    let mut summary = Summary::new(CommandName::Purge);
    summary.table = Some(ctx.spec.name.to_string());
    summary.dry_run = Some(opts.dry_run);
    summary.details = Some(RunDetails::Purge(PurgeRun {
        object_check: opts.objects,
    }));
    let population = Population::Unpurged {
        include_restored: opts.include_restored,
    };
    let apps = match apps::resolve(ctx, &opts.apps, &population).await {
        Ok(apps) => apps,
        Err(e) => return summary.without_apps(e),
    };
    if opts.include_restored {
        tracing::warn!(
            "--include-restored: batches restored into the source are purged again like any other"
        );
    }
    if opts.objects == ObjectCheck::Trusted {
        tracing::warn!(
            "--trust-receipts: rows are deleted on the strength of their receipts alone; the \
             batches' objects are not looked at before deleting (scrub the archive with verify)"
        );
    }
    let started = Instant::now();
    let deadline = opts.max_runtime.map(|d| started + d);
    let purger = Purger::new(ctx, opts, started, deadline, observer);
    let gate = Gate::Lock {
        prefix: &opts.lock_prefix,
        dry_run: opts.dry_run,
    };
    let driver = Driver::new(ctx, CommandName::Purge, gate)
        .retries(opts.db_retries)
        .until(deadline)
        .noting_runs()
        .parallel(opts.parallel_apps);
    summary.apps = driver.run(apps, &purger).await;
    summary.store_requests = ctx.store_activity(&before);
    summary.settle()
}

#[async_trait::async_trait]
impl Command for PurgeOptions {
    const NAME: CommandName = CommandName::Purge;
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

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Purge(#[from] PurgeError),
    #[error("checking the objects of batch {0} before purging it: {1}")]
    Store(String, crate::store::StoreError),
    #[error(transparent)]
    Replica(#[from] LagStop),
    #[error("proving the batches' leaves in the log before purging: {0}")]
    Log(#[from] LogError),
    /// The store's log holds batches the database has no receipt of (a restore from a backup).
    #[error("{0}")]
    Behind(super::log::Behind),
}

impl Classify for AppError {
    fn kind(&self) -> Kind {
        match self {
            AppError::Log(e) => e.kind(),
            AppError::Db(e) => e.kind(),
            AppError::Purge(e) => e.kind(),
            AppError::Store(_, e) => e.kind(),
            AppError::Replica(e) => e.kind(),
            AppError::Behind(_) => Kind::Fatal,
        }
    }

    fn stop_reason(&self) -> Option<Stop> {
        match self {
            AppError::Replica(e) => e.stop_reason(),
            _ => None,
        }
    }
}

/// What one app's purge did so far.
#[derive(Default)]
struct Tally {
    details: PurgeApp,
    done_batches: u64,
    stop_reason: Option<Stop>,
}

/// How one receipt went.
enum Step {
    Done,
    /// Stop the app here (a limit or shutdown); the receipt stays unfinished.
    Stop(Stop),
}

/// Purge's work for one app.
pub(crate) struct Purger<'a> {
    ctx: &'a RunContext,
    opts: &'a PurgeOptions,
    receipts: Receipts,
    members: Members,
    purge: PurgeQueries,
    deadline: Option<Instant>,
    started: Instant,
    /// Rows deleted so far in this run, for `--max-rows-per-second`.
    throttle_rows: AtomicU64,
    observer: &'a dyn Observer,
    /// When each column of a profile's table was first archived (read once): a batch recorded
    /// before a column was is read to learn which columns its lines hold.
    first_archived: tokio::sync::OnceCell<Vec<(String, i64)>>,
}

#[async_trait::async_trait]
impl AppWork for Purger<'_> {
    fn start(&self, app: &str) -> AppReport {
        AppReport::new(app, Outcome::Done)
    }

    async fn work(&self, app: &str, access: Access<'_>, mut report: AppReport) -> AppReport {
        let mut tally = Tally::default();
        if self.opts.dry_run {
            tally.details.would_purge_rows = Some(0);
        }
        let total = match self.observer.wants_totals() {
            true => self.receipts.count(&self.scope(app)).await.ok(),
            false => None,
        };
        self.observer.start(app, "batches", total);
        let result = self.purge_app(app, access, &mut tally).await;
        self.observer.finish(app);
        report.batches = tally.done_batches;
        report.rows = tally.details.purged_rows;
        let ending = ending(app, &mut tally);
        report.end("purge", result, ending);
        self.note_left(app, &mut tally.details).await;
        report.details = Some(AppDetails::Purge(tally.details));
        report
    }
}

/// Notes what one deleted chunk of a receipt did: its rows purged, its members kept (changed
/// since archived), and the columns that kept rows — said once per column and batch.
fn note_chunk(app: &str, batch_id: &str, done: Chunk, tally: &mut Tally) {
    tally.details.purged_rows += done.purged;
    tally.details.kept_changed.extend(done.kept);
    for why in done.kept_for_columns {
        tracing::warn!(
            app,
            batch_id,
            columns = why,
            "rows kept: a column the batch's lines lack holds what a restore would not put back"
        );
        if !tally.details.kept_for_columns.contains(&why) {
            tally.details.kept_for_columns.push(why);
        }
    }
}

/// Why a batch's leaf is not proven: not logged yet, or the finding its proof made.
fn unsound(app: &str, receipt: &Receipt, f: LogFinding) -> Finding {
    let mut finding = match (f.problem, f.seq) {
        (Problem::Gap, None) => Finding {
            kind: FindingKind::LogPending,
            batch_id: Some(receipt.batch_id.clone()),
            key: None,
            event_id: None,
            expected: Some(format!("app {app}: {}", f.expected)),
            actual: Some(f.actual),
            seq: None,
        },
        _ => Finding::of_log(app, f),
    };
    finding
        .batch_id
        .get_or_insert_with(|| receipt.batch_id.clone());
    finding
}

/// What a purge that ended without an error left: batches not purged (their findings say why),
/// a limit or shutdown that stopped it, or rows another transaction held — work left, not a
/// failure (exit 0: the relay holds rows for seconds), and never "done".
fn ending(app: &str, tally: &mut Tally) -> Unfinished {
    let failed = &tally.details.failed_batches;
    let locked = tally.details.left_locked_rows;
    Unfinished {
        failed: (!failed.is_empty()).then(|| format!(
            "{} batch(es) not purged: their objects in the store, their member rows or their link in the chain disagree with the receipt (see findings; run `outbox-archiver verify --app {app}`)",
            failed.len()
        )),
        stopped: tally
            .stop_reason
            .take()
            .or_else(|| (locked > 0).then_some(Stop::LeftLocked { rows: locked }))
            .or_else(|| waiting(app, &tally.details.waiting_for_log)),
    }
}

/// The batches of an app that wait for the next archive run to append them to its log, said
/// once (and logged once, at INFO): their rows stay until a purge after that run.
fn waiting(app: &str, batches: &[String]) -> Option<Stop> {
    let first = batches.first()?;
    let why = Stop::WaitingForLog {
        batches: batches.len(),
        first: first.clone(),
    };
    tracing::info!(app, batches = batches.len(), first_batch = first, "{why}");
    Some(why)
}

impl<'a> Purger<'a> {
    pub(crate) fn new(
        ctx: &'a RunContext,
        opts: &'a PurgeOptions,
        started: Instant,
        deadline: Option<Instant>,
        observer: &'a dyn Observer,
    ) -> Purger<'a> {
        Purger {
            ctx,
            opts,
            receipts: ctx.tables.receipts.clone(),
            members: ctx.tables.members.clone(),
            purge: PurgeQueries::new(&ctx.db.pool, ctx.spec),
            deadline,
            started,
            throttle_rows: AtomicU64::new(0),
            observer,
            first_archived: tokio::sync::OnceCell::new(),
        }
    }

    /// The receipts an app's purge works through: verified, not purged, out of `--grace`.
    fn scope(&self, app: &str) -> ReceiptScope {
        ReceiptScope {
            apps: vec![app.to_string()],
            unpurged_verified_before: Some(self.ctx.now() - self.opts.grace_ms),
            include_restored: self.opts.include_restored,
            ..ReceiptScope::default()
        }
    }

    /// What the run leaves for later, for the report: batches restored into the source (never
    /// purged on their receipt), and rows archived too recently for `--grace`. A failure to count
    /// is logged, not fatal.
    async fn note_left(&self, app: &str, details: &mut PurgeApp) {
        match self.receipts.restored_unpurged(app).await {
            Ok(n) => details.restored_batches_left = Some(n),
            Err(e) => tracing::warn!(app, error = %e, "could not count restored batches"),
        }
        let grace_from = self.ctx.now() - self.opts.grace_ms;
        match self.receipts.in_grace(app, grace_from).await {
            Ok((rows, first)) if rows > 0 => {
                let eligible = first.map(|ms| ms + self.opts.grace_ms);
                tracing::info!(
                    app,
                    rows,
                    eligible_from = eligible
                        .map(crate::model::timespec::rfc3339)
                        .unwrap_or_default(),
                    "rows archived too recently for --grace wait; the first become purgeable then"
                );
                details.in_grace_rows = rows;
                details.eligible_from_ms = eligible;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(app, error = %e, "could not count the rows in --grace"),
        }
    }

    async fn purge_app(
        &self,
        app: &str,
        access: Access<'_>,
        tally: &mut Tally,
    ) -> Result<(), AppError> {
        // Only batches whose receipt is proven to be the leaf at its index in the tree head the
        // store holds are purged: an inclusion proof each, the tiles on its path read once.
        // A database restored from a backup: its receipts are not the store's; `recover` first.
        let log = Log::open(self.ctx, app).await?;
        let mut prover = Prover::open(&log).await?;
        if let Some(behind) = prover.behind().await? {
            return Err(AppError::Behind(behind));
        }
        let receipts = self.receipts.stream(self.scope(app));
        futures_util::pin_mut!(receipts);
        while let Some(receipt) = receipts.next().await {
            let receipt = receipt?;
            if let Some(reason) = self.ctx.stop_reason(self.deadline) {
                tally.stop_reason = Some(reason);
                return Ok(());
            }
            if let Some(problem) = prover.prove(&receipt).await? {
                let finding = unsound(app, &receipt, problem);
                if finding.kind == FindingKind::LogPending {
                    // Not in the log yet: the next archive run appends it. It waits, said once
                    // for the app below, not once per batch.
                    tally.details.waiting_for_log.push(receipt.batch_id.clone());
                } else {
                    tracing::error!(app, batch_id = receipt.batch_id, finding = %finding, "the batch's leaf in its app's log is not proven; batch not purged");
                    tally.details.failed_batches.push(receipt.batch_id.clone());
                }
                tally.details.findings.push(finding);
                continue;
            }
            let step = self.purge_receipt(&receipt, access, tally).await?;
            let rows = match &tally.details.would_purge_rows {
                Some(rows) => format!(", {} rows would go", crate::model::human::thousands(*rows)),
                None => format!(
                    ", {} rows deleted",
                    crate::model::human::thousands(tally.details.purged_rows)
                ),
            };
            self.observer.advance(app, 1, &rows);
            if let Step::Stop(reason) = step {
                tally.stop_reason = Some(reason);
                return Ok(());
            }
        }
        Ok(())
    }

    /// One receipt: look at its objects and its member rows, then delete its members chunk by
    /// chunk (count them, in a dry run), and mark it done.
    async fn purge_receipt(
        &self,
        receipt: &Receipt,
        access: Access<'_>,
        tally: &mut Tally,
    ) -> Result<Step, AppError> {
        let app = receipt.app_code.as_str();
        let members = self.members.members_of(app, &receipt.batch_id).await?;
        let (findings, members, batch) = self.proven(receipt, members).await?;
        if !findings.is_empty() {
            for f in &findings {
                tracing::error!(
                    app,
                    batch_id = receipt.batch_id,
                    finding = %f,
                    "the batch's objects or member rows are not what its receipt says; batch not purged"
                );
            }
            if let Access::Locked(_) = access {
                super::verifier::note_findings(self.ctx, receipt, &findings, "purge").await;
            }
            tally.details.failed_batches.push(receipt.batch_id.clone());
            tally.details.findings.extend(findings);
            return Ok(Step::Done);
        }
        match access {
            Access::Locked(lock) => {
                self.delete_members(receipt, &members, batch, lock, tally)
                    .await
            }
            Access::DryRun | Access::Reading => {
                let mut rows = 0;
                for chunk in members.chunks(PURGE_CHUNK) {
                    let of = ChunkOf {
                        app,
                        batch_id: &receipt.batch_id,
                        members: chunk,
                        batch,
                    };
                    rows += self.purge.count(of).await?;
                }
                *tally.details.would_purge_rows.get_or_insert(0) += rows;
                let c = &receipt.content;
                tally.details.would_purge_batches.push(PlannedPurge {
                    batch_id: receipt.batch_id.clone(),
                    day: crate::model::timespec::utc_date(c.first.updated_at_ms),
                    first_updated_at_ms: c.first.updated_at_ms,
                    last_updated_at_ms: c.last.updated_at_ms,
                    rows,
                });
                Ok(Step::Done)
            }
        }
    }

    /// Deletes a receipt's members chunk by chunk, each chunk in its own transaction under the
    /// lock, then marks the receipt purged. Leaves it unfinished when a limit or shutdown stops
    /// it, and untouched (rows and all) when it was restored into the source meanwhile. The
    /// members it keeps (changed since archived) are noted as it goes, however the receipt's
    /// work ends — unless an error ends the attempt: a retry (a lost lock is retried) notes
    /// them again, and they are said once.
    async fn delete_members(
        &self,
        receipt: &Receipt,
        members: &[Member],
        batch: &'static TableSpec,
        lock: &AppLock,
        tally: &mut Tally,
    ) -> Result<Step, AppError> {
        let kept_from = tally.details.kept_changed.len();
        let deleted = self
            .delete_chunks(receipt, members, batch, lock, kept_from, tally)
            .await;
        if deleted.is_err() {
            tally.details.kept_changed.truncate(kept_from);
        }
        deleted
    }

    /// [`Purger::delete_members`]'s chunks, its kept members noted from `kept_from` on.
    async fn delete_chunks(
        &self,
        receipt: &Receipt,
        members: &[Member],
        batch: &'static TableSpec,
        lock: &AppLock,
        kept_from: usize,
        tally: &mut Tally,
    ) -> Result<Step, AppError> {
        let (app, batch_id) = (receipt.app_code.as_str(), &receipt.batch_id);
        let failpoints = &self.opts.failpoints;
        let mut busy = 0;
        for chunk in members.chunks(PURGE_CHUNK) {
            if let Some(step) = self.wait_for_replicas(app, lock, tally).await? {
                return Ok(step);
            }
            let of = ChunkOf {
                app,
                batch_id,
                members: chunk,
                batch,
            };
            let done = match self
                .purge
                .purge_chunk(
                    of,
                    lock,
                    self.opts.include_restored,
                    failpoints,
                    self.ctx.now(),
                )
                .await
            {
                Ok(done) => done,
                Err(PurgeError::Withdrawn { batch_id, now }) => {
                    return Ok(self.withdrawn(tally, batch_id, now))
                }
                Err(e) => return Err(e.into()),
            };
            if done.restored {
                // Restored into the source since this run listed it: leave it.
                tracing::info!(
                    app,
                    batch_id,
                    "batch restored into the source meanwhile; its rows stay"
                );
                return Ok(Step::Done);
            }
            let purged = done.purged;
            busy += done.busy;
            note_chunk(app, batch_id, done, tally);
            failpoints
                .pass("after-purge-chunk")
                .map_err(PurgeError::from)?;
            self.throttle(purged).await;
            if let Some(reason) = self.ctx.stop_reason(self.deadline) {
                // The receipt stays unfinished; the next run continues it.
                return Ok(Step::Stop(reason));
            }
        }
        self.finish_receipt(receipt, members, kept_from, busy, tally)
            .await
    }

    /// Waits for the replicas before a chunk is deleted (`--replica`): the step that ends the
    /// receipt's work where the wait ended it (shutdown stops it; a timeout or the lock lost is
    /// an error), none where the replicas caught up.
    async fn wait_for_replicas(
        &self,
        app: &str,
        lock: &AppLock,
        tally: &mut Tally,
    ) -> Result<Option<Step>, AppError> {
        let Some(gate) = &self.ctx.stops.replicas else {
            return Ok(None);
        };
        match gate.wait(app, Some(lock), &self.ctx.shutdown).await {
            Ok(waited) => {
                tally.details.replica_wait.add(waited);
                Ok(None)
            }
            Err(LagStop::Shutdown) => Ok(Some(Step::Stop(super::shutdown_reason()))),
            Err(stop) => Err(stop.into()),
        }
    }

    /// After the last chunk: marks the receipt purged — every member not kept (those noted in
    /// the tally from `kept_from` on) proven gone — unless rows another transaction held were
    /// left (the receipt stays unfinished), or it was withdrawn meanwhile.
    async fn finish_receipt(
        &self,
        receipt: &Receipt,
        members: &[Member],
        kept_from: usize,
        busy: u64,
        tally: &mut Tally,
    ) -> Result<Step, AppError> {
        let (app, batch) = (receipt.app_code.as_str(), &receipt.batch_id);
        if busy > 0 {
            // Rows another transaction held (the relay, an operator): the receipt stays
            // unfinished and the next run looks at them again; the summary says how many.
            tracing::warn!(
                app,
                batch_id = batch,
                busy,
                "rows locked by another transaction were left for the next run"
            );
            tally.details.left_locked_rows += busy;
            return Ok(Step::Done);
        }
        let kept = &tally.details.kept_changed[kept_from..];
        let kept_ids: std::collections::HashSet<&str> = kept.iter().map(String::as_str).collect();
        let gone: Vec<&str> = members
            .iter()
            .map(|m| m.event_id.as_str())
            .filter(|id| !kept_ids.contains(id))
            .collect();
        let finished = self
            .purge
            .finish(
                app,
                batch,
                &gone,
                kept.len() as u64,
                self.opts.include_restored,
                self.ctx.now(),
            )
            .await;
        let kept = kept.len();
        self.marked(app, batch, finished, kept, tally)
    }

    /// What marking the receipt purged came to: done (its members changed since archiving
    /// kept, said), or left open for the next purge — rows put back since their delete,
    /// committed or not — or withdrawn meanwhile.
    fn marked(
        &self,
        app: &str,
        batch: &str,
        finished: Result<Finished, PurgeError>,
        kept: usize,
        tally: &mut Tally,
    ) -> Result<Step, AppError> {
        match finished {
            Ok(Finished::Done) => {}
            // Put back since its chunk was deleted: the batch stays open for the next purge.
            Ok(Finished::Back(n)) => {
                tracing::warn!(
                    app,
                    batch_id = batch,
                    rows = n,
                    "rows of the batch are back in the source since their delete: the batch stays open, the next purge looks at them"
                );
                tally.details.left_locked_rows += n;
                return Ok(Step::Done);
            }
            Ok(Finished::Held) => {
                tracing::warn!(
                    app,
                    batch_id = batch,
                    "another transaction holds a row of the batch (put back, not committed): the batch stays open"
                );
                tally.details.left_locked_rows += 1;
                return Ok(Step::Done);
            }
            Err(PurgeError::Withdrawn { batch_id, now }) => {
                return Ok(self.withdrawn(tally, batch_id, now))
            }
            Err(e) => return Err(e.into()),
        }
        if kept > 0 {
            tracing::warn!(
                app,
                batch_id = batch,
                kept,
                "members changed since archiving were kept"
            );
        }
        tally.done_batches += 1;
        Ok(Step::Done)
    }

    /// A receipt withdrawn while its rows were being deleted: the batch is failed, named, and
    /// the rest of its rows stay; the app goes on with its other receipts.
    fn withdrawn(&self, tally: &mut Tally, batch_id: String, now: String) -> Step {
        tracing::error!(
            batch_id,
            now,
            "the receipt was withdrawn while purge worked on it; the rest of its rows stay"
        );
        tally.details.findings.push(Finding {
            kind: FindingKind::ReceiptWithdrawn,
            batch_id: Some(batch_id.clone()),
            key: None,
            event_id: None,
            expected: Some("a VERIFIED receipt".into()),
            actual: Some(now),
            seq: None,
        });
        tally.details.failed_batches.push(batch_id);
        Step::Done
    }

    /// Sleeps as long as it takes to keep the run at `--max-rows-per-second`.
    async fn throttle(&self, rows: u64) {
        let Some(limit) = self.opts.max_rows_per_second.filter(|&l| l > 0) else {
            return;
        };
        let total = self.throttle_rows.fetch_add(rows, Ordering::Relaxed) + rows;
        let due = Duration::from_secs_f64(total as f64 / limit as f64);
        if let Some(wait) = due.checked_sub(self.started.elapsed()) {
            tokio::time::sleep(wait).await;
        }
    }
}
