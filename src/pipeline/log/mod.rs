//! An app's log of batches against the store (README, "The log of batches"; the encoding is
//! [`crate::model::tlog`], the checkpoint [`crate::model::note`]): appending the app's new
//! receipts at the end of each archive run, proving one batch's leaf for `purge` and `attest`,
//! and auditing the whole tree for `verify`.
//!
//! In the store, beside the apps' folders, per app (its folder: the app's log identity, recorded
//! once when its log begins — [`identity`]):
//!
//! ```text
//! {table prefix}_log/app_code={app}/checkpoint          the tree head: origin, size, root (signed with a log key)
//! {table prefix}_log/app_code={app}/tile/{L}/{N}[.p/W]  hash tiles (C2SP tlog-tiles), write-once
//! {table prefix}_log/app_code={app}/tile/entries/{N}…   the leaves' entries, write-once
//! {table prefix}_log/app_code={app}/breaks/{first}-{n}.json  leaves an operator accepted as gone
//! {table prefix}_log/app_code={app}/recoveries/{first}-{n}.json  batches `recover` recorded again
//! {table prefix}_log/app_code={app}/transition.json     the linear chain this log carries on
//! ```
//!
//! Every cost is the run's own: an append reads the checkpoint and the right edge (one partial
//! tile per level, at most four at a billion batches) and writes what changed; a proof reads
//! the tiles on one leaf's path. Only `verify` reads the whole tree, a tile per 256 batches.

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::RunContext;
use crate::db::DbError;
use crate::model::digest::sha256_hex;
use crate::model::format;
use crate::model::note::{Checkpoint, Signer, Verifier};
use crate::model::protection::PutOptions;
use crate::model::receipt::Receipt;
use crate::model::tlog::{self, Hash, TILE_WIDTH};
use crate::store::{self, PutMode, StoreError};

mod append;
mod audit;
pub(crate) mod finding;
mod heads;
mod identity;
mod keys;
pub(crate) mod legacy;
mod proof;
mod recovery;
mod tiles;

pub(crate) use append::append;
pub(crate) use audit::LogAudit;
pub(crate) use heads::Seen;
pub(crate) use identity::logged_apps;
pub(crate) use proof::{prove_period, PeriodProof, Prover};
pub(crate) use recovery::{behind, behind_to_append, Behind, Lost, Recovery};

/// Why a log could not be read, proven or appended to.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("app {app}'s log: {detail}; nothing appended — run `outbox-archiver verify --app {app} --metadata-only`")]
    Refused { app: String, detail: String },
}

/// The log keys of a run: the signing keys every checkpoint written is signed with (each
/// `--log-key-file`: two while a key is rotated), and the verifiers a checkpoint read is held to
/// — one of their signatures must be on it: each `--log-verifier`, and the signing keys' own.
#[derive(Debug, Clone, Default)]
pub struct LogKeys {
    pub(crate) signers: Vec<Arc<Signer>>,
    pub(crate) verifiers: Vec<Verifier>,
}

impl LogKeys {
    /// The keys a checkpoint read may be signed by (none configured: any checkpoint, signed or
    /// not).
    pub(crate) fn verifiers(&self) -> Vec<Verifier> {
        let mut out = self.verifiers.clone();
        for v in self.signers.iter().map(|s| s.verifier()) {
            if !out.contains(&v) {
                out.push(v);
            }
        }
        out
    }
}

/// Receipts appended per write of tiles (a first append of a long chain goes in steps).
const APPEND_CHUNK: u32 = 4096;

/// Tiles read at once by the whole-tree audit.
const PARALLEL_GETS: usize = 16;

/// Receipts read per page by the audit.
const PAGE: u32 = 1000;

/// The schema of a break record.
pub(crate) const BREAK_SCHEMA: &str = "outbox-archive-log-break/v1";

/// The schema of the transition record.
pub(crate) const TRANSITION_SCHEMA: &str = "outbox-archive-log-transition/v1";

/// Leaves an operator accepted as gone from the database (`archive --accept-log-break`):
/// a batch removed on purpose, or receipts lost in a restore of the database from a backup.
/// Written once, never removed: every `verify` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LogBreak {
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
pub(crate) struct Transition {
    pub schema: String,
    pub table: String,
    pub app_code: String,
    /// The chain's newest checkpoint (none: no chain was carried, see `reason`).
    pub legacy_checkpoint: Option<String>,
    pub legacy_head_seq: u64,
    pub legacy_head_link: Option<String>,
    /// Why no chain was carried, when none was (the operator's `--accept-log-break`).
    pub reason: Option<String>,
    /// The break records the older build accepted (their keys): the chain carried over is the
    /// branch that went on past them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub legacy_breaks: Vec<String>,
    pub at_ms: i64,
}

