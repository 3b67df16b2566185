//! The S3 implementation of [`ObjectStore`], for AWS S3, MinIO, Tencent COS and other
//! S3-compatible stores (SPEC §5.7).
//!
//! The SDK's default request checksums (CRC32 in an aws-chunked trailer) break many compatible
//! stores, so they are off: the upload checksum is a setting ([`UploadChecksum`]), sent as a
//! precomputed header that the store checks, and every object is read back and verified by the
//! caller regardless. Where a store reports its own whole-object checksum on HEAD
//! (`x-amz-checksum-crc64nvme`, COS `x-cos-hash-crc64ecma`) it is returned for comparison.
//!
//! This file is the [`ObjectStore`] implementation itself; around it, `settings` (the settings
//! and how a client is built from them), `error` (an SDK error in the operator's words), `read`
//! (the resumable GET), `intercept` (the SDK interceptors) and `inspect` (what `doctor` asks a
//! bucket about itself).

mod error;
mod inspect;
mod intercept;
mod read;
mod settings;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream as SdkByteStream;
use aws_sdk_s3::types::ChecksumMode;
use base64::Engine as _;
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};

pub(crate) use inspect::{LockConfiguration, Versioning};
use intercept::CaptureCosCrc;
pub use settings::{ConditionalPutSetting, S3Settings, UploadChecksum};
pub(crate) use settings::{DEFAULT_MAX_ATTEMPTS, NO_REGION};

use super::{
    ByteStream, ConditionalPut, Counters, Key, KeyPages, Location, ObjectMeta, ObjectStore,
    PutMode, PutOptions, StoreError, StoreStats,
};
use crate::model::digest;
use crate::model::protection::{LockMode, ObjectLock, RestoreStatus, Sse, Thaw, ThawState};

#[derive(Debug)]
pub(crate) struct S3Store {
    fetch: Fetch,
    /// The SDK's configuration, for the KMS client `doctor` asks about the key.
    sdk: aws_config::SdkConfig,
    kms_endpoint: Option<String>,
    location: Location,
    upload_checksum: UploadChecksum,
    conditional_put: ConditionalPutSetting,
    /// What the probe found, once it ran.
    probed: Mutex<Option<ConditionalPut>>,
    sse: Option<Sse>,
    /// The region requests are signed for, and which setting gave it (for `doctor`).
    region: (String, &'static str),
}

/// What a GET needs, cheap to clone into a body stream that outlives the call.
#[derive(Debug, Clone)]
struct Fetch {
    client: aws_sdk_s3::Client,
    bucket: String,
    endpoint: String,
    counters: Arc<Counters>,
    max_attempts: u32,
    read_timeout: Duration,
}

impl S3Store {
    /// The region requests are signed for, and where it came from ([`NO_REGION`]: nowhere).
    pub(crate) fn region(&self) -> (&str, &'static str) {
        (&self.region.0, self.region.1)
    }

    /// Whether requests go to a custom endpoint (MinIO, COS, …) rather than AWS S3.
    pub(crate) fn custom_endpoint(&self) -> bool {
        self.fetch.endpoint != "AWS S3"
    }

    fn client(&self) -> &aws_sdk_s3::Client {
        &self.fetch.client
    }

    fn bucket(&self) -> &str {
        &self.fetch.bucket
    }
}

fn sdk_lock_mode(mode: LockMode) -> aws_sdk_s3::types::ObjectLockMode {
    aws_sdk_s3::types::ObjectLockMode::from(mode.as_str())
}

fn sdk_retention_mode(mode: LockMode) -> aws_sdk_s3::types::ObjectLockRetentionMode {
    aws_sdk_s3::types::ObjectLockRetentionMode::from(mode.as_str())
}

fn sdk_sse(
    algorithm: crate::model::protection::SseAlgorithm,
) -> aws_sdk_s3::types::ServerSideEncryption {
    aws_sdk_s3::types::ServerSideEncryption::from(algorithm.as_str())
}

/// A put asking for `sse`.
fn with_sse(
    request: aws_sdk_s3::operation::put_object::builders::PutObjectFluentBuilder,
    sse: &Sse,
) -> aws_sdk_s3::operation::put_object::builders::PutObjectFluentBuilder {
    request
        .server_side_encryption(sdk_sse(sse.algorithm))
        .set_ssekms_key_id(sse.kms_key_id.clone())
        .set_bucket_key_enabled(sse.bucket_key)
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `x-amz-checksum-crc64nvme` as the number it states: the base64 of 8 big-endian bytes
/// (`None`: anything else).
fn crc64nvme_header(text: &str) -> Option<u64> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    <[u8; 8]>::try_from(bytes.as_slice())
        .ok()
        .map(u64::from_be_bytes)
}

/// `x-amz-checksum-sha256` as lowercase hex: the base64 of 32 bytes (`None`: anything else).
fn sha256_header(text: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    (bytes.len() == 32).then(|| hex::encode(bytes))
}

fn content_type(key: &str) -> &'static str {
    if key.ends_with(".gz") {
        "application/gzip"
    } else if key.ends_with(".json") {
        "application/json"
    } else {
        "application/octet-stream"
    }
}

