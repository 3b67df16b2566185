//! The chain of an app's batches against the store (README, "The chain of batches"): anchoring
//! the database's links in write-once checkpoints at the end of each archive run, and auditing
//! an app's chain — receipts recomputed, checkpoints read — for `verify`, `purge` and `attest`.
//!
//! Anchoring is one checkpoint per app and run, not one object per batch: a run of n batches
//! costs one LIST, one PUT and one GET (the read-back) in all, where an object per batch would
//! add a PUT and a GET to each batch's requests.

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};

use super::attest::AppChain;
use super::verifier::Expected;
use super::RunContext;
use crate::db::chain::ChainTable;
use crate::db::receipts::{Receipts, StoredReceipt};
use crate::db::DbError;
use crate::model::chain::{self, Anchored, Checkpoint, Link, Recorded, GENESIS};
use crate::model::digest::sha256_hex;
use crate::model::format;
use crate::model::protection::{PutOptions, WritePolicy};
use crate::store::{self, PutMode, StoreError};

/// Why a chain could not be audited or anchored.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("app {app}'s chain: {detail}; nothing anchored — run `outbox-archiver verify --app {app} --metadata-only`")]
    Refused { app: String, detail: String },
}

/// Checkpoints read at once.
const PARALLEL_GETS: usize = 8;

/// Receipts read per page of an app's chain.
const PAGE: u32 = 1000;

/// The table's prefix in the store.
fn table_prefix(ctx: &RunContext) -> String {
    format::table_prefix(ctx.store.location().prefix(), ctx.spec.name)
}

/// The keys of an app's checkpoints, in chain order.
async fn checkpoint_keys(ctx: &RunContext, app: &str) -> Result<Vec<String>, StoreError> {
    let prefix = chain::checkpoint_prefix(&table_prefix(ctx), app);
    let mut keys: Vec<String> = ctx
        .store
        .list(&prefix)
        .await?
        .into_iter()
        .filter(|k| chain::checkpoint_of_key(k).is_some())
        .collect();
    keys.sort();
    Ok(keys)
}

/// Every checkpoint of an app, read and held to itself.
pub async fn anchored(ctx: &RunContext, app: &str) -> Result<Vec<Anchored>, StoreError> {
    let keys = checkpoint_keys(ctx, app).await?;
    let table = ctx.spec.name;
    let chain_app = &chain::chain_app(app);
    futures_util::stream::iter(keys)
        .map(|key| async move {
            let checkpoint = match store::get_all(ctx.store.as_ref(), &key).await? {
                Some(bytes) => Checkpoint::parse(&bytes, table, chain_app),
                None => Err(chain::CheckpointError::Unreadable("gone while read".into())),
            };
            Ok::<_, StoreError>(Anchored { key, checkpoint })
        })
        .buffered(PARALLEL_GETS)
        .try_collect()
        .await
}

/// The manifest hash a receipt's fields imply: a receipt edited since it was linked implies
/// another, and its link no longer recomputes.
fn implied_manifest_sha256(ctx: &RunContext, receipt: &StoredReceipt) -> String {
    sha256_hex(&Expected::of_receipt(ctx.spec, receipt, Vec::new()).manifest)
}

/// Every receipt of an app as the chain sees it, and the receipts themselves (by seq, then the
/// unlinked ones), read a page at a time.
pub async fn recorded(
    ctx: &RunContext,
    app: &str,
) -> Result<Vec<(Recorded, StoredReceipt)>, DbError> {
    let receipts = Receipts::new(ctx.spec);
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let page = receipts.chain_page(&ctx.db.pool, app, after, PAGE).await?;
        let done = page.len() < PAGE as usize;
        for r in page {
            after = r.chain.as_ref().map_or(after, |(seq, _)| *seq);
            out.push(r);
        }
        if done {
            break;
        }
    }
    out.extend(receipts.unlinked(&ctx.db.pool, app).await?);
    Ok(out
        .into_iter()
        .map(|r| {
            let recorded = Recorded {
                seq: r.chain.as_ref().map(|(seq, _)| *seq),
                batch_id: r.batch_id.clone(),
                manifest_sha256: implied_manifest_sha256(ctx, &r),
                link: r.chain.as_ref().map(|(_, link)| link.clone()),
            };
            (recorded, r)
        })
        .collect())
}

