//! One narrow object-store interface, with no SDK types in it: put (create-only or overwrite),
//! get (streamed), head, list, delete — by full key within a bucket. [`s3::S3Store`] speaks S3
//! (AWS, MinIO, Tencent COS, anything S3-compatible); [`local::LocalStore`] keeps objects as files
//! under a directory, for demos and air-gapped backfills. What a put can ask for beyond its bytes
//! (Object Lock retention, storage class, encryption) is [`crate::model::protection`]'s; a HEAD reports
//! it in [`ObjectMeta`].

pub(crate) mod local;
pub(crate) mod s3;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;

pub(crate) use crate::model::protection::{ObjectLock, RestoreStatus, Sse, Thaw};
pub use crate::model::protection::{PutOptions, ThawState};
pub use local::LocalStore;
pub use s3::{ConditionalPutSetting, S3Settings, UploadChecksum};
pub(crate) use s3::{S3Store, DEFAULT_MAX_ATTEMPTS};

pub(crate) use crate::model::key::{Key, Prefix};

/// An object's body, chunk by chunk.
pub(crate) type ByteStream = BoxStream<'static, Result<Bytes, StoreError>>;

/// Pages of keys, in lexicographic order.
pub(crate) type KeyPages<'a> = BoxStream<'a, Result<Vec<Key>, StoreError>>;

/// What a HEAD tells about an object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectMeta {
    pub size: u64,
    /// CRC-64/NVME of the whole object, where the store reports one (`x-amz-checksum-crc64nvme`).
    pub crc64nvme: Option<u64>,
    /// CRC-64/XZ of the whole object, where the store reports one (COS `x-cos-hash-crc64ecma`).
    pub crc64ecma: Option<u64>,
    /// SHA-256 (lowercase hex) of the whole object, where the store reports one
    /// (`x-amz-checksum-sha256`, for objects uploaded with it).
    pub sha256: Option<String>,
    /// The Object Lock retention on this version, where the store reports one.
    pub lock: Option<ObjectLock>,
    pub legal_hold: bool,
    /// The storage class (`None`: the store's default, STANDARD).
    pub storage_class: Option<String>,
    /// Where a restore of a cold object stands (`x-amz-restore`).
    pub restore: RestoreStatus,
    /// INTELLIGENT_TIERING's archive tiers (`x-amz-archive-status`), which cannot be read at once.
    pub archive_status: Option<String>,
    /// Server-side encryption as the store reports it (`AES256`, `aws:kms`) and the KMS key.
    pub sse_algorithm: Option<String>,
    pub sse_kms_key_id: Option<String>,
    /// The version HEAD describes, in a versioned bucket.
    pub version_id: Option<String>,
    /// The object's ETag as the store reports it (quotes included), where it reports one.
    pub etag: Option<String>,
}

pub(crate) use crate::model::format::Identity;

impl ObjectMeta {
    /// What identifies the bytes HEAD describes.
    pub fn identity(&self) -> Identity {
        Identity {
            etag: self.etag.clone(),
            version_id: self.version_id.clone(),
        }
    }

    /// Whether HEAD says something of the stored bytes beyond their size: a checksum of the
    /// store's own, or an ETag to hold to the one recorded (`recorded`).
    pub(crate) fn vouches_for_bytes(&self, recorded: &Identity) -> bool {
        self.crc64nvme.is_some()
            || self.crc64ecma.is_some()
            || self.sha256.is_some()
            || (recorded.etag.is_some() && self.etag.is_some())
            || (recorded.version_id.is_some() && self.version_id.is_some())
    }
}

impl ObjectMeta {
    /// Whether a GET of the object can succeed now: not in a cold class (GLACIER, DEEP_ARCHIVE,
    /// an INTELLIGENT_TIERING archive tier) unless a restored copy is there.
    pub(crate) fn readable(&self) -> bool {
        let cold = self
            .storage_class
            .as_deref()
            .is_some_and(crate::model::protection::is_cold_class)
            || self.archive_status.is_some();
        !cold || self.restore == RestoreStatus::Restored
    }
}

