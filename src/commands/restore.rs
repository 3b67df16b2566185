//! `restore` — loads archived batches back into a table (SPEC §6): selects receipts by batch id,
//! app and time range, verifies every object (as `verify`) before loading anything of a batch,
//! and inserts its rows byte-exact into `--into` (default `{table}_restored`, created like the
//! source). Idempotent; a row that exists with other content is a conflict, never overwritten,
//! and so is a row the server would store differently from the archive: every inserted row is
//! read back inside its transaction and compared whole with the archived line.
//! `--drill` restores each batch into a scratch table, compares its rows whole and its count,
//! totals and members with the receipt, records the result and drops the table.
//!
//! The live table only with `--into-source`, and then under the app's lock (the one `archive`
//! and `purge` take, confirmed before every commit), and a batch whose rows it puts back is
//! marked restored in the same transaction: purge never deletes its rows again on that receipt
//! (SPEC §5.9). Older versions of rows that a later batch superseded are not
//! loaded, except by a drill: the later batch holds the row as it is now.

use std::collections::{BTreeMap, HashSet};
use std::io::BufRead;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::StreamExt;

use serde_json::json;

use super::archive::Apps;
use super::Env;
use crate::check::Checker;
use crate::codec::{self, Row};
use crate::db::lock::AppLock;
use crate::db::receipts::{ReceiptQueries, ReceiptScope, StoredReceipt};
use crate::db::restore::{self as db_restore, Conflict, IntoSource, LoadError, RESTORE_CHUNK};
use crate::db::DbError;
use crate::store::{ByteStream, Location, ObjectMeta, ObjectStore, PutMode, StoreError};
use crate::summary::{app_span, AppReport, Outcome, Summary};
use tracing::Instrument;

#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// `None` or `All`: every app.
    pub apps: Option<Apps>,
    pub batch_ids: Vec<String>,
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
    /// Target table; default `{table}_restored`.
    pub into: Option<String>,
    /// Restore into the live source table (never overwriting a live row), under the app's lock.
    pub into_source: bool,
    pub drill: bool,
    /// Prepended to advisory lock names (as for archive and purge).
    pub lock_prefix: String,
}

#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Data(String),
    #[error(transparent)]
    Load(#[from] LoadError),
}

#[derive(Default)]
struct Tally {
    batches: u64,
    restored: u64,
    present: u64,
    /// Older versions of rows, superseded by a later batch, that were not loaded.
    superseded: u64,
    conflicts: Vec<Conflict>,
    failed: Vec<String>,
    drills: Vec<serde_json::Value>,
    error: Option<String>,
    /// The report of an app that could not be entered (skipped because locked, refused).
    gate: Option<AppReport>,
}

/// The app whose receipts are being restored, and its lock (`--into-source` only).
struct Current {
    app: String,
    lock: Option<AppLock>,
}

