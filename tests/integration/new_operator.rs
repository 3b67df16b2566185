//! What a new operator still tripped on (issue 44), each through the built binary: `-h` is a
//! short summary and `--help` the whole text, doctor checks each role as itself and never
//! advises one role another's rights, a trial database gets rows to try, messages name the
//! real cause and the setting README documents, and outputs follow the conventions.

use sqlx::{AssertSqlSafe, Executor};

use crate::support::*;

/// Every command's help as the binary prints it: `-h` fits a screen, one line an option;
/// `--help` is longer and holds the exit status; `log-key`, which touches no database and no
/// store, lists neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_help_fits_a_screen_and_long_help_has_everything() {
    let (_, root) = run_cli_text(&["--help"], &[]).await;
    let commands: Vec<String> = root
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect();
    assert!(commands.len() >= 15, "{commands:?}");
    for command in &commands {
        let (code, short) = run_cli_text(&[command, "-h"], &[]).await;
        assert_eq!(code, 0, "{command} -h: {short}");
        let short = short.trim_end();
        let lines: Vec<&str> = short.lines().collect();
        assert!(
            lines.len() <= 30,
            "{command} -h prints {} lines:\n{short}",
            lines.len()
        );
        for line in &lines {
            assert!(
                line.chars().count() <= 110,
                "{command} -h: a long line: {line}"
            );
        }
        assert!(
            short.contains("Usage: outbox-archiver"),
            "{command}: {short}"
        );
        assert!(
            short.contains(&format!("outbox-archiver {command} --help")),
            "{command} -h says where the rest is: {short}"
        );
        // One line per option: every option line starts with its flag.
        let options: Vec<&&str> = lines
            .iter()
            .filter(|l| l.trim_start().starts_with("--") || l.trim_start().starts_with("-h"))
            .collect();
        assert!(!options.is_empty(), "{command}: {short}");
        for option in &options {
            assert!(!option.contains("[env:"), "{command} -h: {option}");
        }
        let (code, long) = run_cli_text(&[command, "--help"], &[]).await;
        assert_eq!(code, 0, "{command} --help: {long}");
        assert!(
            long.lines().count() > lines.len(),
            "{command}: --help is the long text"
        );
        assert!(long.contains("Exit status: 0"), "{command}: {long}");
    }
    // The most used first: archive's summary starts with the apps.
    let (_, archive) = run_cli_text(&["archive", "-h"], &[]).await;
    let first = archive
        .lines()
        .find(|l| l.trim_start().starts_with("--"))
        .unwrap();
    assert!(first.trim_start().starts_with("--app"), "{archive}");
    for help in ["-h", "--help"] {
        let (_, text) = run_cli_text(&["log-key", help], &[]).await;
        for unused in ["--database-url", "--store", "--table"] {
            assert!(
                !text.contains(unused),
                "log-key {help} lists {unused}: {text}"
            );
        }
        assert!(text.contains("--name"), "{text}");
    }
}

