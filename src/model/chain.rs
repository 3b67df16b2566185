//! The chain of an app's batches (README, "The chain of batches"): every receipt of an app, in
//! the order receipts are recorded under the app's lock, gets a sequence number and a link — a
//! SHA-256 over the link before it and the batch's manifest hash — so that the set of batches is
//! provable whole: a batch removed with its receipt, a receipt changed, a chain continued from an
//! older copy of the database, each breaks it. Checkpoints anchor the chain in the store, where
//! the database cannot rewrite it.
//!
//! The link, in a fixed encoding (the batch id's style, SPEC §4):
//!
//! ```text
//! link(seq) = lowercase hex of SHA-256 over the UTF-8 text
//!   "outbox-archive-chain/v1\n{table}\n{app_code}\n{seq}\n{link(seq - 1)}\n{batch_id}\n{manifest_sha256}\n"
//! ```
//!
//! with `link(0)` = 64 zeros (the genesis) and `seq` counted from 1 in decimal. The manifest
//! hash is the SHA-256 of the batch's `manifest.json`, which holds its row count, cursors, control
//! totals and data object's hashes: a link changes when any of them does.
//!
//! A checkpoint, `{table prefix}_chain/app_code={app}/{to_seq, 20 digits}-{16 hex of its
//! link}.json`, is one compact JSON line: the links from `from_seq` to `to_seq` with what each
//! binds. Pure: the same stretch of the same chain always gives the same bytes and key, so
//! writing it again is idempotent. A break an operator accepted is kept beside them
//! ([`Break`], `…-break-….json`).

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::model::digest::sha256_hex;

/// The link before the first: 64 zeros.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The encoding's name, in every link and checkpoint.
pub const SCHEMA: &str = "outbox-archive-chain/v1";

/// The link of batch `batch_id` (manifest hash `manifest_sha256`) at `seq` of `app_code`'s chain
/// in `table`, after `prev`.
pub fn link(
    table: &str,
    app_code: &str,
    seq: u64,
    prev: &str,
    batch_id: &str,
    manifest_sha256: &str,
) -> String {
    sha256_hex(
        format!("{SCHEMA}\n{table}\n{app_code}\n{seq}\n{prev}\n{batch_id}\n{manifest_sha256}\n")
            .as_bytes(),
    )
}

/// One link of a chain: the batch it binds and its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub seq: u64,
    pub batch_id: String,
    pub manifest_sha256: String,
    pub link: String,
}

/// A stretch of an app's chain as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub schema: String,
    pub table: String,
    pub app_code: String,
    pub from_seq: u64,
    pub to_seq: u64,
    /// The link before `from_seq` ([`GENESIS`] when it is 1).
    pub prev_link: String,
    /// The links `from_seq..=to_seq`, in order.
    pub links: Vec<Link>,
}

/// Why a checkpoint's bytes are not a stretch of a chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    #[error("not a chain checkpoint: {0}")]
    Unreadable(String),
    #[error("checkpoint of {found} where {wanted} was expected")]
    Other { wanted: String, found: String },
    #[error("its links do not run from {from} to {to} one after the other")]
    Numbering { from: u64, to: u64 },
    #[error("its link at seq {seq} is not the hash of the link before it and its batch")]
    Broken { seq: u64 },
}

impl Checkpoint {
    /// The checkpoint of `links` (consecutive, of `app_code`'s chain in `table`), after `prev`.
    pub fn new(table: &str, app_code: &str, prev_link: &str, links: Vec<Link>) -> Checkpoint {
        Checkpoint {
            schema: SCHEMA.to_string(),
            table: table.to_string(),
            app_code: app_code.to_string(),
            from_seq: links.first().map_or(0, |l| l.seq),
            to_seq: links.last().map_or(0, |l| l.seq),
            prev_link: prev_link.to_string(),
            links,
        }
    }

    /// One compact JSON line (serde_json's encoding, SPEC §4), keys in the order declared.
    pub fn to_bytes(&self) -> Vec<u8> {
        json_line(self)
    }

    /// Reads a checkpoint and holds it to itself: of the chain in `table` of the app whose
    /// [`folder_name`] is `folder`, numbered without a gap, every link the hash of the one
    /// before it and its batch.
    pub fn parse(bytes: &[u8], table: &str, folder: &str) -> Result<Checkpoint, CheckpointError> {
        let c: Checkpoint = serde_json::from_slice(bytes)
            .map_err(|e| CheckpointError::Unreadable(e.to_string()))?;
        of_chain((SCHEMA, table, folder), (&c.schema, &c.table, &c.app_code))?;
        let app_code = &chain_app(folder);
        let numbered = !c.links.is_empty()
            && c.links.first().map(|l| l.seq) == Some(c.from_seq)
            && c.links.last().map(|l| l.seq) == Some(c.to_seq)
            && c.links.windows(2).all(|w| w[1].seq == w[0].seq + 1)
            && (c.from_seq > 1 || c.prev_link == GENESIS);
        if !numbered {
            return Err(CheckpointError::Numbering {
                from: c.from_seq,
                to: c.to_seq,
            });
        }
        let mut prev = c.prev_link.as_str();
        for l in &c.links {
            if l.link
                != link(
                    table,
                    app_code,
                    l.seq,
                    prev,
                    &l.batch_id,
                    &l.manifest_sha256,
                )
            {
                return Err(CheckpointError::Broken { seq: l.seq });
            }
            prev = &l.link;
        }
        Ok(c)
    }

