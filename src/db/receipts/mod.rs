//! The receipts table (SPEC §3): one row per verified batch. The resume cursor, the receipts a
//! command works on — listed a page at a time in (app, cursor) order, so no command holds a whole
//! archive's receipts — and their sums for `status`. Recording a receipt is [`super::record`]'s.

mod life;
mod log;
mod row;

use sqlx::{AssertSqlSafe, MySql, MySqlPool, QueryBuilder};

pub(crate) use row::{columns, insert, keys, CHAIN_COLUMNS, COLUMN_SET_COLUMNS, FINDINGS_COLUMNS};

use super::{Context, DbError};
use crate::model::batch_columns::{BatchColumns, SharedColumns};
use crate::model::format::Cursor;
use crate::model::receipt::{Receipt, STATE_VERIFIED};
use crate::model::table::TableSpec;

/// A receipt's lifecycle as conditions on its row: the one place each rule is written, used by
/// every query that asks it (here, and compaction's transaction).
pub(crate) mod rule {
    /// Purge still has work on it: VERIFIED (the one state this tool writes) and not marked
    /// purged — restored into the source or not.
    pub(crate) const UNPURGED: &str = "state = 'VERIFIED' AND purged_at_ms IS NULL";
    /// Awaiting purge: unpurged, and not restored into the source since.
    pub(crate) const AWAITING_PURGE: &str =
        "state = 'VERIFIED' AND purged_at_ms IS NULL AND restored_at_ms IS NULL";
    /// Restored into the source and not purged since: purge leaves it alone unless asked to.
    pub(crate) const RESTORED_UNPURGED: &str =
        "state = 'VERIFIED' AND purged_at_ms IS NULL AND restored_at_ms IS NOT NULL";
    /// Compactable: fully purged, not restored since, not compacted yet.
    pub(crate) const COMPACTABLE: &str = "state = 'VERIFIED' AND purged_at_ms IS NOT NULL \
         AND restored_at_ms IS NULL AND compacted_at_ms IS NULL";
    /// Of a receipt purge has not finished, its rows purge may still delete: less what it
    /// deleted, and the older versions a later batch superseded (purged through that batch).
    pub(crate) const ROWS_LEFT: &str = "GREATEST(row_count - purged_rows - superseded_rows, 0)";
}

/// Receipts are listed in pages of this many.
const RECEIPT_PAGE: u32 = 500;

/// The receipt as read for one of `apps` (their one spellings): `app_code` becomes the app's
/// spelling — exactly, else the one it is a spelling of — so that member rows, which migration 9
/// keyed by the app's one spelling, are found under it. A receipt of none of them (a scope
/// without apps) keeps its own.
fn of_app(mut receipt: Receipt, apps: &[String]) -> Receipt {
    let app = apps
        .iter()
        .find(|a| **a == receipt.recorded_app_code)
        .or_else(|| {
            apps.iter()
                .find(|a| crate::model::appcode::same_app(a, &receipt.recorded_app_code))
        });
    if let Some(app) = app {
        receipt.app_code = app.clone();
    }
    receipt
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
    fn of(receipt: &Receipt) -> Position {
        Position {
            app_code: receipt.app_code.clone(),
            last: receipt.content.last.clone(),
        }
    }
}

/// An app's receipts summed up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct ReceiptTotals {
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
    pool: MySqlPool,
    /// The batches' column lists read so far, by SHA-256 (a table has a few over its years).
    sets: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, SharedColumns>>>,
}

impl Receipts {
    pub fn new(pool: &MySqlPool, spec: &'static TableSpec) -> Receipts {
        Receipts {
            pool: pool.clone(),
            spec,
            sets: Default::default(),
        }
    }

