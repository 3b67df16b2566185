//! Publishing one batch: write-once puts of its three objects, then a read-back of each through
//! the one [`Verifier`] — any finding fails the batch, and nothing is recorded (SPEC §5.1, §5.3).
//!
//! At a key no receipt references (the caller has checked), an existing object is handled so
//! that reruns converge: identical bytes are accepted; a data object whose decompressed NDJSON
//! is identical is adopted (its own bytes and hashes go into the manifest); anything else is the
//! leftover of a failed attempt and is replaced, and reported.

use super::verifier::{read_data, Depth, Expected, Finding, Verifier};
use crate::batch::{DataRead, EncodedBatch};
use crate::digest::ObjectDigest;
use crate::failpoint::{FailPoints, Tripped};
use crate::store::{self, ObjectStore, PutMode, StoreError};
use crate::table::TableSpec;

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The read-back found something: the first finding, and how many there were.
    #[error("read-back of {key} does not match: {first}{more}", key = first.key.as_deref().unwrap_or("the batch"), more = if *count > 1 { format!(" (and {} more findings)", count - 1) } else { String::new() })]
    Mismatch { first: Box<Finding>, count: usize },
    #[error(transparent)]
    Failpoint(#[from] Tripped),
}

/// What publishing did: the batch's facts as written, for its receipt.
#[derive(Debug, Clone)]
pub struct Published {
    pub expected: Expected,
    /// The data object's CRC-64/NVME as read back (AWS S3's own full-object checksum).
    pub data_crc64nvme: u64,
    /// Keys where a leftover with other content was replaced.
    pub replaced: Vec<String>,
    /// Keys where an existing data object with identical NDJSON was kept.
    pub adopted: Vec<String>,
}

/// How an object came to be at its key.
enum Placement {
    Written,
    Accepted,
    Adopted(ObjectDigest),
    Replaced,
}

pub struct Publisher<'a> {
    pub store: &'a dyn ObjectStore,
    pub spec: &'static TableSpec,
    pub app_code: &'a str,
    pub failpoints: &'a FailPoints,
}

impl Publisher<'_> {
    /// What the batch's objects will be: its batch_id, keys and documents (all a dry run
    /// reports, and what [`Publisher::publish`] writes).
    pub fn plan(&self, batch: &EncodedBatch) -> Expected {
        let prefix = self.store.location().prefix();
        Expected::of_batch(prefix, self.spec, self.app_code, batch, &batch.gzip_digest)
    }

    /// Writes the batch's objects as `planned` (from [`Publisher::plan`]) and reads them back.
    pub async fn publish(
        &self,
        batch: &EncodedBatch,
        planned: Expected,
    ) -> Result<Published, PublishError> {
        let prefix = self.store.location().prefix().to_string();
        let mut replaced = Vec::new();
        let mut adopted = Vec::new();
        let data = match self.place_data(&planned.keys.data, batch).await? {
            Placement::Adopted(digest) => {
                adopted.push(planned.keys.data.clone());
                digest
            }
            Placement::Replaced => {
                replaced.push(planned.keys.data.clone());
                batch.gzip_digest.clone()
            }
            Placement::Written | Placement::Accepted => batch.gzip_digest.clone(),
        };
        self.failpoints.pass("after-data-put")?;
        // An adopted data object's own digest goes into the manifest.
        let expected = if data == batch.gzip_digest {
            planned
        } else {
            Expected::of_batch(&prefix, self.spec, self.app_code, batch, &data)
        };
        let keys = &expected.keys;
        if let Placement::Replaced = self.place_exact(&keys.manifest, &expected.manifest).await? {
            replaced.push(keys.manifest.clone());
        }
        self.failpoints.pass("after-manifest-put")?;
        if let Placement::Replaced = self.place_exact(&keys.success, &expected.success).await? {
            replaced.push(keys.success.clone());
        }
        self.failpoints.pass("after-success-put")?;

        let verifier = Verifier {
            store: self.store,
            spec: self.spec,
            depth: Depth::Read,
        };
        let verified = verifier.verify(&expected).await?;
        if let Some(first) = verified.findings.first() {
            return Err(PublishError::Mismatch {
                first: Box::new(first.clone()),
                count: verified.findings.len(),
            });
        }
        Ok(Published {
            data_crc64nvme: verified.data_crc64nvme.unwrap_or_default(),
            expected,
            replaced,
            adopted,
        })
    }

    /// Writes `body` at `key` unless something is there already; true when written.
    async fn create(&self, key: &str, body: bytes::Bytes) -> Result<bool, PublishError> {
        match self.store.put(key, body, PutMode::Create).await {
            Ok(()) => Ok(true),
            Err(StoreError::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    async fn place_data(&self, key: &str, batch: &EncodedBatch) -> Result<Placement, PublishError> {
        if self.create(key, batch.gzip.clone()).await? {
            return Ok(Placement::Written);
        }
        if let Some(DataRead {
            digest,
            content: Ok((content, members)),
            ..
        }) = read_data(self.store, self.spec, self.app_code, key, None).await?
        {
            if digest == batch.gzip_digest {
                return Ok(Placement::Accepted);
            }
            if content == batch.content && members == batch.members {
                return Ok(Placement::Adopted(digest));
            }
        }
        tracing::warn!(
            key,
            "replacing a leftover data object that no receipt references and whose content differs"
        );
        self.store
            .put(key, batch.gzip.clone(), PutMode::Overwrite)
            .await?;
        Ok(Placement::Replaced)
    }

    async fn place_exact(&self, key: &str, bytes: &[u8]) -> Result<Placement, PublishError> {
        if self.create(key, bytes.to_vec().into()).await? {
            return Ok(Placement::Written);
        }
        if store::get_all(self.store, key).await?.as_deref() == Some(bytes) {
            return Ok(Placement::Accepted);
        }
        tracing::warn!(
            key,
            "replacing a leftover object that no receipt references and whose bytes differ"
        );
        self.store
            .put(key, bytes.to_vec().into(), PutMode::Overwrite)
            .await?;
        Ok(Placement::Replaced)
    }
}
