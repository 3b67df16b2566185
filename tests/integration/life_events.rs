//! The archive survives its table's life events (issue 42, SPEC §5.14, §5.16), through the
//! binary: a column added while purge runs, a default changed after rows were archived or
//! purged, a generated column. "Exactly what was archived" depends only on what the archive
//! recorded: the archive holds the whole row (every stored column), and for a row archived
//! before a column existed, what the column held when purge deleted the row is recorded with
//! its batch — so restore writes back exactly the row that was deleted, and a row holding
//! anything else stays.

use std::time::Duration;

use sqlx::AssertSqlSafe;

use crate::support::*;
use crate::tables::{ledger_db, ledger_env, ledger_row, LEDGER_PROFILE};

const CUTOFF: &str = "2026-01-04T00:00:00Z";

/// The binary's environment for `db` and `s3`.
fn envs(db: &TestDb, s3: &TestS3) -> Vec<(&'static str, String)> {
    cli_envs(db, s3)
}

/// `(event_id, column)` of every row of `table` whose event id matches `like`, by event id; the
/// column as text (NULL: None).
async fn column_of(
    db: &TestDb,
    table: &str,
    column: &str,
    like: &str,
) -> Vec<(String, Option<String>)> {
    sqlx::query_as(AssertSqlSafe(format!(
        "SELECT event_id, CAST({column} AS CHAR) FROM {table} WHERE event_id LIKE ? ORDER BY event_id"
    )))
    .bind(like)
    .fetch_all(&db.db.pool)
    .await
    .unwrap()
}

fn ok(run: &Run, what: &str) {
    assert_eq!(run.code, 0, "{what}: {}", run.all_output);
}

