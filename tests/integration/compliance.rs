//! Archival buckets as payment teams run them, against moto's S3 server (Object Lock, storage
//! classes, SSE-KMS, KMS): retention on every object and in the receipt, a compliance lock that
//! outlives a mistaken delete, retention and key mismatches found by verify, a DEEP_ARCHIVE batch
//! verified by the store's checksum and thawed, and a store that ignores what was asked for
//! failing the batch instead of recording it.

use outbox_archiver::format::Key;
use outbox_archiver::Selection;
use outbox_archiver::{restore, restore::RestoreOptions};
use outbox_archiver::{verify, verify::VerifyOptions};
use outbox_archiver::{
    LockMode, ObjectLock, Retention, Sse, SseAlgorithm, Thaw, ThawTier, VerifiedBy, WritePolicy,
};
use std::sync::Arc;

use outbox_archiver::{ObjectStore, ThawState, UploadChecksum};

use crate::support::moto::{Bucket, MotoS3};
use crate::support::*;

const CUTOFF: i64 = T0 + DAY;

/// The receipt columns of migration 6 for `app`'s receipts, oldest first.
async fn protection_columns(
    db: &TestDb,
    app: &str,
) -> Vec<(
    Option<String>,
    Option<i64>,
    bool,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
)> {
    sqlx::query_as(
        "SELECT object_lock_mode, retain_until_ms, legal_hold, storage_class, sse_algorithm, \
         sse_kms_key_id, verified_by FROM wallet_outbox_archive_receipts WHERE app_code = ? \
         ORDER BY last_updated_at_ms",
    )
    .bind(app)
    .fetch_all(&db.db.pool)
    .await
    .unwrap()
}

/// The three keys of the first batch in `summary`.
fn batch_keys(summary: &outbox_archiver::Summary) -> [String; 3] {
    let data = summary.apps[0].batch_list[0].data_object_key.clone();
    let dir = data.trim_end_matches("data.ndjson.gz");
    [
        data.clone(),
        format!("{dir}manifest.json"),
        format!("{dir}_SUCCESS"),
    ]
}

