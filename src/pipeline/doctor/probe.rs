//! The one object doctor writes: a probe under the archive's prefix, put as archive puts a data
//! object (its storage class, a two-second retention in the run's mode, the legal hold, the
//! encryption), its HEAD held to what it was written with, and its version removed again where
//! the lock and the bucket policy allow (else it is left and named in the report).

use std::time::Duration;

use super::{Check, DoctorOptions, DoctorRun};
use crate::model::protection::{header_time, is_cold_class, ObjectLock, Sse};
use crate::store::s3::{LockConfiguration, S3Store};
use crate::store::{ObjectMeta, ObjectStore, PutMode, PutOptions, StoreError};

/// The probe object's key: one per run, so that two doctors at once (the archive and the purge
/// role of the doctor Job) never remove each other's probe.
fn probe_key(prefix: &crate::model::key::Prefix) -> crate::model::key::Key {
    prefix.key(&format!(
        "_outbox_archiver/doctor-probe-{}",
        crate::pipeline::report::run_id()
    ))
}

/// Writes one object as archive writes a data object (its storage class, a retention in the
/// run's mode but of two seconds, the legal hold, the encryption), reads back what the store
/// did with it, and removes that version again where the lock and the bucket policy allow.
pub(super) async fn probe(
    s3: &S3Store,
    opts: &DoctorOptions,
    lock_config: Option<LockConfiguration>,
    now_ms: i64,
    run: &mut DoctorRun,
) -> Option<Option<String>> {
    let started = std::time::Instant::now();
    let key = probe_key(s3.location().prefix());
    let unknown = lock_config.is_none();
    let mut options = probe_options(opts, lock_config, now_ms);
    let body = bytes::Bytes::from_static(
        b"outbox-archiver doctor: a probe of how this store keeps archived objects; safe to delete\n",
    );
    if let Err(check) = put_probe(s3, &key, &body, &mut options, opts, unknown).await {
        run.checks.push(check);
        return None;
    }
    let meta = match s3.head(&key).await {
        Ok(Some(meta)) => meta,
        Ok(None) => {
            run.checks.push(Check::problem(
                "probe_object",
                format!("{key} was accepted but is not there"),
                "the store loses writes: do not archive to it",
            ));
            return None;
        }
        Err(e) => {
            run.checks.push(Check::problem(
                "probe_object",
                format!("HEAD of {key}: {e}"),
                "allow s3:GetObject under the prefix",
            ));
            return None;
        }
    };
    run.checks
        .extend(what_the_store_kept(s3, opts, &options, &meta, &body));
    // Past the retention, counted from `now_ms` on this process's monotonic clock.
    let locked_for = options
        .lock
        .map(|l| Duration::from_millis((l.retain_until_ms - now_ms + 1_000).max(0) as u64));
    let wait = locked_for.map(|d| d.saturating_sub(started.elapsed()));
    clean_up(s3, &key, &options, &meta, wait, run).await;
    Some(meta.version_id)
}

/// What the probe is put with: the run's storage class and legal hold, and a two-second
/// retention in the run's mode (`lock_config`: the bucket's, where it could be read).
fn probe_options(
    opts: &DoctorOptions,
    lock_config: Option<LockConfiguration>,
    now_ms: i64,
) -> PutOptions {
    // The run's mode, or the bucket's default mode: a two-second retention, never the bucket's
    // years-long default on a probe.
    // Where the configuration cannot be read, governance: if the bucket has a default
    // retention, the probe must not get it (and a bucket without Object Lock refuses the
    // header, so the put is then tried without).
    let mode = opts
        .policy
        .lock
        .map(|(mode, _)| mode)
        .or(match lock_config {
            Some(config) => config.default.map(|(mode, _)| mode),
            None => Some(crate::model::protection::LockMode::Governance),
        });
    let lock = mode.map(|mode| ObjectLock {
        mode,
        retain_until_ms: (now_ms / 1000 + 3) * 1000,
    });
    PutOptions {
        storage_class: opts.policy.storage_class.clone(),
        lock,
        legal_hold: opts.policy.legal_hold,
    }
}