    /// The link at the end of the stretch.
    pub fn head(&self) -> Option<&Link> {
        self.links.last()
    }
}

/// The folder of an app's checkpoints: `{table prefix}_chain/app_code={folder}/`, beside the
/// apps' folders (a name query engines skip, and no batch's key can take: app codes start
/// with a letter or digit); `folder` is the app's [`folder_name`].
pub fn checkpoint_prefix(table_prefix: &str, folder: &str) -> String {
    format!("{table_prefix}_chain/app_code={folder}/")
}

/// Where the checkpoint that ends at `head` is kept: named by its seq (20 digits, so that
/// listing the folder gives the checkpoints in chain order) and the first 16 hex digits of its
/// link, so that two branches of a forked chain never share a key.
pub fn checkpoint_key(table_prefix: &str, folder: &str, head: &Link) -> String {
    format!(
        "{}{:020}-{}.json",
        checkpoint_prefix(table_prefix, folder),
        head.seq,
        &head.link[..KEY_LINK_DIGITS]
    )
}

const KEY_LINK_DIGITS: usize = 16;

/// The seq and link prefix a checkpoint's key names; `None` for another key.
pub fn checkpoint_of_key(key: &str) -> Option<(u64, &str)> {
    let name = key.rsplit('/').next()?.strip_suffix(".json")?;
    let (digits, link) = name.split_once('-')?;
    let ok = digits.len() == 20
        && digits.bytes().all(|b| b.is_ascii_digit())
        && link.len() == KEY_LINK_DIGITS
        && link.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    ok.then(|| Some((digits.parse().ok()?, link))).flatten()
}

/// How an app is named in its links: its code in lowercase (the encoding of v1; a link also
/// binds its batch id, which holds the app's exact spelling, so two apps whose codes differ
/// only in case never share a link).
pub fn chain_app(app_code: &str) -> String {
    app_code.to_ascii_lowercase()
}

/// How an app names its checkpoints' folder and their `app_code`: its code as the database
/// tells apps apart — exactly where the source's app codes compare case-sensitively (`Pay` and
/// `pay` are two apps, two chains), else in lowercase (the database holds an app's spellings
/// equal, so its chain is one).
pub fn folder_name(app_code: &str, case_matters: bool) -> String {
    match case_matters {
        true => app_code.to_string(),
        false => chain_app(app_code),
    }
}

/// One receipt as the database holds it, for [`audit`]: its place in the chain (none: not
/// linked yet), its batch, the manifest hash its fields imply (recomputed, not the column) and
/// the link recorded with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub seq: Option<u64>,
    pub batch_id: String,
    pub manifest_sha256: String,
    pub link: Option<String>,
}

/// What is wrong with a chain at one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// A link missing: a seq the store anchors with no receipt, a seq the database skips, or a
    /// receipt never linked.
    Gap,
    /// A receipt or its manifest changed since it was linked: its link does not recompute.
    Mismatch,
    /// Two different links for one seq: the database's and the store's, or two checkpoints'.
    Fork,
}

impl Problem {
    /// The finding kind `verify` names it by.
    pub fn kind(self) -> &'static str {
        match self {
            Problem::Gap => "chain_gap",
            Problem::Mismatch => "chain_mismatch",
            Problem::Fork => "chain_fork",
        }
    }
}

/// One problem of a chain, with the seq (none: a receipt not linked) and what was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainFinding {
    pub problem: Problem,
    pub seq: Option<u64>,
    pub batch_id: Option<String>,
    pub expected: String,
    pub actual: String,
}

/// A checkpoint as read from the store: parsed and whole, or the reason it is not.
#[derive(Debug, Clone)]
pub struct Anchored {
    pub key: String,
    pub checkpoint: Result<Checkpoint, CheckpointError>,
}

/// A break of an app's chain an operator accepted (`archive --accept-chain-break REASON`),
/// after a database restored from an older backup or another cause they investigated: the
/// checkpoints it names are an abandoned branch, and the chain goes on from `from_seq` after
/// `prev_link`; the receipts it names as `dropped` were removed from the database on purpose
/// (a batch whose objects were lost, so that its rows could be archived again) — each a link
/// the store anchors, which the chain goes on from. Written once to the store beside the
/// checkpoints, never removed: every `verify` lists it and every statement that covers it
/// shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Break {
    pub schema: String,
    pub table: String,
    pub app_code: String,
    /// The first seq of the branch that goes on.
    pub from_seq: u64,
    /// The database's link before it (the last both branches share).
    pub prev_link: String,
    /// The checkpoints of the abandoned branch.
    pub abandoned: Vec<String>,
    /// Receipts removed from the database on purpose, each its link as the store anchors it:
    /// no gap where they were (absent from records written before 2026-12-03).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<Link>,
    /// The database's head when the break was accepted.
    pub head_seq: u64,
    pub head_link: String,
    pub reason: String,
    pub accepted_at_ms: i64,
}

