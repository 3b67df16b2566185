//! The auditor's statement (`attest`, README "The auditor's statement") as types: per app, the
//! proofs of its log over the period and, per UTC day, what was archived and by which batches.
//! Its JSON is these types serialised — canonical once `output::statement` sorts the keys —
//! so a field renamed here is renamed in the statement and its CSV alike, by the compiler.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::format::Cursor;

/// The statement's schema name.
pub(crate) const SCHEMA: &str = "outbox-archive-attestation/v4";

/// The whole statement: the period, the table and store it speaks of, every app attested.
#[derive(Debug, Clone, Serialize)]
pub struct Statement {
    pub schema: &'static str,
    pub table: String,
    pub store: String,
    /// The first and last UTC day, `YYYY-MM-DD`.
    pub from: String,
    pub to: String,
    pub day_of_a_batch: &'static str,
    pub generated_at: String,
    /// By app code.
    pub apps: Vec<AppStatement>,
    /// Every batch of the period whose latest check found it other than recorded (each named in
    /// its batch too): empty when the statement vouches for every batch.
    pub batches_with_unresolved_findings: Vec<UnresolvedBatch>,
    /// The table's control totals that are sums, in its order: a day's totals (and the CSV's
    /// columns for them).
    #[serde(skip)]
    pub sums: Vec<&'static str>,
}

/// One app's period: the proofs of its log, the breaks accepted before the period's end, its days.
#[derive(Debug, Clone, Serialize)]
pub struct AppStatement {
    pub app_code: String,
    pub log: LogStatement,
    pub chain_breaks_accepted: Vec<AcceptedBreak>,
    pub days: Vec<DayStatement>,
}

/// What proves an app's period in its log: the tree heads at the period's start and end, the
/// consistency proofs start → end → the store's checkpoint (signed where a key is configured).
#[derive(Debug, Clone, Serialize)]
pub struct LogStatement {
    /// The app as its log names it (its folder in the store).
    pub app_code: String,
    /// How a leaf's entry is made of a batch (the log's entry schema and its fields).
    pub entry: String,
    pub origin: String,
    /// The store's checkpoint, as a signed note's text.
    pub checkpoint: String,
    /// The checkpoint's tree size.
    pub size: u64,
    pub at_start: TreeHead,
    pub at_end: TreeHead,
    /// Base64 hashes.
    pub start_to_end: Vec<String>,
    pub end_to_checkpoint: Vec<String>,
    /// The heads the log was seen at before this statement — the previous statement's
    /// checkpoint (`attest --previous`), the largest head the log was published at — each with
    /// the consistency proof from it to the checkpoint: the log only grew since.
    pub heads_seen: Vec<SeenHead>,
}

/// A tree head seen before, where it was seen, and the proof that the checkpoint grew from it.
#[derive(Debug, Clone, Serialize)]
pub struct SeenHead {
    pub size: u64,
    pub root: String,
    /// The previous statement's file, the store's key of the head's write-once copy, or the
    /// database's table.
    pub source: String,
    /// Base64 hashes: the consistency proof from this head to the checkpoint.
    pub to_checkpoint: Vec<String>,
}

/// A tree head: its size and root (base64).
#[derive(Debug, Clone, Serialize)]
pub struct TreeHead {
    pub size: u64,
    pub root: String,
}

/// Leaves operators accepted as gone (`archive --accept-log-break`).
#[derive(Debug, Clone, Serialize)]
pub struct AcceptedBreak {
    /// `[leaf, batch id]` of each leaf accepted.
    pub leaves: Vec<(u64, String)>,
    pub reason: String,
    pub accepted_at: String,
}

/// One UTC day of an app: its rows, batches and summed totals, its range, its batches.
#[derive(Debug, Clone, Serialize)]
pub struct DayStatement {
    pub day: String,
    pub rows: u64,
    pub batches: usize,
    /// The table's summed control totals, as decimal text.
    pub totals: BTreeMap<String, String>,
    pub first_cursor: Cursor,
    pub last_cursor: Cursor,
    pub batch_list: Vec<BatchStatement>,
}

/// One batch: its leaf and inclusion proof, what it holds, how it is kept and last verified.
#[derive(Debug, Clone, Serialize)]
pub struct BatchStatement {
    pub batch_id: String,
    pub leaf_index: u64,
    /// Base64 hashes, from the leaf up.
    pub inclusion_proof: Vec<String>,
    pub recorded_at: String,
    pub rows: u64,
    pub first_cursor: Cursor,
    pub last_cursor: Cursor,
    /// Every control total, as text.
    pub totals: BTreeMap<String, String>,
    /// The hash the receipt's fields imply: what its leaf binds (its proof passed).
    pub manifest_sha256: String,
    pub data_sha256: String,
    pub data_object_key: String,
    pub last_full_verification: FullVerification,
    /// What the batch's latest check found when it found the batch other than recorded (an
    /// object missing, bytes or checksums that differ, …): `null` when its latest check is
    /// `last_full_verification`, which found it whole.
    pub unresolved_findings: Option<UnresolvedFindings>,
    pub retention: Option<RetentionStatement>,
    pub legal_hold: bool,
    pub storage_class: String,
}

/// When a batch was last read in full and found whole, and by what.
#[derive(Debug, Clone, Serialize)]
pub struct FullVerification {
    pub at: String,
    pub how: String,
}

/// The findings of a batch's latest check, as `verify` recorded them on its receipt.
#[derive(Debug, Clone, Serialize)]
pub struct UnresolvedFindings {
    /// When the check found them.
    pub found_at: String,
    /// How many findings the check made.
    pub count: u64,
    /// The first of them (at most 20), as verify's summary lists findings: kind, batch_id,
    /// key, event_id, expected, actual.
    pub first: Vec<serde_json::Value>,
}

/// A batch of the period whose latest check found it other than recorded, as the statement's
/// list of them names it.
#[derive(Debug, Clone, Serialize)]
pub struct UnresolvedBatch {
    pub app_code: String,
    pub day: String,
    pub batch_id: String,
    pub found_at: String,
    /// The kinds of its findings (`sha256_mismatch`, `missing_object`, …), each once.
    pub kinds: Vec<String>,
}

/// A batch's Object Lock retention.
#[derive(Debug, Clone, Serialize)]
pub struct RetentionStatement {
    pub mode: &'static str,
    pub retain_until: String,
}
