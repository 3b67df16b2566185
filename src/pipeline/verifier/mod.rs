//! The one verifier (SPEC §5.1, §6 `verify`): a batch's expected facts, what the store says
//! about its three objects (HEAD) and their bytes (GET) → the findings. `publish` treats any
//! finding as an error; `verify`, `purge` and `restore` report them, and `verify`, `purge` and
//! `compact` note them on the batch's receipt for `attest` (`noted.rs`).
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

mod cold;
mod compare;
mod expected;
mod finding;
mod noted;

use futures_util::TryStreamExt;

pub use cold::ColdObject;
pub(crate) use cold::ColdObjects;
pub(crate) use compare::{
    compare_data, compare_document, compare_guard, compare_head, members_proof_finding,
};
use compare::{compare_identity, member_count};
pub(crate) use expected::{Encryption, Expected, Guard};
pub use finding::{Finding, FindingKind};
pub(crate) use noted::note_findings;

use crate::model::batch::{DataRead, DataReader, KeptLines, Member};
use crate::model::digest::ObjectDigest;
use crate::model::format::{ContentFacts, MembersDigest};
use crate::model::protection::{ObjectLock, Protection, VerifiedBy};
use crate::model::receipt::StoredAs;
use crate::model::table::TableSpec;
use crate::store::{self, ObjectMeta, ObjectStore, StoreError};

/// How far a verification goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Depth {
    /// HEAD only: existence, sizes and the store's checksums (and the member count); no download.
    Head,
    /// HEAD and a full read of every object.
    Read,
    /// As `Read`, and keep the data object's lines (restore loads exactly those).
    ReadKeepingLines,
}

/// What verifying a batch found, and what it read.
#[derive(Debug, Default)]
pub(crate) struct Verified {
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
    /// The table as the data object's lines hold it, when it was read: fewer columns than
    /// today's for a batch written before columns were added (purge compares rows through it).
    pub data_spec: Option<&'static TableSpec>,
    /// What HEAD reported of the data object, when it exists.
    pub data_head: Option<ObjectMeta>,
}

impl Verified {
    /// Whether the batch's three objects were read in full and found to hold the archived bytes,
    /// nothing found but `object_replaced`: written again since its receipt recorded them (a
    /// copy to a new home, a restore from versioning), under another ETag or version id. Such a
    /// batch is clean once the new identity is recorded (SPEC §5.17, `pipeline::versions`).
    pub(crate) fn archived_bytes_under_new_identity(&self) -> bool {
        self.data_members.is_some()
            && self.cold.is_empty()
            && !self.findings.is_empty()
            && self
                .findings
                .iter()
                .all(|f| f.kind == FindingKind::ObjectReplaced)
    }

    /// Says, on each `object_replaced` finding of a batch, what its bytes showed and the step
    /// that records the new identity: read in full and the archived ones (`proven`), or not read
    /// (HEAD only) and nothing else found. Bytes read and found different need no word: their
    /// own findings say it.
    pub(crate) fn explain_replaced(&mut self, batch_id: &str, head_only: bool) {
        let proven = self.archived_bytes_under_new_identity();
        let unread = head_only
            && self
                .findings
                .iter()
                .all(|f| f.kind == FindingKind::ObjectReplaced);
        let hint = if proven {
            format!(" — read in full, its bytes are the archived ones: `outbox-archiver verify --batch-id {batch_id}` records the new version (README, \"Recovering from a finding\")")
        } else if unread {
            format!(" — not read: `outbox-archiver verify --batch-id {batch_id}` reads it in full and records the new version if its bytes are the ones archived")
        } else {
            return;
        };
        for f in &mut self.findings {
            if f.kind == FindingKind::ObjectReplaced {
                if let Some(actual) = &mut f.actual {
                    actual.push_str(&hint);
                }
            }
        }
    }

