//! What `doctor` asks the database, without writing anything: whether the login may run each
//! statement a command runs (an `EXPLAIN` of it needs the same privileges, and executes nothing
//! and is not written to the binary log), an index's columns, and the buffer pool against the
//! table's size.

use sqlx::{AssertSqlSafe, Row as _};

use super::{Context, Db, DbError};

/// A privilege a command needs on a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Privilege {
    Select,
    Insert,
    Update,
    Delete,
}

impl Privilege {
    pub(crate) fn as_str(self) -> &'static str {
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
                // A column the table has: the layout's version, the added columns' drop mark,
                // every other owned table's app code.
                let column = if table.ends_with("_layout") {
                    "version"
                } else if table.ends_with("_columns") {
                    "dropped_at_ms"
                } else {
                    "app_code"
                };
                format!("EXPLAIN UPDATE {table} SET {column} = {column} WHERE 1 = 0")
            }
            Privilege::Delete => format!("EXPLAIN DELETE FROM {table} WHERE 1 = 0"),
        }
    }
}

/// Whether the login may use `privilege` on `table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Access {
    Granted,
    /// The server refused it (its message).
    Denied(String),
    /// The table is not there.
    NoTable,
}

/// The size of a table as information_schema estimates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableSize {
    pub rows: u64,
    /// Data and indexes.
    pub bytes: u64,
}

/// Which server the database is, and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Server {
    pub flavour: Flavour,
    /// `VERSION()`: `9.7.4-2`, `10.11.19-MariaDB-0+deb12u1`.
    pub version: String,
    /// `@@version_comment`: who built it (`(Debian)`, `MySQL Community Server - GPL`).
    pub comment: String,
    /// (major, minor) of the version.
    pub release: (u32, u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavour {
    MySql,
    MariaDb,
}

impl std::fmt::Display for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.flavour {
            Flavour::MySql => "MySQL",
            Flavour::MariaDb => "MariaDB",
        };
        write!(f, "{name} {} ({})", self.version, self.comment)
    }
}

impl Server {
    /// Parses what `VERSION()` and `@@version_comment` say.
    pub(crate) fn of(version: &str, comment: &str) -> Server {
        let flavour = if version.contains("MariaDB") || comment.contains("MariaDB") {
            Flavour::MariaDb
        } else {
            Flavour::MySql
        };
        let mut numbers = version
            .split(|c: char| !c.is_ascii_digit())
            .filter(|p| !p.is_empty())
            .map(|p| p.parse::<u32>().unwrap_or(0));
        let release = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
        Server {
            flavour,
            version: version.to_string(),
            comment: comment.to_string(),
            release,
        }
    }

    /// Whether the archiver supports this release (MySQL 8.0 and later, MariaDB 10.6 and later).
    pub(crate) fn supported(&self) -> bool {
        match self.flavour {
            Flavour::MySql => self.release >= (8, 0),
            Flavour::MariaDb => self.release >= (10, 6),
        }
    }
}

/// The TLS of this connection as the server sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tls {
    /// `Ssl_version` (`TLSv1.3`), `None` without TLS.
    pub version: Option<String>,
    /// `Ssl_cipher`.
    pub cipher: String,
}

impl Db {
    /// The server's flavour and version.
    pub(crate) async fn server(&self) -> Result<Server, DbError> {
        let (version, comment): (String, String) =
            sqlx::query_as("SELECT VERSION(), CAST(@@version_comment AS CHAR)")
                .fetch_one(&self.pool)
                .await
                .context(|| "reading the server version".into())?;
        Ok(Server::of(&version, &comment))
    }

    /// This session's TLS, from the server's session status.
    pub(crate) async fn tls(&self) -> Result<Tls, DbError> {
        let rows = sqlx::raw_sql(
            "SHOW SESSION STATUS WHERE Variable_name IN ('Ssl_version', 'Ssl_cipher')",
        )
        .fetch_all(&self.pool)
        .await
        .context(|| "reading the connection's TLS (SHOW SESSION STATUS)".into())?;
        let mut tls = Tls {
            version: None,
            cipher: String::new(),
        };
        for row in rows {
            let name: String = row.try_get(0).context(|| "reading Ssl_version".into())?;
            let value: String = row.try_get(1).context(|| "reading Ssl_version".into())?;
            match name.as_str() {
                "Ssl_version" if !value.is_empty() => tls.version = Some(value),
                "Ssl_cipher" => tls.cipher = value,
                _ => {}
            }
        }
        Ok(tls)
    }

    /// The tables of this database, by name.
    pub(crate) async fn existing_tables(&self) -> Result<Vec<String>, DbError> {
        let tables: Vec<(String,)> = super::schema_rows(
            &self.pool,
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY 1",
            &[],
        )
        .await
        .context(|| "listing the tables".into())?;
        Ok(tables.into_iter().map(|(t,)| t).collect())
    }

