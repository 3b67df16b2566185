//! `verify` against broken archives: each fixture is detected with the right finding; a clean
//! archive gives exit 0 and no findings; samples are reproducible; stragglers are found and
//! `archive --stragglers` archives exactly them without moving the cursor.

use outbox_archiver::format::Key;
use std::sync::Arc;

use bytes::Bytes;
use outbox_archiver::RunContext;
use outbox_archiver::Selection;
use outbox_archiver::Summary;
use outbox_archiver::{verify, verify::VerifyOptions};
use outbox_archiver::{Finding, FindingKind};
use outbox_archiver::{ObjectStore, PutMode};
use serde_json::Value as Json;

use crate::support::*;

const CUTOFF: i64 = T0 + 10 * DAY;

fn verify_options() -> VerifyOptions {
    VerifyOptions {
        parallel: 3,
        max_stragglers: 100,
        seed: 1,
        ..VerifyOptions::everything(CUTOFF, "DELIVERED")
    }
}

/// Three apps, several batches each, archived.
async fn archived() -> (TestDb, TestS3, Arc<dyn ObjectStore>, RunContext) {
    let (db, s3, store) = fixture().await;
    for app in ["a1", "a2", "a3"] {
        db.insert(
            &(0..90)
                .map(|i| row(app, &format!("{app}-{i:03}"), T0 + i * 1000))
                .collect::<Vec<_>>(),
        )
        .await;
    }
    let env = env(&db, store.clone(), CUTOFF);
    let mut opts = options(&db, &["a1", "a2", "a3"], CUTOFF);
    opts.limits.max_rows = 30;
    assert!(archive(&env, &opts).await.ok);
    (db, s3, store, env)
}

fn kinds(summary: &Summary) -> Vec<String> {
    verify_run(summary).findings.iter().map(kind).collect()
}

async fn first_keys(db: &TestDb) -> (String, String, String, String) {
    let (batch, data, _, _) = db.receipts("a2").await.remove(0);
    let dir = data.trim_end_matches("data.ndjson.gz").to_string();
    (
        batch,
        data,
        format!("{dir}manifest.json"),
        format!("{dir}_SUCCESS"),
    )
}

async fn flip(store: &dyn ObjectStore, key: &str) {
    let mut bytes = read(store, key).await;
    let at = bytes.len() / 2;
    bytes[at] ^= 0x04;
    store
        .put(&Key::stored(key), Bytes::from(bytes), PutMode::Overwrite)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_archive_has_no_findings() {
    let (_db, _s3, _store, env) = archived().await;
    let summary = verify::run(&env, &verify_options()).await;
    assert!(summary.ok, "{}", summary.to_json());
    assert_eq!(summary.exit_code, 0);
    let run = verify_run(&summary);
    assert_eq!(run.checked_batches.len(), 9);
    assert!(run.findings.is_empty());
    assert!(run.orphans.is_empty());
    assert!(summary.apps.iter().all(|a| a.batches == 3 && a.rows == 90));
    let meta = verify::run(
        &env,
        &VerifyOptions {
            metadata_only: true,
            ..verify_options()
        },
    )
    .await;
    assert!(meta.ok, "{}", meta.to_json());
}

/// One way to break the first batch of app a2 (rustic's `tests/fixtures/repo-*`, made on the
/// spot from a real archive).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Damage {
    FlipData,
    FlipManifest,
    FlipSuccess,
    TruncateGzip,
    DeleteSuccess,
    DeleteData,
    ManifestRowCount,
    DeleteMember,
    AddMember,
}

/// Each broken-archive fixture, a test of its own: the damage, the finding it must give, and the
/// key suffix the finding names ("" for a member row).
macro_rules! broken_archive_fixtures {
    ($($test:ident: $damage:ident => $kind:literal at $suffix:literal;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            a_broken_archive_is_found(Damage::$damage, $kind, $suffix).await;
        }
    )*};
}

