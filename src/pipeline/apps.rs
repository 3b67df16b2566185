//! Which apps a run works on, and the one driver every command runs them through.
//!
//! The driver takes each app through the gate — a safe app code where the command writes, the
//! app's advisory lock (the one `archive`, `purge` and `restore --into-source` share) unless it
//! is a dry run — runs the command's work, tries the app again after a transient database error
//! (with exponential backoff and jitter, so sixteen shards do not retry in step after a
//! failover), notes the run for `status`, and returns one report per app.
//!
//! A run that cannot tell which apps to work on (the list cannot be read) does nothing: every
//! command reports that as exit 2, like a configuration it could not use.

use crate::model::command::CommandName;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use tracing::Instrument;

use super::failure::Kind;
use super::DbContext;
use crate::db::lock::{database_lock_name, lock_name, AppLock};
use crate::db::receipts::ReceiptScope;
use crate::db::{runs, DbError};
use crate::model::appcode;
use crate::model::shard::Shard;
use crate::pipeline::report::{app_span, run_id, AppReport, Ending, Outcome, Stop};

/// Which apps a command works on.
#[derive(Debug, Clone)]
pub enum Apps {
    Listed(Vec<String>),
    All,
    /// Every app whose hash falls in this shard (`--all-apps --shard I/N`).
    Shard(Shard),
}

/// Which receipts a command that reads the archive works on (`verify`, `restore`): apps
/// (`--app`, `--all-apps`, `--shard`), `--batch-id`, and `--from`/`--to`.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// `None` or `All`: every app.
    pub apps: Option<Apps>,
    /// Empty: every batch.
    pub batch_ids: Vec<String>,
    /// Receipts whose rows reach into `[from_ms, to_ms)` of `updated_at_ms`.
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
}

impl Selection {
    /// Every receipt of the listed apps.
    pub fn of_apps(apps: &[&str]) -> Selection {
        Selection {
            apps: Some(Apps::Listed(apps.iter().map(|a| a.to_string()).collect())),
            ..Selection::default()
        }
    }

    /// The apps asked for.
    pub fn apps(&self) -> Apps {
        self.apps.clone().unwrap_or(Apps::All)
    }

    /// The receipts in scope (of `app`, when given).
    pub(crate) fn scope(&self, app: Option<&str>) -> ReceiptScope {
        let apps = match (app, &self.apps) {
            (Some(app), _) => vec![app.to_string()],
            (None, Some(Apps::Listed(list))) => list.clone(),
            _ => Vec::new(),
        };
        ReceiptScope {
            apps,
            batch_ids: self.batch_ids.clone(),
            from_ms: self.from_ms,
            to_ms: self.to_ms,
            ..ReceiptScope::default()
        }
    }

    /// Whether the selection is whole apps (no batch ids, no time window).
    pub(crate) fn whole_apps(&self) -> bool {
        self.batch_ids.is_empty() && self.from_ms.is_none() && self.to_ms.is_none()
    }
}

/// Where `--all-apps` finds its apps.
#[derive(Debug, Clone)]
pub(crate) enum Population {
    /// The app codes present in the source table (archive).
    Source,
    /// Apps with receipts purge may still work on (an app whose rows are all gone from the
    /// source may still have receipts to finish).
    Unpurged { include_restored: bool },
    /// Apps with rows or receipts (verify, status).
    SourceAndReceipts,
    /// Apps with receipts in this scope (restore, verify `--batch-id`).
    Receipts(ReceiptScope),
}

impl Selection {
    /// Refuses batch ids that match no receipt (a typo must not be a clean, empty run).
    pub(crate) async fn check_batch_ids(&self, ctx: &DbContext) -> Result<(), DbError> {
        if self.batch_ids.is_empty() {
            return Ok(());
        }
        let unknown = ctx
            .tables
            .receipts
            .unknown_batch_ids(&self.batch_ids)
            .await?;
        if unknown.is_empty() {
            return Ok(());
        }
        Err(DbError::UnknownBatches {
            ids: unknown.join(", "),
            table: ctx.spec.name.to_string(),
        })
    }
}