/// What the store's requests went through: attempts made (by operation, so a run's cost in
/// requests shows), attempts that failed in a way that is retried (a 5xx or 429, a timeout, a
/// connection error), and body reads resumed after an interruption. Counted from when the store
/// was opened; [`StoreStats::since`] gives a run's share.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StoreStats {
    pub attempts: u64,
    pub server_errors: u64,
    pub timeouts: u64,
    pub connection_errors: u64,
    pub resumed_reads: u64,
    /// Attempts by operation.
    pub by_operation: Operations,
}

/// Request attempts by S3 operation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Operations {
    pub head: u64,
    pub get: u64,
    pub put: u64,
    pub list: u64,
    pub delete: u64,
}

impl StoreStats {
    /// What happened after `earlier` was taken.
    pub fn since(&self, earlier: &StoreStats) -> StoreStats {
        let (now, then) = (&self.by_operation, &earlier.by_operation);
        StoreStats {
            attempts: self.attempts - earlier.attempts,
            server_errors: self.server_errors - earlier.server_errors,
            timeouts: self.timeouts - earlier.timeouts,
            connection_errors: self.connection_errors - earlier.connection_errors,
            resumed_reads: self.resumed_reads - earlier.resumed_reads,
            by_operation: Operations {
                head: now.head - then.head,
                get: now.get - then.get,
                put: now.put - then.put,
                list: now.list - then.list,
                delete: now.delete - then.delete,
            },
        }
    }

    /// Failed attempts of any kind, and interrupted reads.
    pub fn faults(&self) -> u64 {
        self.server_errors + self.timeouts + self.connection_errors + self.resumed_reads
    }
}

/// The live counters behind [`StoreStats`], shared by a store and its interceptors and streams.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub attempts: AtomicU64,
    pub server_errors: AtomicU64,
    pub timeouts: AtomicU64,
    pub connection_errors: AtomicU64,
    pub resumed_reads: AtomicU64,
    pub heads: AtomicU64,
    pub gets: AtomicU64,
    pub puts: AtomicU64,
    pub lists: AtomicU64,
    pub deletes: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The per-operation counter of an S3 operation (`HeadObject`, `GetObject`, …).
    pub(crate) fn operation(&self, name: &str) -> Option<&AtomicU64> {
        match name {
            "HeadObject" => Some(&self.heads),
            "GetObject" => Some(&self.gets),
            "PutObject" => Some(&self.puts),
            "ListObjectsV2" => Some(&self.lists),
            "DeleteObject" => Some(&self.deletes),
            _ => None,
        }
    }

    pub(crate) fn snapshot(&self) -> StoreStats {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StoreStats {
            attempts: load(&self.attempts),
            server_errors: load(&self.server_errors),
            timeouts: load(&self.timeouts),
            connection_errors: load(&self.connection_errors),
            resumed_reads: load(&self.resumed_reads),
            by_operation: Operations {
                head: load(&self.heads),
                get: load(&self.gets),
                put: load(&self.puts),
                list: load(&self.lists),
                delete: load(&self.deletes),
            },
        }
    }
}

/// Whether the store refuses a create-only put at a key that exists (SPEC §5.11), as a run found
/// out: `If-None-Match: *` probed and honoured, probed and ignored (the run falls back to
/// HEAD-then-PUT), or turned off by `--s3-conditional-put false`. Stores that create atomically
/// by themselves (a folder: a hard link) are `Native`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConditionalPut {
    Honoured,
    /// Honoured by `--s3-conditional-put true`, without a probe.
    Trusted,
    Ignored,
    Off,
    Native,
}