#[async_trait]
impl ObjectStore for S3Store {
    fn location(&self) -> &Location {
        &self.location
    }

    /// A one-key listing under the prefix: it proves the bucket exists and these credentials may
    /// read there, and needs no more than a policy that allows `s3:ListBucket` on the prefix only
    /// (HEAD bucket would need it on the whole bucket).
    async fn confirm_access(&self) -> Result<(), StoreError> {
        let prefix = self.location.prefix();
        let listing = self
            .client()
            .list_objects_v2()
            .bucket(self.bucket())
            .prefix(prefix.as_str())
            .max_keys(1)
            .send()
            .await;
        match listing {
            Ok(_) => Ok(()),
            Err(e) => Err(match self.error("list", self.bucket(), e) {
                StoreError::Other { detail, .. } if detail.starts_with("HTTP 404") => {
                    StoreError::NoSuchBucket {
                        bucket: self.bucket().to_string(),
                    }
                }
                other => other,
            }),
        }
    }

    async fn head(&self, key: &Key) -> Result<Option<ObjectMeta>, StoreError> {
        let key = key.as_str();
        let cos = CaptureCosCrc::default();
        let result = self
            .client()
            .head_object()
            .bucket(self.bucket())
            .key(key)
            .checksum_mode(ChecksumMode::Enabled)
            .customize()
            .interceptor(cos.clone())
            .send()
            .await;
        let out = match result {
            Ok(out) => out,
            Err(e) if e.raw_response().map(|r| r.status().as_u16()) == Some(404) => {
                // HEAD has no body: a missing bucket and a missing key look alike; tell them apart.
                return match self.confirm_access().await {
                    Ok(()) => Ok(None),
                    Err(e) => Err(e),
                };
            }
            Err(e) => return Err(self.error("head", key, e)),
        };
        let crc64nvme = out.checksum_crc64_nvme().and_then(crc64nvme_header);
        let crc64ecma = cos.crc64ecma();
        let sha256 = out.checksum_sha256().and_then(sha256_header);
        let lock = match (out.object_lock_mode(), out.object_lock_retain_until_date()) {
            (Some(mode), Some(until)) => LockMode::parse(mode.as_str()).map(|mode| ObjectLock {
                mode,
                retain_until_ms: until.to_millis().unwrap_or(0),
            }),
            _ => None,
        };
        Ok(Some(ObjectMeta {
            size: out.content_length().unwrap_or(0).max(0) as u64,
            crc64nvme,
            crc64ecma,
            sha256,
            lock,
            legal_hold: out
                .object_lock_legal_hold_status()
                .is_some_and(|s| s.as_str() == "ON"),
            storage_class: out
                .storage_class()
                .map(|c| c.as_str().to_string())
                .filter(|c| c != "STANDARD"),
            restore: RestoreStatus::from_header(out.restore()),
            archive_status: out.archive_status().map(|a| a.as_str().to_string()),
            sse_algorithm: out.server_side_encryption().map(|a| a.as_str().to_string()),
            sse_kms_key_id: out.ssekms_key_id().map(str::to_string),
            version_id: out.version_id().map(str::to_string).filter(|v| v != "null"),
            etag: out.e_tag().map(str::to_string),
        }))
    }

    async fn get(&self, key: &Key) -> Result<Option<ByteStream>, StoreError> {
        let key = key.as_str();
        self.fetch.read(key).await
    }

