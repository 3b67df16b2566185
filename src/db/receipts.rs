//! Receipts and members (SPEC §3, §5.2): the resume cursor, and the one READ COMMITTED
//! transaction that records a verified batch — receipt and exact members together or nothing.
//!
//! Recording is idempotent: a retry of the same batch (a commit whose answer was lost) finds the
//! same receipt and the same members and changes nothing. Anything that disagrees — a member
//! already owned by another batch, a control value that differs from an existing receipt of the
//! same batch id — fails the transaction, and nothing is recorded.

use std::collections::HashMap;

use sqlx::{AssertSqlSafe, MySqlPool, Row as _};

use super::lock::AppLock;
use super::{Context, DbError};
use crate::batch::Member;
use crate::digest::ObjectDigest;
use crate::failpoint::{FailPoints, Tripped};
use crate::format::{ContentFacts, Cursor, ObjectKeys, SCHEMA_VERSION};
use crate::table::TableSpec;

pub const STATE_VERIFIED: &str = "VERIFIED";

/// Members are written and read back in chunks of at most this many (SPEC §5.2).
pub const MEMBER_CHUNK: usize = 500;

/// Everything a VERIFIED receipt records.
#[derive(Debug, Clone)]
pub struct Receipt {
    pub app_code: String,
    pub batch_id: String,
    pub keys: ObjectKeys,
    pub content: ContentFacts,
    pub data: ObjectDigest,
    pub manifest: ObjectDigest,
    pub success: ObjectDigest,
    pub verified_at_ms: i64,
}

/// Why a receipt was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("receipt {batch_id} already exists with different control values ({field}: recorded {recorded}, now {now}); nothing recorded — run `outbox-archiver verify --batch-id {batch_id}`")]
    ReceiptConflict {
        batch_id: String,
        field: &'static str,
        recorded: String,
        now: String,
    },
    #[error("event {event_id} is already a member of batch {other_batch}; nothing recorded for batch {batch_id}")]
    MemberConflict {
        batch_id: String,
        event_id: String,
        other_batch: String,
    },
    #[error(
        "member read-back of batch {batch_id} found {found} of {expected} rows; nothing recorded"
    )]
    MemberReadback {
        batch_id: String,
        expected: usize,
        found: usize,
    },
    #[error("lost advisory lock {lock} before committing batch {batch_id} (killed connection, server restart or another archiver); nothing recorded")]
    LockLost { lock: String, batch_id: String },
    #[error(transparent)]
    Failpoint(#[from] Tripped),
}

/// The SQL of one table, built once.
#[derive(Debug, Clone)]
pub struct ReceiptQueries {
    spec: &'static TableSpec,
    latest: String,
    exists: String,
    insert: String,
    controls: String,
    members_select_prefix: String,
    members_insert_prefix: String,
}

/// The control columns compared against an existing receipt of the same batch id.
fn control_columns(spec: &TableSpec) -> Vec<&'static str> {
    let mut cols = vec![
        "state",
        "data_object_key",
        "manifest_object_key",
        "success_object_key",
        "schema_version",
        "row_count",
        "first_updated_at_ms",
        "first_event_id",
        "last_updated_at_ms",
        "last_event_id",
        "min_created_at_ms",
        "max_created_at_ms",
    ];
    cols.extend(spec.totals.iter().map(|t| t.field));
    cols.extend([
        "ndjson_sha256",
        "gzip_sha256",
        "data_crc64",
        "manifest_crc64",
        "success_crc64",
        "manifest_sha256",
        "uncompressed_bytes",
        "compressed_bytes",
    ]);
    cols
}

