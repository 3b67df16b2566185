//! Loading archived rows back into a table with the source's definition (SPEC §6 `restore`):
//! idempotent — a row already there with the same content is left alone, one with different
//! content is a conflict, reported and never overwritten — and the drill's comparisons.
//!
//! Every inserted row is read back inside its transaction and compared whole with the archived
//! row: a server that stores a value differently (MySQL 8 normalises JSON, a CHAR column drops
//! trailing spaces, a trigger rewrites a column) makes that row a conflict, and it is not loaded.

use std::collections::{HashMap, HashSet};

use sqlx::{AssertSqlSafe, MySql, MySqlPool, QueryBuilder};

use super::lock::{AppLock, Doing, LockLost};
use super::source::{decode_row, values_of};
use super::{Context, DbError, IfPresent};
use crate::model::batch::Member;
use crate::model::codec::{Row, Value};
use crate::model::format::TotalValue;
use crate::model::ident;
use crate::model::table::{TableSpec, TotalKind};

/// Rows per insert transaction.
pub(crate) const RESTORE_CHUNK: usize = 500;

/// At most this many bytes of NDJSON per `INSERT` (about as many bytes of row values): far below
/// MySQL 8's default 64 MiB `max_allowed_packet`, so a batch of large envelopes loads in smaller
/// statements instead of failing. A single larger row still needs a packet as large as it.
pub(crate) const RESTORE_CHUNK_BYTES: usize = 8 << 20;

/// A table name the archiver may create and write ([`ident`]).
fn check_table_name(name: &str) -> Result<(), String> {
    match ident::is_plain(name) {
        true => Ok(()),
        false => Err(format!(
            "--into {name:?} is not a plain table name ({})",
            ident::RULE
        )),
    }
}

/// Why a row was not loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConflictReason {
    /// The table already holds a row with this key and other content.
    ExistsWithOtherContent,
    /// Inserted, the row reads back other than it was archived (the insert was rolled back).
    StoredDifferently,
}

/// A row that was not loaded, and why; `column` names the first column that differs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Conflict {
    pub event_id: String,
    pub reason: ConflictReason,
    pub column: Option<String>,
}

/// What restoring into the live source table adds to each chunk's transaction (SPEC §5.9): the
/// batch's receipt is marked restored in the same transaction as the rows it puts back, so purge
/// (which reads the mark under a row lock in each of its own transactions) never deletes them
/// again, and the app's lock is confirmed before the commit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IntoSource<'a> {
    pub lock: &'a AppLock,
    pub batch_id: &'a str,
    pub now_ms: i64,
    /// A compacted receipt (its member rows of purged rows are gone): each row put back gets
    /// its member row again in the same transaction — so it is not taken for a straggler, and
    /// purge can find it.
    pub compacted: bool,
    pub failpoints: &'a crate::failpoint::FailPoints,
    /// The batch's receipt's repository: marks it restored.
    pub receipts: &'a super::receipts::Receipts,
    /// The table's member rows: a compacted batch's rows put back get theirs again.
    pub members: &'a super::members::Members,
}

impl IntoSource<'_> {
    /// The chunk transaction's first statement: locks the batch's receipt — what `compact` and
    /// `purge` lock first too, so the three take turns on a batch even without the app's lock —
    /// and reads its compaction state again. A batch compacted since the restore listed it (or
    /// the other way round) is refused: nothing of the chunk is loaded, and the next run reads
    /// the receipt as it is.
    async fn lock_receipt(
        &self,
        tx: &mut sqlx::Transaction<'_, MySql>,
        spec: &TableSpec,
        app: &str,
    ) -> Result<(), LoadError> {
        let sql = format!(
            "SELECT compacted_at_ms FROM {} WHERE app_code = ? AND batch_id = ? FOR UPDATE",
            spec.receipts_table()
        );
        let compacted: Option<Option<i64>> = sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(app)
            .bind(self.batch_id)
            .fetch_optional(&mut **tx)
            .await
            .context(|| format!("locking the receipt of batch {}", self.batch_id))?;
        let now_compacted = compacted.flatten().is_some();
        if compacted.is_none() || now_compacted != self.compacted {
            return Err(LoadError::ReceiptChanged {
                batch_id: self.batch_id.to_string(),
            });
        }
        Ok(())
    }
}

