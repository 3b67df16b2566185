//! Found trying the tool as a new user would: `demo` drops only a database and empties only a
//! folder it made itself (a marker), unless `--force`; a password with `@`, `#` or `/` that was
//! not percent-encoded is never printed in part, and the message says to encode it; `--help`
//! never prints an environment variable's value (it may hold a password).

use crate::support::*;

fn demo_args<'a>(server: &'a str, database: &'a str, dir: &'a str) -> Vec<&'a str> {
    vec![
        "demo",
        "--database-url",
        server,
        "--database",
        database,
        "--dir",
        dir,
        "--file-store",
        "--rows",
        "300",
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_destroys_only_what_it_made() {
    let db = TestDb::new().await;
    db.insert(&rows("a1", 5)).await;
    let server = server_url().await;
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("archive");
    let folder_arg = folder.display().to_string();

    // Someone else's database: refused, nothing dropped.
    let run = run_cli(&demo_args(&server, &db.name, &folder_arg), &[]).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let error = run.summary["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&db.name) && error.contains("--force"),
        "{error}"
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 5);

    // Someone else's folder: refused, nothing removed.
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("keep-me.txt"), "precious").unwrap();
    let demo_db = format!("{}_demo", db.name);
    let run = run_cli(&demo_args(&server, &demo_db, &folder_arg), &[]).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let error = run.summary["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("--dir") && error.contains("--force"),
        "{error}"
    );
    assert!(folder.join("keep-me.txt").exists());

    // Its own database and folder: made, then made again.
    std::fs::remove_dir_all(&folder).unwrap();
    for attempt in 0..2 {
        let run = run_cli(&demo_args(&server, &demo_db, &folder_arg), &[]).await;
        assert_eq!(run.code, 0, "attempt {attempt}: {}", run.all_output);
    }
    // --force takes someone else's.
    std::fs::write(folder.join("stray.txt"), "x").unwrap();
    let mut forced = demo_args(&server, &demo_db, &folder_arg);
    forced.push("--force");
    let run = run_cli(&forced, &[]).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let mut admin = admin_connection().await;
    sqlx::Executor::execute(
        &mut admin,
        sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS `{demo_db}`")),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_that_was_not_percent_encoded_never_shows() {
    for (url, secret_bits) in [
        (
            "mysql://ux:pa#ss-word@127.0.0.1:1/db",
            &["pa#ss", "ss-word"][..],
        ),
        (
            "mysql://ux:pa/ss-word@127.0.0.1:1/db",
            &["pa/ss", "ss-word"],
        ),
        ("mysql://ux:p@ss-word@127.0.0.1:1/db", &["p@ss", "ss-word"]),
    ] {
        let run = run_cli(
            &["status", "--all-apps"],
            &[("DATABASE_URL", url.to_string())],
        )
        .await;
        assert_eq!(run.code, 2, "{url}: {}", run.all_output);
        for bit in secret_bits {
            assert!(
                !run.all_output.contains(bit),
                "{url}: {bit} in {}",
                run.all_output
            );
        }
        let error = run.summary["error"].as_str().unwrap_or_default();
        if !url.contains("p@ss") {
            // `@` is read right (the last one ends the password); `#` and `/` are not.
            assert!(error.contains("percent-encoded"), "{url}: {error}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_never_prints_a_variables_value() {
    let secret = "pw-in-a-pushgateway-url";
    for args in [
        &["--help"][..],
        &["archive", "--help"],
        &["purge", "--help"],
    ] {
        let (code, output) = run_cli_text(
            args,
            &[
                (
                    "OUTBOX_ARCHIVER_METRICS_PUSHGATEWAY",
                    format!("http://user:{secret}@pushgateway:9091"),
                ),
                (
                    "OUTBOX_ARCHIVER_REPLICAS",
                    format!("mysql://u:{secret}@replica:3306/db"),
                ),
                ("DATABASE_URL", format!("mysql://u:{secret}@db:3306/db")),
            ],
        )
        .await;
        assert_eq!(code, 0, "{args:?}");
        // Each command's help names the variables of its own options.
        assert!(
            args.len() == 1 || output.contains("OUTBOX_ARCHIVER_METRICS_PUSHGATEWAY"),
            "{args:?}: the variable is named: {output}"
        );
        assert!(!output.contains(secret), "{args:?}: {output}");
    }
}
