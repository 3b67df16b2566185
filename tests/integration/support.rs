//! Real services, isolated per test: every test gets its own database on the MariaDB/MySQL
//! server and its own bucket on a real S3 HTTP server (s3s-fs in this process, or the endpoint in
//! `OUTBOX_ARCHIVER_TEST_S3_ENDPOINT` with a per-test prefix). A passing test drops its
//! database; a failing one leaves it, named in the output, as evidence.
//!
//! The server: `OUTBOX_ARCHIVER_TEST_DATABASE_URL` (a user that may create databases), else
//! `mysql://outbox_test:outbox_test@127.0.0.1:3306`, a user this harness creates through the
//! local unix socket as root on first use.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use futures_util::TryStreamExt;
use outbox_archiver::batch::Limits;
use outbox_archiver::codec::{self, Row, Value};
use outbox_archiver::commands::archive::{self, ArchiveOptions};
use outbox_archiver::db::{self, Db};
use outbox_archiver::failpoint::FailPoints;
use outbox_archiver::local_s3::LocalS3;
use outbox_archiver::pipeline::apps::Apps;
use outbox_archiver::pipeline::RunContext;
use outbox_archiver::store::{self, Location, ObjectStore, S3Settings};
use outbox_archiver::summary::Summary;
use outbox_archiver::table::WALLET_OUTBOX;
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Executor};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

pub const TEST_USER_URL: &str = "mysql://outbox_test:outbox_test@127.0.0.1:3306";
const SOCKET_ROOT_URL: &str = "mysql://root@localhost/?socket=/run/mysqld/mysqld.sock";

static SERVER: OnceCell<String> = OnceCell::const_new();
pub static COUNTER: AtomicU32 = AtomicU32::new(0);

/// The server URL tests create their databases on (no database part).
pub async fn server_url() -> String {
    SERVER
        .get_or_init(|| async {
            if let Ok(url) = std::env::var("OUTBOX_ARCHIVER_TEST_DATABASE_URL") {
                return url;
            }
            if try_connect(TEST_USER_URL).await.is_err() {
                bootstrap_test_user().await;
            }
            drop_leftovers(TEST_USER_URL).await;
            TEST_USER_URL.to_string()
        })
        .await
        .clone()
}

async fn try_connect(url: &str) -> Result<sqlx::MySqlConnection, sqlx::Error> {
    url.parse::<sqlx::mysql::MySqlConnectOptions>()?
        .connect()
        .await
}

async fn bootstrap_test_user() {
    let mut root = try_connect(SOCKET_ROOT_URL).await.unwrap_or_else(|e| {
        panic!(
            "cannot reach MariaDB/MySQL as outbox_test over TCP nor as root over /run/mysqld/mysqld.sock ({e}). \
             Start the server (.ci/run does) or set OUTBOX_ARCHIVER_TEST_DATABASE_URL"
        )
    });
    for host in ["127.0.0.1", "localhost"] {
        root.execute(AssertSqlSafe(format!(
            "CREATE USER IF NOT EXISTS 'outbox_test'@'{host}' IDENTIFIED BY 'outbox_test'"
        )))
        .await
        .unwrap();
        root.execute(AssertSqlSafe(format!(
            "GRANT ALL PRIVILEGES ON *.* TO 'outbox_test'@'{host}'"
        )))
        .await
        .unwrap();
    }
    root.close().await.unwrap();
}

/// A connection that may create users and grant privileges: `OUTBOX_ARCHIVER_TEST_ADMIN_URL`,
/// else root over the local unix socket.
pub async fn admin_connection() -> sqlx::MySqlConnection {
    let url = std::env::var("OUTBOX_ARCHIVER_TEST_ADMIN_URL")
        .unwrap_or_else(|_| SOCKET_ROOT_URL.to_string());
    try_connect(&url).await.unwrap_or_else(|e| {
        panic!("cannot connect as an administrator ({e}): run as root beside the local MariaDB, or set OUTBOX_ARCHIVER_TEST_ADMIN_URL")
    })
}

/// Drops databases that earlier test processes left behind (evidence of a failure, kept until
/// the next run).
async fn drop_leftovers(url: &str) {
    let mut conn = try_connect(url).await.expect("test user connects");
    let prefix = format!("oat_{}_", std::process::id());
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'oat\\_%'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    for name in names.into_iter().filter(|n| !n.starts_with(&prefix)) {
        let _ = conn
            .execute(AssertSqlSafe(format!("DROP DATABASE IF EXISTS `{name}`")))
            .await;
    }
}