/// Adds to `apps` the apps that have a log the database's rows and receipts no longer name
/// ([`super::log::logged_apps`]): an app whose receipts and rows are all gone still has its
/// log, which is audited too (every leaf a gap). Keeps the list sorted. `verify` and `attest`
/// of every app.
pub(crate) async fn add_logged(
    ctx: &super::RunContext,
    apps: &mut Vec<String>,
) -> Result<(), String> {
    let more = super::log::logged_apps(ctx, apps)
        .await
        .map_err(|e| format!("listing the apps' logs: {e}"))?;
    apps.extend(more);
    apps.sort();
    Ok(())
}

/// The apps of `apps` (listed ones once each, in the order given).
pub(crate) async fn resolve(
    ctx: &DbContext,
    apps: &Apps,
    population: &Population,
) -> Result<Vec<String>, DbError> {
    let shard = match apps {
        Apps::Listed(list) => {
            // Each typed code becomes the app's own spelling (SPEC §5.4).
            let mut found = Vec::new();
            for typed in list {
                match ctx.tables.canonical_app(typed).await? {
                    Some(app) if !found.contains(&app) => found.push(app),
                    Some(_) => {}
                    None => return Err(unknown_app(ctx, typed).await),
                }
            }
            return Ok(found);
        }
        Apps::All => None,
        Apps::Shard(shard) => Some(*shard),
    };
    let receipts = &ctx.tables.receipts;
    let all = match population {
        Population::Source => ctx.tables.source.all_apps().await?,
        Population::Unpurged { include_restored } => {
            receipts.apps_with_unpurged(*include_restored).await?
        }
        Population::SourceAndReceipts => {
            let mut apps = ctx.tables.source.all_apps().await?;
            apps.extend(receipts.apps_with_receipts().await?);
            apps.sort();
            apps.dedup();
            apps
        }
        Population::Receipts(scope) => receipts.apps_in(scope).await?,
    };
    // One spelling per app: the receipts' where it has any (a dive finds whichever spelling
    // sorts first among rows its collation holds equal).
    let mut canonical = Vec::with_capacity(all.len());
    for found in all {
        let app = ctx.tables.canonical_app(&found).await?.unwrap_or(found);
        if !canonical.contains(&app) {
            canonical.push(app);
        }
    }
    if let Some(shard) = shard {
        canonical.retain(|app| shard.contains(app));
    }
    Ok(canonical)
}

