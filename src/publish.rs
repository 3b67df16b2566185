//! Publishing one batch: write-once puts of its three objects, then a read-back of each that must
//! match before anything is recorded (SPEC §5.1, §5.3).
//!
//! At a key no receipt references (the caller has checked), an existing object is handled so
//! that reruns converge: identical bytes are accepted; a data object whose decompressed NDJSON
//! is identical is adopted (its own bytes and hashes go into the manifest); anything else is the
//! leftover of a failed attempt and is replaced, and reported.

use futures_util::TryStreamExt;

use crate::batch::{DataRead, DataReader, EncodedBatch, Member};
use crate::digest::{crc64nvme, ObjectDigest};
use crate::failpoint::{FailPoints, Tripped};
use crate::format::{self, BatchDocuments, ContentFacts};
use crate::store::{self, ObjectMeta, ObjectStore, PutMode, StoreError};
use crate::table::TableSpec;

/// A read-back that did not match: the batch fails and nothing is recorded.
#[derive(Debug, Clone, thiserror::Error)]
#[error("read-back of {key} does not match: {what} expected {expected}, found {actual}")]
pub struct Mismatch {
    pub key: String,
    pub what: &'static str,
    pub expected: String,
    pub actual: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Mismatch(#[from] Mismatch),
    #[error(transparent)]
    Failpoint(#[from] Tripped),
}

/// What publishing did.
#[derive(Debug, Clone)]
pub struct Published {
    pub docs: BatchDocuments,
    pub data: ObjectDigest,
    pub manifest: ObjectDigest,
    pub success: ObjectDigest,
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
    pub async fn publish(&self, batch: &EncodedBatch) -> Result<Published, PublishError> {
        let prefix = self.store.location().prefix().to_string();
        let table = self.spec.name;
        let batch_id = format::batch_id(table, self.app_code, &batch.content);
        let keys = format::object_keys(
            &prefix,
            table,
            self.app_code,
            batch.content.first.updated_at_ms,
            &batch_id,
        );
        let mut replaced = Vec::new();
        let mut adopted = Vec::new();

        let data = match self.place_data(&keys.data, batch).await? {
            Placement::Adopted(digest) => {
                adopted.push(keys.data.clone());
                digest
            }
            Placement::Replaced => {
                replaced.push(keys.data.clone());
                batch.gzip_digest.clone()
            }
            Placement::Written | Placement::Accepted => batch.gzip_digest.clone(),
        };
        self.failpoints.pass("after-data-put")?;

        let docs = format::documents(&prefix, table, self.app_code, &batch.content, &data);
        if let Placement::Replaced = self
            .place_exact(&docs.keys.manifest, &docs.manifest)
            .await?
        {
            replaced.push(docs.keys.manifest.clone());
        }
        self.failpoints.pass("after-manifest-put")?;
        if let Placement::Replaced = self.place_exact(&docs.keys.success, &docs.success).await? {
            replaced.push(docs.keys.success.clone());
        }
        self.failpoints.pass("after-success-put")?;

        let manifest = read_back_exact(self.store, &docs.keys.manifest, &docs.manifest).await?;
        let success = read_back_exact(self.store, &docs.keys.success, &docs.success).await?;
        let data_crc64nvme = read_back_data(
            self.store,
            self.spec,
            self.app_code,
            &docs.keys.data,
            &data,
            &batch.content,
            &batch.members,
        )
        .await?;
        Ok(Published {
            docs,
            data,
            manifest,
            success,
            data_crc64nvme,
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
        }) = read_data(self.store, self.spec, self.app_code, key).await?
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

/// Streams a data object through a [`DataReader`]; `None` if it does not exist.
pub async fn read_data(
    store: &dyn ObjectStore,
    spec: &'static TableSpec,
    app_code: &str,
    key: &str,
) -> Result<Option<DataRead>, StoreError> {
    let Some(mut body) = store.get(key).await? else {
        return Ok(None);
    };
    let mut reader = DataReader::new(spec, app_code);
    while let Some(chunk) = body.try_next().await? {
        reader.update(&chunk);
    }
    Ok(Some(reader.finish()))
}

fn mismatch(
    key: &str,
    what: &'static str,
    expected: impl ToString,
    actual: impl ToString,
) -> Mismatch {
    Mismatch {
        key: key.to_string(),
        what,
        expected: expected.to_string(),
        actual: actual.to_string(),
    }
}

/// Checks a HEAD against the expected digest: size, and the store's own checksums where it
/// reports them.
fn check_meta(
    key: &str,
    meta: Option<ObjectMeta>,
    digest: &ObjectDigest,
    nvme: u64,
) -> Result<(), Mismatch> {
    let meta = meta.ok_or_else(|| mismatch(key, "object", "present", "missing"))?;
    if meta.size != digest.size {
        return Err(mismatch(key, "size (HEAD)", digest.size, meta.size));
    }
    if let Some(stored) = meta.crc64nvme {
        if stored != nvme {
            return Err(mismatch(key, "store CRC-64/NVME", nvme, stored));
        }
    }
    if let Some(stored) = meta.crc64ecma {
        if stored != digest.crc64 {
            return Err(mismatch(key, "store CRC-64/ECMA", digest.crc64, stored));
        }
    }
    Ok(())
}

fn check_digest(key: &str, expected: &ObjectDigest, actual: &ObjectDigest) -> Result<(), Mismatch> {
    if actual.size != expected.size {
        return Err(mismatch(key, "size", expected.size, actual.size));
    }
    if actual.sha256 != expected.sha256 {
        return Err(mismatch(key, "SHA-256", &expected.sha256, &actual.sha256));
    }
    if actual.crc64 != expected.crc64 {
        return Err(mismatch(key, "CRC-64", expected.crc64, actual.crc64));
    }
    Ok(())
}

/// HEAD and full GET of a small object that must equal `expected` byte for byte.
pub async fn read_back_exact(
    store: &dyn ObjectStore,
    key: &str,
    expected: &[u8],
) -> Result<ObjectDigest, PublishError> {
    let digest = ObjectDigest::of(expected);
    check_meta(key, store.head(key).await?, &digest, crc64nvme(expected))?;
    let bytes = store::get_all(store, key)
        .await?
        .ok_or_else(|| mismatch(key, "object", "present", "missing"))?;
    check_digest(key, &digest, &ObjectDigest::of(&bytes))?;
    Ok(digest)
}

/// HEAD and full streamed GET of a data object: its bytes must have `digest`, and its lines
/// must give exactly `content` and `members`. Returns the bytes' CRC-64/NVME.
pub async fn read_back_data(
    store: &dyn ObjectStore,
    spec: &'static TableSpec,
    app_code: &str,
    key: &str,
    digest: &ObjectDigest,
    content: &ContentFacts,
    members: &[Member],
) -> Result<u64, PublishError> {
    let meta = store.head(key).await?;
    let read = read_data(store, spec, app_code, key)
        .await?
        .ok_or_else(|| mismatch(key, "object", "present", "missing"))?;
    check_digest(key, digest, &read.digest)?;
    check_meta(key, meta, digest, read.crc64nvme)?;
    let (got, got_members) = read
        .content
        .map_err(|e| mismatch(key, "content", "a valid gzip NDJSON data object", e))?;
    if let Some((what, expected, actual)) = content.differences(&got).into_iter().next() {
        return Err(mismatch(key, what, expected, actual).into());
    }
    if got_members.as_slice() != members {
        let at = got_members
            .iter()
            .zip(members)
            .position(|(a, b)| a != b)
            .unwrap_or(members.len().min(got_members.len()));
        return Err(mismatch(
            key,
            "member list",
            members.get(at).map_or("end".to_string(), |m| {
                format!("{}@{}", m.event_id, m.updated_at_ms)
            }),
            got_members.get(at).map_or("end".to_string(), |m| {
                format!("{}@{}", m.event_id, m.updated_at_ms)
            }),
        )
        .into());
    }
    Ok(read.crc64nvme)
}
