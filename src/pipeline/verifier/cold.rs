//! Objects that cannot be read at once (GLACIER, DEEP_ARCHIVE, INTELLIGENT_TIERING's archive
//! tiers): checked by HEAD only and reported as a [`ColdObject`], restored on request with
//! `--thaw`; right after upload (publish) the bytes as uploaded are scanned instead, and the
//! store's own checksum of the stored object must vouch for them.

use serde::Serialize;

use super::compare::{compare_data, compare_head, member_count, members_proof_finding};
use super::{Expected, Finding, FindingKind, Verified, Verifier};
use crate::model::batch::DataReader;
use crate::model::digest::{crc64nvme, ObjectDigest};
use crate::model::protection::VerifiedBy;
use crate::store::{self, ObjectMeta, StoreError, Thaw, ThawState};

/// What to do with an object that cannot be read at once (a cold storage class).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) enum ColdObjects<'a> {
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

impl Verifier<'_> {
    /// A data object that cannot be read at once. Right after upload its bytes as uploaded are
    /// scanned and the store's own checksum of the stored object must match them; otherwise its
    /// HEAD is compared (size, the store's checksums, members counted) and it is reported cold.
    pub(super) async fn verify_cold_data(
        &self,
        expected: &Expected,
        meta: &ObjectMeta,
        mut verified: Verified,
    ) -> Result<Verified, StoreError> {
        let (batch_id, key) = (
            expected.receipt.batch_id.as_str(),
            expected.receipt.keys.data.as_str(),
        );
        if let ColdObjects::Uploaded(bytes) = self.cold {
            let mut reader = DataReader::new(self.spec, &expected.receipt.app_code);
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
            &expected.receipt.objects.data,
            expected.receipt.objects.data_crc64nvme,
        ));
        verified.findings.extend(member_count(expected));
        verified.findings.extend(members_proof_finding(expected));
        self.note_cold(expected, &expected.receipt.keys.data, meta, &mut verified)
            .await?;
        Ok(verified)
    }

    /// A manifest or `_SUCCESS` that cannot be read at once (a lifecycle rule moved it, or a store
    /// whose default class is archival). Its bytes are known exactly, so its HEAD is compared
    /// with them (size, the store's checksums); right after upload the store must report a
    /// checksum of its own, as for a cold data object, else nothing vouches for what it stored.
    pub(super) async fn verify_cold_document(
        &self,
        expected: &Expected,
        key: &crate::model::key::Key,
        bytes: &[u8],
        digest: &ObjectDigest,
        meta: &ObjectMeta,
        verified: &mut Verified,
    ) -> Result<(), StoreError> {
        let batch_id = expected.receipt.batch_id.as_str();
        verified.findings.extend(compare_head(
            batch_id,
            key.as_str(),
            Some(meta),
            digest,
            Some(crc64nvme(bytes)),
        ));
        if let ColdObjects::Uploaded(_) = self.cold {
            verified
                .findings
                .extend(store_checksum_missing(batch_id, key.as_str(), meta));
            verified.verified_by = VerifiedBy::StoreChecksum;
            return Ok(());
        }
        self.note_cold(expected, key, meta, verified).await
    }

    /// Reports `key` as checked by HEAD only, asking the store to restore it with `--thaw`.
    async fn note_cold(
        &self,
        expected: &Expected,
        key: &crate::model::key::Key,
        meta: &ObjectMeta,
        verified: &mut Verified,
    ) -> Result<(), StoreError> {
        let thaw = match (self.cold, meta.restore) {
            (_, store::RestoreStatus::InProgress) => ThawState::InProgress,
            (ColdObjects::Thaw(thaw), _) => self.store.request_thaw(key, &thaw).await?,
            _ => ThawState::NotRequested,
        };
        verified.cold.push(ColdObject {
            batch_id: expected.receipt.batch_id.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
