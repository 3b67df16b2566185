//! A synthetic history, made quickly for the tests and benchmarks that measure what a run costs
//! after years of cron runs: `n` receipts copied from one of the app's real ones (each its own
//! batch id, chain seq and manifest hash; marked purged, so only their place in the history is
//! new), then appended to the app's log as archive appends its own — in the database and the
//! store as `n` archive runs of one batch each would leave them, without running archive `n`
//! times. The copies name the template's objects: `verify` reads them as the template's.

use crate::db::Context;
use crate::model::digest::sha256_hex;
use crate::model::protection::WritePolicy;
use crate::pipeline::log::{self, LogError};
use crate::pipeline::RunContext;

/// Receipts copied per statement.
const CHUNK: u64 = 10_000;

/// Copies the app's first receipt `n` times after its last, and appends the copies to the app's
/// log. Returns the receipts made.
pub async fn synthesize(ctx: &RunContext, app: &str, n: u64) -> Result<u64, LogError> {
    let pool = &ctx.db.pool;
    let table = ctx.spec.receipts_table();
    let columns: Vec<(String,)> = crate::db::schema_rows(
        pool,
        "SELECT CAST(column_name AS CHAR) FROM information_schema.columns \
         WHERE table_schema = DATABASE() AND table_name = ? AND extra NOT LIKE '%GENERATED%' \
         ORDER BY ordinal_position",
        &[&table],
    )
    .await
    .context(|| "listing the receipts' columns".into())?;
    let (template, base): (String, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT CAST(MIN(batch_id) AS CHAR), MAX(chain_seq) FROM {table} WHERE app_code = ?"
    )))
    .bind(app)
    .fetch_one(pool)
    .await
    .context(|| "reading the template receipt".into())?;
    let select: Vec<String> = columns
        .iter()
        .map(|(c,)| match c.to_ascii_lowercase().as_str() {
            "batch_id" => {
                "CONCAT(LEFT(t.batch_id, 20), LOWER(LPAD(HEX(s.n), 12, '0')))".to_string()
            }
            "chain_seq" => format!("{base} + s.n"),
            "chain_link" => "SHA2(CONCAT(t.batch_id, s.n), 256)".to_string(),
            "log_index" => "NULL".to_string(),
            "purged_at_ms" => "t.verified_at_ms".to_string(),
            other => format!("t.`{other}`"),
        })
        .collect();
    let names: Vec<String> = columns.iter().map(|(c,)| format!("`{c}`")).collect();
    let mut made = 0;
    while made < n {
        let count = CHUNK.min(n - made);
        // The numbers made+1 ..= made+count, from four tables of digits (no recursive CTE: both
        // servers cap its depth at a thousand).
        let digits = "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)";
        let sql = format!(
            "INSERT INTO {table} ({}) \
             SELECT {} FROM {table} t JOIN (SELECT {} + a.d + 10 * b.d + 100 * c.d + 1000 * e.d AS n \
             FROM {digits} a, {digits} b, {digits} c, {digits} e) s \
             WHERE s.n <= {} AND t.app_code = ? AND t.batch_id = ?",
            names.join(", "),
            select.join(", "),
            made + 1,
            made + count,
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(crate::db::inline_values(
            &sql,
            &[app, &template],
        )))
        .execute(pool)
        .await
        .context(|| "copying the template receipt".into())?;
        made += count;
    }
    imply_manifests(ctx, app, base.max(0) as u64).await?;
    log::append(ctx, app, &WritePolicy::default(), None).await?;
    Ok(made)
}

/// Sets each copy's manifest hash (after chain seq `after_seq`) to the one its fields imply: its
/// batch id is in its manifest, so every copy's differs from its template's.
async fn imply_manifests(ctx: &RunContext, app: &str, after_seq: u64) -> Result<(), LogError> {
    let receipts = &ctx.tables.receipts;
    let (pool, table) = (&ctx.db.pool, ctx.spec.receipts_table());
    let mut after = after_seq;
    loop {
        let page = receipts.unlogged(app, after, 2_000).await?;
        let Some(last) = page.last() else { break };
        after = last.seq().unwrap_or(after);
        let mut cases = String::new();
        let mut ids = Vec::new();
        let mut values: Vec<String> = Vec::new();
        for r in &page {
            let implied = sha256_hex(&r.manifest(ctx.spec.name));
            cases.push_str("WHEN ? THEN ? ");
            values.push(r.batch_id.clone());
            values.push(implied);
            ids.push("?");
        }
        values.push(app.to_string());
        values.extend(page.iter().map(|r| r.batch_id.clone()));
        let sql = format!(
            "UPDATE {table} SET manifest_sha256 = CASE batch_id {cases}END \
             WHERE app_code = ? AND batch_id IN ({})",
            ids.join(", ")
        );
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        sqlx::raw_sql(sqlx::AssertSqlSafe(crate::db::inline_values(&sql, &refs)))
            .execute(pool)
            .await
            .context(|| "setting the copies' manifest hashes".into())?;
    }
    Ok(())
}