    /// Receipts as their rows decode, each given the column list it names (read from the
    /// column sets table the first time this repository meets it).
    async fn with_columns(
        &self,
        decoded: Vec<(Receipt, Option<String>)>,
    ) -> Result<Vec<Receipt>, DbError> {
        let missing: Vec<String> = {
            let sets = self.sets.lock().expect("not poisoned");
            let mut missing: Vec<String> = decoded
                .iter()
                .filter_map(|(_, sha)| sha.clone())
                .filter(|sha| !sets.contains_key(sha))
                .collect();
            missing.sort();
            missing.dedup();
            missing
        };
        if !missing.is_empty() {
            let mut qb = QueryBuilder::<MySql>::new(format!(
                "SELECT CAST(sha256 AS CHAR), columns_json FROM {} WHERE sha256 IN (",
                self.spec.column_sets_table()
            ));
            let mut list = qb.separated(", ");
            for sha in &missing {
                list.push_bind(sha);
            }
            qb.push(")");
            let rows: Vec<(String, String)> = qb
                .build_query_as()
                .fetch_all(&self.pool)
                .await
                .context(|| "reading the batches' column lists".into())?;
            let mut sets = self.sets.lock().expect("not poisoned");
            for (sha, json) in rows {
                let set = BatchColumns::parse(&json).map_err(|e| DbError::OwnedTable {
                    table: self.spec.column_sets_table(),
                    problem: format!("holds list {sha}, which cannot be read: {e}"),
                    table_flag: self.spec.cli_flag(),
                })?;
                sets.insert(sha, std::sync::Arc::new(set));
            }
        }
        let sets = self.sets.lock().expect("not poisoned");
        decoded
            .into_iter()
            .map(|(receipt, sha)| match sha {
                None => Ok(receipt),
                Some(sha) => match sets.get(&sha) {
                    Some(set) => Ok(receipt.with_columns(Some(set.clone()))),
                    None => Err(DbError::OwnedTable {
                        table: self.spec.column_sets_table(),
                        problem: format!(
                            "has no column list {sha}, which receipt {} names",
                            receipt.batch_id
                        ),
                        table_flag: self.spec.cli_flag(),
                    }),
                },
            })
            .collect()
    }

    fn table(&self) -> String {
        self.spec.receipts_table()
    }

