//! The linear chain an older build left (issue 43), at the edges of the upgrade: a purge run
//! between `migrate` and the new build's first archive, a break the older build accepted, and a
//! fork it reported — each through the binary, on a store and database laid out as the build of
//! 2d518d8 left them (receipts linked, `_chain/` checkpoints, no log).

use outbox_archiver::{chain, ObjectStore, PutMode};

use crate::log_rollback::{ARCHIVE, CUTOFF};
use crate::support::*;

/// The binary's environment for `db` and `s3`.
fn environment(db: &TestDb, s3: &TestS3) -> Vec<(&'static str, String)> {
    let mut envs = s3.binary_env();
    envs.push(("DATABASE_URL", db.url.clone()));
    envs.push(("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()));
    envs
}

/// Turns what this build archived for a1 into what the build of 2d518d8 left: the receipts
/// linked but in no log, the chain anchored by a checkpoint of links `1..=n` under `_chain/`
/// (`links` of them: all, by default), no log, no log identity, no heads.
async fn as_an_older_build_left(
    db: &TestDb,
    store: &dyn ObjectStore,
    links: Option<u64>,
) -> String {
    db.exec("UPDATE wallet_outbox_archive_receipts SET log_index = NULL")
        .await;
    for key in keys(store).await {
        if key.contains("/_log/") {
            store.delete(&key).await.unwrap();
        }
    }
    db.exec("DELETE FROM wallet_outbox_archive_log_heads").await;
    db.exec("DELETE FROM wallet_outbox_archive_logs").await;
    let n = match links {
        Some(n) => n,
        None => {
            db.count("SELECT COUNT(*) FROM wallet_outbox_archive_receipts WHERE app_code = 'a1'")
                .await as u64
        }
    };
    let links = outbox_archiver::ChainTable::new(db.spec)
        .links(&db.db.pool, "a1", 1, n)
        .await
        .unwrap();
    let table = outbox_archiver::format::table_prefix(store.location().prefix(), "wallet_outbox");
    let legacy = chain::Checkpoint::new("wallet_outbox", "a1", chain::GENESIS, links);
    let key = chain::checkpoint_key(&table, "a1", legacy.head().unwrap());
    store
        .put(&key, legacy.to_bytes().into(), PutMode::Create)
        .await
        .unwrap();
    key
}

/// A nightly purge on the new image before its first archive: the batches wait for the log —
/// outcome stopped, exit 0, one line for the app, no error per batch — and the purge after the
/// first archive takes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_before_the_first_archive_of_a_new_build_waits_and_alerts_for_nothing() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let envs = environment(&db, &s3);
    db.insert(&rows("a1", 50)).await;
    let run = run_cli(&ARCHIVE, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    as_an_older_build_left(&db, store.as_ref(), None).await;
    let run = run_cli(&["migrate"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);

    let purge = ["purge", "--app", "a1", "--grace", "0s"];
    let run = run_cli(&purge, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let app = &run.summary["apps"][0];
    assert_eq!(app["outcome"], "stopped", "{}", run.all_output);
    assert!(
        app["stop_reason"]
            .as_str()
            .unwrap()
            .starts_with("5 batch(es) wait for the next `outbox-archiver archive` of the app"),
        "{}",
        run.all_output
    );
    assert_eq!(app["waiting_for_log"].as_array().unwrap().len(), 5, "{app}");
    assert_eq!(app["failed_batches"], serde_json::json!([]), "{app}");
    assert!(
        !run.all_output.contains("is not proven"),
        "no line per batch: {}",
        run.all_output
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 50);

    let run = run_cli(&["archive", "--app", "a1", "--cutoff", CUTOFF], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&purge, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        run.summary["apps"][0]["outcome"], "done",
        "{}",
        run.all_output
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
}
