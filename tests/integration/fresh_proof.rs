//! SPEC §5.9: a deletion rests on fresh proof. Before `purge` deletes any row of a batch it looks
//! at the batch's three objects in the store — present, the receipt's sizes, the store's own
//! checksum where it reports one — and a batch whose objects are gone or different is not purged.

use bytes::Bytes;
use outbox_archiver::format::Key;
use outbox_archiver::purge;
use outbox_archiver::FindingKind;
use outbox_archiver::{ObjectStore, PutMode};

use crate::support::*;

/// Thirty rows of `a1` archived in three batches of ten; the receipts by batch id.
async fn three_batches() -> (
    TestDb,
    TestS3,
    std::sync::Arc<dyn ObjectStore>,
    outbox_archiver::RunContext,
) {
    let (db, s3, store) = fixture().await;
    db.insert(&rows("a1", 30)).await;
    let env = env(&db, store.clone(), T0 + 2 * DAY);
    let mut opts = options(&db, &["a1"], T0 + DAY);
    opts.limits.max_rows = 10;
    let archived = archive(&env, &opts).await;
    assert!(archived.ok, "{}", archived.to_json());
    assert_eq!(db.receipts("a1").await.len(), 3);
    (db, s3, store, env)
}

async fn members_of(db: &TestDb, batch_id: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT event_id FROM wallet_outbox_archive_members WHERE batch_id = ? ORDER BY event_id",
    )
    .bind(batch_id)
    .fetch_all(&db.db.pool)
    .await
    .unwrap()
}

async fn source_ids(db: &TestDb) -> Vec<String> {
    sqlx::query_scalar("SELECT event_id FROM wallet_outbox ORDER BY event_id")
        .fetch_all(&db.db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_keeps_the_rows_of_a_batch_whose_objects_are_gone_or_different() {
    let (db, _s3, store, env) = three_batches().await;
    let receipts = db.receipts("a1").await;
    // One batch lost its _SUCCESS (a mistaken `aws s3 rm`); another's data object is not the one
    // the receipt vouches for (a bucket restored from an older copy).
    let (gone, gone_key, _, _) = receipts[0].clone();
    store
        .delete(&Key::stored(gone_key.replace("data.ndjson.gz", "_SUCCESS")))
        .await
        .unwrap();
    let (short, short_key, _, _) = receipts[1].clone();
    let bytes = read(store.as_ref(), &short_key).await;
    store
        .put(
            &Key::stored(short_key.clone()),
            Bytes::from(bytes[..bytes.len() / 2].to_vec()),
            PutMode::Overwrite,
        )
        .await
        .unwrap();

    let summary = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert_eq!(summary.exit_code, 1, "{}", summary.to_json());
    let mut failed = vec![gone.clone(), short.clone()];
    failed.sort();
    let mut reported = purge_of(&summary, "a1").failed_batches.clone();
    reported.sort();
    assert_eq!(reported, failed, "{}", summary.to_json());
    assert_eq!(purge_of(&summary, "a1").purged_rows, 10);
    let mut kept = members_of(&db, &gone).await;
    kept.extend(members_of(&db, &short).await);
    kept.sort();
    assert_eq!(
        source_ids(&db).await,
        kept,
        "only the intact batch was purged"
    );
    // Each failed batch with what was found, in verify's words.
    let kinds: Vec<(FindingKind, &str)> = purge_of(&summary, "a1")
        .findings
        .iter()
        .map(|f| (f.kind, f.key.as_deref().unwrap()))
        .collect();
    let success_key = gone_key.replace("data.ndjson.gz", "_SUCCESS");
    assert!(
        kinds.contains(&(FindingKind::MissingObject, success_key.as_str())),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&(FindingKind::SizeMismatch, short_key.as_str())),
        "{kinds:?}"
    );
    // The cost is bounded: three HEADs per batch, not a read, not a request per row — and, once
    // per app, the read of its log's checkpoint and of the tile the batches' proofs share.
    let json = serde_json::to_value(&summary).unwrap();
    assert_eq!(json["object_check"], "head");
    let ops = &json["store_requests"]["by_operation"];
    assert_eq!(
        (ops["head"].as_u64(), ops["get"].as_u64()),
        (Some(9), Some(2)),
        "{ops}"
    );

    // An operator who scrubs separately may say so; the receipts alone then decide.
    let mut trusting = purge_options(&db, &["a1"]);
    trusting.objects = purge::ObjectCheck::Trusted;
    let trusted = purge::run(&env, &trusting).await;
    assert!(trusted.ok, "{}", trusted.to_json());
    assert_eq!(
        serde_json::to_value(&trusted).unwrap()["object_check"],
        "trusted"
    );
    assert_eq!(purge_of(&trusted, "a1").purged_rows, 20);
    assert!(source_ids(&db).await.is_empty());
}

/// Same sizes, other bytes: only the store's own checksum can tell by HEAD, and where the store
/// reports one (AWS S3's CRC-64/NVME) it must agree with what was archived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_keeps_a_batch_whose_store_checksum_disagrees() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let lie = std::sync::Arc::new(AtomicBool::new(false));
    let lying = lie.clone();
    let mut s3 = crate::support::misbehaving::misreporting(move |head| {
        if lying.load(Ordering::SeqCst) && head.checksum_crc64nvme.is_some() {
            head.checksum_crc64nvme = Some("AAAAAAAAAAA=".to_string());
        }
    })
    .await;
    s3.settings.upload_checksum = Some(outbox_archiver::UploadChecksum::Crc64nvme);
    let store = s3.store().await;
    let db = TestDb::new().await;
    db.insert(&rows("a1", 10)).await;
    let env = env(&db, store, T0 + 2 * DAY);
    assert!(archive(&env, &options(&db, &["a1"], T0 + DAY)).await.ok);
    let recorded: Option<String> =
        sqlx::query_scalar("SELECT data_crc64nvme FROM wallet_outbox_archive_receipts")
            .fetch_one(&db.db.pool)
            .await
            .unwrap();
    assert!(
        recorded.is_some(),
        "the receipt records the data object's CRC-64/NVME"
    );
    lie.store(true, Ordering::SeqCst);
    let summary = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert_eq!(summary.exit_code, 1, "{}", summary.to_json());
    let found = &purge_of(&summary, "a1").findings;
    let kinds: Vec<FindingKind> = found.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FindingKind::StoreChecksumMismatch; 3], "{found:?}");
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 10);
}
