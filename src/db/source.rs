//! Reading the source table: keyset pages of at most 500 delivered rows on the retention index,
//! ordered by the database as `(updated_at_ms, event_id)` — never re-sorted here — and the list
//! of apps, found by index dives rather than a scan.
//!
//! Each page is its own autocommit statement: no transaction on the source table stays open
//! while a batch is uploaded (SPEC §5.6).

use futures_util::StreamExt as _;
use sqlx::mysql::MySqlRow;
use sqlx::{AssertSqlSafe, MySql, MySqlPool, QueryBuilder, Row as _};
use tokio::sync::mpsc;

use super::members::Members;
use super::receipts::{ReceiptScope, Receipts};
use super::{Context, DbError};
use crate::failpoint::FailPoints;
use crate::model::batch::EncodedRow;
use crate::model::codec::{Row, ValueRef};
use crate::model::format::Cursor;
use crate::model::table::{Column, Kind, Layout, TableSpec};

/// The most rows one page query returns (SPEC §5.6).
const PAGE_ROWS: u32 = 500;

/// A page of the archive's scan holds about this many bytes of encoded rows at most: after each
/// page the next one's row limit is this over the rows' average size (at least one row, at most
/// [`PAGE_ROWS`]), so that a table of large rows (16 MiB envelopes) is read a few rows at a time
/// instead of 500 at once (three pages are in memory: the one being batched and two ahead).
const PAGE_BYTES: usize = 16 << 20;

/// The first page's row limit, before any row's size is known.
const FIRST_PAGE_ROWS: u32 = 8;

/// The next page's row limit after a page of `rows` rows and `bytes` bytes: sized to
/// [`PAGE_BYTES`], growing at most fourfold per page.
fn next_page_rows(current: u32, rows: usize, bytes: usize) -> u32 {
    if rows == 0 {
        return current;
    }
    let average = (bytes / rows).max(1);
    let fits = (PAGE_BYTES / average).max(1) as u64;
    fits.min(current as u64 * 4).min(PAGE_ROWS as u64) as u32
}

/// The source table as the archiver reads it: its page queries, built once (they run once per
/// page on the hot path).
#[derive(Debug, Clone)]
pub struct SourceTable {
    spec: &'static TableSpec,
    pool: MySqlPool,
    layout: Layout,
    first: String,
    after: String,
    keys_first: String,
    keys_after: String,
    count_first: String,
    count_after: String,
    oldest_first: String,
    oldest_after: String,
    members: Members,
    kept: super::kept::Kept,
}

impl SourceTable {
    /// The rows of `app` among `ids` (primary-key lookups; at most a few hundred ids at a time):
    /// each one's status, and — the database's comparisons, as archive makes them (event ids are
    /// never ordered in Rust) — whether it is delivered and whether it lies after `cursor`.
    pub(crate) async fn look_up(
        &self,
        app: &str,
        ids: &[String],
        delivered_status: &str,
        cursor: &Cursor,
    ) -> Result<Vec<LookedUp>, DbError> {
        let spec = self.spec;
        let mut qb = sqlx::QueryBuilder::<sqlx::MySql>::new(format!(
            "SELECT CAST({id} AS CHAR), CAST({status} AS CHAR), {updated}, {status} = ",
            id = spec.event_id,
            status = spec.status,
            updated = spec.updated_at_ms,
        ));
        qb.push_bind(delivered_status);
        qb.push(format!(", {updated} > ", updated = spec.updated_at_ms))
            .push_bind(cursor.updated_at_ms)
            .push(format!(" OR ({} = ", spec.updated_at_ms))
            .push_bind(cursor.updated_at_ms)
            .push(format!(" AND {} > ", spec.event_id))
            .push_bind(&cursor.event_id)
            .push(format!(") FROM {} WHERE {} = ", spec.name, spec.app_code))
            .push_bind(app)
            .push(format!(" AND {} IN (", spec.event_id));
        let mut listed = qb.separated(", ");
        for id in ids {
            listed.push_bind(id);
        }
        qb.push(")");
        let rows: Vec<(String, String, i64, bool, bool)> = qb
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .context(|| format!("looking up ids of app {app} in {}", spec.name))?;
        Ok(rows
            .into_iter()
            .map(
                |(event_id, status, updated_at_ms, delivered, after_cursor)| LookedUp {
                    event_id,
                    status,
                    updated_at_ms,
                    delivered,
                    after_cursor,
                },
            )
            .collect())
    }

