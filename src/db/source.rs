//! Reading the source table: keyset pages of at most 500 delivered rows on the retention index,
//! ordered by the database as `(updated_at_ms, event_id)` — never re-sorted here — and the list
//! of apps, found by index dives rather than a scan.
//!
//! Each page is its own autocommit statement: no transaction on the source table stays open
//! while a batch is uploaded (SPEC §5.6).

use sqlx::mysql::MySqlRow;
use sqlx::{AssertSqlSafe, MySqlPool, Row as _};
use tokio::sync::mpsc;

use super::{Context, DbError};
use crate::codec::{Row, Value};
use crate::format::Cursor;
use crate::table::{Kind, TableSpec};

/// The most rows one page query returns (SPEC §5.6).
pub const PAGE_ROWS: u32 = 500;

/// The page queries of one table, built once.
#[derive(Debug, Clone)]
pub struct PageQueries {
    spec: &'static TableSpec,
    first: String,
    after: String,
}

impl PageQueries {
    pub fn new(spec: &'static TableSpec) -> PageQueries {
        let head = format!(
            "SELECT {list} FROM {table} FORCE INDEX ({index}) WHERE {app} = ? AND {status} = ? AND {upd} < ?",
            list = spec.select_list(),
            table = spec.name,
            index = spec.retention_index,
            app = spec.app_code,
            status = spec.status,
            upd = spec.updated_at_ms,
        );
        let order = format!(
            " ORDER BY {upd} ASC, {id} ASC LIMIT ?",
            upd = spec.updated_at_ms,
            id = spec.event_id
        );
        // `upd >= ?` repeats the cursor's lower bound so both optimizers see a plain range on the
        // index; the OR form (not a row constructor) is what MySQL 8 and MariaDB both handle well.
        let after = format!(
            "{head} AND {upd} >= ? AND ({upd} > ? OR ({upd} = ? AND {id} > ?)){order}",
            upd = spec.updated_at_ms,
            id = spec.event_id
        );
        PageQueries {
            spec,
            first: format!("{head}{order}"),
            after,
        }
    }

    /// Delivered rows of `app` after `cursor` (from the start when `None`) and below `upper_ms`.
    pub async fn page(
        &self,
        pool: &MySqlPool,
        app: &str,
        status: &str,
        after: Option<&Cursor>,
        upper_ms: i64,
        limit: u32,
    ) -> Result<Vec<Row>, DbError> {
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
        rows.iter()
            .map(|r| decode_row(self.spec, r))
            .collect::<Result<_, _>>()
            .context(|| format!("decoding a row of {} for app {app}", self.spec.name))
    }
}

fn decode_row(spec: &TableSpec, row: &MySqlRow) -> Result<Row, sqlx::Error> {
    spec.columns
        .iter()
        .enumerate()
        .map(|(i, column)| {
            Ok(match column.kind {
                Kind::Int => Value::Int(row.try_get::<i64, _>(i)?),
                Kind::NullableInt => row
                    .try_get::<Option<i64>, _>(i)?
                    .map_or(Value::Null, Value::Int),
                Kind::Text | Kind::JsonText => Value::Text(row.try_get::<String, _>(i)?),
                Kind::NullableText => row
                    .try_get::<Option<String>, _>(i)?
                    .map_or(Value::Null, Value::Text),
                Kind::Blob => Value::Bytes(row.try_get::<Vec<u8>, _>(i)?),
            })
        })
        .collect()
}

/// The cursor of a row.
pub fn cursor_of(spec: &TableSpec, row: &Row) -> Cursor {
    let layout = spec.layout();
    Cursor {
        updated_at_ms: row[layout.updated_at_ms]
            .as_i64()
            .expect("updated_at_ms is an integer"),
        event_id: row[layout.event_id]
            .as_str()
            .expect("event_id is text")
            .to_string(),
    }
}

/// Delivered rows of one app in cursor order, fetched a page ahead of the consumer by a
/// background task (bounded: at most two pages wait).
pub struct RowStream {
    pages: mpsc::Receiver<Result<Vec<Row>, DbError>>,
    current: std::vec::IntoIter<Row>,
    peeked: Option<Row>,
}

impl RowStream {
    pub fn spawn(
        pool: MySqlPool,
        queries: PageQueries,
        app: String,
        status: String,
        after: Option<Cursor>,
        upper_ms: i64,
    ) -> RowStream {
        let (tx, rx) = mpsc::channel(2);
        tokio::spawn(async move {
            let mut after = after;
            loop {
                let page = queries
                    .page(&pool, &app, &status, after.as_ref(), upper_ms, PAGE_ROWS)
                    .await;
                let (last, full) = match &page {
                    Ok(rows) => (
                        rows.last().map(|r| cursor_of(queries.spec, r)),
                        rows.len() == PAGE_ROWS as usize,
                    ),
                    Err(_) => (None, false),
                };
                let stop = page.is_err() || !full;
                if page.as_ref().is_ok_and(|rows| rows.is_empty()) {
                    break;
                }
                if tx.send(page).await.is_err() || stop {
                    break;
                }
                after = last;
            }
        });
        RowStream {
            pages: rx,
            current: Vec::new().into_iter(),
            peeked: None,
        }
    }

    /// The next row without consuming it; `None` when the app is caught up.
    pub async fn peek(&mut self) -> Result<Option<&Row>, DbError> {
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

    /// Consumes the row [`RowStream::peek`] returned.
    pub fn advance(&mut self) {
        self.peeked = None;
    }
}

/// Every app code present in the source table, by repeated index dives on the primary key
/// (`MIN(app_code) … WHERE app_code > ?`): cost grows with the number of apps, not of rows.
pub async fn all_apps(pool: &MySqlPool, spec: &TableSpec) -> Result<Vec<String>, DbError> {
    let first = AssertSqlSafe(format!(
        "SELECT MIN({app}) FROM {table}",
        app = spec.app_code,
        table = spec.name
    ));
    let next = format!(
        "SELECT MIN({app}) FROM {table} WHERE {app} > ?",
        app = spec.app_code,
        table = spec.name
    );
    let mut apps = Vec::new();
    let mut current: Option<String> = sqlx::query_scalar(first)
        .fetch_one(pool)
        .await
        .context(|| format!("listing the apps of {}", spec.name))?;
    while let Some(app) = current {
        current = sqlx::query_scalar(AssertSqlSafe(next.clone()))
            .bind(&app)
            .fetch_one(pool)
            .await
            .context(|| format!("listing the apps of {}", spec.name))?;
        apps.push(app);
    }
    Ok(apps)
}
