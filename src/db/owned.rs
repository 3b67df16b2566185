//! The archiver's own tables for any [`TableSpec`], as `CREATE TABLE` statements derived from the
//! spec: the receipts table carries one column per control total, every name comes from the
//! spec's prefix. wallet_outbox's tables are made by the `migrations/` history instead (existing
//! deployments upgrade through it); a test holds the two to the same columns and indexes, so a
//! new migration without its twin here fails the build's tests.
//!
//! [`Db::check_owned_tables`] compares a database's tables with these: a table made for another
//! profile, or by an older build, is refused with the command that fixes it.

use sqlx::{Executor, MySql, Pool};

use super::columns::{columns, APP_CODE, BATCH_ID, EVENT_ID, SHA256};
use super::{Context, Db, DbError};
use crate::model::table::TableSpec;

const TABLE_OPTIONS: &str =
    "ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci";

/// One owned table: its name, columns (name and SQL type, in table order) and keys.
#[derive(Debug, Clone)]
pub struct OwnedTable {
    pub name: String,
    pub columns: Vec<(String, String)>,
    /// `PRIMARY KEY (…)` and `KEY name (…)` clauses.
    pub keys: Vec<String>,
}

impl OwnedTable {
    fn create_statement(&self) -> String {
        let mut lines: Vec<String> = self
            .columns
            .iter()
            .map(|(name, ty)| format!("    {name} {ty}"))
            .collect();
        lines.extend(self.keys.iter().map(|k| format!("    {k}")));
        format!(
            "CREATE TABLE IF NOT EXISTS {} (\n{}\n) {TABLE_OPTIONS}",
            self.name,
            lines.join(",\n")
        )
    }
}

/// The owned tables of `spec`, in the order they are created — the layout's last here, made
/// first by [`create_owned_tables`], so that start-up names a missing receipts table first.
pub fn owned_tables(spec: &TableSpec) -> Vec<OwnedTable> {
    vec![
        receipts(spec),
        members(spec),
        runs(spec),
        drills(spec),
        superseded(spec),
        home(spec),
        logs(spec),
        log_heads(spec),
        object_versions(spec),
        archived_columns(spec),
        added_values(spec),
        column_sets(spec),
        kept(spec),
        layout(spec),
    ]
}

/// Rows purge kept, to be archived again as they are now (migration 21; `db::kept`).
fn kept(spec: &TableSpec) -> OwnedTable {
    let prefix = spec.owned_prefix;
    OwnedTable {
        name: spec.kept_table(),
        columns: columns(&[
            ("app_code", APP_CODE),
            ("event_id", EVENT_ID),
            ("updated_at_ms", "BIGINT NOT NULL"),
            ("batch_id", BATCH_ID),
            ("reason", "VARCHAR(255) NOT NULL"),
            ("kept_at_ms", "BIGINT NOT NULL"),
        ]),
        keys: vec![
            "PRIMARY KEY (app_code, event_id, batch_id)".into(),
            format!("KEY idx_{prefix}_kept_cursor (app_code, updated_at_ms, event_id)"),
        ],
    }
}

/// The batches' column lists, each once, by its SHA-256 (migration 20): what a receipt's
/// `columns_sha256` names, so that it rebuilds its batch's manifest, the list included.
/// Inserted in the transaction that records a receipt of the list, never updated.
fn column_sets(spec: &TableSpec) -> OwnedTable {
    OwnedTable {
        name: spec.column_sets_table(),
        columns: columns(&[
            (
                "sha256",
                "CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL",
            ),
            ("columns_json", "MEDIUMTEXT NOT NULL"),
            ("recorded_at_ms", "BIGINT NOT NULL"),
        ]),
        keys: vec!["PRIMARY KEY (sha256)".into()],
    }
}

/// The layout version of the owned tables (`db::layout`, migration 19): one row, `id` 1.
fn layout(spec: &TableSpec) -> OwnedTable {
    OwnedTable {
        name: spec.layout_table(),
        columns: columns(&[
            ("id", "TINYINT NOT NULL"),
            ("version", "INT NOT NULL"),
            ("migrated_by", "VARCHAR(255) NOT NULL"),
            ("migrated_at_ms", "BIGINT NOT NULL"),
        ]),
        keys: vec!["PRIMARY KEY (id)".into()],
    }
}

/// One row per batch archived: what it holds, its proof, and what purge, restore and
/// compaction did to it since (its columns and keys are the receipts repository's).
fn receipts(spec: &TableSpec) -> OwnedTable {
    OwnedTable {
        name: spec.receipts_table(),
        columns: super::receipts::columns(spec),
        keys: super::receipts::keys(spec),
    }
}

