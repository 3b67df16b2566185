//! A receipt as a row of its table: the columns and keys the table is made of, the row written
//! for a [`Receipt`] (and compared, column by column, with one recorded before under the same
//! batch id) and the row read back as one. The one file of the database side a new receipt
//! column touches.

use sqlx::mysql::MySqlRow;
use sqlx::{AssertSqlSafe, MySql, Row as _, Transaction};

use super::super::columns::{columns as named, APP_CODE, BATCH_ID, CRC64, EVENT_ID, SHA256};
use super::super::{Context, DbError};
use crate::model::chain::Link;
use crate::model::digest::ObjectDigest;
use crate::model::format::SCHEMA_VERSION;
use crate::model::format::{ContentFacts, Cursor, Identity, MembersDigest, ObjectKeys, TotalValue};
use crate::model::key::Key;
use crate::model::protection::{LockMode, ObjectLock, Protection, VerifiedBy};
use crate::model::receipt::{Compaction, Lifecycle, Objects, Receipt, StoredAs, STATE_VERIFIED};
use crate::model::table::{TableSpec, TotalKind};

/// The receipts table's columns: the batch and its range, one column per control total of the
/// spec, then the objects' digests and sizes and the marks later commands set — in the order of
/// [`crate::model::receipt::COLUMNS`], the totals after `max_created_at_ms`.
pub(crate) fn columns(spec: &TableSpec) -> Vec<(String, String)> {
    let mut receipts = named(&[
        ("app_code", APP_CODE),
        ("batch_id", BATCH_ID),
        ("state", "VARCHAR(16) NOT NULL"),
        ("data_object_key", "VARCHAR(512) NOT NULL"),
        ("manifest_object_key", "VARCHAR(512) NOT NULL"),
        ("success_object_key", "VARCHAR(512) NOT NULL"),
        ("schema_version", "INT NOT NULL"),
        ("row_count", "BIGINT NOT NULL"),
        ("first_updated_at_ms", "BIGINT NOT NULL"),
        ("first_event_id", EVENT_ID),
        ("last_updated_at_ms", "BIGINT NOT NULL"),
        ("last_event_id", EVENT_ID),
        ("min_created_at_ms", "BIGINT NOT NULL"),
        ("max_created_at_ms", "BIGINT NOT NULL"),
    ]);
    receipts.extend(spec.totals.iter().map(|t| {
        let ty = match t.kind {
            TotalKind::Sum => "VARCHAR(40) NOT NULL",
            TotalKind::Sha256 => SHA256,
        };
        (t.field.to_string(), ty.to_string())
    }));
    receipts.extend(named(&[
        ("ndjson_sha256", SHA256),
        ("gzip_sha256", SHA256),
        ("data_crc64", CRC64),
        ("manifest_crc64", CRC64),
        ("success_crc64", CRC64),
        ("manifest_sha256", SHA256),
        ("uncompressed_bytes", "BIGINT NOT NULL"),
        ("compressed_bytes", "BIGINT NOT NULL"),
        ("verified_at_ms", "BIGINT NOT NULL"),
        ("created_at_ms", "BIGINT NOT NULL"),
        ("updated_at_ms", "BIGINT NOT NULL"),
        ("purged_rows", "BIGINT NOT NULL DEFAULT 0"),
        ("kept_rows", "BIGINT NOT NULL DEFAULT 0"),
        ("purged_at_ms", "BIGINT NULL"),
        ("data_crc64nvme", "VARCHAR(20) CHARACTER SET ascii NULL"),
        ("restored_at_ms", "BIGINT NULL"),
        ("superseded_rows", "BIGINT NOT NULL DEFAULT 0"),
        ("object_lock_mode", "VARCHAR(16) CHARACTER SET ascii NULL"),
        ("retain_until_ms", "BIGINT NULL"),
        ("legal_hold", "BOOLEAN NOT NULL DEFAULT FALSE"),
        ("storage_class", "VARCHAR(32) CHARACTER SET ascii NULL"),
        ("sse_algorithm", "VARCHAR(16) CHARACTER SET ascii NULL"),
        ("sse_kms_key_id", "VARCHAR(2048) CHARACTER SET ascii NULL"),
        (
            "verified_by",
            "VARCHAR(16) CHARACTER SET ascii NOT NULL DEFAULT 'read_back'",
        ),
        ("members_digest_sha256", "CHAR(64) CHARACTER SET ascii NULL"),
        ("members_digest_rows", "BIGINT NULL"),
        ("compacted_at_ms", "BIGINT NULL"),
        ("compacted_member_rows", "BIGINT NOT NULL DEFAULT 0"),
        ("members_proof_sha256", "CHAR(64) CHARACTER SET ascii NULL"),
        ("data_etag", "VARCHAR(256) CHARACTER SET ascii NULL"),
        ("manifest_etag", "VARCHAR(256) CHARACTER SET ascii NULL"),
        ("success_etag", "VARCHAR(256) CHARACTER SET ascii NULL"),
        ("data_version_id", "VARCHAR(1024) CHARACTER SET ascii NULL"),
    ]));
    receipts.extend(named(CHAIN_COLUMNS));
    receipts.extend(named(LOG_COLUMNS));
    receipts.extend(named(FINDINGS_COLUMNS));
    receipts.extend(named(COLUMN_SET_COLUMNS));
    receipts
}

