//! `recover` (SPEC §5.19; README, `recover`): a database restored
//! from a backup has lost the receipts of the batches archived since, and the source holds again
//! the rows purged since. Under each app's lock, its log in the store is walked past the leaves
//! the database knows ([`log::Recovery`]); every batch the database has no receipt of is found in
//! the store, read in full and held to its leaf — its data object's lines give its content, its
//! members and its manifest, whose hash must be the one the leaf binds — then recorded again with
//! its members (the receipt transaction's checks, as archive's: no event in two batches) and
//! given its leaf. A batch none of whose rows the source holds any more is marked purged in the
//! same step purge marks one (each row looked for with a lock that does not wait); the rest purge
//! deletes as it deletes any batch's. The reason is kept in the runs table and, write-once, in the
//! store beside the log's breaks.
//!
//! Leaves are recorded in their order, and the first batch that cannot be (not found, a finding,
//! a conflict) stops the app: a later leaf recorded before it would hide it from the next run.
//! A rerun after any failure, or a kill, goes on where the last one stopped.

use std::collections::{BTreeMap, BTreeSet};

use futures_util::TryStreamExt;

use super::apps::{self, Access, AppWork, Apps, Driver, Gate, Population};
use super::command::Command;
use super::failure::{Classify, Kind};
use super::log::{self, LogError, Lost, Recovery};
use super::verifier::{read_data, ColdObjects, Depth, Expected, Verifier};
use super::{Observer, RunContext};
use crate::db::purge::{Finished, PurgeError, PurgeQueries};
use crate::db::record::{Cut, RecordError, Recorder};
use crate::db::DbError;
use crate::failpoint::FailPoints;
use crate::model::command::CommandName;
use crate::model::format::{self, Key};
use crate::model::protection::PutOptions;
use crate::model::timespec;
use crate::pipeline::report::details::RecoverApp;
use crate::pipeline::report::{AppDetails, AppReport, Outcome, Summary, Unfinished};
use crate::store::StoreError;

#[derive(Debug, Clone)]
pub struct RecoverOptions {
    pub apps: Apps,
    /// Why: kept with the run and in the store's record of the recovery.
    pub reason: String,
    pub lock_prefix: String,
    pub db_retries: u32,
    pub failpoints: FailPoints,
}

impl RecoverOptions {
    pub fn new(apps: Apps, reason: &str) -> RecoverOptions {
        RecoverOptions {
            apps,
            reason: reason.to_string(),
            lock_prefix: String::new(),
            db_retries: 5,
            failpoints: FailPoints::default(),
        }
    }
}

#[async_trait::async_trait]
impl Command for RecoverOptions {
    const NAME: CommandName = CommandName::Recover;
    type Context = RunContext;
    fn apps(&self) -> Option<&Apps> {
        Some(&self.apps)
    }
    fn writes(&self) -> bool {
        true
    }
    async fn run(&self, ctx: &RunContext, observer: &dyn Observer) -> Summary {
        run(ctx, self, observer).await
    }
}