    /// The `updated_at_ms` of row `event_id` of `app`, if the table holds it (one primary-key
    /// lookup).
    pub(crate) async fn updated_at_of(
        &self,
        app: &str,
        event_id: &str,
    ) -> Result<Option<i64>, DbError> {
        let spec = self.spec;
        let sql = format!(
            "SELECT {} FROM {} WHERE {} = ? AND {} = ?",
            spec.updated_at_ms, spec.name, spec.app_code, spec.event_id
        );
        sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(app)
            .bind(event_id)
            .fetch_optional(&self.pool)
            .await
            .context(|| format!("looking up event {event_id:?} in {}", spec.name))
    }

    /// Every app code present in the table, by repeated index dives on the primary key
    /// (`MIN(app_code) … WHERE app_code > ?`): cost grows with the number of apps, not of rows.
    pub(crate) async fn all_apps(&self) -> Result<Vec<String>, DbError> {
        let spec = self.spec;
        super::distinct_by_dives(&self.pool, spec.name, spec.app_code)
            .await
            .context(|| format!("listing the apps of {}", spec.name))
    }

    /// The table's pages, every row whole: `spec` is the table as the database holds it (every
    /// stored column, SPEC §4).
    pub fn new(pool: &MySqlPool, spec: &'static TableSpec) -> SourceTable {
        let (upd, id) = (spec.updated_at_ms, spec.event_id);
        let from = format!(
            "FROM {table} FORCE INDEX ({index}) WHERE {app} = ? AND {status} = ? AND {upd} < ?",
            table = spec.name,
            index = spec.retention_index,
            app = spec.app_code,
            status = spec.status,
        );
        // `upd >= ?` repeats the cursor's lower bound so both optimizers see a plain range on the
        // index; the OR form (not a row constructor) is what MySQL 8 and MariaDB both handle well.
        let after = format!(" AND {upd} >= ? AND ({upd} > ? OR ({upd} = ? AND {id} > ?))");
        let upto = format!(" AND ({upd} < ? OR ({upd} = ? AND {id} <= ?))");
        let order = format!(" ORDER BY {upd} ASC, {id} ASC LIMIT ?");
        let select = |what: &str, conditions: &str, order: &str| {
            format!("SELECT {what} {from}{conditions}{order}")
        };
        let list = spec.select_list();
        // Keys only (the retention index covers them): the straggler scan and the backlog.
        let keys = format!("{upd}, {id}");
        SourceTable {
            pool: pool.clone(),
            spec,
            first: select(&list, "", &order),
            after: select(&list, &after, &order),
            keys_first: select(&keys, &upto, &order),
            keys_after: select(&keys, &format!("{upto}{after}"), &order),
            count_first: select("COUNT(*)", "", ""),
            count_after: select("COUNT(*)", &after, ""),
            oldest_first: select(upd, "", &order),
            oldest_after: select(upd, &after, &order),
            members: Members::new(pool, spec),
            kept: super::kept::Kept::new(pool, spec),
            layout: spec.layout(),
        }
    }