/// Why a chunk was not loaded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoadError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    LockLost(#[from] LockLost),
    #[error("batch {batch_id} was compacted (or its receipt changed) while restore worked on it: nothing of this chunk was loaded — run restore again")]
    ReceiptChanged { batch_id: String },
}

/// What loading one chunk did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Loaded {
    pub inserted: u64,
    /// Already there, identical.
    pub present: u64,
    /// Not loaded: there with other content, or stored differently from the archive.
    pub conflicts: Vec<Conflict>,
}

/// What a drill found in its scratch table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableFacts {
    pub rows: u64,
    /// The control totals as the database computes them (a sum) or as its rows in cursor order
    /// hash (a hashed total).
    pub totals: Vec<TotalValue>,
    pub members: Vec<Member>,
}

/// A table rows are restored into (`{table}_restored`, a drill's scratch table, `--into`, or
/// the live source table), created with the source's definition.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TargetTable<'a> {
    /// The rows' columns: a batch's lines', then any whose values purge recorded with it.
    spec: &'static TableSpec,
    name: &'a str,
    /// The batch's lines' columns (the first of `spec`'s): what the archive holds of each row
    /// itself, and all that a row already in the table is compared on.
    lines: &'static TableSpec,
}

impl<'a> TargetTable<'a> {
    /// `name`, if it is a plain table name the archiver may create and write.
    pub(crate) fn new(spec: &'static TableSpec, name: &'a str) -> Result<TargetTable<'a>, String> {
        check_table_name(name)?;
        Ok(TargetTable {
            spec,
            name,
            lines: spec,
        })
    }

    /// The same table, for rows whose batch's lines hold `lines`' columns — the first of the
    /// rows' — and whose others are the values purge recorded for columns the lines lack. A row
    /// already in the table is the archived one when it holds what the lines hold: the recorded
    /// values are what the batch's *deleted* rows held, and a row purge kept (it held something
    /// else) is there as it is.
    pub(crate) fn archived_as(self, lines: &'static TableSpec) -> TargetTable<'a> {
        TargetTable { lines, ..self }
    }

    /// Whether `there`, a row of the table, is `archived` as far as the archive holds it.
    fn holds(&self, there: &Row, archived: &Row) -> bool {
        let n = self.lines.columns.len();
        there.len() == archived.len() && there[..n] == archived[..n]
    }

    /// Creates the table like the source table if it does not exist.
    pub(crate) async fn create_like(&self, pool: &MySqlPool) -> Result<(), DbError> {
        let (spec, table) = (self.spec, self.name);
        let sql = format!("CREATE TABLE IF NOT EXISTS {table} LIKE {}", spec.name);
        sqlx::query(AssertSqlSafe(sql))
            .execute(pool)
            .await
            .context(|| format!("creating table {table}"))?;
        Ok(())
    }

    /// Drops the table, if it exists.
    pub(crate) async fn drop(&self, pool: &MySqlPool) -> Result<(), DbError> {
        let table = self.name;
        sqlx::query(AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}")))
            .execute(pool)
            .await
            .context(|| format!("dropping table {table}"))?;
        Ok(())
    }

    /// Inserts the rows that are not in the table yet, in one transaction, and reads them back
    /// before committing; compares the others. A row that reads back other than it was archived is
    /// taken out, and the chunk is done again without it. `into_source`: the live table, under the
    /// lock.
    pub(crate) async fn load_chunk(
        &self,
        pool: &MySqlPool,
        app: &str,
        rows: &[Row],
        into_source: Option<IntoSource<'_>>,
    ) -> Result<Loaded, LoadError> {
        if let Some(loaded) = self.load_whole(pool, app, rows, into_source).await? {
            return Ok(loaded);
        }
        let mut stored_differently: Vec<Conflict> = Vec::new();
        // Each pass either commits or takes at least one more row out: at most rows.len() + 1 passes.
        loop {
            let pass = self
                .load_once(pool, app, rows, &stored_differently, into_source)
                .await?;
            match pass {
                Pass::Committed(mut loaded) => {
                    loaded.conflicts.extend(stored_differently);
                    return Ok(loaded);
                }
                Pass::StoredDifferently(differ) => stored_differently.extend(differ),
            }
        }
    }

    /// The common case in two statements: every row goes in with `INSERT IGNORE` (a row the table
    /// already holds is left as it is), then every row of the chunk is read back and compared
    /// whole. All as archived: committed, and the server's count of inserted rows tells the new
    /// from the already present. Anything else — a row there with other content, one stored
    /// differently, one cut or missing — rolls back (`None`), and the chunk is sorted out row by
    /// row by [`Self::load_once`], which reads before it writes.
    async fn load_whole(
        &self,
        pool: &MySqlPool,
        app: &str,
        rows: &[Row],
        into_source: Option<IntoSource<'_>>,
    ) -> Result<Option<Loaded>, LoadError> {
        let (spec, table) = (self.spec, self.name);
        let mut tx = pool
            .begin()
            .await
            .context(|| format!("starting a restore transaction into {table}"))?;
        if let Some(source) = into_source {
            super::layout::hold(&mut tx, spec).await?;
            source.lock_receipt(&mut tx, spec, app).await?;
        }
        let all: Vec<&Row> = rows.iter().collect();
        let inserted = super::insert_rows(&mut *tx, spec, table, &all, IfPresent::Skip)
            .await
            .context(|| format!("inserting restored rows into {table}"))?;
        if !reads_back_as_archived(&mut tx, spec, table, app, rows).await? {
            tx.rollback()
                .await
                .context(|| format!("rolling back restored rows into {table}"))?;
            return Ok(None);
        }
        if inserted > 0 {
            if let Some(source) = into_source {
                mark_restored(&mut tx, self.lines, app, source, &all, inserted as usize).await?;
            }
        }
        tx.commit()
            .await
            .context(|| format!("committing restored rows into {table}"))?;
        Ok(Some(Loaded {
            inserted,
            present: rows.len() as u64 - inserted,
            conflicts: Vec::new(),
        }))
    }

    /// One attempt at a chunk, leaving out the rows already found stored differently.
    async fn load_once(
        &self,
        pool: &MySqlPool,
        app: &str,
        rows: &[Row],
        refused: &[Conflict],
        into_source: Option<IntoSource<'_>>,
    ) -> Result<Pass, LoadError> {
        let (spec, table) = (self.spec, self.name);
        let id = |r: &Row| event_id(spec, r);
        let refused: HashSet<&str> = refused.iter().map(|c| c.event_id.as_str()).collect();
        let mut tx = pool
            .begin()
            .await
            .context(|| format!("starting a restore transaction into {table}"))?;
        if let Some(source) = into_source {
            super::layout::hold(&mut tx, spec).await?;
            source.lock_receipt(&mut tx, spec, app).await?;
        }
        let existing = select_rows(&mut tx, spec, table, app, rows.iter().map(id), true).await?;
        let mut loaded = Loaded::default();
        let mut missing = Vec::new();
        for r in rows {
            let key = id(r);
            match existing.get(&key) {
                Some(there) if self.holds(there, r) => loaded.present += 1,
                Some(there) => loaded.conflicts.push(Conflict {
                    column: differing_column(spec, r, there),
                    event_id: key,
                    reason: ConflictReason::ExistsWithOtherContent,
                }),
                None if refused.contains(key.as_str()) => {}
                None => missing.push(r),
            }
        }
        if !missing.is_empty() {
            super::insert_rows(&mut *tx, spec, table, &missing, IfPresent::Fail)
                .await
                .context(|| format!("inserting restored rows into {table}"))?;
            let stored = select_rows(
                &mut tx,
                spec,
                table,
                app,
                missing.iter().map(|r| id(r)),
                false,
            )
            .await?;
            let differ = stored_differently(spec, &missing, &stored);
            if !differ.is_empty() {
                tx.rollback()
                    .await
                    .context(|| format!("rolling back restored rows into {table}"))?;
                return Ok(Pass::StoredDifferently(differ));
            }
            loaded.inserted = missing.len() as u64;
            if let Some(source) = into_source {
                mark_restored(&mut tx, self.lines, app, source, &missing, missing.len()).await?;
            }
        }
        tx.commit()
            .await
            .context(|| format!("committing restored rows into {table}"))?;
        Ok(Pass::Committed(loaded))
    }

    /// Every row of the table (a drill's scratch table: one batch), whole.
    pub(crate) async fn rows(&self, pool: &MySqlPool) -> Result<Vec<Row>, DbError> {
        let (spec, table) = (self.spec, self.name);
        let sql = format!("SELECT {} FROM {table}", spec.select_list());
        sqlx::query(AssertSqlSafe(sql))
            .fetch_all(pool)
            .await
            .context(|| format!("reading {table}"))?
            .iter()
            .map(|r| decode_row(spec, r))
            .collect::<Result<_, _>>()
            .context(|| format!("decoding a row of {table}"))
    }

    /// The hashed total of `column` over the table's rows in cursor order (as
    /// [`TotalKind::Sha256`] defines it), one value in memory at a time.
    async fn hash_column(&self, pool: &MySqlPool, column: &str) -> Result<TotalValue, DbError> {
        use sha2::Digest as _;
        let (spec, table) = (self.spec, self.name);
        // The value as the archiver reads it (a DECIMAL's text, a DATETIME's ISO form), as bytes.
        // Text in utf8mb4, as the archiver's sessions receive it, whatever the column's charset.
        let read_as = match spec.columns.iter().find(|c| c.name == column) {
            Some(c) if c.kind.is_text() => format!("CONVERT({} USING utf8mb4)", c.select()),
            Some(c) => c.select(),
            None => column.to_string(),
        };
        // The order is the database's, asked for the keys alone; each value is then read by
        // its primary key. Sorting the values themselves would be a filesort of whole values,
        // which MySQL's 256 KiB default sort buffer refuses for a large JSON one (error 1038).
        let keys_sql = format!(
            "SELECT {app}, {id} FROM {table} ORDER BY {upd}, {id}",
            app = spec.app_code,
            id = spec.event_id,
            upd = spec.updated_at_ms
        );
        let keys: Vec<(String, String)> = sqlx::query_as(AssertSqlSafe(keys_sql))
            .fetch_all(pool)
            .await
            .context(|| format!("listing {table} to hash {column}"))?;
        let value_sql = format!(
            "SELECT CAST({read_as} AS BINARY) FROM {table} WHERE {} = ? AND {} = ?",
            spec.app_code, spec.event_id
        );
        let mut hasher = sha2::Sha256::new();
        for (app, id) in &keys {
            let value: Option<Vec<u8>> = sqlx::query_scalar(AssertSqlSafe(value_sql.clone()))
                .bind(app)
                .bind(id)
                .fetch_one(pool)
                .await
                .context(|| format!("hashing {table}.{column}"))?;
            match value {
                Some(bytes) => {
                    hasher.update((bytes.len() as u64).to_be_bytes());
                    hasher.update(&bytes);
                }
                None => hasher.update([0xFF; 8]),
            }
        }
        Ok(TotalValue::Sha256(hex::encode(hasher.finalize())))
    }

    /// Counts, sums and lists the rows of `table` (a drill's scratch table: one batch).
    pub(crate) async fn facts(&self, pool: &MySqlPool) -> Result<TableFacts, DbError> {
        let (spec, table) = (self.spec, self.name);
        // A hashed total's place is taken by a constant; it is hashed from its rows below.
        let sums: Vec<String> = spec
            .totals
            .iter()
            .map(|t| match t.kind {
                TotalKind::Sum => format!(", CAST(COALESCE(SUM({}), 0) AS CHAR)", t.column),
                TotalKind::Sha256 => ", ''".to_string(),
            })
            .collect();
        let sql = format!("SELECT COUNT(*){} FROM {table}", sums.concat());
        let row = sqlx::query(AssertSqlSafe(sql))
            .fetch_one(pool)
            .await
            .context(|| format!("summing {table}"))?;
        let count: i64 = sqlx::Row::try_get(&row, 0).context(|| format!("summing {table}"))?;
        let mut totals = Vec::new();
        for (i, total) in spec.totals.iter().enumerate() {
            let text: String =
                sqlx::Row::try_get(&row, i + 1).context(|| format!("summing {table}"))?;
            totals.push(match total.kind {
                TotalKind::Sum => TotalValue::Sum(text.parse().map_err(|_| DbError::Query {
                    context: format!("summing {table}"),
                    source: sqlx::Error::Decode(format!("{text:?} is not a decimal").into()),
                })?),
                TotalKind::Sha256 => self.hash_column(pool, total.column).await?,
            });
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
                .map(|(event_id, updated_at_ms)| Member::new(event_id, updated_at_ms))
                .collect(),
        })
    }
}

