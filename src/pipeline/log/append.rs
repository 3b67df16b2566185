//! Appending an app's receipts to its log at the end of each archive run: the right edge of the
//! tree read, the new tiles written once, the checkpoint, then the leaves in the database; a log
//! that holds leaves the database does not is settled (the database's own, taken) or refused
//! (receipts lost, until accepted); a linear chain of an older build is carried over.

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};

use super::tiles::Tiles;
use super::{
    audit, entry_of, heads, Log, LogBreak, LogError, APPEND_CHUNK, BREAK_SCHEMA, PARALLEL_GETS,
};
use crate::model::format;
use crate::model::note::Checkpoint;
use crate::model::protection::{PutOptions, WritePolicy};
use crate::model::tlog::{self, Hash, TILE_WIDTH};
use crate::pipeline::log::finding::Problem;
use crate::pipeline::RunContext;
use crate::store::PutMode;

/// What an append did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Appended {
    /// The checkpoint written (none: nothing to append).
    pub written: Option<String>,
    /// The leaves appended.
    pub leaves: u64,
    /// The log's size after.
    pub size: u64,
    /// The break record written (`--accept-log-break`).
    pub break_accepted: Option<String>,
}

/// The right edge of the tree being appended to: the partial tile at each level and the
/// partial entry bundle — at most 256 hashes a level — and the objects to write.
struct Edge {
    size: u64,
    levels: Vec<Vec<Hash>>,
    entries: Vec<Vec<u8>>,
    dirty: Vec<bool>,
    entries_dirty: bool,
    out: Vec<(String, Vec<u8>)>,
    /// The partial tiles in the store now (read, or written by the last [`Edge::finish`]).
    partials: Vec<String>,
}

impl Edge {
    async fn load(log: &Log<'_>, size: u64) -> Result<Edge, LogError> {
        let mut levels = Vec::new();
        for level in 0..tlog::tile_levels(size) {
            let hashes = size >> (tlog::TILE_HEIGHT * level);
            levels.push(match hashes % TILE_WIDTH {
                0 => Vec::new(),
                _ => log.tile(level, hashes / TILE_WIDTH, size).await?,
            });
        }
        let entries = match size % TILE_WIDTH {
            0 => Vec::new(),
            _ => log.entries(size / TILE_WIDTH, size).await?,
        };
        let mut edge = Edge {
            size,
            dirty: vec![false; levels.len()],
            levels,
            entries,
            entries_dirty: false,
            out: Vec::new(),
            partials: Vec::new(),
        };
        edge.partials = edge.partial_paths();
        Ok(edge)
    }

    fn push(&mut self, entry: Vec<u8>) {
        let mut hash = tlog::leaf_hash(&entry);
        self.size += 1;
        self.entries.push(entry);
        self.entries_dirty = true;
        if self.entries.len() as u64 == TILE_WIDTH {
            let index = self.size / TILE_WIDTH - 1;
            self.out.push((
                tlog::entries_path(index, TILE_WIDTH),
                tlog::bundle(&self.entries),
            ));
            self.entries.clear();
        }
        let mut level = 0;
        loop {
            if self.levels.len() == level {
                self.levels.push(Vec::new());
                self.dirty.push(false);
            }
            self.levels[level].push(hash);
            self.dirty[level] = true;
            if self.levels[level].len() as u64 != TILE_WIDTH {
                break;
            }
            let index = (self.size >> (tlog::TILE_HEIGHT * level as u32)) / TILE_WIDTH - 1;
            let full = std::mem::take(&mut self.levels[level]);
            self.out.push((
                tlog::tile_path(level as u32, index, TILE_WIDTH),
                full.concat(),
            ));
            hash = tlog::subtree_of(&full);
            level += 1;
        }
    }