impl Receipt {
    /// The control values, as text, in [`control_columns`] order.
    fn controls(&self) -> Vec<String> {
        let c = &self.content;
        let mut v = vec![
            STATE_VERIFIED.to_string(),
            self.keys.data.clone(),
            self.keys.manifest.clone(),
            self.keys.success.clone(),
            SCHEMA_VERSION.to_string(),
            c.row_count.to_string(),
            c.first.updated_at_ms.to_string(),
            c.first.event_id.clone(),
            c.last.updated_at_ms.to_string(),
            c.last.event_id.clone(),
            c.min_created_at_ms.to_string(),
            c.max_created_at_ms.to_string(),
        ];
        v.extend(c.totals.iter().map(|(_, t)| t.to_string()));
        v.extend([
            c.ndjson_sha256.clone(),
            self.data.sha256.clone(),
            self.data.crc64_string(),
            self.manifest.crc64_string(),
            self.success.crc64_string(),
            self.manifest.sha256.clone(),
            c.uncompressed_bytes.to_string(),
            self.data.size.to_string(),
        ]);
        v
    }
}

impl ReceiptQueries {
    pub fn new(spec: &'static TableSpec) -> ReceiptQueries {
        let receipts = spec.receipts_table();
        let members = spec.members_table();
        let controls = control_columns(spec);
        let insert_cols: Vec<&str> = controls
            .iter()
            .copied()
            .chain(["verified_at_ms", "created_at_ms", "updated_at_ms"])
            .collect();
        let placeholders = vec!["?"; insert_cols.len()].join(", ");
        // Everything is compared as text so one loop checks every control value.
        let select_controls = controls
            .iter()
            .map(|c| format!("CAST({c} AS CHAR)"))
            .chain(["verified_at_ms".to_string()])
            .collect::<Vec<_>>()
            .join(", ");
        ReceiptQueries {
            spec,
            latest: format!(
                "SELECT last_updated_at_ms, last_event_id FROM {receipts} FORCE INDEX ({index}) \
                 WHERE app_code = ? AND state = ? ORDER BY last_updated_at_ms DESC, last_event_id DESC LIMIT 1",
                index = spec.cursor_index()
            ),
            exists: format!("SELECT 1 FROM {receipts} WHERE app_code = ? AND batch_id = ?"),
            insert: format!(
                "INSERT INTO {receipts} (app_code, batch_id, {cols}) VALUES (?, ?, {placeholders}) \
                 ON DUPLICATE KEY UPDATE batch_id = batch_id",
                cols = insert_cols.join(", ")
            ),
            controls: format!("SELECT {select_controls} FROM {receipts} WHERE app_code = ? AND batch_id = ? FOR UPDATE"),
            members_insert_prefix: format!(
                "INSERT INTO {members} (app_code, event_id, updated_at_ms, batch_id, manifest_sha256, receipt_verified_at_ms) VALUES "
            ),
            members_select_prefix: format!(
                "SELECT event_id, updated_at_ms, batch_id, manifest_sha256, receipt_verified_at_ms FROM {members} \
                 WHERE app_code = ? AND event_id IN ("
            ),
        }
    }

    /// The resume cursor: the greatest `(last_updated_at_ms, last_event_id)` among the app's
    /// VERIFIED receipts, by the database's ordering, on the cursor index.
    pub async fn latest_cursor(
        &self,
        pool: &MySqlPool,
        app: &str,
    ) -> Result<Option<Cursor>, DbError> {
        let row: Option<(i64, String)> = sqlx::query_as(AssertSqlSafe(self.latest.clone()))
            .bind(app)
            .bind(STATE_VERIFIED)
            .fetch_optional(pool)
            .await
            .context(|| format!("reading the archive cursor of app {app}"))?;
        Ok(row.map(|(updated_at_ms, event_id)| Cursor {
            updated_at_ms,
            event_id,
        }))
    }

    /// Whether a receipt for this batch id exists already.
    pub async fn exists(
        &self,
        pool: &MySqlPool,
        app: &str,
        batch_id: &str,
    ) -> Result<bool, DbError> {
        let found: Option<i32> = sqlx::query_scalar(AssertSqlSafe(self.exists.clone()))
            .bind(app)
            .bind(batch_id)
            .fetch_optional(pool)
            .await
            .context(|| format!("looking up receipt {batch_id}"))?;
        Ok(found.is_some())
    }

