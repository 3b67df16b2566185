//! Commands side by side on one app, as an adversarial review ran them: `restore --into-source`
//! and `compact` take turns on a batch by its receipt row even without the app's lock (a lost
//! lock, an older archiver), so no row is put back without its member row; and `verify` beside
//! `compact` reports only real findings.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use outbox_archiver::purge;
use outbox_archiver::testing::FailPoints;
use outbox_archiver::AppLock;
use outbox_archiver::CompactQueries;
use outbox_archiver::Selection;
use outbox_archiver::{restore, restore::RestoreOptions};
use outbox_archiver::{verify, verify::VerifyOptions};

use crate::support::*;

/// Ten rows of a1 in one batch, archived and purged: a batch compaction may compact.
async fn purged_batch() -> (TestDb, TestS3, outbox_archiver::RunContext, String) {
    let (db, s3, _store, env) = archived_env(&rows("a1", 10), &["a1"], 100).await;
    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert_eq!(purge_of(&purged, "a1").purged_rows, 10);
    let batch = db.receipts("a1").await.remove(0).0;
    (db, s3, env, batch)
}

/// Compacts `batch` as a process that does not hold a1's lock would (it holds a lock of its
/// own, which its transaction confirms).
async fn compact_without_the_apps_lock(db: outbox_archiver::Db, batch: String) -> bool {
    let pairs: Vec<(String, i64)> = sqlx::query_as(
        "SELECT event_id, updated_at_ms FROM wallet_outbox_archive_members WHERE batch_id = ?",
    )
    .bind(&batch)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let digest =
        outbox_archiver::format::members_digest(pairs.iter().map(|(id, ms)| (id.as_str(), *ms)));
    let name = format!(
        "{}:not-a1s-lock",
        db.options.get_database().unwrap_or_default()
    );
    let lock = AppLock::try_acquire(&db, &name).await.unwrap().unwrap();
    let done = CompactQueries::new(&db.pool, &outbox_archiver::WALLET_OUTBOX)
        .compact("a1", &batch, &digest, &lock, T0, &FailPoints::default())
        .await
        .unwrap()
        .done;
    lock.release().await;
    done
}

fn into_source(db: &TestDb) -> RestoreOptions {
    RestoreOptions {
        into_source: true,
        selection: Selection::of_apps(&["a1"]),
        lock_prefix: db.lock_prefix(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_compacted_after_restore_listed_it_is_not_put_back_without_member_rows() {
    let (db, _s3, env, batch) = purged_batch().await;
    let mut opts = into_source(&db);
    let (pool, once) = (db.db.clone(), Arc::new(AtomicBool::new(false)));
    let (batch_for_hook, seen) = (batch.clone(), once.clone());
    opts.failpoints = FailPoints::new(move |point| {
        if point == "before-restore-chunk" && !seen.swap(true, Ordering::SeqCst) {
            let (pool, batch) = (pool.clone(), batch_for_hook.clone());
            let done = tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current()
                    .block_on(compact_without_the_apps_lock(pool, batch))
            });
            assert!(done, "compacted between restore's listing and its chunk");
        }
        false
    });
    let first = restore::run(&env, &opts).await;
    assert!(once.load(Ordering::SeqCst));
    // The batch changed under the restore: nothing of it was loaded, and a rerun loads it as
    // the compacted batch it is now.
    assert_eq!(first.exit_code, 1, "{}", first.to_json());
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    let again = restore::run(&env, &into_source(&db)).await;
    assert!(again.ok, "{}", again.to_json());
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 10);
    assert_eq!(
        db.members("a1").await.len(),
        10,
        "every row put back has its member row"
    );
    let _ = batch;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_waits_for_a_restore_chunk_in_flight_and_then_leaves_the_batch() {
    let (db, _s3, env, batch) = purged_batch().await;
    let mut opts = into_source(&db);
    let compaction = Arc::new(std::sync::Mutex::new(None));
    let (pool, slot, batch_for_hook) = (db.db.clone(), compaction.clone(), batch.clone());
    opts.failpoints = FailPoints::new(move |point| {
        if point == "restore-before-mark" && slot.lock().unwrap().is_none() {
            // Inside restore's chunk transaction, rows inserted, not committed: a compaction
            // starts beside it.
            let task = tokio::spawn(compact_without_the_apps_lock(
                pool.clone(),
                batch_for_hook.clone(),
            ));
            *slot.lock().unwrap() = Some(task);
            tokio::task::block_in_place(|| std::thread::sleep(Duration::from_millis(500)));
        }
        false
    });
    let restored = restore::run(&env, &opts).await;
    assert!(restored.ok, "{}", restored.to_json());
    let task = compaction
        .lock()
        .unwrap()
        .take()
        .expect("compaction started");
    let compacted = task.await.unwrap();
    assert!(
        !compacted,
        "the batch was restored by the time compaction had its receipt"
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 10);
    assert_eq!(
        db.members("a1").await.len(),
        10,
        "no member row was deleted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_beside_compaction_reports_no_false_findings() {
    let (db, _s3, env, batch) = purged_batch().await;
    let (pool, once) = (db.db.clone(), Arc::new(AtomicBool::new(false)));
    let seen = once.clone();
    let opts = VerifyOptions {
        selection: Selection::of_apps(&["a1"]),
        failpoints: FailPoints::new(move |point| {
            if point == "verify-before-members" && !seen.swap(true, Ordering::SeqCst) {
                let (pool, batch) = (pool.clone(), batch.clone());
                let done = tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current()
                        .block_on(compact_without_the_apps_lock(pool, batch))
                });
                assert!(done);
            }
            false
        }),
        ..VerifyOptions::everything(ARCHIVED_CUTOFF, "DELIVERED")
    };
    let verified = verify::run(&env, &opts).await;
    assert!(once.load(Ordering::SeqCst));
    assert!(verified.ok, "{}", verified.to_json());
    assert!(verify_run(&verified).findings.is_empty());
}
