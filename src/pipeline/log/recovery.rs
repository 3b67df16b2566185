//! The database behind the store's log (SPEC §5.19; README, `recover`): a primary restored
//! from last night's backup has lost the receipts of the batches
//! archived since, which the store's log still holds. [`behind`] tells archive and purge so
//! before they work (archive would cut the same rows again: another batch, another object), and
//! [`Recovery`] is `recover`'s walk of the leaves the database lacks: the database's own receipts
//! among them taken, every other one handed to `recover` to re-record from the store's bytes.
//!
//! Behind is told from a rollback and a fork by the batches: every leaf past the database's is a
//! batch of which the database has no receipt at all. A leaf whose batch has a receipt that
//! implies another entry is a fork (a receipt rewritten), which the append refuses as before.

use serde::Serialize;

use super::tiles::Tiles;
use super::{entry_of, heads, identity, Log, LogError};
use crate::model::format;
use crate::model::note::Checkpoint;
use crate::model::protection::PutOptions;
use crate::model::tlog::{self, TILE_WIDTH};
use crate::pipeline::log::finding::Problem;
use crate::pipeline::RunContext;

/// A leaf of the store's log whose batch the database has no receipt of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lost {
    pub index: u64,
    pub batch_id: String,
    /// The manifest hash the leaf binds.
    pub manifest_sha256: String,
}

/// The store's log holds batches the database has no receipt of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Behind {
    pub app: String,
    /// Leaves the database knows (receipts logged), and the store's tree size.
    pub known: u64,
    pub size: u64,
    pub lost: u64,
    pub first: Lost,
}

impl std::fmt::Display for Behind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the database is behind the store: app {app}'s log holds {lost} batch(es) the database has no receipt of (from leaf {first}, batch {batch}; the database knows {known} of {size} leaves) — restored from a backup? Nothing is done on the database's older picture (archive would cut the same rows into other batches a second time): run `outbox-archiver recover --app {app} --reason TEXT`, which reads each of them in full from the store and records it again",
            app = self.app,
            lost = self.lost,
            first = self.first.index,
            batch = self.first.batch_id,
            known = self.known,
            size = self.size,
        )
    }
}

/// Whether the database is behind the app's log in the store: one GET of the checkpoint and
/// one query when it is not (the case of every run); the leaves past the database's read only
/// when there are some (a run that ended between the store and the database leaves its own,
/// which are not lost).
pub(crate) async fn behind(ctx: &RunContext, app: &str) -> Result<Option<Behind>, LogError> {
    let log = Log::open(ctx, app).await?;
    let head = log.checkpoint().await?;
    behind_at(&log, head.as_ref()).await
}

/// [`behind`] for archive, the head read as its append reads it: a log begun unsigned is
/// taken from a run that signs it from now on.
pub(crate) async fn behind_to_append(
    ctx: &RunContext,
    app: &str,
) -> Result<Option<Behind>, LogError> {
    let log = Log::open(ctx, app).await?;
    let head = log.head_to_append().await?.0;
    behind_at(&log, head.as_ref()).await
}

/// [`behind`] of a log whose head the caller has read already (purge's prover).
pub(super) async fn behind_at(
    log: &Log<'_>,
    head: Option<&Checkpoint>,
) -> Result<Option<Behind>, LogError> {
    let Some(head) = head else {
        return Ok(None);
    };
    let (known, _) = known(log).await?;
    if known >= head.size {
        return Ok(None);
    }
    let mut lost = Vec::new();
    for leaf in past(log, known, head.size).await? {
        match classify(log, &leaf).await? {
            Leaf::Lost(l) => lost.push(l),
            Leaf::Ours(_) => {}
            // A receipt that implies another entry: a fork, not a restore (the append names it).
            Leaf::Other(_) => return Ok(None),
        }
    }
    Ok(lost.first().cloned().map(|first| Behind {
        app: log.app.clone(),
        known,
        size: head.size,
        lost: lost.len() as u64,
        first,
    }))
}

/// The leaves the database knows (its receipts' highest leaf, plus one) and the chain seq of
/// that receipt.
async fn known(log: &Log<'_>) -> Result<(u64, u64), LogError> {
    Ok(match log.ctx.tables.receipts.last_logged(&log.app).await? {
        Some((index, seq)) => (index + 1, seq),
        None => (0, 0),
    })
}

/// One leaf past the database's: its index and entry.
struct Past {
    index: u64,
    entry: Vec<u8>,
}

/// The leaves `known..size` of the store's tree, in order, but those a break accepted.
async fn past(log: &Log<'_>, known: u64, size: u64) -> Result<Vec<Past>, LogError> {
    let accepted: std::collections::HashSet<u64> = log
        .breaks()
        .await?
        .iter()
        .flat_map(|b| b.leaves.iter().map(|(i, _)| *i))
        .collect();
    let mut out = Vec::new();
    for bundle in known / TILE_WIDTH..size.div_ceil(TILE_WIDTH) {
        for (i, entry) in log.entries(bundle, size).await?.into_iter().enumerate() {
            let index = bundle * TILE_WIDTH + i as u64;
            if index >= known && !accepted.contains(&index) {
                out.push(Past { index, entry });
            }
        }
    }
    Ok(out)
}

/// What a leaf past the database's is.
enum Leaf {
    /// A receipt of the database's, not given its leaf yet (a run that ended between the store
    /// and the database): its batch id and index.
    Ours((String, u64)),
    /// A batch the database has no receipt of.
    Lost(Lost),
    /// A receipt of that batch that implies another entry, or is logged elsewhere: a fork.
    Other(String),
}

