//! A log's checkpoint written back (issue 43): the tree heads a log was published at are
//! remembered where a writer of the checkpoint alone cannot take them back — kept write-once in
//! the store, recorded in the database, carried by the previous statement — and a smaller or
//! other tree is found by verify, purge, attest, archive and both auditor's tools.

use outbox_archiver::format::Key;
use outbox_archiver::ObjectStore;
use outbox_archiver::PutMode;

use crate::log::{
    audit_script, audit_script_with, copy_of, delete_batch, go_verifier, log_key,
    recorded_days_ago, run_cli_stdout,
};
use crate::support::*;

pub(crate) const CUTOFF: &str = "2026-01-04T00:00:00Z";

/// a1's log proven whole, without reading the batches.
pub(crate) const VERIFY: [&str; 6] = [
    "verify",
    "--app",
    "a1",
    "--metadata-only",
    "--cutoff",
    CUTOFF,
];

/// The binary's environment for `db` and `s3`: the store, the database, the app lock.
pub(crate) fn binary_env(db: &TestDb, s3: &TestS3) -> Vec<(&'static str, String)> {
    cli_envs(db, s3)
}

/// a1's rows archived in batches of 10.
pub(crate) const ARCHIVE: [&str; 7] = [
    "archive",
    "--app",
    "a1",
    "--batch-rows",
    "10",
    "--cutoff",
    CUTOFF,
];

fn day(ago: i64) -> String {
    outbox_archiver::utc_date(chrono::Utc::now().timestamp_millis() - ago * DAY)
}

/// The binary's statement of `day` for a1 (with `--previous`), and its exit status.
async fn attest_day(
    envs: &[(&str, String)],
    day: &str,
    previous: Option<&std::path::Path>,
) -> (i32, String) {
    let mut args = vec!["attest", "--app", "a1", "--from", day, "--to", day];
    if let Some(p) = previous {
        args.extend(["--previous", p.to_str().unwrap()]);
    }
    run_cli_stdout(&args, envs).await
}

/// The store's keys under `prefix`.
async fn keys_under(store: &dyn ObjectStore, prefix: &str) -> Vec<String> {
    keys(store)
        .await
        .into_iter()
        .filter(|k| k.starts_with(prefix))
        .collect()
}

/// The binary's environment: the store, the database, the app lock, and — signed — the log key
/// (its verifier for every command).
async fn environment(
    db: &TestDb,
    s3: &TestS3,
    dir: &std::path::Path,
    signed: bool,
) -> (Vec<(&'static str, String)>, Vec<(&'static str, String)>) {
    let mut envs = binary_env(db, s3);
    if !signed {
        return (envs.clone(), envs);
    }
    let (key_file, verifier) = crate::log_keys::new_key(dir, "log.key").await;
    envs.push(("OUTBOX_ARCHIVER_LOG_VERIFIER", verifier));
    let mut signing = envs.clone();
    signing.push(("OUTBOX_ARCHIVER_LOG_KEY_FILE", key_file));
    (envs, signing)
}

