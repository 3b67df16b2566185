//! Throughput and peak memory of `archive` on a large backlog, against pt-archiver on the same
//! rows. Not a test: it prints figures.
//!
//!     cargo bench --bench archive                 # 1,000,000 rows
//!     BENCH_ROWS=200000 cargo bench --bench archive
//!     BENCH_BATCH_ROWS=1000 cargo bench --bench archive   # many small batches (receipts)
//!     BENCH_BINARY=/path/to/outbox-archiver cargo bench --bench archive   # another build, A/B
//!     BENCH_STEPS=verify cargo bench --bench archive   # archive plus only these (verify,
//!                                                      # find, restore, pt-archiver; default: all)
//!     BENCH_GZIP_LEVEL=1 cargo bench --bench archive      # default 3, the binary's default
//!     BENCH_PARALLEL_APPS=1 cargo bench --bench archive   # archive's, purge's and restore's; default 3
//!                                                         # (the seed has 3 apps)
//!
//! It (re)uses database `outbox_archiver_bench` on the local server (root over the unix socket,
//! or BENCH_SERVER_URL), seeds it once per row count, serves a real S3 endpoint from this process
//! (s3s-fs on a temp dir), and runs the release binary as a child process so the child's peak RSS
//! is the archiver's alone. If `pt-archiver` is installed it runs
//! `--no-delete --file` with `--limit 500 --txn-size 500` over the same rows first, and
//! `--purge --bulk-delete` over the restored copy, for comparison.
//!
//! Every step's CPU is split by process: the job's from wait4, the database server's (found by
//! its pid file) and the S3 server's (this process) from `/proc/<pid>/stat` before and after.

use std::process::Command;
use std::time::Instant;