async fn classify(log: &Log<'_>, leaf: &Past) -> Result<Leaf, LogError> {
    let Some(fields) = tlog::parse_entry(&leaf.entry) else {
        return Ok(Leaf::Other(format!(
            "leaf {} is no entry of a batch: {}",
            leaf.index,
            String::from_utf8_lossy(&leaf.entry)
        )));
    };
    let (batch, manifest) = (fields[2].to_string(), fields[3].to_string());
    match log.ctx.tables.receipts.get(&log.app, &batch).await? {
        None => Ok(Leaf::Lost(Lost {
            index: leaf.index,
            batch_id: batch,
            manifest_sha256: manifest,
        })),
        Some(r) if r.log_index.is_none() && entry_of(log.ctx, &log.folder, &r) == leaf.entry => {
            Ok(Leaf::Ours((batch, leaf.index)))
        }
        Some(r) => Ok(Leaf::Other(format!(
            "leaf {} logs batch {batch}, whose receipt {} ({})",
            leaf.index,
            match r.log_index {
                Some(i) => format!("is logged at leaf {i}"),
                None => "implies another entry (rewritten since it was logged?)".to_string(),
            },
            Problem::Fork.kind().label()
        ))),
    }
}

/// The schema of a recovery record.
const RECOVERY_SCHEMA: &str = "outbox-archive-log-recovery/v1";

/// What `recover` re-recorded from the store, and why: written once beside the log's breaks
/// (`recoveries/{first}-{n}.json`), so that the store says when its database was carried on.
#[derive(Debug, Clone, Serialize)]
struct RecoveryRecord {
    schema: &'static str,
    table: String,
    app_code: String,
    /// `[leaf, batch id]` of each batch recorded again.
    leaves: Vec<(u64, String)>,
    reason: String,
    recovered_at_ms: i64,
}

/// `recover`'s walk of one app's log (under the app's lock): the store's checkpoint held to the
/// largest head seen (a rollback is refused, not recovered), the database's own receipts among
/// the leaves past its own given their leaves, and the batches the database lacks listed, in
/// leaf order, for `recover` to read and record ([`Recovery::recorded`] gives each its leaf).
pub(crate) struct Recovery<'a> {
    log: Log<'a>,
    head: Checkpoint,
    /// The database's own receipts given their leaves.
    pub taken: u64,
    pub lost: Vec<Lost>,
}

impl<'a> Recovery<'a> {
    /// Opens the app's log to recover it; `None`: the app has no log.
    pub(crate) async fn begin(
        ctx: &'a RunContext,
        app: &str,
    ) -> Result<Option<Recovery<'a>>, LogError> {
        let log = Log::open_for(ctx, app, identity::Purpose::Append).await?;
        let Some(head) = log.checkpoint().await? else {
            return Ok(None);
        };
        if let Some(seen) = log.largest_seen().await? {
            let mut tiles = Tiles::new(&log, head.size);
            if let Err(f) = heads::held_to(&mut tiles, Some(&head), &seen).await? {
                return Err(log.refused(format!(
                    "expected {}; {} ({}) — a store written back is not a database behind it: nothing is recovered",
                    f.expected,
                    f.actual,
                    Problem::Rollback.kind().label()
                )));
            }
        }
        let (known, _) = known(&log).await?;
        if known > head.size {
            return Err(log.refused(format!(
                "the database's receipts are logged up to leaf {}, the store's checkpoint holds {} leaves: the store is behind the database, not the database behind it ({})",
                known - 1,
                head.size,
                Problem::Gap.kind().label()
            )));
        }
        let (mut taken, mut lost) = (Vec::new(), Vec::new());
        for leaf in past(&log, known, head.size).await? {
            match classify(&log, &leaf).await? {
                Leaf::Ours(t) => taken.push(t),
                Leaf::Lost(l) => lost.push(l),
                Leaf::Other(why) => {
                    return Err(log.refused(format!(
                        "{why}: a batch the database knows under another entry is not a batch it lost; nothing is recovered"
                    )))
                }
            }
        }
        ctx.tables.receipts.set_leaves(app, &taken).await?;
        Ok(Some(Recovery {
            log,
            head,
            taken: taken.len() as u64,
            lost,
        }))
    }

    /// The folder the app's log (and its entries) name the app by.
    pub(crate) fn folder(&self) -> &str {
        &self.log.folder
    }

    /// A batch `recover` recorded again: its receipt given its leaf.
    pub(crate) async fn recorded(&self, lost: &Lost) -> Result<(), LogError> {
        self.log
            .ctx
            .tables
            .receipts
            .set_leaves(&self.log.app, &[(lost.batch_id.clone(), lost.index)])
            .await?;
        Ok(())
    }

    /// The recovery ended: the tree head recorded in the database (the heads it lost with its
    /// backup), and what was recorded again kept write-once in the store with the reason.
    /// Returns the record's key, if any batch was recovered.
    pub(crate) async fn finish(
        self,
        recovered: &[Lost],
        reason: &str,
        options: &PutOptions,
    ) -> Result<Option<String>, LogError> {
        self.log.record_head(&self.head).await?;
        let Some(first) = recovered.first() else {
            return Ok(None);
        };
        let record = RecoveryRecord {
            schema: RECOVERY_SCHEMA,
            table: self.log.ctx.spec.name.to_string(),
            app_code: self.log.folder.clone(),
            leaves: recovered
                .iter()
                .map(|l| (l.index, l.batch_id.clone()))
                .collect(),
            reason: reason.to_string(),
            recovered_at_ms: self.log.ctx.now(),
        };
        let key = self
            .log
            .key(&format::log_recovery_path(first.index, recovered.len()));
        let bytes = serde_json::to_vec(&record).expect("a record always serialises");
        self.log.write_once(&key, bytes, options).await?;
        Ok(Some(key.to_string()))
    }
}