/// README's first hour as a role split wants it: the archive role asked about purge is told
/// that this is the purge role's command and how to check that role as itself — a warning, not
/// a problem, and never a GRANT to this login; the purge role, checked as itself, passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_each_role_as_itself_and_never_advises_another_roles_rights() {
    const PASSWORD: &str = "role-split-pw";
    let db = TestDb::new().await;
    let suffix = db.name.trim_start_matches("oat_");
    let (archiver, purger) = (format!("da_{suffix}"), format!("dp_{suffix}"));
    let compactor = format!("dc_{suffix}");
    let url_of = apply_grants(&db, [&archiver, &purger, &compactor], PASSWORD).await;
    let mut admin = admin_connection().await;
    let dir = tempfile::tempdir().unwrap();
    let as_role = |user: &str| {
        vec![
            ("DATABASE_URL", url_of(user)),
            (
                "OUTBOX_ARCHIVER_STORE",
                format!("file://{}", dir.path().display()),
            ),
        ]
    };
    let run = run_cli(
        &["doctor", "--grants-for", "archive,verify,status,purge"],
        &as_role(&archiver),
    )
    .await;
    let check = |name: &str| {
        run.summary["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == name)
            .unwrap_or_else(|| panic!("{name}: {}", run.summary))
            .clone()
    };
    for own in ["grants_archive", "grants_verify", "grants_status"] {
        assert_eq!(check(own)["status"], "ok", "{own}: {}", run.summary);
    }
    let purge = check("grants_purge");
    assert_eq!(purge["status"], "warning", "{purge}");
    let detail = purge["detail"].as_str().unwrap();
    assert!(
        detail.contains(&archiver),
        "names the login checked: {detail}"
    );
    assert!(detail.contains("purge role"), "{detail}");
    let fix = purge["fix"].as_str().unwrap();
    assert!(!fix.contains("GRANT"), "never another role's rights: {fix}");
    assert!(fix.contains("doctor --grants-for purge"), "{fix}");
    let problems: Vec<_> = run.summary["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "problem" && c["check"].as_str().unwrap().starts_with("grants"))
        .collect();
    assert_eq!(
        problems,
        Vec::<&serde_json::Value>::new(),
        "{}",
        run.summary
    );
    // README's second line: the purge role as itself.
    let run = run_cli(&["doctor", "--grants-for", "purge"], &as_role(&purger)).await;
    let purge = run.summary["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "grants_purge")
        .unwrap()
        .clone();
    assert_eq!(purge["status"], "ok", "{}", run.all_output);
    for user in [&archiver, &purger, &compactor] {
        admin
            .execute(AssertSqlSafe(format!("DROP USER IF EXISTS '{user}'@'%'")))
            .await
            .unwrap();
    }
}

/// A trial database gets rows to try: `migrate --with-source-table --seed-rows N` seeds N rows
/// as the demo does, and the first hour's archive finds delivered rows to archive; a table that
/// holds rows is never seeded (nothing invented in a real outbox).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trial_database_gets_rows_and_a_real_table_never_gets_invented_ones() {
    let db = TestDb::empty(&server_url().await).await;
    let dir = tempfile::tempdir().unwrap();
    let envs = vec![
        ("DATABASE_URL", db.url.clone()),
        (
            "OUTBOX_ARCHIVER_STORE",
            format!("file://{}", dir.path().display()),
        ),
        ("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()),
    ];
    let run = run_cli(
        &["migrate", "--with-source-table", "--seed-rows", "3000"],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(run.summary["seeded_rows"], 3000, "{}", run.summary);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 3000);
    let delivered = db
        .count("SELECT COUNT(DISTINCT app_code) FROM wallet_outbox WHERE status = 'DELIVERED'")
        .await;
    assert_eq!(delivered, 3, "three apps with delivered rows");
    // Again, on a table that holds rows: refused, nothing added.
    let (code, text) = run_cli_text(
        &["migrate", "--seed-rows", "10", "--format", "table"],
        &envs,
    )
    .await;
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("fills only an empty table"), "{text}");
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 3000);
    // The first hour goes on with them: rows older than 7 days are archived.
    let run = run_cli(&["archive", "--all-apps"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let archived = db
        .count("SELECT CAST(COALESCE(SUM(row_count), 0) AS SIGNED) FROM wallet_outbox_archive_receipts")
        .await;
    assert!(archived > 1000, "{archived} rows archived");
}

/// Each message names the real cause and the setting README documents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_name_the_real_cause() {
    let db = TestDb::new().await;
    // A misspelled database, for a login with rights on the real one only (as an archive role
    // has): the server says "access denied", the message says the database may not exist.
    let user = format!("dm_{}", db.name.trim_start_matches("oat_"));
    let mut admin = admin_connection().await;
    for statement in [
        format!("CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY 'misspelt-pw'"),
        format!("GRANT SELECT ON `{}`.* TO '{user}'@'%'", db.name),
    ] {
        admin.execute(AssertSqlSafe(statement)).await.unwrap();
    }
    let mut url = url::Url::parse(&db.url).unwrap();
    url.set_username(&user).unwrap();
    url.set_password(Some("misspelt-pw")).unwrap();
    url.set_path(&format!("{}_misspelt", db.name));
    let run = run_cli(&["status"], &[("DATABASE_URL", url.to_string())]).await;
    admin
        .execute(AssertSqlSafe(format!("DROP USER IF EXISTS '{user}'@'%'")))
        .await
        .unwrap();
    assert_eq!(run.code, 2, "{}", run.all_output);
    let error = run.summary["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("database \"{}_misspelt\" does not exist", db.name)),
        "{error}"
    );
    assert!(!error.contains("check the user and password"), "{error}");
    // PostgreSQL's sslmode words: said once, with the MySQL one meant.
    let run = run_cli(
        &["status"],
        &[("DATABASE_URL", format!("{}?sslmode=verify-full", db.url))],
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let error = run.summary["error"].as_str().unwrap();
    assert!(error.contains("ssl-mode=VERIFY_IDENTITY"), "{error}");
    assert!(
        !error.contains("error with configuration: error with configuration"),
        "{error}"
    );
    // A store that does not answer GetBucketVersioning (s3s-fs): the versioning line says what
    // it answered, not "could not be read".
    let s3 = TestS3::new().await;
    let mut envs = s3.binary_env();
    envs.push(("DATABASE_URL", db.url.clone()));
    let run = run_cli(&["doctor"], &envs).await;
    let versioning = run.summary["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "bucket_versioning")
        .unwrap()
        .clone();
    let detail = versioning["detail"].as_str().unwrap();
    assert!(!detail.contains("could not be read"), "{detail}");
    assert!(detail.contains("GetBucketVersioning"), "{detail}");
}

/// Outputs as the conventions have them: `log-key` prints one JSON object when asked, the dry
/// run says its bytes are uncompressed, status says when rows become purgeable, and `history`
/// takes a time window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_follow_the_conventions() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("log.key");
    let (code, out) = crate::log::run_cli_stdout(
        &[
            "log-key",
            "--name",
            "archive.example.com/wallet",
            "--out",
            key.to_str().unwrap(),
            "--format",
            "json",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    let summary: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert!(
        summary["verifier"]
            .as_str()
            .unwrap()
            .starts_with("archive.example.com/wallet+"),
        "{summary}"
    );
    assert_eq!(summary["key_file"], key.to_str().unwrap());

    let (db, s3, _store) = fixture().await;
    db.insert(&rows("a1", 30)).await;
    let envs = cli_envs(&db, &s3);
    let table = |args: &[&str]| {
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.extend(["--format".into(), "table".into()]);
        let envs = envs.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run_cli_text(&args, &envs).await
        }
    };
    let (code, text) = table(&[
        "archive",
        "--app",
        "a1",
        "--dry-run",
        "--batch-rows",
        "10",
        "--cutoff",
        "2026-01-02",
    ])
    .await;
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("bytes of NDJSON (uncompressed)"), "{text}");
    let (code, text) = table(&["archive", "--app", "a1", "--cutoff", "2026-01-02"]).await;
    assert_eq!(code, 0, "{text}");
    let (code, text) = table(&["status", "--cutoff", "2026-01-02"]).await;
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("purgeable in "), "{text}");
    assert!(!text.contains("from in"), "{text}");

    // history --since / --until: the window of last night's runs, by a duration ago or an
    // instant; runs outside it are left out.
    let run = run_cli(&["history", "--since", "1h"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let runs = run.summary["runs"].as_array().unwrap().len();
    assert!(runs >= 2, "{}", run.summary);
    let run = run_cli(&["history", "--until", "2026-01-01"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        run.summary["runs"],
        serde_json::json!([]),
        "{}",
        run.summary
    );
    let run = run_cli(&["history", "--since", "2099-01-01"], &envs).await;
    assert_eq!(
        run.summary["runs"],
        serde_json::json!([]),
        "{}",
        run.summary
    );
    let run = run_cli(
        &["history", "--since", "2026-01-01", "--command", "archive"],
        &envs,
    )
    .await;
    let archives = run.summary["runs"].as_array().unwrap();
    assert!(!archives.is_empty(), "{}", run.summary);
    assert!(
        archives.iter().all(|r| r["command"] == "archive"),
        "{}",
        run.summary
    );
    let (code, text) = run_cli_text(&["history", "--since", "yesterday"], &envs).await;
    assert_eq!(code, 2, "{text}");
}