/// A database of its own, migrated, with the reference source table.
pub struct TestDb {
    pub name: String,
    pub url: String,
    pub db: Db,
}

impl TestDb {
    pub async fn new() -> TestDb {
        TestDb::on(&server_url().await).await
    }

    /// A database of its own on the server at `server` (a URL with no database part).
    pub async fn on(server: &str) -> TestDb {
        let server = server.to_string();
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let name = format!("oat_{}_{n}", std::process::id());
        let mut conn = try_connect(&server)
            .await
            .expect("connects to the test server");
        conn.execute(AssertSqlSafe(format!(
            "CREATE DATABASE `{name}` CHARACTER SET utf8mb4"
        )))
        .await
        .unwrap();
        conn.close().await.unwrap();
        let mut url = url::Url::parse(&server).unwrap();
        url.set_path(&format!("/{name}"));
        let url = url.to_string();
        let db = Db::connect(&url, 6)
            .await
            .expect("connects to the test database");
        db::migrate(&db.pool).await.unwrap();
        db::create_source_table(&db.pool, &WALLET_OUTBOX)
            .await
            .unwrap();
        TestDb { name, url, db }
    }

    /// A lock prefix unique to this test, so parallel tests never share an advisory lock.
    pub fn lock_prefix(&self) -> String {
        format!("{}:", self.name)
    }

    pub async fn insert(&self, rows: &[Row]) {
        outbox_archiver::seed::insert_rows(&self.db.pool, &WALLET_OUTBOX, rows)
            .await
            .unwrap();
    }

    pub async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(AssertSqlSafe(sql.to_string()))
            .fetch_one(&self.db.pool)
            .await
            .unwrap()
    }

    /// The (event_id, updated_at_ms, batch_id) of every member of `app`, by event id.
    pub async fn members(&self, app: &str) -> Vec<(String, i64, String)> {
        sqlx::query_as("SELECT event_id, updated_at_ms, batch_id FROM wallet_outbox_archive_members WHERE app_code = ? ORDER BY event_id")
            .bind(app)
            .fetch_all(&self.db.pool)
            .await
            .unwrap()
    }

    /// Every receipt row as (batch_id, data_object_key, row_count, manifest_sha256), by batch id.
    pub async fn receipts(&self, app: &str) -> Vec<(String, String, i64, String)> {
        sqlx::query_as(
            "SELECT batch_id, data_object_key, row_count, manifest_sha256 FROM wallet_outbox_archive_receipts WHERE app_code = ? ORDER BY batch_id",
        )
        .bind(app)
        .fetch_all(&self.db.pool)
        .await
        .unwrap()
    }

    /// Source rows that must be archived: delivered and below the cutoff, in cursor order.
    pub async fn expected_rows(&self, app: &str, cutoff_ms: i64) -> Vec<Row> {
        let pages = outbox_archiver::db::source::SourceTable::new(&WALLET_OUTBOX);
        let mut rows = Vec::new();
        let mut after = None;
        loop {
            let page = pages
                .page(
                    &self.db.pool,
                    app,
                    "DELIVERED",
                    after.as_ref(),
                    cutoff_ms,
                    500,
                )
                .await
                .unwrap();
            if page.is_empty() {
                return rows;
            }
            after = Some(outbox_archiver::db::source::cursor_of(
                &WALLET_OUTBOX,
                page.last().unwrap(),
            ));
            rows.extend(page);
        }
    }

    pub async fn drop(self) {
        self.db.close().await;
        let mut server = url::Url::parse(&self.url).unwrap();
        server.set_path("");
        let mut conn = try_connect(server.as_str()).await.unwrap();
        conn.execute(AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS `{}`",
            self.name
        )))
        .await
        .unwrap();
    }
}

/// A bucket of its own on a real S3 HTTP server.
pub struct TestS3 {
    pub server: Option<LocalS3>,
    pub settings: S3Settings,
    pub location: Location,
    _dir: tempfile::TempDir,
}

pub const ACCESS_KEY: &str = "test-access-key";
pub const SECRET_KEY: &str = "test-secret-key-do-not-print";

