//! Scrubbing the archive (SPEC §6 `verify`), per app: re-read the objects of the app's receipts
//! in scope (all, a time range, listed batch ids, or a reproducible random sample) and compare
//! them with their receipts and members through the one [`Verifier`]; look for stragglers
//! (delivered rows below the app's cursor whose version no receipt holds). Then, for the whole
//! run, look for orphans (objects no receipt references).
//!
//! Receipts stream past a page at a time and keys a page at a time, one `dt=` partition of one
//! app at a time: memory does not grow with the archive.

use std::collections::HashSet;
use std::sync::Mutex;

use futures_util::stream::BoxStream;
use futures_util::StreamExt;

use super::apps::{self, Access, AppWork, Apps, Driver, Gate, Population, Selection};
use super::command::Command;
use super::log;
use super::verifier::{
    note_findings, ColdObjects, Depth, Expected, Finding, FindingKind, Verified, Verifier,
};
use super::versions::{self, Recording};
use super::{Observer, RunContext};
use crate::db::members::Members;
use crate::db::receipts::{ReceiptScope, Receipts};
use crate::db::source::SourceTable;
use crate::db::DbError;
use crate::model::command::CommandName;
use crate::model::digest::sha256_hex;
use crate::model::format;
use crate::model::receipt::{Receipt, STATE_VERIFIED};
use crate::pipeline::report::details::{Sample, VerifyApp, VerifyRun, CHECKED_LISTED};
use crate::pipeline::report::{AppDetails, AppReport, Ending, Outcome, RunDetails, Stop, Summary};
use crate::store::{StoreError, Thaw};

#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// The receipts to check (every app: those with receipts or rows).
    pub selection: Selection,
    /// Check about this share of the receipts in scope, chosen by `seed`.
    pub sample_percent: Option<f64>,
    pub seed: u64,
    pub metadata_only: bool,
    /// Receipts checked at once.
    pub parallel: usize,
    /// Stragglers are looked for below this.
    pub cutoff_ms: i64,
    pub delivered_status: String,
    /// At most this many stragglers are listed per app.
    pub max_stragglers: usize,
    /// `--thaw`: ask the store to restore objects in cold storage classes, for a later run.
    pub thaw: Option<Thaw>,
    pub failpoints: crate::failpoint::FailPoints,
}

impl VerifyOptions {
    /// Every receipt of every app, read in full; stragglers looked for below `cutoff_ms`.
    pub fn everything(cutoff_ms: i64, delivered_status: &str) -> VerifyOptions {
        VerifyOptions {
            selection: Selection::default(),
            sample_percent: None,
            seed: 0,
            metadata_only: false,
            parallel: 4,
            cutoff_ms,
            delivered_status: delivered_status.to_string(),
            max_stragglers: 1000,
            thaw: None,
            failpoints: Default::default(),
        }
    }
}

/// `verify` — scrubs the archive (SPEC §6): every app in scope through the driver, its receipts
/// re-read and its stragglers looked for by [`Verify`], then the orphans of the run's prefix
/// ([`around`]). Findings are data: exit 0 when clean, 1 when anything was found, 2 when it
/// could not run. Orphans are listed as information (an interrupted run leaves them) and do not
/// fail the run.
pub(crate) async fn run(
    ctx: &RunContext,
    opts: &VerifyOptions,
    observer: &dyn Observer,
) -> Summary {
    let before = ctx.store_stats();
    let mut summary = Summary::new(CommandName::Verify);
    summary.table = Some(ctx.spec.name.to_string());
    summary.store = Some(ctx.store.location().to_string());
    summary.cutoff_ms = Some(opts.cutoff_ms);
    let which = opts.selection.apps();
    let population = match opts.selection.batch_ids.is_empty() {
        true => Population::SourceAndReceipts,
        false => Population::Receipts(opts.selection.scope(None)),
    };
    if let Err(e) = opts.selection.check_batch_ids(ctx).await {
        return summary.without_apps(e);
    }
    let mut apps = match apps::resolve(ctx, &which, &population).await {
        Ok(apps) => apps,
        Err(e) => return summary.without_apps(e),
    };
    if matches!(which, Apps::All) && opts.selection.batch_ids.is_empty() {
        if let Err(e) = apps::add_logged(ctx, &mut apps).await {
            return summary.without_apps(e);
        }
    }
    let verify = Verify::new(ctx, opts, observer);
    let driver = Driver::new(ctx, CommandName::Verify, Gate::Open).noting_runs();
    // Orphans are looked for under the apps' own spellings (what their keys hold).
    let listed = apps.clone();
    summary.apps = driver.run(apps, &verify).await;
    let mut run = verify.run_details();
    if let Some(error) = around(ctx, opts, &which, &listed, &mut run).await {
        summary.error = Some(error);
    }
    summary.details = Some(RunDetails::Verify(run));
    summary.store_requests = ctx.store_activity(&before);
    summary.settle()
}