use outbox_archiver::model::table::WALLET_OUTBOX;
use outbox_archiver::testkit::local_s3::LocalS3;
use outbox_archiver::testkit::seed::{self, SeedPlan};
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
        // TRUNCATE, not DELETE: a million delete-marked rows would keep InnoDB's purge busy
        // during the next step, and its CPU would count as that step's.
        for table in [
            "wallet_outbox_archive_members",
            "wallet_outbox_archive_superseded",
            "wallet_outbox_archive_receipts",
        ] {
            admin
                .execute(AssertSqlSafe(format!("TRUNCATE TABLE {DB}.{table}")))
                .await
                .unwrap();
        }
    }
    // A previous run's restored rows would count as already present: start from no table.
    admin
        .execute(AssertSqlSafe(format!(
            "DROP TABLE IF EXISTS {DB}.wallet_outbox_restored"
        )))
        .await
        .unwrap();
    // As the issue measured: a 2 GiB buffer pool holds the whole table (the setting is dynamic).
    admin
        .execute(
            "SET GLOBAL innodb_buffer_pool_size = GREATEST(@@innodb_buffer_pool_size, 2147483648)",
        )
        .await
        .unwrap();
    let pid_file: String = sqlx::query_scalar("SELECT @@pid_file")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    let database_pid: u32 = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .expect("the database server's pid file (the server must run on this machine)");
    admin.close().await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let s3 = LocalS3::start(dir.path(), "bench-key", "bench-secret")
        .await
        .unwrap();
    s3.create_bucket("bench").unwrap();
    let binary = std::env::var("BENCH_BINARY")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_outbox-archiver").to_string());
    let mut table = Table::new(rows, database_pid);
    println!("binary: {binary}");
    println!("database server pid {database_pid}; the S3 server is this process");
    // The binary against the bench's database and store, measured; its summary must be ok.
    let invoke = |args: &[&str]| {
        let child = measured(
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
        let summary: serde_json::Value =
            serde_json::from_slice(&child.stdout).expect("a JSON summary");
        assert_eq!(summary["ok"], true, "{summary}");
        (child, summary)
    };
    let run = |table: &mut Table, name: &str, args: &[&str]| -> serde_json::Value {
        settle(database_pid);
        let before = Sample::now(database_pid);
        let (child, summary) = invoke(args);
        table.add(name, &before, &child, &summary);
        summary
    };
    // A command whose time is noted, not tabled (it moves no rows).
    let run_quiet = |args: &[&str]| -> serde_json::Value { invoke(args).1 };
    let batch_rows = std::env::var("BENCH_BATCH_ROWS").unwrap_or_else(|_| "50000".into());
    let gzip_level = std::env::var("BENCH_GZIP_LEVEL").unwrap_or_else(|_| "3".into());
    let steps = std::env::var("BENCH_STEPS").unwrap_or_else(|_| "all".into());
    let step = |name: &str| steps == "all" || steps.split(',').any(|s| s.trim() == name);
    let pt = which("pt-archiver");

    if pt && step("pt-archiver") {
        let file = dir.path().join("pt-archiver.out");
        let (before, child) = pt_archiver(
            database_pid,
            &[
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
            ],
        );
        let lines = std::fs::read(&file)
            .map(|b| b.iter().filter(|&&c| c == b'\n').count())
            .unwrap_or(0) as u64;
        let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        table.add_external(
            "pt-archiver --no-delete --file (TSV, no proof)",
            &before,
            &child,
            lines,
            bytes,
        );
        std::fs::remove_file(&file).ok();
    }

    let parallel = std::env::var("BENCH_PARALLEL_APPS").unwrap_or_else(|_| "3".into());
    let archived = run(
        &mut table,
        "archive --all-apps",
        &[
            "archive",
            "--all-apps",
            "--cutoff",
            "1767225600000",
            "--batch-rows",
            &batch_rows,
            "--gzip-level",
            &gzip_level,
            "--parallel-apps",
            &parallel,
        ],
    );
    table.note(format!(
        "archive: --gzip-level {gzip_level} --parallel-apps {parallel} --batch-rows {batch_rows}"
    ));
    let (ndjson, compressed) = batch_bytes(&archived);
    let stored = walk_size(dir.path());
    table.note(format!(
        "archive: {ndjson} NDJSON bytes → {compressed} gzip bytes in data objects ({:.1} %), {stored} bytes stored in all ({:.1} %) at gzip level {gzip_level}",
        100.0 * compressed as f64 / ndjson.max(1) as f64,
        100.0 * stored as f64 / ndjson.max(1) as f64,
    ));
    table.ndjson_bytes = ndjson;

    if step("verify") {
        // Re-read everything: objects, hashes, members both ways, the straggler scan.
        run(
            &mut table,
            "verify (whole archive)",
            &["verify", "--cutoff", "1767225600000"],
        );
    }
    if step("find") {
        // "Was event X archived?": one event from the middle of the archive, by its member rows;
        // then one column's value over one day (every data object of that day read).
        let (event, transaction, day) = async {
            let mut conn = sqlx::mysql::MySqlConnection::connect(&url).await.unwrap();
            let (event, updated): (String, i64) = sqlx::query_as(
                "SELECT event_id, updated_at_ms FROM wallet_outbox_archive_members ORDER BY event_id LIMIT 1 OFFSET 500000",
            )
            .fetch_optional(&mut conn)
            .await
            .unwrap()
            .unwrap_or_default();
            let transaction: String =
                sqlx::query_scalar("SELECT transaction_id FROM wallet_outbox WHERE event_id = ?")
                    .bind(&event)
                    .fetch_optional(&mut conn)
                    .await
                    .unwrap()
                    .unwrap_or_default();
            (event, transaction, updated - updated % 86_400_000)
        }
        .await;
        for (name, args) in [
            (
                "find --event-id",
                vec!["find".to_string(), "--event-id".into(), event.clone()],
            ),
            (
                "find --where transaction_id=… over one day",
                vec![
                    "find".to_string(),
                    "--where".into(),
                    format!("transaction_id={transaction}"),
                    "--from".into(),
                    day.to_string(),
                    "--to".into(),
                    (day + 86_400_000).to_string(),
                ],
            ),
        ] {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let started = Instant::now();
            let summary = run_quiet(&args);
            let found = summary["found"].as_array().map_or(0, Vec::len);
            table.note(format!(
                "{name}: {:.2} s wall, {found} found, {} batches read",
                started.elapsed().as_secs_f64(),
                summary["searched_batches"],
            ));
        }
    }
    // Passed to restore and purge only when more than one (a build from before they had it).
    let apps_at_once: Vec<&str> = match parallel.as_str() {
        "1" => Vec::new(),
        n => vec!["--parallel-apps", n],
    };
    if step("restore") {
        run(
            &mut table,
            &format!("restore --parallel-apps {parallel} (into wallet_outbox_restored)"),
            &[&["restore"], &apps_at_once[..]].concat(),
        );
        run(
            &mut table,
            &format!("purge --grace 0s --parallel-apps {parallel}"),
            &[&["purge", "--all-apps", "--grace", "0s"], &apps_at_once[..]].concat(),
        );
        if pt {
            let (before, child) = pt_archiver(
                database_pid,
                &[
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
                ],
            );
            let purged = table.rows_of(&format!("purge --grace 0s --parallel-apps {parallel}"));
            table.add_external(
                "pt-archiver --purge --bulk-delete (no proof)",
                &before,
                &child,
                purged,
                0,
            );
        }
        // Put the rows back so the next run has them to archive.
        run(
            &mut table,
            &format!("restore --into-source --parallel-apps {parallel}"),
            &[&["restore", "--into-source"], &apps_at_once[..]].concat(),
        );
    }
    table.print(pt);
}

