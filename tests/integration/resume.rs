//! A crash at any point of a batch converges on rerun to the same batches, keys and receipts
//! (SPEC §5.3), and an interrupted upload never moves the cursor.

use outbox_archiver::testing::{FailPoints, ARCHIVE_FAIL_POINTS};
use outbox_archiver::Outcome;
use outbox_archiver::Row;

use crate::support::*;

/// 120 rows of a1, three to a millisecond (ties a batch may end inside), and 10 of a2.
fn ties_in_two_apps() -> Vec<Row> {
    let mut rows: Vec<Row> = (0..120)
        .map(|i| row("a1", &format!("e{i:03}"), T0 + i / 3))
        .collect();
    rows.extend((0..10).map(|i| row("a2", &format!("f{i:03}"), T0 + i)));
    rows
}

/// (app, batch_id, data key, manifest sha) of every receipt.
async fn receipts(db: &TestDb) -> Vec<(String, String, String, String)> {
    let mut all = Vec::new();
    for app in ["a1", "a2"] {
        for (batch, key, _, sha) in db.receipts(app).await {
            all.push((app.to_string(), batch, key, sha));
        }
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_every_point_converges_on_rerun() {
    let cutoff = T0 + DAY;
    // The reference: one clean run.
    let reference = {
        let db = TestDb::new().await;
        let s3 = TestS3::new().await;
        db.insert(&ties_in_two_apps()).await;
        let mut opts = options(&db, &["a1", "a2"], cutoff);
        opts.limits.max_rows = 50;
        assert!(archive(&env(&db, s3.store().await, cutoff), &opts).await.ok);
        let r = receipts(&db).await;
        r
    };
    assert_eq!(reference.len(), 4);

    for point in ARCHIVE_FAIL_POINTS {
        let db = TestDb::new().await;
        let s3 = TestS3::new().await;
        let store = s3.store().await;
        db.insert(&ties_in_two_apps()).await;
        let env = env(&db, store.clone(), cutoff);
        let mut opts = options(&db, &["a1", "a2"], cutoff);
        opts.limits.max_rows = 50;
        // Crash in the second batch of a1, so one batch is already recorded.
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counter = seen.clone();
        opts.failpoints = FailPoints::new(move |name| {
            name == *point && counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1
        });
        let crashed = archive(&env, &opts).await;
        let a1 = &crashed.apps[0];
        assert_eq!(
            a1.outcome,
            Outcome::Failed,
            "{point}: {}",
            crashed.to_json()
        );
        assert!(
            a1.error.as_deref().unwrap().contains(point),
            "{point}: {:?}",
            a1.error
        );
        assert_eq!(crashed.exit_code, 1);
        assert_eq!(
            db.receipts("a1").await.len(),
            1,
            "{point}: the interrupted batch left no receipt"
        );
        assert_eq!(db.members("a1").await.len(), 50, "{point}: and no members");

        opts.failpoints = FailPoints::default();
        let rerun = archive(&env, &opts).await;
        assert!(rerun.ok, "{point}: {}", rerun.to_json());
        assert!(
            rerun.apps.iter().all(|a| a.replaced_objects.is_empty()),
            "{point}: identical leftovers are accepted, not replaced"
        );
        assert_eq!(
            receipts(&db).await,
            reference,
            "{point}: same batches, keys and receipts"
        );
        assert_eq!(db.members("a1").await.len(), 120);
        let expected_keys = batch_keys(store.as_ref()).await;
        assert_eq!(expected_keys.len(), 12, "{point}: no stray objects");
    }
}