    /// The paths of the partial tiles of the tree as it is.
    fn partial_paths(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .levels
            .iter()
            .enumerate()
            .filter(|(_, h)| !h.is_empty())
            .map(|(level, h)| {
                let index = (self.size >> (tlog::TILE_HEIGHT * level as u32)) / TILE_WIDTH;
                tlog::tile_path(level as u32, index, h.len() as u64)
            })
            .collect();
        if !self.entries.is_empty() {
            out.push(tlog::entries_path(
                self.size / TILE_WIDTH,
                self.entries.len() as u64,
            ));
        }
        out
    }

    /// The partial tiles the tree had at the last call and no longer has: to delete once the
    /// checkpoint that needs them no more is written.
    fn superseded(&mut self) -> Vec<String> {
        let now = self.partial_paths();
        let gone = self
            .partials
            .iter()
            .filter(|p| !now.contains(p))
            .cloned()
            .collect();
        self.partials = now;
        gone
    }

    /// The partial tiles changed since the last call, to write with the full ones.
    fn finish(&mut self) -> Vec<(String, Vec<u8>)> {
        for (level, hashes) in self.levels.iter().enumerate() {
            if self.dirty[level] && !hashes.is_empty() {
                let index = (self.size >> (tlog::TILE_HEIGHT * level as u32)) / TILE_WIDTH;
                self.out.push((
                    tlog::tile_path(level as u32, index, hashes.len() as u64),
                    hashes.concat(),
                ));
            }
        }
        if self.entries_dirty && !self.entries.is_empty() {
            self.out.push((
                tlog::entries_path(self.size / TILE_WIDTH, self.entries.len() as u64),
                tlog::bundle(&self.entries),
            ));
        }
        self.dirty.iter_mut().for_each(|d| *d = false);
        self.entries_dirty = false;
        std::mem::take(&mut self.out)
    }

    /// The root of the tree so far, from the partial tiles alone.
    fn root(&self) -> Hash {
        if self.size == 0 {
            return tlog::empty_root();
        }
        let parts: Vec<Hash> = tlog::subtrees(0, self.size)
            .into_iter()
            .map(|s| {
                let (level, _, offset, count) = s.in_tile();
                tlog::subtree_of(
                    &self.levels[level as usize][offset as usize..(offset + count) as usize],
                )
            })
            .collect();
        tlog::range_hash(&parts)
    }
}

/// Appends the app's receipts not in its log yet, in the order they were recorded, under the
/// policy's retention; then the checkpoint, then the leaves in the database. Called under the
/// app's lock, after its batches.
///
/// The store is written before the database: a run that ends between the two leaves leaves the
/// database does not know, which the next run finds to be its own receipts (the same entries)
/// and takes. Leaves the database does not have and cannot match — receipts lost in a restore
/// from a backup — stop the append, unless `accept_break` gives the operator's reason: then a
/// write-once break record names them and the log goes on after them.
pub(crate) async fn append(
    ctx: &RunContext,
    app: &str,
    policy: &WritePolicy,
    accept_break: Option<&str>,
) -> Result<Appended, LogError> {
    let log = Log::open_for(ctx, app, super::identity::Purpose::Append).await?;
    let options = PutOptions {
        storage_class: None,
        lock: policy.lock_at(ctx.now()),
        legal_hold: policy.legal_hold,
    };
    let (mut out, after_seq, resign) = reconcile(&log, accept_break, &options).await?;
    append_unlogged(&log, after_seq, &options, &mut out).await?;
    if let (Some(head), None) = (resign, &out.written) {
        // Keys changed and nothing to append: the same tree's checkpoint, signed by the new keys.
        out.written = Some(write_checkpoint(&log, &head, &options).await?);
    }
    Ok(out)
}