/// The statements that give a receipts table made before migration 10 its columns and key.
fn receipts_chain_upgrade(spec: &TableSpec) -> [String; 2] {
    let added: Vec<String> = super::receipts::CHAIN_COLUMNS
        .iter()
        .map(|(name, ty)| format!("ADD COLUMN {name} {ty}"))
        .collect();
    [
        format!("ALTER TABLE {} {}", spec.receipts_table(), added.join(", ")),
        format!(
            "ALTER TABLE {} ADD UNIQUE KEY {} (app_code, chain_seq)",
            spec.receipts_table(),
            spec.chain_index()
        ),
    ]
}

/// One row per archived row (its newest archived version): which batch holds it. Clustered by
/// batch in archive order, so a batch's rows go in together at the end of its app's range and
/// are read back as one range; the unique key keeps a row in at most one batch, ever. Its app
/// code compares byte for byte (every key of every member row compares it).
fn members(spec: &TableSpec) -> OwnedTable {
    OwnedTable {
        name: spec.members_table(),
        columns: columns(&[
            ("app_code", MEMBERS_APP_CODE),
            ("event_id", EVENT_ID),
            ("updated_at_ms", "BIGINT NOT NULL"),
            ("batch_id", BATCH_ID),
            ("row_sha256", "BINARY(16) NULL"),
        ]),
        keys: vec![
            format!("PRIMARY KEY ({MEMBERS_PRIMARY_KEY})"),
            format!(
                "UNIQUE KEY {} (app_code, event_id)",
                members_event_index(spec)
            ),
        ],
    }
}

/// The members table's app code: ASCII, compared byte for byte (see migration 9).
const MEMBERS_APP_CODE: &str = "VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL";

/// The members table's primary key: a batch's rows in the order they are archived.
const MEMBERS_PRIMARY_KEY: &str = "app_code, batch_id, updated_at_ms, event_id";

/// The members table's unique key on event ids.
fn members_event_index(spec: &TableSpec) -> String {
    format!("idx_{}_members_event", spec.owned_prefix)
}

/// The statements that bring a members table made before issue 26 (primary key `(app_code,
/// event_id)`, a second index by batch, the receipt's manifest hash and verification time on
/// every row, app codes under the table's Unicode collation) to [`members`]'s layout — migration
/// 9 of wallet_outbox, for any spec: member rows under another spelling of their app given its
/// first, then one copy of the table (reads go on, the archiver's writes to it wait).
fn members_upgrade(spec: &TableSpec) -> [String; 2] {
    let table = spec.members_table();
    [
        format!(
            "UPDATE {table} m JOIN (SELECT app_code AS spelling, MIN(CAST(app_code AS BINARY)) AS first \
             FROM {receipts} GROUP BY app_code) c ON c.spelling = m.app_code \
             SET m.app_code = CAST(c.first AS CHAR CHARACTER SET utf8mb4) \
             WHERE CAST(m.app_code AS BINARY) <> c.first",
            receipts = spec.receipts_table(),
        ),
        format!(
            "ALTER TABLE {table} MODIFY app_code {MEMBERS_APP_CODE}, \
             DROP PRIMARY KEY, ADD PRIMARY KEY ({MEMBERS_PRIMARY_KEY}), \
             ADD UNIQUE KEY {event} (app_code, event_id), DROP KEY idx_{prefix}_members_batch_version, \
             DROP COLUMN manifest_sha256, DROP COLUMN receipt_verified_at_ms, \
             ALGORITHM = COPY, LOCK = SHARED",
            event = members_event_index(spec),
            prefix = spec.owned_prefix,
        ),
    ]
}

/// One row per run of a command for an app, with its outcome.
fn runs(spec: &TableSpec) -> OwnedTable {
    let prefix = spec.owned_prefix;
    OwnedTable {
        name: spec.runs_table(),
        columns: columns(&[
            ("id", "BIGINT NOT NULL AUTO_INCREMENT"),
            ("app_code", APP_CODE),
            ("command_name", "VARCHAR(16) NOT NULL"),
            ("started_at_ms", "BIGINT NOT NULL"),
            ("finished_at_ms", "BIGINT NOT NULL"),
            ("outcome", "VARCHAR(16) NOT NULL"),
            ("batches", "BIGINT NOT NULL"),
            ("row_count", "BIGINT NOT NULL"),
            ("error", "TEXT NULL"),
        ])
        .into_iter()
        .chain(columns(RUNS_TOLD_COLUMNS))
        .collect(),
        keys: vec![
            "PRIMARY KEY (id)".into(),
            format!("KEY idx_{prefix}_runs_app (app_code, command_name, id)"),
            runs_worked_key(spec),
        ],
    }
}

/// The runs table's key of migration 11: an app's last run that worked it, however many skips.
fn runs_worked_key(spec: &TableSpec) -> String {
    format!(
        "KEY idx_{}_runs_worked (app_code, command_name, worked, id)",
        spec.owned_prefix
    )
}

