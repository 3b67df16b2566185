//! The subcommands. Each module has an options struct and one `run` that returns the
//! [`crate::summary::Summary`] to print. [`Env`] is what they share: the table, the database, the
//! store, the clock and the shutdown signal — all passed in, never reached for.

pub mod archive;
pub mod demo;
pub mod migrate;
pub mod purge;
pub mod restore;
pub mod status;
pub mod verify;

use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::appcode;
use crate::db::lock::{lock_name, AppLock};
use crate::db::Db;
use crate::store::{ObjectStore, StoreStats};
use crate::summary::{AppReport, Outcome};
use crate::table::TableSpec;

/// Milliseconds since the Unix epoch, from whatever clock the caller chose.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The wall clock.
pub fn system_clock() -> Clock {
    Arc::new(|| chrono::Utc::now().timestamp_millis())
}

/// The stop reason of an app whose lock another process took while it was being worked.
pub const LOST_LOCK: &str = "lost the lock to another archiver";

/// What every command that touches the archive works with.
#[derive(Clone)]
pub struct Env {
    pub spec: &'static TableSpec,
    pub db: Db,
    pub store: Arc<dyn ObjectStore>,
    /// Cancelled on SIGTERM/SIGINT; loops check it between batches.
    pub shutdown: CancellationToken,
    pub now_ms: Clock,
}

impl Env {
    /// The store's request counters now; [`Env::store_activity`] turns them into a run's share.
    pub fn store_stats(&self) -> StoreStats {
        self.store.stats().unwrap_or_default()
    }

    /// What the store's requests went through since `before`, for the summary (S3 stores only).
    pub fn store_activity(&self, before: &StoreStats) -> Option<StoreStats> {
        self.store.stats().map(|now| now.since(before))
    }

    /// Whether a loop over batches (or chunks) must stop now: shutdown, or the run's deadline.
    pub fn stop_reason(&self, deadline: Option<Instant>) -> Option<&'static str> {
        if self.shutdown.is_cancelled() {
            Some("shutdown requested (SIGTERM)")
        } else if deadline.is_some_and(|d| Instant::now() >= d) {
            Some("--max-runtime reached")
        } else {
            None
        }
    }

    /// The gate every app passes before a command writes for it: a safe app code, then (unless
    /// `dry_run`, which writes nothing) the app's advisory lock — the one `archive` and `purge`
    /// share. `Err` is the finished report of an app that must not go on (refused, skipped
    /// because another process holds the lock, or failed to ask).
    pub async fn enter_app(
        &self,
        lock_prefix: &str,
        app: &str,
        dry_run: bool,
        mut report: AppReport,
    ) -> Result<(AppReport, Option<AppLock>), AppReport> {
        if let Err(reason) = appcode::validate(app) {
            tracing::error!(app, "{reason}");
            report.outcome = Outcome::Refused;
            report.error = Some(reason);
            return Err(report);
        }
        if dry_run {
            return Ok((report, None));
        }
        let name = lock_name(lock_prefix, self.spec.name, app);
        match AppLock::try_acquire(&self.db, &name).await {
            Ok(Some(lock)) => Ok((report, Some(lock))),
            Ok(None) => {
                tracing::info!(
                    app,
                    lock = name,
                    "another process holds this app's lock; skipped"
                );
                report.outcome = Outcome::SkippedLocked;
                Err(report)
            }
            Err(e) => {
                report.outcome = Outcome::Failed;
                report.error = Some(e.to_string());
                report.transient = e.is_transient();
                Err(report)
            }
        }
    }

    /// Runs one app's work (`attempt`), and runs it again after a backoff (1 s, 2 s, 4 s, …)
    /// while it fails on a transient database error — a restart, a failover, a killed
    /// connection — at most `retries` times, never past shutdown or the deadline. Each attempt
    /// starts at the gate (safe code, lock) and resumes from the receipts, so nothing is done
    /// twice; the report adds the attempts up and counts the retries.
    pub async fn with_db_retries<F, Fut>(
        &self,
        app: &str,
        retries: u32,
        deadline: Option<Instant>,
        attempt: F,
    ) -> AppReport
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = AppReport>,
    {
        let mut report = attempt().await;
        let mut done = 0;
        while report.transient && done < retries && self.stop_reason(deadline).is_none() {
            let wait = std::time::Duration::from_secs(1 << done.min(5));
            tracing::warn!(
                app,
                retry = done + 1,
                of = retries,
                wait_s = wait.as_secs(),
                error = report.error.as_deref().unwrap_or_default(),
                "transient database error: trying the app again"
            );
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.shutdown.cancelled() => break,
            }
            done += 1;
            let lost_lock = report.lost_lock;
            report = report.then(attempt().await);
            if lost_lock && report.outcome == Outcome::SkippedLocked {
                // Not a skip: this run worked the app until another process took its lock.
                tracing::warn!(app, "the app's lock was lost to another process; stopping");
                report.outcome = Outcome::Stopped;
                report.stop_reason = Some(LOST_LOCK.to_string());
            }
        }
        report.retries = done;
        report
    }
}
