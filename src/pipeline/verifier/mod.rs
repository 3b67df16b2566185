//! The one verifier (SPEC §5.1, §6 `verify`): a batch's expected facts, what the store says
//! about its three objects (HEAD) and their bytes (GET) → the findings. `publish` treats any
//! finding as an error; `verify`, `purge` and `restore` report them.
//!
//! The comparisons are pure functions; [`Verifier::verify`] only fetches. A problem found is a
//! [`Finding`] — data, not an error; an `Err` means the store could not be asked.
//!
//! Every HEAD is also held to the batch's protection ([`Guard`]): the retention its receipt
//! records (or the one just written) and its encryption. An object in a storage class that cannot
//! be read at once (GLACIER, DEEP_ARCHIVE) is checked by HEAD only and reported as a
//! [`ColdObject`]; with `--thaw` the store is asked to restore it, and a later run reads it in
//! full. Right after upload (publish) its bytes as uploaded are scanned instead, and the store's
//! own checksum of the stored object must match them.

use std::collections::HashMap;

use futures_util::TryStreamExt;
use serde::Serialize;

use crate::db::receipts::StoredAs;
use crate::db::receipts::StoredReceipt;
use crate::model::batch::{DataRead, DataReader, EncodedBatch, KeptLines, Member};
use crate::model::digest::{crc64nvme, ObjectDigest};
use crate::model::format::{
    self, ContentFacts, Manifest, MembersDigest, ObjectKeys, SuccessMarker,
};
use crate::model::protection::{header_time, ObjectLock, Protection, Sse, VerifiedBy};
use crate::model::table::TableSpec;
use crate::store::{self, ObjectMeta, ObjectStore, StoreError, Thaw, ThawState};

/// What kind of problem a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// An object the receipt references is not in the store.
    MissingObject,
    SizeMismatch,
    Sha256Mismatch,
    Crc64Mismatch,
    /// The store's own checksum (CRC-64/NVME or COS CRC-64) disagrees with the bytes or receipt.
    StoreChecksumMismatch,
    /// The data object is not a complete gzip of well-formed NDJSON records of this app.
    UnreadableData,
    /// The decompressed lines disagree with the receipt (hash, count, totals, cursors, bytes).
    ContentMismatch,
    /// manifest.json disagrees with its receipt (one finding per differing field).
    ManifestMismatch,
    /// `_SUCCESS` does not bind this batch's manifest.
    SuccessMismatch,
    /// The receipt disagrees with itself (its fields do not hash to its manifest_sha256).
    ReceiptInconsistent,
    /// A row in the data object has no member row in the database.
    MemberMissing,
    /// A member row in the database is not in the data object.
    MemberExtra,
    /// A member's updated_at_ms differs from the archived row's.
    MemberMismatch,
    /// A delivered row below the app's cursor and the cutoff whose version no receipt holds.
    Straggler,
    /// An object's Object Lock retention is missing, shorter or weaker than its receipt says.
    RetentionMismatch,
    /// An object is encrypted otherwise than its receipt says (another key, or not at all).
    EncryptionMismatch,
    /// An object that cannot be read back at once, for which the store reports no checksum of
    /// its own: nothing could vouch for the stored bytes.
    StoreChecksumMissing,
    /// `purge --reverify` was asked to re-read an object that cannot be read at once.
    NotReadable,
    /// A compacted receipt's digest of its members disagrees with the data object's pairs.
    MembersDigestMismatch,
    /// The member and superseded rows of a batch do not hash to the receipt's members proof: a
    /// member row was changed, added or removed since the batch was recorded.
    MembersProofMismatch,
    /// A member row's fingerprint differs from its archived line's.
    MemberFingerprintMismatch,
    /// An object's ETag or version id differs from what the store reported when it was read
    /// back: it was written again since.
    ObjectReplaced,
    /// The receipt a purge deletes under is no longer VERIFIED (changed or deleted meanwhile).
    ReceiptWithdrawn,
}

/// One problem, with what was expected and what was found (absent parts are null).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub batch_id: Option<String>,
    pub key: Option<String>,
    pub event_id: Option<String>,
    pub expected: Option<String>,
    pub actual: Option<String>,
}

impl Finding {
    fn new(kind: FindingKind, batch_id: &str, key: Option<&str>) -> Finding {
        Finding {
            kind,
            batch_id: Some(batch_id.to_string()),
            key: key.map(str::to_string),
            event_id: None,
            expected: None,
            actual: None,
        }
    }

    fn values(mut self, expected: impl ToString, actual: impl ToString) -> Finding {
        self.expected = Some(expected.to_string());
        self.actual = Some(actual.to_string());
        self
    }

    fn event(mut self, event_id: &str) -> Finding {
        self.event_id = Some(event_id.to_string());
        self
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = serde_json::to_value(self.kind).unwrap_or_default();
        write!(f, "{}", kind.as_str().unwrap_or("finding"))?;
        if let Some(key) = &self.key {
            write!(f, " at {key}")?;
        }
        if let Some(event) = &self.event_id {
            write!(f, " (event {event})")?;
        }
        if let (Some(e), Some(a)) = (&self.expected, &self.actual) {
            write!(f, ": expected {e}, found {a}")?;
        }
        Ok(())
    }
}

