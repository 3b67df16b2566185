//! The chain of an app's batches against the store (README, "The chain of batches"): anchoring
//! the database's links in write-once checkpoints at the end of each archive run, and auditing
//! an app's chain — receipts recomputed, checkpoints read — for `verify`, `purge` and `attest`.
//!
//! Anchoring is one checkpoint per app and run, not one object per batch: a run of n batches
//! costs one LIST, one PUT and one GET (the read-back) in all, where an object per batch would
//! add a PUT and a GET to each batch's requests.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};

use super::attest::AppChain;
use super::verifier::Expected;
use super::RunContext;
use crate::db::chain::ChainTable;
use crate::db::receipts::{Receipts, StoredReceipt};
use crate::db::DbError;
use crate::model::chain::{self, Anchored, Break, Checkpoint, Link, Recorded, GENESIS};
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

/// How an app names its chain in the store ([`chain::folder_name`]): exactly, where the
/// source's app codes compare case-sensitively.
async fn folder(ctx: &RunContext, app: &str) -> Result<String, DbError> {
    Ok(chain::folder_name(app, ctx.app_case_matters().await?))
}

/// The keys of an app's checkpoints (the app's [`folder`]), in chain order, and of its accepted
/// breaks: one LIST.
async fn chain_keys(
    ctx: &RunContext,
    folder: &str,
) -> Result<(Vec<String>, Vec<String>), StoreError> {
    let prefix = chain::checkpoint_prefix(&table_prefix(ctx), folder);
    let mut keys = ctx.store.list(&prefix).await?;
    keys.sort();
    let (breaks, checkpoints) = keys
        .into_iter()
        .filter(|k| chain::checkpoint_of_key(k).is_some() || chain::is_break_key(k))
        .partition(|k| chain::is_break_key(k));
    Ok((checkpoints, breaks))
}

/// The breaks accepted for an app, read; one that cannot be read is returned as an unreadable
/// checkpoint (the audit names it).
async fn read_breaks(
    ctx: &RunContext,
    folder: &str,
    keys: &[String],
) -> Result<(Vec<Break>, Vec<Anchored>), StoreError> {
    let (mut breaks, mut unreadable) = (Vec::new(), Vec::new());
    for key in keys {
        let parsed = match store::get_all(ctx.store.as_ref(), key).await? {
            Some(bytes) => Break::parse(&bytes, ctx.spec.name, folder),
            None => Err(chain::CheckpointError::Unreadable("gone while read".into())),
        };
        match parsed {
            Ok(b) => breaks.push(b),
            Err(e) => unreadable.push(Anchored {
                key: key.clone(),
                checkpoint: Err(e),
            }),
        }
    }
    Ok((breaks, unreadable))
}

