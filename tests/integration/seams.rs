//! The seams an operator touches, through the built binary (issue 33): every command starts
//! (`--help`, `--print-config`, and a real run against the test servers), a setting that could
//! leak a password or connect elsewhere is refused, every time flag reads the same, `find` says
//! "could not look" and where an unarchived id stands, and the screen tells the truth (a first
//! `migrate`, a dry run, a sample's seed, errors in words).

use crate::support::*;
use outbox_archiver::format::Key;

fn binary_envs(db: &TestDb, s3: &TestS3) -> Vec<(&'static str, String)> {
    cli_envs(db, s3)
}

/// The three rows of a1 archived through the binary (two batches), and the environment.
async fn archived_through_the_binary() -> (TestDb, TestS3, Vec<(&'static str, String)>) {
    let (db, s3, _store) = fixture().await;
    db.insert(&rows("a1", 30)).await;
    let envs = binary_envs(&db, &s3);
    let run = run_cli(
        &[
            "archive",
            "--app",
            "a1",
            "--batch-rows",
            "20",
            "--cutoff",
            "2026-01-02",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    (db, s3, envs)
}

/// Each subcommand: its smallest real command line against the test servers, and the exit
/// status it must end with. A subcommand this table lacks fails the test.
fn real_runs(
    demo_database: &str,
    relocate_to: &str,
    key_file: &str,
) -> Vec<(&'static str, Vec<String>, i32)> {
    let owned = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    vec![
        ("migrate", owned(&["migrate"]), 0),
        (
            "archive",
            owned(&["archive", "--all-apps", "--cutoff", "2026-01-02"]),
            0,
        ),
        ("verify", owned(&["verify"]), 0),
        ("status", owned(&["status"]), 0),
        ("find", owned(&["find", "--event-id", "e3"]), 0),
        ("history", owned(&["history"]), 0),
        ("purge", owned(&["purge", "--all-apps", "--dry-run"]), 0),
        ("restore", owned(&["restore", "--drill"]), 0),
        // Nothing behind the store: nothing recorded again (recover.rs recovers for real).
        (
            "recover",
            owned(&["recover", "--all-apps", "--reason", "a drill"]),
            0,
        ),
        ("compact", owned(&["compact", "--all-apps", "--dry-run"]), 0),
        (
            "attest",
            owned(&["attest", "--from", "2026-01-01", "--to", "2026-01-01"]),
            0,
        ),
        (
            "attest",
            owned(&[
                "attest",
                "--from",
                "2026-01-01",
                "--to",
                "2026-01-01",
                "--format",
                "csv",
            ]),
            0,
        ),
        ("schema", owned(&["schema"]), 0),
        // s3s keeps no versions and no Object Lock: doctor names those problems (exit 1).
        ("doctor", owned(&["doctor"]), 1),
        // A bucket that holds no copy of the archive: nothing moves (exit 2), said (home.rs
        // moves one for real).
        (
            "relocate",
            owned(&["relocate", "--to", relocate_to, "--reason", "a drill"]),
            2,
        ),
        (
            "log-key",
            owned(&[
                "log-key",
                "--name",
                "archive.example.com/wallet",
                "--out",
                key_file,
            ]),
            0,
        ),
        (
            "demo",
            vec![
                "demo".into(),
                "--rows".into(),
                "300".into(),
                "--file-store".into(),
                "--database".into(),
                demo_database.to_string(),
            ],
            0,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_starts_from_the_binary() {
    let (db, s3, mut envs) = archived_through_the_binary().await;
    let demo_dir = tempfile::tempdir().unwrap();
    envs.push((
        "OUTBOX_ARCHIVER_DEMO_DIR",
        demo_dir.path().display().to_string(),
    ));
    let demo_database = format!("{}_demo", db.name);
    let outbox_archiver::Location::S3 { bucket, prefix } = &s3.location else {
        unreachable!("the tests' store is S3")
    };
    let copy = format!("{bucket}-copy");
    s3.server.as_ref().unwrap().create_bucket(&copy).unwrap();
    let relocate_to = format!("s3://{copy}/{}", prefix.trimmed());
    let key_dir = tempfile::tempdir().unwrap();
    let key_file = key_dir.path().join("log.key").display().to_string();
    let runs = real_runs(&demo_database, &relocate_to, &key_file);
    let names: Vec<String> = outbox_archiver::command_line()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .filter(|name| name != "help")
        .collect();
    for name in &names {
        assert!(
            runs.iter().any(|(n, _, _)| n == name),
            "no real run of {name} in this test: add one"
        );
    }
    for name in &names {
        let (code, help) = run_cli_text(&[name, "--help"], &[]).await;
        assert_eq!(code, 0, "{name} --help: {help}");
        assert!(help.contains("Usage: outbox-archiver"), "{name}: {help}");
        assert!(help.contains("Exit status: 0"), "{name}: {help}");
    }
    for (name, args, code) in runs {
        let mut printed: Vec<&str> = args.iter().map(String::as_str).collect();
        printed.push("--print-config");
        let (config_code, config) = run_cli_text(&printed, &envs).await;
        assert_eq!(config_code, 0, "{printed:?}: {config}");
        let parsed: serde_json::Value = serde_json::from_str(config.trim()).unwrap_or_else(|e| {
            panic!("{printed:?}: --print-config is one JSON document ({e}): {config}")
        });
        assert_eq!(parsed["command"], name, "{config}");
        assert_eq!(parsed["problems"], serde_json::json!([]), "{config}");
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        if name == "attest" || name == "schema" {
            // Their stdout is the statement or the schema: no summary to parse.
            let (got, text) = run_cli_text(&argv, &envs).await;
            assert_eq!(got, code, "{argv:?}: {text}");
            assert!(!text.contains("panicked"), "{argv:?}: {text}");
            continue;
        }
        let run = run_cli(&argv, &envs).await;
        assert_eq!(run.code, code, "{argv:?}: {}", run.all_output);
        assert_eq!(run.summary["command"], name, "{}", run.all_output);
    }
    db.exec(&format!("DROP DATABASE IF EXISTS `{demo_database}`"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_url_that_is_not_mysql_is_refused_and_its_password_never_shown() {
    let url = "odd:s3cr3t-pw@127.0.0.1:3402/wallet";
    for args in [
        &["status"][..],
        &["status", "--print-config"],
        &["history"],
        &["verify", "--store", "file:///tmp/x"],
    ] {
        let (code, text) = run_cli_text(args, &[("DATABASE_URL", url.to_string())]).await;
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(!text.contains("s3cr3t-pw"), "{args:?}: {text}");
        assert!(text.contains("odd:***@127.0.0.1:3402"), "{args:?}: {text}");
        if args.len() == 1 {
            assert!(text.contains("not a MySQL URL"), "{text}");
            assert!(text.contains("--database-url / DATABASE_URL"), "{text}");
        }
    }
    // Any URL-like setting: a Pushgateway's credentials in --print-config too.
    let (_, text) = run_cli_text(
        &[
            "status",
            "--print-config",
            "--metrics-pushgateway",
            "http://ops:gw-s3cr3t@gw:9091",
        ],
        &[("DATABASE_URL", "mysql://u:db-s3cr3t@h/db".into())],
    )
    .await;
    assert!(
        !text.contains("gw-s3cr3t") && !text.contains("db-s3cr3t"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_config_shows_the_region_and_endpoint_the_sdk_takes_from_the_environment() {
    let (code, text) = run_cli_text(
        &["verify", "--print-config"],
        &[
            ("DATABASE_URL", "mysql://u@h/db".into()),
            ("OUTBOX_ARCHIVER_STORE", "s3://b/p".into()),
            ("AWS_REGION", "eu-west-3".into()),
            ("AWS_ENDPOINT_URL", "http://minio:9000".into()),
        ],
    )
    .await;
    assert_eq!(code, 0, "{text}");
    let config: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    let settings = &config["settings"];
    assert_eq!(settings["s3-region"]["value"], "eu-west-3", "{text}");
    assert_eq!(
        settings["s3-region"]["source"], "environment (AWS_REGION)",
        "{text}"
    );
    assert_eq!(
        settings["s3-endpoint"]["value"], "http://minio:9000/",
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_time_flag_takes_a_day_rfc3339_or_epoch_ms() {
    let (db, s3, _store) = fixture().await;
    db.insert(&rows("a1", 30)).await;
    let envs = binary_envs(&db, &s3);
    for (args, code) in [
        (&["archive", "--app", "a1", "--cutoff", "2026-01-02"][..], 0),
        (&["verify", "--from", "2026-01-01", "--to", "2026-01-02"], 0),
        (
            &[
                "verify",
                "--from",
                "2026-01-01T00:00:00Z",
                "--to",
                "1767312000000",
            ],
            0,
        ),
        (&["restore", "--drill", "--from", "2026-01-01"], 0),
        (
            &[
                "find",
                "--where",
                "transaction_id=tx-e7",
                "--from",
                "2026-01-01",
                "--to",
                "2026-01-02",
            ],
            0,
        ),
    ] {
        let run = run_cli(args, &envs).await;
        assert_eq!(run.code, code, "{args:?}: {}", run.all_output);
    }
    for args in [
        &["attest", "--from", "2026-01-01", "--to", "2026-01-01"][..],
        &[
            "attest",
            "--from",
            "2026-01-01T00:00:00Z",
            "--to",
            "1767225600000",
        ],
    ] {
        let (code, text) = run_cli_text(args, &envs).await;
        assert_eq!(code, 0, "{args:?}: {text}");
    }
    // A person's OUTBOX_ARCHIVER_FORMAT=table leaves the statement a document; asked for on
    // the command line, a table is refused.
    let mut table_env = envs.clone();
    table_env.push(("OUTBOX_ARCHIVER_FORMAT", "table".into()));
    let (code, text) = run_cli_text(
        &["attest", "--from", "2026-01-01", "--to", "2026-01-01"],
        &table_env,
    )
    .await;
    assert_eq!(code, 0, "{text}");
    assert!(text.trim_start().starts_with('{'), "{text}");
    // ... and where there is no statement, the person gets the summary they asked for.
    let (code, text) = run_cli_text(
        &["attest", "--from", "2026-01-01", "--to", "2999-01-01"],
        &table_env,
    )
    .await;
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("attest: could not start (see error) (exit 2)")
            && text.contains("--to 2999-01-01 has not ended yet"),
        "{text}"
    );
    let (code, text) = run_cli_text(
        &[
            "attest",
            "--from",
            "2026-01-01",
            "--to",
            "2026-01-01",
            "--format",
            "table",
        ],
        &envs,
    )
    .await;
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("attest: could not start (see error) (exit 2)"),
        "{text}"
    );
    // A day is a whole day: an instant that is not a UTC midnight is refused, naming it.
    let (code, text) = run_cli_text(
        &[
            "attest",
            "--from",
            "2026-01-01T05:00:00Z",
            "--to",
            "2026-01-01",
        ],
        &envs,
    )
    .await;
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("not the start of a UTC day"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_says_when_it_could_not_look_and_where_an_unarchived_id_stands() {
    let (db, s3, envs) = archived_through_the_binary().await;
    let mut pending = row("a1", "p1", T0 + 5);
    pending[10] = outbox_archiver::Value::Text("PENDING".into());
    db.insert(&[pending, row("a1", "late", T0 + 2 * DAY)]).await;
    // Not archived: each said with its status and why.
    let run = run_cli(&["find", "--event-id", "p1", "--event-id", "late"], &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    let in_source = run.summary["in_source"].as_array().unwrap();
    assert_eq!(in_source.len(), 2, "{}", run.summary);
    assert_eq!(in_source[0]["event_id"], "p1");
    assert_eq!(in_source[0]["status"], "PENDING");
    assert!(in_source[0]["why"]
        .as_str()
        .unwrap()
        .contains("not delivered"));
    assert!(in_source[1]["why"]
        .as_str()
        .unwrap()
        .contains("after the app's archive cursor"));
    // A column the records do not have: a typo, not "not found".
    // (first: --format csv is attest's; from the environment it reads as json for the others)
    let (code, text) = run_cli_text(&["find", "--event-id", "e3", "--format", "csv"], &envs).await;
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--format csv is attest's"), "{text}");
    let run = run_cli(
        &[
            "find",
            "--where",
            "transaction=tx-e3",
            "--from",
            "2026-01-01",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let error = run.summary["error"].as_str().unwrap();
    assert!(error.contains("did you mean transaction_id"), "{error}");
    // An archived event whose object cannot be read: could not look (2), not "not found" (1).
    let store = s3.store().await;
    let key = batch_keys(store.as_ref())
        .await
        .into_iter()
        .find(|k| k.ends_with("data.ndjson.gz"))
        .unwrap();
    store.delete(&Key::stored(key.clone())).await.unwrap();
    let run = run_cli(&["find", "--event-id", "e3"], &envs).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    assert!(
        run.summary["error"]
            .as_str()
            .unwrap()
            .contains("could not read"),
        "{}",
        run.summary
    );
    assert_eq!(run.summary["stop_reason"], "could not look (see error)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_screen_tells_the_truth() {
    let db = TestDb::empty(&server_url().await).await;
    let envs = vec![("DATABASE_URL", db.url.clone())];
    // A first migrate applied every migration: it says so, not "nothing to do".
    let first = run_cli(&["migrate", "--with-source-table"], &envs).await;
    assert_eq!(first.code, 0, "{}", first.all_output);
    assert_eq!(first.summary["stop_reason"], "done", "{}", first.summary);
    let again = run_cli(&["migrate"], &envs).await;
    assert!(
        again.summary["stop_reason"]
            .as_str()
            .unwrap()
            .starts_with("nothing to do"),
        "{}",
        again.summary
    );
    let (db, _s3, envs) = archived_through_the_binary().await;
    let more: Vec<_> = (0..30)
        .map(|i| row("a1", &format!("f{i}"), T0 + 100 + i))
        .collect();
    db.insert(&more).await;
    let table = |args: &'static [&'static str]| on_screen(args, &envs);
    // A dry run says so and lists what it would write.
    let (code, text) = table(&[
        "archive",
        "--app",
        "a1",
        "--dry-run",
        "--max-batches",
        "1",
        "--batch-rows",
        "5",
        "--cutoff",
        "2026-01-02",
    ])
    .await;
    assert_eq!(code, 0, "{text}");
    assert!(
        text.starts_with("archive: DRY RUN, nothing written:"),
        "{text}"
    );
    assert!(text.contains("would write 1 batches:"), "{text}");
    assert!(text.contains("/data.ndjson.gz"), "{text}");
    // find that does not find says "not found".
    let (code, text) = table(&["find", "--event-id", "nope"]).await;
    assert_eq!(code, 1, "{text}");
    assert!(text.starts_with("find: not found (exit 1)"), "{text}");
    // A sample says the seed that repeats it.
    let (code, text) = table(&["verify", "--sample-percent", "50", "--seed", "7"]).await;
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("repeat it with --seed 7"), "{text}");
    // A dry-run compaction says what it would compact.
    let purge = run_cli(&["purge", "--app", "a1", "--grace", "0s"], &envs).await;
    assert_eq!(purge.code, 0, "{}", purge.all_output);
    let (code, text) = table(&["compact", "--all-apps", "--older-than", "0s", "--dry-run"]).await;
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("would compact"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_store_is_said_in_words_not_a_debug_dump() {
    let (db, _s3, _store) = fixture().await;
    let port = free_port();
    let run = run_cli(
        &["verify", "--store", "s3://b/p", "--s3-max-attempts", "1"],
        &[
            ("DATABASE_URL", db.url.clone()),
            (
                "OUTBOX_ARCHIVER_S3_ENDPOINT",
                format!("http://127.0.0.1:{port}"),
            ),
            ("AWS_ACCESS_KEY_ID", "k".into()),
            ("AWS_SECRET_ACCESS_KEY", "s".into()),
        ],
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let error = run.summary["error"].as_str().unwrap();
    assert!(error.contains("cannot reach the object store"), "{error}");
    // It names the variable README documents (issue 44), beside the flag.
    assert!(error.contains("OUTBOX_ARCHIVER_S3_ENDPOINT"), "{error}");
    for dump in ["DispatchFailure", "ConnectorError", "{ "] {
        assert!(!run.all_output.contains(dump), "{}", run.all_output);
    }
}

/// A run with its summary as a table, as on a terminal: exit status and all it printed.
async fn on_screen(args: &[&str], envs: &[(&'static str, String)]) -> (i32, String) {
    let mut args = args.to_vec();
    args.extend(["--format", "table"]);
    run_cli_text(&args, envs).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_tells_every_run_with_its_id_store_and_findings() {
    use sqlx::Connection;
    let (db, s3, envs) = archived_through_the_binary().await;
    db.insert(&[row("a2", "x1", T0)]).await;
    // A run that found its lock held: recorded, not silent.
    let mut other = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    let name = outbox_archiver::lock_name(&db.lock_prefix(), "wallet_outbox", "a2");
    let got: i64 = sqlx::query_scalar("SELECT GET_LOCK(?, 0)")
        .bind(&name)
        .fetch_one(&mut other)
        .await
        .unwrap();
    assert_eq!(got, 1);
    let skipped = run_cli(&["archive", "--app", "a2", "--cutoff", "2026-01-02"], &envs).await;
    assert_eq!(skipped.code, 0, "{}", skipped.all_output);
    // a1's lock held too: its skip is recorded, and status still shows its last real run.
    let name_a1 = outbox_archiver::lock_name(&db.lock_prefix(), "wallet_outbox", "a1");
    let got: i64 = sqlx::query_scalar("SELECT GET_LOCK(?, 0)")
        .bind(&name_a1)
        .fetch_one(&mut other)
        .await
        .unwrap();
    assert_eq!(got, 1);
    let run = run_cli(&["archive", "--app", "a1", "--cutoff", "2026-01-02"], &envs).await;
    assert_eq!(
        run.summary["apps"][0]["outcome"], "skipped_locked",
        "{}",
        run.summary
    );
    let status = run_cli(&["status", "--app", "a1"], &envs).await;
    assert_eq!(
        status.summary["apps"][0]["last_run"]["outcome"], "archived",
        "{}",
        status.summary
    );
    other.close().await.unwrap();
    // A purge that fails on a batch whose object is gone: its findings are kept with the run.
    let store = s3.store().await;
    for key in batch_keys(store.as_ref()).await {
        if key.ends_with("data.ndjson.gz") {
            store.delete(&Key::stored(key.clone())).await.unwrap();
            break;
        }
    }
    let purge = run_cli(&["purge", "--app", "a1", "--grace", "0s"], &envs).await;
    assert_eq!(purge.code, 1, "{}", purge.all_output);
    let history = run_cli(&["history", "--last", "10"], &envs).await;
    assert_eq!(history.code, 0, "{}", history.all_output);
    let runs = history.summary["runs"].as_array().unwrap();
    let skip = runs
        .iter()
        .find(|r| r["app_code"] == "a2")
        .unwrap_or_else(|| panic!("the lock skip is recorded: {runs:?}"));
    assert_eq!(skip["outcome"], "skipped_locked", "{skip}");
    assert_eq!(skip["run_id"], skipped.summary["run_id"], "{skip}");
    assert_eq!(skip["store"], s3.location.to_string(), "{skip}");
    let failed = runs
        .iter()
        .find(|r| r["command"] == "purge")
        .unwrap_or_else(|| panic!("the purge is recorded: {runs:?}"));
    assert_eq!(failed["outcome"], "failed", "{failed}");
    assert_eq!(failed["run_id"], purge.summary["run_id"]);
    assert!(
        failed["findings"]["count"].as_u64().unwrap_or(0) >= 1,
        "{failed}"
    );
    assert_eq!(
        failed["findings"]["first"][0]["kind"], "missing_object",
        "{failed}"
    );
    // On the screen too: the run id, the store, the findings.
    let (code, text) = on_screen(&["history", "--command", "purge"], &envs).await;
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(&format!(
            "run {}",
            purge.summary["run_id"].as_str().unwrap()
        )),
        "{text}"
    );
    assert!(text.contains("missing_object"), "{text}");
    // Filters that match nothing known are mistakes, not empty answers.
    let run = run_cli(&["history", "--app", "nope"], &envs).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let run = run_cli(&["history", "--app", "a"], &envs).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    assert!(
        run.all_output.contains("did you mean"),
        "{}",
        run.all_output
    );
    let (code, text) = run_cli_text(&["history", "--command", "bogus"], &envs).await;
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("archive, verify"), "{text}");
    // A run that worked no app is recorded too.
    let nothing = run_cli(&["find", "--event-id", "e3"], &envs).await;
    let history = run_cli(&["history", "--command", "find"], &envs).await;
    let runs = history.summary["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["run_id"], nothing.summary["run_id"], "{runs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demos_hints_can_be_pasted_and_its_archive_explored_afterwards() {
    let server = server_url().await;
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let database = format!("oat_{}_{n}_demo", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let envs = vec![
        ("DATABASE_URL", server.clone()),
        ("OUTBOX_ARCHIVER_DEMO_DATABASE", database.clone()),
        ("OUTBOX_ARCHIVER_DEMO_DIR", dir.path().display().to_string()),
        ("OUTBOX_ARCHIVER_DEMO_PORT", port.clone()),
    ];
    let (code, said) = run_cli_text(&["demo", "--rows", "600"], &envs).await;
    assert_eq!(code, 0, "{said}");
    // No masked URL to paste: the hints source a file only its owner can read.
    let password = url::Url::parse(&server)
        .unwrap()
        .password()
        .unwrap()
        .to_string();
    let said: String = said
        .lines()
        .filter(|l| l.starts_with("demo:"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!said.contains(&format!(":{password}@")), "{said}");
    // The client line goes where --database-url goes (host, port, user; -p asks the password).
    let url = url::Url::parse(&server).unwrap();
    let query = said
        .lines()
        .find(|l| l.contains("query the receipts:"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        query.contains(&format!(" -h {} ", url.host_str().unwrap()))
            && query.contains(&format!(" -u {} -p ", url.username()))
            && !query.contains(&format!("-p{password}"))
            && !query.contains("--password"),
        "{query}"
    );
    if let Some(port) = url.port().filter(|p| *p != 3306) {
        assert!(query.contains(&format!(" -P {port} ")), "{query}");
    }
    let env_file = dir.path().join("demo.env");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&env_file).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    assert!(
        said.contains(&format!(". {}", env_file.display())),
        "{said}"
    );
    let hinted: Vec<&str> = said
        .split("explore it yourself")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("demo:   "))
        .collect();
    assert!(
        hinted.iter().all(|h| !h.contains("***")),
        "hints paste as they are: {said}"
    );
    assert!(
        hinted.iter().any(|h| h.contains(" find --event-id ")),
        "{said}"
    );
    // Afterwards: the folder served again, and every hinted command run with the file's settings.
    let settings: Vec<(&'static str, String)> = std::fs::read_to_string(&env_file)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            let key: &'static str = Box::leak(k.to_string().into_boxed_str());
            (key, v.trim_matches('\'').to_string())
        })
        .collect();
    let mut serving = tokio::process::Command::new(binary())
        .args(["demo", "--serve"])
        .env_clear()
        .envs(settings.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(
        port.parse().unwrap(),
        "demo --serve",
        std::time::Duration::from_secs(20),
    )
    .await;
    for hint in &hinted {
        let words: Vec<&str> = hint.split_whitespace().collect();
        if words[0] == "." || words[0] == "kill" || words.get(1) == Some(&"demo") {
            continue;
        }
        let run = run_cli(&words[1..], &settings).await;
        assert_eq!(run.code, 0, "{hint}: {}", run.all_output);
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(serving.id().unwrap() as i32, libc::SIGTERM) };
    assert_eq!(serving.wait().await.unwrap().code(), Some(0));
    db_drop(&server, &database).await;
}

/// Drops a database the test made through the binary.
async fn db_drop(server: &str, database: &str) {
    use sqlx::{Connection, Executor};
    let mut conn = sqlx::MySqlConnection::connect(server).await.unwrap();
    conn.execute(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS `{database}`"
    )))
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mistyped_setting_is_refused_not_ignored() {
    let (db, s3, mut envs) = archived_through_the_binary().await;
    let _ = (&db, &s3);
    envs.push(("OUTBOX_ARCHIVER_RETENTON", "7y".into()));
    for args in [
        &["archive", "--all-apps"][..],
        &["archive", "--all-apps", "--print-config"],
    ] {
        let (code, text) = run_cli_text(args, &envs).await;
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(
            text.contains("OUTBOX_ARCHIVER_RETENTON is not a setting")
                && text.contains("did you mean OUTBOX_ARCHIVER_RETENTION?"),
            "{text}"
        );
    }
    // A variable far from every setting (another version's) is said, not refused.
    envs.pop();
    envs.push(("OUTBOX_ARCHIVER_SOMETHING_NEWER", "1".into()));
    let run = run_cli(&["verify"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert!(
        run.all_output.contains("OUTBOX_ARCHIVER_SOMETHING_NEWER"),
        "{}",
        run.all_output
    );
}
