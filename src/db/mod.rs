//! The MySQL boundary: the pool, migrations, and the three conversations the archiver has with
//! the database — reading keyset pages of the source table ([`source`]), holding the per-app
//! advisory lock ([`lock`]) and recording verified receipts with their members ([`receipts`]).
//!
//! Every connection runs READ COMMITTED. SQL stays portable between MySQL 8 and MariaDB ≥ 10.6.

pub(crate) mod added;
pub(crate) mod apps;
mod columns;
pub(crate) mod compact;
pub(crate) mod drills;
pub(crate) mod home;
pub(crate) mod kept;
pub(crate) mod layout;
pub(crate) mod lock;
pub(crate) mod log_heads;
pub(crate) mod logs;
pub(crate) mod members;
pub(crate) mod nodelay;
pub(crate) mod object_versions;
pub(crate) mod owned;
pub(crate) mod preflight;
pub(crate) mod purge;
pub(crate) mod receipts;
pub(crate) mod record;
pub(crate) mod replica;
pub(crate) mod restore;
pub(crate) mod runs;
mod schema;
pub(crate) use schema::definition;
pub(crate) mod source;
pub(crate) mod tables;

use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::{Executor, MySql, Pool};

use crate::model::ident;
use crate::model::redact;
use crate::model::table::TableSpec;

/// A database failure, in the operator's words. Messages never contain the password.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("invalid {setting} ({url}): {detail}")]
    InvalidUrl {
        setting: String,
        url: String,
        detail: String,
    },
    #[error("the database refused the login ({detail}): check the user and password in --database-url / DATABASE_URL ({url}){hint}")]
    AccessDenied {
        url: String,
        detail: String,
        /// What else it may be, where that can be told from the settings.
        hint: &'static str,
    },
    #[error("database {database:?} does not exist on {url} (check --database-url / DATABASE_URL)")]
    UnknownDatabase { url: String, database: String },
    /// MySQL and MariaDB answer a database that does not exist with "access denied" (1044) to a
    /// login without rights on it, so as not to tell which databases exist.
    #[error("database {database:?} does not exist on {url}, or the login may not use it (the server answers both alike to a user without rights on it): check the database name in --database-url / DATABASE_URL, then the login's grants (deploy/mysql-grants.sql)")]
    DatabaseDenied { url: String, database: String },
    #[error("cannot reach the database at {url} ({detail}): check --database-url / DATABASE_URL and that the server is running")]
    Unreachable { url: String, detail: String },
    /// The TLS handshake with the database failed: the server's certificate is not trusted, has
    /// expired, does not name the host, or the server offers no TLS.
    #[error("TLS to the database at {url} failed: {problem} ({detail}); {fix} — the ssl-mode / ssl-ca parameters of --database-url / DATABASE_URL")]
    Tls {
        url: String,
        problem: &'static str,
        fix: &'static str,
        detail: String,
    },
    /// The server refuses connections without TLS (`require_secure_transport=ON`).
    #[error("the database at {url} accepts only TLS connections (require_secure_transport=ON) and refused this one without TLS: add ?ssl-mode=VERIFY_IDENTITY&ssl-ca=/path/to/ca.pem to --database-url / DATABASE_URL (README, \"TLS to the database\")")]
    InsecureTransport { url: String },
    #[error("the archiver's tables are not up to date (migration {missing} is not applied): run `outbox-archiver migrate` first")]
    NotMigrated { missing: String },
    /// The owned tables were migrated by a newer build to a layout this one does not know: it
    /// writes nothing (SPEC §20).
    #[error("the archiver's tables are at layout {found} ({table}, migrated by {migrated_by}), newer than this build knows (outbox-archiver {build}, layout {known}): run that build or a newer one — `outbox-archiver --version` names the layout a build knows; a build never works on a layout newer than its own (README, \"Upgrading\")", build = crate::db::layout::BUILD)]
    NewerLayout {
        table: String,
        found: u32,
        known: u32,
        migrated_by: String,
    },
    #[error("the archiver's table {table} {problem}: run `outbox-archiver migrate {table_flag}` (and check --table / --table-profile: another table's archiver tables do not fit this one)")]
    OwnedTable {
        table: String,
        problem: String,
        table_flag: String,
    },
    #[error(
        "source table {table} is missing (check --table / --table-profile and --database-url)"
    )]
    NoSourceTable { table: String },
    /// The source table does not fit what the archiver reads (a column, a type, an index).
    #[error("{0}")]
    SourceShape(String),
    /// Something the command would destroy that is not its own (the demo's database).
    #[error("{0}")]
    NotOurs(String),
    #[error("{table}.{column} compares with collation {found}, {why}; fix it with: {fix}")]
    Collation {
        table: String,
        column: String,
        found: String,
        why: &'static str,
        fix: String,
    },
    #[error("--app / OUTBOX_ARCHIVER_APPS lists {codes}, which {table}.{column} ({collation}) holds to be one app code: list each app once")]
    EqualAppCodes {
        codes: String,
        table: String,
        column: String,
        collation: String,
    },
    #[error("--batch-id {ids} matches no receipt of {table} (check the id; `outbox-archiver status` and the receipts table list the batches)")]
    UnknownBatches { ids: String, table: String },
    #[error("--app {typed:?} matches no app in {table} or its receipts{closest}")]
    UnknownApp {
        typed: String,
        table: String,
        /// `"; did you mean …?"`, or nothing.
        closest: String,
    },
    #[error(transparent)]
    Failpoint(#[from] crate::failpoint::Tripped),
    #[error("{context}: {source}")]
    Query {
        context: String,
        #[source]
        source: sqlx::Error,
    },
}

