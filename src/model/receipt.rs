//! The receipt (SPEC §3): what the archive records of one verified batch, and the one shape of it
//! every layer uses — archive builds it as a batch is planned, published and read back; the
//! receipts repository (`db::receipts`) writes it and reads it back; verify, purge, restore,
//! compact, find, attest and the log read it. Pure: the columns it is stored in are named here
//! ([`COLUMNS`]), their SQL types, the row's decoding and the receipt's lifecycle as SQL are the
//! repository's.
//!
//! Adding a receipt column touches a migration, this file (the field and its column's name) and
//! `db/receipts/row.rs` (its type, how it is written and read).

use crate::model::batch::Member;
use crate::model::batch_columns::SharedColumns;
use crate::model::chain::Link;
use crate::model::digest::{ObjectDigest, RowFingerprint};
use crate::model::format::{
    ContentFacts, Identity, Manifest, MembersDigest, ObjectKeys, SuccessMarker,
};
use crate::model::protection::Protection;

/// The one state this tool writes; any other was set by hand.
pub(crate) const STATE_VERIFIED: &str = "VERIFIED";

/// One batch's receipt.
#[derive(Debug, Clone)]
pub struct Receipt {
    /// The app's one spelling (SPEC §5.4): the one its member rows, lock and cursor use. A
    /// receipt an older build recorded under another spelling of the app keeps that one in
    /// [`Receipt::recorded_app_code`].
    pub app_code: String,
    /// The app code as the receipt row spells it: what its manifest and object keys say.
    pub recorded_app_code: String,
    pub batch_id: String,
    pub keys: ObjectKeys,
    /// What the batch holds: its rows' range, count, control totals and NDJSON hash.
    pub content: ContentFacts,
    /// [`members_proof`] of the batch's rows (receipts recorded since migration 8).
    pub members_proof: Option<String>,
    /// Its three objects as they were read back.
    pub objects: Objects,
    /// How the objects are protected and stored, as the store reported it after the puts.
    pub protection: Protection,
    /// Its place in its app's record order — the seq, which orders its app's leaves in the
    /// log, and the link an older build's linear chain gave it (migration 10; none until given).
    pub link: Option<Link>,
    /// Its leaf in its app's log (migration 13; none until an archive run appended it).
    pub log_index: Option<u64>,
    /// Where it is in its life: recorded, restored, compacted, verified again.
    pub life: Lifecycle,
    /// The columns its batch's lines hold, as its manifest names them (receipts recorded since
    /// migration 20; none: a manifest written before the list, read by today's table).
    pub columns: Option<SharedColumns>,
}

/// What a receipt records of its batch's three objects: their digests as written, each held to
/// what the store returned when it was read back before the receipt was recorded. The
/// manifest's and `_SUCCESS`'s bytes follow from the receipt (the verifier rebuilds them byte
/// for byte), so their sizes do and are not recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Objects {
    /// The data object: its gzip bytes' SHA-256, CRC-64 and size.
    pub data: ObjectDigest,
    /// The data object's CRC-64/NVME (receipts recorded since migration 4): AWS S3's own
    /// full-object checksum.
    pub data_crc64nvme: Option<u64>,
    pub manifest_sha256: String,
    pub manifest_crc64: u64,
    pub success_crc64: u64,
    /// What identified each object in the store when it was read back (migration 8).
    pub stored: StoredAs,
}

impl Objects {
    /// The three objects of a batch whose data object has digest `data` and whose documents
    /// hash to `manifest` and `success`.
    pub(crate) fn of(
        data: ObjectDigest,
        manifest: &ObjectDigest,
        success: &ObjectDigest,
    ) -> Objects {
        Objects {
            data,
            data_crc64nvme: None,
            manifest_sha256: manifest.sha256.clone(),
            manifest_crc64: manifest.crc64,
            success_crc64: success.crc64,
            stored: StoredAs::default(),
        }
    }
}

/// What identified each of a batch's objects in the store when it was read back (the manifest's
/// and `_SUCCESS`'s version ids are not kept: the data object's is what matters).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredAs {
    pub data: Identity,
    pub manifest: Identity,
    pub success: Identity,
}

/// Where a receipt is in its life. Its rules as conditions on the receipt's row — awaiting
/// purge, restored and not purged, compactable — are `db::receipts::rule`'s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lifecycle {
    /// When the batch was read back whole and recorded.
    pub verified_at_ms: i64,
    /// When the batch was restored into the source table (purge leaves it alone since).
    pub restored_at_ms: Option<i64>,
    /// Set once `compact` replaced the member rows of its purged rows by a digest.
    pub compaction: Option<Compaction>,
    /// When `verify` last read its objects in full and found them whole, and how
    /// (migration 10).
    pub full_verified: Option<(i64, String)>,
    /// When a check (`verify`, or `purge` and `compact` before they act) last found the batch
    /// other than recorded, and its findings as JSON, `{"count": n, "first": […]}` (migration
    /// 17).
    pub last_findings: Option<(i64, String)>,
}

