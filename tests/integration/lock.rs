//! One archiver per app (SPEC §5.4): a held lock means "skipped", not failure; a lock lost
//! before the commit (the lock connection killed) stops the attempt with nothing recorded, and
//! the app is tried again from the gate (lock, cursor) when retries are on.

use outbox_archiver::lock_name;
use outbox_archiver::testing::FailPoints;
use outbox_archiver::Outcome;
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
                kill_all(&url, "SELECT CAST(IS_USED_LOCK(?) AS SIGNED)", &name);
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

    // KILL is asynchronous: the killed session lets go of the lock a moment later.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let holder: Option<i64> = sqlx::query_scalar("SELECT CAST(IS_USED_LOCK(?) AS SIGNED)")
            .bind(&name)
            .fetch_one(&db.db.pool)
            .await
            .unwrap();
        if holder.is_none() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the killed session keeps the lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

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
}

/// A run that loses its lock mid-way and finds it held by another archiver when it tries again
/// has not been "skipped": it stopped, with the batches it did archive, and says why — so an
/// alert on `skipped_locked` never hides a lost lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_lost_to_another_archiver_is_a_stop_with_a_reason_not_a_skip() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    db.insert(&rows("a1", 30)).await;
    let name = lock_name(&db.lock_prefix(), "wallet_outbox", "a1");
    let url = db.url.clone();
    let mut opts = options(&db, &["a1"], T0 + DAY);
    opts.limits.max_rows = 10;
    // At the second batch's commit, the lock connection is killed and another session takes
    // the lock at once (and keeps it).
    let thief: std::sync::Arc<std::sync::Mutex<Option<MySqlConnection>>> = Default::default();
    let holder = thief.clone();
    let seen = std::sync::atomic::AtomicU32::new(0);
    let (kill_url, kill_name) = (url.clone(), name.clone());
    opts.failpoints = FailPoints::new(move |point| {
        if point == "after-members" && seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            kill_all(
                &kill_url,
                "SELECT CAST(IS_USED_LOCK(?) AS SIGNED)",
                &kill_name,
            );
            let taken = tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(async {
                    let mut conn = MySqlConnection::connect(&kill_url).await.unwrap();
                    let got: i64 = sqlx::query_scalar("SELECT GET_LOCK(?, 5)")
                        .bind(&kill_name)
                        .fetch_one(&mut conn)
                        .await
                        .unwrap();
                    assert_eq!(got, 1);
                    conn
                })
            });
            *holder.lock().unwrap() = Some(taken);
        }
        false
    });
    let summary = archive(&env(&db, s3.store().await, T0 + DAY), &opts).await;
    let a1 = &summary.apps[0];
    assert!(thief.lock().unwrap().is_some(), "the lock was taken");
    assert_eq!(a1.outcome, Outcome::Stopped, "{}", summary.to_json());
    assert_eq!(
        a1.stop_reason.as_ref().map(ToString::to_string).as_deref(),
        Some("lost the lock to another archiver")
    );
    assert_eq!((a1.batches, a1.rows), (1, 10), "{}", summary.to_json());
    assert_eq!(db.members("a1").await.len(), 10);
    let conn = thief.lock().unwrap().take();
    drop(conn);
}

/// After a server restart connection ids start again from 1, so another session can hold the
/// lock under the id the archiver's lock connection had: the check before a commit must fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_check_survives_a_server_restart() {
    use outbox_archiver::AppLock;
    let mut server = PrivateServer::start().await;
    let db = TestDb::on(&server.url()).await;
    // Some connections first, so the lock connection's id is not among the first after a restart.
    for _ in 0..8 {
        MySqlConnection::connect(&db.url)
            .await
            .unwrap()
            .close()
            .await
            .unwrap();
    }
    let name = lock_name("", "wallet_outbox", "a1");
    let lock = AppLock::try_acquire(&db.db, &name).await.unwrap().unwrap();
    let id = lock.connection_id() as i64;
    assert!(lock.held_per(&db.db.pool).await.unwrap());

    server.stop(libc::SIGTERM).await;
    server.run().await;
    // Another archiver's session gets the old id, and the lock.
    let mut others = Vec::new();
    let thief = loop {
        let mut conn = MySqlConnection::connect(&db.url).await.unwrap();
        let mine: i64 = sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS SIGNED)")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        if mine == id {
            break conn;
        }
        assert!(
            mine < id,
            "connection ids passed {id} before the test could take it ({mine})"
        );
        others.push(conn);
    };
    let mut thief = thief;
    let got: i64 = sqlx::query_scalar("SELECT GET_LOCK(?, 0)")
        .bind(&name)
        .fetch_one(&mut thief)
        .await
        .unwrap();
    assert_eq!(got, 1);
    let held = lock.held_per(&db.db.pool).await;
    assert!(
        !matches!(held, Ok(true)),
        "the lock is another session's now, under the same connection id: {held:?}"
    );
    drop(others);
    thief.close().await.unwrap();
    db.db.close().await;
}