/// Everything a batch's three objects must be: from its receipt (verify, purge, restore) or
/// from the batch just written (publish). Built once per batch.
#[derive(Debug, Clone)]
pub struct Expected {
    pub app_code: String,
    pub batch_id: String,
    pub keys: ObjectKeys,
    pub content: ContentFacts,
    pub data: ObjectDigest,
    /// The data object's CRC-64/NVME, where it is known.
    pub data_crc64nvme: Option<u64>,
    /// manifest.json and `_SUCCESS` as they must be, byte for byte, and their digests.
    pub manifest: Vec<u8>,
    pub manifest_digest: ObjectDigest,
    pub success: Vec<u8>,
    pub success_digest: ObjectDigest,
    /// What the receipt says the manifest hashes to, where it differs from the bytes it implies.
    pub inconsistent_manifest_sha256: Option<String>,
    /// The `(event_id, updated_at_ms)` the data object must hold.
    pub members: Vec<Member>,
    /// What every object's protection must be.
    pub guard: Guard,
    /// A compacted receipt's digest of the data object's `(event_id, updated_at_ms)` pairs:
    /// `members` then holds only the member rows left (rows still in the source table).
    pub members_digest: Option<MembersDigest>,
    /// Compute the digest of the data object's pairs as read ([`Verified::members_digest`]).
    pub digest_data_members: bool,
    /// The receipt's proof of its member rows ([`format::members_proof`]), where it has one.
    pub members_proof: Option<String>,
    /// What identified each object when it was read back; every HEAD is held to it.
    pub stored: StoredAs,
}

/// What an object's protection must be: at least this retention, and this encryption.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Guard {
    pub lock: Option<ObjectLock>,
    pub encryption: Option<Encryption>,
}

/// The encryption an object must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encryption {
    /// What a put asked for (publish): the store's report must satisfy it.
    Asked(Sse),
    /// What the receipt recorded the store reporting: the same algorithm and key.
    Recorded {
        algorithm: String,
        kms_key_id: Option<String>,
    },
}

impl Guard {
    /// What a receipt vouches for.
    pub fn of_receipt(protection: &Protection) -> Guard {
        Guard {
            lock: protection.lock,
            encryption: protection
                .sse_algorithm
                .as_ref()
                .map(|algorithm| Encryption::Recorded {
                    algorithm: algorithm.clone(),
                    kms_key_id: protection.sse_kms_key_id.clone(),
                }),
        }
    }
}

impl Expected {
    /// What a receipt vouches for; `members` are every version the database holds for the batch
    /// (members and superseded rows).
    pub fn of_receipt(spec: &TableSpec, receipt: &StoredReceipt, members: Vec<Member>) -> Expected {
        let guard = Guard::of_receipt(&receipt.protection);
        let members_digest = receipt.compaction.as_ref().map(|c| c.digest.clone());
        let manifest = Manifest {
            table: spec.name.to_string(),
            app_code: receipt.app_code.clone(),
            batch_id: receipt.batch_id.clone(),
            data_object_key: receipt.keys.data.clone(),
            content: receipt.content.clone(),
            data: receipt.data.clone(),
        }
        .to_bytes();
        let success = SuccessMarker {
            batch_id: receipt.batch_id.clone(),
            manifest_sha256: receipt.manifest_sha256.clone(),
            row_count: receipt.content.row_count,
        }
        .to_bytes();
        let implied = ObjectDigest::of(&manifest);
        let success_sha256 = ObjectDigest::of(&success).sha256;
        Expected {
            app_code: receipt.app_code.clone(),
            batch_id: receipt.batch_id.clone(),
            keys: receipt.keys.clone(),
            content: receipt.content.clone(),
            data: receipt.data.clone(),
            data_crc64nvme: receipt.data_crc64nvme,
            manifest_digest: ObjectDigest {
                sha256: receipt.manifest_sha256.clone(),
                crc64: receipt.manifest_crc64,
                size: manifest.len() as u64,
            },
            success_digest: ObjectDigest {
                sha256: success_sha256,
                crc64: receipt.success_crc64,
                size: success.len() as u64,
            },
            inconsistent_manifest_sha256: (implied.sha256 != receipt.manifest_sha256)
                .then_some(implied.sha256),
            manifest,
            success,
            members,
            guard,
            members_digest,
            digest_data_members: false,
            members_proof: receipt.members_proof.clone(),
            stored: receipt.stored.clone(),
        }
    }

    /// What a batch just written must read back as: its documents, built for the data object
    /// as placed (`data`: its own digest where an existing object was adopted).
    pub fn of_batch(
        prefix: &str,
        spec: &TableSpec,
        app_code: &str,
        batch: &EncodedBatch,
        data: &ObjectDigest,
    ) -> Expected {
        let docs = format::documents(prefix, spec.name, app_code, &batch.content, data);
        Expected {
            app_code: app_code.to_string(),
            batch_id: docs.batch_id,
            keys: docs.keys,
            content: batch.content.clone(),
            data: data.clone(),
            data_crc64nvme: None,
            manifest_digest: ObjectDigest::of(&docs.manifest),
            success_digest: ObjectDigest::of(&docs.success),
            inconsistent_manifest_sha256: None,
            manifest: docs.manifest,
            success: docs.success,
            members: batch.members.clone(),
            guard: Guard::default(),
            members_digest: None,
            digest_data_members: false,
            members_proof: None,
            stored: StoredAs::default(),
        }
    }
}

/// How far a verification goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// HEAD only: existence, sizes and the store's checksums (and the member count); no download.
    Head,
    /// HEAD and a full read of every object.
    Read,
    /// As `Read`, and keep the data object's lines (restore loads exactly those).
    ReadKeepingLines,
}

/// What to do with an object that cannot be read at once (a cold storage class).
#[derive(Debug, Clone, Copy, Default)]
pub enum ColdObjects<'a> {
    /// Check it by HEAD only, and report it.
    #[default]
    Metadata,
    /// As `Metadata`, and ask the store to restore it so that a later run can read it.
    Thaw(Thaw),
    /// The data object's bytes as they were just uploaded (publish): scan those, and hold the
    /// store's own checksum of the stored object to them.
    Uploaded(&'a [u8]),
}