/// The first case: 2,000 rows archived, purge started slowly, and while it runs a column
/// is added and 100 rows not yet purged are given a value in it. Purge must decide each delete
/// against the table as it is in the deleting transaction: no value may end up in no archive and
/// no longer in the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_added_while_purge_runs_loses_no_value() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let envs = envs(&db, &s3);
    db.insert(&rows("a1", 2000)).await;
    let run = run_cli(
        &[
            "archive",
            "--app",
            "a1",
            "--batch-rows",
            "500",
            "--cutoff",
            CUTOFF,
        ],
        &envs,
    )
    .await;
    ok(&run, "archive");
    let purge = tokio::spawn({
        let envs = envs.clone();
        async move {
            run_cli(
                &[
                    "purge",
                    "--app",
                    "a1",
                    "--grace",
                    "0s",
                    "--max-rows-per-second",
                    "250",
                ],
                &envs,
            )
            .await
        }
    });
    // Once purge is under way, the service adds a column and writes it on rows not purged yet.
    let started = std::time::Instant::now();
    while db.count("SELECT COUNT(*) FROM wallet_outbox").await > 1700 {
        assert!(started.elapsed() < Duration::from_secs(60), "purge started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    db.exec("ALTER TABLE wallet_outbox ADD COLUMN note VARCHAR(32) NULL")
        .await;
    let precious = sqlx::query(AssertSqlSafe(format!(
        "UPDATE wallet_outbox SET note = 'precious' WHERE app_code = 'a1' AND updated_at_ms >= {}",
        T0 + 1900
    )))
    .execute(&db.db.pool)
    .await
    .unwrap()
    .rows_affected();
    assert_eq!(precious, 100, "the rows were not purged yet");
    let run = purge.await.unwrap();
    ok(&run, "purge");
    // The chunk after the ALTER was compared on the old columns, found them changed in its
    // transaction, and was done again on the table as it is.
    assert!(
        run.all_output
            .contains("the table's definition changed under a purge chunk"),
        "{}",
        run.all_output
    );
    // The rows of the batches purged after the column came hold a value their batch's lines
    // lack (NULL or 'precious'): none is deleted on that batch's word, each is kept and marked
    // to be archived again as it is now — nothing is recorded in the database alone.
    let details = &run.summary["apps"][0];
    let kept = details["kept_changed"].as_array().map_or(0, Vec::len);
    assert!(kept >= 100, "{}", run.summary);
    assert!(
        details["kept_for_columns"][0]
            .as_str()
            .is_some_and(|w| w.starts_with("note (")),
        "{}",
        run.summary
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_added_values")
            .await,
        0
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_kept")
            .await,
        kept as i64
    );
    // The next archive run archives them again as they are now; purge then deletes them by
    // the new batches, and the store alone is the archive.
    let run = run_cli(
        &[
            "archive",
            "--app",
            "a1",
            "--batch-rows",
            "500",
            "--cutoff",
            CUTOFF,
        ],
        &envs,
    )
    .await;
    ok(&run, "archive");
    assert_eq!(
        run.summary["apps"][0]["kept_rows_archived_again"], kept,
        "{}",
        run.summary
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_kept")
            .await,
        0
    );
    let run = run_cli(&["purge", "--app", "a1", "--grace", "0s"], &envs).await;
    ok(&run, "purge");
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    let run = run_cli(&["verify", "--app", "a1", "--cutoff", CUTOFF], &envs).await;
    ok(&run, "verify");

    // Every precious value is still in the source, or in what restore brings back.
    let run = run_cli(&["restore", "--app", "a1"], &envs).await;
    ok(&run, "restore");
    let source = column_of(&db, "wallet_outbox", "note", "%").await;
    let restored = column_of(&db, "wallet_outbox_restored", "note", "%").await;
    assert_eq!(
        restored.len(),
        2000,
        "restore brings back every archived row"
    );
    let in_source: std::collections::HashMap<_, _> = source.into_iter().collect();
    let mut lost = Vec::new();
    for i in 1900..2000 {
        let id = format!("e{i}");
        let back = match in_source.get(&id) {
            Some(held) => held.clone(),
            None => restored.iter().find(|(e, _)| *e == id).unwrap().1.clone(),
        };
        if back.as_deref() != Some("precious") {
            lost.push(id);
        }
    }
    assert!(
        lost.is_empty(),
        "{} precious values are in no archive and no longer in the source: {lost:?}\n{}",
        lost.len(),
        run.all_output
    );
}

/// A default that changes later, rows archived while they hold it: the archive holds the whole
/// row, so a row holding the default or a value of its own is archived (not refused), purged,
/// and restored as it was, whatever the default is by then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_archived_with_an_added_column_are_restored_as_they_were() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let envs = envs(&db, &s3);
    db.exec("ALTER TABLE wallet_outbox ADD COLUMN region VARCHAR(8) NULL DEFAULT 'eu'")
        .await;
    db.insert(&rows("a1", 10)).await;
    db.exec("UPDATE wallet_outbox SET region = 'us' WHERE app_code = 'a1' AND event_id = 'e3'")
        .await;
    ok(
        &run_cli(&["archive", "--all-apps", "--cutoff", CUTOFF], &envs).await,
        "archive",
    );
    let run = run_cli(&["purge", "--app", "a1", "--grace", "0s"], &envs).await;
    ok(&run, "purge");
    assert_eq!(run.summary["apps"][0]["purged_rows"], 10, "{}", run.summary);
    db.exec("ALTER TABLE wallet_outbox ALTER COLUMN region SET DEFAULT 'sg'")
        .await;
    ok(
        &run_cli(&["restore", "--all-apps", "--into-source"], &envs).await,
        "restore",
    );
    let regions = column_of(&db, "wallet_outbox", "region", "%").await;
    assert_eq!(regions.len(), 10);
    for (id, region) in &regions {
        let want = if id == "e3" { "us" } else { "eu" };
        assert_eq!(region.as_deref(), Some(want), "{id}: {regions:?}");
    }
}