/// Whether a put may replace an existing object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutMode {
    /// Fails with [`StoreError::AlreadyExists`] if the key exists: atomically where the store
    /// can (`If-None-Match: *`, a hard link), by HEAD-then-PUT where it cannot (COS) — correct
    /// there because the app's advisory lock excludes every other writer of its keys.
    Create,
    /// Replaces whatever is there.
    Overwrite,
}

/// A failure to talk to the store, in the operator's words.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("bucket {bucket:?} does not exist or is not visible to these credentials (check --store / OUTBOX_ARCHIVER_STORE)")]
    NoSuchBucket { bucket: String },
    #[error("the object store refused access ({detail}): check the credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, profile or role) and the bucket policy")]
    AccessDenied { detail: String },
    #[error("cannot reach the object store at {endpoint} ({detail}): check --s3-endpoint / OUTBOX_ARCHIVER_S3_ENDPOINT (or AWS_ENDPOINT_URL) and the network")]
    Unreachable { endpoint: String, detail: String },
    #[error("the object store at {endpoint} presented a TLS certificate this job does not trust ({detail}): point --store-ca-bundle / OUTBOX_ARCHIVER_STORE_CA_BUNDLE (or AWS_CA_BUNDLE) at the PEM file of the CA that signed it, and check --s3-endpoint names a host the certificate lists")]
    UntrustedCertificate { endpoint: String, detail: String },
    #[error("cannot use the CA bundle {path} ({detail}): check --store-ca-bundle / OUTBOX_ARCHIVER_STORE_CA_BUNDLE / AWS_CA_BUNDLE (a PEM file of CA certificates)")]
    CaBundle { path: String, detail: String },
    #[error("object {key} already exists")]
    AlreadyExists { key: String },
    #[error("the store rejected {key}: the upload checksum did not match (BadDigest); the bytes were damaged on the way")]
    BadDigest { key: String },
    #[error("object {key} is in a storage class that cannot be read at once ({storage_class}); it must be restored first: run the command again with --thaw DAYS, then once more when the store has restored it (hours for GLACIER, up to 48 h for DEEP_ARCHIVE)")]
    NotReadable { key: String, storage_class: String },
    #[error("the store cannot use the KMS key ({detail}): check --sse-kms-key-id / OUTBOX_ARCHIVER_SSE_KMS_KEY_ID, that the key is enabled and in the bucket's region, and that the job's role may kms:GenerateDataKey and kms:Decrypt with it")]
    Kms { detail: String },
    #[error("the bucket requires an upload checksum on every put ({detail}): Object Lock buckets refuse puts without Content-MD5 or x-amz-checksum-*; set --s3-upload-checksum md5, sha256 or crc64nvme")]
    ChecksumRequired { detail: String },
    #[error("the store refused the storage class ({detail}): check --s3-storage-class / OUTBOX_ARCHIVER_S3_STORAGE_CLASS")]
    InvalidStorageClass { detail: String },
    #[error("the store refused the Object Lock settings ({detail}): Object Lock must be enabled on the bucket (it can only be turned on with versioning; `outbox-archiver doctor` checks it), or drop --object-lock-mode / --legal-hold")]
    ObjectLockRefused { detail: String },
    #[error("{store} stores cannot {what}")]
    Unsupported { store: &'static str, what: String },
    #[error("{op} {key}: {detail}")]
    Other {
        op: &'static str,
        key: String,
        detail: String,
    },
}

impl StoreError {
    /// True when the store itself cannot be used with these settings (exit status 2).
    pub(crate) fn is_configuration(&self) -> bool {
        matches!(
            self,
            StoreError::NoSuchBucket { .. }
                | StoreError::AccessDenied { .. }
                | StoreError::Unreachable { .. }
                | StoreError::UntrustedCertificate { .. }
                | StoreError::CaBundle { .. }
                | StoreError::Kms { .. }
                | StoreError::ChecksumRequired { .. }
                | StoreError::InvalidStorageClass { .. }
                | StoreError::ObjectLockRefused { .. }
                | StoreError::Unsupported { .. }
        )
    }
}