/// The apps the store holds checkpoints of (by their folders' names, [`chain::folder_name`]):
/// an app whose receipts are all gone is still audited.
pub async fn apps_in_store(ctx: &RunContext) -> Result<Vec<String>, StoreError> {
    let prefix = format!("{}_chain/", table_prefix(ctx));
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

/// Every checkpoint of an app (its [`folder`]), read and held to itself, and the breaks
/// accepted.
async fn anchored(
    ctx: &RunContext,
    folder: &str,
) -> Result<(Vec<Anchored>, Vec<Break>), StoreError> {
    let (keys, break_keys) = chain_keys(ctx, folder).await?;
    let (breaks, mut unreadable) = read_breaks(ctx, folder, &break_keys).await?;
    let table = ctx.spec.name;
    futures_util::stream::iter(keys)
        .map(|key| async move {
            let checkpoint = match store::get_all(ctx.store.as_ref(), &key).await? {
                Some(bytes) => Checkpoint::parse(&bytes, table, folder),
                None => Err(chain::CheckpointError::Unreadable("gone while read".into())),
            };
            Ok::<_, StoreError>(Anchored { key, checkpoint })
        })
        .buffered(PARALLEL_GETS)
        .try_collect::<Vec<_>>()
        .await
        .map(|mut read| {
            read.append(&mut unreadable);
            (read, breaks)
        })
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
///
/// The store is read first: an archive run that records and anchors meanwhile then adds links
/// the database has and the store does not (not anchored yet), never the other way round (a
/// false gap).
pub async fn audit(ctx: &RunContext, app: &str) -> Result<AppChain, ChainError> {
    let (anchored, breaks) = anchored(ctx, &folder(ctx, app).await?).await?;
    let (recorded, receipts): (Vec<Recorded>, Vec<StoredReceipt>) =
        recorded(ctx, app).await?.into_iter().unzip();
    Ok(AppChain {
        app_code: app.to_string(),
        audit: chain::audit(ctx.spec.name, app, &recorded, &anchored, &breaks),
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
    /// The break record written (`--accept-chain-break`).
    pub break_accepted: Option<String>,
}

/// Records a break the operator accepted: the checkpoints `abandoned` (newest first) are an
/// abandoned branch, and the chain is anchored again after `anchored_to`. Returns its key.
#[allow(clippy::too_many_arguments)]
async fn accept(
    ctx: &RunContext,
    app: &str,
    folder: &str,
    head: &Link,
    anchored_to: Option<&Link>,
    abandoned: Vec<String>,
    dropped: Vec<Link>,
    reason: &str,
    options: &PutOptions,
) -> Result<String, ChainError> {
    let from_seq = match dropped.first() {
        Some(first) if abandoned.is_empty() => first.seq,
        _ => anchored_to.map_or(1, |l| l.seq + 1),
    };
    let accepted = Break {
        schema: chain::BREAK_SCHEMA.into(),
        table: ctx.spec.name.into(),
        app_code: folder.to_string(),
        from_seq,
        prev_link: anchored_to.map_or(GENESIS.to_string(), |l| l.link.clone()),
        abandoned: abandoned.into_iter().rev().collect(),
        dropped,
        head_seq: head.seq,
        head_link: head.link.clone(),
        reason: reason.to_string(),
        accepted_at_ms: (ctx.now_ms)(),
    };
    let key = chain::break_key(&table_prefix(ctx), folder, &accepted);
    write_once(ctx, &key, accepted.to_bytes(), options, app).await?;
    tracing::warn!(
        app,
        key,
        from_seq = accepted.from_seq,
        abandoned = accepted.abandoned.len(),
        dropped = accepted.dropped.len(),
        reason,
        "chain break accepted: the checkpoints it names are kept as an abandoned branch, the receipts it names as removed on purpose"
    );
    Ok(key)
}

/// The newest checkpoint (of `keys`, in chain order) whose link is the database's at its seq —
/// read and held to itself, not taken on its key's word: the chain is anchored to there — and
/// the newer ones, which the database's chain does not continue (a fork, receipts lost, a
/// checkpoint damaged).
async fn last_agreeing(
    ctx: &RunContext,
    app: &str,
    folder: &str,
    head: &Link,
    keys: &[&String],
    dropped: &BTreeMap<u64, Link>,
) -> Result<(Option<Link>, Vec<String>), ChainError> {
    let table = ChainTable::new(ctx.spec);
    let mut others = Vec::new();
    for key in keys.iter().rev() {
        let (seq, prefix) = chain::checkpoint_of_key(key).expect("filtered");
        let ours = match seq {
            s if s == head.seq => Some(head.clone()),
            // A receipt removed on purpose: the link accepted for it is the chain's.
            s if dropped.contains_key(&s) => dropped.get(&s).cloned(),
            s if s < head.seq => table.links(&ctx.db.pool, app, s, s).await?.pop(),
            _ => None,
        };
        let Some(link) = ours.filter(|l| l.link.starts_with(prefix)) else {
            others.push(key.to_string());
            continue;
        };
        let bytes = store::get_all(ctx.store.as_ref(), key).await?;
        let whole = bytes
            .as_deref()
            .map(|b| Checkpoint::parse(b, ctx.spec.name, folder))
            .is_some_and(|c| c.is_ok_and(|c| c.head() == Some(&link)));
        if whole {
            return Ok((Some(link), others));
        }
        others.push(key.to_string());
    }
    Ok((None, others))
}

/// Writes `bytes` at `key` once, under the batches' retention, and reads them back: an object
/// already there is accepted only if it is these very bytes (a retry).
async fn write_once(
    ctx: &RunContext,
    key: &str,
    bytes: Vec<u8>,
    options: &PutOptions,
    app: &str,
) -> Result<(), ChainError> {
    match ctx
        .store
        .put_with(key, Bytes::from(bytes.clone()), PutMode::Create, options)
        .await
    {
        Ok(()) | Err(StoreError::AlreadyExists { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let stored = store::get_all(ctx.store.as_ref(), key).await?;
    if stored.as_deref() != Some(bytes.as_slice()) {
        return Err(ChainError::Refused {
            app: app.to_string(),
            detail: format!("{key} reads back other bytes than were written"),
        });
    }
    Ok(())
}

/// Anchors the app's links the store does not hold yet in one write-once checkpoint, under the
/// policy's retention, read back byte for byte. Called under the app's lock, after its batches.
///
/// Where the store holds checkpoints the database's chain does not continue, nothing is
/// anchored (an error naming them) — unless `accept_break` gives the operator's reason: then a
/// write-once break record names them as an abandoned branch, and the database's chain is
/// anchored from the last link both share.
pub async fn anchor(
    ctx: &RunContext,
    app: &str,
    policy: &WritePolicy,
    accept_break: Option<&str>,
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
    let folder = &folder(ctx, app).await?;
    let (keys, break_keys) = chain_keys(ctx, folder).await?;
    let (breaks, _) = read_breaks(ctx, folder, &break_keys).await?;
    let abandoned: HashSet<&String> = breaks.iter().flat_map(|b| &b.abandoned).collect();
    let live: Vec<&String> = keys.iter().filter(|k| !abandoned.contains(k)).collect();
    let mut dropped: BTreeMap<u64, Link> = chain::dropped_links(&breaks)
        .into_iter()
        .map(|(seq, l)| (seq, l.clone()))
        .collect();
    // Receipts removed from the database on purpose are recorded only when the operator says
    // so; until then they are a gap (verify names it, purge keeps every batch after it).
    let newly_dropped = match accept_break {
        Some(_) => removed_receipts(ctx, app, folder, &head, &dropped, &abandoned).await?,
        None => Vec::new(),
    };
    dropped.extend(newly_dropped.iter().map(|l| (l.seq, l.clone())));
    let (anchored_to, others) = last_agreeing(ctx, app, folder, &head, &live, &dropped).await?;
    let options = PutOptions {
        storage_class: None,
        lock: policy.lock_at((ctx.now_ms)()),
        legal_hold: policy.legal_hold,
    };
    if !others.is_empty() || !newly_dropped.is_empty() {
        let Some(reason) = accept_break else {
            return Err(ChainError::Refused {
                app: app.to_string(),
                detail: format!(
                    "the store holds {} checkpoint(s) the database's chain does not continue ({}): a fork — receipts lost in a database restore, or rewritten — or a checkpoint damaged; once investigated, `archive --app {app} --accept-chain-break REASON` records the break and anchors the database's chain from the last link both share",
                    others.len(),
                    others.join(", ")
                ),
            });
        };
        let key = accept(
            ctx,
            app,
            folder,
            &head,
            anchored_to.as_ref(),
            others,
            newly_dropped,
            reason,
            &options,
        )
        .await?;
        out.break_accepted = Some(key);
    }
    let from = anchored_to.as_ref().map_or(1, |l| l.seq + 1);
    if from > head.seq {
        return Ok(out);
    }
    let links = table.links(pool, app, from, head.seq).await?;
    let prev = anchored_to.map_or(GENESIS.to_string(), |l| l.link);
    let checkpoint = Checkpoint::new(ctx.spec.name, folder, &prev, links);
    let bytes = checkpoint.to_bytes();
    // Only a stretch that holds itself is anchored: a broken one is verify's to name.
    if let Err(e) = Checkpoint::parse(&bytes, ctx.spec.name, folder) {
        return Err(ChainError::Refused {
            app: app.to_string(),
            detail: format!("links {from}..{}: {e}", head.seq),
        });
    }
    let key = chain::checkpoint_key(
        &table_prefix(ctx),
        folder,
        checkpoint.head().expect("at least one link"),
    );
    write_once(ctx, &key, bytes, &options, app).await?;
    out.links = checkpoint.links.len() as u64;
    out.written = Some(key);
    Ok(out)
}

/// The receipts the database's chain skips below its head that the store anchors (one link
/// each, in checkpoints not abandoned) and no accepted break names yet: what
/// `--accept-chain-break` records as removed on purpose. A seq the database skips that the store
/// never anchored cannot be: its link is gone with its receipt, and nothing after it could be
/// recomputed — the receipt is to be restored from a backup of the database instead.
async fn removed_receipts(
    ctx: &RunContext,
    app: &str,
    folder: &str,
    head: &Link,
    accepted: &BTreeMap<u64, Link>,
    abandoned: &HashSet<&String>,
) -> Result<Vec<Link>, ChainError> {
    let (anchored, _) = anchored(ctx, folder).await?;
    let mut store: BTreeMap<u64, Vec<&Link>> = BTreeMap::new();
    for a in anchored.iter().filter(|a| !abandoned.contains(&a.key)) {
        if let Ok(c) = &a.checkpoint {
            for l in &c.links {
                store.entry(l.seq).or_default().push(l);
            }
        }
    }
    let recorded: BTreeSet<u64> = ChainTable::new(ctx.spec)
        .links(&ctx.db.pool, app, 1, head.seq)
        .await?
        .iter()
        .map(|l| l.seq)
        .collect();
    let mut removed = Vec::new();
    let mut expected = 1;
    for &seq in recorded.iter().chain([head.seq + 1].iter()) {
        // Each seq the database skips must be anchored or accepted: the first that is neither
        // is found from the maps' ranges, not by walking every seq (one edited to a huge
        // number is one gap).
        let known = store.range(expected..seq).count()
            + accepted
                .range(expected..seq)
                .filter(|(s, _)| !store.contains_key(s))
                .count();
        if known as u64 != seq - expected {
            let unknown = (expected..seq)
                .find(|s| !store.contains_key(s) && !accepted.contains_key(s))
                .expect("a seq neither anchored nor accepted");
            return Err(ChainError::Refused {
                app: app.to_string(),
                detail: format!("the receipt at seq {unknown} is gone from the database and no checkpoint anchors it (it was removed before its archive run anchored it): its link is gone with it, so the chain after it cannot be proven — restore that receipt row from a backup of the database"),
            });
        }
        for (&gap, at) in store.range(expected..seq) {
            if accepted.contains_key(&gap) {
                continue;
            }
            match at.as_slice() {
                [l, rest @ ..] if rest.iter().all(|o| o.link == l.link) => {
                    removed.push((*l).clone())
                }
                _ => {
                    return Err(ChainError::Refused {
                        app: app.to_string(),
                        detail: format!("seq {gap}, which the database no longer has, is anchored with two links (a fork): accept the fork first"),
                    })
                }
            }
        }
        expected = seq + 1;
    }
    Ok(removed)
}
