//! The layout of the archiver's tables as a version (SPEC §20): one row in `<prefix>_layout`,
//! written by `migrate`, and the version this build was made for ([`LAYOUT`]). A migration
//! that changes what an older build would misread raises the version in its first statement,
//! before it changes anything; every transaction that writes what the archive holds — a receipt
//! and its members, a purge chunk and a batch finished, a compaction, a restore, the home moved,
//! objects recorded under new versions, batches recovered — reads the row with a shared lock
//! first ([`hold`]) and refuses a version newer than [`LAYOUT`]. The lock makes the two
//! exclusive: `migrate`'s update waits for the transactions that read the old version to end,
//! and every transaction after it reads the new one. Start-up checks the same
//! ([`Db::check_layout`]), so an older build stops before any work, with the version it met and
//! the build that wrote it.
//!
//! Builds released before the fence (every build before migration 19) do not read the row:
//! migration 19 renames the runs table's `command` column to `command_name`, a column every one
//! of them holds the runs table to at start-up (since 19c6e13), so they stop there.

use sqlx::MySqlConnection;

use super::{Context, Db, DbError};
use crate::model::table::TableSpec;

/// The layout of the archiver's tables this build reads and writes. Layout 1: migration 19 —
/// the fence itself (the layout table, the runs table's `command_name`). Layout 2: migration 20
/// — each receipt names its batch's column list (`columns_sha256`, the column sets table), which
/// its manifest holds.
pub(crate) const LAYOUT: u32 = 2;

/// This build as `--version` and the layout table name it: its version and its layout.
pub(crate) const BUILD: &str = concat!(env!("CARGO_PKG_VERSION"), " (archive layout 2)");

/// The layout row as `migrate` left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    pub version: u32,
    /// The build whose `migrate` wrote it (`outbox-archiver 0.1.0 (archive layout 1)`).
    pub migrated_by: String,
}

impl Layout {
    /// Refuses a layout newer than this build's.
    pub(crate) fn held(self, spec: &TableSpec) -> Result<(), DbError> {
        if self.version > LAYOUT {
            return Err(DbError::NewerLayout {
                table: spec.layout_table(),
                found: self.version,
                known: LAYOUT,
                migrated_by: self.migrated_by,
            });
        }
        Ok(())
    }
}

fn select(spec: &TableSpec) -> String {
    format!(
        "SELECT CAST(version AS SIGNED), CAST(migrated_by AS CHAR) FROM {} WHERE id = 1",
        spec.layout_table()
    )
}

fn decode(spec: &TableSpec, row: Option<(i64, String)>) -> Result<Layout, DbError> {
    match row {
        Some((version, migrated_by)) => Ok(Layout {
            version: u32::try_from(version).unwrap_or(0),
            migrated_by,
        }),
        None => Err(DbError::OwnedTable {
            table: spec.layout_table(),
            problem: "has no row (the layout version `migrate` writes)".into(),
            table_flag: spec.cli_flag(),
        }),
    }
}

/// In the transaction that is about to write: the layout read with a shared lock (held to the
/// commit; `migrate`'s update of it waits for it) and refused if newer than this build's.
pub(crate) async fn hold(conn: &mut MySqlConnection, spec: &TableSpec) -> Result<(), DbError> {
    let row: Option<(i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{} LOCK IN SHARE MODE",
        select(spec)
    )))
    .fetch_optional(&mut *conn)
    .await
    .context(|| format!("reading the layout version in {}", spec.layout_table()))?;
    decode(spec, row)?.held(spec)
}

impl Db {
    /// The layout as `migrate` left it; `None` where there is no layout table (a database
    /// migrated by a build before the fence, or not at all).
    pub(crate) async fn layout(&self, spec: &TableSpec) -> Result<Option<Layout>, DbError> {
        let tables: Vec<(String,)> = super::schema_rows(
            &self.pool,
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
            &[&spec.layout_table()],
        )
        .await
        .context(|| format!("looking for {}", spec.layout_table()))?;
        if tables.is_empty() {
            return Ok(None);
        }
        let row: Option<(i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(select(spec)))
            .fetch_optional(&self.pool)
            .await
            .context(|| format!("reading the layout version in {}", spec.layout_table()))?;
        decode(spec, row).map(Some)
    }

    /// Start-up: refuses a layout newer than this build's, naming the build that wrote it (a
    /// missing layout table is the owned tables' check's to name).
    pub(crate) async fn check_layout(&self, spec: &TableSpec) -> Result<(), DbError> {
        match self.layout(spec).await? {
            Some(layout) => layout.held(spec),
            None => Ok(()),
        }
    }

    /// After `migrate` brought the tables to [`LAYOUT`]: the row names this build as the one
    /// that did (a migration's SQL cannot know which build runs it).
    pub(crate) async fn sign_layout(&self, spec: &TableSpec, now_ms: i64) -> Result<(), DbError> {
        let by = format!("outbox-archiver {BUILD}");
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {} SET migrated_by = ?, migrated_at_ms = ? WHERE id = 1 AND version = ? AND migrated_by <> ?",
            spec.layout_table()
        )))
        .bind(&by)
        .bind(now_ms)
        .bind(LAYOUT)
        .bind(&by)
        .execute(&self.pool)
        .await
        .context(|| format!("recording this build in {}", spec.layout_table()))?;
        Ok(())
    }
}

/// `migrate` of a profile's tables (their layout table made): a newer layout refused before
/// anything changes; the row written for a new database; an older one raised to [`LAYOUT`]
/// before the tables change (the update waits for the transactions that read the old one).
pub(crate) async fn begin_migration(
    pool: &sqlx::MySqlPool,
    spec: &TableSpec,
) -> Result<(), DbError> {
    let table = spec.layout_table();
    let row: Option<(i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(select(spec)))
        .fetch_optional(pool)
        .await
        .context(|| format!("reading the layout version in {table}"))?;
    if let Some(row) = row {
        decode(spec, Some(row))?.held(spec)?;
    }
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT IGNORE INTO {table} (id, version, migrated_by, migrated_at_ms) VALUES (1, ?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))"
    )))
    .bind(LAYOUT)
    .bind(format!("outbox-archiver {BUILD}"))
    .execute(pool)
    .await
    .context(|| format!("writing the layout version in {table}"))?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE {table} SET version = ? WHERE id = 1 AND version < ?"
    )))
    .bind(LAYOUT)
    .bind(LAYOUT)
    .execute(pool)
    .await
    .context(|| format!("raising the layout version in {table}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::table::WALLET_OUTBOX;

    #[test]
    fn the_build_names_its_layout() {
        assert!(BUILD.ends_with(&format!("(archive layout {LAYOUT})")));
        assert!(BUILD.starts_with(env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn a_newer_layout_is_refused_naming_the_build_that_wrote_it() {
        let ok = Layout {
            version: LAYOUT,
            migrated_by: "x".into(),
        };
        assert!(ok.held(&WALLET_OUTBOX).is_ok());
        let newer = Layout {
            version: LAYOUT + 1,
            migrated_by: "outbox-archiver 9.9.9 (archive layout 2)".into(),
        };
        let message = newer.held(&WALLET_OUTBOX).unwrap_err().to_string();
        assert!(
            message.contains(&format!("layout {}", LAYOUT + 1)),
            "{message}"
        );
        assert!(
            message.contains("outbox-archiver 9.9.9 (archive layout 2)"),
            "{message}"
        );
        assert!(message.contains(BUILD), "{message}");
    }
}