pub async fn run(env: &Env, opts: &RestoreOptions) -> Summary {
    let before = env.store_stats();
    let mut summary = Summary::new("restore");
    summary.table = Some(env.spec.name.to_string());
    let spec = env.spec;
    let target = match (&opts.into, opts.into_source) {
        (_, true) => spec.name.to_string(),
        // Table names compare without case on some servers (lower_case_table_names).
        (Some(into), false) if into.eq_ignore_ascii_case(spec.name) => {
            return Summary::unusable(
                "restore",
                format!(
                    "--into {into} is the live source table: pass --into-source to restore into it"
                ),
            )
        }
        (Some(into), false) => into.clone(),
        (None, false) => format!("{}_restored", spec.name),
    };
    if let Err(e) = db_restore::check_table_name(&target) {
        return Summary::unusable("restore", e);
    }
    let receipts_q = ReceiptQueries::new(spec);
    let scope = ReceiptScope {
        apps: match &opts.apps {
            Some(Apps::Listed(list)) => list.clone(),
            _ => Vec::new(),
        },
        batch_ids: opts.batch_ids.clone(),
        from_ms: opts.from_ms,
        to_ms: opts.to_ms,
        unpurged_verified_before: None,
        include_restored: false,
    };
    if !opts.drill && !opts.into_source {
        if let Err(e) = db_restore::create_like(&env.db.pool, spec, &target).await {
            return Summary::unusable("restore", e.to_string());
        }
    }
    let mut tally: BTreeMap<String, Tally> = BTreeMap::new();
    if let Some(Apps::Listed(list)) = &opts.apps {
        for app in list {
            tally.entry(app.clone()).or_default();
        }
    }
    let mut current: Option<Current> = None;
    let receipts = receipts_q.stream(&env.db.pool, scope);
    futures_util::pin_mut!(receipts);
    while let Some(receipt) = receipts.next().await {
        let receipt = match receipt {
            Ok(receipt) => receipt,
            Err(e) => {
                summary.error = Some(e.to_string());
                break;
            }
        };
        let app = receipt.app_code.clone();
        if current.as_ref().is_none_or(|c| c.app != app) {
            if let Some(done) = current.take().and_then(|c| c.lock) {
                done.release().await;
            }
            let t = tally.entry(app.clone()).or_default();
            let lock = if opts.into_source {
                // The same gate as archive and purge: restore and purge never work an app at once.
                match env
                    .enter_app(
                        &opts.lock_prefix,
                        &app,
                        false,
                        AppReport::new(&app, Outcome::Done),
                    )
                    .instrument(app_span(&app))
                    .await
                {
                    Ok((_, lock)) => lock,
                    Err(report) => {
                        t.gate = Some(report);
                        None
                    }
                }
            } else {
                None
            };
            current = Some(Current {
                app: app.clone(),
                lock,
            });
        }
        let t = tally.entry(app.clone()).or_default();
        if t.gate.is_some() {
            continue;
        }
        let table = if opts.drill {
            format!(
                "{}_drill_{}",
                spec.name,
                receipt.batch_id.get(..12).unwrap_or(&receipt.batch_id)
            )
        } else {
            target.clone()
        };
        let lock = current.as_ref().and_then(|c| c.lock.as_ref());
        let result = restore_batch(env, &receipts_q, &receipt, &table, opts.drill, lock, t)
            .instrument(app_span(&app))
            .await;
        if let Err(e) = result {
            tracing::error!(batch_id = receipt.batch_id, error = %e, "restore failed");
            t.error
                .get_or_insert_with(|| format!("batch {}: {e}", receipt.batch_id));
            t.failed.push(receipt.batch_id.clone());
            if matches!(e, Failure::Load(LoadError::LockLost { .. })) {
                // Nothing more of this app without its lock.
                let mut report = AppReport::new(&app, Outcome::Failed);
                report.error = t.error.clone();
                report.batches = t.batches;
                report.rows = t.restored;
                t.gate = Some(report);
            }
        }
    }
    if let Some(done) = current.take().and_then(|c| c.lock) {
        done.release().await;
    }
    let mut conflicted = false;
    summary.apps = tally
        .into_iter()
        .map(|(app, t)| {
            if let Some(report) = t.gate {
                return report;
            }
            let failed = !t.failed.is_empty() || t.error.is_some();
            conflicted |= !t.conflicts.is_empty();
            let mut report = AppReport::new(
                &app,
                if failed {
                    Outcome::Failed
                } else {
                    Outcome::Done
                },
            );
            report.batches = t.batches;
            report.rows = t.restored;
            report.error = t.error;
            let mut d = serde_json::Map::new();
            d.insert("restored_rows".into(), json!(t.restored));
            d.insert("already_present_rows".into(), json!(t.present));
            d.insert("superseded_rows".into(), json!(t.superseded));
            d.insert(
                "conflicts".into(),
                json!(t
                    .conflicts
                    .iter()
                    .map(|c| c.event_id.as_str())
                    .collect::<Vec<_>>()),
            );
            d.insert("conflict_details".into(), json!(t.conflicts));
            d.insert("failed_batches".into(), json!(t.failed));
            if opts.drill {
                d.insert("drills".into(), json!(t.drills));
            }
            report.details = Some(d);
            report
        })
        .collect();
    let mut details = serde_json::Map::new();
    details.insert(
        "into".into(),
        json!(if opts.drill { None } else { Some(target) }),
    );
    details.insert("drill".into(), json!(opts.drill));
    summary.details = Some(details);
    if conflicted {
        summary.exit_code = 1;
    }
    summary.store_requests = env.store_activity(&before);
    summary.settle()
}

