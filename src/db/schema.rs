//! What must hold of the database before any work: the source table and the archiver's
//! migrations are there, and the tables compare what the archiver relies on the way it needs
//! (event ids byte for byte; app codes at least as finely as the source). A listed app code set
//! with two codes the source holds equal is refused.

use sqlx::{MySql, QueryBuilder};

use super::{Context, Db, DbError, MIGRATOR};
use crate::model::batch_columns::{BatchColumns, SharedColumns};
use crate::model::profile::{self, Index, LiveColumn, Profile};
use crate::model::table::{OwnedBy, TableSpec};

impl Db {
    /// Fails with a message naming the next step if the source table is not there or the
    /// archiver's migrations are not all applied.
    pub async fn require_tables(&self, spec: &TableSpec) -> Result<(), DbError> {
        let tables: Vec<(String,)> = super::schema_rows(
            &self.pool,
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name IN (?, ?)",
            &[spec.name, "_sqlx_migrations"],
        )
        .await
        .context(|| "looking for the source and migrations tables".into())?;
        let tables: Vec<String> = tables.into_iter().map(|(t,)| t).collect();
        if !tables.iter().any(|t| t == spec.name) {
            return Err(DbError::NoSourceTable {
                table: spec.name.to_string(),
            });
        }
        self.check_source(spec).await?;
        let applied: Vec<i64> = if spec.owned_by == OwnedBy::Migrations
            && tables.iter().any(|t| t == "_sqlx_migrations")
        {
            sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success = 1")
                .fetch_all(&self.pool)
                .await
                .context(|| "reading the applied migrations".into())?
        } else {
            Vec::new()
        };
        if spec.owned_by == OwnedBy::Migrations {
            if let Some(missing) = MIGRATOR.iter().find(|m| !applied.contains(&m.version)) {
                return Err(DbError::NotMigrated {
                    missing: format!("{} {}", missing.version, missing.description),
                });
            }
        }
        // Before the tables are held to this build's: a newer layout may have changed them.
        self.check_layout(spec).await?;
        self.check_owned_tables(spec).await?;
        self.check_archived_columns(spec).await?;
        self.check_collations(spec).await
    }

    /// Holds the source table to `spec`: its columns (`profile::check_live`) and the retention
    /// index every scan forces.
    async fn check_source(&self, spec: &TableSpec) -> Result<(), DbError> {
        let live = self.describe(spec.name).await?;
        profile::check_live(spec, &live).map_err(DbError::SourceShape)?;
        let indexes = self.indexes(spec.name).await?;
        let roles = [
            spec.app_code,
            spec.status,
            spec.updated_at_ms,
            spec.event_id,
        ];
        profile::retention_index(spec.name, roles, Some(spec.retention_index), &indexes)
            .map_err(DbError::SourceShape)?;
        profile::require_unique_key(
            spec.name,
            spec.app_code,
            spec.event_id,
            &indexes,
            Some(spec.event_key),
        )
        .map_err(DbError::SourceShape)?;
        Ok(())
    }

    /// [`Db::check_columns_unchanged`], asked of `information_schema` only when the table's
    /// definition is no longer `since` (what [`definition`] read when the run's columns were
    /// checked): the check before every receipt costs one `SHOW CREATE TABLE`.
    pub(crate) async fn check_columns_unchanged_since(
        &self,
        spec: &TableSpec,
        since: &str,
        columns: Option<&BatchColumns>,
    ) -> Result<(), DbError> {
        if definition(&self.pool, spec.name).await? == since {
            return Ok(());
        }
        self.check_columns_unchanged(spec).await?;
        // The same columns, and of the same types: what the batch's manifest names.
        let Some(columns) = columns else {
            return Ok(());
        };
        let now = self.batch_columns(spec).await?;
        if now.as_ref() == columns {
            return Ok(());
        }
        let changed: Vec<String> = now
            .columns
            .iter()
            .zip(&columns.columns)
            .filter(|(a, b)| a != b)
            .map(|(a, b)| format!("{} {} (was {})", a.name, a.sql_type, b.sql_type))
            .collect();
        Err(DbError::SourceShape(format!(
            "the columns of {} changed while this run archived it ({}): this batch is not recorded; the next run reads the table as it is now",
            spec.name,
            changed.join(", ")
        )))
    }

    /// The batches' columns as the table holds them now: `spec`'s, with their SQL types.
    pub(crate) async fn batch_columns(&self, spec: &TableSpec) -> Result<SharedColumns, DbError> {
        let live = self.describe(spec.name).await?;
        let sql_type = |name: &str| {
            live.iter()
                .find(|l| l.name.eq_ignore_ascii_case(name))
                .map_or_else(String::new, LiveColumn::batch_sql_type)
        };
        Ok(std::sync::Arc::new(BatchColumns::of(spec, sql_type)))
    }