/// The runs table's columns of migration 11: each run told whole.
const RUNS_TOLD_COLUMNS: &[(&str, &str)] = &[
    ("run_id", "VARCHAR(32) CHARACTER SET ascii NULL"),
    ("store", "VARCHAR(1024) NULL"),
    ("stop_reason", "VARCHAR(255) NULL"),
    ("dry_run", "BOOLEAN NOT NULL DEFAULT FALSE"),
    ("worked", "BOOLEAN NOT NULL DEFAULT TRUE"),
    ("findings", "MEDIUMTEXT NULL"),
];

/// The archive's home: one row per binding of the archive to a store, the newest current.
fn home(spec: &TableSpec) -> OwnedTable {
    OwnedTable {
        name: spec.home_table(),
        columns: columns(&[
            ("id", "BIGINT NOT NULL"),
            ("store", "VARCHAR(1024) NOT NULL"),
            ("archive_id", "CHAR(32) CHARACTER SET ascii NOT NULL"),
            ("marker_key", "VARCHAR(1024) NOT NULL"),
            ("bound_at_ms", "BIGINT NOT NULL"),
            ("moved_from", "VARCHAR(1024) NULL"),
            ("reason", "TEXT NULL"),
            ("run_id", "VARCHAR(32) CHARACTER SET ascii NULL"),
        ]),
        keys: vec!["PRIMARY KEY (id)".into()],
    }
}

/// Each app's log identity: the folder its log of batches is kept under, recorded once
/// (migration 15; `db::logs`). Both codes compare byte for byte, whatever the source's
/// collation: `Pay` and `pay` are two rows, two folders.
fn logs(spec: &TableSpec) -> OwnedTable {
    OwnedTable {
        name: spec.logs_table(),
        columns: columns(&[
            ("app_code", MEMBERS_APP_CODE),
            (
                "folder",
                "VARCHAR(48) CHARACTER SET ascii COLLATE ascii_bin NOT NULL",
            ),
            ("how", "VARCHAR(8) CHARACTER SET ascii NOT NULL"),
            ("recorded_at_ms", "BIGINT NOT NULL"),
        ]),
        keys: vec![
            "PRIMARY KEY (app_code)".into(),
            format!("UNIQUE KEY idx_{}_logs_folder (folder)", spec.owned_prefix),
        ],
    }
}

/// Every tree head an app's log was published at, as the archive run that wrote it recorded it
/// (migration 18; `db::log_heads`): the largest is the head no checkpoint may fall behind.
/// Inserted only, never updated.
fn log_heads(spec: &TableSpec) -> OwnedTable {
    OwnedTable {
        name: spec.log_heads_table(),
        columns: columns(&[
            ("app_code", MEMBERS_APP_CODE),
            ("size", "BIGINT NOT NULL"),
            (
                "root",
                "CHAR(44) CHARACTER SET ascii COLLATE ascii_bin NOT NULL",
            ),
            ("recorded_at_ms", "BIGINT NOT NULL"),
        ]),
        keys: vec!["PRIMARY KEY (app_code, size)".into()],
    }
}

/// One row per batch whose objects were recorded under a new identity with the archived bytes
/// (relocate, `verify --batch-id`), with the evidence (migration 16 is wallet_outbox's).
fn object_versions(spec: &TableSpec) -> OwnedTable {
    const ETAG: &str = "VARCHAR(256) CHARACTER SET ascii NULL";
    const VERSION: &str = "VARCHAR(1024) CHARACTER SET ascii NULL";
    let prefix = spec.owned_prefix;
    OwnedTable {
        name: spec.object_versions_table(),
        columns: columns(&[
            ("id", "BIGINT NOT NULL AUTO_INCREMENT"),
            ("app_code", APP_CODE),
            ("batch_id", BATCH_ID),
            ("recorded_at_ms", "BIGINT NOT NULL"),
            ("run_id", "VARCHAR(32) CHARACTER SET ascii NOT NULL"),
            ("cause", "VARCHAR(16) CHARACTER SET ascii NOT NULL"),
            ("store", "VARCHAR(1024) NOT NULL"),
            ("old_data_etag", ETAG),
            ("old_data_version_id", VERSION),
            ("old_manifest_etag", ETAG),
            ("old_success_etag", ETAG),
            ("new_data_etag", ETAG),
            ("new_data_version_id", VERSION),
            ("new_manifest_etag", ETAG),
            ("new_success_etag", ETAG),
            ("gzip_sha256", SHA256),
            ("ndjson_sha256", SHA256),
            ("manifest_sha256", SHA256),
            ("success_crc64", "VARCHAR(20) CHARACTER SET ascii NOT NULL"),
            ("row_count", "BIGINT NOT NULL"),
        ]),
        keys: vec![
            "PRIMARY KEY (id)".into(),
            format!("KEY idx_{prefix}_object_versions_batch (app_code, batch_id, id)"),
            format!("KEY idx_{prefix}_object_versions_run (run_id, app_code, id)"),
        ],
    }
}

