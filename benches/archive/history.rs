//! The `history` step: what one cron run costs after years of them. Per history size, a fresh
//! database and store prefix: one real batch archived, then `n` batches of history made directly
//! (`testkit::history`: receipts copied in the database, spread five minutes apart over the years
//! before yesterday, and appended to the app's log), then measured — each as the binary runs
//! it — one archive run of one batch, one purge run, `verify --metadata-only`, `attest` of
//! yesterday, and the auditor's script on the store's folder: wall time, S3 requests by
//! operation, rows the database read (its `Handler_read_*` counters), peak RSS.

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use outbox_archiver::testing::LocalS3;
use outbox_archiver::testing::{seed, EventIds, SeedPlan};
use outbox_archiver::WALLET_OUTBOX;
use sqlx::{AssertSqlSafe, Executor};

use super::{measured, settle, Runner, Server, CUTOFF, CUTOFF_MS, PASSWORD, USER};

const DATABASE: &str = "outbox_archiver_bench_history";
const APP: &str = "wallet-sg";
/// A cron run every five minutes.
const SPACING_MS: i64 = 300_000;

struct Line {
    history: u64,
    step: &'static str,
    wall: f64,
    ops: serde_json::Value,
    rows_read: u64,
    peak_mib: f64,
}

/// The rows the server's storage engines have handed out so far (every `Handler_read_*`
/// counter: index dives, range and table scans alike).
async fn rows_read(server: &Server) -> u64 {
    let mut admin = server.admin().await;
    let counters: Vec<(String, String)> = sqlx::query_as("SHOW GLOBAL STATUS LIKE 'Handler_read%'")
        .fetch_all(&mut admin)
        .await
        .unwrap();
    counters
        .iter()
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum()
}

/// A fresh database with 300 delivered rows of one app and the archiver's tables.
async fn prepare(server: &Server) -> outbox_archiver::Db {
    let mut admin = server.admin().await;
    for sql in [
        format!("DROP DATABASE IF EXISTS {DATABASE}"),
        format!("CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4"),
        format!("CREATE USER IF NOT EXISTS '{USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'"),
        format!("GRANT ALL PRIVILEGES ON {DATABASE}.* TO '{USER}'@'127.0.0.1'"),
    ] {
        admin.execute(AssertSqlSafe(sql)).await.unwrap();
    }
    let db = outbox_archiver::Db::connect(&server.url(DATABASE), 4)
        .await
        .unwrap();
    outbox_archiver::create_source_table(&db.pool, &WALLET_OUTBOX)
        .await
        .unwrap();
    outbox_archiver::migrate_database(&db.pool).await.unwrap();
    let plan = SeedPlan {
        apps: vec![APP.into()],
        rows: 300,
        start_ms: CUTOFF_MS - 86_400_000,
        end_ms: CUTOFF_MS,
        delivered_percent: 100,
        seed: 7,
        event_ids: EventIds::Random,
    };
    seed::seed(&db.pool, &WALLET_OUTBOX, &plan).await.unwrap();
    db
}

