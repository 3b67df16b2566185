//! Archiving one app (SPEC §6 `archive`): resume from the newest VERIFIED receipt, cut delivered
//! rows below the cutoff into bounded batches, publish each (write-once puts + read-back
//! verification), and record its receipt and members atomically. Repeats until caught up, a
//! limit is reached, or shutdown is requested (checked between batches, so a batch is never left
//! half-recorded).

use std::time::{Duration, Instant};

use super::apps::{Access, AppWork, Apps};
use super::budget::Budget;
use super::builder::{self, BuildError, Built};
use super::failure::{Classify, Kind};
use super::home::HomeError;
use super::log;
use super::publish::{probe_write_once, PublishError, Published, Publisher};
use super::replicas::LagStop;
use super::verifier::{ColdObjects, Depth, Expected, Verifier};
use super::{Observer, RunContext};
use crate::db::lock::AppLock;
use crate::db::receipts::Receipts;
use crate::db::record::{Cut, RecordError, Recorder};
use crate::db::source::{Backlog, RowStream, Source, SourceTable};
use crate::db::DbError;
use crate::failpoint::FailPoints;
use crate::model::batch::{EncodedBatch, Limits, Superseded};
use crate::model::format::Cursor;
use crate::model::protection::WritePolicy;
use crate::model::receipt::members_proof_of;
use crate::model::receipt::STATE_VERIFIED;
use crate::model::unarchived::Unarchived;
use crate::pipeline::report::details::{self, ArchiveApp};
use crate::pipeline::report::{AppDetails, AppReport, BatchReport, Ending, Outcome};
use crate::store::ConditionalPut;

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
    /// `--accept-chain-break REASON`: anchor the database's chain over checkpoints it does not
    /// continue, recording the break (README, "The chain of batches").
    pub accept_chain_break: Option<String>,
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
            accept_chain_break: None,
            failpoints: FailPoints::default(),
        }
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
    #[error("batch {batch_id} has a receipt in state {state}, which this tool never writes (someone set it by hand): the app's cursor counts only VERIFIED receipts, so its rows come round as that batch again and the app stops there, writing nothing. Check the batch (`outbox-archiver verify --app APP` reports receipts not VERIFIED), then set its state back to VERIFIED — or, to archive its rows again, delete the receipt and its member rows and accept the removal with `outbox-archiver archive --accept-chain-break REASON` (README, Recovering from a finding)")]
    NotVerified { batch_id: String, state: String },
    /// Waiting for the replicas before the receipt transaction ended the app's work; the
    /// batch's objects are written and will be accepted by the next run.
    #[error(transparent)]
    Replica(#[from] LagStop),
    /// The archive could not be bound to the store before its first batch.
    #[error(transparent)]
    Home(#[from] HomeError),
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
            AppError::Home(_) => Kind::Fatal,
        }
    }

    fn stop_reason(&self) -> Option<String> {
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
        // Shutdown while waiting for the replicas is a clean stop: the batch in hand is written
        // but not recorded; the next run accepts its objects and records it.
        report.end("archiving", result.map(drop), Ending::default());
        // Anchoring writes too: not once the lock is lost (the archiver that holds it anchors).
        if !self.opts.dry_run && !lost_lock {
            self.anchor(app, &mut report, &mut details).await;
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
            pages: SourceTable::new(ctx.spec),
            receipts: Receipts::new(ctx.spec),
            recorder: Recorder::new(ctx.spec),
            deadline,
            budget: Budget::new(opts.memory_budget),
        }
    }

    /// The archiver of a built-in table with columns its format has no key for: a row is
    /// archived only where each holds what a restore would put back (SPEC §5.14).
    pub(crate) fn holding(mut self, unarchived: Unarchived) -> Archiver<'a> {
        self.pages = SourceTable::reading(self.ctx.spec, unarchived);
        self
    }

    /// Appends the app's new receipts to its log in the store, whatever the run's outcome: what
    /// was recorded is logged. A failure fails the app (the next run appends them); a log that
    /// holds leaves the database does not is said, and left as it is.
    async fn anchor(&self, app: &str, report: &mut AppReport, details: &mut ArchiveApp) {
        let accept = self.opts.accept_chain_break.as_deref();
        match log::append(self.ctx, app, &self.opts.policy, accept).await {
            Ok(anchoring) => {
                if let Some(key) = &anchoring.written {
                    tracing::info!(
                        app,
                        key,
                        leaves = anchoring.links,
                        size = anchoring.head,
                        "log appended"
                    );
                }
                details.chain_head = (anchoring.head > 0).then_some(anchoring.head);
                details.chain_checkpoint = anchoring.written;
                details.chain_break = anchoring.break_accepted;
            }
            Err(e) => {
                tracing::error!(app, error = %e, "could not append to the log");
                if let log::ChainError::Refused { detail, .. } = &e {
                    details.chain_disagreement = Some(detail.clone());
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
        let pool = &self.ctx.db.pool;
        self.pages
            .backlog(pool, app, status, after, self.opts.cutoff_ms)
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

    fn stop_reason(&self, batches: u64) -> Option<String> {
        let max_batches = self.opts.max_batches.is_some_and(|max| batches >= max);
        match self.ctx.stop_reason(None) {
            Some(stop) => Some(stop),
            None if max_batches => Some("--max-batches reached".to_string()),
            None => self.ctx.stop_reason(self.deadline),
        }
    }

    /// The app's rows, from the cursor on (or its stragglers below it); `None`: nothing to do.
    async fn source(&self, app: &str, report: &mut AppReport) -> Result<Option<Source>, AppError> {
        let cursor = self.receipts.latest_cursor(&self.ctx.db.pool, app).await?;
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
        let Some(source) = self.source(app, report).await? else {
            return Ok(Outcome::UpToDate);
        };
        self.observer
            .start(app, "rows", self.progress_total(app, &source).await);
        let rows = RowStream::spawn(
            self.ctx.db.pool.clone(),
            self.pages.clone(),
            app.to_string(),
            self.opts.delivered_status.clone(),
            source,
            self.opts.cutoff_ms,
            self.opts.failpoints.clone(),
        );
        let mut batches = builder::spawn(
            rows,
            self.ctx.spec,
            self.opts.limits,
            self.opts.gzip_level,
            self.budget.clone(),
        );
        let cut = if self.opts.stragglers {
            Cut::Stragglers
        } else {
            Cut::AfterCursor
        };
        // Three stages overlap: the builder reads and compresses batch N+2 while batch N+1 is
        // published and read back and batch N is recorded. Receipts are recorded one at a time,
        // in cursor order; a stop starts no new batch but records the one already published.
        let mut staged: Option<Staged> = None;
        let outcome = loop {
            let started = report.batches + u64::from(staged.is_some());
            let stop = self.stop_reason(started);
            let batches = &mut batches;
            let more = stop.is_none();
            let shutdown = &self.ctx.shutdown;
            let take_next = async {
                match more {
                    // A shutdown while the next batch is built ends the wait, and a batch
                    // built as it came is not written: a stop starts no new batch (the next
                    // run builds it again).
                    true => tokio::select! {
                        built = batches.recv() => match shutdown.is_cancelled() {
                            true => Ok(None),
                            false => built.transpose(),
                        },
                        _ = shutdown.cancelled() => Ok(None),
                    },
                    false => Ok(None),
                }
            };
            let Some(ready) = staged.take() else {
                match take_next.await? {
                    Some(built) => staged = Some(self.stage(app, access, built, cut).await?),
                    None => {
                        let stop = stop.or_else(|| self.ctx.stop_reason(None));
                        break self.ended(app, stop, batches, report).await?;
                    }
                }
                continue;
            };
            // The staged batch is recorded while the next one is taken and published — and a
            // commit that fails (its lock lost, say) ends the next one where it is: a process
            // that lost the lock must not go on writing a batch another archiver now writes.
            let next = async {
                match take_next.await? {
                    Some(built) => self.stage(app, access, built, cut).await.map(Some),
                    None => Ok(None),
                }
            };
            let commit = self.commit(app, access, ready, cut);
            tokio::pin!(commit, next);
            let mut taken = None;
            let done = loop {
                tokio::select! {
                    done = &mut commit => break done,
                    n = &mut next, if taken.is_none() => taken = Some(n),
                }
            };
            let superseded = self.account(app, done?, report, details);
            details.note_superseded(superseded);
            staged = match taken {
                Some(n) => n?,
                None => next.await?,
            };
        };
        self.observer.finish(app);
        Ok(match outcome {
            Outcome::UpToDate if report.batches > 0 && self.opts.dry_run => Outcome::Planned,
            Outcome::UpToDate if report.batches > 0 => Outcome::Archived,
            other => other,
        })
    }

    /// How a run that takes no more batches ends: stopped with work left (a stop said so, and
    /// there are rows it did not take), or caught up. Whether rows are left is never found by
    /// waiting for the builder to finish another batch — a shutdown must end within the
    /// termination grace period: a batch it finished already says so, else one index dive.
    async fn ended(
        &self,
        app: &str,
        stop: Option<String>,
        batches: &mut tokio::sync::mpsc::Receiver<Result<Built, BuildError>>,
        report: &mut AppReport,
    ) -> Result<Outcome, AppError> {
        use tokio::sync::mpsc::error::TryRecvError;
        let Some(reason) = stop else {
            return Ok(Outcome::UpToDate);
        };
        let left = match batches.try_recv() {
            Ok(built) => built.map(|_| true)?,
            Err(TryRecvError::Disconnected) => false,
            // The builder is on a batch: are there rows after the last one recorded?
            Err(TryRecvError::Empty) => match self.opts.stragglers {
                true => true,
                false => self
                    .pages
                    .oldest(
                        &self.ctx.db.pool,
                        app,
                        &self.opts.delivered_status,
                        report.cursor_after.as_ref(),
                        self.opts.cutoff_ms,
                    )
                    .await?
                    .is_some(),
            },
        };
        if !left {
            return Ok(Outcome::UpToDate);
        }
        tracing::info!(app, reason, "stopping with work left");
        report.stop_reason = Some(reason);
        Ok(Outcome::Stopped)
    }

    /// A batch's first steps after it is built: its objects written and read back (planned, in
    /// a dry run), or — stragglers that form a batch already recorded — nothing to write.
    async fn stage(
        &self,
        app: &str,
        access: Access<'_>,
        built: Built,
        cut: Cut,
    ) -> Result<Staged, AppError> {
        let started = Instant::now();
        let lock = match access {
            Access::Locked(lock) => Some(lock),
            Access::DryRun | Access::Reading => None,
        };
        let publisher = self.publisher(app, lock);
        let planned = publisher.plan(&built.batch);
        if matches!(access, Access::DryRun | Access::Reading) {
            return Ok(Staged {
                built,
                started,
                step: Step::Planned(Box::new(planned)),
            });
        }
        let pool = &self.ctx.db.pool;
        if let Some(state) = self
            .receipts
            .state_of(pool, app, &planned.receipt.batch_id)
            .await?
        {
            if state != STATE_VERIFIED {
                return Err(AppError::NotVerified {
                    batch_id: planned.receipt.batch_id,
                    state,
                });
            }
            if cut == Cut::Stragglers {
                // The stragglers are exactly a batch already recorded (its member rows went,
                // as compaction deletes them, and its rows came back as they were): its objects
                // stay as they are, and its member rows are recorded again.
                return Ok(Staged {
                    built,
                    started,
                    step: Step::Remember(planned.receipt.batch_id),
                });
            }
            return Err(AppError::AlreadyRecorded(planned.receipt.batch_id));
        }
        // The archive's first batch binds it to this store (its home); every later one finds
        // it bound.
        self.ctx.binding.ensure(self.ctx, &self.opts.policy).await?;
        let published = publisher
            .publish(&built.batch, planned, self.ctx.now())
            .await?;
        Ok(Staged {
            built,
            started,
            step: Step::Published(Box::new(published), started.elapsed()),
        })
    }

    /// A staged batch's last step: its receipt and members recorded (nothing, in a dry run).
    async fn commit(
        &self,
        app: &str,
        access: Access<'_>,
        staged: Staged,
        cut: Cut,
    ) -> Result<Done, AppError> {
        let Staged {
            built,
            started,
            step,
        } = staged;
        let batch = &built.batch;
        let (recorded, publish, record) = match (step, access) {
            (Step::Planned(planned), _) => {
                let report = BatchReport::of(
                    planned.receipt.batch_id,
                    planned.receipt.keys.data,
                    batch,
                    batch.gzip_digest.size,
                );
                (
                    Recorded {
                        batch_report: report,
                        ..Recorded::default()
                    },
                    Duration::ZERO,
                    Duration::ZERO,
                )
            }
            (Step::Remember(batch_id), Access::Locked(lock)) => {
                let phase = Instant::now();
                let recorded = self.remember(app, lock, batch, &batch_id).await?;
                (recorded, Duration::ZERO, phase.elapsed())
            }
            (Step::Published(published, publish), Access::Locked(lock)) => {
                let phase = Instant::now();
                let recorded = self.record(app, lock, batch, *published, cut).await?;
                (recorded, publish, phase.elapsed())
            }
            (_, Access::DryRun | Access::Reading) => {
                unreachable!("only a dry run's batches are planned, and only planned")
            }
        };
        // The batch — its data, its members and its share of the budget — goes now, not when
        // the report is written: the next batch of this app may be waiting for that share, and
        // the report waits for the next batch (a whole-budget first batch of another app ahead
        // of it in the queue would otherwise wait for this one forever).
        let Built {
            batch,
            read_ms,
            held,
        } = built;
        let memory_held = held.bytes();
        drop(held);
        Ok(Done {
            content: batch.content,
            read_ms,
            memory_held,
            recorded,
            millis: started.elapsed().as_millis() as u64,
            publish_ms: publish.as_millis() as u64,
            record_ms: record.as_millis() as u64,
        })
    }

    /// Notes a finished batch in the report and the progress; returns the older versions of
    /// rows it superseded.
    fn account(
        &self,
        app: &str,
        done: Done,
        report: &mut AppReport,
        details: &mut ArchiveApp,
    ) -> Vec<Superseded> {
        let Done {
            content,
            read_ms,
            memory_held,
            recorded,
            millis,
            publish_ms,
            record_ms,
        } = done;
        let c = &content;
        // One short line per batch; its cursors and where the time went at debug level.
        tracing::info!(
            app,
            batch_id = recorded.batch_report.batch_id,
            rows = c.row_count,
            from = crate::model::timespec::rfc3339(c.first.updated_at_ms),
            to = crate::model::timespec::rfc3339(c.last.updated_at_ms),
            compressed_bytes = recorded.batch_report.compressed_bytes,
            millis = millis + read_ms,
            "{}",
            if self.opts.dry_run {
                "batch planned"
            } else {
                "batch archived"
            }
        );
        tracing::debug!(
            app,
            batch_id = recorded.batch_report.batch_id,
            first = %c.first,
            last = %c.last,
            uncompressed_bytes = c.uncompressed_bytes,
            read_ms,
            publish_ms,
            record_ms,
            memory_held,
            "batch timings"
        );
        report.batches += 1;
        report.rows += c.row_count;
        self.observer
            .advance(app, c.row_count, &format!(", {} batches", report.batches));
        if !self.opts.stragglers {
            report.cursor_after = Some(c.last.clone());
        }
        report.replaced_objects.extend(recorded.replaced);
        report.adopted_objects.extend(recorded.adopted);
        report.batch_list.push(recorded.batch_report);
        details.replica_wait.add(recorded.replica_wait);
        recorded.superseded
    }

    fn publisher<'p>(&'p self, app: &'p str, lock: Option<&'p AppLock>) -> Publisher<'p> {
        Publisher {
            store: self.ctx.store.as_ref(),
            spec: self.ctx.spec,
            app_code: app,
            policy: &self.opts.policy,
            failpoints: &self.opts.failpoints,
            lock,
        }
    }

    /// Records a batch whose objects were written and verified: its receipt and members.
    async fn record(
        &self,
        app: &str,
        lock: &AppLock,
        batch: &EncodedBatch,
        published: Published,
        cut: Cut,
    ) -> Result<Recorded, AppError> {
        let (ctx, pool) = (self.ctx, &self.ctx.db.pool);
        let receipt = published.receipt.recorded(&batch.members, ctx.now());
        // Every page of this batch has been read: a column added to the table since the run
        // started is missing from the batch's rows, which purge would then delete. The batch
        // is not recorded (its objects are replaced by the next run, which archives the column).
        ctx.db
            .check_columns_unchanged(ctx.spec, self.pages.unarchived())
            .await?;
        // The receipt transaction writes (and is replicated): not while a replica lags.
        let replica_wait = match &ctx.stops.replicas {
            Some(gate) => gate.wait(app, Some(lock), &ctx.shutdown).await?,
            None => Duration::ZERO,
        };
        let failpoints = &self.opts.failpoints;
        let superseded = self
            .recorder
            .record(pool, &receipt, &batch.members, cut, lock, failpoints)
            .await?;
        warn_superseded(app, &receipt.batch_id, &superseded);
        Ok(Recorded {
            batch_report: BatchReport::of(
                receipt.batch_id,
                receipt.keys.data,
                batch,
                receipt.objects.data.size,
            ),
            superseded,
            replaced: published.replaced,
            adopted: published.adopted,
            replica_wait,
        })
    }
}

/// What an archive run settles once, before its apps: the store's answer to create-only puts,
/// and the built-in table's columns its format has no key for.
pub(crate) struct Prepared {
    pub conditional_put: Option<ConditionalPut>,
    pub unarchived: Unarchived,
}

/// Why an archive run did not start its apps.
pub(crate) enum Unprepared {
    /// A setting the store refuses (the conditional-put header): exit 2.
    Unusable(String),
    /// The run could not record or probe what it must (exit 1).
    Failed(String),
    /// The table's columns could not be read: the apps could not be worked.
    WithoutApps(String),
}

/// Prepares an archive run of `apps` (none: nothing to prepare but the columns): records the
/// columns archived so far (a profile's table), probes the store for write-once, reads the
/// columns a built-in table's format has no key for — rows are archived only while each holds
/// its default — and warns of them.
pub(crate) async fn prepare(
    ctx: &RunContext,
    opts: &ArchiveOptions,
    apps: &[String],
) -> Result<Prepared, Unprepared> {
    let mut conditional_put = None;
    if !opts.dry_run && !apps.is_empty() {
        ctx.db
            .record_archived_columns(ctx.spec, ctx.now())
            .await
            .map_err(|e| Unprepared::Failed(e.to_string()))?;
        conditional_put = probe_write_once(ctx).await.map_err(|e| {
            let error = format!(
                "probing whether the store refuses create-only puts (If-None-Match): {e} \
                 (a store that rejects the header: set --s3-conditional-put false)"
            );
            match e.is_configuration() {
                true => Unprepared::Unusable(error),
                false => Unprepared::Failed(error),
            }
        })?;
    }
    let unarchived = ctx
        .db
        .unarchived(ctx.spec)
        .await
        .map_err(|e| Unprepared::WithoutApps(e.to_string()))?;
    if !unarchived.is_empty() {
        tracing::warn!(
            table = ctx.spec.name,
            columns = unarchived
                .columns
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            "the table has columns its built-in format has no key for: rows are archived only while each holds its default (describe the table with --table-profile to archive them)"
        );
    }
    Ok(Prepared {
        conditional_put,
        unarchived,
    })
}

/// A batch between its stages: built, and published (or planned, or found recorded already).
struct Staged {
    built: Built,
    /// When its first stage started.
    started: Instant,
    step: Step,
}

/// How far a staged batch got.
enum Step {
    /// A dry run's: its keys, as they would be written.
    Planned(Box<Expected>),
    /// Written and read back, in this long.
    Published(Box<Published>, Duration),
    /// Stragglers that are exactly batch `0`, recorded already.
    Remember(String),
}

/// A batch done: what it came to, and where its time went (ms).
struct Done {
    /// What the batch held (its rows, cursors, totals); the batch itself is gone.
    content: crate::model::format::ContentFacts,
    read_ms: u64,
    /// The share of the budget it held, for the debug log.
    memory_held: u64,
    recorded: Recorded,
    /// From its first stage to its receipt.
    millis: u64,
    publish_ms: u64,
    record_ms: u64,
}

impl Archiver<'_> {
    /// Records the member rows of stragglers that form exactly the recorded batch `batch_id`
    /// again, after reading its objects back in full against its receipt and holding the
    /// stragglers to its members proof; its objects are never written again (SPEC §5.3).
    async fn remember(
        &self,
        app: &str,
        lock: &AppLock,
        batch: &EncodedBatch,
        batch_id: &str,
    ) -> Result<Recorded, AppError> {
        let (ctx, pool) = (self.ctx, &self.ctx.db.pool);
        let receipt = self
            .receipts
            .get(pool, app, batch_id)
            .await?
            .ok_or_else(|| AppError::AlreadyRecorded(batch_id.to_string()))?;
        let expected = Expected::of_receipt(ctx.spec, &receipt, batch.members.clone());
        let verifier = Verifier {
            store: ctx.store.as_ref(),
            spec: ctx.spec,
            depth: Depth::Read,
            cold: ColdObjects::Metadata,
        };
        let verified = verifier
            .verify(&expected)
            .await
            .map_err(PublishError::from)?;
        let proof = members_proof_of(&batch.members);
        if let Some(first) = verified.findings.first() {
            return Err(PublishError::Mismatch {
                first: Box::new(first.clone()),
                count: verified.findings.len(),
            }
            .into());
        }
        if receipt.members_proof.is_some() && receipt.members_proof != proof {
            return Err(AppError::AlreadyRecorded(batch_id.to_string()));
        }
        let failpoints = &self.opts.failpoints;
        let superseded = self
            .recorder
            .record(
                pool,
                &receipt,
                &batch.members,
                Cut::Stragglers,
                lock,
                failpoints,
            )
            .await?;
        tracing::warn!(
            app,
            batch_id,
            rows = batch.members.len(),
            "stragglers formed a batch already recorded: its member rows were recorded again"
        );
        Ok(Recorded {
            batch_report: BatchReport::of(
                receipt.batch_id.clone(),
                receipt.keys.data.clone(),
                batch,
                receipt.objects.data.size,
            ),
            superseded,
            ..Recorded::default()
        })
    }
}

/// Says, once per batch, that rows archived before came back and this batch supersedes them.
fn warn_superseded(app: &str, batch_id: &str, superseded: &[Superseded]) {
    if let Some(first) = superseded.first() {
        tracing::warn!(
            app,
            batch_id,
            rows = superseded.len(),
            first_event_id = first.event_id,
            "rows archived before came back delivered with a new updated_at_ms; \
             this batch's versions supersede the older ones (purge deletes the new \
             version; verify and restore keep the old one as its batch's)"
        );
    }
}

/// What one batch came to.
#[derive(Default)]
struct Recorded {
    batch_report: BatchReport,
    superseded: Vec<Superseded>,
    replaced: Vec<String>,
    adopted: Vec<String>,
    replica_wait: Duration,
}
