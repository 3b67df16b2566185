//! `purge` — deletes source rows that are exact members of VERIFIED receipts older than the grace
//! period (SPEC §6), receipt by receipt, in primary-key transactions of at most 500 rows, under
//! the same per-app lock as `archive`. A member whose row changed since it was archived is kept
//! and reported. A receipt whose members are all deleted or kept is marked done, so a rerun does
//! no work twice; an interrupted receipt is simply continued.
//!
//! Deletion rests on fresh proof (SPEC §5.9): right before deleting any row of a batch, purge looks
//! at the batch's three objects — by HEAD (present, the receipt's sizes, the store's own checksum
//! where it reports one) by default, by a full re-read as `verify` with `--reverify` — and a batch
//! whose objects are gone or different is not purged: it is listed in `failed_batches` with its
//! findings, and the run exits 1. `--trust-receipts` skips the look, loudly. A batch restored into
//! the source is never purged again on its receipt. Members are kept after purging, as the proof
//! of what was archived.

use std::time::{Duration, Instant};

use futures_util::StreamExt;

use serde_json::json;

use super::archive::{resolve_apps, Apps};
use super::Env;
use crate::batch::Member;
use crate::check::{Checker, Finding};
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
    /// How a batch's objects are looked at right before its rows are deleted.
    pub objects: ObjectCheck,
    /// Purge batches restored into the source too (their mark is otherwise honoured).
    pub include_restored: bool,
    pub delivered_status: String,
    pub lock_prefix: String,
    /// Times an app is tried again after a transient database error.
    pub db_retries: u32,
    pub failpoints: FailPoints,
}

/// How purge looks at a batch's objects before deleting its rows (SPEC §5.9).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectCheck {
    /// HEAD each of the three objects: present, the receipt's sizes, the store's own checksum
    /// where it reports one. Three requests per batch, not per row.
    #[default]
    Head,
    /// Re-read and verify every object in full (as `verify`): `--reverify`.
    Read,
    /// Do not look: the receipts are trusted (`--trust-receipts`, for operators who scrub the
    /// archive separately). Logged at the start of every run.
    Trusted,
}

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Purge(#[from] PurgeError),
    #[error("checking the objects of batch {0} before purging it: {1}")]
    Store(String, crate::store::StoreError),
}

#[derive(Default)]
struct Tally {
    purged: u64,
    would_purge: u64,
    kept: Vec<String>,
    failed_batches: Vec<String>,
    findings: Vec<Finding>,
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
        Apps::All => {
            receipts
                .apps_with_unpurged(&env.db.pool, opts.include_restored)
                .await
        }
        Apps::Shard(shard) => receipts
            .apps_with_unpurged(&env.db.pool, opts.include_restored)
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
    let mut details = serde_json::Map::new();
    details.insert("object_check".into(), json!(opts.objects));
    summary.details = Some(details);
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
                    "{} batch(es) not purged: their objects in the store, or their member rows, disagree with the receipt (see findings; run `outbox-archiver verify --app {app}`)",
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
                report.lost_lock = matches!(e, AppError::Purge(PurgeError::LockLost { .. }));
            }
        }
        let mut details = serde_json::Map::new();
        details.insert("purged_rows".into(), json!(tally.purged));
        if self.opts.dry_run {
            details.insert("would_purge_rows".into(), json!(tally.would_purge));
        }
        details.insert("kept_changed".into(), json!(tally.kept));
        details.insert("failed_batches".into(), json!(tally.failed_batches));
        details.insert("findings".into(), json!(tally.findings));
        match self
            .receipts
            .restored_unpurged(&self.env.db.pool, app)
            .await
        {
            Ok(n) => {
                details.insert("restored_batches_left".into(), json!(n));
            }
            Err(e) => tracing::warn!(app, error = %e, "could not count restored batches"),
        }
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
            include_restored: self.opts.include_restored,
            ..ReceiptScope::default()
        };
        let receipts = self.receipts.stream(pool, scope);
        futures_util::pin_mut!(receipts);
        while let Some(receipt) = receipts.next().await {
            let receipt = receipt?;
            if let Some(reason) = self.env.stop_reason(self.deadline) {
                tally.stop_reason = Some(reason);
                return Ok(());
            }
            let members = self
                .receipts
                .members_of(pool, app, &receipt.batch_id)
                .await?;
            let findings = self.look_at_objects(&receipt, &members).await?;
            if !findings.is_empty() {
                for f in &findings {
                    tracing::error!(
                        app,
                        batch_id = receipt.batch_id,
                        kind = ?f.kind,
                        key = f.key.as_deref().unwrap_or_default(),
                        expected = f.expected.as_deref().unwrap_or_default(),
                        actual = f.actual.as_deref().unwrap_or_default(),
                        "the batch's objects are not what its receipt says; batch not purged"
                    );
                }
                tally.failed_batches.push(receipt.batch_id.clone());
                tally.findings.extend(findings);
                continue;
            }
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
            let mut restored = false;
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
                        self.opts.include_restored,
                        &self.opts.failpoints,
                    )
                    .await?;
                if done.restored {
                    // Restored into the source since this run listed it: leave it.
                    tracing::info!(
                        app,
                        batch_id = receipt.batch_id,
                        "batch restored into the source meanwhile; its rows stay"
                    );
                    restored = true;
                    break;
                }
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
            if restored {
                tally.kept.extend(kept);
                continue;
            }
            self.purge
                .finish(
                    pool,
                    app,
                    &receipt.batch_id,
                    kept.len() as u64,
                    self.opts.include_restored,
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

    /// Looks at a batch's objects as `--reverify` / `--trust-receipts` say; the findings are
    /// why the batch must not be purged (none: go ahead).
    async fn look_at_objects(
        &self,
        receipt: &StoredReceipt,
        members: &[Member],
    ) -> Result<Vec<Finding>, AppError> {
        if self.opts.objects == ObjectCheck::Trusted {
            return Ok(Vec::new());
        }
        // What the batch's data object must hold: its members and any older versions of rows
        // a later batch superseded.
        let mut proven = members.to_vec();
        proven.extend(
            self.receipts
                .superseded_of(&self.env.db.pool, &receipt.app_code, &receipt.batch_id)
                .await?,
        );
        let checker = Checker {
            store: self.env.store.as_ref(),
            spec: self.env.spec,
            metadata_only: self.opts.objects == ObjectCheck::Head,
        };
        checker
            .check(receipt, &proven)
            .await
            .map_err(|e| AppError::Store(receipt.batch_id.clone(), e))
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
