//! Builds of different ages (SPEC §20; issue 58, "Data lost in a rollout"; README, "Upgrading"):
//! a build never writes to a layout of the archiver's tables newer than the one it was made for.
//! The builds released before the fence are stopped at start-up by migration 19 — run here: the
//! binary of 26a8c4b (issue 58's starting point, built by `.ci/old-build`) after this build's
//! `migrate`. This build reads the layout at start-up and in every transaction that writes, and
//! refuses a newer one with exit status 2, naming it and the build that wrote it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use outbox_archiver::purge;
use outbox_archiver::testing::FailPoints;

use crate::support::*;

/// The release before the fence: issue 58's starting point.
const BEFORE_THE_FENCE: &str = "26a8c4bb533b2eac636b265034f0c332df56031a";

/// The layout row's version and build, as a newer build's `migrate` would leave them.
fn newer_layout_sql() -> &'static str {
    "UPDATE wallet_outbox_archive_layout SET version = version + 1, migrated_by = 'outbox-archiver 9.9.9 (archive layout 99)' WHERE id = 1"
}

async fn counts(db: &TestDb) -> (i64, i64, i64) {
    (
        db.count("SELECT COUNT(*) FROM wallet_outbox").await,
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_receipts")
            .await,
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_members")
            .await,
    )
}

/// The commands an operator or a CronJob runs on app `a1`, each with what it needs.
fn every_command(cutoff: &str) -> Vec<Vec<String>> {
    let cutoff = cutoff.to_string();
    [
        vec![
            "archive",
            "--app",
            "a1",
            "--cutoff",
            &cutoff,
            "--batch-rows",
            "10",
        ],
        vec!["purge", "--app", "a1", "--grace", "0s"],
        vec!["compact", "--app", "a1", "--older-than", "0s"],
        vec!["restore", "--app", "a1", "--into-source"],
        vec!["restore", "--app", "a1", "--drill"],
        vec!["verify", "--app", "a1", "--cutoff", &cutoff],
        vec!["status", "--app", "a1"],
        vec!["find", "--event-id", "e3"],
    ]
    .into_iter()
    .map(|c| c.into_iter().map(String::from).collect())
    .collect()
}