/// Adds what was being done to a query error.
pub(crate) trait Context<T> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T, DbError>;
}

impl<T> Context<T> for Result<T, sqlx::Error> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T, DbError> {
        self.map_err(|source| DbError::Query {
            context: context(),
            source,
        })
    }
}

impl DbError {
    /// A failure a new connection a moment later may not meet: the server went away, restarted
    /// or failed over, the connection was reset or killed, the pool timed out, a deadlock or a
    /// lock wait timeout. Configuration mistakes and data problems are never transient.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            DbError::Unreachable { .. } => true,
            DbError::Query { source, .. } => match source {
                sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::WorkerCrashed => true,
                sqlx::Error::Database(e) => e
                    .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                    .is_some_and(|e| TRANSIENT_ERRORS.contains(&e.number())),
                _ => false,
            },
            _ => false,
        }
    }
}

/// Server errors worth a retry: 1053 shutdown in progress, 1205 lock wait timeout, 1213 deadlock,
/// 1927 connection killed (MariaDB), 2006 server gone away, 2013 lost connection, 4031
/// disconnected by the server (MySQL 8).
const TRANSIENT_ERRORS: [u16; 7] = [1053, 1205, 1213, 1927, 2006, 2013, 4031];

/// The pool and how to open more connections like it (the advisory lock needs its own).
#[derive(Debug, Clone)]
pub struct Db {
    pub pool: MySqlPool,
    pub options: MySqlConnectOptions,
    pub url_redacted: String,
}

/// Statements every connection runs first.
/// `time_zone` is UTC so that a `TIMESTAMP` column is read, archived (`…Z`) and restored as the
/// same instant whatever the server's zone.
const SESSION_SETUP: &str =
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; SET time_zone = '+00:00'";

