//! One app, one identity, one lock (SPEC §5.4): an app's canonical spelling comes from the data,
//! never from what was typed, so a code typed in another case (under the source's
//! case-insensitive collation) takes the app's own lock and works under its own receipts; a row
//! whose app code differs from its neighbours' only in case or trailing space (a relay bug) is
//! archived with its app instead of stopping it; a code that matches no app is exit 2 naming the
//! closest; and two jobs with different `--lock-prefix` values on one database still exclude
//! each other.

use outbox_archiver::lock_name;
use outbox_archiver::purge;
use outbox_archiver::Outcome;
use outbox_archiver::Value;
use sqlx::Connection;

use crate::support::*;

fn spelled(app: &str, id: &str, at_ms: i64) -> outbox_archiver::Row {
    let mut r = row(app, id, at_ms);
    r[at("app_code")] = Value::Text(app.to_string());
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_typed_in_another_case_takes_the_apps_own_lock() {
    let (db, _s3, _store, env) = archived_env(&rows("ka", 10), &["ka"], 100).await;
    // Another process holds ka's lock.
    let mut other = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    let name = lock_name(&db.lock_prefix(), "wallet_outbox", "ka");
    sqlx::query("SELECT GET_LOCK(?, 0)")
        .bind(&name)
        .execute(&mut other)
        .await
        .unwrap();
    for typed in ["KA", "Ka"] {
        let summary = purge::run(&env, &purge_options(&db, &[typed])).await;
        assert_eq!(
            summary.apps[0].outcome,
            Outcome::SkippedLocked,
            "{typed}: {}",
            summary.to_json()
        );
        assert_eq!(
            summary.apps[0].app_code, "ka",
            "reported by its own spelling"
        );
    }
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 10);
    let mut opts = options(&db, &["KA"], ARCHIVED_CUTOFF);
    opts.limits.max_rows = 3;
    db.insert(
        &rows("ka", 2)
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r[at("event_id")] =
                    Value::Text(format!("new-{}", r[at("event_id")].as_str().unwrap()));
                r
            })
            .collect::<Vec<_>>(),
    )
    .await;
    let archived = archive(&env, &opts).await;
    assert_eq!(
        archived.apps[0].outcome,
        Outcome::SkippedLocked,
        "{}",
        archived.to_json()
    );
    other.close().await.unwrap();

    // With the lock free, work typed KA is recorded under ka.
    let archived = archive(&env, &opts).await;
    assert!(archived.ok, "{}", archived.to_json());
    let spellings: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT CAST(app_code AS CHAR) FROM wallet_outbox_archive_receipts",
    )
    .fetch_all(&db.db.pool)
    .await
    .unwrap();
    assert_eq!(spellings, ["ka"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_that_matches_no_app_is_exit_2_naming_the_closest() {
    let db = TestDb::new().await;
    db.insert(&rows("pay-sg", 3)).await;
    db.insert(&rows("pay-cn", 3)).await;
    let dir = tempfile::tempdir().unwrap();
    let envs = vec![
        ("DATABASE_URL", db.url.clone()),
        (
            "OUTBOX_ARCHIVER_STORE",
            format!("file://{}", dir.path().display()),
        ),
        ("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()),
    ];
    for command in ["verify", "archive", "purge"] {
        let run = run_cli(&[command, "--app", "pay_sg"], &envs).await;
        assert_eq!(run.code, 2, "{command}: {}", run.all_output);
        let error = run.summary["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("pay_sg") && error.contains("pay-sg"),
            "{command}: {error}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_spelled_otherwise_does_not_stop_its_app() {
    let db = TestDb::new().await;
    let mut rows: Vec<_> = (0..10)
        .map(|i| spelled("app1", &format!("e{i}"), T0 + i))
        .collect();
    // A relay bug: one row in another case; under a PAD SPACE collation (MariaDB's default) one
    // with a trailing space too (MySQL's utf8mb4_0900_ai_ci is NO PAD: there it is another app).
    rows.push(spelled("App1", "odd-case", T0 + 20));
    if flavour() == Flavour::MariaDb {
        rows.push(spelled("app1 ", "odd-space", T0 + 21));
    }
    db.insert(&rows).await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let env = env(&db, store.clone(), ARCHIVED_CUTOFF + DAY);
    let mut opts = options(&db, &["app1"], ARCHIVED_CUTOFF);
    opts.limits.max_rows = 4;
    let archived = archive(&env, &opts).await;
    assert!(archived.ok, "{}", archived.to_json());
    assert_eq!(archived.apps[0].rows, rows.len() as u64);
    let again = archive(&env, &opts).await;
    assert!(again.ok, "{}", again.to_json());
    let purged = purge::run(&env, &purge_options(&db, &["app1"])).await;
    assert!(purged.ok, "{}", purged.to_json());
    assert_eq!(purge_of(&purged, "app1").purged_rows, rows.len() as u64);
    let restored = outbox_archiver::restore::run(
        &env,
        &outbox_archiver::restore::RestoreOptions {
            into_source: true,
            selection: outbox_archiver::Selection::of_apps(&["app1"]),
            lock_prefix: db.lock_prefix(),
            ..Default::default()
        },
    )
    .await;
    assert!(restored.ok, "{}", restored.to_json());
    let back: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(app_code AS CHAR) FROM wallet_outbox WHERE event_id IN ('odd-case', 'odd-space') ORDER BY event_id",
    )
    .fetch_all(&db.db.pool)
    .await
    .unwrap();
    let mut want = vec!["App1".to_string()];
    if flavour() == Flavour::MariaDb {
        want.push("app1 ".to_string());
    }
    assert_eq!(back, want, "each row comes back spelled as it was");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_lock_prefixes_on_one_database_still_exclude_each_other() {
    let (db, _s3, _store, env) = archived_env(&rows("a1", 10), &["a1"], 100).await;
    let mut first = purge_options(&db, &["a1"]);
    first.lock_prefix = format!("{}one:", db.lock_prefix());
    let mut second = purge_options(&db, &["a1"]);
    second.lock_prefix = format!("{}two:", db.lock_prefix());
    // The first run holds its locks while the second starts (a fail point between chunks).
    let (env2, second) = (env.clone(), second.clone());
    let (tx, rx) = std::sync::mpsc::channel::<Outcome>();
    let rx = std::sync::Mutex::new(Some(rx));
    first.failpoints = outbox_archiver::testing::FailPoints::new(move |point| {
        if point == "after-purge-chunk" {
            let env2 = env2.clone();
            let second = second.clone();
            let outcome = tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current()
                    .block_on(async move { purge::run(&env2, &second).await.apps[0].outcome })
            });
            tx.send(outcome).unwrap();
        }
        false
    });
    let summary = purge::run(&env, &first).await;
    assert!(summary.ok, "{}", summary.to_json());
    let outcome = rx.lock().unwrap().take().unwrap().recv().unwrap();
    assert_eq!(outcome, Outcome::SkippedLocked);
}
