//! What a server's own defaults change, run on both (the suite runs once per server): MySQL's
//! `JSON` is a binary type the server normalises — key order, duplicate keys, number text,
//! whitespace — so the archive holds what the server returns and a restore gives back a value
//! that reads back the same; MySQL's 256 KiB sort buffer cannot sort rows that carry a large
//! `JSON` value ("Out of sort memory", error 1038), so no query of a row's whole columns may
//! need a filesort.

use outbox_archiver::purge;
use outbox_archiver::Selection;
use outbox_archiver::Value;
use outbox_archiver::{restore, restore::RestoreOptions};

use crate::support::*;

/// Payload texts as an application may write them, and what MySQL stores for each (its
/// normal form: keys sorted by length then bytes, the last of duplicate keys, one space after
/// `:` and `,`, numbers re-printed).
const PAYLOADS: [(&str, &str, &str); 7] = [
    ("order", r#"{"b":1,"a":2}"#, r#"{"a": 2, "b": 1}"#),
    ("duplicate", r#"{"a":1,"a":2}"#, r#"{"a": 2}"#),
    (
        "spacing",
        r#"{ "x" : [ 1 , 2.50 , 1e2 , -0.0 ] }"#,
        r#"{"x": [1, 2.5, 100.0, -0.0]}"#,
    ),
    ("longer-key", r#"{"aaa":1,"b":2}"#, r#"{"b": 2, "aaa": 1}"#),
    (
        "escapes",
        r#"{"s":"\u00e9\n\"q\"","t":"é"}"#,
        r#"{"s": "é\n\"q\"", "t": "é"}"#,
    ),
    (
        "array",
        r#"[1,"two",null,true]"#,
        r#"[1, "two", null, true]"#,
    ),
    ("scalar", r#""just text""#, r#""just text""#),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_payloads_round_trip_as_the_server_stores_them() {
    let rows: Vec<_> = PAYLOADS
        .iter()
        .enumerate()
        .map(|(i, (id, text, _))| {
            let mut r = row("a1", id, T0 + i as i64);
            r[at("payload")] = Value::Text(text.to_string());
            r
        })
        .collect();
    let (db, _s3, store, env) = archived_env(&rows, &["a1"], 100).await;
    let stored = |db: &TestDb| {
        let pool = db.db.pool.clone();
        async move {
            let pairs: Vec<(String, String)> =
                sqlx::query_as("SELECT event_id, CAST(payload AS CHAR) FROM wallet_outbox")
                    .fetch_all(&pool)
                    .await
                    .unwrap();
            pairs
                .into_iter()
                .collect::<std::collections::HashMap<_, _>>()
        }
    };
    let before = stored(&db).await;
    let archived: std::collections::HashMap<String, String> =
        archived_rows(&db, store.as_ref(), "a1")
            .await
            .into_iter()
            .map(|r| match (&r[at("event_id")], &r[at("payload")]) {
                (Value::Text(id), Value::Text(payload)) => (id.clone(), payload.clone()),
                other => panic!("{other:?}"),
            })
            .collect();
    for (id, original, normal) in PAYLOADS {
        // payload_json is byte for byte what the server returns for the column.
        assert_eq!(archived[id], before[id], "{id}");
        match flavour() {
            // MariaDB's JSON is LONGTEXT with a validity check: the application's own text.
            Flavour::MariaDb => assert_eq!(archived[id], original, "{id}"),
            // MySQL's is binary: its normal form, not the application's text.
            Flavour::MySql => assert_eq!(archived[id], normal, "{id}"),
        }
    }

    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert_eq!(purge_of(&purged, "a1").purged_rows, PAYLOADS.len() as u64);
    let restored = restore::run(
        &env,
        &RestoreOptions {
            into_source: true,
            selection: Selection::of_apps(&["a1"]),
            lock_prefix: db.lock_prefix(),
            ..Default::default()
        },
    )
    .await;
    assert!(restored.ok, "{}", restored.to_json());
    assert!(
        restore_of(&restored, "a1").conflicts.is_empty(),
        "the server stores the archived text as it read it: {}",
        restored.to_json()
    );
    // What the server returns after the restore is what it returned before, byte for byte.
    assert_eq!(stored(&db).await, before);
    if flavour() == Flavour::MySql {
        // And as JSON each value equals what the application wrote.
        for (id, original, _) in PAYLOADS {
            let equal: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM wallet_outbox WHERE event_id = ? AND payload = CAST(? AS JSON)",
            )
            .bind(id)
            .bind(original)
            .fetch_one(&db.db.pool)
            .await
            .unwrap();
            assert_eq!(equal, 1, "{id}");
        }
    }
}

/// A row with a 1 MiB JSON payload on every path that reads whole rows in cursor order: the
/// ordinary pages, a straggler batch (rows read by key), purge, restore into a table and a
/// drill. On MySQL any of them that needed a filesort would fail with error 1038 under the
/// default sort buffer (the shared test server runs with MySQL's defaults).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_with_large_json_payloads_are_archived_and_restored_without_a_sort() {
    let big = |app: &str, id: &str, at_ms: i64, fill: char| {
        let mut r = row(app, id, at_ms);
        r[at("payload")] = Value::Text(format!(
            r#"{{"blob": "{}"}}"#,
            fill.to_string().repeat(1 << 20)
        ));
        r
    };
    // A thousand ordinary rows around them: on a table of a few rows MySQL reads stragglers by
    // the retention index (already in order); on a real one by primary key, then sorts.
    let mut rows: Vec<_> = (0..1_000)
        .map(|i| row("a1", &format!("small-{i:04}"), T0 + 10 + i))
        .collect();
    rows.extend([
        big("a1", "e0", T0, 'x'),
        row("a1", "e1", T0 + 1),
        big("a1", "e2", T0 + 2, 'y'),
        row("a1", "e3", T0 + 3),
    ]);
    let (db, _s3, _store, env) = archived_env(&rows, &["a1"], 500).await;
    db.exec("ANALYZE TABLE wallet_outbox").await;
    if flavour() == Flavour::MySql {
        let sort_buffer: u64 = sqlx::query_scalar("SELECT CAST(@@sort_buffer_size AS UNSIGNED)")
            .fetch_one(&db.db.pool)
            .await
            .unwrap();
        assert_eq!(sort_buffer, 256 * 1024, "MySQL's default sort buffer");
    }
    // Stragglers below the cursor, large and small, read back by key.
    db.insert(&[
        big("a1", "late-0", T0 + 1, 'z'),
        row("a1", "late-1", T0 + 2),
        big("a1", "late-2", T0 + 2, 'w'),
    ])
    .await;
    let mut opts = options(&db, &["a1"], ARCHIVED_CUTOFF);
    opts.stragglers = true;
    let stragglers = archive(&env, &opts).await;
    assert!(stragglers.ok, "{}", stragglers.to_json());
    assert_eq!(stragglers.apps[0].rows, 3, "{}", stragglers.to_json());
    let originals = table_rows(&db, "wallet_outbox", "a1").await;
    assert_eq!(originals.len(), 1_007);

    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert_eq!(
        purge_of(&purged, "a1").purged_rows,
        1_007,
        "{}",
        purged.to_json()
    );
    let restored = restore::run(&env, &RestoreOptions::default()).await;
    assert!(restored.ok, "{}", restored.to_json());
    assert_eq!(restore_of(&restored, "a1").restored_rows, 1_007);
    assert!(table_rows(&db, "wallet_outbox_restored", "a1").await == originals);
    let drilled = restore::run(
        &env,
        &RestoreOptions {
            drill: true,
            ..Default::default()
        },
    )
    .await;
    assert!(drilled.ok, "{}", drilled.to_json());
}
