//! One archiver per app (SPEC §5.4): a held lock means "skipped", not failure; a lock lost
//! before the commit (the lock connection killed) stops the attempt with nothing recorded, and
//! the app is tried again from the gate (lock, cursor) when retries are on.

use outbox_archiver::db::lock::lock_name;
use outbox_archiver::failpoint::FailPoints;
use outbox_archiver::summary::Outcome;
use sqlx::{Connection, MySqlConnection};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_archiver_skips_the_app_and_exits_zero() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    db.insert(&[row("a1", "e1", T0), row("a2", "e2", T0)]).await;
    let mut other: MySqlConnection = MySqlConnection::connect(&db.url).await.unwrap();
    let name = lock_name(&db.lock_prefix(), "wallet_outbox", "a1");
    assert_eq!(
        name,
        format!("{}wallet_outbox_archive:a1", db.lock_prefix()),
        "the services' archiver's lock name"
    );
    let got: i64 = sqlx::query_scalar("SELECT GET_LOCK(?, 0)")
        .bind(&name)
        .fetch_one(&mut other)
        .await
        .unwrap();
    assert_eq!(got, 1);

    let summary = archive(
        &env(&db, s3.store().await, T0 + DAY),
        &options(&db, &["a1", "a2"], T0 + DAY),
    )
    .await;
    assert!(summary.ok, "{}", summary.to_json());
    assert_eq!(summary.exit_code, 0);
    assert_eq!(summary.apps[0].outcome, Outcome::SkippedLocked);
    assert_eq!(
        summary.apps[1].outcome,
        Outcome::Archived,
        "other apps go on"
    );
    assert!(db.receipts("a1").await.is_empty());
    other.close().await.unwrap();

    let after = archive(
        &env(&db, s3.store().await, T0 + DAY),
        &options(&db, &["a1"], T0 + DAY),
    )
    .await;
    assert_eq!(
        after.apps[0].outcome,
        Outcome::Archived,
        "released locks are taken again"
    );
    db.drop().await;
}

/// From inside a (synchronous) fail point: finds the connection ids `find` (bound to `arg`)
/// returns, at least one, and KILLs them from another session.
fn kill_all(url: &str, find: &'static str, arg: &str) {
    tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(async {
            let mut admin = MySqlConnection::connect(url).await.unwrap();
            let ids: Vec<i64> = sqlx::query_scalar(find)
                .bind(arg)
                .fetch_all(&mut admin)
                .await
                .unwrap();
            assert!(!ids.is_empty(), "a connection to kill");
            for id in ids {
                sqlx::query(sqlx::AssertSqlSafe(format!("KILL {id}")))
                    .execute(&mut admin)
                    .await
                    .unwrap();
            }
            admin.close().await.unwrap();
        })
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_lock_connection_stops_the_app_before_its_commit() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    db.insert(&rows("a1", 10)).await;
    let name = lock_name(&db.lock_prefix(), "wallet_outbox", "a1");
    let url = db.url.clone();
    let mut opts = options(&db, &["a1"], T0 + DAY);
    // After the objects are verified and the members written, another session KILLs the
    // connection that holds the lock.
    let kill_once = || {
        let (url, name) = (url.clone(), name.clone());
        let done = std::sync::atomic::AtomicBool::new(false);
        FailPoints::new(move |point| {
            if point == "after-members" && !done.swap(true, std::sync::atomic::Ordering::SeqCst) {
                kill_all(&url, "SELECT IS_USED_LOCK(?)", &name);
            }
            false
        })
    };
    opts.failpoints = kill_once();
    opts.db_retries = 0;
    let summary = archive(&env(&db, s3.store().await, T0 + DAY), &opts).await;
    let a1 = &summary.apps[0];
    assert_eq!(a1.outcome, Outcome::Failed, "{}", summary.to_json());
    assert!(
        a1.error.as_deref().unwrap().contains("lost advisory lock"),
        "{:?}",
        a1.error
    );
    assert!(db.receipts("a1").await.is_empty(), "nothing committed");
    assert!(db.members("a1").await.is_empty());

    // With retries (the default) the app goes back through the gate — takes the lock anew,
    // re-reads the cursor — and finishes in the same run.
    opts.failpoints = kill_once();
    opts.db_retries = 5;
    let rerun = archive(&env(&db, s3.store().await, T0 + DAY), &opts).await;
    assert_eq!(
        rerun.apps[0].outcome,
        Outcome::Archived,
        "{}",
        rerun.to_json()
    );
    assert_eq!(rerun.apps[0].retries, 1);
    assert_eq!(db.members("a1").await.len(), 10);
    assert_eq!(db.receipts("a1").await.len(), 1);
    db.drop().await;
}

/// The receipt transaction's connection killed mid-transaction (after its members are written,
/// with every other archiver connection but the lock's): the batch is not recorded, nothing
/// half-written remains, and a rerun converges — within the same run when retries are on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_receipt_transaction_records_nothing_and_a_rerun_converges() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    db.insert(&rows("a1", 30)).await;
    let url = db.url.clone();
    let name = lock_name(&db.lock_prefix(), "wallet_outbox", "a1");
    let mut opts = options(&db, &["a1"], T0 + DAY);
    opts.limits.max_rows = 10;
    // Kills the receipt transaction once, the first time the point is reached: every
    // connection of the archiver to this database but the lock's (information_schema.innodb_trx
    // would name the transaction's own, but it is a snapshot that can lag behind).
    let kill_once = |killed: std::sync::Arc<std::sync::atomic::AtomicBool>| {
        let (url, name) = (url.clone(), name.clone());
        FailPoints::new(move |point| {
            if point == "after-members" && !killed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                kill_all(
                    &url,
                    "SELECT CAST(id AS SIGNED) FROM information_schema.processlist \
                     WHERE db = DATABASE() AND id <> CONNECTION_ID() \
                     AND id <> COALESCE(IS_USED_LOCK(?), 0)",
                    &name,
                );
            }
            false
        })
    };
    let killed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    opts.failpoints = kill_once(killed.clone());
    opts.db_retries = 0;
    let summary = archive(&env(&db, s3.store().await, T0 + DAY), &opts).await;
    assert_eq!(
        summary.apps[0].outcome,
        Outcome::Failed,
        "{}",
        summary.to_json()
    );
    assert!(killed.load(std::sync::atomic::Ordering::SeqCst));
    assert!(
        db.receipts("a1").await.is_empty(),
        "the killed transaction recorded nothing"
    );
    assert!(
        db.members("a1").await.is_empty(),
        "and left no member behind"
    );

    // With retries (the default), the same kill costs one retry and the run completes: the
    // batch is redone from the gate, exactly once.
    let killed_again = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    opts.failpoints = kill_once(killed_again.clone());
    opts.db_retries = 5;
    let rerun = archive(&env(&db, s3.store().await, T0 + DAY), &opts).await;
    assert!(killed_again.load(std::sync::atomic::Ordering::SeqCst));
    assert!(rerun.ok, "{}", rerun.to_json());
    assert_eq!(rerun.apps[0].retries, 1, "{}", rerun.to_json());
    assert_eq!(rerun.apps[0].rows, 30, "the attempts add up");
    assert_eq!(db.members("a1").await.len(), 30);
    assert_eq!(db.receipts("a1").await.len(), 3);
    db.drop().await;
}
