//! Loading archived rows back into a table with the source's definition (SPEC §6 `restore`):
//! idempotent — a row already there with the same content is left alone, one with different
//! content is a conflict, reported and never overwritten — and the drill's comparisons.

use std::collections::HashMap;

use sqlx::{AssertSqlSafe, MySqlPool};

use super::source::decode_row;
use super::{Context, DbError};
use crate::batch::Member;
use crate::codec::Row;
use crate::table::TableSpec;

/// Rows per insert transaction.
pub const RESTORE_CHUNK: usize = 500;

/// A table name the archiver may create and write: letters, digits and `_`.
pub fn check_table_name(name: &str) -> Result<(), String> {
    if !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        Ok(())
    } else {
        Err(format!(
            "--into {name:?} is not a plain table name (letters, digits and _, at most 64)"
        ))
    }
}

/// Creates `table` like the source table if it does not exist.
pub async fn create_like(pool: &MySqlPool, spec: &TableSpec, table: &str) -> Result<(), DbError> {
    let sql = format!("CREATE TABLE IF NOT EXISTS {table} LIKE {}", spec.name);
    sqlx::query(AssertSqlSafe(sql))
        .execute(pool)
        .await
        .context(|| format!("creating table {table}"))?;
    Ok(())
}

pub async fn drop_table(pool: &MySqlPool, table: &str) -> Result<(), DbError> {
    sqlx::query(AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}")))
        .execute(pool)
        .await
        .context(|| format!("dropping table {table}"))?;
    Ok(())
}

/// What loading one chunk did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loaded {
    pub inserted: u64,
    /// Already there, identical.
    pub present: u64,
    /// Already there with different content: event ids.
    pub conflicts: Vec<String>,
}

/// Inserts the rows that are not in `table` yet, in one transaction; compares the others.
pub async fn load_chunk(
    pool: &MySqlPool,
    spec: &TableSpec,
    table: &str,
    app: &str,
    rows: &[Row],
) -> Result<Loaded, DbError> {
    let layout = spec.layout();
    let id = |r: &Row| r[layout.event_id].as_str().unwrap_or_default().to_string();
    let mut tx = pool
        .begin()
        .await
        .context(|| format!("starting a restore transaction into {table}"))?;
    let sql = format!(
        "SELECT {list} FROM {table} WHERE {app_col} = ? AND {id_col} IN ({ids}) FOR UPDATE",
        list = spec.select_list(),
        app_col = spec.app_code,
        id_col = spec.event_id,
        ids = vec!["?"; rows.len()].join(", ")
    );
    let mut q = sqlx::query(AssertSqlSafe(sql)).bind(app);
    for r in rows {
        q = q.bind(id(r));
    }
    let existing: HashMap<String, Row> = q
        .fetch_all(&mut *tx)
        .await
        .context(|| format!("reading existing rows of {table}"))?
        .iter()
        .map(|r| decode_row(spec, r).map(|row| (id(&row), row)))
        .collect::<Result<_, _>>()
        .context(|| format!("decoding a row of {table}"))?;
    let mut loaded = Loaded::default();
    let mut missing = Vec::new();
    for r in rows {
        match existing.get(&id(r)) {
            Some(there) if there == r => loaded.present += 1,
            Some(_) => loaded.conflicts.push(id(r)),
            None => missing.push(r),
        }
    }
    if !missing.is_empty() {
        super::insert_rows(spec, table, &missing)
            .execute(&mut *tx)
            .await
            .context(|| format!("inserting restored rows into {table}"))?;
        loaded.inserted = missing.len() as u64;
    }
    tx.commit()
        .await
        .context(|| format!("committing restored rows into {table}"))?;
    Ok(loaded)
}

/// What a drill found in its scratch table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableFacts {
    pub rows: u64,
    pub totals: Vec<i128>,
    pub members: Vec<Member>,
}

/// Counts, sums and lists the rows of `table` (a drill's scratch table: one batch).
pub async fn table_facts(
    pool: &MySqlPool,
    spec: &TableSpec,
    table: &str,
) -> Result<TableFacts, DbError> {
    let sums: Vec<String> = spec
        .totals
        .iter()
        .map(|t| format!(", CAST(COALESCE(SUM({}), 0) AS CHAR)", t.column))
        .collect();
    let sql = format!("SELECT COUNT(*){} FROM {table}", sums.concat());
    let row = sqlx::query(AssertSqlSafe(sql))
        .fetch_one(pool)
        .await
        .context(|| format!("summing {table}"))?;
    let count: i64 = sqlx::Row::try_get(&row, 0).context(|| format!("summing {table}"))?;
    let mut totals = Vec::new();
    for i in 0..spec.totals.len() {
        let text: String =
            sqlx::Row::try_get(&row, i + 1).context(|| format!("summing {table}"))?;
        totals.push(text.parse().map_err(|_| DbError::Query {
            context: format!("summing {table}"),
            source: sqlx::Error::Decode(format!("{text:?} is not a decimal").into()),
        })?);
    }
    let sql = format!(
        "SELECT {}, {} FROM {table} ORDER BY {} ",
        spec.event_id, spec.updated_at_ms, spec.event_id
    );
    let members: Vec<(String, i64)> = sqlx::query_as(AssertSqlSafe(sql))
        .fetch_all(pool)
        .await
        .context(|| format!("listing {table}"))?;
    Ok(TableFacts {
        rows: count as u64,
        totals,
        members: members
            .into_iter()
            .map(|(event_id, updated_at_ms)| Member {
                event_id,
                updated_at_ms,
            })
            .collect(),
    })
}

/// Records a drill's result.
pub async fn record_drill(
    pool: &MySqlPool,
    spec: &TableSpec,
    app: &str,
    batch_id: &str,
    at_ms: i64,
    detail: Option<&str>,
) -> Result<(), DbError> {
    let sql = format!(
        "INSERT INTO {} (app_code, batch_id, drilled_at_ms, ok, detail) VALUES (?, ?, ?, ?, ?)",
        spec.drills_table()
    );
    sqlx::query(AssertSqlSafe(sql))
        .bind(app)
        .bind(batch_id)
        .bind(at_ms)
        .bind(detail.is_none())
        .bind(detail)
        .execute(pool)
        .await
        .context(|| format!("recording the drill of batch {batch_id}"))?;
    Ok(())
}

/// The app's last successful drill: `(batch_id, drilled_at_ms)`.
pub async fn last_good_drill(
    pool: &MySqlPool,
    spec: &TableSpec,
    app: &str,
) -> Result<Option<(String, i64)>, DbError> {
    let sql = format!(
        "SELECT batch_id, drilled_at_ms FROM {} WHERE app_code = ? AND ok = TRUE ORDER BY id DESC LIMIT 1",
        spec.drills_table()
    );
    sqlx::query_as(AssertSqlSafe(sql))
        .bind(app)
        .fetch_optional(pool)
        .await
        .context(|| format!("reading the drills of app {app}"))
}
