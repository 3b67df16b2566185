//! Throughput and peak memory of `archive` on a large backlog, against pt-archiver on the same
//! rows. Not a test: it prints figures.
//!
//!     cargo bench --bench archive                 # 1,000,000 rows
//!     BENCH_ROWS=200000 cargo bench --bench archive
//!     BENCH_BATCH_ROWS=1000 cargo bench --bench archive   # many small batches (receipts)
//!     BENCH_BINARY=/path/to/outbox-archiver cargo bench --bench archive   # another build, A/B
//!     BENCH_STEPS=archive,verify cargo bench --bench archive   # only these (default: all)
//!
//! It (re)uses database `outbox_archiver_bench` on the local server (root over the unix socket,
//! or BENCH_SERVER_URL), seeds it once per row count, serves a real S3 endpoint from this process
//! (s3s-fs on a temp dir), and runs the release binary as a child process so the child's peak RSS
//! is the archiver's alone. If `pt-archiver` is installed it runs
//! `--no-delete --file` with `--limit 500 --txn-size 500` over the same rows for comparison.

use std::process::Command;
use std::time::Instant;

use outbox_archiver::local_s3::LocalS3;
use outbox_archiver::seed::{self, SeedPlan};
use outbox_archiver::table::WALLET_OUTBOX;
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Executor};

const DB: &str = "outbox_archiver_bench";
const USER: &str = "outbox_bench";
const PASSWORD: &str = "outbox_bench";

