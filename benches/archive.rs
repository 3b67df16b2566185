//! Throughput, CPU per row (split by process) and peak memory of `archive`, `verify`, `restore`
//! and `purge` on a large backlog, each archive run beside pt-archiver on the same rows in the
//! same run. Not a test: it prints figures.
//!
//!     cargo bench --bench archive                 # 1,000,000 rows, MariaDB (the local server)
//!     BENCH_SERVER=mysql cargo bench --bench archive   # MySQL 9.7 (.ci/mysql starts it)
//!     BENCH_ROWS=4000000 cargo bench --bench archive
//!     BENCH_STEPS=defaults,one-app cargo bench --bench archive   # only these steps, of:
//!         defaults   pt-archiver, then `archive --all-apps` with no tuning flag (3 apps)
//!         one-app    the same on a table where one app holds every row
//!         parallel   pt-archiver, then `archive --all-apps --parallel-apps 3` (3 apps)
//!         verify     `verify` of the last archive
//!         find       `find --event-id`, `find --where` over one day
//!         restore    `restore`, `purge` beside pt-archiver --purge, `restore --into-source`
//!         steady     `purge` of the oldest 6 of 60 days (a tenth of the rows, random over the key),
//!                    as a CronJob deletes, beside pt-archiver deleting the same rows through the
//!                    retention index and through the primary key
//!         memory     the largest batches and the most apps at once, at both tables (peak RSS)
//!         history    one cron run's cost after 10, 10,000 and 1,000,000 batches of history
//!                    (BENCH_HISTORY=10,10000 for other sizes): archive of one batch, purge of
//!                    it, `verify --metadata-only`, `attest` of one day, the auditor's script
//!       (default: all but memory and history)
//!     BENCH_ARGS="--gzip-level 1" cargo bench --bench archive   # added to every archive run
//!     BENCH_BINARY=/path/to/outbox-archiver cargo bench --bench archive   # another build, A/B
//!     BENCH_EVENT_IDS=sequential cargo bench --bench archive   # default random (UUID-like)
//!     BENCH_PT=0 cargo bench --bench archive   # without pt-archiver beside each run
//!
//! The rows: two databases on the server, `outbox_archiver_bench` (3 apps) and
//! `outbox_archiver_bench_one` (1 app), each BENCH_ROWS delivered rows (777 B of NDJSON each)
//! over 60 days, seeded once per row count and event-id form and reused. Event ids are random
//! by default, as most services make them (UUIDs): every index on event ids then takes its
//! inserts at random places, as it does in production. Each archive run starts from empty owned
//! tables and writes under a store prefix of its own, so every run writes every object.
//!
//! The S3 server is s3s-fs on a temp dir in this process; the release binary runs as a child
//! process so the child's peak RSS (VmHWM) is the archiver's alone. Every step's CPU is split by
//! process: the job's from wait4, the database server's (found by its pid file, inside the
//! chroot for MySQL) and the S3 server's (this process) from `/proc/<pid>/stat` before and
//! after, once the database server is idle.

use std::process::Command;
use std::time::Instant;

use outbox_archiver::testing::LocalS3;
use outbox_archiver::testing::{seed, EventIds, SeedPlan};
use outbox_archiver::WALLET_OUTBOX;
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Executor};

#[path = "archive/history.rs"]
mod history;
#[path = "archive/steady.rs"]
mod steady;

const USER: &str = "outbox_bench";
const PASSWORD: &str = "outbox_bench";
/// Every seeded row was updated before this (2026-01-01): the archive's and pt-archiver's cutoff.
const CUTOFF_MS: i64 = 1_767_225_600_000;
const CUTOFF: &str = "1767225600000";

