//! The database side: a database of its own per test on the real MariaDB/MySQL server.
//!
//! Which server: `OUTBOX_ARCHIVER_TEST_SERVER` — `mariadb` (the default: the machine's MariaDB
//! on 127.0.0.1:3306) or `mysql` (MySQL 9.7 in the chroot `.ci/mysql` builds, on
//! `OUTBOX_ARCHIVER_MYSQL_PORT`, default 3307). `.ci/test` runs the suite once on each. The
//! tests' user: `OUTBOX_ARCHIVER_TEST_DATABASE_URL` (a user that may create databases), else
//! `outbox_test`, which this harness creates on first use through the administrator
//! connection ([`admin_connection`]): on MySQL with MySQL's default authentication
//! (`caching_sha2_password`). A passing test drops its database; a failing one leaves it, named
//! in the output, as evidence.

use std::sync::atomic::{AtomicU32, Ordering};

use outbox_archiver::decode_row;
use outbox_archiver::Db;
use outbox_archiver::Row;
use outbox_archiver::{TableSpec, WALLET_OUTBOX};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Executor};
use tokio::sync::OnceCell;

const SOCKET_ROOT_URL: &str = "mysql://root@localhost/?socket=/run/mysqld/mysqld.sock";

static SERVER: OnceCell<String> = OnceCell::const_new();
pub static COUNTER: AtomicU32 = AtomicU32::new(0);

/// The kind of server the suite runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    MariaDb,
    MySql,
}

/// The server the suite runs on (`OUTBOX_ARCHIVER_TEST_SERVER`).
pub fn flavour() -> Flavour {
    match std::env::var("OUTBOX_ARCHIVER_TEST_SERVER").as_deref() {
        Ok("mysql") => Flavour::MySql,
        Ok("mariadb") | Err(_) => Flavour::MariaDb,
        Ok(other) => panic!("OUTBOX_ARCHIVER_TEST_SERVER={other:?}: use mariadb or mysql"),
    }
}

