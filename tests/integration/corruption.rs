//! A store that damages what it returns (one flipped byte on every GET of a chosen object kind)
//! makes the batch fail at read-back; nothing is recorded (SPEC §5.1).

use outbox_archiver::Outcome;

use crate::support::misbehaving::{misbehaving, misreporting};
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_on_read_back_fails_the_batch_and_records_nothing() {
    for suffix in ["data.ndjson.gz", "manifest.json", "_SUCCESS"] {
        // GETs of keys ending in `suffix` come back with one byte flipped.
        let s3 = misbehaving(
            |_| Ok(()),
            move |key, mut bytes| {
                if key.ends_with(suffix) {
                    let middle = bytes.len() / 2;
                    bytes[middle] ^= 0x20;
                }
                bytes
            },
        )
        .await;
        let store = s3.store().await;
        let db = TestDb::new().await;
        db.insert(&rows("a1", 20)).await;
        db.insert(&[row("a2", "other-app", T0)]).await;
        let summary = archive(
            &env(&db, store.clone(), T0 + DAY),
            &options(&db, &["a1"], T0 + DAY),
        )
        .await;
        let a1 = &summary.apps[0];
        assert_eq!(
            a1.outcome,
            Outcome::Failed,
            "{suffix}: {}",
            summary.to_json()
        );
        let error = a1.error.clone().unwrap();
        assert!(
            error.contains("read-back of") && error.contains(suffix),
            "{suffix}: {error}"
        );
        assert_eq!(summary.exit_code, 1);
        assert!(
            db.receipts("a1").await.is_empty(),
            "{suffix}: nothing recorded"
        );
        assert!(db.members("a1").await.is_empty());
    }
}

/// The bytes are right but the store's own whole-object checksum says otherwise (SPEC §5.1: where
/// the store reports one, it must match too): the batch fails and nothing is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_checksum_that_disagrees_fails_the_batch() {
    let mut s3 = misreporting(|head| {
        if head.checksum_crc64nvme.is_some() {
            head.checksum_crc64nvme = Some("AAAAAAAAAAA=".to_string());
        }
    })
    .await;
    s3.settings.upload_checksum = Some(outbox_archiver::UploadChecksum::Crc64nvme);
    let store = s3.store().await;
    let db = TestDb::new().await;
    db.insert(&rows("a1", 10)).await;
    let summary = archive(&env(&db, store, T0 + DAY), &options(&db, &["a1"], T0 + DAY)).await;
    assert_eq!(
        summary.apps[0].outcome,
        Outcome::Failed,
        "{}",
        summary.to_json()
    );
    let error = summary.apps[0].error.clone().unwrap();
    assert!(error.contains("store_checksum_mismatch"), "{error}");
    assert!(db.receipts("a1").await.is_empty(), "nothing recorded");
    assert!(db.members("a1").await.is_empty());
}
