//! Restoring one app's batches (SPEC §6 `restore`): every object of a batch is verified before
//! anything of it is loaded, and the rows loaded are exactly those the verification decoded from
//! the bytes it hashed. Idempotent: a row already there with the same content is left alone, one
//! with other content — or one the server would store differently from the archive — is a
//! conflict, never overwritten or loaded.
//!
//! Into the live source table (`into_source`) only under the app's lock, confirmed before every
//! commit; a batch whose rows are put back is marked restored in the same transaction, so purge
//! never deletes them again on that receipt (SPEC §5.9). A drill restores each batch into a
//! scratch table, compares its rows whole and its count, totals and members with the receipt,
//! records the result and drops the table. Older versions of rows that a later batch superseded
//! are not loaded, except by a drill.

mod drill;

use std::collections::HashSet;
use std::ops::ControlFlow;

use futures_util::StreamExt;

use super::apps::{self, Access, AppWork, Apps, Driver, Gate, Population, Selection};
use super::command::Command;
use super::failure::{Classify, Kind};
use super::replicas::LagStop;
use super::verifier::{ColdObject, ColdObjects, Depth, Expected, Guard, Verified, Verifier};
use super::{Observer, RunContext};
use crate::db::members::Members;
use crate::db::receipts::Receipts;
use crate::db::restore::{IntoSource, LoadError, TargetTable, RESTORE_CHUNK, RESTORE_CHUNK_BYTES};
use crate::db::DbError;
use crate::model::batch::{KeptLines, Member};
use crate::model::codec::Row;
use crate::model::command::CommandName;
use crate::model::receipt::Receipt;
use crate::model::table::TableSpec;
use crate::pipeline::report::details::{Drill, RestoreApp, RestoreRun};
use crate::pipeline::report::{
    AppDetails, AppReport, Ending, Outcome, RunDetails, Stop, Summary, Unfinished,
};
use crate::store::{StoreError, Thaw};

#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// The receipts to restore.
    pub selection: Selection,
    /// Target table; default `{table}_restored`.
    pub into: Option<String>,
    /// Restore into the live source table (never overwriting a live row), under the app's lock.
    pub into_source: bool,
    pub drill: bool,
    /// Prepended to advisory lock names (as for archive and purge).
    pub lock_prefix: String,
    /// Apps restored at the same time (`--parallel-apps`; 0 or 1: one at a time).
    pub parallel_apps: usize,
    /// `--thaw`: ask the store to restore batches in cold storage classes, to load them on a
    /// later run (without it such a batch fails, saying so).
    pub thaw: Option<Thaw>,
    /// `--without-column`: columns a batch holds that the target table does not have (dropped
    /// from the source since), restored without (their values stay in the archive). A batch
    /// holding such a column not named here is refused, naming it.
    pub without_columns: Vec<String>,
    pub failpoints: crate::failpoint::FailPoints,
}

impl RestoreOptions {
    /// The table rows go into, or why it may not be used (exit 2).
    pub fn target(&self, spec: &'static TableSpec) -> Result<String, String> {
        let target = match (&self.into, self.into_source) {
            (_, true) => spec.name.to_string(),
            // Table names compare without case on some servers (lower_case_table_names).
            (Some(into), false) if into.eq_ignore_ascii_case(spec.name) => {
                return Err(format!(
                    "--into {into} is the live source table: pass --into-source to restore into it"
                ))
            }
            (Some(into), false) => into.clone(),
            (None, false) => format!("{}_restored", spec.name),
        };
        TargetTable::new(spec, &target)?;
        Ok(target)
    }
}

