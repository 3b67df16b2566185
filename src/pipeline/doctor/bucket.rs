//! Doctor's store checks: that the store is reachable and listable, then for S3 the region
//! requests are signed for, the bucket's versioning, its Object Lock configuration against the
//! run's retention, its default encryption and the KMS key, and whether it honours create-only
//! puts. The probe object (`probe`) is written among them: the versioning check reads
//! its version id where the bucket's own answer is refused.

use super::probe::probe;
use super::{Check, DoctorOptions, DoctorRun};
use crate::model::format;
use crate::store::s3::{LockConfiguration, S3Store, Versioning};
use crate::store::{ConditionalPut, ObjectStore, StoreError};

/// How doctor reaches the store.
#[derive(Clone, Copy)]
pub(crate) enum DoctorStore<'a> {
    S3(&'a S3Store),
    Other(&'a dyn ObjectStore),
}

impl DoctorStore<'_> {
    pub(crate) fn location(&self) -> &crate::store::Location {
        self.store().location()
    }

    pub(crate) fn store(&self) -> &dyn ObjectStore {
        match self {
            DoctorStore::S3(s3) => *s3,
            DoctorStore::Other(store) => *store,
        }
    }
}

/// The store doctor opens itself: an S3 store keeps its own client, for the bucket's settings.
pub(crate) enum OpenedStore {
    S3(Box<S3Store>),
    Local(crate::store::LocalStore),
}

impl OpenedStore {
    /// Opens the store at `location` as doctor looks at it (a store that cannot be opened is
    /// one of its findings).
    pub(crate) async fn open(
        location: crate::store::Location,
        settings: &crate::store::S3Settings,
    ) -> Result<OpenedStore, String> {
        match &location {
            crate::store::Location::S3 { .. } => S3Store::connect(location, settings)
                .await
                .map(|s3| OpenedStore::S3(Box::new(s3)))
                .map_err(|e| e.to_string()),
            crate::store::Location::Local { .. } => {
                Ok(OpenedStore::Local(crate::store::LocalStore::new(location)))
            }
        }
    }

    pub(crate) fn handle(&self) -> DoctorStore<'_> {
        match self {
            OpenedStore::S3(s3) => DoctorStore::S3(s3),
            OpenedStore::Local(local) => DoctorStore::Other(local),
        }
    }
}

/// The store's checks: access, versioning, Object Lock, encryption and the KMS key, create-only
/// puts, and a probe object written as archive would write (then removed where allowed).
pub(crate) async fn check_store(
    store: Result<DoctorStore<'_>, &str>,
    opts: &DoctorOptions,
    now_ms: i64,
    run: &mut DoctorRun,
) {
    let store = match store {
        Ok(store) => store,
        Err(e) => {
            run.unreachable = true;
            run.checks.push(Check::problem(
                "store",
                e,
                "fix --store / OUTBOX_ARCHIVER_STORE, the endpoint and the credentials",
            ));
            return;
        }
    };
    let location = store.store().location().to_string();
    if let Err(e) = store.store().confirm_access().await {
        run.unreachable = e.is_configuration();
        run.checks.push(Check::problem(
            "store",
            format!("{location}: {e}"),
            "fix --store, the endpoint, the credentials or the bucket policy (s3:ListBucket on the prefix)",
        ));
        return;
    }
    run.checks.push(Check::ok(
        "store",
        format!("{location} is reachable and listable"),
    ));
    let s3 = match store {
        DoctorStore::S3(s3) => s3,
        DoctorStore::Other(_) => {
            run.checks.push(Check::warning(
                "bucket",
                "a file:// folder keeps no versions, Object Lock retention or encryption",
                "archive financial records to an s3:// bucket with versioning and Object Lock",
            ));
            return;
        }
    };
    run.checks.push(region(s3).await);
    let lock_config = s3.lock_configuration().await;
    let mut probed = DoctorRun::default();
    let probe_version = probe(
        s3,
        opts,
        lock_config.as_ref().ok().cloned(),
        now_ms,
        &mut probed,
    )
    .await;
    run.checks.push(versioning(s3, probe_version).await);
    run.checks.push(object_lock(&lock_config, opts, now_ms));
    run.checks.push(default_encryption(s3).await);
    if let Some(check) = kms_key(s3).await {
        run.checks.push(check);
    }
    run.checks.push(conditional_put(s3).await);
    run.checks.append(&mut probed.checks);
    run.probe_objects_left
        .append(&mut probed.probe_objects_left);
}