/// The receipts table's keys: by batch; the cursor's; purge's; the chain's, the log's; the
/// period's (attest); an app's spellings.
pub(crate) fn keys(spec: &TableSpec) -> Vec<String> {
    let prefix = spec.owned_prefix;
    vec![
        "PRIMARY KEY (app_code, batch_id)".into(),
        format!(
            "KEY {} (app_code, state, last_updated_at_ms, last_event_id)",
            spec.cursor_index()
        ),
        format!(
            "KEY idx_{prefix}_unpurged (app_code, state, purged_at_ms, restored_at_ms, last_updated_at_ms, last_event_id)"
        ),
        format!("UNIQUE KEY {} (app_code, chain_seq)", spec.chain_index()),
        format!("UNIQUE KEY {} (app_code, log_index)", spec.log_index()),
        format!("KEY idx_{prefix}_recorded (app_code, verified_at_ms)"),
        format!("KEY idx_{prefix}_spellings (app_code, app_code_bytes)"),
    ]
}

/// The receipts columns of migration 13: the batch's leaf in its app's log.
const LOG_COLUMNS: &[(&str, &str)] = &[
    ("log_index", "BIGINT NULL"),
    (
        "app_code_bytes",
        "VARBINARY(128) AS (CAST(app_code AS BINARY)) VIRTUAL",
    ),
];

/// The receipts columns of migration 17: when a check last found the batch other than recorded,
/// and what it found.
pub(crate) const FINDINGS_COLUMNS: &[(&str, &str)] = &[
    ("last_findings_at_ms", "BIGINT NULL"),
    ("last_findings", "MEDIUMTEXT NULL"),
];

/// The receipts column of migration 20: the batch's column list, by its SHA-256 (the lists are
/// the column sets table's).
pub(crate) const COLUMN_SET_COLUMNS: &[(&str, &str)] =
    &[("columns_sha256", "CHAR(64) CHARACTER SET ascii NULL")];

/// The receipts columns of migration 10: the chain, and the last verification in full.
pub(crate) const CHAIN_COLUMNS: &[(&str, &str)] = &[
    ("chain_seq", "BIGINT NULL"),
    ("chain_link", "CHAR(64) CHARACTER SET ascii NULL"),
    ("full_verified_at_ms", "BIGINT NULL"),
    ("full_verified_how", "VARCHAR(16) CHARACTER SET ascii NULL"),
];

/// A control value of the receipt being recorded that differs from the one recorded before
/// under its batch id.
#[derive(Debug)]
pub(crate) struct ControlMismatch {
    pub field: &'static str,
    pub recorded: String,
    pub now: String,
}