pub async fn run(server: &Server, s3: &LocalS3, runner: &Runner<'_>, dir: &std::path::Path) {
    let sizes: Vec<u64> = std::env::var("BENCH_HISTORY")
        .unwrap_or_else(|_| "10,10000,1000000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let now = chrono::Utc::now().timestamp_millis();
    let yesterday = outbox_archiver::utc_date(now - 86_400_000);
    // Yesterday noon: the newest batch of history; the rest five minutes apart before it.
    let end_ms = (now / 86_400_000 - 1) * 86_400_000 + 43_200_000;
    let mut lines = Vec::new();
    for n in sizes {
        let db = prepare(server).await;
        let prefix = format!("s3://bench/history{n}");
        let env = |args: &[&str]| -> Command {
            let mut c = Command::new(&runner.binary);
            c.args(args)
                .args(["--store", &prefix])
                .env("DATABASE_URL", server.url(DATABASE))
                .env("OUTBOX_ARCHIVER_S3_ENDPOINT", &runner.endpoint)
                .env("AWS_ACCESS_KEY_ID", "bench-key")
                .env("AWS_SECRET_ACCESS_KEY", "bench-secret")
                .env("AWS_REGION", "us-east-1")
                .env("OUTBOX_ARCHIVER_LOG", "warn");
            c
        };
        let one_batch = [
            "archive",
            "--app",
            APP,
            "--batch-rows",
            "100",
            "--max-batches",
            "1",
            "--cutoff",
            CUTOFF,
        ];
        let first = measured(&mut env(&one_batch));
        assert!(first.success, "{}", String::from_utf8_lossy(&first.stdout));
        // The history.
        let started = Instant::now();
        let store = outbox_archiver::open_store(
            outbox_archiver::Location::parse(&prefix).unwrap(),
            &s3.settings(),
        )
        .await
        .unwrap();
        let ctx = outbox_archiver::RunContext::new(
            &WALLET_OUTBOX,
            db.clone(),
            store,
            tokio_util::sync::CancellationToken::new(),
            Arc::new(move || now),
        );
        let made = outbox_archiver::testing::synthesize(&ctx, APP, n)
            .await
            .unwrap();
        db.pool
            .execute(AssertSqlSafe(format!(
                "UPDATE wallet_outbox_archive_receipts SET verified_at_ms = {end_ms} - ({} - chain_seq) * {SPACING_MS}",
                n + 1
            )))
            .await
            .unwrap();
        println!(
            "history of {made} batches made in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        db.close().await;
        let purge = ["purge", "--app", APP, "--grace", "0s"];
        let verify = [
            "verify",
            "--app",
            APP,
            "--metadata-only",
            "--cutoff",
            CUTOFF,
        ];
        let attest = [
            "attest", "--app", APP, "--from", &yesterday, "--to", &yesterday,
        ];
        let steps: [(&'static str, &[&str]); 4] = [
            ("archive one batch", &one_batch),
            ("purge it", &purge),
            ("verify --metadata-only", &verify),
            ("attest one day", &attest),
        ];
        for (step, args) in steps {
            settle(server.pid);
            let before = rows_read(server).await;
            let t = Instant::now();
            let child = measured(&mut env(args));
            let wall = t.elapsed().as_secs_f64();
            let summary: serde_json::Value =
                serde_json::from_slice(&child.stdout).unwrap_or_default();
            lines.push(Line {
                history: n,
                step,
                wall,
                ops: summary["store_requests"]["by_operation"].clone(),
                rows_read: rows_read(server).await - before,
                peak_mib: child.peak_kib as f64 / 1024.0,
            });
        }
        let t = Instant::now();
        let folder = dir.join("bench").join(format!("history{n}"));
        let script = Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/deploy/audit-chain.py"
            ))
            .arg(&folder)
            .arg("wallet_outbox")
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&script.stdout);
        println!(
            "audit-chain.py: exit {:?}, {}",
            script.status.code(),
            out.lines()
                .find(|l| l.contains("tree of"))
                .unwrap_or_default()
        );
        lines.push(Line {
            history: n,
            step: "audit-chain.py (the store's folder)",
            wall: t.elapsed().as_secs_f64(),
            ops: serde_json::Value::Null,
            rows_read: 0,
            peak_mib: 0.0,
        });
    }
    println!();
    println!("| history (batches) | step | wall s | S3 GET | PUT | LIST | HEAD | DELETE | rows read | peak RSS MiB |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for l in &lines {
        let op = |o: &str| l.ops[o].as_u64().map_or("—".into(), |v| v.to_string());
        println!(
            "| {} | {} | {:.2} | {} | {} | {} | {} | {} | {} | {} |",
            l.history,
            l.step,
            l.wall,
            op("get"),
            op("put"),
            op("list"),
            op("head"),
            op("delete"),
            l.rows_read,
            match l.peak_mib {
                0.0 => "—".to_string(),
                m => format!("{m:.0}"),
            }
        );
    }
}