/// Runs pt-archiver with `args` once the database server is idle: the sample before, and the
/// finished child.
fn pt_archiver(database_pid: u32, args: &[&str]) -> (Sample, Child) {
    settle(database_pid);
    let before = Sample::now(database_pid);
    let child = measured(Command::new("pt-archiver").args(args));
    assert!(child.success, "pt-archiver {args:?} failed");
    (before, child)
}

/// Waits (up to two minutes) until the database server is idle — InnoDB's purge of the rows the
/// previous step deleted, its flushing — so that a step's database CPU is its own.
fn settle(database_pid: u32) {
    for _ in 0..120 {
        let before = cpu_seconds(database_pid);
        std::thread::sleep(std::time::Duration::from_secs(1));
        if cpu_seconds(database_pid) - before < 0.05 {
            return;
        }
    }
}

/// CPU seconds a process has used so far, from `/proc/<pid>/stat` (utime + stime).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command may hold spaces: the fields after it start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 and 15 of stat(5), counted after the command (field 2): indexes 11 and 12.
    (ticks(11) + ticks(12)) / clock_ticks()
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }) as f64
}

/// The database server's and this process's (the S3 server's) CPU, and the time, before a step.
struct Sample {
    at: Instant,
    database: f64,
    s3: f64,
}

impl Sample {
    fn now(database_pid: u32) -> Sample {
        Sample {
            at: Instant::now(),
            database: cpu_seconds(database_pid),
            s3: cpu_seconds(std::process::id()),
        }
    }
}

struct Line {
    name: String,
    rows: u64,
    wall: f64,
    bytes: u64,
    cpu: [f64; 3],
    peak_kib: i64,
    requests_per_batch: Option<f64>,
}

/// Every step's figures, printed as one table at the end.
struct Table {
    rows: u64,
    database_pid: u32,
    ndjson_bytes: u64,
    lines: Vec<Line>,
    notes: Vec<String>,
}

