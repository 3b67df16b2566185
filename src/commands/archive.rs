//! `archive` — the CronJob (SPEC §6): for each app, take the advisory lock, resume from the newest
//! VERIFIED receipt, cut delivered rows below the cutoff into bounded batches, publish each
//! (write-once puts + read-back verification), and record its receipt and members atomically.
//! Repeats until caught up, a limit is reached, or shutdown is requested (checked between
//! batches, so a batch is never left half-recorded).

use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::batch::{BatchEncoder, EncodedBatch, Limits, Offer};
use crate::db::lock::AppLock;
use crate::db::receipts::{Cut, Receipt, ReceiptQueries, RecordError, Superseded};
use crate::db::runs;
use crate::db::source::{all_apps, Backlog, PageQueries, RowStream, Source};
use crate::db::DbError;
use crate::failpoint::FailPoints;
use crate::format::{self, Cursor};
use crate::progress::Progress;
use crate::publish::{PublishError, Publisher};
use crate::shard::Shard;
use crate::store::ConditionalPut;
use crate::summary::{app_span, AppReport, BatchReport, Outcome, Summary};
use crate::table::TableSpec;
use tracing::Instrument;

use super::Env;

/// Which apps a command works on.
#[derive(Debug, Clone)]
pub enum Apps {
    Listed(Vec<String>),
    All,
    /// Every app whose hash falls in this shard (`--all-apps --shard I/N`).
    Shard(Shard),
}

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
    pub failpoints: FailPoints,
}

/// Why an app's run failed.
#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Publish(#[from] PublishError),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("encoding batch: {0}")]
    Encode(String),
    #[error("batch {0} already has a VERIFIED receipt although its rows lie after the cursor; nothing written — run `outbox-archiver verify --batch-id {0}`")]
    AlreadyRecorded(String),
}

impl AppError {
    fn is_transient(&self) -> bool {
        match self {
            AppError::Db(e) | AppError::Record(RecordError::Db(e)) => e.is_transient(),
            // A restart or failover drops the lock with the connection. Another attempt goes
            // back through the gate: it takes the lock anew, or reports the app skipped if
            // another process has it.
            AppError::Record(RecordError::LockLost { .. }) => true,
            _ => false,
        }
    }
}

/// Resolves `--app`/`--all-apps` to app codes (the source table's, found by index dives).
pub async fn resolve_apps(env: &Env, apps: &Apps) -> Result<Vec<String>, DbError> {
    match apps {
        Apps::Listed(list) => {
            let mut seen = std::collections::HashSet::new();
            Ok(list
                .iter()
                .filter(|app| seen.insert(app.as_str()))
                .cloned()
                .collect())
        }
        Apps::All => all_apps(&env.db.pool, env.spec).await,
        Apps::Shard(shard) => {
            let mut apps = all_apps(&env.db.pool, env.spec).await?;
            apps.retain(|app| shard.contains(app));
            Ok(apps)
        }
    }
}

