//! purge deletes exactly what is proven; restore brings it back byte for byte; drills record
//! their results (issue: purge and restore).

use outbox_archiver::format::Key;
use std::sync::Arc;

use bytes::Bytes;
use outbox_archiver::lock_name;
use outbox_archiver::purge;
use outbox_archiver::testing::FailPoints;
use outbox_archiver::Outcome;
use outbox_archiver::PutMode;
use outbox_archiver::Selection;
use outbox_archiver::{restore, restore::RestoreOptions};
use sqlx::Connection;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_purge_restore_round_trip_is_exact_and_idempotent() {
    let rows = crate::archive_e2e::awkward_rows(ARCHIVED_CUTOFF);
    let (db, _s3, _store, env) = archived_env(&rows, &["a1", "a2"], 400).await;
    let originals = db.expected_rows("a1", ARCHIVED_CUTOFF).await;
    // The rows as the server holds them, before anything is archived: what restore must give
    // back, compared without the archiver's own reading or encoding.
    let archived_filter =
        format!("app_code = 'a1' AND status = 'DELIVERED' AND updated_at_ms < {ARCHIVED_CUTOFF}");
    let as_held = server_rows(&db, "wallet_outbox", &archived_filter).await;
    assert_eq!(as_held.len(), originals.len());
    let left_alone = db.count("SELECT COUNT(*) FROM wallet_outbox WHERE NOT (app_code IN ('a1', 'a2') AND status = 'DELIVERED' AND updated_at_ms < 1767484800000)").await;

    let mut dry = purge_options(&db, &["a1", "a2"]);
    dry.dry_run = true;
    let planned = purge::run(&env, &dry).await;
    assert_eq!(
        purge_of(&planned, "a1").would_purge_rows,
        Some(originals.len() as u64)
    );
    assert_eq!(
        db.expected_rows("a1", ARCHIVED_CUTOFF).await.len(),
        originals.len(),
        "a dry run deletes nothing"
    );

    let purged = purge::run(&env, &purge_options(&db, &["a1", "a2"])).await;
    assert!(purged.ok, "{}", purged.to_json());
    assert_eq!(purge_of(&purged, "a1").purged_rows, originals.len() as u64);
    assert!(db.expected_rows("a1", ARCHIVED_CUTOFF).await.is_empty());
    let after = db.count("SELECT COUNT(*) FROM wallet_outbox").await;
    assert_eq!(
        after, left_alone,
        "only archived delivered rows were deleted"
    );
    let again = purge::run(&env, &purge_options(&db, &["a1", "a2"])).await;
    assert_eq!(
        purge_of(&again, "a1").purged_rows,
        0,
        "a rerun does no work twice"
    );

    let restored = restore::run(&env, &RestoreOptions::default()).await;
    assert!(restored.ok, "{}", restored.to_json());
    assert_eq!(
        restore_of(&restored, "a1").restored_rows,
        originals.len() as u64
    );
    assert!(
        table_rows(&db, "wallet_outbox_restored", "a1").await == originals,
        "every column, as the archiver reads it"
    );
    assert!(
        server_rows(&db, "wallet_outbox_restored", "app_code = 'a1'").await == as_held,
        "every column, byte for byte as the server held it before the archive"
    );
    let twice = restore::run(&env, &RestoreOptions::default()).await;
    assert_eq!(restore_of(&twice, "a1").restored_rows, 0);
    assert_eq!(
        restore_of(&twice, "a1").already_present_rows,
        originals.len() as u64
    );

    // A restored row that was changed is a conflict, reported and not overwritten.
    sqlx::query("UPDATE wallet_outbox_restored SET worker_id = 'changed' WHERE event_id = 'max-1'")
        .execute(&db.db.pool)
        .await
        .unwrap();
    let conflict = restore::run(&env, &RestoreOptions::default()).await;
    assert_eq!(conflict.exit_code, 1);
    assert_eq!(restore_of(&conflict, "a1").conflicts, ["max-1"]);
    let kept: String =
        sqlx::query_scalar("SELECT worker_id FROM wallet_outbox_restored WHERE event_id = 'max-1'")
            .fetch_one(&db.db.pool)
            .await
            .unwrap();
    assert_eq!(kept, "changed");

    // Back into the live table only with the explicit flag, never over a live row.
    let refused = restore::run(
        &env,
        &RestoreOptions {
            into: Some("wallet_outbox".into()),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(refused.exit_code, 2);
    db.insert(&[row("a1", "max-2", T0)]).await;
    let live = restore::run(
        &env,
        &RestoreOptions {
            into_source: true,
            selection: Selection::of_apps(&["a1"]),
            // The test's own lock names: without them the server-wide wallet_outbox_archive:a1
            // of every other test at once.
            lock_prefix: db.lock_prefix(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(restore_of(&live, "a1").conflicts, ["max-2"]);
    assert_eq!(
        restore_of(&live, "a1").restored_rows,
        originals.len() as u64 - 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_deletes_only_unchanged_members_of_receipts_past_the_grace() {
    let mut rows = rows("a1", 40);
    rows.extend((0..10).map(|i| row("a2", &format!("b{i}"), T0 + i)));
    let (db, _s3, _store, env) = archived_env(&rows, &["a1"], 15).await;
    // After archiving: one member's status and one's updated_at_ms change; a straggler arrives.
    sqlx::query("UPDATE wallet_outbox SET status = 'RETRYABLE' WHERE event_id = 'e3'")
        .execute(&db.db.pool)
        .await
        .unwrap();
    // e17 takes e16's archived updated_at_ms: a purge that matched event ids and versions
    // separately, not as pairs, would delete it.
    sqlx::query(
        "UPDATE wallet_outbox SET updated_at_ms = updated_at_ms - 1 WHERE event_id = 'e17'",
    )
    .execute(&db.db.pool)
    .await
    .unwrap();
    db.insert(&[row("a1", "straggler", T0 + 5)]).await;
    // a2's receipt is brand new: inside a 24h grace.
    let a2 = archive(&env, &options(&db, &["a2"], ARCHIVED_CUTOFF)).await;
    assert!(a2.ok);
    let mut opts = purge_options(&db, &["a1", "a2"]);
    opts.grace_ms = 1; // the test clock stands still: a1's receipts are as old as a2's
    sqlx::query("UPDATE wallet_outbox_archive_receipts SET verified_at_ms = verified_at_ms - 2 WHERE app_code = 'a1'").execute(&db.db.pool).await.unwrap();
    let summary = purge::run(&env, &opts).await;
    assert!(summary.ok, "{}", summary.to_json());
    assert_eq!(purge_of(&summary, "a1").purged_rows, 38);
    assert_eq!(purge_of(&summary, "a1").kept_changed, ["e3", "e17"]);
    assert_eq!(purge_of(&summary, "a2").purged_rows, 0, "inside the grace");
    let remaining: Vec<String> = sqlx::query_scalar(
        "SELECT event_id FROM wallet_outbox WHERE app_code = 'a1' ORDER BY event_id",
    )
    .fetch_all(&db.db.pool)
    .await
    .unwrap();
    assert_eq!(remaining, ["e17", "e3", "straggler"]);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox WHERE app_code = 'a2'")
            .await,
        10
    );
    let (purged, kept): (i64, i64) = sqlx::query_as("SELECT CAST(SUM(purged_rows) AS SIGNED), CAST(SUM(kept_rows) AS SIGNED) FROM wallet_outbox_archive_receipts WHERE app_code = 'a1'")
        .fetch_one(&db.db.pool)
        .await
        .unwrap();
    assert_eq!((purged, kept), (38, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reverify_refuses_a_corrupted_batch_and_restore_loads_nothing_of_it() {
    let (db, _s3, store, env) = archived_env(&rows("a1", 30), &["a1"], 10).await;
    let (bad_batch, data_key, _, _) = db.receipts("a1").await.remove(0);
    let mut bytes = read(store.as_ref(), &data_key).await;
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    store
        .put(
            &Key::stored(data_key.clone()),
            Bytes::from(bytes),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let bad_members: Vec<String> =
        sqlx::query_scalar("SELECT event_id FROM wallet_outbox_archive_members WHERE batch_id = ?")
            .bind(&bad_batch)
            .fetch_all(&db.db.pool)
            .await
            .unwrap();

    let restored = restore::run(&env, &RestoreOptions::default()).await;
    assert_eq!(restored.apps[0].outcome, Outcome::Failed);
    assert_eq!(
        restore_of(&restored, "a1").failed_batches,
        std::slice::from_ref(&bad_batch)
    );
    assert_eq!(restore_of(&restored, "a1").restored_rows, 20);
    for id in &bad_members {
        let n = db
            .count(&format!(
                "SELECT COUNT(*) FROM wallet_outbox_restored WHERE event_id = '{id}'"
            ))
            .await;
        assert_eq!(n, 0, "nothing of the corrupted batch is loaded");
    }

    let mut opts = purge_options(&db, &["a1"]);
    opts.objects = purge::ObjectCheck::Read;
    let summary = purge::run(&env, &opts).await;
    assert_eq!(summary.exit_code, 1);
    assert_eq!(purge_of(&summary, "a1").failed_batches, [bad_batch]);
    assert_eq!(purge_of(&summary, "a1").purged_rows, 20);
    let left: Vec<String> =
        sqlx::query_scalar("SELECT event_id FROM wallet_outbox ORDER BY event_id")
            .fetch_all(&db.db.pool)
            .await
            .unwrap();
    let mut want = bad_members.clone();
    want.sort();
    assert_eq!(left, want, "the corrupted batch's rows stay");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_purge_converges_and_purge_excludes_archive() {
    let (db, _s3, _store, env) = archived_env(&rows("a1", 1_200), &["a1"], 5_000).await;
    let mut opts = purge_options(&db, &["a1"]);
    let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let seen = calls.clone();
    opts.failpoints = FailPoints::new(move |p| {
        p == "before-purge-commit" && seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1
    });
    let crashed = purge::run(&env, &opts).await;
    assert_eq!(
        crashed.apps[0].outcome,
        Outcome::Failed,
        "{}",
        crashed.to_json()
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox").await,
        700,
        "the first chunk committed, the second rolled back"
    );

    // While another session holds the app's lock, purge (like archive) skips the app.
    let mut other = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    let name = lock_name(&db.lock_prefix(), "wallet_outbox", "a1");
    sqlx::query("SELECT GET_LOCK(?, 0)")
        .bind(&name)
        .execute(&mut other)
        .await
        .unwrap();
    opts.failpoints = FailPoints::default();
    let skipped = purge::run(&env, &opts).await;
    assert_eq!(skipped.apps[0].outcome, Outcome::SkippedLocked);
    // Released before the session ends: a closed connection's lock goes a moment after
    // `close` returns, and the rerun below must not meet it.
    sqlx::query("SELECT RELEASE_LOCK(?)")
        .bind(&name)
        .execute(&mut other)
        .await
        .unwrap();
    other.close().await.unwrap();

    let rerun = purge::run(&env, &opts).await;
    assert!(rerun.ok, "{}", rerun.to_json());
    assert_eq!(purge_of(&rerun, "a1").purged_rows, 700);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    assert_eq!(
        db.count("SELECT CAST(SUM(purged_rows) AS SIGNED) FROM wallet_outbox_archive_receipts")
            .await,
        1_200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drills_record_success_and_failure() {
    let (db, _s3, store, env) = archived_env(&rows("a1", 20), &["a1"], 10).await;
    let drill = restore::run(
        &env,
        &RestoreOptions {
            drill: true,
            ..Default::default()
        },
    )
    .await;
    assert!(drill.ok, "{}", drill.to_json());
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_drills WHERE ok")
            .await,
        2
    );
    let scratch = db.count("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE 'wallet_outbox_drill%'").await;
    assert_eq!(scratch, 0, "scratch tables are dropped");

    let (_, data_key, _, _) = db.receipts("a1").await.remove(0);
    store.delete(&Key::stored(data_key.clone())).await.unwrap();
    let failed = restore::run(
        &env,
        &RestoreOptions {
            drill: true,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(failed.apps[0].outcome, Outcome::Failed);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_drills WHERE NOT ok")
            .await,
        1
    );
    let default_table = db
        .count("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'wallet_outbox_restored'")
        .await;
    assert_eq!(default_table, 0, "a drill never touches the default table");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_loads_only_the_bytes_it_verified() {
    // The store serves a data object correctly to the archive's read-back (1st GET) and to
    // restore's verification (2nd), and would serve other, well-formed bytes to a 3rd GET: as if
    // the object had been replaced in between. Restore loads the bytes it verified, from the
    // one fetch, and never asks a 3rd time.
    let gets = Arc::new(std::sync::Mutex::new(std::collections::HashMap::<
        String,
        u32,
    >::new()));
    let counted = gets.clone();
    let s3 = crate::support::misbehaving::misbehaving(
        |_| Ok(()),
        move |key, mut bytes| {
            if key.ends_with("/data.ndjson.gz") {
                let mut gets = counted.lock().unwrap();
                let n = gets.entry(key.to_string()).or_default();
                *n += 1;
                if *n == 3 {
                    // A well-formed replacement (valid gzip, valid rows, one event type changed),
                    // which no gzip or JSON check would notice.
                    let mut text = String::new();
                    std::io::Read::read_to_string(
                        &mut flate2::read::GzDecoder::new(&bytes[..]),
                        &mut text,
                    )
                    .unwrap();
                    let text = text.replacen("WalletCredited", "WalletDebited", 1);
                    let mut gz =
                        flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                    std::io::Write::write_all(&mut gz, text.as_bytes()).unwrap();
                    bytes = gz.finish().unwrap();
                }
            }
            bytes
        },
    )
    .await;
    let store = s3.store().await;
    let db = TestDb::new().await;
    db.insert(&rows("a1", 10)).await;
    let env = env(&db, store.clone(), T0 + DAY);
    assert!(archive(&env, &options(&db, &["a1"], T0 + DAY)).await.ok);
    let restored = restore::run(&env, &RestoreOptions::default()).await;
    assert_eq!(
        restored.apps[0].outcome,
        Outcome::Done,
        "{}",
        restored.to_json()
    );
    let fetched: Vec<u32> = gets.lock().unwrap().values().copied().collect();
    assert_eq!(
        fetched,
        vec![2],
        "the data object is fetched once by the archive's read-back and once by restore"
    );
    assert_eq!(
        table_rows(&db, "wallet_outbox_restored", "a1").await,
        table_rows(&db, "wallet_outbox", "a1").await,
        "restore loaded the bytes it verified, not a later version"
    );
}
