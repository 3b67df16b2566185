//! Compacting one app's members (README, "Compaction"): for each receipt fully purged longer ago
//! than `--older-than` (and not restored, not compacted), the batch's three objects are read
//! back in full and verified against the receipt and its member rows; the data object's
//! `(event_id, updated_at_ms)` pairs are hashed; and [`CompactQueries::compact`] replaces the
//! member rows of rows no longer in the source by that digest, in one transaction, only if the
//! member rows hash to the same. Under the app's lock, like every command that writes.

use std::time::{Duration, Instant};

use futures_util::StreamExt;

use super::apps::{self, Access, AppWork, Apps, Driver, Gate, Population};
use super::command::Command;
use super::failure::{Classify, Kind};
use super::replicas::LagStop;
use super::verifier::{note_findings, ColdObjects, Depth, Expected, Verifier};
use super::{Observer, RunContext};
use crate::db::compact::{CompactError, CompactQueries};
use crate::db::members::Members;
use crate::db::receipts::{ReceiptScope, Receipts};
use crate::db::DbError;
use crate::failpoint::FailPoints;
use crate::model::command::CommandName;
use crate::model::format::MembersDigest;
use crate::model::receipt::Receipt;
use crate::pipeline::report::details::CompactApp;
use crate::pipeline::report::{AppDetails, AppReport, Outcome, Stop, Summary, Unfinished};
use crate::store::{StoreError, Thaw};

#[derive(Debug, Clone)]
pub struct CompactOptions {
    pub apps: Apps,
    /// Only receipts purged longer ago than this.
    pub older_than_ms: i64,
    /// Per app: stop after this many batches (the rest on a later run).
    pub max_batches: Option<u64>,
    pub max_runtime: Option<Duration>,
    /// Read and verify, count what would go; delete nothing.
    pub dry_run: bool,
    /// Ask the store to restore data objects in cold classes, to compact them on a later run.
    pub thaw: Option<Thaw>,
    pub lock_prefix: String,
    pub db_retries: u32,
    pub failpoints: FailPoints,
}

impl CompactOptions {
    /// Compact `apps`' receipts purged longer ago than `older_than_ms`.
    pub fn new(apps: Apps, older_than_ms: i64) -> CompactOptions {
        CompactOptions {
            apps,
            older_than_ms,
            max_batches: None,
            max_runtime: None,
            dry_run: false,
            thaw: None,
            lock_prefix: String::new(),
            db_retries: 5,
            failpoints: FailPoints::default(),
        }
    }
}

/// `compact` — replaces the member rows of receipts fully purged longer ago than
/// `--older-than` by a digest on the receipt (README, "Compaction"), under each app's lock,
/// after reading every batch back in full: every app with receipts through the driver, each by
/// [`Compactor`].
pub(crate) async fn run(
    ctx: &RunContext,
    opts: &CompactOptions,
    observer: &dyn Observer,
) -> Summary {
    let before = ctx.store_stats();
    let mut summary = Summary::new(CommandName::Compact);
    summary.table = Some(ctx.spec.name.to_string());
    summary.store = Some(ctx.store.location().to_string());
    summary.dry_run = Some(opts.dry_run);
    let population = Population::Receipts(Default::default());
    let apps = match apps::resolve(ctx, &opts.apps, &population).await {
        Ok(apps) => apps,
        Err(e) => return summary.without_apps(e),
    };
    let deadline = opts.max_runtime.map(|d| Instant::now() + d);
    let compactor = Compactor::new(ctx, opts, deadline, observer);
    let gate = Gate::Lock {
        prefix: &opts.lock_prefix,
        dry_run: opts.dry_run,
    };
    let driver = Driver::new(ctx, CommandName::Compact, gate)
        .retries(opts.db_retries)
        .until(deadline)
        .noting_runs();
    summary.apps = driver.run(apps, &compactor).await;
    summary.store_requests = ctx.store_activity(&before);
    summary.settle()
}

