//! The MySQL boundary: the pool, migrations, and the three conversations the archiver has with
//! the database — reading keyset pages of the source table ([`source`]), holding the per-app
//! advisory lock ([`lock`]) and recording verified receipts with their members ([`receipts`]).
//!
//! Every connection runs READ COMMITTED. SQL stays portable between MySQL 8 and MariaDB ≥ 10.6.

pub mod lock;
pub mod purge;
pub mod receipts;
pub mod restore;
pub mod runs;
pub mod source;

use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::{Executor, MySql, Pool};

use crate::redact;
use crate::table::TableSpec;

/// A database failure, in the operator's words. Messages never contain the password.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("invalid --database-url / DATABASE_URL ({url}): {detail}")]
    InvalidUrl { url: String, detail: String },
    #[error("the database refused the login ({detail}): check the user and password in --database-url / DATABASE_URL ({url})")]
    AccessDenied { url: String, detail: String },
    #[error("database {database:?} does not exist on {url} (check --database-url / DATABASE_URL)")]
    UnknownDatabase { url: String, database: String },
    #[error("cannot reach the database at {url} ({detail}): check --database-url / DATABASE_URL and that the server is running")]
    Unreachable { url: String, detail: String },
    #[error("the archiver's tables are not up to date (migration {missing} is not applied): run `outbox-archiver migrate` first")]
    NotMigrated { missing: String },
    #[error("source table {table} is missing (check --table and --database-url)")]
    NoSourceTable { table: String },
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
pub trait Context<T> {
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
    pub fn is_transient(&self) -> bool {
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
const SESSION_SETUP: &str = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";

impl Db {
    /// Parses the URL and opens a small pool, turning the usual mistakes into clear messages.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Db, DbError> {
        let url_redacted = redact::url(url);
        let options = MySqlConnectOptions::from_str(url).map_err(|e| DbError::InvalidUrl {
            url: url_redacted.clone(),
            detail: redact::scrub(&e.to_string(), &secrets_of(url)),
        })?;
        let pool = MySqlPoolOptions::new()
            .max_connections(max_connections)
            .min_connections(0)
            .acquire_timeout(Duration::from_secs(15))
            .after_connect(|conn, _| {
                Box::pin(async move {
                    conn.execute(SESSION_SETUP).await?;
                    Ok(())
                })
            })
            .connect_with(options.clone())
            .await
            .map_err(|e| classify_connect_error(e, &url_redacted, &secrets_of(url)))?;
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
            .map_err(|e| classify_connect_error(e, &self.url_redacted, &[]))?;
        conn.execute(SESSION_SETUP)
            .await
            .context(|| "setting up a dedicated connection".into())?;
        Ok(conn)
    }

    /// Fails with a message naming the next step if the source table is not there or the
    /// archiver's migrations are not all applied.
    pub async fn require_tables(&self, spec: &TableSpec) -> Result<(), DbError> {
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name IN (?, ?)",
        )
        .bind(spec.name)
        .bind("_sqlx_migrations")
        .fetch_all(&self.pool)
        .await
        .context(|| "looking for the source and migrations tables".into())?;
        if !tables.iter().any(|t| t == spec.name) {
            return Err(DbError::NoSourceTable {
                table: spec.name.to_string(),
            });
        }
        let applied: Vec<i64> = if tables.iter().any(|t| t == "_sqlx_migrations") {
            sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success = 1")
                .fetch_all(&self.pool)
                .await
                .context(|| "reading the applied migrations".into())?
        } else {
            Vec::new()
        };
        if let Some(missing) = MIGRATOR.iter().find(|m| !applied.contains(&m.version)) {
            return Err(DbError::NotMigrated {
                missing: format!("{} {}", missing.version, missing.description),
            });
        }
        self.check_collations(spec).await
    }