impl Db {
    /// Parses the URL and opens a small pool, turning the usual mistakes into clear messages.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Db, DbError> {
        let url_redacted = redact::url(url);
        let options = connect_options(url, "--database-url / DATABASE_URL")?;
        // One connection first, outside the pool: a refused port, an unknown host, a refused
        // login or a TLS failure is said at once and in its own words, not as the pool's
        // "timed out" after its acquire timeout.
        {
            use sqlx::{ConnectOptions, Connection};
            let first = options.connect().await.map_err(|e| {
                classify_connect_error(e, &url_redacted, &secrets_of(url), &options)
            })?;
            let _ = first.close().await;
        }
        let tcp_port = options.get_socket().is_none().then(|| options.get_port());
        let pool = MySqlPoolOptions::new()
            .max_connections(max_connections)
            .min_connections(0)
            .acquire_timeout(Duration::from_secs(15))
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    sends_at_once(tcp_port);
                    conn.execute(SESSION_SETUP).await?;
                    Ok(())
                })
            })
            .connect_with(options.clone())
            .await
            .map_err(|e| classify_connect_error(e, &url_redacted, &secrets_of(url), &options))?;
        Ok(Db {
            pool,
            options,
            url_redacted,
        })
    }

    /// Opens one connection outside the pool, closed (never returned) when done.
    pub async fn dedicated(&self) -> Result<sqlx::MySqlConnection, DbError> {
        use sqlx::ConnectOptions;
        let mut conn = self
            .options
            .connect()
            .await
            .map_err(|e| classify_connect_error(e, &self.url_redacted, &[], &self.options))?;
        sends_at_once(
            self.options
                .get_socket()
                .is_none()
                .then(|| self.options.get_port()),
        );
        conn.execute(SESSION_SETUP)
            .await
            .context(|| "setting up a dedicated connection".into())?;
        Ok(conn)
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// `TCP_NODELAY` on the connections to the database's port, unless it is reached over a unix
/// socket ([`nodelay`]).
fn sends_at_once(tcp_port: Option<u16>) {
    if let Some(port) = tcp_port {
        let set = nodelay::set(port);
        if set > 0 {
            tracing::trace!(port, sockets = set, "TCP_NODELAY set");
        }
    }
}

/// The URL's query parameters sqlx understands; any other (`sslmode=verify-full`, a typo of
/// `ssl-mode`) would be silently ignored by sqlx and connect without the verification asked for.
const URL_PARAMETERS: [&str; 13] = [
    "ssl-mode",
    "sslmode",
    "ssl-ca",
    "sslca",
    "ssl-cert",
    "sslcert",
    "ssl-key",
    "sslkey",
    "charset",
    "collation",
    "socket",
    "statement-cache-capacity",
    "timezone",
];

/// Parses a database URL (`setting` names where it came from, for messages): unknown query
/// parameters are refused, an `ssl-ca` / `ssl-cert` / `ssl-key` file must be readable, and a
/// unix socket connects without TLS unless `ssl-mode` asks for it — MySQL offers TLS on its
/// socket too, and sqlx's TLS handshake over it fails ("Broken pipe"); the mysql client never
/// uses TLS on a socket, which the server already counts as secure transport.
pub(crate) fn connect_options(url: &str, setting: &str) -> Result<MySqlConnectOptions, DbError> {
    let invalid = |detail: String| DbError::InvalidUrl {
        setting: setting.to_string(),
        url: redact::url(url),
        detail: redact::scrub(&detail, &secrets_of(url)),
    };
    // Only a MySQL URL: anything else would be read with its scheme taken for a host name or
    // ignored, and the driver would connect to its default server (localhost:3306) instead.
    let scheme = url.split_once("://").map(|(scheme, _)| scheme);
    if !matches!(scheme, Some("mysql" | "mariadb")) {
        return Err(invalid(
            "not a MySQL URL (write mysql://user:password@host:3306/database; mariadb:// is read the same)".into(),
        ));
    }
    // A user or password with `#`, `/` or `?` that was not percent-encoded ends the URL's
    // authority early: the host would be read from the password (and blamed on DNS).
    if let Some(userinfo) = redact::userinfo(url) {
        if let Some(c) = userinfo.chars().find(|c| matches!(c, '#' | '/' | '?')) {
            return Err(invalid(format!(
                "the user or password contains {c:?}, which must be percent-encoded in a URL \
                 (# as %23, / as %2F, ? as %3F, @ as %40, : as %3A, % as %25)"
            )));
        }
    }
    let parsed = url::Url::parse(url).map_err(|e| invalid(e.to_string()))?;
    for (key, value) in parsed.query_pairs() {
        if matches!(&*key, "ssl-mode" | "sslmode") {
            ssl_mode(&value).map_err(|e| invalid(format!("{key}={value}: {e}")))?;
        }
    }
    let mut options = MySqlConnectOptions::from_str(url).map_err(|e| invalid(e.to_string()))?;
    let mut ssl_mode_given = false;
    for (key, value) in parsed.query_pairs() {
        if !URL_PARAMETERS.contains(&&*key) {
            return Err(invalid(format!(
                "unknown parameter {key:?} (known: ssl-mode, ssl-ca, ssl-cert, ssl-key, socket, charset, collation, timezone, statement-cache-capacity)"
            )));
        }
        match &*key {
            "ssl-mode" | "sslmode" => ssl_mode_given = true,
            "ssl-ca" | "sslca" | "ssl-cert" | "sslcert" | "ssl-key" | "sslkey" => {
                if let Err(e) = std::fs::metadata(&*value) {
                    return Err(invalid(format!("{key}={value}: {e}")));
                }
            }
            _ => {}
        }
    }
    if options.get_socket().is_some() && !ssl_mode_given {
        options = options.ssl_mode(sqlx::mysql::MySqlSslMode::Disabled);
    }
    Ok(options)
}

/// An `ssl-mode` value as MySQL's clients spell it (any case); PostgreSQL's `sslmode` words,
/// which a URL copied from another service carries, named with the one meant here.
fn ssl_mode(value: &str) -> Result<(), String> {
    const MODES: [&str; 5] = [
        "DISABLED",
        "PREFERRED",
        "REQUIRED",
        "VERIFY_CA",
        "VERIFY_IDENTITY",
    ];
    let upper = value.to_ascii_uppercase();
    if MODES.contains(&upper.as_str()) {
        return Ok(());
    }
    let meant = match value.to_ascii_lowercase().as_str() {
        "verify-full" | "verify_full" | "verify-identity" => Some("VERIFY_IDENTITY"),
        "verify-ca" => Some("VERIFY_CA"),
        "require" | "required" => Some("REQUIRED"),
        "prefer" | "allow" => Some("PREFERRED"),
        "disable" => Some("DISABLED"),
        _ => None,
    };
    let known = "DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY";
    Err(match meant {
        Some(meant) => format!(
            "not a MySQL ssl-mode ({known}); PostgreSQL's {value:?} is ssl-mode={meant} here (with ssl-ca=/path/to/ca.pem)"
        ),
        None => format!("not a MySQL ssl-mode: write {known}"),
    })
}

fn secrets_of(url: &str) -> Vec<String> {
    url::Url::parse(url)
        .ok()
        .and_then(|u| u.password().map(str::to_string))
        .into_iter()
        .collect()
}

fn classify_connect_error(
    e: sqlx::Error,
    url: &str,
    secrets: &[String],
    options: &MySqlConnectOptions,
) -> DbError {
    let detail = redact::scrub(&e.to_string(), secrets);
    let url = url.to_string();
    // MariaDB refuses a connection without TLS to a server with require_secure_transport=ON
    // as it refuses a wrong password (1045); MySQL says so (3159).
    let hint = if matches!(options.get_ssl_mode(), sqlx::mysql::MySqlSslMode::Disabled) {
        "; or, if the server accepts only TLS connections (require_secure_transport=ON), connect with TLS: ssl-mode=VERIFY_IDENTITY&ssl-ca=/path/to/ca.pem instead of ssl-mode=DISABLED"
    } else {
        ""
    };
    // rustls's verdicts reach sqlx as a TLS error, or as an I/O error during the handshake.
    let tls = match &e {
        sqlx::Error::Tls(_) => Some(tls_problem(&detail).unwrap_or((
            "the handshake failed",
            "check the server's certificate against ssl-ca and ssl-mode",
        ))),
        sqlx::Error::Io(_) => tls_problem(&detail),
        _ => None,
    };
    if let Some((problem, fix)) = tls {
        return DbError::Tls {
            url,
            problem,
            fix,
            detail,
        };
    }
    if let sqlx::Error::Database(db) = &e {
        // 3159 ER_SECURE_TRANSPORT_REQUIRED (MySQL 5.7+, MariaDB 10.5+).
        let number = db
            .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            .map(|e| e.number());
        if number == Some(3159) || db.message().contains("insecure transport") {
            return DbError::InsecureTransport { url };
        }
    }
    match &e {
        sqlx::Error::Database(db) => refused(db.as_ref(), url, detail, hint),
        sqlx::Error::Configuration(_) | sqlx::Error::Tls(_) => DbError::InvalidUrl {
            setting: "--database-url / DATABASE_URL".into(),
            url,
            detail,
        },
        _ => DbError::Unreachable { url, detail },
    }
}

/// What the server's own refusal of the connection means: a login refused, a database that does
/// not exist (said as "access denied" to a login without rights on it), or another error.
fn refused(
    db: &dyn sqlx::error::DatabaseError,
    url: String,
    detail: String,
    hint: &'static str,
) -> DbError {
    let message = db.message();
    // 1044 ER_DBACCESS_DENIED_ERROR: "Access denied for user 'u'@'h' to database 'd'".
    if let Some((_, rest)) = message.split_once("to database '") {
        let database = rest.split('\'').next().unwrap_or_default().to_string();
        return DbError::DatabaseDenied { url, database };
    }
    match db.code().as_deref() {
        // 28000 = ER_ACCESS_DENIED_ERROR (1045) and friends
        Some("28000") => DbError::AccessDenied {
            url,
            detail: message.to_string(),
            hint,
        },
        Some("42000") if message.contains("Unknown database") => {
            let database = message.split('\'').nth(1).unwrap_or_default().to_string();
            DbError::UnknownDatabase { url, database }
        }
        _ if message.contains("Access denied") => DbError::AccessDenied {
            url,
            detail: message.to_string(),
            hint,
        },
        _ => DbError::Unreachable { url, detail },
    }
}

/// What a failed TLS handshake means, and what to do, from rustls's words.
fn tls_problem(detail: &str) -> Option<(&'static str, &'static str)> {
    // rustls names a certificate error by its variant (`UnknownIssuer`) or in words
    // (`certificate not valid for name …`, `certificate expired: …`).
    const TABLE: [(&[&str], &str, &str); 6] = [
        (
            &["UnknownIssuer"],
            "the server's certificate is not signed by a CA this job trusts",
            "set ssl-ca= to the file of the CA that signed it (RDS and Aurora: the region's or the global certificate bundle)",
        ),
        (
            &["Expired", "certificate expired"],
            "the server's certificate has expired",
            "renew the server's certificate (and check this machine's clock)",
        ),
        (
            &["NotValidYet", "not valid yet"],
            "the server's certificate is not valid yet",
            "check this machine's clock and the certificate's start date",
        ),
        (
            &["NotValidForName", "not valid for name"],
            "the server's certificate does not name the host of the URL",
            "connect by a host name or address the certificate lists (its subject alternative names), or use ssl-mode=VERIFY_CA, which checks the CA and not the name",
        ),
        (
            &["does not support TLS"],
            "the server does not offer TLS",
            "enable TLS on the server (ssl_cert, ssl_key), or leave ssl-mode out to connect without it",
        ),
        (
            &["Invalid certificate", "peer certificate"],
            "the server's certificate was refused",
            "check the server's certificate against ssl-ca and ssl-mode",
        ),
    ];
    TABLE
        .iter()
        .find(|(needles, _, _)| needles.iter().any(|n| detail.contains(n)))
        .map(|(_, problem, fix)| (*problem, *fix))
}

/// What an insert does with a row whose key the table already holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfPresent {
    /// The statement fails (duplicate key).
    Fail,
    /// The row is left as it is and not counted (`INSERT IGNORE`). IGNORE also turns other
    /// errors into warnings — a value too long is cut — so a caller reads the rows back.
    Skip,
}