/// The region requests are signed for, where it came from, and whether it is the bucket's.
async fn region(s3: &S3Store) -> Check {
    let (signed, source) = s3.region();
    let fix = |region: &str| {
        format!("set --s3-region / OUTBOX_ARCHIVER_S3_REGION (or AWS_REGION) to {region}")
    };
    match s3.bucket_region().await {
        Ok(Some(bucket)) if bucket != signed => Check::problem(
            "region",
            format!(
                "requests are signed for {signed} ({source}), but {} is in {bucket}: AWS S3 refuses or redirects them",
                bucket_of(s3)
            ),
            fix(&bucket),
        ),
        Ok(Some(_)) => Check::ok(
            "region",
            format!("{signed} ({source}), the bucket's own region"),
        ),
        Ok(None) | Err(_) if source == crate::store::s3::NO_REGION && !s3.custom_endpoint() => {
            Check::warning(
                "region",
                format!("no region is set: requests are signed for {signed}, and the bucket's region could not be read"),
                fix("the bucket's region"),
            )
        }
        Ok(None) | Err(_) => Check::ok(
            "region",
            format!("{signed} ({source}); the store does not report the bucket's region"),
        ),
    }
}

/// The bucket's versioning, as GetBucketVersioning says, or else as the probe object's version
/// id shows it (a store whose answer cannot be read, or a role without the permission).
async fn versioning(s3: &S3Store, probe_version: Option<Option<String>>) -> Check {
    let fix = format!(
        "enable it: aws s3api put-bucket-versioning --bucket {} --versioning-configuration Status=Enabled (Object Lock needs it too)",
        bucket_of(s3)
    );
    let lost = "an overwrite or a delete destroys an archived object for good";
    let asked = s3.versioning().await;
    let versioning = match (&asked, &probe_version) {
        (Ok(v), _) => *v,
        (Err(_), Some(Some(_))) => Versioning::Enabled,
        (Err(_), Some(None)) => Versioning::Off,
        (Err(e), None) => {
            return Check::warning(
                "bucket_versioning",
                format!("cannot tell: {e}"),
                "allow s3:GetBucketVersioning to the job's role (deploy/iam-policy.json)",
            )
        }
    };
    let how = match &asked {
        Ok(_) => String::new(),
        Err(StoreError::AccessDenied { .. }) => {
            " (as the probe object's version id shows; GetBucketVersioning was denied)".into()
        }
        // A store that does not implement GetBucketVersioning (s3s-fs, some gateways) or
        // answers it with an error: the probe's version id tells, and the error is named.
        Err(e) => format!(" (as the probe object's version id shows; the store answered GetBucketVersioning with an error: {e})"),
    };
    match versioning {
        Versioning::Enabled => Check::ok(
            "bucket_versioning",
            format!("enabled: an overwrite or delete keeps the archived version{how}"),
        ),
        Versioning::Suspended => {
            Check::problem("bucket_versioning", format!("suspended: {lost}{how}"), fix)
        }
        Versioning::Off => Check::problem(
            "bucket_versioning",
            format!("not enabled: {lost}{how}"),
            fix,
        ),
    }
}

fn object_lock(
    config: &Result<LockConfiguration, StoreError>,
    opts: &DoctorOptions,
    now_ms: i64,
) -> Check {
    let wanted = opts.policy.lock;
    let enable = "create the bucket with Object Lock (aws s3api create-bucket --object-lock-enabled-for-bucket …) or enable it on a versioned bucket (aws s3api put-object-lock-configuration … ObjectLockEnabled=Enabled)";
    match config {
        Ok(LockConfiguration { enabled: true, default }) => {
            let default_text = match default {
                Some((mode, length)) => format!("bucket default {mode} for {length}"),
                None => "no default retention".to_string(),
            };
            match (wanted, default) {
                // A retention named on a put replaces the bucket's default for that object.
                (Some((mode, retention)), Some((default_mode, default_retention)))
                    if mode < *default_mode
                        || retention.until_ms(now_ms) < default_retention.until_ms(now_ms) =>
                {
                    Check::problem(
                        "object_lock",
                        format!("archive writes {mode} retention of {retention}, weaker than the bucket's default {default_mode} for {default_retention}: a retention named on a put replaces the default, so archived objects would be less protected than the bucket promises"),
                        format!("set --object-lock-mode {} --retention {default_retention} (or longer), or unset both to let the bucket's default apply", default_mode.as_str().to_ascii_lowercase()),
                    )
                }
                (Some((mode, retention)), _) => Check::ok(
                    "object_lock",
                    format!("enabled ({default_text}); archive writes {mode} retention of {retention} on every object"),
                ),
                (None, Some(_)) => Check::ok(
                    "object_lock",
                    format!("enabled; every object gets the {default_text}"),
                ),
                (None, None) if opts.policy.legal_hold => Check::ok(
                    "object_lock",
                    "enabled, no default retention; archive puts a legal hold on every object",
                ),
                (None, None) => Check::warning(
                    "object_lock",
                    "enabled, but neither a default retention nor --object-lock-mode is set: archived objects are not locked",
                    "set --object-lock-mode compliance --retention 7y (or governance), or a default retention on the bucket",
                ),
            }
        }
        Ok(_) if wanted.is_some() || opts.policy.legal_hold => Check::problem(
            "object_lock",
            "not enabled on the bucket, but --object-lock-mode / --legal-hold are set: every put would be refused",
            enable,
        ),
        Ok(_) => Check::warning(
            "object_lock",
            "not enabled: nothing stops an archived object version from being deleted (no WORM retention)",
            format!("for records that must be kept (SEC 17a-4, FINRA, MiFID): {enable}, then --object-lock-mode compliance --retention 7y"),
        ),
        Err(StoreError::AccessDenied { detail }) => Check::warning(
            "object_lock",
            format!("cannot read the Object Lock configuration ({detail})"),
            "allow s3:GetBucketObjectLockConfiguration (deploy/iam-policy.json); the probe below still tries the retention",
        ),
        Err(e) => Check::warning("object_lock", e.to_string(), "see the message"),
    }
}

