//! The questions an operator asks every week, through the binary: a batch id typed wrong is not
//! a clean run; a `--store` pointing one level off is one error, not a finding per object; purge
//! says which rows wait for `--grace` and from when, and `--dry-run` lists the batches; `status`
//! splits rows awaiting purge and shows the last purge; `history` lists the last runs — a failed
//! one with its error, a stopped one with its outcome.

use crate::support::*;

fn binary_envs(db: &TestDb, s3: &TestS3) -> Vec<(&'static str, String)> {
    cli_envs(db, s3)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_id_that_matches_nothing_is_exit_2() {
    let (db, s3, _store, _env) = archived_env(&rows("a1", 10), &["a1"], 100).await;
    let envs = binary_envs(&db, &s3);
    for command in [
        &["verify", "--batch-id", "deadbeef"][..],
        &["restore", "--batch-id", "deadbeef"],
        &["find", "--batch-id", "deadbeef", "--event-id", "e1"],
    ] {
        let run = run_cli(command, &envs).await;
        assert_eq!(run.code, 2, "{command:?}: {}", run.all_output);
        let error = run.summary["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("deadbeef") && error.contains("matches no receipt"),
            "{error}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_with_the_store_one_level_off_says_so_once() {
    let db = TestDb::new().await;
    db.insert(&rows("a1", 30)).await;
    let dir = tempfile::tempdir().unwrap();
    let envs = vec![
        ("DATABASE_URL", db.url.clone()),
        ("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()),
    ];
    let store = format!("file://{}", dir.path().display());
    let archived = run_cli(
        &[
            "archive",
            "--app",
            "a1",
            "--batch-rows",
            "10",
            "--store",
            &store,
            "--cutoff",
            "2026-01-02T00:00:00Z",
        ],
        &envs,
    )
    .await;
    assert_eq!(archived.code, 0, "{}", archived.all_output);
    let deeper = format!("file://{}/wallet_outbox", dir.path().display());
    let run = run_cli(&["verify", "--store", &deeper], &envs).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    // The archive's home names both: where it lives, and what --store says.
    let error = run.summary["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("--store") && error.contains(&store) && error.contains(&deeper),
        "{error}"
    );
    assert!(
        run.summary["findings"]
            .as_array()
            .is_none_or(|f| f.is_empty()),
        "{}",
        run.summary
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_says_what_waits_for_the_grace_and_lists_what_a_dry_run_would_take() {
    let (db, s3, _store) = fixture().await;
    db.insert(&rows("a1", 10)).await;
    let envs = binary_envs(&db, &s3);
    let archived = run_cli(
        &[
            "archive",
            "--app",
            "a1",
            "--batch-rows",
            "5",
            "--cutoff",
            "2026-01-02T00:00:00Z",
        ],
        &envs,
    )
    .await;
    assert_eq!(archived.code, 0, "{}", archived.all_output);
    // Just archived: a day's grace keeps everything.
    let run = run_cli(&["purge", "--app", "a1", "--grace", "1d"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let app = &run.summary["apps"][0];
    assert_eq!(app["purged_rows"], 0);
    assert_eq!(app["in_grace_rows"], 10, "{app}");
    let eligible = app["eligible_from_ms"].as_i64().unwrap();
    let now = chrono::Utc::now().timestamp_millis();
    assert!(
        (now + 86_400_000 - 120_000..=now + 86_400_000).contains(&eligible),
        "a day from when it was archived: {eligible}"
    );
    // status splits the rows awaiting purge the same way.
    let status = run_cli(
        &["status", "--app", "a1", "--format", "json", "--grace", "1d"],
        &envs,
    )
    .await;
    let a1 = &status.summary["apps"][0];
    assert_eq!(a1["awaiting_purge_in_grace_rows"], 10, "{a1}");
    assert_eq!(a1["awaiting_purge_eligible_rows"], 0);
    // A dry run without the grace lists the two batches it would purge.
    let run = run_cli(
        &["purge", "--app", "a1", "--grace", "0s", "--dry-run"],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let batches = run.summary["apps"][0]["would_purge_batches"]
        .as_array()
        .unwrap();
    assert_eq!(batches.len(), 2, "{}", run.all_output);
    assert_eq!(batches[0]["rows"], 5);
    assert_eq!(batches[0]["day"], "2026-01-01");
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 10);
    // After a purge, status shows it beside the last archive.
    let run = run_cli(&["purge", "--app", "a1", "--grace", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let (code, text) = run_cli_text(&["status", "--app", "a1", "--format", "table"], &envs).await;
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("LAST PURGE") && text.contains("done "),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_lists_a_stopped_and_a_failed_run_with_its_error() {
    let db = TestDb::new().await;
    db.insert(&rows("a1", 10)).await;
    let dir = tempfile::tempdir().unwrap();
    let store = format!("file://{}", dir.path().display());
    let sentinel = dir.path().join("stop");
    std::fs::write(&sentinel, "").unwrap();
    let envs = vec![
        ("DATABASE_URL", db.url.clone()),
        ("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()),
        ("OUTBOX_ARCHIVER_STORE", store.clone()),
    ];
    let archive = ["archive", "--app", "a1", "--cutoff", "2026-01-02T00:00:00Z"];
    let mut stopped = archive.to_vec();
    let sentinel_arg = sentinel.display().to_string();
    stopped.extend(["--sentinel", &sentinel_arg]);
    let run = run_cli(&stopped, &envs).await;
    assert_eq!(
        run.summary["apps"][0]["outcome"], "stopped",
        "{}",
        run.all_output
    );
    // A run that cannot start: its store is not there.
    let missing = format!("file://{}/nowhere", dir.path().display());
    let mut failing = archive.to_vec();
    failing.extend(["--store", &missing]);
    let run = run_cli(&failing, &envs).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let history = run_cli(&["history", "--format", "json"], &envs).await;
    assert_eq!(history.code, 0, "{}", history.all_output);
    let runs = history.summary["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{}", history.all_output);
    // Newest first: the failed start, then the stopped run of a1.
    assert_eq!(runs[0]["command"], "archive");
    assert_eq!(runs[0]["app_code"], "");
    assert_eq!(runs[0]["outcome"], "failed");
    assert!(
        runs[0]["error"].as_str().unwrap().contains("nowhere"),
        "{}",
        runs[0]
    );
    assert_eq!(runs[1]["app_code"], "a1");
    assert_eq!(runs[1]["outcome"], "stopped");
    let (code, text) = run_cli_text(&["history", "--app", "a1", "--format", "table"], &envs).await;
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("stopped") && text.contains("a1"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_usage_error_still_prints_one_summary() {
    let run = run_cli(&["archive", "--no-such-flag"], &[]).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    assert_eq!(run.summary["command"], "archive");
    assert_eq!(run.summary["ok"], false);
    assert!(run.summary["error"]
        .as_str()
        .unwrap()
        .contains("--no-such-flag"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_says_what_it_applied_and_a_rerun_that_it_applied_nothing() {
    let db = TestDb::empty(&server_url().await).await;
    let envs = vec![("DATABASE_URL", db.url.clone())];
    let first = run_cli(&["migrate"], &envs).await;
    assert_eq!(first.code, 0, "{}", first.all_output);
    let applied = first.summary["applied"].as_array().unwrap();
    assert_eq!(applied.len(), migrations(), "{}", first.all_output);
    assert!(applied[0].as_str().unwrap().starts_with("20260101000001 "));
    assert!(first.summary["created"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t == "wallet_outbox_archive_receipts"));
    let again = run_cli(&["migrate"], &envs).await;
    assert_eq!(again.code, 0, "{}", again.all_output);
    assert!(again.summary["applied"].as_array().unwrap().is_empty());
    assert!(again.all_output.contains("nothing to do"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_is_said_as_refused() {
    let port = free_port();
    let run = run_cli(
        &["status", "--all-apps"],
        &[(
            "DATABASE_URL",
            format!("mysql://u:pw-x@127.0.0.1:{port}/db"),
        )],
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let error = run.summary["error"].as_str().unwrap();
    assert!(
        error.to_lowercase().contains("connection refused"),
        "{error}"
    );
    assert!(!error.contains("pool timed out"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_says_what_each_command_does_with_its_options_and_its_exit_status() {
    let commands = [
        "migrate", "archive", "verify", "status", "find", "history", "purge", "restore", "compact",
        "attest", "demo", "schema", "doctor",
    ];
    for command in commands {
        let (code, text) = run_cli_text(&[command, "--help"], &[]).await;
        assert_eq!(code, 0, "{command}: {text}");
        assert!(text.contains("Exit status: 0 "), "{command}: {text}");
    }
    let help =
        |command: &'static str| async move { run_cli_text(&[command, "--help"], &[]).await.1 };
    // --all-apps is each command's own population.
    assert!(help("archive")
        .await
        .contains("Every app code with rows in the source table"));
    assert!(help("purge")
        .await
        .contains("Every app with VERIFIED receipts not purged yet"));
    assert!(help("compact").await.contains("Every app with receipts"));
    // An option shows where it does something: retries on archive, purge and compact; verify,
    // restore and the read-only commands fail at once and have no such option.
    for command in ["archive", "purge", "compact"] {
        assert!(help(command).await.contains("--db-retries"), "{command}");
    }
    for command in ["verify", "restore", "status", "find", "history", "attest"] {
        assert!(!help(command).await.contains("--db-retries"), "{command}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apps_setting_splits_on_commas_and_spaces_alike() {
    let (db, s3, _store) = fixture().await;
    for app in ["a1", "a2", "a3"] {
        db.insert(&rows(app, 10)).await;
    }
    let mut envs = binary_envs(&db, &s3);
    envs.push(("OUTBOX_ARCHIVER_APPS", "a1 a2,\n a3".into()));
    let run = run_cli(
        &[
            "archive",
            "--batch-rows",
            "5",
            "--cutoff",
            "2026-01-02T00:00:00Z",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let apps: Vec<&str> = run.summary["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["app_code"].as_str().unwrap())
        .collect();
    assert_eq!(apps, ["a1", "a2", "a3"], "{}", run.all_output);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_receipts")
            .await,
        6
    );
}