/// A default that changes later, rows archived before the column existed: purge deletes none of
/// them on their batches' word (no line holds the column), the next archive run archives them
/// again as they are now, and purge deletes them by those batches — so they are restored holding
/// what they held ('eu'), never the default at restore time ('sg').
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_archived_before_a_column_are_restored_with_what_they_held() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let envs = envs(&db, &s3);
    db.insert(&rows("b1", 10)).await;
    db.insert(&rows("b2", 10)).await;
    let archive = ["archive", "--all-apps", "--cutoff", CUTOFF];
    ok(&run_cli(&archive, &envs).await, "archive");
    db.exec("ALTER TABLE wallet_outbox ADD COLUMN region VARCHAR(8) NULL DEFAULT 'eu'")
        .await;
    let purge = ["purge", "--all-apps", "--grace", "0s"];
    let run = run_cli(&purge, &envs).await;
    ok(&run, "purge");
    for app in run.summary["apps"].as_array().unwrap() {
        assert_eq!(app["purged_rows"], 0, "{}", run.summary);
    }
    let run = run_cli(&archive, &envs).await;
    ok(&run, "archive again");
    for app in run.summary["apps"].as_array().unwrap() {
        assert_eq!(app["kept_rows_archived_again"], 10, "{}", run.summary);
    }
    db.exec("ALTER TABLE wallet_outbox ALTER COLUMN region SET DEFAULT 'sg'")
        .await;
    let run = run_cli(&purge, &envs).await;
    ok(&run, "purge again");
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    ok(
        &run_cli(&["restore", "--all-apps", "--into-source"], &envs).await,
        "restore",
    );
    let regions = column_of(&db, "wallet_outbox", "region", "%").await;
    assert_eq!(regions.len(), 20);
    assert!(
        regions.iter().all(|(_, r)| r.as_deref() == Some("eu")),
        "every row comes back holding what it held: {regions:?}"
    );
}

/// A generated column is derived, not data: it wedges neither archive nor purge (added before
/// the rows are archived, or after), a restore lets the server compute it, and a profile's
/// table may have one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_column_wedges_nothing() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let envs = envs(&db, &s3);
    db.insert(&rows("g1", 10)).await;
    let archive = ["archive", "--all-apps", "--cutoff", CUTOFF];
    ok(&run_cli(&archive, &envs).await, "archive g1");
    db.exec("ALTER TABLE wallet_outbox ADD COLUMN user_bucket BIGINT AS (user_id % 16) VIRTUAL")
        .await;
    db.insert(&rows("g2", 10)).await;
    ok(&run_cli(&archive, &envs).await, "archive g2");
    let run = run_cli(&["purge", "--all-apps", "--grace", "0s"], &envs).await;
    ok(&run, "purge");
    let purged: Vec<u64> = run.summary["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["purged_rows"].as_u64().unwrap())
        .collect();
    assert_eq!(purged, [10, 10], "{}", run.summary);
    ok(
        &run_cli(&["restore", "--all-apps", "--into-source"], &envs).await,
        "restore",
    );
    let buckets = column_of(&db, "wallet_outbox", "user_bucket", "%").await;
    assert_eq!(buckets.len(), 20);
    assert!(
        buckets.iter().all(|(_, b)| b.as_deref() == Some("9")),
        "{buckets:?}"
    );

    // A profile's table with a generated column: accepted, and round trips.
    let mut ledger = ledger_db().await;
    ledger
        .exec("ALTER TABLE ledger_outbox ADD COLUMN counter_class INT AS (sequence_no % 7) STORED")
        .await;
    let s3 = TestS3::new().await;
    let envs = ledger_env(&ledger, &s3, LEDGER_PROFILE);
    ok(&run_cli(&["migrate"], &envs).await, "migrate the ledger");
    let profile = outbox_archiver::Profile::load(LEDGER_PROFILE.as_ref()).unwrap();
    ledger.spec = ledger.db.resolve_profile(&profile).await.unwrap();
    ledger.delivered_status = "SENT";
    let rows: Vec<_> = (0..5)
        .map(|i| {
            ledger_row(
                "l1",
                &format!("m{i}"),
                "1.0000",
                None,
                None,
                None,
                "memo",
                T0 + i,
            )
        })
        .collect();
    ledger.insert(&rows).await;
    for command in [
        vec!["archive", "--all-apps", "--cutoff", CUTOFF],
        vec!["verify", "--all-apps", "--cutoff", CUTOFF],
        vec!["purge", "--all-apps", "--grace", "0s"],
        vec!["restore", "--all-apps", "--into-source"],
    ] {
        ok(&run_cli(&command, &envs).await, &command.join(" "));
    }
    let classes: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT message_id, CAST(counter_class AS CHAR) FROM ledger_outbox ORDER BY message_id",
    )
    .fetch_all(&ledger.db.pool)
    .await
    .unwrap();
    assert_eq!(classes.len(), 5);
    for (id, class) in classes {
        let row = rows
            .iter()
            .find(|r| r[1].as_str() == Some(id.as_str()))
            .unwrap();
        let sequence = row[8].as_i64().unwrap();
        assert_eq!(class, Some((sequence % 7).to_string()), "{id}");
    }
}