/// What a compacted receipt keeps of its members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compaction {
    /// Every `(event_id, updated_at_ms)` the data object holds, as a digest.
    pub digest: MembersDigest,
    pub at_ms: i64,
    /// Member rows deleted (rows still in the source table keep theirs).
    pub member_rows: u64,
}

impl Receipt {
    /// The receipt a batch will have: its identity, content and objects, planned before its
    /// objects are written (recorded: [`Receipt::recorded`]).
    pub(crate) fn planned(
        app_code: &str,
        batch_id: String,
        keys: ObjectKeys,
        content: ContentFacts,
        objects: Objects,
    ) -> Receipt {
        Receipt {
            app_code: app_code.to_string(),
            recorded_app_code: app_code.to_string(),
            batch_id,
            keys,
            content,
            members_proof: None,
            objects,
            protection: Protection::default(),
            link: None,
            log_index: None,
            life: Lifecycle::default(),
            columns: None,
        }
    }

    /// This receipt, its batch's lines holding `columns` (its manifest names them).
    pub(crate) fn with_columns(mut self, columns: Option<SharedColumns>) -> Receipt {
        self.columns = columns;
        self
    }

    /// This receipt as recorded at `verified_at_ms`, its batch's rows being `members`.
    pub(crate) fn recorded(mut self, members: &[Member], verified_at_ms: i64) -> Receipt {
        self.members_proof = members_proof_of(members);
        self.life.verified_at_ms = verified_at_ms;
        self
    }

    /// manifest.json as this receipt implies it, byte for byte (SPEC §4), `table` being the
    /// source table's name: under the app code the receipt was recorded with.
    pub(crate) fn manifest(&self, table: &str) -> Vec<u8> {
        Manifest {
            table: table.to_string(),
            app_code: self.recorded_app_code.clone(),
            batch_id: self.batch_id.clone(),
            data_object_key: self.keys.data.to_string(),
            content: self.content.clone(),
            data: self.objects.data.clone(),
            columns: self.columns.clone(),
        }
        .to_bytes()
    }

    /// `_SUCCESS` as this receipt implies it: bound to the manifest hash it records.
    pub(crate) fn success(&self) -> Vec<u8> {
        SuccessMarker {
            batch_id: self.batch_id.clone(),
            manifest_sha256: self.objects.manifest_sha256.clone(),
            row_count: self.content.row_count,
        }
        .to_bytes()
    }

    /// Its seq in its app's record order, once given.
    pub(crate) fn seq(&self) -> Option<u64> {
        self.link.as_ref().map(|link| link.seq)
    }

    /// A compacted receipt's digest of the data object's `(event_id, updated_at_ms)` pairs.
    pub(crate) fn members_digest(&self) -> Option<&MembersDigest> {
        self.life.compaction.as_ref().map(|c| &c.digest)
    }

    /// How the batch was last verified in full: by `verify`, or by the archive's own read-back.
    pub(crate) fn last_full_verification(&self) -> (i64, String) {
        match &self.life.full_verified {
            Some((at, how)) if *at >= self.life.verified_at_ms => (*at, format!("verify ({how})")),
            _ => (
                self.life.verified_at_ms,
                format!("archive ({})", self.protection.verified_by.as_str()),
            ),
        }
    }

    /// What the batch's latest check found, when that check found something: its time and
    /// findings (JSON). A full verification that found the batch whole later than that (a
    /// repaired object read again) resolves them; one earlier does not.
    pub(crate) fn unresolved_findings(&self) -> Option<(i64, &str)> {
        let (found_at, findings) = self.life.last_findings.as_ref()?;
        let (whole_at, _) = self.last_full_verification();
        (*found_at >= whole_at).then_some((*found_at, findings.as_str()))
    }
}

