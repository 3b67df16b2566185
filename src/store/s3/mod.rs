//! The S3 implementation of [`ObjectStore`], for AWS S3, MinIO, Tencent COS and other
//! S3-compatible stores (SPEC §5.7).
//!
//! The SDK's default request checksums (CRC32 in an aws-chunked trailer) break many compatible
//! stores, so they are off: the upload checksum is a setting ([`UploadChecksum`]), sent as a
//! precomputed header that the store checks, and every object is read back and verified by the
//! caller regardless. Where a store reports its own whole-object checksum on HEAD
//! (`x-amz-checksum-crc64nvme`, COS `x-cos-hash-crc64ecma`) it is returned for comparison.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::{
    Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::operation::get_object::GetObjectOutput;
use aws_sdk_s3::primitives::ByteStream as SdkByteStream;
use aws_sdk_s3::types::ChecksumMode;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeDeserializationInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use aws_smithy_types::timeout::TimeoutConfig;
use base64::Engine as _;
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};

use super::{
    ByteStream, ConditionalPut, Counters, KeyPages, Location, ObjectMeta, ObjectStore, PutMode,
    PutOptions, StoreError, StoreStats,
};
use crate::model::digest;
use crate::model::protection::{LockMode, ObjectLock, RestoreStatus, Sse, Thaw, ThawState};

/// Which checksum a put carries for the store to check on arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadChecksum {
    /// No upload checksum (the read-back still verifies every byte).
    None,
    /// `Content-MD5`: understood by practically every S3-compatible store, COS included.
    Md5,
    /// `x-amz-checksum-sha256`.
    Sha256,
    /// `x-amz-checksum-crc64nvme` (AWS S3's default full-object checksum).
    Crc64nvme,
}

/// How to reach the S3 endpoint. Credentials come from the AWS SDK's usual chain (environment,
/// profile, web identity, instance role) unless `static_credentials` is set (tests, demo).
#[derive(Clone, Default)]
pub struct S3Settings {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    /// Path-style addressing; defaults to on when an endpoint is given, off for AWS.
    pub force_path_style: Option<bool>,
    pub upload_checksum: Option<UploadChecksum>,
    /// Whether create-only puts send `If-None-Match: *` [default: probed once per run].
    pub conditional_put: Option<ConditionalPutSetting>,
    pub static_credentials: Option<(String, String)>,
    /// Attempts per request, the first included, with exponential backoff and jitter between
    /// them (the SDK's standard retry mode). A body read that breaks off is resumed as often.
    pub max_attempts: Option<u32>,
    /// Limit on opening a connection.
    pub connect_timeout: Option<Duration>,
    /// Limit on waiting for a response's first byte, and on any silence inside a body.
    pub read_timeout: Option<Duration>,
    /// The first retry's backoff ceiling, doubling per attempt (the SDK's default, 1 s, when unset).
    pub initial_backoff: Option<Duration>,
    /// Server-side encryption every put asks for (`--sse`, `--sse-kms-key-id`).
    pub sse: Option<Sse>,
    /// Where `doctor` asks KMS about the key [default: AWS's regional KMS endpoint].
    pub kms_endpoint: Option<String>,
    /// A PEM file of the CA certificates the endpoint's TLS certificate must chain to
    /// (`--store-ca-bundle` / `AWS_CA_BUNDLE`); only these are trusted then.
    pub ca_bundle: Option<std::path::PathBuf>,
}

/// `--s3-conditional-put`: probe whether the store honours `If-None-Match: *` (the default), or
/// take the operator's word for it either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ConditionalPutSetting {
    /// Probe once per run, before the first write; fall back to HEAD-then-PUT if it is ignored.
    #[default]
    Auto,
    /// Send it without probing (the store is known to honour it).
    On,
    /// Never send it: HEAD-then-PUT (a store that rejects the header).
    Off,
}

