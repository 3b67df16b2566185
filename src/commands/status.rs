//! `status` — per app: the cursor and its age, receipts and archived rows, the backlog below the
//! cutoff (rows and oldest age), rows archived and not yet purged, rows superseded by a newer
//! version and batches restored into the source, and the last run's outcome.
//!
//! Cheap on a 100M-row table: the backlog is one index range count and one index dive on the
//! retention index; everything else reads the receipts (one row per batch) and the runs table.

use serde_json::json;
use sqlx::AssertSqlSafe;

use super::archive::Apps;
use super::Clock;
use crate::db::receipts::{ReceiptQueries, STATE_VERIFIED};
use crate::db::source::PageQueries;
use crate::db::{runs, Context, Db, DbError};
use crate::summary::{AppReport, Outcome, Summary};
use crate::table::TableSpec;
use crate::timespec;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
}

#[derive(Debug, Clone)]
pub struct StatusOptions {
    pub apps: Apps,
    pub cutoff_ms: i64,
    pub delivered_status: String,
    pub format: Format,
}

pub async fn run(
    db: &Db,
    spec: &'static TableSpec,
    opts: &StatusOptions,
    now_ms: Clock,
) -> Summary {
    let mut summary = Summary::new("status");
    summary.table = Some(spec.name.to_string());
    summary.cutoff_ms = Some(opts.cutoff_ms);
    let now = now_ms();
    let apps = match apps(db, spec, &opts.apps).await {
        Ok(apps) => apps,
        Err(e) => return Summary::unusable("status", e.to_string()),
    };
    let receipts = ReceiptQueries::new(spec);
    let pages = PageQueries::new(spec);
    for app in apps {
        let mut report = AppReport::new(&app, Outcome::Done);
        match app_status(db, spec, &receipts, &pages, &app, opts, now).await {
            Ok((receipt_count, archived, details)) => {
                report.batches = receipt_count;
                report.rows = archived;
                report.details = Some(details);
            }
            Err(e) => {
                report.outcome = Outcome::Failed;
                report.error = Some(e.to_string());
            }
        }
        summary.apps.push(report);
    }
    if opts.format == Format::Table {
        summary.text = Some(table(&summary, now));
    }
    summary.settle()
}

/// Listed apps, or every app with rows or receipts.
async fn apps(db: &Db, spec: &'static TableSpec, apps: &Apps) -> Result<Vec<String>, DbError> {
    if let Apps::Listed(list) = apps {
        return Ok(list.clone());
    }
    let mut all = crate::db::source::all_apps(&db.pool, spec).await?;
    let sql = format!("SELECT DISTINCT app_code FROM {}", spec.receipts_table());
    let archived: Vec<String> = sqlx::query_scalar(AssertSqlSafe(sql))
        .fetch_all(&db.pool)
        .await
        .context(|| "listing archived apps".into())?;
    all.extend(archived);
    all.sort();
    all.dedup();
    Ok(all)
}

