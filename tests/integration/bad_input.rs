//! Bad input gets a clear error and loses nothing: each case runs the real binary and checks the
//! exit status of SPEC §6, a message naming the problem and the setting, the JSON summary on
//! stdout, and that no secret is printed.

use outbox_archiver::Outcome;
use serde_json::Value as Json;

use crate::support::*;

fn s3_env(s3: &TestS3, store: &str) -> Vec<(&'static str, String)> {
    let server = s3
        .server
        .as_ref()
        .expect("these cases need the in-process server");
    vec![
        ("OUTBOX_ARCHIVER_STORE", store.to_string()),
        ("OUTBOX_ARCHIVER_S3_ENDPOINT", server.endpoint.clone()),
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_string()),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_string()),
    ]
}

fn store_url(s3: &TestS3) -> String {
    s3.location.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_mistakes_exit_2_with_a_message_naming_the_setting() {
    let db = TestDb::new().await;
    // The server's own credentials and buckets are what these mistakes are made against.
    let s3 = TestS3::in_process().await;
    db.insert(&[row("a1", "e1", T0)]).await;
    let good = s3_env(&s3, &store_url(&s3));
    let with = |overrides: &[(&'static str, String)]| {
        let mut envs = good.clone();
        envs.push(("DATABASE_URL", db.url.clone()));
        for (k, v) in overrides {
            envs.retain(|(key, _)| key != k);
            envs.push((k, v.clone()));
        }
        envs
    };
    let wrong_password = db
        .url
        .replace("outbox_test:outbox_test@", "outbox_test:Sup3rSecretPw@");
    type Envs = Vec<(&'static str, String)>;
    let cases: Vec<(&str, Envs, &str)> = vec![
        (
            "malformed database url",
            with(&[("DATABASE_URL", "mysql//nope".into())]),
            "--database-url",
        ),
        (
            "wrong password",
            with(&[("DATABASE_URL", wrong_password.clone())]),
            "refused the login",
        ),
        (
            "unknown host port",
            with(&[(
                "DATABASE_URL",
                "mysql://u:Sup3rSecretPw@127.0.0.1:1/x".into(),
            )]),
            "cannot reach the database",
        ),
        (
            "missing bucket",
            with(&[("OUTBOX_ARCHIVER_STORE", "s3://no-such-bucket/x".into())]),
            "does not exist",
        ),
        (
            "unreachable endpoint",
            with(&[("OUTBOX_ARCHIVER_S3_ENDPOINT", "http://127.0.0.1:1".into())]),
            "cannot reach the object store",
        ),
        (
            "wrong secret key",
            with(&[("AWS_SECRET_ACCESS_KEY", "Wr0ngSecretKeyValue".into())]),
            "refused access",
        ),
        (
            "bad store url",
            with(&[("OUTBOX_ARCHIVER_STORE", "bucket-without-scheme".into())]),
            "--store",
        ),
        (
            "unknown table",
            with(&[("OUTBOX_ARCHIVER_TABLE", "room_outbox".into())]),
            "--table",
        ),
    ];
    for (case, envs, needle) in cases {
        let run = run_cli(
            &["archive", "--app", "a1", "--lock-prefix", &db.lock_prefix()],
            &envs,
        )
        .await;
        assert_eq!(run.code, 2, "{case}: {}", run.all_output);
        assert_eq!(run.summary["ok"], Json::Bool(false), "{case}");
        assert_eq!(run.summary["apps"], Json::Array(vec![]), "{case}");
        let error = run.summary["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(needle),
            "{case}: {error:?} should mention {needle:?}"
        );
        for secret in [
            "Sup3rSecretPw",
            "Wr0ngSecretKeyValue",
            SECRET_KEY,
            "outbox_test:outbox_test",
        ] {
            assert!(
                !run.all_output.contains(secret),
                "{case}: a secret was printed:\n{}",
                run.all_output
            );
        }
    }
    assert!(db.receipts("a1").await.is_empty(), "nothing was written");
    assert!(keys(s3.store().await.as_ref()).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsafe_app_codes_are_refused_and_other_apps_still_archived() {
    let db = TestDb::new().await;
    // The server's own credentials and buckets are what these mistakes are made against.
    let s3 = TestS3::in_process().await;
    db.insert(&[
        row("../x", "e1", T0),
        row("a/b", "e2", T0),
        row("a b", "e3", T0),
        row("good", "e4", T0),
    ])
    .await;
    let mut envs = s3_env(&s3, &store_url(&s3));
    envs.push(("DATABASE_URL", db.url.clone()));
    let run = run_cli(
        &[
            "archive",
            "--all-apps",
            "--cutoff",
            &(T0 + DAY).to_string(),
            "--lock-prefix",
            &db.lock_prefix(),
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert_eq!(run.summary["ok"], Json::Bool(false));
    let apps = run.summary["apps"].as_array().unwrap();
    assert_eq!(apps.len(), 4);
    for app in apps {
        let code = app["app_code"].as_str().unwrap();
        if code == "good" {
            assert_eq!(app["outcome"], "archived");
            assert_eq!(app["rows"], 1);
        } else {
            assert_eq!(app["outcome"], "refused", "{code}");
            assert!(app["error"].as_str().unwrap().contains("not allowed"));
            assert!(db.members(code).await.is_empty());
        }
    }
    let keys = batch_keys(s3.store().await.as_ref()).await;
    assert_eq!(keys.len(), 3);
    assert!(
        keys.iter().all(|k| k.contains("app_code=good/")),
        "{keys:?}"
    );
    let _ = Outcome::Refused;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_then_archive_through_the_binary_with_a_file_store() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    db.insert(&[row("a1", "e1", T0), row("a1", "e2", T0 + 1)])
        .await;
    let envs = vec![("DATABASE_URL", db.url.clone())];
    let migrated = run_cli(&["migrate", "--with-source-table"], &envs).await;
    assert_eq!(migrated.code, 0, "{}", migrated.all_output);
    let store = format!("file://{}", dir.path().display());
    let run = run_cli(
        &[
            "archive",
            "--app",
            "a1",
            "--store",
            &store,
            "--cutoff",
            "2026-01-02T00:00:00Z",
            "--lock-prefix",
            &db.lock_prefix(),
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(run.summary["command"], "archive");
    assert_eq!(run.summary["ok"], Json::Bool(true));
    assert_eq!(run.summary["apps"][0]["outcome"], "archived");
    assert_eq!(run.summary["apps"][0]["rows"], 2);
    assert!(run.summary["apps"][0]["error"].is_null());
    let missing = run_cli(
        &["archive", "--app", "a1", "--lock-prefix", &db.lock_prefix()],
        &envs,
    )
    .await;
    assert_eq!(missing.code, 2);
    assert!(
        missing.summary["error"]
            .as_str()
            .unwrap()
            .contains("--store"),
        "no silent default store"
    );

    let verified = run_cli(&["verify", "--store", &store], &envs).await;
    assert_eq!(verified.code, 0, "{}", verified.all_output);
    assert_eq!(verified.summary["findings"], Json::Array(vec![]));
    let data_key = run.summary["apps"][0]["batch_list"][0]["data_object_key"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::remove_file(
        dir.path()
            .join(data_key.replace("data.ndjson.gz", "_SUCCESS")),
    )
    .unwrap();
    let broken = run_cli(&["verify", "--store", &store], &envs).await;
    assert_eq!(broken.code, 1, "{}", broken.all_output);
    assert_eq!(broken.summary["findings"][0]["kind"], "missing_object");
    let status = run_cli(
        &["status", "--app", "a1", "--cutoff", "2026-01-02T00:00:00Z"],
        &envs,
    )
    .await;
    assert_eq!(status.code, 0, "{}", status.all_output);
    assert_eq!(
        status.summary["apps"][0]["archived_rows"], 2,
        "JSON when stdout is not a terminal"
    );
    assert_eq!(status.summary["apps"][0]["backlog_rows"], 0);
    let drill = run_cli(&["restore", "--drill", "--store", &store], &envs).await;
    assert_eq!(
        drill.code, 1,
        "the batch with the missing _SUCCESS fails its drill: {}",
        drill.all_output
    );
    let purge_with = |extra: &'static [&'static str]| {
        let mut args = vec![
            "purge".to_string(),
            "--app".into(),
            "a1".into(),
            "--grace".into(),
            "0s".into(),
            "--store".into(),
            store.clone(),
            "--lock-prefix".into(),
            db.lock_prefix(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        let envs = envs.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run_cli(&args, &envs).await
        }
    };
    // The batch's _SUCCESS is gone: purge keeps its rows (SPEC §5.9)...
    let refused = purge_with(&[]).await;
    assert_eq!(refused.code, 1, "{}", refused.all_output);
    assert_eq!(refused.summary["apps"][0]["purged_rows"], 0);
    assert_eq!(
        refused.summary["apps"][0]["findings"][0]["kind"],
        "missing_object"
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 2);
    // ...unless the operator says, loudly, to trust the receipts.
    let purge = purge_with(&["--trust-receipts"]).await;
    assert_eq!(purge.code, 0, "{}", purge.all_output);
    assert_eq!(purge.summary["object_check"], "trusted");
    assert!(
        purge.all_output.contains("--trust-receipts"),
        "the opt-out is logged: {}",
        purge.all_output
    );
    assert_eq!(purge.summary["apps"][0]["purged_rows"], 2);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmigrated_database_asks_for_migrate() {
    let db = TestDb::new().await;
    // A database as the first release left it: the second migration not applied (nor the
    // later ones that change the runs table it creates).
    for sql in [
        "ALTER TABLE wallet_outbox_archive_receipts DROP COLUMN purged_rows",
        "DROP TABLE wallet_outbox_archive_runs",
        "DELETE FROM _sqlx_migrations WHERE version IN (20260101000002, 20260101000011, 20260101000019)",
    ] {
        sqlx::query(sql).execute(&db.db.pool).await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let store = format!("file://{}", dir.path().display());
    let envs = vec![("DATABASE_URL", db.url.clone())];
    for command in [
        vec!["archive", "--app", "a1", "--store", &store],
        vec!["status"],
    ] {
        let run = run_cli(&command, &envs).await;
        assert_eq!(run.code, 2, "{}", run.all_output);
        let error = run.summary["error"].as_str().unwrap();
        assert!(
            error.contains("run `outbox-archiver migrate`") && error.contains("20260101000002"),
            "{error}"
        );
    }
    let migrated = run_cli(&["migrate"], &envs).await;
    assert_eq!(migrated.code, 0, "{}", migrated.all_output);
    let status = run_cli(&["status", "--format", "json"], &envs).await;
    assert_eq!(status.code, 0, "{}", status.all_output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_config_shows_every_setting_and_its_source_but_no_secret() {
    let envs = [
        (
            "DATABASE_URL",
            "mysql://archiver:db-password-xyz@db:3306/wallet".to_string(),
        ),
        ("OUTBOX_ARCHIVER_STORE", "s3://bucket/prefix".to_string()),
        ("OUTBOX_ARCHIVER_S3_READ_TIMEOUT", "45s".to_string()),
        ("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEKEY".to_string()),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_string()),
    ];
    let out = tokio::process::Command::new(binary())
        .args(["archive", "--all-apps", "--shard", "2/4", "--print-config"])
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        !text.contains("db-password-xyz") && !text.contains(SECRET_KEY),
        "{text}"
    );
    let config: Json = serde_json::from_str(&text).unwrap();
    let settings = &config["settings"];
    assert_eq!(
        settings["database-url"]["value"],
        "mysql://archiver:***@db:3306/wallet"
    );
    assert_eq!(
        settings["database-url"]["source"],
        "environment (DATABASE_URL)"
    );
    assert_eq!(settings["shard"]["value"], "2/4");
    assert_eq!(settings["shard"]["source"], "command line");
    assert_eq!(settings["s3-read-timeout"]["value"], "45s");
    assert_eq!(settings["gzip-level"]["source"], "default");
    assert_eq!(settings["s3-endpoint"]["source"], "unset");
    assert_eq!(config["problems"], Json::Array(vec![]));

    // Problems a run would stop on are listed, and exit 2; nothing is contacted.
    let out = tokio::process::Command::new(binary())
        .args([
            "archive",
            "--app",
            "a1",
            "--shard",
            "0/2",
            "--store",
            "gs://x",
            "--print-config",
        ])
        .env_remove("DATABASE_URL")
        .output()
        .await
        .unwrap();
    let config: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(2));
    let problems = config["problems"].to_string();
    for expected in ["gs://x", "--database-url", "--shard needs --all-apps"] {
        assert!(problems.contains(expected), "{expected}: {problems}");
    }
}

/// SPEC §5.10 and "refuse what cannot be right": an event id compared without case (a table made
/// by an older tool), two app codes that the table's collation holds equal, a cutoff in the
/// future — each stops the run before any work, exit 2, naming the column or the setting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_right_is_refused_before_any_work() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    db.insert(&[row("a1", "e1", T0), row("a1", "E1", T0 + 1)])
        .await;
    let store = format!("file://{}", dir.path().display());
    let envs = vec![("DATABASE_URL", db.url.clone())];
    let prefix = db.lock_prefix();
    let archive_with = |extra: &[&str]| {
        let mut args = vec![
            "archive",
            "--store",
            &store,
            "--lock-prefix",
            &prefix,
            "--cutoff",
            "2026-01-02T00:00:00Z",
        ];
        args.extend_from_slice(extra);
        args.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let run = |args: Vec<String>| {
        let envs = envs.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run_cli(&args, &envs).await
        }
    };

    // Two codes the table's collation (utf8mb4_unicode_ci) holds equal: the same rows twice.
    let twice = run(archive_with(&["--app", "a1", "--app", "A1"])).await;
    assert_eq!(twice.code, 2, "{}", twice.all_output);
    let error = twice.summary["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("--app") && error.contains("\"a1\"") && error.contains("\"A1\""),
        "{error}"
    );

    // A cutoff in the future would archive rows the relay has not finished with.
    let mut future = archive_with(&["--app", "a1"]);
    let at = future.iter().position(|a| a == "--cutoff").unwrap();
    future[at + 1] = "2099-01-01T00:00:00Z".into();
    let refused = run(future).await;
    assert_eq!(refused.code, 2, "{}", refused.all_output);
    let error = refused.summary["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("--cutoff") && error.contains("future"),
        "{error}"
    );

    // A cutoff less than a minute old is allowed, with a warning that says why it is risky.
    let fresh = run(vec![
        "archive".into(),
        "--app".into(),
        "a1".into(),
        "--store".into(),
        store.clone(),
        "--lock-prefix".into(),
        prefix.clone(),
        "--older-than".into(),
        "0s".into(),
    ])
    .await;
    assert_eq!(fresh.code, 0, "{}", fresh.all_output);
    assert!(
        fresh.all_output.contains("stragglers"),
        "a warning about rows still being delivered: {}",
        fresh.all_output
    );
    assert!(db.receipts("a1").await.len() == 1);

    // purge's age: a negative or malformed grace is refused before anything starts, naming it.
    for grace in ["-1h", "soon"] {
        let out = tokio::process::Command::new(binary())
            .args(["purge", "--app", "a1", "--store", &store])
            .env("DATABASE_URL", &db.url)
            .env("OUTBOX_ARCHIVER_GRACE", grace)
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "--grace {grace}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--grace"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 2);

    // An event id that compares without case: keyset paging would skip rows.
    sqlx::query("ALTER TABLE wallet_outbox_archive_receipts MODIFY last_event_id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL")
        .execute(&db.db.pool)
        .await
        .unwrap();
    for command in [
        archive_with(&["--app", "a1"]),
        vec!["verify".into(), "--store".into(), store.clone()],
    ] {
        let refused = run(command).await;
        assert_eq!(refused.code, 2, "{}", refused.all_output);
        let error = refused.summary["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("wallet_outbox_archive_receipts.last_event_id")
                && error.contains(
                    "ALTER TABLE wallet_outbox_archive_receipts MODIFY last_event_id varchar(64) \
                     CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"
                ),
            "{error}"
        );
    }
}

/// The collation rule compares behaviour, not names: archiver tables made with
/// utf8mb4_unicode_ci beside a source made with another case-insensitive collation (MySQL 8's
/// default utf8mb4_0900_ai_ci, say) tell app codes apart just as finely and are accepted; only
/// archiver tables that conflate codes the source keeps apart are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_code_collations_are_compared_by_what_they_tell_apart() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    db.insert(&[row("a1", "e1", T0)]).await;
    let store = format!("file://{}", dir.path().display());
    let envs = vec![("DATABASE_URL", db.url.clone())];
    let archive_args = [
        "archive",
        "--app",
        "a1",
        "--store",
        &store,
        "--cutoff",
        "2026-01-02T00:00:00Z",
        "--lock-prefix",
        &db.lock_prefix(),
    ];
    sqlx::query("ALTER TABLE wallet_outbox MODIFY app_code VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL")
        .execute(&db.db.pool)
        .await
        .unwrap();
    let accepted = run_cli(&archive_args, &envs).await;
    assert_eq!(accepted.code, 0, "{}", accepted.all_output);
    sqlx::query("ALTER TABLE wallet_outbox MODIFY app_code VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL")
        .execute(&db.db.pool)
        .await
        .unwrap();
    let refused = run_cli(&archive_args, &envs).await;
    assert_eq!(refused.code, 2, "{}", refused.all_output);
    let error = refused.summary["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("wallet_outbox_archive_receipts.app_code") && error.contains("ALTER TABLE"),
        "{error}"
    );
}

/// Issue 42: a time that cannot be meant is refused, never read as something else. `--cutoff
/// 20261101` (a day without its dashes) was epoch ms 1970-01-01T05:37Z and archive said
/// `up_to_date`; `04/12/2026` and `2026-11-31` said "premature end of input". Each flag that
/// takes a time refuses with exit 2, naming the flag and the real cause, before any work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_that_cannot_be_meant_are_refused_naming_the_flag_and_the_cause() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    db.insert(&[row("a1", "e1", T0), row("a1", "e2", T0 + 1)])
        .await;
    let store = format!("file://{}", dir.path().display());
    let prefix = db.lock_prefix();
    let envs = vec![("DATABASE_URL", db.url.clone())];
    let common = ["--store", &store, "--app", "a1"];
    let run = |command: &'static str,
               flags: Vec<&'static str>,
               env: Option<(&'static str, &'static str)>| {
        let mut args: Vec<String> = vec![command.into()];
        args.extend(common.iter().map(|a| a.to_string()));
        if matches!(command, "archive" | "restore") {
            args.extend(["--lock-prefix".to_string(), prefix.clone()]);
        }
        args.extend(flags.iter().map(|a| a.to_string()));
        let mut envs = envs.clone();
        envs.extend(env.map(|(k, v)| (k, v.to_string())));
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run_cli(&args, &envs).await
        }
    };
    type Case = (
        &'static str,
        Vec<&'static str>,
        Option<(&'static str, &'static str)>,
        [&'static str; 2],
    );
    let cases: Vec<Case> = vec![
        (
            "archive",
            vec!["--cutoff", "20261101"],
            None,
            ["--cutoff", "the day 2026-11-01 without its dashes"],
        ),
        (
            "archive",
            vec![],
            Some(("OUTBOX_ARCHIVER_CUTOFF", "1767312000")),
            ["--cutoff", "epoch seconds (2026-01-02T00:00:00.000Z)"],
        ),
        (
            "verify",
            vec!["--from", "04/12/2026"],
            None,
            [
                "--from",
                "04/12/2026: write the day as YYYY-MM-DD (2026-12-04",
            ],
        ),
        (
            "restore",
            vec!["--to", "2026-11-31"],
            None,
            ["--to", "2026-11-31 is not a date (November has 30 days)"],
        ),
        (
            "find",
            vec!["--event-id", "e1", "--from", "0"],
            None,
            ["--from", "1970-01-01T00:00:00.000Z, before 2001"],
        ),
        (
            "attest",
            vec!["--from", "20261101", "--to", "2026-11-02"],
            None,
            ["--from", "the day 2026-11-01 without its dashes"],
        ),
    ];
    for (command, flags, env, needles) in cases {
        let case = format!("{command} {flags:?} {env:?}");
        let refused = run(command, flags, env).await;
        assert_eq!(refused.code, 2, "{case}: {}", refused.all_output);
        assert_eq!(refused.summary["ok"], Json::Bool(false), "{case}");
        assert_eq!(refused.summary["apps"], Json::Array(vec![]), "{case}");
        let error = refused.summary["error"].as_str().unwrap_or_default();
        for needle in needles {
            assert!(error.contains(needle), "{case}: {error:?} lacks {needle:?}");
        }
        assert!(!error.contains("premature end of input"), "{case}: {error}");
    }
    assert!(db.receipts("a1").await.is_empty(), "nothing was archived");

    // The day written as it must be archives the rows below it.
    let archived = run("archive", vec!["--cutoff", "2026-01-02"], None).await;
    assert_eq!(archived.code, 0, "{}", archived.all_output);
    assert_eq!(archived.summary["apps"][0]["rows"], 2);
}

/// Issue 43, "the auditor's tools as an auditor meets them": `attest` of a day that is not over
/// was refused with "could not list the apps to work on", and `attest --help` neither said the
/// period must be over nor spoke of the log (it said "chain"). The refusal names the flag and why,
/// as a run that could not start (exit 2, nothing done), and the help says both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attest_of_a_day_not_over_says_so_and_its_help_says_the_period_must_be_over() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let store = format!("file://{}", dir.path().display());
    let envs = vec![("DATABASE_URL", db.url.clone())];
    let today = outbox_archiver::utc_date(chrono::Utc::now().timestamp_millis());
    let run = run_cli(
        &[
            "attest", "--store", &store, "--app", "a1", "--from", &today, "--to", &today,
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let error = run.summary["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with(&format!("--to {today} has not ended yet"))
            && error.contains("whole UTC days that are over"),
        "{error}"
    );
    assert_eq!(
        run.summary["stop_reason"], "could not start (see error)",
        "{}",
        run.summary
    );
    let (code, help) = run_cli_text(&["attest", "--help"], &[]).await;
    assert_eq!(code, 0, "{help}");
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(help.contains("days that are over"), "{help}");
    assert!(help.contains("It must be over"), "{help}");
    // The log, not the linear chain of older builds (a certificate still chains to its CA).
    assert!(
        !help.contains("chain head") && !help.contains("'s chain"),
        "{help}"
    );
    assert!(
        help.contains("the log's tree heads") && help.contains("a period not over yet"),
        "{help}"
    );
}
