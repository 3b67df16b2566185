//! The whole tree proven once, for `verify`: every leaf's hash recomputed from its entry and
//! every tile's from the level below, the root from the tiles and held to the checkpoint, each
//! leaf held to the receipt at its index, the linear chain it carries on recomputed. Streams:
//! memory is a page of receipts, a tile of each level in flight and a hash per full tile (32
//! bytes per 256 batches), whatever the log's size.

use std::collections::{BTreeMap, VecDeque};

use futures_util::StreamExt;

use super::{
    b64, entry_of, heads, legacy, Log, LogBreak, LogError, Transition, PAGE, PARALLEL_GETS,
};
use crate::db::receipts::Receipts;
use crate::model::receipt::Receipt;
use crate::model::tlog::{self, Hash, TILE_WIDTH};
use crate::pipeline::log::finding::{LogFinding, Problem};
use crate::pipeline::RunContext;

/// What the audit of one app's log concludes.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogAudit {
    /// The store's tree head: size and root (none: no log yet).
    pub size: Option<u64>,
    pub root: Option<Hash>,
    /// The leaves the database's receipts are logged up to.
    pub known: u64,
    pub findings: Vec<LogFinding>,
    pub breaks: Vec<LogBreak>,
    pub transition: Option<Transition>,
}

fn finding(
    problem: Problem,
    seq: Option<u64>,
    batch_id: Option<String>,
    expected: String,
    actual: String,
) -> LogFinding {
    LogFinding {
        problem,
        seq,
        batch_id,
        expected,
        actual,
    }
}

/// [`super::audit`] of a log.
pub(super) async fn audit_log(log: &Log<'_>) -> Result<LogAudit, LogError> {
    let mut out = LogAudit::default();
    let head = match log.checkpoint().await {
        Ok(h) => h,
        Err(LogError::Refused { detail, .. }) => {
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
    out.size = head.as_ref().map(|c| c.size);
    out.root = head.as_ref().map(|c| c.root);
    let size = out.size.unwrap_or(0);
    out.findings
        .extend(heads::rollback(log, head.as_ref()).await?);
    if size == 0 && out.transition.is_none() {
        out.findings.extend(super::legacy::unaccepted(log).await?);
    }
    let mut leaves = Leaves::new(log, &out);
    let full = match leaves.walk(size).await? {
        Ok(full) => full,
        Err(problem) => {
            out.findings.extend(leaves.findings);
            out.findings.push(problem);
            return Ok(out);
        }
    };
    let (frontier, beyond) = (leaves.frontier.root(), leaves.beyond(size).await?);
    out.findings.extend(leaves.findings);
    out.findings.extend(beyond);
    let last_logged = log.ctx.tables.receipts.last_logged(&log.app).await?;
    out.known = last_logged.map_or(0, |(i, _)| i + 1);
    if out.known <= size {
        let after_seq = last_logged.map_or(0, |(_, seq)| seq);
        out.findings
            .extend(heads::leaves_past(log, size, after_seq).await?);
    }
    out.findings.extend(upper_levels(log, size, full).await?);
    if let Some(h) = &head {
        if frontier != h.root {
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
                    b64(&frontier)
                ),
            ));
        }
    }
    if let (Some(h), true) = (&head, out.findings.is_empty()) {
        // The head proven whole is remembered too, where the role may write it (archive's
        // role: `verify` runs as it); a verify role without the grant only reads.
        if let Err(e) = log.record_head(h).await {
            tracing::debug!(app = log.app, error = %e, "the verified tree head was not recorded");
        }
    }
    Ok(out)
}

/// The leaves walked in order, beside the receipts by leaf.
struct Leaves<'l, 'a> {
    log: &'l Log<'a>,
    ctx: &'a RunContext,
    receipts: Receipts,
    accepted: BTreeMap<u64, String>,
    /// The linear chain the log carries on, and its link so far.
    legacy: Option<Transition>,
    link: String,
    frontier: tlog::Frontier,
    page: VecDeque<Receipt>,
    next_page_from: u64,
    db_done: bool,
    findings: Vec<LogFinding>,
}

