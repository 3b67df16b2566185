//! What a batch's three objects must be ([`Expected`]), built once per batch from its receipt
//! (verify, purge, restore) or from the batch just written (publish), and what every object's
//! protection must be ([`Guard`]). Pure: no store, no database.

use crate::db::receipts::StoredAs;
use crate::db::receipts::StoredReceipt;
use crate::model::batch::{EncodedBatch, Member};
use crate::model::digest::ObjectDigest;
use crate::model::format::{
    self, ContentFacts, Manifest, MembersDigest, ObjectKeys, SuccessMarker,
};
use crate::model::protection::{ObjectLock, Protection, Sse};
use crate::model::table::TableSpec;

/// Everything a batch's three objects must be: from its receipt (verify, purge, restore) or
/// from the batch just written (publish). Built once per batch.
#[derive(Debug, Clone)]
pub(crate) struct Expected {
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
    /// Compute the digest of the data object's pairs as read
    /// ([`Verified::members_digest`](super::Verified::members_digest)).
    pub digest_data_members: bool,
    /// The receipt's proof of its member rows ([`format::members_proof`]), where it has one.
    pub members_proof: Option<String>,
    /// What identified each object when it was read back; every HEAD is held to it.
    pub stored: StoredAs,
}

/// What an object's protection must be: at least this retention, and this encryption.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Guard {
    pub lock: Option<ObjectLock>,
    pub encryption: Option<Encryption>,
}

/// The encryption an object must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Encryption {
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
    pub(crate) fn of_receipt(protection: &Protection) -> Guard {
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
    pub(crate) fn of_receipt(
        spec: &TableSpec,
        receipt: &StoredReceipt,
        members: Vec<Member>,
    ) -> Expected {
        let guard = Guard::of_receipt(&receipt.protection);
        let members_digest = receipt.compaction.as_ref().map(|c| c.digest.clone());
        let manifest = Manifest {
            table: spec.name.to_string(),
            app_code: receipt.recorded_app_code.clone(),
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
    pub(crate) fn of_batch(
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
