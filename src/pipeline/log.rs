//! An app's log of batches against the store (README, "The log of batches"; the encoding is
//! [`crate::model::tlog`], the checkpoint [`crate::model::note`]): appending the app's new
//! receipts at the end of each archive run, proving one batch's leaf for `purge` and `attest`,
//! and auditing the whole tree for `verify`.
//!
//! In the store, beside the apps' folders, per app (its [`chain::folder_name`]):
//!
//! ```text
//! {table prefix}_log/app_code={app}/checkpoint          the tree head: origin, size, root (signed with a log key)
//! {table prefix}_log/app_code={app}/tile/{L}/{N}[.p/W]  hash tiles (C2SP tlog-tiles), write-once
//! {table prefix}_log/app_code={app}/tile/entries/{N}…   the leaves' entries, write-once
//! {table prefix}_log/app_code={app}/breaks/{first}-{n}.json  leaves an operator accepted as gone
//! {table prefix}_log/app_code={app}/transition.json     the linear chain this log carries on
//! ```
//!
//! Every cost is the run's own: an append reads the checkpoint and the right edge (one partial
//! tile per level, at most four at a billion batches) and writes what changed; a proof reads
//! the tiles on one leaf's path. Only `verify` reads the whole tree, a tile per 256 batches.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use super::verifier::Expected;
use super::RunContext;
use crate::db::chain::ChainTable;
use crate::db::receipts::{Receipts, StoredReceipt};
use crate::db::DbError;
use crate::model::chain::{self, ChainFinding, Problem};
use crate::model::digest::sha256_hex;
use crate::model::format;
use crate::model::note::{Checkpoint, Signer, Verifier};
use crate::model::protection::{PutOptions, WritePolicy};
use crate::model::tlog::{self, Hash, Subtree, TILE_WIDTH};
use crate::store::{self, PutMode, StoreError};

/// Why a log could not be read, proven or appended to.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("app {app}'s log: {detail}; nothing appended — run `outbox-archiver verify --app {app} --metadata-only`")]
    Refused { app: String, detail: String },
}

/// The log keys of a run: the signing key checkpoints are signed with (`--log-key`), and the
/// verifier they are held to (`--log-verifier`, else the signing key's own).
#[derive(Debug, Clone, Default)]
pub struct LogKeys {
    pub signer: Option<Arc<Signer>>,
    pub verifier: Option<Verifier>,
}

impl LogKeys {
    /// The key a checkpoint read must be signed by, if any is configured.
    pub fn verifier(&self) -> Option<Verifier> {
        self.verifier
            .clone()
            .or_else(|| self.signer.as_ref().map(|s| s.verifier()))
    }
}

/// Receipts appended per write of tiles (a first append of a long chain goes in steps).
const APPEND_CHUNK: u32 = 4096;

/// Tiles read at once by the whole-tree audit.
const PARALLEL_GETS: usize = 16;

/// Receipts read per page by the audit.
const PAGE: u32 = 1000;

/// The schema of a break record.
pub const BREAK_SCHEMA: &str = "outbox-archive-log-break/v1";

/// The schema of the transition record.
pub const TRANSITION_SCHEMA: &str = "outbox-archive-log-transition/v1";

/// Leaves an operator accepted as gone from the database (`archive --accept-chain-break`):
/// a batch removed on purpose, or receipts lost in a restore of the database from a backup.
/// Written once, never removed: every `verify` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogBreak {
    pub schema: String,
    pub table: String,
    pub app_code: String,
    /// `[leaf, batch id]` of each leaf accepted.
    pub leaves: Vec<(u64, String)>,
    pub reason: String,
    pub accepted_at_ms: i64,
}

/// How the log carries on the linear chain of issue 27: its first `legacy_head_seq` leaves are
/// the chain's seqs 1…, in order, and the chain's link at its head — recomputed from those
/// leaves — is the one its newest checkpoint anchored. Written once, when the log starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    pub schema: String,
    pub table: String,
    pub app_code: String,
    /// The chain's newest checkpoint (none: no chain was carried, see `reason`).
    pub legacy_checkpoint: Option<String>,
    pub legacy_head_seq: u64,
    pub legacy_head_link: Option<String>,
    /// Why no chain was carried, when none was (the operator's `--accept-chain-break`).
    pub reason: Option<String>,
    pub at_ms: i64,
}

/// One app's log in the store.
pub struct Log<'a> {
    ctx: &'a RunContext,
    app: String,
    /// How the app is named in the store and its entries ([`chain::folder_name`]).
    pub folder: String,
    prefix: String,
    pub origin: String,
}

/// The table's prefix in the store.
fn table_prefix(ctx: &RunContext) -> String {
    format::table_prefix(ctx.store.location().prefix(), ctx.spec.name)
}

/// The folder the apps' logs are kept under.
fn logs_prefix(ctx: &RunContext) -> String {
    format!("{}_log/", table_prefix(ctx))
}

