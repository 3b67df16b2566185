//! `restore` — loads archived batches back into a table (SPEC §6): selects receipts by batch id,
//! app and time range, verifies every object (as `verify`) before loading anything of a batch,
//! and inserts its rows byte-exact into `--into` (default `{table}_restored`, created like the
//! source). Idempotent; a row that exists with other content is a conflict, never overwritten.
//! `--drill` restores each batch into a scratch table, compares count, totals and members with
//! the receipt, records the result and drops the table. The live table only with `--into-source`.

use std::collections::BTreeMap;
use std::io::BufRead;

use serde_json::json;

use super::archive::Apps;
use super::Env;
use crate::check::Checker;
use crate::codec::{self, Row};
use crate::db::receipts::{ReceiptQueries, ReceiptScope, StoredReceipt};
use crate::db::restore::{self as db_restore, RESTORE_CHUNK};
use crate::db::DbError;
use crate::store::{self, StoreError};
use crate::summary::{AppReport, Outcome, Summary};

#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// `None` or `All`: every app.
    pub apps: Option<Apps>,
    pub batch_ids: Vec<String>,
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
    /// Target table; default `{table}_restored`.
    pub into: Option<String>,
    /// Restore into the live source table (never overwriting a live row).
    pub into_source: bool,
    pub drill: bool,
}

#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Data(String),
}

#[derive(Default)]
struct Tally {
    batches: u64,
    restored: u64,
    present: u64,
    conflicts: Vec<String>,
    failed: Vec<String>,
    drills: Vec<serde_json::Value>,
    error: Option<String>,
}

pub async fn run(env: &Env, opts: &RestoreOptions) -> Summary {
    let before = env.store_stats();
    let mut summary = Summary::new("restore");
    summary.table = Some(env.spec.name.to_string());
    let spec = env.spec;
    let target = match (&opts.into, opts.into_source) {
        (_, true) => spec.name.to_string(),
        (Some(into), false) if into == spec.name => {
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
    };
    let receipts = match receipts_q.list(&env.db.pool, &scope).await {
        Ok(r) => r,
        Err(e) => return Summary::unusable("restore", e.to_string()),
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
    for receipt in &receipts {
        let t = tally.entry(receipt.app_code.clone()).or_default();
        let table = if opts.drill {
            format!(
                "{}_drill_{}",
                spec.name,
                receipt.batch_id.get(..12).unwrap_or(&receipt.batch_id)
            )
        } else {
            target.clone()
        };
        let result = restore_batch(env, &receipts_q, receipt, &table, opts.drill, t).await;
        if let Err(e) = result {
            tracing::error!(batch_id = receipt.batch_id, error = %e, "restore failed");
            t.error
                .get_or_insert_with(|| format!("batch {}: {e}", receipt.batch_id));
            t.failed.push(receipt.batch_id.clone());
        }
    }
    summary.apps = tally
        .into_iter()
        .map(|(app, t)| {
            let failed = !t.failed.is_empty() || t.error.is_some();
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
            d.insert("conflicts".into(), json!(t.conflicts));
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
    if summary.apps.iter().any(|a| {
        a.details
            .as_ref()
            .is_some_and(|d| d["conflicts"].as_array().is_some_and(|c| !c.is_empty()))
    }) {
        summary.exit_code = 1;
    }
    summary.store_requests = env.store_activity(&before);
    summary.settle()
}

/// Verifies one batch, then loads it (and, for a drill, compares and drops the scratch table).
async fn restore_batch(
    env: &Env,
    receipts_q: &ReceiptQueries,
    receipt: &StoredReceipt,
    table: &str,
    drill: bool,
    t: &mut Tally,
) -> Result<(), Failure> {
    let pool = &env.db.pool;
    let members = receipts_q
        .members_of(pool, &receipt.app_code, &receipt.batch_id)
        .await?;
    let checker = Checker {
        store: env.store.as_ref(),
        spec: env.spec,
        metadata_only: false,
    };
    let findings = checker.check(receipt, &members).await?;
    let now = (env.now_ms)();
    if let Some(first) = findings.first() {
        let detail = format!(
            "{} findings, first: {:?} {}",
            findings.len(),
            first.kind,
            first.key.as_deref().unwrap_or_default()
        );
        if drill {
            db_restore::record_drill(
                pool,
                env.spec,
                &receipt.app_code,
                &receipt.batch_id,
                now,
                Some(&detail),
            )
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
    let rows = read_rows(env, receipt).await?;
    for chunk in rows.chunks(RESTORE_CHUNK) {
        let loaded =
            db_restore::load_chunk(pool, env.spec, table, &receipt.app_code, chunk).await?;
        t.restored += loaded.inserted;
        t.present += loaded.present;
        t.conflicts.extend(loaded.conflicts);
    }
    t.batches += 1;
    if drill {
        let facts = db_restore::table_facts(pool, env.spec, table).await?;
        db_restore::drop_table(pool, table).await?;
        let mut want = members;
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
        let detail = (!problems.is_empty()).then(|| problems.join("; "));
        db_restore::record_drill(
            pool,
            env.spec,
            &receipt.app_code,
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
    Ok(())
}

/// The rows of a batch's data object (bounded by the batch size), after verification.
async fn read_rows(env: &Env, receipt: &StoredReceipt) -> Result<Vec<Row>, Failure> {
    let key = &receipt.keys.data;
    let bytes = store::get_all(env.store.as_ref(), key)
        .await?
        .ok_or_else(|| Failure::Data(format!("{key} disappeared")))?;
    // Load exactly the bytes the receipt vouches for, even if the object changed since it was
    // verified a moment ago.
    let digest = crate::digest::ObjectDigest::of(&bytes);
    if digest != receipt.data {
        return Err(Failure::Data(format!(
            "{key} changed after it was verified (now {} bytes, sha256 {}); nothing loaded",
            digest.size, digest.sha256
        )));
    }
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