/// An object that was checked by its metadata only, because it cannot be read at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ColdObject {
    pub batch_id: String,
    pub key: String,
    pub storage_class: String,
    pub thaw: ThawState,
}

/// What verifying a batch found, and what it read.
#[derive(Debug, Default)]
pub struct Verified {
    pub findings: Vec<Finding>,
    /// The data object's CRC-64/NVME, when it was read.
    pub data_crc64nvme: Option<u64>,
    /// [`Depth::ReadKeepingLines`]: the lines of the bytes just verified.
    pub lines: Option<KeptLines>,
    /// Objects checked by HEAD only because they cannot be read at once.
    pub cold: Vec<ColdObject>,
    /// How the data object was verified (publish: read back, or by the store's checksum).
    pub verified_by: VerifiedBy,
    /// What HEAD reported of the objects that exist: manifest, `_SUCCESS`, data.
    pub heads: Vec<ObjectMeta>,
    /// With [`Expected::digest_data_members`]: the digest of the data object's pairs, as read.
    pub members_digest: Option<MembersDigest>,
    /// What HEAD reported to identify each object (recorded on a receipt at read-back).
    pub stored: StoredAs,
    /// The data object's rows as read (key, version and fingerprint), when it was read.
    pub data_members: Option<Vec<Member>>,
    /// What HEAD reported of the data object, when it exists.
    pub data_head: Option<ObjectMeta>,
}

impl Verified {
    /// The batch's protection as the store reports it: the weakest retention of its objects,
    /// and the data object's class and encryption (what a receipt records).
    pub fn protection(&self) -> Protection {
        let data = self.heads.last();
        // The weakest of each: the earliest date and the least strict mode, so that every
        // object covers what the receipt records.
        let locks: Option<Vec<ObjectLock>> = self.heads.iter().map(|h| h.lock).collect();
        let lock = locks.filter(|l| !l.is_empty()).map(|locks| ObjectLock {
            mode: locks.iter().map(|l| l.mode).min().expect("some"),
            retain_until_ms: locks.iter().map(|l| l.retain_until_ms).min().expect("some"),
        });
        // Recorded only where all three agree (verify holds every object to it): an accepted
        // leftover under the bucket's old default encryption beside new documents must not
        // make a receipt that fails verify forever.
        let encryption = |h: &ObjectMeta| (h.sse_algorithm.clone(), h.sse_kms_key_id.clone());
        let (sse_algorithm, sse_kms_key_id) = match data.map(encryption) {
            Some(e) if self.heads.iter().all(|h| encryption(h) == e) => e,
            _ => (None, None),
        };
        Protection {
            lock,
            legal_hold: !self.heads.is_empty() && self.heads.iter().all(|h| h.legal_hold),
            storage_class: data.and_then(|d| d.storage_class.clone()),
            sse_algorithm,
            sse_kms_key_id,
            verified_by: self.verified_by,
        }
    }
}

/// Fetches a batch's objects and compares them with what they must be.
pub struct Verifier<'a> {
    pub store: &'a dyn ObjectStore,
    pub spec: &'static TableSpec,
    pub depth: Depth,
    pub cold: ColdObjects<'a>,
}