    /// Records a verified batch: receipt and members in one transaction, the lock re-checked just
    /// before the commit.
    pub async fn record(
        &self,
        pool: &MySqlPool,
        receipt: &Receipt,
        members: &[Member],
        lock: &AppLock,
        failpoints: &FailPoints,
    ) -> Result<(), RecordError> {
        let batch = &receipt.batch_id;
        let app = &receipt.app_code;
        let mut tx = pool
            .begin()
            .await
            .context(|| format!("starting the receipt transaction of batch {batch}"))?;

        let controls = receipt.controls();
        let mut insert = sqlx::query(AssertSqlSafe(self.insert.clone()))
            .bind(app)
            .bind(batch);
        for value in &controls {
            insert = insert.bind(value);
        }
        insert = insert
            .bind(receipt.verified_at_ms)
            .bind(receipt.verified_at_ms)
            .bind(receipt.verified_at_ms);
        insert
            .execute(&mut *tx)
            .await
            .context(|| format!("inserting receipt {batch}"))?;

        let row = sqlx::query(AssertSqlSafe(self.controls.clone()))
            .bind(app)
            .bind(batch)
            .fetch_one(&mut *tx)
            .await
            .context(|| format!("reading back receipt {batch}"))?;
        for (i, (column, now)) in control_columns(self.spec)
            .into_iter()
            .zip(&controls)
            .enumerate()
        {
            let recorded: String = row
                .try_get(i)
                .context(|| format!("reading back receipt {batch}"))?;
            if &recorded != now {
                return Err(RecordError::ReceiptConflict {
                    batch_id: batch.clone(),
                    field: column,
                    recorded,
                    now: now.clone(),
                });
            }
        }
        // On a retry the receipt already existed: its verification time is the one members carry.
        let verified_at_ms: i64 = row
            .try_get(controls.len())
            .context(|| format!("reading back receipt {batch}"))?;

        for chunk in members.chunks(MEMBER_CHUNK) {
            self.write_members(&mut tx, receipt, verified_at_ms, chunk)
                .await?;
        }
        failpoints.check("after-members")?;

        if !lock.held_per(&mut *tx).await? {
            return Err(RecordError::LockLost {
                lock: lock.name().to_string(),
                batch_id: batch.clone(),
            });
        }
        failpoints.check("before-commit")?;
        tx.commit()
            .await
            .context(|| format!("committing receipt {batch}"))?;
        Ok(())
    }

    async fn write_members(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
        receipt: &Receipt,
        verified_at_ms: i64,
        chunk: &[Member],
    ) -> Result<(), RecordError> {
        let batch = &receipt.batch_id;
        let mut sql = self.members_insert_prefix.clone();
        sql.push_str(&vec!["(?, ?, ?, ?, ?, ?)"; chunk.len()].join(", "));
        // A no-op on duplicates: the read-back below decides whether a duplicate is this batch's.
        sql.push_str(" ON DUPLICATE KEY UPDATE event_id = event_id");
        let mut insert = sqlx::query(AssertSqlSafe(sql));
        for m in chunk {
            insert = insert
                .bind(&receipt.app_code)
                .bind(&m.event_id)
                .bind(m.updated_at_ms)
                .bind(batch)
                .bind(&receipt.manifest.sha256)
                .bind(verified_at_ms);
        }
        insert
            .execute(&mut **tx)
            .await
            .context(|| format!("writing members of batch {batch}"))?;

        let mut sql = self.members_select_prefix.clone();
        sql.push_str(&vec!["?"; chunk.len()].join(", "));
        sql.push(')');
        let mut select = sqlx::query(AssertSqlSafe(sql)).bind(&receipt.app_code);
        for m in chunk {
            select = select.bind(&m.event_id);
        }
        let rows = select
            .fetch_all(&mut **tx)
            .await
            .context(|| format!("reading back members of batch {batch}"))?;
        let expected: HashMap<&str, i64> = chunk
            .iter()
            .map(|m| (m.event_id.as_str(), m.updated_at_ms))
            .collect();
        let mut found = 0;
        for row in &rows {
            let read = |e| DbError::Query {
                context: format!("reading back members of batch {batch}"),
                source: e,
            };
            let event_id: String = row.try_get(0).map_err(read)?;
            let updated_at_ms: i64 = row.try_get(1).map_err(read)?;
            let owner: String = row.try_get(2).map_err(read)?;
            let manifest_sha256: String = row.try_get(3).map_err(read)?;
            let member_verified_at: i64 = row.try_get(4).map_err(read)?;
            let ours = expected.get(event_id.as_str()) == Some(&updated_at_ms)
                && &owner == batch
                && manifest_sha256 == receipt.manifest.sha256
                && member_verified_at == verified_at_ms;
            if !ours {
                return Err(RecordError::MemberConflict {
                    batch_id: batch.clone(),
                    event_id,
                    other_batch: owner,
                });
            }
            found += 1;
        }
        if found != chunk.len() {
            return Err(RecordError::MemberReadback {
                batch_id: batch.clone(),
                expected: chunk.len(),
                found,
            });
        }
        Ok(())
    }
}

