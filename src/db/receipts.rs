//! Receipts and members (SPEC §3, §5.2): the resume cursor, and the one READ COMMITTED
//! transaction that records a verified batch — receipt and exact members together or nothing.
//!
//! Recording is idempotent: a retry of the same batch (a commit whose answer was lost) finds the
//! same receipt and the same members and changes nothing. Anything that disagrees — the same
//! version of a row already owned by another batch, a control value that differs from an existing
//! receipt of the same batch id, a straggler batch that would move the cursor — fails the
//! transaction, and nothing is recorded.
//!
//! A row that another batch archived and that came back delivered with a different
//! `updated_at_ms` (an operator replayed the event) is not a conflict (SPEC §5.10): this batch's
//! version supersedes the older one. The member row — one per source row, the version `purge`
//! may delete — moves to this batch, and the older version is kept in the superseded table as its
//! own batch's, for `verify` and `restore`.

use std::collections::{BTreeMap, HashMap};

use sqlx::{AssertSqlSafe, MySqlPool, Row as _};

use super::lock::AppLock;
use super::{Context, DbError};
use crate::batch::{Member, Superseded};
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
    /// The data object's CRC-64/NVME, as read back (what AWS S3 reports on HEAD).
    pub data_crc64nvme: Option<u64>,
    pub verified_at_ms: i64,
}

