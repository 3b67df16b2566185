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
//! table) is rolled back and done again on the table as it is now. A row the batch does not hold
//! whole — changed in place, or holding a column the batch's lines lack (added after it was
//! archived) — is kept and marked in the same transaction, to be archived again as it is now
//! ([`crate::db::kept`]): the store holds every value a deleted row held.

use std::sync::Arc;

use sqlx::{AssertSqlSafe, MySql, MySqlPool, Transaction};

use super::lock::{AppLock, Doing, LockLost};
use super::preflight::{Flavour, Server};
use super::{Context, DbError};
use crate::failpoint::{FailPoints, Tripped};
use crate::model::batch::Member;
use crate::model::profile::LiveColumn;
use crate::model::receipt::STATE_VERIFIED;
use crate::model::table::TableSpec;
use crate::model::unarchived::Unarchived;

mod compare;
mod statements;

use compare::Compared;
use statements::Over;

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
    /// would not put back.
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
        crate::db::layout::hold(&mut tx, self.spec).await?;
        let restored_at_ms = self.lock_receipt(&mut tx, app, batch_id).await?;
        if restored_at_ms.is_some() && !include_restored {
            return Ok(Attempt::Done(Chunk {
                restored: true,
                ..Chunk::default()
            }));
        }
        let mut compared = self
            .compare(&mut *tx, flavour, of, true, &unarchived)
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
            .delete_compared(tx, how, of, &compared, lock, now_ms)
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
    /// deletes the exact ones, marks the kept ones to be archived again, counts them on
    /// the receipt, and commits while the app's lock is still held. Returns how many went, or
    /// `None` (rolled back) when the one-statement delete met a row lock.
    #[allow(clippy::too_many_arguments)]
    async fn delete_compared(
        &self,
        mut tx: Transaction<'_, MySql>,
        how: Deleting<'_>,
        of: ChunkOf<'_>,
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
        // Kept, and marked to be archived again as they are now, in the transaction that
        // deleted the others: the mark and the delete commit together.
        crate::db::kept::Kept::new(&self.pool, self.spec)
            .mark(&mut tx, app, batch_id, &compared.again, now_ms)
            .await?;
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
        self.finish_counting(app, batch_id, gone, kept, include_restored, now_ms, 0)
            .await
    }

    /// [`PurgeQueries::finish`], counting `purged` more rows purged in the transaction that
    /// marks the batch (`recover`: a batch whose rows the source had lost already).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn finish_counting(
        &self,
        app: &str,
        batch_id: &str,
        gone: &[&str],
        kept: u64,
        include_restored: bool,
        now_ms: i64,
        purged: u64,
    ) -> Result<Finished, PurgeError> {
        let pool = &self.pool;
        let flavour = self.flavour().await?;
        let mut tx = pool
            .begin()
            .await
            .context(|| format!("starting the transaction that finishes batch {batch_id}"))?;
        crate::db::layout::hold(&mut tx, self.spec).await?;
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
        if purged > 0 {
            self.receipts
                .count_purged(&mut tx, app, batch_id, purged)
                .await?;
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