#[async_trait::async_trait]
impl Command for CompactOptions {
    const NAME: CommandName = CommandName::Compact;
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
    Compact(#[from] CompactError),
    #[error("reading the objects of batch {0}: {1}")]
    Store(String, StoreError),
    #[error(transparent)]
    Replica(#[from] LagStop),
}

impl Classify for AppError {
    fn kind(&self) -> Kind {
        match self {
            AppError::Db(e) => e.kind(),
            AppError::Compact(e) => e.kind(),
            AppError::Store(_, e) => e.kind(),
            AppError::Replica(e) => e.kind(),
        }
    }

    fn stop_reason(&self) -> Option<Stop> {
        match self {
            AppError::Replica(e) => e.stop_reason(),
            _ => None,
        }
    }
}

/// Compaction's work for one app.
pub(crate) struct Compactor<'a> {
    ctx: &'a RunContext,
    opts: &'a CompactOptions,
    receipts: Receipts,
    members: Members,
    queries: CompactQueries,
    deadline: Option<Instant>,
    observer: &'a dyn Observer,
}

#[async_trait::async_trait]
impl AppWork for Compactor<'_> {
    fn start(&self, app: &str) -> AppReport {
        AppReport::new(app, Outcome::Done)
    }

    async fn work(&self, app: &str, access: Access<'_>, mut report: AppReport) -> AppReport {
        let mut details = CompactApp::default();
        let result = self
            .compact_app(app, access, &mut details, &mut report)
            .await;
        // SIGTERM while waiting for the replicas is a clean stop: the receipts compacted so far
        // stand, the rest wait for the next run.
        let failed = details.failed_batches.len();
        let cold = details.pending_thaw.len();
        let left = Unfinished {
            failed: (failed > 0).then(|| format!(
                "{failed} batch(es) not compacted: their objects or member rows disagree with the receipt (see findings; run `outbox-archiver verify --app {app}`)"
            )),
            stopped: (report.outcome == Outcome::Done && cold > 0).then_some(match self.opts.thaw {
                Some(_) => Stop::CompactThawing { objects: cold },
                None => Stop::Cold { objects: cold },
            }),
        };
        report.end("compaction", result, left);
        report.details = Some(AppDetails::Compact(details));
        report
    }
}

