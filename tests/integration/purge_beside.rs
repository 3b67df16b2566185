//! Purge beside itself and beside the live service (SPEC §5.14, issue 34): every statement it
//! runs on the source touches only the rows it names, by the unique key, whatever the table's
//! size and statistics (its plans held to that on a small table, where the optimizer prefers a
//! scan); apps purged side by side neither deadlock nor leave rows; a row another transaction
//! holds is skipped at once and said — in the summary, the metrics and status — never waited for
//! and never hidden behind "done"; and a receipt is finished only when every member is proven gone.

use outbox_archiver::purge;
use outbox_archiver::Outcome;
use outbox_archiver::PurgeQueries;
use outbox_archiver::Value;
use outbox_archiver::WALLET_OUTBOX;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_statement_purge_runs_on_the_source_goes_by_the_unique_key() {
    // A small table (600 rows, four apps) and a chunk of 100 of one app's ids: a share large
    // enough that the optimizer would rather scan the whole table.
    let mut all = Vec::new();
    for app in ["a1", "a2", "a3", "a4"] {
        all.extend(rows(app, 150));
    }
    let db = TestDb::new().await;
    db.insert(&all).await;
    db.exec("ANALYZE TABLE wallet_outbox").await;
    let ids: Vec<String> = (0..100).map(|i| format!("e{i}")).collect();
    let plans = PurgeQueries::new(&db.db.pool, &WALLET_OUTBOX)
        .plans("a1", &ids)
        .await
        .unwrap();
    assert_eq!(plans.len(), 4);
    if flavour() == Flavour::MariaDb {
        // The chunk's one delete: each named row read by the key, joined to the list of ids.
        assert_eq!(plans[3].access.len(), 1, "{:?}", plans[3]);
        assert_eq!(plans[3].access[0].0, "eq_ref", "{:?}", plans[3]);
    }
    for plan in &plans {
        assert!(!plan.access.is_empty(), "{plan:?}: no access to the table");
        for (access, key, _) in &plan.access {
            assert_ne!(access, "ALL", "{plan:?}: a scan of the whole table");
            assert_eq!(key.as_deref(), Some("PRIMARY"), "{plan:?}");
            assert!(
                ["range", "eq_ref", "const", "ref"].contains(&access.as_str()),
                "{plan:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_purged_side_by_side_neither_deadlock_nor_leave_rows() {
    let apps = ["a1", "a2", "a3", "a4"];
    let mut all = Vec::new();
    for app in apps {
        all.extend(rows(app, 300));
    }
    let (db, _s3, _store, env) = archived_env(&all, &apps, 100).await;
    for round in 0..5 {
        let purged = purge::run(
            &env,
            &purge::PurgeOptions {
                parallel_apps: 4,
                include_restored: round > 0,
                ..purge_options(&db, &apps)
            },
        )
        .await;
        assert!(purged.ok, "round {round}: {}", purged.to_json());
        for app in &purged.apps {
            assert_eq!(app.retries, 0, "round {round}: {}", purged.to_json());
            assert_eq!(
                app.outcome,
                Outcome::Done,
                "round {round}: {}",
                purged.to_json()
            );
            assert_eq!(app.rows, 300, "round {round}: {}", purged.to_json());
        }
        assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
        // Back into the source, for the next round.
        let restored = outbox_archiver::restore::run(
            &env,
            &outbox_archiver::restore::RestoreOptions {
                into_source: true,
                selection: outbox_archiver::Selection::of_apps(&apps),
                lock_prefix: db.lock_prefix(),
                parallel_apps: 4,
                ..Default::default()
            },
        )
        .await;
        assert!(restored.ok, "{}", restored.to_json());
        assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 1_200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_another_transaction_holds_is_skipped_at_once_and_said() {
    use sqlx::{Connection, Executor};
    let (db, s3, _store) = fixture().await;
    db.insert(&rows("a1", 30)).await;
    let envs = cli_envs(&db, &s3);
    let run = run_cli(&["archive", "--app", "a1", "--cutoff", "2026-01-02"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    // The relay holds one row (a claim in flight), for the whole purge.
    let mut relay = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    relay.execute("BEGIN").await.unwrap();
    relay
        .execute("SELECT * FROM wallet_outbox WHERE app_code = 'a1' AND event_id = 'e7' FOR UPDATE")
        .await
        .unwrap();
    let metrics = tempfile::tempdir().unwrap();
    let textfile = metrics.path().join("purge.prom");
    // What a wait for the row would last: the server's lock wait, which purge's sessions take
    // unless a statement says otherwise (50 s by default on both servers).
    let lock_wait: i64 =
        sqlx::query_scalar("SELECT CAST(@@global.innodb_lock_wait_timeout AS SIGNED)")
            .fetch_one(&db.db.pool)
            .await
            .unwrap();
    assert!(lock_wait >= 30, "the server's lock wait is {lock_wait} s");
    let started = std::time::Instant::now();
    let run = run_cli(
        &[
            "purge",
            "--app",
            "a1",
            "--grace",
            "0s",
            "--metrics-textfile",
            textfile.to_str().unwrap(),
        ],
        &envs,
    )
    .await;
    let took = started.elapsed();
    // Not waited for (a wait would end in the server's lock timeout, an error), not hidden: the
    // whole run, a process started included, ends in a fraction of one lock wait (0.2-0.6 s
    // here), where a purge that waited out the lock and then skipped the row would take it all.
    assert!(
        took.as_secs_f64() < lock_wait as f64 / 5.0,
        "purge took {took:?} beside a lock wait of {lock_wait} s: it waited for the row"
    );
    assert_eq!(run.code, 0, "{}", run.all_output);
    let app = &run.summary["apps"][0];
    assert_eq!(app["outcome"], "stopped", "{}", run.summary);
    assert_eq!(app["purged_rows"], 29, "{}", run.summary);
    assert_eq!(app["left_locked_rows"], 1, "{}", run.summary);
    assert!(
        app["stop_reason"]
            .as_str()
            .unwrap()
            .contains("another transaction held"),
        "{}",
        run.summary
    );
    let prom = std::fs::read_to_string(&textfile).unwrap();
    assert!(
        prom.contains("outbox_archiver_purge_left_locked_rows{command=\"purge\",table=\"wallet_outbox\",app=\"a1\"} 1"),
        "{prom}"
    );
    let status = run_cli(&["status", "--app", "a1"], &envs).await;
    let last = &status.summary["apps"][0]["last_purge"];
    assert_eq!(last["outcome"], "stopped", "{}", status.summary);
    assert!(
        last["stop_reason"].as_str().unwrap().contains("left 1 row"),
        "{last}"
    );
    assert_eq!(
        status.summary["apps"][0]["awaiting_purge_rows"], 1,
        "{}",
        status.summary
    );
    // Released: the next purge takes it, and is done.
    relay.execute("ROLLBACK").await.unwrap();
    relay.close().await.unwrap();
    let run = run_cli(&["purge", "--app", "a1", "--grace", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(run.summary["apps"][0]["outcome"], "done", "{}", run.summary);
    assert_eq!(run.summary["apps"][0]["purged_rows"], 1, "{}", run.summary);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_the_relay_holds_beside_the_members_are_neither_read_nor_waited_for() {
    use sqlx::{Connection, Executor};
    // A small table — where a delete planned by cost scans it, or all of the app's rows — and a
    // pending row of the same app whose key sorts between two members'.
    let (db, s3, _store) = fixture().await;
    db.insert(&rows("a1", 30)).await;
    let mut pending = row("a1", "e7p", T0 + 7);
    pending[10] = Value::Text("PENDING".into());
    db.insert(&[pending.clone()]).await;
    db.exec("ANALYZE TABLE wallet_outbox").await;
    let envs = cli_envs(&db, &s3);
    let run = run_cli(&["archive", "--app", "a1", "--cutoff", "2026-01-02"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(run.summary["apps"][0]["rows"], 30, "{}", run.summary);
    // The relay claims the pending row and produces another beside a member, both in a
    // transaction open for the whole purge.
    let mut relay = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    relay.execute("BEGIN").await.unwrap();
    relay
        .execute(
            "SELECT * FROM wallet_outbox WHERE app_code = 'a1' AND event_id = 'e7p' FOR UPDATE",
        )
        .await
        .unwrap();
    relay
        .execute("INSERT INTO wallet_outbox SELECT app_code, 'e2p', event_type, transaction_id, command_id, user_id, asset_type, available_delta, frozen_delta, payload, status, worker_id, lock_until_ms, retry_count, next_retry_at_ms, last_error, created_at_ms, updated_at_ms FROM wallet_outbox WHERE app_code = 'a1' AND event_id = 'e7p'")
        .await
        .unwrap();
    let run = run_cli(&["purge", "--app", "a1", "--grace", "0s"], &envs).await;
    // A read of either would wait for the relay; MariaDB's one-statement delete would meet its
    // lock and be done again one row a statement, and say so.
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert!(
        !run.all_output.contains("met a row lock"),
        "{}",
        run.all_output
    );
    let app = &run.summary["apps"][0];
    assert_eq!(app["outcome"], "done", "{}", run.summary);
    assert_eq!(app["purged_rows"], 30, "{}", run.summary);
    assert!(app["retries"].is_null(), "{}", run.summary);
    assert!(app["left_locked_rows"].is_null(), "{}", run.summary);
    relay.execute("COMMIT").await.unwrap();
    relay.close().await.unwrap();
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox WHERE status = 'PENDING'")
            .await,
        2
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_whose_one_statement_delete_meets_a_lock_is_deleted_row_by_row_instead() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (db, _s3, _store, env) = archived_env(&rows("a1", 30), &["a1"], 100).await;
    let refused = std::sync::Arc::new(AtomicUsize::new(0));
    let mut opts = purge_options(&db, &["a1"]);
    let counted = refused.clone();
    // MariaDB's one-statement delete refused as a row lock would refuse it (it does not wait).
    opts.failpoints = outbox_archiver::testing::FailPoints::new(move |point| {
        let refuse = point == "purge-joined-delete-would-wait";
        if refuse {
            counted.fetch_add(1, Ordering::SeqCst);
        }
        refuse
    });
    let purged = purge::run(&env, &opts).await;
    assert!(purged.ok, "{}", purged.to_json());
    let app = &purged.apps[0];
    assert_eq!(app.outcome, Outcome::Done, "{}", purged.to_json());
    assert_eq!(app.rows, 30, "{}", purged.to_json());
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_receipts WHERE purged_at_ms IS NULL OR purged_rows <> 30")
            .await,
        0
    );
    // One chunk: refused once, then deleted one row a statement (MySQL's delete is another one).
    let expected = match flavour() {
        Flavour::MariaDb => 1,
        Flavour::MySql => 0,
    };
    assert_eq!(refused.load(Ordering::SeqCst), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_put_back_by_a_transaction_open_while_purge_ran_is_purged_later_not_lost_sight_of()
{
    use sqlx::{Connection, Executor};
    let (db, _s3, _store, env) = archived_env(&rows("a1", 30), &["a1"], 100).await;
    // A transaction deletes a member row and puts it back as it was, and stays open while
    // purge runs.
    let mut other = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    other.execute("BEGIN").await.unwrap();
    let original: Vec<(String,)> = sqlx::query_as(
        "SELECT CAST(payload AS CHAR) FROM wallet_outbox WHERE app_code = 'a1' AND event_id = 'e7'",
    )
    .fetch_all(&mut other)
    .await
    .unwrap();
    assert_eq!(original.len(), 1);
    other
        .execute(
            "CREATE TEMPORARY TABLE keep AS SELECT * FROM wallet_outbox WHERE app_code = 'a1' AND event_id = 'e7'",
        )
        .await
        .unwrap();
    other
        .execute("DELETE FROM wallet_outbox WHERE app_code = 'a1' AND event_id = 'e7'")
        .await
        .unwrap();
    other
        .execute("INSERT INTO wallet_outbox SELECT * FROM keep")
        .await
        .unwrap();
    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert!(purged.ok, "{}", purged.to_json());
    other.execute("COMMIT").await.unwrap();
    other.close().await.unwrap();
    // The row is there again: its batch is not finished, and the next purge takes it.
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 1);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_receipts WHERE purged_at_ms IS NULL")
            .await,
        1,
        "{}",
        purged.to_json()
    );
    let again = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert!(again.ok, "{}", again.to_json());
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
}

/// A member row that comes back between purge's delete and the end of its batch — put back by
/// another transaction, committed or still open — keeps the batch unfinished: the next purge
/// takes it. (Marked finished, the batch would never be looked at again, and the row would stay
/// in the source with nothing reporting it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_back_before_its_batch_is_finished_keeps_the_batch_open() {
    for committed in [true, false] {
        let (db, _s3, _store, env) = archived_env(&rows("a1", 30), &["a1"], 100).await;
        db.exec("CREATE TABLE keep AS SELECT * FROM wallet_outbox WHERE app_code = 'a1' AND event_id = 'e7'")
            .await;
        let url = db.url.clone();
        let open: std::sync::Arc<std::sync::Mutex<Option<std::thread::JoinHandle<()>>>> =
            Default::default();
        let holder = open.clone();
        let mut opts = purge_options(&db, &["a1"]);
        opts.failpoints = outbox_archiver::testing::FailPoints::new(move |point| {
            if point == "after-purge-chunk" {
                let sql = "INSERT INTO wallet_outbox SELECT * FROM keep".to_string();
                if committed {
                    execute_from_failpoint(&url, sql);
                } else {
                    // Put back in a transaction left open for a few seconds.
                    let url = url.clone();
                    let (ready, inserted) = std::sync::mpsc::channel();
                    let thread = std::thread::spawn(move || {
                        let rt = tokio::runtime::Runtime::new().unwrap();
                        rt.block_on(async {
                            use sqlx::{Connection, Executor};
                            let mut c = sqlx::MySqlConnection::connect(&url).await.unwrap();
                            c.execute("BEGIN").await.unwrap();
                            c.execute(sqlx::AssertSqlSafe(sql)).await.unwrap();
                            ready.send(()).unwrap();
                            tokio::time::sleep(std::time::Duration::from_secs(3)).await;
                            c.execute("COMMIT").await.unwrap();
                        });
                    });
                    inserted.recv().unwrap();
                    *holder.lock().unwrap() = Some(thread);
                }
            }
            false
        });
        let purged = purge::run(&env, &opts).await;
        assert!(purged.ok, "{}", purged.to_json());
        if let Some(thread) = open.lock().unwrap().take() {
            thread.join().unwrap();
        }
        assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 1);
        assert_eq!(
            db.count(
                "SELECT COUNT(*) FROM wallet_outbox_archive_receipts WHERE purged_at_ms IS NULL"
            )
            .await,
            1,
            "committed {committed}: the batch stays open: {}",
            purged.to_json()
        );
        let again = purge::run(&env, &purge_options(&db, &["a1"])).await;
        assert!(again.ok, "{}", again.to_json());
        assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
        assert_eq!(
            db.count(
                "SELECT COUNT(*) FROM wallet_outbox_archive_receipts WHERE purged_at_ms IS NULL"
            )
            .await,
            0
        );
    }
}