/// The error for a typed app code that matches no app, naming the closest known ones.
pub(crate) async fn unknown_app(ctx: &DbContext, typed: &str) -> DbError {
    let mut known = ctx.tables.source.all_apps().await.unwrap_or_default();
    known.extend(
        ctx.tables
            .receipts
            .apps_with_receipts()
            .await
            .unwrap_or_default(),
    );
    known.sort();
    known.dedup();
    let closest = crate::db::apps::closest(typed, &known);
    DbError::UnknownApp {
        typed: typed.to_string(),
        table: ctx.spec.name.to_string(),
        closest: if closest.is_empty() {
            String::new()
        } else {
            format!(
                "; did you mean {}?",
                closest
                    .iter()
                    .map(|c| format!("{c:?}"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            )
        },
    }
}

/// What must hold before an app is worked.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Gate<'a> {
    /// A safe app code, and the app's lock — unless `dry_run`, which writes nothing.
    Lock { prefix: &'a str, dry_run: bool },
    /// Nothing: the command only reads.
    Open,
}

/// What an app's work may do, as the gate let it in.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Access<'l> {
    /// The app's lock is held: the work may write.
    Locked(&'l AppLock),
    /// A dry run: plan, write nothing.
    DryRun,
    /// A read-only command.
    Reading,
}

/// One command's work for one app.
#[async_trait::async_trait]
pub(crate) trait AppWork: Sync {
    /// The report an app starts from (its outcome when there is nothing to do).
    fn start(&self, app: &str) -> AppReport;

    async fn work(&self, app: &str, access: Access<'_>, report: AppReport) -> AppReport;
}

/// Runs apps through the gate, their work, retries and the runs table.
pub(crate) struct Driver<'a> {
    ctx: &'a DbContext,
    /// The command, as the runs table records it.
    command: CommandName,
    gate: Gate<'a>,
    /// Times an app is tried again after a transient database error.
    db_retries: u32,
    /// No retry starts after it.
    deadline: Option<Instant>,
    /// Record each app's run for `status` (archive, purge; not a dry run, not a skipped app).
    note_runs: bool,
    /// Apps worked at the same time (archive's `--parallel-apps`; 1 elsewhere).
    parallel: usize,
}

impl<'a> Driver<'a> {
    /// A driver for `command` through `gate`: one app at a time, no retry, no deadline, runs not
    /// recorded — each command adds what it does ([`Driver::retries`], …).
    pub(crate) fn new(ctx: &'a DbContext, command: CommandName, gate: Gate<'a>) -> Self {
        Driver {
            ctx,
            command,
            gate,
            db_retries: 0,
            deadline: None,
            note_runs: false,
            parallel: 1,
        }
    }

    pub(crate) fn retries(self, db_retries: u32) -> Self {
        Driver { db_retries, ..self }
    }

    pub(crate) fn until(self, deadline: Option<Instant>) -> Self {
        Driver { deadline, ..self }
    }

    /// Records each app's run in the runs table (what `status` and `history` show).
    pub(crate) fn noting_runs(self) -> Self {
        Driver {
            note_runs: true,
            ..self
        }
    }

    pub(crate) fn parallel(self, parallel: usize) -> Self {
        Driver { parallel, ..self }
    }
}

impl Driver<'_> {
    /// Works the apps, `parallel` at a time (each under its own lock); the reports come back
    /// in the apps' order. Apps whose codes differ only in case (two apps, where the source's
    /// app codes compare case-sensitively) are worked one after the other: MySQL compares lock
    /// names case-insensitively, so at once one would find the other's lock held on every run.
    pub(crate) async fn run(&self, apps: Vec<String>, work: &dyn AppWork) -> Vec<AppReport> {
        let groups = crate::model::appcode::case_groups(&apps);
        let mut apps: Vec<Option<String>> = apps.into_iter().map(Some).collect();
        let groups: Vec<Vec<(usize, String)>> = groups
            .into_iter()
            .map(|group| {
                group
                    .into_iter()
                    .map(|i| (i, apps[i].take().expect("each app in one group")))
                    .collect()
            })
            .collect();
        let mut reports: Vec<(usize, AppReport)> = futures_util::stream::iter(groups)
            .map(|group| async move {
                let mut done = Vec::with_capacity(group.len());
                for (i, app) in group {
                    done.push((i, self.one(app, work).await));
                }
                done
            })
            .buffered(self.parallel.max(1))
            .flat_map(futures_util::stream::iter)
            .collect()
            .await;
        reports.sort_by_key(|(i, _)| *i);
        reports.into_iter().map(|(_, report)| report).collect()
    }

    async fn one(&self, app: String, work: &dyn AppWork) -> AppReport {
        let started_at_ms = self.ctx.now();
        let mut report = self
            .with_retries(&app, work)
            .instrument(app_span(&app))
            .await;
        // Every app says why its run ended (pt-archiver's --why-quit).
        report
            .stop_reason
            .get_or_insert_with(|| ended(report.outcome));
        let dry_run = matches!(self.gate, Gate::Lock { dry_run: true, .. });
        // Every run is recorded, lock skips and dry runs too: `history` answers "why did last
        // night's run do nothing", and `status` looks past them to the last run that worked.
        if self.note_runs {
            let findings = runs::findings_json(report.findings());
            let record = runs::Record {
                app: &report.app_code,
                command: self.command,
                outcome: report.outcome,
                batches: report.batches,
                rows: report.rows,
                error: report.error.as_deref(),
                started_at_ms,
                finished_at_ms: self.ctx.now(),
                run_id: run_id(),
                store: self.ctx.store_label.as_deref(),
                stop_reason: report.stop_reason.as_ref(),
                dry_run,
                findings: findings.as_deref(),
            };
            self.ctx.tables.runs.note(&record).await;
        }
        report
    }

    /// The app's work, and again after a backoff while it fails on a transient database error
    /// — a restart, a failover, a killed connection — at most `db_retries` times, never past
    /// shutdown or the deadline. Each attempt starts at the gate (safe code, lock) and resumes
    /// from the receipts, so nothing is done twice; the report adds the attempts up.
    async fn with_retries(&self, app: &str, work: &dyn AppWork) -> AppReport {
        let mut report = self.attempt(app, work).await;
        let mut done = 0;
        while report.failure.is_some_and(Kind::worth_retry)
            && done < self.db_retries
            && self.ctx.stop_reason(self.deadline).is_none()
        {
            let wait = backoff(done, &format!("{}:{app}", run_id()));
            tracing::warn!(
                app,
                retry = done + 1,
                of = self.db_retries,
                wait_ms = wait.as_millis() as u64,
                error = report.error.as_deref().unwrap_or_default(),
                "transient database error: trying the app again"
            );
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.ctx.shutdown.cancelled() => break,
            }
            done += 1;
            let lost_lock = report.failure == Some(Kind::LostLock);
            report = report.then(self.attempt(app, work).await);
            if lost_lock && report.outcome == Outcome::SkippedLocked {
                // Not a skip: this run worked the app until another process took its lock.
                tracing::warn!(app, "the app's lock was lost to another process; stopping");
                report.outcome = Outcome::Stopped;
                report.stop_reason = Some(Stop::LostLock.into());
            }
        }
        report.retries = done;
        report
    }

    async fn attempt(&self, app: &str, work: &dyn AppWork) -> AppReport {
        let report = work.start(app);
        match self.gate {
            Gate::Open => work.work(app, Access::Reading, report).await,
            Gate::Lock { prefix, dry_run } => {
                match self.enter(prefix, app, dry_run, report).await {
                    Err(report) => report,
                    Ok((report, None)) => work.work(app, Access::DryRun, report).await,
                    Ok((report, Some(lock))) => {
                        let report = work.work(app, Access::Locked(&lock), report).await;
                        lock.release().await;
                        report
                    }
                }
            }
        }
    }

    /// The gate: a safe app code, then (unless `dry_run`) the app's lock. `Err` is the
    /// finished report of an app that must not go on (refused, skipped because another process
    /// holds the lock, or failed to ask).
    async fn enter(
        &self,
        prefix: &str,
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
        let name = lock_name(prefix, self.ctx.spec.name, app);
        // And the one every prefix shares on this database (two jobs with different prefixes
        // must not both work the app).
        let database = self.ctx.db.options.get_database().unwrap_or_default();
        let names = [
            name.clone(),
            database_lock_name(database, self.ctx.spec.name, app),
        ];
        match AppLock::try_acquire_all(&self.ctx.db, &names).await {
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
                report.fail(&e);
                Err(report)
            }
        }
    }
}

