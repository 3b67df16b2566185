//! The receipts table (SPEC §3): one row per verified batch. The resume cursor, the receipts a
//! command works on — listed a page at a time in (app, cursor) order, so no command holds a whole
//! archive's receipts — and their sums for `status`. Recording a receipt is [`super::record`]'s.

use sqlx::mysql::MySqlRow;
use sqlx::{AssertSqlSafe, MySql, MySqlPool, QueryBuilder, Row as _};

use super::{Context, DbError};
use crate::model::digest::ObjectDigest;
use crate::model::format::{ContentFacts, Cursor, MembersDigest, ObjectKeys, TotalValue};
use crate::model::protection::{LockMode, ObjectLock, Protection, VerifiedBy};
use crate::model::table::{TableSpec, TotalKind};

pub(crate) const STATE_VERIFIED: &str = "VERIFIED";

/// Receipts are listed in pages of this many.
const RECEIPT_PAGE: u32 = 500;

/// A receipt as recorded, for `verify`, `purge`, `restore` and `status`.
#[derive(Debug, Clone)]
pub struct StoredReceipt {
    /// The app's one spelling (SPEC §5.4): the one its member rows, lock and cursor use, read
    /// through an app's scope. A receipt an older build recorded under another spelling of the
    /// app keeps that one in [`StoredReceipt::recorded_app_code`].
    pub app_code: String,
    /// The app code as the receipt row spells it: what its manifest and object keys say.
    pub recorded_app_code: String,
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
    /// How the batch's objects are protected and stored, as recorded (migration 6).
    pub protection: Protection,
    /// Set once `compact` replaced the member rows of its purged rows by a digest.
    pub compaction: Option<Compaction>,
    /// [`crate::model::format::members_proof`] of the batch's rows (receipts recorded since migration 8).
    pub members_proof: Option<String>,
    /// What the store reported of the three objects when they were read back (migration 8).
    pub stored: StoredAs,
    /// Its place in its app's chain: seq and link (migration 10; none until linked).
    pub chain: Option<(u64, String)>,
    /// When `verify` last read its objects in full and found them whole, and how (migration 10).
    pub full_verified: Option<(i64, String)>,
    /// Its leaf in its app's log (migration 13; none until an archive run appended it).
    pub log_index: Option<u64>,
}

impl StoredReceipt {
    /// The receipt as read for one of `apps` (their one spellings): `app_code` becomes the app's
    /// spelling — exactly, else the one it is a spelling of — so that member rows, which
    /// migration 9 keyed by the app's one spelling, are found under it. A receipt of none of
    /// them (a scope without apps) keeps its own.
    fn of_app(mut self, apps: &[String]) -> StoredReceipt {
        let app = apps
            .iter()
            .find(|a| **a == self.recorded_app_code)
            .or_else(|| {
                apps.iter()
                    .find(|a| crate::model::appcode::same_app(a, &self.recorded_app_code))
            });
        if let Some(app) = app {
            self.app_code = app.clone();
        }
        self
    }
}

/// What identified each of a batch's objects in the store when it was read back (the manifest's
/// and `_SUCCESS`'s version ids are not kept: the data object's is what matters).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredAs {
    pub data: crate::model::format::Identity,
    pub manifest: crate::model::format::Identity,
    pub success: crate::model::format::Identity,
}

/// What a compacted receipt keeps of its members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compaction {
    /// Every `(event_id, updated_at_ms)` the data object holds, as a digest.
    pub digest: MembersDigest,
    pub at_ms: i64,
    /// Member rows deleted (rows still in the source table keep theirs).
    pub member_rows: u64,
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
    /// Only receipts `compact` may work on: fully purged at or before this instant, not
    /// restored into the source, not compacted yet.
    pub compactable_purged_before: Option<i64>,
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

/// An app's receipts summed up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct ReceiptTotals {
    pub receipts: i64,
    pub archived_rows: i64,
    pub awaiting_purge_rows: i64,
    pub superseded_rows: i64,
    pub restored_batches: i64,
    pub compacted_receipts: i64,
    pub compacted_member_rows: i64,
}