impl<'a> Compactor<'a> {
    pub(crate) fn new(
        ctx: &'a RunContext,
        opts: &'a CompactOptions,
        deadline: Option<Instant>,
        observer: &'a dyn Observer,
    ) -> Compactor<'a> {
        Compactor {
            ctx,
            opts,
            receipts: ctx.tables.receipts.clone(),
            members: ctx.tables.members.clone(),
            queries: ctx.tables.compact.clone(),
            deadline,
            observer,
        }
    }

    async fn compact_app(
        &self,
        app: &str,
        access: Access<'_>,
        details: &mut CompactApp,
        report: &mut AppReport,
    ) -> Result<(), AppError> {
        let scope = ReceiptScope {
            apps: vec![app.to_string()],
            compactable_purged_before: Some(self.ctx.now() - self.opts.older_than_ms),
            ..ReceiptScope::default()
        };
        let total = match self.observer.wants_totals() {
            true => self.receipts.count(&scope).await.ok(),
            false => None,
        };
        self.observer.start(app, "batches", total);
        let result = self.compact_receipts(scope, access, details, report).await;
        self.observer.finish(app);
        result
    }

    async fn compact_receipts(
        &self,
        scope: ReceiptScope,
        access: Access<'_>,
        details: &mut CompactApp,
        report: &mut AppReport,
    ) -> Result<(), AppError> {
        let app = report.app_code.clone();
        let receipts = self.receipts.stream(scope);
        futures_util::pin_mut!(receipts);
        while let Some(receipt) = receipts.next().await {
            let receipt = receipt?;
            let limit = self.opts.max_batches.filter(|max| report.batches >= *max);
            let stop = self.ctx.stop_reason(self.deadline);
            if let Some(stop) = stop.or(limit.map(|_| Stop::MaxBatches)) {
                report.outcome = Outcome::Stopped;
                report.stop_reason = Some(stop.into());
                return Ok(());
            }
            self.compact_receipt(&receipt, access, details).await?;
            report.batches += 1;
            self.observer.advance(&app, 1, "");
        }
        Ok(())
    }

    /// One receipt: read its objects back in full and verify them against the receipt and its
    /// member rows, hash the data object's pairs, and compact.
    async fn compact_receipt(
        &self,
        receipt: &Receipt,
        access: Access<'_>,
        details: &mut CompactApp,
    ) -> Result<(), AppError> {
        let (app, batch) = (&receipt.app_code, &receipt.batch_id);
        let Some(in_data) = self.data_digest(receipt, access, details).await? else {
            return Ok(());
        };
        let lock = match access {
            Access::Locked(lock) => lock,
            Access::DryRun | Access::Reading => {
                // The member rows that would go: those of rows no longer in the source.
                let gone = self.queries.members_gone_from_source(app, batch).await?;
                *details.would_compact_member_rows.get_or_insert(0) += gone;
                return Ok(());
            }
        };
        if let Some(gate) = &self.ctx.stops.replicas {
            details
                .replica_wait
                .add(gate.wait(app, Some(lock), &self.ctx.shutdown).await?);
        }
        let now = self.ctx.now();
        let failpoints = &self.opts.failpoints;
        let done = match self
            .queries
            .compact(app, batch, &in_data, lock, now, failpoints)
            .await
        {
            Err(e @ CompactError::DigestMismatch { .. }) => {
                // This batch's alone: the next receipts are still compacted.
                tracing::error!(app, batch_id = batch, error = %e, "batch not compacted");
                details.failed_batches.push(batch.clone());
                return Ok(());
            }
            other => other?,
        };
        if done.done {
            tracing::info!(
                app,
                batch_id = batch,
                member_rows = done.member_rows,
                kept = done.kept,
                "members compacted to the receipt's digest"
            );
            details.compacted_batches += 1;
            details.compacted_member_rows += done.member_rows;
        }
        Ok(())
    }

    /// The digest of the data object's `(event_id, updated_at_ms)` pairs, from its objects read
    /// back in full and verified against the receipt and its member rows; `None` when the batch
    /// cannot be compacted now (findings, a cold object: `details` says which). Findings are
    /// noted on the receipt, but in a dry run.
    async fn data_digest(
        &self,
        receipt: &Receipt,
        access: Access<'_>,
        details: &mut CompactApp,
    ) -> Result<Option<MembersDigest>, AppError> {
        let (app, batch) = (&receipt.app_code, &receipt.batch_id);
        let members = self.members.proven_members_of(app, batch).await?;
        let mut expected = Expected::of_receipt(self.ctx.spec, receipt, members);
        expected.digest_data_members = true;
        let verifier = Verifier {
            store: self.ctx.store.as_ref(),
            spec: self.ctx.spec,
            depth: Depth::Read,
            cold: match self.opts.thaw {
                Some(thaw) => ColdObjects::Thaw(thaw),
                None => ColdObjects::Metadata,
            },
        };
        let mut verified = verifier
            .verify(&expected)
            .await
            .map_err(|e| AppError::Store(batch.clone(), e))?;
        // An object written again since (object_replaced) is left as purge leaves it: until its
        // new identity is recorded (the finding names the step).
        verified.explain_replaced(batch, false);
        if !verified.findings.is_empty() {
            for f in &verified.findings {
                tracing::error!(app, batch_id = batch, finding = %f, "batch not compacted");
            }
            if let Access::Locked(_) = access {
                // For attest: a statement must not vouch for a batch found damaged here.
                note_findings(self.ctx, receipt, &verified.findings, "compact").await;
            }
            details.failed_batches.push(batch.clone());
            details.findings.extend(verified.findings);
            return Ok(None);
        }
        if !verified.cold.is_empty() {
            // Its bytes cannot be read now: nothing to hash the members against.
            details.pending_thaw.extend(verified.cold);
            return Ok(None);
        }
        let Some(in_data) = verified.members_digest else {
            // Not reached: a data object read in full without findings has its pairs hashed.
            // Said and counted, never a silent skip.
            tracing::error!(
                app,
                batch_id = batch,
                "the data object's pairs were not hashed; batch not compacted"
            );
            details.failed_batches.push(batch.clone());
            return Ok(None);
        };
        Ok(Some(in_data))
    }
}