    /// The resume cursor: the greatest `(last_updated_at_ms, last_event_id)` among the app's
    /// VERIFIED receipts, by the database's ordering, on the cursor index.
    pub async fn latest_cursor(&self, app: &str) -> Result<Option<Cursor>, DbError> {
        let pool = &self.pool;
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
    pub(crate) async fn reaches<'e, E>(
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
    pub(crate) async fn add_superseded<'e, E>(
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
    pub(crate) async fn state_of(
        &self,
        app: &str,
        batch_id: &str,
    ) -> Result<Option<String>, DbError> {
        let pool = &self.pool;
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
    pub(crate) async fn not_verified(&self, app: &str) -> Result<Vec<(String, String)>, DbError> {
        let pool = &self.pool;
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
    pub async fn list(&self, scope: &ReceiptScope) -> Result<Vec<Receipt>, DbError> {
        use futures_util::TryStreamExt;
        self.stream(scope.clone()).try_collect().await
    }

    /// The VERIFIED receipts in scope as a stream, a page of `RECEIPT_PAGE` at a time, by app
    /// and cursor: memory is one page, whatever the archive's size.
    pub fn stream<'a>(
        &'a self,
        scope: ReceiptScope,
    ) -> impl futures_util::Stream<Item = Result<Receipt, DbError>> + Send + 'a {
        self.stream_in_pages(scope, RECEIPT_PAGE)
    }

    /// [`Receipts::stream`] with pages of `page` receipts.
    pub fn stream_in_pages<'a>(
        &'a self,
        scope: ReceiptScope,
        page: u32,
    ) -> impl futures_util::Stream<Item = Result<Receipt, DbError>> + Send + 'a {
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
                    let found = self.page(&scope, from.as_ref(), page).await?;
                    after = (found.len() == page as usize).then(|| found.last().map(Position::of));
                    buffered.extend(found);
                }
            },
        )
    }

    /// The rows of an app's receipts that purge leaves to `--grace` — not purged, not restored,
    /// verified after `verified_after_ms` — and the earliest of those receipts' verification.
    pub(crate) async fn in_grace(
        &self,
        app: &str,
        verified_after_ms: i64,
    ) -> Result<(u64, Option<i64>), DbError> {
        let pool = &self.pool;
        let sql = format!(
            "SELECT CAST(COALESCE(SUM({}), 0) AS SIGNED), MIN(verified_at_ms) FROM {} \
             WHERE app_code = ? AND {} AND verified_at_ms > ?",
            rule::ROWS_LEFT,
            self.table(),
            rule::AWAITING_PURGE
        );
        let (rows, first): (i64, Option<i64>) = sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(verified_after_ms)
            .fetch_one(pool)
            .await
            .context(|| format!("counting the rows of app {app} in --grace"))?;
        Ok((rows.max(0) as u64, first))
    }

    /// Of `batch_ids`, those no VERIFIED receipt has (a typo, another table's batch).
    pub(crate) async fn unknown_batch_ids(
        &self,
        batch_ids: &[String],
    ) -> Result<Vec<String>, DbError> {
        let pool = &self.pool;
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
    pub async fn get(&self, app: &str, batch_id: &str) -> Result<Option<Receipt>, DbError> {
        let scope = ReceiptScope {
            apps: vec![app.to_string()],
            batch_ids: vec![batch_id.to_string()],
            ..ReceiptScope::default()
        };
        Ok(self.page(&scope, None, 1).await?.pop())
    }

    /// One page of the receipts in scope after `after`, by app and cursor.
    pub async fn page(
        &self,
        scope: &ReceiptScope,
        after: Option<&Position>,
        limit: u32,
    ) -> Result<Vec<Receipt>, DbError> {
        let pool = &self.pool;
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
        let decoded = rows
            .iter()
            .map(|row| row::decode(self.spec, row).map(|(r, sha)| (of_app(r, &scope.apps), sha)))
            .collect::<Result<_, sqlx::Error>>()
            .context(|| "decoding a receipt".into())?;
        self.with_columns(decoded).await
    }

    /// Receipts of an app by `query` (its `?`s bound to `app` and then `binds`), decoded for it.
    async fn of_app_where(
        &self,
        app: &str,
        query: &str,
        binds: &[i64],
        what: &str,
    ) -> Result<Vec<Receipt>, DbError> {
        let pool = &self.pool;
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
        let decoded = rows
            .iter()
            .map(|row| row::decode(self.spec, row).map(|(r, sha)| (of_app(r, &apps), sha)))
            .collect::<Result<_, sqlx::Error>>()
            .context(|| "decoding a receipt".into())?;
        self.with_columns(decoded).await
    }

    /// One page of an app's logged receipts (any state), by leaf from `from` on.
    pub(crate) async fn log_page(
        &self,
        app: &str,
        from: u64,
        limit: u32,
    ) -> Result<Vec<Receipt>, DbError> {
        self.of_app_where(
            app,
            "log_index >= ? ORDER BY log_index LIMIT ?",
            &[from as i64, i64::from(limit)],
            "the log",
        )
        .await
    }

    /// Up to `limit` of an app's receipts not in its log yet, by chain seq after `after_seq`.
    pub(crate) async fn unlogged(
        &self,
        app: &str,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<Receipt>, DbError> {
        self.of_app_where(
            app,
            "chain_seq > ? AND log_index IS NULL ORDER BY chain_seq LIMIT ?",
            &[after_seq as i64, i64::from(limit)],
            "the receipts not logged yet",
        )
        .await
    }

    /// An app's receipts recorded in `[from_ms, until_ms)`, by leaf (unlogged ones last).
    pub(crate) async fn recorded_in(
        &self,
        app: &str,
        from_ms: i64,
        until_ms: i64,
    ) -> Result<Vec<Receipt>, DbError> {
        self.of_app_where(
            app,
            "verified_at_ms >= ? AND verified_at_ms < ? ORDER BY log_index IS NULL, log_index, chain_seq",
            &[from_ms, until_ms],
            "the receipts of the period",
        )
        .await
    }

    /// The leaf of the app's last logged receipt recorded before `until_ms` (leaves are given
    /// in the order receipts are recorded): read backwards on the recorded key, one row.
    pub(crate) async fn last_leaf_before(
        &self,
        app: &str,
        until_ms: i64,
    ) -> Result<Option<u64>, DbError> {
        let pool = &self.pool;
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
    pub async fn first(&self, n: u32) -> Result<Vec<Receipt>, DbError> {
        self.page(&ReceiptScope::default(), None, n).await
    }

    /// How many receipts are in scope (for a progress display).
    pub async fn count(&self, scope: &ReceiptScope) -> Result<u64, DbError> {
        let pool = &self.pool;
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
    pub(crate) async fn apps_in(&self, scope: &ReceiptScope) -> Result<Vec<String>, DbError> {
        let pool = &self.pool;
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
    pub(crate) async fn totals(&self, app: &str) -> Result<ReceiptTotals, DbError> {
        let pool = &self.pool;
        // Awaiting purge: what purge may still delete of the receipts awaiting it.
        let sql = format!(
            "SELECT COUNT(*) AS receipts, CAST(COALESCE(SUM(row_count), 0) AS SIGNED) AS archived_rows, \
             CAST(COALESCE(SUM(CASE WHEN {} THEN {} ELSE 0 END), 0) AS SIGNED) AS awaiting_purge_rows, \
             CAST(COALESCE(SUM(superseded_rows), 0) AS SIGNED) AS superseded_rows, \
             CAST(COUNT(restored_at_ms) AS SIGNED) AS restored_batches, \
             CAST(COUNT(compacted_at_ms) AS SIGNED) AS compacted_receipts, \
             CAST(COALESCE(SUM(compacted_member_rows), 0) AS SIGNED) AS compacted_member_rows \
             FROM {} WHERE app_code = ? AND state = ?",
            rule::AWAITING_PURGE,
            rule::ROWS_LEFT,
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
    pub(crate) async fn apps_with_receipts(&self) -> Result<Vec<String>, DbError> {
        let pool = &self.pool;
        super::distinct_by_dives(pool, &self.table(), "app_code")
            .await
            .context(|| "listing the apps with receipts".into())
    }

    /// Apps that have receipts not yet fully purged (purge's `--all-apps`: an app whose rows are
    /// all gone from the source table may still have receipts to finish).
    pub(crate) async fn apps_with_unpurged(
        &self,
        include_restored: bool,
    ) -> Result<Vec<String>, DbError> {
        let pool = &self.pool;
        let sql = format!(
            "SELECT DISTINCT app_code FROM {} WHERE {} ORDER BY app_code",
            self.table(),
            match include_restored {
                true => rule::UNPURGED,
                false => rule::AWAITING_PURGE,
            }
        );
        sqlx::query_scalar(AssertSqlSafe(sql))
            .fetch_all(pool)
            .await
            .context(|| "listing apps with receipts to purge".into())
    }

    /// Receipts of an app that purge leaves alone because they were restored into the source.
    pub(crate) async fn restored_unpurged(&self, app: &str) -> Result<u64, DbError> {
        let pool = &self.pool;
        let sql = format!(
            "SELECT COUNT(*) FROM {} WHERE app_code = ? AND {}",
            self.table(),
            rule::RESTORED_UNPURGED
        );
        let n: i64 = sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(app)
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
        qb.push(format!(" AND {} AND purged_at_ms <= ", rule::COMPACTABLE))
            .push_bind(before);
    }
    if let Some(before) = scope.unpurged_verified_before {
        let rule = match scope.include_restored {
            true => rule::UNPURGED,
            false => rule::AWAITING_PURGE,
        };
        qb.push(format!(" AND {rule} AND verified_at_ms <= "))
            .push_bind(before);
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

#[cfg(test)]
mod tests {
    use super::rule;
    use crate::model::receipt::STATE_VERIFIED;

    /// Every lifecycle rule is of receipts in the one state this tool writes.
    #[test]
    fn every_rule_is_of_verified_receipts() {
        let verified = format!("state = '{STATE_VERIFIED}' AND ");
        for rule in [
            rule::UNPURGED,
            rule::AWAITING_PURGE,
            rule::RESTORED_UNPURGED,
            rule::COMPACTABLE,
        ] {
            assert!(rule.starts_with(&verified), "{rule}");
        }
    }
}