/// The receipts table of one outbox table.
#[derive(Debug, Clone)]
pub struct Receipts {
    spec: &'static TableSpec,
}

impl Receipts {
    pub fn new(spec: &'static TableSpec) -> Receipts {
        Receipts { spec }
    }

    fn table(&self) -> String {
        self.spec.receipts_table()
    }

    /// The resume cursor: the greatest `(last_updated_at_ms, last_event_id)` among the app's
    /// VERIFIED receipts, by the database's ordering, on the cursor index.
    pub async fn latest_cursor(
        &self,
        pool: &MySqlPool,
        app: &str,
    ) -> Result<Option<Cursor>, DbError> {
        let sql = format!(
            "SELECT last_updated_at_ms, last_event_id FROM {} FORCE INDEX ({}) \
             WHERE app_code = ? AND state = ? ORDER BY last_updated_at_ms DESC, last_event_id DESC LIMIT 1",
            self.table(),
            self.spec.cursor_index()
        );
        let row: Option<(i64, String)> = sqlx::query_as(AssertSqlSafe(sql))
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

    /// Whether some VERIFIED receipt of the app reaches as far as `last` (the cursor is at or
    /// beyond it), asked through `executor`.
    pub async fn reaches<'e, E>(
        &self,
        executor: E,
        app: &str,
        last: &Cursor,
    ) -> Result<bool, DbError>
    where
        E: sqlx::Executor<'e, Database = MySql>,
    {
        let sql = format!(
            "SELECT 1 FROM {} FORCE INDEX ({}) WHERE app_code = ? AND state = ? \
             AND (last_updated_at_ms > ? OR (last_updated_at_ms = ? AND last_event_id >= ?)) LIMIT 1",
            self.table(),
            self.spec.cursor_index()
        );
        let reached: Option<i32> = sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(app)
            .bind(STATE_VERIFIED)
            .bind(last.updated_at_ms)
            .bind(last.updated_at_ms)
            .bind(&last.event_id)
            .fetch_optional(executor)
            .await
            .context(|| format!("comparing a batch of app {app} with the cursor"))?;
        Ok(reached.is_some())
    }