/// Puts the probe; where the bucket's configuration could not be read (`unknown`) and the run
/// names no retention, a bucket that refuses the retention header gets the put again without
/// it (`options` then says so). A refusal is the problem it shows, with its fix.
async fn put_probe(
    s3: &S3Store,
    key: &crate::model::key::Key,
    body: &bytes::Bytes,
    options: &mut PutOptions,
    opts: &DoctorOptions,
    unknown: bool,
) -> Result<(), Check> {
    let mut put = s3
        .put_with(key, body.clone(), PutMode::Overwrite, options)
        .await;
    if unknown
        && opts.policy.lock.is_none()
        && matches!(put, Err(StoreError::ObjectLockRefused { .. }))
    {
        options.lock = None;
        put = s3
            .put_with(key, body.clone(), PutMode::Overwrite, options)
            .await;
    }
    put.map_err(|e| {
        let (check, fix) = match &e {
            StoreError::InvalidStorageClass { .. } => ("storage_class", "check --s3-storage-class (STANDARD_IA, GLACIER_IR, DEEP_ARCHIVE, …)"),
            StoreError::Kms { .. } => ("kms_key", "check --sse-kms-key-id and the role's kms:GenerateDataKey / kms:Decrypt"),
            StoreError::ObjectLockRefused { .. } => ("object_lock", "enable Object Lock on the bucket, or drop --object-lock-mode / --legal-hold"),
            StoreError::ChecksumRequired { .. } => ("upload_checksum", "set --s3-upload-checksum md5, sha256 or crc64nvme"),
            _ => ("probe_object", "allow s3:PutObject (and s3:PutObjectRetention / s3:PutObjectLegalHold with Object Lock) under the prefix"),
        };
        Check::problem(
            check,
            format!("a put as archive makes it was refused: {e}"),
            fix,
        )
    })
}

/// The probe's HEAD against what it was written with: class, checksum, retention, legal hold,
/// encryption.
fn what_the_store_kept(
    s3: &S3Store,
    opts: &DoctorOptions,
    options: &PutOptions,
    meta: &ObjectMeta,
    body: &[u8],
) -> Vec<Check> {
    let mut checks = vec![kept_class(opts, meta, body)];
    if let Some(wanted) = &options.lock {
        checks.push(kept_retention(opts, wanted, meta));
    }
    if options.legal_hold {
        checks.push(if meta.legal_hold {
            Check::ok("legal_hold", "the store holds the probe under a legal hold")
        } else {
            Check::problem(
                "legal_hold",
                "the store accepted the legal hold but reports none on the probe",
                "enable Object Lock on the bucket; HEAD shows it only to roles with s3:GetObjectLegalHold",
            )
        });
    }
    if let Some(sse) = s3.encryption() {
        checks.push(kept_encryption(sse, meta));
    }
    checks
}

/// The class the store keeps the probe in against the run's; a cold class must come with the
/// store's own checksum of the stored object (it cannot be read back at once).
fn kept_class(opts: &DoctorOptions, meta: &ObjectMeta, body: &[u8]) -> Check {
    let stored_class = meta.storage_class.as_deref().unwrap_or("STANDARD");
    match &opts.policy.storage_class {
        None => Check::ok(
            "storage_class",
            format!("data objects go to the bucket's default class ({stored_class})"),
        ),
        Some(class) if class == stored_class && is_cold_class(class) => {
            let checksum = meta.crc64nvme == Some(crate::model::digest::crc64nvme(body))
                || meta.sha256.as_deref() == Some(crate::model::digest::sha256_hex(body).as_str());
            if checksum {
                Check::ok(
                    "storage_class",
                    format!("{class} accepted; its objects cannot be read right after upload, so batches are verified by the store's own checksum of the stored object, which the store reported for the probe (verified_by: store_checksum)"),
                )
            } else {
                Check::problem(
                    "storage_class",
                    format!("{class} accepted, but the store reported no checksum of the stored probe: a batch in {class} could not be verified (it cannot be read back at once)"),
                    "set --s3-upload-checksum crc64nvme (or sha256), or a class that can be read at once (GLACIER_IR)",
                )
            }
        }
        Some(class) if class == stored_class => {
            Check::ok("storage_class", format!("{class} accepted"))
        }
        Some(class) => Check::problem(
            "storage_class",
            format!("asked for {class}, the store keeps the probe in {stored_class}"),
            "check --s3-storage-class; this store may not support the class",
        ),
    }
}