    async fn put_with(
        &self,
        key: &Key,
        body: Bytes,
        mode: PutMode,
        options: &PutOptions,
    ) -> Result<(), StoreError> {
        let (object, key) = (key, key.as_str());
        use aws_sdk_s3::types::{ChecksumAlgorithm, ObjectLockLegalHoldStatus, StorageClass};
        let mut request = self
            .client()
            .put_object()
            .bucket(self.bucket())
            .key(key)
            .content_type(content_type(key))
            .content_length(body.len() as i64);
        // A precomputed checksum goes with `x-amz-sdk-checksum-algorithm` naming it: Object Lock
        // buckets accept a put only with that header or Content-MD5. With the value already set
        // the SDK computes nothing itself and sends no aws-chunked trailer.
        request = match self.upload_checksum {
            UploadChecksum::None => request,
            UploadChecksum::Md5 => {
                use md5::Digest as _;
                request.content_md5(b64(&md5::Md5::digest(&body)))
            }
            UploadChecksum::Sha256 => {
                use sha2::Digest as _;
                request
                    .checksum_algorithm(ChecksumAlgorithm::Sha256)
                    .checksum_sha256(b64(&sha2::Sha256::digest(&body)))
            }
            UploadChecksum::Crc64nvme => request
                .checksum_algorithm(ChecksumAlgorithm::Crc64Nvme)
                .checksum_crc64_nvme(b64(&digest::crc64nvme(&body).to_be_bytes())),
        };
        if let Some(sse) = &self.sse {
            request = with_sse(request, sse);
        }
        if let Some(class) = &options.storage_class {
            request = request.storage_class(StorageClass::from(class.as_str()));
        }
        if let Some(lock) = &options.lock {
            request = request
                .object_lock_mode(sdk_lock_mode(lock.mode))
                .object_lock_retain_until_date(aws_smithy_types::DateTime::from_millis(
                    lock.retain_until_ms,
                ));
        }
        if options.legal_hold {
            request = request.object_lock_legal_hold_status(ObjectLockLegalHoldStatus::On);
        }
        if mode == PutMode::Create {
            if self.sends_if_none_match() {
                request = request.if_none_match("*");
            } else if self.head(object).await?.is_some() {
                return Err(StoreError::AlreadyExists {
                    key: key.to_string(),
                });
            }
        }
        match request.body(SdkByteStream::from(body)).send().await {
            Ok(_) => Ok(()),
            Err(e) => Err(self.error("put", key, e)),
        }
    }

    fn list_pages_starting<'a>(&'a self, prefix: &'a str) -> KeyPages<'a> {
        let pages = self
            .client()
            .list_objects_v2()
            .bucket(self.bucket())
            .prefix(prefix)
            .into_paginator()
            .send();
        futures_util::stream::unfold(pages, move |mut pages| async move {
            let page = pages.next().await?;
            let keys = page
                .map(|page| {
                    page.contents()
                        .iter()
                        .filter_map(|o| o.key().map(Key::stored))
                        .collect::<Vec<_>>()
                })
                .map_err(|e| self.error("list", prefix, e));
            Some((keys, pages))
        })
        .boxed()
    }

    async fn list_starting(&self, prefix: &str) -> Result<Vec<Key>, StoreError> {
        let mut keys: Vec<Key> = self
            .list_pages_starting(prefix)
            .try_collect::<Vec<_>>()
            .await?
            .concat();
        keys.sort();
        Ok(keys)
    }