    /// Refuses to go on when the source table's stored columns are no longer the ones `spec`
    /// reads (a column added or removed while the job runs): a batch is recorded only while its
    /// rows are the table's whole rows.
    pub async fn check_columns_unchanged(&self, spec: &TableSpec) -> Result<(), DbError> {
        let live = self.describe(spec.name).await?;
        let stored: Vec<&LiveColumn> = live.iter().filter(|l| !l.generated).collect();
        let same = stored.len() == spec.columns.len()
            && stored.iter().all(|l| {
                spec.columns
                    .iter()
                    .any(|c| l.name.eq_ignore_ascii_case(c.name))
            });
        if same {
            return Ok(());
        }
        let now: Vec<&str> = stored.iter().map(|c| c.name.as_str()).collect();
        Err(DbError::SourceShape(format!(
            "the columns of {} changed while this run archived it (now: {}): this batch is not recorded; the next run reads the table as it is now",
            spec.name,
            now.join(", ")
        )))
    }

    /// A built-in table as the database holds it: its own columns, then every stored column
    /// added to it since (SPEC §4: the archive holds the whole row). The table as this build
    /// knows it when it has none — or when it is not there (start-up then says so).
    pub async fn resolve_builtin(
        &self,
        spec: &'static TableSpec,
    ) -> Result<&'static TableSpec, DbError> {
        let live = self.describe(spec.name).await?;
        profile::with_added_columns(spec, &live).map_err(DbError::SourceShape)
    }

    /// Whether the source table's app code column tells codes apart by case (a binary, `_bin`
    /// or `_cs` collation): `Pay` and `pay` are then two apps.
    pub(crate) async fn app_codes_tell_case_apart(
        &self,
        spec: &TableSpec,
    ) -> Result<bool, DbError> {
        let columns = self.columns(spec).await?;
        Ok(find(&columns, spec.name, spec.app_code).is_some_and(ColumnInfo::tells_case_apart))
    }

    /// A profile's table, resolved against the live schema (`profile::resolve`).
    pub async fn resolve_profile(&self, profile: &Profile) -> Result<&'static TableSpec, DbError> {
        let live = self.describe(&profile.table).await?;
        let indexes = self.indexes(&profile.table).await?;
        let spec = profile::resolve(profile, &live, &indexes).map_err(DbError::SourceShape)?;
        Ok(spec)
    }

    /// `table`'s columns in table order (none: no such table).
    pub(crate) async fn describe(&self, table: &str) -> Result<Vec<LiveColumn>, DbError> {
        live_columns(&self.pool, table).await
    }

    /// `table`'s indexes, each with its columns in order (lowercase).
    pub(crate) async fn indexes(&self, table: &str) -> Result<Vec<Index>, DbError> {
        let rows: Vec<(String, String, i64)> = super::schema_rows(
            &self.pool,
            "SELECT CAST(index_name AS CHAR), CAST(LOWER(column_name) AS CHAR), CAST(non_unique AS SIGNED) \
             FROM information_schema.statistics \
             WHERE table_schema = DATABASE() AND table_name = ? ORDER BY index_name, seq_in_index",
            &[table],
        )
        .await
        .context(|| format!("listing the indexes of {table}"))?;
        let mut indexes: Vec<Index> = Vec::new();
        for (index, column, non_unique) in rows {
            match indexes.last_mut() {
                Some(last) if last.name == index => last.columns.push(column),
                _ => indexes.push(Index {
                    name: index,
                    columns: vec![column],
                    unique: non_unique == 0,
                }),
            }
        }
        Ok(indexes)
    }

    /// Refuses tables whose comparisons would make the archiver skip or repeat rows: every
    /// event id column must compare byte for byte (keyset paging and the cursor rely on the
    /// database's order, and a case-insensitive one holds `e1` and `E1` equal), and the
    /// archiver's tables must tell app codes apart wherever the source table does (by case).
    /// A table made by an older tool fails here with the `ALTER` that fixes it.
    async fn check_collations(&self, spec: &TableSpec) -> Result<(), DbError> {
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
        let columns = self.columns(spec).await?;
        event_ids_binary(&columns, &event_ids)?;
        self.event_ids_pad_alike(spec, &columns, &event_ids).await?;
        app_codes_apart(spec, &columns, &owned)
    }

    /// Binary both, but one may pad with spaces (`utf8mb4_bin`: `x` = `x `) where the other
    /// does not (`utf8mb4_0900_bin`, `utf8mb4_nopad_bin`, VARBINARY): the archiver's tables
    /// must tell apart every pair of ids the source does, or two rows are one member.
    /// `event_ids` begins with the source table's.
    async fn event_ids_pad_alike(
        &self,
        spec: &TableSpec,
        columns: &[ColumnInfo],
        event_ids: &[(String, &str)],
    ) -> Result<(), DbError> {
        let Some(source) = find(columns, spec.name, spec.event_id) else {
            return Ok(());
        };
        if self.pads(source).await? {
            return Ok(());
        }
        let mut padded = Vec::new();
        for (table, column) in event_ids.iter().skip(1) {
            if let Some(c) = find(columns, table, column) {
                if self.pads(c).await? {
                    padded.push(c);
                }
            }
        }
        let Some(first) = padded.first() else {
            return Ok(());
        };
        let fix: Vec<String> = padded
            .iter()
            .map(|c| c.alter_to(source.charset.as_deref(), source.collation.as_deref()))
            .collect();
        Err(DbError::Collation {
            table: first.table.clone(),
            column: first.column.clone(),
            found: first.collation.clone().unwrap_or_default(),
            why: "which pads with spaces (PAD SPACE) where the source table's event id compares NO PAD: ids `x` and `x ` are two rows there and one member here, so such a batch could never be recorded (the fix rebuilds the archiver's tables: schedule it like any large ALTER)",
            fix: format!("{};", fix.join("; ")),
        })
    }

    /// Refuses a list of app codes of which two are one code under the source table's collation
    /// (`a1` and `A1` under a case-insensitive one): they would archive the same rows twice.
    pub(crate) async fn check_app_list(
        &self,
        spec: &TableSpec,
        apps: &[String],
    ) -> Result<(), DbError> {
        let mut apps = apps.to_vec();
        apps.sort();
        apps.dedup();
        if apps.len() < 2 {
            return Ok(());
        }
        let columns = self.columns(spec).await?;
        let Some(source) = find(&columns, spec.name, spec.app_code) else {
            return Ok(());
        };
        let (Some(charset), Some(collation)) = (&source.charset, &source.collation) else {
            return Ok(());
        };
        let mut qb = QueryBuilder::<MySql>::new(
            "SELECT GROUP_CONCAT(code ORDER BY code SEPARATOR '\n') FROM (",
        );
        let mut codes = qb.separated(" UNION ALL ");
        for app in &apps {
            codes.push("SELECT CONVERT(");
            codes.push_bind_unseparated(app.as_str());
            codes.push_unseparated(format!(" USING {charset}) AS code"));
        }
        qb.push(format!(
            ") AS listed GROUP BY code COLLATE {collation} \
             HAVING COUNT(DISTINCT CAST(code AS BINARY)) > 1 LIMIT 1"
        ));
        let query = qb.build_query_scalar::<String>();
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

    /// Whether a column's comparison ignores trailing spaces (PAD SPACE), asked of the server
    /// by behaviour (MariaDB's information_schema has no PAD_ATTRIBUTE): a binary type does not.
    async fn pads(&self, column: &ColumnInfo) -> Result<bool, DbError> {
        let (Some(charset), Some(collation)) = (&column.charset, &column.collation) else {
            return Ok(false);
        };
        let sql = format!(
            "SELECT CAST(CONVERT('x' USING {charset}) = CONVERT('x ' USING {charset}) COLLATE {collation} AS SIGNED)"
        );
        let equal: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&self.pool)
            .await
            .context(|| format!("asking whether {collation} pads with spaces"))?;
        Ok(equal == 1)
    }

    /// The character columns of this database's tables, with their collations.
    async fn columns(&self, spec: &TableSpec) -> Result<Vec<ColumnInfo>, DbError> {
        type Described = (
            String,
            String,
            String,
            Option<String>,
            Option<String>,
            String,
        );
        let rows: Vec<Described> = super::schema_rows_on(
            &self.pool,
            "SELECT CAST(table_name AS CHAR), CAST(column_name AS CHAR), CAST(column_type AS CHAR), \
             CAST(character_set_name AS CHAR), CAST(collation_name AS CHAR), CAST(is_nullable AS CHAR) \
             FROM information_schema.columns WHERE table_schema = DATABASE() \
             AND (column_name LIKE '%event\\_id' OR column_name = 'app_code' \
             OR (table_name = ? AND column_name IN (?, ?)))",
            &[spec.name, spec.event_id, spec.app_code],
        )
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
}

