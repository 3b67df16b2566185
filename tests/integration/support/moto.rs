//! moto's server (PyPI `moto[server]`): a real S3 HTTP server — widely used in CI for exactly
//! this — that implements what the in-process s3s server does not: Object Lock (retention on
//! PUT and HEAD, legal holds, refused deletes of locked versions, puts without Content-MD5 or a
//! checksum refused), storage classes (`InvalidObjectState` on a GET of a GLACIER or
//! DEEP_ARCHIVE object, `RestoreObject`), SSE-KMS headers, and KMS itself on the same port.
//!
//! One server per test process, on a free loopback port, started on first use by a thread that
//! lives as long as the process (the server is killed with it: `PR_SET_PDEATHSIG`). Every test
//! gets its own bucket. A machine without moto fails these tests, naming the fix: `.ci/test`
//! installs it, so a missing server is never a silent pass.

use std::os::unix::process::CommandExt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use aws_sdk_s3::config::{Credentials, Region};
use outbox_archiver::{Location, ObjectStore, S3Settings, UploadChecksum};

use super::{free_port, COUNTER};

pub const MOTO_REGION: &str = "us-east-1";

/// The endpoint of this process's moto server, started on first use.
pub fn moto_endpoint() -> &'static str {
    static ENDPOINT: OnceLock<String> = OnceLock::new();
    ENDPOINT.get_or_init(start)
}

fn start() -> String {
    let port = free_port();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut command = std::process::Command::new("python3");
        command
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // The server dies with the thread that started it, which lives as long as the process.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        match command.spawn() {
            Ok(mut child) => {
                let _ = ready_tx.send(Ok(()));
                let _ = child.wait();
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e.to_string()));
            }
        }
    });
    ready_rx
        .recv()
        .unwrap()
        .unwrap_or_else(|e| panic!("cannot start python3 -m moto.server: {e}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "moto's S3 server did not start within 30 s: install it with \
             `python3 -m pip install 'moto[server]'` (.ci/test does)"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    format!("http://127.0.0.1:{port}")
}

/// How a test's bucket is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    Plain,
    Versioned,
    /// Object Lock enabled (and so versioning), no default retention.
    Locked,
    /// Object Lock enabled with a default retention of `days` in this mode.
    LockedByDefault {
        compliance: bool,
        days: i32,
    },
}

/// A bucket of the test's own on moto.
pub struct MotoS3 {
    pub settings: S3Settings,
    pub location: Location,
    pub bucket: String,
    /// For the test's own setup and inspection (versions, deletes, KMS keys).
    pub admin: aws_sdk_s3::Client,
    pub sdk: aws_config::SdkConfig,
}

impl MotoS3 {
    pub async fn new(kind: Bucket) -> MotoS3 {
        use aws_sdk_s3::types::{
            DefaultRetention, ObjectLockConfiguration, ObjectLockEnabled, ObjectLockRetentionMode,
            ObjectLockRule, VersioningConfiguration,
        };
        let endpoint = moto_endpoint().to_string();
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let bucket = format!("moto-{}-{n}", std::process::id());
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(&endpoint)
            .region(Region::new(MOTO_REGION))
            .credentials_provider(Credentials::new("moto", "moto-secret", None, None, "test"))
            .load()
            .await;
        let admin = aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(&sdk)
                .force_path_style(true)
                .build(),
        );
        let locked = matches!(kind, Bucket::Locked | Bucket::LockedByDefault { .. });
        admin
            .create_bucket()
            .bucket(&bucket)
            .object_lock_enabled_for_bucket(locked)
            .send()
            .await
            .unwrap();
        if kind == Bucket::Versioned {
            admin
                .put_bucket_versioning()
                .bucket(&bucket)
                .versioning_configuration(
                    VersioningConfiguration::builder()
                        .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                        .build(),
                )
                .send()
                .await
                .unwrap();
        }
        if let Bucket::LockedByDefault { compliance, days } = kind {
            let mode = if compliance {
                ObjectLockRetentionMode::Compliance
            } else {
                ObjectLockRetentionMode::Governance
            };
            admin
                .put_object_lock_configuration()
                .bucket(&bucket)
                .object_lock_configuration(
                    ObjectLockConfiguration::builder()
                        .object_lock_enabled(ObjectLockEnabled::Enabled)
                        .rule(
                            ObjectLockRule::builder()
                                .default_retention(
                                    DefaultRetention::builder().mode(mode).days(days).build(),
                                )
                                .build(),
                        )
                        .build(),
                )
                .send()
                .await
                .unwrap();
        }
        let settings = S3Settings {
            endpoint: Some(endpoint.clone()),
            region: Some(MOTO_REGION.into()),
            force_path_style: Some(true),
            upload_checksum: Some(UploadChecksum::Md5),
            static_credentials: Some(("moto".into(), "moto-secret".into())),
            max_attempts: Some(2),
            initial_backoff: Some(Duration::from_millis(10)),
            kms_endpoint: Some(endpoint.clone()),
            ..S3Settings::default()
        };
        MotoS3 {
            settings,
            location: Location::S3 {
                bucket: bucket.clone(),
                prefix: outbox_archiver::format::Prefix::parse("archive").unwrap(),
            },
            bucket,
            admin,
            sdk,
        }
    }

    pub async fn store(&self) -> Arc<dyn ObjectStore> {
        outbox_archiver::open_store(self.location.clone(), &self.settings)
            .await
            .unwrap()
    }

    /// `s3://bucket/archive`, for the binary's `--store`.
    pub fn store_url(&self) -> String {
        format!("s3://{}/archive", self.bucket)
    }

    /// The environment the binary needs to reach this bucket.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", "moto".into()),
            ("AWS_SECRET_ACCESS_KEY", "moto-secret".into()),
            ("AWS_REGION", MOTO_REGION.into()),
            ("OUTBOX_ARCHIVER_S3_ENDPOINT", moto_endpoint().to_string()),
            ("OUTBOX_ARCHIVER_KMS_ENDPOINT", moto_endpoint().to_string()),
            ("OUTBOX_ARCHIVER_STORE", self.store_url()),
        ]
    }

    /// A new KMS key in moto's KMS; its ARN.
    pub async fn kms_key(&self) -> String {
        let kms = aws_sdk_kms::Client::new(&self.sdk);
        let key = kms.create_key().send().await.unwrap();
        key.key_metadata().unwrap().arn().unwrap().to_string()
    }

    /// Every version and delete marker under `prefix`: (key, version id).
    pub async fn versions_under(&self, prefix: &str) -> Vec<(String, String)> {
        let out = self
            .admin
            .list_object_versions()
            .bucket(&self.bucket)
            .prefix(prefix)
            .send()
            .await
            .unwrap();
        let versions = out.versions().iter().map(|v| (v.key(), v.version_id()));
        let markers = out
            .delete_markers()
            .iter()
            .map(|m| (m.key(), m.version_id()));
        versions
            .chain(markers)
            .map(|(k, v)| {
                (
                    k.unwrap_or_default().to_string(),
                    v.unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    /// The version ids of `key`, newest first.
    pub async fn versions(&self, key: &str) -> Vec<String> {
        let out = self
            .admin
            .list_object_versions()
            .bucket(&self.bucket)
            .prefix(key)
            .send()
            .await
            .unwrap();
        out.versions()
            .iter()
            .filter(|v| v.key() == Some(key))
            .filter_map(|v| v.version_id().map(str::to_string))
            .collect()
    }
}
