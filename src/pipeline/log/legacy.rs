//! The linear chain an older build left (`_chain/app_code={app}/`, `outbox-archive-chain/v1`,
//! builds before 2026-12-03): found, held to the database's links, and carried into the log by
//! the app's first append (`transition.json`). The older build's own accepted breaks
//! (`{seq}-break-{link}.json`, naming the checkpoints of an abandoned branch) are honoured: the
//! chain carried over is the branch that went on, and the transition names the breaks. Until a
//! log carries it, `verify` holds the chain to the database as the older build did.

use std::collections::HashSet;

use serde::Deserialize;

use super::{table_prefix, Log, LogError, Transition, TRANSITION_SCHEMA};
use crate::model::chain;
use crate::model::format;
use crate::model::protection::PutOptions;
use crate::pipeline::log::finding::{LogFinding, Problem};
use crate::store;

/// An older build's break record, as much of it as the carry-over needs.
#[derive(Deserialize)]
struct OldBreak {
    abandoned: Vec<String>,
}

/// The linear chain an older build left for an app.
pub(super) struct Legacy {
    /// Its newest checkpoint of the branch that went on: seq and key.
    pub seq: u64,
    pub key: crate::model::key::Key,
    /// The older build's break records (keys), each abandoning checkpoints.
    pub breaks: Vec<crate::model::key::Key>,
    /// Whether the database's links `1..=seq` are whole and end at that checkpoint's head.
    pub agrees: bool,
}

/// The link the linear chain gives the leaf at `index` after `prev` (the genesis for the first:
/// [`first_link`]), from the leaf's entry fields (batch id, manifest hash): what the log audit
/// recomputes over the first leaves of a log that carries an older build's chain on.
pub(super) fn next_link(
    table: &str,
    folder: &str,
    index: u64,
    prev: &str,
    (batch_id, manifest_sha256): (&str, &str),
) -> String {
    let app = chain::chain_app(folder);
    chain::link(table, &app, index + 1, prev, batch_id, manifest_sha256)
}

/// The link before the linear chain's first.
pub(super) fn first_link() -> String {
    chain::GENESIS.to_string()
}

/// Whether `key`, under the table's `{table}_chain/`, is a checkpoint an older build wrote.
pub(crate) fn is_checkpoint_key(key: &str) -> bool {
    chain::checkpoint_of_key(key).is_some()
}

/// Whether an older build's key names a break record (`…-break-….json`).
fn is_break_key(key: &str) -> bool {
    key.rsplit('/')
        .next()
        .is_some_and(|n| n.contains("-break-") && n.ends_with(".json"))
}

/// The app's linear chain of an older build, if the store holds one: its newest checkpoint not
/// abandoned by a break the older build accepted, held to the database's links.
pub(super) async fn find(log: &Log<'_>) -> Result<Option<Legacy>, LogError> {
    let ctx = log.ctx;
    let prefix = chain::checkpoint_prefix(table_prefix(ctx).as_str(), &log.folder);
    // The older build's folder, as it named it (a carry-over: not one of this build's).
    let keys = ctx.store.list_starting(&prefix).await?;
    let breaks: Vec<crate::model::key::Key> = keys
        .iter()
        .filter(|k| is_break_key(k.as_str()))
        .cloned()
        .collect();
    let mut abandoned = HashSet::new();
    for key in &breaks {
        let bytes = store::get_all(ctx.store.as_ref(), key).await?;
        match bytes.map(|b| serde_json::from_slice::<OldBreak>(&b)) {
            Some(Ok(b)) => abandoned.extend(b.abandoned),
            _ => {
                return Err(log.refused(format!(
                    "the older build's break record {key} cannot be read"
                )))
            }
        }
    }
    let newest = keys
        .into_iter()
        .filter(|k| !abandoned.contains(k.as_str()))
        .filter_map(|k| chain::checkpoint_of_key(k.as_str()).map(|(seq, _)| (seq, k.clone())))
        .max();
    let Some((seq, key)) = newest else {
        return Ok(None);
    };
    let anchored = store::get_all(ctx.store.as_ref(), &key)
        .await?
        .and_then(|b| chain::Checkpoint::parse(&b, ctx.spec.name, &log.folder).ok())
        .and_then(|c| c.head().cloned());
    let table = &ctx.tables.receipts;
    let ours = table.links(&log.app, seq, seq).await?.pop();
    let whole = table.links(&log.app, 1, seq).await?.len() as u64 == seq;
    let agrees = matches!((&anchored, &ours), (Some(a), Some(o)) if a.link == o.link) && whole;
    Ok(Some(Legacy {
        seq,
        key,
        breaks,
        agrees,
    }))
}