/// The apps the store holds a log of (by their folders' names): an app whose receipts are all
/// gone is still audited. One delimited LIST (a page per thousand apps).
pub async fn apps_in_store(ctx: &RunContext) -> Result<Vec<String>, StoreError> {
    let prefix = logs_prefix(ctx);
    let mut apps: Vec<String> = ctx
        .store
        .list(&prefix)
        .await?
        .iter()
        .filter_map(|k| {
            let app = k.strip_prefix(&prefix)?.strip_prefix("app_code=")?;
            Some(app.split('/').next()?.to_string())
        })
        .collect();
    apps.dedup();
    Ok(apps)
}

/// The entry of a receipt's batch: its manifest hash as the receipt's fields imply it
/// (recomputed, not the column), so a receipt edited since it was logged is another leaf.
pub fn entry_of(ctx: &RunContext, folder: &str, r: &StoredReceipt) -> Vec<u8> {
    let manifest = sha256_hex(&Expected::of_receipt(ctx.spec, r, Vec::new()).manifest);
    tlog::entry(ctx.spec.name, folder, &r.batch_id, &manifest)
}

fn b64(h: &Hash) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(h)
}

impl<'a> Log<'a> {
    pub async fn open(ctx: &'a RunContext, app: &str) -> Result<Log<'a>, DbError> {
        let folder = chain::folder_name(app, ctx.app_case_matters().await?);
        Ok(Log::of_folder(ctx, app, folder))
    }

    /// The log kept under `folder`, for an app the database may no longer know.
    pub fn of_folder(ctx: &'a RunContext, app: &str, folder: String) -> Log<'a> {
        Log {
            prefix: format!("{}app_code={folder}/", logs_prefix(ctx)),
            origin: format!("outbox-archive/{}/app_code={folder}", ctx.spec.name),
            ctx,
            app: app.to_string(),
            folder,
        }
    }

    fn key(&self, path: &str) -> String {
        format!("{}{path}", self.prefix)
    }

    fn refused(&self, detail: String) -> ChainError {
        ChainError::Refused {
            app: self.app.clone(),
            detail,
        }
    }

    /// The log's head, held to the log key where one is configured (none: an empty log).
    pub async fn checkpoint(&self) -> Result<Option<Checkpoint>, ChainError> {
        let key = self.key("checkpoint");
        let Some(bytes) = store::get_all(self.ctx.store.as_ref(), &key).await? else {
            return Ok(None);
        };
        Checkpoint::open(&bytes, &self.origin, self.ctx.log_keys.verifier().as_ref())
            .map(Some)
            .map_err(|e| self.refused(format!("{key}: {e}")))
    }

    /// The bytes of the tile at `path` (full, or a partial tile's `.p/{width}` path) as a tree of
    /// that width reads it: the object itself or, where a later append replaced that partial
    /// tile, the first `width` items of a wider one (C2SP tlog-tiles: a tile's first hashes
    /// never change) — the full tile, else the narrowest wider partial one.
    async fn tile_bytes(
        &self,
        full: &str,
        width: u64,
    ) -> Result<Option<(Vec<u8>, u64)>, ChainError> {
        let store = self.ctx.store.as_ref();
        let exact = match width {
            TILE_WIDTH => full.to_string(),
            w => format!("{full}.p/{w}"),
        };
        if let Some(bytes) = store::get_all(store, &self.key(&exact)).await? {
            return Ok(Some((bytes, width)));
        }
        if width == TILE_WIDTH {
            return Ok(None);
        }
        if let Some(bytes) = store::get_all(store, &self.key(full)).await? {
            return Ok(Some((bytes, TILE_WIDTH)));
        }
        let partials = self
            .ctx
            .store
            .list(&self.key(&format!("{full}.p/")))
            .await?;
        let wider = partials
            .iter()
            .filter_map(|k| Some((k.rsplit('/').next()?.parse::<u64>().ok()?, k)))
            .filter(|(w, _)| *w > width)
            .min();
        match wider {
            None => Ok(None),
            Some((w, key)) => Ok(store::get_all(store, key).await?.map(|b| (b, w))),
        }
    }

    /// The hashes of the tile at `level`, `index` in the tree of `size` leaves.
    async fn tile(&self, level: u32, index: u64, size: u64) -> Result<Vec<Hash>, ChainError> {
        let width = tlog::tile_width(level, index, size);
        let full = tlog::tile_path(level, index, TILE_WIDTH);
        let key = self.key(&tlog::tile_path(level, index, width));
        let (bytes, found) = self
            .tile_bytes(&full, width)
            .await?
            .ok_or_else(|| self.refused(format!("tile {key} is missing")))?;
        match tlog::tile_hashes(&bytes) {
            Some(mut h) if h.len() as u64 == found => {
                h.truncate(width as usize);
                Ok(h)
            }
            _ => Err(self.refused(format!("tile {key} does not hold {found} hashes"))),
        }
    }

    /// The entries of bundle `index` in the tree of `size` leaves.
    async fn entries(&self, index: u64, size: u64) -> Result<Vec<Vec<u8>>, ChainError> {
        let width = tlog::tile_width(0, index, size);
        let full = tlog::entries_path(index, TILE_WIDTH);
        let key = self.key(&tlog::entries_path(index, width));
        let (bytes, found) = self
            .tile_bytes(&full, width)
            .await?
            .ok_or_else(|| self.refused(format!("entry bundle {key} is missing")))?;
        match tlog::unbundle(&bytes) {
            Some(mut e) if e.len() as u64 == found => {
                e.truncate(width as usize);
                Ok(e)
            }
            _ => Err(self.refused(format!("entry bundle {key} does not hold {found} entries"))),
        }
    }

    /// The breaks accepted for this log (one LIST; they are few).
    pub async fn breaks(&self) -> Result<Vec<LogBreak>, ChainError> {
        let mut out = Vec::new();
        for key in self.ctx.store.list(&self.key("breaks/")).await? {
            let bytes = store::get_all(self.ctx.store.as_ref(), &key).await?;
            match bytes.map(|b| serde_json::from_slice::<LogBreak>(&b)) {
                Some(Ok(b)) if b.schema == BREAK_SCHEMA => out.push(b),
                _ => return Err(self.refused(format!("break record {key} cannot be read"))),
            }
        }
        Ok(out)
    }

    /// The transition record, if the log carries on a linear chain.
    pub async fn transition(&self) -> Result<Option<Transition>, ChainError> {
        let key = self.key("transition.json");
        match store::get_all(self.ctx.store.as_ref(), &key).await? {
            None => Ok(None),
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| self.refused(format!("{key} cannot be read: {e}"))),
        }
    }

    /// Writes `bytes` at `key` once: an object already there is accepted only if it holds
    /// these very bytes (a retry).
    async fn write_once(
        &self,
        key: &str,
        bytes: Vec<u8>,
        options: &PutOptions,
    ) -> Result<(), ChainError> {
        let store = self.ctx.store.as_ref();
        match store
            .put_with(key, Bytes::from(bytes.clone()), PutMode::Create, options)
            .await
        {
            Ok(()) => Ok(()),
            Err(StoreError::AlreadyExists { .. }) => {
                match store::get_all(store, key).await?.as_deref() == Some(bytes.as_slice()) {
                    true => Ok(()),
                    false => Err(self.refused(format!(
                        "{key} already holds other bytes (a tile of another tree: the log forked)"
                    ))),
                }
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// A tree head's tiles, read as a proof needs them and kept for the run.
pub struct Tiles<'l, 'a> {
    log: &'l Log<'a>,
    pub size: u64,
    cache: HashMap<(u32, u64), Vec<Hash>>,
}

impl<'l, 'a> Tiles<'l, 'a> {
    pub fn new(log: &'l Log<'a>, size: u64) -> Self {
        Tiles {
            log,
            size,
            cache: HashMap::new(),
        }
    }

    async fn subtree(&mut self, s: Subtree) -> Result<Hash, ChainError> {
        let (level, index, offset, count) = s.in_tile();
        if !self.cache.contains_key(&(level, index)) {
            let hashes = self.log.tile(level, index, self.size).await?;
            self.cache.insert((level, index), hashes);
        }
        let hashes = &self.cache[&(level, index)];
        let part = hashes
            .get(offset as usize..(offset + count) as usize)
            .ok_or_else(|| self.log.refused(format!("tile {level}/{index} is short")))?;
        Ok(tlog::subtree_of(part))
    }

    async fn range(&mut self, (lo, hi): (u64, u64)) -> Result<Hash, ChainError> {
        let mut parts = Vec::new();
        for s in tlog::subtrees(lo, hi) {
            parts.push(self.subtree(s).await?);
        }
        Ok(tlog::range_hash(&parts))
    }

    /// The root of the tree of the first `n` leaves (n ≤ size).
    pub async fn root_at(&mut self, n: u64) -> Result<Hash, ChainError> {
        match n {
            0 => Ok(tlog::empty_root()),
            n => self.range((0, n)).await,
        }
    }

    /// The inclusion proof of leaf `index` in the tree of the first `n` leaves.
    pub async fn inclusion(&mut self, index: u64, n: u64) -> Result<Vec<Hash>, ChainError> {
        let mut out = Vec::new();
        for r in tlog::inclusion_ranges(index, n) {
            out.push(self.range(r).await?);
        }
        Ok(out)
    }

    /// The consistency proof from the tree of `old` leaves to the tree of `new`.
    pub async fn consistency(&mut self, old: u64, new: u64) -> Result<Vec<Hash>, ChainError> {
        let mut out = Vec::new();
        for r in tlog::consistency_ranges(old, new) {
            out.push(self.range(r).await?);
        }
        Ok(out)
    }
}

/// Proves batches' leaves for `purge`: each receipt held to the leaf at its index in the tree
/// head the store holds, by an inclusion proof (O(log n) hashes, tiles read once per run).
pub struct Prover<'l, 'a> {
    log: &'l Log<'a>,
    head: Option<Checkpoint>,
    tiles: Tiles<'l, 'a>,
}

impl<'l, 'a> Prover<'l, 'a> {
    pub async fn open(log: &'l Log<'a>) -> Result<Prover<'l, 'a>, ChainError> {
        let head = log.checkpoint().await?;
        let size = head.as_ref().map_or(0, |c| c.size);
        Ok(Prover {
            log,
            head,
            tiles: Tiles::new(log, size),
        })
    }

    /// Whether `receipt` is the leaf at its index: none when it is, else the finding.
    pub async fn prove(
        &mut self,
        receipt: &StoredReceipt,
    ) -> Result<Option<ChainFinding>, ChainError> {
        let Some(index) = receipt.log_index else {
            return Ok(Some(ChainFinding {
                problem: Problem::Gap,
                seq: None,
                batch_id: Some(receipt.batch_id.clone()),
                expected: "its batch in the store's log".into(),
                actual: "not appended to the log yet (the archive run that recorded it ended before appending it); the next `outbox-archiver archive` of the app appends it".into(),
            }));
        };
        let size = self.tiles.size;
        let Some(head) = self.head.as_ref().filter(|_| index < size) else {
            return Ok(Some(ChainFinding {
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
            Err(ChainError::Refused { detail, .. }) => {
                return Ok(Some(ChainFinding {
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
        Ok(Some(ChainFinding {
            problem: Problem::Mismatch,
            seq: Some(index),
            batch_id: Some(receipt.batch_id.clone()),
            expected: format!("the receipt's entry the leaf at {index} of the tree of {size} leaves (root {})", b64(&head.root)),
            actual: "its inclusion proof fails: the receipt changed since it was logged, or the store's tiles were rewritten".into(),
        }))
    }
}

/// What an append did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Anchoring {
    /// The checkpoint written (none: nothing to append).
    pub written: Option<String>,
    /// The leaves appended.
    pub links: u64,
    /// The log's size after.
    pub head: u64,
    /// The break record written (`--accept-chain-break`).
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
    async fn load(log: &Log<'_>, size: u64) -> Result<Edge, ChainError> {
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
pub async fn append(
    ctx: &RunContext,
    app: &str,
    policy: &WritePolicy,
    accept_break: Option<&str>,
) -> Result<Anchoring, ChainError> {
    let log = Log::open(ctx, app).await?;
    let pool = &ctx.db.pool;
    let chain_table = ChainTable::new(ctx.spec);
    let receipts = Receipts::new(ctx.spec);
    let head = log.checkpoint().await?;
    let mut size = head.as_ref().map_or(0, |c| c.size);
    let (known, mut after_seq) = match chain_table.last_logged(pool, app).await? {
        Some((index, seq)) => (index + 1, seq),
        None => (0, 0),
    };
    let options = PutOptions {
        storage_class: None,
        lock: policy.lock_at((ctx.now_ms)()),
        legal_hold: policy.legal_hold,
    };
    let mut out = Anchoring {
        head: size,
        ..Anchoring::default()
    };
    if known > size {
        return Err(log.refused(format!(
            "the database's receipts are logged up to leaf {}, the store's checkpoint holds {size} leaves: the checkpoint was written back or the log lost (chain_gap)",
            known - 1
        )));
    }
    if size == 0 {
        carry_over(&log, accept_break, &options).await?;
    }
    if known < size {
        after_seq = settle(
            &log,
            known,
            size,
            after_seq,
            accept_break,
            &options,
            &mut out,
        )
        .await?;
    }
    if let Some(reason) = accept_break {
        if let Some(key) = accept_gaps(&log, reason, &options).await? {
            out.break_accepted.get_or_insert(key);
        }
    }
    let mut edge: Option<Edge> = None;
    loop {
        let batch = receipts
            .unlogged(pool, app, after_seq, APPEND_CHUNK)
            .await?;
        if batch.is_empty() {
            break;
        }
        if edge.is_none() {
            edge = Some(Edge::load(&log, size).await?);
        }
        let e = edge.as_mut().expect("loaded");
        let mut leaves = Vec::with_capacity(batch.len());
        for r in &batch {
            let entry = entry_of(ctx, &log.folder, r);
            if tlog::parse_entry(&entry).map(|f| f[3]) != Some(r.manifest_sha256.as_str()) {
                return Err(log.refused(format!("receipt {} no longer implies the manifest hash it recorded (edited since it was recorded?): not logged", r.batch_id)));
            }
            leaves.push((r.batch_id.clone(), e.size));
            e.push(entry);
            after_seq = r.chain.as_ref().map_or(after_seq, |(s, _)| *s);
        }
        let writes = e.finish();
        // Full tiles are kept for good (under the batches' retention); a partial one only until
        // the tile grows (no retention of its own: the next append deletes it).
        let transient = PutOptions::default();
        futures_util::stream::iter(writes)
            .map(|(path, bytes)| {
                let options = match path.contains(".p/") {
                    true => &transient,
                    false => &options,
                };
                let log = &log;
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
        let key = log.key("checkpoint");
        let note = checkpoint.to_note(ctx.log_keys.signer.as_deref());
        ctx.store
            .put_with(
                &key,
                Bytes::from(note),
                PutMode::Overwrite,
                &PutOptions::default(),
            )
            .await?;
        chain_table.set_leaves(pool, app, &leaves).await?;
        // The partial tiles this checkpoint no longer needs: readers of an older checkpoint
        // take the first hashes of a wider tile instead. Best effort: one left behind is only
        // bytes (a bucket's default retention may keep it).
        for path in e.superseded() {
            if let Err(err) = ctx.store.delete(&log.key(&path)).await {
                tracing::debug!(app, path, error = %err, "a superseded partial tile was not deleted");
            }
        }
        out.links += leaves.len() as u64;
        out.written = Some(key);
        size = e.size;
        out.head = size;
    }
    Ok(out)
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
    out: &mut Anchoring,
) -> Result<u64, ChainError> {
    let ctx = log.ctx;
    let accepted: std::collections::HashSet<u64> = log
        .breaks()
        .await?
        .iter()
        .flat_map(|b| b.leaves.iter().map(|(i, _)| *i))
        .collect();
    let pending = Receipts::new(ctx.spec)
        .unlogged(
            &ctx.db.pool,
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
                    seq = r.chain.as_ref().map_or(seq, |(s, _)| *s);
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
                "the store's log holds {} leaf/leaves the database's receipts do not (from leaf {}, batch {}): receipts lost — a database restored from an older backup — or a receipt rewritten (chain_fork); once investigated, `archive --app {} --accept-chain-break REASON` records them as gone and the log goes on after them",
                unknown.len(), unknown[0].0, unknown[0].1, log.app
            )));
        };
        out.break_accepted = Some(write_break(log, unknown, reason, options).await?);
    }
    ChainTable::new(ctx.spec)
        .set_leaves(&ctx.db.pool, &log.app, &taken)
        .await?;
    Ok(seq)
}

async fn write_break(
    log: &Log<'_>,
    leaves: Vec<(u64, String)>,
    reason: &str,
    options: &PutOptions,
) -> Result<String, ChainError> {
    let record = LogBreak {
        schema: BREAK_SCHEMA.into(),
        table: log.ctx.spec.name.into(),
        app_code: log.folder.clone(),
        reason: reason.to_string(),
        accepted_at_ms: (log.ctx.now_ms)(),
        leaves,
    };
    let key = log.key(&format!(
        "breaks/{:020}-{}.json",
        record.leaves[0].0,
        record.leaves.len()
    ));
    let bytes = serde_json::to_vec(&record).expect("a record always serialises");
    log.write_once(&key, bytes, options).await?;
    tracing::warn!(
        app = log.app,
        key,
        leaves = record.leaves.len(),
        reason,
        "log break accepted: the leaves it names are recorded as gone from the database on purpose"
    );
    Ok(key)
}

/// With `--accept-chain-break`: the leaves whose receipts are gone from the database (a batch
/// removed on purpose) that no break names yet, recorded as gone. Reads the whole log: it is
/// the operator's one-off step.
async fn accept_gaps(
    log: &Log<'_>,
    reason: &str,
    options: &PutOptions,
) -> Result<Option<String>, ChainError> {
    let audit = audit_log(log).await?;
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

/// Where the store holds a linear chain of an older build for the app and its log is empty:
/// the transition record that binds the log's first leaves to that chain's head, written once.
/// A chain the database does not continue is not carried over — unless accepted.
async fn carry_over(
    log: &Log<'_>,
    accept_break: Option<&str>,
    options: &PutOptions,
) -> Result<(), ChainError> {
    let ctx = log.ctx;
    let legacy = chain::checkpoint_prefix(&table_prefix(ctx), &log.folder);
    let newest = ctx
        .store
        .list(&legacy)
        .await?
        .into_iter()
        .filter_map(|k| chain::checkpoint_of_key(&k).map(|(seq, _)| (seq, k.clone())))
        .max();
    let Some((seq, key)) = newest else {
        return Ok(());
    };
    if log.transition().await?.is_some() {
        return Ok(());
    }
    let anchored = store::get_all(ctx.store.as_ref(), &key)
        .await?
        .and_then(|b| chain::Checkpoint::parse(&b, ctx.spec.name, &log.folder).ok())
        .and_then(|c| c.head().cloned());
    let table = ChainTable::new(ctx.spec);
    let ours = table.links(&ctx.db.pool, &log.app, seq, seq).await?.pop();
    let whole = table.links(&ctx.db.pool, &log.app, 1, seq).await?.len() as u64 == seq;
    let agrees = matches!((&anchored, &ours), (Some(a), Some(o)) if a.link == o.link) && whole;
    let record = match (agrees, accept_break) {
        (true, _) => Transition {
            schema: TRANSITION_SCHEMA.into(),
            table: ctx.spec.name.into(),
            app_code: log.folder.clone(),
            legacy_checkpoint: Some(key),
            legacy_head_seq: seq,
            legacy_head_link: anchored.map(|a| a.link),
            reason: None,
            at_ms: (ctx.now_ms)(),
        },
        (false, Some(reason)) => Transition {
            schema: TRANSITION_SCHEMA.into(),
            table: ctx.spec.name.into(),
            app_code: log.folder.clone(),
            legacy_checkpoint: None,
            legacy_head_seq: 0,
            legacy_head_link: None,
            reason: Some(format!("{reason} (the chain's newest checkpoint {key}, at seq {seq}, was not carried over)")),
            at_ms: (ctx.now_ms)(),
        },
        (false, None) => {
            return Err(log.refused(format!(
                "the linear chain of an older build ends at seq {seq} ({key}), and the database's receipts 1..{seq} do not continue it (a receipt missing, changed, or the checkpoint damaged: chain_mismatch): the log cannot carry it over; `outbox-archiver verify --app {}` on the older build names the problem, and `archive --accept-chain-break REASON` starts the log without it",
                log.app
            )))
        }
    };
    let bytes = serde_json::to_vec(&record).expect("a record always serialises");
    log.write_once(&log.key("transition.json"), bytes, options)
        .await?;
    tracing::info!(
        app = log.app,
        legacy_head_seq = record.legacy_head_seq,
        "the log of batches starts, carrying on the app's linear chain"
    );
    Ok(())
}

/// What the audit of one app's log concludes.
#[derive(Debug, Clone, Default)]
pub struct LogAudit {
    /// The store's tree head: size and root (none: no log yet).
    pub size: Option<u64>,
    pub root: Option<Hash>,
    /// The leaves the database's receipts are logged up to.
    pub known: u64,
    pub findings: Vec<ChainFinding>,
    pub breaks: Vec<LogBreak>,
    pub transition: Option<Transition>,
}

/// The whole tree proven once: every leaf's hash recomputed from its entry and every tile's
/// from the level below, the root from the tiles and held to the checkpoint, each leaf held
/// to the receipt at its index, the linear chain it carries on recomputed. Streams: memory is
/// a page of receipts and a tile per level, whatever the log's size.
pub async fn audit(ctx: &RunContext, app: &str) -> Result<LogAudit, ChainError> {
    audit_log(&Log::open(ctx, app).await?).await
}

/// [`audit`] of a log by its folder (an app the database no longer has receipts of).
pub async fn audit_folder(ctx: &RunContext, folder: &str) -> Result<LogAudit, ChainError> {
    audit_log(&Log::of_folder(ctx, folder, folder.to_string())).await
}

async fn audit_log(log: &Log<'_>) -> Result<LogAudit, ChainError> {
    let ctx = log.ctx;
    let mut out = LogAudit::default();
    let finding =
        |problem, seq: Option<u64>, batch: Option<String>, expected: String, actual: String| {
            ChainFinding {
                problem,
                seq,
                batch_id: batch,
                expected,
                actual,
            }
        };
    let head = match log.checkpoint().await {
        Ok(h) => h,
        Err(ChainError::Refused { detail, .. }) => {
            out.findings.push(finding(
                Problem::Fork,
                None,
                None,
                "the store's checkpoint the log's, signed by its key".into(),
                detail,
            ));
            return Ok(out);
        }
        Err(e) => return Err(e),
    };
    out.breaks = log.breaks().await?;
    out.transition = log.transition().await?;
    let accepted: BTreeMap<u64, &str> = out
        .breaks
        .iter()
        .flat_map(|b| b.leaves.iter().map(|(i, batch)| (*i, batch.as_str())))
        .collect();
    let size = head.as_ref().map_or(0, |c| c.size);
    out.size = head.as_ref().map(|c| c.size);
    out.root = head.as_ref().map(|c| c.root);
    let receipts = Receipts::new(ctx.spec);
    let pool = &ctx.db.pool;
    // The linear chain the log carries on, recomputed leaf by leaf.
    let legacy = out
        .transition
        .as_ref()
        .filter(|t| t.legacy_head_seq > 0)
        .cloned();
    let mut link = chain::GENESIS.to_string();
    let legacy_app = chain::chain_app(&log.folder);
    let mut frontier = tlog::Frontier::default();
    // The hash of every full tile, by level: what the level above must hold.
    let mut full: Vec<Vec<Hash>> = vec![Vec::new()];
    let mut page: std::collections::VecDeque<StoredReceipt> = Default::default();
    let mut next_page_from = 0u64;
    let mut db_done = false;
    let bundles = size.div_ceil(TILE_WIDTH);
    let mut tiles = futures_util::stream::iter(0..bundles)
        .map(|n| async move {
            let hashes = log.tile(0, n, size).await;
            let entries = log.entries(n, size).await;
            (n, hashes, entries)
        })
        .buffered(PARALLEL_GETS);
    while let Some((n, hashes, entries)) = tiles.next().await {
        let (hashes, entries) = match (hashes, entries) {
            (Ok(h), Ok(e)) => (h, e),
            (Err(ChainError::Refused { detail, .. }), _)
            | (_, Err(ChainError::Refused { detail, .. })) => {
                out.findings.push(finding(
                    Problem::Mismatch,
                    Some(n * TILE_WIDTH),
                    None,
                    format!("tile {n} of the log whole"),
                    detail,
                ));
                return Ok(out);
            }
            (Err(e), _) | (_, Err(e)) => return Err(e),
        };
        for (i, (hash, entry)) in hashes.iter().zip(&entries).enumerate() {
            let index = n * TILE_WIDTH + i as u64;
            frontier.push(*hash);
            let fields = tlog::parse_entry(entry);
            let batch = fields.map(|f| f[2].to_string());
            if tlog::leaf_hash(entry) != *hash
                || fields.is_none_or(|f| f[0] != ctx.spec.name || f[1] != log.folder)
            {
                out.findings.push(finding(
                    Problem::Mismatch,
                    Some(index),
                    batch.clone(),
                    format!("leaf {index}'s hash in tile {n} the hash of its entry, of this log"),
                    "the tile or the entry bundle was rewritten".into(),
                ));
            }
            if let (Some(t), Some(f)) = (&legacy, fields) {
                if index < t.legacy_head_seq {
                    link = chain::link(ctx.spec.name, &legacy_app, index + 1, &link, f[2], f[3]);
                    if index + 1 == t.legacy_head_seq && Some(&link) != t.legacy_head_link.as_ref()
                    {
                        out.findings.push(finding(
                            Problem::Mismatch,
                            Some(index),
                            batch.clone(),
                            format!(
                                "the linear chain's link at seq {} {}",
                                t.legacy_head_seq,
                                t.legacy_head_link.clone().unwrap_or_default()
                            ),
                            format!(
                                "the log's first {} leaves recompute it as {link}",
                                t.legacy_head_seq
                            ),
                        ));
                    }
                }
            }
            // The receipt at this leaf.
            if page.is_empty() && !db_done {
                let next = receipts
                    .log_page(pool, &log.app, next_page_from, PAGE)
                    .await?;
                db_done = next.len() < PAGE as usize;
                next_page_from = next
                    .last()
                    .and_then(|r| r.log_index)
                    .map_or(next_page_from, |i| i + 1);
                page.extend(next);
            }
            match page.front().and_then(|r| r.log_index) {
                Some(at) if at == index => {
                    let r = page.pop_front().expect("peeked");
                    if entry_of(ctx, &log.folder, &r) != *entry {
                        out.findings.push(finding(Problem::Mismatch, Some(index), Some(r.batch_id.clone()), format!("leaf {index} the entry of batch {}'s receipt", r.batch_id), format!("the store logs {}", String::from_utf8_lossy(entry).replace('\n', " "))));
                    }
                }
                _ if accepted.contains_key(&index) => {}
                // The batch's receipt, not given its leaf yet: a run that ended between the
                // store and the database (its next run takes the leaf), not a gap.
                _ if taken_later(log, batch.as_deref(), entry).await? => {}
                _ => out.findings.push(finding(Problem::Gap, Some(index), batch.clone(), format!("a receipt for leaf {index}"), format!("the store logs batch {} there, and the database has no receipt of it at that leaf (removed, or lost in a restore; `archive --accept-chain-break REASON` records a batch removed on purpose)", batch.clone().unwrap_or_default()))),
            }
        }
        if hashes.len() as u64 == TILE_WIDTH {
            full[0].push(tlog::subtree_of(&hashes));
        }
    }
    drop(tiles);
    // Receipts beyond the store's log.
    let beyond = match page.front() {
        Some(r) => Some(r.clone()),
        None if !db_done || size == 0 => receipts.log_page(pool, &log.app, size, 1).await?.pop(),
        None => None,
    };
    if let Some(r) = beyond {
        out.findings.push(finding(
            Problem::Gap,
            r.log_index,
            Some(r.batch_id.clone()),
            format!("leaf {} in the store's log", r.log_index.unwrap_or(0)),
            format!("the store's checkpoint holds {size} leaves (written back, or the log lost)"),
        ));
    }
    out.known = match ChainTable::new(ctx.spec)
        .last_logged(pool, &log.app)
        .await?
    {
        Some((i, _)) => i + 1,
        None => 0,
    };
    // The levels above: each tile held to the full tiles below it.
    let mut level = 1;
    while size >> (tlog::TILE_HEIGHT * level) > 0 {
        let below = full[level as usize - 1].clone();
        let mut this = Vec::new();
        let hashes = size >> (tlog::TILE_HEIGHT * level);
        for n in 0..hashes.div_ceil(TILE_WIDTH) {
            let stored = match log.tile(level, n, size).await {
                Ok(h) => h,
                Err(ChainError::Refused { detail, .. }) => {
                    out.findings.push(finding(
                        Problem::Mismatch,
                        None,
                        None,
                        format!("tile {level}/{n} of the log whole"),
                        detail,
                    ));
                    return Ok(out);
                }
                Err(e) => return Err(e),
            };
            let first = (n * TILE_WIDTH) as usize;
            if stored.as_slice() != &below[first..first + stored.len()] {
                out.findings.push(finding(
                    Problem::Mismatch,
                    Some((n * TILE_WIDTH) << (tlog::TILE_HEIGHT * level)),
                    None,
                    format!("tile {level}/{n} the hashes of the tiles below it"),
                    "it holds others: the tile was rewritten".into(),
                ));
            }
            if stored.len() as u64 == TILE_WIDTH {
                this.push(tlog::subtree_of(&stored));
            }
        }
        full.push(this);
        level += 1;
    }
    if let Some(h) = &head {
        if frontier.root() != h.root {
            out.findings.push(finding(
                Problem::Fork,
                Some(size),
                None,
                format!(
                    "the checkpoint's root {} the tree of its tiles",
                    b64(&h.root)
                ),
                format!(
                    "the tiles make {}: the checkpoint or the tiles were rewritten",
                    b64(&frontier.root())
                ),
            ));
        }
    }
    Ok(out)
}

/// Whether the receipt of `batch` is in the database without a leaf and is the very `entry`:
/// the next append takes the leaf for it.
async fn taken_later(log: &Log<'_>, batch: Option<&str>, entry: &[u8]) -> Result<bool, ChainError> {
    let Some(batch) = batch else {
        return Ok(false);
    };
    let receipt = Receipts::new(log.ctx.spec)
        .get(&log.ctx.db.pool, &log.app, batch)
        .await?;
    Ok(receipt
        .is_some_and(|r| r.log_index.is_none() && entry_of(log.ctx, &log.folder, &r) == entry))
}

/// The proofs a statement carries for one app's period: the tree heads at the period's start
/// and end, the consistency proofs start → end → the checkpoint, and each batch's inclusion in
/// the head at the end.
pub struct PeriodProof {
    pub checkpoint: String,
    pub size: u64,
    pub start: (u64, Hash),
    pub end: (u64, Hash),
    pub start_to_end: Vec<Hash>,
    pub end_to_checkpoint: Vec<Hash>,
    /// Per batch of the period (in the order given): its leaf and inclusion proof.
    pub inclusions: Vec<(u64, Vec<Hash>)>,
}

impl PeriodProof {
    pub fn to_json(&self, origin: &str) -> serde_json::Value {
        let list = |p: &[Hash]| p.iter().map(b64).collect::<Vec<_>>();
        serde_json::json!({
            "origin": origin,
            "checkpoint": self.checkpoint,
            "size": self.size,
            "at_start": { "size": self.start.0, "root": b64(&self.start.1) },
            "at_end": { "size": self.end.0, "root": b64(&self.end.1) },
            "start_to_end": list(&self.start_to_end),
            "end_to_checkpoint": list(&self.end_to_checkpoint),
        })
    }
}

/// Proves a period for `attest`: `receipts` (the period's, logged) in the tree head at the
/// period's end (`end` leaves), consistent with the head at its start (`start` leaves) and
/// with the store's checkpoint. Reads the tiles on those paths only.
pub async fn prove_period(
    log: &Log<'_>,
    receipts: &[StoredReceipt],
    start: u64,
    end: u64,
) -> Result<Result<PeriodProof, ChainFinding>, ChainError> {
    let Some(head) = log.checkpoint().await? else {
        return Ok(Err(ChainFinding {
            problem: Problem::Gap,
            seq: None,
            batch_id: None,
            expected: "a log in the store".into(),
            actual: "the store holds no checkpoint of the app".into(),
        }));
    };
    if end > head.size {
        return Ok(Err(ChainFinding {
            problem: Problem::Gap,
            seq: Some(end),
            batch_id: None,
            expected: format!("{end} leaves in the store's log"),
            actual: format!("its checkpoint holds {}", head.size),
        }));
    }
    let note = store::get_all(log.ctx.store.as_ref(), &log.key("checkpoint"))
        .await?
        .unwrap_or_default();
    let mut tiles = Tiles::new(log, head.size);
    let (start_root, end_root) = (tiles.root_at(start).await?, tiles.root_at(end).await?);
    let start_to_end = tiles.consistency(start, end).await?;
    let end_to_checkpoint = tiles.consistency(end, head.size).await?;
    let consistent = (start == 0
        || tlog::check_consistency(&start_to_end, start, &start_root, end, &end_root))
        && (end == 0
            || tlog::check_consistency(&end_to_checkpoint, end, &end_root, head.size, &head.root));
    if !consistent {
        return Ok(Err(ChainFinding { problem: Problem::Fork, seq: Some(end), batch_id: None, expected: "the period's tree heads prefixes of the checkpoint's tree".into(), actual: "a consistency proof from the tiles fails: the tiles or the checkpoint were rewritten".into() }));
    }
    let mut inclusions = Vec::new();
    for r in receipts {
        let index = r.log_index.expect("the period's receipts are logged");
        let proof = tiles.inclusion(index, end).await?;
        let leaf = tlog::leaf_hash(&entry_of(log.ctx, &log.folder, r));
        if !tlog::check_inclusion(&proof, index, end, &leaf, &end_root) {
            return Ok(Err(ChainFinding { problem: Problem::Mismatch, seq: Some(index), batch_id: Some(r.batch_id.clone()), expected: format!("batch {}'s entry the leaf at {index}", r.batch_id), actual: "its inclusion proof fails: the receipt changed since it was logged, or the tiles were rewritten".into() }));
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
    }))
}

/// Base64 of a hash, as checkpoints and statements spell them.
pub fn hash_text(h: &Hash) -> String {
    b64(h)
}

#[cfg(test)]
mod tests {
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
