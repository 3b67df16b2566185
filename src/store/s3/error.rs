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
    /// [`Fetch::error`], for this store's requests.
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
        let detail = detail(&err, status, &code);
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

/// What the store (or the connection) said, in one line: `HTTP <status> <code> <message>`, the
/// start of an answer the SDK could not read, or the SDK's account of a failure with no answer.
fn detail<E>(
    err: &SdkError<E, aws_smithy_runtime_api::http::Response>,
    status: Option<u16>,
    code: &str,
) -> String
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match err {
        SdkError::ServiceError(e) if code.is_empty() && e.err().message().is_none() => {
            // Nothing modelled: a body the SDK could not read (a non-conforming store).
            let why = in_words(e.err());
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
        other => in_words(other),
    }
}

/// An error and its sources in words, `outer: inner: innermost` — a message repeated by the
/// error that wraps it said once. Not the SDK's `DisplayErrorContext`, which appends the whole
/// error's `Debug` dump (`DispatchFailure(DispatchFailure { source: ConnectorError { … } })`).
pub(crate) fn in_words(error: &(dyn std::error::Error + 'static)) -> String {
    let mut said: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        let text = e.to_string();
        if !text.is_empty() && !said.iter().any(|s| s.contains(&text)) {
            said.push(text);
        }
        next = e.source();
    }
    said.join(": ")
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use aws_sdk_s3::error::ErrorMetadata;
    use aws_sdk_s3::operation::put_object::PutObjectError;
    use aws_smithy_runtime_api::client::result::ConnectorError;
    use aws_smithy_runtime_api::http::{Response, StatusCode};
    use aws_smithy_types::body::SdkBody;

    use super::*;

    type Failure = SdkError<PutObjectError, Response>;

    fn fetch() -> Fetch {
        let config = aws_sdk_s3::Config::builder()
            .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
            .build();
        Fetch {
            client: aws_sdk_s3::Client::from_conf(config),
            bucket: "archive".into(),
            endpoint: "https://s3.example".into(),
            counters: Arc::default(),
            max_attempts: 5,
            read_timeout: Duration::from_secs(30),
        }
    }

    /// The store's answer: an HTTP status, an error code and a message (empty: none).
    fn answer(status: u16, code: &str, message: &str) -> Failure {
        let mut meta = ErrorMetadata::builder();
        if !code.is_empty() {
            meta = meta.code(code);
        }
        if !message.is_empty() {
            meta = meta.message(message);
        }
        let raw = Response::new(StatusCode::try_from(status).unwrap(), SdkBody::empty());
        SdkError::service_error(PutObjectError::generic(meta.build()), raw)
    }

    fn mapped(failure: Failure) -> StoreError {
        fetch().error("put", "p/app/data.ndjson.gz", failure)
    }

    /// The variant's name, as `Debug` spells it.
    fn kind(error: &StoreError) -> String {
        let debug = format!("{error:?}");
        debug
            .split([' ', '{'])
            .next()
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn each_answer_of_the_store_becomes_the_error_that_names_it() {
        let cases = [
            (404, "NoSuchBucket", "The specified bucket does not exist", "NoSuchBucket"),
            (403, "InvalidObjectState", "The operation is not valid for the object's storage class", "NotReadable"),
            (400, "KMS.NotFoundException", "Invalid keyId", "Kms"),
            // A KMS refusal comes as AccessDenied, 403: the key is what to check, not the role.
            (403, "AccessDenied", "User is not authorized to perform: kms:GenerateDataKey", "Kms"),
            (400, "MissingUploadObjectWithObjectLockHeaders", "", "ChecksumRequired"),
            (400, "InvalidRequest", "Content-MD5 OR x-amz-checksum- HTTP header is required for Put Object requests with Object Lock parameters", "ChecksumRequired"),
            (400, "InvalidRequest", "Bucket is missing Object Lock Configuration", "ObjectLockRefused"),
            (400, "InvalidRequest", "ObjectLockConfiguration is missing", "ObjectLockRefused"),
            (400, "InvalidRequest", "Something else entirely", "Other"),
            (400, "InvalidStorageClass", "The storage class you specified is not valid", "InvalidStorageClass"),
            (403, "AccessDenied", "Access Denied", "AccessDenied"),
            (403, "", "", "AccessDenied"),
            (400, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist", "AccessDenied"),
            (403, "SignatureDoesNotMatch", "", "AccessDenied"),
            (412, "", "", "AlreadyExists"),
            (409, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold", "AlreadyExists"),
            (400, "BadDigest", "The Content-MD5 you specified did not match what we received", "BadDigest"),
            (400, "InvalidDigest", "", "BadDigest"),
            (400, "XAmzContentChecksumMismatch", "", "BadDigest"),
            (500, "InternalError", "We encountered an internal error", "Other"),
            (503, "SlowDown", "Please reduce your request rate", "Other"),
        ];
        for (status, code, message, want) in cases {
            let error = mapped(answer(status, code, message));
            assert_eq!(
                kind(&error),
                want,
                "HTTP {status} {code} {message}: {error:?}"
            );
        }
    }

    #[test]
    fn an_error_names_the_bucket_the_key_and_the_stores_words() {
        match mapped(answer(404, "NoSuchBucket", "")) {
            StoreError::NoSuchBucket { bucket } => assert_eq!(bucket, "archive"),
            other => panic!("{other:?}"),
        }
        match mapped(answer(412, "", "")) {
            StoreError::AlreadyExists { key } => assert_eq!(key, "p/app/data.ndjson.gz"),
            other => panic!("{other:?}"),
        }
        match mapped(answer(
            500,
            "InternalError",
            "We encountered an internal error",
        )) {
            StoreError::Other { op, key, detail } => {
                assert_eq!((op, key.as_str()), ("put", "p/app/data.ndjson.gz"));
                assert_eq!(
                    detail,
                    "HTTP 500 InternalError We encountered an internal error"
                );
            }
            other => panic!("{other:?}"),
        }
        match mapped(answer(403, "AccessDenied", "")) {
            StoreError::AccessDenied { detail } => assert_eq!(detail, "HTTP 403 AccessDenied"),
            other => panic!("{other:?}"),
        }
        // No code and no message: the SDK could not read the answer, and says so.
        match mapped(answer(502, "", "")) {
            StoreError::Other { detail, .. } => assert!(
                detail.starts_with("HTTP 502, an answer the SDK cannot read: "),
                "{detail}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_failure_without_an_answer_is_unreachable_or_an_untrusted_certificate() {
        let refused = Failure::dispatch_failure(ConnectorError::io("connection refused".into()));
        match mapped(refused) {
            StoreError::Unreachable { endpoint, detail } => {
                assert_eq!(endpoint, "https://s3.example");
                assert!(detail.contains("connection refused"), "{detail}");
                // Words, not the SDK's Debug dump of the error.
                for dump in ["DispatchFailure", "ConnectorError", "{", "("] {
                    assert!(!detail.contains(dump), "{detail}");
                }
            }
            other => panic!("{other:?}"),
        }
        let timeout = Failure::timeout_error("operation timed out");
        assert_eq!(kind(&mapped(timeout)), "Unreachable");
        let untrusted = Failure::dispatch_failure(ConnectorError::other(
            "invalid peer certificate: UnknownIssuer".into(),
            None,
        ));
        match mapped(untrusted) {
            StoreError::UntrustedCertificate { endpoint, .. } => {
                assert_eq!(endpoint, "https://s3.example")
            }
            other => panic!("{other:?}"),
        }
    }
}