async fn default_encryption(s3: &S3Store) -> Check {
    let asked = s3.encryption();
    let asked_text = asked.map(|sse| match &sse.kms_key_id {
        Some(key) => format!(
            "every put asks for {} with key {key}",
            sse.algorithm.as_str()
        ),
        None => format!("every put asks for {}", sse.algorithm.as_str()),
    });
    match (s3.default_encryption().await, asked_text) {
        (Ok(Some(d)), asked) => {
            let key = d
                .kms_key_id
                .map(|k| format!(" with key {k}"))
                .unwrap_or_default();
            let bucket_key = if d.bucket_key { ", bucket key on" } else { "" };
            Check::ok(
                "default_encryption",
                format!(
                    "the bucket encrypts with {}{key}{bucket_key}{}",
                    d.algorithm,
                    asked.map(|a| format!("; {a}")).unwrap_or_default()
                ),
            )
        }
        (Ok(None), Some(asked)) => Check::ok(
            "default_encryption",
            format!("no default encryption on the bucket; {asked}"),
        ),
        (Ok(None), None) => Check::warning(
            "default_encryption",
            "the bucket reports no default encryption and --sse is not set",
            "set --sse aws:kms --sse-kms-key-id <key ARN> (or a default encryption on the bucket)",
        ),
        (Err(StoreError::AccessDenied { detail }), _) => Check::warning(
            "default_encryption",
            format!("cannot read the bucket's encryption ({detail})"),
            "allow s3:GetEncryptionConfiguration (deploy/iam-policy.json) so doctor can check it",
        ),
        (Err(e), _) => Check::warning("default_encryption", e.to_string(), "see the message"),
    }
}

async fn kms_key(s3: &S3Store) -> Option<Check> {
    let key = s3.encryption()?.kms_key_id.clone()?;
    Some(match s3.describe_kms_key(&key).await {
        Ok(Some(k)) if k.enabled => Check::ok("kms_key", format!("{key} is {} ({})", k.state, k.arn)),
        Ok(Some(k)) => Check::problem(
            "kms_key",
            format!("{key} is {} ({}): puts with it fail", k.state, k.arn),
            "enable the key in KMS, or name an enabled one with --sse-kms-key-id",
        ),
        Ok(None) => Check::problem(
            "kms_key",
            format!("KMS knows no key {key}"),
            "check --sse-kms-key-id / OUTBOX_ARCHIVER_SSE_KMS_KEY_ID: the key's ARN or id, in the bucket's region",
        ),
        Err(StoreError::AccessDenied { detail }) => Check::warning(
            "kms_key",
            format!("cannot describe {key} ({detail})"),
            "allow kms:DescribeKey on the key so doctor can check it; the probe put below uses it regardless",
        ),
        Err(e) => Check::warning(
            "kms_key",
            format!("could not ask KMS about {key}: {e}"),
            "the probe put below uses the key regardless",
        ),
    })
}

async fn conditional_put(s3: &S3Store) -> Check {
    let key = format::conditional_put_probe_key(s3.location().prefix());
    match s3.probe_conditional_put(&key).await {
        Ok(ConditionalPut::Honoured | ConditionalPut::Native) => Check::ok(
            "conditional_put",
            "the store refuses a create-only put (If-None-Match: *) at an existing key",
        ),
        Ok(ConditionalPut::Trusted) => Check::ok(
            "conditional_put",
            "--s3-conditional-put true: If-None-Match: * is sent without a probe",
        ),
        Ok(ConditionalPut::Off) => Check::ok(
            "conditional_put",
            "--s3-conditional-put false: every create-only put is HEAD-then-PUT",
        ),
        Ok(ConditionalPut::Ignored) => Check::warning(
            "conditional_put",
            "the store accepts If-None-Match: * and overwrites anyway; archive falls back to HEAD-then-PUT under the app's lock",
            "nothing to do; --s3-conditional-put false skips the probe",
        ),
        Err(e) => Check::problem(
            "conditional_put",
            format!("the probe put was refused: {e}"),
            "allow s3:PutObject under the prefix (deploy/iam-policy.json)",
        ),
    }
}

fn bucket_of(s3: &S3Store) -> String {
    match s3.location() {
        crate::store::Location::S3 { bucket, .. } => bucket.clone(),
        other => other.to_string(),
    }
}