/// Every event id column compares byte for byte (keyset paging and the cursor rely on the
/// database's order, and a case-insensitive one holds `e1` and `E1` equal).
fn event_ids_binary(columns: &[ColumnInfo], event_ids: &[(String, &str)]) -> Result<(), DbError> {
    for (table, column) in event_ids {
        let Some(c) = find(columns, table, column) else {
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
    Ok(())
}

/// The archiver's tables (`owned`) tell app codes apart wherever the source table does.
fn app_codes_apart(
    spec: &TableSpec,
    columns: &[ColumnInfo],
    owned: &[(String, Vec<&str>)],
) -> Result<(), DbError> {
    let Some(source) = find(columns, spec.name, spec.app_code) else {
        return Ok(());
    };
    // App codes are `[A-Za-z0-9_.-]`: what matters is whether case tells two apart. Only
    // archiver tables that conflate codes the source keeps apart are refused (the names of
    // two case-insensitive collations may differ: utf8mb4_unicode_ci, utf8mb4_0900_ai_ci).
    if !source.tells_case_apart() {
        return Ok(());
    }
    for (table, _) in owned {
        let Some(c) = find(columns, table, "app_code") else {
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

/// The column `column` of `table` among these (names compared as the server does, case aside).
fn find<'c>(columns: &'c [ColumnInfo], table: &str, column: &str) -> Option<&'c ColumnInfo> {
    columns
        .iter()
        .find(|c| c.table.eq_ignore_ascii_case(table) && c.column.eq_ignore_ascii_case(column))
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

/// `table`'s definition as the server prints it (`SHOW CREATE TABLE`), without its
/// `AUTO_INCREMENT` counter (which every insert moves): two equal texts are the same columns,
/// types and keys. Asked where it runs often (before every receipt, in every purge chunk) instead
/// of `information_schema`, whose temporary table MariaDB 10.11.19 has crashed freeing.
pub(crate) async fn definition<'e, E>(executor: E, table: &str) -> Result<String, DbError>
where
    E: sqlx::Executor<'e, Database = MySql>,
{
    use sqlx::Row as _;
    let rows = sqlx::raw_sql(sqlx::AssertSqlSafe(format!("SHOW CREATE TABLE {table}")))
        .fetch_all(executor)
        .await
        .context(|| format!("reading the definition of {table}"))?;
    let text = rows
        .first()
        .and_then(|r| r.try_get_unchecked::<Vec<u8>, _>(1).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    Ok(without_counter(&text))
}

/// A `SHOW CREATE TABLE` text without its table option `AUTO_INCREMENT=n`.
fn without_counter(text: &str) -> String {
    const COUNTER: &str = " AUTO_INCREMENT=";
    match text.rfind(COUNTER) {
        Some(at) => {
            let digits = text[at + COUNTER.len()..]
                .bytes()
                .take_while(u8::is_ascii_digit)
                .count();
            format!("{}{}", &text[..at], &text[at + COUNTER.len() + digits..])
        }
        None => text.to_string(),
    }
}

/// `table`'s columns in table order, as `information_schema` describes them (none: no such
/// table).
pub(crate) async fn live_columns(
    pool: &sqlx::MySqlPool,
    table: &str,
) -> Result<Vec<LiveColumn>, DbError> {
    type Described = (
        String,
        String,
        String,
        String,
        Option<String>,
        Option<u64>,
        String,
    );
    let rows: Vec<Described> = super::schema_rows_on(
        pool,
        "SELECT CAST(column_name AS CHAR), CAST(LOWER(data_type) AS CHAR), CAST(LOWER(column_type) AS CHAR), \
         CAST(is_nullable AS CHAR), CAST(collation_name AS CHAR), CAST(character_maximum_length AS UNSIGNED), \
         CAST(UPPER(extra) AS CHAR) \
         FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? \
         ORDER BY ordinal_position",
        &[table],
    )
    .await
    .context(|| format!("reading the columns of {table}"))?;
    Ok(rows
        .into_iter()
        .map(
            |(name, data_type, column_type, nullable, collation, max_chars, extra)| {
                LiveColumn {
                    name,
                    data_type,
                    column_type,
                    nullable: nullable == "YES",
                    collation,
                    max_chars,
                    // Not MySQL 8's DEFAULT_GENERATED (a default expression): computed columns.
                    generated: extra.contains("VIRTUAL GENERATED")
                        || extra.contains("STORED GENERATED"),
                }
            },
        )
        .collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_definition_is_compared_without_its_counter() {
        let table = "CREATE TABLE `t` (\n  `id` bigint NOT NULL AUTO_INCREMENT,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB AUTO_INCREMENT=42 DEFAULT CHARSET=utf8mb4";
        let without = super::without_counter(table);
        assert_eq!(
            without,
            "CREATE TABLE `t` (\n  `id` bigint NOT NULL AUTO_INCREMENT,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
        );
        assert_eq!(super::without_counter(&table.replace("42", "43")), without);
        assert_eq!(
            super::without_counter("CREATE TABLE t (a int)"),
            "CREATE TABLE t (a int)"
        );
    }
}
