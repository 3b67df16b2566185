//! End to end: exactly the delivered rows below the cutoff are archived, each once, byte-exact,
//! across apps, statuses, page and batch boundaries, UTC days, NULLs, awkward text, a 1 MiB
//! payload and control totals that overflow 64 bits.

use outbox_archiver::Limits;
use outbox_archiver::Outcome;
use outbox_archiver::{Row, Value};

use crate::support::*;

/// The dataset most tests use: one app with everything awkward, one plain app, one app that is
/// not asked for.
pub fn awkward_rows(cutoff: i64) -> Vec<Row> {
    let mut rows = Vec::new();
    // 1,300 delivered rows in runs of 7 equal timestamps, over three UTC days, so runs straddle
    // page (500) and batch boundaries.
    for i in 0..1_300i64 {
        let t = T0 + (i / 7) * (DAY / 150);
        rows.push(row("a1", &format!("ev-{:05}", 1_300 - i), t));
    }
    let mut special = |id: &str, f: &dyn Fn(&mut Row)| {
        let mut r = row("a1", id, T0 + DAY / 2);
        f(&mut r);
        rows.push(r);
    };
    special("nulls-and-values", &|r| {
        r[at("lock_until_ms")] = Value::Int(123);
        r[at("next_retry_at_ms")] = Value::Null;
        r[at("last_error")] = Value::Text("last error".into());
    });
    special("text-ünïcødé-😀", &|r| {
        r[at("payload")] = Value::Text(r#"{"memo": "line1\nline2 \"quoted\" back\\slash \u0001 é 😀 中文", "nested": {"a": [1, 2.5, null, true]}}"#.into());
        r[at("last_error")] =
            Value::Text("multi\nline\terror \"with quotes\" and \\ backslash, 中文".into());
    });
    special("big-payload", &|r| {
        r[at("payload")] = Value::Text(format!(r#"{{"blob": "{}"}}"#, "x".repeat(1 << 20)));
    });
    special("max-1", &|r| {
        r[at("available_delta")] = Value::Int(i64::MAX);
        r[at("frozen_delta")] = Value::Int(i64::MIN);
    });
    special("max-2", &|r| {
        r[at("available_delta")] = Value::Int(i64::MAX);
        r[at("frozen_delta")] = Value::Int(i64::MIN);
    });
    special("max-3", &|r| {
        r[at("available_delta")] = Value::Int(i64::MAX - 1);
        r[at("frozen_delta")] = Value::Int(i64::MIN + 1);
    });
    // Other states below the cutoff: never archived.
    for (i, status) in ["PENDING", "DELIVERING", "RETRYABLE", "FAILED"]
        .iter()
        .enumerate()
    {
        let mut r = row("a1", &format!("not-delivered-{i}"), T0 + 1000 + i as i64);
        r[at("status")] = Value::Text(status.to_string());
        rows.push(r);
    }
    // Delivered at and above the cutoff: not yet.
    rows.push(row("a1", "at-cutoff", cutoff));
    rows.push(row("a1", "above-cutoff", cutoff + 1));
    rows.push(row("a1", "just-below", cutoff - 1));
    for i in 0..40 {
        rows.push(row("a2", &format!("b-{i:03}"), T0 + i * 1000));
    }
    for i in 0..5 {
        rows.push(row("a3", &format!("c-{i}"), T0 + i));
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archives_exactly_the_delivered_rows_below_the_cutoff_once() {
    let (db, _s3, store) = fixture().await;
    let cutoff = T0 + 3 * DAY;
    db.insert(&awkward_rows(cutoff)).await;
    let env = env(&db, store.clone(), cutoff + DAY);
    let mut opts = options(&db, &["a1", "a2"], cutoff);
    opts.limits = Limits {
        max_rows: 250,
        max_bytes: 8 << 20,
    };

    let summary = archive(&env, &opts).await;
    assert!(summary.ok, "{}", summary.to_json());
    assert_eq!(summary.exit_code, 0);
    let a1 = &summary.apps[0];
    assert_eq!(a1.outcome, Outcome::Archived);

    for app in ["a1", "a2"] {
        let expected = db.expected_rows(app, cutoff).await;
        let archived = archived_rows(&db, store.as_ref(), app).await;
        assert_eq!(archived.len(), expected.len(), "{app}: row count");
        assert!(
            archived == expected,
            "{app}: archived rows must equal the source rows, byte for byte"
        );
        let mut members = db.members(app).await;
        members.sort();
        let mut want: Vec<(String, i64)> = expected
            .iter()
            .map(|r| {
                (
                    r[at("event_id")].as_str().unwrap().to_string(),
                    r[at("updated_at_ms")].as_i64().unwrap(),
                )
            })
            .collect();
        want.sort();
        let got: Vec<(String, i64)> = members.iter().map(|(e, u, _)| (e.clone(), *u)).collect();
        assert_eq!(
            got, want,
            "{app}: members are exactly the archived rows, none twice"
        );
    }
    let expected_a1 = db.expected_rows("a1", cutoff).await;
    assert_eq!(
        expected_a1.len(),
        1_300 + 6 + 1,
        "the dataset is what the test thinks"
    );
    assert!(expected_a1
        .iter()
        .all(|r| r[at("status")] == Value::Text("DELIVERED".into())));
    assert_eq!(a1.rows, expected_a1.len() as u64);
    assert_eq!(
        db.members("a3").await.len(),
        0,
        "an app not asked for is untouched"
    );

    // Receipts: control totals exact beyond 64 bits; no batch spans two UTC days.
    let totals: Vec<(String, String, i64, i64)> = sqlx::query_as(
        "SELECT available_delta_total, frozen_delta_total, first_updated_at_ms, last_updated_at_ms FROM wallet_outbox_archive_receipts WHERE app_code = 'a1'",
    )
    .fetch_all(&db.db.pool)
    .await
    .unwrap();
    let sum = |rows: &[Row], i: usize| {
        rows.iter()
            .map(|r| i128::from(r[i].as_i64().unwrap()))
            .sum::<i128>()
    };
    let available: i128 = totals.iter().map(|t| t.0.parse::<i128>().unwrap()).sum();
    let frozen: i128 = totals.iter().map(|t| t.1.parse::<i128>().unwrap()).sum();
    assert_eq!(available, sum(&expected_a1, at("available_delta")));
    assert_eq!(frozen, sum(&expected_a1, at("frozen_delta")));
    assert!(
        available > i128::from(i64::MAX),
        "the totals really overflow 64 bits"
    );
    for (_, _, first, last) in &totals {
        assert_eq!(
            first.div_euclid(DAY),
            last.div_euclid(DAY),
            "a batch never spans two UTC dates"
        );
    }
    assert!(
        totals.len() >= 7,
        "1,300 rows in batches of 250 over 3+ days: {} batches",
        totals.len()
    );

    // Every object is where its receipt says, and nothing else is in the bucket.
    let mut referenced = Vec::new();
    for app in ["a1", "a2"] {
        for (batch, data_key, _, _) in db.receipts(app).await {
            assert!(
                data_key.contains(&format!("/wallet_outbox/app_code={app}/dt=")),
                "{data_key}"
            );
            assert!(data_key.ends_with(&format!("/{batch}/data.ndjson.gz")));
            let dir = data_key.trim_end_matches("data.ndjson.gz");
            referenced.extend([
                data_key.clone(),
                format!("{dir}manifest.json"),
                format!("{dir}_SUCCESS"),
            ]);
        }
    }
    referenced.sort();
    assert_eq!(batch_keys(store.as_ref()).await, referenced);
    // Each app's batches in its log: a checkpoint per app, at the tree of its batches.
    let anchored = checkpoint_keys(store.as_ref()).await;
    assert_eq!(anchored.len(), 2, "{anchored:?}");
    assert!(
        anchored[0].ends_with("/_log/app_code=a1/checkpoint"),
        "{anchored:?}"
    );
    assert!(
        anchored[1].ends_with("/_log/app_code=a2/checkpoint"),
        "{anchored:?}"
    );
    assert_eq!(log_size(store.as_ref(), "a1").await, 7);
    assert_eq!(log_size(store.as_ref(), "a2").await, 1);

    // Idempotent: a second run archives nothing and writes nothing.
    let again = archive(&env, &opts).await;
    assert!(again.ok);
    assert!(
        again
            .apps
            .iter()
            .all(|a| a.outcome == Outcome::UpToDate && a.rows == 0),
        "{}",
        again.to_json()
    );
    assert_eq!(batch_keys(store.as_ref()).await, referenced);
    assert_eq!(
        checkpoint_keys(store.as_ref()).await,
        anchored,
        "nothing new to anchor"
    );

    // New rows continue from the cursor.
    db.insert(&[
        row("a2", "b-new-1", cutoff - 5),
        row("a2", "b-new-2", cutoff - 4),
    ])
    .await;
    let more = archive(&env, &opts).await;
    let a2 = more.apps.iter().find(|a| a.app_code == "a2").unwrap();
    assert_eq!(
        (a2.outcome, a2.batches, a2.rows),
        (Outcome::Archived, 1, 2),
        "{}",
        more.to_json()
    );
    assert_eq!(
        archived_rows(&db, store.as_ref(), "a2").await,
        db.expected_rows("a2", cutoff).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_plans_and_writes_nothing() {
    let (db, _s3, store) = fixture().await;
    let cutoff = T0 + 3 * DAY;
    db.insert(&awkward_rows(cutoff)).await;
    let env = env(&db, store.clone(), cutoff);
    let mut opts = options(&db, &["a2"], cutoff);
    opts.dry_run = true;
    let planned = archive(&env, &opts).await;
    assert!(planned.ok);
    assert_eq!(planned.apps[0].rows, 40);
    assert_eq!(planned.apps[0].outcome, Outcome::Planned, "not archived");
    assert!(keys(store.as_ref()).await.is_empty());
    assert!(db.receipts("a2").await.is_empty());
    opts.dry_run = false;
    let real = archive(&env, &opts).await;
    let ids = |s: &outbox_archiver::Summary| {
        s.apps[0]
            .batch_list
            .iter()
            .map(|b| b.batch_id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(&planned),
        ids(&real),
        "the plan is what a real run does"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_stop_with_work_left_and_the_next_run_goes_on() {
    let (db, _s3, store) = fixture().await;
    let rows: Vec<Row> = (0..30)
        .map(|i| row("a1", &format!("e{i:02}"), T0 + i))
        .collect();
    db.insert(&rows).await;
    let env = env(&db, store.clone(), T0 + DAY);
    let mut opts = options(&db, &["a1"], T0 + DAY);
    opts.limits.max_rows = 10;
    opts.max_batches = Some(2);
    let first = archive(&env, &opts).await;
    assert_eq!(first.apps[0].outcome, Outcome::Stopped);
    assert_eq!(first.apps[0].rows, 20);
    assert!(first.ok, "a limit is not a failure");
    // The summary says what is left: rows e20..e29, the oldest of them delivered at T0 + 20.
    let left = serde_json::to_value(&first.apps[0]).unwrap();
    assert_eq!(left["backlog_rows"], 10);
    assert_eq!(left["oldest_backlog_age_ms"], DAY - 20);
    let second = archive(&env, &opts).await;
    assert_eq!(
        (second.apps[0].outcome, second.apps[0].rows),
        (Outcome::Archived, 10)
    );
    let left = serde_json::to_value(&second.apps[0]).unwrap();
    assert_eq!(
        (&left["backlog_rows"], &left["oldest_backlog_age_ms"]),
        (&serde_json::json!(0), &serde_json::Value::Null)
    );
    env.shutdown.cancel();
    let third = archive(&env, &opts).await;
    assert_eq!(
        third.apps[0].outcome,
        Outcome::UpToDate,
        "nothing left: caught up, not stopped"
    );
}