/// `restore` — loads archived batches back into a table (SPEC §6): every app with receipts in
/// scope through the driver (under the app's lock with `--into-source`), each batch verified
/// and loaded by [`Restorer`]; `--drill` restores into scratch tables and records the results.
pub(crate) async fn run(
    ctx: &RunContext,
    opts: &RestoreOptions,
    observer: &dyn Observer,
) -> Summary {
    let before = ctx.store_stats();
    let mut summary = Summary::new(CommandName::Restore);
    summary.table = Some(ctx.spec.name.to_string());
    let target = match opts.target(ctx.spec) {
        Ok(target) => target,
        Err(e) => return Summary::unusable(CommandName::Restore, e),
    };
    summary.details = Some(RunDetails::Restore(RestoreRun {
        into: (!opts.drill).then(|| target.clone()),
        drill: opts.drill,
    }));
    let which = opts.selection.apps();
    let population = Population::Receipts(opts.selection.scope(None));
    if let Err(e) = opts.selection.check_batch_ids(ctx).await {
        return summary.without_apps(e);
    }
    let apps = match apps::resolve(ctx, &which, &population).await {
        Ok(apps) => apps,
        Err(e) => return summary.without_apps(e),
    };
    if let Err(e) = create_target(ctx, opts, &target).await {
        return Summary::unusable(CommandName::Restore, e);
    }
    let restorer = Restorer::new(ctx, opts, target, observer);
    // Into the source table, restore writes where archive reads: under the app's lock.
    let gate = match opts.into_source {
        true => Gate::Lock {
            prefix: &opts.lock_prefix,
            dry_run: false,
        },
        false => Gate::Open,
    };
    let driver = Driver::new(ctx, CommandName::Restore, gate)
        .noting_runs()
        .parallel(opts.parallel_apps);
    summary.apps = driver.run(apps, &restorer).await;
    summary.store_requests = ctx.store_activity(&before);
    summary.settle()
}