/// One row per drilled batch (`restore --drill`).
fn drills(spec: &TableSpec) -> OwnedTable {
    let prefix = spec.owned_prefix;
    OwnedTable {
        name: spec.drills_table(),
        columns: columns(&[
            ("id", "BIGINT NOT NULL AUTO_INCREMENT"),
            ("app_code", APP_CODE),
            ("batch_id", BATCH_ID),
            ("drilled_at_ms", "BIGINT NOT NULL"),
            ("ok", "BOOLEAN NOT NULL"),
            ("detail", "TEXT NULL"),
        ]),
        keys: vec![
            "PRIMARY KEY (id)".into(),
            format!("KEY idx_{prefix}_drills_app (app_code, ok, id)"),
        ],
    }
}

/// Member rows of older batches that a newer archived version of the row replaced.
fn superseded(spec: &TableSpec) -> OwnedTable {
    let prefix = spec.owned_prefix;
    OwnedTable {
        name: spec.superseded_table(),
        columns: columns(&[
            ("app_code", APP_CODE),
            ("event_id", EVENT_ID),
            ("updated_at_ms", "BIGINT NOT NULL"),
            ("batch_id", BATCH_ID),
            ("superseded_by", BATCH_ID),
            ("superseded_at_ms", "BIGINT NOT NULL"),
            ("row_sha256", "BINARY(16) NULL"),
        ]),
        keys: vec![
            "PRIMARY KEY (app_code, event_id, batch_id)".into(),
            format!("KEY idx_{prefix}_superseded_batch (app_code, batch_id)"),
        ],
    }
}

/// The columns archived so far — a profile's every column, a built-in table's columns added to
/// it since (its own are archived always) — and the generated ones seen (`generated`: derived,
/// never archived): one removed from the table stops the run instead of going unnoticed, and a
/// batch recorded before a column was first archived is known to lack it.
fn archived_columns(spec: &TableSpec) -> OwnedTable {
    OwnedTable {
        name: spec.columns_table(),
        columns: columns(&[
            ("column_name", "VARCHAR(64) NOT NULL"),
            ("json_key", "VARCHAR(64) NOT NULL"),
            ("encoding", "VARCHAR(16) CHARACTER SET ascii NOT NULL"),
            ("first_archived_at_ms", "BIGINT NOT NULL"),
            ("dropped_at_ms", "BIGINT NULL"),
        ]),
        keys: vec!["PRIMARY KEY (column_name)".into()],
    }
}

/// Per batch, what its rows held in a column its lines lack (one added to the table after the
/// batch was archived) when purge deleted them — one value per column per batch, as a line would
/// encode it (`encoding`: how) — recorded in the transaction of the first delete that relied on
/// it; restore writes it back (SPEC §4).
fn added_values(spec: &TableSpec) -> OwnedTable {
    OwnedTable {
        name: spec.added_values_table(),
        columns: columns(&[
            ("app_code", MEMBERS_APP_CODE),
            ("batch_id", BATCH_ID),
            ("column_name", "VARCHAR(64) NOT NULL"),
            ("encoding", "VARCHAR(16) CHARACTER SET ascii NOT NULL"),
            ("value_json", "MEDIUMTEXT NOT NULL"),
            ("recorded_at_ms", "BIGINT NOT NULL"),
        ]),
        keys: vec!["PRIMARY KEY (app_code, batch_id, column_name)".into()],
    }
}

/// What `<prefix>_columns` says of a generated column (derived: never archived).
const GENERATED: &str = "generated";

/// How `<prefix>_columns` names a kind.
fn encoding_name(kind: crate::model::table::Kind) -> &'static str {
    kind.encoding()
}

