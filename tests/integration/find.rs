//! `find` through the binary: an event by id in a plain batch and in a compacted one (whose
//! member rows are gone), with its batch, key, line, the archived row and where it stands now;
//! an id that is nowhere (exit 1); rows by another column over a time range; and a search that
//! would read the whole archive, refused (exit 2).

use outbox_archiver::purge;
use outbox_archiver::Apps;
use outbox_archiver::{compact, compact::CompactOptions};

use crate::support::*;

fn envs(db: &TestDb, s3: &TestS3) -> Vec<(&'static str, String)> {
    let mut envs = s3.binary_env();
    envs.push(("DATABASE_URL", db.url.clone()));
    envs.push(("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()));
    envs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_an_event_in_a_plain_and_in_a_compacted_batch() {
    let (db, s3, _store, env) = archived_env(&rows("a1", 10), &["a1"], 4).await;
    let envs = envs(&db, &s3);
    let run = run_cli(&["find", "--event-id", "e5"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let found = &run.summary["found"][0];
    assert_eq!(found["event_id"], "e5");
    assert_eq!(found["app_code"], "a1");
    // Batches of four: e4..e7 is the second, e5 its second line.
    assert_eq!(found["line"], 2, "{found}");
    assert!(found["key"].as_str().unwrap().ends_with("data.ndjson.gz"));
    assert_eq!(found["row"]["transaction_id"], "tx-e5");
    assert_eq!(found["object_matches_receipt"], true);
    assert_eq!(found["now"], "in the source (not purged yet)");
    let members = db.members("a1").await;
    let batch = &members.iter().find(|m| m.0 == "e5").unwrap().2;
    assert_eq!(found["batch_id"], batch.as_str());

    // Purged, then compacted: its member row is gone, and find still finds it.
    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert!(purged.ok, "{}", purged.to_json());
    let mut opts = CompactOptions::new(Apps::Listed(vec!["a1".into()]), 0);
    opts.lock_prefix = db.lock_prefix();
    let compacted = compact::run(&env, &opts).await;
    assert!(compacted.ok, "{}", compacted.to_json());
    assert!(db.members("a1").await.is_empty());
    let run = run_cli(&["find", "--event-id", "e5", "--event-id", "e9"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(run.summary["found"].as_array().unwrap().len(), 2);
    assert_eq!(run.summary["found"][0]["now"], "purged from the source");
    assert_eq!(run.summary["found"][0]["row"]["transaction_id"], "tx-e5");
    assert!(run.summary["searched_compacted_batches"].as_u64().unwrap() >= 3);

    // An id nowhere: exit 1, named.
    let run = run_cli(&["find", "--event-id", "e5", "--event-id", "nope"], &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert_eq!(run.summary["not_found"][0], "nope");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_rows_by_another_column_over_a_time_range() {
    let (db, s3, _store, _env) = archived_env(&rows("a1", 20), &["a1"], 5).await;
    let envs = envs(&db, &s3);
    let from = (T0).to_string();
    let to = (T0 + DAY).to_string();
    let run = run_cli(
        &[
            "find",
            "--where",
            "transaction_id=tx-e12",
            "--from",
            &from,
            "--to",
            &to,
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let found = run.summary["found"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{}", run.all_output);
    assert_eq!(found[0]["event_id"], "e12");
    assert_eq!(run.summary["searched_batches"], 4);
    let run = run_cli(
        &[
            "find",
            "--where",
            "transaction_id=tx-none",
            "--from",
            &from,
            "--to",
            &to,
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    // Without a range it would read the whole archive: refused.
    let run = run_cli(&["find", "--where", "transaction_id=tx-e12"], &envs).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    assert!(run.summary["error"].as_str().unwrap().contains("--from"));
}