/// Attempts per S3 request unless `--s3-max-attempts` says otherwise.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(30);

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("force_path_style", &self.force_path_style)
            .field("upload_checksum", &self.upload_checksum)
            .field("conditional_put", &self.conditional_put)
            .field("max_attempts", &self.max_attempts)
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("initial_backoff", &self.initial_backoff)
            .field("sse", &self.sse)
            .field("kms_endpoint", &self.kms_endpoint)
            .field("ca_bundle", &self.ca_bundle)
            .field(
                "static_credentials",
                &self.static_credentials.as_ref().map(|_| "***"),
            )
            .finish()
    }
}

mod inspect;

pub use inspect::{DefaultEncryption, KmsKey, LockConfiguration, Versioning};

/// Where the region came from when no setting gave one: us-east-1 by default.
pub const NO_REGION: &str = "no setting: the default";
/// `--s3-region` / `OUTBOX_ARCHIVER_S3_REGION`.
pub const SETTING_REGION: &str = "--s3-region / OUTBOX_ARCHIVER_S3_REGION";

#[derive(Debug)]
pub struct S3Store {
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
    pub async fn connect(location: Location, settings: &S3Settings) -> Result<S3Store, StoreError> {
        let Location::S3 { bucket, .. } = &location else {
            panic!("S3Store needs an s3:// location")
        };
        let bucket = bucket.clone();
        let max_attempts = settings.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS).max(1);
        let read_timeout = settings.read_timeout.unwrap_or(DEFAULT_READ_TIMEOUT);
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(settings.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT))
                    .read_timeout(read_timeout)
                    .build(),
            )
            .retry_config({
                let retry = RetryConfig::standard().with_max_attempts(max_attempts);
                match settings.initial_backoff {
                    Some(backoff) => retry.with_initial_backoff(backoff),
                    None => retry,
                }
            });
        if let Some(endpoint) = &settings.endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        if let Some(bundle) = &settings.ca_bundle {
            loader = loader.http_client(https_client_trusting(bundle)?);
        }
        // The region from the settings, the environment or the profile — never asked of EC2's
        // instance metadata (off EC2 that is three long warnings a run and a pause); none
        // found: us-east-1, said in one line.
        use aws_config::meta::region::ProvideRegion;
        let region = match &settings.region {
            Some(region) => Some((Region::new(region.clone()), SETTING_REGION)),
            None => match aws_config::environment::region::EnvironmentVariableRegionProvider::new()
                .region()
                .await
            {
                Some(region) => Some((region, "AWS_REGION / AWS_DEFAULT_REGION")),
                None => aws_config::profile::region::ProfileFileRegionProvider::new()
                    .region()
                    .await
                    .map(|region| (region, "the AWS profile")),
            },
        };
        let (region, region_source) = region.unwrap_or_else(|| {
            tracing::info!(
                "no S3 region configured (--s3-region / AWS_REGION / the AWS profile): using us-east-1 \
                 (AWS S3 needs the bucket's own region; MinIO and COS rarely care)"
            );
            (Region::new("us-east-1"), NO_REGION)
        });
        let signed_for = region.to_string();
        loader = loader.region(region);
        if let Some((key, secret)) = &settings.static_credentials {
            loader = loader.credentials_provider(Credentials::new(
                key,
                secret,
                None,
                None,
                "outbox-archiver",
            ));
        }
        let sdk = loader.load().await;
        let endpoint = sdk.endpoint_url().map(str::to_string);
        let counters = Arc::new(Counters::default());
        let mut config = aws_sdk_s3::config::Builder::from(&sdk)
            .interceptor(CountAttempts(counters.clone()))
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .force_path_style(settings.force_path_style.unwrap_or(endpoint.is_some()));
        if sdk.region().is_none() {
            // Custom endpoints (MinIO, COS) rarely care; AWS needs the right one and says so.
            config = config.region(Region::new("us-east-1"));
        }
        Ok(S3Store {
            sdk: sdk.clone(),
            kms_endpoint: settings.kms_endpoint.clone(),
            fetch: Fetch {
                client: aws_sdk_s3::Client::from_conf(config.build()),
                bucket,
                endpoint: endpoint.unwrap_or_else(|| "AWS S3".to_string()),
                counters,
                max_attempts,
                read_timeout,
            },
            location,
            upload_checksum: settings.upload_checksum.unwrap_or(UploadChecksum::Md5),
            conditional_put: settings.conditional_put.unwrap_or_default(),
            probed: Mutex::new(None),
            sse: settings.sse.clone(),
            region: (signed_for, region_source),
        })
    }

    /// The region requests are signed for, and where it came from ([`NO_REGION`]: nowhere).
    pub fn region(&self) -> (&str, &'static str) {
        (&self.region.0, self.region.1)
    }

    /// Whether requests go to a custom endpoint (MinIO, COS, …) rather than AWS S3.
    pub fn custom_endpoint(&self) -> bool {
        self.fetch.endpoint != "AWS S3"
    }

    fn client(&self) -> &aws_sdk_s3::Client {
        &self.fetch.client
    }

    fn bucket(&self) -> &str {
        &self.fetch.bucket
    }

    fn error<E>(
        &self,
        op: &'static str,
        key: &str,
        err: SdkError<E, aws_smithy_runtime_api::http::Response>,
    ) -> StoreError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        self.fetch.error(op, key, err)
    }
}