impl Db {
    /// Refuses a table whose column is archived differently now than earlier batches archived
    /// it (another type, another key). A column dropped since is no refusal: the batches that
    /// hold it are read by their own columns ([`Db::dropped_columns`]), and restore names it.
    pub(crate) async fn check_archived_columns(&self, spec: &TableSpec) -> Result<(), DbError> {
        let recorded: Vec<(String, String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT CAST(column_name AS CHAR), CAST(json_key AS CHAR), CAST(encoding AS CHAR) FROM {} WHERE encoding <> '{GENERATED}' ORDER BY column_name",
            spec.columns_table()
        )))
        .fetch_all(&self.pool)
        .await
        .context(|| format!("reading {}", spec.columns_table()))?;
        // A column still there but archived differently before (another type, another key):
        // the older batches would be read with today's encoding and restored wrong.
        for (name, key, encoding) in &recorded {
            let Some(c) = spec
                .columns
                .iter()
                .find(|c| c.name.eq_ignore_ascii_case(name))
            else {
                continue;
            };
            let now = encoding_name(c.kind);
            if c.json_key != key || now != encoding {
                return Err(DbError::SourceShape(format!(
                    "column {}.{name} was archived as {key:?} ({encoding}) and would now be archived as {:?} ({now}): batches already written would be read and restored with the new encoding; change the column or the profile back (a changed type is not supported yet)",
                    spec.name, c.json_key
                )));
            }
        }
        Ok(())
    }

    /// The columns earlier batches archived that the table no longer has (`DROP COLUMN` since):
    /// read in the lines of the batches that hold them, never selected or written
    /// ([`TableSpec::dropped`]). None before the owned tables exist (`migrate` has not run). A
    /// column archived before and generated now is still there (a restore lets the server
    /// compute it).
    pub(crate) async fn dropped_columns(
        &self,
        spec: &TableSpec,
    ) -> Result<Vec<crate::model::table::Column>, DbError> {
        let recorded: Result<Vec<(String, String, String)>, sqlx::Error> =
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT CAST(column_name AS CHAR), CAST(json_key AS CHAR), CAST(encoding AS CHAR) FROM {} WHERE encoding <> '{GENERATED}' ORDER BY column_name",
                spec.columns_table()
            )))
            .fetch_all(&self.pool)
            .await;
        let recorded = match recorded {
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42S02") => {
                return Ok(Vec::new()); // no owned tables yet
            }
            other => other.context(|| format!("reading {}", spec.columns_table()))?,
        };
        let missing: Vec<(String, String, String)> = recorded
            .into_iter()
            .filter(|(r, _, _)| !spec.columns.iter().any(|c| c.name.eq_ignore_ascii_case(r)))
            .collect();
        if missing.is_empty() {
            return Ok(Vec::new());
        }
        let live = self.describe(spec.name).await?;
        let mut dropped = Vec::new();
        for (name, key, encoding) in missing {
            if live.iter().any(|l| l.name.eq_ignore_ascii_case(&name)) {
                continue;
            }
            let kind = crate::model::table::Kind::from_encoding(&encoding).ok_or_else(|| {
                DbError::SourceShape(format!(
                    "column {}.{name}, dropped since earlier batches archived it, was archived as {encoding}, which this build does not read: run the build that archived it",
                    spec.name
                ))
            })?;
            dropped.push(crate::model::table::Column {
                name: Box::leak(name.into_boxed_str()),
                json_key: Box::leak(key.into_boxed_str()),
                kind,
                nullable: true,
                unsigned: false,
            });
        }
        Ok(dropped)
    }

    /// Records that `spec`'s dropped columns ([`TableSpec::dropped`]) are gone (`dropped_at_ms`,
    /// once: the columns newly marked are returned) and that columns there again are not.
    pub(crate) async fn record_dropped_columns(
        &self,
        spec: &TableSpec,
        now_ms: i64,
    ) -> Result<Vec<&'static str>, DbError> {
        let table = spec.columns_table();
        let mut marked = Vec::new();
        for c in spec.dropped {
            let done = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE {table} SET dropped_at_ms = ? WHERE column_name = ? AND dropped_at_ms IS NULL"
            )))
            .bind(now_ms)
            .bind(c.name)
            .execute(&self.pool)
            .await
            .context(|| format!("recording in {table} that column {} was dropped", c.name))?;
            if done.rows_affected() > 0 {
                marked.push(c.name);
            }
        }
        // A column added back: archived again, no longer dropped (asked first, so that a run
        // that changes nothing writes nothing).
        let marked_before: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT CAST(column_name AS CHAR) FROM {table} WHERE dropped_at_ms IS NOT NULL"
        )))
        .fetch_all(&self.pool)
        .await
        .context(|| format!("reading {table}"))?;
        for name in marked_before {
            if !spec
                .columns
                .iter()
                .any(|c| c.name.eq_ignore_ascii_case(&name))
            {
                continue;
            }
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE {table} SET dropped_at_ms = NULL WHERE column_name = ?"
            )))
            .bind(&name)
            .execute(&self.pool)
            .await
            .context(|| format!("recording in {table} that column {name} is there again"))?;
        }
        Ok(marked)
    }

    /// When each column of the table was first archived (`<prefix>_columns`): a batch recorded
    /// before a column was first archived cannot hold it. A built-in table's own columns are
    /// archived always, and not listed.
    pub(crate) async fn first_archived_columns(
        &self,
        spec: &TableSpec,
    ) -> Result<Vec<(String, i64)>, DbError> {
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT CAST(column_name AS CHAR), first_archived_at_ms FROM {} WHERE encoding <> '{GENERATED}'",
            spec.columns_table()
        )))
        .fetch_all(&self.pool)
        .await
        .context(|| format!("reading {}", spec.columns_table()))
    }

    /// Records the columns `archive` is about to write (new ones only; a built-in table's own
    /// are never listed) and the generated columns it leaves out; a column generated before and
    /// stored now is first archived now.
    pub(crate) async fn record_archived_columns(
        &self,
        spec: &TableSpec,
        now_ms: i64,
    ) -> Result<(), DbError> {
        let table = spec.columns_table();
        let live = self.describe(spec.name).await?;
        let mut listed: Vec<(&str, &str, &str)> = spec
            .columns
            .iter()
            .filter(|c| !spec.is_fixed(c.name))
            .map(|c| (c.name, c.json_key, encoding_name(c.kind)))
            .collect();
        listed.extend(
            live.iter()
                .filter(|l| l.generated)
                .map(|l| (l.name.as_str(), "", GENERATED)),
        );
        if listed.is_empty() {
            return Ok(());
        }
        let mut qb = sqlx::QueryBuilder::<MySql>::new(format!(
            "DELETE FROM {table} WHERE encoding = '{GENERATED}' AND column_name IN ("
        ));
        let mut names = qb.separated(", ");
        for (name, _, _) in listed.iter().filter(|(_, _, e)| *e != GENERATED) {
            names.push_bind(*name);
        }
        qb.push(")");
        if listed.iter().any(|(_, _, e)| *e != GENERATED) {
            qb.build()
                .execute(&self.pool)
                .await
                .context(|| format!("recording the archived columns in {table}"))?;
        }
        let mut qb = sqlx::QueryBuilder::<MySql>::new(format!(
            "INSERT IGNORE INTO {table} (column_name, json_key, encoding, first_archived_at_ms) "
        ));
        qb.push_values(&listed, |mut values, (name, key, encoding)| {
            values
                .push_bind(*name)
                .push_bind(*key)
                .push_bind(*encoding)
                .push_bind(now_ms);
        });
        qb.build()
            .execute(&self.pool)
            .await
            .context(|| format!("recording the archived columns in {table}"))?;
        Ok(())
    }
}