broken_archive_fixtures! {
    a_flipped_byte_in_data_is_a_sha256_mismatch: FlipData => "sha256_mismatch" at "data.ndjson.gz";
    a_flipped_byte_in_the_manifest_is_a_sha256_mismatch: FlipManifest => "sha256_mismatch" at "manifest.json";
    a_flipped_byte_in_success_is_a_crc64_mismatch: FlipSuccess => "crc64_mismatch" at "_SUCCESS";
    a_truncated_gzip_is_unreadable_data: TruncateGzip => "unreadable_data" at "data.ndjson.gz";
    a_missing_success_is_a_missing_object: DeleteSuccess => "missing_object" at "_SUCCESS";
    a_missing_data_object_is_a_missing_object: DeleteData => "missing_object" at "data.ndjson.gz";
    a_manifest_that_disagrees_with_its_receipt_is_a_manifest_mismatch: ManifestRowCount => "manifest_mismatch" at "manifest.json#row_count";
    a_deleted_member_row_is_member_missing: DeleteMember => "member_missing" at "";
    an_added_member_row_is_member_extra: AddMember => "member_extra" at "";
}

/// Archives three apps, applies `damage`, and holds verify to exactly one broken batch: a finding
/// of `kind` on it (on the key ending in `key_suffix`), and nothing about any other batch.
async fn a_broken_archive_is_found(damage: Damage, kind: &str, key_suffix: &str) {
    let (db, _s3, store, env) = archived().await;
    let (batch, data, manifest, success) = first_keys(&db).await;
    let s = store.as_ref();
    let member: String = sqlx::query_scalar(
        "SELECT MIN(event_id) FROM wallet_outbox_archive_members WHERE batch_id = ?",
    )
    .bind(&batch)
    .fetch_one(&db.db.pool)
    .await
    .unwrap();
    match damage {
        Damage::FlipData => flip(s, &data).await,
        Damage::FlipManifest => flip(s, &manifest).await,
        Damage::FlipSuccess => flip(s, &success).await,
        Damage::TruncateGzip => {
            let bytes = read(s, &data).await;
            s.put(
                &Key::stored(data.clone()),
                Bytes::from(bytes[..bytes.len() - 9].to_vec()),
                PutMode::Overwrite,
            )
            .await
            .unwrap();
        }
        Damage::DeleteSuccess => s.delete(&Key::stored(success.clone())).await.unwrap(),
        Damage::DeleteData => s.delete(&Key::stored(data.clone())).await.unwrap(),
        Damage::ManifestRowCount => {
            let mut m: serde_json::Map<String, Json> =
                serde_json::from_slice(&read(s, &manifest).await).unwrap();
            m.insert("row_count".into(), Json::from(29));
            let mut bytes = serde_json::to_vec(&m).unwrap();
            bytes.push(b'\n');
            s.put(
                &Key::stored(manifest.clone()),
                Bytes::from(bytes),
                PutMode::Overwrite,
            )
            .await
            .unwrap();
        }
        Damage::DeleteMember => {
            sqlx::query(
                "DELETE FROM wallet_outbox_archive_members WHERE app_code = 'a2' AND event_id = ?",
            )
            .bind(&member)
            .execute(&db.db.pool)
            .await
            .unwrap();
        }
        Damage::AddMember => {
            sqlx::query(
                "INSERT INTO wallet_outbox_archive_members (app_code, event_id, updated_at_ms, batch_id) \
                 SELECT app_code, 'a2-invented', updated_at_ms, batch_id \
                 FROM wallet_outbox_archive_members WHERE app_code = 'a2' AND event_id = ?",
            )
            .bind(&member)
            .execute(&db.db.pool)
            .await
            .unwrap();
        }
    }
    let summary = verify::run(&env, &verify_options()).await;
    assert_eq!(summary.exit_code, 1, "{damage:?}: {}", summary.to_json());
    assert!(!summary.ok);
    let found = &verify_run(&summary).findings;
    let hit = found
        .iter()
        .find(|f| crate::support::kind(f) == kind)
        .unwrap_or_else(|| panic!("{damage:?}: no {kind} in {found:?}"));
    assert_eq!(hit.batch_id.as_ref(), Some(&batch), "{damage:?}");
    if !key_suffix.is_empty() {
        assert!(
            hit.key.as_deref().unwrap().ends_with(key_suffix),
            "{damage:?}: {hit}"
        );
    }
    // A deleted member also leaves its source row a straggler: the same event, no other batch.
    let related = |f: &Finding| {
        f.batch_id.as_ref() == Some(&batch)
            || (f.kind == FindingKind::Straggler && f.event_id.as_ref() == Some(&member))
    };
    assert!(
        found.iter().all(related),
        "{damage:?}: only the broken batch: {found:?}"
    );
    match damage {
        Damage::DeleteMember => assert_eq!(hit.event_id.as_ref(), Some(&member)),
        Damage::AddMember => assert_eq!(hit.event_id.as_deref(), Some("a2-invented")),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_only_sees_missing_and_resized_objects_without_downloading() {
    let (db, _s3, store, env) = archived().await;
    let (_, data, _, success) = first_keys(&db).await;
    store.delete(&Key::stored(success.clone())).await.unwrap();
    let bytes = read(store.as_ref(), &data).await;
    store
        .put(
            &Key::stored(data.clone()),
            Bytes::from(bytes[..bytes.len() - 1].to_vec()),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let summary = verify::run(
        &env,
        &VerifyOptions {
            metadata_only: true,
            ..verify_options()
        },
    )
    .await;
    let mut k = kinds(&summary);
    k.sort();
    // The truncated data object has another ETag than the one recorded at read-back.
    assert_eq!(
        k,
        ["missing_object", "object_replaced", "size_mismatch"],
        "{}",
        summary.to_json()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_samples_and_orphans() {
    let (db, _s3, store, env) = archived().await;
    let checked = |s: &Summary| verify_run(s).checked_batches.clone();
    let one = db.receipts("a3").await.remove(0).0;
    let by_id = verify::run(
        &env,
        &VerifyOptions {
            selection: Selection {
                batch_ids: vec![one.clone()],
                ..Selection::default()
            },
            ..verify_options()
        },
    )
    .await;
    assert_eq!(checked(&by_id), [one]);
    let by_app = verify::run(
        &env,
        &VerifyOptions {
            selection: Selection::of_apps(&["a1"]),
            ..verify_options()
        },
    )
    .await;
    assert_eq!(checked(&by_app).len(), 3);
    let by_time = verify::run(
        &env,
        &VerifyOptions {
            selection: Selection {
                from_ms: Some(T0 + 30_000),
                to_ms: Some(T0 + 60_000),
                ..Selection::default()
            },
            ..verify_options()
        },
    )
    .await;
    assert_eq!(
        checked(&by_time).len(),
        3,
        "the middle batch of each app: {}",
        by_time.to_json()
    );

    let sample = |seed| VerifyOptions {
        sample_percent: Some(50.0),
        seed,
        ..verify_options()
    };
    let first = verify::run(&env, &sample(42)).await;
    let again = verify::run(&env, &sample(42)).await;
    assert_eq!(
        checked(&first),
        checked(&again),
        "the same seed picks the same receipts"
    );
    let counts: Vec<usize> = (0..8).map(|seed| seed as usize).collect();
    let mut differs = false;
    for seed in counts {
        differs |= checked(&verify::run(&env, &sample(seed as u64)).await) != checked(&first);
    }
    assert!(differs, "other seeds pick other receipts");
    assert_eq!(verify_run(&first).sample.map(|s| s.seed), Some(42));

    // An interrupted run's leftover is an orphan: information, not a failure.
    let orphan = format!(
        "{}wallet_outbox/app_code=a1/dt=2026-01-01/ffffffffffffffffffffffffffffffff/data.ndjson.gz",
        store.location().prefix()
    );
    store
        .put(
            &Key::stored(orphan.clone()),
            Bytes::from_static(b"x"),
            PutMode::Create,
        )
        .await
        .unwrap();
    let with_orphan = verify::run(
        &env,
        &VerifyOptions {
            selection: Selection::of_apps(&["a1", "a2", "a3"]),
            ..verify_options()
        },
    )
    .await;
    assert!(with_orphan.ok, "{}", with_orphan.to_json());
    assert_eq!(
        verify_run(&with_orphan).orphans,
        std::slice::from_ref(&orphan)
    );
    let junk = format!("{}wallet_outbox/notes.txt", store.location().prefix());
    store
        .put(
            &Key::stored(junk.clone()),
            Bytes::from_static(b"x"),
            PutMode::Create,
        )
        .await
        .unwrap();
    let table_wide = verify::run(&env, &verify_options()).await;
    let mut expected = vec![orphan.clone(), junk];
    expected.sort();
    assert_eq!(
        verify_run(&table_wide).orphans,
        expected,
        "all apps: the whole table prefix"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stragglers_are_reported_and_archived_without_moving_the_cursor() {
    let (db, _s3, store, env) = archived().await;
    let cursor_before = db.count("SELECT MAX(last_updated_at_ms) FROM wallet_outbox_archive_receipts WHERE app_code = 'a1'").await;
    // Rows whose delivery committed late, with old updated_at_ms: below the cursor, in no receipt.
    db.insert(&[
        row("a1", "late-1", T0 + 5_500),
        row("a1", "late-2", T0 + 45_000),
        row("a1", "a1-08", T0 + 89_000),
    ])
    .await;
    let mut undelivered = row("a1", "late-pending", T0 + 6_000);
    undelivered[at("status")] = outbox_archiver::Value::Text("PENDING".into());
    db.insert(&[undelivered, row("a1", "after-cursor", T0 + 95_000)])
        .await;

    let summary = verify::run(&env, &verify_options()).await;
    assert_eq!(summary.exit_code, 1);
    let stragglers: Vec<&str> = verify_run(&summary)
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::Straggler)
        .map(|f| f.event_id.as_deref().unwrap())
        .collect();
    assert_eq!(
        stragglers,
        ["a1-08", "late-1", "late-2"],
        "{}",
        summary.to_json()
    );
    assert!(kinds(&summary).iter().all(|k| k == "straggler"));

    let mut opts = options(&db, &["a1"], CUTOFF);
    opts.stragglers = true;
    let archived = archive(&env, &opts).await;
    assert!(archived.ok, "{}", archived.to_json());
    assert_eq!(archived.apps[0].rows, 3, "exactly the stragglers");
    let cursor_after = db.count("SELECT MAX(last_updated_at_ms) FROM wallet_outbox_archive_receipts WHERE app_code = 'a1'").await;
    assert_eq!(cursor_after, cursor_before, "the cursor stays where it was");
    let clean = verify::run(&env, &verify_options()).await;
    assert!(clean.ok, "{}", clean.to_json());
    // The row after the cursor is for the next ordinary run.
    let next = archive(&env, &options(&db, &["a1"], CUTOFF)).await;
    assert_eq!(next.apps[0].rows, 1);
    let _ = store;
}

/// The straggler scan walks the rows beside the batches' ranges, a page of 500 keys at a time,
/// and looks up by event id only what no batch in reach holds: stragglers before the first row,
/// inside a batch's range, between two batches, at the pages' edges — and, once archived as a
/// straggler batch (whose range lies across the others'), none of them again; new ones then are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stragglers_are_found_across_pages_and_batches() {
    let (db, s3, store) = fixture().await;
    // 2,000 rows 10 ms apart: batches of 300, key pages of 500 across them.
    db.insert(
        &(0..2_000)
            .map(|i| {
                row(
                    "a1",
                    &format!("r{:016x}", (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                    T0 + i * 10,
                )
            })
            .collect::<Vec<_>>(),
    )
    .await;
    let env = env(&db, store.clone(), CUTOFF);
    let mut opts = options(&db, &["a1"], CUTOFF);
    opts.limits.max_rows = 300;
    assert!(archive(&env, &opts).await.ok);
    assert_eq!(db.receipts("a1").await.len(), 7);
    let stragglers = |when: &[(&str, i64)]| {
        when.iter()
            .map(|(id, ms)| row("a1", id, T0 + ms))
            .collect::<Vec<_>>()
    };
    let first = [
        ("s-before-all", -5),
        ("s-inside-batch-1", 1_234),
        ("s-between-batches", 2_995),
        ("s-page-edge-499", 4_990),
        ("s-page-edge-500", 5_000),
        ("s-same-ms-as-a-member", 10_000),
        ("s-last-batch", 19_985),
    ];
    db.insert(&stragglers(&first)).await;
    let found = |summary: &Summary| -> Vec<String> {
        let mut ids: Vec<String> = verify_run(summary)
            .findings
            .iter()
            .filter(|f| f.kind == FindingKind::Straggler)
            .map(|f| f.event_id.clone().unwrap())
            .collect();
        ids.sort();
        ids
    };
    let mut want: Vec<String> = first.iter().map(|(id, _)| id.to_string()).collect();
    want.sort();
    let summary = verify::run(&env, &verify_options()).await;
    assert_eq!(found(&summary), want, "{}", summary.to_json());
    assert!(kinds(&summary).iter().all(|k| k == "straggler"));
    assert!(verify_run(&summary).stragglers_truncated.is_empty());
    // At most five listed, asked of the built binary: the five lowest, and the app named as
    // having more.
    let mut envs = s3.binary_env();
    envs.push(("DATABASE_URL", db.url.clone()));
    let cutoff = CUTOFF.to_string();
    let five = run_cli(
        &["verify", "--max-stragglers", "5", "--cutoff", &cutoff],
        &envs,
    )
    .await;
    assert_eq!(five.code, 1, "findings: {}", five.all_output);
    let mut listed: Vec<&str> = five.summary["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            assert_eq!(f["kind"], "straggler", "{f}");
            f["event_id"].as_str().unwrap()
        })
        .collect();
    listed.sort();
    let mut lowest: Vec<&str> = first[..5].iter().map(|(id, _)| *id).collect();
    lowest.sort();
    assert_eq!(listed, lowest, "{}", five.all_output);
    assert_eq!(
        five.summary["stragglers_truncated"],
        serde_json::json!(["a1"])
    );

    let mut take = options(&db, &["a1"], CUTOFF);
    take.stragglers = true;
    let taken = archive(&env, &take).await;
    assert_eq!(taken.apps[0].rows, 7, "{}", taken.to_json());
    let second = [("t-inside-batch-3", 7_777), ("t-between-batches", 11_995)];
    db.insert(&stragglers(&second)).await;
    let summary = verify::run(&env, &verify_options()).await;
    assert_eq!(
        found(&summary),
        ["t-between-batches", "t-inside-batch-3"],
        "the straggler batch's rows are held, the new ones are not: {}",
        summary.to_json()
    );
    assert!(archive(&env, &take).await.ok);
    let clean = verify::run(&env, &verify_options()).await;
    assert!(clean.ok, "{}", clean.to_json());
}

/// Verify walks each app's keys beside its receipts one `dt=` partition at a time: over many
/// receipts and days, every orphan is still found —
/// in a day with receipts, in a day without any, before the first, after the last, outside any
/// partition, and under an app that has neither rows nor receipts — and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_are_found_partition_by_partition_over_many_receipts() {
    let (db, _s3, store) = fixture().await;
    // a1: 40 one-row batches over 4 days; a2: 3 batches.
    let a1: Vec<_> = (0..40)
        .map(|i| row("a1", &format!("a1-{i:04}"), T0 + (i % 4) * DAY + i))
        .collect();
    db.insert(&a1).await;
    db.insert(&rows("a2", 3)).await;
    let env = env(&db, store.clone(), CUTOFF);
    let mut opts = options(&db, &["a1", "a2"], CUTOFF);
    opts.limits.max_rows = 1;
    let archived = archive(&env, &opts).await;
    assert!(archived.ok, "{}", archived.to_json());
    assert_eq!(db.receipts("a1").await.len(), 40);

    let table = format!("{}wallet_outbox/", store.location().prefix());
    let leftover = |app: &str, day: &str| {
        format!("{table}app_code={app}/dt={day}/ffffffffffffffffffffffffffffffff/data.ndjson.gz")
    };
    let mut planted = vec![
        leftover("a1", "2025-12-31"),
        leftover("a1", "2026-01-02"),
        leftover("a1", "2026-01-03"),
        leftover("a1", "2026-01-09"),
        leftover("a2", "2026-01-01"),
        leftover("zz", "2026-01-01"),
        format!("{table}app_code=a1/README"),
        format!("{table}stray.txt"),
    ];
    for key in &planted {
        store
            .put(
                &Key::stored(key.clone()),
                Bytes::from_static(b"x"),
                PutMode::Create,
            )
            .await
            .unwrap();
    }
    planted.sort();
    let everything = verify::run(&env, &verify_options()).await;
    assert!(everything.ok, "{}", everything.to_json());
    assert_eq!(verify_run(&everything).orphans, planted);
    assert_eq!(verify_run(&everything).checked_batches.len(), 43);

    let listed = verify::run(
        &env,
        &VerifyOptions {
            selection: Selection::of_apps(&["a1"]),
            ..verify_options()
        },
    )
    .await;
    let a1_orphans: Vec<String> = planted
        .iter()
        .filter(|k| k.contains("app_code=a1/"))
        .cloned()
        .collect();
    assert_eq!(verify_run(&listed).orphans, a1_orphans);
}
