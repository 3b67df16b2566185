//! `find` through the binary: an event by id in a plain batch and in a compacted one (whose
//! member rows are gone), with its batch, key, line, the archived row and where it stands now;
//! an id that is nowhere (exit 1); rows by another column over a time range; and a search that
//! would read the whole archive, refused (exit 2).

use outbox_archiver::format::Key;
use outbox_archiver::purge;
use outbox_archiver::Apps;
use outbox_archiver::PutMode;
use outbox_archiver::{compact, compact::CompactOptions};

use crate::support::*;

fn envs(db: &TestDb, s3: &TestS3) -> Vec<(&'static str, String)> {
    cli_envs(db, s3)
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

/// An event whose batch could not be read is "could not look", never "not found" (issue 58):
/// the data object of a purged batch deleted, and another's bytes damaged — each event they
/// hold is listed under `could_not_look` with the batch and why, the run exits 2, and an id
/// found elsewhere is still found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_whose_batch_could_not_be_read_is_never_reported_not_found() {
    let (db, s3, store, env) = archived_env(&rows("a1", 12), &["a1"], 4).await;
    let envs = cli_envs(&db, &s3);
    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert!(purged.ok, "{}", purged.to_json());
    let batch_of = |id: &str| {
        let id = id.to_string();
        let db = &db;
        async move {
            let members = db.members("a1").await;
            members.iter().find(|m| m.0 == id).unwrap().2.clone()
        }
    };
    let data_key = |batch: &str| {
        let batch = batch.to_string();
        let store = store.clone();
        async move {
            batch_keys(store.as_ref())
                .await
                .into_iter()
                .find(|k| k.contains(&batch) && k.ends_with("data.ndjson.gz"))
                .unwrap()
        }
    };
    let (gone, damaged) = (batch_of("e5").await, batch_of("e9").await);
    let gone_key = data_key(&gone).await;
    store.delete(&Key::stored(gone_key.clone())).await.unwrap();
    let damaged_key = data_key(&damaged).await;
    store
        .put(
            &Key::stored(damaged_key.clone()),
            b"not gzip".to_vec().into(),
            PutMode::Overwrite,
        )
        .await
        .unwrap();

    let run = run_cli(
        &[
            "find",
            "--event-id",
            "e5",
            "--event-id",
            "e9",
            "--event-id",
            "e1",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    assert_eq!(
        run.summary["not_found"],
        serde_json::json!([]),
        "{}",
        run.summary
    );
    assert_eq!(run.summary["found"][0]["event_id"], "e1", "{}", run.summary);
    let unlooked = run.summary["could_not_look"].as_array().unwrap();
    assert_eq!(unlooked.len(), 2, "{}", run.summary);
    assert_eq!(unlooked[0]["event_id"], "e5");
    assert_eq!(unlooked[0]["batch_id"], gone.as_str());
    assert_eq!(unlooked[0]["key"], gone_key.as_str());
    assert!(unlooked[0]["why"]
        .as_str()
        .unwrap()
        .contains("not in the store"));
    assert_eq!(unlooked[1]["event_id"], "e9");
    assert_eq!(unlooked[1]["key"], damaged_key.as_str());
    assert!(unlooked[1]["why"]
        .as_str()
        .unwrap()
        .contains("not the archived ones"));
    assert!(
        run.summary["error"]
            .as_str()
            .unwrap()
            .contains("could not read"),
        "{}",
        run.summary
    );
}