    /// Counts `n` more of a batch's rows as superseded by a later batch.
    pub async fn add_superseded<'e, E>(
        &self,
        executor: E,
        app: &str,
        batch_id: &str,
        n: i64,
    ) -> Result<(), DbError>
    where
        E: sqlx::Executor<'e, Database = MySql>,
    {
        let sql = format!(
            "UPDATE {} SET superseded_rows = superseded_rows + ? WHERE app_code = ? AND batch_id = ?",
            self.table()
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(n)
            .bind(app)
            .bind(batch_id)
            .execute(executor)
            .await
            .context(|| format!("counting superseded rows of batch {batch_id}"))?;
        Ok(())
    }

    /// The state of the receipt for this batch id, if one exists already (any state: this
    /// tool writes only VERIFIED, an operator may have set another).
    pub async fn state_of(
        &self,
        pool: &MySqlPool,
        app: &str,
        batch_id: &str,
    ) -> Result<Option<String>, DbError> {
        let sql = format!(
            "SELECT CAST(state AS CHAR) FROM {} WHERE app_code = ? AND batch_id = ?",
            self.table()
        );
        sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(app)
            .bind(batch_id)
            .fetch_optional(pool)
            .await
            .context(|| format!("looking up receipt {batch_id}"))
    }

    /// An app's receipts in a state other than VERIFIED — set by hand: this tool writes no
    /// other — as `(batch_id, state)`: one range of the cursor index per state (`state < ?`
    /// and `state > ?`), so the cost is theirs, not the archive's.
    pub async fn not_verified(
        &self,
        pool: &MySqlPool,
        app: &str,
    ) -> Result<Vec<(String, String)>, DbError> {
        let sql = format!(
            "SELECT CAST(batch_id AS CHAR), CAST(state AS CHAR) FROM {} FORCE INDEX ({}) \
             WHERE app_code = ? AND (state < ? OR state > ?) ORDER BY batch_id LIMIT 1000",
            self.table(),
            self.spec.cursor_index()
        );
        sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(STATE_VERIFIED)
            .bind(STATE_VERIFIED)
            .fetch_all(pool)
            .await
            .context(|| format!("looking for receipts of app {app} not VERIFIED"))
    }

    /// The VERIFIED receipts in scope, by app and cursor: every one (small scopes, tests).
    pub async fn list(
        &self,
        pool: &MySqlPool,
        scope: &ReceiptScope,
    ) -> Result<Vec<StoredReceipt>, DbError> {
        use futures_util::TryStreamExt;
        self.stream(pool, scope.clone()).try_collect().await
    }

    /// The VERIFIED receipts in scope as a stream, a page of `RECEIPT_PAGE` at a time, by app
    /// and cursor: memory is one page, whatever the archive's size.
    pub fn stream<'a>(
        &'a self,
        pool: &'a MySqlPool,
        scope: ReceiptScope,
    ) -> impl futures_util::Stream<Item = Result<StoredReceipt, DbError>> + Send + 'a {
        self.stream_in_pages(pool, scope, RECEIPT_PAGE)
    }

    /// [`Receipts::stream`] with pages of `page` receipts.
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

    /// The rows of an app's receipts that purge leaves to `--grace` — not purged, not restored,
    /// verified after `verified_after_ms` — and the earliest of those receipts' verification.
    pub async fn in_grace(
        &self,
        pool: &MySqlPool,
        app: &str,
        verified_after_ms: i64,
    ) -> Result<(u64, Option<i64>), DbError> {
        let sql = format!(
            "SELECT CAST(COALESCE(SUM(GREATEST(row_count - purged_rows - superseded_rows, 0)), 0) AS SIGNED), \
             MIN(verified_at_ms) FROM {} WHERE app_code = ? AND state = ? AND purged_at_ms IS NULL \
             AND restored_at_ms IS NULL AND verified_at_ms > ?",
            self.table()
        );
        let (rows, first): (i64, Option<i64>) = sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(STATE_VERIFIED)
            .bind(verified_after_ms)
            .fetch_one(pool)
            .await
            .context(|| format!("counting the rows of app {app} in --grace"))?;
        Ok((rows.max(0) as u64, first))
    }

    /// Of `batch_ids`, those no VERIFIED receipt has (a typo, another table's batch).
    pub async fn unknown_batch_ids(
        &self,
        pool: &MySqlPool,
        batch_ids: &[String],
    ) -> Result<Vec<String>, DbError> {
        let mut unknown = Vec::new();
        for id in batch_ids {
            let sql = format!(
                "SELECT COUNT(*) FROM {} WHERE batch_id = ? AND state = ?",
                self.table()
            );
            let n: i64 = sqlx::query_scalar(AssertSqlSafe(sql))
                .bind(id)
                .bind(STATE_VERIFIED)
                .fetch_one(pool)
                .await
                .context(|| format!("looking up batch {id}"))?;
            if n == 0 {
                unknown.push(id.clone());
            }
        }
        Ok(unknown)
    }

    /// The VERIFIED receipt of `batch_id` of `app`, as it is now.
    pub async fn get(
        &self,
        pool: &MySqlPool,
        app: &str,
        batch_id: &str,
    ) -> Result<Option<StoredReceipt>, DbError> {
        let scope = ReceiptScope {
            apps: vec![app.to_string()],
            batch_ids: vec![batch_id.to_string()],
            ..ReceiptScope::default()
        };
        Ok(self.page(pool, &scope, None, 1).await?.pop())
    }

    /// One page of the receipts in scope after `after`, by app and cursor.
    pub async fn page(
        &self,
        pool: &MySqlPool,
        scope: &ReceiptScope,
        after: Option<&Position>,
        limit: u32,
    ) -> Result<Vec<StoredReceipt>, DbError> {
        let mut qb =
            QueryBuilder::<MySql>::new(format!("SELECT * FROM {} WHERE state = ", self.table()));
        qb.push_bind(STATE_VERIFIED);
        push_scope(&mut qb, scope);
        if let Some(p) = after {
            qb.push(" AND (app_code > ")
                .push_bind(&p.app_code)
                .push(" OR (app_code = ")
                .push_bind(&p.app_code)
                .push(" AND (last_updated_at_ms > ")
                .push_bind(p.last.updated_at_ms)
                .push(" OR (last_updated_at_ms = ")
                .push_bind(p.last.updated_at_ms)
                .push(" AND last_event_id > ")
                .push_bind(&p.last.event_id)
                .push("))))");
        }
        qb.push(" ORDER BY app_code, last_updated_at_ms, last_event_id LIMIT ")
            .push_bind(limit);
        let rows = qb
            .build()
            .fetch_all(pool)
            .await
            .context(|| "listing receipts".into())?;
        rows.iter()
            .map(|row| decode(self.spec, row).map(|r| r.of_app(&scope.apps)))
            .collect::<Result<_, sqlx::Error>>()
            .context(|| "decoding a receipt".into())
    }

    /// Receipts of an app by `query` (its `?`s bound to `app` and then `binds`), decoded for it.
    async fn of_app_where(
        &self,
        pool: &MySqlPool,
        app: &str,
        query: &str,
        binds: &[i64],
        what: &str,
    ) -> Result<Vec<StoredReceipt>, DbError> {
        let sql = format!(
            "SELECT * FROM {} WHERE app_code = ? AND {query}",
            self.table()
        );
        let mut q = sqlx::query(AssertSqlSafe(sql)).bind(app);
        for b in binds {
            q = q.bind(*b);
        }
        let rows = q
            .fetch_all(pool)
            .await
            .context(|| format!("reading {what} of app {app}"))?;
        let apps = [app.to_string()];
        rows.iter()
            .map(|row| decode(self.spec, row).map(|r| r.of_app(&apps)))
            .collect::<Result<_, sqlx::Error>>()
            .context(|| "decoding a receipt".into())
    }

    /// One page of an app's logged receipts (any state), by leaf from `from` on.
    pub async fn log_page(
        &self,
        pool: &MySqlPool,
        app: &str,
        from: u64,
        limit: u32,
    ) -> Result<Vec<StoredReceipt>, DbError> {
        self.of_app_where(
            pool,
            app,
            "log_index >= ? ORDER BY log_index LIMIT ?",
            &[from as i64, i64::from(limit)],
            "the log",
        )
        .await
    }

    /// The app's receipt at leaf `index` of its log, if one is.
    pub async fn at_leaf(
        &self,
        pool: &MySqlPool,
        app: &str,
        index: u64,
    ) -> Result<Option<StoredReceipt>, DbError> {
        Ok(self
            .of_app_where(pool, app, "log_index = ?", &[index as i64], "a leaf")
            .await?
            .pop())
    }

    /// Up to `limit` of an app's receipts not in its log yet, by chain seq after `after_seq`.
    pub async fn unlogged(
        &self,
        pool: &MySqlPool,
        app: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<StoredReceipt>, DbError> {
        self.of_app_where(
            pool,
            app,
            "chain_seq > ? AND log_index IS NULL ORDER BY chain_seq LIMIT ?",
            &[after_seq as i64, i64::from(limit)],
            "the receipts not logged yet",
        )
        .await
    }

    /// An app's receipts recorded in `[from_ms, until_ms)`, by leaf (unlogged ones last).
    pub async fn recorded_in(
        &self,
        pool: &MySqlPool,
        app: &str,
        from_ms: i64,
        until_ms: i64,
    ) -> Result<Vec<StoredReceipt>, DbError> {
        self.of_app_where(
            pool,
            app,
            "verified_at_ms >= ? AND verified_at_ms < ? ORDER BY log_index IS NULL, log_index, chain_seq",
            &[from_ms, until_ms],
            "the receipts of the period",
        )
        .await
    }

    /// The leaf of the app's last logged receipt recorded before `until_ms` (leaves are given
    /// in the order receipts are recorded): read backwards on the recorded key, one row.
    pub async fn last_leaf_before(
        &self,
        pool: &MySqlPool,
        app: &str,
        until_ms: i64,
    ) -> Result<Option<u64>, DbError> {
        let leaf: Option<Option<i64>> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT log_index FROM {} WHERE app_code = ? AND verified_at_ms < ? AND log_index IS NOT NULL \
             ORDER BY verified_at_ms DESC LIMIT 1",
            self.table()
        )))
        .bind(app)
        .bind(until_ms)
        .fetch_optional(pool)
        .await
        .context(|| format!("reading app {app}'s log at the period's end"))?;
        Ok(leaf.flatten().map(|i| i.max(0) as u64))
    }

    /// The first `n` receipts, by app and cursor.
    pub async fn first(&self, pool: &MySqlPool, n: u32) -> Result<Vec<StoredReceipt>, DbError> {
        self.page(pool, &ReceiptScope::default(), None, n).await
    }

    /// How many receipts are in scope (for a progress display).
    pub async fn count(&self, pool: &MySqlPool, scope: &ReceiptScope) -> Result<u64, DbError> {
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "SELECT COUNT(*) FROM {} WHERE state = ",
            self.table()
        ));
        qb.push_bind(STATE_VERIFIED);
        push_scope(&mut qb, scope);
        let n: i64 = qb
            .build_query_scalar()
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
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "SELECT DISTINCT app_code FROM {} WHERE state = ",
            self.table()
        ));
        qb.push_bind(STATE_VERIFIED);
        push_scope(&mut qb, scope);
        qb.push(" ORDER BY app_code");
        qb.build_query_scalar()
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
             CAST(COUNT(restored_at_ms) AS SIGNED) AS restored_batches, \
             CAST(COUNT(compacted_at_ms) AS SIGNED) AS compacted_receipts, \
             CAST(COALESCE(SUM(compacted_member_rows), 0) AS SIGNED) AS compacted_member_rows \
             FROM {} WHERE app_code = ? AND state = ?",
            self.table()
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
        super::distinct_by_dives(pool, &self.table(), "app_code")
            .await
            .context(|| "listing the apps with receipts".into())
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
            self.table(),
            if include_restored { "" } else { " AND restored_at_ms IS NULL" }
        );
        sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(STATE_VERIFIED)
            .fetch_all(pool)
            .await
            .context(|| "listing apps with receipts to purge".into())
    }

    /// Receipts of an app that purge leaves alone because they were restored into the source.
    pub async fn restored_unpurged(&self, pool: &MySqlPool, app: &str) -> Result<u64, DbError> {
        let sql = format!(
            "SELECT COUNT(*) FROM {} WHERE app_code = ? AND state = ? AND purged_at_ms IS NULL AND restored_at_ms IS NOT NULL",
            self.table()
        );
        let n: i64 = sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(app)
            .bind(STATE_VERIFIED)
            .fetch_one(pool)
            .await
            .context(|| format!("counting restored receipts of app {app}"))?;
        Ok(n as u64)
    }
}