#[async_trait::async_trait]
impl Command for VerifyOptions {
    const NAME: CommandName = CommandName::Verify;
    type Context = RunContext;
    fn apps(&self) -> Option<&Apps> {
        self.selection.apps.as_ref()
    }
    async fn run(&self, ctx: &RunContext, observer: &dyn Observer) -> Summary {
        run(ctx, self, observer).await
    }
}

/// Whether the sample with `seed` includes a batch: a pure function, so the same seed picks the
/// same receipts every time.
pub(crate) fn sampled(seed: u64, batch_id: &str, percent: f64) -> bool {
    let hash = sha256_hex(format!("{seed}:{batch_id}").as_bytes());
    let point = u64::from_str_radix(&hash[..12], 16).expect("hex") % 1_000_000;
    (point as f64) < percent * 10_000.0
}

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Verify's work for one app; the run's findings gather in [`Verify::run_details`].
pub(crate) struct Verify<'a> {
    ctx: &'a RunContext,
    opts: &'a VerifyOptions,
    observer: &'a dyn Observer,
    receipts: Receipts,
    members: Members,
    pages: SourceTable,
    run: Mutex<VerifyRun>,
}

#[async_trait::async_trait]
impl AppWork for Verify<'_> {
    fn start(&self, app: &str) -> AppReport {
        AppReport::new(app, Outcome::Done)
    }

    async fn work(&self, app: &str, _: Access<'_>, mut report: AppReport) -> AppReport {
        let mut details = VerifyApp::default();
        // The run's findings from here on are this app's: verify works one app at a time (its
        // parallelism is the batches of one app).
        let findings_before = self.run.lock().expect("not poisoned").findings.len();
        let look_for_stragglers = self.opts.selection.batch_ids.is_empty()
            && crate::model::appcode::validate(app).is_ok()
            && self.ctx.stop_reason(None).is_none();
        // The app's rows are scanned for stragglers while its batches are re-read: the two
        // use the database and the store in turns, and neither waits for the other. A shutdown
        // ends the scan where it is (it only reads).
        let scan = async {
            if !look_for_stragglers {
                return None;
            }
            tokio::select! {
                found = self.stragglers(app) => Some(found),
                _ = self.ctx.shutdown.cancelled() => None,
            }
        };
        // The app's log, unless the run checks listed batches only: the whole tree proven once
        // and each leaf held to its receipt (a tile and an entry bundle per 256 batches, the
        // receipts a page at a time).
        let audit = async {
            match self.opts.selection.batch_ids.is_empty() {
                true => Some(log::audit(self.ctx, app).await),
                false => None,
            }
        };
        let (checked, scanned, audited) =
            tokio::join!(self.check_receipts(app, &mut report), scan, audit);
        if let Err(e) = checked {
            report.error.get_or_insert(e.to_string());
        }
        if let Some(audited) = audited {
            self.note_log(app, audited, &mut details, &mut report);
        }
        self.note_not_verified(app, &mut report).await;
        self.note_values_only_in_database(app, &mut report).await;
        match scanned {
            Some(Ok((found, more))) => {
                details.stragglers = found.len() as u64;
                let mut run = self.run.lock().expect("not poisoned");
                if more {
                    run.stragglers_truncated.push(app.to_string());
                }
                run.findings.extend(found);
            }
            Some(Err(e)) => {
                report.error.get_or_insert(e.to_string());
            }
            None if look_for_stragglers => {
                // Shut down mid-scan: say so, even if every batch was checked.
                report.outcome = Outcome::Stopped;
                report.stop_reason.get_or_insert_with(|| {
                    let why = self.ctx.stop_reason(None);
                    why.map_or(Ending::StoppedShort, Ending::from)
                });
            }
            None => {}
        }
        if report.error.is_some() {
            report.outcome = Outcome::Failed;
        }
        details.findings =
            self.run.lock().expect("not poisoned").findings[findings_before..].to_vec();
        report.details = Some(AppDetails::Verify(details));
        report
    }
}