impl Verifier<'_> {
    pub async fn verify(&self, expected: &Expected) -> Result<Verified, StoreError> {
        let mut verified = Verified::default();
        if let Some(sha256) = &expected.inconsistent_manifest_sha256 {
            verified.findings.push(
                Finding::new(FindingKind::ReceiptInconsistent, &expected.batch_id, None)
                    .values(&expected.manifest_digest.sha256, sha256),
            );
        }
        let documents = [
            (
                &expected.keys.manifest,
                &expected.manifest,
                &expected.manifest_digest,
                FindingKind::ManifestMismatch,
            ),
            (
                &expected.keys.success,
                &expected.success,
                &expected.success_digest,
                FindingKind::SuccessMismatch,
            ),
        ];
        for (key, bytes, digest, kind) in documents {
            let head = self.head(expected, key, &mut verified).await?;
            let cold = head.as_ref().filter(|h| !h.readable()).cloned();
            let got = match (&head, &cold, self.depth) {
                (None, _, _) | (_, _, Depth::Head) => None,
                (Some(_), Some(cold), _) => {
                    self.verify_cold_document(expected, key, bytes, digest, cold, &mut verified)
                        .await?;
                    continue;
                }
                (Some(meta), None, _) => match store::get_all(self.store, key).await {
                    // Refused by class although HEAD did not say so: the same as cold.
                    Err(StoreError::NotReadable { storage_class, .. }) => {
                        let cold = ObjectMeta {
                            storage_class: Some(storage_class),
                            ..meta.clone()
                        };
                        self.verify_cold_document(
                            expected,
                            key,
                            bytes,
                            digest,
                            &cold,
                            &mut verified,
                        )
                        .await?;
                        continue;
                    }
                    other => other?,
                },
            };
            verified.findings.extend(compare_document(
                &expected.batch_id,
                key,
                bytes,
                digest,
                kind,
                head.as_ref(),
                got.as_deref(),
                self.depth == Depth::Head,
            ));
        }
        let key = &expected.keys.data;
        let head = self.head(expected, key, &mut verified).await?;
        if self.depth == Depth::Head {
            verified.findings.extend(compare_head(
                &expected.batch_id,
                key,
                head.as_ref(),
                &expected.data,
                expected.data_crc64nvme,
            ));
            verified.findings.extend(member_count(expected));
            verified.findings.extend(members_proof_finding(expected));
            return Ok(verified);
        }
        if let Some(meta) = head.as_ref().filter(|h| !h.readable()) {
            return self.verify_cold_data(expected, meta, verified).await;
        }
        let keep_lines = self.depth == Depth::ReadKeepingLines;
        let keep = keep_lines.then_some(&expected.content);
        let read = match read_data(self.store, self.spec, &expected.app_code, key, keep).await {
            Err(StoreError::NotReadable { storage_class, .. }) => {
                // The store refused the GET by class although HEAD did not say so.
                let meta = ObjectMeta {
                    storage_class: Some(storage_class),
                    ..head.clone().unwrap_or_default()
                };
                return self.verify_cold_data(expected, &meta, verified).await;
            }
            other => other?,
        };
        verified.data_crc64nvme = read.as_ref().map(|r| r.crc64nvme);
        let (mut data_findings, lines, digest, data_members) =
            compare_data(expected, head.as_ref(), read);
        verified.findings.append(&mut data_findings);
        verified.findings.extend(members_proof_finding(expected));
        verified.members_digest = digest;
        verified.data_members = data_members;
        if verified.findings.is_empty() && keep_lines {
            verified.lines = lines;
        }
        Ok(verified)
    }

    /// HEADs `key`, holds what it reports to the batch's guard, and keeps it.
    async fn head(
        &self,
        expected: &Expected,
        key: &str,
        verified: &mut Verified,
    ) -> Result<Option<ObjectMeta>, StoreError> {
        let head = self.store.head(key).await?;
        if let Some(meta) = &head {
            verified.findings.extend(compare_guard(
                &expected.batch_id,
                key,
                meta,
                &expected.guard,
            ));
            let (recorded, seen) = if key == expected.keys.data {
                verified.data_head = Some(meta.clone());
                (&expected.stored.data, &mut verified.stored.data)
            } else if key == expected.keys.manifest {
                (&expected.stored.manifest, &mut verified.stored.manifest)
            } else {
                (&expected.stored.success, &mut verified.stored.success)
            };
            *seen = meta.identity();
            verified
                .findings
                .extend(compare_identity(&expected.batch_id, key, meta, recorded));
            verified.heads.push(meta.clone());
        }
        Ok(head)
    }

    /// A data object that cannot be read at once. Right after upload its bytes as uploaded are
    /// scanned and the store's own checksum of the stored object must match them; otherwise its
    /// HEAD is compared (size, the store's checksums, members counted) and it is reported cold.
    async fn verify_cold_data(
        &self,
        expected: &Expected,
        meta: &ObjectMeta,
        mut verified: Verified,
    ) -> Result<Verified, StoreError> {
        let (batch_id, key) = (expected.batch_id.as_str(), expected.keys.data.as_str());
        if let ColdObjects::Uploaded(bytes) = self.cold {
            let mut reader = DataReader::new(self.spec, &expected.app_code);
            reader.update(bytes);
            let read = reader.finish();
            let nvme = read.crc64nvme;
            verified
                .findings
                .extend(store_checksum_missing(batch_id, key, meta));
            let (mut found, _, digest, data_members) =
                compare_data(expected, Some(meta), Some(read));
            verified.members_digest = digest;
            verified.data_members = data_members;
            verified.findings.append(&mut found);
            verified.data_crc64nvme = Some(nvme);
            verified.verified_by = VerifiedBy::StoreChecksum;
            return Ok(verified);
        }
        verified.findings.extend(compare_head(
            batch_id,
            key,
            Some(meta),
            &expected.data,
            expected.data_crc64nvme,
        ));
        verified.findings.extend(member_count(expected));
        verified.findings.extend(members_proof_finding(expected));
        self.note_cold(expected, key, meta, &mut verified).await?;
        Ok(verified)
    }

    /// A manifest or `_SUCCESS` that cannot be read at once (a lifecycle rule moved it, or a store
    /// whose default class is archival). Its bytes are known exactly, so its HEAD is compared
    /// with them (size, the store's checksums); right after upload the store must report a
    /// checksum of its own, as for a cold data object, else nothing vouches for what it stored.
    async fn verify_cold_document(
        &self,
        expected: &Expected,
        key: &str,
        bytes: &[u8],
        digest: &ObjectDigest,
        meta: &ObjectMeta,
        verified: &mut Verified,
    ) -> Result<(), StoreError> {
        let batch_id = expected.batch_id.as_str();
        verified.findings.extend(compare_head(
            batch_id,
            key,
            Some(meta),
            digest,
            Some(crc64nvme(bytes)),
        ));
        if let ColdObjects::Uploaded(_) = self.cold {
            verified
                .findings
                .extend(store_checksum_missing(batch_id, key, meta));
            verified.verified_by = VerifiedBy::StoreChecksum;
            return Ok(());
        }
        self.note_cold(expected, key, meta, verified).await
    }

    /// Reports `key` as checked by HEAD only, asking the store to restore it with `--thaw`.
    async fn note_cold(
        &self,
        expected: &Expected,
        key: &str,
        meta: &ObjectMeta,
        verified: &mut Verified,
    ) -> Result<(), StoreError> {
        let thaw = match (self.cold, meta.restore) {
            (_, store::RestoreStatus::InProgress) => ThawState::InProgress,
            (ColdObjects::Thaw(thaw), _) => self.store.request_thaw(key, &thaw).await?,
            _ => ThawState::NotRequested,
        };
        verified.cold.push(ColdObject {
            batch_id: expected.batch_id.clone(),
            key: key.to_string(),
            storage_class: meta
                .storage_class
                .clone()
                .or_else(|| meta.archive_status.clone())
                .unwrap_or_else(|| "unknown".into()),
            thaw,
        });
        Ok(())
    }
}

