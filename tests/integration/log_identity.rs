//! An app's log identity (SPEC §5.16; README, "The log of batches"): its folder in the store,
//! hence its origin line, is recorded once, when its log begins, and never derived again from
//! the source's collation. Through the binary, on both servers: a collation made
//! case-sensitive after an app's log began, the reverse, a deployment whose logs began before
//! identities were recorded, and a new app whose code is the one an older app's log is named
//! by.

use crate::support::*;

const CUTOFF: &str = "2026-01-04T00:00:00Z";

/// `archive` of `app` in batches of 10 rows, up to [`CUTOFF`].
fn archive(app: &str) -> [&str; 7] {
    [
        "archive",
        "--app",
        app,
        "--batch-rows",
        "10",
        "--cutoff",
        CUTOFF,
    ]
}

/// The binary's environment for this test's database and store.
fn binary_envs(db: &TestDb, s3: &TestS3) -> Vec<(&'static str, String)> {
    cli_envs(db, s3)
}

/// `n` delivered rows of `app`, event ids `{tag}000`…, a millisecond apart from `from`.
fn batch(app: &str, tag: &str, from: i64, n: i64) -> Vec<outbox_archiver::Row> {
    (0..n)
        .map(|i| row(app, &format!("{tag}{i:03}"), from + i))
        .collect()
}

/// The source's `app_code` given `collation` (`None`: the server's default, as the suite's
/// source tables are made), then — as an operator does — every `ALTER TABLE` the binary's
/// start-up prints for the archiver's own tables, applied until it starts. Returns them.
async fn change_collation(
    db: &TestDb,
    envs: &[(&str, String)],
    collation: Option<&str>,
) -> Vec<String> {
    let collate = collation.map_or(String::new(), |c| format!(" COLLATE {c}"));
    db.exec(&format!(
        "ALTER TABLE wallet_outbox MODIFY app_code VARCHAR(32) CHARACTER SET utf8mb4{collate} NOT NULL"
    ))
    .await;
    let mut applied = Vec::new();
    for _ in 0..8 {
        let run = run_cli(&["status", "--all-apps"], envs).await;
        if run.code == 0 {
            return applied;
        }
        let error = run.summary["error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let fix = error
            .split_once("fix it with: ")
            .map(|(_, fix)| fix.split(" (a table rebuild").next().unwrap().to_string())
            .unwrap_or_else(|| panic!("start-up refused without an ALTER: {}", run.all_output));
        db.exec(&fix).await;
        applied.push(fix);
    }
    panic!("start-up still refuses after {applied:?}");
}

/// Makes the receipts recorded so far a day old (the binary's clock is the system's, and a
/// statement covers whole days that are over); returns that day.
async fn recorded_yesterday(db: &TestDb) -> String {
    db.exec(&format!(
        "UPDATE wallet_outbox_archive_receipts SET verified_at_ms = verified_at_ms - {DAY} \
         WHERE verified_at_ms > UNIX_TIMESTAMP(NOW() - INTERVAL 1 HOUR) * 1000"
    ))
    .await;
    outbox_archiver::utc_date(chrono::Utc::now().timestamp_millis() - DAY)
}

/// The recorded log identities: (app, folder).
async fn identities(db: &TestDb) -> Vec<(String, String)> {
    sqlx::query_as(
        "SELECT CAST(app_code AS CHAR), CAST(folder AS CHAR) FROM wallet_outbox_archive_logs \
         ORDER BY CAST(app_code AS BINARY)",
    )
    .fetch_all(&db.db.pool)
    .await
    .unwrap()
}

/// The app's entry in a summary.
fn app_of<'s>(summary: &'s serde_json::Value, app: &str) -> &'s serde_json::Value {
    summary["apps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["app_code"] == app)
        .unwrap_or_else(|| panic!("no app {app}: {summary}"))
}

/// verify (the log audited, with --metadata-only), purge and attest of `app` all work, with
/// no chain break accepted; the statement names the log by `folder`.
async fn verify_purge_attest(
    db: &TestDb,
    envs: &[(&str, String)],
    app: &str,
    folder: &str,
    rows: u64,
) {
    let run = run_cli(
        &[
            "verify",
            "--app",
            app,
            "--metadata-only",
            "--cutoff",
            CUTOFF,
        ],
        envs,
    )
    .await;
    assert_eq!(run.code, 0, "verify {app}: {}", run.all_output);
    let size = app_of(&run.summary, app)["log_size"].clone();
    assert_eq!(
        app_of(&run.summary, app)["log_appended_to"],
        size,
        "{}",
        run.summary
    );
    let run = run_cli(&["purge", "--app", app, "--grace", "0s"], envs).await;
    assert_eq!(run.code, 0, "purge {app}: {}", run.all_output);
    assert_eq!(
        app_of(&run.summary, app)["purged_rows"],
        rows,
        "{}",
        run.summary
    );
    let day = recorded_yesterday(db).await;
    let run = run_cli(
        &["attest", "--app", app, "--from", &day, "--to", &day],
        envs,
    )
    .await;
    assert_eq!(run.code, 0, "attest {app}: {}", run.all_output);
    // Its stdout is the statement.
    let statement = &run.summary;
    let logged = &statement["apps"][0]["log"];
    assert_eq!(logged["app_code"], folder, "{statement}");
    assert_eq!(logged["size"], size, "{statement}");
}

