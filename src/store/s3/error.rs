//! An SDK error in the operator's words: each failure the store can report becomes the
//! [`StoreError`] that names what happened and the setting to check (untrusted certificate,
//! unreachable, no bucket, cold object, KMS, checksum required, Object Lock refused, storage
//! class, access denied, already exists, bad digest), else `Other` with the store's own words.
//! Never includes credentials: the SDK's error context holds codes, messages and request ids,
//! not signatures.

use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};

use super::{Fetch, S3Store};
use crate::store::StoreError;

impl S3Store {
    pub(super) fn error<E>(
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
    pub(super) fn error<E>(
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