/// Where the app's log and its receipts stand before anything is appended: the store's tree
/// against the leaves the database knows — an older build's chain carried over into an empty
/// log, leaves of the store the database's receipts are (taken), breaks accepted, a change of
/// the keys that sign it recorded. Returns the anchoring so far, the chain seq after which
/// receipts are not logged yet, and — keys changed — the head to sign again if nothing is
/// appended.
async fn reconcile(
    log: &Log<'_>,
    accept_break: Option<&str>,
    options: &PutOptions,
) -> Result<(Appended, u64, Option<Checkpoint>), LogError> {
    let receipts = &log.ctx.tables.receipts;
    let (head, change) = log.head_to_append().await?;
    let size = head.as_ref().map_or(0, |c| c.size);
    if let Some(seen) = log.largest_seen().await? {
        let mut tiles = Tiles::new(log, size);
        if let Err(f) = heads::held_to(&mut tiles, head.as_ref(), &seen).await? {
            return Err(log.refused(format!(
                "expected {}; {} ({}) — nothing is appended after it, or the leaves of the larger tree would be written over; once investigated, the larger head goes back by copying {} over the checkpoint",
                f.expected, f.actual, Problem::Rollback.kind().label(), seen.source
            )));
        }
    }
    let (known, mut after_seq) = match receipts.last_logged(&log.app).await? {
        Some((index, seq)) => (index + 1, seq),
        None => (0, 0),
    };
    let mut out = Appended {
        size,
        ..Appended::default()
    };
    if known > size {
        return Err(log.refused(format!(
            "the database's receipts are logged up to leaf {}, the store's checkpoint holds {size} leaves: the checkpoint was written back or the log lost ({})",
            known - 1,
            Problem::Gap.kind().label()
        )));
    }
    if size == 0 {
        super::legacy::carry_over(log, accept_break, options).await?;
    }
    if known < size {
        after_seq = settle(log, known, size, after_seq, accept_break, options, &mut out).await?;
    }
    if let Some(reason) = accept_break {
        if let Some(key) = accept_gaps(log, reason, options).await? {
            out.break_accepted.get_or_insert(key);
        }
    }
    let mut resign = None;
    if let Some(change) = change {
        log.record_key_change(&change, options).await?;
        resign = head;
    }
    Ok((out, after_seq, resign))
}

/// Appends the app's receipts not logged yet (after chain seq `after_seq`), a chunk at a time:
/// their entries pushed onto the tree's right edge, the tiles it changed and the checkpoint
/// written, then their leaves recorded in the database.
async fn append_unlogged(
    log: &Log<'_>,
    mut after_seq: u64,
    options: &PutOptions,
    out: &mut Appended,
) -> Result<(), LogError> {
    let (ctx, app) = (log.ctx, log.app.as_str());
    let receipts = &ctx.tables.receipts;
    let mut edge: Option<Edge> = None;
    loop {
        let batch = receipts.unlogged(app, after_seq, APPEND_CHUNK).await?;
        if batch.is_empty() {
            return Ok(());
        }
        if edge.is_none() {
            edge = Some(Edge::load(log, out.size).await?);
        }
        let e = edge.as_mut().expect("loaded");
        let mut leaves = Vec::with_capacity(batch.len());
        for r in &batch {
            let entry = entry_of(ctx, &log.folder, r);
            if tlog::parse_entry(&entry).map(|f| f[3]) != Some(r.objects.manifest_sha256.as_str()) {
                return Err(log.refused(format!("receipt {} no longer implies the manifest hash it recorded (edited since it was recorded?): not logged", r.batch_id)));
            }
            leaves.push((r.batch_id.clone(), e.size));
            e.push(entry);
            after_seq = r.seq().unwrap_or(after_seq);
        }
        let (key, head) = publish(log, e, options).await?;
        receipts.set_leaves(app, &leaves).await?;
        log.record_head(&head).await?;
        // The partial tiles this checkpoint no longer needs: readers of an older checkpoint
        // take the first hashes of a wider tile instead. Best effort: one left behind is only
        // bytes (a bucket's default retention may keep it).
        for path in e.superseded() {
            if let Err(err) = ctx.store.delete(&log.key(&path)).await {
                tracing::debug!(app, path, error = %err, "a superseded partial tile was not deleted");
            }
        }
        out.leaves += leaves.len() as u64;
        out.written = Some(key);
        out.size = e.size;
    }
}