fn kinds(findings: &[outbox_archiver::Finding]) -> Vec<String> {
    findings.iter().map(kind).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compliance_locked_archive_outlives_a_mistaken_delete() {
    let db = TestDb::new().await;
    let moto = MotoS3::new(Bucket::Locked).await;
    let store = moto.store().await;
    db.insert(&rows("a1", 40)).await;
    let now = T0 + 2 * DAY;
    let mut opts = options(&db, &["a1"], CUTOFF);
    opts.policy = WritePolicy {
        lock: Some((LockMode::Compliance, Retention::Years(7))),
        ..WritePolicy::default()
    };
    let ctx = env(&db, store.clone(), now);
    let summary = archive(&ctx, &opts).await;
    assert!(summary.ok, "{}", summary.to_json());

    // Counted from the clock passed in, seven calendar years, on every object and the receipt.
    let until = Retention::Years(7).until_ms(now);
    assert_eq!(until, 1_988_323_200_000, "2033-01-03T00:00:00Z");
    let recorded = protection_columns(&db, "a1").await;
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].0.as_deref(), Some("COMPLIANCE"));
    assert_eq!(recorded[0].1, Some(until));
    assert_eq!(recorded[0].6, "read_back");
    let keys = batch_keys(&summary);
    for key in &keys {
        let meta = store
            .head(&Key::stored(key.clone()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            meta.lock,
            Some(ObjectLock {
                mode: LockMode::Compliance,
                retain_until_ms: until
            }),
            "{key}"
        );
    }

    // A mistaken delete of the archived version is refused by the store...
    let data_key = &keys[0];
    let versions = moto.versions(data_key).await;
    assert_eq!(versions.len(), 1);
    let refused = moto
        .admin
        .delete_object()
        .bucket(&moto.bucket)
        .key(data_key)
        .version_id(&versions[0])
        .send()
        .await;
    assert!(
        refused.is_err(),
        "a compliance-locked version cannot be deleted"
    );
    // ... and a delete without a version only hides it behind a delete marker: verify and
    // purge see the object gone and delete nothing; removing the marker brings the proof back.
    let marker = moto
        .admin
        .delete_object()
        .bucket(&moto.bucket)
        .key(data_key)
        .send()
        .await
        .unwrap();
    let verified = verify::run(&ctx, &VerifyOptions::everything(CUTOFF, "DELIVERED")).await;
    assert_eq!(verified.exit_code, 1);
    assert_eq!(
        kinds(&verify_run(&verified).findings),
        vec!["missing_object"]
    );
    let purged = outbox_archiver::purge::run(&ctx, &purge_options(&db, &["a1"])).await;
    assert_eq!(purge_of(&purged, "a1").purged_rows, 0);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 40);
    moto.admin
        .delete_object()
        .bucket(&moto.bucket)
        .key(data_key)
        .version_id(marker.version_id().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(
        moto.versions(data_key).await,
        versions,
        "the archived version is untouched"
    );
    let verified = verify::run(&ctx, &VerifyOptions::everything(CUTOFF, "DELIVERED")).await;
    assert!(verified.ok, "{}", verified.to_json());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_governance_retention_shows_on_head_and_a_shortened_one_is_a_finding() {
    let db = TestDb::new().await;
    let moto = MotoS3::new(Bucket::Locked).await;
    let store = moto.store().await;
    db.insert(&rows("a1", 25)).await;
    // A real clock: the retention must still run when the test shortens it.
    let now = chrono::Utc::now().timestamp_millis();
    let mut opts = options(&db, &["a1"], CUTOFF);
    opts.policy = WritePolicy {
        lock: Some((LockMode::Governance, Retention::parse("30d").unwrap())),
        legal_hold: true,
        ..WritePolicy::default()
    };
    let ctx = env(&db, store.clone(), now);
    let summary = archive(&ctx, &opts).await;
    assert!(summary.ok, "{}", summary.to_json());
    let until = Retention::Millis(30 * DAY).until_ms(now);
    let keys = batch_keys(&summary);
    for key in &keys {
        let meta = store
            .head(&Key::stored(key.clone()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            meta.lock.map(|l| (l.mode, l.retain_until_ms)),
            Some((LockMode::Governance, until)),
            "{key}"
        );
        assert!(meta.legal_hold, "{key} is under a legal hold");
    }
    let recorded = protection_columns(&db, "a1").await;
    assert_eq!(
        (recorded[0].0.as_deref(), recorded[0].1, recorded[0].2),
        (Some("GOVERNANCE"), Some(until), true)
    );
    let everything = VerifyOptions::everything(CUTOFF, "DELIVERED");
    let verified = verify::run(&ctx, &everything).await;
    assert!(verified.ok, "{}", verified.to_json());

    // Someone with s3:BypassGovernanceRetention shortens the manifest's retention to a day.
    let shorter = aws_smithy_types::DateTime::from_millis(now + DAY);
    moto.admin
        .put_object_retention()
        .bucket(&moto.bucket)
        .key(&keys[1])
        .bypass_governance_retention(true)
        .retention(
            aws_sdk_s3::types::ObjectLockRetention::builder()
                .mode(aws_sdk_s3::types::ObjectLockRetentionMode::Governance)
                .retain_until_date(shorter)
                .build(),
        )
        .send()
        .await
        .unwrap();
    for metadata_only in [false, true] {
        let verified = verify::run(
            &ctx,
            &VerifyOptions {
                metadata_only,
                ..everything.clone()
            },
        )
        .await;
        assert_eq!(verified.exit_code, 1, "{}", verified.to_json());
        let findings = &verify_run(&verified).findings;
        assert_eq!(kinds(findings), vec!["retention_mismatch"]);
        assert_eq!(findings[0].key.as_deref(), Some(keys[1].as_str()));
        assert!(
            findings[0]
                .actual
                .as_deref()
                .unwrap()
                .starts_with("GOVERNANCE until"),
            "{:?}",
            findings[0]
        );
    }
    // Purge will not delete rows whose proof is weaker than its receipt says.
    let purged = outbox_archiver::purge::run(&ctx, &purge_options(&db, &["a1"])).await;
    assert_eq!(purged.exit_code, 1);
    assert_eq!(purge_of(&purged, "a1").purged_rows, 0);
    assert_eq!(
        kinds(&purge_of(&purged, "a1").findings),
        vec!["retention_mismatch"]
    );
}

/// `n` rows of app a1 archived (clock T0 + 2 days) into a versioned moto bucket with the data
/// object in `class`, uploaded with `checksum`.
async fn archived_in_class(
    class: &str,
    checksum: UploadChecksum,
    n: i64,
) -> (
    TestDb,
    Arc<dyn ObjectStore>,
    outbox_archiver::RunContext,
    outbox_archiver::Summary,
) {
    let db = TestDb::new().await;
    let mut moto = MotoS3::new(Bucket::Versioned).await;
    moto.settings.upload_checksum = Some(checksum);
    let store = moto.store().await;
    db.insert(&rows("a1", n)).await;
    let ctx = env(&db, store.clone(), T0 + 2 * DAY);
    let mut opts = options(&db, &["a1"], CUTOFF);
    opts.policy.storage_class = Some(class.into());
    let summary = archive(&ctx, &opts).await;
    (db, store, ctx, summary)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deep_archive_batch_is_verified_by_the_store_checksum_then_thawed_and_restored() {
    let (db, store, ctx, summary) =
        archived_in_class("DEEP_ARCHIVE", UploadChecksum::Crc64nvme, 60).await;
    assert!(summary.ok, "{}", summary.to_json());
    let keys = batch_keys(&summary);
    // The data object cannot be read back: the store's own checksum stood in for the read.
    let got = outbox_archiver::get_all(store.as_ref(), &Key::stored(keys[0].clone())).await;
    assert!(
        matches!(got, Err(outbox_archiver::StoreError::NotReadable { .. })),
        "{got:?}"
    );
    let recorded = protection_columns(&db, "a1").await;
    assert_eq!(recorded[0].3.as_deref(), Some("DEEP_ARCHIVE"));
    assert_eq!(recorded[0].6, VerifiedBy::StoreChecksum.as_str());
    // manifest.json and _SUCCESS stay in STANDARD (small; read at once).
    assert_eq!(
        store
            .head(&Key::stored(keys[1].clone()))
            .await
            .unwrap()
            .unwrap()
            .storage_class,
        None
    );

    // verify: a metadata check of the data object, reported pending, not a failure.
    let everything = VerifyOptions::everything(CUTOFF, "DELIVERED");
    let verified = verify::run(&ctx, &everything).await;
    assert!(verified.ok, "{}", verified.to_json());
    let run = verify_run(&verified);
    assert_eq!(run.checked_batches.len(), 1);
    assert_eq!(run.pending_thaw.len(), 1);
    assert_eq!(
        (run.pending_thaw[0].key.as_str(), run.pending_thaw[0].thaw),
        (keys[0].as_str(), ThawState::NotRequested)
    );
    // restore cannot load it, and says how to get there.
    let restored = restore::run(&ctx, &RestoreOptions::default()).await;
    assert_eq!(restored.exit_code, 1);
    let error = report(&restored, "a1").error.clone().unwrap();
    assert!(error.contains("--thaw"), "{error}");
    assert_eq!(restore_of(&restored, "a1").restored_rows, 0);

    // --thaw asks the store to restore it (moto restores at once; AWS takes hours) ...
    let thaw = Thaw {
        days: 1,
        tier: ThawTier::Bulk,
    };
    let thawing = VerifyOptions {
        thaw: Some(thaw),
        ..everything.clone()
    };
    let verified = verify::run(&ctx, &thawing).await;
    assert!(verified.ok, "{}", verified.to_json());
    assert_eq!(
        verify_run(&verified).pending_thaw[0].thaw,
        ThawState::Requested
    );
    // ... and the next run reads the restored copy in full.
    let before = store.stats().unwrap();
    let verified = verify::run(&ctx, &everything).await;
    assert!(verified.ok, "{}", verified.to_json());
    assert!(verify_run(&verified).pending_thaw.is_empty());
    // The batch's three objects, and the app's log: its checkpoint, its one tile and entry
    // bundle, and the look for a transition record.
    assert_eq!(store.stats().unwrap().since(&before).by_operation.get, 7);
    let restored = restore::run(
        &ctx,
        &RestoreOptions {
            thaw: Some(thaw),
            ..RestoreOptions::default()
        },
    )
    .await;
    assert!(restored.ok, "{}", restored.to_json());
    assert_eq!(restore_of(&restored, "a1").restored_rows, 60);
    assert_eq!(
        table_rows(&db, "wallet_outbox_restored", "a1").await,
        db.expected_rows("a1", CUTOFF).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_of_a_batch_still_in_deep_archive_asks_for_it_and_stops() {
    let (_db, _, ctx, summary) = archived_in_class("GLACIER", UploadChecksum::Sha256, 20).await;
    assert!(summary.ok, "{}", summary.to_json());
    let thaw = Some(Thaw {
        days: 2,
        tier: ThawTier::Standard,
    });
    let restore_opts = RestoreOptions {
        thaw,
        selection: Selection::default(),
        ..RestoreOptions::default()
    };
    let first = restore::run(&ctx, &restore_opts).await;
    assert_eq!(first.exit_code, 0, "{}", first.to_json());
    let app = report(&first, "a1");
    assert_eq!(app.outcome.as_str(), "stopped");
    assert!(
        app.stop_reason
            .as_ref()
            .map(ToString::to_string)
            .as_deref()
            .unwrap()
            .contains("cold storage"),
        "{:?}",
        app.stop_reason
    );
    assert_eq!(restore_of(&first, "a1").pending_thaw.len(), 1);
    assert_eq!(restore_of(&first, "a1").restored_rows, 0);
    let second = restore::run(&ctx, &restore_opts).await;
    assert!(second.ok, "{}", second.to_json());
    assert_eq!(report(&second, "a1").outcome.as_str(), "done");
    assert_eq!(restore_of(&second, "a1").restored_rows, 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_batch_the_store_cannot_vouch_for_is_refused_loudly() {
    // moto reports no checksum of an object uploaded with Content-MD5 only: with the data object
    // unreadable, nothing vouches for the stored bytes, and the batch is not recorded.
    let (db, _, _, summary) = archived_in_class("DEEP_ARCHIVE", UploadChecksum::Md5, 10).await;
    assert_eq!(summary.exit_code, 1, "{}", summary.to_json());
    let error = report(&summary, "a1").error.clone().unwrap();
    assert!(error.contains("store_checksum_missing"), "{error}");
    assert!(error.contains("--s3-upload-checksum crc64nvme"), "{error}");
    assert_eq!(db.receipts("a1").await.len(), 0, "nothing recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_under_another_kms_key_are_a_finding() {
    let db = TestDb::new().await;
    let mut moto = MotoS3::new(Bucket::Versioned).await;
    let (key_a, key_b) = (moto.kms_key().await, moto.kms_key().await);
    moto.settings.sse = Some(Sse {
        algorithm: SseAlgorithm::Kms,
        kms_key_id: Some(key_a.clone()),
        bucket_key: Some(true),
    });
    let store = moto.store().await;
    db.insert(&rows("a1", 15)).await;
    let ctx = env(&db, store.clone(), T0 + 2 * DAY);
    // GLACIER_IR can be read at once: the batch is read back as usual.
    let mut opts = options(&db, &["a1"], CUTOFF);
    opts.policy.storage_class = Some("GLACIER_IR".into());
    let summary = archive(&ctx, &opts).await;
    assert!(summary.ok, "{}", summary.to_json());
    let recorded = protection_columns(&db, "a1").await;
    assert_eq!(
        (recorded[0].4.as_deref(), recorded[0].5.as_deref()),
        (Some("aws:kms"), Some(key_a.as_str()))
    );
    assert_eq!(
        (recorded[0].3.as_deref(), recorded[0].6.as_str()),
        (Some("GLACIER_IR"), "read_back")
    );
    let everything = VerifyOptions::everything(CUTOFF, "DELIVERED");
    assert!(verify::run(&ctx, &everything).await.ok);

    // The same bytes written again under another key (a re-encryption nobody recorded), and
    // _SUCCESS without encryption at all: each is a finding.
    let keys = batch_keys(&summary);
    let bytes = read(store.as_ref(), &keys[0]).await;
    moto.admin
        .put_object()
        .bucket(&moto.bucket)
        .key(&keys[0])
        .server_side_encryption(aws_sdk_s3::types::ServerSideEncryption::AwsKms)
        .ssekms_key_id(&key_b)
        .body(bytes.into())
        .send()
        .await
        .unwrap();
    let success = read(store.as_ref(), &keys[2]).await;
    moto.admin
        .put_object()
        .bucket(&moto.bucket)
        .key(&keys[2])
        .body(success.into())
        .send()
        .await
        .unwrap();
    let verified = verify::run(&ctx, &everything).await;
    assert_eq!(verified.exit_code, 1);
    let findings = &verify_run(&verified).findings;
    let mut found: Vec<(String, String)> = findings
        .iter()
        .map(|f| (kind(f), f.key.clone().unwrap_or_default()))
        .collect();
    found.sort();
    // The data object written again is also another version than the one recorded at
    // read-back (object_replaced); `_SUCCESS`'s version is not recorded, its ETag is the same.
    let mut wanted = vec![
        ("encryption_mismatch".to_string(), keys[0].clone()),
        ("encryption_mismatch".to_string(), keys[2].clone()),
        ("object_replaced".to_string(), keys[0].clone()),
    ];
    wanted.sort();
    assert_eq!(found, wanted, "{findings:?}");
    let data = findings
        .iter()
        .find(|f| f.key.as_deref() == Some(&keys[0]) && kind(f) == "encryption_mismatch")
        .unwrap();
    assert_eq!(
        data.expected.as_deref(),
        Some(format!("aws:kms with key {key_a}").as_str())
    );
    assert_eq!(
        data.actual.as_deref(),
        Some(format!("aws:kms with key {key_b}").as_str())
    );
    // The bytes are still the archived ones: a restore in an incident is not refused for it.
    let restored = restore::run(&ctx, &RestoreOptions::default()).await;
    assert!(restored.ok, "{}", restored.to_json());
    assert_eq!(restore_of(&restored, "a1").restored_rows, 15);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_ignores_the_retention_fails_the_batch() {
    // The in-process s3s server accepts Object Lock headers and keeps no retention: the
    // read-back sees none, and nothing is recorded — retention is checked, not assumed.
    let (db, s3, store) = fixture().await;
    db.insert(&rows("a1", 10)).await;
    let ctx = env(&db, store.clone(), T0 + 2 * DAY);
    let mut opts = options(&db, &["a1"], CUTOFF);
    opts.policy.lock = Some((LockMode::Compliance, Retention::Years(7)));
    let summary = archive(&ctx, &opts).await;
    assert_eq!(summary.exit_code, 1, "{}", summary.to_json());
    let error = report(&summary, "a1").error.clone().unwrap();
    if s3.server.is_some() {
        assert!(error.contains("retention_mismatch"), "{error}");
    } else {
        // Another S3 server (OUTBOX_ARCHIVER_TEST_S3_ENDPOINT, e.g. MinIO without Object Lock)
        // refuses the headers outright.
        assert!(
            error.contains("Object Lock") || error.contains("retention"),
            "{error}"
        );
    }
    assert_eq!(db.receipts("a1").await.len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leftover_from_an_earlier_attempt_gets_the_batchs_retention() {
    // A crash after the data put: the rerun finds the object and must not record a receipt for
    // an object whose retention is shorter than the receipt says. It extends it.
    let db = TestDb::new().await;
    let moto = MotoS3::new(Bucket::Locked).await;
    let store = moto.store().await;
    db.insert(&rows("a1", 12)).await;
    let mut opts = options(&db, &["a1"], CUTOFF);
    opts.policy.lock = Some((LockMode::Governance, Retention::Millis(10 * DAY)));
    opts.failpoints = outbox_archiver::testing::FailPoints::at("after-data-put");
    let earlier = T0 + 2 * DAY;
    let first = archive(&env(&db, store.clone(), earlier), &opts).await;
    assert_eq!(
        first.exit_code, 1,
        "the attempt breaks off after the data put"
    );
    opts.failpoints = Default::default();
    let later = earlier + DAY;
    let second = archive(&env(&db, store.clone(), later), &opts).await;
    assert!(second.ok, "{}", second.to_json());
    let until = Retention::Millis(10 * DAY).until_ms(later);
    for key in batch_keys(&second) {
        let lock = store
            .head(&Key::stored(key.clone()))
            .await
            .unwrap()
            .unwrap()
            .lock
            .unwrap();
        assert_eq!(lock.retain_until_ms, until, "{key}");
    }
    assert_eq!(protection_columns(&db, "a1").await[0].1, Some(until));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protection_settings_that_cannot_work_are_refused_before_any_work() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let base = vec![
        ("DATABASE_URL", db.url.clone()),
        ("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()),
    ];
    let s3 = [("OUTBOX_ARCHIVER_STORE", "s3://bucket/p".to_string())];
    let file = [(
        "OUTBOX_ARCHIVER_STORE",
        format!("file://{}", dir.path().display()),
    )];
    // Arguments, the store's environment, and what the message must say.
    type Case<'a> = (Vec<&'a str>, &'a [(&'a str, String)], &'a str);
    let cases: Vec<Case> = vec![
        (
            vec!["--object-lock-mode", "compliance"],
            &s3,
            "--object-lock-mode needs --retention",
        ),
        (
            vec!["--retention", "7y"],
            &s3,
            "--retention needs --object-lock-mode",
        ),
        (
            vec![
                "--object-lock-mode",
                "governance",
                "--retention",
                "30d",
                "--s3-upload-checksum",
                "none",
            ],
            &s3,
            "need an upload checksum",
        ),
        (
            vec!["--s3-storage-class", "GLACIER_IR"],
            &file,
            "need an s3:// store",
        ),
    ];
    db.insert(&rows("a1", 3)).await;
    for (extra, store, message) in cases {
        let mut args = vec!["archive", "--app", "a1"];
        args.extend(extra.iter().copied());
        let mut envs = base.clone();
        envs.extend(store.iter().cloned());
        let run = run_cli(&args, &envs).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.all_output);
        assert!(
            run.all_output.contains(message),
            "{args:?}: {}",
            run.all_output
        );
    }
    assert_eq!(db.receipts("a1").await.len(), 0);
}