async fn app_status(
    db: &Db,
    spec: &'static TableSpec,
    receipts: &ReceiptQueries,
    pages: &PageQueries,
    app: &str,
    opts: &StatusOptions,
    now: i64,
) -> Result<(u64, u64, serde_json::Map<String, serde_json::Value>), DbError> {
    let pool = &db.pool;
    let cursor = receipts.latest_cursor(pool, app).await?;
    let sql = format!(
        "SELECT COUNT(*), CAST(COALESCE(SUM(row_count), 0) AS SIGNED), \
         CAST(COALESCE(SUM(CASE WHEN purged_at_ms IS NULL AND restored_at_ms IS NULL \
           THEN GREATEST(row_count - purged_rows - superseded_rows, 0) ELSE 0 END), 0) AS SIGNED), \
         CAST(COALESCE(SUM(superseded_rows), 0) AS SIGNED), CAST(COUNT(restored_at_ms) AS SIGNED) \
         FROM {} WHERE app_code = ? AND state = ?",
        spec.receipts_table()
    );
    // Awaiting purge: what purge may still delete — rows of receipts it has not finished and that
    // were not restored into the source, less what it deleted and the older versions a later
    // batch superseded (purged through that batch).
    let (count, archived, awaiting, superseded, restored): (i64, i64, i64, i64, i64) =
        sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(STATE_VERIFIED)
            .fetch_one(pool)
            .await
            .context(|| format!("summing the receipts of app {app}"))?;
    let backlog = pages
        .backlog(
            pool,
            app,
            &opts.delivered_status,
            cursor.as_ref(),
            opts.cutoff_ms,
        )
        .await?;
    let last_run = runs::last(pool, spec, app, "archive").await?;
    let last_purge = runs::last(pool, spec, app, "purge").await?;
    let last_drill = crate::db::restore::last_good_drill(pool, spec, app).await?;
    let details = json!({
        "cursor": cursor,
        "cursor_age_ms": cursor.as_ref().map(|c| now - c.updated_at_ms),
        "receipts": count,
        "archived_rows": archived,
        "awaiting_purge_rows": awaiting,
        "superseded_rows": superseded,
        "restored_batches": restored,
        "backlog_rows": backlog.rows,
        "oldest_backlog_ms": backlog.oldest_ms,
        "oldest_backlog_age_ms": backlog.oldest_ms.map(|ms| now - ms),
        "last_run": last_run,
        "last_purge": last_purge,
        "last_good_drill": last_drill.map(|(batch_id, at)| json!({"batch_id": batch_id, "drilled_at_ms": at})),
    });
    let serde_json::Value::Object(details) = details else {
        unreachable!("json! of an object")
    };
    Ok((count as u64, archived as u64, details))
}

fn age(ms: Option<i64>) -> String {
    let Some(ms) = ms else { return "-".into() };
    let s = ms / 1000;
    match s {
        _ if s < 120 => format!("{s}s"),
        _ if s < 7200 => format!("{}m", s / 60),
        _ if s < 172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// The human view: one line per app.
fn table(summary: &Summary, now: i64) -> String {
    let mut lines = vec![[
        "APP",
        "CURSOR",
        "CURSOR AGE",
        "RECEIPTS",
        "ARCHIVED",
        "AWAITING PURGE",
        "BACKLOG",
        "OLDEST BACKLOG",
        "LAST DRILL",
        "LAST RUN",
    ]
    .map(str::to_string)
    .to_vec()];
    for app in &summary.apps {
        let d = app.details.clone().unwrap_or_default();
        let int = |k: &str| d.get(k).and_then(|v| v.as_i64());
        let cursor = d
            .get("cursor")
            .and_then(|c| c.get("updated_at_ms"))
            .and_then(|v| v.as_i64())
            .map_or("-".to_string(), timespec::rfc3339);
        let last = d
            .get("last_run")
            .filter(|v| !v.is_null())
            .map_or("-".to_string(), |r| {
                format!(
                    "{} {} ago",
                    r["outcome"].as_str().unwrap_or("?"),
                    age(r["finished_at_ms"].as_i64().map(|f| now - f))
                )
            });
        let drill = d
            .get("last_good_drill")
            .and_then(|r| r["drilled_at_ms"].as_i64())
            .map_or("-".to_string(), |at| format!("{} ago", age(Some(now - at))));
        let error = app.error.as_deref().map(|e| format!("error: {e}"));
        lines.push(vec![
            app.app_code.clone(),
            cursor,
            age(int("cursor_age_ms")),
            int("receipts").map_or("-".into(), |v| v.to_string()),
            int("archived_rows").map_or("-".into(), |v| v.to_string()),
            int("awaiting_purge_rows").map_or("-".into(), |v| v.to_string()),
            int("backlog_rows").map_or("-".into(), |v| v.to_string()),
            age(int("oldest_backlog_age_ms")),
            drill,
            error.unwrap_or(last),
        ]);
    }
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in lines {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::age;

    #[test]
    fn ages() {
        assert_eq!(age(None), "-");
        assert_eq!(age(Some(59_000)), "59s");
        assert_eq!(age(Some(3_600_000)), "60m");
        assert_eq!(age(Some(86_400_000)), "24h");
        assert_eq!(age(Some(8 * 86_400_000)), "8d");
    }
}