/// Where the archive lives: parsed from `--store`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `s3://bucket/prefix`
    S3 { bucket: String, prefix: Prefix },
    /// `file:///path` — the directory plays the bucket; there is no prefix.
    Local { root: std::path::PathBuf },
}

impl Location {
    pub fn parse(text: &str) -> Result<Location, String> {
        const HELP: &str = "write s3://bucket/prefix or file:///absolute/path";
        if let Some(rest) = text.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty()
                || !bucket
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
            {
                return Err(format!(
                    "--store {text:?} has no valid bucket name ({HELP})"
                ));
            }
            let prefix = Prefix::parse(prefix).map_err(|e| format!("--store {text:?}: {e}"))?;
            Ok(Location::S3 {
                bucket: bucket.to_string(),
                prefix,
            })
        } else if let Some(path) = text.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(format!("--store {text:?} needs an absolute path ({HELP})"));
            }
            // One spelling per folder (`/a//b/` is `/a/b`): the archive's home is compared as
            // the location prints.
            let root: std::path::PathBuf = std::path::Path::new(path).components().collect();
            Ok(Location::Local { root })
        } else {
            Err(format!("--store {text:?} is not a store URL ({HELP})"))
        }
    }

    /// The folder every object of this archive is below (the root of a local store).
    pub fn prefix(&self) -> &Prefix {
        static ROOT: Prefix = Prefix::root();
        match self {
            Location::S3 { prefix, .. } => prefix,
            Location::Local { .. } => &ROOT,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::S3 { bucket, prefix } if prefix.is_root() => write!(f, "s3://{bucket}"),
            Location::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{}", prefix.trimmed()),
            Location::Local { root } => write!(f, "file://{}", root.display()),
        }
    }
}

#[async_trait]
pub trait ObjectStore: Send + Sync + fmt::Debug {
    fn location(&self) -> &Location;

    /// Confirms the bucket (or directory) exists and these credentials can use it.
    async fn confirm_access(&self) -> Result<(), StoreError>;

    async fn head(&self, key: &Key) -> Result<Option<ObjectMeta>, StoreError>;

    async fn get(&self, key: &Key) -> Result<Option<ByteStream>, StoreError>;

    /// Writes `body` at `key` as `options` ask (storage class, retention, legal hold); the
    /// store's own encryption setting applies to every put.
    async fn put_with(
        &self,
        key: &Key,
        body: Bytes,
        mode: PutMode,
        options: &PutOptions,
    ) -> Result<(), StoreError>;

    /// A put in the store's default class, without retention.
    async fn put(&self, key: &Key, body: Bytes, mode: PutMode) -> Result<(), StoreError> {
        self.put_with(key, body, mode, &PutOptions::default()).await
    }

    /// Raises the current version's retention to `lock` (which S3 allows in both modes; it never
    /// shortens one) and sets its legal hold when `legal_hold`.
    async fn extend_lock(
        &self,
        _key: &Key,
        _lock: Option<&ObjectLock>,
        _legal_hold: bool,
    ) -> Result<(), StoreError> {
        Err(StoreError::Unsupported {
            store: "file://",
            what: "hold objects under Object Lock".into(),
        })
    }

    /// Asks the store to restore a cold object for `thaw.days`, so that it can be read later.
    async fn request_thaw(&self, _key: &Key, _thaw: &Thaw) -> Result<ThawState, StoreError> {
        Err(StoreError::Unsupported {
            store: "file://",
            what: "restore objects from cold storage".into(),
        })
    }

    /// The encryption every put asks for, if any.
    fn encryption(&self) -> Option<&Sse> {
        None
    }

    /// Every key that starts with `start`, in lexicographic order: what [`ObjectStore::list`]
    /// and [`ObjectStore::list_from`] ask.
    async fn list_starting(&self, start: &str) -> Result<Vec<Key>, StoreError>;