impl<'a> Verify<'a> {
    pub(crate) fn new(
        ctx: &'a RunContext,
        opts: &'a VerifyOptions,
        observer: &'a dyn Observer,
    ) -> Self {
        Verify {
            ctx,
            opts,
            observer,
            receipts: ctx.tables.receipts.clone(),
            members: ctx.tables.members.clone(),
            pages: ctx.tables.source.clone(),
            run: Mutex::new(VerifyRun {
                metadata_only: opts.metadata_only,
                sample: opts.sample_percent.map(|percent| Sample {
                    percent,
                    seed: opts.seed,
                    of: 0,
                }),
                ..VerifyRun::default()
            }),
        }
    }

    /// The run's own fields, once every app is done.
    pub(crate) fn run_details(self) -> VerifyRun {
        let mut run = self.run.into_inner().expect("not poisoned");
        run.findings.sort_by(|a, b| {
            (&a.batch_id, &a.key, &a.event_id).cmp(&(&b.batch_id, &b.key, &b.event_id))
        });
        run.checked_batches.sort();
        run.pending_thaw
            .sort_by(|a, b| (&a.batch_id, &a.key).cmp(&(&b.batch_id, &b.key)));
        run
    }

    /// The app's receipts set by hand to a state this tool never writes: each a finding (the
    /// app's archive stops at its rows, and purge leaves them).
    async fn note_not_verified(&self, app: &str, report: &mut AppReport) {
        match self.receipts.not_verified(app).await {
            Ok(found) => {
                let mut run = self.run.lock().expect("not poisoned");
                run.findings.extend(found.into_iter().map(|(batch_id, state)| Finding {
                    kind: FindingKind::ReceiptNotVerified,
                    batch_id: Some(batch_id),
                    key: None,
                    event_id: None,
                    expected: Some(format!("a {STATE_VERIFIED} receipt (the only state this tool writes)")),
                    actual: Some(format!("state {state}, set by hand: the app's archive stops at the batch's rows and purge leaves them — set it back to VERIFIED after checking it, or remove the batch (README, Recovering from a finding)")),
                    seq: None,
                }));
            }
            Err(e) => {
                report.error.get_or_insert(e.to_string());
            }
        }
    }

    /// The app's batches whose deleted rows held values an older build recorded in the
    /// database alone (`<prefix>_added_values`): named, with a warning — the store cannot
    /// restore those rows whole without that table.
    async fn note_values_only_in_database(&self, app: &str, report: &mut AppReport) {
        let pool = &self.ctx.db.pool;
        match self.ctx.tables.added.batches_of_app(pool, app, 1000).await {
            Ok(found) if found.is_empty() => {}
            Ok(found) => {
                tracing::warn!(
                    app,
                    batches = found.len(),
                    first_batch_id = found[0].0,
                    "{} batch(es) of app {app} had rows deleted by a build before layout 2, which recorded what they held in column(s) added since ({}) in {} alone: the store does not hold those values. Keep that table and back it up with the archive (restore writes them back)",
                    found.len(),
                    found[0].1,
                    self.ctx.spec.added_values_table()
                );
                let mut run = self.run.lock().expect("not poisoned");
                run.values_only_in_database
                    .extend(found.into_iter().map(|(batch_id, columns)| {
                        crate::pipeline::report::details::ValuesOnlyInDatabase {
                            app_code: app.to_string(),
                            batch_id,
                            columns,
                        }
                    }));
            }
            Err(e) => {
                report.error.get_or_insert(e.to_string());
            }
        }
    }

    /// An app's log audited: its findings join the run's, its head and breaks its details.
    fn note_log(
        &self,
        app: &str,
        audited: Result<log::LogAudit, log::LogError>,
        details: &mut VerifyApp,
        report: &mut AppReport,
    ) {
        match audited {
            Ok(audit) => {
                details.log.size = audit.size;
                details.log.root = audit.root.as_ref().map(log::hash_text);
                details.log.appended_to = audit.size.map(|_| audit.known);
                details.log.breaks_accepted = audit
                    .breaks
                    .iter()
                    .map(|b| {
                        format!(
                            "leaves {} accepted as gone {}: {}",
                            b.leaves
                                .iter()
                                .map(|(i, batch)| format!("{i} (batch {batch})"))
                                .collect::<Vec<_>>()
                                .join(", "),
                            crate::model::timespec::rfc3339(b.accepted_at_ms),
                            b.reason
                        )
                    })
                    .chain(audit.transition.iter().flat_map(|t| t.accepted()))
                    .collect();
                let findings = audit.findings.into_iter().map(|f| Finding::of_log(app, f));
                self.run
                    .lock()
                    .expect("not poisoned")
                    .findings
                    .extend(findings);
            }
            Err(e) => {
                report.error.get_or_insert(format!("auditing the log: {e}"));
            }
        }
    }