    /// Refuses tables whose comparisons would make the archiver skip or repeat rows: every
    /// event id column must compare byte for byte (keyset paging and the cursor rely on the
    /// database's order, and a case-insensitive one holds `e1` and `E1` equal), and the
    /// archiver's tables must tell app codes apart wherever the source table does (by case).
    /// A table made by an older tool fails here with the `ALTER` that fixes it.
    pub async fn check_collations(&self, spec: &TableSpec) -> Result<(), DbError> {
        let owned = [
            (
                spec.receipts_table(),
                vec!["first_event_id", "last_event_id"],
            ),
            (spec.members_table(), vec!["event_id"]),
            (spec.superseded_table(), vec!["event_id"]),
        ];
        let mut event_ids = vec![(spec.name.to_string(), spec.event_id)];
        for (table, columns) in &owned {
            event_ids.extend(columns.iter().map(|c| (table.clone(), *c)));
        }
        let columns = self.columns().await?;
        let find = |table: &str, column: &str| {
            columns.iter().find(|c| {
                c.table.eq_ignore_ascii_case(table) && c.column.eq_ignore_ascii_case(column)
            })
        };
        for (table, column) in &event_ids {
            let Some(c) = find(table, column) else {
                continue;
            };
            if !c.is_binary() {
                return Err(DbError::Collation {
                    table: table.clone(),
                    column: column.to_string(),
                    found: c.collation.clone().unwrap_or_default(),
                    why: "which is not binary: event ids must compare byte for byte, or keyset paging skips and repeats rows that compare equal",
                    fix: c.alter_to_binary(),
                });
            }
        }
        let Some(source) = find(spec.name, spec.app_code) else {
            return Ok(());
        };
        // App codes are `[A-Za-z0-9_.-]`: what matters is whether case tells two apart. Only
        // archiver tables that conflate codes the source keeps apart are refused (the names of
        // two case-insensitive collations may differ: utf8mb4_unicode_ci, utf8mb4_0900_ai_ci).
        if !source.tells_case_apart() {
            return Ok(());
        }
        for (table, _) in &owned {
            let Some(c) = find(table, "app_code") else {
                continue;
            };
            if !c.tells_case_apart() {
                return Err(DbError::Collation {
                    table: table.clone(),
                    column: "app_code".into(),
                    found: c.collation.clone().unwrap_or_default(),
                    why: "which holds app codes equal that the source table's collation tells apart (by case): two apps would share receipts and a cursor",
                    fix: format!(
                        "{} (a table rebuild: on a large table schedule it like any large ALTER)",
                        c.alter_to(source.charset.as_deref(), source.collation.as_deref())
                    ),
                });
            }
        }
        Ok(())
    }