/// Verifies one batch, then loads it (and, for a drill, compares and drops the scratch table).
/// `lock`: restoring into the live source table, under the app's lock; each chunk that puts rows
/// back marks the batch restored in its own transaction.
async fn restore_batch(
    env: &Env,
    receipts_q: &ReceiptQueries,
    receipt: &StoredReceipt,
    table: &str,
    drill: bool,
    lock: Option<&AppLock>,
    t: &mut Tally,
) -> Result<(), Failure> {
    let pool = &env.db.pool;
    let app = &receipt.app_code;
    let members = receipts_q.members_of(pool, app, &receipt.batch_id).await?;
    let superseded = receipts_q
        .superseded_of(pool, app, &receipt.batch_id)
        .await?;
    let mut proven = members.clone();
    proven.extend(superseded.iter().cloned());
    // The data object is fetched once: verified as it streams past, then loaded from those
    // very bytes.
    let remembering = Remembering::new(env.store.as_ref(), &receipt.keys.data);
    let checker = Checker {
        store: &remembering,
        spec: env.spec,
        metadata_only: false,
    };
    let findings = checker.check(receipt, &proven).await?;
    let now = (env.now_ms)();
    if let Some(first) = findings.first() {
        let detail = format!(
            "{} findings, first: {:?} {}",
            findings.len(),
            first.kind,
            first.key.as_deref().unwrap_or_default()
        );
        if drill {
            db_restore::record_drill(pool, env.spec, app, &receipt.batch_id, now, Some(&detail))
                .await?;
            t.drills
                .push(json!({"batch_id": receipt.batch_id, "ok": false, "detail": detail}));
        }
        return Err(Failure::Data(format!(
            "verification failed, nothing loaded: {detail}"
        )));
    }
    if drill {
        db_restore::drop_table(pool, table).await?;
        db_restore::create_like(pool, env.spec, table).await?;
    }
    let mut rows = decode_rows(env, receipt, remembering.take())?;
    if !drill && !superseded.is_empty() {
        // A later batch holds these rows as they are now.
        let older: HashSet<(&str, i64)> = superseded
            .iter()
            .map(|m| (m.event_id.as_str(), m.updated_at_ms))
            .collect();
        let layout = env.spec.layout();
        let before = rows.len();
        rows.retain(|r| {
            let key = (
                r[layout.event_id].as_str().unwrap_or_default(),
                r[layout.updated_at_ms].as_i64().unwrap_or_default(),
            );
            !older.contains(&key)
        });
        t.superseded += (before - rows.len()) as u64;
    }
    let mut conflicts = Vec::new();
    for chunk in rows.chunks(RESTORE_CHUNK) {
        let into_source = lock.map(|lock| IntoSource {
            lock,
            batch_id: &receipt.batch_id,
            now_ms: now,
        });
        let loaded = db_restore::load_chunk(pool, env.spec, table, app, chunk, into_source).await?;
        t.restored += loaded.inserted;
        t.present += loaded.present;
        conflicts.extend(loaded.conflicts);
    }
    if !conflicts.is_empty() {
        tracing::error!(
            batch_id = receipt.batch_id,
            conflicts = conflicts.len(),
            first_event_id = conflicts[0].event_id,
            first_reason = ?conflicts[0].reason,
            column = conflicts[0].column.as_deref().unwrap_or_default(),
            "rows not loaded: the table holds them with other content, or would store them differently from the archive"
        );
    }
    t.batches += 1;
    if drill {
        let facts = db_restore::table_facts(pool, env.spec, table).await?;
        let restored = db_restore::table_rows(pool, env.spec, table).await?;
        db_restore::drop_table(pool, table).await?;
        let mut want = members;
        want.extend(superseded);
        want.sort_by(|a, b| a.event_id.cmp(&b.event_id));
        let mut problems = Vec::new();
        if facts.rows != receipt.content.row_count {
            problems.push(format!(
                "row count {} != receipt {}",
                facts.rows, receipt.content.row_count
            ));
        }
        let totals: Vec<i128> = receipt.content.totals.iter().map(|(_, v)| *v).collect();
        if facts.totals != totals {
            problems.push(format!("totals {:?} != receipt {totals:?}", facts.totals));
        }
        if facts.members != want {
            problems.push("restored rows differ from the member list".to_string());
        }
        if let Some(difference) = db_restore::first_difference(env.spec, &rows, &restored) {
            problems.push(format!(
                "restored rows differ from the archive: {difference}"
            ));
        }
        let detail = (!problems.is_empty()).then(|| problems.join("; "));
        db_restore::record_drill(
            pool,
            env.spec,
            app,
            &receipt.batch_id,
            now,
            detail.as_deref(),
        )
        .await?;
        t.drills
            .push(json!({"batch_id": receipt.batch_id, "ok": detail.is_none(), "detail": detail}));
        if let Some(detail) = detail {
            return Err(Failure::Data(format!("drill failed: {detail}")));
        }
    }
    t.conflicts.extend(conflicts);
    Ok(())
}