/// Issue 43's rollback: four batches archived (the checkpoint of 4 leaves saved), a fifth
/// archived and its rows deleted from the source; the statement of the first day saw the tree
/// of 5. Then someone with database and store access puts the 4-leaf checkpoint back and
/// deletes the fifth batch's receipt, members and objects. verify, purge, attest, archive and
/// the auditor's script find it by the heads remembered in the store and the database; with
/// those gone too, the previous statement finds it (attest --previous, verify-log.go -previous,
/// audit-chain.py --seen), and archive writes over none of the larger tree's tiles.
async fn a_checkpoint_written_back_is_found(signed: bool) {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let dir = tempfile::tempdir().unwrap();
    let (envs, signing) = environment(&db, &s3, dir.path(), signed).await;
    let archive = ARCHIVE;
    db.insert(&rows("a1", 40)).await;
    let run = run_cli(&archive, &signing).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    recorded_days_ago(&db, 2).await;
    let checkpoint = log_key(store.as_ref(), "a1", "checkpoint");
    let four = read(store.as_ref(), &checkpoint).await;
    assert!(String::from_utf8_lossy(&four).contains("\n4\n"));
    let more: Vec<_> = (100..110)
        .map(|i| row("a1", &format!("f{i}"), T0 + i))
        .collect();
    db.insert(&more).await;
    let run = run_cli(&archive, &signing).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    recorded_days_ago(&db, 1).await;
    // The heads published are kept write-once in the store and recorded in the database.
    let heads = log_key(store.as_ref(), "a1", "heads/");
    assert_eq!(
        keys_under(store.as_ref(), &heads).await,
        [
            format!("{heads}99999999999999994"),
            format!("{heads}99999999999999995")
        ]
    );
    assert_eq!(
        db.count("SELECT MAX(size) FROM wallet_outbox_archive_log_heads WHERE app_code = 'a1'")
            .await,
        5
    );
    let (code, first) = attest_day(&envs, &day(2), None).await;
    assert_eq!(code, 0, "{first}");
    let first_path = dir.path().join("first.json");
    std::fs::write(&first_path, &first).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(doc["apps"][0]["log"]["size"], 5, "{first}");
    assert_eq!(doc["apps"][0]["log"]["at_end"]["size"], 4, "{first}");

    // The rollback: the fifth batch's rows gone from the source, its batch and receipt gone,
    // the 4-leaf checkpoint back.
    let fifth: String = sqlx::query_scalar(
        "SELECT batch_id FROM wallet_outbox_archive_receipts WHERE log_index = 4",
    )
    .fetch_one(&db.db.pool)
    .await
    .unwrap();
    db.exec(&format!(
        "DELETE FROM wallet_outbox WHERE event_id IN (SELECT event_id FROM \
         wallet_outbox_archive_members WHERE batch_id = '{fifth}')"
    ))
    .await;
    delete_batch(&db, store.as_ref(), &fifth).await;
    store
        .put(
            &Key::stored(checkpoint.clone()),
            four.clone().into(),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let tiles_before: Vec<(String, Vec<u8>)> = {
        let mut out = Vec::new();
        for key in keys_under(store.as_ref(), &log_key(store.as_ref(), "a1", "tile/")).await {
            out.push((key.clone(), read(store.as_ref(), &key).await));
        }
        out
    };
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 40);

    // Found by the heads the store kept and the database recorded.
    let verify = VERIFY;
    let run = run_cli(&verify, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output.contains("log_rollback")
            && run
                .all_output
                .contains("it holds 4 leaves: the checkpoint was written back"),
        "{}",
        run.all_output
    );
    let purge = ["purge", "--app", "a1", "--grace", "0s"];
    let run = run_cli(&purge, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output.contains("log_rollback"),
        "{}",
        run.all_output
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox").await,
        40,
        "nothing purged on the word of a checkpoint written back"
    );
    let (code, out) = attest_day(&envs, &day(1), None).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("log_rollback"), "{out}");
    let copy_dir = tempfile::tempdir().unwrap();
    let copy = copy_of(store.as_ref(), copy_dir.path()).await;
    let (code, out) = audit_script(&copy);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "log_rollback (formerly chain_rollback): a1: the checkpoint holds 4 leaves, the store keeps a head of 5"
        ),
        "{out}"
    );
    // archive archives (the outbox must drain) but appends nothing after the rollback.
    let later: Vec<_> = (200..210)
        .map(|i| row("a1", &format!("g{i}"), T0 + i))
        .collect();
    db.insert(&later).await;
    let run = run_cli(&archive, &signing).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output.contains("log_rollback"),
        "{}",
        run.all_output
    );

    // The store's heads deleted too (a bucket without Object Lock): the database's record finds it.
    for key in keys_under(store.as_ref(), &heads).await {
        store.delete(&Key::stored(key.clone())).await.unwrap();
    }
    let run = run_cli(&verify, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output.contains("log_rollback")
            && run.all_output.contains("wallet_outbox_archive_log_heads"),
        "{}",
        run.all_output
    );

    // The database's record deleted as well: the tiles still hold the larger tree's leaf past
    // the checkpoint (never written over), which verify names; and the previous statement saw
    // the larger tree.
    db.exec("DELETE FROM wallet_outbox_archive_log_heads").await;
    let run = run_cli(&verify, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output.contains("log_rollback")
            && run.all_output.contains(&format!(
                "the tiles hold leaf 4 (batch {fifth}), which no receipt accounts for"
            )),
        "{}",
        run.all_output
    );
    let run = run_cli(&archive, &signing).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output.contains("already holds other bytes")
            && run.all_output.contains("nothing is written over"),
        "{}",
        run.all_output
    );
    for (key, bytes) in &tiles_before {
        assert_eq!(
            &read(store.as_ref(), key).await,
            bytes,
            "{key}: a tile of the larger tree is never written over"
        );
    }
    let (code, out) = attest_day(&envs, &day(1), Some(&first_path)).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("log_rollback") && out.contains("the previous statement"),
        "{out}"
    );
    // A statement made without --previous (it cannot know) is caught by the auditor's tools,
    // given the previous one.
    let (code, second) = attest_day(&envs, &day(1), None).await;
    assert_eq!(code, 0, "{second}");
    let second_path = dir.path().join("second.json");
    std::fs::write(&second_path, &second).unwrap();
    let (code, out) = go_verifier(&second_path, &["-previous", first_path.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "the previous statement saw a tree of 5 leaves, this one's checkpoint holds 4"
        ),
        "{out}"
    );
    let copy_dir = tempfile::tempdir().unwrap();
    let copy = copy_of(store.as_ref(), copy_dir.path()).await;
    let (code, out) = audit_script_with(&copy, &["--seen", first_path.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("log_rollback (formerly chain_rollback): a1: the checkpoint holds 4 leaves, the statement"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_checkpoint_written_back_is_found_by_every_checker() {
    a_checkpoint_written_back_is_found(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_checkpoint_written_back_is_found_where_a_larger_head_was_seen() {
    a_checkpoint_written_back_is_found(false).await;
}

/// A log grown normally: every statement made with --previous carries the consistency proof
/// from the previous one's checkpoint, which Go's tlog checks; the heads the log was published
/// at are kept once each, and the remembered head is never a cost that grows (one LIST, one GET).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_prove_the_log_grew_from_the_previous_ones_checkpoint() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (envs, signing) = environment(&db, &s3, dir.path(), true).await;
    let archive = ARCHIVE;
    db.insert(&rows("a1", 30)).await;
    assert_eq!(run_cli(&archive, &signing).await.code, 0);
    recorded_days_ago(&db, 2).await;
    let (code, first) = attest_day(&envs, &day(2), None).await;
    assert_eq!(code, 0, "{first}");
    let first_path = dir.path().join("first.json");
    std::fs::write(&first_path, &first).unwrap();
    let more: Vec<_> = (100..150)
        .map(|i| row("a1", &format!("f{i}"), T0 + i))
        .collect();
    db.insert(&more).await;
    assert_eq!(run_cli(&archive, &signing).await.code, 0);
    recorded_days_ago(&db, 1).await;
    let (code, second) = attest_day(&envs, &day(1), Some(&first_path)).await;
    assert_eq!(code, 0, "{second}");
    let second_path = dir.path().join("second.json");
    std::fs::write(&second_path, &second).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&second).unwrap();
    let seen = &doc["apps"][0]["log"]["heads_seen"];
    assert_eq!(seen[0]["size"], 3, "{second}");
    assert!(
        seen[0]["source"]
            .as_str()
            .unwrap()
            .starts_with("the previous statement"),
        "{second}"
    );
    assert_eq!(seen[1]["size"], 8, "the largest head published: {second}");
    let (code, out) = go_verifier(&second_path, &["-previous", first_path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("grew from the previous statement's checkpoint of 3 leaves"),
        "{out}"
    );
    // A previous statement of another tree (its checkpoint's root edited): refused by attest
    // and by Go's tlog alike.
    let forged = dir.path().join("forged.json");
    let mut doc: serde_json::Value = serde_json::from_str(&first).unwrap();
    let note = doc["apps"][0]["log"]["checkpoint"]
        .as_str()
        .unwrap()
        .to_string();
    let root = note.split('\n').nth(2).unwrap().to_string();
    let other = format!("{}A=", &root[..root.len() - 2]);
    doc["apps"][0]["log"]["checkpoint"] = note.replace(&root, &other).into();
    std::fs::write(&forged, doc.to_string()).unwrap();
    let (code, out) = attest_day(&envs, &day(1), Some(&forged)).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("log_rollback") && out.contains("does not grow from that head"),
        "{out}"
    );
    let (code, out) = go_verifier(&second_path, &["-previous", forged.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("does not prove its checkpoint grew from"),
        "{out}"
    );
    // A file that is no statement: could not start, naming --previous.
    let (code, out) = attest_day(
        &envs,
        &day(1),
        Some(std::path::Path::new("/nonexistent/last.json")),
    )
    .await;
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--previous /nonexistent/last.json"), "{out}");
}