/// A break record's schema name.
pub const BREAK_SCHEMA: &str = "outbox-archive-chain-break/v1";

impl Break {
    pub fn to_bytes(&self) -> Vec<u8> {
        json_line(self)
    }

    /// Reads a break record of the app whose [`folder_name`] is `folder`.
    pub fn parse(bytes: &[u8], table: &str, folder: &str) -> Result<Break, CheckpointError> {
        let b: Break = serde_json::from_slice(bytes)
            .map_err(|e| CheckpointError::Unreadable(e.to_string()))?;
        of_chain(
            (BREAK_SCHEMA, table, folder),
            (&b.schema, &b.table, &b.app_code),
        )?;
        Ok(b)
    }
}

/// One compact JSON line (serde_json's encoding, SPEC §4), keys in the order declared.
fn json_line(value: &impl Serialize) -> Vec<u8> {
    let mut out = serde_json::to_vec(value).expect("a chain record always serialises");
    out.push(b'\n');
    out
}

/// Refuses a record of another schema, table or app than `wanted` (schema, table, app).
fn of_chain(wanted: (&str, &str, &str), found: (&str, &str, &str)) -> Result<(), CheckpointError> {
    if wanted == found {
        return Ok(());
    }
    Err(CheckpointError::Other {
        wanted: format!("{} of {} app {}", wanted.0, wanted.1, wanted.2),
        found: format!("{} of {} app {}", found.0, found.1, found.2),
    })
}

/// Where a break is kept: beside the checkpoints, named by its first seq and the head's link.
pub fn break_key(table_prefix: &str, folder: &str, b: &Break) -> String {
    format!(
        "{}{:020}-break-{}.json",
        checkpoint_prefix(table_prefix, folder),
        b.from_seq,
        &b.head_link[..KEY_LINK_DIGITS]
    )
}

/// Whether a key under an app's checkpoints is a break record.
pub fn is_break_key(key: &str) -> bool {
    key.rsplit('/')
        .next()
        .is_some_and(|n| n.contains("-break-") && n.ends_with(".json"))
}

/// What [`audit`] concludes of one app's chain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Audit {
    pub findings: Vec<ChainFinding>,
    /// The database's last link (seq, link), if any receipt is linked.
    pub head: Option<(u64, String)>,
    /// The greatest seq the store anchors with the database's link.
    pub anchored_to: u64,
    /// The greatest seq any checkpoint anchors (whatever its link).
    pub store_head: u64,
    /// Seqs whose link is sound: the database's chain from the genesis to it has no gap and
    /// recomputes, and the store anchors that very link, with no fork before it but one an
    /// operator accepted. Only their batches may be purged.
    pub sound: std::collections::BTreeSet<u64>,
    /// The breaks operators accepted, as recorded.
    pub breaks: Vec<Break>,
}

impl Audit {
    /// Whether the batch at `seq` may be trusted (purged, attested).
    pub fn is_sound(&self, seq: Option<u64>) -> bool {
        seq.is_some_and(|s| self.sound.contains(&s))
    }

    /// The first problem at or before `seq`, if any.
    pub fn first_problem_to(&self, seq: u64) -> Option<&ChainFinding> {
        self.findings
            .iter()
            .filter(|f| f.seq.is_none_or(|s| s <= seq))
            .min_by_key(|f| f.seq)
    }
}

/// Holds an app's receipts (`recorded`, any order) to themselves and to the checkpoints the
/// store anchors: every link recomputes from the one before it and its batch's manifest hash,
/// the seqs run 1, 2, 3, … without a gap, and every anchored link is the database's.
pub fn audit(
    table: &str,
    app_code: &str,
    recorded: &[Recorded],
    anchored: &[Anchored],
    breaks: &[Break],
) -> Audit {
    let mut out = Audit {
        breaks: breaks.to_vec(),
        ..Audit::default()
    };
    // The checkpoints of a branch an operator abandoned are evidence kept, not the chain.
    let abandoned: HashSet<&str> = breaks
        .iter()
        .flat_map(|b| b.abandoned.iter().map(String::as_str))
        .collect();
    let anchored: Vec<&Anchored> = anchored
        .iter()
        .filter(|a| !abandoned.contains(a.key.as_str()))
        .collect();
    let dropped = dropped_links(breaks);
    let by_seq = linked(recorded, &mut out.findings);
    let store = StoreView::of(&anchored, &mut out.findings);
    walk_database(
        table,
        &chain_app(app_code),
        &by_seq,
        &store,
        &dropped,
        &mut out,
    );
    missing_in_database(&store, &by_seq, &dropped, &mut out.findings);
    out.store_head = store.links.keys().next_back().copied().unwrap_or(0);
    // From the first fork on, nothing is sound: which branch is the archive's is for a person
    // to decide, not for purge. An unreadable checkpoint counts as one at its seq.
    if let Some(fork) = out
        .findings
        .iter()
        .filter(|f| matches!(f.problem, Problem::Fork | Problem::Mismatch))
        .filter_map(|f| f.seq)
        .min()
    {
        out.sound.retain(|&s| s < fork);
    }
    out.findings.sort_by_key(|f| f.seq);
    out
}