/// Which rows a batch was cut from, for the checks its record step makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Rows after the app's cursor: the batch moves the cursor to its last row.
    AfterCursor,
    /// Stragglers at or below the cursor: the batch must not end above it (SPEC §5.10).
    Stragglers,
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
    #[error("event {event_id} at updated_at_ms {updated_at_ms} is already a member of batch {other_batch} at the same version: the same row version in two batches; nothing recorded for batch {batch_id} — run `outbox-archiver verify --batch-id {other_batch}` and compare the rows")]
    MemberConflict {
        batch_id: String,
        event_id: String,
        updated_at_ms: i64,
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
    #[error("straggler batch {batch_id} ends at {last}, above app {app}'s cursor (a straggler changed while it was read); nothing recorded — run `outbox-archiver verify --app {app}`")]
    StragglerAboveCursor {
        batch_id: String,
        app: String,
        last: String,
    },
    #[error(transparent)]
    Failpoint(#[from] Tripped),
}

/// The SQL of one table, built once.
#[derive(Debug, Clone)]
pub struct ReceiptQueries {
    spec: &'static TableSpec,
    latest: String,
    reaches: String,
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
            reaches: format!(
                "SELECT 1 FROM {receipts} FORCE INDEX ({index}) WHERE app_code = ? AND state = ? \
                 AND (last_updated_at_ms > ? OR (last_updated_at_ms = ? AND last_event_id >= ?)) LIMIT 1",
                index = spec.cursor_index()
            ),
            exists: format!("SELECT 1 FROM {receipts} WHERE app_code = ? AND batch_id = ?"),
            insert: format!(
                "INSERT INTO {receipts} (app_code, batch_id, {cols}, data_crc64nvme) VALUES (?, ?, {placeholders}, ?) \
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
    /// before the commit. Returns the older versions of rows this batch superseded.
    pub async fn record(
        &self,
        pool: &MySqlPool,
        receipt: &Receipt,
        members: &[Member],
        cut: Cut,
        lock: &AppLock,
        failpoints: &FailPoints,
    ) -> Result<Vec<Superseded>, RecordError> {
        let batch = &receipt.batch_id;
        let app = &receipt.app_code;
        let mut tx = pool
            .begin()
            .await
            .context(|| format!("starting the receipt transaction of batch {batch}"))?;

        if cut == Cut::Stragglers {
            // The cursor is the greatest last cursor among the receipts: a straggler batch may
            // record only if some receipt already reaches as far as its last row.
            let last = &receipt.content.last;
            let reached: Option<i32> = sqlx::query_scalar(AssertSqlSafe(self.reaches.clone()))
                .bind(app)
                .bind(STATE_VERIFIED)
                .bind(last.updated_at_ms)
                .bind(last.updated_at_ms)
                .bind(&last.event_id)
                .fetch_optional(&mut *tx)
                .await
                .context(|| format!("comparing straggler batch {batch} with the cursor"))?;
            if reached.is_none() {
                return Err(RecordError::StragglerAboveCursor {
                    batch_id: batch.clone(),
                    app: app.clone(),
                    last: last.to_string(),
                });
            }
        }

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
            .bind(receipt.verified_at_ms)
            .bind(receipt.data_crc64nvme.map(|c| c.to_string()));
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

        let mut superseded = Vec::new();
        for chunk in members.chunks(MEMBER_CHUNK) {
            superseded.extend(
                self.write_members(&mut tx, receipt, verified_at_ms, chunk)
                    .await?,
            );
        }
        failpoints.pass("after-members")?;

        if !lock.held_per(&mut *tx).await? {
            return Err(RecordError::LockLost {
                lock: lock.name().to_string(),
                batch_id: batch.clone(),
            });
        }
        failpoints.pass("before-commit")?;
        tx.commit()
            .await
            .context(|| format!("committing receipt {batch}"))?;
        Ok(superseded)
    }

    /// Writes one chunk of members and reads it back; returns the older versions it superseded.
    async fn write_members(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
        receipt: &Receipt,
        verified_at_ms: i64,
        chunk: &[Member],
    ) -> Result<Vec<Superseded>, RecordError> {
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
        let mut older = Vec::new();
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
            let want = expected.get(event_id.as_str());
            let ours = want == Some(&updated_at_ms)
                && &owner == batch
                && manifest_sha256 == receipt.manifest.sha256
                && member_verified_at == verified_at_ms;
            if ours {
                found += 1;
            } else if &owner != batch && want.is_some_and(|&w| w != updated_at_ms) {
                // Another batch archived another version of this row: this one supersedes it.
                older.push(Superseded {
                    event_id,
                    updated_at_ms,
                    batch_id: owner,
                });
                found += 1;
            } else {
                return Err(RecordError::MemberConflict {
                    batch_id: batch.clone(),
                    event_id,
                    updated_at_ms,
                    other_batch: owner,
                });
            }
        }
        if found != chunk.len() {
            return Err(RecordError::MemberReadback {
                batch_id: batch.clone(),
                expected: chunk.len(),
                found,
            });
        }
        if !older.is_empty() {
            self.supersede(tx, receipt, verified_at_ms, &older, &expected)
                .await?;
        }
        Ok(older)
    }

    /// Moves the member rows of `older` versions to this batch and keeps the older versions as
    /// their own batches' (SPEC §5.10), inside the receipt transaction.
    async fn supersede(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
        receipt: &Receipt,
        verified_at_ms: i64,
        older: &[Superseded],
        versions: &HashMap<&str, i64>,
    ) -> Result<(), RecordError> {
        let (app, batch) = (&receipt.app_code, &receipt.batch_id);
        let s = self.spec;
        let context = || format!("superseding older versions of rows in batch {batch}");
        let list = |n: usize, one: &str| vec![one; n].join(", ");
        let sql = format!(
            "INSERT INTO {} (app_code, event_id, updated_at_ms, batch_id, superseded_by, superseded_at_ms) VALUES {}",
            s.superseded_table(),
            list(older.len(), "(?, ?, ?, ?, ?, ?)")
        );
        let mut insert = sqlx::query(AssertSqlSafe(sql));
        for o in older {
            insert = insert
                .bind(app)
                .bind(&o.event_id)
                .bind(o.updated_at_ms)
                .bind(&o.batch_id)
                .bind(batch)
                .bind(verified_at_ms);
        }
        insert.execute(&mut **tx).await.context(context)?;

        let sql = format!(
            "DELETE FROM {} WHERE app_code = ? AND event_id IN ({}) AND (event_id, updated_at_ms, batch_id) IN ({})",
            s.members_table(),
            list(older.len(), "?"),
            list(older.len(), "(?, ?, ?)")
        );
        let mut delete = sqlx::query(AssertSqlSafe(sql)).bind(app);
        for o in older {
            delete = delete.bind(&o.event_id);
        }
        for o in older {
            delete = delete
                .bind(&o.event_id)
                .bind(o.updated_at_ms)
                .bind(&o.batch_id);
        }
        let moved = delete
            .execute(&mut **tx)
            .await
            .context(context)?
            .rows_affected();
        if moved != older.len() as u64 {
            return Err(RecordError::MemberReadback {
                batch_id: batch.clone(),
                expected: older.len(),
                found: moved as usize,
            });
        }
        let mut sql = self.members_insert_prefix.clone();
        sql.push_str(&list(older.len(), "(?, ?, ?, ?, ?, ?)"));
        let mut insert = sqlx::query(AssertSqlSafe(sql));
        for o in older {
            insert = insert
                .bind(app)
                .bind(&o.event_id)
                .bind(versions[o.event_id.as_str()])
                .bind(batch)
                .bind(&receipt.manifest.sha256)
                .bind(verified_at_ms);
        }
        insert.execute(&mut **tx).await.context(context)?;
        // Read back, as every member is (SPEC §5.2).
        let mut sql = self.members_select_prefix.clone();
        sql.push_str(&list(older.len(), "?"));
        sql.push(')');
        let mut select =
            sqlx::query_as::<_, (String, i64, String, String, i64)>(AssertSqlSafe(sql)).bind(app);
        for o in older {
            select = select.bind(&o.event_id);
        }
        let moved = select.fetch_all(&mut **tx).await.context(context)?;
        let ours = moved
            .iter()
            .filter(|(id, ms, owner, manifest, at)| {
                versions.get(id.as_str()) == Some(ms)
                    && owner == batch
                    && *manifest == receipt.manifest.sha256
                    && *at == verified_at_ms
            })
            .count();
        if ours != older.len() {
            return Err(RecordError::MemberReadback {
                batch_id: batch.clone(),
                expected: older.len(),
                found: ours,
            });
        }

        let mut per_batch: BTreeMap<&str, i64> = BTreeMap::new();
        for o in older {
            *per_batch.entry(o.batch_id.as_str()).or_default() += 1;
        }
        let sql = format!(
            "UPDATE {} SET superseded_rows = superseded_rows + ? WHERE app_code = ? AND batch_id = ?",
            s.receipts_table()
        );
        for (old_batch, n) in per_batch {
            sqlx::query(AssertSqlSafe(sql.clone()))
                .bind(n)
                .bind(app)
                .bind(old_batch)
                .execute(&mut **tx)
                .await
                .context(context)?;
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
    /// The data object's CRC-64/NVME (receipts recorded since migration 4).
    pub data_crc64nvme: Option<u64>,
    pub verified_at_ms: i64,
    /// When the batch was restored into the source table (purge leaves it alone since).
    pub restored_at_ms: Option<i64>,
}

/// Which receipts a command looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReceiptScope {
    /// Empty: every app.
    pub apps: Vec<String>,
    /// Empty: every batch.
    pub batch_ids: Vec<String>,
    /// Receipts whose rows reach into `[from_ms, to_ms)` of `updated_at_ms`.
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
    /// Only receipts purge may still work on: not fully purged, not restored into the source
    /// (unless `include_restored`), and verified at or before this instant (purge's grace).
    pub unpurged_verified_before: Option<i64>,
    /// With `unpurged_verified_before`: receipts restored into the source too.
    pub include_restored: bool,
}

/// An app's receipts summed up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct ReceiptTotals {
    pub receipts: i64,
    pub archived_rows: i64,
    pub awaiting_purge_rows: i64,
    pub superseded_rows: i64,
    pub restored_batches: i64,
}

/// A value a scope's conditions bind.
enum Bind<'a> {
    Text(&'a str),
    Int(i64),
}

/// The conditions of a scope (after `state = ?`), and the values they bind, in order.
fn scope_filter(scope: &ReceiptScope) -> (String, Vec<Bind<'_>>) {
    let list = |n: usize| vec!["?"; n].join(", ");
    let mut sql = String::new();
    let mut binds = Vec::new();
    if !scope.apps.is_empty() {
        sql.push_str(&format!(" AND app_code IN ({})", list(scope.apps.len())));
        binds.extend(scope.apps.iter().map(|a| Bind::Text(a)));
    }
    if !scope.batch_ids.is_empty() {
        sql.push_str(&format!(
            " AND batch_id IN ({})",
            list(scope.batch_ids.len())
        ));
        binds.extend(scope.batch_ids.iter().map(|b| Bind::Text(b)));
    }
    if let Some(from) = scope.from_ms {
        sql.push_str(" AND last_updated_at_ms >= ?");
        binds.push(Bind::Int(from));
    }
    if let Some(to) = scope.to_ms {
        sql.push_str(" AND first_updated_at_ms < ?");
        binds.push(Bind::Int(to));
    }
    if let Some(before) = scope.unpurged_verified_before {
        sql.push_str(" AND purged_at_ms IS NULL AND verified_at_ms <= ?");
        if !scope.include_restored {
            sql.push_str(" AND restored_at_ms IS NULL");
        }
        binds.push(Bind::Int(before));
    }
    (sql, binds)
}

/// Where a page of receipts ended: the next page starts after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    pub app_code: String,
    pub last: Cursor,
}