#[async_trait::async_trait]
impl Command for RestoreOptions {
    const NAME: CommandName = CommandName::Restore;
    type Context = RunContext;
    fn apps(&self) -> Option<&Apps> {
        self.selection.apps.as_ref()
    }
    fn writes(&self) -> bool {
        self.into_source
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
    Store(#[from] StoreError),
    #[error("{0}")]
    Data(String),
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The batch's objects are being restored from a cold storage class (`--thaw`).
    #[error("objects are being restored from cold storage")]
    Thawing(Vec<ColdObject>),
    #[error(transparent)]
    Replica(#[from] LagStop),
    #[error("{0}")]
    Stopped(Stop),
}

impl Classify for AppError {
    fn kind(&self) -> Kind {
        match self {
            AppError::Db(e) => e.kind(),
            AppError::Store(e) => e.kind(),
            AppError::Load(e) => e.kind(),
            AppError::Replica(e) => e.kind(),
            AppError::Stopped(_) => Kind::Stopped,
            AppError::Data(_) => Kind::Fatal,
            // A batch put off until the store restores it: `note_batch` notes it before asking.
            AppError::Thawing(_) => Kind::Fatal,
        }
    }

    fn stop_reason(&self) -> Option<Stop> {
        match self {
            AppError::Replica(e) => e.stop_reason(),
            AppError::Stopped(stop) => Some(stop.clone()),
            _ => None,
        }
    }
}

/// Restore's work for one app.
pub(crate) struct Restorer<'a> {
    ctx: &'a RunContext,
    opts: &'a RestoreOptions,
    /// Where rows go (each drill uses a scratch table of its own instead).
    target: String,
    receipts: Receipts,
    members: Members,
    observer: &'a dyn Observer,
    /// The source table's columns (read once, when a batch has values recorded for columns
    /// its lines lack).
    source_columns: tokio::sync::OnceCell<Vec<crate::model::profile::LiveColumn>>,
    /// The target table's columns (`--into`; read once, when a batch holds a column the source
    /// no longer has).
    target_columns: tokio::sync::OnceCell<Vec<crate::model::profile::LiveColumn>>,
}

/// How a batch's decoded lines become the rows loaded: the values recorded for columns its
/// lines lack appended, and where `--without-column` named columns the target lacks, only the
/// columns at these positions kept.
struct Shape {
    added: Vec<crate::model::codec::Value>,
    onto: Option<Vec<usize>>,
}

/// [`Restorer::onto_target`]: the rows' columns, the lines' columns, and the positions kept.
type Onto = (&'static TableSpec, &'static TableSpec, Option<Vec<usize>>);

#[async_trait::async_trait]
impl AppWork for Restorer<'_> {
    fn start(&self, app: &str) -> AppReport {
        AppReport::new(app, Outcome::Done)
    }

    async fn work(&self, app: &str, access: Access<'_>, mut report: AppReport) -> AppReport {
        let mut details = RestoreApp {
            drills: self.opts.drill.then(Vec::new),
            ..RestoreApp::default()
        };
        let scope = self.opts.selection.scope(Some(app));
        let total = match self.observer.wants_totals() {
            true => self.receipts.count(&scope).await.ok(),
            false => None,
        };
        self.observer.start(app, "batches", total);
        let receipts = self.receipts.stream(scope);
        futures_util::pin_mut!(receipts);
        // One app at a time, each batch's objects are fetched and verified while the batch
        // before it is loaded: the job decodes while the database inserts, and two batches are
        // held. With apps in parallel the other apps keep both busy, and each holds one batch.
        let look_ahead = self.opts.parallel_apps <= 1;
        let mut ahead = self.next_verified(&mut receipts).await;
        while let Some(next) = ahead {
            // SIGTERM: the batch in hand was finished; no new one starts.
            if let Some(stop) = self.ctx.stop_reason(None) {
                report.outcome = Outcome::Stopped;
                report.stop_reason = Some(stop.into());
                break;
            }
            let (receipt, verified) = match next {
                Ok(next) => next,
                Err(e) => {
                    report.error.get_or_insert(e.to_string());
                    break;
                }
            };
            let restored = self.restore_batch(&receipt, verified, access, &mut details);
            let (result, following) = if look_ahead {
                futures_util::future::join(restored, self.next_verified(&mut receipts)).await
            } else {
                (restored.await, self.next_verified(&mut receipts).await)
            };
            ahead = following;
            if self
                .note_batch(app, &receipt, result, &mut report, &mut details)
                .is_break()
            {
                break;
            }
        }
        self.observer.finish(app);
        conclude(&mut report, details);
        report
    }
}

/// Makes the table a restore writes to, `target`, like the source table — unless it is the
/// source itself (`--into-source`) or a drill's scratch tables, which are made per batch.
pub(crate) async fn create_target(
    ctx: &RunContext,
    opts: &RestoreOptions,
    target: &str,
) -> Result<(), String> {
    if opts.drill || opts.into_source {
        return Ok(());
    }
    TargetTable::new(ctx.spec, target)?
        .create_like(&ctx.db.pool)
        .await
        .map_err(|e| e.to_string())
}

/// The app's outcome once its batches are done — failed if a batch failed (its error says
/// which), stopped while batches are being restored from cold storage — with its rows and
/// details.
fn conclude(report: &mut AppReport, details: RestoreApp) {
    let thawing: HashSet<&str> = details
        .pending_thaw
        .iter()
        .map(|c| c.batch_id.as_str())
        .collect();
    let left = Unfinished {
        failed: report.error.clone(),
        stopped: (!thawing.is_empty() && report.outcome == Outcome::Done).then_some(
            Stop::RestoreThawing {
                batches: thawing.len(),
            },
        ),
    };
    report.end("restore", Ok::<(), AppError>(()), left);
    report.rows = details.restored_rows;
    report.details = Some(AppDetails::Restore(details));
}

/// A batch whose objects were read and checked, with what it was checked against.
struct VerifiedBatch {
    /// Members and superseded members: every row version the data object must hold.
    proven: Vec<Member>,
    superseded: Vec<Member>,
    verified: Verified,
}

impl<'a> Restorer<'a> {
    pub(crate) fn new(
        ctx: &'a RunContext,
        opts: &'a RestoreOptions,
        target: String,
        observer: &'a dyn Observer,
    ) -> Restorer<'a> {
        Restorer {
            ctx,
            opts,
            target,
            receipts: ctx.tables.receipts.clone(),
            members: ctx.tables.members.clone(),
            observer,
            source_columns: tokio::sync::OnceCell::new(),
            target_columns: tokio::sync::OnceCell::new(),
        }
    }

