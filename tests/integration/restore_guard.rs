//! SPEC §5.9: restore and purge never undo each other, and restore never loads a row the server
//! stored differently from the archive: `restore --into-source` takes the app's lock, a batch
//! restored into the source is never purged again on the same receipt, and every loaded row is
//! read back inside its transaction and compared whole with the archived line (the drill too).

use std::sync::Arc;

use outbox_archiver::lock_name;
use outbox_archiver::purge;
use outbox_archiver::testing::FailPoints;
use outbox_archiver::Outcome;
use outbox_archiver::Selection;
use outbox_archiver::Value;
use outbox_archiver::{restore, restore::RestoreOptions};
use sqlx::Connection;

use crate::support::*;

fn into_source(app: &str) -> RestoreOptions {
    RestoreOptions {
        into_source: true,
        selection: Selection::of_apps(&[app]),
        ..Default::default()
    }
}

/// Creates restore's default target like the source, then runs `change` on it (a trigger, a
/// narrower column): a target that would store rows other than archived.
async fn restored_table_with(db: &TestDb, change: &str) {
    for sql in [
        "CREATE TABLE wallet_outbox_restored LIKE wallet_outbox",
        change,
    ] {
        // Not a prepared statement: MySQL prepares no CREATE TRIGGER (error 1295).
        db.exec(sql).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_into_the_source_takes_the_apps_lock() {
    let (db, _s3, _store, env) = archived_env(&rows("a1", 10), &["a1"], 100).await;
    assert!(purge::run(&env, &purge_options(&db, &["a1"])).await.ok);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);

    // Another archiver (or purge) works the app right now.
    let mut other = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    sqlx::query("SELECT GET_LOCK(?, 0)")
        .bind(lock_name(&db.lock_prefix(), "wallet_outbox", "a1"))
        .execute(&mut other)
        .await
        .unwrap();
    let mut opts = into_source("a1");
    opts.lock_prefix = db.lock_prefix();
    let skipped = restore::run(&env, &opts).await;
    assert_eq!(
        skipped.apps[0].outcome,
        Outcome::SkippedLocked,
        "{}",
        skipped.to_json()
    );
    assert_eq!(skipped.exit_code, 0, "a held lock is a skip, not a failure");
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    other.close().await.unwrap();

    let restored = restore::run(&env, &opts).await;
    assert!(restored.ok, "{}", restored.to_json());
    assert_eq!(restore_of(&restored, "a1").restored_rows, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_that_loses_the_lock_commits_nothing() {
    // SPEC §5.9: restore into the source confirms the app's lock before every commit. Another
    // session holds one row's key uncommitted, so restore's insert waits; meanwhile the lock's
    // connection is killed. When the insert goes on, the chunk must roll back, rows and mark.
    let (db, _s3, _store, env) = archived_env(&rows("a1", 10), &["a1"], 100).await;
    assert!(purge::run(&env, &purge_options(&db, &["a1"])).await.ok);
    let mut blocker = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    sqlx::raw_sql("START TRANSACTION")
        .execute(&mut blocker)
        .await
        .unwrap();
    outbox_archiver::insert_rows(
        &mut blocker,
        &outbox_archiver::WALLET_OUTBOX,
        "wallet_outbox",
        &[&row("a1", "e5", T0 + 5)],
        outbox_archiver::IfPresent::Fail,
    )
    .await
    .unwrap();
    let mut opts = into_source("a1");
    opts.lock_prefix = db.lock_prefix();
    let name = lock_name(&db.lock_prefix(), "wallet_outbox", "a1");
    let restoring = {
        let env = env.clone();
        tokio::spawn(async move { restore::run(&env, &opts).await })
    };
    // Wait until the restore's insert waits on the blocker's row.
    for _ in 0..200 {
        let waiting = db
            .count(
                "SELECT COUNT(*) FROM information_schema.processlist \
                 WHERE info LIKE 'INSERT IGNORE INTO wallet_outbox %'",
            )
            .await;
        if waiting > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    kill_all(&db.url, "SELECT CAST(IS_USED_LOCK(?) AS SIGNED)", &name);
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut blocker)
        .await
        .unwrap();
    let summary = restoring.await.unwrap();
    let a1 = &summary.apps[0];
    assert_eq!(a1.outcome, Outcome::Failed, "{}", summary.to_json());
    assert!(
        a1.error
            .as_deref()
            .unwrap_or_default()
            .contains("lost advisory lock"),
        "{}",
        summary.to_json()
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox").await,
        0,
        "nothing of the chunk was committed"
    );
    assert_eq!(
        db.count(
            "SELECT COUNT(*) FROM wallet_outbox_archive_receipts WHERE restored_at_ms IS NOT NULL"
        )
        .await,
        0,
        "the batch is not marked restored"
    );
    blocker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_restored_into_the_source_is_never_purged_again() {
    let (db, _s3, _store, env) = archived_env(&rows("a1", 1_200), &["a1"], 5_000).await;
    let originals = table_rows(&db, "wallet_outbox", "a1").await;
    // A purge stops after its first chunk of the batch (a crash before the second commit)...
    let mut crashing = purge_options(&db, &["a1"]);
    let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let seen = calls.clone();
    crashing.failpoints = FailPoints::new(move |p| {
        p == "before-purge-commit" && seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1
    });
    assert!(!purge::run(&env, &crashing).await.ok);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 700);
    // ...and an operator needs the rows back, so restores the batch into the live table.
    let mut opts = into_source("a1");
    opts.lock_prefix = db.lock_prefix();
    let restored = restore::run(&env, &opts).await;
    assert!(restored.ok, "{}", restored.to_json());
    assert_eq!(restore_of(&restored, "a1").restored_rows, 500);
    assert_eq!(restore_of(&restored, "a1").already_present_rows, 700);

    // The unfinished receipt must not take them away again.
    let again = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert!(again.ok, "{}", again.to_json());
    assert_eq!(purge_of(&again, "a1").purged_rows, 0);
    assert_eq!(
        table_rows(&db, "wallet_outbox", "a1").await,
        originals,
        "every restored row is still in the source"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_the_server_stores_differently_is_a_conflict_not_a_silent_load() {
    let (db, _s3, _store, env) = archived_env(&rows("a1", 10), &["a1"], 100).await;
    // The target rewrites the payload on the way in (a trigger adds a key; JSON_SET exists on
    // both servers): what it would hold is not what was archived.
    restored_table_with(
        &db,
        "CREATE TRIGGER normalise_payload BEFORE INSERT ON wallet_outbox_restored \
         FOR EACH ROW SET NEW.payload = JSON_SET(NEW.payload, '$.rewritten', 1)",
    )
    .await;
    let summary = restore::run(&env, &RestoreOptions::default()).await;
    assert_eq!(summary.exit_code, 1, "{}", summary.to_json());
    assert_eq!(
        restore_of(&summary, "a1").conflicts.len(),
        10,
        "{}",
        summary.to_json()
    );
    assert_eq!(restore_of(&summary, "a1").restored_rows, 0);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_restored")
            .await,
        0,
        "nothing differing was loaded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_purged_and_restored_in_parallel_come_back_exact() {
    let mut all = rows("a1", 1_200);
    all.extend(rows("a2", 900));
    let (db, _s3, _store, env) = archived_env(&all, &["a1", "a2"], 400).await;
    let originals = [
        table_rows(&db, "wallet_outbox", "a1").await,
        table_rows(&db, "wallet_outbox", "a2").await,
    ];
    let as_held = server_rows(&db, "wallet_outbox", "TRUE").await;
    let purged = purge::run(
        &env,
        &purge::PurgeOptions {
            parallel_apps: 2,
            ..purge_options(&db, &["a1", "a2"])
        },
    )
    .await;
    assert!(purged.ok, "{}", purged.to_json());
    assert_eq!(purge_of(&purged, "a1").purged_rows, 1_200);
    assert_eq!(purge_of(&purged, "a2").purged_rows, 900);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    let opts = RestoreOptions {
        into_source: true,
        selection: Selection::of_apps(&["a1", "a2"]),
        lock_prefix: db.lock_prefix(),
        parallel_apps: 2,
        ..Default::default()
    };
    let restored = restore::run(&env, &opts).await;
    assert!(restored.ok, "{}", restored.to_json());
    assert_eq!(restore_of(&restored, "a1").restored_rows, 1_200);
    assert_eq!(restore_of(&restored, "a2").restored_rows, 900);
    assert_eq!([restored.apps[0].batches, restored.apps[1].batches], [3, 3]);
    assert_eq!(
        [
            table_rows(&db, "wallet_outbox", "a1").await,
            table_rows(&db, "wallet_outbox", "a2").await,
        ],
        originals,
        "every row of both apps is back"
    );
    assert!(
        server_rows(&db, "wallet_outbox", "TRUE").await == as_held,
        "byte for byte as the server held them before the archive"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_stops_between_batches_on_shutdown() {
    // SIGTERM (a CronJob's deadline, a drain) must stop restore as it stops archive and purge:
    // the batch in hand is finished, no new one starts, and the summary says why.
    let (db, _s3, _store, env) = archived_env(&rows("a1", 30), &["a1"], 10).await;
    env.shutdown.cancel();
    let summary = restore::run(&env, &RestoreOptions::default()).await;
    let app = &summary.apps[0];
    assert_eq!(app.outcome, Outcome::Stopped, "{}", summary.to_json());
    assert_eq!(
        app.stop_reason.as_ref().map(ToString::to_string).as_deref(),
        Some("shutdown requested (SIGTERM)")
    );
    assert_eq!(summary.exit_code, 0, "{}", summary.to_json());
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_restored")
            .await,
        0,
        "no batch was started after the shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_the_target_would_cut_is_never_loaded_cut() {
    // Restore's first try at a chunk inserts with IGNORE, which turns "data too long" into a
    // warning and cuts the value: the read-back must catch it and the chunk must fail as a plain
    // insert does, with nothing loaded.
    let (db, _s3, _store, env) = archived_env(&rows("a1", 10), &["a1"], 100).await;
    restored_table_with(
        &db,
        "ALTER TABLE wallet_outbox_restored MODIFY worker_id VARCHAR(4) NOT NULL DEFAULT ''",
    )
    .await;
    let summary = restore::run(&env, &RestoreOptions::default()).await;
    assert_eq!(summary.exit_code, 1, "{}", summary.to_json());
    assert!(
        summary.to_json().contains("worker_id"),
        "the error names the column: {}",
        summary.to_json()
    );
    assert_eq!(restore_of(&summary, "a1").restored_rows, 0);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_restored")
            .await,
        0,
        "no row was loaded cut"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_compares_whole_rows() {
    // Worker ids with a trailing space: a CHAR column would drop it.
    let rows: Vec<_> = rows("a1", 10)
        .into_iter()
        .map(|mut r| {
            r[at("worker_id")] = Value::Text("relay-1 ".into());
            r
        })
        .collect();
    let (db, _s3, _store, env) = archived_env(&rows, &["a1"], 100).await;
    // The table definition drifted since the archive was written: counts, totals and keys of a
    // restore still match, the rows do not.
    sqlx::query("ALTER TABLE wallet_outbox MODIFY worker_id CHAR(64) NOT NULL DEFAULT ''")
        .execute(&db.db.pool)
        .await
        .unwrap();
    let drill = restore::run(
        &env,
        &RestoreOptions {
            drill: true,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(drill.exit_code, 1, "{}", drill.to_json());
    assert_eq!(drill.apps[0].outcome, Outcome::Failed);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_drills WHERE NOT ok")
            .await,
        1
    );
}

/// A restore that lands while purge works through its receipts (a restore whose lock connection
/// was lost, say) must still not be undone: purge re-reads the receipt's restored mark inside
/// each delete transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_rereads_the_restored_mark_inside_each_delete() {
    let (db, _s3, _store, env) = archived_env(&rows("a1", 30), &["a1"], 10).await;
    let receipts = db.receipts("a1").await;
    let mut by_cursor: Vec<(String, i64)> = sqlx::query_as(
        "SELECT batch_id, last_updated_at_ms FROM wallet_outbox_archive_receipts ORDER BY last_updated_at_ms",
    )
    .fetch_all(&db.db.pool)
    .await
    .unwrap();
    assert_eq!(receipts.len(), 3);
    let last = by_cursor.pop().unwrap().0;
    // When purge commits its first chunk, the last batch is marked restored by someone else.
    let url = db.url.clone();
    let marked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let once = marked.clone();
    let mut opts = purge_options(&db, &["a1"]);
    let batch = last.clone();
    opts.failpoints = FailPoints::new(move |point| {
        if point == "before-purge-commit" && !once.swap(true, std::sync::atomic::Ordering::SeqCst) {
            execute_from_failpoint(
                &url,
                format!(
                    "UPDATE wallet_outbox_archive_receipts SET restored_at_ms = 1 \
                     WHERE app_code = 'a1' AND batch_id = '{batch}'"
                ),
            );
        }
        false
    });
    let summary = purge::run(&env, &opts).await;
    assert!(summary.ok, "{}", summary.to_json());
    assert_eq!(
        purge_of(&summary, "a1").purged_rows,
        20,
        "{}",
        summary.to_json()
    );
    let left: i64 = db
        .count(&format!(
            "SELECT COUNT(*) FROM wallet_outbox WHERE event_id IN (SELECT event_id FROM wallet_outbox_archive_members WHERE batch_id = '{last}')"
        ))
        .await;
    assert_eq!(left, 10, "the restored batch's rows stay");
}

/// A batch is marked restored only when restore put rows of it back; one whose rows were all
/// still there stays purgeable. And an operator can purge restored batches again, explicitly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_batch_restore_put_back_is_marked_and_the_mark_can_be_overridden() {
    let (db, _s3, _store, env) = archived_env(&rows("a1", 20), &["a1"], 10).await;
    let mut opts = into_source("a1");
    opts.lock_prefix = db.lock_prefix();
    // Nothing was purged: restore finds every row present and puts nothing back.
    let restored = restore::run(&env, &opts).await;
    assert!(restored.ok, "{}", restored.to_json());
    assert_eq!(restore_of(&restored, "a1").already_present_rows, 20);
    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert!(purged.ok, "{}", purged.to_json());
    assert_eq!(
        purge_of(&purged, "a1").purged_rows,
        20,
        "{}",
        purged.to_json()
    );

    // Now restore does put them back: marked, and kept by purge...
    let back = restore::run(&env, &opts).await;
    assert_eq!(restore_of(&back, "a1").restored_rows, 20);
    let kept = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert_eq!(purge_of(&kept, "a1").purged_rows, 0);
    assert_eq!(purge_of(&kept, "a1").restored_batches_left, Some(2));
    // ...until an operator says to purge restored batches too.
    let mut again = purge_options(&db, &["a1"]);
    again.include_restored = true;
    let purged = purge::run(&env, &again).await;
    assert!(purged.ok, "{}", purged.to_json());
    assert_eq!(
        purge_of(&purged, "a1").purged_rows,
        20,
        "{}",
        purged.to_json()
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_into_the_source_counts_back_only_the_rows_it_put_back() {
    let (db, _s3, store) = fixture().await;
    let all = rows("a1", 30);
    db.insert(&all).await;
    let ctx = env(&db, store.clone(), T0 + 2 * DAY);
    assert!(archive(&ctx, &options(&db, &["a1"], T0 + DAY)).await.ok);
    assert!(purge::run(&ctx, &purge_options(&db, &["a1"])).await.ok);
    // Ten of the rows are back already (as archived): the restore puts back the other twenty.
    db.insert(&all[..10]).await;
    let mut opts = into_source("a1");
    opts.lock_prefix = db.lock_prefix();
    let restored = restore::run(&ctx, &opts).await;
    assert!(restored.ok, "{}", restored.to_json());
    assert_eq!(restore_of(&restored, "a1").restored_rows, 20);
    assert_eq!(restore_of(&restored, "a1").already_present_rows, 10);
    assert_eq!(
        db.count("SELECT purged_rows FROM wallet_outbox_archive_receipts WHERE app_code = 'a1'")
            .await,
        10,
        "purged_rows goes down by the rows put back, not by the chunk"
    );
}