/// How one attempt at a chunk went.
enum Pass {
    Committed(Loaded),
    /// Rows that read back other than they were archived: rolled back, to be left out.
    StoredDifferently(Vec<Conflict>),
}

fn event_id(spec: &TableSpec, row: &Row) -> String {
    row[spec.layout().event_id]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The inserted rows that read back other than they were archived.
fn stored_differently(
    spec: &TableSpec,
    inserted: &[&Row],
    stored: &HashMap<String, Row>,
) -> Vec<Conflict> {
    inserted
        .iter()
        .filter_map(|r| {
            let key = event_id(spec, r);
            match stored.get(&key) {
                Some(back) if back == *r => None,
                back => Some(Conflict {
                    column: back.and_then(|b| differing_column(spec, r, b)),
                    event_id: key,
                    reason: ConflictReason::StoredDifferently,
                }),
            }
        })
        .collect()
}

/// Marks the batch restored into the source in the chunk's transaction — the rows are back: the
/// batch is purge's to finish again, but marked, so only `purge --include-restored` takes them
/// (`purged_rows` counts what is gone now) — gives the rows of a compacted batch their member
/// rows back, and confirms the app's lock before the commit. `rows`: those that may have been
/// put back (for a chunk inserted with IGNORE, all of it; rows already there keep the member row
/// they have); `inserted`: how many were. `spec`: the batch's lines' columns (the first of each
/// row's).
async fn mark_restored(
    tx: &mut sqlx::Transaction<'_, MySql>,
    spec: &'static TableSpec,
    app: &str,
    source: IntoSource<'_>,
    rows: &[&Row],
    inserted: usize,
) -> Result<(), LoadError> {
    source
        .failpoints
        .pass("restore-before-mark")
        .map_err(DbError::from)?;
    if source.compacted {
        let layout = spec.layout();
        let given: Vec<crate::model::batch::Member> = rows
            .iter()
            .map(|r| {
                // The row's line as archived (the batch's own columns): its fingerprint.
                let mut line = Vec::new();
                let values = r[..spec.columns.len()].iter().map(Value::as_ref);
                crate::model::codec::encode_values(spec, values, &mut line);
                crate::model::batch::Member {
                    event_id: r[layout.event_id].as_str().unwrap_or_default().to_string(),
                    updated_at_ms: r[layout.updated_at_ms].as_i64().unwrap_or_default(),
                    fingerprint: Some(crate::model::digest::row_fingerprint(&line)),
                }
            })
            .collect();
        let owner = super::members::Owner {
            app_code: app,
            batch_id: source.batch_id,
        };
        source
            .members
            .insert(tx, owner, &given, super::members::OnDuplicate::Keep)
            .await
            .context(|| {
                format!(
                    "giving the rows of compacted batch {} their member rows back",
                    source.batch_id
                )
            })?;
    }
    source
        .receipts
        .mark_restored(tx, app, source.batch_id, source.now_ms, inserted as u64)
        .await?;
    if !source.lock.held_per(&mut **tx).await? {
        return Err(source.lock.lost(source.batch_id, Doing::Restoring).into());
    }
    Ok(())
}

/// The name of the first column in which `a` and `b` differ.
fn differing_column(spec: &TableSpec, a: &Row, b: &Row) -> Option<String> {
    spec.columns
        .iter()
        .zip(a.iter().zip(b.iter()))
        .find(|(_, (x, y))| x != y)
        .map(|(c, _)| c.name.to_string())
}

/// The rows of `table` with these event ids (of `app`), by event id; locked with `for_update`.
async fn select_rows(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    spec: &TableSpec,
    table: &str,
    app: &str,
    ids: impl Iterator<Item = String>,
    for_update: bool,
) -> Result<HashMap<String, Row>, DbError> {
    let ids: Vec<String> = ids.collect();
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let layout = spec.layout();
    rows_query(spec, table, app, ids.iter().map(String::as_str), for_update)
        .build()
        .fetch_all(&mut **tx)
        .await
        .context(|| format!("reading rows of {table}"))?
        .iter()
        .map(|r| {
            decode_row(spec, r).map(|row| {
                let id = row[layout.event_id]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                (id, row)
            })
        })
        .collect::<Result<_, _>>()
        .context(|| format!("decoding a row of {table}"))
}

/// Whether `table` holds every one of `rows` (of `app`) exactly as archived, compared column by
/// column on the protocol rows (nothing is copied).
async fn reads_back_as_archived(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    spec: &TableSpec,
    table: &str,
    app: &str,
    rows: &[Row],
) -> Result<bool, DbError> {
    let layout = spec.layout();
    let archived: HashMap<&str, &Row> = rows
        .iter()
        .map(|r| (r[layout.event_id].as_str().unwrap_or_default(), r))
        .collect();
    let held = rows_query(spec, table, app, archived.keys().copied(), false)
        .build()
        .fetch_all(&mut **tx)
        .await
        .context(|| format!("reading rows of {table}"))?;
    let mut equal = 0;
    for row in &held {
        let values = values_of(spec, row).context(|| format!("decoding a row of {table}"))?;
        let id = values[layout.event_id].as_str().unwrap_or_default();
        match archived.get(id) {
            Some(a) if a.iter().map(Value::as_ref).eq(values.iter().copied()) => equal += 1,
            _ => return Ok(false),
        }
    }
    Ok(equal == rows.len())
}

/// `SELECT` of the rows of `table` with these event ids (of `app`), whole.
fn rows_query<'q>(
    spec: &TableSpec,
    table: &str,
    app: &'q str,
    ids: impl Iterator<Item = &'q str>,
    for_update: bool,
) -> QueryBuilder<MySql> {
    let mut qb = QueryBuilder::<MySql>::new(format!(
        "SELECT {} FROM {table} WHERE {} = ",
        spec.select_list(),
        spec.app_code
    ));
    qb.push_bind(app)
        .push(format!(" AND {} IN (", spec.event_id));
    let mut marks = qb.separated(", ");
    for id in ids {
        marks.push_bind(id);
    }
    qb.push(if for_update { ") FOR UPDATE" } else { ")" });
    qb
}

/// How the rows a table holds differ from the archived ones, whole rows compared by event id:
/// the first difference found, or `None` when they are the same rows.
pub(crate) fn first_difference(spec: &TableSpec, archived: &[Row], held: &[Row]) -> Option<String> {
    let layout = spec.layout();
    let id = |r: &Row| r[layout.event_id].as_str().unwrap_or_default().to_string();
    let held: HashMap<String, &Row> = held.iter().map(|r| (id(r), r)).collect();
    for row in archived {
        let key = id(row);
        match held.get(&key) {
            None => return Some(format!("event {key} is missing")),
            Some(there) if *there != row => {
                let column = differing_column(spec, row, there).unwrap_or_default();
                return Some(format!("event {key} differs in column {column}"));
            }
            Some(_) => {}
        }
    }
    (held.len() != archived.len())
        .then(|| format!("{} rows held, {} archived", held.len(), archived.len()))
}
