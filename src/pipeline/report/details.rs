//! Each command's own fields in its report — per app, flattened into the app's object, and per
//! run, flattened into the summary — as types, so that renaming a field is a compile error, not
//! a silently broken alert, and so that `status`'s table and the metrics read fields, not keys.

use serde::Serialize;

use super::log_fields::{ArchiveLog, Numbered, VerifyLog};
use crate::db::restore::Conflict;
use crate::db::runs::Run;
use crate::model::batch::Superseded;
use crate::model::format::Cursor;
use crate::pipeline::verifier::{ColdObject, Finding};

/// A command's fields of one app's report.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum AppDetails {
    Archive(ArchiveApp),
    Verify(VerifyApp),
    Purge(PurgeApp),
    Restore(RestoreApp),
    Compact(CompactApp),
    Recover(RecoverApp),
    Status(Box<StatusApp>),
}

impl AppDetails {
    /// An earlier attempt's fields followed by `next`'s (the app was tried again): counts add
    /// up, lists concatenate, figures about the state left behind are `next`'s.
    pub fn then(self, next: AppDetails) -> AppDetails {
        match (self, next) {
            (AppDetails::Archive(a), AppDetails::Archive(b)) => AppDetails::Archive(a.then(b)),
            (AppDetails::Purge(a), AppDetails::Purge(b)) => AppDetails::Purge(a.then(b)),
            (AppDetails::Compact(a), AppDetails::Compact(b)) => AppDetails::Compact(a.then(b)),
            (AppDetails::Recover(a), AppDetails::Recover(b)) => AppDetails::Recover(a.then(b)),
            (_, next) => next,
        }
    }

    /// The figures the metrics export, where this command reports them.
    pub(crate) fn figures(&self) -> Figures {
        match self {
            AppDetails::Archive(a) => Figures {
                backlog_rows: a.backlog.map(|b| b.backlog_rows),
                oldest_backlog_age_ms: a.backlog.map(|b| b.oldest_backlog_age_ms),
                replica_wait_ms: Some(a.replica_wait.replica_wait_ms),
                ..Figures::default()
            },
            AppDetails::Purge(p) => Figures {
                replica_wait_ms: Some(p.replica_wait.replica_wait_ms),
                left_locked_rows: Some(p.left_locked_rows),
                ..Figures::default()
            },
            AppDetails::Compact(c) => Figures {
                replica_wait_ms: Some(c.replica_wait.replica_wait_ms),
                ..Figures::default()
            },
            AppDetails::Restore(r) => Figures {
                replica_wait_ms: Some(r.replica_wait.replica_wait_ms),
                ..Figures::default()
            },
            AppDetails::Status(s) => Figures {
                backlog_rows: Some(s.backlog_rows),
                oldest_backlog_age_ms: Some(s.oldest_backlog_age_ms),
                awaiting_purge_rows: Some(s.awaiting_purge_rows),
                cursor_age_ms: Some(s.cursor_age_ms),
                ..Figures::default()
            },
            _ => Figures::default(),
        }
    }
}

/// Figures about an app's state for the metrics: `None` where the command does not report one;
/// `Some(None)` where it does and there is none (no backlog, so no oldest row).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Figures {
    pub backlog_rows: Option<i64>,
    pub oldest_backlog_age_ms: Option<Option<i64>>,
    pub awaiting_purge_rows: Option<i64>,
    pub cursor_age_ms: Option<Option<i64>>,
    /// Time this run's writes waited for lagging replicas.
    pub replica_wait_ms: Option<u64>,
    /// Rows a purge left because another transaction held them.
    pub left_locked_rows: Option<u64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `archive`, per app.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ArchiveApp {
    /// What is left below the cutoff after the run (not counted with `--stragglers`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<Backlog>,
    /// Rows this run archived again in a newer version (SPEC §5.10), all counted.
    #[serde(skip_serializing_if = "is_zero")]
    pub superseded_rows: u64,
    /// The first `SUPERSEDED_LISTED` of them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub superseded: Vec<Superseded>,
    /// Rows purge kept (changed in place, or holding a column added since) that this run
    /// archived again as they are now.
    #[serde(skip_serializing_if = "is_zero")]
    pub kept_rows_archived_again: u64,
    #[serde(flatten)]
    pub replica_wait: ReplicaWait,
    /// The app's log after the run.
    #[serde(flatten)]
    pub log: ArchiveLog,
}

/// Time spent waiting for lagging replicas before writes (`--replica`), and how many waits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ReplicaWait {
    #[serde(skip_serializing_if = "is_zero")]
    pub replica_wait_ms: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub replica_waits: u64,
}