/// Writes the tiles the edge changed (full ones once, under the batches' retention; partial
/// ones, which the next append replaces, without), the head of its tree kept write-once under
/// its size (under the retention), then the checkpoint, signed with the log key where one is
/// configured. Returns the checkpoint's key and head.
async fn publish(
    log: &Log<'_>,
    e: &mut Edge,
    options: &PutOptions,
) -> Result<(String, Checkpoint), LogError> {
    let transient = PutOptions::default();
    futures_util::stream::iter(e.finish())
        .map(|(path, bytes)| {
            let options = match tlog::is_partial(&path) {
                true => &transient,
                false => options,
            };
            async move { log.write_once(&log.key(&path), bytes, options).await }
        })
        .buffer_unordered(PARALLEL_GETS)
        .try_collect::<Vec<()>>()
        .await?;
    let checkpoint = Checkpoint {
        origin: log.origin.clone(),
        size: e.size,
        root: e.root(),
    };
    let key = write_checkpoint(log, &checkpoint, options).await?;
    Ok((key, checkpoint))
}

/// Writes `head` as the log's checkpoint, signed by the run's keys: first kept write-once under
/// its size (under the batches' retention, `options`), then in place of the checkpoint.
async fn write_checkpoint(
    log: &Log<'_>,
    head: &Checkpoint,
    options: &PutOptions,
) -> Result<String, LogError> {
    let key = log.key(format::LOG_CHECKPOINT);
    let note = head.to_note(&log.ctx.log_keys.signers);
    log.begin().await?;
    log.keep_head(head, &note, options).await?;
    log.ctx
        .store
        .put_with(
            &key,
            Bytes::from(note),
            PutMode::Overwrite,
            &PutOptions::default(),
        )
        .await?;
    Ok(key.to_string())
}

/// Leaves `known..size` the store holds and the database does not: the app's next receipts
/// when they are the same entries (a run that ended between the store and the database),
/// taken; else receipts the database lost, refused unless accepted. Returns the chain seq the
/// append goes on after.
async fn settle(
    log: &Log<'_>,
    known: u64,
    size: u64,
    after_seq: u64,
    accept_break: Option<&str>,
    options: &PutOptions,
    out: &mut Appended,
) -> Result<u64, LogError> {
    let ctx = log.ctx;
    let accepted: std::collections::HashSet<u64> = log
        .breaks()
        .await?
        .iter()
        .flat_map(|b| b.leaves.iter().map(|(i, _)| *i))
        .collect();
    let pending = ctx
        .tables
        .receipts
        .unlogged(
            &log.app,
            after_seq,
            (size - known).min(u64::from(APPEND_CHUNK)) as u32,
        )
        .await?;
    let mut pending = pending.iter().peekable();
    let (mut taken, mut unknown, mut seq) = (Vec::new(), Vec::new(), after_seq);
    for bundle in known / TILE_WIDTH..size.div_ceil(TILE_WIDTH) {
        let entries = log.entries(bundle, size).await?;
        for (i, entry) in entries.into_iter().enumerate() {
            let index = bundle * TILE_WIDTH + i as u64;
            if index < known || accepted.contains(&index) {
                continue;
            }
            match pending.peek() {
                Some(r) if unknown.is_empty() && entry_of(ctx, &log.folder, r) == entry => {
                    taken.push((r.batch_id.clone(), index));
                    seq = r.seq().unwrap_or(seq);
                    pending.next();
                }
                _ => {
                    let batch =
                        tlog::parse_entry(&entry).map_or("?".to_string(), |f| f[2].to_string());
                    unknown.push((index, batch));
                }
            }
        }
    }
    if !unknown.is_empty() {
        let Some(reason) = accept_break else {
            return Err(log.refused(format!(
                "the store's log holds {} leaf/leaves the database's receipts do not (from leaf {}, batch {}): receipts lost — a database restored from an older backup — or a receipt rewritten ({}); once investigated, `archive --app {} --accept-log-break REASON` records them as gone and the log goes on after them",
                unknown.len(), unknown[0].0, unknown[0].1, Problem::Fork.kind().label(), log.app
            )));
        };
        out.break_accepted = Some(write_break(log, unknown, reason, options).await?);
    }
    ctx.tables.receipts.set_leaves(&log.app, &taken).await?;
    Ok(seq)
}