/// The port of the chroot's shared MySQL server (`.ci/mysql start`).
pub fn mysql_port() -> u16 {
    std::env::var("OUTBOX_ARCHIVER_MYSQL_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3307)
}

/// The tests' own user on the shared server (no database part).
pub fn test_user_url() -> String {
    match flavour() {
        Flavour::MariaDb => "mysql://outbox_test:outbox_test@127.0.0.1:3306".to_string(),
        Flavour::MySql => format!("mysql://outbox_test:outbox_test@127.0.0.1:{}", mysql_port()),
    }
}

/// The server URL tests create their databases on (no database part).
pub async fn server_url() -> String {
    SERVER
        .get_or_init(|| async {
            if let Ok(url) = std::env::var("OUTBOX_ARCHIVER_TEST_DATABASE_URL") {
                return url;
            }
            let url = test_user_url();
            if try_connect(&url).await.is_err() {
                bootstrap_test_user().await;
            }
            drop_leftovers(&url).await;
            url
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
    let mut root = admin_connection().await;
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

/// The URL of a user that may create users and grant privileges: `OUTBOX_ARCHIVER_TEST_ADMIN_URL`,
/// else root over the local MariaDB's unix socket, or the administrator `.ci/mysql` creates.
pub fn admin_url() -> String {
    std::env::var("OUTBOX_ARCHIVER_TEST_ADMIN_URL").unwrap_or_else(|_| match flavour() {
        Flavour::MariaDb => SOCKET_ROOT_URL.to_string(),
        Flavour::MySql => format!("mysql://oat_admin:oat-admin-pw@127.0.0.1:{}", mysql_port()),
    })
}

/// A connection that may create users and grant privileges ([`admin_url`]).
pub async fn admin_connection() -> sqlx::MySqlConnection {
    try_connect(&admin_url()).await.unwrap_or_else(|e| {
        panic!(
            "cannot connect to the {:?} test server as an administrator ({e}): start it (.ci/test does; \
             for MySQL `.ci/mysql start`), or set OUTBOX_ARCHIVER_TEST_ADMIN_URL",
            flavour()
        )
    })
}

/// Drops databases that earlier test processes left behind (evidence of a failure, kept until
/// the next run) — never those of a test process still running (a suite in another checkout).
async fn drop_leftovers(url: &str) {
    let mut conn = try_connect(url).await.expect("test user connects");
    let prefix = format!("oat_{}_", std::process::id());
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'oat\\_%'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let running = |name: &str| {
        name.strip_prefix("oat_")
            .and_then(|rest| rest.split('_').next())
            .is_some_and(|pid| std::path::Path::new("/proc").join(pid).exists())
    };
    for name in names
        .into_iter()
        .filter(|n| !n.starts_with(&prefix) && !running(n))
    {
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
    /// The outbox table this database holds (wallet_outbox unless made with [`TestDb::for_table`]).
    pub spec: &'static TableSpec,
    /// The status its delivered rows have.
    pub delivered_status: &'static str,
}

impl TestDb {
    pub async fn new() -> TestDb {
        TestDb::on(&server_url().await).await
    }

    /// A database of its own with `spec`'s reference source table and owned tables, made by
    /// `migrate --with-source-table` as an operator would.
    pub async fn for_table(spec: &'static TableSpec) -> TestDb {
        TestDb::for_table_on(&server_url().await, spec).await
    }

    /// As [`TestDb::for_table`], on the server at `server`.
    pub async fn for_table_on(server: &str, spec: &'static TableSpec) -> TestDb {
        let mut db = TestDb::empty(server).await;
        db.spec = spec;
        let migrated = outbox_archiver::migrate::run(
            &db.db,
            spec,
            &outbox_archiver::migrate::MigrateOptions {
                with_source_table: true,
                seed_rows: None,
            },
        )
        .await;
        assert!(migrated.ok, "{:?}", migrated.error);
        db
    }

    /// A database of its own on the server at `server` (a URL with no database part).
    pub async fn on(server: &str) -> TestDb {
        let db = TestDb::empty(server).await;
        outbox_archiver::migrate_database(&db.db.pool)
            .await
            .unwrap();
        outbox_archiver::create_source_table(&db.db.pool, &WALLET_OUTBOX)
            .await
            .unwrap();
        db
    }

    /// A database of its own with no tables.
    pub async fn empty(server: &str) -> TestDb {
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
        TestDb {
            name,
            url,
            db,
            spec: &WALLET_OUTBOX,
            delivered_status: "DELIVERED",
        }
    }

    /// A lock prefix unique to this test, so parallel tests never share an advisory lock.
    pub fn lock_prefix(&self) -> String {
        format!("{}:", self.name)
    }

    pub async fn insert(&self, rows: &[Row]) {
        outbox_archiver::testing::insert_rows(&self.db.pool, self.spec, rows)
            .await
            .unwrap();
    }

    /// Runs one statement that takes no parameters (DDL, a fixture's UPDATE).
    pub async fn exec(&self, sql: &str) {
        sqlx::raw_sql(AssertSqlSafe(sql.to_string()))
            .execute(&self.db.pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    pub async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(AssertSqlSafe(sql.to_string()))
            .fetch_one(&self.db.pool)
            .await
            .unwrap()
    }

    /// The (event_id, updated_at_ms, batch_id) of every member of `app`, by event id.
    pub async fn members(&self, app: &str) -> Vec<(String, i64, String)> {
        let sql = format!(
            "SELECT event_id, updated_at_ms, batch_id FROM {} WHERE app_code = ? ORDER BY event_id",
            self.spec.members_table()
        );
        sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .fetch_all(&self.db.pool)
            .await
            .unwrap()
    }

    /// Every receipt row as (batch_id, data_object_key, row_count, manifest_sha256), by batch id.
    pub async fn receipts(&self, app: &str) -> Vec<(String, String, i64, String)> {
        let sql = format!(
            "SELECT batch_id, data_object_key, row_count, manifest_sha256 FROM {} WHERE app_code = ? ORDER BY batch_id",
            self.spec.receipts_table()
        );
        sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .fetch_all(&self.db.pool)
            .await
            .unwrap()
    }

    /// Source rows that must be archived: delivered and below the cutoff, in cursor order.
    pub async fn expected_rows(&self, app: &str, cutoff_ms: i64) -> Vec<Row> {
        let pages = outbox_archiver::SourceTable::new(&self.db.pool, self.spec);
        let mut rows = Vec::new();
        let mut after = None;
        loop {
            let page = pages
                .page(app, self.delivered_status, after.as_ref(), cutoff_ms, 500)
                .await
                .unwrap();
            if page.is_empty() {
                return rows;
            }
            after = Some(page.last().unwrap().cursor());
            // Through the archive's own encoding: the line a row becomes, read back.
            rows.extend(page.iter().map(|r| {
                outbox_archiver::decode_line(self.spec, &r.line[..r.line.len() - 1], 1).unwrap()
            }));
        }
    }
}

/// A test's database is dropped when the test ends — unless the test failed: then it stays as the
/// evidence (the next run's [`drop_leftovers`] removes it). Drop cannot wait, so a thread of its
/// own drops it on a connection of its own.
impl Drop for TestDb {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let mut server = url::Url::parse(&self.url).unwrap();
        server.set_path("");
        let sql = format!("DROP DATABASE IF EXISTS `{}`", self.name);
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let mut conn = try_connect(server.as_str()).await?;
                conn.execute(AssertSqlSafe(sql)).await?;
                conn.close().await
            })
        })
        .join()
        .expect("the drop thread ends");
        if let Err(e) = dropped {
            eprintln!("dropping test database {}: {e}", self.name);
        }
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

/// From inside a (synchronous) fail point: finds the connection ids `find` (bound to `arg`)
/// returns, at least one, and KILLs them from another session.
pub fn kill_all(url: &str, find: &'static str, arg: &str) {
    tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(async {
            let mut admin = sqlx::MySqlConnection::connect(url).await.unwrap();
            let ids: Vec<i64> = sqlx::query_scalar(find)
                .bind(arg)
                .fetch_all(&mut admin)
                .await
                .unwrap();
            assert!(!ids.is_empty(), "a connection to kill");
            for id in ids {
                sqlx::query(sqlx::AssertSqlSafe(format!("KILL {id}")))
                    .execute(&mut admin)
                    .await
                    .unwrap();
            }
            admin.close().await.unwrap();
        })
    });
}

/// Every row of `app` in `table`, in cursor order, every column. The order is the database's
/// (its collation of the event id), asked for the keys alone: MySQL's 256 KiB sort buffer
/// cannot sort whole rows of a MiB ("Out of sort memory").
pub async fn table_rows(db: &TestDb, table: &str, app: &str) -> Vec<Row> {
    let spec = db.spec;
    let order = format!(
        "SELECT {id} FROM {table} WHERE {app_col} = ? ORDER BY {upd}, {id}",
        id = spec.event_id,
        app_col = spec.app_code,
        upd = spec.updated_at_ms,
    );
    let order: Vec<String> = sqlx::query_scalar(AssertSqlSafe(order))
        .bind(app)
        .fetch_all(&db.db.pool)
        .await
        .unwrap();
    let sql = format!(
        "SELECT {} FROM {table} WHERE {} = ?",
        spec.select_list(),
        spec.app_code,
    );
    let rows = sqlx::query(AssertSqlSafe(sql))
        .bind(app)
        .fetch_all(&db.db.pool)
        .await
        .unwrap();
    let id_at = spec
        .columns
        .iter()
        .position(|c| c.name == spec.event_id)
        .unwrap();
    let mut by_id: std::collections::HashMap<Vec<u8>, Row> = rows
        .iter()
        .map(|r| {
            let row = decode_row(db.spec, r).unwrap();
            let id = match &row[id_at] {
                outbox_archiver::Value::Text(t) => t.as_bytes().to_vec(),
                outbox_archiver::Value::Bytes(b) => b.clone(),
                other => panic!("event id {other:?}"),
            };
            (id, row)
        })
        .collect();
    order
        .iter()
        .map(|id| by_id.remove(id.as_bytes()).expect("a row per key"))
        .collect()
}

/// deploy/mysql-grants.sql as an operator runs it for `db`'s database: its three roles —
/// archiver, purger, compactor — named `roles`, with `password`.
pub fn grants_sql(db: &TestDb, roles: [&str; 3], password: &str) -> String {
    let [archiver, purger, compactor] = roles;
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/mysql-grants.sql"
    ))
    .unwrap()
    .replace("`wallet`.", &format!("`{}`.", db.name))
    .replace("'outbox_archiver'", &format!("'{archiver}'"))
    .replace("'outbox_purger'", &format!("'{purger}'"))
    .replace("'outbox_compactor'", &format!("'{compactor}'"))
    .replace("CHANGE-ME", password)
}

