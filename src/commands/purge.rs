//! `purge` — deletes source rows that are exact members of VERIFIED receipts older than the grace
//! period (SPEC §6), receipt by receipt, in primary-key transactions of at most 500 rows, under
//! the same per-app lock as `archive`. A member whose row changed since it was archived is kept
//! and reported. A receipt whose members are all deleted or kept is marked done, so a rerun does
//! no work twice; an interrupted receipt is simply continued.
//!
//! `--reverify` re-reads the batch's objects (as `verify`) right before deleting its rows; a batch
//! that fails is not purged. Members are kept after purging, as the proof of what was archived.

use std::time::{Duration, Instant};

use serde_json::json;

use super::archive::{resolve_apps, Apps};
use super::Env;
use crate::check::Checker;
use crate::db::lock::AppLock;
use crate::db::purge::{PurgeError, PurgeQueries, PURGE_CHUNK};
use crate::db::receipts::{ReceiptQueries, ReceiptScope, StoredReceipt};
use crate::db::{runs, DbError};
use crate::failpoint::FailPoints;
use crate::summary::{app_span, AppReport, Outcome, Summary};
use tracing::Instrument;

#[derive(Debug, Clone)]
pub struct PurgeOptions {
    pub apps: Apps,
    /// Only receipts verified longer ago than this.
    pub grace_ms: i64,
    pub max_rows_per_second: Option<u64>,
    pub max_runtime: Option<Duration>,
    /// Count what would go; delete nothing.
    pub dry_run: bool,
    /// Re-read and check each batch's objects right before deleting its rows.
    pub reverify: bool,
    pub delivered_status: String,
    pub lock_prefix: String,
    /// Times an app is tried again after a transient database error.
    pub db_retries: u32,
    pub failpoints: FailPoints,
}

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Purge(#[from] PurgeError),
    #[error("re-verifying batch {0}: {1}")]
    Store(String, crate::store::StoreError),
}

#[derive(Default)]
struct Tally {
    purged: u64,
    would_purge: u64,
    kept: Vec<String>,
    failed_batches: Vec<String>,
    done_batches: u64,
    stop_reason: Option<&'static str>,
}

pub async fn run(env: &Env, opts: &PurgeOptions) -> Summary {
    let before = env.store_stats();
    let mut summary = Summary::new("purge");
    summary.table = Some(env.spec.name.to_string());
    summary.dry_run = Some(opts.dry_run);
    let receipts = ReceiptQueries::new(env.spec);
    let apps = match &opts.apps {
        Apps::Listed(list) => resolve_apps(env, &Apps::Listed(list.clone())).await,
        Apps::All => receipts.apps_with_unpurged(&env.db.pool).await,
        Apps::Shard(shard) => receipts
            .apps_with_unpurged(&env.db.pool)
            .await
            .map(|apps| apps.into_iter().filter(|app| shard.contains(app)).collect()),
    };
    let apps = match apps {
        Ok(apps) => apps,
        Err(e) => {
            return Summary {
                error: Some(e.to_string()),
                ..summary
            }
            .settle()
        }
    };
    let started = Instant::now();
    let deadline = opts.max_runtime.map(|d| started + d);
    let purger = Purger {
        env,
        opts,
        receipts,
        purge: PurgeQueries::new(env.spec),
        deadline,
        started,
        throttle_rows: std::sync::atomic::AtomicU64::new(0),
    };
    for app in apps {
        let started_at_ms = (env.now_ms)();
        let report = env
            .with_db_retries(&app, opts.db_retries, deadline, || purger.app(&app))
            .instrument(app_span(&app))
            .await;
        if !opts.dry_run && report.outcome != Outcome::SkippedLocked {
            runs::note(
                &env.db.pool,
                env.spec,
                "purge",
                &report,
                started_at_ms,
                (env.now_ms)(),
            )
            .await;
        }
        summary.apps.push(report);
    }
    summary.store_requests = env.store_activity(&before);
    summary.settle()
}

struct Purger<'a> {
    env: &'a Env,
    opts: &'a PurgeOptions,
    receipts: ReceiptQueries,
    purge: PurgeQueries,
    deadline: Option<Instant>,
    started: Instant,
    /// Rows deleted so far in this run, for `--max-rows-per-second`.
    throttle_rows: std::sync::atomic::AtomicU64,
}