    /// Re-reads the app's receipts in scope, `--parallel` at a time, as they stream past.
    async fn check_receipts(&self, app: &str, report: &mut AppReport) -> Result<(), DbError> {
        let scope = self.opts.selection.scope(Some(app));
        let total = match self.observer.wants_totals() {
            true => Some(self.receipts.count(&scope).await?),
            false => None,
        };
        self.observer.start(app, "batches", total);
        let in_scope = std::sync::atomic::AtomicU64::new(0);
        let in_scope = &in_scope;
        // SIGTERM or the sentinel: no new batch is started; those being checked finish.
        let stopped = Mutex::new(None::<Stop>);
        let stopped_ref = &stopped;
        let chosen = self
            .receipts
            .stream(scope)
            .take_while(move |_| {
                let stop = self.ctx.stop_reason(None);
                let go = stop.is_none();
                if let Some(reason) = stop {
                    stopped_ref
                        .lock()
                        .expect("not poisoned")
                        .get_or_insert(reason);
                }
                std::future::ready(go)
            })
            .filter_map(move |receipt| {
                in_scope.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let keep = receipt.as_ref().map_or(true, |r| {
                    self.opts
                        .sample_percent
                        .is_none_or(|p| sampled(self.opts.seed, &r.batch_id, p))
                });
                std::future::ready(keep.then_some(receipt))
            });
        let results = chosen
            .map(|receipt| async move {
                let receipt = receipt?;
                let found = self.check(&receipt).await;
                Ok::<_, DbError>((receipt, found))
            })
            .buffer_unordered(self.opts.parallel.max(1));
        futures_util::pin_mut!(results);
        let mut found_so_far = 0;
        while let Some(next) = results.next().await {
            let (receipt, found) = next?;
            found_so_far += self.note_checked(&receipt, found, report);
            self.observer
                .advance(app, 1, &format!(", {found_so_far} findings"));
        }
        self.observer.finish(app);
        if let Some(sample) = &mut self.run.lock().expect("not poisoned").sample {
            sample.of += in_scope.load(std::sync::atomic::Ordering::Relaxed);
        }
        let stopped = stopped.lock().expect("not poisoned").take();
        if let Some(stop) = stopped {
            tracing::info!(app, reason = %stop, "verify stopping with batches left unchecked");
            report.outcome = Outcome::Stopped;
            report.stop_reason = Some(stop.into());
        }
        Ok(())
    }

    /// Notes one batch checked: its findings and cold objects in the run, its rows in the app's
    /// report — or the error that kept it from being checked. Returns how many findings it made.
    fn note_checked(
        &self,
        receipt: &Receipt,
        found: Result<Verified, AppError>,
        report: &mut AppReport,
    ) -> usize {
        let verified = match found {
            Ok(verified) => verified,
            Err(e) => {
                tracing::error!(batch_id = receipt.batch_id, error = %e, "could not check batch");
                report
                    .error
                    .get_or_insert_with(|| format!("batch {}: {e}", receipt.batch_id));
                return 0;
            }
        };
        report.batches += 1;
        report.rows += receipt.content.row_count;
        let findings = verified.findings.len();
        let mut run = self.run.lock().expect("not poisoned");
        run.checked_batch_count += 1;
        if run.checked_batches.len() < CHECKED_LISTED {
            run.checked_batches.push(receipt.batch_id.clone());
        }
        run.findings.extend(verified.findings);
        run.pending_thaw.extend(verified.cold);
        findings
    }