    /// Whether the source table holds a row (one primary-key read): `migrate --seed-rows`
    /// fills only an empty one.
    pub(crate) async fn source_holds_rows(
        &self,
        spec: &crate::model::table::TableSpec,
    ) -> Result<bool, DbError> {
        let sql = format!(
            "SELECT COUNT(*) FROM (SELECT 1 FROM {} LIMIT 1) AS r",
            spec.name
        );
        let n: i64 = sqlx::query_scalar(AssertSqlSafe(sql))
            .fetch_one(&self.pool)
            .await
            .context(|| format!("looking for rows in {}", spec.name))?;
        Ok(n > 0)
    }

    /// The migrations `migrate` has applied here (`version description`); none before the first.
    pub(crate) async fn applied_migrations(&self) -> Result<Vec<String>, DbError> {
        let applied: Vec<(i64, String)> = match sqlx::query_as(
            "SELECT version, CAST(description AS CHAR) FROM _sqlx_migrations WHERE success = 1 ORDER BY version",
        )
        .fetch_all(&self.pool)
        .await
        {
            Ok(rows) => rows,
            // No migration table yet: nothing applied.
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42S02") => Vec::new(),
            Err(e) => {
                return Err(DbError::Query {
                    context: "reading the applied migrations".into(),
                    source: e,
                })
            }
        };
        Ok(applied
            .into_iter()
            .map(|(version, description)| format!("{version} {description}"))
            .collect())
    }

    /// A server variable that is a number of bytes (`@@sort_buffer_size`); `name` is a constant.
    pub(crate) async fn bytes_variable(&self, name: &'static str) -> Result<u64, DbError> {
        sqlx::query_scalar(AssertSqlSafe(format!("SELECT CAST(@@{name} AS UNSIGNED)")))
            .fetch_one(&self.pool)
            .await
            .context(|| format!("reading {name}"))
    }

    /// Whether the login may use `privilege` on `table` (MySQL 8 and MariaDB check EXPLAIN's
    /// privileges as the statement's own, whether granted directly, by database or by role).
    pub(crate) async fn access(
        &self,
        table: &str,
        privilege: Privilege,
    ) -> Result<Access, DbError> {
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
    pub(crate) async fn current_user(&self) -> Result<String, DbError> {
        let user: String = sqlx::query_scalar("SELECT CURRENT_USER()")
            .fetch_one(&self.pool)
            .await
            .context(|| "reading the current user".into())?;
        Ok(match user.split_once('@') {
            Some((name, host)) => format!("'{name}'@'{host}'"),
            None => format!("'{user}'"),
        })
    }

    pub(crate) async fn database_name(&self) -> Result<String, DbError> {
        let name: Option<String> = sqlx::query_scalar("SELECT DATABASE()")
            .fetch_one(&self.pool)
            .await
            .context(|| "reading the database name".into())?;
        Ok(name.unwrap_or_default())
    }

    /// `innodb_buffer_pool_size` in bytes.
    pub(crate) async fn buffer_pool_bytes(&self) -> Result<u64, DbError> {
        let size: u64 = sqlx::query_scalar("SELECT CAST(@@innodb_buffer_pool_size AS UNSIGNED)")
            .fetch_one(&self.pool)
            .await
            .context(|| "reading innodb_buffer_pool_size".into())?;
        Ok(size)
    }

    /// The table's estimated rows and bytes (data and indexes).
    pub(crate) async fn table_size(&self, table: &str) -> Result<Option<TableSize>, DbError> {
        let row = super::schema_rows::<(u64, u64), _>(
            &self.pool,
            "SELECT CAST(COALESCE(table_rows, 0) AS UNSIGNED), \
             CAST(COALESCE(data_length, 0) + COALESCE(index_length, 0) AS UNSIGNED) \
             FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
            &[table],
        )
        .await
        .context(|| format!("reading the size of {table}"))?
        .pop();
        Ok(row.map(|(rows, bytes)| TableSize { rows, bytes }))
    }
}

#[cfg(test)]
mod tests {
    use super::{Flavour, Server};

    #[test]
    fn servers_are_told_apart_by_their_version() {
        let mysql = Server::of("9.7.4-2", "(Debian)");
        assert_eq!((mysql.flavour, mysql.release), (Flavour::MySql, (9, 7)));
        assert_eq!(mysql.to_string(), "MySQL 9.7.4-2 ((Debian))");
        let maria = Server::of("10.11.19-MariaDB-0+deb12u1", "Debian 12");
        assert_eq!((maria.flavour, maria.release), (Flavour::MariaDb, (10, 11)));
        assert!(mysql.supported() && maria.supported());
        assert!(!Server::of("5.7.44-log", "MySQL Community Server (GPL)").supported());
        assert!(!Server::of("10.5.2-MariaDB", "").supported());
        assert!(Server::of("8.0.36", "").supported());
    }
}
