//! `verify` — scrubs the archive (SPEC §6): re-reads the objects of receipts in scope (all, some
//! apps, a time range, listed batch ids, or a reproducible random sample) and compares them with
//! their receipts and members; looks for stragglers (delivered rows below an app's cursor that no
//! receipt owns) and for orphans (objects no receipt references).
//!
//! Findings are data: exit 0 when clean, 1 when anything was found, 2 when it could not run.
//! Orphans are listed as information (an interrupted run leaves them) and do not fail the run.

use std::collections::{BTreeMap, HashSet};

use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use serde_json::json;

use super::archive::{resolve_apps, Apps};
use super::Env;
use crate::check::{Checker, Finding, FindingKind};
use crate::db::receipts::{ReceiptQueries, ReceiptScope, StoredReceipt};
use crate::db::source::PageQueries;
use crate::db::DbError;
use crate::digest::sha256_hex;
use crate::format;
use crate::progress::Progress;
use crate::store::StoreError;
use crate::summary::{AppReport, Outcome, Summary};

#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// `None`: every app that has receipts or rows.
    pub apps: Option<Apps>,
    pub batch_ids: Vec<String>,
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
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
}

impl VerifyOptions {
    /// Every receipt of every app, read in full; stragglers looked for below `cutoff_ms`.
    pub fn everything(cutoff_ms: i64, delivered_status: &str) -> VerifyOptions {
        VerifyOptions {
            apps: None,
            batch_ids: Vec::new(),
            from_ms: None,
            to_ms: None,
            sample_percent: None,
            seed: 0,
            metadata_only: false,
            parallel: 4,
            cutoff_ms,
            delivered_status: delivered_status.to_string(),
            max_stragglers: 1000,
        }
    }
}

/// Whether the sample with `seed` includes a batch: a pure function, so the same seed picks the
/// same receipts every time.
pub fn sampled(seed: u64, batch_id: &str, percent: f64) -> bool {
    let hash = sha256_hex(format!("{seed}:{batch_id}").as_bytes());
    let point = u64::from_str_radix(&hash[..12], 16).expect("hex") % 1_000_000;
    (point as f64) < percent * 10_000.0
}

#[derive(Default)]
struct AppTally {
    batches: u64,
    rows: u64,
    error: Option<String>,
    stragglers: u64,
}