/// The control columns compared against an existing receipt of the same batch id, with this
/// receipt's values as text (in the table's column order).
fn controls(spec: &TableSpec, receipt: &Receipt) -> Vec<(&'static str, String)> {
    let (c, keys, o) = (&receipt.content, &receipt.keys, &receipt.objects);
    let mut out = vec![
        ("state", STATE_VERIFIED.to_string()),
        ("data_object_key", keys.data.to_string()),
        ("manifest_object_key", keys.manifest.to_string()),
        ("success_object_key", keys.success.to_string()),
        ("schema_version", SCHEMA_VERSION.to_string()),
        ("row_count", c.row_count.to_string()),
        ("first_updated_at_ms", c.first.updated_at_ms.to_string()),
        ("first_event_id", c.first.event_id.clone()),
        ("last_updated_at_ms", c.last.updated_at_ms.to_string()),
        ("last_event_id", c.last.event_id.clone()),
        ("min_created_at_ms", c.min_created_at_ms.to_string()),
        ("max_created_at_ms", c.max_created_at_ms.to_string()),
    ];
    out.extend(
        spec.totals
            .iter()
            .zip(&c.totals)
            .map(|(t, (_, total))| (t.field, total.to_string())),
    );
    out.extend([
        ("ndjson_sha256", c.ndjson_sha256.clone()),
        ("gzip_sha256", o.data.sha256.clone()),
        ("data_crc64", o.data.crc64_string()),
        ("manifest_crc64", o.manifest_crc64.to_string()),
        ("success_crc64", o.success_crc64.to_string()),
        ("manifest_sha256", o.manifest_sha256.clone()),
        ("uncompressed_bytes", c.uncompressed_bytes.to_string()),
        ("compressed_bytes", o.data.size.to_string()),
    ]);
    out
}

/// Inserts the receipt (a no-op if it exists), reads it back and compares every control value;
/// returns the verification time its members carry (an existing receipt's, on a retry), or the
/// first control value that differs from the one recorded before.
pub(crate) async fn insert(
    tx: &mut Transaction<'_, MySql>,
    spec: &TableSpec,
    receipt: &Receipt,
) -> Result<Result<i64, ControlMismatch>, DbError> {
    let (app, batch) = (&receipt.app_code, &receipt.batch_id);
    let controls = controls(spec, receipt);
    let table = spec.receipts_table();
    let columns: Vec<&str> = controls.iter().map(|(c, _)| *c).collect();
    let sql = format!(
        "INSERT INTO {table} (app_code, batch_id, {}, verified_at_ms, created_at_ms, updated_at_ms, data_crc64nvme, \
         object_lock_mode, retain_until_ms, legal_hold, storage_class, sse_algorithm, sse_kms_key_id, verified_by, \
         members_proof_sha256, data_etag, data_version_id, manifest_etag, success_etag, columns_sha256) \
         VALUES (?, ?, {}, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE batch_id = batch_id",
        columns.join(", "),
        vec!["?"; columns.len()].join(", ")
    );
    let mut insert = sqlx::query(AssertSqlSafe(sql)).bind(app).bind(batch);
    for (_, value) in &controls {
        insert = insert.bind(value);
    }
    let at = receipt.life.verified_at_ms;
    let (p, stored) = (&receipt.protection, &receipt.objects.stored);
    insert
        .bind(at)
        .bind(at)
        .bind(at)
        .bind(receipt.objects.data_crc64nvme.map(|c| c.to_string()))
        .bind(p.lock.map(|l| l.mode.as_str()))
        .bind(p.lock.map(|l| l.retain_until_ms))
        .bind(p.legal_hold)
        .bind(&p.storage_class)
        .bind(&p.sse_algorithm)
        .bind(&p.sse_kms_key_id)
        .bind(p.verified_by.as_str())
        .bind(&receipt.members_proof)
        .bind(&stored.data.etag)
        .bind(&stored.data.version_id)
        .bind(&stored.manifest.etag)
        .bind(&stored.success.etag)
        .bind(receipt.columns.as_ref().map(|c| c.sha256.as_str()))
        .execute(&mut **tx)
        .await
        .context(|| format!("inserting receipt {batch}"))?;
    // Its column list, kept once (in this transaction: a receipt never names a list not there).
    if let Some(set) = &receipt.columns {
        sqlx::query(AssertSqlSafe(format!(
            "INSERT IGNORE INTO {} (sha256, columns_json, recorded_at_ms) VALUES (?, ?, ?)",
            spec.column_sets_table()
        )))
        .bind(&set.sha256)
        .bind(set.to_json())
        .bind(at)
        .execute(&mut **tx)
        .await
        .context(|| format!("recording the column list of receipt {batch}"))?;
    }
    // Everything is compared as text, by name, so one loop checks every control value.
    let select: Vec<String> = columns
        .iter()
        .map(|c| format!("CAST({c} AS CHAR) AS {c}"))
        .collect();
    let sql = format!(
        "SELECT {}, verified_at_ms FROM {table} WHERE app_code = ? AND batch_id = ? FOR UPDATE",
        select.join(", ")
    );
    let context = || format!("reading back receipt {batch}");
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(app)
        .bind(batch)
        .fetch_one(&mut **tx)
        .await
        .context(context)?;
    for (field, now) in controls {
        let recorded: String = row.try_get(field).context(context)?;
        if recorded != now {
            return Ok(Err(ControlMismatch {
                field,
                recorded,
                now,
            }));
        }
    }
    Ok(Ok(row.try_get("verified_at_ms").context(context)?))
}