    /// Delivered rows of `app` after `cursor` (from the start when `None`) and below `upper_ms`,
    /// encoded.
    pub async fn page(
        &self,
        app: &str,
        status: &str,
        after: Option<&Cursor>,
        upper_ms: i64,
        limit: u32,
    ) -> Result<Vec<EncodedRow>, DbError> {
        let pool = &self.pool;
        let limit = limit.min(PAGE_ROWS);
        let query = match after {
            None => sqlx::query(AssertSqlSafe(self.first.clone()))
                .bind(app)
                .bind(status)
                .bind(upper_ms)
                .bind(limit),
            Some(c) => sqlx::query(AssertSqlSafe(self.after.clone()))
                .bind(app)
                .bind(status)
                .bind(upper_ms)
                .bind(c.updated_at_ms)
                .bind(c.updated_at_ms)
                .bind(c.updated_at_ms)
                .bind(&c.event_id)
                .bind(limit),
        };
        let rows = query
            .fetch_all(pool)
            .await
            .context(|| format!("reading delivered rows of {} for app {app}", self.spec.name))?;
        self.encode(app, &rows)
    }

    /// Encodes rows of `app` straight from the protocol rows (no `String` per column), as the
    /// archive encodes them.
    pub(crate) fn encode(&self, app: &str, rows: &[MySqlRow]) -> Result<Vec<EncodedRow>, DbError> {
        encode_rows(self.spec, &self.layout, app, rows)
    }
}

/// Encodes rows of `app` (whose first columns are `spec`'s, in its order) as the archive encodes
/// them, straight from the protocol rows.
pub(crate) fn encode_rows(
    spec: &TableSpec,
    layout: &Layout,
    app: &str,
    rows: &[MySqlRow],
) -> Result<Vec<EncodedRow>, DbError> {
    let context = || format!("decoding a row of {} for app {app}", spec.name);
    rows.iter()
        .map(|r| {
            let values = values_of(spec, r).context(context)?;
            EncodedRow::of(spec, layout, app, &values)
                .map_err(|e| sqlx::Error::Decode(e.into()))
                .context(context)
        })
        .collect()
}

impl SourceTable {
    /// One page of the straggler scan: of the next ≤ 500 delivered rows after `after`, at or
    /// below `upto` and below `upper_ms`, those whose exact `(event_id, updated_at_ms)` no member
    /// row claims — a row never archived, or a member delivered again with a new `updated_at_ms`
    /// below the cursor (SPEC §5.10). Also returns where the scan stopped, or `None` when it has
    /// reached `upto`.
    pub async fn straggler_page(
        &self,
        app: &str,
        status: &str,
        upto: &Cursor,
        after: Option<&Cursor>,
        upper_ms: i64,
    ) -> Result<(Vec<Cursor>, Option<Cursor>), DbError> {
        let keys = self.key_page(app, status, upto, after, upper_ms).await?;
        if keys.is_empty() {
            return Ok((Vec::new(), None));
        }
        let owned = self
            .members
            .versions_among(app, keys.iter().map(|k| k.event_id.as_str()))
            .await?;
        let more = keys.len() == PAGE_ROWS as usize;
        let last = keys.last().cloned();
        let stragglers = keys
            .into_iter()
            .filter(|k| !owned.contains(&(k.event_id.clone(), k.updated_at_ms)))
            .collect();
        Ok((stragglers, if more { last } else { None }))
    }