pub async fn run(env: &Env, opts: &VerifyOptions) -> Summary {
    let before = env.store_stats();
    let mut summary = Summary::new("verify");
    summary.table = Some(env.spec.name.to_string());
    summary.store = Some(env.store.location().to_string());
    summary.cutoff_ms = Some(opts.cutoff_ms);
    let receipts_q = ReceiptQueries::new(env.spec);
    let pool = &env.db.pool;

    let listed = match &opts.apps {
        Some(Apps::Listed(list)) => list.clone(),
        _ => Vec::new(),
    };
    let scope = ReceiptScope {
        apps: listed.clone(),
        batch_ids: opts.batch_ids.clone(),
        from_ms: opts.from_ms,
        to_ms: opts.to_ms,
        unpurged_verified_before: None,
        include_restored: false,
    };
    let mut tally: BTreeMap<String, AppTally> = BTreeMap::new();
    let whole_apps = opts.batch_ids.is_empty() && opts.from_ms.is_none() && opts.to_ms.is_none();
    // Listed apps are reported even with nothing to check; with --batch-id alone, the apps of
    // the batches checked.
    if !listed.is_empty() || opts.batch_ids.is_empty() {
        match app_list(env, &receipts_q, opts).await {
            Ok(apps) => tally.extend(apps.into_iter().map(|a| (a, AppTally::default()))),
            Err(e) => return Summary::unusable("verify", e.to_string()),
        }
    }

    // Receipts stream past a page at a time, in cursor order: memory is the receipts being
    // checked (`--parallel`), never the archive's whole list.
    let total = if Progress::on_terminal() {
        receipts_q.count(pool, &scope).await.ok()
    } else {
        None
    };
    let mut progress = Progress::new("verify", "batches", total);
    let checker = Checker {
        store: env.store.as_ref(),
        spec: env.spec,
        metadata_only: opts.metadata_only,
    };
    let mut findings: Vec<Finding> = Vec::new();
    let mut checked: Vec<String> = Vec::new();
    let mut in_scope = 0u64;
    let mut listing_error = None;
    {
        let chosen = receipts_q
            .stream(pool, scope.clone())
            .filter_map(|receipt| {
                in_scope += 1;
                let keep = match &receipt {
                    Ok(r) => opts
                        .sample_percent
                        .is_none_or(|p| sampled(opts.seed, &r.batch_id, p)),
                    Err(_) => true,
                };
                std::future::ready(keep.then_some(receipt))
            });
        let results = chosen
            .map(|receipt| {
                let (checker, receipts_q) = (&checker, &receipts_q);
                async move {
                    let receipt = receipt.map_err(Failure::Db)?;
                    let members = receipts_q
                        .proven_members_of(pool, &receipt.app_code, &receipt.batch_id)
                        .await
                        .map_err(Failure::Db);
                    let result = match members {
                        Ok(members) => checker
                            .check(&receipt, &members)
                            .await
                            .map_err(Failure::Store),
                        Err(e) => Err(e),
                    };
                    Ok::<_, Failure>((receipt, result))
                }
            })
            .buffer_unordered(opts.parallel.max(1));
        futures_util::pin_mut!(results);
        while let Some(next) = results.next().await {
            let (receipt, result) = match next {
                Ok(checked) => checked,
                Err(e) => {
                    listing_error = Some(e.to_string());
                    break;
                }
            };
            let app = tally.entry(receipt.app_code.clone()).or_default();
            match result {
                Ok(found) => {
                    app.batches += 1;
                    app.rows += receipt.content.row_count;
                    checked.push(receipt.batch_id.clone());
                    findings.extend(found);
                }
                Err(e) => {
                    tracing::error!(batch_id = receipt.batch_id, error = %e, "could not check batch");
                    app.error
                        .get_or_insert_with(|| format!("batch {}: {e}", receipt.batch_id));
                }
            }
            progress.advance(1, &format!(", {} findings", findings.len()));
        }
    }
    progress.finish();

    // Gaps and leftovers are looked for only when the scope is whole apps.
    let mut truncated = Vec::new();
    if opts.batch_ids.is_empty() {
        let pages = PageQueries::new(env.spec);
        let upper = opts
            .to_ms
            .map_or(opts.cutoff_ms, |to| to.min(opts.cutoff_ms));
        for (app, t) in tally.iter_mut() {
            if crate::appcode::validate(app).is_err() {
                continue; // never archived, so nothing of it to verify
            }
            match stragglers(
                env,
                &pages,
                &receipts_q,
                app,
                &opts.delivered_status,
                upper,
                opts.max_stragglers,
            )
            .await
            {
                Ok((found, more)) => {
                    t.stragglers = found.len() as u64;
                    if more {
                        truncated.push(app.clone());
                    }
                    findings.extend(found);
                }
                Err(e) => {
                    t.error.get_or_insert(e.to_string());
                }
            }
        }
    }

    // Orphans: under each listed app's prefix, or under the whole table's prefix.
    let mut orphans = Vec::new();
    if whole_apps && opts.sample_percent.is_none() {
        let table = format::table_prefix(env.store.location().prefix(), env.spec.name);
        let prefixes = match &opts.apps {
            Some(Apps::Listed(list)) => list
                .iter()
                .map(|app| format!("{table}app_code={app}/"))
                .collect(),
            _ => vec![table.clone()],
        };
        for prefix in prefixes {
            if let Err(e) = orphans_under(env, &receipts_q, &table, &prefix, &mut orphans).await {
                listing_error = Some(format!("listing {prefix}: {e}"));
            }
        }
    }
    summary.error = listing_error;
    let could_not_look = summary.error.is_some() || tally.values().any(|t| t.error.is_some());
    summary.apps = tally
        .into_iter()
        .map(|(app, t)| {
            let mut report = AppReport::new(
                &app,
                if t.error.is_some() {
                    Outcome::Failed
                } else {
                    Outcome::Done
                },
            );
            report.batches = t.batches;
            report.rows = t.rows;
            report.error = t.error;
            let mut details = serde_json::Map::new();
            details.insert("stragglers".into(), json!(t.stragglers));
            report.details = Some(details);
            report
        })
        .collect();
    findings.sort_by(|a, b| {
        (&a.batch_id, &a.key, &a.event_id).cmp(&(&b.batch_id, &b.key, &b.event_id))
    });
    checked.sort();
    let mut details = serde_json::Map::new();
    details.insert("metadata_only".into(), json!(opts.metadata_only));
    if let Some(percent) = opts.sample_percent {
        details.insert(
            "sample".into(),
            json!({"percent": percent, "seed": opts.seed, "of": in_scope}),
        );
    }
    details.insert("checked_batches".into(), json!(checked));
    details.insert("findings".into(), json!(findings));
    if !truncated.is_empty() {
        details.insert("stragglers_truncated".into(), json!(truncated));
    }
    details.insert("orphans".into(), json!(orphans));
    summary.details = Some(details);
    if could_not_look {
        summary.exit_code = 2;
    } else if !findings.is_empty() {
        summary.exit_code = 1;
    }
    summary.store_requests = env.store_activity(&before);
    summary.settle()
}