/// For `verify`, where no log carries the app's chain yet: a chain of an older build the
/// database does not continue — a fork the older build reported, never accepted — as the
/// finding it was then (`log_mismatch` at its head).
pub(super) async fn unaccepted(log: &Log<'_>) -> Result<Option<LogFinding>, LogError> {
    Ok(find(log).await?.filter(|l| !l.agrees).map(|l| LogFinding {
        problem: Problem::Mismatch,
        seq: Some(l.seq),
        batch_id: None,
        expected: format!(
            "the database's receipts 1..{} continuing the linear chain of an older build, whose newest checkpoint is {}",
            l.seq, l.key
        ),
        actual: format!(
            "they do not (a receipt missing or changed, a database restored, or the checkpoint damaged): no log can carry the chain over; once investigated, `archive --app {} --accept-log-break REASON` starts the log without it, and the reason is kept",
            log.app
        ),
    }))
}

/// Where the store holds a linear chain of an older build for the app and its log is empty:
/// the transition record that binds the log's first leaves to that chain's head, written once.
/// A chain the database does not continue is not carried over — unless accepted.
pub(super) async fn carry_over(
    log: &Log<'_>,
    accept_break: Option<&str>,
    options: &PutOptions,
) -> Result<(), LogError> {
    let ctx = log.ctx;
    let Some(legacy) = find(log).await? else {
        return Ok(());
    };
    if log.transition().await?.is_some() {
        return Ok(());
    }
    let (seq, key) = (legacy.seq, legacy.key.clone());
    let record = match (legacy.agrees, accept_break) {
        (true, _) => {
            let head = store::get_all(ctx.store.as_ref(), &key)
                .await?
                .and_then(|b| chain::Checkpoint::parse(&b, ctx.spec.name, &log.folder).ok())
                .and_then(|c| c.head().cloned());
            Transition {
                schema: TRANSITION_SCHEMA.into(),
                table: ctx.spec.name.into(),
                app_code: log.folder.clone(),
                legacy_checkpoint: Some(key.to_string()),
                legacy_head_seq: seq,
                legacy_head_link: head.map(|a| a.link),
                reason: None,
                legacy_breaks: legacy.breaks.iter().map(|k| k.to_string()).collect(),
                at_ms: ctx.now(),
            }
        }
        (false, Some(reason)) => Transition {
            schema: TRANSITION_SCHEMA.into(),
            table: ctx.spec.name.into(),
            app_code: log.folder.clone(),
            legacy_checkpoint: None,
            legacy_head_seq: 0,
            legacy_head_link: None,
            reason: Some(format!("{reason} (the chain's newest checkpoint {key}, at seq {seq}, was not carried over)")),
            legacy_breaks: legacy.breaks.iter().map(|k| k.to_string()).collect(),
            at_ms: ctx.now(),
        },
        (false, None) => {
            return Err(log.refused(format!(
                "the linear chain of an older build ends at seq {seq} ({key}), and the database's receipts 1..{seq} do not continue it (a receipt missing, changed, or the checkpoint damaged: {}): the log cannot carry it over; `outbox-archiver verify --app {}` names it, and `archive --accept-log-break REASON` starts the log without it (the reason is kept, and verify and every statement show it)",
                Problem::Mismatch.kind().label(),
                log.app
            )))
        }
    };
    let bytes = serde_json::to_vec(&record).expect("a record always serialises");
    log.write_once(&log.key(format::LOG_TRANSITION), bytes, options)
        .await?;
    tracing::info!(
        app = log.app,
        legacy_head_seq = record.legacy_head_seq,
        legacy_breaks = record.legacy_breaks.len(),
        "the log of batches starts, carrying on the app's linear chain"
    );
    Ok(())
}

impl Transition {
    /// What an operator accepted of the chain an older build left, as `verify` and the
    /// statement list it beside the log's breaks: a chain not carried over (with the reason),
    /// and breaks the older build accepted. Empty for a chain carried over whole.
    pub(crate) fn accepted(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .legacy_breaks
            .iter()
            .map(|k| format!("the linear chain of an older build was carried over past a break that build accepted ({k}): the checkpoints it names were an abandoned branch"))
            .collect();
        if let (0, Some(reason)) = (self.legacy_head_seq, &self.reason) {
            out.push(format!(
                "the linear chain of an older build was not carried over: {reason}"
            ));
        }
        out
    }
}