fn main() {
    let rows: u64 = std::env::var("BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(bench(rows));
}

/// The database server the bench runs on.
struct Server {
    /// An administrator's URL (creates the databases and the bench's user).
    admin: String,
    port: u16,
    pid: u32,
    version: String,
}

impl Server {
    /// MariaDB on this machine (root over the unix socket), `BENCH_SERVER_URL`, or with
    /// `BENCH_SERVER=mysql` the MySQL 9.7 that `.ci/mysql` runs in its chroot.
    async fn find() -> Server {
        let mysql = std::env::var("BENCH_SERVER").is_ok_and(|s| s == "mysql");
        let ci = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/mysql");
        let (admin, root) = match std::env::var("BENCH_SERVER_URL") {
            Ok(url) => (url, std::env::var("BENCH_SERVER_ROOT").ok()),
            Err(_) if mysql => {
                let out = |arg: &str| {
                    let o = Command::new(ci).arg(arg).output().expect(".ci/mysql");
                    assert!(o.status.success(), ".ci/mysql {arg} failed");
                    String::from_utf8(o.stdout).unwrap().trim().to_string()
                };
                (out("start"), Some(out("root")))
            }
            Err(_) => (outbox_archiver::demo::DEFAULT_SERVER_URL.to_string(), None),
        };
        let options: sqlx::mysql::MySqlConnectOptions = admin.parse().unwrap();
        let mut conn = options.connect().await.unwrap();
        let (pid_file, port, version): (String, i64, String) =
            sqlx::query_as("SELECT @@pid_file, CAST(@@port AS SIGNED), VERSION()")
                .fetch_one(&mut conn)
                .await
                .unwrap();
        conn.close().await.unwrap();
        let pid_path = match &root {
            Some(root) if !std::path::Path::new(&pid_file).exists() => format!("{root}{pid_file}"),
            _ => pid_file,
        };
        let pid = std::fs::read_to_string(&pid_path)
            .ok()
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("the database server's pid file {pid_path} (the server must run on this machine)"));
        Server {
            admin,
            port: port as u16,
            pid,
            version,
        }
    }

    async fn admin(&self) -> sqlx::MySqlConnection {
        let options: sqlx::mysql::MySqlConnectOptions = self.admin.parse().unwrap();
        options.connect().await.unwrap()
    }

    fn url(&self, database: &str) -> String {
        format!(
            "mysql://{USER}:{PASSWORD}@127.0.0.1:{}/{database}",
            self.port
        )
    }
}

/// One of the bench's databases: its name and its apps.
#[derive(Clone)]
struct Bench {
    database: &'static str,
    apps: Vec<String>,
    label: &'static str,
}

impl Bench {
    fn three() -> Bench {
        Bench {
            database: "outbox_archiver_bench",
            apps: vec!["wallet-cn".into(), "wallet-sg".into(), "fun.games".into()],
            label: "3 apps",
        }
    }

    fn one() -> Bench {
        Bench {
            database: "outbox_archiver_bench_one",
            apps: vec!["wallet-sg".into()],
            label: "1 app",
        }
    }

    /// Seeds the database unless it holds these rows already; then empties the archiver's own
    /// tables, so an archive run starts from nothing.
    async fn prepare(&self, server: &Server, rows: u64, ids: EventIds) {
        let mut admin = server.admin().await;
        let db = self.database;
        let seeded: Option<String> = sqlx::query_scalar("SELECT table_comment FROM information_schema.tables WHERE table_schema = ? AND table_name = 'wallet_outbox'")
            .bind(db)
            .fetch_optional(&mut admin)
            .await
            .unwrap();
        let marker = format!("bench rows={rows} ids={ids:?}");
        let url = server.url(db);
        if seeded.as_deref() != Some(marker.as_str()) {
            for sql in [
                format!("DROP DATABASE IF EXISTS {db}"),
                format!("CREATE DATABASE {db} CHARACTER SET utf8mb4"),
                format!(
                    "CREATE USER IF NOT EXISTS '{USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'"
                ),
                format!("GRANT ALL PRIVILEGES ON {db}.* TO '{USER}'@'127.0.0.1'"),
            ] {
                admin.execute(AssertSqlSafe(sql)).await.unwrap();
            }
            let pool = outbox_archiver::Db::connect(&url, 4).await.unwrap();
            outbox_archiver::create_source_table(&pool.pool, &WALLET_OUTBOX)
                .await
                .unwrap();
            let plan = SeedPlan {
                apps: self.apps.clone(),
                rows,
                start_ms: CUTOFF_MS - 60 * 86_400_000,
                end_ms: CUTOFF_MS,
                delivered_percent: 100,
                seed: 7,
                event_ids: ids,
            };
            let started = Instant::now();
            seed::seed(&pool.pool, &WALLET_OUTBOX, &plan).await.unwrap();
            eprintln!(
                "seeded {rows} rows ({}) in {:.1}s",
                self.label,
                started.elapsed().as_secs_f64()
            );
            pool.pool
                .execute(AssertSqlSafe(format!(
                    "ALTER TABLE wallet_outbox COMMENT = '{marker}'"
                )))
                .await
                .unwrap();
            pool.close().await;
        }
        // The archiver's tables as this build makes them, empty. DROP, not DELETE: a million
        // delete-marked rows would keep InnoDB's purge busy during the next step, and its CPU
        // would count as that step's.
        let owned: Vec<String> = sqlx::query_scalar(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_name <> 'wallet_outbox'",
        )
        .bind(db)
        .fetch_all(&mut admin)
        .await
        .unwrap();
        for table in owned {
            admin
                .execute(AssertSqlSafe(format!("DROP TABLE {db}.{table}")))
                .await
                .unwrap();
        }
        let pool = outbox_archiver::Db::connect(&url, 2).await.unwrap();
        outbox_archiver::migrate_database(&pool.pool).await.unwrap();
        pool.close().await;
        admin.close().await.unwrap();
    }
}