impl Position {
    fn of(receipt: &StoredReceipt) -> Position {
        Position {
            app_code: receipt.app_code.clone(),
            last: receipt.content.last.clone(),
        }
    }
}

/// Receipts are listed in pages of this many, so no command holds a whole archive's receipts.
pub const RECEIPT_PAGE: u32 = 500;

impl ReceiptQueries {
    /// The VERIFIED receipts in scope, by app and cursor: every one (small scopes, tests).
    pub async fn list(
        &self,
        pool: &MySqlPool,
        scope: &ReceiptScope,
    ) -> Result<Vec<StoredReceipt>, DbError> {
        let mut all = Vec::new();
        let mut after = None;
        loop {
            let page = self.page(pool, scope, after.as_ref(), RECEIPT_PAGE).await?;
            let full = page.len() == RECEIPT_PAGE as usize;
            after = page.last().map(Position::of);
            all.extend(page);
            if !full {
                return Ok(all);
            }
        }
    }

    /// The VERIFIED receipts in scope as a stream, a page of [`RECEIPT_PAGE`] at a time, by app
    /// and cursor: memory is one page, whatever the archive's size.
    pub fn stream<'a>(
        &'a self,
        pool: &'a MySqlPool,
        scope: ReceiptScope,
    ) -> impl futures_util::Stream<Item = Result<StoredReceipt, DbError>> + Send + 'a {
        self.stream_in_pages(pool, scope, RECEIPT_PAGE)
    }

    /// [`ReceiptQueries::stream`] with pages of `page` receipts.
    pub fn stream_in_pages<'a>(
        &'a self,
        pool: &'a MySqlPool,
        scope: ReceiptScope,
        page: u32,
    ) -> impl futures_util::Stream<Item = Result<StoredReceipt, DbError>> + Send + 'a {
        let state = (
            scope,
            Some(None::<Position>),
            std::collections::VecDeque::new(),
        );
        futures_util::stream::try_unfold(
            state,
            move |(scope, mut after, mut buffered)| async move {
                loop {
                    if let Some(receipt) = buffered.pop_front() {
                        return Ok(Some((receipt, (scope, after, buffered))));
                    }
                    let Some(from) = after else {
                        return Ok(None);
                    };
                    let found = self.page(pool, &scope, from.as_ref(), page).await?;
                    after = (found.len() == page as usize).then(|| found.last().map(Position::of));
                    buffered.extend(found);
                }
            },
        )
    }

    /// One page of the receipts in scope after `after`, by app and cursor.
    pub async fn page(
        &self,
        pool: &MySqlPool,
        scope: &ReceiptScope,
        after: Option<&Position>,
        limit: u32,
    ) -> Result<Vec<StoredReceipt>, DbError> {
        let totals: Vec<&str> = self.spec.totals.iter().map(|t| t.field).collect();
        let mut sql = format!(
            "SELECT app_code, batch_id, data_object_key, manifest_object_key, success_object_key, row_count, \
             first_updated_at_ms, first_event_id, last_updated_at_ms, last_event_id, min_created_at_ms, \
             max_created_at_ms, ndjson_sha256, gzip_sha256, data_crc64, manifest_crc64, success_crc64, \
             manifest_sha256, uncompressed_bytes, compressed_bytes, verified_at_ms, data_crc64nvme, \
             restored_at_ms{}{} FROM {} WHERE state = ?",
            if totals.is_empty() { "" } else { ", " },
            totals.join(", "),
            self.spec.receipts_table()
        );
        let (filter, binds) = scope_filter(scope);
        sql.push_str(&filter);
        if after.is_some() {
            sql.push_str(
                " AND (app_code > ? OR (app_code = ? AND (last_updated_at_ms > ? \
                 OR (last_updated_at_ms = ? AND last_event_id > ?))))",
            );
        }
        sql.push_str(" ORDER BY app_code, last_updated_at_ms, last_event_id LIMIT ?");
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(STATE_VERIFIED);
        for bind in binds {
            query = match bind {
                Bind::Text(text) => query.bind(text),
                Bind::Int(n) => query.bind(n),
            };
        }
        if let Some(p) = after {
            query = query
                .bind(&p.app_code)
                .bind(&p.app_code)
                .bind(p.last.updated_at_ms)
                .bind(p.last.updated_at_ms)
                .bind(&p.last.event_id);
        }
        let rows = query
            .bind(limit)
            .fetch_all(pool)
            .await
            .context(|| "listing receipts".into())?;
        rows.iter()
            .map(|row| self.decode(row))
            .collect::<Result<_, sqlx::Error>>()
            .context(|| "decoding a receipt".into())
    }

    /// The first `n` receipts, by app and cursor.
    pub async fn first(&self, pool: &MySqlPool, n: u32) -> Result<Vec<StoredReceipt>, DbError> {
        self.page(pool, &ReceiptScope::default(), None, n).await
    }

    /// How many receipts are in scope (for a progress display).
    pub async fn count(&self, pool: &MySqlPool, scope: &ReceiptScope) -> Result<u64, DbError> {
        let (filter, binds) = scope_filter(scope);
        let sql = format!(
            "SELECT COUNT(*) FROM {} WHERE state = ?{filter}",
            self.spec.receipts_table()
        );
        let mut query = sqlx::query_scalar::<_, i64>(AssertSqlSafe(sql)).bind(STATE_VERIFIED);
        for bind in binds {
            query = match bind {
                Bind::Text(text) => query.bind(text),
                Bind::Int(n) => query.bind(n),
            };
        }
        let n = query
            .fetch_one(pool)
            .await
            .context(|| "counting receipts".into())?;
        Ok(n as u64)
    }

    /// The app codes of the receipts in a scope (for `--batch-id` and restore), each once.
    pub async fn apps_in(
        &self,
        pool: &MySqlPool,
        scope: &ReceiptScope,
    ) -> Result<Vec<String>, DbError> {
        let (filter, binds) = scope_filter(scope);
        let sql = format!(
            "SELECT DISTINCT app_code FROM {} WHERE state = ?{filter} ORDER BY app_code",
            self.spec.receipts_table()
        );
        let mut query = sqlx::query_scalar::<_, String>(AssertSqlSafe(sql)).bind(STATE_VERIFIED);
        for bind in binds {
            query = match bind {
                Bind::Text(text) => query.bind(text),
                Bind::Int(n) => query.bind(n),
            };
        }
        query
            .fetch_all(pool)
            .await
            .context(|| "listing the apps of the receipts in scope".into())
    }

    /// An app's receipts summed up, for `status`.
    pub async fn totals(&self, pool: &MySqlPool, app: &str) -> Result<ReceiptTotals, DbError> {
        // Awaiting purge: what purge may still delete — rows of receipts it has not finished and
        // that were not restored into the source, less what it deleted and the older versions a
        // later batch superseded (purged through that batch).
        let sql = format!(
            "SELECT COUNT(*) AS receipts, CAST(COALESCE(SUM(row_count), 0) AS SIGNED) AS archived_rows, \
             CAST(COALESCE(SUM(CASE WHEN purged_at_ms IS NULL AND restored_at_ms IS NULL \
               THEN GREATEST(row_count - purged_rows - superseded_rows, 0) ELSE 0 END), 0) AS SIGNED) AS awaiting_purge_rows, \
             CAST(COALESCE(SUM(superseded_rows), 0) AS SIGNED) AS superseded_rows, \
             CAST(COUNT(restored_at_ms) AS SIGNED) AS restored_batches \
             FROM {} WHERE app_code = ? AND state = ?",
            self.spec.receipts_table()
        );
        sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(STATE_VERIFIED)
            .fetch_one(pool)
            .await
            .context(|| format!("summing the receipts of app {app}"))
    }

    /// Every app code that has receipts, by index dives on the primary key (`MIN(app_code) …
    /// WHERE app_code > ?`): cost grows with the number of apps, not of receipts.
    pub async fn apps_with_receipts(&self, pool: &MySqlPool) -> Result<Vec<String>, DbError> {
        let table = self.spec.receipts_table();
        let first = format!("SELECT MIN(app_code) FROM {table}");
        let next = format!("SELECT MIN(app_code) FROM {table} WHERE app_code > ?");
        let mut apps = Vec::new();
        let mut current: Option<String> = sqlx::query_scalar(AssertSqlSafe(first))
            .fetch_one(pool)
            .await
            .context(|| "listing the apps with receipts".into())?;
        while let Some(app) = current {
            current = sqlx::query_scalar(AssertSqlSafe(next.clone()))
                .bind(&app)
                .fetch_one(pool)
                .await
                .context(|| "listing the apps with receipts".into())?;
            apps.push(app);
        }
        Ok(apps)
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
            let value = text(23 + k)?;
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
            data_crc64nvme: match row.try_get::<Option<String>, _>(21)? {
                None => None,
                Some(_) => Some(number(21, "data_crc64nvme")?),
            },
            restored_at_ms: row.try_get(22)?,
        })
    }

    /// Apps that have receipts not yet fully purged (purge's `--all-apps`: an app whose rows are
    /// all gone from the source table may still have receipts to finish).
    pub async fn apps_with_unpurged(
        &self,
        pool: &MySqlPool,
        include_restored: bool,
    ) -> Result<Vec<String>, DbError> {
        let sql = format!(
            "SELECT DISTINCT app_code FROM {} WHERE state = ? AND purged_at_ms IS NULL{} ORDER BY app_code",
            self.spec.receipts_table(),
            if include_restored { "" } else { " AND restored_at_ms IS NULL" }
        );
        sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(STATE_VERIFIED)
            .fetch_all(pool)
            .await
            .context(|| "listing apps with receipts to purge".into())
    }

    /// Every row version a batch holds and the database vouches for: its members, and the older
    /// versions a later batch superseded (SPEC §5.10). What `verify` and `restore` compare a data
    /// object's rows with.
    pub async fn proven_members_of(
        &self,
        pool: &MySqlPool,
        app: &str,
        batch_id: &str,
    ) -> Result<Vec<Member>, DbError> {
        let mut members = self.members_of(pool, app, batch_id).await?;
        members.extend(self.superseded_of(pool, app, batch_id).await?);
        Ok(members)
    }

    /// The older versions of rows in a batch that later batches superseded.
    pub async fn superseded_of(
        &self,
        pool: &MySqlPool,
        app: &str,
        batch_id: &str,
    ) -> Result<Vec<Member>, DbError> {
        self.versions_in(pool, &self.spec.superseded_table(), app, batch_id)
            .await
            .context(|| format!("reading the superseded rows of batch {batch_id}"))
    }

    /// `(event_id, updated_at_ms)` of a batch's rows in `table` (members or superseded).
    async fn versions_in(
        &self,
        pool: &MySqlPool,
        table: &str,
        app: &str,
        batch_id: &str,
    ) -> Result<Vec<Member>, sqlx::Error> {
        let sql = format!(
            "SELECT event_id, updated_at_ms FROM {table} WHERE app_code = ? AND batch_id = ?"
        );
        let rows: Vec<(String, i64)> = sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(batch_id)
            .fetch_all(pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(|(event_id, updated_at_ms)| Member {
                event_id,
                updated_at_ms,
            })
            .collect())
    }

    /// Receipts of an app that purge leaves alone because they were restored into the source.
    pub async fn restored_unpurged(&self, pool: &MySqlPool, app: &str) -> Result<u64, DbError> {
        let sql = format!(
            "SELECT COUNT(*) FROM {} WHERE app_code = ? AND state = ? AND purged_at_ms IS NULL AND restored_at_ms IS NOT NULL",
            self.spec.receipts_table()
        );
        let n: i64 = sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(app)
            .bind(STATE_VERIFIED)
            .fetch_one(pool)
            .await
            .context(|| format!("counting restored receipts of app {app}"))?;
        Ok(n as u64)
    }

    /// The members a receipt recorded, as `(event_id, updated_at_ms)`.
    pub async fn members_of(
        &self,
        pool: &MySqlPool,
        app: &str,
        batch_id: &str,
    ) -> Result<Vec<Member>, DbError> {
        self.versions_in(pool, &self.spec.members_table(), app, batch_id)
            .await
            .context(|| format!("reading the members of batch {batch_id}"))
    }
}