    /// One receipt: its objects against it and its members (and superseded rows).
    async fn check(&self, receipt: &Receipt) -> Result<Verified, AppError> {
        let (app, batch) = (&receipt.app_code, &receipt.batch_id);
        self.opts
            .failpoints
            .pass("verify-before-members")
            .map_err(DbError::from)?;
        let members = self.members.proven_members_of(app, batch).await?;
        // The receipt as it is now, read after its members: `compact` replaces member rows by
        // a digest in one transaction, so a receipt not compacted now was not when the members
        // were read (they are whole), and one compacted since is held to its digest. The
        // listing's copy could be older than the members (a false member_missing).
        let receipt = match self.receipts.get(app, batch).await? {
            Some(fresh) => fresh,
            None => receipt.clone(),
        };
        let receipt = &receipt;
        let verifier = Verifier {
            store: self.ctx.store.as_ref(),
            spec: self.ctx.spec,
            depth: if self.opts.metadata_only {
                Depth::Head
            } else {
                Depth::Read
            },
            cold: match self.opts.thaw {
                Some(thaw) => ColdObjects::Thaw(thaw),
                None => ColdObjects::Metadata,
            },
        };
        let expected = Expected::of_receipt(self.ctx.spec, receipt, members);
        let mut verified = verifier.verify(&expected).await?;
        // Asked for by id and read in full: objects written again with the archived bytes (a
        // restore from versioning) are recorded under their new identity, with the evidence
        // (SPEC §5.17). Any other run reports them, saying so and how to record them.
        let asked = !self.opts.selection.batch_ids.is_empty();
        let not_recorded = match asked && verified.archived_bytes_under_new_identity() {
            true => self.record_versions(receipt, &mut verified).await?,
            false => None,
        };
        verified.explain_replaced(&receipt.batch_id, self.opts.metadata_only);
        if let Some(why) = not_recorded {
            for f in &mut verified.findings {
                if let Some(actual) = &mut f.actual {
                    actual.push_str(&format!(" (not recorded: {why})"));
                }
            }
        }
        self.record_check(receipt, &verified).await;
        Ok(verified)
    }

    /// Records the new identity of a batch read in full whose objects hold the archived bytes:
    /// its findings (`object_replaced`) are answered, and the record joins the run's. `Some`:
    /// why it was not recorded (the findings stay).
    async fn record_versions(
        &self,
        receipt: &Receipt,
        verified: &mut Verified,
    ) -> Result<Option<String>, AppError> {
        match versions::record_one(self.ctx, receipt, verified).await? {
            Recording::Recorded(record) => {
                tracing::info!(
                    app = record.app_code,
                    batch_id = record.batch_id,
                    old_data_version = record.old_data_version_id.as_deref().unwrap_or("none"),
                    new_data_version = record.new_data_version_id.as_deref().unwrap_or("none"),
                    "the batch's objects were written again with the archived bytes: their new versions are recorded"
                );
                verified.findings.clear();
                let mut run = self.run.lock().expect("not poisoned");
                run.recorded_versions.push(*record);
                Ok(None)
            }
            Recording::NotRecorded(why) => {
                tracing::warn!(
                    batch_id = receipt.batch_id,
                    why,
                    "new object versions not recorded"
                );
                Ok(Some(why))
            }
        }
    }

    /// Notes on the receipt what this check found, for `attest`: that its objects were just
    /// read in full and found whole, or — at any depth — that they were not, with the findings
    /// ([`note_findings`]; a check that found nothing without reading in full notes nothing).
    /// verify needs no write grant: without `UPDATE (full_verified_at_ms, full_verified_how)`
    /// on the receipts table the note is skipped, and said once.
    async fn record_check(&self, receipt: &Receipt, verified: &Verified) {
        use std::sync::atomic::{AtomicBool, Ordering};
        static SAID: AtomicBool = AtomicBool::new(false);
        if !verified.findings.is_empty() {
            note_findings(self.ctx, receipt, &verified.findings, "verify").await;
            return;
        }
        if self.opts.metadata_only || !verified.cold.is_empty() {
            return;
        }
        let recorded = self
            .ctx
            .tables
            .receipts
            .record_full_verification(
                &receipt.app_code,
                &receipt.batch_id,
                self.ctx.now(),
                verified.verified_by.as_str(),
            )
            .await;
        if let Err(e) = recorded {
            if !SAID.swap(true, Ordering::Relaxed) {
                tracing::warn!(error = %e, "could not note on the receipts when their batches were verified in full (attest reports the archive's own read-back instead); grant UPDATE (full_verified_at_ms, full_verified_how) on the receipts table to verify's user");
            }
        }
    }