/// An object that cannot be read back, of which the store reports no checksum of its own
/// (CRC-64/NVME, SHA-256, COS's CRC-64): nothing would vouch for the stored bytes.
fn store_checksum_missing(batch_id: &str, key: &str, meta: &ObjectMeta) -> Option<Finding> {
    let reported = meta.crc64nvme.is_some() || meta.sha256.is_some() || meta.crc64ecma.is_some();
    (!reported).then(|| {
        Finding::new(FindingKind::StoreChecksumMissing, batch_id, Some(key)).values(
            "the store's own checksum of the stored object (x-amz-checksum-crc64nvme or -sha256, or COS's x-cos-hash-crc64ecma, on HEAD)",
            format!(
                "none, and the object cannot be read back ({}): set --s3-upload-checksum crc64nvme or sha256, or a storage class that can be read at once",
                meta.storage_class.as_deref().unwrap_or("a cold class")
            ),
        )
    })
}

/// An object's ETag and version id against what the store reported at read-back: another one
/// means the object was written again since (whatever its size). Nothing recorded (a receipt
/// from before migration 8, a store that reports none): nothing to hold it to.
fn compare_identity(
    batch_id: &str,
    key: &str,
    meta: &ObjectMeta,
    recorded: &crate::store::Identity,
) -> Option<Finding> {
    let differs = |want: &Option<String>, got: &Option<String>| want.is_some() && want != got;
    if differs(&recorded.etag, &meta.etag) || differs(&recorded.version_id, &meta.version_id) {
        let show = |i: &crate::store::Identity| {
            format!(
                "ETag {}, version {}",
                i.etag.as_deref().unwrap_or("none"),
                i.version_id.as_deref().unwrap_or("none")
            )
        };
        return Some(
            Finding::new(FindingKind::ObjectReplaced, batch_id, Some(key))
                .values(show(recorded), show(&meta.identity())),
        );
    }
    None
}

/// The member and superseded rows against the receipt's proof of them (receipts recorded since
/// migration 8, not compacted: compaction deletes member rows on purpose). `None`: nothing to
/// compare, or they agree.
pub fn members_proof_finding(expected: &Expected) -> Option<Finding> {
    let want = expected.members_proof.as_deref()?;
    if expected.members_digest.is_some() {
        return None;
    }
    let got = format::members_proof_of(&expected.members);
    (got.as_deref() != Some(want)).then(|| {
        Finding::new(FindingKind::MembersProofMismatch, &expected.batch_id, None).values(
            format!("member rows that hash to the receipt's members proof {want}"),
            match got {
                Some(got) => format!("{} member rows hashing to {got}", expected.members.len()),
                None => format!(
                    "{} member rows, some without a fingerprint",
                    expected.members.len()
                ),
            },
        )
    })
}

/// Whether the data object holds as many rows as the database has members for it (what a HEAD
/// check can say of the members; a compacted receipt's digest counts them).
fn member_count(expected: &Expected) -> Option<Finding> {
    let members = match &expected.members_digest {
        Some(digest) => digest.rows,
        None => expected.members.len() as u64,
    };
    (members != expected.content.row_count).then(|| {
        Finding::new(FindingKind::MemberMismatch, &expected.batch_id, None).values(
            format!("{} members", expected.content.row_count),
            format!("{members} members"),
        )
    })
}

/// What a HEAD reports of an object's protection against what it must be: a retention at least
/// as long and as strict (`retention_mismatch`), and the same encryption (`encryption_mismatch`).
pub fn compare_guard(batch_id: &str, key: &str, meta: &ObjectMeta, guard: &Guard) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(wanted) = &guard.lock {
        if !meta.lock.is_some_and(|lock| lock.covers(wanted)) {
            let show =
                |l: &ObjectLock| format!("{} until {}", l.mode, header_time(l.retain_until_ms));
            out.push(
                Finding::new(FindingKind::RetentionMismatch, batch_id, Some(key)).values(
                    show(wanted),
                    meta.lock.as_ref().map_or_else(
                        || "no retention reported (HEAD shows it only to roles with s3:GetObjectRetention)".to_string(),
                        show,
                    ),
                ),
            );
        }
    }
    let (algorithm, kms_key) = (
        meta.sse_algorithm.as_deref(),
        meta.sse_kms_key_id.as_deref(),
    );
    let ok = match &guard.encryption {
        None => true,
        Some(Encryption::Asked(sse)) => sse.reported_matches(algorithm, kms_key),
        Some(Encryption::Recorded {
            algorithm: want,
            kms_key_id,
        }) => {
            algorithm == Some(want.as_str())
                && (kms_key_id.is_none() || kms_key == kms_key_id.as_deref())
        }
    };
    if !ok {
        let show = |a: Option<&str>, k: Option<&str>| match (a, k) {
            (None, _) => "not encrypted (none reported)".to_string(),
            (Some(a), None) => a.to_string(),
            (Some(a), Some(k)) => format!("{a} with key {k}"),
        };
        let want = match &guard.encryption {
            Some(Encryption::Asked(sse)) => {
                show(Some(sse.algorithm.as_str()), sse.kms_key_id.as_deref())
            }
            Some(Encryption::Recorded {
                algorithm,
                kms_key_id,
            }) => show(Some(algorithm), kms_key_id.as_deref()),
            None => String::new(),
        };
        out.push(
            Finding::new(FindingKind::EncryptionMismatch, batch_id, Some(key))
                .values(want, show(algorithm, kms_key)),
        );
    }
    out
}

