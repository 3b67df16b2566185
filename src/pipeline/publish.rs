//! Publishing one batch: write-once puts of its three objects, then a read-back of each through
//! the one [`Verifier`] — any finding fails the batch, and nothing is recorded (SPEC §5.1, §5.3).
//!
//! At a key no receipt references (the caller has checked), an existing object is handled so
//! that reruns converge: identical bytes are accepted; a data object whose decompressed NDJSON
//! is identical is adopted (its own bytes and hashes go into the manifest); anything else is the
//! leftover of a failed attempt and is replaced, and reported.
//!
//! The puts carry the run's [`WritePolicy`]: the batch's retention (counted from `now_ms`, the
//! same instant for all three objects), legal hold and the data object's storage class. An
//! object that was already there keeps its bytes but is brought up to the policy: its retention
//! extended if shorter, or rewritten if its class or encryption differs. A data object that cannot
//! be read at once (GLACIER, DEEP_ARCHIVE) is verified on its bytes as uploaded and the store's own
//! checksum of what it stored.

use super::verifier::{
    read_data, ColdObjects, Depth, Encryption, Expected, Finding, Verified, Verifier,
};
use crate::db::lock::{AppLock, Doing, LockLost};
use crate::failpoint::{FailPoints, Tripped};
use crate::model::batch::{DataRead, EncodedBatch};
use crate::model::batch_columns::SharedColumns;
use crate::model::digest::{self, ObjectDigest};
use crate::model::key::Key;
use crate::model::protection::{ObjectLock, WritePolicy};
use crate::model::receipt::Receipt;
use crate::model::table::TableSpec;
use crate::store::{self, ObjectMeta, ObjectStore, PutMode, PutOptions, StoreError};

#[derive(Debug, thiserror::Error)]
pub(crate) enum PublishError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The read-back found something: the first finding, and how many there were.
    #[error("read-back of {key} does not match: {first}{more}", key = first.key.as_deref().unwrap_or("the batch"), more = if *count > 1 { format!(" (and {} more findings)", count - 1) } else { String::new() })]
    Mismatch { first: Box<Finding>, count: usize },
    #[error(transparent)]
    Failpoint(#[from] Tripped),
    /// The app's lock was found lost right before a put: another archiver may hold it now and
    /// write the same keys.
    #[error(transparent)]
    LockLost(#[from] LockLost),
}

/// What publishing did: the batch's receipt as its objects were written and read back.
#[derive(Debug, Clone)]
pub(crate) struct Published {
    /// Its identity, content and objects as written; the objects' CRC-64/NVME (AWS S3's own
    /// full-object checksum), protection, class and identities as the store reported them on
    /// read-back. Recorded once its members are known ([`Receipt::recorded`]).
    pub receipt: Receipt,
    /// Keys where a leftover with other content was replaced.
    pub replaced: Vec<Key>,
    /// Keys where an existing data object with identical NDJSON was kept.
    pub adopted: Vec<Key>,
}

/// The batch's three objects as put: what they are, and the keys where a leftover was replaced
/// or an identical data object adopted.
struct Placed {
    expected: Expected,
    replaced: Vec<Key>,
    adopted: Vec<Key>,
}

/// How an object came to be at its key.
enum Placement {
    Written,
    Accepted,
    Adopted(ObjectDigest),
    Replaced,
}

pub(crate) struct Publisher<'a> {
    pub store: &'a dyn ObjectStore,
    pub spec: &'static TableSpec,
    pub app_code: &'a str,
    pub policy: &'a WritePolicy,
    pub failpoints: &'a FailPoints,
    /// The app's lock, confirmed right before each put: a process that lost it (to another
    /// archiver, which then writes the same keys) writes nothing more. `None`: a probe.
    pub lock: Option<&'a AppLock>,
    /// The batch's columns, which its manifest names.
    pub columns: Option<&'a SharedColumns>,
}