    async fn delete(&self, key: &Key) -> Result<(), StoreError> {
        let key = key.as_str();
        self.client()
            .delete_object()
            .bucket(self.bucket())
            .key(key)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| self.error("delete", key, e))
    }

    fn stats(&self) -> Option<StoreStats> {
        Some(self.fetch.counters.snapshot())
    }

    async fn extend_lock(
        &self,
        key: &Key,
        lock: Option<&ObjectLock>,
        legal_hold: bool,
    ) -> Result<(), StoreError> {
        let key = key.as_str();
        use aws_sdk_s3::types::{
            ObjectLockLegalHold, ObjectLockLegalHoldStatus, ObjectLockRetention,
        };
        if let Some(lock) = lock {
            let retention = ObjectLockRetention::builder()
                .mode(sdk_retention_mode(lock.mode))
                .retain_until_date(aws_smithy_types::DateTime::from_millis(
                    lock.retain_until_ms,
                ))
                .build();
            self.client()
                .put_object_retention()
                .bucket(self.bucket())
                .key(key)
                .retention(retention)
                .send()
                .await
                .map_err(|e| self.error("put retention", key, e))?;
        }
        if legal_hold {
            let hold = ObjectLockLegalHold::builder()
                .status(ObjectLockLegalHoldStatus::On)
                .build();
            self.client()
                .put_object_legal_hold()
                .bucket(self.bucket())
                .key(key)
                .legal_hold(hold)
                .send()
                .await
                .map_err(|e| self.error("put legal hold", key, e))?;
        }
        Ok(())
    }

    async fn request_thaw(&self, key: &Key, thaw: &Thaw) -> Result<ThawState, StoreError> {
        let key = key.as_str();
        use aws_sdk_s3::types::{GlacierJobParameters, RestoreRequest, Tier};
        let job = GlacierJobParameters::builder()
            .tier(Tier::from(thaw.tier.as_str()))
            .build()
            .map_err(|e| StoreError::Other {
                op: "restore",
                key: key.to_string(),
                detail: e.to_string(),
            })?;
        let request = RestoreRequest::builder()
            .days(thaw.days as i32)
            .glacier_job_parameters(job)
            .build();
        match self
            .client()
            .restore_object()
            .bucket(self.bucket())
            .key(key)
            .restore_request(request)
            .send()
            .await
        {
            Ok(_) => Ok(ThawState::Requested),
            Err(e) if e.code() == Some("RestoreAlreadyInProgress") => Ok(ThawState::InProgress),
            Err(e) => Err(self.error("restore", key, e)),
        }
    }

    fn encryption(&self) -> Option<&Sse> {
        self.sse.as_ref()
    }

    /// Two create-only puts of one small object at `probe_key`: a store that honours
    /// `If-None-Match: *` refuses the second (or the first, if an earlier run's probe is still
    /// there because the bucket denies deletes). One that accepts both overwrites blindly, and
    /// the rest of the run uses HEAD-then-PUT, which the app's lock makes correct.
    async fn probe_conditional_put(&self, probe: &Key) -> Result<ConditionalPut, StoreError> {
        let probe_key = probe.as_str();
        match self.conditional_put {
            ConditionalPutSetting::Off => return Ok(ConditionalPut::Off),
            ConditionalPutSetting::On => return Ok(ConditionalPut::Trusted),
            ConditionalPutSetting::Auto => {}
        }
        if let Some(found) = *self.probed.lock().expect("not poisoned") {
            return Ok(found);
        }
        let body = Bytes::from_static(
            b"outbox-archiver: probe of If-None-Match (create-only puts); safe to delete\n",
        );
        let mut verdict = ConditionalPut::Ignored;
        for _ in 0..2 {
            let put = self
                .client()
                .put_object()
                .bucket(self.bucket())
                .key(probe_key)
                .content_type("text/plain")
                .content_md5(b64(&<md5::Md5 as md5::Digest>::digest(&body)))
                .set_server_side_encryption(self.sse.as_ref().map(|s| sdk_sse(s.algorithm)))
                .set_ssekms_key_id(self.sse.as_ref().and_then(|s| s.kms_key_id.clone()))
                .set_bucket_key_enabled(self.sse.as_ref().and_then(|s| s.bucket_key))
                .if_none_match("*")
                .body(SdkByteStream::from(body.clone()))
                .send()
                .await;
            match put.map_err(|e| self.error("put", probe_key, e)) {
                Ok(_) => {}
                Err(StoreError::AlreadyExists { .. }) => {
                    verdict = ConditionalPut::Honoured;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        match self.delete(probe).await {
            Ok(()) => {}
            // A bucket policy that denies deletes (as deploy/bucket-policy.json does) keeps this
            // one small object; the next run's probe is refused at once, which answers too.
            Err(e) => tracing::debug!(key = probe_key, error = %e, "the probe object stays"),
        }
        if verdict == ConditionalPut::Ignored {
            tracing::warn!(
                key = probe_key,
                "the store accepted a create-only put (If-None-Match: *) over an existing object: \
                 it ignores the header, so this run checks with HEAD before every create-only put \
                 (set --s3-conditional-put false to skip the probe)"
            );
        } else {
            tracing::debug!(key = probe_key, "the store honours If-None-Match: *");
        }
        *self.probed.lock().expect("not poisoned") = Some(verdict);
        Ok(verdict)
    }
}

impl S3Store {
    /// Whether create-only puts carry `If-None-Match: *`: unless turned off, or found ignored.
    fn sends_if_none_match(&self) -> bool {
        match self.conditional_put {
            ConditionalPutSetting::Off => false,
            ConditionalPutSetting::On => true,
            ConditionalPutSetting::Auto => !matches!(
                *self.probed.lock().expect("not poisoned"),
                Some(ConditionalPut::Ignored)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heads_checksum_headers_are_read_as_the_store_states_them() {
        // CRC-64/NVME of "123456789" is 0xae8b14860a799888 (the catalogue's check value); the
        // header carries its 8 bytes big-endian, in base64, as a put sends them.
        assert_eq!(
            crc64nvme_header("rosUhgp5mIg="),
            Some(0xae8b_1486_0a79_9888)
        );
        let crc = digest::crc64nvme(b"123456789");
        assert_eq!(crc64nvme_header(&b64(&crc.to_be_bytes())), Some(crc));
        assert_eq!(crc64nvme_header("rosUhgp5"), None, "6 bytes");
        assert_eq!(crc64nvme_header("not base64!"), None);
        assert_eq!(
            sha256_header("ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=").as_deref(),
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            "SHA-256 of \"abc\""
        );
        assert_eq!(sha256_header("rosUhgp5mIg="), None, "8 bytes");
        assert_eq!(sha256_header(""), None);
    }

    #[test]
    fn objects_are_put_with_the_content_type_of_their_key() {
        assert_eq!(
            content_type("p/app/batch/data.ndjson.gz"),
            "application/gzip"
        );
        assert_eq!(
            content_type("p/app/batch/manifest.json"),
            "application/json"
        );
        assert_eq!(
            content_type("p/app/batch/_SUCCESS"),
            "application/octet-stream"
        );
    }
}