    /// The batch's protection as the store reports it: the weakest retention of its objects,
    /// and the data object's class and encryption (what a receipt records).
    pub(crate) fn protection(&self) -> Protection {
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
pub(crate) struct Verifier<'a> {
    pub store: &'a dyn ObjectStore,
    pub spec: &'static TableSpec,
    pub depth: Depth,
    pub cold: ColdObjects<'a>,
}

impl Verifier<'_> {
    /// Verifies a batch's objects in order — manifest, `_SUCCESS`, data — as deep as
    /// [`Verifier::depth`] says.
    pub(crate) async fn verify(&self, expected: &Expected) -> Result<Verified, StoreError> {
        let mut verified = Verified::default();
        if let Some(sha256) = &expected.inconsistent_manifest_sha256 {
            verified.findings.push(
                Finding::new(
                    FindingKind::ReceiptInconsistent,
                    &expected.receipt.batch_id,
                    None,
                )
                .values(&expected.manifest.digest.sha256, sha256),
            );
        }
        let documents = [
            (
                &expected.receipt.keys.manifest,
                &expected.manifest.bytes,
                &expected.manifest.digest,
                FindingKind::ManifestMismatch,
            ),
            (
                &expected.receipt.keys.success,
                &expected.success.bytes,
                &expected.success.digest,
                FindingKind::SuccessMismatch,
            ),
        ];
        for (key, bytes, digest, kind) in documents {
            self.verify_document(expected, key, bytes, digest, kind, &mut verified)
                .await?;
        }
        self.verify_data(expected, verified).await
    }

    /// One document (manifest or `_SUCCESS`), which must equal `bytes` byte for byte: its HEAD,
    /// and its bytes unless HEAD only; one that cannot be read at once is checked as cold.
    async fn verify_document(
        &self,
        expected: &Expected,
        key: &crate::model::key::Key,
        bytes: &[u8],
        digest: &ObjectDigest,
        kind: FindingKind,
        verified: &mut Verified,
    ) -> Result<(), StoreError> {
        let head = self.head(expected, key, verified).await?;
        let cold = head.as_ref().filter(|h| !h.readable()).cloned();
        let got = match (&head, &cold, self.depth) {
            (None, _, _) | (_, _, Depth::Head) => None,
            (Some(_), Some(cold), _) => {
                return self
                    .verify_cold_document(expected, key, bytes, digest, cold, verified)
                    .await;
            }
            (Some(meta), None, _) => match store::get_all(self.store, key).await {
                // Refused by class although HEAD did not say so: the same as cold.
                Err(StoreError::NotReadable { storage_class, .. }) => {
                    let cold = ObjectMeta {
                        storage_class: Some(storage_class),
                        ..meta.clone()
                    };
                    return self
                        .verify_cold_document(expected, key, bytes, digest, &cold, verified)
                        .await;
                }
                other => other?,
            },
        };
        verified.findings.extend(compare_document(
            &expected.receipt.batch_id,
            key.as_str(),
            bytes,
            digest,
            kind,
            head.as_ref(),
            got.as_deref(),
            self.depth == Depth::Head,
        ));
        Ok(())
    }