impl Fetch {
    /// Turns an SDK error into the operator's words. Never includes credentials: the SDK's
    /// error context holds codes, messages and request ids, not signatures.
    fn error<E>(
        &self,
        op: &'static str,
        key: &str,
        err: SdkError<E, aws_smithy_runtime_api::http::Response>,
    ) -> StoreError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let status = err.raw_response().map(|r| r.status().as_u16());
        let code = err.code().unwrap_or_default().to_string();
        let detail = match &err {
            SdkError::ServiceError(e) if code.is_empty() && e.err().message().is_none() => {
                // Nothing modelled: a body the SDK could not read (a non-conforming store).
                let why =
                    aws_smithy_types::error::display::DisplayErrorContext(e.err()).to_string();
                format!(
                    "HTTP {}, an answer the SDK cannot read: {}",
                    status.unwrap_or(0),
                    why.chars().take(200).collect::<String>()
                )
            }
            SdkError::ServiceError(e) => format!(
                "HTTP {} {} {}",
                status.unwrap_or(0),
                code,
                e.err().message().unwrap_or_default()
            )
            .trim()
            .to_string(),
            other => aws_smithy_types::error::display::DisplayErrorContext(other).to_string(),
        };
        let message = err.message().unwrap_or_default().to_string();
        match (&err, status, code.as_str()) {
            (SdkError::DispatchFailure(_), _, _) if is_certificate_problem(&detail) => {
                StoreError::UntrustedCertificate {
                    endpoint: self.endpoint.clone(),
                    detail,
                }
            }
            (SdkError::DispatchFailure(_) | SdkError::TimeoutError(_), _, _) => {
                StoreError::Unreachable {
                    endpoint: self.endpoint.clone(),
                    detail,
                }
            }
            (_, _, "NoSuchBucket") => StoreError::NoSuchBucket {
                bucket: self.bucket.clone(),
            },
            (_, _, "InvalidObjectState") => StoreError::NotReadable {
                key: key.to_string(),
                storage_class: "a class the store cannot read at once (InvalidObjectState)".into(),
            },
            (_, _, code) if code.starts_with("KMS.") || message.contains("kms:") => {
                StoreError::Kms { detail }
            }
            (_, _, "MissingUploadObjectWithObjectLockHeaders") => {
                StoreError::ChecksumRequired { detail }
            }
            (_, _, "InvalidRequest") if message.contains("Content-MD5") => {
                StoreError::ChecksumRequired { detail }
            }
            (_, _, "InvalidRequest")
                if message.contains("Object Lock") || message.contains("ObjectLock") =>
            {
                StoreError::ObjectLockRefused { detail }
            }
            (_, _, "InvalidStorageClass") => StoreError::InvalidStorageClass { detail },
            (_, Some(403), _)
            | (_, _, "AccessDenied" | "InvalidAccessKeyId" | "SignatureDoesNotMatch") => {
                StoreError::AccessDenied { detail }
            }
            (_, Some(412), _) | (_, _, "PreconditionFailed") => StoreError::AlreadyExists {
                key: key.to_string(),
            },
            (_, _, "BadDigest" | "InvalidDigest" | "XAmzContentChecksumMismatch") => {
                StoreError::BadDigest {
                    key: key.to_string(),
                }
            }
            _ => StoreError::Other {
                op,
                key: key.to_string(),
                detail,
            },
        }
    }
}