    /// The full rows of `keys` that are still exactly these keys — delivered, below `upper_ms`,
    /// with this `(event_id, updated_at_ms)` — in the order of `keys` (cursor order, as the
    /// database gave them). A row delivered again since the
    /// key scan has another `updated_at_ms` and is left out: a straggler batch must never take a
    /// row from above the cursor (SPEC §5.10).
    pub async fn rows_by_keys(
        &self,
        app: &str,
        status: &str,
        upper_ms: i64,
        keys: &[Cursor],
    ) -> Result<Vec<EncodedRow>, DbError> {
        let pool = &self.pool;
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let spec = self.spec;
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "SELECT {list} FROM {table} WHERE {app_col} = ",
            list = spec.select_list(),
            table = spec.name,
            app_col = spec.app_code,
        ));
        qb.push_bind(app)
            .push(format!(" AND {} = ", spec.status))
            .push_bind(status)
            .push(format!(" AND {} < ", spec.updated_at_ms))
            .push_bind(upper_ms)
            .push(format!(" AND {} IN (", spec.event_id));
        let mut ids = qb.separated(", ");
        for k in keys {
            ids.push_bind(k.event_id.as_str());
        }
        qb.push(format!(
            ") AND ({}, {}) IN (",
            spec.event_id, spec.updated_at_ms
        ));
        let mut pairs = qb.separated(", ");
        for k in keys {
            pairs.push("(");
            pairs.push_bind_unseparated(k.event_id.as_str());
            pairs.push_unseparated(", ");
            pairs.push_bind_unseparated(k.updated_at_ms);
            pairs.push_unseparated(")");
        }
        qb.push(")");
        let query = qb.build();
        let rows = query
            .fetch_all(pool)
            .await
            .context(|| format!("reading straggler rows of app {app}"))?;
        // In the keys' order, which is the database's (the key scan ran on the retention
        // index). An ORDER BY here would be a filesort of whole rows — read by primary key on
        // any real table — and MySQL's sort buffer (256 KiB by default) cannot hold a row with
        // a large JSON value: error 1038, every run.
        let mut by_key: std::collections::HashMap<Cursor, EncodedRow> = self
            .encode(app, &rows)?
            .into_iter()
            .map(|r| (r.cursor(), r))
            .collect();
        Ok(keys.iter().filter_map(|k| by_key.remove(k)).collect())
    }

    /// One page of the rows purge kept ([`super::kept`]), as they are now: of the next ≤ 500
    /// marks after `after`, the rows still delivered below `upper_ms` at the marked version, in
    /// cursor order; and where the page ended, or `None` when the marks are done. A mark whose
    /// row is gone or at another version now is cleared: another batch archives that version
    /// as it comes (after the cursor, or a straggler), and a row deleted has nothing to keep.
    pub(crate) async fn kept_page(
        &self,
        app: &str,
        status: &str,
        upper_ms: i64,
        after: Option<&Cursor>,
    ) -> Result<(Vec<EncodedRow>, Option<Cursor>), DbError> {
        let keys = self.kept.page(app, after, PAGE_ROWS).await?;
        let Some(last) = keys.last().cloned() else {
            return Ok((Vec::new(), None));
        };
        let more = keys.len() == PAGE_ROWS as usize;
        let rows = self.rows_by_keys(app, status, upper_ms, &keys).await?;
        if rows.len() < keys.len() {
            let read: std::collections::HashSet<Cursor> = rows.iter().map(|r| r.cursor()).collect();
            let unread: Vec<String> = keys
                .iter()
                .filter(|k| !read.contains(k))
                .map(|k| k.event_id.clone())
                .collect();
            let now = self.versions_now(app, &unread).await?;
            let gone: Vec<&str> = keys
                .iter()
                .filter(|k| !read.contains(k))
                .filter(|k| now.get(&k.event_id) != Some(&k.updated_at_ms))
                .map(|k| k.event_id.as_str())
                .collect();
            self.kept.clear(&self.pool, app, &gone).await?;
        }
        Ok((rows, more.then_some(last)))
    }

    /// The `updated_at_ms` of each of these rows of `app` as the table holds them now, whatever
    /// their status (primary-key lookups).
    async fn versions_now(
        &self,
        app: &str,
        ids: &[String],
    ) -> Result<std::collections::HashMap<String, i64>, DbError> {
        if ids.is_empty() {
            return Ok(Default::default());
        }
        let spec = self.spec;
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "SELECT CAST({id} AS CHAR), {upd} FROM {table} WHERE {app_col} = ",
            id = spec.event_id,
            upd = spec.updated_at_ms,
            table = spec.name,
            app_col = spec.app_code,
        ));
        qb.push_bind(app)
            .push(format!(" AND {} IN (", spec.event_id));
        let mut list = qb.separated(", ");
        for id in ids {
            list.push_bind(id.as_str());
        }
        qb.push(")");
        let rows: Vec<(String, i64)> = qb
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .context(|| format!("reading the versions of kept rows of app {app}"))?;
        Ok(rows.into_iter().collect())
    }

    /// Every straggler of an app (keys only), up to `limit`; and whether there were more.
    ///
    /// The delivered rows at or below `upto` are walked in cursor order, a page of keys at a
    /// time, beside the app's receipts in the same order: a page's keys are looked up among the
    /// member rows of the batches whose ranges reach into it — each batch's member rows read
    /// once, as one range of the members table — and only the keys none of them holds are
    /// looked up by event id: rows in no batch's range (stragglers), and rows of a straggler
    /// batch, whose range lies across other batches'. Looking every key up by event id (one index
    /// dive each) cost the server 11 µs a row.
    pub async fn stragglers(
        &self,
        app: &str,
        status: &str,
        upto: &Cursor,
        upper_ms: i64,
        limit: usize,
    ) -> Result<(Vec<Cursor>, bool), DbError> {
        let receipts = Receipts::new(&self.pool, self.spec);
        let scope = ReceiptScope {
            apps: vec![app.to_string()],
            ..ReceiptScope::default()
        };
        let mut batches = Box::pin(receipts.stream(scope).peekable());
        let mut window = BatchWindow::default();
        let mut found = Vec::new();
        let mut after: Option<Cursor> = None;
        loop {
            let keys = self
                .key_page(app, status, upto, after.as_ref(), upper_ms)
                .await?;
            let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
                return Ok((found, false));
            };
            let (from_ms, to_ms) = (first.updated_at_ms, last.updated_at_ms);
            window.forget_before(from_ms);
            // Batches in cursor order: load those that begin by the page's end.
            while let Some(next) = batches.as_mut().peek().await {
                let begins = match next {
                    Ok(receipt) => receipt.content.first.updated_at_ms,
                    Err(_) => i64::MIN, // taken below, to be returned
                };
                if begins > to_ms {
                    break;
                }
                let receipt = batches.next().await.expect("peeked")?;
                if receipt.content.last.updated_at_ms >= from_ms {
                    let members = self.members.versions_of(app, &receipt.batch_id).await?;
                    window.load(receipt.content.last.updated_at_ms, members);
                }
            }
            let more = keys.len() == PAGE_ROWS as usize;
            after = more.then(|| last.clone());
            let unheld: Vec<Cursor> = keys.into_iter().filter(|k| !window.holds(k)).collect();
            if !unheld.is_empty() {
                let owned = self
                    .members
                    .versions_among(app, unheld.iter().map(|k| k.event_id.as_str()))
                    .await?;
                found.extend(
                    unheld
                        .into_iter()
                        .filter(|k| !owned.contains(&(k.event_id.clone(), k.updated_at_ms))),
                );
            }
            if found.len() > limit {
                found.truncate(limit);
                return Ok((found, true));
            }
            if !more {
                return Ok((found, false));
            }
        }
    }

    /// One page (at most 500) of the keys of delivered rows at or below `upto` and below
    /// `upper_ms`, after `after`, in cursor order: one range of the retention index, which
    /// covers them.
    async fn key_page(
        &self,
        app: &str,
        status: &str,
        upto: &Cursor,
        after: Option<&Cursor>,
        upper_ms: i64,
    ) -> Result<Vec<Cursor>, DbError> {
        let pool = &self.pool;
        let sql = if after.is_some() {
            &self.keys_after
        } else {
            &self.keys_first
        };
        let mut query = sqlx::query_as::<_, (i64, String)>(AssertSqlSafe(sql.clone()))
            .bind(app)
            .bind(status)
            .bind(upper_ms)
            .bind(upto.updated_at_ms)
            .bind(upto.updated_at_ms)
            .bind(&upto.event_id);
        if let Some(c) = after {
            query = query
                .bind(c.updated_at_ms)
                .bind(c.updated_at_ms)
                .bind(c.updated_at_ms)
                .bind(&c.event_id);
        }
        let keys = query
            .bind(PAGE_ROWS)
            .fetch_all(pool)
            .await
            .context(|| format!("scanning archived rows of app {app} for stragglers"))?;
        Ok(keys
            .into_iter()
            .map(|(updated_at_ms, event_id)| Cursor {
                updated_at_ms,
                event_id,
            })
            .collect())
    }
}