impl Purger<'_> {
    async fn app(&self, app: &str) -> AppReport {
        let (mut report, lock) = match self
            .env
            .enter_app(
                &self.opts.lock_prefix,
                app,
                self.opts.dry_run,
                AppReport::new(app, Outcome::Done),
            )
            .await
        {
            Ok(entered) => entered,
            Err(report) => return report,
        };
        let mut tally = Tally::default();
        let result = self.purge_app(app, lock.as_ref(), &mut tally).await;
        if let Some(lock) = lock {
            lock.release().await;
        }
        report.batches = tally.done_batches;
        report.rows = tally.purged;
        match result {
            Ok(()) if !tally.failed_batches.is_empty() => {
                report.outcome = Outcome::Failed;
                report.error = Some(format!(
                    "{} batch(es) failed re-verification and were not purged",
                    tally.failed_batches.len()
                ));
            }
            Ok(()) if tally.stop_reason.is_some() => {
                report.outcome = Outcome::Stopped;
                report.stop_reason = tally.stop_reason.map(str::to_string);
            }
            Ok(()) => {}
            Err(e) => {
                tracing::error!(app, error = %e, "purge failed");
                report.outcome = Outcome::Failed;
                report.error = Some(e.to_string());
                // A lost lock too: another attempt takes it anew at the gate, or skips.
                report.transient = match &e {
                    AppError::Db(e) | AppError::Purge(PurgeError::Db(e)) => e.is_transient(),
                    AppError::Purge(PurgeError::LockLost { .. }) => true,
                    _ => false,
                };
            }
        }
        let mut details = serde_json::Map::new();
        details.insert("purged_rows".into(), json!(tally.purged));
        if self.opts.dry_run {
            details.insert("would_purge_rows".into(), json!(tally.would_purge));
        }
        details.insert("kept_changed".into(), json!(tally.kept));
        details.insert("failed_batches".into(), json!(tally.failed_batches));
        report.details = Some(details);
        report
    }

    async fn purge_app(
        &self,
        app: &str,
        lock: Option<&AppLock>,
        tally: &mut Tally,
    ) -> Result<(), AppError> {
        let env = self.env;
        let pool = &env.db.pool;
        let scope = ReceiptScope {
            apps: vec![app.to_string()],
            unpurged_verified_before: Some((env.now_ms)() - self.opts.grace_ms),
            ..ReceiptScope::default()
        };
        let receipts = self.receipts.list(pool, &scope).await?;
        for receipt in receipts {
            if let Some(reason) = self.env.stop_reason(self.deadline) {
                tally.stop_reason = Some(reason);
                return Ok(());
            }
            if self.opts.reverify && !self.reverify(&receipt).await? {
                tracing::error!(
                    app,
                    batch_id = receipt.batch_id,
                    "re-verification failed; batch not purged"
                );
                tally.failed_batches.push(receipt.batch_id.clone());
                continue;
            }
            let members = self
                .receipts
                .members_of(pool, app, &receipt.batch_id)
                .await?;
            let Some(lock) = lock else {
                for chunk in members.chunks(PURGE_CHUNK) {
                    tally.would_purge += self
                        .purge
                        .count(pool, app, &self.opts.delivered_status, chunk)
                        .await?;
                }
                continue;
            };
            let mut kept = Vec::new();
            for chunk in members.chunks(PURGE_CHUNK) {
                let done = self
                    .purge
                    .purge_chunk(
                        pool,
                        app,
                        &self.opts.delivered_status,
                        &receipt.batch_id,
                        chunk,
                        lock,
                        &self.opts.failpoints,
                    )
                    .await?;
                tally.purged += done.purged;
                kept.extend(done.kept);
                self.throttle(done.purged).await;
                if let Some(reason) = self.env.stop_reason(self.deadline) {
                    // The receipt stays unfinished; the next run continues it.
                    tally.stop_reason = Some(reason);
                    tally.kept.extend(kept);
                    return Ok(());
                }
            }
            self.purge
                .finish(
                    pool,
                    app,
                    &receipt.batch_id,
                    kept.len() as u64,
                    (env.now_ms)(),
                )
                .await?;
            if !kept.is_empty() {
                tracing::warn!(
                    app,
                    batch_id = receipt.batch_id,
                    kept = kept.len(),
                    "members changed since archiving were kept"
                );
            }
            tally.kept.extend(kept);
            tally.done_batches += 1;
        }
        Ok(())
    }

    async fn reverify(&self, receipt: &StoredReceipt) -> Result<bool, AppError> {
        let members = self
            .receipts
            .members_of(&self.env.db.pool, &receipt.app_code, &receipt.batch_id)
            .await?;
        let checker = Checker {
            store: self.env.store.as_ref(),
            spec: self.env.spec,
            metadata_only: false,
        };
        let findings = checker
            .check(receipt, &members)
            .await
            .map_err(|e| AppError::Store(receipt.batch_id.clone(), e))?;
        for f in &findings {
            tracing::error!(batch_id = receipt.batch_id, kind = ?f.kind, key = ?f.key, "re-verification finding");
        }
        Ok(findings.is_empty())
    }

    /// Sleeps as long as it takes to keep the run at `--max-rows-per-second`.
    async fn throttle(&self, rows: u64) {
        let Some(limit) = self.opts.max_rows_per_second.filter(|&l| l > 0) else {
            return;
        };
        let total = self
            .throttle_rows
            .fetch_add(rows, std::sync::atomic::Ordering::Relaxed)
            + rows;
        let due = Duration::from_secs_f64(total as f64 / limit as f64);
        if let Some(wait) = due.checked_sub(self.started.elapsed()) {
            tokio::time::sleep(wait).await;
        }
    }
}