fn main() {
    let rows: u64 = std::env::var("BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(bench(rows));
}

async fn bench(rows: u64) {
    let server = std::env::var("BENCH_SERVER_URL")
        .unwrap_or_else(|_| outbox_archiver::commands::demo::DEFAULT_SERVER_URL.to_string());
    let mut admin = server
        .parse::<sqlx::mysql::MySqlConnectOptions>()
        .unwrap()
        .connect()
        .await
        .unwrap();
    let seeded: Option<String> = sqlx::query_scalar("SELECT table_comment FROM information_schema.tables WHERE table_schema = ? AND table_name = 'wallet_outbox'")
        .bind(DB)
        .fetch_optional(&mut admin)
        .await
        .unwrap();
    let marker = format!("bench rows={rows}");
    let url = format!("mysql://{USER}:{PASSWORD}@127.0.0.1:3306/{DB}");
    if seeded.as_deref() != Some(marker.as_str()) {
        for sql in [
            format!("DROP DATABASE IF EXISTS {DB}"),
            format!("CREATE DATABASE {DB} CHARACTER SET utf8mb4"),
            format!("CREATE USER IF NOT EXISTS '{USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'"),
            format!("GRANT ALL PRIVILEGES ON {DB}.* TO '{USER}'@'127.0.0.1'"),
        ] {
            admin.execute(AssertSqlSafe(sql)).await.unwrap();
        }
        let db = outbox_archiver::db::Db::connect(&url, 4).await.unwrap();
        outbox_archiver::db::migrate(&db.pool).await.unwrap();
        outbox_archiver::db::create_source_table(&db.pool, &WALLET_OUTBOX)
            .await
            .unwrap();
        let plan = SeedPlan {
            apps: vec!["wallet-cn".into(), "wallet-sg".into(), "fun.games".into()],
            rows,
            start_ms: 1_767_225_600_000 - 60 * 86_400_000,
            end_ms: 1_767_225_600_000,
            delivered_percent: 100,
            seed: 7,
        };
        let started = Instant::now();
        seed::seed(&db.pool, &WALLET_OUTBOX, &plan).await.unwrap();
        eprintln!(
            "seeded {rows} rows in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        db.pool
            .execute(AssertSqlSafe(format!(
                "ALTER TABLE wallet_outbox COMMENT = '{marker}'"
            )))
            .await
            .unwrap();
        db.close().await;
    } else {
        let db = outbox_archiver::db::Db::connect(&url, 2).await.unwrap();
        outbox_archiver::db::migrate(&db.pool).await.unwrap();
        db.close().await;
        admin
            .execute(AssertSqlSafe(format!(
                "DELETE FROM {DB}.wallet_outbox_archive_members"
            )))
            .await
            .unwrap();
        admin
            .execute(AssertSqlSafe(format!(
                "DELETE FROM {DB}.wallet_outbox_archive_receipts"
            )))
            .await
            .unwrap();
    }
    // A previous run's restored rows would count as already present: start from no table.
    admin
        .execute(AssertSqlSafe(format!(
            "DROP TABLE IF EXISTS {DB}.wallet_outbox_restored"
        )))
        .await
        .unwrap();
    admin.close().await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let s3 = LocalS3::start(dir.path(), "bench-key", "bench-secret")
        .await
        .unwrap();
    s3.create_bucket("bench").unwrap();
    // Each command's own peak RSS, from wait4 on its process.
    let last_peak = std::cell::Cell::new(0i64);
    let binary = std::env::var("BENCH_BINARY")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_outbox-archiver").to_string());
    println!("binary: {binary}");
    let run = |args: &[&str]| {
        let started = Instant::now();
        let (stdout, peak) = measured(
            Command::new(&binary)
                .args(args)
                .args(["--store", "s3://bench/archive"])
                .env("DATABASE_URL", &url)
                .env("OUTBOX_ARCHIVER_S3_ENDPOINT", &s3.endpoint)
                .env("AWS_ACCESS_KEY_ID", "bench-key")
                .env("AWS_SECRET_ACCESS_KEY", "bench-secret")
                .env("AWS_REGION", "us-east-1")
                .env("OUTBOX_ARCHIVER_LOG", "warn"),
        );
        last_peak.set(peak);
        let summary: serde_json::Value = serde_json::from_slice(&stdout).expect("a JSON summary");
        assert_eq!(summary["ok"], true, "{summary}");
        (started.elapsed().as_secs_f64(), summary)
    };
    let batch_rows = std::env::var("BENCH_BATCH_ROWS").unwrap_or_else(|_| "50000".into());
    let (elapsed, summary) = run(&[
        "archive",
        "--all-apps",
        "--cutoff",
        "1767225600000",
        "--batch-rows",
        &batch_rows,
    ]);
    let peak_kib = last_peak.get();
    let archived: u64 = summary["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["rows"].as_u64().unwrap())
        .sum();
    let batches: u64 = summary["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["batches"].as_u64().unwrap())
        .sum();
    let stored: u64 = walk_size(dir.path());
    println!(
        "outbox-archiver: {archived} rows in {batches} batches, {elapsed:.1}s, {:.0} rows/s, peak RSS {:.0} MiB, {:.1} MiB stored",
        archived as f64 / elapsed,
        peak_kib as f64 / 1024.0,
        stored as f64 / (1 << 20) as f64
    );

    let steps = std::env::var("BENCH_STEPS").unwrap_or_else(|_| "all".into());
    let step = |name: &str| steps == "all" || steps.split(',').any(|s| s.trim() == name);
    if !step("verify") {
        return;
    }
    // Re-read everything: objects, hashes, members both ways, the straggler scan.
    let (elapsed, verified) = run(&["verify", "--cutoff", "1767225600000"]);
    let verify_peak = last_peak.get();
    let checked = verified["checked_batches"].as_array().map_or(0, Vec::len);
    println!(
        "outbox-archiver verify (every batch re-read, members both ways, straggler scan, orphans): {checked} batches, {archived} rows, {elapsed:.1}s, {:.0} rows/s, peak RSS {:.0} MiB, findings {}",
        archived as f64 / elapsed,
        verify_peak as f64 / 1024.0,
        verified["findings"].as_array().map_or(0, Vec::len)
    );

    if !step("restore") {
        return;
    }
    let sum = |summary: &serde_json::Value, field: &str| -> u64 {
        summary["apps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a[field].as_u64().unwrap_or(0))
            .sum()
    };
    let (elapsed, restored) = run(&["restore"]);
    println!(
        "outbox-archiver restore (verify + load into wallet_outbox_restored): {} rows, {elapsed:.1}s, {:.0} rows/s, peak RSS {:.0} MiB",
        sum(&restored, "restored_rows"),
        sum(&restored, "restored_rows") as f64 / elapsed,
        last_peak.get() as f64 / 1024.0
    );
    let (elapsed, purged) = run(&["purge", "--all-apps", "--grace", "0s"]);
    println!(
        "outbox-archiver purge (HEAD of each batch's objects, exact members, 500-row PK transactions): {} rows, {elapsed:.1}s, {:.0} rows/s, peak RSS {:.0} MiB",
        sum(&purged, "purged_rows"),
        sum(&purged, "purged_rows") as f64 / elapsed,
        last_peak.get() as f64 / 1024.0
    );
    if which("pt-archiver") {
        let started = Instant::now();
        let status = Command::new("pt-archiver")
            .args([
                "--source",
                &format!("h=127.0.0.1,P=3306,u={USER},p={PASSWORD},D={DB},t=wallet_outbox_restored,i=PRIMARY"),
                "--where",
                "1=1",
                "--limit",
                "500",
                "--txn-size",
                "500",
                "--purge",
                "--bulk-delete",
                "--no-check-charset",
            ])
            .status()
            .unwrap();
        let elapsed = started.elapsed().as_secs_f64();
        assert!(status.success());
        println!(
            "pt-archiver --purge --bulk-delete (same rows, from wallet_outbox_restored): {archived} rows, {elapsed:.1}s, {:.0} rows/s, no proof checked",
            archived as f64 / elapsed
        );
    }
    // Put the rows back so the next run has them to archive.
    let (elapsed, back) = run(&["restore", "--into-source"]);
    println!(
        "outbox-archiver restore --into-source: {} rows, {elapsed:.1}s, {:.0} rows/s",
        sum(&back, "restored_rows"),
        sum(&back, "restored_rows") as f64 / elapsed
    );

    if which("pt-archiver") {
        let file = dir.path().join("pt-archiver.out");
        let started = Instant::now();
        let status = Command::new("pt-archiver")
            .args([
                "--source",
                &format!("h=127.0.0.1,P=3306,u={USER},p={PASSWORD},D={DB},t=wallet_outbox,i=idx_wallet_outbox_retention"),
                "--where",
                "status = 'DELIVERED' AND updated_at_ms < 1767225600000",
                "--limit",
                "500",
                "--txn-size",
                "500",
                "--no-delete",
                "--no-check-charset",
                "--file",
                file.to_str().unwrap(),
            ])
            .status()
            .unwrap();
        let elapsed = started.elapsed().as_secs_f64();
        assert!(status.success());
        let lines = std::fs::read(&file)
            .map(|b| b.iter().filter(|&&c| c == b'\n').count())
            .unwrap_or(0);
        println!(
            "pt-archiver --no-delete --file: {lines} rows, {elapsed:.1}s, {:.0} rows/s, {:.1} MiB uncompressed TSV, no verification",
            lines as f64 / elapsed,
            std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0) as f64 / (1 << 20) as f64
        );
    } else {
        println!("pt-archiver not installed (apt-get install percona-toolkit) — skipped");
    }
}

/// Runs `command` to its end: its stdout, and its own peak RSS in KiB (from wait4, so the
/// figure is this process's alone, not the maximum over every child so far).
// The child is reaped by wait4 below, which std's `wait` would not let us read rusage from.
#[allow(clippy::zombie_processes)]
fn measured(command: &mut Command) -> (Vec<u8>, i64) {
    use std::io::Read;
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    let mut status = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: wait4 waits for this child and writes its status and rusage into the pointers.
    let usage = unsafe {
        libc::wait4(child.id() as i32, &mut status, 0, usage.as_mut_ptr());
        usage.assume_init()
    };
    (stdout, usage.ru_maxrss)
}

fn walk_size(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() {
                        walk_size(&p)
                    } else {
                        e.metadata().map(|m| m.len()).unwrap_or(0)
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

fn which(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}
