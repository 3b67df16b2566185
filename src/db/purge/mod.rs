//! Deleting what is proven (SPEC §5.5): a source row goes only if it is a member of a receipt
//! that is VERIFIED in the same transaction, and the row is still exactly what was archived —
//! read `FOR UPDATE`, encoded as the archive encodes it, its line's fingerprint equal to the
//! member's. Each chunk of at most 500 members is one transaction of primary-key deletes — never
//! a range delete — that also counts what it deleted on the receipt, with the app's lock
//! re-checked before the commit.
//!
//! Each chunk first locks its receipt row and reads its state and restored mark (SPEC §5.9): a
//! receipt withdrawn meanwhile (another state, or deleted) stops the batch; a batch that
//! `restore --into-source` put back — which marks the receipt in the same transaction as its
//! inserts — is left alone, even when the mark arrived after purge listed the receipt.
//!
//! Every delete is decided against the table as it is in the transaction that deletes (SPEC
//! §5.16): once the chunk's rows are locked — which holds the table's definition until the
//! commit — the transaction asks the server for the table's definition (`SHOW CREATE TABLE`), and
//! a chunk compared on another one (a column added, dropped or changed since purge last read the
//! table) is rolled back and done again on the table as it is now. Columns the batch's lines lack (added after it was archived) are held to what its
//! deleted rows held, recorded with the batch in the same transaction ([`crate::model::unarchived`]).

use std::sync::Arc;

use sqlx::{AssertSqlSafe, MySql, MySqlPool, QueryBuilder, Transaction};

use super::added::{AddedValue, AddedValues};
use super::lock::{AppLock, Doing, LockLost};
use super::preflight::{Flavour, Server};
use super::{Context, DbError};
use crate::failpoint::{FailPoints, Tripped};
use crate::model::batch::Member;
use crate::model::profile::LiveColumn;
use crate::model::receipt::STATE_VERIFIED;
use crate::model::table::TableSpec;
use crate::model::unarchived::{Recorded, Unarchived};

mod compare;

use compare::Compared;

/// At most this many rows per delete transaction.
pub(crate) const PURGE_CHUNK: usize = 500;

#[derive(Debug, thiserror::Error)]
pub(crate) enum PurgeError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    LockLost(#[from] LockLost),
    #[error("the receipt of batch {batch_id} was withdrawn while purge worked on it ({now}): the rest of its rows stay — run `outbox-archiver verify --batch-id {batch_id}`")]
    Withdrawn { batch_id: String, now: String },
    #[error(transparent)]
    Failpoint(#[from] Tripped),
}

/// Whether a batch could be marked purged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finished {
    Done,
    /// Rows of it are back in the source: the batch stays open.
    Back(u64),
    /// Another transaction holds a row of it (one put back, not committed yet): it stays open.
    Held,
}

/// What one chunk did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Chunk {
    pub purged: u64,
    /// Members whose row is still there: changed since it was archived, so kept.
    pub kept: Vec<String>,
    /// Columns the batch's lines lack that kept rows of it — each holding something a restore
    /// would not put back ([`crate::model::unarchived::why`]'s words).
    pub kept_for_columns: std::collections::BTreeSet<String>,
    /// The receipt is marked restored into the source: nothing was deleted.
    pub restored: bool,
    /// Rows another transaction held locked: not looked at, so the receipt is not finished.
    pub busy: u64,
}

#[derive(Debug, Clone)]
pub struct PurgeQueries {
    spec: &'static TableSpec,
    pool: MySqlPool,
    /// The batches' receipts: what a purge chunk and the batch's end write on them.
    receipts: crate::db::receipts::Receipts,
    /// The server's kind, read once: how a delete is held to the unique key differs.
    flavour: tokio::sync::OnceCell<Flavour>,
    /// The source table as the server last described it: a batch's lines may lack some of its
    /// columns (SPEC §5.14). Each delete transaction holds it to the table as it is then, and
    /// it is read again when it changed.
    live: Arc<tokio::sync::Mutex<Option<Arc<Described>>>>,
}