/// Streams a data object through a [`DataReader`] (keeping its lines, sized for the expected
/// content, if given); `None` if it does not exist.
pub async fn read_data(
    store: &dyn ObjectStore,
    spec: &'static TableSpec,
    app_code: &str,
    key: &str,
    keep_lines: Option<&ContentFacts>,
) -> Result<Option<DataRead>, StoreError> {
    let Some(mut body) = store.get(key).await? else {
        return Ok(None);
    };
    let mut reader = if let Some(expected) = keep_lines {
        DataReader::keeping_lines(spec, app_code, expected)
    } else {
        DataReader::new(spec, app_code)
    };
    while let Some(chunk) = body.try_next().await? {
        reader.update(&chunk);
    }
    Ok(Some(reader.finish()))
}

/// What a HEAD says against the expected digest: present, the size, and the store's own
/// checksums where it reports them (`nvme`: the CRC-64/NVME the bytes must have, where known).
pub fn compare_head(
    batch_id: &str,
    key: &str,
    meta: Option<&ObjectMeta>,
    expected: &ObjectDigest,
    nvme: Option<u64>,
) -> Vec<Finding> {
    let Some(meta) = meta else {
        return vec![Finding::new(
            FindingKind::MissingObject,
            batch_id,
            Some(key),
        )];
    };
    let mut out = Vec::new();
    if meta.size != expected.size {
        out.push(
            Finding::new(FindingKind::SizeMismatch, batch_id, Some(key))
                .values(expected.size, meta.size),
        );
    }
    if let Some(stored) = meta.crc64ecma.filter(|&c| c != expected.crc64) {
        out.push(
            Finding::new(FindingKind::StoreChecksumMismatch, batch_id, Some(key))
                .values(expected.crc64, stored),
        );
    }
    if let (Some(stored), Some(nvme)) = (meta.crc64nvme, nvme) {
        if stored != nvme {
            out.push(
                Finding::new(FindingKind::StoreChecksumMismatch, batch_id, Some(key))
                    .values(nvme, stored),
            );
        }
    }
    if let Some(stored) = meta.sha256.as_ref().filter(|&s| *s != expected.sha256) {
        out.push(
            Finding::new(FindingKind::StoreChecksumMismatch, batch_id, Some(key))
                .values(&expected.sha256, stored),
        );
    }
    out
}

/// The hashes of the bytes read against the expected ones (the size is the HEAD's to compare).
fn compare_hashes(
    batch_id: &str,
    key: &str,
    expected: &ObjectDigest,
    actual: &ObjectDigest,
) -> Vec<Finding> {
    let mut out = Vec::new();
    if actual.sha256 != expected.sha256 {
        out.push(
            Finding::new(FindingKind::Sha256Mismatch, batch_id, Some(key))
                .values(&expected.sha256, &actual.sha256),
        );
    }
    if actual.crc64 != expected.crc64 {
        out.push(
            Finding::new(FindingKind::Crc64Mismatch, batch_id, Some(key))
                .values(expected.crc64, actual.crc64),
        );
    }
    out
}

/// A small object (manifest, `_SUCCESS`) that must equal `implied` byte for byte: its HEAD, and
/// its bytes when read (`head_only`: not read).
#[allow(clippy::too_many_arguments)]
pub fn compare_document(
    batch_id: &str,
    key: &str,
    implied: &[u8],
    expected: &ObjectDigest,
    kind: FindingKind,
    head: Option<&ObjectMeta>,
    got: Option<&[u8]>,
    head_only: bool,
) -> Vec<Finding> {
    let mut out = compare_head(batch_id, key, head, expected, Some(crc64nvme(implied)));
    if head.is_none() || head_only {
        return out;
    }
    let Some(bytes) = got else {
        out.push(Finding::new(
            FindingKind::MissingObject,
            batch_id,
            Some(key),
        ));
        return out;
    };
    out.extend(compare_hashes(
        batch_id,
        key,
        expected,
        &ObjectDigest::of(bytes),
    ));
    if bytes != implied {
        out.extend(
            field_differences(implied, bytes)
                .into_iter()
                .map(|(field, want, got)| {
                    let mut f = Finding::new(kind, batch_id, Some(key)).values(want, got);
                    f.key = Some(format!("{key}#{field}"));
                    f
                }),
        );
    }
    out
}

/// A data object read in full (`None`: not there) against what it must be: the bytes' digest,
/// the store's checksums, and the facts and members recomputed from its lines. Also hands back
/// the rows the read kept.
pub fn compare_data(
    expected: &Expected,
    head: Option<&ObjectMeta>,
    read: Option<DataRead>,
) -> (
    Vec<Finding>,
    Option<KeptLines>,
    Option<MembersDigest>,
    Option<Vec<Member>>,
) {
    let (batch_id, key) = (expected.batch_id.as_str(), expected.keys.data.as_str());
    let Some(read) = read else {
        return (
            vec![Finding::new(
                FindingKind::MissingObject,
                batch_id,
                Some(key),
            )],
            None,
            None,
            None,
        );
    };
    let mut out = compare_head(batch_id, key, head, &expected.data, Some(read.crc64nvme));
    if head.is_none() {
        return (out, None, None, None);
    }
    let mut data_members = None;
    let mut digest = None;
    if read.digest.size != expected.data.size {
        out.push(
            Finding::new(FindingKind::SizeMismatch, batch_id, Some(key))
                .values(expected.data.size, read.digest.size),
        );
    }
    out.extend(compare_hashes(batch_id, key, &expected.data, &read.digest));
    match read.content {
        Err(e) => out.push(
            Finding::new(FindingKind::UnreadableData, batch_id, Some(key))
                .values("a complete gzip of this app's NDJSON records", e),
        ),
        Ok((content, members)) => {
            for (field, want, got) in expected.content.differences(&content) {
                let mut f = Finding::new(FindingKind::ContentMismatch, batch_id, Some(key))
                    .values(want, got);
                f.key = Some(format!("{key}#{field}"));
                out.push(f);
            }
            let pairs = || {
                members
                    .iter()
                    .map(|m| (m.event_id.as_str(), m.updated_at_ms))
            };
            if expected.digest_data_members || expected.members_digest.is_some() {
                digest = Some(format::members_digest(pairs()));
            }
            match (&expected.members_digest, &digest) {
                // Compacted: the pairs against the receipt's digest, the member rows left (rows
                // still in the source table) against the pairs.
                (Some(want), Some(got)) => {
                    if want != got {
                        out.push(
                            Finding::new(FindingKind::MembersDigestMismatch, batch_id, Some(key))
                                .values(
                                    format!("{} pairs, sha256 {}", want.rows, want.sha256),
                                    format!("{} pairs, sha256 {}", got.rows, got.sha256),
                                ),
                        );
                    }
                    out.extend(
                        member_differences(batch_id, &members, &expected.members)
                            .into_iter()
                            .filter(|f| f.kind != FindingKind::MemberMissing),
                    );
                }
                _ => out.extend(member_differences(batch_id, &members, &expected.members)),
            }
            data_members = Some(members);
        }
    }
    (out, read.lines, digest, data_members)
}