/// An app's chain audited: its receipts recomputed and held to the store's checkpoints.
pub async fn audit(ctx: &RunContext, app: &str) -> Result<AppChain, ChainError> {
    let (recorded, anchored) = tokio::join!(recorded(ctx, app), anchored(ctx, app));
    let (recorded, receipts): (Vec<Recorded>, Vec<StoredReceipt>) = recorded?.into_iter().unzip();
    let anchored = anchored?;
    Ok(AppChain {
        app_code: app.to_string(),
        audit: chain::audit(ctx.spec.name, app, &recorded, &anchored),
        receipts,
        anchored,
    })
}

/// What anchoring did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Anchoring {
    /// The checkpoint written (none: every link was anchored already).
    pub written: Option<String>,
    /// The links it anchored.
    pub links: u64,
    /// The database's head seq.
    pub head: u64,
    /// What the store holds that the database's chain does not continue (a fork, receipts
    /// gone): said, never overwritten; `verify` names each.
    pub disagreement: Option<String>,
}

/// Anchors the app's links the store does not hold yet in one write-once checkpoint, under the
/// policy's retention, read back byte for byte. Called under the app's lock, after its batches.
pub async fn anchor(
    ctx: &RunContext,
    app: &str,
    policy: &WritePolicy,
) -> Result<Anchoring, ChainError> {
    let table = ChainTable::new(ctx.spec);
    let pool = &ctx.db.pool;
    let Some(head) = table.head(pool, app).await? else {
        return Ok(Anchoring::default());
    };
    let mut out = Anchoring {
        head: head.seq,
        ..Anchoring::default()
    };
    // The newest checkpoint whose link is the database's at its seq: the chain is anchored to
    // there. Any newer one is another branch, or receipts the database lost.
    let keys = checkpoint_keys(ctx, app).await?;
    let mut anchored_to: Option<Link> = None;
    let mut others = Vec::new();
    for key in keys.iter().rev() {
        let (seq, prefix) = chain::checkpoint_of_key(key).expect("filtered");
        let ours = match seq {
            s if s == head.seq => Some(head.clone()),
            s if s < head.seq => table.links(pool, app, s, s).await?.pop(),
            _ => None,
        };
        match ours {
            Some(link) if link.link.starts_with(prefix) => {
                anchored_to = Some(link);
                break;
            }
            _ => others.push(key.clone()),
        }
    }
    if !others.is_empty() {
        out.disagreement = Some(format!(
            "the store holds {} checkpoint(s) the database's chain does not continue ({}): a fork or receipts lost — the store keeps them, and verify names them",
            others.len(),
            others.join(", ")
        ));
    }
    let from = anchored_to.as_ref().map_or(1, |l| l.seq + 1);
    if from > head.seq {
        return Ok(out);
    }
    let links = table.links(pool, app, from, head.seq).await?;
    let prev = anchored_to.map_or(GENESIS.to_string(), |l| l.link);
    let chain_app = chain::chain_app(app);
    let checkpoint = Checkpoint::new(ctx.spec.name, &chain_app, &prev, links);
    let bytes = checkpoint.to_bytes();
    // Only a stretch that holds itself is anchored: a broken one is verify's to name.
    if let Err(e) = Checkpoint::parse(&bytes, ctx.spec.name, &chain_app) {
        return Err(ChainError::Refused {
            app: app.to_string(),
            detail: format!("links {from}..{}: {e}", head.seq),
        });
    }
    let key = chain::checkpoint_key(
        &table_prefix(ctx),
        app,
        checkpoint.head().expect("at least one link"),
    );
    let options = PutOptions {
        storage_class: None,
        lock: policy.lock_at((ctx.now_ms)()),
        legal_hold: policy.legal_hold,
    };
    match ctx
        .store
        .put_with(&key, Bytes::from(bytes.clone()), PutMode::Create, &options)
        .await
    {
        Ok(()) | Err(StoreError::AlreadyExists { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    // Read back: the bytes there are these (a checkpoint of the same stretch is the same bytes).
    let stored = store::get_all(ctx.store.as_ref(), &key).await?;
    if stored.as_deref() != Some(bytes.as_slice()) {
        return Err(ChainError::Refused {
            app: app.to_string(),
            detail: format!("checkpoint {key} reads back other bytes than were written"),
        });
    }
    out.links = checkpoint.links.len() as u64;
    out.written = Some(key);
    Ok(out)
}