/// The receipts operators accepted as removed from the database on purpose, by seq (their links
/// as the store anchors them).
pub fn dropped_links(breaks: &[Break]) -> BTreeMap<u64, &Link> {
    breaks
        .iter()
        .flat_map(|b| &b.dropped)
        .map(|l| (l.seq, l))
        .collect()
}

/// The linked receipts by seq; each receipt not linked yet is a finding.
fn linked<'a>(
    recorded: &'a [Recorded],
    findings: &mut Vec<ChainFinding>,
) -> BTreeMap<u64, &'a Recorded> {
    let mut by_seq = BTreeMap::new();
    for r in recorded {
        match r.seq {
            None => findings.push(ChainFinding {
                problem: Problem::Gap,
                seq: None,
                batch_id: Some(r.batch_id.clone()),
                expected: "a receipt linked into its app's chain".into(),
                actual: "a receipt not linked yet; run `outbox-archiver migrate` (or archive the app) to link it".into(),
            }),
            Some(seq) => {
                by_seq.insert(seq, r);
            }
        }
    }
    by_seq
}

/// The store's links by seq (with the checkpoint of each), and, by seq, the links checkpoints
/// say the chain had before their first.
struct StoreView<'a> {
    links: BTreeMap<u64, Vec<(&'a Link, &'a str)>>,
    before: BTreeMap<u64, Vec<(&'a str, &'a str)>>,
}