/// Inserts whole rows into `table` (a table with `spec`'s columns) in one multi-row `INSERT`;
/// returns the rows inserted. Callers keep `rows.len() × columns` under MySQL's 65,535
/// placeholders.
pub async fn insert_rows<'e, E>(
    executor: E,
    spec: &TableSpec,
    table: &str,
    rows: &[&crate::model::codec::Row],
    if_present: IfPresent,
) -> Result<u64, sqlx::Error>
where
    E: Executor<'e, Database = MySql>,
{
    use crate::model::codec::Value;
    let columns: Vec<&str> = spec.columns.iter().map(|c| c.name).collect();
    let verb = match if_present {
        IfPresent::Fail => "INSERT",
        IfPresent::Skip => "INSERT IGNORE",
    };
    let mut qb =
        sqlx::QueryBuilder::<MySql>::new(format!("{verb} INTO {table} ({}) ", columns.join(", ")));
    qb.push_values(rows, |mut values, row| {
        for value in row.iter() {
            match value {
                Value::Null => values.push_bind(None::<i64>),
                Value::Int(v) => values.push_bind(*v),
                Value::Text(s) => values.push_bind(s.as_str()),
                Value::Bytes(b) => values.push_bind(b.as_slice()),
                Value::Float(bits) => values.push_bind(f32::from_bits(*bits)),
                Value::Double(bits) => values.push_bind(f64::from_bits(*bits)),
            };
        }
    });
    Ok(qb.build().execute(executor).await?.rows_affected())
}