    /// Notes how one batch went in the app's report; `Break` when the app goes no further (a
    /// stop, the replicas, a lost lock). A batch that failed otherwise is named, and the next
    /// one is restored.
    fn note_batch(
        &self,
        app: &str,
        receipt: &Receipt,
        result: Result<(), AppError>,
        report: &mut AppReport,
        details: &mut RestoreApp,
    ) -> ControlFlow<()> {
        let e = match result {
            Err(e) if e.kind() == Kind::Stopped => {
                // SIGTERM (or the sentinel) between chunks or while waiting for the replicas:
                // the chunks loaded so far stand.
                report.outcome = Outcome::Stopped;
                report.stop_reason = e.stop_reason().map(Ending::from);
                return ControlFlow::Break(());
            }
            Err(AppError::Thawing(cold)) => {
                tracing::info!(
                    batch_id = receipt.batch_id,
                    objects = cold.len(),
                    "batch not loaded: its objects are being restored from cold storage (--thaw)"
                );
                details.pending_thaw.extend(cold);
                return ControlFlow::Continue(());
            }
            Err(e) => e,
            Ok(()) => {
                report.batches += 1;
                let rows = crate::model::human::thousands(details.restored_rows);
                let verb = if self.opts.drill {
                    "drilled"
                } else {
                    "restored"
                };
                self.observer
                    .advance(app, 1, &format!(", {rows} rows {verb}"));
                return ControlFlow::Continue(());
            }
        };
        tracing::error!(batch_id = receipt.batch_id, error = %e, "restore failed");
        report
            .error
            .get_or_insert_with(|| format!("batch {}: {e}", receipt.batch_id));
        details.failed_batches.push(receipt.batch_id.clone());
        if let Some(stop) = e.stop_reason() {
            // The replicas ended the wait (a timeout, the lock lost meanwhile).
            report.stop_reason = Some(stop.into());
            return ControlFlow::Break(());
        }
        if e.kind() == Kind::LostLock {
            return ControlFlow::Break(()); // nothing more of this app without its lock
        }
        ControlFlow::Continue(())
    }

    /// The next receipt in scope, with its batch read and verified; `None` after the last.
    async fn next_verified(
        &self,
        receipts: &mut (impl futures_util::Stream<Item = Result<Receipt, DbError>> + Unpin),
    ) -> Option<Result<(Receipt, Result<VerifiedBatch, AppError>), DbError>> {
        let receipt = match receipts.next().await? {
            Ok(receipt) => receipt,
            Err(e) => return Some(Err(e)),
        };
        let verified = self.verify_batch(&receipt).await;
        Some(Ok((receipt, verified)))
    }

    /// Reads the batch's members and its objects, and verifies the objects against the receipt
    /// and the members, keeping the data object's rows.
    async fn verify_batch(&self, receipt: &Receipt) -> Result<VerifiedBatch, AppError> {
        let (app, batch) = (&receipt.app_code, &receipt.batch_id);
        let members = self.members.members_of(app, batch).await?;
        let superseded = self.members.superseded_of(app, batch).await?;
        let mut proven = members;
        proven.extend(superseded.iter().cloned());
        let verifier = Verifier {
            store: self.ctx.store.as_ref(),
            spec: self.ctx.spec,
            depth: Depth::ReadKeepingLines,
            cold: match self.opts.thaw {
                Some(thaw) => ColdObjects::Thaw(thaw),
                None => ColdObjects::Metadata,
            },
        };
        let mut expected = Expected::of_receipt(self.ctx.spec, receipt, proven);
        // Restore needs the bytes to be the archived ones, and reads them in full; an object
        // whose retention was shortened, that was re-encrypted or written again (another ETag
        // or version) with the same bytes still holds them. `verify` reports that; a restore in
        // an incident must not be refused for it.
        expected.guard = Guard::default();
        expected.receipt.objects.stored = Default::default();
        let verified = verifier.verify(&expected).await?;
        Ok(VerifiedBatch {
            proven: expected.members,
            superseded,
            verified,
        })
    }

