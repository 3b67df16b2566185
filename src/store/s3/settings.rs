//! How to reach an S3 endpoint: the settings ([`S3Settings`], the upload checksum, the
//! conditional-put setting and their defaults) and how [`S3Store::connect`] builds a client from
//! them — timeouts, the SDK's retries, the endpoint and a CA bundle, the region and where it came
//! from, credentials, and the SDK checksums turned off. Nothing here sends a request.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::{
    Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_smithy_types::timeout::TimeoutConfig;

use super::intercept::CountAttempts;
use super::{Fetch, S3Store};
use crate::model::protection::Sse;
use crate::store::{Counters, Location, StoreError};

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
pub(crate) const DEFAULT_MAX_ATTEMPTS: u32 = 5;
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

/// Where the region came from when no setting gave one: us-east-1 by default.
pub(crate) const NO_REGION: &str = "no setting: the default";
/// `--s3-region` / `OUTBOX_ARCHIVER_S3_REGION`.
pub(crate) const SETTING_REGION: &str = "--s3-region / OUTBOX_ARCHIVER_S3_REGION";

impl S3Store {
    /// A client for `location` (an `s3://` one) as `settings` say.
    pub(crate) async fn connect(
        location: Location,
        settings: &S3Settings,
    ) -> Result<S3Store, StoreError> {
        let Location::S3 { bucket, .. } = &location else {
            panic!("S3Store needs an s3:// location")
        };
        let bucket = bucket.clone();
        let max_attempts = settings.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS).max(1);
        let read_timeout = settings.read_timeout.unwrap_or(DEFAULT_READ_TIMEOUT);
        let mut loader = sdk_loader(settings, max_attempts, read_timeout)?;
        let (region, region_source) = region(settings).await;
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
}

/// The SDK's loader with the settings' timeouts, retries (`max_attempts`, the initial backoff),
/// endpoint and CA bundle (read here: a bad file is an error now, not at the first request).
fn sdk_loader(
    settings: &S3Settings,
    max_attempts: u32,
    read_timeout: Duration,
) -> Result<aws_config::ConfigLoader, StoreError> {
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
    Ok(loader)
}

/// The region requests are signed for, and which setting gave it ([`NO_REGION`]: none did).
async fn region(settings: &S3Settings) -> (Region, &'static str) {
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
    region.unwrap_or_else(|| {
        tracing::info!(
            "no S3 region configured (--s3-region / AWS_REGION / the AWS profile): using us-east-1 \
             (AWS S3 needs the bucket's own region; MinIO and COS rarely care)"
        );
        (Region::new("us-east-1"), NO_REGION)
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn location() -> Location {
        Location::S3 {
            bucket: "archive".into(),
            prefix: crate::model::key::Prefix::parse("p").unwrap(),
        }
    }

    #[test]
    fn printed_settings_never_show_the_credentials() {
        let settings = S3Settings {
            endpoint: Some("http://127.0.0.1:9000".into()),
            static_credentials: Some(("AKIDEXAMPLE".into(), "wJalrXUtnFEMI-secret".into())),
            ..S3Settings::default()
        };
        let printed = format!("{settings:?}");
        assert!(!printed.contains("AKIDEXAMPLE"), "{printed}");
        assert!(!printed.contains("wJalrXUtnFEMI-secret"), "{printed}");
        assert!(
            printed.contains(r#"static_credentials: Some("***")"#),
            "{printed}"
        );
        assert!(printed.contains("http://127.0.0.1:9000"), "{printed}");
    }

    #[tokio::test]
    async fn a_client_takes_the_defaults_of_what_the_settings_leave_out() {
        let settings = S3Settings {
            endpoint: Some("http://127.0.0.1:9".into()),
            region: Some("eu-west-1".into()),
            static_credentials: Some(("key".into(), "secret".into())),
            ..S3Settings::default()
        };
        let store = S3Store::connect(location(), &settings).await.unwrap();
        assert_eq!(store.region(), ("eu-west-1", SETTING_REGION));
        assert!(store.custom_endpoint());
        assert_eq!(store.fetch.bucket, "archive");
        assert_eq!(store.fetch.max_attempts, DEFAULT_MAX_ATTEMPTS);
        assert_eq!(store.fetch.read_timeout, DEFAULT_READ_TIMEOUT);
        assert_eq!(store.upload_checksum, UploadChecksum::Md5);
        assert_eq!(store.conditional_put, ConditionalPutSetting::Auto);
        assert!(store.sse.is_none());
        let given = S3Settings {
            // At least one attempt, whatever the setting says.
            max_attempts: Some(0),
            read_timeout: Some(Duration::from_secs(2)),
            upload_checksum: Some(UploadChecksum::Crc64nvme),
            conditional_put: Some(ConditionalPutSetting::Off),
            ..settings
        };
        let store = S3Store::connect(location(), &given).await.unwrap();
        assert_eq!(store.fetch.max_attempts, 1);
        assert_eq!(store.fetch.read_timeout, Duration::from_secs(2));
        assert_eq!(store.upload_checksum, UploadChecksum::Crc64nvme);
        assert_eq!(store.conditional_put, ConditionalPutSetting::Off);
    }

    #[test]
    fn a_ca_bundle_that_holds_no_certificate_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        match https_client_trusting(&path) {
            Err(StoreError::CaBundle {
                path: named,
                detail,
            }) => {
                assert_eq!(named, path.display().to_string());
                assert_eq!(detail, "the file holds no PEM certificate");
            }
            other => panic!("{:?}", other.map(|_| "a client")),
        }
        let missing = dir.path().join("missing.pem");
        assert!(matches!(
            https_client_trusting(&missing),
            Err(StoreError::CaBundle { .. })
        ));
    }
}
