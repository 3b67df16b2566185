//! How runs end, and say so: a sentinel file stops every command cleanly before its next batch
//! or chunk (pt-archiver's `--sentinel`), and every app of every command carries a
//! `stop_reason` (pt-archiver's `--why-quit`).

use outbox_archiver::testing::FailPoints;
use outbox_archiver::{purge, restore, verify};
use outbox_archiver::{Ending, Stop, Stops};

use crate::support::*;

const CUTOFF: i64 = T0 + DAY;

fn sentinel(path: &std::path::Path) -> Stops {
    Stops {
        sentinel: Some(path.to_path_buf()),
        ..Stops::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_file_stops_every_command_before_its_next_batch() {
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 50)).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stop-outbox-archiver");
    let expected = Some(Ending::Stopped(Stop::Sentinel(file.clone())));
    let ctx = env(&db, store.clone(), CUTOFF + DAY).with_stops(sentinel(&file));
    let mut opts = options(&db, &["a1"], CUTOFF);
    opts.limits.max_rows = 10;

    // Created while the first batch is recorded — the second is published meanwhile (the stages
    // overlap), so it is recorded too, not left as objects without a receipt: archive stops
    // after it, work left.
    let touch = file.clone();
    opts.failpoints = FailPoints::new(move |point| {
        if point == "after-members" {
            std::fs::write(&touch, b"").unwrap();
        }
        false
    });
    let first = archive(&ctx, &opts).await;
    assert!(first.ok, "{}", first.to_json());
    let app = report(&first, "a1");
    assert_eq!(app.outcome.as_str(), "stopped");
    assert_eq!(app.batches, 2);
    assert_eq!(app.stop_reason, expected);

    // While it exists, nothing starts: archive, purge, restore, verify.
    opts.failpoints = FailPoints::default();
    let again = archive(&ctx, &opts).await;
    assert_eq!(report(&again, "a1").batches, 0);
    assert_eq!(report(&again, "a1").stop_reason, expected);
    let purged = purge::run(&ctx, &purge_options(&db, &["a1"])).await;
    assert_eq!(purge_of(&purged, "a1").purged_rows, 0);
    assert_eq!(report(&purged, "a1").outcome.as_str(), "stopped");
    assert_eq!(report(&purged, "a1").stop_reason, expected);
    let restored = restore::run(&ctx, &restore::RestoreOptions::default()).await;
    assert_eq!(restore_of(&restored, "a1").restored_rows, 0);
    assert_eq!(report(&restored, "a1").stop_reason, expected);
    let verified = verify::run(
        &ctx,
        &verify::VerifyOptions::everything(CUTOFF, "DELIVERED"),
    )
    .await;
    assert_eq!(report(&verified, "a1").outcome.as_str(), "stopped");
    assert!(verify_run(&verified).checked_batches.is_empty());
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 50);

    // Removed: the next run goes on where the first stopped.
    std::fs::remove_file(&file).unwrap();
    let rest = archive(&ctx, &opts).await;
    assert_eq!(report(&rest, "a1").batches, 3);
    assert_eq!(report(&rest, "a1").stop_reason, Some(Ending::CaughtUp));
    assert_eq!(
        archived_rows(&db, store.as_ref(), "a1").await,
        db.expected_rows("a1", CUTOFF).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sentinel_flag_stops_the_binary_cleanly() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    db.insert(&rows("a1", 5)).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sentinel");
    std::fs::write(&file, b"").unwrap();
    let mut envs = vec![
        ("DATABASE_URL", db.url.clone()),
        ("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()),
        ("OUTBOX_ARCHIVER_SENTINEL", file.display().to_string()),
    ];
    envs.extend(s3.binary_env());
    let run = run_cli(&["archive", "--app", "a1", "--older-than", "1s"], &envs).await;
    assert_eq!(run.code, 0, "a stop is not a failure: {}", run.all_output);
    let app = &run.summary["apps"][0];
    assert_eq!(app["outcome"], "stopped");
    assert_eq!(
        app["stop_reason"],
        format!("sentinel file {} exists", file.display())
    );
    assert_eq!(db.receipts("a1").await.len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_app_of_every_command_says_why_its_run_ended() {
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 20)).await;
    db.insert(&rows("bad code", 2)).await;
    // a2 has a row, newer than the cutoff: nothing to archive.
    db.insert(&[row("a2", "later", CUTOFF + 1_000)]).await;
    let ctx = env(&db, store.clone(), CUTOFF + DAY);
    let mut opts = options(&db, &["a1", "a2", "bad code"], CUTOFF);
    let archived = archive(&ctx, &opts).await;
    let why = |summary: &outbox_archiver::Summary, app: &str| {
        report(summary, app)
            .stop_reason
            .clone()
            .expect("every app says why")
    };
    assert_eq!(why(&archived, "a1"), Ending::CaughtUp);
    assert_eq!(why(&archived, "a2"), Ending::CaughtUp, "nothing to archive");
    assert_eq!(why(&archived, "bad code"), Ending::Refused);
    // In the words the summary has always said them in.
    assert_eq!(
        why(&archived, "bad code").to_string(),
        "refused: unsafe app code"
    );
    opts.max_batches = Some(0);
    db.insert(&rows("a3", 5)).await;
    opts.apps = outbox_archiver::Apps::Listed(vec!["a3".into()]);
    let limited = archive(&ctx, &opts).await;
    assert_eq!(why(&limited, "a3"), Ending::Stopped(Stop::MaxBatches));
    let verified = verify::run(
        &ctx,
        &verify::VerifyOptions::everything(CUTOFF, "DELIVERED"),
    )
    .await;
    assert_eq!(why(&verified, "a1"), Ending::Done);
    let purged = purge::run(&ctx, &purge_options(&db, &["a1"])).await;
    assert_eq!(why(&purged, "a1"), Ending::Done);
}

/// A shutdown while a batch is being built (issue 34): the app stops without writing that
/// batch and without building another one to learn whether work is left — a CronJob's
/// termination grace period bounds a stop — and the next run goes on from the cursor. Every
/// page read from the source after the shutdown is held until the run has ended: a run that
/// needed one (to finish a batch) would wait for it, and the page says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_while_a_batch_is_built_ends_the_run_without_another() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 9_000)).await;
    let ctx = env(&db, store.clone(), CUTOFF + DAY);
    let token = ctx.shutdown.clone();
    let pages = Arc::new(AtomicU64::new(0));
    let ended = Arc::new(AtomicBool::new(false));
    let waited_for = Arc::new(AtomicBool::new(false));
    let mut opts = options(&db, &["a1"], CUTOFF);
    opts.limits.max_rows = 3_000;
    let (seen, run_ended, needed) = (pages.clone(), ended.clone(), waited_for.clone());
    // Pages of 8, 32, 128, then 500 rows: the 10th is well into the second batch.
    opts.failpoints = FailPoints::new(move |point| {
        if point != "after-page" {
            return false;
        }
        if token.is_cancelled() {
            tokio::task::block_in_place(|| {
                let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
                while !run_ended.load(Ordering::SeqCst) {
                    if std::time::Instant::now() > until {
                        needed.store(true, Ordering::SeqCst);
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            });
        } else if seen.fetch_add(1, Ordering::SeqCst) + 1 == 10 {
            token.cancel();
        }
        false
    });
    let summary = archive(&ctx, &opts).await;
    ended.store(true, Ordering::SeqCst);
    let a1 = report(&summary, "a1");
    assert_eq!(
        a1.outcome,
        outbox_archiver::Outcome::Stopped,
        "{}",
        summary.to_json()
    );
    // The first batch is recorded unless the stop came before it was built whole.
    assert!(
        a1.batches <= 1 && a1.rows == a1.batches * 3_000,
        "{}",
        summary.to_json()
    );
    assert!(
        !waited_for.load(Ordering::SeqCst),
        "the run waited for rows read after the shutdown"
    );
    // The next run goes on from the cursor and archives the rest.
    let next = archive(
        &env(&db, store.clone(), CUTOFF + DAY),
        &options(&db, &["a1"], CUTOFF),
    )
    .await;
    assert!(next.ok, "{}", next.to_json());
    assert_eq!(db.members("a1").await.len(), 9_000);
}