/// `--parallel-apps`: apps archived at the same time each take their own lock, a held lock
/// still skips only its app, and every other app is archived exactly as one at a time would —
/// reports in the apps' order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_in_parallel_each_take_their_own_lock() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let apps = ["a1", "a2", "a3", "a4"];
    for app in apps {
        db.insert(&spaced_rows(app, 1_200, 60_000)).await;
    }
    let mut other: MySqlConnection = MySqlConnection::connect(&db.url).await.unwrap();
    let got: i64 = sqlx::query_scalar("SELECT GET_LOCK(?, 0)")
        .bind(lock_name(&db.lock_prefix(), "wallet_outbox", "a3"))
        .fetch_one(&mut other)
        .await
        .unwrap();
    assert_eq!(got, 1);

    let cutoff = T0 + 2 * DAY;
    let mut opts = options(&db, &apps, cutoff);
    opts.parallel_apps = 3;
    let store = s3.store().await;
    let summary = archive(&env(&db, store.clone(), cutoff + DAY), &opts).await;
    assert!(summary.ok, "{}", summary.to_json());
    let order: Vec<&str> = summary.apps.iter().map(|a| a.app_code.as_str()).collect();
    assert_eq!(order, apps, "reports in the apps' order");
    for report in &summary.apps {
        let app = report.app_code.as_str();
        if app == "a3" {
            assert_eq!(report.outcome, Outcome::SkippedLocked);
            assert!(db.members(app).await.is_empty(), "a3 untouched");
            continue;
        }
        assert_eq!(report.outcome, Outcome::Archived, "{app}");
        assert_eq!(report.rows, 1_200, "{app}");
        let mut members: Vec<String> = db.members(app).await.into_iter().map(|m| m.0).collect();
        members.sort();
        let mut want: Vec<String> = (0..1_200).map(|i| format!("e{i:03}")).collect();
        want.sort();
        assert_eq!(members, want, "{app}: every row a member once");
        let archived = archived_rows(&db, store.as_ref(), app).await;
        assert_eq!(archived, db.expected_rows(app, cutoff).await, "{app}");
    }
    // Each app's lock was its own and is free again; a3's is still the other session's.
    for app in ["a1", "a2", "a4"] {
        let free: i64 = sqlx::query_scalar("SELECT IS_FREE_LOCK(?)")
            .bind(lock_name(&db.lock_prefix(), "wallet_outbox", app))
            .fetch_one(&mut other)
            .await
            .unwrap();
        assert_eq!(free, 1, "{app}'s lock released");
    }
    other.close().await.unwrap();
}

/// After its lock is lost, an app writes nothing more (issue 34): the archive of the next batch,
/// which overlaps the commit that found the lock lost, ends where it is, and every put checks the
/// lock first — on a store without conditional writes (COS) another archiver that took the lock
/// could otherwise find a key empty, write and record it, and then have its recorded object
/// overwritten by this one's put. Here the next batch's data put is held in the store until the
/// commit before it has found the lock lost: nothing of that batch is written after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_that_lost_its_lock_writes_no_more_objects() {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::sync::{Arc, Mutex};
    let db = TestDb::new().await;
    db.insert(&rows("a1", 30)).await;
    let lost = Arc::new(AtomicBool::new(false));
    let written_after: Arc<Mutex<Vec<String>>> = Default::default();
    let data_puts = Arc::new(AtomicU32::new(0));
    let (held, after) = (lost.clone(), written_after.clone());
    let s3 = crate::support::misbehaving::watching_puts(move |input| {
        let key = input.key.clone();
        if key.ends_with("/data.ndjson.gz") && data_puts.fetch_add(1, Ordering::SeqCst) == 2 {
            // The third batch's data object: held until the second batch's commit lost the lock.
            tokio::task::block_in_place(|| {
                let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
                while !held.load(Ordering::SeqCst) && std::time::Instant::now() < until {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            });
            return;
        }
        if held.load(Ordering::SeqCst) {
            after.lock().unwrap().push(key);
        }
    })
    .await;
    let name = lock_name(&db.lock_prefix(), "wallet_outbox", "a1");
    let mut opts = options(&db, &["a1"], T0 + DAY);
    opts.limits.max_rows = 10;
    let thief: Arc<Mutex<Option<MySqlConnection>>> = Default::default();
    let holder = thief.clone();
    let seen = AtomicU32::new(0);
    let (kill_url, kill_name, flag) = (db.url.clone(), name.clone(), lost.clone());
    opts.failpoints = FailPoints::new(move |point| {
        if point == "after-members" && seen.fetch_add(1, Ordering::SeqCst) == 1 {
            kill_all(
                &kill_url,
                "SELECT CAST(IS_USED_LOCK(?) AS SIGNED)",
                &kill_name,
            );
            let taken = tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(async {
                    let mut conn = MySqlConnection::connect(&kill_url).await.unwrap();
                    let got: i64 = sqlx::query_scalar("SELECT GET_LOCK(?, 5)")
                        .bind(&kill_name)
                        .fetch_one(&mut conn)
                        .await
                        .unwrap();
                    assert_eq!(got, 1);
                    conn
                })
            });
            *holder.lock().unwrap() = Some(taken);
            flag.store(true, Ordering::SeqCst);
        }
        false
    });
    let summary = archive(&env(&db, s3.store().await, T0 + DAY), &opts).await;
    let a1 = &summary.apps[0];
    assert_eq!(a1.outcome, Outcome::Stopped, "{}", summary.to_json());
    assert_eq!(
        a1.stop_reason.as_ref().map(ToString::to_string).as_deref(),
        Some("lost the lock to another archiver")
    );
    assert_eq!(a1.batches, 1, "{}", summary.to_json());
    let written = written_after.lock().unwrap().clone();
    assert!(
        written.is_empty(),
        "objects written after the lock was lost: {written:?}"
    );
    drop(thief.lock().unwrap().take());
}