impl ReplicaWait {
    pub fn add(&mut self, waited: std::time::Duration) {
        if !waited.is_zero() {
            self.replica_wait_ms += waited.as_millis() as u64;
            self.replica_waits += 1;
        }
    }

    fn then(self, next: ReplicaWait) -> ReplicaWait {
        ReplicaWait {
            replica_wait_ms: self.replica_wait_ms + next.replica_wait_ms,
            replica_waits: self.replica_waits + next.replica_waits,
        }
    }
}

/// At most this many superseded rows are listed in an app's summary (all are counted).
const SUPERSEDED_LISTED: usize = 100;

impl ArchiveApp {
    fn then(mut self, next: ArchiveApp) -> ArchiveApp {
        self.backlog = next.backlog.or(self.backlog);
        self.replica_wait = self.replica_wait.then(next.replica_wait);
        let rows = self.superseded_rows + next.superseded_rows;
        self.note_superseded(next.superseded);
        self.superseded_rows = rows;
        self
    }

    /// Counts `rows` and lists them while there is room.
    pub(crate) fn note_superseded(&mut self, rows: Vec<Superseded>) {
        self.superseded_rows += rows.len() as u64;
        let room = SUPERSEDED_LISTED.saturating_sub(self.superseded.len());
        self.superseded.extend(rows.into_iter().take(room));
    }
}

/// Delivered rows below the cutoff after the cursor, and the age of the oldest (null: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Backlog {
    pub backlog_rows: i64,
    pub oldest_backlog_age_ms: Option<i64>,
}

/// `verify`, per app.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VerifyApp {
    pub stragglers: u64,
    /// The app's log as the run read it.
    #[serde(flatten)]
    pub log: VerifyLog,
    /// This app's share of the run's findings (the summary lists them once, at the run's level;
    /// the runs table keeps each app's).
    #[serde(skip)]
    pub findings: Vec<Finding>,
}

/// `purge`, per app.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PurgeApp {
    pub purged_rows: u64,
    /// `--dry-run`: what would go.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub would_purge_rows: Option<u64>,
    /// Members whose row changed since it was archived: kept, correctly.
    pub kept_changed: Vec<String>,
    /// Why rows that encode to their archived lines were kept anyway: a column the lines lack
    /// (added to the table since, or one a built-in table's format has no key for) that holds
    /// what a restore would not put back — `region (holds other than its default)`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kept_for_columns: Vec<String>,
    /// Batches not purged because their objects or members disagree with the receipt.
    pub failed_batches: Vec<String>,
    /// Batches not purged because they are not in their app's log yet (`log_pending`:
    /// recorded by an older build, or by a run that ended before appending): the next archive
    /// run appends them, and they wait — work left, not a failure. Absent when none wait.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting_for_log: Vec<String>,
    /// What was found about them.
    pub findings: Vec<Finding>,
    /// Receipts left alone because they were restored into the source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restored_batches_left: Option<u64>,
    /// Rows another transaction held locked (the relay claiming, an operator's open
    /// transaction): skipped at once, never waited for, and left — their receipts stay
    /// unfinished and the next purge takes them.
    #[serde(skip_serializing_if = "is_zero")]
    pub left_locked_rows: u64,
    /// Rows of receipts verified too recently for `--grace`: they wait.
    pub in_grace_rows: u64,
    /// When the first of them becomes purgeable (its receipt's verification time + the grace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eligible_from_ms: Option<i64>,
    /// `--dry-run`: the batches that would be purged.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub would_purge_batches: Vec<PlannedPurge>,
    #[serde(flatten)]
    pub replica_wait: ReplicaWait,
}

/// A batch `purge --dry-run` would purge.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PlannedPurge {
    pub batch_id: String,
    /// The UTC day of its rows (its `dt=` partition).
    pub day: String,
    pub first_updated_at_ms: i64,
    pub last_updated_at_ms: i64,
    /// Rows that would be deleted now (exactly as archived).
    pub rows: u64,
}