/// deploy/mysql-grants.sql applied to the server for `db` (see [`grants_sql`]); returns a
/// function giving each role's URL, as an operator's Secret holds it.
pub async fn apply_grants(
    db: &TestDb,
    roles: [&str; 3],
    password: &'static str,
) -> impl Fn(&str) -> String {
    use sqlx::Executor;
    let grants = grants_sql(db, roles, password);
    let mut admin = admin_connection().await;
    let statements = sql_statements(&grants);
    assert!(statements.len() >= 10, "{statements:?}");
    for statement in statements {
        admin
            .execute(sqlx::AssertSqlSafe(statement.clone()))
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    let base = db.url.clone();
    move |user: &str| {
        let mut url = url::Url::parse(&base).unwrap();
        url.set_username(user).unwrap();
        url.set_password(Some(password)).unwrap();
        url.to_string()
    }
}

/// The statements of an SQL script, comment lines left out, in order.
pub fn sql_statements(script: &str) -> Vec<String> {
    script
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The rows of `table` matching `filter` (SQL), each column as the server holds it — its bytes
/// in hex (`HEX(column)`, NULL as None), no value read through the archiver's own decoding or
/// encoding — sorted by those (MySQL's sort buffer cannot sort whole rows of a MiB): what "back
/// byte for byte" is held to.
pub async fn server_rows(db: &TestDb, table: &str, filter: &str) -> Vec<Vec<Option<String>>> {
    let spec = db.spec;
    let columns: Vec<String> = spec
        .columns
        .iter()
        .map(|c| format!("HEX({})", c.name))
        .collect();
    let sql = format!("SELECT {} FROM {table} WHERE {filter}", columns.join(", "));
    let rows = sqlx::query(AssertSqlSafe(sql))
        .fetch_all(&db.db.pool)
        .await
        .unwrap();
    let mut rows: Vec<Vec<Option<String>>> = rows
        .iter()
        .map(|r| {
            (0..spec.columns.len())
                .map(|i| sqlx::Row::get::<Option<String>, _>(r, i))
                .collect()
        })
        .collect();
    rows.sort();
    rows
}