    /// [`ObjectStore::list_starting`] a page at a time. Stores without paging give one page.
    fn list_pages_starting<'a>(&'a self, start: &'a str) -> KeyPages<'a> {
        futures_util::stream::once(self.list_starting(start)).boxed()
    }

    /// Every key in the folder `prefix` (and below it), in lexicographic order.
    async fn list(&self, prefix: &Prefix) -> Result<Vec<Key>, StoreError> {
        self.list_starting(prefix.as_str()).await
    }

    /// The keys in the folder `prefix` in lexicographic order, a page at a time, so a caller
    /// that walks a large archive holds one page, not every key.
    fn list_pages<'a>(&'a self, prefix: &'a Prefix) -> KeyPages<'a> {
        self.list_pages_starting(prefix.as_str())
    }

    /// `key` and every key that continues it (`{key}.p/…`), in lexicographic order: one LIST.
    async fn list_from(&self, key: &Key) -> Result<Vec<Key>, StoreError> {
        self.list_starting(key.as_str()).await
    }

    async fn delete(&self, key: &Key) -> Result<(), StoreError>;

    /// What the store's requests went through so far, for stores that go over a network.
    fn stats(&self) -> Option<StoreStats> {
        None
    }

    /// Finds out, once per run and before the first write, whether create-only puts are
    /// refused at an existing key, using `probe_key` (a key under the archive's prefix that no
    /// batch uses); from then on create-only puts rely on the answer. Stores that create
    /// atomically by themselves have nothing to probe.
    async fn probe_conditional_put(&self, _probe_key: &Key) -> Result<ConditionalPut, StoreError> {
        Ok(ConditionalPut::Native)
    }
}

/// Reads a whole (small) object into memory.
pub async fn get_all(store: &dyn ObjectStore, key: &Key) -> Result<Option<Vec<u8>>, StoreError> {
    use futures_util::TryStreamExt;
    let Some(mut stream) = store.get(key).await? else {
        return Ok(None);
    };
    let mut out = Vec::new();
    while let Some(chunk) = stream.try_next().await? {
        out.extend_from_slice(&chunk);
    }
    Ok(Some(out))
}

/// Opens the store `--store` names.
pub async fn open(location: Location, s3: &S3Settings) -> Result<Arc<dyn ObjectStore>, StoreError> {
    Ok(match location {
        Location::S3 { .. } => Arc::new(S3Store::connect(location, s3).await?),
        Location::Local { .. } => Arc::new(LocalStore::new(location)),
    })
}

#[cfg(test)]
mod tests {
    use super::{Location, Prefix};

    #[test]
    fn parses_store_urls() {
        assert_eq!(
            Location::parse("s3://bkt/a/b/").unwrap(),
            Location::S3 {
                bucket: "bkt".into(),
                prefix: Prefix::parse("a/b").unwrap()
            }
        );
        assert_eq!(
            Location::parse("s3://bkt").unwrap(),
            Location::S3 {
                bucket: "bkt".into(),
                prefix: Prefix::root()
            }
        );
        assert_eq!(
            Location::parse("file:///tmp/x").unwrap(),
            Location::Local {
                root: "/tmp/x".into()
            }
        );
        for same in ["file:///tmp/x/", "file:///tmp//x", "file:///tmp/./x"] {
            assert_eq!(
                Location::parse(same).unwrap().to_string(),
                "file:///tmp/x",
                "{same}"
            );
        }
        assert!(Location::parse("s3://").is_err());
        assert!(Location::parse("s3://b/a//c").is_err());
        assert!(Location::parse("file://rel").is_err());
        assert!(Location::parse("/tmp/x").is_err());
        assert!(Location::parse("gs://b").is_err());
        assert_eq!(
            Location::parse("s3://bkt/a/").unwrap().to_string(),
            "s3://bkt/a"
        );
    }
}