impl Publisher<'_> {
    /// What the batch's objects will be: its batch_id, keys and documents (all a dry run
    /// reports, and what [`Publisher::publish`] writes).
    pub(crate) fn plan(&self, batch: &EncodedBatch) -> Expected {
        let prefix = self.store.location().prefix();
        Expected::of_batch(
            prefix,
            self.spec,
            self.app_code,
            batch,
            &batch.gzip_digest,
            self.columns,
        )
    }

    /// Writes the batch's objects as `planned` (from [`Publisher::plan`]) and reads them back;
    /// `now_ms` is when the puts start, from which their retention is counted.
    pub(crate) async fn publish(
        &self,
        batch: &EncodedBatch,
        planned: Expected,
        now_ms: i64,
    ) -> Result<Published, PublishError> {
        let Placed {
            expected,
            replaced,
            adopted,
        } = self.put_objects(batch, planned, now_ms).await?;
        let verified = self.read_back(batch, &expected).await?;
        let protection = verified.protection();
        if let Some(asked) = self.policy.storage_class.as_deref() {
            let kept = protection.storage_class.as_deref().unwrap_or("STANDARD");
            if kept != asked {
                // Cost, not proof: recorded as the store reports it, and said.
                tracing::warn!(
                    key = %expected.receipt.keys.data,
                    asked,
                    kept,
                    "the store keeps the data object in another storage class than \
                     --s3-storage-class asks for (`outbox-archiver doctor` checks it)"
                );
            }
        }
        let mut receipt = expected.receipt;
        receipt.objects.data_crc64nvme = Some(verified.data_crc64nvme.unwrap_or_default());
        receipt.objects.stored = verified.stored;
        receipt.protection = protection;
        Ok(Published {
            receipt,
            replaced,
            adopted,
        })
    }

    /// Puts the data object, the manifest and `_SUCCESS`, in that order (a fail point after
    /// each), with the policy's retention counted from `now_ms`; returns what the objects now
    /// are — with an adopted data object's own digest in the manifest — and which keys held
    /// leftovers.
    async fn put_objects(
        &self,
        batch: &EncodedBatch,
        planned: Expected,
        now_ms: i64,
    ) -> Result<Placed, PublishError> {
        let prefix = self.store.location().prefix().clone();
        let lock = self.policy.lock_at(now_ms);
        let documents = PutOptions {
            storage_class: None,
            lock,
            legal_hold: self.policy.legal_hold,
        };
        let data_options = PutOptions {
            storage_class: self.policy.storage_class.clone(),
            ..documents.clone()
        };
        let mut replaced = Vec::new();
        let mut adopted = Vec::new();
        let batch_id = planned.receipt.batch_id.clone();
        self.still_locked(&batch_id).await?;
        let data = match self
            .place_data(&planned.receipt.keys.data, batch, &data_options)
            .await?
        {
            Placement::Adopted(digest) => {
                adopted.push(planned.receipt.keys.data.clone());
                digest
            }
            Placement::Replaced => {
                replaced.push(planned.receipt.keys.data.clone());
                batch.gzip_digest.clone()
            }
            Placement::Written | Placement::Accepted => batch.gzip_digest.clone(),
        };
        self.failpoints.pass("after-data-put")?;
        // An adopted data object's own digest goes into the manifest.
        let mut expected = if data == batch.gzip_digest {
            planned
        } else {
            Expected::of_batch(
                &prefix,
                self.spec,
                self.app_code,
                batch,
                &data,
                self.columns,
            )
        };
        expected.guard.lock = lock;
        expected.guard.encryption = self.store.encryption().cloned().map(Encryption::Asked);
        let keys = &expected.receipt.keys;
        self.still_locked(&batch_id).await?;
        if let Placement::Replaced = self
            .place_exact(&keys.manifest, &expected.manifest.bytes, &documents)
            .await?
        {
            replaced.push(keys.manifest.clone());
        }
        self.failpoints.pass("after-manifest-put")?;
        self.still_locked(&batch_id).await?;
        if let Placement::Replaced = self
            .place_exact(&keys.success, &expected.success.bytes, &documents)
            .await?
        {
            replaced.push(keys.success.clone());
        }
        self.failpoints.pass("after-success-put")?;
        Ok(Placed {
            expected,
            replaced,
            adopted,
        })
    }

    /// Refuses to put anything more once the app's lock is gone: on a store without conditional
    /// writes (COS), another archiver that took the lock could otherwise find a key empty and
    /// write it, then have its recorded object overwritten by this one's put (with other bytes,
    /// under other settings). One query on the lock's connection per object; what no fence can
    /// close is a put already in flight when the lock goes.
    async fn still_locked(&self, batch_id: &str) -> Result<(), PublishError> {
        match self.lock {
            Some(lock) if !lock.keep_alive().await => {
                Err(lock.lost(batch_id, Doing::Publishing).into())
            }
            _ => Ok(()),
        }
    }

    /// Reads the batch's objects back in full (a cold data object: its bytes as uploaded and
    /// the store's checksum); any finding is an error.
    async fn read_back(
        &self,
        batch: &EncodedBatch,
        expected: &Expected,
    ) -> Result<Verified, PublishError> {
        let verifier = Verifier {
            store: self.store,
            spec: self.spec,
            depth: Depth::Read,
            cold: ColdObjects::Uploaded(&batch.gzip),
        };
        let verified = verifier.verify(expected).await?;
        if let Some(first) = verified.findings.first() {
            return Err(PublishError::Mismatch {
                first: Box::new(first.clone()),
                count: verified.findings.len(),
            });
        }
        Ok(verified)
    }

    /// Writes `body` at `key` unless something is there already; true when written.
    async fn create(
        &self,
        key: &Key,
        body: bytes::Bytes,
        options: &PutOptions,
    ) -> Result<bool, PublishError> {
        match self
            .store
            .put_with(key, body, PutMode::Create, options)
            .await
        {
            Ok(()) => Ok(true),
            Err(StoreError::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    async fn place_data(
        &self,
        key: &Key,
        batch: &EncodedBatch,
        options: &PutOptions,
    ) -> Result<Placement, PublishError> {
        if self.create(key, batch.gzip.clone(), options).await? {
            return Ok(Placement::Written);
        }
        let found = match self.store.head(key).await? {
            Some(meta) if self.rewrite_needed(&meta, options) => None,
            Some(meta) if !meta.readable() => {
                // A leftover in a cold class cannot be read: it is the batch's bytes if the
                // store's own checksum of it says so.
                let ours = &batch.gzip_digest;
                let same = meta.size == ours.size
                    && (meta.crc64nvme == Some(digest::crc64nvme(&batch.gzip))
                        || meta.sha256.as_deref() == Some(ours.sha256.as_str()));
                same.then_some((meta, ours.clone()))
            }
            Some(meta) => match read_data(self.store, self.spec, self.app_code, key, None).await? {
                Some(DataRead {
                    digest,
                    content: Ok((content, members)),
                    ..
                }) if content == batch.content && members == batch.members => Some((meta, digest)),
                _ => None,
            },
            None => None,
        };
        if let Some((meta, digest)) = found {
            if self.brought_up_to_policy(key, &meta, options).await {
                return Ok(if digest == batch.gzip_digest {
                    Placement::Accepted
                } else {
                    Placement::Adopted(digest)
                });
            }
        }
        tracing::warn!(
            key = %key,
            "replacing a leftover data object that no receipt references and whose content, \
             storage class or encryption differs"
        );
        self.store
            .put_with(key, batch.gzip.clone(), PutMode::Overwrite, options)
            .await?;
        Ok(Placement::Replaced)
    }

    async fn place_exact(
        &self,
        key: &Key,
        bytes: &[u8],
        options: &PutOptions,
    ) -> Result<Placement, PublishError> {
        if self.create(key, bytes.to_vec().into(), options).await? {
            return Ok(Placement::Written);
        }
        if let Some(meta) = self.store.head(key).await? {
            if !self.rewrite_needed(&meta, options)
                && store::get_all(self.store, key).await?.as_deref() == Some(bytes)
                && self.brought_up_to_policy(key, &meta, options).await
            {
                return Ok(Placement::Accepted);
            }
        }
        tracing::warn!(
            key = %key,
            "replacing a leftover object that no receipt references and whose bytes, storage \
             class or encryption differ"
        );
        self.store
            .put_with(key, bytes.to_vec().into(), PutMode::Overwrite, options)
            .await?;
        Ok(Placement::Replaced)
    }

    /// Whether an object already at a key is stored otherwise than this run writes (another
    /// storage class, other encryption): then it is written again, whatever its bytes.
    fn rewrite_needed(&self, meta: &ObjectMeta, options: &PutOptions) -> bool {
        let class = |c: Option<&str>| c.filter(|c| *c != "STANDARD").map(str::to_string);
        let other_class =
            class(meta.storage_class.as_deref()) != class(options.storage_class.as_deref());
        let other_encryption = self.store.encryption().is_some_and(|sse| {
            !sse.reported_matches(
                meta.sse_algorithm.as_deref(),
                meta.sse_kms_key_id.as_deref(),
            )
        });
        other_class || other_encryption
    }

    /// Extends an existing object's retention to this batch's, and sets its legal hold, where
    /// they fall short: to the later date and the stricter mode of the two, so nothing is ever
    /// shortened or loosened (S3 allows extending in either mode). False when the store refuses
    /// (a mode it will not change, a role without the permission): the caller writes the object
    /// again, as a new version that carries the batch's retention from its put, so a rerun
    /// always converges.
    async fn brought_up_to_policy(
        &self,
        key: &Key,
        meta: &ObjectMeta,
        options: &PutOptions,
    ) -> bool {
        let lock = options
            .lock
            .filter(|wanted| !meta.lock.is_some_and(|l| l.covers(wanted)))
            .map(|wanted| match meta.lock {
                Some(found) => ObjectLock {
                    mode: found.mode.max(wanted.mode),
                    retain_until_ms: found.retain_until_ms.max(wanted.retain_until_ms),
                },
                None => wanted,
            });
        let hold = options.legal_hold && !meta.legal_hold;
        if lock.is_none() && !hold {
            return true;
        }
        match self.store.extend_lock(key, lock.as_ref(), hold).await {
            Ok(()) => {
                tracing::info!(
                    key = %key,
                    "an object left by an earlier attempt got this batch's retention / legal hold"
                );
                true
            }
            Err(e) => {
                tracing::warn!(
                    key = %key,
                    error = %e,
                    "cannot extend the retention of an object left by an earlier attempt; \
                     writing it again as a new version"
                );
                false
            }
        }
    }
}

/// SPEC §5.11: whether the store refuses a create-only put at an existing key is found out, not
/// assumed, before anything is written; `None` for stores that create atomically by themselves.
pub(crate) async fn probe_write_once(
    ctx: &super::RunContext,
) -> Result<Option<crate::store::ConditionalPut>, StoreError> {
    use crate::store::ConditionalPut;
    let probe = crate::model::format::conditional_put_probe_key(ctx.store.location().prefix());
    match ctx.store.probe_conditional_put(&probe).await {
        Ok(ConditionalPut::Native) => Ok(None),
        Ok(found) => Ok(Some(found)),
        Err(e) => Err(e),
    }
}