pub async fn run(env: &Env, opts: &ArchiveOptions) -> Summary {
    let before = env.store_stats();
    let mut summary = Summary::new("archive");
    summary.table = Some(env.spec.name.to_string());
    summary.store = Some(env.store.location().to_string());
    summary.dry_run = Some(opts.dry_run);
    summary.cutoff_ms = Some(opts.cutoff_ms);
    let apps = match resolve_apps(env, &opts.apps).await {
        Ok(apps) => apps,
        Err(e) => {
            return Summary {
                error: Some(e.to_string()),
                ..summary
            }
            .settle()
        }
    };
    if !opts.dry_run && !apps.is_empty() {
        // SPEC §5.11: whether the store refuses a create-only put at an existing key is found
        // out, not assumed, before anything is written.
        let probe = format::conditional_put_probe_key(env.store.location().prefix());
        match env.store.probe_conditional_put(&probe).await {
            Ok(ConditionalPut::Native) => {}
            Ok(found) => summary.conditional_put = Some(found),
            Err(e) => {
                let error = format!(
                    "probing whether the store refuses create-only puts (If-None-Match) at {probe}: {e} \
                     (a store that rejects the header: set --s3-conditional-put false)"
                );
                if e.is_configuration() {
                    return Summary::unusable("archive", error);
                }
                return Summary {
                    error: Some(error),
                    ..summary
                }
                .settle();
            }
        }
    }
    let deadline = opts.max_runtime.map(|d| Instant::now() + d);
    let worker = Worker {
        env,
        opts,
        pages: PageQueries::new(env.spec),
        receipts: ReceiptQueries::new(env.spec),
        deadline,
    };
    for app in apps {
        let started_at_ms = (env.now_ms)();
        let report = env
            .with_db_retries(&app, opts.db_retries, deadline, || worker.app(&app))
            .instrument(app_span(&app))
            .await;
        if !opts.dry_run {
            runs::note(
                &env.db.pool,
                env.spec,
                "archive",
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

struct Worker<'a> {
    env: &'a Env,
    opts: &'a ArchiveOptions,
    pages: PageQueries,
    receipts: ReceiptQueries,
    deadline: Option<Instant>,
}

impl Worker<'_> {
    async fn app(&self, app: &str) -> AppReport {
        let (mut report, lock) = match self
            .env
            .enter_app(
                &self.opts.lock_prefix,
                app,
                self.opts.dry_run,
                AppReport::new(app, Outcome::UpToDate),
            )
            .await
        {
            Ok(entered) => entered,
            Err(report) => return report,
        };
        let result = self.archive(app, lock.as_ref(), &mut report).await;
        if let Some(lock) = lock {
            lock.release().await;
        }
        match result {
            Ok(outcome) => {
                report.outcome = outcome;
                if !self.opts.stragglers {
                    self.note_backlog(app, &mut report).await;
                }
            }
            Err(e) => {
                tracing::error!(app, error = %e, "archiving failed");
                report.outcome = Outcome::Failed;
                report.error = Some(e.to_string());
                report.transient = e.is_transient();
                report.lost_lock = matches!(e, AppError::Record(RecordError::LockLost { .. }));
            }
        }
        report
    }

    /// Delivered rows of `app` below the cutoff after `after`: one index range count.
    async fn backlog(&self, app: &str, after: Option<&Cursor>) -> Result<Backlog, DbError> {
        self.pages
            .backlog(
                &self.env.db.pool,
                app,
                &self.opts.delivered_status,
                after,
                self.opts.cutoff_ms,
            )
            .await
    }

    /// The terminal's progress line for `app`; on a terminal, it counts the backlog first
    /// (one index range count) to give a total and an ETA.
    async fn progress(&self, app: &str, source: &Source) -> Result<Progress, AppError> {
        let label = format!("archive {app}");
        let total = match source {
            Source::After(after) if Progress::on_terminal() => {
                Some(self.backlog(app, after.as_ref()).await?.rows.max(0) as u64)
            }
            _ => None,
        };
        Ok(Progress::new(label, "rows", total))
    }

    /// What is left after the run — delivered rows below the cutoff after the cursor, and the age
    /// of the oldest — so every archive run reports (and exports) the backlog an operator alerts
    /// on, not only `status`. One index range count; a failure to count is logged, not fatal.
    async fn note_backlog(&self, app: &str, report: &mut AppReport) {
        match self.backlog(app, report.cursor_after.as_ref()).await {
            Ok(backlog) => {
                let now = (self.env.now_ms)();
                let details = report.details.get_or_insert_with(Default::default);
                details.insert("backlog_rows".into(), backlog.rows.into());
                details.insert(
                    "oldest_backlog_age_ms".into(),
                    backlog.oldest_ms.map(|ms| now - ms).into(),
                );
            }
            Err(e) => tracing::warn!(app, error = %e, "could not count the backlog left"),
        }
    }

    fn stop_reason(&self, batches: u64) -> Option<&'static str> {
        let max_batches = self.opts.max_batches.is_some_and(|max| batches >= max);
        match self.env.stop_reason(None) {
            Some(shutdown) => Some(shutdown),
            None if max_batches => Some("--max-batches reached"),
            None => self.env.stop_reason(self.deadline),
        }
    }

    async fn archive(
        &self,
        app: &str,
        lock: Option<&AppLock>,
        report: &mut AppReport,
    ) -> Result<Outcome, AppError> {
        let env = self.env;
        let pool = &env.db.pool;
        let cursor = self.receipts.latest_cursor(pool, app).await?;
        report.cursor_before = cursor.clone();
        report.cursor_after = cursor.clone();
        let source = match (self.opts.stragglers, cursor) {
            // Stragglers lie at or below the cursor; their batches never move it.
            (true, Some(upto)) => Source::Stragglers { upto },
            (true, None) => return Ok(Outcome::UpToDate),
            (false, cursor) => Source::After(cursor),
        };
        let mut progress = self.progress(app, &source).await?;
        let rows = RowStream::spawn(
            pool.clone(),
            self.pages.clone(),
            app.to_string(),
            self.opts.delivered_status.clone(),
            source,
            self.opts.cutoff_ms,
            self.opts.failpoints.clone(),
        );
        let mut batches =
            spawn_builder(rows, env.spec, app, self.opts.limits, self.opts.gzip_level);
        let cut = if self.opts.stragglers {
            Cut::Stragglers
        } else {
            Cut::AfterCursor
        };
        let mut superseded: Vec<Superseded> = Vec::new();
        let mut superseded_rows = 0u64;
        let result = loop {
            if let Some(reason) = self.stop_reason(report.batches) {
                // The builder runs a batch ahead: whether it has one says if work is left.
                match batches.recv().await.transpose() {
                    Ok(Some(_)) => {
                        tracing::info!(app, reason, "stopping with work left");
                        report.stop_reason = Some(reason.to_string());
                        break Ok(Outcome::Stopped);
                    }
                    Ok(None) => break Ok(Outcome::UpToDate),
                    Err(e) => break Err(e),
                }
            }
            let Built { batch, read_ms } = match batches.recv().await.transpose() {
                Ok(Some(built)) => built,
                Ok(None) => break Ok(Outcome::UpToDate),
                Err(e) => break Err(e),
            };
            match self
                .batch(app, lock, batch, read_ms, cut, report, &mut progress)
                .await
            {
                Ok(older) => {
                    superseded_rows += older.len() as u64;
                    let room = SUPERSEDED_LISTED.saturating_sub(superseded.len());
                    superseded.extend(older.into_iter().take(room));
                }
                Err(e) => break Err(e),
            }
        };
        if superseded_rows > 0 {
            let details = report.details.get_or_insert_with(Default::default);
            details.insert("superseded_rows".into(), superseded_rows.into());
            details.insert(
                "superseded".into(),
                serde_json::to_value(&superseded).expect("serialisable"),
            );
        }
        let outcome = result?;
        Ok(match outcome {
            Outcome::UpToDate if report.batches > 0 => Outcome::Archived,
            other => other,
        })
    }

    /// Publishes and records one batch (plans it, in a dry run); returns the older versions of
    /// rows it superseded.
    #[allow(clippy::too_many_arguments)]
    async fn batch(
        &self,
        app: &str,
        lock: Option<&AppLock>,
        batch: EncodedBatch,
        read_ms: u64,
        cut: Cut,
        report: &mut AppReport,
        progress: &mut Progress,
    ) -> Result<Vec<Superseded>, AppError> {
        let env = self.env;
        let pool = &env.db.pool;
        let mut superseded = Vec::new();
        let started = Instant::now();
        let batch_id = format::batch_id(env.spec.name, app, &batch.content);
        let (mut publish_ms, mut record_ms) = (0, 0);
        let (keys, data) = match lock {
            None => {
                // Dry run: plan only.
                let docs = format::documents(
                    env.store.location().prefix(),
                    env.spec.name,
                    app,
                    &batch.content,
                    &batch.gzip_digest,
                );
                (docs.keys, batch.gzip_digest.clone())
            }
            Some(lock) => {
                if self.receipts.exists(pool, app, &batch_id).await? {
                    return Err(AppError::AlreadyRecorded(batch_id));
                }
                let publisher = Publisher {
                    store: env.store.as_ref(),
                    spec: env.spec,
                    app_code: app,
                    failpoints: &self.opts.failpoints,
                };
                let phase = Instant::now();
                let published = publisher.publish(&batch).await?;
                publish_ms = phase.elapsed().as_millis() as u64;
                let receipt = Receipt {
                    app_code: app.to_string(),
                    batch_id: batch_id.clone(),
                    keys: published.docs.keys.clone(),
                    content: batch.content.clone(),
                    data: published.data.clone(),
                    manifest: published.manifest.clone(),
                    success: published.success.clone(),
                    data_crc64nvme: Some(published.data_crc64nvme),
                    verified_at_ms: (env.now_ms)(),
                };
                let phase = Instant::now();
                superseded = self
                    .receipts
                    .record(
                        pool,
                        &receipt,
                        &batch.members,
                        cut,
                        lock,
                        &self.opts.failpoints,
                    )
                    .await?;
                record_ms = phase.elapsed().as_millis() as u64;
                if !superseded.is_empty() {
                    tracing::warn!(
                        app,
                        batch_id,
                        rows = superseded.len(),
                        first_event_id = superseded[0].event_id,
                        "rows archived before came back delivered with a new updated_at_ms; \
                         this batch's versions supersede the older ones (purge deletes the new \
                         version; verify and restore keep the old one as its batch's)"
                    );
                }
                report.replaced_objects.extend(published.replaced);
                report.adopted_objects.extend(published.adopted);
                (published.docs.keys, published.data)
            }
        };
        let c = &batch.content;
        tracing::info!(
            app,
            batch_id,
            rows = c.row_count,
            first = %c.first,
            last = %c.last,
            uncompressed_bytes = c.uncompressed_bytes,
            compressed_bytes = data.size,
            millis = started.elapsed().as_millis() as u64 + read_ms,
            read_ms,
            publish_ms,
            record_ms,
            dry_run = self.opts.dry_run,
            "{}",
            if self.opts.dry_run { "batch planned" } else { "batch archived and recorded" }
        );
        report.batches += 1;
        report.rows += c.row_count;
        progress.advance(c.row_count, &format!(", {} batches", report.batches));
        if !self.opts.stragglers {
            report.cursor_after = Some(c.last.clone());
        }
        report.batch_list.push(BatchReport {
            batch_id,
            rows: c.row_count,
            first_cursor: c.first.clone(),
            last_cursor: c.last.clone(),
            data_object_key: keys.data,
            uncompressed_bytes: c.uncompressed_bytes,
            compressed_bytes: data.size,
        });
        Ok(superseded)
    }
}

/// At most this many superseded rows are listed in an app's summary (all are counted).
const SUPERSEDED_LISTED: usize = 100;

/// A batch and how long reading and encoding it took.
struct Built {
    batch: EncodedBatch,
    read_ms: u64,
}

/// Cuts the app's rows into batches one batch ahead of the caller, so reading and compressing
/// batch N+1 overlaps publishing and recording batch N. Memory: at most the batch being built,
/// one waiting, and the one being published. Dropping the receiver stops it.
fn spawn_builder(
    mut rows: RowStream,
    spec: &'static TableSpec,
    app: &str,
    limits: Limits,
    gzip_level: u32,
) -> mpsc::Receiver<Result<Built, AppError>> {
    let (tx, rx) = mpsc::channel(1);
    let app = app.to_string();
    tokio::spawn(
        async move {
            loop {
                let started = Instant::now();
                let built = build(&mut rows, spec, &app, limits, gzip_level).await;
                let done = !matches!(built, Ok(Some(_)));
                let item = built.transpose().map(|r| {
                    r.map(|batch| Built {
                        batch,
                        read_ms: started.elapsed().as_millis() as u64,
                    })
                });
                if let Some(item) = item {
                    if tx.send(item).await.is_err() {
                        return;
                    }
                }
                if done {
                    return;
                }
            }
        }
        .in_current_span(),
    );
    rx
}

/// Takes rows until the batch is full or the app is caught up; `None` when there were none.
async fn build(
    rows: &mut RowStream,
    spec: &'static TableSpec,
    app: &str,
    limits: Limits,
    gzip_level: u32,
) -> Result<Option<EncodedBatch>, AppError> {
    let mut encoder = BatchEncoder::new(spec, app, limits, gzip_level);
    while !encoder.is_full() {
        let Some(row) = rows.peek().await? else { break };
        match encoder.offer(row).map_err(AppError::Encode)? {
            Offer::Taken => rows.advance(),
            Offer::Full => break,
        }
    }
    encoder.finish().map_err(AppError::Encode)
}