/// `recover` — every app listed (or, `--all-apps`, every app with rows, receipts or a log in the
/// store) under its lock, through the driver.
pub(crate) async fn run(
    ctx: &RunContext,
    opts: &RecoverOptions,
    observer: &dyn Observer,
) -> Summary {
    let before = ctx.store_stats();
    let mut summary = Summary::new(CommandName::Recover);
    summary.table = Some(ctx.spec.name.to_string());
    summary.store = Some(ctx.store.location().to_string());
    if opts.reason.trim().is_empty() {
        return Summary::unusable(
            CommandName::Recover,
            "recover needs --reason TEXT: why the database is carried on from the store (kept with the run and in the store's record of it)".into(),
        );
    }
    let mut apps = match apps::resolve(ctx, &opts.apps, &Population::SourceAndReceipts).await {
        Ok(apps) => apps,
        Err(e) => return summary.without_apps(e),
    };
    if matches!(opts.apps, Apps::All) {
        // Apps the database lost every trace of but their log.
        match log::logged_apps(ctx, &apps).await {
            Ok(more) => apps.extend(more),
            Err(e) => return summary.without_apps(e),
        }
    }
    let gate = Gate::Lock {
        prefix: &opts.lock_prefix,
        dry_run: false,
    };
    let driver = Driver::new(ctx, CommandName::Recover, gate)
        .retries(opts.db_retries)
        .noting_runs();
    let recoverer = Recoverer {
        ctx,
        opts,
        observer,
        recorder: Recorder::new(&ctx.db.pool, ctx.spec),
        purge: PurgeQueries::new(&ctx.db.pool, ctx.spec),
    };
    summary.apps = driver.run(apps, &recoverer).await;
    summary.store_requests = ctx.store_activity(&before);
    summary.settle()
}

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error(transparent)]
    Purge(#[from] PurgeError),
    #[error("reading batch {0} in the store: {1}")]
    Store(String, StoreError),
    /// The batch a leaf names cannot be recorded from the store's bytes.
    #[error("batch {batch_id} (leaf {index} of the log): {why}; nothing of it or of the leaves after it is recorded — once the objects are back (`outbox-archiver verify` names what is missing), run recover again")]
    Unrecoverable {
        batch_id: String,
        index: u64,
        why: String,
    },
}

impl Classify for AppError {
    fn kind(&self) -> Kind {
        match self {
            AppError::Db(e) => e.kind(),
            AppError::Log(e) => e.kind(),
            AppError::Record(e) => e.kind(),
            AppError::Purge(e) => e.kind(),
            AppError::Store(_, e) => e.kind(),
            AppError::Unrecoverable { .. } => Kind::Fatal,
        }
    }
}

impl From<crate::failpoint::Tripped> for AppError {
    fn from(t: crate::failpoint::Tripped) -> AppError {
        AppError::Db(DbError::Failpoint(t))
    }
}

struct Recoverer<'a> {
    ctx: &'a RunContext,
    opts: &'a RecoverOptions,
    observer: &'a dyn Observer,
    recorder: Recorder,
    purge: PurgeQueries,
}

#[async_trait::async_trait]
impl AppWork for Recoverer<'_> {
    fn start(&self, app: &str) -> AppReport {
        AppReport::new(app, Outcome::Done)
    }

    async fn work(&self, app: &str, access: Access<'_>, mut report: AppReport) -> AppReport {
        let mut details = RecoverApp::default();
        let result = match access {
            Access::Locked(lock) => self.recover(app, lock, &mut report, &mut details).await,
            // The gate always locks (no dry run): a run without the lock writes nothing.
            Access::DryRun | Access::Reading => Ok(()),
        };
        report.end("recovery", result, Unfinished::default());
        report.details = Some(AppDetails::Recover(details));
        report
    }
}