/// App `Pay` archived, with its log, under the server's default (case-insensitive) collation
/// of `app_code` — its log in `_log/app_code=pay/` — then `app_code` made `utf8mb4_bin` and the
/// ALTERs start-up prints for the archiver's tables applied (issue 42). The log's folder was
/// derived from today's collation, so it moved to `Pay/`: archive failed every run (chain_gap),
/// `--accept-log-break` the same, purge refused every batch. Now the folder recorded when
/// the log began is the one every command uses: archive appends to it, verify audits it, purge
/// proves its batches, attest states it, with no break accepted. A new app `pay` — whose code
/// names `Pay`'s folder now — gets a log of its own (`pay~2`), and both logs recompute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collation_made_case_sensitive_moves_no_log() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let envs = binary_envs(&db, &s3);
    db.insert(&batch("Pay", "a", T0, 25)).await;
    let run = run_cli(&archive("Pay"), &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(log_size(store.as_ref(), "pay").await, 3);

    let applied = change_collation(&db, &envs, Some("utf8mb4_bin")).await;
    assert!(
        applied
            .iter()
            .any(|a| a.contains("wallet_outbox_archive_receipts")),
        "{applied:?}"
    );
    db.insert(&batch("Pay", "b", T0 + 100, 25)).await;
    let run = run_cli(&archive("Pay"), &envs).await;
    assert_eq!(
        run.code, 0,
        "archive after the collation change: {}",
        run.all_output
    );
    assert_eq!(app_of(&run.summary, "Pay")["rows"], 25, "{}", run.summary);
    assert_eq!(log_size(store.as_ref(), "pay").await, 6);
    assert_eq!(log_size(store.as_ref(), "Pay").await, 0, "no second log");
    verify_purge_attest(&db, &envs, "Pay", "pay", 50).await;

    // A new app whose code is the folder Pay's log holds: a log of its own.
    db.insert(&batch("pay", "c", T0 + 200, 15)).await;
    db.insert(&batch("Pay", "d", T0 + 300, 5)).await;
    let run = run_cli(
        &[
            "archive",
            "--all-apps",
            "--batch-rows",
            "10",
            "--cutoff",
            CUTOFF,
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(log_size(store.as_ref(), "pay").await, 7);
    assert_eq!(log_size(store.as_ref(), "pay~2").await, 2);
    assert_eq!(
        identities(&db).await,
        [("Pay".into(), "pay".into()), ("pay".into(), "pay~2".into())]
    );
    let run = run_cli(&["verify", "--all-apps", "--cutoff", CUTOFF], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        run.summary["apps"].as_array().unwrap().len(),
        2,
        "{}",
        run.summary
    );
    assert_eq!(
        app_of(&run.summary, "pay")["log_size"],
        2,
        "{}",
        run.summary
    );
    let run = run_cli(&["purge", "--all-apps", "--grace", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
}

/// A log key made with `log-key`: the key file's path and the verifier, as the binary's
/// environment takes them.
async fn log_key(dir: &std::path::Path) -> (String, String) {
    let key_file = dir.join("log.key");
    let key = key_file.to_str().unwrap().to_string();
    let (code, out) = crate::log::run_cli_stdout(
        &[
            "log-key",
            "--name",
            "archive.example.com/wallet",
            "--out",
            &key,
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{out}");
    (key, crate::log_keys::verifier_of(&out))
}

/// A deployment whose log began before identities were recorded (an older build: no row in
/// `_logs`), with signed checkpoints: `Pay`'s log in `pay/`, then `app_code` made case-sensitive
/// and a new app `pay` — whose code is the folder `Pay`'s log is in — archived first. `pay` does
/// not take `Pay`'s log (which is found and recorded for `Pay` first) but begins its own,
/// `pay~2`; `Pay` goes on in `pay/`, recorded as found. Verify, purge and attest, no alarm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_an_older_build_began_is_found_and_a_new_app_gets_its_own() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let dir = tempfile::tempdir().unwrap();
    let (key, verifier) = log_key(dir.path()).await;
    let mut envs = binary_envs(&db, &s3);
    envs.push(("OUTBOX_ARCHIVER_LOG_VERIFIER", verifier));
    let mut signing = envs.clone();
    signing.push(("OUTBOX_ARCHIVER_LOG_KEY_FILE", key));
    db.insert(&batch("Pay", "a", T0, 25)).await;
    let run = run_cli(&archive("Pay"), &signing).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(log_size(store.as_ref(), "pay").await, 3);
    // As an older build left it: the log in the store, no identity recorded.
    db.exec("DELETE FROM wallet_outbox_archive_logs").await;

    change_collation(&db, &envs, Some("utf8mb4_bin")).await;
    db.insert(&batch("pay", "c", T0 + 200, 15)).await;
    db.insert(&batch("Pay", "b", T0 + 100, 25)).await;
    let run = run_cli(&archive("pay"), &signing).await;
    assert_eq!(run.code, 0, "the new app first: {}", run.all_output);
    assert_eq!(log_size(store.as_ref(), "pay~2").await, 2);
    assert_eq!(
        log_size(store.as_ref(), "pay").await,
        3,
        "Pay's log untouched"
    );
    let run = run_cli(&archive("Pay"), &signing).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(log_size(store.as_ref(), "pay").await, 6);
    let recorded: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT CAST(app_code AS CHAR), CAST(folder AS CHAR), CAST(how AS CHAR) \
         FROM wallet_outbox_archive_logs ORDER BY CAST(app_code AS BINARY)",
    )
    .fetch_all(&db.db.pool)
    .await
    .unwrap();
    assert_eq!(
        recorded,
        [
            ("Pay".into(), "pay".into(), "found".into()),
            ("pay".into(), "pay~2".into(), "begun".into())
        ]
    );
    let run = run_cli(
        &[
            "verify",
            "--all-apps",
            "--metadata-only",
            "--cutoff",
            CUTOFF,
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        run.summary["apps"].as_array().unwrap().len(),
        2,
        "{}",
        run.summary
    );
    verify_purge_attest(&db, &envs, "Pay", "pay", 50).await;
    let run = run_cli(&["purge", "--app", "pay", "--grace", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    // The auditor's script recomputes both logs from a copy of the store alone.
    let copy = tempfile::tempdir().unwrap();
    let (code, out) = audit_copy(store.as_ref(), copy.path()).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("pay: tree of 6 leaves"), "{out}");
    assert!(out.contains("pay~2: tree of 2 leaves"), "{out}");
    assert!(!out.contains("note:") && !out.contains("no log"), "{out}");
}

/// The reverse change: app codes compared case-sensitively when `Pay`'s log began (in `Pay/`),
/// then `app_code` given back the server's default collation, the archiver's tables too. The
/// log stays where it began: archive appends to it, verify, purge and attest prove it; and a
/// deployment of that time with no identity recorded finds it the same — verify, purge and
/// attest without writing it down, the next archive recording it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collation_made_case_insensitive_again_moves_no_log() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let envs = binary_envs(&db, &s3);
    let archive = archive("Pay");
    change_collation(&db, &envs, Some("utf8mb4_bin")).await;
    db.insert(&batch("Pay", "a", T0, 25)).await;
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(log_size(store.as_ref(), "Pay").await, 3);

    change_collation(&db, &envs, None).await;
    for table in [
        "wallet_outbox_archive_receipts",
        "wallet_outbox_archive_superseded",
        "wallet_outbox_archive_runs",
        "wallet_outbox_archive_drills",
    ] {
        db.exec(&format!(
            "ALTER TABLE {table} MODIFY app_code VARCHAR(32) NOT NULL"
        ))
        .await;
    }
    db.insert(&batch("Pay", "b", T0 + 100, 25)).await;
    let run = run_cli(&archive, &envs).await;
    assert_eq!(
        run.code, 0,
        "archive after the change back: {}",
        run.all_output
    );
    assert_eq!(log_size(store.as_ref(), "Pay").await, 6);
    assert_eq!(log_size(store.as_ref(), "pay").await, 0, "no second log");
    // As a deployment of that time left it: no identity recorded; found where it is.
    db.exec("DELETE FROM wallet_outbox_archive_logs").await;
    verify_purge_attest(&db, &envs, "Pay", "Pay", 50).await;
    assert_eq!(identities(&db).await, [], "only archive records");
    db.insert(&batch("Pay", "c", T0 + 200, 5)).await;
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(log_size(store.as_ref(), "Pay").await, 7);
    assert_eq!(identities(&db).await, [("Pay".into(), "Pay".into())]);
}

/// `deploy/audit-chain.py` on a copy of the store made under `dir`: its exit status and output.
async fn audit_copy(
    store: &dyn outbox_archiver::ObjectStore,
    dir: &std::path::Path,
) -> (i32, String) {
    for key in keys(store).await {
        let path = dir.join(&key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, read(store, &key).await).unwrap();
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/audit-chain.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(dir.join(store.location().prefix().trimmed()))
        .arg("wallet_outbox")
        .output()
        .expect("python3 runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}