    /// Loads one verified batch (or, for a drill, loads, compares and drops a scratch table).
    /// With the app's lock (`--into-source`): into the live source table.
    async fn restore_batch(
        &self,
        receipt: &Receipt,
        verified: Result<VerifiedBatch, AppError>,
        access: Access<'_>,
        details: &mut RestoreApp,
    ) -> Result<(), AppError> {
        let app = &receipt.app_code;
        let VerifiedBatch {
            proven,
            superseded,
            verified,
        } = verified?;
        let lines = self.verified_lines(receipt, verified, details).await?;
        // The table as this batch holds it: a batch written before columns were added to the
        // table loads its own columns, and what purge recorded its deleted rows held in the
        // others (a column nothing was recorded for takes its default, as the rows in the table
        // when it was added did).
        let archived = lines.spec();
        let (spec, added) = self.with_added_values(receipt, archived).await?;
        let (spec, archived, onto) = self.onto_target(receipt, spec, archived).await?;
        let shape = Shape { added, onto };
        // At most 65,535 placeholders per statement, one per value.
        let max_rows = RESTORE_CHUNK.min(60_000 / spec.columns.len().max(1));
        let now = self.ctx.now();
        if self.opts.drill {
            let chunks = lines.chunks(max_rows, RESTORE_CHUNK_BYTES);
            let rows = self.decode(receipt, &lines, 0..lines.len(), &shape)?;
            return self
                .drill(spec, receipt, proven, rows, &chunks, details)
                .await;
        }
        for range in lines.chunks(max_rows, RESTORE_CHUNK_BYTES) {
            let start = range.start;
            let rows = self.decode(receipt, &lines, range, &shape)?;
            let mut chunk = without_superseded(spec, rows, &superseded, details);
            if receipt.life.compaction.is_some() && !chunk.is_empty() {
                // A compacted batch lost the member rows that told a later version of a row
                // apart from its own: a row another batch owns now is that batch's to restore.
                chunk = self
                    .without_owned_elsewhere(spec, receipt, chunk, details)
                    .await?;
            }
            if chunk.is_empty() {
                continue;
            }
            if let (Access::Locked(lock), Some(gate)) = (access, &self.ctx.stops.replicas) {
                // Into the live table: its writes are replicated, so they wait for the replicas.
                let waited = gate.wait(app, Some(lock), &self.ctx.shutdown).await?;
                details.replica_wait.add(waited);
            }
            if start > 0 {
                if let Some(reason) = self.ctx.stop_reason(None) {
                    // Between chunks too (SIGTERM, the sentinel): the rows loaded stand, and a
                    // rerun counts them as present.
                    return Err(AppError::Stopped(reason));
                }
            }
            self.load((spec, archived), receipt, &chunk, access, now, details)
                .await?;
        }
        Ok(())
    }

    /// Loads one chunk of a batch's rows into the target table — the live source table under
    /// the app's lock (`--into-source`) — and counts the rows loaded, already there, and in
    /// conflict (never overwritten). `(spec, archived)`: the rows' columns, and the batch's
    /// lines' (the first of them).
    async fn load(
        &self,
        (spec, archived): (&'static TableSpec, &'static TableSpec),
        receipt: &Receipt,
        chunk: &[Row],
        access: Access<'_>,
        now: i64,
        details: &mut RestoreApp,
    ) -> Result<(), AppError> {
        let (pool, app, batch) = (&self.ctx.db.pool, &receipt.app_code, &receipt.batch_id);
        let into_source = match access {
            Access::Locked(lock) => Some(IntoSource {
                lock,
                batch_id: batch,
                now_ms: now,
                compacted: receipt.life.compaction.is_some(),
                failpoints: &self.opts.failpoints,
                receipts: &self.ctx.tables.receipts,
                members: &self.ctx.tables.members,
            }),
            Access::DryRun | Access::Reading => None,
        };
        self.opts
            .failpoints
            .pass("before-restore-chunk")
            .map_err(DbError::from)?;
        let target = TargetTable::new(spec, &self.target)
            .map_err(AppError::Data)?
            .archived_as(archived);
        let loaded = target.load_chunk(pool, app, chunk, into_source).await?;
        details.restored_rows += loaded.inserted;
        details.already_present_rows += loaded.present;
        if let Some(first) = loaded.conflicts.first() {
            tracing::error!(
                batch_id = batch,
                conflicts = loaded.conflicts.len(),
                first_event_id = first.event_id,
                first_reason = ?first.reason,
                column = first.column.as_deref().unwrap_or_default(),
                "rows not loaded: the table holds them with other content, or would store them differently from the archive"
            );
        }
        for conflict in loaded.conflicts {
            details.conflicts.push(conflict.event_id.clone());
            details.conflict_details.push(conflict);
        }
        Ok(())
    }

