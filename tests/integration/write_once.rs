//! Write-once (SPEC §5.3): identical objects are accepted, a data object with identical NDJSON
//! is adopted, a leftover with other content is replaced and reported, and the same rows under
//! other settings give identical bytes.

use outbox_archiver::format::Key;
use std::io::Write;

use bytes::Bytes;
use outbox_archiver::PutMode;

use crate::support::*;

/// The keys a run will write, from a dry run.
async fn planned_keys(db: &TestDb, s3: &TestS3, cutoff: i64) -> Vec<String> {
    let mut opts = options(db, &["a1"], cutoff);
    opts.dry_run = true;
    let plan = archive(&env(db, s3.store().await, cutoff), &opts).await;
    plan.apps[0]
        .batch_list
        .iter()
        .map(|b| b.data_object_key.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftovers_with_other_bytes_are_replaced_and_reported() {
    let (db, s3, store) = fixture().await;
    db.insert(&spaced_rows("a1", 60, 10)).await;
    let cutoff = T0 + DAY;
    let data_key = planned_keys(&db, &s3, cutoff).await.remove(0);
    let manifest_key = data_key.replace("data.ndjson.gz", "manifest.json");
    store
        .put(
            &Key::stored(data_key.clone()),
            Bytes::from_static(b"not gzip at all"),
            PutMode::Create,
        )
        .await
        .unwrap();
    store
        .put(
            &Key::stored(manifest_key.clone()),
            Bytes::from_static(b"{\"old\":\"layout\"}\n"),
            PutMode::Create,
        )
        .await
        .unwrap();

    let summary = archive(
        &env(&db, store.clone(), cutoff),
        &options(&db, &["a1"], cutoff),
    )
    .await;
    assert!(summary.ok, "{}", summary.to_json());
    assert_eq!(
        serde_json::to_value(&summary).unwrap()["conditional_put"],
        "honoured",
        "s3s refuses a create-only put at an existing key"
    );
    assert_eq!(
        summary.apps[0].replaced_objects,
        vec![data_key.clone(), manifest_key.clone()]
    );
    assert_eq!(
        archived_rows(&db, store.as_ref(), "a1").await,
        db.expected_rows("a1", cutoff).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_object_with_identical_ndjson_is_adopted() {
    let (db, s3, store) = fixture().await;
    db.insert(&spaced_rows("a1", 60, 10)).await;
    let cutoff = T0 + DAY;
    let data_key = planned_keys(&db, &s3, cutoff).await.remove(0);
    // The same NDJSON, compressed differently (as an older build or another level would).
    let mut ndjson = Vec::new();
    for r in db.expected_rows("a1", cutoff).await {
        outbox_archiver::encode_line(&outbox_archiver::WALLET_OUTBOX, &r, &mut ndjson);
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(1));
    gz.write_all(&ndjson).unwrap();
    let other = gz.finish().unwrap();
    store
        .put(
            &Key::stored(data_key.clone()),
            other.clone().into(),
            PutMode::Create,
        )
        .await
        .unwrap();

    let summary = archive(
        &env(&db, store.clone(), cutoff),
        &options(&db, &["a1"], cutoff),
    )
    .await;
    assert!(summary.ok, "{}", summary.to_json());
    assert_eq!(summary.apps[0].adopted_objects, vec![data_key.clone()]);
    assert!(summary.apps[0].replaced_objects.is_empty());
    assert_eq!(
        read(store.as_ref(), &data_key).await,
        other,
        "the adopted object is kept as it is"
    );
    let (sha, size): (String, i64) =
        sqlx::query_as("SELECT gzip_sha256, compressed_bytes FROM wallet_outbox_archive_receipts")
            .fetch_one(&db.db.pool)
            .await
            .unwrap();
    assert_eq!(sha, outbox_archiver::sha256_hex(&other));
    assert_eq!(size as usize, other.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_rows_under_other_settings_give_identical_bytes() {
    let mut manifests = Vec::new();
    for (cutoff, older_than_now) in [(T0 + DAY, T0 + 2 * DAY), (T0 + 5 * DAY, T0 + 30 * DAY)] {
        let db = TestDb::new().await;
        let s3 = TestS3::new().await;
        let store = s3.store().await;
        db.insert(&spaced_rows("a1", 60, 10)).await;
        let summary = archive(
            &env(&db, store.clone(), older_than_now),
            &options(&db, &["a1"], cutoff),
        )
        .await;
        assert!(summary.ok);
        let mut objects = Vec::new();
        // The archive's marker holds its own id: one archive is not another, by design.
        for key in keys(store.as_ref())
            .await
            .into_iter()
            .filter(|k| !is_home_marker(k))
        {
            let relative = store
                .location()
                .prefix()
                .relative(&key)
                .unwrap()
                .to_string();
            objects.push((relative, read(store.as_ref(), &key).await));
        }
        manifests.push(objects);
    }
    // The batch's three objects and the log's checkpoint (and its copy under its size), tile
    // and entry bundle: nothing in any of them depends on the clock.
    assert_eq!(manifests[0].len(), 7);
    assert!(
        manifests[0] == manifests[1],
        "same rows, other cutoff and clock: identical keys and bytes"
    );
}

/// A store that accepts `If-None-Match: *` and overwrites anyway (Tencent COS, some Ceph and
/// self-hosted stores): write-once must not become a blind overwrite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_ignores_if_none_match_is_found_out_and_leftovers_are_still_reported() {
    let s3 = crate::support::misbehaving::ignoring_if_none_match().await;
    let store = s3.store().await;
    let db = TestDb::new().await;
    db.insert(&spaced_rows("a1", 60, 10)).await;
    let cutoff = T0 + DAY;
    let data_key = planned_keys(&db, &s3, cutoff).await.remove(0);
    store
        .put(
            &Key::stored(data_key.clone()),
            Bytes::from_static(b"a leftover of a failed attempt"),
            PutMode::Create,
        )
        .await
        .unwrap();
    let summary = archive(
        &env(&db, store.clone(), cutoff),
        &options(&db, &["a1"], cutoff),
    )
    .await;
    assert!(summary.ok, "{}", summary.to_json());
    assert_eq!(
        summary.apps[0].replaced_objects,
        vec![data_key.clone()],
        "{}",
        summary.to_json()
    );
    assert_eq!(
        archived_rows(&db, store.as_ref(), "a1").await,
        db.expected_rows("a1", cutoff).await
    );
    let json = serde_json::to_value(&summary).unwrap();
    assert_eq!(json["conditional_put"], "ignored", "said in the summary");
    assert!(
        keys(store.as_ref())
            .await
            .iter()
            .all(|k| !k.contains("conditional-put-probe")),
        "the probe object is cleaned up"
    );
}
