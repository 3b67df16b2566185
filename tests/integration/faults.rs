//! Transient S3 faults (issue 5, in part): a store that answers every third request with HTTP 503
//! or 500 — the run succeeds through the SDK's retries with backoff, and records exactly the rows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::misbehaving::misbehaving;
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_5xx_faults_are_retried_and_the_run_succeeds() {
    let calls = Arc::new(AtomicU64::new(0));
    let faults = Arc::new(AtomicU64::new(0));
    let (counted, injected) = (calls.clone(), faults.clone());
    // Every third object request fails, alternately with 503 SlowDown and 500 InternalError.
    let s3 = misbehaving(
        move |_| {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            if n % 3 != 2 {
                return Ok(());
            }
            injected.fetch_add(1, Ordering::SeqCst);
            if n % 2 == 0 {
                Err(s3s::s3_error!(SlowDown, "injected 503"))
            } else {
                Err(s3s::s3_error!(InternalError, "injected 500"))
            }
        },
        |_, bytes| bytes,
    )
    .await;
    let store = s3.store().await;
    let db = TestDb::new().await;
    db.insert(&rows("a1", 60)).await;
    let mut opts = options(&db, &["a1"], T0 + DAY);
    opts.limits.max_rows = 10;
    let summary = archive(&env(&db, store.clone(), T0 + DAY), &opts).await;
    assert!(summary.ok, "{}", summary.to_json());
    assert!(
        faults.load(Ordering::SeqCst) >= 10,
        "faults were injected: {}",
        faults.load(Ordering::SeqCst)
    );
    assert_eq!(
        archived_rows(&db, store.as_ref(), "a1").await,
        db.expected_rows("a1", T0 + DAY).await
    );
    assert_eq!(db.receipts("a1").await.len(), 6);
    eprintln!(
        "faults: {} of {} object requests failed with 5xx and were retried",
        faults.load(Ordering::SeqCst),
        calls.load(Ordering::SeqCst)
    );
    db.drop().await;
}