/// A receipt as recorded, for `verify` and `status`.
#[derive(Debug, Clone)]
pub struct StoredReceipt {
    pub app_code: String,
    pub batch_id: String,
    pub keys: ObjectKeys,
    pub content: ContentFacts,
    pub data: ObjectDigest,
    pub manifest_sha256: String,
    pub manifest_crc64: u64,
    pub success_crc64: u64,
    pub verified_at_ms: i64,
}

/// Which receipts a command looks at.
#[derive(Debug, Clone, Default)]
pub struct ReceiptScope {
    /// Empty: every app.
    pub apps: Vec<String>,
    /// Empty: every batch.
    pub batch_ids: Vec<String>,
    /// Receipts whose rows reach into `[from_ms, to_ms)` of `updated_at_ms`.
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
    /// Only receipts not yet fully purged and verified at or before this instant (purge's grace).
    pub unpurged_verified_before: Option<i64>,
}

impl ReceiptQueries {
    /// The VERIFIED receipts in scope, by app and cursor.
    pub async fn list(
        &self,
        pool: &MySqlPool,
        scope: &ReceiptScope,
    ) -> Result<Vec<StoredReceipt>, DbError> {
        let totals: Vec<&str> = self.spec.totals.iter().map(|t| t.field).collect();
        let mut sql = format!(
            "SELECT app_code, batch_id, data_object_key, manifest_object_key, success_object_key, row_count, \
             first_updated_at_ms, first_event_id, last_updated_at_ms, last_event_id, min_created_at_ms, \
             max_created_at_ms, ndjson_sha256, gzip_sha256, data_crc64, manifest_crc64, success_crc64, \
             manifest_sha256, uncompressed_bytes, compressed_bytes, verified_at_ms{}{} FROM {} WHERE state = ?",
            if totals.is_empty() { "" } else { ", " },
            totals.join(", "),
            self.spec.receipts_table()
        );
        let list = |n: usize| vec!["?"; n].join(", ");
        if !scope.apps.is_empty() {
            sql.push_str(&format!(" AND app_code IN ({})", list(scope.apps.len())));
        }
        if !scope.batch_ids.is_empty() {
            sql.push_str(&format!(
                " AND batch_id IN ({})",
                list(scope.batch_ids.len())
            ));
        }
        if scope.from_ms.is_some() {
            sql.push_str(" AND last_updated_at_ms >= ?");
        }
        if scope.to_ms.is_some() {
            sql.push_str(" AND first_updated_at_ms < ?");
        }
        if scope.unpurged_verified_before.is_some() {
            sql.push_str(" AND purged_at_ms IS NULL AND verified_at_ms <= ?");
        }
        sql.push_str(" ORDER BY app_code, last_updated_at_ms, last_event_id");
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(STATE_VERIFIED);
        for app in &scope.apps {
            query = query.bind(app);
        }
        for id in &scope.batch_ids {
            query = query.bind(id);
        }
        if let Some(from) = scope.from_ms {
            query = query.bind(from);
        }
        if let Some(to) = scope.to_ms {
            query = query.bind(to);
        }
        if let Some(before) = scope.unpurged_verified_before {
            query = query.bind(before);
        }
        let rows = query
            .fetch_all(pool)
            .await
            .context(|| "listing receipts".into())?;
        rows.iter()
            .map(|row| self.decode(row))
            .collect::<Result<_, sqlx::Error>>()
            .context(|| "decoding a receipt".into())
    }