impl PurgeApp {
    fn then(mut self, next: PurgeApp) -> PurgeApp {
        self.purged_rows += next.purged_rows;
        self.left_locked_rows += next.left_locked_rows;
        self.would_purge_rows = match (self.would_purge_rows, next.would_purge_rows) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        self.kept_changed.extend(next.kept_changed);
        for why in next.kept_for_columns {
            if !self.kept_for_columns.contains(&why) {
                self.kept_for_columns.push(why);
            }
        }
        self.failed_batches.extend(next.failed_batches);
        self.waiting_for_log.extend(next.waiting_for_log);
        self.findings.extend(next.findings);
        self.restored_batches_left = next.restored_batches_left.or(self.restored_batches_left);
        self.in_grace_rows = next.in_grace_rows;
        self.eligible_from_ms = next.eligible_from_ms;
        self.would_purge_batches.extend(next.would_purge_batches);
        self.replica_wait = self.replica_wait.then(next.replica_wait);
        self
    }
}

/// `recover`, per app: what its log held that the database lacked, and what became of it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RecoverApp {
    /// Batches the store's log holds that the database had no receipt of, recorded again from
    /// the store's bytes (each read in full first).
    pub recovered_batches: u64,
    pub recovered_rows: u64,
    /// Of them, batches whose rows were all gone from the source already: marked purged.
    pub already_purged_batches: u64,
    /// The database's own receipts the log held but the database had not been told of (a run
    /// that ended between the store and the database): given their leaves.
    pub taken_leaves: u64,
    /// The store's write-once record of this recovery (`_log/app_code=…/recoveries/…`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery_record: Option<String>,
}

impl RecoverApp {
    fn then(mut self, next: RecoverApp) -> RecoverApp {
        self.recovered_batches += next.recovered_batches;
        self.recovered_rows += next.recovered_rows;
        self.already_purged_batches += next.already_purged_batches;
        self.taken_leaves += next.taken_leaves;
        self.recovery_record = next.recovery_record.or(self.recovery_record);
        self
    }
}

/// `compact`, per app.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CompactApp {
    /// Receipts whose member rows were replaced by their digest in this run.
    pub compacted_batches: u64,
    /// Member rows deleted (rows still in the source table keep theirs).
    pub compacted_member_rows: u64,
    /// `--dry-run`: the member rows of the batches that would be compacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub would_compact_member_rows: Option<u64>,
    /// Batches not compacted because their objects or member rows disagree with the receipt.
    pub failed_batches: Vec<String>,
    pub findings: Vec<Finding>,
    /// Batches in a cold class, not compacted (with `--thaw`, asked for).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pending_thaw: Vec<ColdObject>,
    #[serde(flatten)]
    pub replica_wait: ReplicaWait,
}

impl CompactApp {
    fn then(mut self, next: CompactApp) -> CompactApp {
        self.compacted_batches += next.compacted_batches;
        self.compacted_member_rows += next.compacted_member_rows;
        self.would_compact_member_rows = match (
            self.would_compact_member_rows,
            next.would_compact_member_rows,
        ) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        self.failed_batches.extend(next.failed_batches);
        self.findings.extend(next.findings);
        self.pending_thaw = next.pending_thaw;
        self.replica_wait = self.replica_wait.then(next.replica_wait);
        self
    }
}

/// `restore`, per app.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RestoreApp {
    pub restored_rows: u64,
    /// Already in the target with the same content.
    pub already_present_rows: u64,
    /// Older versions superseded by a later batch, not loaded.
    pub superseded_rows: u64,
    /// Event ids not loaded (SPEC §6); why, in `conflict_details`.
    pub conflicts: Vec<String>,
    pub conflict_details: Vec<Conflict>,
    pub failed_batches: Vec<String>,
    /// Batches not loaded because their objects are being restored from a cold storage class
    /// (`--thaw`); run restore again once they are readable.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pending_thaw: Vec<ColdObject>,
    /// `--drill`: each batch's result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drills: Option<Vec<Drill>>,
    /// `--into-source`: time the chunks waited for lagging replicas.
    #[serde(flatten)]
    pub replica_wait: ReplicaWait,
}

/// One batch's drill.
#[derive(Debug, Clone, Serialize)]
pub struct Drill {
    pub batch_id: String,
    pub ok: bool,
    pub detail: Option<String>,
}

