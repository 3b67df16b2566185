//! Objects whose bytes are the archived ones under a new identity (SPEC §5.17, issue 42), through
//! the binary on moto with versioning: a relocation to a copy (every object a new version) re-reads
//! every batch there and records the new versions, so that verify at the new home is clean and
//! stays clean; a copy missing or damaging a batch is refused with nothing moved; an object
//! restored from versioning (copy-object of the archived version) is recorded by
//! `verify --batch-id`, which reads it in full — until then verify reports it and purge leaves its
//! batch; bytes that are not the archived ones are never recorded.

use crate::support::moto::{Bucket, MotoS3};
use crate::support::*;
use serde_json::Value as Json;

const ARCHIVE: &[&str] = &[
    "archive",
    "--all-apps",
    "--batch-rows",
    "10",
    "--cutoff",
    "2026-01-02",
];

/// A database with `rows` of each app, archived in batches of 10 to a versioned moto bucket.
async fn archived(apps: &[(&str, i64)]) -> (TestDb, MotoS3, Vec<(&'static str, String)>) {
    let db = TestDb::new().await;
    for (app, n) in apps {
        db.insert(&rows(app, *n)).await;
    }
    let moto = MotoS3::new(Bucket::Versioned).await;
    let mut envs = moto.env();
    envs.push(("DATABASE_URL", db.url.clone()));
    envs.push(("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()));
    let run = run_cli(ARCHIVE, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    (db, moto, envs)
}

/// `envs` with `--store` replaced by `store`.
fn with_store(envs: &[(&'static str, String)], store: &str) -> Vec<(&'static str, String)> {
    let mut envs: Vec<_> = envs
        .iter()
        .filter(|(k, _)| *k != "OUTBOX_ARCHIVER_STORE")
        .cloned()
        .collect();
    envs.push(("OUTBOX_ARCHIVER_STORE", store.to_string()));
    envs
}

/// A key as a copy source names it: percent-encoded, `/` kept.
fn encoded(key: &str) -> String {
    key.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Every key in `moto`'s bucket.
async fn all_keys(moto: &MotoS3) -> Vec<String> {
    let mut keys = Vec::new();
    let mut token = None;
    loop {
        let page = moto
            .admin
            .list_objects_v2()
            .bucket(&moto.bucket)
            .set_continuation_token(token)
            .send()
            .await
            .unwrap();
        keys.extend(
            page.contents()
                .iter()
                .filter_map(|o| o.key().map(str::to_string)),
        );
        token = page.next_continuation_token().map(str::to_string);
        if token.is_none() {
            return keys;
        }
    }
}

/// Copies every object of `from`'s bucket to `to`'s with S3's copy-object (as `aws s3 sync`
/// does: every copy a new version), but the keys `skip` names.
async fn copy_bucket(from: &MotoS3, to: &MotoS3, skip: impl Fn(&str) -> bool) -> usize {
    let mut copied = 0;
    for key in all_keys(from).await {
        if skip(&key) {
            continue;
        }
        copy_object(from, &key, None, to).await;
        copied += 1;
    }
    copied
}

/// Copies `key` (its `version`, or its current one) from `from`'s bucket to the same key in `to`'s.
async fn copy_object(from: &MotoS3, key: &str, version: Option<&str>, to: &MotoS3) {
    let mut source = format!("{}/{}", from.bucket, encoded(key));
    if let Some(version) = version {
        source.push_str(&format!("?versionId={version}"));
    }
    to.admin
        .copy_object()
        .bucket(&to.bucket)
        .key(key)
        .copy_source(source)
        .send()
        .await
        .unwrap_or_else(|e| panic!("copying {key}: {e:?}"));
}

/// Writes `bytes` over `key` in `moto`'s bucket (a new version).
async fn put_object(moto: &MotoS3, key: &str, bytes: Vec<u8>) {
    moto.admin
        .put_object()
        .bucket(&moto.bucket)
        .key(key)
        .body(bytes.into())
        .send()
        .await
        .unwrap();
}

async fn get_object(moto: &MotoS3, key: &str) -> Vec<u8> {
    let out = moto
        .admin
        .get_object()
        .bucket(&moto.bucket)
        .key(key)
        .send()
        .await
        .unwrap();
    out.body.collect().await.unwrap().into_bytes().to_vec()
}

/// Every receipt of `app` as (batch_id, data_object_key, data_version_id), in cursor order.
async fn receipts(db: &TestDb, app: &str) -> Vec<(String, String, Option<String>)> {
    sqlx::query_as(
        "SELECT batch_id, data_object_key, data_version_id FROM wallet_outbox_archive_receipts \
         WHERE app_code = ? ORDER BY last_updated_at_ms, last_event_id",
    )
    .bind(app)
    .fetch_all(&db.db.pool)
    .await
    .unwrap()
}

fn findings(run: &Run) -> Vec<Json> {
    run.summary["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn kinds_of(run: &Run, batch: &str) -> Vec<String> {
    let mut kinds: Vec<String> = findings(run)
        .iter()
        .filter(|f| f["batch_id"] == batch)
        .map(|f| f["kind"].as_str().unwrap().to_string())
        .collect();
    kinds.sort();
    kinds
}

fn purge_app(run: &Run, app: &str) -> Json {
    run.summary["apps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["app_code"] == app)
        .cloned()
        .unwrap_or_else(|| panic!("no app {app}: {}", run.summary))
}

const PURGE: &[&str] = &["purge", "--all-apps", "--grace", "0s"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relocate_to_a_copy_rereads_every_batch_and_verify_there_stays_clean() {
    let (db, old, envs) = archived(&[("a1", 35), ("a2", 20)]).await;
    let batches = receipts(&db, "a1").await.len() + receipts(&db, "a2").await.len();
    assert_eq!(batches, 6);
    let new = MotoS3::new(Bucket::Versioned).await;
    assert!(copy_bucket(&old, &new, |_| false).await > 3 * batches);
    let run = run_cli(
        &[
            "relocate",
            "--to",
            &new.store_url(),
            "--reason",
            "region move",
            "--progress-every",
            "1ms",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    // A long re-read shows its progress: batches of all, and the bytes read so far.
    assert!(
        run.all_output.contains(&format!("/{batches} batches"))
            && run.all_output.contains("MB of data objects read"),
        "{}",
        run.all_output
    );
    let moved = with_store(&envs, &new.store_url());
    for _ in 0..2 {
        let verified = run_cli(&["verify"], &moved).await;
        assert_eq!(verified.code, 0, "{}", verified.all_output);
        assert!(findings(&verified).is_empty(), "{}", verified.summary);
    }
    assert_eq!(run.summary["checked_batches"], batches, "{}", run.summary);
    assert_eq!(run.summary["recorded_versions"], batches, "{}", run.summary);
    // Every receipt now holds the copy's version of its data object.
    for app in ["a1", "a2"] {
        for (batch, key, version) in receipts(&db, app).await {
            assert_eq!(
                version,
                new.versions(&key).await.first().cloned(),
                "batch {batch}"
            );
        }
    }
    // history shows the move and what it checked: each batch with its old and new version.
    let history = run_cli(&["history", "--command", "relocate"], &moved).await;
    let recorded = &history.summary["runs"][0]["recorded_versions"];
    assert_eq!(recorded["count"], batches, "{}", history.summary);
    let first = &recorded["first"][0];
    assert_eq!(first["cause"], "relocate", "{first}");
    assert_ne!(first["old_data_version_id"], first["new_data_version_id"]);
    assert_eq!(first["gzip_sha256"].as_str().unwrap().len(), 64, "{first}");
    // Purge at the new home agrees with verify: every batch is clean, every row goes.
    let run = run_cli(PURGE, &moved).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(purge_app(&run, "a1")["purged_rows"], 35, "{}", run.summary);
    assert_eq!(purge_app(&run, "a2")["purged_rows"], 20, "{}", run.summary);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_missing_a_middle_batch_is_refused_and_nothing_moves() {
    let (db, old, envs) = archived(&[("a1", 35)]).await;
    let batches = receipts(&db, "a1").await;
    let (middle, middle_key, _) = batches[1].clone();
    let new = MotoS3::new(Bucket::Versioned).await;
    copy_bucket(&old, &new, |k| k == middle_key).await;
    let relocate = [
        "relocate",
        "--to",
        &new.store_url(),
        "--reason",
        "region move",
    ];
    let run = run_cli(&relocate, &envs).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let error = run.summary["error"].as_str().unwrap();
    for word in [
        middle.as_str(),
        middle_key.as_str(),
        "missing_object",
        "Copy those objects",
    ] {
        assert!(error.contains(word), "{word}: {error}");
    }
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_home")
            .await,
        1,
        "nothing moved"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_object_versions")
            .await,
        0,
        "nothing recorded"
    );
    assert_eq!(run_cli(&["verify"], &envs).await.code, 0, "the old home");
    copy_object(&old, &middle_key, None, &new).await;
    // The sentinel stops the re-read before any batch: nothing moves.
    let dir = tempfile::tempdir().unwrap();
    let sentinel = dir.path().join("stop");
    std::fs::write(&sentinel, b"").unwrap();
    let mut stopped: Vec<&str> = relocate.to_vec();
    stopped.extend(["--sentinel", sentinel.to_str().unwrap()]);
    let run = run_cli(&stopped, &envs).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let error = run.summary["error"].as_str().unwrap();
    assert!(
        error.contains("stopped before every batch was re-read (sentinel file")
            && error.contains("nothing moved"),
        "{error}"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_object_versions")
            .await,
        0,
        "nothing recorded"
    );
    // Copied, and not stopped, it moves.
    let run = run_cli(&relocate, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_restored_from_versioning_is_recorded_by_verify_batch_id_and_clean_since() {
    let (db, moto, envs) = archived(&[("a1", 35)]).await;
    let (batch, key, archived_version) = receipts(&db, "a1").await[1].clone();
    let archived_version = archived_version.expect("a versioned bucket reports versions");
    // Deleted by mistake, then restored as README says: copy-object of the archived version.
    moto.admin
        .delete_object()
        .bucket(&moto.bucket)
        .key(&key)
        .send()
        .await
        .unwrap();
    copy_object(&moto, &key, Some(&archived_version), &moto).await;
    let restored_version = moto.versions(&key).await[0].clone();
    assert_ne!(restored_version, archived_version);

    // A verify not asked for the batch reports it, saying its bytes are the archived ones and
    // how to record them; purge leaves the batch (the same bytes, the same verdict).
    let run = run_cli(&["verify"], &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert_eq!(
        kinds_of(&run, &batch),
        ["object_replaced"],
        "{}",
        run.summary
    );
    let hint = findings(&run)[0]["actual"].as_str().unwrap().to_string();
    assert!(
        hint.contains("archived ones") && hint.contains(&format!("verify --batch-id {batch}")),
        "{hint}"
    );
    let run = run_cli(PURGE, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    let app = purge_app(&run, "a1");
    assert_eq!(app["failed_batches"], serde_json::json!([batch]), "{app}");
    assert_eq!(app["purged_rows"], 25, "{app}");

    // verify --batch-id reads it in full and records the new version, with its evidence.
    let run = run_cli(&["verify", "--batch-id", &batch], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let recorded = &run.summary["recorded_versions"][0];
    assert_eq!(recorded["batch_id"], batch.as_str(), "{}", run.summary);
    assert_eq!(recorded["old_data_version_id"], archived_version.as_str());
    assert_eq!(recorded["new_data_version_id"], restored_version.as_str());
    assert_eq!(
        receipts(&db, "a1").await[1].2.as_deref(),
        Some(restored_version.as_str())
    );
    let history = run_cli(&["history", "--command", "verify", "--last", "1"], &envs).await;
    let seen = &history.summary["runs"][0]["recorded_versions"];
    assert_eq!(seen["count"], 1, "{}", history.summary);
    assert_eq!(seen["first"][0]["cause"], "verify", "{seen}");
    assert_eq!(
        seen["first"][0]["new_data_version_id"],
        restored_version.as_str()
    );
    let (code, text) = run_cli_text(
        &["history", "--command", "verify", "--format", "table"],
        &envs,
    )
    .await;
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(&restored_version), "{text}");

    // Clean since, for verify and purge alike.
    for _ in 0..2 {
        let run = run_cli(&["verify"], &envs).await;
        assert_eq!(run.code, 0, "{}", run.all_output);
    }
    // And for attest: the findings verify and purge noted on the receipt are older than the
    // whole reading the recording verify noted after them, so a statement vouches again.
    let (findings_at, whole_at): (Option<i64>, Option<i64>) = sqlx::query_as(
        "SELECT last_findings_at_ms, full_verified_at_ms FROM wallet_outbox_archive_receipts WHERE batch_id = ?",
    )
    .bind(&batch)
    .fetch_one(&db.db.pool)
    .await
    .unwrap();
    let findings_at = findings_at.expect("verify and purge noted object_replaced on the receipt");
    assert!(
        whole_at.is_some_and(|whole| whole > findings_at),
        "the recording verify's whole reading ({whole_at:?}) is after the findings ({findings_at})"
    );
    let run = run_cli(PURGE, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(purge_app(&run, "a1")["purged_rows"], 10, "{}", run.summary);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_bytes_under_a_new_version_stay_a_finding_and_are_never_recorded() {
    let (db, old, envs) = archived(&[("a1", 35)]).await;
    let batches = receipts(&db, "a1").await;
    // A copy whose middle batch holds other bytes of the same size: the relocation is refused.
    let (middle, middle_key, _) = batches[1].clone();
    let new = MotoS3::new(Bucket::Versioned).await;
    copy_bucket(&old, &new, |_| false).await;
    let mut bytes = get_object(&new, &middle_key).await;
    let at = bytes.len() / 2;
    bytes[at] ^= 0x10;
    put_object(&new, &middle_key, bytes).await;
    let run = run_cli(
        &[
            "relocate",
            "--to",
            &new.store_url(),
            "--reason",
            "region move",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let error = run.summary["error"].as_str().unwrap();
    for word in [middle.as_str(), middle_key.as_str(), "sha256_mismatch"] {
        assert!(error.contains(word), "{word}: {error}");
    }
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_home")
            .await,
        1,
        "nothing moved"
    );

    // At home, the data object of a batch written again with another batch's bytes: asked by
    // id, verify reads it and reports it; nothing is recorded, the next run says the same.
    let (batch, key, version) = batches[0].clone();
    let other = get_object(&old, &batches[2].1).await;
    put_object(&old, &key, other).await;
    for _ in 0..2 {
        let run = run_cli(&["verify", "--batch-id", &batch], &envs).await;
        assert_eq!(run.code, 1, "{}", run.all_output);
        let kinds = kinds_of(&run, &batch);
        assert!(
            kinds.contains(&"sha256_mismatch".to_string())
                && kinds.contains(&"object_replaced".to_string()),
            "{}",
            run.summary
        );
        assert!(
            run.summary["recorded_versions"]
                .as_array()
                .is_none_or(|r| r.is_empty()),
            "{}",
            run.summary
        );
        let replaced = findings(&run)
            .into_iter()
            .find(|f| f["kind"] == "object_replaced")
            .unwrap();
        assert!(
            !replaced["actual"]
                .as_str()
                .unwrap()
                .contains("archived ones"),
            "{replaced}"
        );
    }
    assert_eq!(receipts(&db, "a1").await[0].2, version, "unchanged");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_object_versions")
            .await,
        0
    );
    let run = run_cli(PURGE, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert_eq!(
        purge_app(&run, "a1")["failed_batches"],
        serde_json::json!([batch])
    );
}