impl<'l, 'a> Leaves<'l, 'a> {
    fn new(log: &'l Log<'a>, audit: &LogAudit) -> Self {
        Leaves {
            log,
            ctx: log.ctx,
            receipts: log.ctx.tables.receipts.clone(),
            accepted: audit
                .breaks
                .iter()
                .flat_map(|b| b.leaves.iter().cloned())
                .collect(),
            legacy: audit.transition.clone().filter(|t| t.legacy_head_seq > 0),
            link: legacy::first_link(),
            frontier: tlog::Frontier::default(),
            page: VecDeque::new(),
            next_page_from: 0,
            db_done: false,
            findings: Vec::new(),
        }
    }

    /// Every level-0 tile and entry bundle, read `PARALLEL_GETS` at a time, each leaf checked;
    /// returns the hash of every full tile (what level 1 must hold), or the problem that ended
    /// the walk (a tile missing or unreadable).
    async fn walk(&mut self, size: u64) -> Result<Result<Vec<Hash>, LogFinding>, LogError> {
        let log = self.log;
        let mut full = Vec::new();
        let mut tiles = futures_util::stream::iter(0..size.div_ceil(TILE_WIDTH))
            .map(|n| async move { (n, log.tile(0, n, size).await, log.entries(n, size).await) })
            .buffered(PARALLEL_GETS);
        while let Some((n, hashes, entries)) = tiles.next().await {
            let (hashes, entries) = match (hashes, entries) {
                (Ok(h), Ok(e)) => (h, e),
                (Err(LogError::Refused { detail, .. }), _)
                | (_, Err(LogError::Refused { detail, .. })) => {
                    return Ok(Err(finding(
                        Problem::Mismatch,
                        Some(n * TILE_WIDTH),
                        None,
                        format!("tile {n} of the log whole"),
                        detail,
                    )))
                }
                (Err(e), _) | (_, Err(e)) => return Err(e),
            };
            for (i, (hash, entry)) in hashes.iter().zip(&entries).enumerate() {
                self.leaf(n * TILE_WIDTH + i as u64, hash, entry).await?;
            }
            if hashes.len() as u64 == TILE_WIDTH {
                full.push(tlog::subtree_of(&hashes));
            }
        }
        Ok(Ok(full))
    }

    /// One leaf: its hash, its entry, the linear chain's link, its receipt.
    async fn leaf(&mut self, index: u64, hash: &Hash, entry: &[u8]) -> Result<(), LogError> {
        let (ctx, folder) = (self.ctx, &self.log.folder);
        self.frontier.push(*hash);
        let fields = tlog::parse_entry(entry);
        let batch = fields.map(|f| f[2].to_string());
        if tlog::leaf_hash(entry) != *hash
            || fields.is_none_or(|f| f[0] != ctx.spec.name || f[1] != folder)
        {
            self.findings.push(finding(
                Problem::Mismatch,
                Some(index),
                batch.clone(),
                format!("leaf {index}'s hash in its tile the hash of its entry, of this log"),
                "the tile or the entry bundle was rewritten".into(),
            ));
        }
        if let (Some(t), Some(f)) = (&self.legacy, fields) {
            if index < t.legacy_head_seq {
                self.link =
                    legacy::next_link(ctx.spec.name, folder, index, &self.link, (f[2], f[3]));
                if index + 1 == t.legacy_head_seq && Some(&self.link) != t.legacy_head_link.as_ref()
                {
                    self.findings.push(finding(
                        Problem::Mismatch,
                        Some(index),
                        batch.clone(),
                        format!(
                            "the linear chain's link at seq {} {}",
                            t.legacy_head_seq,
                            t.legacy_head_link.clone().unwrap_or_default()
                        ),
                        format!(
                            "the log's first {} leaves recompute it as {}",
                            t.legacy_head_seq, self.link
                        ),
                    ));
                }
            }
        }
        self.receipt_at(index, batch, entry).await
    }