    fn decode(&self, row: &sqlx::mysql::MySqlRow) -> Result<StoredReceipt, sqlx::Error> {
        let text = |i: usize| row.try_get::<String, _>(i);
        let int = |i: usize| row.try_get::<i64, _>(i);
        let number = |i: usize, what: &str| -> Result<u64, sqlx::Error> {
            let value = text(i)?;
            value.parse().map_err(|_| {
                sqlx::Error::Decode(format!("{what} {value:?} is not an unsigned decimal").into())
            })
        };
        let mut totals = Vec::new();
        for (k, total) in self.spec.totals.iter().enumerate() {
            let value = text(21 + k)?;
            let parsed = value.parse::<i128>().map_err(|_| {
                sqlx::Error::Decode(format!("{} {value:?} is not a decimal", total.field).into())
            })?;
            totals.push((total.field, parsed));
        }
        Ok(StoredReceipt {
            app_code: text(0)?,
            batch_id: text(1)?,
            keys: ObjectKeys {
                data: text(2)?,
                manifest: text(3)?,
                success: text(4)?,
            },
            content: ContentFacts {
                row_count: int(5)? as u64,
                first: Cursor {
                    updated_at_ms: int(6)?,
                    event_id: text(7)?,
                },
                last: Cursor {
                    updated_at_ms: int(8)?,
                    event_id: text(9)?,
                },
                min_created_at_ms: int(10)?,
                max_created_at_ms: int(11)?,
                totals,
                ndjson_sha256: text(12)?,
                uncompressed_bytes: int(18)? as u64,
            },
            data: ObjectDigest {
                sha256: text(13)?,
                crc64: number(14, "data_crc64")?,
                size: int(19)? as u64,
            },
            manifest_crc64: number(15, "manifest_crc64")?,
            success_crc64: number(16, "success_crc64")?,
            manifest_sha256: text(17)?,
            verified_at_ms: int(20)?,
        })
    }

    /// Apps that have receipts not yet fully purged (purge's `--all-apps`: an app whose rows are
    /// all gone from the source table may still have receipts to finish).
    pub async fn apps_with_unpurged(&self, pool: &MySqlPool) -> Result<Vec<String>, DbError> {
        let sql = format!(
            "SELECT DISTINCT app_code FROM {} WHERE state = ? AND purged_at_ms IS NULL ORDER BY app_code",
            self.spec.receipts_table()
        );
        sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(STATE_VERIFIED)
            .fetch_all(pool)
            .await
            .context(|| "listing apps with receipts to purge".into())
    }

    /// The members a receipt recorded, as `(event_id, updated_at_ms)`.
    pub async fn members_of(
        &self,
        pool: &MySqlPool,
        app: &str,
        batch_id: &str,
    ) -> Result<Vec<Member>, DbError> {
        let sql = format!(
            "SELECT event_id, updated_at_ms FROM {} WHERE app_code = ? AND batch_id = ?",
            self.spec.members_table()
        );
        let rows: Vec<(String, i64)> = sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(batch_id)
            .fetch_all(pool)
            .await
            .context(|| format!("reading the members of batch {batch_id}"))?;
        Ok(rows
            .into_iter()
            .map(|(event_id, updated_at_ms)| Member {
                event_id,
                updated_at_ms,
            })
            .collect())
    }
}