/// The member rows of the batches whose ranges reach into the stretch of rows the straggler scan
/// is at: by event id, the version each holds.
#[derive(Default)]
struct BatchWindow {
    /// (the batch's last `updated_at_ms`, its member rows)
    batches: std::collections::VecDeque<(i64, std::collections::HashMap<String, i64>)>,
}

impl BatchWindow {
    fn load(&mut self, last_ms: i64, members: Vec<(String, i64)>) {
        self.batches
            .push_back((last_ms, members.into_iter().collect()));
    }

    /// Drops the batches that end before `ms` (the scan has gone past them).
    fn forget_before(&mut self, ms: i64) {
        self.batches.retain(|(last_ms, _)| *last_ms >= ms);
    }

    /// Whether a batch in the window holds this version of the row.
    fn holds(&self, key: &Cursor) -> bool {
        self.batches
            .iter()
            .any(|(_, members)| members.get(key.event_id.as_str()) == Some(&key.updated_at_ms))
    }
}

/// The backlog of an app: rows delivered after the cursor and below `upper_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backlog {
    pub rows: i64,
    /// `updated_at_ms` of the oldest row in the backlog.
    pub oldest_ms: Option<i64>,
}

impl SourceTable {
    /// The backlog count's SQL (for EXPLAIN in tests and by operators).
    pub fn backlog_count_sql(&self, after_cursor: bool) -> &str {
        if after_cursor {
            &self.count_after
        } else {
            &self.count_first
        }
    }