/// Creates `spec`'s owned tables from the spec (`CREATE TABLE IF NOT EXISTS`: a rerun is a
/// no-op), and brings a members table of the layout before issue 26 to today's.
pub async fn create_owned_tables(pool: &Pool<MySql>, spec: &TableSpec) -> Result<(), DbError> {
    // The layout first: a newer one is refused before anything changes, and one this build
    // raises is raised before the tables change (`db::layout`).
    let [tables @ .., layout] = &owned_tables(spec)[..] else {
        unreachable!("the layout table is listed last");
    };
    pool.execute(sqlx::AssertSqlSafe(layout.create_statement()))
        .await
        .context(|| format!("creating {}", layout.name))?;
    super::layout::begin_migration(pool, spec).await?;
    for table in tables {
        pool.execute(sqlx::AssertSqlSafe(table.create_statement()))
            .await
            .context(|| format!("creating {}", table.name))?;
    }
    // Each of the two statements on its own condition: DDL is not transactional, and a rerun
    // after the first succeeded must still add the key (it is what keeps a chain from forking).
    let [columns, key] = receipts_chain_upgrade(spec);
    let receipts = spec.receipts_table();
    if !has_column(pool, &receipts, "chain_seq").await? {
        tracing::info!(
            table = receipts,
            "adding the chain of batches to the receipts table"
        );
        pool.execute(sqlx::AssertSqlSafe(columns))
            .await
            .context(|| format!("adding the chain to {receipts}"))?;
    }
    if !has_index(pool, &receipts, &spec.chain_index()).await? {
        pool.execute(sqlx::AssertSqlSafe(key))
            .await
            .context(|| format!("adding the chain's unique key to {receipts}"))?;
    }
    if !has_column(pool, &receipts, "log_index").await? {
        tracing::info!(
            table = receipts,
            "adding the log of batches to the receipts table"
        );
        pool.execute(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE {receipts} ADD COLUMN log_index BIGINT NULL, \
             ADD COLUMN app_code_bytes VARBINARY(128) AS (CAST(app_code AS BINARY)) VIRTUAL"
        )))
        .await
        .context(|| format!("adding the log to {receipts}"))?;
    }
    if !has_index(pool, &receipts, &spec.log_index()).await? {
        pool.execute(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE {receipts} ADD UNIQUE KEY {} (app_code, log_index), \
             ADD KEY idx_{prefix}_recorded (app_code, verified_at_ms), \
             ADD KEY idx_{prefix}_spellings (app_code, app_code_bytes)",
            spec.log_index(),
            prefix = spec.owned_prefix
        )))
        .await
        .context(|| format!("adding the log's unique key to {receipts}"))?;
    }
    add_findings_columns(pool, &receipts).await?;
    // Migration 20's twins: the receipt's column list, a column's drop.
    if !has_column(pool, &receipts, "columns_sha256").await? {
        let added: Vec<String> = super::receipts::COLUMN_SET_COLUMNS
            .iter()
            .map(|(name, ty)| format!("ADD COLUMN {name} {ty}"))
            .collect();
        pool.execute(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE {receipts} {}",
            added.join(", ")
        )))
        .await
        .context(|| format!("adding the batches' column lists to {receipts}"))?;
    }
    let archived = spec.columns_table();
    if !has_column(pool, &archived, "dropped_at_ms").await? {
        pool.execute(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE {archived} ADD COLUMN dropped_at_ms BIGINT NULL"
        )))
        .await
        .context(|| format!("adding the columns' drops to {archived}"))?;
    }
    let runs = spec.runs_table();
    // Migration 19's twin: what stops the builds before the fence at start-up.
    if has_column(pool, &runs, "command").await? {
        pool.execute(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE {runs} RENAME COLUMN command TO command_name"
        )))
        .await
        .context(|| format!("renaming {runs}.command (the fence: README, \"Upgrading\")"))?;
    }
    if !has_column(pool, &runs, "run_id").await? {
        let mut added: Vec<String> = RUNS_TOLD_COLUMNS
            .iter()
            .map(|(name, ty)| format!("ADD COLUMN {name} {ty}"))
            .collect();
        added.push(format!("ADD {}", runs_worked_key(spec)));
        pool.execute(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE {runs} {}",
            added.join(", ")
        )))
        .await
        .context(|| format!("adding the run's id, store and findings to {runs}"))?;
    }
    if members_primary_key(pool, spec).await? == ["app_code", "event_id"] {
        tracing::info!(
            table = spec.members_table(),
            "clustering the members table by batch (one copy of the table: reads go on, the archiver's writes to it wait)"
        );
        for statement in members_upgrade(spec) {
            pool.execute(sqlx::AssertSqlSafe(statement))
                .await
                .context(|| format!("clustering {} by batch", spec.members_table()))?;
        }
    }
    Ok(())
}