impl Fetch {
    /// GETs `key` from byte `offset` on (the whole object at 0), pinned to `etag` when given.
    async fn object(
        &self,
        key: &str,
        offset: u64,
        etag: Option<&str>,
    ) -> Result<Option<GetObjectOutput>, StoreError> {
        let mut request = self.client.get_object().bucket(&self.bucket).key(key);
        if offset > 0 {
            request = request.range(format!("bytes={offset}-"));
        }
        if let Some(etag) = etag {
            request = request.if_match(etag);
        }
        match request.send().await {
            Ok(out) => Ok(Some(out)),
            Err(e) if e.code() == Some("NoSuchKey") => Ok(None),
            Err(e) => Err(self.error("get", key, e)),
        }
    }
}

/// An object body being read. A connection that breaks off, or a body that stays silent for the
/// read timeout, does not fail the read: it resumes where it stopped with a `Range` request
/// pinned to the object's ETag, up to the attempt limit, so a long read survives what the SDK's
/// own retries (which end when the headers arrive) cannot see. A store that ignores `Range`
/// sends the whole object again and the bytes already delivered are skipped.
struct Read {
    fetch: Fetch,
    key: String,
    etag: Option<String>,
    size: Option<u64>,
    body: SdkByteStream,
    /// Bytes delivered to the caller so far.
    offset: u64,
    /// Bytes of the current body to drop before delivering (a resumed read the store served whole).
    skip: u64,
    resumes: u32,
}

impl Read {
    async fn next(mut self) -> Option<(Result<Bytes, StoreError>, Read)> {
        loop {
            let problem =
                match tokio::time::timeout(self.fetch.read_timeout, self.body.next()).await {
                    Ok(Some(Ok(mut chunk))) => {
                        if self.skip > 0 {
                            let drop = self.skip.min(chunk.len() as u64);
                            self.skip -= drop;
                            chunk = chunk.slice(drop as usize..);
                            if chunk.is_empty() {
                                continue;
                            }
                        }
                        self.offset += chunk.len() as u64;
                        return Some((Ok(chunk), self));
                    }
                    Ok(None) if self.size.is_none_or(|size| self.offset >= size) => return None,
                    Ok(None) => format!(
                        "the body ended at byte {} of {}",
                        self.offset,
                        self.size.unwrap_or_default()
                    ),
                    Ok(Some(Err(e))) => {
                        aws_smithy_types::error::display::DisplayErrorContext(&e).to_string()
                    }
                    Err(_) => format!(
                        "no bytes for {} ms (--s3-read-timeout)",
                        self.fetch.read_timeout.as_millis()
                    ),
                };
            if self.resumes + 1 >= self.fetch.max_attempts {
                let error = StoreError::Unreachable {
                    endpoint: self.fetch.endpoint.clone(),
                    detail: format!(
                        "reading {} broke off at byte {} after {} attempts: {problem}",
                        self.key,
                        self.offset,
                        self.resumes + 1
                    ),
                };
                return self.fail(error);
            }
            self.resumes += 1;
            Counters::bump(&self.fetch.counters.resumed_reads);
            tracing::warn!(
                key = %self.key,
                offset = self.offset,
                attempt = self.resumes + 1,
                "S3 read broke off ({problem}); resuming from where it stopped"
            );
            tokio::time::sleep(backoff(self.resumes)).await;
            if let Err(error) = self.reopen().await {
                return self.fail(error);
            }
        }
    }