    /// Counts the backlog with an index range count and finds its oldest row with one index dive.
    pub(crate) async fn backlog(
        &self,
        app: &str,
        status: &str,
        after: Option<&Cursor>,
        upper_ms: i64,
    ) -> Result<Backlog, DbError> {
        let pool = &self.pool;
        let count_sql = match after {
            None => &self.count_first,
            Some(_) => &self.count_after,
        };
        let bind = |q: sqlx::query::QueryScalar<
            'static,
            sqlx::MySql,
            i64,
            sqlx::mysql::MySqlArguments,
        >| {
            let q = q
                .bind(app.to_string())
                .bind(status.to_string())
                .bind(upper_ms);
            match after {
                None => q,
                Some(c) => q
                    .bind(c.updated_at_ms)
                    .bind(c.updated_at_ms)
                    .bind(c.updated_at_ms)
                    .bind(c.event_id.clone()),
            }
        };
        let rows = bind(sqlx::query_scalar(AssertSqlSafe(count_sql.clone())))
            .fetch_one(pool)
            .await
            .context(|| format!("counting the backlog of app {app}"))?;
        let oldest_ms = self.oldest(app, status, after, upper_ms).await?;
        Ok(Backlog { rows, oldest_ms })
    }

    /// The oldest delivered row's `updated_at_ms` after `after` and below `upper_ms` (one
    /// index dive; `None`: caught up).
    pub(crate) async fn oldest(
        &self,
        app: &str,
        status: &str,
        after: Option<&Cursor>,
        upper_ms: i64,
    ) -> Result<Option<i64>, DbError> {
        let pool = &self.pool;
        let sql = match after {
            None => &self.oldest_first,
            Some(_) => &self.oldest_after,
        };
        let q = sqlx::query_scalar::<_, i64>(AssertSqlSafe(sql.clone()))
            .bind(app)
            .bind(status)
            .bind(upper_ms);
        let q = match after {
            None => q,
            Some(c) => q
                .bind(c.updated_at_ms)
                .bind(c.updated_at_ms)
                .bind(c.updated_at_ms)
                .bind(&c.event_id),
        };
        q.bind(1u32)
            .fetch_optional(pool)
            .await
            .context(|| format!("finding the oldest backlog row of app {app}"))
    }
}