/// Gives a receipts table made before migration 17 its columns of the batches' last findings.
async fn add_findings_columns(pool: &Pool<MySql>, receipts: &str) -> Result<(), DbError> {
    if has_column(pool, receipts, "last_findings_at_ms").await? {
        return Ok(());
    }
    let added: Vec<String> = super::receipts::FINDINGS_COLUMNS
        .iter()
        .map(|(name, ty)| format!("ADD COLUMN {name} {ty}"))
        .collect();
    pool.execute(sqlx::AssertSqlSafe(format!(
        "ALTER TABLE {receipts} {}",
        added.join(", ")
    )))
    .await
    .context(|| format!("adding the batches' last findings to {receipts}"))?;
    Ok(())
}

/// Whether `table` has an index named `index`.
async fn has_index(pool: &Pool<MySql>, table: &str, index: &str) -> Result<bool, DbError> {
    in_schema(pool, "statistics", "index_name", table, index).await
}

/// Whether `table` has `column`.
async fn has_column(pool: &Pool<MySql>, table: &str, column: &str) -> Result<bool, DbError> {
    in_schema(pool, "columns", "column_name", table, column).await
}

/// Whether information_schema's `view` lists `name` (in its column `named`) for `table`.
async fn in_schema(
    pool: &Pool<MySql>,
    view: &str,
    named: &str,
    table: &str,
    name: &str,
) -> Result<bool, DbError> {
    let found: Vec<(i64,)> = super::schema_rows(
        pool,
        &format!(
            "SELECT COUNT(*) FROM information_schema.{view} \
             WHERE table_schema = DATABASE() AND table_name = ? AND {named} = ?"
        ),
        &[table, name],
    )
    .await
    .context(|| format!("reading the {view} of {table}"))?;
    Ok(found.first().is_some_and(|(n,)| *n > 0))
}

/// The columns of the members table's primary key, in order (empty: no such table).
async fn members_primary_key(pool: &Pool<MySql>, spec: &TableSpec) -> Result<Vec<String>, DbError> {
    let columns: Vec<(String,)> = super::schema_rows(
        pool,
        "SELECT CAST(column_name AS CHAR) FROM information_schema.statistics \
         WHERE table_schema = DATABASE() AND table_name = ? AND index_name = 'PRIMARY' \
         ORDER BY seq_in_index",
        &[&spec.members_table()],
    )
    .await
    .context(|| format!("reading the primary key of {}", spec.members_table()))?;
    Ok(columns
        .into_iter()
        .map(|(c,)| c.to_ascii_lowercase())
        .collect())
}

/// The first word of a column type as information_schema's `DATA_TYPE` spells it.
fn data_type(ty: &str) -> String {
    let word = ty
        .split(|c: char| c == '(' || c.is_whitespace())
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match word.as_str() {
        "boolean" => "tinyint".into(),
        _ => word,
    }
}

