//! The `steady` step: purge as a CronJob runs it, beside pt-archiver as an operator would run it
//! for the same job. The `restore` step purges every row of the table, which lets pt-archiver
//! walk the primary key and empty each page at once; in production the table holds the days
//! within the grace period too, and a run deletes the oldest of them — random event ids spread
//! over the whole key. Here the table's 60 days are archived up to the end of the sixth (a tenth
//! of the rows), those batches purged, and pt-archiver deletes the same rows — `status =
//! 'DELIVERED' AND updated_at_ms < the sixth day's end` — from copies of the table: through the
//! retention index (the rows purge deletes, in the same order) and through the primary key
//! (pt-archiver's default, which reads every row of the table to find them).

use sqlx::{AssertSqlSafe, Executor};

use super::{
    flush_dirty_pages, pt_archiver_purge, Bench, Runner, Table, CUTOFF_MS, PASSWORD, USER,
};

/// The end of the sixth of the seeded 60 days: a tenth of the rows lie before it.
const DAY_SIX_MS: i64 = CUTOFF_MS - 54 * 86_400_000;

pub async fn run(table: &mut Table, runner: &Runner<'_>, bench: &Bench, pt: bool) {
    let server = runner.server;
    let cutoff = DAY_SIX_MS.to_string();
    let (prefix, _) = runner.run(
        table,
        "archive --all-apps (the oldest 6 of 60 days)",
        bench,
        &["archive", "--all-apps", "--cutoff", &cutoff],
    );
    let copies: Vec<(&str, &str)> = if pt {
        vec![
            ("wallet_outbox_by_retention", "idx_wallet_outbox_retention"),
            ("wallet_outbox_by_primary", "PRIMARY"),
        ]
    } else {
        Vec::new()
    };
    let mut admin = server.admin().await;
    let db = bench.database;
    for (copy, _) in &copies {
        for sql in [
            format!("DROP TABLE IF EXISTS {db}.{copy}"),
            format!("CREATE TABLE {db}.{copy} LIKE {db}.wallet_outbox"),
            format!("INSERT INTO {db}.{copy} SELECT * FROM {db}.wallet_outbox"),
        ] {
            admin.execute(AssertSqlSafe(sql)).await.unwrap();
        }
    }
    // The copies' pages are written out before purge is measured, and purge's before each
    // pt-archiver run: a step's database CPU is then its own.
    flush_dirty_pages(&mut admin).await;
    let digests = std::env::var("BENCH_DIGESTS").is_ok_and(|v| v == "1");
    if digests {
        // performance_schema on (MySQL's default): where purge's statement time goes.
        let _ = admin
            .execute("TRUNCATE TABLE performance_schema.events_statements_summary_by_digest")
            .await;
    }
    runner.again(
        table,
        "purge --grace 0s (the oldest 6 of 60 days)",
        bench,
        &prefix,
        &["purge", "--all-apps", "--grace", "0s"],
    );
    let purge_line = table.lines.len() - 1;
    let purged = table.lines[purge_line].rows;
    if digests {
        statement_digests(table, &mut admin, db, purged).await;
    }
    let left = six_days_left(&mut admin, db, "wallet_outbox").await;
    assert_eq!(left, 0, "purge left rows of the six days");
    for (copy, index) in &copies {
        let source = format!(
            "h=127.0.0.1,P={},u={USER},p={PASSWORD},D={db},t={copy},i={index}",
            server.port
        );
        let selected = format!("status = 'DELIVERED' AND updated_at_ms < {cutoff}");
        flush_dirty_pages(&mut admin).await;
        let (before, child) = pt_archiver_purge(server.pid, &source, &selected);
        let left = six_days_left(&mut admin, db, copy).await;
        assert_eq!(left, 0, "pt-archiver left rows of the six days in {copy}");
        table.add_external(
            &format!("pt-archiver --purge --bulk-delete, i={index} (no proof)"),
            &before,
            &child,
            purged,
            0,
        );
        if index.starts_with("idx") {
            table.lines[purge_line].against = Some(table.lines.len() - 1);
        }
    }
    // The copies go, and the source table is seeded again by the next step that needs it.
    for (copy, _) in &copies {
        admin
            .execute(AssertSqlSafe(format!("DROP TABLE {db}.{copy}")))
            .await
            .unwrap();
    }
    admin
        .execute(AssertSqlSafe(format!(
            "ALTER TABLE {db}.wallet_outbox COMMENT = ''"
        )))
        .await
        .unwrap();
}

/// The rows of `table` (in `db`) from the six days purged.
async fn six_days_left(admin: &mut sqlx::MySqlConnection, db: &str, table: &str) -> i64 {
    sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM {db}.{table} WHERE updated_at_ms < {DAY_SIX_MS}"
    )))
    .fetch_one(admin)
    .await
    .unwrap()
}

/// The statements of `db` since the digests were emptied, by time (performance_schema's digest
/// summary): per statement shape its count, its time per purged row, rows examined and affected.
async fn statement_digests(
    table: &mut Table,
    admin: &mut sqlx::MySqlConnection,
    db: &str,
    rows: u64,
) {
    type Digest = (String, u64, f64, u64, u64);
    let found: Result<Vec<Digest>, _> = sqlx::query_as(
        "SELECT LEFT(DIGEST_TEXT, 110), COUNT_STAR, SUM_TIMER_WAIT / 1e12, SUM_ROWS_EXAMINED, SUM_ROWS_AFFECTED \
         FROM performance_schema.events_statements_summary_by_digest \
         WHERE SCHEMA_NAME = ? ORDER BY SUM_TIMER_WAIT DESC LIMIT 10",
    )
    .bind(db)
    .fetch_all(admin)
    .await;
    let Ok(found) = found else {
        table.note("statement digests: performance_schema is off".into());
        return;
    };
    for (text, count, seconds, examined, affected) in found {
        table.note(format!(
            "purge's statements: {count} × `{text}`: {:.1} µs per purged row, {examined} rows examined, {affected} affected",
            seconds * 1e6 / rows.max(1) as f64
        ));
    }
}