    /// `rows` without those whose event id another batch's member row owns in the same or a
    /// newer version (that batch holds the row as it is now). A row whose event id another batch
    /// holds in an *older* version is kept: loading it meets that row as a conflict, never a
    /// silent overwrite or a silently stale row.
    async fn without_owned_elsewhere(
        &self,
        spec: &TableSpec,
        receipt: &Receipt,
        mut rows: Vec<Row>,
        details: &mut RestoreApp,
    ) -> Result<Vec<Row>, AppError> {
        let layout = spec.layout();
        let id = |r: &Row| r[layout.event_id].as_str().unwrap_or_default().to_string();
        let ids: Vec<String> = rows.iter().map(id).collect();
        let elsewhere = self
            .members
            .owned_elsewhere(
                &receipt.app_code,
                &receipt.batch_id,
                ids.iter().map(String::as_str),
            )
            .await?;
        let updated = |r: &Row| r[layout.updated_at_ms].as_i64().unwrap_or_default();
        let before = rows.len();
        rows.retain(|r| {
            elsewhere
                .get(&id(r))
                .is_none_or(|&there| there < updated(r))
        });
        details.superseded_rows += (before - rows.len()) as u64;
        Ok(rows)
    }

    /// The batch's lines, from the one fetch of its data object that verification read;
    /// nothing when anything is found (recorded as a failed drill, for a drill).
    async fn verified_lines(
        &self,
        receipt: &Receipt,
        verified: Verified,
        details: &mut RestoreApp,
    ) -> Result<KeptLines, AppError> {
        if verified.findings.is_empty() && !verified.cold.is_empty() {
            if self.opts.thaw.is_some() {
                return Err(AppError::Thawing(verified.cold));
            }
            let first = &verified.cold[0];
            return Err(AppError::Data(format!(
                "{} is in {}, which cannot be read until the store restores it: run restore again with --thaw DAYS, then once more when it is readable; nothing loaded",
                first.key, first.storage_class
            )));
        }
        if let Some(first) = verified.findings.first() {
            let detail = format!("{} findings, first: {first}", verified.findings.len());
            if self.opts.drill {
                self.record_drill(receipt, Some(detail.clone()), details)
                    .await?;
            }
            return Err(AppError::Data(format!(
                "verification failed, nothing loaded: {detail}"
            )));
        }
        verified.lines.ok_or_else(|| {
            AppError::Data(format!(
                "{} was not read in full during verification; nothing loaded",
                receipt.keys.data
            ))
        })
    }

    /// Lines `range` of a verified batch, decoded.
    /// The rows of `range` of the batch's lines, each with the values recorded for columns its
    /// lines lack after its own, without the columns the target table does not have where
    /// `--without-column` named them ([`Shape`]).
    fn decode(
        &self,
        receipt: &Receipt,
        lines: &KeptLines,
        range: std::ops::Range<usize>,
        shape: &Shape,
    ) -> Result<Vec<Row>, AppError> {
        let mut rows = lines.decode(range).map_err(|e| {
            AppError::Data(format!("{}: {e}; nothing more loaded", receipt.keys.data))
        })?;
        if !shape.added.is_empty() {
            rows.iter_mut()
                .for_each(|r| r.extend_from_slice(&shape.added));
        }
        if let Some(keep) = &shape.onto {
            for row in &mut rows {
                *row = keep.iter().map(|&i| row[i].clone()).collect();
            }
        }
        Ok(rows)
    }