/// `status`, per app.
#[derive(Debug, Clone, Serialize)]
pub struct StatusApp {
    pub cursor: Option<Cursor>,
    pub cursor_age_ms: Option<i64>,
    pub receipts: i64,
    pub archived_rows: i64,
    /// What purge may still delete: those past `--grace` (purge takes them on its next run) and
    /// those still in it, with when the first of these becomes purgeable.
    pub awaiting_purge_rows: i64,
    pub awaiting_purge_eligible_rows: i64,
    pub awaiting_purge_in_grace_rows: i64,
    pub purge_eligible_from_ms: Option<i64>,
    pub superseded_rows: i64,
    /// Rows purge kept, waiting for the next archive run to archive them again as they are now
    /// (then purge deletes them), by reason: `changed` (in place, at the archived version) or
    /// `added: <columns>` (columns added to the table after their batch was archived).
    pub kept_rows: u64,
    pub kept_by_reason: std::collections::BTreeMap<String, u64>,
    pub restored_batches: i64,
    pub backlog_rows: i64,
    pub oldest_backlog_ms: Option<i64>,
    pub oldest_backlog_age_ms: Option<i64>,
    pub last_run: Option<Run>,
    pub last_purge: Option<Run>,
    pub last_good_drill: Option<GoodDrill>,
    /// Receipts whose member rows `compact` replaced by a digest, the member rows it deleted,
    /// and about how many bytes of the members table that saved (from the table's own size).
    pub compacted_receipts: i64,
    pub compacted_member_rows: i64,
    pub compacted_bytes_saved: Option<u64>,
}

/// The app's last successful drill.
#[derive(Debug, Clone, Serialize)]
pub struct GoodDrill {
    pub batch_id: String,
    pub drilled_at_ms: i64,
}

/// A command's fields of the whole run.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum RunDetails {
    Doctor(crate::pipeline::doctor::DoctorRun),
    Verify(VerifyRun),
    Purge(PurgeRun),
    Restore(RestoreRun),
    Find(FindRun),
    History(HistoryRun),
    Migrate(MigrateRun),
    Relocate(RelocateRun),
    LogKey(LogKeyRun),
}

/// `log-key`'s run: the new key's verifier (its public half) and where the signing key went.
#[derive(Debug, Clone, Serialize)]
pub struct LogKeyRun {
    pub verifier: String,
    pub key_file: String,
}

/// What `relocate` did: the archive's old and new home.
#[derive(Debug, Clone, Serialize)]
pub struct RelocateRun {
    pub from: String,
    pub to: String,
    pub archive_id: String,
    pub reason: String,
    /// The archive's marker, found at the new home holding the archive's id.
    pub marker: String,
    /// Every VERIFIED batch, its three objects read there in full against its receipt and
    /// member rows (as `verify` reads them), and the data objects' bytes read.
    pub checked_batches: u64,
    pub checked_bytes: u64,
    /// Batches whose objects have another ETag or version id there than their receipts held
    /// (a copy's new versions): recorded with the move, as evidence and on the receipts.
    pub recorded_versions: u64,
}

/// `migrate`'s run: what it changed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MigrateRun {
    /// Migrations applied by this run (`version description`); empty on a rerun.
    pub applied: Vec<String>,
    /// Tables this run created.
    pub created: Vec<String>,
    /// Receipts this run gave their place in their app's record order (the genesis backfill).
    #[serde(flatten)]
    pub numbered: Numbered,
    /// Synthetic rows `--seed-rows` put into the (empty) source table, and their apps.
    #[serde(skip_serializing_if = "is_zero")]
    pub seeded_rows: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub seeded_apps: Vec<String>,
}

impl MigrateRun {
    /// Whether this run changed anything (a first run does; a rerun does not).
    pub fn changed(&self) -> bool {
        !self.applied.is_empty()
            || !self.created.is_empty()
            || self.numbered.0 > 0
            || self.seeded_rows > 0
    }
}

/// `find`'s run: every archived row found, where, and where it stands now.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FindRun {
    pub found: Vec<FoundRow>,
    /// Event ids asked for and found in no batch in scope.
    pub not_found: Vec<String>,
    /// Data objects read.
    pub searched_batches: u64,
    /// Of them, compacted batches searched because no member row named an id.
    pub searched_compacted_batches: u64,
    /// Asked by event id (every id must be found), not by `--where` (one row is enough).
    #[serde(skip)]
    pub by_event_id: bool,
    /// Data objects of batches in scope that are not in the store (run `verify`): what they
    /// hold could not be looked at, so a run with any is "could not look" (exit 2).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_objects: Vec<String>,
    /// Ids not found in the archive that the source table holds: where each stands, and why
    /// it is not archived (yet).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub in_source: Vec<InSource>,
    /// Ids asked for whose batch could not be read whole (its object missing or damaged): not
    /// looked at, so never "not found" — the run could not look (exit 2).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub could_not_look: Vec<Unlooked>,
}

/// An event id a batch was to hold whose data object could not be read whole.
#[derive(Debug, Clone, Serialize)]
pub struct Unlooked {
    pub event_id: String,
    pub batch_id: String,
    pub key: String,
    pub why: String,
}