/// One app's log in the store.
pub(crate) struct Log<'a> {
    ctx: &'a RunContext,
    app: String,
    /// How the app is named in the store and its entries: its recorded log identity
    /// ([`identity::resolve`]).
    pub folder: String,
    prefix: format::Prefix,
    pub origin: String,
    /// Whether the identity is recorded; if not, the first write records it ([`Log::begin`]).
    recorded: bool,
    begun: tokio::sync::OnceCell<()>,
}

/// The table's prefix in the store.
fn table_prefix(ctx: &RunContext) -> format::Prefix {
    format::table_prefix(ctx.store.location().prefix(), ctx.spec.name)
}

/// The folders of the logs the store holds. One delimited LIST (a page per thousand apps).
async fn apps_in_store(ctx: &RunContext) -> Result<Vec<String>, StoreError> {
    let prefix = format::logs_prefix(&table_prefix(ctx));
    let mut apps: Vec<String> = ctx
        .store
        .list(&prefix)
        .await?
        .iter()
        .filter_map(|k| Some(format::log_folder_of_key(&prefix, k.as_str())?.to_string()))
        .collect();
    apps.dedup();
    Ok(apps)
}

/// The entry of a receipt's batch: its manifest hash as the receipt's fields imply it
/// (recomputed, not the column), so a receipt edited since it was logged is another leaf.
pub(crate) fn entry_of(ctx: &RunContext, folder: &str, r: &Receipt) -> Vec<u8> {
    let manifest = sha256_hex(&r.manifest(ctx.spec.name));
    tlog::entry(ctx.spec.name, folder, &r.batch_id, &manifest)
}

fn b64(h: &Hash) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(h)
}

impl<'a> Log<'a> {
    /// The app's log to read, where its recorded identity says (or, not recorded yet, where
    /// [`identity::resolve`] finds it).
    pub(crate) async fn open(ctx: &'a RunContext, app: &str) -> Result<Log<'a>, LogError> {
        Log::open_for(ctx, app, identity::Purpose::Read).await
    }

    /// The app's log opened for `purpose`: to append to it, an identity found in the store is
    /// recorded now, and one not begun by the log's first write ([`Log::begin`]).
    async fn open_for(
        ctx: &'a RunContext,
        app: &str,
        purpose: identity::Purpose,
    ) -> Result<Log<'a>, LogError> {
        let identity = identity::resolve(ctx, app, purpose).await?;
        let folder = identity.folder;
        Ok(Log {
            prefix: format::log_prefix(&table_prefix(ctx), &folder),
            origin: format::log_origin(ctx.spec.name, &folder),
            ctx,
            app: app.to_string(),
            folder,
            recorded: identity.recorded,
            begun: tokio::sync::OnceCell::new(),
        })
    }

    fn key(&self, path: &str) -> format::Key {
        self.prefix.key(path)
    }

    /// The folder `path` of this log (`keys/`, `breaks/`, `heads/`: the `/` at its end is the
    /// folder's).
    fn folder(&self, path: &str) -> format::Prefix {
        self.prefix.folder(path.trim_end_matches('/'))
    }

    fn refused(&self, detail: String) -> LogError {
        LogError::Refused {
            app: self.app.clone(),
            detail,
        }
    }

    /// The log's head, held to the log key where one is configured (none: an empty log).
    pub(crate) async fn checkpoint(&self) -> Result<Option<Checkpoint>, LogError> {
        Ok(self.checkpoint_note().await?.map(|(c, _)| c))
    }

    /// The log's head and the note it was read from (signatures included).
    async fn checkpoint_note(&self) -> Result<Option<(Checkpoint, Vec<u8>)>, LogError> {
        let key = self.key(format::LOG_CHECKPOINT);
        let Some(bytes) = store::get_all(self.ctx.store.as_ref(), &key).await? else {
            return Ok(None);
        };
        match Checkpoint::open(&bytes, &self.origin, &self.ctx.log_keys.verifiers()) {
            Ok(c) => Ok(Some((c, bytes))),
            Err(e) => Err(self.refused(format!("{key}: {e}"))),
        }
    }