impl<'a> StoreView<'a> {
    /// Reads the checkpoints: an unreadable one, and two that disagree at a seq, are findings.
    fn of(anchored: &[&'a Anchored], findings: &mut Vec<ChainFinding>) -> StoreView<'a> {
        let mut view = StoreView {
            links: BTreeMap::new(),
            before: BTreeMap::new(),
        };
        for a in anchored.iter().copied() {
            let c = match &a.checkpoint {
                Ok(c) => c,
                Err(e) => {
                    findings.push(ChainFinding {
                        problem: Problem::Mismatch,
                        seq: checkpoint_of_key(&a.key).map(|(s, _)| s),
                        batch_id: None,
                        expected: format!("checkpoint {} a stretch of the chain", a.key),
                        actual: e.to_string(),
                    });
                    continue;
                }
            };
            if c.from_seq > 1 {
                view.before
                    .entry(c.from_seq - 1)
                    .or_default()
                    .push((c.prev_link.as_str(), a.key.as_str()));
            }
            for l in &c.links {
                let at = view.links.entry(l.seq).or_default();
                if let Some((other, key)) = at.iter().find(|(o, _)| o.link != l.link) {
                    if at.iter().all(|(o, _)| o.link != l.link) {
                        findings.push(ChainFinding {
                            problem: Problem::Fork,
                            seq: Some(l.seq),
                            batch_id: Some(l.batch_id.clone()),
                            expected: format!(
                                "one link at seq {} (checkpoint {key}: batch {}, link {})",
                                l.seq, other.batch_id, other.link
                            ),
                            actual: format!(
                                "checkpoint {} anchors batch {}, link {}",
                                a.key, l.batch_id, l.link
                            ),
                        });
                    }
                }
                at.push((l, a.key.as_str()));
            }
        }
        view
    }

    /// The one link the store has at `seq` (none, or two: unknown).
    fn only(&self, seq: u64) -> Option<&'a str> {
        match self.links.get(&seq).map(Vec::as_slice) {
            Some([(l, _)]) => Some(l.link.as_str()),
            _ => None,
        }
    }
}

/// The database's chain, each link recomputed from the one before it and held to the store's:
/// the head, what is anchored, what is sound, and every gap, mismatch and fork on the way.
fn walk_database(
    table: &str,
    app: &str,
    by_seq: &BTreeMap<u64, &Recorded>,
    store: &StoreView<'_>,
    dropped: &BTreeMap<u64, &Link>,
    out: &mut Audit,
) {
    let mut expected_seq = 1;
    let mut prev: Option<&str> = Some(GENESIS);
    let mut whole = true; // no gap or mismatch from the genesis so far
    for (&seq, r) in by_seq {
        if seq != expected_seq {
            // Receipts removed on purpose, accepted as such, each the link the store anchors:
            // the chain goes on from the last of them, whole.
            let accepted = (expected_seq..seq).all(|s| {
                dropped
                    .get(&s)
                    .is_some_and(|l| store.only(s).is_none_or(|anchored| anchored == l.link))
            });
            if accepted {
                prev = dropped.get(&(seq - 1)).map(|l| l.link.as_str());
            } else {
                skipped(expected_seq, seq, store, dropped, &mut out.findings);
                whole = false;
                prev = store.only(seq - 1);
            }
        }
        expected_seq = seq + 1;
        let stored = r.link.as_deref().unwrap_or_default();
        match prev.map(|p| link(table, app, seq, p, &r.batch_id, &r.manifest_sha256)) {
            Some(recomputed) if recomputed != stored => {
                out.findings.push(ChainFinding {
                    problem: Problem::Mismatch,
                    seq: Some(seq),
                    batch_id: Some(r.batch_id.clone()),
                    expected: format!(
                        "link {recomputed} (recomputed from the receipt and the link before it)"
                    ),
                    actual: format!(
                        "link {stored}: the receipt or its manifest changed since it was linked"
                    ),
                });
                whole = false;
            }
            Some(_) => {}
            None => whole = false,
        }
        match store.links.get(&seq) {
            Some(at) if at.iter().all(|(l, _)| l.link != stored) => {
                let (l, key) = at[0];
                out.findings.push(ChainFinding {
                    problem: Problem::Fork,
                    seq: Some(seq),
                    batch_id: Some(r.batch_id.clone()),
                    expected: format!("batch {}, link {} (anchored in {key})", l.batch_id, l.link),
                    actual: format!("batch {}, link {stored} in the database: its chain departs from the one the store anchors", r.batch_id),
                });
            }
            Some(_) => {
                out.anchored_to = out.anchored_to.max(seq);
                if whole {
                    out.sound.insert(seq);
                }
            }
            None => {}
        }
        // A checkpoint that starts after this seq must start from the database's link.
        for (p, key) in store.before.get(&seq).into_iter().flatten() {
            if *p != stored {
                out.findings.push(ChainFinding {
                    problem: Problem::Fork,
                    seq: Some(seq + 1),
                    batch_id: None,
                    expected: format!("a checkpoint continuing from link {stored} at seq {seq}"),
                    actual: format!("{key} continues from link {p}"),
                });
            }
        }
        prev = Some(stored);
        out.head = Some((seq, stored.to_string()));
    }
}

/// Seqs `from..to` the database skips that the store does not know either (the store's own are
/// named by [`missing_in_database`]; accepted drops are no gap), run by run.
fn skipped(
    from: u64,
    to: u64,
    store: &StoreView<'_>,
    dropped: &BTreeMap<u64, &Link>,
    findings: &mut Vec<ChainFinding>,
) {
    let mut start = from;
    // Ranges of the maps, not a walk over every seq: a seq edited to a huge number is one gap.
    let known: std::collections::BTreeSet<u64> = store
        .links
        .range(from..to)
        .map(|(s, _)| *s)
        .chain(dropped.range(from..to).map(|(s, _)| *s))
        .collect();
    for s in known.into_iter().chain([to]) {
        if s > start {
            findings.push(db_gap(start, s - 1));
        }
        start = s + 1;
    }
}

/// Seqs the store anchors that the database has no receipt for — past its end, or between —
/// run by run: receipts gone.
fn missing_in_database(
    store: &StoreView<'_>,
    by_seq: &BTreeMap<u64, &Recorded>,
    dropped: &BTreeMap<u64, &Link>,
    findings: &mut Vec<ChainFinding>,
) {
    let missing: Vec<u64> = store
        .links
        .keys()
        .copied()
        .filter(|s| !by_seq.contains_key(s))
        .filter(|s| {
            dropped
                .get(s)
                .is_none_or(|l| store.only(*s).is_some_and(|anchored| anchored != l.link))
        })
        .collect();
    for run in runs(&missing) {
        let (first, last) = (run[0], run[run.len() - 1]);
        let (l, key) = store.links[&first][0];
        findings.push(ChainFinding {
            problem: Problem::Gap,
            seq: Some(first),
            batch_id: Some(l.batch_id.clone()),
            expected: format!("receipts at seq {first}..{last}, which the store anchors ({key})"),
            actual: "no receipt in the database (a batch deleted with its receipt, or the database restored from an older backup); if it was removed on purpose, `outbox-archiver archive --app APP --accept-chain-break REASON` records that, and the chain goes on".into(),
        });
    }
}

/// Seqs `from..=to` that neither the database nor the store holds.
fn db_gap(from: u64, to: u64) -> ChainFinding {
    ChainFinding {
        problem: Problem::Gap,
        seq: Some(from),
        batch_id: None,
        expected: format!("receipts at seq {from}..{to}"),
        actual: format!(
            "no receipt in the database at seq {from}..{to} (a batch deleted with its receipt, or the database restored from an older backup)"
        ),
    }
}

/// Consecutive runs of sorted seqs.
fn runs(seqs: &[u64]) -> Vec<&[u64]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=seqs.len() {
        if i == seqs.len() || seqs[i] != seqs[i - 1] + 1 {
            if start < i {
                out.push(&seqs[start..i]);
            }
            start = i;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encoding's test vector (computed independently: Python's hashlib over the text).
    #[test]
    fn links_follow_the_documented_encoding() {
        let first = link(
            "wallet_outbox",
            "wallet-sg",
            1,
            GENESIS,
            "03ed0706de9c85f64361c66412df1322",
            &"a".repeat(64),
        );
        assert_eq!(
            first,
            "efa1caa335a200bb3b1453575f9a21170ddffb0e2b38f9778eaa22eccdbb0b02"
        );
        let second = link(
            "wallet_outbox",
            "wallet-sg",
            2,
            &first,
            "6f1e2b7c0d9a4e3f8b5c1d2e3f4a5b6c",
            &"b".repeat(64),
        );
        assert_eq!(
            second,
            "35cacdc3360b41a92e4a0cab8228910673f14a9a4c9d87630aebae2bea7a57b7"
        );
    }

    fn chain(n: u64) -> Vec<Link> {
        let mut prev = GENESIS.to_string();
        (1..=n)
            .map(|seq| {
                let batch_id = format!("{seq:032x}");
                let manifest_sha256 = sha256_hex(batch_id.as_bytes());
                let l = link("t", "a1", seq, &prev, &batch_id, &manifest_sha256);
                prev = l.clone();
                Link {
                    seq,
                    batch_id,
                    manifest_sha256,
                    link: l,
                }
            })
            .collect()
    }

    #[test]
    fn a_checkpoint_round_trips_and_holds_itself_to_the_chain() {
        let links = chain(5);
        let c = Checkpoint::new("t", "a1", &links[1].link, links[2..].to_vec());
        assert_eq!((c.from_seq, c.to_seq), (3, 5));
        let bytes = c.to_bytes();
        assert!(bytes.starts_with(br#"{"schema":"outbox-archive-chain/v1","table":"t","app_code":"a1","from_seq":3,"to_seq":5,"prev_link":""#));
        assert_eq!(bytes.last(), Some(&b'\n'));
        assert_eq!(Checkpoint::parse(&bytes, "t", "a1").unwrap(), c);
        assert_eq!(c.head().unwrap().seq, 5);
        // Another app's, or another table's: refused.
        assert!(matches!(
            Checkpoint::parse(&bytes, "t", "a2"),
            Err(CheckpointError::Other { .. })
        ));
        // A link edited, a batch swapped, a link left out: refused, with the seq.
        let mut edited = c.clone();
        edited.links[1].manifest_sha256 = "f".repeat(64);
        assert_eq!(
            Checkpoint::parse(&edited.to_bytes(), "t", "a1"),
            Err(CheckpointError::Broken { seq: 4 })
        );
        let mut gap = c.clone();
        gap.links.remove(1);
        assert_eq!(
            Checkpoint::parse(&gap.to_bytes(), "t", "a1"),
            Err(CheckpointError::Numbering { from: 3, to: 5 })
        );
        // A first stretch must start from the genesis.
        let first = Checkpoint::new("t", "a1", &"1".repeat(64), chain(2));
        assert!(Checkpoint::parse(&first.to_bytes(), "t", "a1").is_err());
        let first = Checkpoint::new("t", "a1", GENESIS, chain(2));
        assert!(Checkpoint::parse(&first.to_bytes(), "t", "a1").is_ok());
        assert!(matches!(
            Checkpoint::parse(b"{}", "t", "a1"),
            Err(CheckpointError::Unreadable(_))
        ));
    }

    #[test]
    fn an_app_of_a_case_sensitive_table_names_its_checkpoints_exactly_and_links_as_ever() {
        // The links of app "Pay" are those of v1 (lowercase in the link text): the same bytes
        // for an app whatever its table; only the folder and the record's app_code keep case.
        let links = chain(3);
        assert_eq!(chain_app("A1"), "a1", "the link text is the lowercase code");
        let c = Checkpoint::new("t", "A1", GENESIS, links);
        let bytes = c.to_bytes();
        assert_eq!(Checkpoint::parse(&bytes, "t", "A1").unwrap(), c);
        assert!(matches!(
            Checkpoint::parse(&bytes, "t", "a1"),
            Err(CheckpointError::Other { .. })
        ));
    }

    #[test]
    fn checkpoint_keys_sort_in_chain_order_and_parse_back() {
        let links = chain(10);
        let folder = folder_name("Wallet-SG", false);
        let key = checkpoint_key("outbox/wallet_outbox/", &folder, &links[4]);
        assert_eq!(
            key,
            format!(
                "outbox/wallet_outbox/_chain/app_code=wallet-sg/00000000000000000005-{}.json",
                &links[4].link[..16]
            )
        );
        // Where app codes compare case-sensitively, Wallet-SG and wallet-sg are two apps.
        let exact = checkpoint_key(
            "outbox/wallet_outbox/",
            &folder_name("Wallet-SG", true),
            &links[4],
        );
        assert!(exact.contains("/_chain/app_code=Wallet-SG/"), "{exact}");
        assert_eq!(checkpoint_of_key(&key), Some((5, &links[4].link[..16])));
        assert!(checkpoint_key("p/", "a", &links[8]) < checkpoint_key("p/", "a", &links[9]));
        assert_eq!(checkpoint_of_key("outbox/x/_chain/42.json"), None);
        assert_eq!(
            checkpoint_of_key("outbox/wallet_outbox/app_code=a/dt=2026-01-01/b/_SUCCESS"),
            None
        );
        // Not a batch's key: the orphan scan and the day listing pass it by.
        assert_eq!(
            crate::model::format::app_and_day("outbox/wallet_outbox/", &key),
            None
        );
    }

    fn recorded(links: &[Link]) -> Vec<Recorded> {
        links
            .iter()
            .map(|l| Recorded {
                seq: Some(l.seq),
                batch_id: l.batch_id.clone(),
                manifest_sha256: l.manifest_sha256.clone(),
                link: Some(l.link.clone()),
            })
            .collect()
    }

    fn anchored(prev: &str, links: &[Link]) -> Anchored {
        let c = Checkpoint::new("t", "a1", prev, links.to_vec());
        Anchored {
            key: checkpoint_key("p/", "a1", c.head().unwrap()),
            checkpoint: Checkpoint::parse(&c.to_bytes(), "t", "a1"),
        }
    }

    fn problems(a: &Audit) -> Vec<(Problem, Option<u64>)> {
        a.findings.iter().map(|f| (f.problem, f.seq)).collect()
    }

    #[test]
    fn a_whole_anchored_chain_is_sound_and_an_unanchored_tail_is_not() {
        let links = chain(6);
        let store = [
            anchored(GENESIS, &links[..3]),
            anchored(&links[2].link, &links[3..5]),
        ];
        let a = audit("t", "A1", &recorded(&links), &store, &[]);
        assert!(a.findings.is_empty(), "{:?}", a.findings);
        assert_eq!(a.head, Some((6, links[5].link.clone())));
        assert_eq!(a.anchored_to, 5);
        assert!(a.is_sound(Some(5)) && !a.is_sound(Some(6)) && !a.is_sound(None));
    }

    #[test]
    fn a_receipt_deleted_is_a_gap_and_an_edited_one_a_mismatch() {
        let links = chain(6);
        let store = [anchored(GENESIS, &links)];
        // Seq 3 deleted with its batch: a gap the store names, the rest still sound.
        let mut db = recorded(&links);
        db.remove(2);
        let a = audit("t", "a1", &db, &store, &[]);
        assert_eq!(problems(&a), [(Problem::Gap, Some(3))]);
        assert!(a.is_sound(Some(2)) && !a.is_sound(Some(4)));
        assert!(a.first_problem_to(2).is_none() && a.first_problem_to(6).is_some());
        // The last two lost (a database restored from an older backup): a gap at 5.
        let a = audit("t", "a1", &recorded(&links[..4]), &store, &[]);
        assert_eq!(problems(&a), [(Problem::Gap, Some(5))]);
        assert!(a.findings[0].expected.contains("5..6"), "{:?}", a.findings);
        // A receipt's totals edited: its manifest hash recomputes otherwise.
        let mut db = recorded(&links);
        db[3].manifest_sha256 = "e".repeat(64);
        let a = audit("t", "a1", &db, &store, &[]);
        assert_eq!(problems(&a), [(Problem::Mismatch, Some(4))]);
        assert!(a.is_sound(Some(3)) && !a.is_sound(Some(4)) && !a.is_sound(Some(5)));
        // Edited and relinked to hide it: the store's link is another.
        let mut relinked = chain(6);
        relinked[3].manifest_sha256 = "e".repeat(64);
        let mut prev = links[2].link.clone();
        for l in &mut relinked[3..] {
            l.link = link("t", "a1", l.seq, &prev, &l.batch_id, &l.manifest_sha256);
            prev = l.link.clone();
        }
        let a = audit("t", "a1", &recorded(&relinked), &store, &[]);
        assert_eq!(a.findings[0].problem, Problem::Fork);
        assert_eq!(a.findings[0].seq, Some(4));
        assert!(!a.is_sound(Some(6)));
        // Seqs skipped by the database, some of which the store knows: every run of them named.
        let db: Vec<Recorded> = recorded(&links)
            .into_iter()
            .filter(|r| matches!(r.seq, Some(1 | 2 | 5 | 6)))
            .collect();
        let a = audit("t", "a1", &db, &[anchored(GENESIS, &links[..3])], &[]);
        assert_eq!(
            problems(&a),
            [(Problem::Gap, Some(3)), (Problem::Gap, Some(4))]
        );
        // A seq edited to a huge number: one finding, at once.
        let mut db = recorded(&links[..2]);
        db[1].seq = Some(1_000_000_000_000);
        let a = audit("t", "a1", &db, &[], &[]);
        assert_eq!(problems(&a)[0], (Problem::Gap, Some(2)));
        // A receipt never linked: named, without a seq.
        let mut db = recorded(&links);
        db.push(Recorded {
            seq: None,
            batch_id: "x".into(),
            manifest_sha256: "f".repeat(64),
            link: None,
        });
        let a = audit("t", "a1", &db, &store, &[]);
        assert_eq!(problems(&a), [(Problem::Gap, None)]);
    }

    #[test]
    fn a_chain_continued_from_an_older_copy_forks_from_the_anchored_one() {
        let links = chain(5);
        // The database lost seqs 4 and 5, then archived on: its 4 and 5 are other batches.
        let mut other = links[..3].to_vec();
        let mut prev = links[2].link.clone();
        for seq in 4..=6 {
            let batch_id = format!("{:032x}", seq + 100);
            let manifest_sha256 = sha256_hex(batch_id.as_bytes());
            let l = link("t", "a1", seq, &prev, &batch_id, &manifest_sha256);
            prev = l.clone();
            other.push(Link {
                seq,
                batch_id,
                manifest_sha256,
                link: l,
            });
        }
        let store = [
            anchored(GENESIS, &links),
            anchored(&other[2].link, &other[3..]),
        ];
        let a = audit("t", "a1", &recorded(&other), &store, &[]);
        let kinds = problems(&a);
        assert!(kinds.contains(&(Problem::Fork, Some(4))), "{kinds:?}");
        assert!(kinds.contains(&(Problem::Fork, Some(5))), "{kinds:?}");
        // From the fork on nothing is sound, though the new branch is anchored whole: which
        // branch is the archive's is a person's call, not purge's.
        assert!(a.is_sound(Some(3)) && !a.is_sound(Some(4)) && !a.is_sound(Some(6)));
        assert!(a.first_problem_to(6).is_some());
        assert_eq!(a.store_head, 6);
        // An operator accepts the break: the old branch's checkpoint is kept, not the chain, and
        // the new branch is sound again; the break stays in the audit for every statement.
        let accepted = Break {
            schema: BREAK_SCHEMA.into(),
            table: "t".into(),
            app_code: "a1".into(),
            from_seq: 4,
            prev_link: other[2].link.clone(),
            abandoned: vec![store[0].key.clone()],
            dropped: Vec::new(),
            head_seq: 6,
            head_link: other[5].link.clone(),
            reason: "restored from the 03:00 backup, INC-42".into(),
            accepted_at_ms: 1,
        };
        let store = [
            anchored(GENESIS, &other[..3]),
            store[0].clone(),
            store[1].clone(),
        ];
        let a = audit(
            "t",
            "a1",
            &recorded(&other),
            &store,
            std::slice::from_ref(&accepted),
        );
        assert!(a.findings.is_empty(), "{:?}", a.findings);
        assert!(a.is_sound(Some(6)) && a.first_problem_to(6).is_none());
        assert_eq!(a.breaks.len(), 1);
        assert_eq!(a.breaks[0], accepted);
        let bytes = accepted.to_bytes();
        assert_eq!(Break::parse(&bytes, "t", "a1").unwrap(), accepted);
        assert!(Break::parse(&bytes, "t", "a2").is_err());
        let key = break_key("p/", "a1", &accepted);
        assert!(
            is_break_key(&key) && checkpoint_of_key(&key).is_none(),
            "{key}"
        );
        // An unreadable checkpoint is named.
        let bad = Anchored {
            key: "p/_chain/app_code=a1/00000000000000000002-0123456789abcdef.json".into(),
            checkpoint: Checkpoint::parse(b"{}", "t", "a1"),
        };
        let a = audit("t", "a1", &recorded(&links), &[bad], &[]);
        assert_eq!(problems(&a), [(Problem::Mismatch, Some(2))]);
    }

    #[test]
    fn a_receipt_removed_on_purpose_is_a_gap_until_accepted_then_the_chain_goes_on() {
        let links = chain(5);
        let store = [
            anchored(GENESIS, &links[..3]),
            anchored(&links[2].link, &links[3..]),
        ];
        let without_2: Vec<Link> = links.iter().filter(|l| l.seq != 2).cloned().collect();
        let a = audit("t", "a1", &recorded(&without_2), &store, &[]);
        assert_eq!(problems(&a), [(Problem::Gap, Some(2))]);
        assert!(a.is_sound(Some(1)) && !a.is_sound(Some(3)) && !a.is_sound(Some(5)));
        // Accepted as removed on purpose: its link as the store anchors it, and the chain is
        // whole again after it — every later batch sound, the drop kept in the audit.
        let accepted = Break {
            schema: BREAK_SCHEMA.into(),
            table: "t".into(),
            app_code: "a1".into(),
            from_seq: 2,
            prev_link: links[0].link.clone(),
            abandoned: Vec::new(),
            dropped: vec![links[1].clone()],
            head_seq: 5,
            head_link: links[4].link.clone(),
            reason: "objects lost, INC-7".into(),
            accepted_at_ms: 1,
        };
        let a = audit(
            "t",
            "a1",
            &recorded(&without_2),
            &store,
            std::slice::from_ref(&accepted),
        );
        assert!(a.findings.is_empty(), "{:?}", a.findings);
        assert!(a.is_sound(Some(3)) && a.is_sound(Some(5)) && !a.is_sound(Some(2)));
        assert_eq!(a.breaks[0].dropped, [links[1].clone()]);
        // Only the seq it names: another receipt removed is still a gap.
        let without_2_and_4: Vec<Link> = without_2.iter().filter(|l| l.seq != 4).cloned().collect();
        let a = audit(
            "t",
            "a1",
            &recorded(&without_2_and_4),
            &store,
            std::slice::from_ref(&accepted),
        );
        assert_eq!(problems(&a), [(Problem::Gap, Some(4))]);
        assert!(a.is_sound(Some(3)) && !a.is_sound(Some(5)));
        // A drop whose link is not the one the store anchors accepts nothing.
        let mut forged = accepted.clone();
        forged.dropped[0].link = "f".repeat(64);
        let a = audit("t", "a1", &recorded(&without_2), &store, &[forged]);
        assert!(
            problems(&a).contains(&(Problem::Gap, Some(2))),
            "{:?}",
            problems(&a)
        );
        // A break record of an older build (no `dropped`) still reads.
        let old = br#"{"schema":"outbox-archive-chain-break/v1","table":"t","app_code":"a1","from_seq":4,"prev_link":"00","abandoned":[],"head_seq":6,"head_link":"11","reason":"r","accepted_at_ms":1}"#;
        assert!(Break::parse(old, "t", "a1").unwrap().dropped.is_empty());
    }
}