/// The source table as described: its definition (`SHOW CREATE TABLE`, compared in each delete
/// transaction) and its columns.
#[derive(Debug)]
struct Described {
    definition: String,
    columns: Vec<LiveColumn>,
    /// The event id column's collation when MariaDB's one-statement delete can name it
    /// ([`PurgeQueries::joined_delete`]): a `utf8mb4` one. Otherwise a chunk is deleted one row a
    /// statement.
    joinable: Option<String>,
}

impl Described {
    fn new(definition: String, columns: Vec<LiveColumn>, event_id: &str) -> Described {
        let joinable = columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(event_id))
            .and_then(|c| c.collation.clone())
            .filter(|c| {
                c.starts_with("utf8mb4_")
                    && c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
            });
        Described {
            definition,
            columns,
            joinable,
        }
    }
}

/// How one attempt at a chunk ended.
enum Attempt {
    Done(Chunk),
    /// The table's definition changed under it: rolled back, to be done again.
    TableChanged,
    /// MariaDB's one-statement delete met a row lock (it does not wait): rolled back, to be done
    /// again one row a statement.
    DeleteWouldWait,
}

/// How many times a chunk is done again because the table's columns changed under it before
/// purge gives up on the run (a table altered that often is being migrated: purge later).
const COLUMN_CHANGES: usize = 3;

/// A chunk of a batch's members, and the table as the batch's lines hold it.
#[derive(Clone, Copy)]
pub(crate) struct ChunkOf<'a> {
    pub app: &'a str,
    pub batch_id: &'a str,
    pub members: &'a [Member],
    pub batch: &'static TableSpec,
}

/// A statement purge runs on the source table, and how the server plans it (`EXPLAIN`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Plan {
    /// What the statement does (`lock and read`, `delete`, …).
    pub statement: &'static str,
    /// Per table the plan touches: its access type (`range`, `ref`, `ALL`…), its index, the rows
    /// it estimates.
    pub access: Vec<(String, Option<String>, Option<i64>)>,
}

/// What a statement over a chunk's rows does with them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Over {
    /// Read them, locking those no other transaction holds.
    Lock,
    /// Read them as they are (the dry run).
    Read,
    /// Count those that exist.
    Count,
    /// Delete them.
    Delete,
}

impl PurgeQueries {
    pub fn new(pool: &MySqlPool, spec: &'static TableSpec) -> PurgeQueries {
        PurgeQueries {
            pool: pool.clone(),
            spec,
            receipts: crate::db::receipts::Receipts::new(pool, spec),
            flavour: tokio::sync::OnceCell::new(),
            live: Default::default(),
        }
    }

    /// The source table's columns as last described (two queries when not known): its
    /// definition, then its columns — so that a change between the two is found by the next
    /// transaction's look at the definition.
    async fn live(&self) -> Result<Arc<Described>, DbError> {
        let pool = &self.pool;
        let mut known = self.live.lock().await;
        if let Some(live) = known.as_ref() {
            return Ok(live.clone());
        }
        let definition = super::schema::definition(pool, self.spec.name).await?;
        let columns = super::schema::live_columns(pool, self.spec.name).await?;
        let live = Arc::new(Described::new(definition, columns, self.spec.event_id));
        *known = Some(live.clone());
        Ok(live)
    }

    /// Forgets the table's columns: they changed.
    async fn forget_live(&self) {
        *self.live.lock().await = None;
    }

    /// Whether the source table, as the server describes it to this transaction now, is still
    /// `live`. Asked after the chunk's rows are locked: the transaction then holds the table's
    /// definition until it ends.
    async fn still(
        &self,
        tx: &mut Transaction<'_, MySql>,
        live: &Described,
    ) -> Result<bool, DbError> {
        let now = super::schema::definition(&mut **tx, self.spec.name).await?;
        Ok(now == live.definition)
    }