/// The rows of a batch's data object (bounded by the batch size) from the bytes verification
/// read in full and found to hash to the receipt.
fn decode_rows(
    env: &Env,
    receipt: &StoredReceipt,
    verified: Option<Vec<u8>>,
) -> Result<Vec<Row>, Failure> {
    let key = &receipt.keys.data;
    let bytes = verified.ok_or_else(|| {
        Failure::Data(format!(
            "{key} was not read in full during verification; nothing loaded"
        ))
    })?;
    let reader = std::io::BufReader::new(flate2::read::GzDecoder::new(&bytes[..]));
    let mut rows = Vec::with_capacity(receipt.content.row_count as usize);
    for (i, line) in reader.split(b'\n').enumerate() {
        let line = line.map_err(|e| Failure::Data(format!("{key}: {e}")))?;
        rows.push(
            codec::decode_line(env.spec, &line, i as u64 + 1)
                .map_err(|e| Failure::Data(format!("{key}: {e}")))?,
        );
    }
    Ok(rows)
}

/// A store that keeps the bytes of one key as they stream past, so restore loads exactly the
/// data object it has just verified, without fetching it twice. The bytes are kept only when the
/// stream was read to its end.
#[derive(Debug)]
struct Remembering<'a> {
    inner: &'a dyn ObjectStore,
    key: String,
    bytes: Arc<Mutex<Option<Vec<u8>>>>,
}

impl<'a> Remembering<'a> {
    fn new(inner: &'a dyn ObjectStore, key: &str) -> Remembering<'a> {
        Remembering {
            inner,
            key: key.to_string(),
            bytes: Arc::default(),
        }
    }

    fn take(&self) -> Option<Vec<u8>> {
        self.bytes.lock().expect("not poisoned").take()
    }
}

#[async_trait::async_trait]
impl ObjectStore for Remembering<'_> {
    fn location(&self) -> &Location {
        self.inner.location()
    }

    async fn confirm_access(&self) -> Result<(), StoreError> {
        self.inner.confirm_access().await
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, StoreError> {
        self.inner.head(key).await
    }

    async fn get(&self, key: &str) -> Result<Option<ByteStream>, StoreError> {
        let Some(stream) = self.inner.get(key).await? else {
            return Ok(None);
        };
        if key != self.key {
            return Ok(Some(stream));
        }
        let slot = self.bytes.clone();
        let kept =
            futures_util::stream::unfold(Some((stream, Vec::new(), slot)), |state| async move {
                let (mut stream, mut buf, slot) = state?;
                match stream.next().await {
                    Some(Ok(chunk)) => {
                        buf.extend_from_slice(&chunk);
                        Some((Ok(chunk), Some((stream, buf, slot))))
                    }
                    Some(Err(e)) => Some((Err(e), None)),
                    None => {
                        *slot.lock().expect("not poisoned") = Some(buf);
                        None
                    }
                }
            });
        Ok(Some(kept.boxed()))
    }

    async fn put(&self, key: &str, body: Bytes, mode: PutMode) -> Result<(), StoreError> {
        self.inner.put(key, body, mode).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.inner.list(prefix).await
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.inner.delete(key).await
    }
}