/// A receipt row, read by column name, and the SHA-256 of the column list it names (the
/// repository gives it the list).
pub(super) fn decode(
    spec: &TableSpec,
    row: &MySqlRow,
) -> Result<(Receipt, Option<String>), sqlx::Error> {
    let text = |c: &str| row.try_get::<String, _>(c);
    let int = |c: &str| row.try_get::<i64, _>(c);
    let cursor = |at: &str, id: &str| -> Result<Cursor, sqlx::Error> {
        Ok(Cursor {
            updated_at_ms: int(at)?,
            event_id: text(id)?,
        })
    };
    let app_code = text("app_code")?;
    let batch_id = text("batch_id")?;
    let objects = objects(row)?;
    let columns_sha256: Option<String> = row.try_get("columns_sha256")?;
    let receipt = Receipt {
        recorded_app_code: app_code.clone(),
        app_code,
        keys: ObjectKeys {
            data: Key::stored(text("data_object_key")?),
            manifest: Key::stored(text("manifest_object_key")?),
            success: Key::stored(text("success_object_key")?),
        },
        content: ContentFacts {
            row_count: int("row_count")? as u64,
            first: cursor("first_updated_at_ms", "first_event_id")?,
            last: cursor("last_updated_at_ms", "last_event_id")?,
            min_created_at_ms: int("min_created_at_ms")?,
            max_created_at_ms: int("max_created_at_ms")?,
            totals: totals(spec, row)?,
            ndjson_sha256: text("ndjson_sha256")?,
            uncompressed_bytes: int("uncompressed_bytes")? as u64,
        },
        members_proof: row.try_get("members_proof_sha256")?,
        protection: protection(row)?,
        link: link(row, &batch_id, &objects.manifest_sha256)?,
        log_index: row
            .try_get::<Option<i64>, _>("log_index")?
            .map(|i| i.max(0) as u64),
        life: Lifecycle {
            verified_at_ms: int("verified_at_ms")?,
            restored_at_ms: row.try_get("restored_at_ms")?,
            compaction: compaction(row)?,
            full_verified: full_verification(row)?,
            last_findings: last_findings(row)?,
        },
        objects,
        batch_id,
        columns: None,
    };
    Ok((receipt, columns_sha256))
}

/// An unsigned decimal kept as text (the CRC-64 columns).
fn number(row: &MySqlRow, column: &str) -> Result<u64, sqlx::Error> {
    let value: String = row.try_get(column)?;
    value.parse().map_err(|_| {
        sqlx::Error::Decode(format!("{column} {value:?} is not an unsigned decimal").into())
    })
}

/// The control totals' columns, in the spec's order.
fn totals(
    spec: &TableSpec,
    row: &MySqlRow,
) -> Result<Vec<(&'static str, TotalValue)>, sqlx::Error> {
    spec.totals
        .iter()
        .map(|total| {
            let value: String = row.try_get(total.field)?;
            let parsed = match total.kind {
                TotalKind::Sum => TotalValue::Sum(value.parse::<i128>().map_err(|_| {
                    sqlx::Error::Decode(
                        format!("{} {value:?} is not a decimal", total.field).into(),
                    )
                })?),
                TotalKind::Sha256 => TotalValue::Sha256(value),
            };
            Ok((total.field, parsed))
        })
        .collect()
}

/// What the receipt records of its three objects.
fn objects(row: &MySqlRow) -> Result<Objects, sqlx::Error> {
    let identity = |etag: &str, version_id: Option<&str>| -> Result<Identity, sqlx::Error> {
        Ok(Identity {
            etag: row.try_get(etag)?,
            version_id: match version_id {
                Some(column) => row.try_get(column)?,
                None => None,
            },
        })
    };
    Ok(Objects {
        data: ObjectDigest {
            sha256: row.try_get("gzip_sha256")?,
            crc64: number(row, "data_crc64")?,
            size: row.try_get::<i64, _>("compressed_bytes")? as u64,
        },
        data_crc64nvme: match row.try_get::<Option<String>, _>("data_crc64nvme")? {
            None => None,
            Some(_) => Some(number(row, "data_crc64nvme")?),
        },
        manifest_sha256: row.try_get("manifest_sha256")?,
        manifest_crc64: number(row, "manifest_crc64")?,
        success_crc64: number(row, "success_crc64")?,
        stored: StoredAs {
            data: identity("data_etag", Some("data_version_id"))?,
            manifest: identity("manifest_etag", None)?,
            success: identity("success_etag", None)?,
        },
    })
}

