//! The one READ COMMITTED transaction that records a verified batch (SPEC §5.2): receipt and
//! exact members together or nothing, members written in chunks of at most 500 and read back,
//! the app's lock re-checked just before the commit.
//!
//! Recording is idempotent: a retry of the same batch (a commit whose answer was lost) finds the
//! same receipt and the same members and changes nothing. Anything that disagrees — the same
//! version of a row already owned by another batch, a control value that differs from an existing
//! receipt of the same batch id, a straggler batch that would move the cursor — fails the
//! transaction, and nothing is recorded.
//!
//! A row that another batch archived and that came back delivered with a different
//! `updated_at_ms` (an operator replayed the event) is not a conflict (SPEC §5.10): this batch's
//! version supersedes the older one. The member row moves to this batch, and the older version is
//! kept in the superseded table as its own batch's, for `verify` and `restore`.

use std::collections::{BTreeMap, HashMap};

use sqlx::{MySql, MySqlPool, Transaction};

use super::kept::Kept;
use super::lock::{AppLock, Doing, LockLost};
use super::members::{Members, OnDuplicate, Owner};
use super::receipts::Receipts;
use super::{Context, DbError};
use crate::failpoint::{FailPoints, Tripped};
use crate::model::batch::{Member, Superseded};
use crate::model::receipt::Receipt;
use crate::model::table::TableSpec;