/// Where a [`RowStream`]'s rows come from.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// Delivered rows after the cursor (from the start when `None`).
    After(Option<Cursor>),
    /// Delivered rows at or below the cursor that no receipt owns (stragglers).
    Stragglers { upto: Cursor },
    /// The rows purge kept, as they are now, to be archived again ([`super::kept`]).
    Kept,
}

/// A row's values, borrowed from the protocol row, by the table's column kinds.
pub(crate) fn values_of<'r>(
    spec: &TableSpec,
    row: &'r MySqlRow,
) -> Result<Vec<ValueRef<'r>>, sqlx::Error> {
    spec.columns
        .iter()
        .enumerate()
        .map(|(i, column)| value_at(row, i, column))
        .collect()
}

/// The value of `column`, read as its kind, at position `i` of `row`.
pub(crate) fn value_at<'r>(
    row: &'r MySqlRow,
    i: usize,
    column: &Column,
) -> Result<ValueRef<'r>, sqlx::Error> {
    let value = match column.kind {
        Kind::Int => row.try_get::<Option<i64>, _>(i)?.map(ValueRef::Int),
        Kind::Blob => row.try_get::<Option<&[u8]>, _>(i)?.map(ValueRef::Bytes),
        // The value's own bytes (the binary protocol): never the server's text of it.
        Kind::Float => row
            .try_get::<Option<f32>, _>(i)?
            .map(|v| ValueRef::Float(v.to_bits())),
        Kind::Double => row
            .try_get::<Option<f64>, _>(i)?
            .map(|v| ValueRef::Double(v.to_bits())),
        _ => row.try_get::<Option<&str>, _>(i)?.map(ValueRef::Text),
    };
    match value {
        Some(value) => Ok(value),
        None if column.nullable => Ok(ValueRef::Null),
        // Start-up refuses a nullable column the table says is NOT NULL; one made
        // nullable while the job runs is caught here, not archived as `null`.
        None => Err(sqlx::Error::ColumnDecode {
            index: column.name.to_string(),
            source: format!(
                "NULL in {}, which the archiver reads as NOT NULL",
                column.name
            )
            .into(),
        }),
    }
}

/// A row, decoded into owned values.
pub fn decode_row(spec: &TableSpec, row: &MySqlRow) -> Result<Row, sqlx::Error> {
    Ok(values_of(spec, row)?
        .into_iter()
        .map(ValueRef::to_value)
        .collect())
}

/// A row [`SourceTable::look_up`] found.
pub(crate) struct LookedUp {
    pub(crate) event_id: String,
    pub(crate) status: String,
    pub(crate) updated_at_ms: i64,
    /// Its status is the delivered one.
    pub(crate) delivered: bool,
    /// It lies after the cursor given, in cursor order.
    pub(crate) after_cursor: bool,
}

/// Rows of one app in cursor order, fetched a page ahead of the consumer by a
/// background task (bounded: at most two pages wait).
pub(crate) struct RowStream {
    pages: mpsc::Receiver<Result<Vec<EncodedRow>, DbError>>,
    current: std::vec::IntoIter<EncodedRow>,
    peeked: Option<EncodedRow>,
}