/// The archiver's own tables, embedded from `migrations/`.
pub(crate) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Applies `migrations/` (the archiver's own tables).
pub async fn migrate(pool: &Pool<MySql>) -> Result<(), DbError> {
    MIGRATOR.run(pool).await.map_err(|e| DbError::Query {
        context: "applying migrations".into(),
        source: e.into(),
    })
}

/// The rows of a query of `information_schema`, sent as text (`COM_QUERY`) with `values` in
/// place of its `?`s as hexadecimal string literals (nothing in a value can change the
/// statement), decoded as `T`. Never a prepared statement: MariaDB 10.11.19 crashed (signal 11,
/// `ha_maria::drop_table` freeing the temporary table an `information_schema` query fills)
/// executing such a statement prepared — twice in the suite, on two of these queries — and
/// sqlx prepares every query and executes it again from its cache.
pub(crate) async fn schema_rows<'e, T, E>(
    executor: E,
    sql: &str,
    values: &[&str],
) -> Result<Vec<T>, sqlx::Error>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::mysql::MySqlRow> + Send + Unpin,
    E: Executor<'e, Database = MySql>,
{
    let rows = sqlx::raw_sql(sqlx::AssertSqlSafe(inline_values(sql, values)))
        .fetch_all(executor)
        .await?;
    rows.iter().map(T::from_row).collect()
}

