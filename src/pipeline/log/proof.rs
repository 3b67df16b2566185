//! Proofs from a tree head's tiles: the inclusion of one batch's leaf for `purge`, and for
//! `attest` a period's heads, their consistency proofs and its batches' inclusion — each
//! reading only the tiles on the paths it needs, kept for the run.

use super::heads::{self, Seen};
use super::tiles::Tiles;
use super::{b64, entry_of, Log, LogError};
use crate::model::note::Checkpoint;
use crate::model::receipt::Receipt;
use crate::model::tlog::{self, Hash};
use crate::pipeline::log::finding::{LogFinding, Problem};
use crate::pipeline::report::statement::{LogStatement, SeenHead, TreeHead};

/// Proves batches' leaves for `purge`: each receipt held to the leaf at its index in the tree
/// head the store holds, by an inclusion proof (O(log n) hashes, tiles read once per run).
pub(crate) struct Prover<'l, 'a> {
    log: &'l Log<'a>,
    head: Option<Checkpoint>,
    tiles: Tiles<'l, 'a>,
    /// The checkpoint is smaller than, or not grown from, a head the log was published at:
    /// nothing is proven on its word.
    rollback: Option<LogFinding>,
}

impl<'l, 'a> Prover<'l, 'a> {
    pub(crate) async fn open(log: &'l Log<'a>) -> Result<Prover<'l, 'a>, LogError> {
        let head = log.checkpoint().await?;
        let size = head.as_ref().map_or(0, |c| c.size);
        let rollback = heads::rollback(log, head.as_ref()).await?;
        Ok(Prover {
            log,
            head,
            tiles: Tiles::new(log, size),
            rollback,
        })
    }

    /// Whether the database is behind the log (restored from a backup): [`super::behind`] on the
    /// head this prover read.
    pub(crate) async fn behind(&self) -> Result<Option<super::Behind>, LogError> {
        super::recovery::behind_at(self.log, self.head.as_ref()).await
    }

    /// Whether `receipt` is the leaf at its index: none when it is, else the finding.
    pub(crate) async fn prove(
        &mut self,
        receipt: &Receipt,
    ) -> Result<Option<LogFinding>, LogError> {
        if let Some(f) = &self.rollback {
            return Ok(Some(LogFinding {
                batch_id: Some(receipt.batch_id.clone()),
                ..f.clone()
            }));
        }
        let Some(index) = receipt.log_index else {
            return Ok(Some(LogFinding {
                problem: Problem::Gap,
                seq: None,
                batch_id: Some(receipt.batch_id.clone()),
                expected: "its batch in the store's log".into(),
                actual: "not appended to the log yet (the archive run that recorded it ended before appending it); the next `outbox-archiver archive` of the app appends it".into(),
            }));
        };
        let size = self.tiles.size;
        let Some(head) = self.head.as_ref().filter(|_| index < size) else {
            return Ok(Some(LogFinding {
                problem: Problem::Gap,
                seq: Some(index),
                batch_id: Some(receipt.batch_id.clone()),
                expected: format!("leaf {index} in the store's log"),
                actual: format!("the store's log holds {size} leaves (its checkpoint written back, or the log lost)"),
            }));
        };
        let entry = entry_of(self.log.ctx, &self.log.folder, receipt);
        let proof = match self.tiles.inclusion(index, size).await {
            Ok(p) => p,
            Err(LogError::Refused { detail, .. }) => {
                return Ok(Some(LogFinding {
                    problem: Problem::Mismatch,
                    seq: Some(index),
                    batch_id: Some(receipt.batch_id.clone()),
                    expected: format!("the tiles that prove leaf {index}"),
                    actual: detail,
                }))
            }
            Err(e) => return Err(e),
        };
        if tlog::check_inclusion(&proof, index, size, &tlog::leaf_hash(&entry), &head.root) {
            return Ok(None);
        }
        Ok(Some(LogFinding {
            problem: Problem::Mismatch,
            seq: Some(index),
            batch_id: Some(receipt.batch_id.clone()),
            expected: format!("the receipt's entry the leaf at {index} of the tree of {size} leaves (root {})", b64(&head.root)),
            actual: "its inclusion proof fails: the receipt changed since it was logged, or the store's tiles were rewritten".into(),
        }))
    }
}

/// The proofs a statement carries for one app's period: the tree heads at the period's start
/// and end, the consistency proofs start → end → the checkpoint, and each batch's inclusion in
/// the head at the end.
pub(crate) struct PeriodProof {
    pub checkpoint: String,
    pub size: u64,
    pub start: (u64, Hash),
    pub end: (u64, Hash),
    pub start_to_end: Vec<Hash>,
    pub end_to_checkpoint: Vec<Hash>,
    /// Per batch of the period (in the order given): its leaf and inclusion proof.
    pub inclusions: Vec<(u64, Vec<Hash>)>,
    /// The heads the log was seen at before (the previous statement's checkpoint, the largest
    /// head it was published at), each with the consistency proof from it to the checkpoint.
    pub seen: Vec<(Seen, Vec<Hash>)>,
}