impl TestS3 {
    pub async fn new() -> TestS3 {
        let dir = tempfile::tempdir().unwrap();
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        if let Ok(endpoint) = std::env::var("OUTBOX_ARCHIVER_TEST_S3_ENDPOINT") {
            let bucket = std::env::var("OUTBOX_ARCHIVER_TEST_S3_BUCKET")
                .expect("OUTBOX_ARCHIVER_TEST_S3_BUCKET with the endpoint");
            let settings = S3Settings {
                endpoint: Some(endpoint),
                region: std::env::var("AWS_REGION").ok(),
                force_path_style: Some(true),
                upload_checksum: None,
                conditional_put: None,
                static_credentials: None,
                ..Default::default()
            };
            let prefix = format!(
                "outbox-archiver-tests/{}-{n}-{}",
                std::process::id(),
                chrono::Utc::now().timestamp_millis()
            );
            return TestS3 {
                server: None,
                settings,
                location: Location::S3 { bucket, prefix },
                _dir: dir,
            };
        }
        let server = LocalS3::start(dir.path(), ACCESS_KEY, SECRET_KEY)
            .await
            .unwrap();
        Self::with_server(server, dir, n)
    }

    /// A bucket on a server the test started itself (to misbehave on purpose).
    pub fn with_server(server: LocalS3, dir: tempfile::TempDir, n: u32) -> TestS3 {
        let bucket = format!("bucket{n}");
        server.create_bucket(&bucket).unwrap();
        let settings = server.settings();
        TestS3 {
            server: Some(server),
            settings,
            location: Location::S3 {
                bucket,
                prefix: "archive".into(),
            },
            _dir: dir,
        }
    }

    pub async fn store(&self) -> Arc<dyn ObjectStore> {
        store::open(self.location.clone(), &self.settings)
            .await
            .unwrap()
    }
}

pub fn env(db: &TestDb, store: Arc<dyn ObjectStore>, now_ms: i64) -> RunContext {
    RunContext::new(
        &WALLET_OUTBOX,
        db.db.clone(),
        store,
        CancellationToken::new(),
        Arc::new(move || now_ms),
    )
}

/// The database side of a run (what `status` works with), at a fixed clock.
pub fn db_context(db: &TestDb, now_ms: i64) -> outbox_archiver::pipeline::DbContext {
    outbox_archiver::pipeline::DbContext {
        spec: &WALLET_OUTBOX,
        db: db.db.clone(),
        shutdown: CancellationToken::new(),
        now_ms: Arc::new(move || now_ms),
    }
}

pub fn options(db: &TestDb, apps: &[&str], cutoff_ms: i64) -> ArchiveOptions {
    ArchiveOptions {
        apps: Apps::Listed(apps.iter().map(|s| s.to_string()).collect()),
        cutoff_ms,
        limits: Limits {
            max_rows: 1_000,
            max_bytes: 64 << 20,
        },
        gzip_level: 6,
        max_batches: None,
        max_runtime: None,
        dry_run: false,
        stragglers: false,
        delivered_status: "DELIVERED".into(),
        lock_prefix: db.lock_prefix(),
        db_retries: 5,
        failpoints: FailPoints::default(),
    }
}

pub async fn archive(env: &RunContext, opts: &ArchiveOptions) -> Summary {
    archive::run(env, opts).await
}

