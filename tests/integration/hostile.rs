//! Hostile input (issue 5, in part): a 16 MiB payload, deeply nested JSON, invalid JSON text
//! (MariaDB keeps JSON as text; a column without the JSON_VALID check takes anything), escaped
//! control characters and lone surrogates — archived faithfully; app codes with `/`, `..`, spaces,
//! `%` or non-ASCII — refused; every key stays under the prefix.

use outbox_archiver::Db;
use outbox_archiver::Limits;
use outbox_archiver::Outcome;
use outbox_archiver::Value;
use sqlx::Executor;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_payloads_are_archived_faithfully_and_hostile_app_codes_refused() {
    let (mut db, _s3, store) = fixture().await;
    // A 16 MiB row needs a bigger packet than the 16 MiB default; new connections see it.
    db.db
        .pool
        .execute("SET GLOBAL max_allowed_packet = 67108864")
        .await
        .unwrap();
    db.db.close().await;
    db.db = Db::connect(&db.url, 4).await.unwrap();
    // A payload column as MariaDB created it before JSON_VALID checks: plain text.
    db.db
        .pool
        .execute("ALTER TABLE wallet_outbox MODIFY payload LONGTEXT NOT NULL")
        .await
        .unwrap();

    let nested = format!("{}1{}", "[".repeat(30), "]".repeat(30));
    let payloads = [
        ("huge", format!(r#"{{"blob": "{}"}}"#, "x".repeat(16 << 20))),
        ("nested", nested),
        ("invalid", r#"{"unterminated": [1, 2"#.to_string()),
        (
            "escapes",
            r#"{"s": "\ud800 lone surrogate, \u0000 nul, \u001f unit sep"}"#.to_string(),
        ),
        (
            "raw-controls",
            "tab\tnewline\ncr\rbell\u{7}del\u{7f}".to_string(),
        ),
    ];
    for (i, (id, payload)) in payloads.iter().enumerate() {
        let mut r = row("ok", id, T0 + i as i64);
        r[at("payload")] = Value::Text(payload.clone());
        db.insert(&[r]).await;
    }
    let hostile_apps = ["a/b", "..", "a b", "a%2e", "ü-app", "app\n"];
    for app in hostile_apps {
        db.insert(&[row(app, "e1", T0)]).await;
    }

    let mut opts = options(&db, &[], T0 + DAY);
    opts.apps = outbox_archiver::Apps::All;
    opts.limits = Limits {
        max_rows: 1_000,
        max_bytes: 8 << 20,
    };
    let summary = archive(&env(&db, store.clone(), T0 + DAY), &opts).await;
    assert_eq!(
        summary.exit_code,
        1,
        "refused apps fail the run: {}",
        summary.apps.len()
    );
    for report in &summary.apps {
        if report.app_code == "ok" {
            assert_eq!(report.outcome, Outcome::Archived, "{:?}", report.error);
            assert_eq!(report.rows, 5);
            assert!(
                report.batches >= 2,
                "the 16 MiB row exceeds --batch-bytes and goes alone"
            );
        } else {
            assert_eq!(report.outcome, Outcome::Refused, "{:?}", report.app_code);
            assert!(report.error.as_deref().unwrap().contains("not allowed"));
        }
    }
    assert_eq!(
        archived_rows(&db, store.as_ref(), "ok").await,
        db.expected_rows("ok", T0 + DAY).await,
        "byte for byte"
    );
    let prefix = format!("{}wallet_outbox/app_code=ok/", store.location().prefix());
    assert!(batch_keys(store.as_ref())
        .await
        .iter()
        .all(|k| k.starts_with(&prefix)));
    db.db
        .pool
        .execute("SET GLOBAL max_allowed_packet = 16777216")
        .await
        .unwrap();
}