/// Members in the data object but not in the database, and the other way round.
fn member_differences(batch_id: &str, in_data: &[Member], in_db: &[Member]) -> Vec<Finding> {
    let mut db: HashMap<&str, &Member> = in_db.iter().map(|m| (m.event_id.as_str(), m)).collect();
    let mut out = Vec::new();
    for m in in_data {
        match db.remove(m.event_id.as_str()) {
            None => out.push(
                Finding::new(FindingKind::MemberMissing, batch_id, None)
                    .event(&m.event_id)
                    .values("a member row", "none"),
            ),
            Some(row) if row.updated_at_ms != m.updated_at_ms => out.push(
                Finding::new(FindingKind::MemberMismatch, batch_id, None)
                    .event(&m.event_id)
                    .values(m.updated_at_ms, row.updated_at_ms),
            ),
            // A member row without a fingerprint (recorded before migration 8) has nothing to
            // disagree with.
            Some(row) if row.fingerprint.is_some() && row.fingerprint != m.fingerprint => out.push(
                Finding::new(FindingKind::MemberFingerprintMismatch, batch_id, None)
                    .event(&m.event_id)
                    .values(
                        m.fingerprint.map(|f| f.to_string()).unwrap_or_default(),
                        row.fingerprint.map(|f| f.to_string()).unwrap_or_default(),
                    ),
            ),
            Some(_) => {}
        }
    }
    let mut extra: Vec<&str> = db.into_keys().collect();
    extra.sort_unstable();
    out.extend(extra.into_iter().map(|id| {
        Finding::new(FindingKind::MemberExtra, batch_id, None)
            .event(id)
            .values("not a member", "a member row")
    }));
    out
}