    /// What the deleted rows of a batch held in columns its lines lack, recorded so far.
    async fn recorded<'e, E>(
        &self,
        executor: E,
        app: &str,
        batch_id: &str,
    ) -> Result<Recorded, DbError>
    where
        E: sqlx::Executor<'e, Database = MySql>,
    {
        let values = AddedValues::new(self.spec)
            .of_batch(executor, app, batch_id)
            .await?;
        Ok(values
            .into_iter()
            .map(|v| (v.column_name, v.value_json))
            .collect())
    }

    /// The server's kind (one query, the first time).
    async fn flavour(&self) -> Result<Flavour, DbError> {
        let pool = &self.pool;
        self.flavour
            .get_or_try_init(|| async {
                let version: String = sqlx::query_scalar("SELECT VERSION()")
                    .fetch_one(pool)
                    .await
                    .context(|| "reading the server version".into())?;
                Ok::<_, DbError>(Server::of(&version, "").flavour)
            })
            .await
            .copied()
    }

    /// A statement over the rows of `ids` of `app`, as purge runs it on a `flavour` server
    /// (`explain`: prefixed with it, for [`PurgeQueries::plans`]).
    fn over_rows<'q>(
        &self,
        over: Over,
        flavour: Flavour,
        app: &'q str,
        ids: impl IntoIterator<Item = &'q str>,
        explain: Option<&str>,
    ) -> QueryBuilder<MySql> {
        self.selecting_over_rows(&self.spec.select_list(), over, flavour, app, ids, explain)
    }

    /// [`PurgeQueries::over_rows`], reading `list` (a lock or a read).
    fn selecting_over_rows<'q>(
        &self,
        list: &str,
        over: Over,
        flavour: Flavour,
        app: &'q str,
        ids: impl IntoIterator<Item = &'q str>,
        explain: Option<&str>,
    ) -> QueryBuilder<MySql> {
        let s = self.spec;
        // Held to the unique key: on a small table, or for a chunk that is a large share of it,
        // the optimizer would scan the whole table, locking and waiting for other apps' rows.
        // A single-table DELETE takes no index hint: on MySQL (8.0.20 and later) it takes an
        // optimizer hint. (MariaDB takes no hint there: [`PurgeQueries::joined_delete`].)
        let (name, key) = (s.name, s.event_key);
        let table = format!("{name} FORCE INDEX ({key})");
        let head = match (over, flavour) {
            (Over::Lock | Over::Read, _) => format!("SELECT {list} FROM {table}"),
            (Over::Count, _) => format!("SELECT COUNT(*) FROM {table}"),
            (Over::Delete, _) => format!("DELETE /*+ INDEX({name} {key}) */ FROM {name}"),
        };
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "{}{head} WHERE {} = ",
            explain.unwrap_or_default(),
            s.app_code
        ));
        qb.push_bind(app).push(format!(" AND {} IN (", s.event_id));
        let mut listed = qb.separated(", ");
        for id in ids {
            listed.push_bind(id);
        }
        // SKIP LOCKED: purge never waits for a row the relay (or anyone) holds, so it can never
        // be one side of a deadlock with it; such rows are counted and left for the next run.
        qb.push(match over {
            Over::Lock => ") FOR UPDATE SKIP LOCKED",
            _ => ")",
        });
        qb
    }

    /// MariaDB's delete of a chunk's rows in one statement: the ids as a derived table (a table
    /// value constructor, in the event id column's `collation`) read first and joined to the
    /// unique key — an `eq_ref` read of each named row and of no other row. MariaDB's
    /// single-table `DELETE … IN (…)` takes no index hint and plans a scan of the table (or of the
    /// app's rows by the key's first column) when the chunk is a large share of it, and so reads
    /// — and waits for — a row the relay holds beside the ones purge deletes (seen: 50 s, the
    /// server's lock timeout). It runs with `innodb_lock_wait_timeout = 0` for that statement
    /// alone: were it ever to meet a row lock, it fails at once instead of waiting, and the chunk
    /// is done again with [`PurgeQueries::point_deletes`]. `explain`: the statement `EXPLAIN`ed.
    /// The values are hexadecimal string literals: nothing in an event id can change the
    /// statement. (Measured on 200,000 rows: a third of the point deletes' database CPU, as
    /// pt-archiver's `IN` delete.)
    fn joined_delete(&self, app: &str, ids: &[String], collation: &str, explain: bool) -> String {
        let s = self.spec;
        let (name, key) = (s.name, s.event_key);
        let literal = |v: &str| format!("_utf8mb4 X'{}'", hex::encode(v.as_bytes()));
        let id = |v: &str| format!("{} COLLATE {collation}", literal(v));
        let Some((first, rest)) = ids.split_first() else {
            unreachable!("a delete of no rows is never sent")
        };
        let mut listed = format!("SELECT {} AS id", id(first));
        if !rest.is_empty() {
            listed.push_str(" UNION ALL VALUES ");
            for (i, v) in rest.iter().enumerate() {
                if i > 0 {
                    listed.push_str(", ");
                }
                listed.push_str(&format!("({})", id(v)));
            }
        }
        format!(
            "{head}DELETE {name} FROM ({listed}) AS purge_ids STRAIGHT_JOIN {name} FORCE INDEX ({key}) \
             ON {name}.{} = {} AND {name}.{} = purge_ids.id",
            s.app_code,
            literal(app),
            s.event_id,
            head = match explain {
                true => "EXPLAIN ",
                false => "SET STATEMENT innodb_lock_wait_timeout = 0 FOR ",
            },
        )
    }

    /// MariaDB's deletes of a chunk's rows one statement per row, by its full unique key, sent
    /// together (one round trip): a point delete reads the one row it names. For an event id
    /// column [`PurgeQueries::joined_delete`] cannot name the collation of, and a chunk its
    /// one statement met a lock in. (On MySQL, its hinted multi-row delete reads no other row —
    /// and MySQL's multi-table form deadlocked two apps purged side by side in 3 of 3 runs.) The
    /// values are hexadecimal string literals in the columns' character set: nothing in an event
    /// id can change the statement.
    fn point_deletes(&self, app: &str, ids: &[String]) -> String {
        let s = self.spec;
        let literal = |v: &str| format!("_utf8mb4 X'{}'", hex::encode(v.as_bytes()));
        let app = literal(app);
        ids.iter()
            .map(|id| {
                format!(
                    "DELETE FROM {} WHERE {} = {app} AND {} = {};",
                    s.name,
                    s.app_code,
                    s.event_id,
                    literal(id)
                )
            })
            .collect()
    }

    /// How the server plans each statement purge runs on the source for `ids` of `app` (what
    /// SPEC §5.14 holds them to: the rows named, by the unique key, and no other): per statement,
    /// its access to the source table (a derived table of the ids, read first, is not listed).
    pub async fn plans(&self, app: &str, ids: &[String]) -> Result<Vec<Plan>, DbError> {
        use sqlx::Row;
        let flavour = self.flavour().await?;
        let live = self.live().await?;
        let mut plans = Vec::new();
        for (statement, over) in [
            ("lock and read", Over::Lock),
            ("read (dry run)", Over::Read),
            ("count", Over::Count),
            ("delete", Over::Delete),
        ] {
            let rows = match (over, flavour, live.joinable.as_deref()) {
                (Over::Delete, Flavour::MariaDb, Some(collation)) if !ids.is_empty() => {
                    let sql = self.joined_delete(app, ids, collation, true);
                    sqlx::raw_sql(AssertSqlSafe(sql))
                        .fetch_all(&self.pool)
                        .await
                        .context(|| format!("explaining purge's {statement}"))?
                }
                // MariaDB deletes one row a statement then: the plan of a delete of one id.
                (Over::Delete, Flavour::MariaDb, None) => {
                    self.explain(over, flavour, app, &ids[..ids.len().min(1)], statement)
                        .await?
                }
                _ => self.explain(over, flavour, app, ids, statement).await?,
            };
            let access = rows
                .iter()
                .filter(|r| {
                    r.try_get_unchecked::<Option<Vec<u8>>, _>("table")
                        .ok()
                        .flatten()
                        .is_some_and(|t| t == self.spec.name.as_bytes())
                })
                .map(|r| {
                    // The servers type EXPLAIN's columns each their own way: read as text.
                    let text = |name: &str| {
                        r.try_get_unchecked::<Option<Vec<u8>>, _>(name)
                            .ok()
                            .flatten()
                            .map(|b: Vec<u8>| String::from_utf8_lossy(&b).into_owned())
                    };
                    let estimated = r
                        .try_get_unchecked::<Option<i64>, _>("rows")
                        .ok()
                        .flatten()
                        .or_else(|| text("rows").and_then(|n| n.parse::<i64>().ok()));
                    (text("type").unwrap_or_default(), text("key"), estimated)
                })
                .collect();
            plans.push(Plan { statement, access });
        }
        Ok(plans)
    }

    /// The server's `EXPLAIN` of a statement over `ids` as [`PurgeQueries::over_rows`] builds
    /// it. MySQL 9 explains as a tree unless asked for the table; MariaDB knows no `FORMAT=` but
    /// that table.
    async fn explain(
        &self,
        over: Over,
        flavour: Flavour,
        app: &str,
        ids: &[String],
        statement: &str,
    ) -> Result<Vec<sqlx::mysql::MySqlRow>, DbError> {
        for how in ["EXPLAIN FORMAT=TRADITIONAL ", "EXPLAIN "] {
            let mut qb = self.over_rows(
                over,
                flavour,
                app,
                ids.iter().map(String::as_str),
                Some(how),
            );
            match qb.build().fetch_all(&self.pool).await {
                Ok(found) if !found.is_empty() => return Ok(found),
                Ok(_) => {}
                Err(e) if how == "EXPLAIN " => {
                    return Err(e).context(|| format!("explaining purge's {statement}"))
                }
                Err(_) => {}
            }
        }
        Ok(Vec::new())
    }

    /// Deletes one chunk of a batch's members in one transaction: the receipt is locked and must
    /// still be VERIFIED (and not restored into the source), the rows are locked and compared
    /// with their members (`of.batch`: the table as the batch's lines hold it) against the table
    /// as it is in this transaction, and only rows exactly as archived are deleted, by primary
    /// key. A chunk the table's columns changed under is done again on the table as it is now.
    pub(crate) async fn purge_chunk(
        &self,
        of: ChunkOf<'_>,
        lock: &AppLock,
        include_restored: bool,
        failpoints: &FailPoints,
        now_ms: i64,
    ) -> Result<Chunk, PurgeError> {
        assert!(
            of.members.len() <= PURGE_CHUNK,
            "purge chunks hold at most {PURGE_CHUNK} rows"
        );
        let (mut changes, mut points) = (0, false);
        loop {
            let live = self.live().await?;
            let attempt = self
                .try_chunk(
                    of,
                    &live,
                    points,
                    lock,
                    include_restored,
                    failpoints,
                    now_ms,
                )
                .await?;
            match attempt {
                Attempt::Done(chunk) => return Ok(chunk),
                Attempt::DeleteWouldWait => {
                    tracing::info!(
                        table = self.spec.name,
                        batch_id = of.batch_id,
                        "a purge chunk's one-statement delete met a row lock (it does not wait): done again one row a statement"
                    );
                    points = true;
                }
                Attempt::TableChanged => {
                    changes += 1;
                    if changes == COLUMN_CHANGES {
                        return Err(PurgeError::Db(DbError::SourceShape(format!(
                            "the columns of {} changed under purge {COLUMN_CHANGES} times in a row: nothing of batch {}'s chunk was deleted; purge again once the table's migration is done",
                            self.spec.name, of.batch_id
                        ))));
                    }
                    tracing::info!(
                        table = self.spec.name,
                        batch_id = of.batch_id,
                        "the table's definition changed under a purge chunk: done again on the table as it is now"
                    );
                    self.forget_live().await
                }
            }
        }
    }

    /// One attempt at a chunk on the table described as `live` (`points`: its rows deleted one a
    /// statement): rolled back when the table, asked in the transaction once its rows are locked,
    /// is defined otherwise now, or when its one-statement delete met a row lock.
    #[allow(clippy::too_many_arguments)]
    async fn try_chunk(
        &self,
        of: ChunkOf<'_>,
        live: &Described,
        points: bool,
        lock: &AppLock,
        include_restored: bool,
        failpoints: &FailPoints,
        now_ms: i64,
    ) -> Result<Attempt, PurgeError> {
        let pool = &self.pool;
        let (app, batch_id) = (of.app, of.batch_id);
        let flavour = self.flavour().await?;
        let unarchived = Unarchived::of(of.batch, &live.columns);
        let mut tx = pool
            .begin()
            .await
            .context(|| format!("starting a purge transaction of batch {batch_id}"))?;
        let restored_at_ms = self.lock_receipt(&mut tx, app, batch_id).await?;
        if restored_at_ms.is_some() && !include_restored {
            return Ok(Attempt::Done(Chunk {
                restored: true,
                ..Chunk::default()
            }));
        }
        let recorded = match unarchived.is_empty() {
            true => Recorded::new(),
            false => self.recorded(&mut *tx, app, batch_id).await?,
        };
        let mut compared = self
            .compare(&mut *tx, flavour, of, true, &unarchived, &recorded)
            .await?;
        if !self.still(&mut tx, live).await? {
            tx.rollback()
                .await
                .context(|| format!("rolling back a purge chunk of batch {batch_id}"))?;
            return Ok(Attempt::TableChanged);
        }
        let seen = compared.exact.len() + compared.changed.len();
        if seen < of.members.len() {
            // Gone, or locked by another transaction (skipped): a plain read tells them apart.
            compared.busy = self
                .existing(app, of.members)
                .await?
                .saturating_sub(seen as u64);
        }
        let joinable = live.joinable.as_deref().filter(|_| !points);
        let how = Deleting {
            flavour,
            joinable,
            failpoints,
        };
        let Some(deleted) = self
            .delete_compared(tx, how, of, &unarchived, &compared, lock, now_ms)
            .await?
        else {
            return Ok(Attempt::DeleteWouldWait);
        };
        Ok(Attempt::Done(Chunk {
            purged: deleted,
            kept: compared.changed,
            kept_for_columns: compared.kept_for_columns,
            restored: false,
            busy: compared.busy,
        }))
    }

    /// The rest of a chunk's transaction once its rows are compared on the table as it is:
    /// deletes the exact ones, records what they held in columns their lines lack, counts them on
    /// the receipt, and commits while the app's lock is still held. Returns how many went, or
    /// `None` (rolled back) when the one-statement delete met a row lock.
    #[allow(clippy::too_many_arguments)]
    async fn delete_compared(
        &self,
        mut tx: Transaction<'_, MySql>,
        how: Deleting<'_>,
        of: ChunkOf<'_>,
        unarchived: &Unarchived,
        compared: &Compared,
        lock: &AppLock,
        now_ms: i64,
    ) -> Result<Option<u64>, PurgeError> {
        let (app, batch_id) = (of.app, of.batch_id);
        let deleted = if compared.exact.is_empty() {
            0
        } else {
            match self
                .delete_exact(&mut tx, how, app, batch_id, &compared.exact)
                .await?
            {
                Some(deleted) => deleted,
                None => {
                    tx.rollback()
                        .await
                        .context(|| format!("rolling back a purge chunk of batch {batch_id}"))?;
                    return Ok(None);
                }
            }
        };
        if !compared.record.is_empty() {
            let values: Vec<AddedValue> = compared
                .record
                .iter()
                .map(|(name, json)| AddedValue {
                    column_name: name.clone(),
                    encoding: unarchived.encoding_of(name).to_string(),
                    value_json: json.clone(),
                })
                .collect();
            AddedValues::new(self.spec)
                .insert(&mut tx, app, batch_id, &values, now_ms)
                .await?;
        }
        self.receipts
            .count_purged(&mut tx, app, batch_id, deleted)
            .await?;
        if !lock.held_per(&mut *tx).await? {
            return Err(lock.lost(batch_id, Doing::Purging).into());
        }
        how.failpoints.pass("before-purge-commit")?;
        tx.commit()
            .await
            .context(|| format!("committing a purge chunk of batch {batch_id}"))?;
        Ok(Some(deleted))
    }

    /// The first statement of a delete transaction: locks the batch's receipt row `FOR UPDATE`
    /// and returns its restored mark. A receipt no longer VERIFIED, or gone, is withdrawn.
    async fn lock_receipt(
        &self,
        tx: &mut Transaction<'_, MySql>,
        app: &str,
        batch_id: &str,
    ) -> Result<Option<i64>, PurgeError> {
        let sql = format!(
            "SELECT state, restored_at_ms FROM {} WHERE app_code = ? AND batch_id = ? FOR UPDATE",
            self.spec.receipts_table()
        );
        let receipt: Option<(String, Option<i64>)> = sqlx::query_as(AssertSqlSafe(sql))
            .bind(app)
            .bind(batch_id)
            .fetch_optional(&mut **tx)
            .await
            .context(|| format!("reading the receipt of batch {batch_id}"))?;
        match receipt {
            Some((state, _)) if state != STATE_VERIFIED => Err(PurgeError::Withdrawn {
                batch_id: batch_id.to_string(),
                now: format!("in state {state}"),
            }),
            None => Err(PurgeError::Withdrawn {
                batch_id: batch_id.to_string(),
                now: "deleted".into(),
            }),
            Some((_, restored_at_ms)) => Ok(restored_at_ms),
        }
    }

    /// Deletes the rows found exactly as archived (locked and compared in this transaction), by
    /// the unique key, and returns how many went: always all of them, or an error — or `None`
    /// when MariaDB's one-statement delete met a row lock (it fails at once rather than wait; the
    /// statement did nothing, and the caller rolls the transaction back).
    async fn delete_exact(
        &self,
        tx: &mut Transaction<'_, MySql>,
        how: Deleting<'_>,
        app: &str,
        batch_id: &str,
        exact: &[String],
    ) -> Result<Option<u64>, PurgeError> {
        let flavour = how.flavour;
        let deleted = match (flavour, how.joinable) {
            (Flavour::MariaDb, Some(collation)) => {
                if how
                    .failpoints
                    .pass("purge-joined-delete-would-wait")
                    .is_err()
                {
                    return Ok(None);
                }
                let sql = self.joined_delete(app, exact, collation, false);
                match sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut **tx).await {
                    Err(e) if lock_refused(&e) => return Ok(None),
                    done => done,
                }
            }
            (Flavour::MySql, _) => {
                self.over_rows(
                    Over::Delete,
                    flavour,
                    app,
                    exact.iter().map(String::as_str),
                    None,
                )
                .build()
                .execute(&mut **tx)
                .await
            }
            (Flavour::MariaDb, None) => {
                sqlx::raw_sql(AssertSqlSafe(self.point_deletes(app, exact)))
                    .execute(&mut **tx)
                    .await
            }
        }
        .context(|| format!("deleting members of batch {batch_id}"))?
        .rows_affected();
        if deleted != exact.len() as u64 {
            // The rows were locked: another count means something this code does not know.
            return Err(PurgeError::Db(DbError::Query {
                context: format!(
                    "deleting members of batch {batch_id}: {deleted} rows went of the {} locked and compared; rolled back",
                    exact.len()
                ),
                source: sqlx::Error::RowNotFound,
            }));
        }
        Ok(Some(deleted))
    }

    /// How many of these members' rows exist now (a plain read, outside the delete transaction:
    /// it does not wait for row locks).
    async fn existing(&self, app: &str, members: &[Member]) -> Result<u64, DbError> {
        let pool = &self.pool;
        let ids = members.iter().map(|m| m.event_id.as_str());
        let flavour = self.flavour().await?;
        let n: i64 = self
            .over_rows(Over::Count, flavour, app, ids, None)
            .build_query_scalar()
            .fetch_one(pool)
            .await
            .context(|| format!("counting the rows of app {app} a purge chunk left"))?;
        Ok(n.max(0) as u64)
    }

    /// Marks a batch done — only once every member it did not keep is proven gone: in the
    /// transaction that marks it, each is looked for by the unique key with a shared lock that
    /// does not wait. A row there (put back since its chunk was deleted) or one another
    /// transaction holds (put back and not committed yet) keeps the batch open, and the next
    /// purge looks at it again. A rerun skips a finished batch. `include_restored`: a restored
    /// batch purged again on purpose is no longer restored.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn finish(
        &self,
        app: &str,
        batch_id: &str,
        gone: &[&str],
        kept: u64,
        include_restored: bool,
        now_ms: i64,
    ) -> Result<Finished, PurgeError> {
        let pool = &self.pool;
        let flavour = self.flavour().await?;
        let mut tx = pool
            .begin()
            .await
            .context(|| format!("starting the transaction that finishes batch {batch_id}"))?;
        for chunk in gone.chunks(PURGE_CHUNK) {
            let mut qb = self.over_rows(Over::Read, flavour, app, chunk.iter().copied(), None);
            qb.push(match flavour {
                Flavour::MySql => " FOR SHARE NOWAIT",
                Flavour::MariaDb => " LOCK IN SHARE MODE NOWAIT",
            });
            match qb.build().fetch_all(&mut *tx).await {
                Ok(rows) if rows.is_empty() => {}
                Ok(rows) => return Ok(Finished::Back(rows.len() as u64)),
                // NOWAIT: another transaction holds one of them.
                Err(e) if lock_refused(&e) => return Ok(Finished::Held),
                Err(e) => {
                    return Err(PurgeError::Db(DbError::Query {
                        context: format!("proving the rows of batch {batch_id} gone"),
                        source: e,
                    }))
                }
            }
        }
        let marked = self
            .receipts
            .mark_purged(&mut tx, (app, batch_id), now_ms, kept, include_restored)
            .await?;
        if !marked {
            return Err(PurgeError::Withdrawn {
                batch_id: batch_id.to_string(),
                now: "no longer VERIFIED when it was to be marked purged".into(),
            });
        }
        tx.commit()
            .await
            .context(|| format!("marking batch {batch_id} purged"))?;
        Ok(Finished::Done)
    }
}

/// How a chunk's exact rows are deleted: on which server, on MariaDB in one statement (naming the
/// event id column's collation) or one row a statement, and the fail points passed on the way.
#[derive(Clone, Copy)]
struct Deleting<'a> {
    flavour: Flavour,
    joinable: Option<&'a str>,
    failpoints: &'a FailPoints,
}

/// A statement refused a row lock rather than wait for it: `NOWAIT` on MySQL (3572), a lock wait
/// timeout — `NOWAIT` or a wait of 0 seconds — on MariaDB (1205).
fn lock_refused(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(e)
        if e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            .is_some_and(|e| matches!(e.number(), 3572 | 1205)))
}