async fn bench(rows: u64) {
    let server = Server::find().await;
    let ids = match std::env::var("BENCH_EVENT_IDS").as_deref() {
        Ok("sequential") => EventIds::Sequential,
        _ => EventIds::Random,
    };
    let steps = std::env::var("BENCH_STEPS").unwrap_or_else(|_| "all".into());
    let step = |name: &str| {
        (steps == "all" && name != "memory" && name != "history")
            || steps.split(',').any(|s| s.trim() == name)
    };
    let mut admin = server.admin().await;
    // A buffer pool that holds both databases (about 1.3 KiB a row each: the table, its
    // indexes and the member rows), as a primary's holds its working set, within half the
    // machine's memory; the server's own size is put back at the end (the setting is dynamic).
    let pool_before: u64 = sqlx::query_scalar("SELECT CAST(@@innodb_buffer_pool_size AS UNSIGNED)")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    let half_ram = physical_memory() / 2;
    let pool = ((rows * 3) << 10)
        .next_multiple_of(1 << 30)
        .max(2 << 30)
        .min(half_ram)
        .max(pool_before);
    set_buffer_pool(&mut admin, pool).await;
    admin.close().await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let s3 = LocalS3::start(dir.path(), "bench-key", "bench-secret")
        .await
        .unwrap();
    s3.create_bucket("bench").unwrap();
    let binary = std::env::var("BENCH_BINARY")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_outbox-archiver").to_string());
    let extra: Vec<String> = std::env::var("BENCH_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut table = Table::new(rows, server.pid);
    table.note(format!(
        "{} on 127.0.0.1:{} (pid {}, buffer pool {} MiB), {cores} cores, binary {binary}, event ids {ids:?}{}",
        server.version,
        server.port,
        server.pid,
        pool >> 20,
        if extra.is_empty() {
            String::new()
        } else {
            format!(", every archive run with {}", extra.join(" "))
        }
    ));
    let runner = Runner {
        binary,
        endpoint: s3.endpoint.clone(),
        server: &server,
        runs: std::cell::Cell::new(0),
    };
    // BENCH_PT=0: without pt-archiver (a memory or A/B run that needs no reference).
    let pt = which("pt-archiver") && std::env::var("BENCH_PT").map_or(true, |v| v != "0");
    let three = Bench::three();
    let one = Bench::one();
    // The database and store prefix the last archive run wrote (what verify and restore read).
    let mut last: Option<(Bench, String)> = None;

    for (name, bench, args) in [
        ("defaults", &three, vec![]),
        ("one-app", &one, vec![]),
        ("parallel", &three, vec!["--parallel-apps", "3"]),
    ] {
        if !step(name) {
            continue;
        }
        bench.prepare(&server, rows, ids).await;
        let pt_line = pt.then(|| {
            pt_archiver_copy(&mut table, &server, bench, dir.path());
            table.lines.len() - 1
        });
        let mut all: Vec<&str> = vec!["archive", "--all-apps", "--cutoff", CUTOFF];
        all.extend(&args);
        all.extend(extra.iter().map(String::as_str));
        let label = format!("archive --all-apps {}({})", flags(&args), bench.label);
        let (prefix, summary) = runner.run(&mut table, &label, bench, &all);
        table.lines.last_mut().unwrap().against = pt_line;
        let (ndjson, compressed) = batch_bytes(&summary);
        table.ndjson_bytes = ndjson;
        table.note(format!(
            "{label}: {} batches, {ndjson} NDJSON bytes → {compressed} gzip bytes ({:.1} %)",
            summary["apps"].as_array().map_or(0, |a| a
                .iter()
                .map(|a| a["batches"].as_u64().unwrap_or(0))
                .sum::<u64>()),
            100.0 * compressed as f64 / ndjson.max(1) as f64,
        ));
        last = Some((bench.clone(), prefix));
    }

    if (step("verify") || step("find") || step("restore")) && last.is_none() {
        three.prepare(&server, rows, ids).await;
        let mut all = vec!["archive", "--all-apps", "--cutoff", CUTOFF];
        all.extend(extra.iter().map(String::as_str));
        let (prefix, _) = runner.run(&mut table, "archive --all-apps (3 apps)", &three, &all);
        last = Some((three.clone(), prefix));
    }
    if let Some((bench, prefix)) = &last {
        if step("verify") {
            // Re-read everything: objects, hashes, members both ways, the straggler scan.
            runner.again(
                &mut table,
                "verify (whole archive)",
                bench,
                prefix,
                &["verify", "--cutoff", CUTOFF],
            );
        }
        if step("find") {
            find(&mut table, &runner, bench, prefix).await;
        }
        if step("restore") {
            restore_and_purge(&mut table, &runner, bench, prefix, pt).await;
        }
    }

    if step("memory") {
        // The most a run holds: the largest batches (a UTC day of an app at most) and four apps
        // at once, at the gzip level that keeps the most state.
        for bench in [&three, &one] {
            bench.prepare(&server, rows, ids).await;
            let args = [
                "archive",
                "--all-apps",
                "--cutoff",
                CUTOFF,
                "--parallel-apps",
                "4",
                "--batch-rows",
                "10000000",
                "--batch-bytes",
                "4GiB",
                "--gzip-level",
                "9",
            ];
            let label = format!(
                "archive, largest batches, --parallel-apps 4, gzip 9 ({})",
                bench.label
            );
            runner.run(&mut table, &label, bench, &args);
        }
    }
    if step("steady") {
        three.prepare(&server, rows, ids).await;
        steady::run(&mut table, &runner, &three, pt).await;
    }
    table.print();
    if step("history") {
        history::run(&server, &s3, &runner, dir.path()).await;
    }
    let mut admin = server.admin().await;
    set_buffer_pool(&mut admin, pool_before).await;
}

async fn set_buffer_pool(admin: &mut sqlx::MySqlConnection, bytes: u64) {
    admin
        .execute(AssertSqlSafe(format!(
            "SET GLOBAL innodb_buffer_pool_size = {bytes}"
        )))
        .await
        .unwrap();
    // The resize runs in the background: wait until the server reports the new size.
    for _ in 0..120 {
        let now: u64 = sqlx::query_scalar("SELECT CAST(@@innodb_buffer_pool_size AS UNSIGNED)")
            .fetch_one(&mut *admin)
            .await
            .unwrap();
        if now == bytes {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// This machine's memory, from /proc/meminfo.
fn physical_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?.to_string();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(8 << 30, |kib| kib << 10)
}

fn flags(args: &[&str]) -> String {
    if args.is_empty() {
        String::new()
    } else {
        format!("{} ", args.join(" "))
    }
}

/// Runs the binary against the bench's databases and store, measured.
struct Runner<'s> {
    binary: String,
    endpoint: String,
    server: &'s Server,
    runs: std::cell::Cell<u32>,
}

impl Runner<'_> {
    /// An archive run under a new store prefix; returns the prefix and the summary.
    fn run(
        &self,
        table: &mut Table,
        name: &str,
        bench: &Bench,
        args: &[&str],
    ) -> (String, serde_json::Value) {
        self.runs.set(self.runs.get() + 1);
        let prefix = format!("s3://bench/run{}", self.runs.get());
        let summary = self.again(table, name, bench, &prefix, args);
        (prefix, summary)
    }

    /// A command on `bench`'s database and the store at `prefix`, tabled.
    fn again(
        &self,
        table: &mut Table,
        name: &str,
        bench: &Bench,
        prefix: &str,
        args: &[&str],
    ) -> serde_json::Value {
        settle(self.server.pid);
        let before = Sample::now(self.server.pid);
        let (child, summary) = self.invoke(bench, prefix, args);
        table.add(name, &before, &child, &summary);
        summary
    }

    /// The binary, measured; its summary must be ok.
    fn invoke(&self, bench: &Bench, prefix: &str, args: &[&str]) -> (Child, serde_json::Value) {
        let child = measured(
            Command::new(&self.binary)
                .args(args)
                .args(["--store", prefix])
                .env("DATABASE_URL", self.server.url(bench.database))
                .env("OUTBOX_ARCHIVER_S3_ENDPOINT", &self.endpoint)
                .env("AWS_ACCESS_KEY_ID", "bench-key")
                .env("AWS_SECRET_ACCESS_KEY", "bench-secret")
                .env("AWS_REGION", "us-east-1")
                .env("OUTBOX_ARCHIVER_LOG", "warn"),
        );
        let summary: serde_json::Value =
            serde_json::from_slice(&child.stdout).expect("a JSON summary");
        assert_eq!(summary["ok"], true, "{summary}");
        (child, summary)
    }
}

/// pt-archiver copying `bench`'s delivered rows below the cutoff to a file, tabled.
fn pt_archiver_copy(table: &mut Table, server: &Server, bench: &Bench, dir: &std::path::Path) {
    let file = dir.join("pt-archiver.out");
    let source = format!(
        "h=127.0.0.1,P={},u={USER},p={PASSWORD},D={},t=wallet_outbox,i=idx_wallet_outbox_retention",
        server.port, bench.database
    );
    let (before, child) = pt_archiver(
        server.pid,
        &[
            "--source",
            &source,
            "--where",
            &format!("status = 'DELIVERED' AND updated_at_ms < {CUTOFF}"),
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
        &format!(
            "pt-archiver --no-delete --file ({}; TSV, no proof)",
            bench.label
        ),
        &before,
        &child,
        lines,
        bytes,
    );
    std::fs::remove_file(&file).ok();
}

/// "Was event X archived?": one event from the middle of the archive, by its member rows; then
/// one column's value over one day (every data object of that day read).
async fn find(table: &mut Table, runner: &Runner<'_>, bench: &Bench, prefix: &str) {
    let url = runner.server.url(bench.database);
    let (event, transaction, day) = {
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
    };
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
        let (_, summary) = runner.invoke(bench, prefix, &args);
        let found = summary["found"].as_array().map_or(0, Vec::len);
        table.note(format!(
            "{name}: {:.2} s wall, {found} found, {} batches read",
            started.elapsed().as_secs_f64(),
            summary["searched_batches"],
        ));
    }
}

/// `restore` into a copy, `purge` of the source beside pt-archiver's purge of that copy (the
/// same rows), then `restore --into-source` so the rows are back for the next run.
async fn restore_and_purge(
    table: &mut Table,
    runner: &Runner<'_>,
    bench: &Bench,
    prefix: &str,
    pt: bool,
) {
    let parallel = std::env::var("BENCH_PARALLEL_APPS").ok();
    let apps_at_once: Vec<&str> = match parallel.as_deref() {
        Some(n) => vec!["--parallel-apps", n],
        None => Vec::new(),
    };
    fn with<'a>(args: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
        [args, more].concat()
    }
    let note = flags(&apps_at_once);
    runner.again(
        table,
        &format!("restore {note}(into wallet_outbox_restored)"),
        bench,
        prefix,
        &with(&["restore"], &apps_at_once),
    );
    // The restore's pages are written out before purge is measured, and purge's before
    // pt-archiver's run: each one's database CPU is then its own.
    let mut admin = runner.server.admin().await;
    flush_dirty_pages(&mut admin).await;
    let purge = format!("purge --grace 0s {note}");
    runner.again(
        table,
        &purge,
        bench,
        prefix,
        &with(&["purge", "--all-apps", "--grace", "0s"], &apps_at_once),
    );
    let purge_line = table.lines.len() - 1;
    if pt {
        let source = format!(
            "h=127.0.0.1,P={},u={USER},p={PASSWORD},D={},t=wallet_outbox_restored,i=PRIMARY",
            runner.server.port, bench.database
        );
        flush_dirty_pages(&mut admin).await;
        let (before, child) = pt_archiver_purge(runner.server.pid, &source, "1=1");
        let purged = table.lines[purge_line].rows;
        table.add_external(
            "pt-archiver --purge --bulk-delete (no proof)",
            &before,
            &child,
            purged,
            0,
        );
        table.lines[purge_line].against = Some(table.lines.len() - 1);
    }
    runner.again(
        table,
        &format!("restore --into-source {note}"),
        bench,
        prefix,
        &with(&["restore", "--into-source"], &apps_at_once),
    );
}

