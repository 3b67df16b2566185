//! The largest tree head a log was ever published at, remembered where a writer of the store's
//! `checkpoint` alone cannot take it back (README, "What each party keeps"): every checkpoint an
//! archive run writes is also kept write-once under its size (`heads/`, under the batches'
//! retention), and recorded in the database (`_log_heads`). A checkpoint smaller than the
//! largest head remembered, or whose tree does not grow from it, is a rollback: archive appends
//! nothing after it (it would write over the leaves the larger tree holds), purge deletes
//! nothing on its word, verify and attest report it (`log_rollback`). C2SP tlog-witness and
//! Go's sumdb clients hold a log to the largest tree they have seen the same way.

use bytes::Bytes;

use super::tiles::Tiles;
use super::{b64, Log, LogError};
use crate::model::format;
use crate::model::note::Checkpoint;
use crate::model::protection::PutOptions;
use crate::model::tlog::{self, Hash};
use crate::pipeline::log::finding::{LogFinding, Problem};
use crate::store::{self, PutMode, StoreError};

/// A tree head the log was published at before, and where it is remembered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    pub size: u64,
    pub root: Hash,
    /// Where: the store's key of its write-once copy, the database's table, a statement.
    pub source: String,
}

impl Log<'_> {
    /// The largest head the store keeps a write-once copy of: the first key a LIST of
    /// `heads/` returns (their names sort the largest first). One LIST, and one GET unless the
    /// database's record is that size or larger (`known`): the copy is read only when it says
    /// more than the database.
    async fn largest_kept(&self, known: u64) -> Result<Option<Seen>, LogError> {
        let Some(first) = self.largest_head_key().await? else {
            return Ok(None);
        };
        if format::log_head_size(first.as_str()).is_some_and(|size| size <= known) {
            return Ok(None);
        }
        let bytes = store::get_all(self.ctx.store.as_ref(), &first)
            .await?
            .unwrap_or_default();
        match Checkpoint::open(&bytes, &self.origin, &[]) {
            Ok(c) if Some(c.size) == format::log_head_size(first.as_str()) => Ok(Some(Seen {
                size: c.size,
                root: c.root,
                source: first.to_string(),
            })),
            _ => Err(self.refused(format!(
                "{first} is not the tree head its name says (a head kept write-once, rewritten: {})",
                Problem::Rollback.kind().label()
            ))),
        }
    }

    /// The key of the largest head the store keeps: the first a LIST of `heads/` returns (their
    /// names sort the largest first) — one page, whatever the log's age.
    pub(super) async fn largest_head_key(&self) -> Result<Option<format::Key>, LogError> {
        use futures_util::TryStreamExt;
        let prefix = self.folder(format::LOG_HEADS);
        let mut pages = self.ctx.store.list_pages(&prefix);
        while let Some(page) = pages.try_next().await? {
            if let Some(key) = page
                .into_iter()
                .find(|k| format::log_head_size(k.as_str()).is_some())
            {
                return Ok(Some(key));
            }
        }
        Ok(None)
    }

    /// The largest head the database recorded for the app.
    async fn largest_recorded(&self) -> Result<Option<Seen>, LogError> {
        let heads = &self.ctx.tables.log_heads;
        let table = self.ctx.spec.log_heads_table();
        let Some((size, root)) = heads.largest(&self.app).await? else {
            return Ok(None);
        };
        match super::hash_of_text(&root) {
            Some(root) => Ok(Some(Seen {
                size,
                root,
                source: format!("the database's {table}"),
            })),
            None => Err(self.refused(format!(
                "{table} holds a head of {size} leaves whose root {root:?} is no hash"
            ))),
        }
    }

    /// The largest head the log was published at, by the store's copies and the database's
    /// record — the larger of the two (none: a log no run of this build published yet).
    pub(crate) async fn largest_seen(&self) -> Result<Option<Seen>, LogError> {
        let recorded = self.largest_recorded().await?;
        let known = recorded.as_ref().map_or(0, |r| r.size);
        Ok(match self.largest_kept(known).await? {
            Some(kept) => Some(kept),
            None => recorded,
        })
    }

    /// Keeps the head about to be published write-once under its size, under the batches'
    /// retention (`options`). A copy already there of the same tree (a retry, or the same head
    /// signed since) stays; one of another tree of that size is a fork.
    pub(super) async fn keep_head(
        &self,
        head: &Checkpoint,
        note: &[u8],
        options: &PutOptions,
    ) -> Result<(), LogError> {
        let key = self.key(&format::log_head_path(head.size));
        let store = self.ctx.store.as_ref();
        let body = Bytes::from(note.to_vec());
        match store.put_with(&key, body, PutMode::Create, options).await {
            Ok(()) => Ok(()),
            Err(StoreError::AlreadyExists { .. }) => {
                let kept = store::get_all(store, &key).await?.unwrap_or_default();
                match Checkpoint::open(&kept, &self.origin, &[]) {
                    Ok(c) if c.root == head.root => Ok(()),
                    _ => Err(self.refused(format!(
                        "{key} already holds another tree of {} leaves (the log forked: {})",
                        head.size,
                        Problem::Rollback.kind().label()
                    ))),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Records in the database that the log was published (or verified whole) at `head`.
    pub(super) async fn record_head(&self, head: &Checkpoint) -> Result<(), LogError> {
        self.ctx
            .tables
            .log_heads
            .record(&self.app, head.size, &b64(&head.root), self.ctx.now())
            .await?;
        Ok(())
    }
}

/// Whether the store's checkpoint `head` (none: no checkpoint) is the tree `seen` or one grown
/// from it: the consistency proof from `seen` to it (empty when it is that tree), else the
/// `log_rollback` finding. Reads the tiles of the proof (O(log n)) only when the checkpoint
/// is larger than `seen`.
pub(crate) async fn held_to(
    tiles: &mut Tiles<'_, '_>,
    head: Option<&Checkpoint>,
    seen: &Seen,
) -> Result<Result<Vec<Hash>, LogFinding>, LogError> {
    let size = head.map_or(0, |h| h.size);
    let rollback = |actual: String| {
        LogFinding {
        problem: Problem::Rollback,
        seq: Some(seen.size),
        batch_id: None,
        expected: format!(
            "the store's checkpoint the tree of {} leaves (root {}) kept at {}, or a tree grown from it",
            seen.size,
            b64(&seen.root),
            seen.source
        ),
        actual,
    }
    };
    let Some(head) = head.filter(|_| size >= seen.size) else {
        return Ok(Err(rollback(format!(
            "it holds {size} leaves: the checkpoint was written back (a rollback); the batches of leaves {size}..{} may be gone with their receipts",
            seen.size
        ))));
    };
    if size == seen.size {
        return Ok(match head.root == seen.root {
            true => Ok(Vec::new()),
            false => Err(rollback(format!(
                "it holds another tree of {size} leaves (root {}): the log was rewritten",
                b64(&head.root)
            ))),
        });
    }
    let proof = match tiles.consistency(seen.size, size).await {
        Ok(p) => p,
        Err(LogError::Refused { detail, .. }) => return Ok(Err(rollback(detail))),
        Err(e) => return Err(e),
    };
    let grown =
        seen.size == 0 || tlog::check_consistency(&proof, seen.size, &seen.root, size, &head.root);
    Ok(match grown {
        true => Ok(proof),
        false => Err(rollback(format!(
            "its tree of {size} leaves does not grow from that head (a consistency proof from the tiles fails): the log was rewritten"
        ))),
    })
}

/// The store's checkpoint held to the largest head the log was published at
/// ([`heads::held_to`]): the `log_rollback` finding, if it is smaller or not grown from it.
pub(crate) async fn rollback(
    log: &Log<'_>,
    head: Option<&Checkpoint>,
) -> Result<Option<LogFinding>, LogError> {
    let seen = match published(log).await? {
        Ok(Some(seen)) => seen,
        Ok(None) => return Ok(None),
        Err(finding) => return Ok(Some(finding)),
    };
    let mut tiles = Tiles::new(log, head.map_or(0, |h| h.size));
    Ok(held_to(&mut tiles, head, &seen).await?.err())
}

/// The largest head the log was published at ([`Log::largest_seen`]), or — a head kept that is
/// not what its name says — the `log_rollback` finding.
pub(crate) async fn published(log: &Log<'_>) -> Result<Result<Option<Seen>, LogFinding>, LogError> {
    match log.largest_seen().await {
        Ok(seen) => Ok(Ok(seen)),
        Err(LogError::Refused { detail, .. }) => Ok(Err(LogFinding {
            problem: Problem::Rollback,
            seq: None,
            batch_id: None,
            expected: "the tree heads the log was published at, kept write-once".into(),
            actual: detail,
        })),
        Err(e) => Err(e),
    }
}

/// Leaves the store's tiles hold past the checkpoint of `size` leaves — the rightmost entry
/// bundle found wider (or full) than the checkpoint needs — that the database's receipts do not
/// account for: the `log_rollback` finding. A run that ended between its tiles and its
/// checkpoint leaves its own receipts' entries there (the database holds them, not logged yet,
/// after chain seq `after_seq`); anything else is a leaf of a larger tree whose checkpoint was
/// written back. Tiles are never written over, so this holds where no head was remembered.
/// One LIST (and a GET when a wider bundle is there).
pub(crate) async fn leaves_past(
    log: &Log<'_>,
    size: u64,
    after_seq: u64,
) -> Result<Option<LogFinding>, LogError> {
    use crate::model::tlog::TILE_WIDTH;
    let (index, have) = (size / TILE_WIDTH, size % TILE_WIDTH);
    // One LIST of the bundle's key finds the full bundle and its partial ones (`{N}.p/{W}`).
    let full = log.key(&tlog::entries_path(index, TILE_WIDTH));
    let found = log.ctx.store.list_from(&full).await?;
    let widest = found
        .iter()
        .filter_map(|k| match k == &full {
            true => Some((TILE_WIDTH, k)),
            false => Some((tlog::partial_width(k.as_str())?, k)),
        })
        .filter(|(w, _)| *w > have)
        .max();
    let Some((_, key)) = widest else {
        return Ok(None);
    };
    let bytes = store::get_all(log.ctx.store.as_ref(), key).await?;
    let Some(entries) = bytes.as_deref().and_then(tlog::unbundle) else {
        return Ok(None);
    };
    let past = entries.get(have as usize..).unwrap_or_default();
    if past.is_empty() {
        return Ok(None);
    }
    let pending = log
        .ctx
        .tables
        .receipts
        .unlogged(&log.app, after_seq, past.len() as u32)
        .await?;
    for (i, entry) in past.iter().enumerate() {
        if pending
            .get(i)
            .map(|r| super::entry_of(log.ctx, &log.folder, r))
            .as_ref()
            == Some(entry)
        {
            continue;
        }
        let leaf = size + i as u64;
        let batch = tlog::parse_entry(entry).map_or("?".to_string(), |f| f[2].to_string());
        return Ok(Some(LogFinding {
            problem: Problem::Rollback,
            seq: Some(leaf),
            batch_id: Some(batch.clone()),
            expected: format!(
                "no leaf past the checkpoint's {size} in the store's tiles, or one of the database's receipts not logged yet"
            ),
            actual: format!(
                "the tiles hold leaf {leaf} (batch {batch}), which no receipt accounts for: a leaf of a larger tree whose checkpoint was written back (or receipts lost since a run that ended before its checkpoint)"
            ),
        }));
    }
    Ok(None)
}