/// [`schema_rows`] on the pool, asked again (up to three times) when the server fails on a
/// temporary file of its own: MariaDB 10.11.19 once answered such a query with "Error on
/// delete of '/tmp/#sql-temptable-….MAI' (Errcode: 2)" (its error 6) in the suite, under 50
/// SIGKILLed clients — nothing a second ask meets.
pub(crate) async fn schema_rows_on<T>(
    pool: &sqlx::MySqlPool,
    sql: &str,
    values: &[&str],
) -> Result<Vec<T>, sqlx::Error>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::mysql::MySqlRow> + Send + Unpin,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        match schema_rows(pool, sql, values).await {
            Err(sqlx::Error::Database(e))
                if attempt < 3
                    && e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                        .is_some_and(|e| e.number() == 6) =>
            {
                tracing::warn!(error = %e, "the server failed on a temporary file of its own; asking again");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

/// `sql` with each `?` replaced by the next of `values` as `_utf8mb4 X'…'`.
pub(crate) fn inline_values(sql: &str, values: &[&str]) -> String {
    let mut out = String::with_capacity(sql.len() + values.len() * 24);
    let mut values = values.iter();
    for c in sql.chars() {
        match c {
            '?' => {
                let value = values.next().expect("a value for every placeholder");
                out.push_str("_utf8mb4 X'");
                out.push_str(&hex::encode(value.as_bytes()));
                out.push('\'');
            }
            c => out.push(c),
        }
    }
    assert!(values.next().is_none(), "a placeholder for every value");
    out
}

/// Every distinct value of `column` (the first column of `table`'s primary key), by repeated
/// index dives (`MIN(column) … WHERE column > ?`): cost grows with the number of values, not of
/// rows.
pub(crate) async fn distinct_by_dives(
    pool: &MySqlPool,
    table: &str,
    column: &str,
) -> Result<Vec<String>, sqlx::Error> {
    let first = format!("SELECT MIN({column}) FROM {table}");
    let next = format!("SELECT MIN({column}) FROM {table} WHERE {column} > ?");
    let mut values = Vec::new();
    let mut current: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(first))
        .fetch_one(pool)
        .await?;
    while let Some(value) = current {
        current = sqlx::query_scalar(sqlx::AssertSqlSafe(next.clone()))
            .bind(&value)
            .fetch_one(pool)
            .await?;
        values.push(value);
    }
    Ok(values)
}

/// Drops and creates `database` on the server at `server_url` (the demo's throwaway database),
/// leaving a table named `marker` in it; returns the database's URL. An existing database
/// without that table is refused unless `force`: it is not the demo's to drop.
pub(crate) async fn recreate_database(
    server_url: &str,
    database: &str,
    marker: &str,
    force: bool,
) -> Result<String, DbError> {
    use sqlx::{ConnectOptions, Connection};
    let redacted = redact::url(server_url);
    let invalid = |detail: String| DbError::InvalidUrl {
        setting: "the demo's --database-url".into(),
        url: redacted.clone(),
        detail,
    };
    if !ident::is_plain(database) {
        return Err(invalid(format!(
            "demo database name {database:?} must be {}",
            ident::RULE
        )));
    }
    let mut url = url::Url::parse(server_url).map_err(|e| invalid(e.to_string()))?;
    url.set_path("");
    let options = connect_options(url.as_str(), "--database-url / DATABASE_URL")?;
    let mut conn = options
        .connect()
        .await
        .map_err(|e| classify_connect_error(e, &redacted, &secrets_of(server_url), &options))?;
    let (exists, marked): (i64, i64) = schema_rows(
        &mut conn,
        "SELECT (SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?), \
         (SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?)",
        &[database, database, marker],
    )
    .await
    .context(|| format!("looking for database {database}"))?
    .pop()
    .unwrap_or_default();
    if exists > 0 && marked == 0 && !force {
        let _ = conn.close().await;
        return Err(DbError::NotOurs(format!(
            "database {database} exists and was not made by the demo (it has no table {marker}): \
             nothing was dropped; give another --database, or --force to drop it"
        )));
    }
    for sql in [
        format!("DROP DATABASE IF EXISTS `{database}`"),
        format!("CREATE DATABASE `{database}` CHARACTER SET utf8mb4"),
        format!("CREATE TABLE `{database}`.`{marker}` (made_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP) COMMENT 'made by outbox-archiver demo, which drops this database on its next run'"),
    ] {
        conn.execute(sqlx::AssertSqlSafe(sql))
            .await
            .context(|| format!("recreating database {database}"))?;
    }
    let _ = conn.close().await;
    url.set_path(&format!("/{database}"));
    Ok(url.to_string())
}

/// Creates the reference source table (demos and tests; the service owns the real one).
pub async fn create_source_table(pool: &Pool<MySql>, spec: &TableSpec) -> Result<(), DbError> {
    pool.execute(spec.source_ddl)
        .await
        .context(|| format!("creating source table {}", spec.name))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::inline_values;

    #[test]
    fn values_are_inlined_as_hexadecimal_literals_that_nothing_in_them_can_escape() {
        assert_eq!(
            inline_values("SELECT 1 WHERE a = ? AND b IN (?, ?)", &["t", "it's", "x\\' OR 1"]),
            "SELECT 1 WHERE a = _utf8mb4 X'74' AND b IN (_utf8mb4 X'69742773', _utf8mb4 X'785c27204f522031')"
        );
        assert_eq!(inline_values("SELECT 1", &[]), "SELECT 1");
    }
}