impl Db {
    /// Refuses owned tables that are missing a column `spec` needs or hold it in another type:
    /// tables made for another profile (a receipts table with other control totals), by hand,
    /// or by an older build. Extra columns are allowed (a column an operator added is theirs).
    pub async fn check_owned_tables(&self, spec: &TableSpec) -> Result<(), DbError> {
        // The exact names (a LIKE pattern's escapes break under NO_BACKSLASH_ESCAPES).
        let tables = owned_tables(spec);
        let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
        let found: Vec<(String, String, String)> = super::schema_rows(
            &self.pool,
            &format!(
                "SELECT CAST(table_name AS CHAR), CAST(column_name AS CHAR), CAST(data_type AS CHAR) \
                 FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name IN ({})",
                vec!["?"; names.len()].join(", ")
            ),
            &names,
        )
        .await
        .context(|| "reading the archiver's tables' columns".into())?;
        for table in tables {
            let of_table: Vec<_> = found
                .iter()
                .filter(|(t, _, _)| t.eq_ignore_ascii_case(&table.name))
                .collect();
            if of_table.is_empty() {
                return Err(DbError::OwnedTable {
                    table: table.name.clone(),
                    problem: "does not exist".into(),
                    table_flag: spec.cli_flag(),
                });
            }
            if table.name == spec.members_table() {
                let key = members_primary_key(&self.pool, spec).await?;
                if key.join(", ") != MEMBERS_PRIMARY_KEY {
                    return Err(DbError::OwnedTable {
                        table: table.name.clone(),
                        problem: format!(
                            "has primary key ({}), not ({MEMBERS_PRIMARY_KEY}): it was made by an older build (the members table is clustered by batch since migration 9)",
                            key.join(", ")
                        ),
                        table_flag: spec.cli_flag(),
                    });
                }
            }
            for (column, ty) in &table.columns {
                let expected = data_type(ty);
                match of_table
                    .iter()
                    .find(|(_, c, _)| c.eq_ignore_ascii_case(column))
                {
                    None => {
                        return Err(DbError::OwnedTable {
                            table: table.name.clone(),
                            problem: format!("has no column {column} ({ty})"),
                            table_flag: spec.cli_flag(),
                        })
                    }
                    Some((_, _, found)) if !found.eq_ignore_ascii_case(&expected) => {
                        return Err(DbError::OwnedTable {
                            table: table.name.clone(),
                            problem: format!("holds column {column} as {found}, not {ty}"),
                            table_flag: spec.cli_flag(),
                        })
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::table::{ROOM_OUTBOX, WALLET_OUTBOX};

    /// A profile's total is a receipts column too: every other receipts column is a name a
    /// total cannot take (else `CREATE TABLE` would meet a duplicate column).
    #[test]
    fn a_total_cannot_take_a_receipts_column_name() {
        let room = &owned_tables(&ROOM_OUTBOX)[0];
        for (name, _) in &room.columns {
            let is_total = ROOM_OUTBOX.totals.iter().any(|t| t.field == name.as_str());
            assert_eq!(
                crate::model::profile::is_reserved_field(name),
                !is_total,
                "{name}"
            );
        }
    }

    #[test]
    fn receipts_carry_one_column_per_total() {
        let wallet = &owned_tables(&WALLET_OUTBOX)[0];
        let names: Vec<_> = wallet.columns.iter().map(|(n, _)| n.as_str()).collect();
        let at = names
            .iter()
            .position(|n| *n == "max_created_at_ms")
            .unwrap();
        assert_eq!(
            names[at + 1..at + 3],
            ["available_delta_total", "frozen_delta_total"]
        );
        let room = &owned_tables(&ROOM_OUTBOX)[0];
        assert_eq!(room.name, "room_outbox_archive_receipts");
        let sql = room.create_statement();
        assert!(
            sql.contains("    room_id_total VARCHAR(40) NOT NULL,\n"),
            "{sql}"
        );
        assert!(
            sql.contains("    envelope_sha256 CHAR(64) CHARACTER SET ascii NOT NULL,\n"),
            "{sql}"
        );
        assert!(!sql.contains("delta"), "{sql}");
        assert!(
            sql.contains("KEY idx_room_outbox_archive_cursor ("),
            "{sql}"
        );
    }

    #[test]
    fn data_types_as_information_schema_spells_them() {
        assert_eq!(data_type("BIGINT NOT NULL"), "bigint");
        assert_eq!(data_type("VARCHAR(64) CHARACTER SET ascii NULL"), "varchar");
        assert_eq!(data_type("BOOLEAN NOT NULL DEFAULT FALSE"), "tinyint");
        assert_eq!(data_type("CHAR(64) CHARACTER SET ascii NOT NULL"), "char");
    }
}