impl Recoverer<'_> {
    async fn recover(
        &self,
        app: &str,
        lock: &crate::db::lock::AppLock,
        report: &mut AppReport,
        details: &mut RecoverApp,
    ) -> Result<(), AppError> {
        let Some(recovery) = Recovery::begin(self.ctx, app).await? else {
            tracing::info!(app, "no log in the store: nothing to recover");
            return Ok(());
        };
        details.taken_leaves = recovery.taken;
        if recovery.lost.is_empty() {
            tracing::info!(
                app,
                "the database knows every batch of the log: nothing to recover"
            );
            recovery
                .finish(&[], &self.opts.reason, &PutOptions::default())
                .await?;
            return Ok(());
        }
        tracing::warn!(
            app,
            batches = recovery.lost.len(),
            first_leaf = recovery.lost[0].index,
            reason = self.opts.reason.as_str(),
            "the store's log holds batches the database has no receipt of: recording them again from the store"
        );
        self.observer
            .start(app, "batches", Some(recovery.lost.len() as u64));
        let keys = self.data_keys(app, &recovery.lost).await?;
        let mut recovered = Vec::new();
        let mut outcome = Ok(());
        for lost in &recovery.lost {
            match self
                .recover_batch(app, lock, &recovery, lost, &keys, details)
                .await
            {
                Ok(rows) => {
                    recovered.push(lost.clone());
                    report.batches += 1;
                    report.rows += rows;
                    self.observer.advance(app, 1, "");
                }
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        self.observer.finish(app);
        // What was recorded is kept in the store, whatever stopped the rest.
        details.recovery_record = recovery
            .finish(&recovered, &self.opts.reason, &PutOptions::default())
            .await?;
        outcome
    }

    /// The data object keys of the lost batches, by batch id: the days from the database's
    /// cursor to today listed one by one (a backup's age of them: the batches cut after its
    /// cursor), then — for batches not there (stragglers, a cursor older than the walk) — the
    /// app's whole folder, page by page.
    async fn data_keys(&self, app: &str, lost: &[Lost]) -> Result<BTreeMap<String, Key>, AppError> {
        const MAX_DAYS: i64 = 400;
        let ctx = self.ctx;
        let mut wanted: BTreeSet<&str> = lost.iter().map(|l| l.batch_id.as_str()).collect();
        let mut found = BTreeMap::new();
        let table = format::table_prefix(ctx.store.location().prefix(), ctx.spec.name);
        let folder = format::app_prefix(&table, app);
        let listing = |e| AppError::Store(lost[0].batch_id.clone(), e);
        let mut take = |keys: Vec<Key>, wanted: &mut BTreeSet<&str>| {
            for key in keys {
                let Some(batch) = key
                    .as_str()
                    .strip_suffix("/data.ndjson.gz")
                    .and_then(|k| k.rsplit('/').next())
                else {
                    continue;
                };
                if wanted.remove(batch) {
                    found.insert(batch.to_string(), key);
                }
            }
        };
        let from = match ctx.tables.receipts.latest_cursor(app).await? {
            Some(cursor) => timespec::utc_day(cursor.updated_at_ms),
            None => timespec::utc_day(ctx.now()) - MAX_DAYS,
        };
        let today = timespec::utc_day(ctx.now());
        let mut day = from.max(today - MAX_DAYS);
        while day <= today && !wanted.is_empty() {
            let date = timespec::utc_date(day * 86_400_000);
            let keys = ctx
                .store
                .list(&folder.folder(&format!("dt={date}")))
                .await
                .map_err(listing)?;
            take(keys, &mut wanted);
            day += 1;
        }
        if !wanted.is_empty() {
            let mut pages = ctx.store.list_pages(&folder);
            while let Some(page) = pages.try_next().await.map_err(listing)? {
                take(page, &mut wanted);
                if wanted.is_empty() {
                    break;
                }
            }
        }
        Ok(found)
    }

    /// One lost batch: its data object read in full, held to its leaf, its three objects
    /// verified as archive's read-back verifies them, recorded with its members, given its leaf;
    /// marked purged if none of its rows is in the source. Returns its rows.
    async fn recover_batch(
        &self,
        app: &str,
        lock: &crate::db::lock::AppLock,
        recovery: &Recovery<'_>,
        lost: &Lost,
        keys: &BTreeMap<String, Key>,
        details: &mut RecoverApp,
    ) -> Result<u64, AppError> {
        let ctx = self.ctx;
        let unrecoverable = |why: String| AppError::Unrecoverable {
            batch_id: lost.batch_id.clone(),
            index: lost.index,
            why,
        };
        let Some(key) = keys.get(&lost.batch_id) else {
            return Err(unrecoverable(format!(
                "its data object is not in the store under {}app_code={app}/",
                format::table_prefix(ctx.store.location().prefix(), ctx.spec.name)
            )));
        };
        let store_error = |e| AppError::Store(lost.batch_id.clone(), e);
        // The columns its manifest names (none: a manifest written before the list): the batch
        // is read by them, whatever the table became; the leaf's hash holds them below.
        let manifest_key = Key::stored(key.as_str().replace("data.ndjson.gz", "manifest.json"));
        let manifest = crate::store::get_all(ctx.store.as_ref(), &manifest_key)
            .await
            .map_err(store_error)?
            .ok_or_else(|| unrecoverable(format!("{manifest_key} is gone from the store")))?;
        let columns = format::manifest_columns(&manifest)
            .map_err(|e| unrecoverable(format!("{manifest_key}: {e}")))?
            .map(std::sync::Arc::new);
        let spec = match &columns {
            Some(c) => c.spec(ctx.spec).map_err(&unrecoverable)?,
            None => ctx.spec,
        };
        let read = read_data(ctx.store.as_ref(), spec, app, key, None)
            .await
            .map_err(store_error)?
            .ok_or_else(|| unrecoverable(format!("{key} is gone from the store")))?;
        let (content, members) = read
            .content
            .map_err(|e| unrecoverable(format!("{key} is not a data object of this table: {e}")))?;
        let prefix = ctx.store.location().prefix();
        let expected = Expected::of_content(
            prefix,
            ctx.spec,
            app,
            &content,
            &members,
            &read.digest,
            columns.as_ref(),
        );
        // The batch the leaf names, and the manifest it binds: nothing else is recorded for it.
        if expected.receipt.batch_id != lost.batch_id || expected.receipt.keys.data != *key {
            return Err(unrecoverable(format!(
                "{key} holds the rows of batch {}, not of the batch its folder names",
                expected.receipt.batch_id
            )));
        }
        if expected.manifest.digest.sha256 != lost.manifest_sha256 {
            return Err(unrecoverable(format!(
                "its rows imply a manifest hashing to {}, the log binds {}",
                expected.manifest.digest.sha256, lost.manifest_sha256
            )));
        }
        let verifier = Verifier {
            store: ctx.store.as_ref(),
            spec: ctx.spec,
            depth: Depth::Read,
            cold: ColdObjects::Metadata,
        };
        let verified = verifier.verify(&expected).await.map_err(store_error)?;
        if let Some(first) = verified.findings.first() {
            return Err(unrecoverable(format!(
                "its objects are not the ones its leaf binds ({} finding(s), the first: {first})",
                verified.findings.len()
            )));
        }
        if let Some(cold) = verified.cold.first() {
            return Err(unrecoverable(format!(
                "{} is in storage class {} and cannot be read at once: restore it (`aws s3api restore-object`), then run recover again",
                cold.key, cold.storage_class
            )));
        }
        let protection = verified.protection();
        let mut receipt = expected.receipt;
        receipt.objects.data_crc64nvme = Some(verified.data_crc64nvme.unwrap_or_default());
        receipt.objects.stored = verified.stored;
        receipt.protection = protection;
        let receipt = receipt.recorded(&members, ctx.now());
        let failpoints = &self.opts.failpoints;
        self.recorder
            .record(&receipt, &members, Cut::AfterCursor, lock, failpoints)
            .await?;
        failpoints.pass("recover-after-record")?;
        recovery.recorded(lost).await?;
        failpoints.pass("recover-after-leaf")?;
        // Rows the source does not hold any more (purged before the backup was taken, or never
        // in it): a batch with none left is purged already.
        let ids: Vec<&str> = members.iter().map(|m| m.event_id.as_str()).collect();
        let rows = members.len() as u64;
        let finished = self
            .purge
            .finish_counting(app, &lost.batch_id, &ids, 0, false, ctx.now(), rows)
            .await?;
        if finished == Finished::Done {
            details.already_purged_batches += 1;
        }
        details.recovered_batches += 1;
        details.recovered_rows += rows;
        tracing::info!(
            app,
            batch_id = lost.batch_id,
            leaf = lost.index,
            rows,
            purged_already = finished == Finished::Done,
            folder = recovery.folder(),
            "batch recorded again from the store"
        );
        Ok(rows)
    }
}