    /// The table a batch's rows are loaded as, where the target table lacks columns the batch
    /// holds (dropped from the source since the batch was archived): refused, naming them and
    /// their types, unless `--without-column` names each — then the rows go without them (the
    /// batch keeps their values) and the positions of the columns kept are returned.
    /// `(spec, archived)`: the rows' columns and the lines'.
    async fn onto_target(
        &self,
        receipt: &Receipt,
        spec: &'static TableSpec,
        archived: &'static TableSpec,
    ) -> Result<Onto, AppError> {
        let target: Vec<&str> = match self.opts.drill || self.opts.into_source {
            // A drill's scratch tables are made like the source.
            true => self.ctx.spec.columns.iter().map(|c| c.name).collect(),
            false => self
                .target_columns
                .get_or_try_init(|| self.ctx.db.describe(&self.target))
                .await?
                .iter()
                .map(|c| c.name.as_str())
                .collect(),
        };
        let has = |name: &str| target.iter().any(|t| t.eq_ignore_ascii_case(name));
        let lacking: Vec<&str> = spec
            .columns
            .iter()
            .map(|c| c.name)
            .filter(|c| !has(c))
            .collect();
        if lacking.is_empty() {
            return Ok((spec, archived, None));
        }
        let into = if self.opts.drill {
            "a drill's scratch table (made like the source)"
        } else {
            self.target.as_str()
        };
        let unnamed: Vec<&str> = lacking
            .iter()
            .copied()
            .filter(|c| {
                !self
                    .opts
                    .without_columns
                    .iter()
                    .any(|w| w.eq_ignore_ascii_case(c))
            })
            .collect();
        if !unnamed.is_empty() {
            let typed: Vec<String> = unnamed
                .iter()
                .map(|c| {
                    let sql_type = receipt.columns.as_ref().and_then(|set| {
                        set.columns
                            .iter()
                            .find(|b| b.name.eq_ignore_ascii_case(c))
                            .map(|b| b.sql_type.clone())
                    });
                    match sql_type {
                        Some(t) => format!("{c} {t}"),
                        None => c.to_string(),
                    }
                })
                .collect();
            return Err(AppError::Data(format!(
                "the batch holds column(s) {} that {into} does not have (dropped since the batch was archived): nothing of it loaded. Add them to the table ({}) to restore the rows whole, or restore without them: --without-column {} (their values stay in the archive)",
                unnamed.join(", "),
                typed.join(", "),
                unnamed.join(",")
            )));
        }
        let keep: Vec<usize> = (0..spec.columns.len())
            .filter(|&i| has(spec.columns[i].name))
            .collect();
        let keys = |t: &TableSpec| -> Vec<&'static str> {
            t.columns
                .iter()
                .filter(|c| has(c.name))
                .map(|c| c.json_key)
                .collect()
        };
        let project = |t: &'static TableSpec| {
            crate::model::table::projected(t, &keys(t)).map_err(|e| {
                AppError::Data(format!(
                    "batch {} without {}: {e}",
                    receipt.batch_id,
                    lacking.join(", ")
                ))
            })
        };
        tracing::warn!(
            batch_id = receipt.batch_id,
            columns = lacking.join(","),
            "restoring without column(s) {} (--without-column): the batch keeps their values",
            lacking.join(", ")
        );
        Ok((project(spec)?, project(archived)?, Some(keep)))
    }

    /// The table as a batch's rows are restored ([`crate::model::unarchived::restoring`]): its
    /// lines' columns (`batch`), then the columns added to the table since whose values purge
    /// recorded with the batch — and those values.
    async fn with_added_values(
        &self,
        receipt: &Receipt,
        batch: &'static TableSpec,
    ) -> Result<(&'static TableSpec, Vec<crate::model::codec::Value>), AppError> {
        let (pool, app, batch_id) = (&self.ctx.db.pool, &receipt.app_code, &receipt.batch_id);
        let added = self.ctx.tables.added.of_batch(pool, app, batch_id).await?;
        if added.is_empty() {
            return Ok((batch, Vec::new()));
        }
        let live = self
            .source_columns
            .get_or_try_init(|| self.ctx.db.describe(self.ctx.spec.name))
            .await?;
        // A value recorded for a column dropped since: the table cannot hold it. Left out only
        // when told, as a column the batch's lines hold is (`onto_target`).
        let gone: Vec<&str> = added
            .iter()
            .map(|v| v.column_name.as_str())
            .filter(|name| !live.iter().any(|l| l.name.eq_ignore_ascii_case(name)))
            .filter(|name| {
                !self
                    .opts
                    .without_columns
                    .iter()
                    .any(|w| w.eq_ignore_ascii_case(name))
            })
            .collect();
        if !gone.is_empty() {
            return Err(AppError::Data(format!(
                "the batch's deleted rows held values in column(s) {} (recorded in {} by an older build), which {} no longer has: nothing of it loaded. Add the column(s) back to restore the rows whole, or restore without them: --without-column {} (the values stay recorded)",
                gone.join(", "),
                self.ctx.spec.added_values_table(),
                self.ctx.spec.name,
                gone.join(",")
            )));
        }
        let added: Vec<(String, String, String)> = added
            .into_iter()
            .map(|v| (v.column_name, v.encoding, v.value_json))
            .collect();
        crate::model::unarchived::restoring(batch, live, &added)
            .map_err(|e| AppError::Data(format!("batch {batch_id}: {e}; nothing loaded")))
    }

    /// Restores a verified batch into a scratch table, compares it, records the result.
    async fn drill(
        &self,
        spec: &'static TableSpec,
        receipt: &Receipt,
        proven: Vec<Member>,
        rows: Vec<Row>,
        chunks: &[std::ops::Range<usize>],
        details: &mut RestoreApp,
    ) -> Result<(), AppError> {
        let (pool, app) = (&self.ctx.db.pool, &receipt.app_code);
        let table = format!(
            "{}_drill_{}",
            spec.name,
            receipt.batch_id.get(..12).unwrap_or(&receipt.batch_id)
        );
        let scratch = TargetTable::new(spec, &table).map_err(AppError::Data)?;
        scratch.drop(pool).await?;
        scratch.create_like(pool).await?;
        for range in chunks {
            let loaded = scratch
                .load_chunk(pool, app, &rows[range.clone()], None)
                .await?;
            details.restored_rows += loaded.inserted;
            details.already_present_rows += loaded.present;
        }
        let facts = scratch.facts(pool).await?;
        let restored = scratch.rows(pool).await?;
        scratch.drop(pool).await?;
        let problems = drill::problems(spec, receipt, &proven, &rows, &facts, &restored);
        let detail = (!problems.is_empty()).then(|| problems.join("; "));
        self.record_drill(receipt, detail.clone(), details).await?;
        match detail {
            Some(detail) => Err(AppError::Data(format!("drill failed: {detail}"))),
            None => Ok(()),
        }
    }

    async fn record_drill(
        &self,
        receipt: &Receipt,
        detail: Option<String>,
        details: &mut RestoreApp,
    ) -> Result<(), DbError> {
        let now = self.ctx.now();
        let (app, batch) = (&receipt.app_code, &receipt.batch_id);
        self.ctx
            .tables
            .drills
            .record(app, batch, now, detail.as_deref())
            .await?;
        details.drills.get_or_insert_with(Vec::new).push(Drill {
            batch_id: receipt.batch_id.clone(),
            ok: detail.is_none(),
            detail,
        });
        Ok(())
    }
}

/// `rows` without the older versions a later batch superseded (that batch holds the row as it
/// is now), counted in `details`.
fn without_superseded(
    spec: &TableSpec,
    mut rows: Vec<Row>,
    superseded: &[Member],
    details: &mut RestoreApp,
) -> Vec<Row> {
    if superseded.is_empty() {
        return rows;
    }
    let older: HashSet<(&str, i64)> = superseded
        .iter()
        .map(|m| (m.event_id.as_str(), m.updated_at_ms))
        .collect();
    let layout = spec.layout();
    let before = rows.len();
    rows.retain(|r| {
        let key = (
            r[layout.event_id].as_str().unwrap_or_default(),
            r[layout.updated_at_ms].as_i64().unwrap_or_default(),
        );
        !older.contains(&key)
    });
    details.superseded_rows += (before - rows.len()) as u64;
    rows
}