/// A receipt's link in its app's chain (migration 10).
fn link(
    row: &MySqlRow,
    batch_id: &str,
    manifest_sha256: &str,
) -> Result<Option<Link>, sqlx::Error> {
    Ok(
        match (
            row.try_get::<Option<i64>, _>("chain_seq")?,
            row.try_get::<Option<String>, _>("chain_link")?,
        ) {
            (Some(seq), Some(link)) => Some(Link {
                seq: seq.max(0) as u64,
                batch_id: batch_id.to_string(),
                manifest_sha256: manifest_sha256.to_string(),
                link,
            }),
            _ => None,
        },
    )
}

/// When `verify` last read the receipt's batch in full, and how (migration 10).
fn full_verification(row: &MySqlRow) -> Result<Option<(i64, String)>, sqlx::Error> {
    Ok(
        match (
            row.try_get::<Option<i64>, _>("full_verified_at_ms")?,
            row.try_get::<Option<String>, _>("full_verified_how")?,
        ) {
            (Some(at), Some(how)) => Some((at, how)),
            _ => None,
        },
    )
}

/// When a check last found the batch other than recorded, and its findings' JSON (migration 17).
fn last_findings(row: &MySqlRow) -> Result<Option<(i64, String)>, sqlx::Error> {
    Ok(
        match (
            row.try_get::<Option<i64>, _>("last_findings_at_ms")?,
            row.try_get::<Option<String>, _>("last_findings")?,
        ) {
            (Some(at), Some(findings)) => Some((at, findings)),
            _ => None,
        },
    )
}

/// A receipt's compaction columns (migration 7).
fn compaction(row: &MySqlRow) -> Result<Option<Compaction>, sqlx::Error> {
    let sha256: Option<String> = row.try_get("members_digest_sha256")?;
    let rows: Option<i64> = row.try_get("members_digest_rows")?;
    let at_ms: Option<i64> = row.try_get("compacted_at_ms")?;
    Ok(match (sha256, rows, at_ms) {
        (Some(sha256), Some(rows), Some(at_ms)) => Some(Compaction {
            digest: MembersDigest {
                rows: rows.max(0) as u64,
                sha256,
            },
            at_ms,
            member_rows: row.try_get::<i64, _>("compacted_member_rows")?.max(0) as u64,
        }),
        _ => None,
    })
}

/// A receipt's protection columns.
fn protection(row: &MySqlRow) -> Result<Protection, sqlx::Error> {
    let mode: Option<String> = row.try_get("object_lock_mode")?;
    let until: Option<i64> = row.try_get("retain_until_ms")?;
    let lock = match (mode.as_deref().map(LockMode::parse), until) {
        (Some(Some(mode)), Some(retain_until_ms)) => Some(ObjectLock {
            mode,
            retain_until_ms,
        }),
        (Some(None), _) => {
            return Err(sqlx::Error::Decode(
                format!("object_lock_mode {mode:?} is not GOVERNANCE or COMPLIANCE").into(),
            ))
        }
        _ => None,
    };
    Ok(Protection {
        lock,
        legal_hold: row.try_get("legal_hold")?,
        storage_class: row.try_get("storage_class")?,
        sse_algorithm: row.try_get("sse_algorithm")?,
        sse_kms_key_id: row.try_get("sse_kms_key_id")?,
        verified_by: VerifiedBy::parse(&row.try_get::<String, _>("verified_by")?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::table::{ROOM_OUTBOX, WALLET_OUTBOX};

    /// The model names every column the table is made of, totals aside, in the table's order.
    #[test]
    fn the_table_has_the_columns_the_model_names() {
        for spec in [&WALLET_OUTBOX, &ROOM_OUTBOX] {
            let made: Vec<String> = columns(spec)
                .into_iter()
                .map(|(name, _)| name)
                .filter(|name| !spec.totals.iter().any(|t| t.field == name.as_str()))
                .collect();
            assert_eq!(made, crate::model::receipt::COLUMNS, "{}", spec.name);
        }
    }
}