/// Appends a scope's conditions (after `state = ?`).
fn push_scope(qb: &mut QueryBuilder<MySql>, scope: &ReceiptScope) {
    push_in(qb, "app_code", &scope.apps);
    push_in(qb, "batch_id", &scope.batch_ids);
    if let Some(from) = scope.from_ms {
        qb.push(" AND last_updated_at_ms >= ").push_bind(from);
    }
    if let Some(to) = scope.to_ms {
        qb.push(" AND first_updated_at_ms < ").push_bind(to);
    }
    if let Some(before) = scope.compactable_purged_before {
        qb.push(" AND purged_at_ms IS NOT NULL AND purged_at_ms <= ")
            .push_bind(before)
            .push(" AND restored_at_ms IS NULL AND compacted_at_ms IS NULL");
    }
    if let Some(before) = scope.unpurged_verified_before {
        qb.push(" AND purged_at_ms IS NULL AND verified_at_ms <= ")
            .push_bind(before);
        if !scope.include_restored {
            qb.push(" AND restored_at_ms IS NULL");
        }
    }
}

/// ` AND {column} IN (…)` over `values`; nothing when there are none.
fn push_in(qb: &mut QueryBuilder<MySql>, column: &str, values: &[String]) {
    if values.is_empty() {
        return;
    }
    qb.push(format!(" AND {column} IN ("));
    let mut separated = qb.separated(", ");
    for value in values {
        separated.push_bind(value.as_str());
    }
    qb.push(")");
}