/// The receipts table's columns besides the control totals (each total is a column too), in
/// the table's order: what a profile's total cannot be called, and what `db::receipts` makes
/// the table of (a test holds the two to each other).
pub(crate) const COLUMNS: &[&str] = &[
    "app_code",
    "batch_id",
    "state",
    "data_object_key",
    "manifest_object_key",
    "success_object_key",
    "schema_version",
    "row_count",
    "first_updated_at_ms",
    "first_event_id",
    "last_updated_at_ms",
    "last_event_id",
    "min_created_at_ms",
    "max_created_at_ms",
    "ndjson_sha256",
    "gzip_sha256",
    "data_crc64",
    "manifest_crc64",
    "success_crc64",
    "manifest_sha256",
    "uncompressed_bytes",
    "compressed_bytes",
    "verified_at_ms",
    "created_at_ms",
    "updated_at_ms",
    "purged_rows",
    "kept_rows",
    "purged_at_ms",
    "data_crc64nvme",
    "restored_at_ms",
    "superseded_rows",
    "object_lock_mode",
    "retain_until_ms",
    "legal_hold",
    "storage_class",
    "sse_algorithm",
    "sse_kms_key_id",
    "verified_by",
    "members_digest_sha256",
    "members_digest_rows",
    "compacted_at_ms",
    "compacted_member_rows",
    "members_proof_sha256",
    "data_etag",
    "manifest_etag",
    "success_etag",
    "data_version_id",
    "chain_seq",
    "chain_link",
    "full_verified_at_ms",
    "full_verified_how",
    "log_index",
    "app_code_bytes",
    "last_findings_at_ms",
    "last_findings",
    "columns_sha256",
];

/// What every receipt records of its member list at archive time (README, "What purge
/// compares"): the SHA-256 (lowercase hex) of `outbox-archive/members-proof/v1\n` followed by
/// one line per row of the data object, in ascending order of the event id's UTF-8 bytes, then
/// of `updated_at_ms`, then of the fingerprint: a compact JSON array of the event id (escaped as
/// the NDJSON lines escape strings), `updated_at_ms` and the row's fingerprint in lowercase hex
/// (`["e-1",1700000000000,"cb79e9fdee5e363c9e27b4a0bbef46d2"]`), and `\n`. Purge recomputes it
/// from the member and superseded rows it is about to delete by: a member row changed since
/// (its version, its fingerprint, one more or fewer) does not hash to it.
pub(crate) fn members_proof<'a>(
    rows: impl IntoIterator<Item = (&'a str, i64, &'a RowFingerprint)>,
) -> String {
    use sha2::Digest as _;
    let mut rows: Vec<(&str, i64, &RowFingerprint)> = rows.into_iter().collect();
    rows.sort_unstable_by(|a, b| (a.0.as_bytes(), a.1, a.2).cmp(&(b.0.as_bytes(), b.1, b.2)));
    let mut hasher = sha2::Sha256::new();
    hasher.update(b"outbox-archive/members-proof/v1\n");
    let mut line = Vec::with_capacity(128);
    for (event_id, updated_at_ms, fingerprint) in &rows {
        line.clear();
        serde_json::to_writer(
            &mut line,
            &(event_id, updated_at_ms, fingerprint.to_string()),
        )
        .expect("in memory");
        line.push(b'\n');
        hasher.update(&line);
    }
    hex::encode(hasher.finalize())
}

/// [`members_proof`] of members that all carry a fingerprint (`None` if one does not: a member
/// row recorded before fingerprints were).
pub(crate) fn members_proof_of<'a>(
    members: impl IntoIterator<Item = &'a Member>,
) -> Option<String> {
    let rows: Option<Vec<_>> = members
        .into_iter()
        .map(|m| {
            m.fingerprint
                .as_ref()
                .map(|f| (m.event_id.as_str(), m.updated_at_ms, f))
        })
        .collect();
    rows.map(members_proof)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_members_proof_is_a_fixed_function_of_the_rows() {
        use crate::model::digest::row_fingerprint;
        let (a, b) = (row_fingerprint(b"line a"), row_fingerprint(b"line b"));
        let rows = [("e-2", 5_i64, &a), ("e-1", 7, &b), ("e-1", 3, &a)];
        let proof = members_proof(rows);
        // Python: the same lines hashed with hashlib (see README, "What purge compares").
        let text = format!(
            "outbox-archive/members-proof/v1\n[\"e-1\",3,\"{a}\"]\n[\"e-1\",7,\"{b}\"]\n[\"e-2\",5,\"{a}\"]\n"
        );
        assert_eq!(proof, crate::model::digest::sha256_hex(text.as_bytes()));
        let mut reversed = rows;
        reversed.reverse();
        assert_eq!(members_proof(reversed), proof, "any order");
        assert_ne!(
            members_proof([("e-2", 5_i64, &b)]),
            members_proof([("e-2", 5_i64, &a)])
        );
        assert_eq!(
            members_proof([]),
            crate::model::digest::sha256_hex(b"outbox-archive/members-proof/v1\n")
        );
    }
}