/// Has InnoDB write out its dirty pages (up to five minutes) — a restore's million rows, a copy
/// of the table, the last step's deletes — so that the next step is not measured flushing them:
/// the server's dirty-page limit set to 0 until few are left, then put back.
async fn flush_dirty_pages(admin: &mut sqlx::MySqlConnection) {
    // The limit and its low-water mark, put back as they were (lowering the limit under the mark
    // lowers the mark too).
    let (limit, mark): (f64, f64) = sqlx::query_as(
        "SELECT CAST(@@innodb_max_dirty_pages_pct AS DOUBLE), CAST(@@innodb_max_dirty_pages_pct_lwm AS DOUBLE)",
    )
    .fetch_one(&mut *admin)
    .await
    .unwrap();
    admin
        .execute(
            "SET GLOBAL innodb_max_dirty_pages_pct_lwm = 0, GLOBAL innodb_max_dirty_pages_pct = 0",
        )
        .await
        .unwrap();
    for _ in 0..300 {
        let (_, dirty): (String, String) =
            sqlx::query_as("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")
                .fetch_one(&mut *admin)
                .await
                .unwrap();
        if dirty.parse::<u64>().unwrap_or(0) < 100 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    admin
        .execute(AssertSqlSafe(format!(
            "SET GLOBAL innodb_max_dirty_pages_pct = {limit}, GLOBAL innodb_max_dirty_pages_pct_lwm = {mark}"
        )))
        .await
        .unwrap();
}

/// pt-archiver's purge of the rows of `source` (its DSN) that `selected` (a `--where`) holds, in
/// transactions of 500 rows, each deleted by one statement — as the bench compares purge with it.
fn pt_archiver_purge(database_pid: u32, source: &str, selected: &str) -> (Sample, Child) {
    pt_archiver(
        database_pid,
        &[
            "--source",
            source,
            "--where",
            selected,
            "--limit",
            "500",
            "--txn-size",
            "500",
            "--purge",
            "--bulk-delete",
            "--no-check-charset",
        ],
    )
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

/// Waits (up to two minutes) until the database server's CPU is at rest — InnoDB's purge of the
/// rows the previous step deleted, its flushing at its own pace — so that a step's database CPU
/// is its own. Pages left dirty are not waited for: the purge steps write them out first
/// ([`flush_dirty_pages`]); the other steps start on a server at rest.
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
    /// The pt-archiver line this one is compared with (same rows, same run).
    against: Option<usize>,
}

impl Line {
    fn rate(&self) -> f64 {
        self.rows as f64 / self.wall
    }

    /// CPU seconds per 1,000 rows of process `i` (job, database, S3).
    fn per_k(&self, i: usize) -> f64 {
        self.cpu[i] * 1000.0 / self.rows.max(1) as f64
    }
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

    fn add(&mut self, name: &str, before: &Sample, child: &Child, summary: &serde_json::Value) {
        let apps = summary["apps"].as_array().cloned().unwrap_or_default();
        let field = |f: &str| apps.iter().map(|a| a[f].as_u64().unwrap_or(0)).sum::<u64>();
        let rows = match name.split_whitespace().next() {
            Some("restore") => field("restored_rows"),
            Some("purge") => field("purged_rows"),
            _ => field("rows"),
        };
        let batches = match name.split_whitespace().next() {
            Some("verify") => summary["checked_batch_count"].as_u64().unwrap_or(0),
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
            against: None,
        };
        println!(
            "{}: {} rows in {:.1} s ({:.0} rows/s), CPU s per 1,000 rows: job {:.4}, database {:.4}, S3 {:.4}; peak RSS {:.0} MiB",
            line.name,
            line.rows,
            line.wall,
            line.rate(),
            line.per_k(0),
            line.per_k(1),
            line.per_k(2),
            line.peak_kib as f64 / 1024.0
        );
        self.lines.push(line);
    }

    fn print(&self) {
        println!();
        println!(
            "{} rows seeded per table; figures per step (CPU seconds per 1,000 rows, split by process; \"vs pt\": against the pt-archiver line just before it, same rows, same run):",
            self.rows
        );
        println!("| step | rows | wall s | rows/s | vs pt rows/s | NDJSON MB/s | job CPU | database CPU | vs pt database CPU | S3 CPU | peak RSS MiB | S3 requests / batch |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
        for l in &self.lines {
            let pt = l.against.map(|i| &self.lines[i]);
            println!(
                "| {} | {} | {:.1} | {:.0} | {} | {:.1} | {:.4} | {:.4} | {} | {:.4} | {:.0} | {} |",
                l.name,
                l.rows,
                l.wall,
                l.rate(),
                pt.map_or("—".into(), |p| format!("{:.2}×", l.rate() / p.rate())),
                l.bytes as f64 / 1e6 / l.wall,
                l.per_k(0),
                l.per_k(1),
                pt.map_or("—".into(), |p| format!("{:.2}×", l.per_k(1) / p.per_k(1))),
                l.per_k(2),
                l.peak_kib as f64 / 1024.0,
                l.requests_per_batch
                    .map_or("—".into(), |r| format!("{r:.1}")),
            );
        }
        for note in &self.notes {
            println!("{note}");
        }
        if !which("pt-archiver") {
            println!("pt-archiver not installed (apt-get install percona-toolkit): no comparison");
        }
        self.targets();
    }

    /// Issue 46's targets, each with the figure measured in this run: purge at pt-archiver's
    /// rows/s and at most its database CPU per row; archive at twice its rows/s and at most 1.5
    /// times its database CPU; verify at 250,000 rows/s; every peak under 128 MiB.
    fn targets(&self) {
        println!();
        println!("targets:");
        let mark = |ok: bool| if ok { "met" } else { "NOT met" };
        for l in &self.lines {
            let Some(pt) = l.against.map(|i| &self.lines[i]) else {
                continue;
            };
            let (speed, cpu) = (l.rate() / pt.rate(), l.per_k(1) / pt.per_k(1));
            let (at_least, at_most) = if l.name.starts_with("purge") {
                (1.0, 1.0)
            } else {
                (2.0, 1.5)
            };
            println!(
                "- {}: {speed:.2}× pt-archiver's rows/s (≥ {at_least}×: {}); database CPU {cpu:.2}× pt-archiver's per row (≤ {at_most}×: {})",
                l.name,
                mark(speed >= at_least),
                mark(cpu <= at_most)
            );
        }
        if let Some(v) = self.lines.iter().find(|l| l.name.starts_with("verify")) {
            println!(
                "- verify: {:.0} rows/s (≥ 250,000: {})",
                v.rate(),
                mark(v.rate() >= 250_000.0)
            );
        }
        let ours = self
            .lines
            .iter()
            .filter(|l| !l.name.starts_with("pt-archiver"));
        if let Some(peak) = ours.max_by_key(|l| l.peak_kib) {
            println!(
                "- peak RSS: {:.0} MiB, in {} (≤ 128 MiB: {})",
                peak.peak_kib as f64 / 1024.0,
                peak.name,
                mark(peak.peak_kib <= 128 * 1024)
            );
        }
    }
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

fn which(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}
