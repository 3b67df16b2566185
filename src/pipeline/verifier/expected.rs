//! What a batch's three objects must be ([`Expected`]), built once per batch from its receipt
//! (verify, purge, restore) or from the batch just written (publish), and what every object's
//! protection must be ([`Guard`]). Pure: no store, no database.

use crate::model::batch::{EncodedBatch, Member};
use crate::model::batch_columns::SharedColumns;
use crate::model::digest::ObjectDigest;
use crate::model::format::{self, MembersDigest};
use crate::model::protection::{ObjectLock, Protection, Sse};
use crate::model::receipt::{Objects, Receipt};
use crate::model::table::TableSpec;

/// Everything a batch's three objects must be: its receipt — as recorded (verify, purge,
/// restore), or as it will be recorded (publish) — with the documents it implies, the rows the
/// data object must hold and the protection every object must have. Built once per batch.
#[derive(Debug, Clone)]
pub(crate) struct Expected {
    pub receipt: Receipt,
    /// manifest.json and `_SUCCESS` as they must be, byte for byte, and their digests.
    pub manifest: Document,
    pub success: Document,
    /// What the receipt says the manifest hashes to, where it differs from the bytes it implies.
    pub inconsistent_manifest_sha256: Option<String>,
    /// The `(event_id, updated_at_ms)` the data object must hold (a compacted receipt: only the
    /// member rows left, rows still in the source table).
    pub members: Vec<Member>,
    /// What every object's protection must be.
    pub guard: Guard,
    /// Compute the digest of the data object's pairs as read
    /// ([`Verified::members_digest`](super::Verified::members_digest)).
    pub digest_data_members: bool,
}

/// A document as it must be: its bytes and their digest.
#[derive(Debug, Clone)]
pub(crate) struct Document {
    pub bytes: Vec<u8>,
    pub digest: ObjectDigest,
}

impl Document {
    fn of(bytes: Vec<u8>) -> Document {
        Document {
            digest: ObjectDigest::of(&bytes),
            bytes,
        }
    }
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
        receipt: &Receipt,
        members: Vec<Member>,
    ) -> Expected {
        // The documents as the receipt implies them, held to the digests the store reported
        // when they were read back: the manifest's hashes, `_SUCCESS`'s CRC.
        let manifest = receipt.manifest(spec.name);
        let implied = ObjectDigest::of(&manifest);
        let success = receipt.success();
        let o = &receipt.objects;
        let manifest = Document {
            digest: ObjectDigest {
                sha256: o.manifest_sha256.clone(),
                crc64: o.manifest_crc64,
                size: implied.size,
            },
            bytes: manifest,
        };
        let success = Document {
            digest: ObjectDigest {
                crc64: o.success_crc64,
                ..ObjectDigest::of(&success)
            },
            bytes: success,
        };
        Expected {
            inconsistent_manifest_sha256: (implied.sha256 != o.manifest_sha256)
                .then_some(implied.sha256),
            guard: Guard::of_receipt(&receipt.protection),
            receipt: receipt.clone(),
            manifest,
            success,
            members,
            digest_data_members: false,
        }
    }

    /// What a batch just written must read back as: its receipt to be and its documents, built
    /// for the data object as placed (`data`: its own digest where an existing object was
    /// adopted).
    pub(crate) fn of_batch(
        prefix: &format::Prefix,
        spec: &TableSpec,
        app_code: &str,
        batch: &EncodedBatch,
        data: &ObjectDigest,
        columns: Option<&SharedColumns>,
    ) -> Expected {
        Expected::of_content(
            prefix,
            spec,
            app_code,
            &batch.content,
            &batch.members,
            data,
            columns,
        )
    }

    /// What a batch whose data object holds `content` and `members` (its lines, as read or
    /// written) and has digest `data` must be: the receipt its objects imply, and their
    /// documents (`recover`: a batch the store holds and the database lost).
    pub(crate) fn of_content(
        prefix: &format::Prefix,
        spec: &TableSpec,
        app_code: &str,
        content: &crate::model::format::ContentFacts,
        members: &[Member],
        data: &ObjectDigest,
        columns: Option<&SharedColumns>,
    ) -> Expected {
        let docs = format::documents(prefix, spec.name, app_code, content, data, columns);
        let (manifest, success) = (Document::of(docs.manifest), Document::of(docs.success));
        let objects = Objects::of(data.clone(), &manifest.digest, &success.digest);
        Expected {
            receipt: Receipt::planned(app_code, docs.batch_id, docs.keys, content.clone(), objects)
                .with_columns(columns.cloned()),
            manifest,
            success,
            inconsistent_manifest_sha256: None,
            members: members.to_vec(),
            guard: Guard::default(),
            digest_data_members: false,
        }
    }

    /// A compacted receipt's digest of the data object's pairs.
    pub(crate) fn members_digest(&self) -> Option<&MembersDigest> {
        self.receipt.members_digest()
    }
}