/// A delivered wallet row with plain defaults; tests change what they care about.
pub fn row(app: &str, event_id: &str, updated_at_ms: i64) -> Row {
    vec![
        Value::Text(app.into()),
        Value::Text(event_id.into()),
        Value::Text("WalletCredited".into()),
        Value::Text(format!("tx-{event_id}")),
        Value::Text(format!("cmd-{event_id}")),
        Value::Int(1001),
        Value::Text("COIN".into()),
        Value::Int(100),
        Value::Int(0),
        Value::Text(r#"{"amount": 100}"#.into()),
        Value::Text("DELIVERED".into()),
        Value::Text("relay-1".into()),
        Value::Null,
        Value::Int(0),
        Value::Int(0),
        Value::Null,
        Value::Int(updated_at_ms - 10),
        Value::Int(updated_at_ms),
    ]
}

/// `n` delivered rows of `app`, `e0`…, one millisecond apart from T0.
pub fn rows(app: &str, n: i64) -> Vec<Row> {
    (0..n).map(|i| row(app, &format!("e{i}"), T0 + i)).collect()
}

/// A database and a bucket of their own, and the store.
pub async fn fixture() -> (TestDb, TestS3, Arc<dyn ObjectStore>) {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    (db, s3, store)
}

pub const STATUS: usize = 10;
pub const PAYLOAD: usize = 9;
pub const AVAILABLE: usize = 7;
pub const FROZEN: usize = 8;

/// Every row in every data object the receipts of `app` reference, in receipt cursor order.
pub async fn archived_rows(db: &TestDb, store: &dyn ObjectStore, app: &str) -> Vec<Row> {
    let keys: Vec<String> = sqlx::query_scalar(
        "SELECT data_object_key FROM wallet_outbox_archive_receipts WHERE app_code = ? ORDER BY last_updated_at_ms, last_event_id",
    )
    .bind(app)
    .fetch_all(&db.db.pool)
    .await
    .unwrap();
    let mut rows = Vec::new();
    for key in keys {
        let bytes = store::get_all(store, &key)
            .await
            .unwrap()
            .expect("data object exists");
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut text)
            .unwrap();
        for (i, line) in text
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .enumerate()
        {
            rows.push(codec::decode_line(&WALLET_OUTBOX, line, i as u64 + 1).unwrap());
        }
    }
    rows
}

/// Every key in the test's store, sorted.
pub async fn keys(store: &dyn ObjectStore) -> Vec<String> {
    store.list(store.location().prefix()).await.unwrap()
}

/// Reads a whole object.
pub async fn read(store: &dyn ObjectStore, key: &str) -> Vec<u8> {
    let mut body = store.get(key).await.unwrap().expect("object exists");
    let mut out = Vec::new();
    while let Some(chunk) = body.try_next().await.unwrap() {
        out.extend_from_slice(&chunk);
    }
    out
}

pub const DAY: i64 = 86_400_000;
/// 2026-01-01T00:00:00Z
pub const T0: i64 = 1_767_225_600_000;

/// One run of the real binary: its exit status, its JSON summary, and everything it printed.
pub struct Run {
    pub code: i32,
    pub summary: serde_json::Value,
    pub all_output: String,
}

/// Runs the binary with a clean environment (no AWS config of the machine) plus `envs`.
pub async fn run_cli(args: &[&str], envs: &[(&str, String)]) -> Run {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_outbox-archiver"));
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AWS_CONFIG_FILE", "/nonexistent")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_REGION", "us-east-1")
        .env("OUTBOX_ARCHIVER_LOG_FORMAT", "json");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let std::process::Output {
        status,
        stdout,
        stderr,
    } = cmd.output().await.unwrap();
    let stdout = String::from_utf8_lossy(&stdout).to_string();
    let stderr = String::from_utf8_lossy(&stderr).to_string();
    let summary: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is one JSON summary ({e}): {stdout}\nstderr: {stderr}"));
    Run {
        code: status.code().unwrap(),
        summary,
        all_output: format!("{stdout}\n{stderr}"),
    }
}

/// Runs `sql` on a connection of its own to `url`, from inside a (synchronous) fail point: what
/// another session does at that moment of a run.
pub fn execute_from_failpoint(url: &str, sql: String) {
    tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(async {
            let mut conn = sqlx::MySqlConnection::connect(url).await.unwrap();
            conn.execute(AssertSqlSafe(sql)).await.unwrap();
            conn.close().await.unwrap();
        })
    });
}

/// A TCP port on 127.0.0.1 that was free a moment ago, for a server the test starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something listens on 127.0.0.1:`port`; panics naming `what` after `limit`.
pub async fn wait_for_port(port: u16, what: &str, limit: std::time::Duration) {
    let deadline = std::time::Instant::now() + limit;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(std::time::Instant::now() < deadline, "{what} did not start");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The binary's `archive` of every app below 2026-01-02 in two-row batches into `store_url`: many
/// small batches, so a run can be interrupted at many moments.
pub fn archive_in_two_row_batches(store_url: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_outbox-archiver"));
    command.args([
        "archive",
        "--all-apps",
        "--batch-rows",
        "2",
        "--cutoff",
        "2026-01-02T00:00:00Z",
        "--store",
        store_url,
    ]);
    command
}