    /// Delivered rows below the app's cursor and the cutoff whose version no receipt holds.
    async fn stragglers(&self, app: &str) -> Result<(Vec<Finding>, bool), DbError> {
        let Some(cursor) = self.receipts.latest_cursor(app).await? else {
            return Ok((Vec::new(), false));
        };
        let upper = self
            .opts
            .selection
            .to_ms
            .map_or(self.opts.cutoff_ms, |to| to.min(self.opts.cutoff_ms));
        let status = &self.opts.delivered_status;
        let limit = self.opts.max_stragglers;
        let (found, more) = self
            .pages
            .stragglers(app, status, &cursor, upper, limit)
            .await?;
        let findings = found
            .into_iter()
            .map(|c| Finding {
                kind: FindingKind::Straggler,
                batch_id: None,
                key: None,
                event_id: Some(c.event_id),
                expected: Some(format!(
                    "a member of a receipt (the app's cursor is {cursor})"
                )),
                actual: Some(format!(
                    "a delivered row at updated_at_ms {} whose version no receipt holds; run `outbox-archiver archive --app {app} --stragglers`",
                    c.updated_at_ms
                )),
                seq: None,
            })
            .collect();
        Ok((findings, more))
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum OrphanError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a verify run looks at beyond its apps' receipts: the orphans under each listed app's
/// prefix, or under the whole table's (not when the run was stopped: a stopped run starts
/// nothing more, nor with a sample), and whether `--store` points at the archive at all. The
/// run's error, if either says one.
pub(crate) async fn around(
    ctx: &RunContext,
    opts: &VerifyOptions,
    which: &Apps,
    listed: &[String],
    run: &mut VerifyRun,
) -> Option<String> {
    let mut error = None;
    let stopped = ctx.stop_reason(None).is_some();
    if opts.selection.whole_apps() && opts.sample_percent.is_none() && !stopped {
        let table = format::table_prefix(ctx.store.location().prefix(), ctx.spec.name);
        // Under the apps' own spellings: what their keys hold.
        let prefixes = match which {
            Apps::Listed(_) => listed
                .iter()
                .map(|app| format::app_prefix(&table, app))
                .collect(),
            _ => vec![table.clone()],
        };
        for prefix in prefixes {
            if let Err(e) = orphans_under(ctx, &table, &prefix, &mut run.orphans).await {
                error = Some(format!("listing {prefix}: {e}"));
            }
        }
    }
    if let Some(wrong) = wrong_location(ctx, run).await {
        // Not data loss to escalate: a store setting that points elsewhere.
        run.findings.clear();
        error = Some(wrong);
    }
    error
}

/// When every batch checked is missing its objects and nothing at all lies under the table's
/// prefix, `--store` points elsewhere (another bucket, a prefix one level off): one error that
/// names the setting, instead of a `missing_object` finding per object.
async fn wrong_location(ctx: &RunContext, run: &VerifyRun) -> Option<String> {
    if run.checked_batches.is_empty()
        || run
            .findings
            .iter()
            .any(|f| f.kind != FindingKind::MissingObject)
    {
        return None;
    }
    let missing: std::collections::HashSet<&str> = run
        .findings
        .iter()
        .filter_map(|f| f.batch_id.as_deref())
        .collect();
    if missing.len() as u64 != run.checked_batch_count {
        return None;
    }
    let table = format::table_prefix(ctx.store.location().prefix(), ctx.spec.name);
    let empty = match ctx.store.list_pages(&table).next().await {
        None => true,
        Some(Ok(keys)) => keys.is_empty(),
        Some(Err(_)) => false,
    };
    if !empty {
        return None;
    }
    Some(format!(
        "none of the {} batches checked has an object in the store, and nothing lies under {table} at {}: --store / OUTBOX_ARCHIVER_STORE most likely names another bucket or prefix than the archive was written to (the receipts' keys look like {}). If it is the right one, the archive is gone: escalate",
        run.checked_batch_count,
        ctx.store.location(),
        run.findings.first().and_then(|f| f.key.as_deref()).unwrap_or("?")
    ))
}

/// Appends to `orphans` the keys under `prefix` (within the table's prefix `table`) that no
/// receipt references. The keys come in lexicographic order, a page at a time, so each app's
/// `dt=` partitions come in date order; the app's receipts come in cursor order, so the same
/// partitions in the same order. The two are walked side by side, one partition at a time:
/// memory is one partition's keys, never the archive's.
async fn orphans_under(
    ctx: &RunContext,
    table: &format::Prefix,
    prefix: &format::Prefix,
    orphans: &mut Vec<String>,
) -> Result<(), OrphanError> {
    let receipts = &ctx.tables.receipts;
    // The keys outside the apps' that are not orphans: the logs (the log audit's to account
    // for), the linear chains of older builds (a log's transition record names them) and the
    // archive's marker (its home's: every command reads it).
    let (logs, chains, marker) = (
        format::logs_prefix(table),
        table.folder("_chain"),
        format::home_marker_key(table),
    );
    let mut pages = ctx.store.list_pages(prefix);
    let mut current: Option<(String, Partitions<'_>)> = None;
    while let Some(page) = pages.next().await {
        for key in page? {
            let Some((app, day)) = format::app_and_day(table, key.as_str()) else {
                let checkpoint = logs.relative(key.as_str()).is_some()
                    || (chains.relative(key.as_str()).is_some()
                        && log::legacy::is_checkpoint_key(key.as_str()));
                if !checkpoint && key != marker {
                    orphans.push(key.into());
                }
                continue;
            };
            if current.as_ref().is_none_or(|(a, _)| a != app) {
                let scope = ReceiptScope {
                    apps: vec![app.to_string()],
                    ..ReceiptScope::default()
                };
                let partitions = Partitions::new(receipts, scope);
                current = Some((app.to_string(), partitions));
            }
            let (_, partitions) = current.as_mut().expect("set above");
            if !partitions.references(day, key.as_str()).await? {
                orphans.push(key.into());
            }
        }
    }
    Ok(())
}

type ReceiptStream<'a> = BoxStream<'a, Result<Receipt, DbError>>;

/// One app's receipts, read one `dt=` partition at a time in date order, with the keys each
/// partition's receipts reference.
struct Partitions<'a> {
    receipts: std::pin::Pin<Box<futures_util::stream::Peekable<ReceiptStream<'a>>>>,
    /// The day loaded, and the keys its receipts reference.
    day: Option<String>,
    referenced: HashSet<String>,
    exhausted: bool,
}

impl<'a> Partitions<'a> {
    fn new(receipts: &'a Receipts, scope: ReceiptScope) -> Self {
        let stream = receipts.stream(scope).boxed();
        Partitions {
            receipts: Box::pin(stream.peekable()),
            day: None,
            referenced: HashSet::new(),
            exhausted: false,
        }
    }

    /// Whether a receipt references `key`, in partition `day` (days asked in order).
    async fn references(&mut self, day: &str, key: &str) -> Result<bool, DbError> {
        while !self.exhausted && self.day.as_deref().is_none_or(|loaded| loaded < day) {
            self.load_next_day().await?;
        }
        Ok(self.day.as_deref() == Some(day) && self.referenced.contains(key))
    }

    async fn load_next_day(&mut self) -> Result<(), DbError> {
        self.referenced.clear();
        self.day = None;
        let Some(first) = self.receipts.next().await.transpose()? else {
            self.exhausted = true;
            return Ok(());
        };
        let day = format::day_of_key(first.keys.data.as_str()).to_string();
        self.take(first);
        loop {
            match self.receipts.as_mut().peek().await {
                Some(Ok(next)) if format::day_of_key(next.keys.data.as_str()) == day => {}
                _ => break,
            }
            if let Some(next) = self.receipts.next().await.transpose()? {
                self.take(next);
            }
        }
        self.day = Some(day);
        Ok(())
    }

    fn take(&mut self, receipt: Receipt) {
        self.referenced.extend([
            receipt.keys.data.into(),
            receipt.keys.manifest.into(),
            receipt.keys.success.into(),
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::sampled;

    #[test]
    fn sampling_is_a_pure_function_of_seed_and_batch() {
        let ids: Vec<String> = (0..2000).map(|i| format!("{i:032x}")).collect();
        let pick = |seed| {
            ids.iter()
                .filter(|id| sampled(seed, id, 10.0))
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(pick(7), pick(7));
        assert_ne!(pick(7), pick(8));
        let n = pick(7).len();
        assert!((140..260).contains(&n), "about 10%: {n}");
        assert!(ids.iter().all(|id| sampled(1, id, 100.0)));
        assert!(!ids.iter().any(|id| sampled(1, id, 0.0)));
    }
}
