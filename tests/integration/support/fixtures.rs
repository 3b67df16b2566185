//! What tests build runs from: rows, datasets, run contexts at a fixed clock, and each
//! command's options with the test's defaults. Column positions come from the table description.

use std::sync::Arc;

use outbox_archiver::testing::FailPoints;
use outbox_archiver::Apps;
use outbox_archiver::Finding;
use outbox_archiver::ObjectStore;
use outbox_archiver::Row;
use outbox_archiver::RunContext;
use outbox_archiver::{archive, archive::ArchiveOptions};
use outbox_archiver::{purge, purge::PurgeOptions};
use outbox_archiver::{AppDetails, AppReport, RunDetails, Summary};
use outbox_archiver::{ArchiveApp, PurgeApp, RestoreApp, StatusApp, VerifyRun};
use tokio_util::sync::CancellationToken;

use super::{row, TestDb, TestS3};

pub fn env(db: &TestDb, store: Arc<dyn ObjectStore>, now_ms: i64) -> RunContext {
    RunContext::new(
        db.spec,
        db.db.clone(),
        store,
        CancellationToken::new(),
        Arc::new(move || now_ms),
    )
}

/// The database side of a run (what `status` works with), at a fixed clock.
pub fn db_context(db: &TestDb, now_ms: i64) -> outbox_archiver::DbContext {
    outbox_archiver::DbContext::new(
        db.spec,
        db.db.clone(),
        CancellationToken::new(),
        Arc::new(move || now_ms),
    )
}

/// Archive of `apps` below `cutoff_ms` in batches of 1,000 rows, under the test's lock prefix.
pub fn options(db: &TestDb, apps: &[&str], cutoff_ms: i64) -> ArchiveOptions {
    let apps = Apps::Listed(apps.iter().map(|s| s.to_string()).collect());
    let mut options = ArchiveOptions::new(apps, cutoff_ms);
    options.limits.max_rows = 1_000;
    options.lock_prefix = db.lock_prefix();
    options
}

pub async fn archive(env: &RunContext, opts: &ArchiveOptions) -> Summary {
    archive::run(env, opts).await
}

/// `n` delivered rows of `app`, `e0`…, one millisecond apart from T0.
pub fn rows(app: &str, n: i64) -> Vec<Row> {
    (0..n).map(|i| row(app, &format!("e{i}"), T0 + i)).collect()
}

/// `n` delivered rows of `app`, `e000`…, `step_ms` apart from T0.
pub fn spaced_rows(app: &str, n: i64, step_ms: i64) -> Vec<Row> {
    (0..n)
        .map(|i| row(app, &format!("e{i:03}"), T0 + i * step_ms))
        .collect()
}

/// A database and a bucket of their own, and the store.
pub async fn fixture() -> (TestDb, TestS3, Arc<dyn ObjectStore>) {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    (db, s3, store)
}

pub const DAY: i64 = 86_400_000;
/// 2026-01-01T00:00:00Z
pub const T0: i64 = 1_767_225_600_000;

/// The cutoff [`archived_env`] archives below.
pub const ARCHIVED_CUTOFF: i64 = T0 + 3 * DAY;

/// A database holding `rows`, archived below [`ARCHIVED_CUTOFF`] for `apps` in batches of
/// `max_rows`, and a run context a day after the cutoff.
pub async fn archived_env(
    rows: &[Row],
    apps: &[&str],
    max_rows: u64,
) -> (TestDb, TestS3, Arc<dyn ObjectStore>, RunContext) {
    let (db, s3, store) = fixture().await;
    db.insert(rows).await;
    let env = env(&db, store.clone(), ARCHIVED_CUTOFF + DAY);
    let mut opts = options(&db, apps, ARCHIVED_CUTOFF);
    opts.limits.max_rows = max_rows;
    assert!(archive(&env, &opts).await.ok);
    (db, s3, store, env)
}

/// Purge of `apps` with no grace, checking each batch's objects by HEAD.
pub fn purge_options(db: &TestDb, apps: &[&str]) -> PurgeOptions {
    PurgeOptions {
        apps: Apps::Listed(apps.iter().map(|a| a.to_string()).collect()),
        grace_ms: 0,
        max_rows_per_second: None,
        max_runtime: None,
        dry_run: false,
        objects: purge::ObjectCheck::Head,
        include_restored: false,
        delivered_status: "DELIVERED".into(),
        lock_prefix: db.lock_prefix(),
        db_retries: 5,
        parallel_apps: 1,
        failpoints: FailPoints::default(),
    }
}

/// The purge figures of `app` in `summary`.
pub fn purge_of<'s>(summary: &'s Summary, app: &str) -> &'s PurgeApp {
    match &report(summary, app).details {
        Some(AppDetails::Purge(details)) => details,
        other => panic!("{app}: no purge figures but {other:?}"),
    }
}

/// The restore figures of `app` in `summary`.
pub fn restore_of<'s>(summary: &'s Summary, app: &str) -> &'s RestoreApp {
    match &report(summary, app).details {
        Some(AppDetails::Restore(details)) => details,
        other => panic!("{app}: no restore figures but {other:?}"),
    }
}

/// The archive figures of `app` in `summary`.
pub fn archive_of<'s>(summary: &'s Summary, app: &str) -> &'s ArchiveApp {
    match &report(summary, app).details {
        Some(AppDetails::Archive(details)) => details,
        other => panic!("{app}: no archive figures but {other:?}"),
    }
}

/// The status figures of `app` in `summary`.
pub fn status_of<'s>(summary: &'s Summary, app: &str) -> &'s StatusApp {
    match &report(summary, app).details {
        Some(AppDetails::Status(details)) => details,
        other => panic!("{app}: no status figures but {other:?}"),
    }
}

/// Verify's run-wide figures: what it checked, found and saw unreferenced.
pub fn verify_run(summary: &Summary) -> &VerifyRun {
    match &summary.details {
        Some(RunDetails::Verify(run)) => run,
        other => panic!("no verify figures but {other:?}"),
    }
}

/// A finding's kind as the JSON summary names it (the word alerts and runbooks use).
pub fn kind(finding: &Finding) -> String {
    match serde_json::to_value(finding.kind).unwrap() {
        serde_json::Value::String(name) => name,
        other => panic!("a finding kind serializes as a string, not {other}"),
    }
}

/// The report of `app` in `summary`.
pub fn report<'s>(summary: &'s Summary, app: &str) -> &'s AppReport {
    summary
        .apps
        .iter()
        .find(|a| a.app_code == app)
        .unwrap_or_else(|| panic!("{app} is not in the summary: {}", summary.to_json()))
}