/// The retention the store reports on the probe against the one it was put with.
fn kept_retention(opts: &DoctorOptions, wanted: &ObjectLock, meta: &ObjectMeta) -> Check {
    if meta.lock.is_some_and(|l| l.covers(wanted)) {
        Check::ok(
            "retention",
            format!(
                "the store holds the probe under {} until {} (archive: {})",
                wanted.mode,
                header_time(wanted.retain_until_ms),
                opts.policy
                    .lock
                    .map(|(m, r)| format!("{m} for {r}"))
                    .unwrap_or_else(|| "the bucket's default".into())
            ),
        )
    } else {
        Check::problem(
            "retention",
            match meta.lock {
                None => "the store accepted the retention but reports none on the probe: archived objects would not be locked".to_string(),
                Some(l) => format!(
                    "asked for {} until {}, the store reports {} until {}",
                    wanted.mode,
                    header_time(wanted.retain_until_ms),
                    l.mode,
                    header_time(l.retain_until_ms)
                ),
            },
            "enable Object Lock on the bucket; HEAD shows retention only to roles with s3:GetObjectRetention",
        )
    }
}

/// The encryption the store reports on the probe against what every put asks for.
fn kept_encryption(sse: &Sse, meta: &ObjectMeta) -> Check {
    let (algorithm, key) = (
        meta.sse_algorithm.as_deref(),
        meta.sse_kms_key_id.as_deref(),
    );
    if sse.reported_matches(algorithm, key) {
        Check::ok(
            "encryption",
            format!(
                "the probe is stored with {}{}",
                algorithm.unwrap_or_default(),
                key.map(|k| format!(" key {k}")).unwrap_or_default()
            ),
        )
    } else {
        Check::problem(
            "encryption",
            format!(
                "asked for {}{}, the store reports {}{}",
                sse.algorithm.as_str(),
                sse.kms_key_id
                    .as_deref()
                    .map(|k| format!(" key {k}"))
                    .unwrap_or_default(),
                algorithm.unwrap_or("no encryption"),
                key.map(|k| format!(" key {k}")).unwrap_or_default()
            ),
            "check --sse / --sse-kms-key-id and the bucket's encryption settings",
        )
    }
}

/// Removes the probe's version: after lifting its legal hold, once its two-second retention is
/// over. A bucket policy that denies deletes (deploy/bucket-policy.json) keeps it: named.
async fn clean_up(
    s3: &S3Store,
    key: &crate::model::key::Key,
    options: &PutOptions,
    meta: &ObjectMeta,
    wait: Option<Duration>,
    run: &mut DoctorRun,
) {
    let version = meta.version_id.as_deref();
    if let (true, Some(version)) = (options.legal_hold, version) {
        if let Err(e) = s3.lift_legal_hold(key.as_str(), version).await {
            tracing::debug!(key = %key, error = %e, "could not lift the probe's legal hold");
        }
    }
    if let Some(wait) = wait {
        tokio::time::sleep(wait.min(Duration::from_secs(5))).await;
    }
    let removed = match version {
        Some(version) => s3.delete_version(key.as_str(), version).await,
        None => s3.delete(key).await,
    };
    match removed {
        Ok(()) => run.checks.push(Check::ok(
            "probe_object",
            format!("{key} written, checked and removed"),
        )),
        Err(e) => {
            let left = format!(
                "{key}{}{}",
                version
                    .map(|v| format!(" (version {v})"))
                    .unwrap_or_default(),
                options
                    .lock
                    .map(|l| format!(", retained until {}", header_time(l.retain_until_ms)))
                    .unwrap_or_default()
            );
            run.checks.push(Check::warning(
                "probe_object",
                format!("{left} could not be removed ({e}); it stays, 90 bytes"),
                "nothing, if the bucket policy or the role denies s3:DeleteObjectVersion (deploy/bucket-policy.json does) or a retention still holds it; a retention admin may remove it later",
            ));
            run.probe_objects_left.push(left);
        }
    }
}