    /// GETs the rest of the object, from the first byte not yet delivered, pinned to its ETag.
    async fn reopen(&mut self) -> Result<(), StoreError> {
        let gone = |detail: &str| StoreError::Other {
            op: "get",
            key: self.key.clone(),
            detail: detail.into(),
        };
        let out = match self
            .fetch
            .object(&self.key, self.offset, self.etag.as_deref())
            .await
        {
            Ok(Some(out)) => out,
            Ok(None) => return Err(gone("the object disappeared while it was being read")),
            // 412 on If-Match: the object is not the one this read began.
            Err(StoreError::AlreadyExists { .. }) => {
                return Err(gone(
                    "the object changed while it was being read (ETag no longer matches)",
                ))
            }
            Err(error) => return Err(error),
        };
        let ranged = out.content_range().is_some() || self.offset == 0;
        self.skip = if ranged { 0 } else { self.offset };
        self.body = out.body;
        Ok(())
    }

    /// Yields `error`, after which the read yields nothing more.
    fn fail(mut self, error: StoreError) -> Option<(Result<Bytes, StoreError>, Read)> {
        self.body = SdkByteStream::from_static(b"");
        self.size = None;
        Some((Err(error), self))
    }
}

/// Waits before the `n`th resume: 100 ms doubling, capped at 5 s, with up to 50 % jitter.
/// Whether a connection failure is the endpoint's TLS certificate (rustls's words).
fn is_certificate_problem(detail: &str) -> bool {
    [
        "invalid peer certificate",
        "UnknownIssuer",
        "NotValidForName",
        "certificate",
    ]
    .iter()
    .any(|needle| detail.contains(needle))
}

/// An HTTPS client that trusts exactly the CA certificates of the PEM file at `bundle` (the
/// SDK's TLS provider, aws-lc-rs; the system's roots are left out, as the AWS CLI does with
/// its `ca_bundle`). The file is read and parsed here, so a wrong path or a file with no
/// certificate is a configuration error naming the setting, not a handshake failure later.
fn https_client_trusting(
    bundle: &std::path::Path,
) -> Result<aws_smithy_runtime_api::client::http::SharedHttpClient, StoreError> {
    use aws_smithy_http_client::tls;
    use rustls_pki_types::pem::PemObject;
    let invalid = |detail: String| StoreError::CaBundle {
        path: bundle.display().to_string(),
        detail,
    };
    let pem = std::fs::read(bundle).map_err(|e| invalid(e.to_string()))?;
    let mut store = tls::TrustStore::empty().with_native_roots(false);
    let mut certificates = 0;
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| invalid(format!("not a PEM certificate: {e}")))?;
        let pem = format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, cert.as_ref())
        );
        store = store.with_pem_certificate(pem.into_bytes());
        certificates += 1;
    }
    if certificates == 0 {
        return Err(invalid("the file holds no PEM certificate".into()));
    }
    let context = tls::TlsContext::builder()
        .with_trust_store(store)
        .build()
        .map_err(|e| invalid(e.to_string()))?;
    Ok(aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::AwsLc,
        ))
        .tls_context(context)
        .build_https())
}

fn backoff(n: u32) -> Duration {
    let base = Duration::from_millis(100)
        .saturating_mul(1 << n.min(6))
        .min(Duration::from_secs(5));
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() % 500);
    base + base * jitter / 1000
}

/// Counts every attempt of every request, and the failed ones by kind, and says so in the log:
/// the SDK retries transient failures silently, an operator wants to see them.
#[derive(Debug)]
struct CountAttempts(Arc<Counters>);

