//! What `doctor` asks an S3 bucket about itself, beyond the object interface: versioning, the
//! Object Lock configuration, default encryption, the KMS key's state, and the removal of its
//! own probe object's version. Each answer is the bucket's; "not configured" is an answer, a
//! refusal is an error (`AccessDenied` names the missing permission's operation).

use aws_sdk_s3::error::ProvideErrorMetadata;

use super::S3Store;
use crate::model::protection::{LockMode, Retention};
use crate::store::StoreError;

/// A bucket's versioning state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Versioning {
    Enabled,
    /// Was on, now off: new writes overwrite.
    Suspended,
    /// Never turned on.
    Off,
}

/// A bucket's Object Lock configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockConfiguration {
    pub enabled: bool,
    /// The retention every new object gets unless a put names one: its mode and length.
    pub default: Option<(LockMode, Retention)>,
}

/// A bucket's default encryption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DefaultEncryption {
    pub algorithm: String,
    pub kms_key_id: Option<String>,
    pub bucket_key: bool,
}

/// What KMS says about a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KmsKey {
    pub arn: String,
    pub enabled: bool,
    /// `Enabled`, `Disabled`, `PendingDeletion`, …
    pub state: String,
}

impl S3Store {
    /// The bucket's region as the store reports it (HeadBucket's `x-amz-bucket-region`, else
    /// GetBucketLocation); `None` where it reports none (many S3-compatible stores).
    pub(crate) async fn bucket_region(&self) -> Result<Option<String>, StoreError> {
        let head = self
            .client()
            .head_bucket()
            .bucket(self.bucket())
            .send()
            .await
            .map_err(|e| self.error("head bucket", self.bucket(), e))?;
        if let Some(region) = head.bucket_region().filter(|r| !r.is_empty()) {
            return Ok(Some(region.to_string()));
        }
        if self.custom_endpoint() {
            // S3-compatible stores answer GetBucketLocation with whatever they like (often an
            // empty constraint, which would read as us-east-1).
            return Ok(None);
        }
        match self
            .client()
            .get_bucket_location()
            .bucket(self.bucket())
            .send()
            .await
        {
            // An empty constraint is us-east-1, by S3's old convention.
            Ok(out) => Ok(Some(
                out.location_constraint()
                    .map(|c| c.as_str().to_string())
                    .filter(|c| !c.is_empty())
                    .unwrap_or_else(|| "us-east-1".to_string()),
            )),
            Err(_) => Ok(None),
        }
    }

    pub(crate) async fn versioning(&self) -> Result<Versioning, StoreError> {
        use aws_sdk_s3::types::BucketVersioningStatus;
        let out = self
            .client()
            .get_bucket_versioning()
            .bucket(self.bucket())
            .send()
            .await
            .map_err(|e| self.error("get bucket versioning", self.bucket(), e))?;
        Ok(match out.status() {
            Some(BucketVersioningStatus::Enabled) => Versioning::Enabled,
            Some(BucketVersioningStatus::Suspended) => Versioning::Suspended,
            _ => Versioning::Off,
        })
    }

    pub(crate) async fn lock_configuration(&self) -> Result<LockConfiguration, StoreError> {
        let out = match self
            .client()
            .get_object_lock_configuration()
            .bucket(self.bucket())
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if e.code() == Some("ObjectLockConfigurationNotFoundError") => {
                return Ok(LockConfiguration {
                    enabled: false,
                    default: None,
                })
            }
            Err(e) => return Err(self.error("get object lock configuration", self.bucket(), e)),
        };
        let config = out.object_lock_configuration();
        let enabled = config
            .and_then(|c| c.object_lock_enabled())
            .is_some_and(|e| e.as_str() == "Enabled");
        let default = config
            .and_then(|c| c.rule())
            .and_then(|r| r.default_retention())
            .and_then(|d| {
                let mode = LockMode::parse(d.mode()?.as_str())?;
                let length = match (d.days(), d.years()) {
                    (Some(days), _) => Retention::Millis(i64::from(days) * 86_400_000),
                    (_, Some(years)) => Retention::Years(years.max(0) as u32),
                    _ => return None,
                };
                Some((mode, length))
            });
        Ok(LockConfiguration { enabled, default })
    }

    pub(crate) async fn default_encryption(&self) -> Result<Option<DefaultEncryption>, StoreError> {
        let out = match self
            .client()
            .get_bucket_encryption()
            .bucket(self.bucket())
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if e.code() == Some("ServerSideEncryptionConfigurationNotFoundError") => {
                return Ok(None)
            }
            Err(e) => return Err(self.error("get bucket encryption", self.bucket(), e)),
        };
        let rule = out
            .server_side_encryption_configuration()
            .and_then(|c| c.rules().first());
        Ok(rule.and_then(|rule| {
            let by_default = rule.apply_server_side_encryption_by_default()?;
            Some(DefaultEncryption {
                algorithm: by_default.sse_algorithm().as_str().to_string(),
                kms_key_id: by_default.kms_master_key_id().map(str::to_string),
                bucket_key: rule.bucket_key_enabled().unwrap_or(false),
            })
        }))
    }

    /// What KMS says about `key` (`None`: no such key), asked at `--kms-endpoint` or, by
    /// default, AWS's regional KMS endpoint (never the S3 endpoint: a MinIO or a VPC endpoint
    /// for S3 is not one for KMS).
    pub(crate) async fn describe_kms_key(&self, key: &str) -> Result<Option<KmsKey>, StoreError> {
        let mut config = aws_sdk_kms::config::Builder::from(&self.sdk);
        config.set_endpoint_url(self.kms_endpoint.clone());
        let config = config.build();
        let kms = aws_sdk_kms::Client::from_conf(config);
        match kms.describe_key().key_id(key).send().await {
            Ok(out) => Ok(out.key_metadata().map(|m| KmsKey {
                arn: m.arn().unwrap_or_default().to_string(),
                enabled: m.enabled(),
                state: m
                    .key_state()
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_default(),
            })),
            Err(e) if e.code() == Some("NotFoundException") => Ok(None),
            Err(e) => {
                let code = e.code().unwrap_or_default().to_string();
                let detail = super::error::in_words(&e);
                Err(if code.contains("AccessDenied") {
                    StoreError::AccessDenied { detail }
                } else {
                    StoreError::Other {
                        op: "kms describe key",
                        key: key.to_string(),
                        detail,
                    }
                })
            }
        }
    }

    /// Removes one version of `key` (doctor's probe; refused while its retention lasts).
    pub(crate) async fn delete_version(&self, key: &str, version: &str) -> Result<(), StoreError> {
        self.client()
            .delete_object()
            .bucket(self.bucket())
            .key(key)
            .version_id(version)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| self.error("delete version", key, e))
    }

    /// Lifts the legal hold on one version of `key` (doctor's probe).
    pub(crate) async fn lift_legal_hold(&self, key: &str, version: &str) -> Result<(), StoreError> {
        use aws_sdk_s3::types::{ObjectLockLegalHold, ObjectLockLegalHoldStatus};
        self.client()
            .put_object_legal_hold()
            .bucket(self.bucket())
            .key(key)
            .version_id(version)
            .legal_hold(
                ObjectLockLegalHold::builder()
                    .status(ObjectLockLegalHoldStatus::Off)
                    .build(),
            )
            .send()
            .await
            .map(|_| ())
            .map_err(|e| self.error("put legal hold", key, e))
    }
}