    /// The data object: its HEAD, and unless HEAD only its bytes, lines and members (kept with
    /// [`Depth::ReadKeepingLines`] when nothing was found); one that cannot be read at once is
    /// checked as cold.
    async fn verify_data(
        &self,
        expected: &Expected,
        mut verified: Verified,
    ) -> Result<Verified, StoreError> {
        let key = &expected.receipt.keys.data;
        let head = self.head(expected, key, &mut verified).await?;
        if self.depth == Depth::Head {
            verified.findings.extend(compare_head(
                &expected.receipt.batch_id,
                key.as_str(),
                head.as_ref(),
                &expected.receipt.objects.data,
                expected.receipt.objects.data_crc64nvme,
            ));
            verified.findings.extend(member_count(expected));
            verified.findings.extend(members_proof_finding(expected));
            return Ok(verified);
        }
        if let Some(meta) = head.as_ref().filter(|h| !h.readable()) {
            return self.verify_cold_data(expected, meta, verified).await;
        }
        let keep_lines = self.depth == Depth::ReadKeepingLines;
        let keep = keep_lines.then_some(&expected.receipt.content);
        // A batch whose manifest names its columns is read by them, whatever the table became.
        let spec = match expected.receipt.columns.as_ref().map(|c| c.spec(self.spec)) {
            Some(Ok(spec)) => spec,
            Some(Err(why)) => {
                verified.findings.push(
                    Finding::new(
                        FindingKind::UnreadableData,
                        &expected.receipt.batch_id,
                        Some(key.as_str()),
                    )
                    .values("its manifest's columns", &why),
                );
                return Ok(verified);
            }
            None => self.spec,
        };
        let read = match read_data(self.store, spec, &expected.receipt.app_code, key, keep).await {
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
        verified.data_spec = read.as_ref().map(|r| r.spec);
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
        key: &crate::model::key::Key,
        verified: &mut Verified,
    ) -> Result<Option<ObjectMeta>, StoreError> {
        let head = self.store.head(key).await?;
        if let Some(meta) = &head {
            verified.findings.extend(compare_guard(
                &expected.receipt.batch_id,
                key.as_str(),
                meta,
                &expected.guard,
            ));
            let (recorded, seen) = if *key == expected.receipt.keys.data {
                verified.data_head = Some(meta.clone());
                (
                    &expected.receipt.objects.stored.data,
                    &mut verified.stored.data,
                )
            } else if *key == expected.receipt.keys.manifest {
                (
                    &expected.receipt.objects.stored.manifest,
                    &mut verified.stored.manifest,
                )
            } else {
                (
                    &expected.receipt.objects.stored.success,
                    &mut verified.stored.success,
                )
            };
            *seen = meta.identity();
            verified.findings.extend(compare_identity(
                &expected.receipt.batch_id,
                key.as_str(),
                meta,
                recorded,
            ));
            verified.heads.push(meta.clone());
        }
        Ok(head)
    }
}

/// Streams a data object through a [`DataReader`] (keeping its lines, sized for the expected
/// content, if given); `None` if it does not exist.
///
/// Reading is CPU work — inflating, two SHA-256s and a CRC over the bytes, every line scanned —
/// so the reader runs on a task of its own, fed the chunks as they arrive: batches verified
/// together use every core, and the caller's other work (archive records the batch before this
/// one meanwhile) goes on.
pub(crate) async fn read_data(
    store: &dyn ObjectStore,
    spec: &'static TableSpec,
    app_code: &str,
    key: &crate::model::key::Key,
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
    let (chunks, mut arriving) = tokio::sync::mpsc::channel::<bytes::Bytes>(READ_AHEAD_CHUNKS);
    let worker = tokio::spawn(async move {
        while let Some(chunk) = arriving.recv().await {
            reader.update(&chunk);
        }
        reader
    });
    while let Some(chunk) = body.try_next().await? {
        if chunks.send(chunk).await.is_err() {
            break;
        }
    }
    drop(chunks);
    match worker.await {
        Ok(reader) => Ok(Some(reader.finish())),
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// Chunks of a data object received ahead of its reader (a few hundred KiB at most).
const READ_AHEAD_CHUNKS: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bytes_read_in_full_and_found_archived_are_proven_under_a_new_identity() {
        let replaced =
            || Finding::new(FindingKind::ObjectReplaced, "b", Some("k")).values("v1", "v2");
        let read = |findings: Vec<Finding>| Verified {
            findings,
            data_members: Some(Vec::new()),
            ..Verified::default()
        };
        let mut proven = read(vec![replaced()]);
        assert!(proven.archived_bytes_under_new_identity());
        proven.explain_replaced("b", false);
        let actual = proven.findings[0].actual.as_deref().unwrap();
        assert!(actual.starts_with("v2 — read in full") && actual.contains("verify --batch-id b"));
        // Other bytes: their own findings speak, object_replaced gets no word.
        let mut damaged = read(vec![
            replaced(),
            Finding::new(FindingKind::Sha256Mismatch, "b", Some("k")),
        ]);
        assert!(!damaged.archived_bytes_under_new_identity());
        damaged.explain_replaced("b", false);
        assert_eq!(damaged.findings[0].actual.as_deref(), Some("v2"));
        // Not read (HEAD only): nothing proven, the step that reads it named.
        let mut unread = Verified {
            findings: vec![replaced()],
            ..Verified::default()
        };
        assert!(!unread.archived_bytes_under_new_identity());
        unread.explain_replaced("b", true);
        assert!(unread.findings[0]
            .actual
            .as_deref()
            .unwrap()
            .contains("not read"));
        // Nothing found: nothing to record.
        assert!(!read(Vec::new()).archived_bytes_under_new_identity());
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
}