    /// The bytes of the tile at `path` (full, or a partial tile's `.p/{width}` path) as a tree of
    /// that width reads it: the object itself or, where a later append replaced that partial
    /// tile, the first `width` items of a wider one (C2SP tlog-tiles: a tile's first hashes
    /// never change) — the full tile, else the narrowest wider partial one.
    async fn tile_bytes(&self, full: &str, width: u64) -> Result<Option<(Vec<u8>, u64)>, LogError> {
        let store = self.ctx.store.as_ref();
        let exact = tlog::tile_path_of_width(full, width);
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
            .list(&self.folder(&tlog::partials_of(full)))
            .await?;
        let wider = partials
            .iter()
            .filter_map(|k| Some((tlog::partial_width(k.as_str())?, k)))
            .filter(|(w, _)| *w > width)
            .min();
        match wider {
            None => Ok(None),
            Some((w, key)) => Ok(store::get_all(store, key).await?.map(|b| (b, w))),
        }
    }

    /// The items of the tile `path_of(width)` (hashes or entries, split by `parse`) as a tree of
    /// `width` items there reads it.
    async fn items<T>(
        &self,
        what: &str,
        path_of: impl Fn(u64) -> String,
        width: u64,
        parse: impl Fn(&[u8]) -> Option<Vec<T>>,
    ) -> Result<Vec<T>, LogError> {
        let key = self.key(&path_of(width));
        let (bytes, found) = self
            .tile_bytes(&path_of(TILE_WIDTH), width)
            .await?
            .ok_or_else(|| self.refused(format!("{what} {key} is missing")))?;
        match parse(&bytes) {
            Some(mut items) if items.len() as u64 == found => {
                items.truncate(width as usize);
                Ok(items)
            }
            _ => Err(self.refused(format!("{what} {key} does not hold {found} items"))),
        }
    }

    /// The hashes of the tile at `level`, `index` in the tree of `size` leaves.
    async fn tile(&self, level: u32, index: u64, size: u64) -> Result<Vec<Hash>, LogError> {
        let width = tlog::tile_width(level, index, size);
        let path = |w| tlog::tile_path(level, index, w);
        self.items("tile", path, width, tlog::tile_hashes).await
    }

    /// The entries of bundle `index` in the tree of `size` leaves.
    async fn entries(&self, index: u64, size: u64) -> Result<Vec<Vec<u8>>, LogError> {
        let width = tlog::tile_width(0, index, size);
        let path = |w| tlog::entries_path(index, w);
        self.items("entry bundle", path, width, tlog::unbundle)
            .await
    }

    /// The breaks accepted for this log (one LIST; they are few).
    pub(crate) async fn breaks(&self) -> Result<Vec<LogBreak>, LogError> {
        let mut out = Vec::new();
        for key in self
            .ctx
            .store
            .list(&self.folder(format::LOG_BREAKS))
            .await?
        {
            let bytes = store::get_all(self.ctx.store.as_ref(), &key).await?;
            match bytes.map(|b| serde_json::from_slice::<LogBreak>(&b)) {
                Some(Ok(b)) if b.schema == BREAK_SCHEMA => out.push(b),
                _ => return Err(self.refused(format!("break record {key} cannot be read"))),
            }
        }
        Ok(out)
    }

    /// The transition record, if the log carries on a linear chain.
    pub(crate) async fn transition(&self) -> Result<Option<Transition>, LogError> {
        let key = self.key(format::LOG_TRANSITION);
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
        key: &crate::model::key::Key,
        bytes: Vec<u8>,
        options: &PutOptions,
    ) -> Result<(), LogError> {
        self.begin().await?;
        let store = self.ctx.store.as_ref();
        match store
            .put_with(key, Bytes::from(bytes.clone()), PutMode::Create, options)
            .await
        {
            Ok(()) => Ok(()),
            Err(StoreError::AlreadyExists { .. }) => {
                if store::get_all(store, key).await?.as_deref() == Some(bytes.as_slice()) {
                    return Ok(());
                }
                // Never written over, a partial tile neither: one past the checkpoint holds
                // leaves of a larger tree — a checkpoint written back since (a rollback), or a
                // run that ended before its checkpoint whose receipts are gone since. Either
                // way its leaves are evidence.
                Err(self.refused(format!(
                    "{key} already holds other bytes: a tile of another tree (the log forked, or its checkpoint was written back past leaves this tile holds: {}); nothing is written over",
                    finding::Problem::Rollback.kind().label()
                )))
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// The whole tree proven once ([`audit::audit_log`]): every leaf, tile and the root, each leaf
/// held to the receipt at its index.
pub(crate) async fn audit(ctx: &RunContext, app: &str) -> Result<LogAudit, LogError> {
    audit::audit_log(&Log::open(ctx, app).await?).await
}

/// Base64 of a hash, as checkpoints and statements spell them.
pub(crate) fn hash_text(h: &Hash) -> String {
    b64(h)
}

/// The hash a [`hash_text`] spells (none: not base64 of 32 bytes).
pub(crate) fn hash_of_text(text: &str) -> Option<Hash> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?
        .try_into()
        .ok()
}