/// Members are written and read back in chunks of at most this many (SPEC §5.2).
const MEMBER_CHUNK: usize = 500;

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
    #[error(transparent)]
    LockLost(#[from] LockLost),
    #[error("straggler batch {batch_id} ends at {last}, above app {app}'s cursor (a straggler changed while it was read); nothing recorded — run `outbox-archiver verify --app {app}`")]
    StragglerAboveCursor {
        batch_id: String,
        app: String,
        last: String,
    },
    #[error(transparent)]
    Failpoint(#[from] Tripped),
}

/// Records verified batches of one outbox table.
#[derive(Debug, Clone)]
pub struct Recorder {
    spec: &'static TableSpec,
    pool: MySqlPool,
    receipts: Receipts,
    members: Members,
}

impl Recorder {
    pub fn new(pool: &MySqlPool, spec: &'static TableSpec) -> Recorder {
        Recorder {
            pool: pool.clone(),
            spec,
            receipts: Receipts::new(pool, spec),
            members: Members::new(pool, spec),
        }
    }

    /// Records a verified batch: receipt and members in one transaction, the lock re-checked
    /// just before the commit. Returns the older versions of rows this batch superseded.
    pub async fn record(
        &self,
        receipt: &Receipt,
        members: &[Member],
        cut: Cut,
        lock: &AppLock,
        failpoints: &FailPoints,
    ) -> Result<Vec<Superseded>, RecordError> {
        let pool = &self.pool;
        let batch = &receipt.batch_id;
        let mut tx = pool
            .begin()
            .await
            .context(|| format!("starting the receipt transaction of batch {batch}"))?;
        super::layout::hold(&mut tx, self.spec).await?;
        let head = self.receipts.lock_head(&mut tx, &receipt.app_code).await?;
        let last = &receipt.content.last;
        // The cursor is the greatest last cursor among the receipts: a straggler batch may record
        // only if some receipt already reaches as far as its last row.
        if cut == Cut::Stragglers
            && !self
                .receipts
                .reaches(&mut *tx, &receipt.app_code, last)
                .await?
        {
            return Err(RecordError::StragglerAboveCursor {
                batch_id: batch.clone(),
                app: receipt.app_code.clone(),
                last: last.to_string(),
            });
        }
        let verified_at_ms = self.insert_receipt(&mut tx, receipt).await?;
        let superseded = self
            .write_members(&mut tx, receipt, verified_at_ms, members)
            .await?;
        if cut == Cut::Stragglers {
            // The rows purge kept that this batch archives again: no longer waiting.
            let kept = Kept::new(&self.pool, self.spec);
            for chunk in members.chunks(MEMBER_CHUNK) {
                let ids: Vec<&str> = chunk.iter().map(|m| m.event_id.as_str()).collect();
                kept.clear(&mut *tx, &receipt.app_code, &ids).await?;
            }
        }
        failpoints.pass("after-members")?;
        // Its link, and those of any receipt an older build recorded before it (SPEC §5.2).
        self.receipts
            .link_pending(&mut tx, &receipt.app_code, head)
            .await?;
        if !lock.held_per(&mut *tx).await? {
            return Err(lock.lost(batch, Doing::Recording).into());
        }
        failpoints.pass("before-commit")?;
        tx.commit()
            .await
            .context(|| format!("committing receipt {batch}"))?;
        Ok(superseded)
    }

    /// Inserts the receipt (a no-op if it exists) and holds it to one recorded before under its
    /// batch id; returns the verification time members carry (an existing receipt's, on a retry).
    async fn insert_receipt(
        &self,
        tx: &mut Transaction<'_, MySql>,
        receipt: &Receipt,
    ) -> Result<i64, RecordError> {
        match super::receipts::insert(tx, self.spec, receipt).await? {
            Ok(verified_at_ms) => Ok(verified_at_ms),
            Err(m) => Err(RecordError::ReceiptConflict {
                batch_id: receipt.batch_id.clone(),
                field: m.field,
                recorded: m.recorded,
                now: m.now,
            }),
        }
    }

    /// Writes the members in chunks and reads them back. The common case — every row new — is
    /// plain inserts in archive order (each row after the one before, at the end of the app's
    /// range), proven by one range of the batch read back: exactly these `(event_id,
    /// updated_at_ms, fingerprint)`, no more, no fewer. A chunk with a row that is a member
    /// already (of this batch, on a retry; of another, superseded or a conflict) fails its
    /// plain insert — InnoDB rolls back that statement alone — and goes in keeping what exists;
    /// then every chunk is read back by event id and sorted out. Returns the older versions
    /// this batch superseded.
    async fn write_members(
        &self,
        tx: &mut Transaction<'_, MySql>,
        receipt: &Receipt,
        verified_at_ms: i64,
        members: &[Member],
    ) -> Result<Vec<Superseded>, RecordError> {
        let batch = &receipt.batch_id;
        let owner = Owner {
            app_code: &receipt.app_code,
            batch_id: batch,
        };
        let writing = || format!("writing members of batch {batch}");
        for chunk in members.chunks(MEMBER_CHUNK) {
            match self
                .members
                .insert(tx, owner, chunk, OnDuplicate::Fail)
                .await
            {
                Ok(()) => {}
                Err(e) if is_duplicate_key(&e) => self
                    .members
                    .insert(tx, owner, chunk, OnDuplicate::Keep)
                    .await
                    .context(writing)?,
                Err(source) => {
                    return Err(DbError::Query {
                        context: writing(),
                        source,
                    }
                    .into())
                }
            }
        }
        let recorded = self
            .members
            .versions_of_batch(tx, &receipt.app_code, batch)
            .await
            .context(|| format!("reading back members of batch {batch}"))?;
        if same_members(recorded, members) {
            return Ok(Vec::new());
        }
        let mut superseded = Vec::new();
        for chunk in members.chunks(MEMBER_CHUNK) {
            superseded.extend(
                self.sort_out(tx, receipt, owner, verified_at_ms, chunk)
                    .await?,
            );
        }
        Ok(superseded)
    }

    /// Reads one chunk of members back by event id and decides, row by row, whether each is
    /// this batch's, an older version this batch supersedes, or a conflict.
    async fn sort_out(
        &self,
        tx: &mut Transaction<'_, MySql>,
        receipt: &Receipt,
        owner: Owner<'_>,
        verified_at_ms: i64,
        chunk: &[Member],
    ) -> Result<Vec<Superseded>, RecordError> {
        let batch = &receipt.batch_id;
        let rows = self
            .members
            .read_back(tx, &receipt.app_code, chunk)
            .await
            .context(|| format!("reading back members of batch {batch}"))?;
        let expected: HashMap<&str, &Member> =
            chunk.iter().map(|m| (m.event_id.as_str(), m)).collect();
        // Rows purge kept because they are not what their batch holds at that version (changed
        // in place, or holding a column added since): this batch, which holds them as they are
        // now, supersedes them at the same `updated_at_ms`.
        let at_same_version = rows.iter().any(|r| {
            r.batch_id != *batch
                && expected
                    .get(r.event_id.as_str())
                    .is_some_and(|m| m.updated_at_ms == r.updated_at_ms)
        });
        let kept = match at_same_version {
            true => {
                let ids: Vec<&str> = rows.iter().map(|r| r.event_id.as_str()).collect();
                Kept::new(&self.pool, self.spec)
                    .among(tx, &receipt.app_code, &ids)
                    .await?
            }
            false => Default::default(),
        };
        let mut found = 0;
        let mut older = Vec::new();
        for row in rows {
            let member = expected.get(row.event_id.as_str());
            let want = member.map(|m| m.updated_at_ms);
            // A member row recorded before fingerprints were (an earlier attempt of this very
            // batch, by an older build) has none: that is no disagreement.
            let ours = want == Some(row.updated_at_ms)
                && &row.batch_id == batch
                && row
                    .fingerprint()
                    .is_none_or(|f| member.is_some_and(|m| m.fingerprint == Some(f)));
            if ours {
                found += 1;
            } else if &row.batch_id != batch
                && (want.is_some_and(|w| w != row.updated_at_ms)
                    || kept.contains(&(row.event_id.clone(), row.batch_id.clone())))
            {
                // Another batch archived another version of this row, or this version before
                // purge kept it changed: this one supersedes it.
                older.push(Superseded {
                    fingerprint: row.fingerprint(),
                    event_id: row.event_id,
                    updated_at_ms: row.updated_at_ms,
                    batch_id: row.batch_id,
                });
                found += 1;
            } else {
                return Err(RecordError::MemberConflict {
                    batch_id: batch.clone(),
                    event_id: row.event_id,
                    updated_at_ms: row.updated_at_ms,
                    other_batch: row.batch_id,
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
            self.supersede(tx, owner, verified_at_ms, &older, &expected)
                .await?;
        }
        Ok(older)
    }

    /// Moves the member rows of `older` versions to this batch and keeps the older versions as
    /// their own batches' (SPEC §5.10), inside the receipt transaction.
    async fn supersede(
        &self,
        tx: &mut Transaction<'_, MySql>,
        owner: Owner<'_>,
        verified_at_ms: i64,
        older: &[Superseded],
        versions: &HashMap<&str, &Member>,
    ) -> Result<(), RecordError> {
        let (app, batch) = (owner.app_code, owner.batch_id);
        let context = || format!("superseding older versions of rows in batch {batch}");
        let retired = self
            .members
            .retire(tx, app, batch, verified_at_ms, older)
            .await
            .context(context)?;
        if retired != older.len() as u64 {
            return Err(RecordError::MemberReadback {
                batch_id: batch.to_string(),
                expected: older.len(),
                found: retired as usize,
            });
        }
        let newer: Vec<Member> = older
            .iter()
            .map(|o| versions[o.event_id.as_str()].clone())
            .collect();
        self.members
            .insert(tx, owner, &newer, OnDuplicate::Fail)
            .await
            .context(context)?;
        // Read back, as every member is (SPEC §5.2).
        let moved = self
            .members
            .read_back(tx, app, &newer)
            .await
            .context(context)?;
        let ours = moved
            .iter()
            .filter(|m| {
                versions.get(m.event_id.as_str()).is_some_and(|v| {
                    v.updated_at_ms == m.updated_at_ms && v.fingerprint == m.fingerprint()
                }) && m.batch_id == batch
            })
            .count();
        if ours != older.len() {
            return Err(RecordError::MemberReadback {
                batch_id: batch.to_string(),
                expected: older.len(),
                found: ours,
            });
        }
        let mut per_batch: BTreeMap<&str, i64> = BTreeMap::new();
        for o in older {
            *per_batch.entry(o.batch_id.as_str()).or_default() += 1;
        }
        for (old_batch, n) in per_batch {
            self.receipts
                .add_superseded(&mut **tx, app, old_batch, n)
                .await?;
        }
        Ok(())
    }
}

/// Whether a batch's member rows as read back are exactly its members: the same `(event_id,
/// updated_at_ms, fingerprint)`, as many of each (compared sorted: the database's order of event
/// ids need not be Rust's).
fn same_members(mut recorded: Vec<Member>, members: &[Member]) -> bool {
    if recorded.len() != members.len() {
        return false;
    }
    fn key(m: &Member) -> (&str, i64, Option<[u8; 16]>) {
        (
            m.event_id.as_str(),
            m.updated_at_ms,
            m.fingerprint.map(|f| f.0),
        )
    }
    let mut expected: Vec<&Member> = members.iter().collect();
    expected.sort_unstable_by(|a, b| key(a).cmp(&key(b)));
    recorded.sort_unstable_by(|a, b| key(a).cmp(&key(b)));
    recorded.iter().map(key).eq(expected.into_iter().map(key))
}

/// A duplicate key (error 1062): the statement was rolled back, the transaction goes on.
fn is_duplicate_key(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db)
        if db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>().is_some_and(|e| e.number() == 1062))
}