#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error(transparent)]
    Db(DbError),
    #[error(transparent)]
    Store(StoreError),
}

/// The apps a run looks at for stragglers: those listed, else every app with rows or receipts.
async fn app_list(
    env: &Env,
    receipts: &ReceiptQueries,
    opts: &VerifyOptions,
) -> Result<Vec<String>, DbError> {
    match &opts.apps {
        Some(Apps::Listed(list)) => Ok(list.clone()),
        _ => {
            let mut apps = resolve_apps(env, &Apps::All).await?;
            apps.extend(receipts.apps_with_receipts(&env.db.pool).await?);
            apps.sort();
            apps.dedup();
            Ok(apps)
        }
    }
}

async fn stragglers(
    env: &Env,
    pages: &PageQueries,
    receipts: &ReceiptQueries,
    app: &str,
    status: &str,
    upper_ms: i64,
    limit: usize,
) -> Result<(Vec<Finding>, bool), DbError> {
    let Some(cursor) = receipts.latest_cursor(&env.db.pool, app).await? else {
        return Ok((Vec::new(), false));
    };
    let (found, more) = pages
        .stragglers(&env.db.pool, app, status, &cursor, upper_ms, limit)
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
        })
        .collect();
    Ok((findings, more))
}

#[derive(Debug, thiserror::Error)]
enum OrphanError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Appends to `orphans` the keys under `prefix` (within the table's prefix `table`) that no
/// receipt references. The keys come in lexicographic order, a page at a time, so each app's
/// `dt=` partitions come in date order; the app's receipts come in cursor order, so the same
/// partitions in the same order. The two are walked side by side, one partition at a time:
/// memory is one partition's keys, never the archive's.
async fn orphans_under(
    env: &Env,
    receipts: &ReceiptQueries,
    table: &str,
    prefix: &str,
    orphans: &mut Vec<String>,
) -> Result<(), OrphanError> {
    let mut pages = env.store.list_pages(prefix);
    let mut current: Option<(String, Partitions<'_>)> = None;
    while let Some(page) = pages.next().await {
        for key in page? {
            let Some((app, day)) = app_and_day(table, &key) else {
                orphans.push(key);
                continue;
            };
            if current.as_ref().is_none_or(|(a, _)| a != app) {
                let scope = ReceiptScope {
                    apps: vec![app.to_string()],
                    ..ReceiptScope::default()
                };
                current = Some((
                    app.to_string(),
                    Partitions::new(receipts, &env.db.pool, scope),
                ));
            }
            let (_, partitions) = current.as_mut().expect("set above");
            if !partitions.references(day, &key).await? {
                orphans.push(key);
            }
        }
    }
    Ok(())
}

/// The app code and the `dt=` day of a key `{table}app_code={app}/dt={day}/…`.
fn app_and_day<'k>(table: &str, key: &'k str) -> Option<(&'k str, &'k str)> {
    let rest = key.strip_prefix(table)?.strip_prefix("app_code=")?;
    let (app, rest) = rest.split_once('/')?;
    let day = rest.strip_prefix("dt=")?.split('/').next()?;
    Some((app, day))
}

type ReceiptStream<'a> = BoxStream<'a, Result<StoredReceipt, DbError>>;

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
    fn new(receipts: &'a ReceiptQueries, pool: &'a sqlx::MySqlPool, scope: ReceiptScope) -> Self {
        let stream = receipts.stream(pool, scope).boxed();
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
        let day = day_of(&first).to_string();
        self.take(first);
        loop {
            match self.receipts.as_mut().peek().await {
                Some(Ok(next)) if day_of(next) == day => {}
                _ => break,
            }
            if let Some(next) = self.receipts.next().await.transpose()? {
                self.take(next);
            }
        }
        self.day = Some(day);
        Ok(())
    }

    fn take(&mut self, receipt: StoredReceipt) {
        self.referenced.extend([
            receipt.keys.data,
            receipt.keys.manifest,
            receipt.keys.success,
        ]);
    }
}

/// The `dt=` day of a receipt's objects.
fn day_of(receipt: &StoredReceipt) -> &str {
    receipt
        .keys
        .data
        .split('/')
        .find_map(|segment| segment.strip_prefix("dt="))
        .unwrap_or_default()
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