/// An event id no batch holds, as the source table has it.
#[derive(Debug, Clone, Serialize)]
pub struct InSource {
    pub event_id: String,
    pub app_code: String,
    pub status: String,
    pub updated_at_ms: i64,
    /// Why it is not archived: not delivered yet, after the app's cursor (the next runs take
    /// it), or a straggler below it (verify reports it; `archive --stragglers` takes it).
    pub why: String,
}

impl FindRun {
    /// Every event asked for was found (`--where`: at least one row).
    pub(crate) fn found_all(&self) -> bool {
        match self.by_event_id {
            true => self.not_found.is_empty(),
            false => !self.found.is_empty(),
        }
    }
}

/// One archived row `find` found.
#[derive(Debug, Clone, Serialize)]
pub struct FoundRow {
    pub event_id: String,
    pub app_code: String,
    pub batch_id: String,
    /// The data object's key.
    pub key: String,
    /// The row's line in the decompressed NDJSON, from 1.
    pub line: u64,
    pub updated_at_ms: i64,
    /// Whether the object's bytes hash to the receipt's SHA-256 (false: run `verify`).
    pub object_matches_receipt: bool,
    /// Where the row stands now: in the source (not purged yet), restored, in another version,
    /// purged.
    pub now: String,
    /// The batch that holds the row now, where it is another (a later version, or the same one
    /// archived again after purge kept it): this batch's line is not what a restore loads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// The archived row, as its NDJSON line has it.
    pub row: serde_json::Value,
}

/// `history`'s run: the runs recorded, newest first.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HistoryRun {
    pub runs: Vec<crate::db::runs::Run>,
}

/// The most batch ids a verify summary lists.
pub(crate) const CHECKED_LISTED: usize = 1000;

/// `verify`'s run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VerifyRun {
    pub metadata_only: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample: Option<Sample>,
    /// The batches checked: every one, or the first [`CHECKED_LISTED`] (by id) of a run that
    /// checked more — `checked_batch_count` says how many (a summary's size, like the run's
    /// memory, must not grow with the archive).
    pub checked_batches: Vec<String>,
    pub checked_batch_count: u64,
    pub findings: Vec<Finding>,
    /// Apps with more stragglers than `--max-stragglers` listed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stragglers_truncated: Vec<String>,
    /// Objects no receipt references (information, not a failure).
    pub orphans: Vec<String>,
    /// Objects checked by their metadata only, because their storage class cannot be read at
    /// once; with `--thaw` the store was asked to restore them, and a later run reads them in
    /// full. Not a failure.
    pub pending_thaw: Vec<ColdObject>,
    /// `--batch-id`: batches read in full whose objects were written again with the archived
    /// bytes (a restore from versioning), recorded under their new identity with the evidence.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recorded_versions: Vec<crate::db::object_versions::NewVersions>,
    /// Batches whose deleted rows held values the store does not: recorded by a build before
    /// layout 2 in `<prefix>_added_values` alone (a column added after the batch was archived).
    /// Not a failure — restore writes them back — but that table must be kept and backed up
    /// with the archive: the store alone cannot restore those rows whole.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values_only_in_database: Vec<ValuesOnlyInDatabase>,
}

/// A batch of [`VerifyRun::values_only_in_database`].
#[derive(Debug, Clone, Serialize)]
pub struct ValuesOnlyInDatabase {
    pub app_code: String,
    pub batch_id: String,
    /// The columns whose values are recorded in the database alone.
    pub columns: String,
}

/// `verify --sample-percent`: the share, the seed that repeats it, and how many were in scope.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    pub percent: f64,
    pub seed: u64,
    pub of: u64,
}

/// `purge`'s run: how batches' objects were looked at before deleting.
#[derive(Debug, Clone, Serialize)]
pub struct PurgeRun {
    pub object_check: ObjectCheck,
}

/// How purge looks at a batch's objects before deleting its rows (SPEC §5.9).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectCheck {
    /// HEAD each of the three objects: present, the receipt's sizes, the store's own checksum
    /// where it reports one. Three requests per batch, not per row.
    #[default]
    Head,
    /// Re-read and verify every object in full (as `verify`): `--reverify`.
    Read,
    /// Do not look: the receipts are trusted (`--trust-receipts`, for operators who scrub the
    /// archive separately). Logged at the start of every run.
    Trusted,
}

/// `restore`'s run.
#[derive(Debug, Clone, Serialize)]
pub struct RestoreRun {
    /// The target table (none for a drill).
    pub into: Option<String>,
    pub drill: bool,
}
