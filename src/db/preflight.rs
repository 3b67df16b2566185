//! What `doctor` asks the database, without writing anything: whether the login may run each
//! statement a command runs (an `EXPLAIN` of it needs the same privileges, and executes nothing
//! and is not written to the binary log), an index's columns, and the buffer pool against the
//! table's size.

use sqlx::{AssertSqlSafe, Row as _};

use super::{Context, Db, DbError};

/// A privilege a command needs on a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Privilege {
    Select,
    Insert,
    Update,
    Delete,
}

impl Privilege {
    pub fn as_str(self) -> &'static str {
        match self {
            Privilege::Select => "SELECT",
            Privilege::Insert => "INSERT",
            Privilege::Update => "UPDATE",
            Privilege::Delete => "DELETE",
        }
    }

    /// A statement that needs exactly this privilege on `table` and changes nothing, under
    /// `EXPLAIN` (which checks the privileges and runs nothing).
    fn probe(self, table: &str) -> String {
        match self {
            Privilege::Select => format!("EXPLAIN SELECT * FROM {table} WHERE 1 = 0"),
            Privilege::Insert => format!("EXPLAIN INSERT INTO {table} () VALUES ()"),
            Privilege::Update => {
                format!("EXPLAIN UPDATE {table} SET app_code = app_code WHERE 1 = 0")
            }
            Privilege::Delete => format!("EXPLAIN DELETE FROM {table} WHERE 1 = 0"),
        }
    }
}

/// Whether the login may use `privilege` on `table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    Granted,
    /// The server refused it (its message).
    Denied(String),
    /// The table is not there.
    NoTable,
}

/// The size of a table as information_schema estimates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSize {
    pub rows: u64,
    /// Data and indexes.
    pub bytes: u64,
}

impl Db {
    pub async fn server_version(&self) -> Result<String, DbError> {
        sqlx::query_scalar("SELECT VERSION()")
            .fetch_one(&self.pool)
            .await
            .context(|| "reading the server version".into())
    }

    /// Whether the login may use `privilege` on `table` (MySQL 8 and MariaDB check EXPLAIN's
    /// privileges as the statement's own, whether granted directly, by database or by role).
    pub async fn access(&self, table: &str, privilege: Privilege) -> Result<Access, DbError> {
        match sqlx::query(AssertSqlSafe(privilege.probe(table)))
            .fetch_all(&self.pool)
            .await
        {
            Ok(_) => Ok(Access::Granted),
            Err(sqlx::Error::Database(e)) => match e.code().as_deref() {
                // ER_TABLEACCESS_DENIED_ERROR, ER_COLUMNACCESS_DENIED_ERROR, ER_DBACCESS_DENIED
                Some("42000") if e.message().contains("denied") => {
                    Ok(Access::Denied(e.message().to_string()))
                }
                Some("42S02") => Ok(Access::NoTable),
                _ => Err(DbError::Query {
                    context: format!("checking {} on {table}", privilege.as_str()),
                    source: sqlx::Error::Database(e),
                }),
            },
            Err(e) => Err(DbError::Query {
                context: format!("checking {} on {table}", privilege.as_str()),
                source: e,
            }),
        }
    }

    /// The login as the server knows it (`user@host`), for the GRANT statements doctor prints.
    pub async fn current_user(&self) -> Result<String, DbError> {
        let user: String = sqlx::query_scalar("SELECT CURRENT_USER()")
            .fetch_one(&self.pool)
            .await
            .context(|| "reading the current user".into())?;
        Ok(match user.split_once('@') {
            Some((name, host)) => format!("'{name}'@'{host}'"),
            None => format!("'{user}'"),
        })
    }

    pub async fn database_name(&self) -> Result<String, DbError> {
        let name: Option<String> = sqlx::query_scalar("SELECT DATABASE()")
            .fetch_one(&self.pool)
            .await
            .context(|| "reading the database name".into())?;
        Ok(name.unwrap_or_default())
    }

    /// The columns of index `index` on `table`, in order (`None`: no such index).
    pub async fn index_columns(
        &self,
        table: &str,
        index: &str,
    ) -> Result<Option<Vec<String>>, DbError> {
        let columns: Vec<String> = sqlx::query_scalar(
            "SELECT column_name FROM information_schema.statistics \
             WHERE table_schema = DATABASE() AND table_name = ? AND index_name = ? ORDER BY seq_in_index",
        )
        .bind(table)
        .bind(index)
        .fetch_all(&self.pool)
        .await
        .context(|| format!("listing the columns of index {index} on {table}"))?;
        Ok((!columns.is_empty()).then(|| {
            columns
                .into_iter()
                .map(|c| c.to_ascii_lowercase())
                .collect()
        }))
    }

    /// `innodb_buffer_pool_size` in bytes.
    pub async fn buffer_pool_bytes(&self) -> Result<u64, DbError> {
        let size: u64 = sqlx::query_scalar("SELECT CAST(@@innodb_buffer_pool_size AS UNSIGNED)")
            .fetch_one(&self.pool)
            .await
            .context(|| "reading innodb_buffer_pool_size".into())?;
        Ok(size)
    }

    /// The table's estimated rows and bytes (data and indexes).
    pub async fn table_size(&self, table: &str) -> Result<Option<TableSize>, DbError> {
        let row = sqlx::query(
            "SELECT CAST(COALESCE(table_rows, 0) AS UNSIGNED), \
             CAST(COALESCE(data_length, 0) + COALESCE(index_length, 0) AS UNSIGNED) \
             FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
        )
        .bind(table)
        .fetch_optional(&self.pool)
        .await
        .context(|| format!("reading the size of {table}"))?;
        row.map(|r| {
            Ok(TableSize {
                rows: r.try_get(0)?,
                bytes: r.try_get(1)?,
            })
        })
        .transpose()
        .context(|| format!("decoding the size of {table}"))
    }
}