impl Table {
    fn new(rows: u64, database_pid: u32) -> Table {
        Table {
            rows,
            database_pid,
            ndjson_bytes: 0,
            lines: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn note(&mut self, note: String) {
        println!("{note}");
        self.notes.push(note);
    }

    fn rows_of(&self, name: &str) -> u64 {
        self.lines
            .iter()
            .find(|l| l.name == name)
            .map_or(0, |l| l.rows)
    }

    fn add(&mut self, name: &str, before: &Sample, child: &Child, summary: &serde_json::Value) {
        let apps = summary["apps"].as_array().cloned().unwrap_or_default();
        let field = |f: &str| apps.iter().map(|a| a[f].as_u64().unwrap_or(0)).sum::<u64>();
        let rows = match name.split_whitespace().next() {
            Some("restore") => field("restored_rows"),
            Some("purge") => field("purged_rows"),
            Some("verify") => field("rows").max(self.rows_of("archive --all-apps")),
            _ => field("rows"),
        };
        let batches = match name.split_whitespace().next() {
            Some("verify") => summary["checked_batches"].as_array().map_or(0, Vec::len) as u64,
            _ => field("batches"),
        };
        let requests = summary["store_requests"]["attempts"].as_u64();
        let bytes = if name.starts_with("archive") {
            batch_bytes(summary).0
        } else {
            self.ndjson_bytes
        };
        self.push(
            name,
            before,
            child,
            rows,
            bytes,
            requests
                .filter(|_| batches > 0)
                .map(|r| r as f64 / batches as f64),
        );
    }

    fn add_external(&mut self, name: &str, before: &Sample, child: &Child, rows: u64, bytes: u64) {
        self.push(name, before, child, rows, bytes, None);
    }

    fn push(
        &mut self,
        name: &str,
        before: &Sample,
        child: &Child,
        rows: u64,
        bytes: u64,
        requests_per_batch: Option<f64>,
    ) {
        let line = Line {
            name: name.to_string(),
            rows,
            wall: before.at.elapsed().as_secs_f64(),
            bytes,
            cpu: [
                child.cpu,
                cpu_seconds(self.database_pid) - before.database,
                cpu_seconds(std::process::id()) - before.s3,
            ],
            peak_kib: child.peak_kib,
            requests_per_batch,
        };
        println!(
            "{}: {} rows in {:.1} s ({:.0} rows/s), CPU s per 1,000 rows: job {:.4}, database {:.4}, S3 {:.4}; peak RSS {:.0} MiB",
            line.name,
            line.rows,
            line.wall,
            line.rows as f64 / line.wall,
            per_k(line.cpu[0], rows),
            per_k(line.cpu[1], rows),
            per_k(line.cpu[2], rows),
            line.peak_kib as f64 / 1024.0
        );
        self.lines.push(line);
    }

    fn print(&self, pt: bool) {
        println!();
        println!(
            "{} rows seeded; figures per step (CPU seconds per 1,000 rows, split by process):",
            self.rows
        );
        println!("| step | rows | wall s | rows/s | NDJSON MB/s | job CPU | database CPU | S3 CPU | peak RSS MiB | S3 requests / batch |");
        println!("|---|---|---|---|---|---|---|---|---|---|");
        for l in &self.lines {
            println!(
                "| {} | {} | {:.1} | {:.0} | {:.1} | {:.4} | {:.4} | {:.4} | {:.0} | {} |",
                l.name,
                l.rows,
                l.wall,
                l.rows as f64 / l.wall,
                l.bytes as f64 / 1e6 / l.wall,
                per_k(l.cpu[0], l.rows),
                per_k(l.cpu[1], l.rows),
                per_k(l.cpu[2], l.rows),
                l.peak_kib as f64 / 1024.0,
                l.requests_per_batch
                    .map_or("—".into(), |r| format!("{r:.1}")),
            );
        }
        for note in &self.notes {
            println!("{note}");
        }
        if !pt {
            println!("pt-archiver not installed (apt-get install percona-toolkit): no comparison");
            return;
        }
        let find = |prefix: &str| self.lines.iter().find(|l| l.name.starts_with(prefix));
        let pairs = [
            ("archive", "archive --all-apps", "pt-archiver --no-delete"),
            ("purge", "purge --grace 0s", "pt-archiver --purge"),
        ];
        for (what, ours, theirs) in pairs {
            if let (Some(a), Some(b)) = (find(ours), find(theirs)) {
                let rate = |l: &Line| l.rows as f64 / l.wall;
                println!(
                    "{what} vs pt-archiver: {:.2}x the rows/s; job CPU {:.2}x, database CPU {:.2}x per row",
                    rate(a) / rate(b),
                    per_k(a.cpu[0], a.rows) / per_k(b.cpu[0], b.rows),
                    per_k(a.cpu[1], a.rows) / per_k(b.cpu[1], b.rows),
                );
            }
        }
    }
}

fn per_k(seconds: f64, rows: u64) -> f64 {
    seconds * 1000.0 / rows.max(1) as f64
}

/// NDJSON and gzip bytes of the data objects an archive summary lists.
fn batch_bytes(summary: &serde_json::Value) -> (u64, u64) {
    let mut sums = (0, 0);
    for app in summary["apps"].as_array().into_iter().flatten() {
        for batch in app["batch_list"].as_array().into_iter().flatten() {
            sums.0 += batch["uncompressed_bytes"].as_u64().unwrap_or(0);
            sums.1 += batch["compressed_bytes"].as_u64().unwrap_or(0);
        }
    }
    sums
}

/// A finished child process: its stdout, whether it succeeded, its own CPU seconds (user +
/// system, from wait4) and peak RSS in KiB.
struct Child {
    stdout: Vec<u8>,
    success: bool,
    cpu: f64,
    peak_kib: i64,
}

// The child is reaped by wait4 below, which std's `wait` would not let us read rusage from.
#[allow(clippy::zombie_processes)]
fn measured(command: &mut Command) -> Child {
    use std::io::Read;
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // wait4's ru_maxrss would count this process's RSS too (the child starts as a copy of it
    // until exec), so the peak is the child's own high-water mark, VmHWM, read while it runs.
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(high_water_kib(pid).unwrap_or(0));
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            peak
        })
    };
    let mut stdout = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    // The child closed its stdout: it is exiting, and its peak is behind it. One last look.
    let last = high_water_kib(pid).unwrap_or(0);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak_kib = watcher.join().unwrap().max(last);
    let mut status = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: wait4 waits for this child and writes its status and rusage into the pointers.
    let usage = unsafe {
        libc::wait4(child.id() as i32, &mut status, 0, usage.as_mut_ptr());
        usage.assume_init()
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Child {
        stdout,
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        cpu: seconds(usage.ru_utime) + seconds(usage.ru_stime),
        peak_kib,
    }
}

/// A running process's peak RSS so far (`VmHWM` in `/proc/<pid>/status`), in KiB.
fn high_water_kib(pid: u32) -> Option<i64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
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