impl Intercept for CountAttempts {
    fn name(&self) -> &'static str {
        "CountAttempts"
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        Counters::bump(&self.0.attempts);
        if let Some(counter) = cfg
            .load::<aws_smithy_runtime_api::client::orchestrator::Metadata>()
            .and_then(|m| self.0.operation(m.name()))
        {
            Counters::bump(counter);
        }
        let status = context.response().map(|r| r.status().as_u16());
        let error = context.output_or_error().and_then(Result::err);
        let (counter, kind) = match error {
            Some(e)
                if e.is_timeout_error()
                    || e.as_connector_error().is_some_and(|c| c.is_timeout()) =>
            {
                (&self.0.timeouts, "timeout")
            }
            Some(e) if e.is_connector_error() || e.is_response_error() => {
                (&self.0.connection_errors, "connection error")
            }
            _ if status.is_some_and(|s| s >= 500 || s == 429) => {
                (&self.0.server_errors, "server error")
            }
            _ => return Ok(()),
        };
        Counters::bump(counter);
        let detail =
            error.map(|e| aws_smithy_types::error::display::DisplayErrorContext(e).to_string());
        tracing::warn!(
            status,
            detail = detail.as_deref().unwrap_or_default(),
            "S3 request attempt failed ({kind}); the SDK retries it with backoff while attempts remain"
        );
        Ok(())
    }
}

/// Captures COS's `x-cos-hash-crc64ecma` response header, which the SDK does not model.
#[derive(Debug, Default, Clone)]
struct CaptureCosCrc(Arc<Mutex<Option<String>>>);

impl Intercept for CaptureCosCrc {
    fn name(&self) -> &'static str {
        "CaptureCosCrc"
    }

    fn read_before_deserialization(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let value = context
            .response()
            .headers()
            .get("x-cos-hash-crc64ecma")
            .map(str::to_string);
        *self.0.lock().expect("not poisoned") = value;
        Ok(())
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
            .prefix(if prefix.is_empty() {
                String::new()
            } else {
                format!("{prefix}/")
            })
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

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, StoreError> {
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
        let crc64nvme = out
            .checksum_crc64_nvme()
            .and_then(|text| base64::engine::general_purpose::STANDARD.decode(text).ok())
            .and_then(|bytes| <[u8; 8]>::try_from(bytes.as_slice()).ok())
            .map(u64::from_be_bytes);
        let crc64ecma = cos
            .0
            .lock()
            .expect("not poisoned")
            .as_deref()
            .and_then(|v| v.parse().ok());
        let sha256 = out
            .checksum_sha256()
            .and_then(|text| base64::engine::general_purpose::STANDARD.decode(text).ok())
            .filter(|bytes| bytes.len() == 32)
            .map(hex::encode);
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

    async fn get(&self, key: &str) -> Result<Option<ByteStream>, StoreError> {
        let Some(out) = self.fetch.object(key, 0, None).await? else {
            return Ok(None);
        };
        let read = Read {
            fetch: self.fetch.clone(),
            key: key.to_string(),
            etag: out.e_tag().map(str::to_string),
            size: out.content_length().map(|n| n.max(0) as u64),
            body: out.body,
            offset: 0,
            skip: 0,
            resumes: 0,
        };
        Ok(Some(futures_util::stream::unfold(read, Read::next).boxed()))
    }

    async fn put_with(
        &self,
        key: &str,
        body: Bytes,
        mode: PutMode,
        options: &PutOptions,
    ) -> Result<(), StoreError> {
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
            } else if self.head(key).await?.is_some() {
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

    fn list_pages<'a>(&'a self, prefix: &'a str) -> KeyPages<'a> {
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
                        .filter_map(|o| o.key().map(str::to_string))
                        .collect::<Vec<_>>()
                })
                .map_err(|e| self.error("list", prefix, e));
            Some((keys, pages))
        })
        .boxed()
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let mut keys: Vec<String> = self
            .list_pages(prefix)
            .try_collect::<Vec<_>>()
            .await?
            .concat();
        keys.sort();
        Ok(keys)
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
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
        key: &str,
        lock: Option<&ObjectLock>,
        legal_hold: bool,
    ) -> Result<(), StoreError> {
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

    async fn request_thaw(&self, key: &str, thaw: &Thaw) -> Result<ThawState, StoreError> {
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
    async fn probe_conditional_put(&self, probe_key: &str) -> Result<ConditionalPut, StoreError> {
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
        match self.delete(probe_key).await {
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