/// The top-level JSON fields in which two documents differ (the whole text if either is not a
/// JSON object).
fn field_differences(want: &[u8], got: &[u8]) -> Vec<(String, String, String)> {
    let parse =
        |b: &[u8]| serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(b).ok();
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim_end().to_string();
    match (parse(want), parse(got)) {
        (Some(w), Some(g)) => {
            let mut keys: Vec<&String> = w
                .keys()
                .chain(g.keys().filter(|k| !w.contains_key(*k)))
                .collect();
            keys.dedup();
            let mut out: Vec<(String, String, String)> = keys
                .into_iter()
                .filter(|k| w.get(*k) != g.get(*k))
                .map(|k| {
                    let show = |v: Option<&serde_json::Value>| {
                        v.map_or("absent".to_string(), |v| v.to_string())
                    };
                    (k.clone(), show(w.get(k)), show(g.get(k)))
                })
                .collect();
            if out.is_empty() {
                // Same values, other bytes (order, spacing): still not the contract's bytes.
                out.push(("bytes".into(), text(want), text(got)));
            }
            out
        }
        _ => vec![("bytes".into(), text(want), text(got))],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(size: u64) -> ObjectDigest {
        ObjectDigest {
            sha256: "a".repeat(64),
            crc64: 7,
            size,
        }
    }

    #[test]
    fn differences_name_the_fields() {
        let d = field_differences(br#"{"a":1,"b":"x"}"#, br#"{"a":2,"b":"x","c":3}"#);
        assert_eq!(
            d,
            vec![
                ("a".into(), "1".into(), "2".into()),
                ("c".into(), "absent".into(), "3".into())
            ]
        );
        let d = field_differences(br#"{"a":1,"b":2}"#, br#"{"b":2,"a":1}"#);
        assert_eq!(d[0].0, "bytes");
        assert_eq!(field_differences(b"{}", b"garbage")[0].0, "bytes");
    }

    #[test]
    fn a_head_is_compared_with_the_size_and_every_checksum_the_store_reports() {
        let kinds = |f: Vec<Finding>| f.into_iter().map(|f| f.kind).collect::<Vec<_>>();
        assert_eq!(
            kinds(compare_head("b", "k", None, &digest(3), None)),
            vec![FindingKind::MissingObject]
        );
        let meta = ObjectMeta {
            size: 4,
            crc64nvme: Some(1),
            crc64ecma: Some(8),
            sha256: Some("b".repeat(64)),
            ..ObjectMeta::default()
        };
        assert_eq!(
            kinds(compare_head("b", "k", Some(&meta), &digest(3), Some(2))),
            vec![
                FindingKind::SizeMismatch,
                FindingKind::StoreChecksumMismatch,
                FindingKind::StoreChecksumMismatch,
                FindingKind::StoreChecksumMismatch
            ]
        );
        let quiet = ObjectMeta {
            size: 3,
            ..ObjectMeta::default()
        };
        assert!(compare_head("b", "k", Some(&quiet), &digest(3), Some(2)).is_empty());
    }

    #[test]
    fn a_head_is_held_to_the_receipts_retention_and_encryption() {
        use crate::model::protection::{LockMode, SseAlgorithm};
        let kinds = |f: Vec<Finding>| f.into_iter().map(|f| f.kind).collect::<Vec<_>>();
        let lock = |mode, until| ObjectLock {
            mode,
            retain_until_ms: until,
        };
        let key = "arn:aws:kms:eu-west-1:1:key/k1";
        let recorded = Guard {
            lock: Some(lock(LockMode::Compliance, 2_000_000)),
            encryption: Some(Encryption::Recorded {
                algorithm: "aws:kms".into(),
                kms_key_id: Some(key.into()),
            }),
        };
        let meta = |l: Option<ObjectLock>, sse: Option<&str>, k: Option<&str>| ObjectMeta {
            lock: l,
            sse_algorithm: sse.map(str::to_string),
            sse_kms_key_id: k.map(str::to_string),
            ..ObjectMeta::default()
        };
        let good = meta(
            Some(lock(LockMode::Compliance, 2_000_000)),
            Some("aws:kms"),
            Some(key),
        );
        assert!(compare_guard("b", "k", &good, &recorded).is_empty());
        assert!(compare_guard("b", "k", &good, &Guard::default()).is_empty());
        let shorter = meta(
            Some(lock(LockMode::Compliance, 1_999_000)),
            Some("aws:kms"),
            Some(key),
        );
        let governance = meta(
            Some(lock(LockMode::Governance, 9_000_000)),
            Some("aws:kms"),
            Some(key),
        );
        let none = meta(None, Some("aws:kms"), Some(key));
        for m in [shorter, governance, none] {
            assert_eq!(
                kinds(compare_guard("b", "k", &m, &recorded)),
                vec![FindingKind::RetentionMismatch]
            );
        }
        let other_key = meta(
            Some(lock(LockMode::Compliance, 2_000_000)),
            Some("aws:kms"),
            Some("arn:aws:kms:eu-west-1:1:key/k2"),
        );
        let plain = meta(Some(lock(LockMode::Compliance, 2_000_000)), None, None);
        for m in [other_key, plain] {
            assert_eq!(
                kinds(compare_guard("b", "k", &m, &recorded)),
                vec![FindingKind::EncryptionMismatch]
            );
        }
        let asked = Guard {
            lock: None,
            encryption: Some(Encryption::Asked(Sse {
                algorithm: SseAlgorithm::Kms,
                kms_key_id: Some("k1".into()),
                bucket_key: None,
            })),
        };
        assert!(compare_guard("b", "k", &good, &asked).is_empty());
    }

    #[test]
    fn a_receipt_records_the_weakest_retention_and_encryption_all_objects_share() {
        use crate::model::protection::LockMode;
        let head = |mode, until, sse: Option<&str>| ObjectMeta {
            lock: Some(ObjectLock {
                mode,
                retain_until_ms: until,
            }),
            sse_algorithm: sse.map(str::to_string),
            ..ObjectMeta::default()
        };
        let verified = Verified {
            heads: vec![
                head(LockMode::Governance, 9_000, Some("aws:kms")),
                head(LockMode::Compliance, 5_000, Some("aws:kms")),
                head(LockMode::Compliance, 7_000, Some("AES256")),
            ],
            ..Verified::default()
        };
        let p = verified.protection();
        // The earliest date and the least strict mode: every object covers it.
        assert_eq!(
            p.lock,
            Some(ObjectLock {
                mode: LockMode::Governance,
                retain_until_ms: 5_000
            })
        );
        for h in &verified.heads {
            assert!(h.lock.unwrap().covers(&p.lock.unwrap()));
        }
        // The objects disagree on encryption: none recorded (verify would fail forever).
        assert_eq!((p.sse_algorithm, p.sse_kms_key_id), (None, None));
        let one_missing = Verified {
            heads: vec![
                head(LockMode::Compliance, 5_000, None),
                ObjectMeta::default(),
            ],
            ..Verified::default()
        };
        assert_eq!(one_missing.protection().lock, None);
    }

    #[test]
    fn any_checksum_of_its_own_lets_a_store_vouch_for_a_cold_object() {
        let cold = |meta: ObjectMeta| store_checksum_missing("b", "k", &meta).is_some();
        assert!(cold(ObjectMeta::default()));
        for meta in [
            ObjectMeta {
                crc64nvme: Some(1),
                ..ObjectMeta::default()
            },
            ObjectMeta {
                sha256: Some("a".repeat(64)),
                ..ObjectMeta::default()
            },
            ObjectMeta {
                crc64ecma: Some(1),
                ..ObjectMeta::default()
            },
        ] {
            assert!(!cold(meta));
        }
    }

    #[test]
    fn members_are_compared_both_ways() {
        let m = |id: &str, ms: i64| Member::new(id, ms);
        let found = member_differences("b", &[m("e1", 1), m("e2", 2)], &[m("e2", 3), m("e3", 3)]);
        let kinds: Vec<_> = found.iter().map(|f| (f.kind, f.event_id.clone())).collect();
        assert_eq!(
            kinds,
            vec![
                (FindingKind::MemberMissing, Some("e1".into())),
                (FindingKind::MemberMismatch, Some("e2".into())),
                (FindingKind::MemberExtra, Some("e3".into())),
            ]
        );
    }
}
