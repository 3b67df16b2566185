//! SIGTERM (a CronJob being stopped) ends the run cleanly between batches: the batch in flight
//! is finished and recorded, the summary says `stopped`, the exit status is 0, and the next run
//! goes on from the cursor.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_between_batches() {
    let db = TestDb::new().await;
    db.insert(&rows("a1", 200)).await;
    let dir = tempfile::tempdir().unwrap();
    let store = format!("file://{}", dir.path().display());
    let prefix = db.lock_prefix();
    let args = |batch_rows: &'static str| {
        let mut args = vec![
            "archive",
            "--app",
            "a1",
            "--batch-rows",
            batch_rows,
            "--cutoff",
            "2026-01-02T00:00:00Z",
        ];
        args.extend([
            "--store",
            store.as_str(),
            "--lock-prefix",
            prefix.as_str(),
            "--log-format",
            "json",
        ]);
        args
    };
    let mut child = tokio::process::Command::new(binary())
        .args(args("1"))
        .env("DATABASE_URL", &db.url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    while let Some(line) = stderr.next_line().await.unwrap() {
        if line.contains("batch archived") {
            break;
        }
    }
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(
        unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) },
        0
    );
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .await
        .unwrap();
    let status = child.wait().await.unwrap();
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(status.code(), Some(0), "{summary}");
    let app = &summary["apps"][0];
    assert_eq!(app["outcome"], "stopped", "{summary}");
    assert!(app["stop_reason"].as_str().unwrap().contains("SIGTERM"));
    let batches = app["batches"].as_u64().unwrap();
    assert!((1..200).contains(&batches), "{batches}");
    assert_eq!(
        db.receipts("a1").await.len() as u64,
        batches,
        "every batch the summary counts is recorded"
    );
    assert_eq!(db.members("a1").await.len() as u64, batches);

    let rest = tokio::process::Command::new(binary())
        .args(args("1000"))
        .env("DATABASE_URL", &db.url)
        .output()
        .await
        .unwrap();
    assert!(rest.status.success());
    assert_eq!(
        db.members("a1").await.len(),
        200,
        "the next run goes on from the cursor"
    );
}

/// Ctrl-C (SIGINT) is a human's abort: the run stops cleanly between batches as for SIGTERM, the
/// stop reason names the signal, and the exit status is 130, so `archive && purge` stops there;
/// the screen says it stopped (and resumes), not that it failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_with_exit_130_and_names_the_signal() {
    let db = TestDb::new().await;
    db.insert(&rows("a1", 200)).await;
    let dir = tempfile::tempdir().unwrap();
    let store = format!("file://{}", dir.path().display());
    let (code, stdout) = interrupted(&db, &store, "json").await;
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(code, Some(130), "{summary}");
    assert_eq!(
        summary["ok"], false,
        "ok is true exactly when the exit status is 0"
    );
    let app = &summary["apps"][0];
    assert_eq!(app["outcome"], "stopped", "{summary}");
    assert_eq!(app["stop_reason"], "shutdown requested (SIGINT)");
    // As a person sees it: stopped, and the next run resumes — not FAILED.
    let (code, screen) = interrupted(&db, &store, "table").await;
    assert_eq!(code, Some(130), "{screen}");
    let first = screen.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("archive: stopped by Ctrl-C (exit 130; the next run resumes)"),
        "{screen}"
    );
    assert!(!screen.contains("FAILED"), "{screen}");
}

/// An archive of a1 in one-row batches, interrupted by SIGINT after its first batch: the exit
/// status and what it printed on stdout in `format`.
async fn interrupted(db: &TestDb, store: &str, format: &str) -> (Option<i32>, String) {
    let mut child = tokio::process::Command::new(binary())
        .args([
            "archive",
            "--app",
            "a1",
            "--batch-rows",
            "1",
            "--cutoff",
            "2026-01-02T00:00:00Z",
            "--log-format",
            "json",
            "--format",
            format,
            "--store",
            store,
            "--lock-prefix",
            &db.lock_prefix(),
        ])
        .env("DATABASE_URL", &db.url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    while let Some(line) = stderr.next_line().await.unwrap() {
        if line.contains("batch archived") {
            break;
        }
    }
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(
        unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGINT) },
        0
    );
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .await
        .unwrap();
    (child.wait().await.unwrap().code(), stdout)
}
