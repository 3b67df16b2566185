//! The database server goes away under a running archiver: restarted cleanly, then killed
//! outright, each time while a 1,500-batch run is recording receipts. The server is a private
//! `mariadbd` this test starts in a temporary directory, so the shared one is never touched.
//! Each run carries on once the server is back (the app is tried again from the lock, counted in
//! `retries`), never hangs and prints no secret; without retries it fails cleanly, naming the
//! database. In the end every row is archived exactly once and every receipt's objects verify.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_archiver::{verify, verify::VerifyOptions};
use outbox_archiver::{LocalStore, Location, ObjectStore};

use crate::support::private_server;
use crate::support::*;

async fn receipts_so_far(db: &TestDb) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM wallet_outbox_archive_receipts")
        .fetch_one(&db.db.pool)
        .await
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_mid_run_is_retried_or_fails_cleanly_and_converges() {
    let mut server = PrivateServer::start().await;
    let db = TestDb::on(&server.url()).await;
    for app in ["a1", "a2"] {
        db.insert(
            &(0..1_500)
                .map(|i| row(app, &format!("{app}-{i:04}"), T0 + i * 10))
                .collect::<Vec<_>>(),
        )
        .await;
    }
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("file://{}", dir.path().display());
    let run = |extra: &[&str]| {
        archive_in_two_row_batches(&store_url)
            .args(extra)
            .env("DATABASE_URL", &db.url)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    };
    let mut outcomes = Vec::new();
    for (signal, what, retries) in [
        (libc::SIGTERM, "clean restart", "5"),
        (libc::SIGKILL, "crash", "5"),
        (libc::SIGTERM, "clean restart without retries", "0"),
    ] {
        let before = receipts_so_far(&db).await;
        // A bounded share of the work per run, so every case finds some.
        let archiver = run(&["--max-batches", "150", "--db-retries", retries]);
        let deadline = Instant::now() + Duration::from_secs(60);
        while receipts_so_far(&db).await < before + 25 {
            assert!(Instant::now() < deadline, "the archiver made no progress");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        server.stop(signal).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        server.run().await;
        let out = tokio::time::timeout(Duration::from_secs(120), archiver.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("the archiver hung after a database {what}"))
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stdout.contains(private_server::PASSWORD)
                && !stderr.contains(private_server::PASSWORD),
            "no secret in the output"
        );
        let summary: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!("a summary after a database {what} ({e}): {stdout} {stderr}")
        });
        let apps = summary["apps"].as_array().unwrap();
        if retries == "0" {
            assert_eq!(out.status.code(), Some(1), "{what}: {stdout}");
            let errors = apps
                .iter()
                .filter_map(|app| app["error"].as_str())
                .collect::<Vec<_>>()
                .join("; ");
            assert!(
                errors.contains("database") || errors.contains("lock"),
                "the failure names the database: {errors}"
            );
            outcomes.push(format!("{what}: exit 1 ({errors})"));
        } else {
            assert_eq!(out.status.code(), Some(0), "{what}: {stdout}");
            let tried_again: u64 = apps.iter().filter_map(|app| app["retries"].as_u64()).sum();
            assert!(tried_again >= 1, "{what}: an app was tried again: {stdout}");
            outcomes.push(format!(
                "{what}: carried on after {tried_again} retries, exit 0"
            ));
        }
    }

    let last = run(&[]).wait_with_output().await.unwrap();
    assert!(
        last.status.success(),
        "{}",
        String::from_utf8_lossy(&last.stdout)
    );
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::new(Location::Local {
        root: dir.path().to_path_buf(),
    }));
    for app in ["a1", "a2"] {
        assert_eq!(
            archived_rows(&db, store.as_ref(), app).await,
            db.expected_rows(app, T0 + DAY).await,
            "{app}: nothing lost, nothing twice"
        );
        assert_eq!(db.members(app).await.len(), 1_500);
    }
    let env = env(&db, store, T0 + DAY);
    let verified = verify::run(&env, &VerifyOptions::everything(T0 + DAY, "DELIVERED")).await;
    assert!(verified.ok, "{}", verified.to_json());
    eprintln!("database restarts: {}", outcomes.join("; "));
}
