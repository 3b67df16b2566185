//! Metrics against a real Prometheus Pushgateway (Debian's `prometheus-pushgateway`, started by
//! the test on a free port) and a textfile: the binary pushes rows, outcomes and last-success
//! times per app; a later failed or skipped run keeps an app's last success; a gateway that
//! cannot be reached is reported in the summary without changing what the run did.

use outbox_archiver::lock_name;
use sqlx::Connection;

use crate::support::pushgateway::{value, Pushgateway};
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_reach_a_real_pushgateway_and_a_textfile() {
    let gateway = Pushgateway::start().await;
    let db = TestDb::new().await;
    db.insert(&rows("a1", 20)).await;
    db.insert(&rows("a2", 5)).await;
    let dir = tempfile::tempdir().unwrap();
    let textfile = dir.path().join("outbox_archiver.prom");
    let envs = [
        ("DATABASE_URL", db.url.clone()),
        (
            "OUTBOX_ARCHIVER_STORE",
            format!("file://{}/archive", dir.path().display()),
        ),
        ("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()),
        ("OUTBOX_ARCHIVER_METRICS_PUSHGATEWAY", gateway.url()),
        (
            "OUTBOX_ARCHIVER_METRICS_TEXTFILE",
            textfile.display().to_string(),
        ),
    ];
    std::fs::create_dir(dir.path().join("archive")).unwrap();
    let a1 = [
        ("command", "archive"),
        ("table", "wallet_outbox"),
        ("app", "a1"),
    ];

    // 1. Both apps archived.
    let started = chrono::Utc::now().timestamp_millis() as f64 / 1000.0;
    let run = run_cli(
        &[
            "archive",
            "--app",
            "a1,a2",
            "--older-than",
            "1s",
            "--batch-rows",
            "8",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert!(
        run.summary.get("metrics_errors").is_none(),
        "{}",
        run.summary
    );
    let pushed = gateway.scrape().await;
    assert_eq!(
        value(&pushed, "outbox_archiver_rows", &a1),
        Some(20.0),
        "{pushed:?}"
    );
    assert_eq!(value(&pushed, "outbox_archiver_batches", &a1), Some(3.0));
    assert!(value(&pushed, "outbox_archiver_bytes", &a1).unwrap() > 0.0);
    assert_eq!(value(&pushed, "outbox_archiver_app_ok", &a1), Some(1.0));
    assert_eq!(
        value(&pushed, "outbox_archiver_backlog_rows", &a1),
        Some(0.0),
        "caught up"
    );
    assert_eq!(
        value(
            &pushed,
            "outbox_archiver_rows",
            &[("app", "a2"), ("job", "outbox_archiver")]
        ),
        Some(5.0),
        "{pushed:?}"
    );
    let run_labels = [("command", "archive"), ("table", "wallet_outbox")];
    assert_eq!(
        value(&pushed, "outbox_archiver_run_ok", &run_labels),
        Some(1.0)
    );
    assert_eq!(
        value(&pushed, "outbox_archiver_run_exit_code", &run_labels),
        Some(0.0)
    );
    let first_success = value(
        &pushed,
        "outbox_archiver_last_success_timestamp_seconds",
        &a1,
    )
    .unwrap();
    let ended = chrono::Utc::now().timestamp_millis() as f64 / 1000.0;
    assert!(
        (started..=ended).contains(&first_success),
        "{first_success} is when the run ended, within [{started}, {ended}]"
    );
    let text = std::fs::read_to_string(&textfile).unwrap();
    assert!(
        text.lines()
            .any(|l| l
                == r#"outbox_archiver_rows{command="archive",table="wallet_outbox",app="a1"} 20"#),
        "{text}"
    );

    // 2. a1's lock is held elsewhere: skipped, so no new last success — the old one stays.
    let mut holder = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    let name = lock_name(&db.lock_prefix(), "wallet_outbox", "a1");
    let got: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, 0)")
        .bind(&name)
        .fetch_one(&mut holder)
        .await
        .unwrap();
    assert_eq!(got, Some(1));
    db.insert(&rows("a/b", 1)).await;
    let run = run_cli(&["archive", "--app", "a1,a/b", "--older-than", "1s"], &envs).await;
    assert_eq!(
        run.code, 1,
        "the unsafe app code fails the run: {}",
        run.all_output
    );
    let pushed = gateway.scrape().await;
    assert_eq!(
        value(
            &pushed,
            "outbox_archiver_last_success_timestamp_seconds",
            &a1
        ),
        Some(first_success),
        "a skipped app keeps its last success (a new one would be this later run's end)"
    );
    assert_eq!(value(&pushed, "outbox_archiver_rows", &a1), Some(0.0));
    assert_eq!(
        value(&pushed, "outbox_archiver_app_ok", &[("app", "a/b")]),
        Some(0.0)
    );
    assert_eq!(
        value(&pushed, "outbox_archiver_run_ok", &run_labels),
        Some(0.0)
    );
    assert_eq!(
        value(&pushed, "outbox_archiver_run_exit_code", &run_labels),
        Some(1.0)
    );
    let text = std::fs::read_to_string(&textfile).unwrap();
    assert!(
        text.contains(&format!(
            r#"outbox_archiver_last_success_timestamp_seconds{{command="archive",table="wallet_outbox",app="a1"}} {first_success}"#
        )),
        "the textfile keeps it too: {text}"
    );
    holder.close().await.unwrap();

    // 3. A gateway that is not there: the run's work stands, the summary says what failed.
    let mut unreachable = envs.to_vec();
    unreachable[3].1 = "http://127.0.0.1:9".to_string();
    db.insert(&rows("a3", 4)).await;
    let run = run_cli(
        &["archive", "--app", "a3", "--older-than", "1s"],
        &unreachable,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(db.members("a3").await.len(), 4);
    let errors = run.summary["metrics_errors"].to_string();
    assert!(
        errors.contains("--metrics-pushgateway http://127.0.0.1:9"),
        "{errors}"
    );
}