impl PeriodProof {
    /// The proof as the statement carries it, for the app whose log is named `folder` and has
    /// the origin line `origin`.
    pub(crate) fn statement(&self, folder: &str, origin: &str) -> LogStatement {
        let list = |p: &[Hash]| p.iter().map(b64).collect::<Vec<_>>();
        let head = |(size, root): &(u64, Hash)| TreeHead {
            size: *size,
            root: b64(root),
        };
        LogStatement {
            app_code: folder.to_string(),
            entry: format!(
                "{}\\n{{table}}\\n{{app_code}}\\n{{batch_id}}\\n{{manifest_sha256}}\\n",
                tlog::ENTRY_SCHEMA
            ),
            origin: origin.to_string(),
            checkpoint: self.checkpoint.clone(),
            size: self.size,
            at_start: head(&self.start),
            at_end: head(&self.end),
            start_to_end: list(&self.start_to_end),
            end_to_checkpoint: list(&self.end_to_checkpoint),
            heads_seen: self
                .seen
                .iter()
                .map(|(s, proof)| SeenHead {
                    size: s.size,
                    root: b64(&s.root),
                    source: s.source.clone(),
                    to_checkpoint: list(proof),
                })
                .collect(),
        }
    }
}

/// Proves a period for `attest`: `receipts` (the period's, logged) in the tree head at the
/// period's end (`end` leaves), consistent with the head at its start (`start` leaves) and
/// with the store's checkpoint, and the checkpoint grown from every head seen before —
/// `previous` (the previous statement's) and the largest the log was published at. Reads the
/// tiles on those paths only.
pub(crate) async fn prove_period(
    log: &Log<'_>,
    receipts: &[Receipt],
    (start, end): (u64, u64),
    previous: Option<Seen>,
) -> Result<Result<PeriodProof, LogFinding>, LogError> {
    let Some((head, note)) = log.checkpoint_note().await? else {
        return Ok(Err(LogFinding {
            problem: Problem::Gap,
            seq: None,
            batch_id: None,
            expected: "a log in the store".into(),
            actual: "the store holds no checkpoint of the app".into(),
        }));
    };
    if end > head.size {
        return Ok(Err(LogFinding {
            problem: Problem::Gap,
            seq: Some(end),
            batch_id: None,
            expected: format!("{end} leaves in the store's log"),
            actual: format!("its checkpoint holds {}", head.size),
        }));
    }
    let mut tiles = Tiles::new(log, head.size);
    let mut seen = Vec::new();
    let published = match heads::published(log).await? {
        Ok(s) => s,
        Err(finding) => return Ok(Err(finding)),
    };
    for s in previous.into_iter().chain(published) {
        match heads::held_to(&mut tiles, Some(&head), &s).await? {
            Ok(proof) => seen.push((s, proof)),
            Err(f) => return Ok(Err(f)),
        }
    }
    let (start_root, end_root) = (tiles.root_at(start).await?, tiles.root_at(end).await?);
    let start_to_end = tiles.consistency(start, end).await?;
    let end_to_checkpoint = tiles.consistency(end, head.size).await?;
    let consistent = (start == 0
        || tlog::check_consistency(&start_to_end, start, &start_root, end, &end_root))
        && (end == 0
            || tlog::check_consistency(&end_to_checkpoint, end, &end_root, head.size, &head.root));
    if !consistent {
        return Ok(Err(LogFinding { problem: Problem::Fork, seq: Some(end), batch_id: None, expected: "the period's tree heads prefixes of the checkpoint's tree".into(), actual: "a consistency proof from the tiles fails: the tiles or the checkpoint were rewritten".into() }));
    }
    let mut inclusions = Vec::new();
    for r in receipts {
        let index = r.log_index.expect("the period's receipts are logged");
        let proof = tiles.inclusion(index, end).await?;
        let leaf = tlog::leaf_hash(&entry_of(log.ctx, &log.folder, r));
        if !tlog::check_inclusion(&proof, index, end, &leaf, &end_root) {
            return Ok(Err(LogFinding { problem: Problem::Mismatch, seq: Some(index), batch_id: Some(r.batch_id.clone()), expected: format!("batch {}'s entry the leaf at {index}", r.batch_id), actual: "its inclusion proof fails: the receipt changed since it was logged, or the tiles were rewritten".into() }));
        }
        inclusions.push((index, proof));
    }
    Ok(Ok(PeriodProof {
        checkpoint: String::from_utf8_lossy(&note).into_owned(),
        size: head.size,
        start: (start, start_root),
        end: (end, end_root),
        start_to_end,
        end_to_checkpoint,
        inclusions,
        seen,
    }))
}
