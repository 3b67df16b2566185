//! One archive, one home (SPEC §5.13, issue 33), through the binary: the first batch binds the
//! archive to its store; a `--store` typo (another prefix, another bucket), a store under the
//! home's name that is another service's, or another database's archive is refused (exit 2)
//! naming both, and writes nothing; a lost marker is written again; an archive from before the
//! home is held to its receipts; moving it is `relocate`, checked and recorded.

use crate::support::*;
use outbox_archiver::format::Key;

fn envs_for(db: &TestDb, s3: &TestS3) -> Vec<(&'static str, String)> {
    cli_envs(db, s3)
}

/// `envs` with `--store` replaced by `store`.
pub(crate) fn with_store(
    envs: &[(&'static str, String)],
    store: &str,
) -> Vec<(&'static str, String)> {
    let mut envs: Vec<_> = envs
        .iter()
        .filter(|(k, _)| *k != "OUTBOX_ARCHIVER_STORE")
        .cloned()
        .collect();
    envs.push(("OUTBOX_ARCHIVER_STORE", store.to_string()));
    envs
}

const ARCHIVE: &[&str] = &[
    "archive",
    "--all-apps",
    "--batch-rows",
    "10",
    "--cutoff",
    "2026-01-02",
];

async fn archived() -> (TestDb, TestS3, Vec<(&'static str, String)>) {
    let (db, s3, _store) = fixture().await;
    db.insert(&rows("a1", 25)).await;
    let envs = envs_for(&db, &s3);
    let run = run_cli(ARCHIVE, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    (db, s3, envs)
}

/// Every command that opens the store, with `envs`: each must exit 2 with an error containing
/// every one of `words`.
async fn every_command_refuses(envs: &[(&'static str, String)], words: &[&str]) {
    for args in [
        ARCHIVE,
        &["verify"],
        &["purge", "--all-apps", "--grace", "0s", "--dry-run"],
        &["purge", "--all-apps", "--grace", "0s"],
        &["find", "--event-id", "e3"],
        &["restore", "--drill"],
        &["compact", "--all-apps", "--older-than", "0s"],
    ] {
        let run = run_cli(args, envs).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.all_output);
        let error = run.summary["error"].as_str().unwrap_or_default();
        for word in words {
            assert!(error.contains(word), "{args:?}: {error}");
        }
    }
    let (code, text) = run_cli_text(
        &["attest", "--from", "2026-01-01", "--to", "2026-01-01"],
        envs,
    )
    .await;
    assert_eq!(code, 2, "attest: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_typo_is_refused_naming_both_and_writes_nothing() {
    let (db, s3, envs) = archived().await;
    let home = s3.location.to_string();
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_home")
            .await,
        1,
        "the first batch bound the archive"
    );
    let store = s3.store().await;
    let before = keys(store.as_ref()).await;
    assert!(before.iter().any(|k| is_home_marker(k)), "{before:?}");
    db.insert(&rows_after("a1", 25, 10)).await;
    // Another prefix (one letter off), and another bucket on the same server.
    let outbox_archiver::Location::S3 { bucket, prefix } = &s3.location else {
        unreachable!("the tests' store is S3")
    };
    let typo = format!("s3://{bucket}/{}x", prefix.trimmed());
    let other_bucket = format!("{bucket}-other");
    s3.server
        .as_ref()
        .unwrap()
        .create_bucket(&other_bucket)
        .unwrap();
    let elsewhere = format!("s3://{other_bucket}/{}", prefix.trimmed());
    for given in [&typo, &elsewhere] {
        every_command_refuses(
            &with_store(&envs, given),
            &[&home, given.as_str(), "--store"],
        )
        .await;
    }
    assert_eq!(
        keys(store.as_ref()).await,
        before,
        "nothing written under the home's prefix"
    );
    let all = std::fs::read_dir(s3.server.as_ref().unwrap().root.join(&other_bucket))
        .unwrap()
        .count();
    assert_eq!(all, 0, "nothing written in the other bucket");
    // doctor says so too.
    let run = run_cli(&["doctor"], &with_store(&envs, &typo)).await;
    let checks = run.summary["checks"].as_array().unwrap();
    let line = checks
        .iter()
        .find(|c| c["check"] == "archive_home")
        .unwrap();
    assert_eq!(line["status"], "problem", "{line}");
    let run = run_cli(&["doctor"], &envs).await;
    let checks = run.summary["checks"].as_array().unwrap();
    let line = checks
        .iter()
        .find(|c| c["check"] == "archive_home")
        .unwrap();
    assert_eq!(line["status"], "ok", "{line}");
    // The right store still works.
    let run = run_cli(ARCHIVE, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(run.summary["apps"][0]["rows"], 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_of_the_homes_name_that_lacks_the_archive_is_another_service() {
    let (_db, s3, envs) = archived().await;
    // Another S3 server holding a bucket of the same name: --s3-endpoint points elsewhere.
    let dir = tempfile::tempdir().unwrap();
    let other = outbox_archiver::testing::LocalS3::start(dir.path(), ACCESS_KEY, SECRET_KEY)
        .await
        .unwrap();
    let outbox_archiver::Location::S3 { bucket, .. } = &s3.location else {
        unreachable!()
    };
    other.create_bucket(bucket).unwrap();
    let mut elsewhere: Vec<_> = envs
        .iter()
        .filter(|(k, _)| *k != "OUTBOX_ARCHIVER_S3_ENDPOINT")
        .cloned()
        .collect();
    elsewhere.push(("OUTBOX_ARCHIVER_S3_ENDPOINT", other.endpoint.clone()));
    every_command_refuses(&elsewhere, &["does not hold", "--s3-endpoint"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_marker_is_written_again_while_the_batches_are_there() {
    let (db, s3, envs) = archived().await;
    let store = s3.store().await;
    let marker = keys(store.as_ref())
        .await
        .into_iter()
        .find(|k| is_home_marker(k))
        .unwrap();
    let bytes = read(store.as_ref(), &marker).await;
    store.delete(&Key::stored(marker.clone())).await.unwrap();
    let run = run_cli(&["verify"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert!(
        run.all_output.contains("marker is missing"),
        "{}",
        run.all_output
    );
    db.insert(&rows_after("a1", 25, 5)).await;
    let run = run_cli(ARCHIVE, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        read(store.as_ref(), &marker).await,
        bytes,
        "the same marker, again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_databases_archive_is_refused_before_anything_is_written() {
    let (_db, s3, _envs) = archived().await;
    let second = TestDb::new().await;
    second.insert(&rows("b1", 5)).await;
    let envs = envs_for(&second, &s3);
    let store = s3.store().await;
    let before = keys(store.as_ref()).await;
    let run = run_cli(ARCHIVE, &envs).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let error = run.summary["error"].as_str().unwrap();
    assert!(error.contains("holds another archive"), "{error}");
    assert_eq!(keys(store.as_ref()).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_from_before_the_home_is_held_to_its_receipts_then_bound() {
    let (db, s3, envs) = archived().await;
    // As an older build left it: no home, no marker.
    db.exec("DELETE FROM wallet_outbox_archive_home").await;
    let store = s3.store().await;
    for key in keys(store.as_ref()).await {
        if is_home_marker(&key) {
            store.delete(&Key::stored(key.clone())).await.unwrap();
        }
    }
    let outbox_archiver::Location::S3 { bucket, prefix } = &s3.location else {
        unreachable!()
    };
    let typo = format!("s3://{bucket}/{}x", prefix.trimmed());
    let run = run_cli(&["verify"], &with_store(&envs, &typo)).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    assert!(
        run.summary["error"]
            .as_str()
            .unwrap()
            .contains("another prefix"),
        "{}",
        run.summary
    );
    let run = run_cli(&["verify"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    // Its next batch binds it.
    db.insert(&rows_after("a1", 25, 5)).await;
    let run = run_cli(ARCHIVE, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_home")
            .await,
        1
    );
    let run = run_cli(&["verify"], &with_store(&envs, &typo)).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relocate_moves_the_home_to_a_whole_copy_and_records_why() {
    let (db, s3, envs) = archived().await;
    let outbox_archiver::Location::S3 { bucket, prefix } = &s3.location else {
        unreachable!()
    };
    let server = s3.server.as_ref().unwrap();
    let new_bucket = format!("{bucket}-dr");
    server.create_bucket(&new_bucket).unwrap();
    let new_home = format!("s3://{new_bucket}/{}", prefix.trimmed());
    // Not copied yet: refused, nothing moves.
    let run = run_cli(
        &["relocate", "--to", &new_home, "--reason", "region move"],
        &envs,
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    assert!(
        run.summary["error"]
            .as_str()
            .unwrap()
            .contains("copy the whole archive there first"),
        "{}",
        run.summary
    );
    // Another prefix: refused, saying why.
    let run = run_cli(
        &[
            "relocate",
            "--to",
            &format!("s3://{new_bucket}/other"),
            "--reason",
            "x",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    assert!(
        run.summary["error"]
            .as_str()
            .unwrap()
            .contains("same prefix"),
        "{}",
        run.summary
    );
    // Copied whole (as `aws s3 sync` would), then relocated.
    copy_tree(&server.root.join(bucket), &server.root.join(&new_bucket));
    let run = run_cli(
        &["relocate", "--to", &new_home, "--reason", "region move"],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(run.summary["to"], new_home.as_str());
    let moved = with_store(&envs, &new_home);
    let run = run_cli(&["verify"], &moved).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    every_command_refuses(&envs, &[&new_home]).await;
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_home WHERE reason = 'region move'")
            .await,
        1
    );
    // The move is seen in history and doctor.
    // The move, and the two refused before it, are in history.
    let history = run_cli(&["history", "--command", "relocate"], &moved).await;
    let runs = history.summary["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "{}", history.summary);
    assert_eq!(runs[0]["outcome"], "done", "{}", history.summary);
    let ended = runs[0]["stop_reason"].as_str().unwrap();
    assert!(
        ended.contains("moved from") && ended.contains("region move"),
        "{}",
        history.summary
    );
    assert_eq!(runs[1]["outcome"], "failed", "{}", history.summary);
    let run = run_cli(&["doctor"], &moved).await;
    let line = run.summary["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "archive_home")
        .cloned()
        .unwrap();
    assert!(
        line["detail"].as_str().unwrap().contains("region move"),
        "{line}"
    );
}

/// `n` more delivered rows of `app` after [`rows`]'s `from` rows.
fn rows_after(app: &str, from: i64, n: i64) -> Vec<outbox_archiver::Row> {
    (from..from + n)
        .map(|i| row(app, &format!("e{i}"), T0 + i))
        .collect()
}

/// Copies a folder tree (an s3s-fs bucket) file by file.
pub(crate) fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    copy_tree_but(from, to, "")
}

/// [`copy_tree`] without the folders named `skip` (an incomplete copy).
fn copy_tree_but(from: &std::path::Path, to: &std::path::Path, skip: &str) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            if entry.file_name() == skip {
                continue;
            }
            copy_tree_but(&entry.path(), &target, skip);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_home_recorded_without_its_marker_gets_it_from_the_next_archive() {
    // A run recorded the home and died before writing the marker (or lost the race to it).
    let (db, s3, _store) = fixture().await;
    db.insert(&rows("a1", 5)).await;
    let envs = envs_for(&db, &s3);
    let marker_key = outbox_archiver::format::home_marker_key(
        &outbox_archiver::format::table_prefix(s3.location.prefix(), "wallet_outbox"),
    );
    db.exec(&format!(
        "INSERT INTO wallet_outbox_archive_home (id, store, archive_id, marker_key, bound_at_ms) \
         VALUES (1, '{}', '0123456789abcdef0123456789abcdef', '{marker_key}', 0)",
        s3.location
    ))
    .await;
    let run = run_cli(&["verify"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(ARCHIVE, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let store = s3.store().await;
    let marker = String::from_utf8(read(store.as_ref(), marker_key.as_str()).await).unwrap();
    assert!(
        marker.contains("0123456789abcdef0123456789abcdef"),
        "{marker}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marker_a_lifecycle_rule_moved_to_a_cold_class_still_lets_every_command_run() {
    use crate::support::moto::{Bucket, MotoS3};
    use outbox_archiver::{PutMode, PutOptions};
    let db = TestDb::new().await;
    db.insert(&rows("a1", 25)).await;
    let moto = MotoS3::new(Bucket::Plain).await;
    let mut envs = moto.env();
    envs.push(("DATABASE_URL", db.url.clone()));
    envs.push(("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()));
    envs.push(("OUTBOX_ARCHIVER_STORE", moto.location.to_string()));
    let run = run_cli(ARCHIVE, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let store = moto.store().await;
    let marker = keys(store.as_ref())
        .await
        .into_iter()
        .find(|k| is_home_marker(k))
        .unwrap();
    let bytes = read(store.as_ref(), &marker).await;
    store
        .put_with(
            &Key::stored(marker.clone()),
            bytes.into(),
            PutMode::Overwrite,
            &PutOptions {
                storage_class: Some("GLACIER".into()),
                ..PutOptions::default()
            },
        )
        .await
        .unwrap();
    assert!(
        store.get(&Key::stored(marker.clone())).await.is_err(),
        "the marker is cold now"
    );
    let run = run_cli(&["verify", "--metadata-only"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&["purge", "--all-apps", "--dry-run"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relocate_waits_for_no_run_and_a_run_that_opened_before_the_move_writes_nothing() {
    use sqlx::Connection;
    let (db, s3, envs) = archived().await;
    let outbox_archiver::Location::S3 { bucket, prefix } = &s3.location else {
        unreachable!()
    };
    let server = s3.server.as_ref().unwrap();
    let new_bucket = format!("{bucket}-moved");
    server.create_bucket(&new_bucket).unwrap();
    copy_tree(&server.root.join(bucket), &server.root.join(&new_bucket));
    let new_home = format!("s3://{new_bucket}/{}", prefix.trimmed());
    // An archive of a1 is working: relocate refuses, naming the fix.
    let mut other = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    let database_lock = outbox_archiver::database_lock_name(&db.name, "wallet_outbox", "a1");
    let got: i64 = sqlx::query_scalar("SELECT GET_LOCK(?, 0)")
        .bind(&database_lock)
        .fetch_one(&mut other)
        .await
        .unwrap();
    assert_eq!(got, 1);
    let run = run_cli(&["relocate", "--to", &new_home, "--reason", "x"], &envs).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    assert!(
        run.summary["error"]
            .as_str()
            .unwrap()
            .contains("stop the archive"),
        "{}",
        run.summary
    );
    other.close().await.unwrap();
    // A run that opened the old home before the move, and takes the app's lock after it.
    db.insert(&rows_after("a1", 25, 10)).await;
    let old = env(&db, s3.store().await, ARCHIVED_CUTOFF + DAY);
    let checked = outbox_archiver::check_home(&old).await.unwrap();
    let old = outbox_archiver::RunContext {
        binding: outbox_archiver::Binding::found(&checked),
        ..old
    };
    let run = run_cli(&["relocate", "--to", &new_home, "--reason", "x"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let receipts = db
        .count("SELECT COUNT(*) FROM wallet_outbox_archive_receipts")
        .await;
    let summary = archive(&old, &options(&db, &["a1"], ARCHIVED_CUTOFF)).await;
    assert_eq!(summary.apps[0].outcome, outbox_archiver::Outcome::Failed);
    assert!(
        summary.apps[0]
            .error
            .as_deref()
            .unwrap_or_default()
            .contains(&new_home),
        "{}",
        summary.to_json()
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_receipts")
            .await,
        receipts,
        "nothing recorded against the old home"
    );
}

/// relocate onto a copy without the log (issue 58: exit 0, "733 batches re-read", then every
/// archive and purge failed with `log_rollback`, and with the old home gone no way out): refused,
/// nothing moved, naming each app's finding and the folder to copy; with the log copied too it
/// moves, and archive and purge go on at the new home.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relocate_refuses_a_copy_without_the_log_naming_what_to_copy() {
    let (db, s3, envs) = archived().await;
    let outbox_archiver::Location::S3 { bucket, prefix } = &s3.location else {
        unreachable!()
    };
    let server = s3.server.as_ref().unwrap();
    let new_bucket = format!("{bucket}-dr");
    let new_home = format!("s3://{new_bucket}/{}", prefix.trimmed());
    copy_tree_but(
        &server.root.join(bucket),
        &server.root.join(&new_bucket),
        "_log",
    );
    let relocate = ["relocate", "--to", &new_home, "--reason", "region move"];
    let run = run_cli(&relocate, &envs).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let error = run.summary["error"].as_str().unwrap();
    assert!(
        error.contains("holds every batch but not the archive's log")
            && error.contains("app a1: log_rollback")
            && error.contains(&format!(
                "aws s3 sync s3://{bucket}/{p}/wallet_outbox/_log/ {new_home}/wallet_outbox/_log/",
                p = prefix.trimmed()
            )),
        "{error}"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_home")
            .await,
        1,
        "nothing moved"
    );
    copy_tree(&server.root.join(bucket), &server.root.join(&new_bucket));
    let run = run_cli(&relocate, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let moved = with_store(&envs, &new_home);
    db.insert(&rows_after("a1", 25, 5)).await;
    for args in [
        ARCHIVE,
        &["purge", "--all-apps", "--grace", "0s"],
        &["verify"],
    ] {
        let run = run_cli(args, &moved).await;
        assert_eq!(run.code, 0, "{args:?}: {}", run.all_output);
    }
}