fn args(command: &[String]) -> Vec<&str> {
    command.iter().map(String::as_str).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_before_the_fence_stops_at_start_up_after_this_migrate() {
    let old = older_build(BEFORE_THE_FENCE).await;
    let db = TestDb::empty(&server_url().await).await;
    let s3 = TestS3::new().await;
    let envs = cli_envs(&db, &s3);
    let cutoff = (T0 + DAY).to_string();

    // The older build's deployment: its tables, its rows, two batches archived (layout 1: their
    // manifests do not name their columns), a column added between them, and both purged by
    // it — the rows of the first, archived before the column, with what they held in it
    // recorded in the database alone (`_added_values`), as builds before layout 2 did.
    let migrated = run_binary(&old, &["migrate", "--with-source-table"], &envs).await;
    assert_eq!(migrated.code, 0, "{}", migrated.all_output);
    db.insert(&rows("a1", 30)).await;
    let one_batch = [
        "archive",
        "--app",
        "a1",
        "--cutoff",
        &cutoff,
        "--batch-rows",
        "10",
        "--max-batches",
        "1",
    ];
    let archived = run_binary(&old, &one_batch, &envs).await;
    assert_eq!(archived.code, 0, "{}", archived.all_output);
    db.exec("ALTER TABLE wallet_outbox ADD COLUMN region VARCHAR(8) NULL DEFAULT 'eu'")
        .await;
    db.exec("UPDATE wallet_outbox SET region = 'us' WHERE event_id = 'e12'")
        .await;
    let archived = run_binary(&old, &one_batch, &envs).await;
    assert_eq!(archived.code, 0, "{}", archived.all_output);
    let purged = run_binary(&old, &["purge", "--app", "a1", "--grace", "0s"], &envs).await;
    assert_eq!(purged.code, 0, "{}", purged.all_output);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 10);
    let first_batch: String = sqlx::query_scalar(
        "SELECT batch_id FROM wallet_outbox_archive_added_values WHERE column_name = 'region'",
    )
    .fetch_one(&db.db.pool)
    .await
    .expect("the older build recorded the first batch's rows' region in the database");

    // This build's migrate: the fence.
    let migrated = run_cli(&["migrate"], &envs).await;
    assert_eq!(migrated.code, 0, "{}", migrated.all_output);
    assert!(
        migrated.summary["applied"]
            .to_string()
            .contains("20260101000019"),
        "{}",
        migrated.summary
    );
    let before = counts(&db).await;

    // Every command of the older build now stops before any work, at its start-up check.
    for command in every_command(&cutoff) {
        let run = run_binary(&old, &args(&command), &envs).await;
        assert_eq!(run.code, 2, "{command:?}: {}", run.all_output);
        assert!(
            run.all_output
                .contains("wallet_outbox_archive_runs has no column command"),
            "{command:?}: {}",
            run.all_output
        );
    }
    // Its migrate refuses a history it does not know (it would not undo the fence).
    let run = run_binary(&old, &["migrate"], &envs).await;
    assert_ne!(run.code, 0, "{}", run.all_output);
    assert!(
        run.all_output.contains("20260101000019"),
        "{}",
        run.all_output
    );
    assert_eq!(counts(&db).await, before, "the older build wrote nothing");

    // This build carries on where the older one stopped.
    let run = run_cli(
        &[
            "archive",
            "--app",
            "a1",
            "--cutoff",
            &cutoff,
            "--batch-rows",
            "10",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&["verify", "--app", "a1", "--cutoff", &cutoff], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    // verify names the batch whose rows' values the store does not hold (issue 58).
    assert_eq!(
        run.summary["values_only_in_database"],
        serde_json::json!([{"app_code": "a1", "batch_id": first_batch, "columns": "region"}]),
        "{}",
        run.summary
    );
    assert!(
        run.all_output
            .contains("the store does not hold those values"),
        "{}",
        run.all_output
    );

    // The column dropped (issue 58): the older build's second batch, which holds it and does
    // not name its columns, is read by what the database recorded of the column; purge, verify
    // and restore go on, restore leaving the column out only when told.
    db.exec("ALTER TABLE wallet_outbox DROP COLUMN region")
        .await;
    let run = run_cli(&["verify", "--app", "a1", "--cutoff", &cutoff], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&["find", "--event-id", "e12"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        run.summary["found"][0]["row"]["region"], "us",
        "{}",
        run.summary
    );
    let run = run_cli(&["purge", "--app", "a1", "--grace", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    let run = run_cli(&["restore", "--app", "a1", "--into-source"], &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output.contains("--without-column region"),
        "{}",
        run.all_output
    );
    // The first batch's lines lack the column, but its deleted rows' values in it were
    // recorded (by the older build): refused too, not loaded without them unasked.
    assert!(
        run.all_output
            .contains("deleted rows held values in column(s) region"),
        "{}",
        run.all_output
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    let run = run_cli(
        &[
            "restore",
            "--app",
            "a1",
            "--into-source",
            "--without-column",
            "region",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 30);
    let version = run_cli_text(&["--version"], &[]).await;
    assert!(version.1.contains("(archive layout 2)"), "{}", version.1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout_newer_than_this_build_is_refused_with_exit_2_naming_it() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let envs = cli_envs(&db, &s3);
    let cutoff = (T0 + DAY).to_string();
    db.insert(&rows("a1", 30)).await;
    let run = run_cli(
        &[
            "archive",
            "--app",
            "a1",
            "--cutoff",
            &cutoff,
            "--batch-rows",
            "10",
            "--max-batches",
            "2",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);

    db.exec(newer_layout_sql()).await;
    let before = counts(&db).await;
    for command in every_command(&cutoff)
        .into_iter()
        .chain([vec!["migrate".to_string()]])
    {
        let run = run_cli(&args(&command), &envs).await;
        assert_eq!(run.code, 2, "{command:?}: {}", run.all_output);
        let error = run.summary["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("the archiver's tables are at layout 3")
                && error.contains("migrated by outbox-archiver 9.9.9 (archive layout 99)")
                && error.contains("newer than this build knows"),
            "{command:?}: {}",
            run.summary
        );
    }
    // doctor names it as the problem it is.
    let run = run_cli(&["doctor"], &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output
            .contains("the archiver's tables are at layout 3"),
        "{}",
        run.all_output
    );
    assert_eq!(counts(&db).await, before, "nothing was written");
}

/// The layout raised while a run is under way (a newer build's `migrate` during a rollout):
/// the next transaction that writes refuses — archive records no receipt, purge deletes no
/// more rows and finishes no batch — and the run ends with exit status 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout_raised_during_a_run_is_refused_in_the_transaction_that_writes() {
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 30)).await;
    let cutoff = T0 + DAY;
    let env = env(&db, store.clone(), cutoff);

    // archive: the first batch's objects are written, then the layout is raised: no receipt is
    // recorded.
    let url = db.url.clone();
    let puts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut opts = options(&db, &["a1"], cutoff);
    opts.limits.max_rows = 10;
    opts.failpoints = FailPoints::new({
        let puts = puts.clone();
        move |point| {
            if point == "after-data-put" && puts.fetch_add(1, Ordering::SeqCst) == 0 {
                execute_from_failpoint(&url, newer_layout_sql().to_string());
            }
            false
        }
    });
    let archived = archive(&env, &opts).await;
    assert_eq!(archived.exit_code, 2, "{}", archived.to_json());
    let app = report(&archived, "a1");
    assert!(
        app.error
            .as_deref()
            .is_some_and(|e| e.contains("the archiver's tables are at layout 3")),
        "{}",
        archived.to_json()
    );
    assert!(db.receipts("a1").await.is_empty(), "{}", archived.to_json());
    db.exec("UPDATE wallet_outbox_archive_layout SET version = version - 1 WHERE id = 1")
        .await;

    // purge: the first chunk deleted, then the layout is raised: the batch is not finished,
    // and the next batch's rows stay.
    let mut opts = options(&db, &["a1"], cutoff);
    opts.limits.max_rows = 10;
    let archived = archive(&env, &opts).await;
    assert!(archived.ok, "{}", archived.to_json());
    assert_eq!(db.receipts("a1").await.len(), 3);
    let rows_before = db.count("SELECT COUNT(*) FROM wallet_outbox").await;
    let raised = Arc::new(AtomicBool::new(false));
    let url = db.url.clone();
    let mut opts = purge_options(&db, &["a1"]);
    opts.failpoints = FailPoints::new({
        let raised = raised.clone();
        move |point| {
            if point == "after-purge-chunk" && !raised.swap(true, Ordering::SeqCst) {
                execute_from_failpoint(&url, newer_layout_sql().to_string());
            }
            false
        }
    });
    let purged = purge::run(&env, &opts).await;
    assert_eq!(purged.exit_code, 2, "{}", purged.to_json());
    assert!(raised.load(Ordering::SeqCst));
    let deleted = rows_before - db.count("SELECT COUNT(*) FROM wallet_outbox").await;
    assert_eq!(
        deleted,
        10,
        "one chunk, of the first batch: {}",
        purged.to_json()
    );
    assert_eq!(
        db.count(
            "SELECT COUNT(*) FROM wallet_outbox_archive_receipts WHERE purged_at_ms IS NOT NULL"
        )
        .await,
        0,
        "no batch finished under the newer layout"
    );
}