    /// Refuses a list of app codes of which two are one code under the source table's collation
    /// (`a1` and `A1` under a case-insensitive one): they would archive the same rows twice.
    pub async fn check_app_list(&self, spec: &TableSpec, apps: &[String]) -> Result<(), DbError> {
        let mut apps = apps.to_vec();
        apps.sort();
        apps.dedup();
        if apps.len() < 2 {
            return Ok(());
        }
        let columns = self.columns().await?;
        let Some(source) = columns.iter().find(|c| {
            c.table.eq_ignore_ascii_case(spec.name) && c.column.eq_ignore_ascii_case(spec.app_code)
        }) else {
            return Ok(());
        };
        let (Some(charset), Some(collation)) = (&source.charset, &source.collation) else {
            return Ok(());
        };
        let codes = vec!["SELECT CONVERT(? USING {cs}) AS code"; apps.len()]
            .join(" UNION ALL ")
            .replace("{cs}", charset);
        let sql = format!(
            "SELECT GROUP_CONCAT(code ORDER BY code SEPARATOR '\n') FROM ({codes}) AS listed \
             GROUP BY code COLLATE {collation} HAVING COUNT(DISTINCT CAST(code AS BINARY)) > 1 LIMIT 1"
        );
        let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql));
        for app in &apps {
            query = query.bind(app);
        }
        let equal = query.fetch_optional(&self.pool).await.context(|| {
            "comparing the listed app codes under the source table's collation".into()
        })?;
        match equal {
            None => Ok(()),
            Some(codes) => Err(DbError::EqualAppCodes {
                codes: codes
                    .split('\n')
                    .map(|c| format!("{c:?}"))
                    .collect::<Vec<_>>()
                    .join(" and "),
                table: spec.name.to_string(),
                column: spec.app_code.to_string(),
                collation: collation.clone(),
            }),
        }
    }

    /// The character columns of this database's tables, with their collations.
    async fn columns(&self) -> Result<Vec<ColumnInfo>, DbError> {
        type Described = (
            String,
            String,
            String,
            Option<String>,
            Option<String>,
            String,
        );
        let rows: Vec<Described> =
            sqlx::query_as(
                "SELECT CAST(table_name AS CHAR), CAST(column_name AS CHAR), CAST(column_type AS CHAR), \
                 CAST(character_set_name AS CHAR), CAST(collation_name AS CHAR), CAST(is_nullable AS CHAR) \
                 FROM information_schema.columns WHERE table_schema = DATABASE() \
                 AND (column_name LIKE '%event\\_id' OR column_name = 'app_code')",
            )
            .fetch_all(&self.pool)
            .await
            .context(|| "reading the tables' column definitions".into())?;
        Ok(rows
            .into_iter()
            .map(
                |(table, column, column_type, charset, collation, nullable)| ColumnInfo {
                    table,
                    column,
                    column_type,
                    charset,
                    collation,
                    nullable: nullable == "YES",
                },
            )
            .collect())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// One column as information_schema describes it.
#[derive(Debug, Clone)]
struct ColumnInfo {
    table: String,
    column: String,
    column_type: String,
    charset: Option<String>,
    collation: Option<String>,
    nullable: bool,
}

impl ColumnInfo {
    /// Byte-for-byte comparison: a `_bin` collation, or a binary type (no collation).
    fn is_binary(&self) -> bool {
        self.collation
            .as_deref()
            .is_none_or(|c| c.ends_with("_bin") || c == "binary")
    }

    /// Whether `a1` and `A1` are different values: a binary, `_bin` or case-sensitive collation.
    fn tells_case_apart(&self) -> bool {
        self.is_binary() || self.collation.as_deref().is_some_and(|c| c.contains("_cs"))
    }

    fn alter_to(&self, charset: Option<&str>, collation: Option<&str>) -> String {
        format!(
            "ALTER TABLE {} MODIFY {} {}{}{}{}",
            self.table,
            self.column,
            self.column_type,
            charset.map_or(String::new(), |c| format!(" CHARACTER SET {c}")),
            collation.map_or(String::new(), |c| format!(" COLLATE {c}")),
            if self.nullable { " NULL" } else { " NOT NULL" }
        )
    }

    fn alter_to_binary(&self) -> String {
        let charset = self.charset.as_deref().unwrap_or("utf8mb4");
        self.alter_to(Some(charset), Some(&format!("{charset}_bin")))
    }
}

fn secrets_of(url: &str) -> Vec<String> {
    url::Url::parse(url)
        .ok()
        .and_then(|u| u.password().map(str::to_string))
        .into_iter()
        .collect()
}

fn classify_connect_error(e: sqlx::Error, url: &str, secrets: &[String]) -> DbError {
    let detail = redact::scrub(&e.to_string(), secrets);
    let url = url.to_string();
    match &e {
        sqlx::Error::Database(db) => match db.code().as_deref() {
            // 28000 = ER_ACCESS_DENIED_ERROR (1045) and friends
            Some("28000") => DbError::AccessDenied {
                url,
                detail: db.message().to_string(),
            },
            Some("42000") if db.message().contains("Unknown database") => {
                let database = db
                    .message()
                    .split('\'')
                    .nth(1)
                    .unwrap_or_default()
                    .to_string();
                DbError::UnknownDatabase { url, database }
            }
            _ if db.message().contains("Access denied") => DbError::AccessDenied {
                url,
                detail: db.message().to_string(),
            },
            _ => DbError::Unreachable { url, detail },
        },
        sqlx::Error::Configuration(_) | sqlx::Error::Tls(_) => DbError::InvalidUrl { url, detail },
        _ => DbError::Unreachable { url, detail },
    }
}

/// A multi-row `INSERT` of whole rows into `table` (a table with `spec`'s columns), bound and
/// ready to execute. Callers keep `rows.len() × columns` under MySQL's 65,535 placeholders.
pub fn insert_rows<'q>(
    spec: &TableSpec,
    table: &str,
    rows: &[&'q crate::codec::Row],
) -> sqlx::query::Query<'q, MySql, sqlx::mysql::MySqlArguments> {
    use crate::codec::Value;
    let columns = spec
        .columns
        .iter()
        .map(|c| c.name)
        .collect::<Vec<_>>()
        .join(", ");
    let one = format!("({})", vec!["?"; spec.columns.len()].join(", "));
    let sql = format!(
        "INSERT INTO {table} ({columns}) VALUES {}",
        vec![one.as_str(); rows.len()].join(", ")
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for row in rows {
        for value in row.iter() {
            query = match value {
                Value::Null => query.bind(None::<i64>),
                Value::Int(v) => query.bind(*v),
                Value::Text(s) => query.bind(s.as_str()),
                Value::Bytes(b) => query.bind(b.as_slice()),
            };
        }
    }
    query
}

/// The archiver's own tables, embedded from `migrations/`.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Applies `migrations/` (the archiver's own tables).
pub async fn migrate(pool: &Pool<MySql>) -> Result<(), DbError> {
    MIGRATOR.run(pool).await.map_err(|e| DbError::Query {
        context: "applying migrations".into(),
        source: e.into(),
    })
}

/// Drops and creates `database` on the server at `server_url` (the demo's throwaway database);
/// returns the database's URL.
pub async fn recreate_database(server_url: &str, database: &str) -> Result<String, DbError> {
    use sqlx::{ConnectOptions, Connection};
    let redacted = redact::url(server_url);
    let invalid = |detail: String| DbError::InvalidUrl {
        url: redacted.clone(),
        detail,
    };
    if !database
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(invalid(format!(
            "demo database name {database:?} must be letters, digits and _"
        )));
    }
    let mut url = url::Url::parse(server_url).map_err(|e| invalid(e.to_string()))?;
    url.set_path("");
    let options: MySqlConnectOptions = url
        .as_str()
        .parse()
        .map_err(|e: sqlx::Error| invalid(e.to_string()))?;
    let mut conn = options
        .connect()
        .await
        .map_err(|e| classify_connect_error(e, &redacted, &secrets_of(server_url)))?;
    for sql in [
        format!("DROP DATABASE IF EXISTS `{database}`"),
        format!("CREATE DATABASE `{database}` CHARACTER SET utf8mb4"),
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