impl RowStream {
    pub(crate) fn spawn(
        queries: SourceTable,
        app: String,
        status: String,
        source: Source,
        upper_ms: i64,
        failpoints: FailPoints,
    ) -> RowStream {
        let (tx, rx) = mpsc::channel(2);
        tokio::spawn(tracing::Instrument::in_current_span(async move {
            let mut after = match &source {
                Source::After(cursor) => cursor.clone(),
                Source::Stragglers { .. } | Source::Kept => None,
            };
            let mut limit = FIRST_PAGE_ROWS;
            loop {
                // (rows to hand out, where to go on from — None when done)
                let page = match &source {
                    Source::After(_) => queries
                        .page(&app, &status, after.as_ref(), upper_ms, limit)
                        .await
                        .and_then(|rows| match failpoints.pass("after-page") {
                            Ok(()) => Ok(rows),
                            Err(tripped) => Err(tripped.into()),
                        })
                        .map(|rows| {
                            let full = rows.len() == limit as usize;
                            let next = rows.last().filter(|_| full).map(EncodedRow::cursor);
                            let bytes = rows.iter().map(|r| r.line.len()).sum();
                            limit = next_page_rows(limit, rows.len(), bytes);
                            (rows, next)
                        }),
                    Source::Kept => {
                        queries
                            .kept_page(&app, &status, upper_ms, after.as_ref())
                            .await
                    }
                    Source::Stragglers { upto } => {
                        match queries
                            .straggler_page(&app, &status, upto, after.as_ref(), upper_ms)
                            .await
                        {
                            Ok((keys, next)) => match failpoints.pass("after-straggler-scan") {
                                Ok(()) => queries
                                    .rows_by_keys(&app, &status, upper_ms, &keys)
                                    .await
                                    .map(|rows| (rows, next)),
                                Err(tripped) => Err(tripped.into()),
                            },
                            Err(e) => Err(e),
                        }
                    }
                };
                let (rows, next) = match page {
                    Ok(page) => page,
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        break;
                    }
                };
                if !rows.is_empty() && tx.send(Ok(rows)).await.is_err() {
                    break;
                }
                match next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }));
        RowStream {
            pages: rx,
            current: Vec::new().into_iter(),
            peeked: None,
        }
    }

    /// The next row without consuming it; `None` when the app is caught up.
    pub(crate) async fn peek(&mut self) -> Result<Option<&EncodedRow>, DbError> {
        if self.peeked.is_none() {
            self.peeked = match self.current.next() {
                Some(row) => Some(row),
                None => match self.pages.recv().await {
                    Some(page) => {
                        self.current = page?.into_iter();
                        self.current.next()
                    }
                    None => None,
                },
            };
        }
        Ok(self.peeked.as_ref())
    }

    /// Takes the row [`RowStream::peek`] returned.
    pub(crate) fn take(&mut self) -> Option<EncodedRow> {
        self.peeked.take()
    }
}

/// An app's rows: delivered below the cutoff (what archive takes), and all the others.
pub(crate) async fn archivable_and_other(
    pool: &MySqlPool,
    spec: &TableSpec,
    app: &str,
    status: &str,
    cutoff_ms: i64,
) -> Result<(i64, i64), DbError> {
    let sql = format!(
        "SELECT CAST(COALESCE(SUM({status_col} = ? AND {upd} < ?), 0) AS SIGNED), \
         CAST(COALESCE(SUM(NOT ({status_col} = ? AND {upd} < ?)), 0) AS SIGNED) FROM {table} WHERE {app_col} = ?",
        status_col = spec.status,
        upd = spec.updated_at_ms,
        table = spec.name,
        app_col = spec.app_code,
    );
    sqlx::query_as(AssertSqlSafe(sql))
        .bind(status)
        .bind(cutoff_ms)
        .bind(status)
        .bind(cutoff_ms)
        .bind(app)
        .fetch_one(pool)
        .await
        .context(|| format!("counting the rows of app {app}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_sized_to_their_rows() {
        // Small rows: 8, 32, 128, 500 (the cap).
        assert_eq!(next_page_rows(8, 8, 8 * 700), 32);
        assert_eq!(next_page_rows(64, 64, 64 * 700), 256);
        assert_eq!(next_page_rows(256, 256, 256 * 700), 500);
        // 16 MiB envelopes: one row a page; 1 MiB rows: 16.
        assert_eq!(next_page_rows(64, 64, 64 << 24), 1);
        assert_eq!(next_page_rows(500, 500, 500 << 20), 16);
        // An empty page changes nothing.
        assert_eq!(next_page_rows(500, 0, 0), 500);
    }
}