/// Why an app's run ended, where nothing more particular said so.
pub(crate) fn ended(outcome: Outcome) -> Ending {
    match outcome {
        Outcome::Archived | Outcome::UpToDate => Ending::CaughtUp,
        Outcome::Planned => Ending::Planned,
        Outcome::Done => Ending::Done,
        Outcome::SkippedLocked => Ending::SkippedLocked,
        Outcome::Refused => Ending::Refused,
        Outcome::Failed => Ending::Error,
        Outcome::Stopped => Ending::StoppedShort,
    }
}

/// The wait before retry `n` (0-based): 1 s doubling, capped at 32 s, scaled by a factor in
/// [0.5, 1.5) that `seed` (the run id and the app) decides, so that processes which failed
/// together — shards after a failover — do not come back together.
pub(crate) fn backoff(n: u32, seed: &str) -> Duration {
    let base = Duration::from_secs(1 << n.min(5));
    let hash = crate::model::digest::sha256_hex(format!("{seed}:{n}").as_bytes());
    let per_mille = u64::from_str_radix(&hash[..8], 16).expect("hex") % 1000;
    base * (500 + per_mille as u32) / 1000
}

#[cfg(test)]
mod tests {
    use super::backoff;
    use std::time::Duration;

    #[test]
    fn backoff_doubles_within_a_jitter_band_that_differs_between_runs() {
        for n in 0..8 {
            let base = Duration::from_secs(1 << n.min(5));
            let wait = backoff(n, "run-1:a1");
            assert!(wait >= base / 2 && wait < base * 3 / 2, "{n}: {wait:?}");
            assert_eq!(wait, backoff(n, "run-1:a1"), "a pure function of its seed");
        }
        let spread: std::collections::HashSet<Duration> = (0..16)
            .map(|shard| backoff(2, &format!("run-{shard}:a1")))
            .collect();
        assert!(spread.len() > 8, "sixteen processes spread out: {spread:?}");
    }
}
