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
use aws_sdk_s3::config::{
    Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream as SdkByteStream;
use aws_sdk_s3::types::ChecksumMode;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeDeserializationInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use aws_smithy_types::timeout::TimeoutConfig;
use base64::Engine as _;
use bytes::Bytes;
use futures_util::StreamExt;

use super::{ByteStream, Location, ObjectMeta, ObjectStore, PutMode, StoreError};
use crate::digest;

/// Which checksum a put carries for the store to check on arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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
    /// Send `If-None-Match: *` on create-only puts. Stores that do not support it (COS) may
    /// ignore it; turn it off for one that rejects it.
    pub conditional_put: Option<bool>,
    pub static_credentials: Option<(String, String)>,
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("force_path_style", &self.force_path_style)
            .field("upload_checksum", &self.upload_checksum)
            .field("conditional_put", &self.conditional_put)
            .field(
                "static_credentials",
                &self.static_credentials.as_ref().map(|_| "***"),
            )
            .finish()
    }
}

#[derive(Debug)]
pub struct S3Store {
    client: aws_sdk_s3::Client,
    location: Location,
    bucket: String,
    endpoint: String,
    upload_checksum: UploadChecksum,
    conditional_put: bool,
}

impl S3Store {
    pub async fn connect(location: Location, settings: &S3Settings) -> Result<S3Store, StoreError> {
        let Location::S3 { bucket, .. } = &location else {
            panic!("S3Store needs an s3:// location")
        };
        let bucket = bucket.clone();
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(10))
                    .read_timeout(Duration::from_secs(120))
                    .build(),
            );
        if let Some(endpoint) = &settings.endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        if let Some(region) = &settings.region {
            loader = loader.region(Region::new(region.clone()));
        }
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
        let mut config = aws_sdk_s3::config::Builder::from(&sdk)
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .force_path_style(settings.force_path_style.unwrap_or(endpoint.is_some()));
        if sdk.region().is_none() {
            // Custom endpoints (MinIO, COS) rarely care; AWS needs the right one and says so.
            config = config.region(Region::new("us-east-1"));
        }
        Ok(S3Store {
            client: aws_sdk_s3::Client::from_conf(config.build()),
            endpoint: endpoint.unwrap_or_else(|| "AWS S3".to_string()),
            location,
            bucket,
            upload_checksum: settings.upload_checksum.unwrap_or(UploadChecksum::Md5),
            conditional_put: settings.conditional_put.unwrap_or(true),
        })
    }

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
        match (&err, status, code.as_str()) {
            (SdkError::DispatchFailure(_) | SdkError::TimeoutError(_), _, _) => {
                StoreError::Unreachable {
                    endpoint: self.endpoint.clone(),
                    detail,
                }
            }
            (_, _, "NoSuchBucket") => StoreError::NoSuchBucket {
                bucket: self.bucket.clone(),
            },
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

    async fn check(&self) -> Result<(), StoreError> {
        match self.client.head_bucket().bucket(&self.bucket).send().await {
            Ok(_) => Ok(()),
            Err(e) => Err(match self.error("head bucket", &self.bucket, e) {
                StoreError::Other { detail, .. } if detail.starts_with("HTTP 404") => {
                    StoreError::NoSuchBucket {
                        bucket: self.bucket.clone(),
                    }
                }
                other => other,
            }),
        }
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, StoreError> {
        let cos = CaptureCosCrc::default();
        let result = self
            .client
            .head_object()
            .bucket(&self.bucket)
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
                return match self.check().await {
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
        Ok(Some(ObjectMeta {
            size: out.content_length().unwrap_or(0).max(0) as u64,
            crc64nvme,
            crc64ecma,
        }))
    }

    async fn get(&self, key: &str) -> Result<Option<ByteStream>, StoreError> {
        let out = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if e.code() == Some("NoSuchKey") => return Ok(None),
            Err(e) => return Err(self.error("get", key, e)),
        };
        let key = key.to_string();
        let endpoint = self.endpoint.clone();
        let body: SdkByteStream = out.body;
        let stream = futures_util::stream::unfold(Some(body), move |state| {
            let key = key.clone();
            let endpoint = endpoint.clone();
            async move {
                let mut body = state?;
                match body.next().await {
                    Some(Ok(chunk)) => Some((Ok(chunk), Some(body))),
                    Some(Err(e)) => Some((
                        Err(StoreError::Unreachable {
                            endpoint,
                            detail: format!(
                                "reading {key}: {}",
                                aws_smithy_types::error::display::DisplayErrorContext(&e)
                            ),
                        }),
                        None,
                    )),
                    None => None,
                }
            }
        });
        Ok(Some(stream.boxed()))
    }

    async fn put(&self, key: &str, body: Bytes, mode: PutMode) -> Result<(), StoreError> {
        let mut request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type(key))
            .content_length(body.len() as i64);
        request = match self.upload_checksum {
            UploadChecksum::None => request,
            UploadChecksum::Md5 => {
                use md5::Digest as _;
                request.content_md5(b64(&md5::Md5::digest(&body)))
            }
            UploadChecksum::Sha256 => {
                use sha2::Digest as _;
                request.checksum_sha256(b64(&sha2::Sha256::digest(&body)))
            }
            UploadChecksum::Crc64nvme => {
                request.checksum_crc64_nvme(b64(&digest::crc64nvme(&body).to_be_bytes()))
            }
        };
        if mode == PutMode::Create {
            if self.conditional_put {
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

    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let mut keys = Vec::new();
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.error("list", prefix, e))?;
            keys.extend(
                page.contents()
                    .iter()
                    .filter_map(|o| o.key().map(str::to_string)),
            );
        }
        keys.sort();
        Ok(keys)
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| self.error("delete", key, e))
    }
}