/// A receipt row, read by column name.
fn decode(spec: &TableSpec, row: &MySqlRow) -> Result<StoredReceipt, sqlx::Error> {
    let text = |c: &str| row.try_get::<String, _>(c);
    let int = |c: &str| row.try_get::<i64, _>(c);
    let number = |c: &str| -> Result<u64, sqlx::Error> {
        let value = text(c)?;
        value.parse().map_err(|_| {
            sqlx::Error::Decode(format!("{c} {value:?} is not an unsigned decimal").into())
        })
    };
    let mut totals = Vec::new();
    for total in spec.totals {
        let value = text(total.field)?;
        let parsed = match total.kind {
            TotalKind::Sum => TotalValue::Sum(value.parse::<i128>().map_err(|_| {
                sqlx::Error::Decode(format!("{} {value:?} is not a decimal", total.field).into())
            })?),
            TotalKind::Sha256 => TotalValue::Sha256(value),
        };
        totals.push((total.field, parsed));
    }
    let cursor = |at: &str, id: &str| -> Result<Cursor, sqlx::Error> {
        Ok(Cursor {
            updated_at_ms: int(at)?,
            event_id: text(id)?,
        })
    };
    Ok(StoredReceipt {
        app_code: text("app_code")?,
        recorded_app_code: text("app_code")?,
        batch_id: text("batch_id")?,
        keys: ObjectKeys {
            data: text("data_object_key")?,
            manifest: text("manifest_object_key")?,
            success: text("success_object_key")?,
        },
        content: ContentFacts {
            row_count: int("row_count")? as u64,
            first: cursor("first_updated_at_ms", "first_event_id")?,
            last: cursor("last_updated_at_ms", "last_event_id")?,
            min_created_at_ms: int("min_created_at_ms")?,
            max_created_at_ms: int("max_created_at_ms")?,
            totals,
            ndjson_sha256: text("ndjson_sha256")?,
            uncompressed_bytes: int("uncompressed_bytes")? as u64,
        },
        data: ObjectDigest {
            sha256: text("gzip_sha256")?,
            crc64: number("data_crc64")?,
            size: int("compressed_bytes")? as u64,
        },
        manifest_crc64: number("manifest_crc64")?,
        success_crc64: number("success_crc64")?,
        manifest_sha256: text("manifest_sha256")?,
        verified_at_ms: int("verified_at_ms")?,
        data_crc64nvme: match row.try_get::<Option<String>, _>("data_crc64nvme")? {
            None => None,
            Some(_) => Some(number("data_crc64nvme")?),
        },
        restored_at_ms: row.try_get("restored_at_ms")?,
        protection: protection(row)?,
        compaction: compaction(row)?,
        members_proof: row.try_get("members_proof_sha256")?,
        stored: StoredAs {
            data: crate::model::format::Identity {
                etag: row.try_get("data_etag")?,
                version_id: row.try_get("data_version_id")?,
            },
            manifest: crate::model::format::Identity {
                etag: row.try_get("manifest_etag")?,
                version_id: None,
            },
            success: crate::model::format::Identity {
                etag: row.try_get("success_etag")?,
                version_id: None,
            },
        },
        chain: chain_place(row)?,
        full_verified: full_verification(row)?,
        log_index: row
            .try_get::<Option<i64>, _>("log_index")?
            .map(|i| i.max(0) as u64),
    })
}

/// A receipt's place in its app's chain (migration 10).
fn chain_place(row: &MySqlRow) -> Result<Option<(u64, String)>, sqlx::Error> {
    Ok(
        match (
            row.try_get::<Option<i64>, _>("chain_seq")?,
            row.try_get::<Option<String>, _>("chain_link")?,
        ) {
            (Some(seq), Some(link)) => Some((seq.max(0) as u64, link)),
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