    /// The leaf held to the receipt the database has at its index.
    async fn receipt_at(
        &mut self,
        index: u64,
        batch: Option<String>,
        entry: &[u8],
    ) -> Result<(), LogError> {
        if self.page.is_empty() && !self.db_done {
            let next = self
                .receipts
                .log_page(&self.log.app, self.next_page_from, PAGE)
                .await?;
            self.db_done = next.len() < PAGE as usize;
            if let Some(i) = next.last().and_then(|r| r.log_index) {
                self.next_page_from = i + 1;
            }
            self.page.extend(next);
        }
        if self.page.front().and_then(|r| r.log_index) == Some(index) {
            let r = self.page.pop_front().expect("peeked");
            if entry_of(self.ctx, &self.log.folder, &r) != entry {
                self.findings.push(finding(
                    Problem::Mismatch,
                    Some(index),
                    Some(r.batch_id.clone()),
                    format!("leaf {index} the entry of batch {}'s receipt", r.batch_id),
                    format!(
                        "the store logs {}",
                        String::from_utf8_lossy(entry).replace('\n', " ")
                    ),
                ));
            }
            return Ok(());
        }
        // Accepted as gone; or the batch's receipt, not given its leaf yet — a run that ended
        // between the store and the database (its next run takes the leaf): not a gap.
        if self.accepted.contains_key(&index)
            || taken_later(self.log, batch.as_deref(), entry).await?
        {
            return Ok(());
        }
        self.findings.push(finding(
            Problem::Gap,
            Some(index),
            batch.clone(),
            format!("a receipt for leaf {index}"),
            format!(
                "the store logs batch {} there, and the database has no receipt of it at that leaf (removed, or lost in a restore; `archive --accept-log-break REASON` records a batch removed on purpose)",
                batch.unwrap_or_default()
            ),
        ));
        Ok(())
    }

    /// A receipt at a leaf beyond the store's tree (its checkpoint written back), if any.
    async fn beyond(&mut self, size: u64) -> Result<Option<LogFinding>, LogError> {
        let beyond = match self.page.pop_front() {
            Some(r) => Some(r),
            None if !self.db_done => self.receipts.log_page(&self.log.app, size, 1).await?.pop(),
            None => None,
        };
        Ok(beyond.map(|r| {
            finding(
                Problem::Gap,
                r.log_index,
                Some(r.batch_id.clone()),
                format!("leaf {} in the store's log", r.log_index.unwrap_or(0)),
                format!(
                    "the store's checkpoint holds {size} leaves (written back, or the log lost)"
                ),
            )
        }))
    }
}

/// The levels above the leaves: each tile held to the full tiles below it (`full`: the hash of
/// every full level-0 tile). A level holds 256 times fewer hashes than the one below.
async fn upper_levels(
    log: &Log<'_>,
    size: u64,
    mut full: Vec<Hash>,
) -> Result<Vec<LogFinding>, LogError> {
    let mut found = Vec::new();
    let mut level = 1;
    while size >> (tlog::TILE_HEIGHT * level) > 0 {
        let mut this = Vec::new();
        let hashes = size >> (tlog::TILE_HEIGHT * level);
        for n in 0..hashes.div_ceil(TILE_WIDTH) {
            let stored = match log.tile(level, n, size).await {
                Ok(h) => h,
                Err(LogError::Refused { detail, .. }) => {
                    found.push(finding(
                        Problem::Mismatch,
                        None,
                        None,
                        format!("tile {level}/{n} of the log whole"),
                        detail,
                    ));
                    return Ok(found);
                }
                Err(e) => return Err(e),
            };
            let first = (n * TILE_WIDTH) as usize;
            if full.get(first..first + stored.len()) != Some(stored.as_slice()) {
                found.push(finding(
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
        full = this;
        level += 1;
    }
    Ok(found)
}

/// Whether the receipt of `batch` is in the database without a leaf and is the very `entry`:
/// the next append takes the leaf for it.
async fn taken_later(log: &Log<'_>, batch: Option<&str>, entry: &[u8]) -> Result<bool, LogError> {
    let Some(batch) = batch else {
        return Ok(false);
    };
    let receipt = log.ctx.tables.receipts.get(&log.app, batch).await?;
    Ok(receipt
        .is_some_and(|r| r.log_index.is_none() && entry_of(log.ctx, &log.folder, &r) == entry))
}