async fn write_break(
    log: &Log<'_>,
    leaves: Vec<(u64, String)>,
    reason: &str,
    options: &PutOptions,
) -> Result<String, LogError> {
    let record = LogBreak {
        schema: BREAK_SCHEMA.into(),
        table: log.ctx.spec.name.into(),
        app_code: log.folder.clone(),
        reason: reason.to_string(),
        accepted_at_ms: log.ctx.now(),
        leaves,
    };
    let key = log.key(&format::log_break_path(
        record.leaves[0].0,
        record.leaves.len(),
    ));
    let bytes = serde_json::to_vec(&record).expect("a record always serialises");
    log.write_once(&key, bytes, options).await?;
    tracing::warn!(
        app = log.app,
        key = %key,
        leaves = record.leaves.len(),
        reason,
        "log break accepted: the leaves it names are recorded as gone from the database on purpose"
    );
    Ok(key.to_string())
}

/// With `--accept-log-break`: the leaves whose receipts are gone from the database (a batch
/// removed on purpose) that no break names yet, recorded as gone. Reads the whole log: it is
/// the operator's one-off step.
async fn accept_gaps(
    log: &Log<'_>,
    reason: &str,
    options: &PutOptions,
) -> Result<Option<String>, LogError> {
    let audit = audit::audit_log(log).await?;
    let gone: Vec<(u64, String)> = audit
        .findings
        .iter()
        .filter(|f| f.problem == Problem::Gap && f.expected.starts_with("a receipt for leaf"))
        .filter_map(|f| Some((f.seq?, f.batch_id.clone()?)))
        .collect();
    match gone.is_empty() {
        true => Ok(None),
        false => write_break(log, gone, reason, options).await.map(Some),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// The edge built leaf by leaf writes the tiles a tree of each size has, and its root is
    /// the tree's.
    #[test]
    fn an_edge_grows_into_the_trees_tiles() {
        let mut edge = Edge {
            size: 0,
            levels: Vec::new(),
            entries: Vec::new(),
            dirty: Vec::new(),
            entries_dirty: false,
            out: Vec::new(),
            partials: Vec::new(),
        };
        let mut frontier = tlog::Frontier::default();
        let mut written = BTreeMap::new();
        for i in 0..70_000u64 {
            let entry = format!("{i}").into_bytes();
            frontier.push(tlog::leaf_hash(&entry));
            edge.push(entry);
            if i % 997 == 0 || i == 65_535 {
                written.extend(edge.finish());
                assert_eq!(edge.root(), frontier.root(), "at {}", i + 1);
            }
        }
        written.extend(edge.finish());
        assert_eq!(edge.root(), frontier.root());
        assert!(
            written.contains_key("tile/0/273.p/112"),
            "the last partial tile: 70000 = 273·256 + 112"
        );
        assert!(
            written.contains_key("tile/1/000"),
            "a full level-1 tile after 65536 leaves"
        );
        assert!(written.contains_key("tile/1/001.p/17"));
        assert!(written.contains_key("tile/2/000.p/1"));
        assert!(written.contains_key("tile/entries/273.p/112"));
        assert_eq!(written["tile/0/000"].len(), 256 * 32);
    }
}
