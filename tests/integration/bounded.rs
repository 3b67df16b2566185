//! SPEC 5.6, bounded: database reads are keyset pages of at most 500 rows, and no transaction is
//! open on the database while a batch's objects are uploaded. (Memory is measured by the
//! benchmark: peak RSS does not grow with the backlog.)

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use outbox_archiver::testing::FailPoints;
use outbox_archiver::SourceTable;
use outbox_archiver::WALLET_OUTBOX;
use sqlx::Connection;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_never_holds_more_than_500_rows() {
    let db = TestDb::new().await;
    db.insert(&rows("a1", 1_200)).await;
    let pages = SourceTable::new(&db.db.pool, &WALLET_OUTBOX);
    let page = pages
        .page("a1", "DELIVERED", None, T0 + DAY, 10_000)
        .await
        .unwrap();
    assert_eq!(
        page.len(),
        500,
        "a caller asking for 10,000 rows gets one page of 500"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_transaction_is_open_while_objects_are_uploaded() {
    let (db, _s3, store) = fixture().await;
    // One batch: once it is built the reader is done, so every database connection is idle
    // while its three objects go up.
    db.insert(&rows("a1", 40)).await;
    let (url, name) = (db.url.clone(), db.name.clone());
    let checked = Arc::new(AtomicU32::new(0));
    let seen = checked.clone();
    let mut opts = options(&db, &["a1"], T0 + DAY);
    opts.failpoints = FailPoints::new(move |point| {
        if matches!(
            point,
            "after-data-put" | "after-manifest-put" | "after-success-put"
        ) {
            let open = open_transactions(&url, &name);
            assert_eq!(open, 0, "a transaction is open on {name} at {point}");
            seen.fetch_add(1, Ordering::SeqCst);
        }
        false
    });
    let summary = archive(&env(&db, store, T0 + DAY), &opts).await;
    assert!(summary.ok, "{}", summary.to_json());
    assert_eq!(
        checked.load(Ordering::SeqCst),
        3,
        "checked after each of the three puts"
    );
}

/// Transactions InnoDB has open for connections to `database`, other than this check's own.
fn open_transactions(url: &str, database: &str) -> i64 {
    tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(async {
            // information_schema.innodb_trx is a snapshot refreshed when older than 0.1 s: let
            // the previous batch's commit age out of it.
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            let mut conn = sqlx::MySqlConnection::connect(url).await.unwrap();
            let open: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.innodb_trx t \
                 JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id \
                 WHERE p.db = ? AND p.id <> CONNECTION_ID()",
            )
            .bind(database)
            .fetch_one(&mut conn)
            .await
            .unwrap();
            conn.close().await.unwrap();
            open
        })
    })
}

/// A memory budget smaller than one batch's first guess (each app's first batch asks for all
/// of it), several apps at once: every app's batches are archived, none waits forever. The
/// share of a recorded batch used to be given back only once the next batch of its app was
/// built — which could be queued behind another app's whole-budget request, itself waiting for
/// that share (the bench's memory step hung so, with --parallel-apps 4 --batch-bytes 4GiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_smaller_than_a_batch_never_leaves_apps_waiting_on_each_other() {
    let (db, _s3, store) = fixture().await;
    let mut all = Vec::new();
    for app in ["a1", "a2", "a3"] {
        all.extend(rows(app, 400));
    }
    db.insert(&all).await;
    let env = env(&db, store, ARCHIVED_CUTOFF + DAY);
    let mut opts = options(&db, &["a1", "a2", "a3"], ARCHIVED_CUTOFF);
    opts.limits.max_rows = 100;
    opts.parallel_apps = 3;
    opts.memory_budget = 256 << 10;
    let summary = tokio::time::timeout(std::time::Duration::from_secs(120), archive(&env, &opts))
        .await
        .expect("the run ends: no app waits forever for another's share of the budget");
    assert!(summary.ok, "{}", summary.to_json());
    for app in &summary.apps {
        assert_eq!((app.batches, app.rows), (4, 400), "{}", summary.to_json());
    }
}
