//! A routine schema change of the source strands no archived row (SPEC §5.14, issues 34 and 42),
//! through the binary: a column added with a default to a profile's table and to a built-in
//! table. Rows archived after the change hold the column (the archive holds the whole row); a
//! batch written before it lacks the column, so purge deletes none of its rows on its word: each
//! is kept and marked, the next archive run archives it again as it is now, and purge deletes it
//! by the new batch — the store holds every value a deleted row held, and restore brings each
//! back as it was whatever the default has become. verify, find and status follow; a widened
//! column changes nothing.

use outbox_archiver::Value;
use sqlx::AssertSqlSafe;

use crate::support::*;
use crate::tables::{ledger_db, ledger_env, ledger_row, LEDGER_PROFILE};

const CUTOFF: &str = "2026-01-04T00:00:00Z";

/// The ids of an app's rows in `table` (by `id`, `tenant` or `app_code` as the table calls them).
async fn ids(db: &TestDb, sql: &str) -> Vec<String> {
    sqlx::query_scalar(AssertSqlSafe(sql.to_string()))
        .fetch_all(&db.db.pool)
        .await
        .unwrap()
}

fn purge_app(run: &Run) -> &serde_json::Value {
    &run.summary["apps"][0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_added_to_a_profiles_table_strands_no_archived_row() {
    let mut db = ledger_db().await;
    let s3 = TestS3::new().await;
    let envs = ledger_env(&db, &s3, LEDGER_PROFILE);
    let run = run_cli(&["migrate"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let profile = outbox_archiver::Profile::load(LEDGER_PROFILE.as_ref()).unwrap();
    db.spec = db.db.resolve_profile(&profile).await.unwrap();
    db.delivered_status = "SENT";
    let rows: Vec<_> = (0..30)
        .map(|i| {
            ledger_row(
                "l1",
                &format!("m{i:02}"),
                &format!("{i}.0000"),
                None,
                None,
                None,
                "memo",
                T0 + i,
            )
        })
        .collect();
    db.insert(&rows).await;
    let archive = [
        "archive",
        "--all-apps",
        "--batch-rows",
        "7",
        "--cutoff",
        CUTOFF,
    ];
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert!(run.summary["apps"][0]["batches"].as_u64().unwrap() >= 4);

    // The service adds a column with a default (every row gets it), widens one, and writes the
    // new column on two archived rows: one a value of its own, one the default in another case.
    db.exec("ALTER TABLE ledger_outbox ADD COLUMN region VARCHAR(8) NULL DEFAULT 'eu' AFTER memo")
        .await;
    db.exec("ALTER TABLE ledger_outbox MODIFY state VARCHAR(32) NOT NULL")
        .await;
    db.exec("UPDATE ledger_outbox SET region = 'us' WHERE message_id = 'm03'")
        .await;
    db.exec("UPDATE ledger_outbox SET region = 'EU' WHERE message_id = 'm11'")
        .await;
    // New rows after the change: archived with the column, one batch of their own.
    db.exec(&format!(
        "INSERT INTO ledger_outbox (tenant, message_id, amount, booked_at, memo, region, sequence_no, ledger_counter, state, created_ms, changed_ms) \
         VALUES ('l1', 'n1', 1, '2026-01-03 00:00:00', '', 'apac', 1, 1, 'SENT', {t}, {t}), \
                ('l1', 'n2', 2, '2026-01-03 00:00:00', '', 'eu', 1, 1, 'SENT', {u}, {u})",
        t = T0 + 2 * DAY,
        u = T0 + 2 * DAY + 1
    ))
    .await;

    // The batches written before the column still verify, and find reads their lines.
    let run = run_cli(&["verify", "--all-apps", "--cutoff", CUTOFF], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&["find", "--event-id", "m05"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert!(
        run.summary["found"][0]["row"]["region"].is_null(),
        "{}",
        run.summary
    );
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);

    // Purge: the rows archived before the column are not deleted on their batches' word (none
    // of those lines holds region): every one is kept, marked, and said; n1 and n2, archived
    // with the column, go.
    let run = run_cli(&["purge", "--all-apps", "--grace", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let details = purge_app(&run);
    assert_eq!(details["purged_rows"], 2, "{}", run.summary);
    assert_eq!(
        details["kept_changed"].as_array().map(Vec::len),
        Some(30),
        "{}",
        run.summary
    );
    assert_eq!(
        details["kept_for_columns"],
        serde_json::json!([
            "region (added after the batch was archived: the row is archived again as it is now, then purged)"
        ]),
        "{}",
        run.summary
    );
    let run = run_cli(&["status", "--all-apps"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(run.summary["apps"][0]["kept_rows"], 30, "{}", run.summary);
    assert_eq!(
        run.summary["apps"][0]["kept_by_reason"],
        serde_json::json!({"added: region": 30}),
        "{}",
        run.summary
    );
    // The next archive run archives them again as they are now; purge deletes them.
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        run.summary["apps"][0]["kept_rows_archived_again"], 30,
        "{}",
        run.summary
    );
    let run = run_cli(&["purge", "--all-apps", "--grace", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(purge_app(&run)["purged_rows"], 30, "{}", run.summary);
    assert_eq!(db.count("SELECT COUNT(*) FROM ledger_outbox").await, 0);
    let run = run_cli(&["verify", "--all-apps", "--cutoff", CUTOFF], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&["status", "--all-apps"], &envs).await;
    assert_eq!(run.summary["apps"][0]["kept_rows"], 0, "{}", run.summary);
    // The default changes: the archive, not the table, says what the rows held.
    db.exec("ALTER TABLE ledger_outbox ALTER COLUMN region SET DEFAULT 'apac'")
        .await;

    // Restored: the rows come back, each column as it was — from the batches that archived them
    // again with the column (the older versions they superseded are left out).
    let run = run_cli(&["restore", "--all-apps", "--into-source"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let regions: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT message_id, region FROM ledger_outbox WHERE message_id IN ('m00', 'm03', 'm11', 'n1', 'n2') ORDER BY message_id",
    )
    .fetch_all(&db.db.pool)
    .await
    .unwrap();
    let region = |s: &str| Some(s.to_string());
    assert_eq!(
        regions,
        [
            ("m00".to_string(), region("eu")),
            ("m03".to_string(), region("us")),
            ("m11".to_string(), region("EU")),
            ("n1".to_string(), region("apac")),
            ("n2".to_string(), region("eu")),
        ]
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM ledger_outbox").await, 32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_added_to_a_built_in_table_is_archived_and_restored_as_it_was() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let envs = cli_envs(&db, &s3);
    db.insert(&rows("a1", 30)).await;
    let archive = [
        "archive",
        "--app",
        "a1",
        "--batch-rows",
        "10",
        "--cutoff",
        CUTOFF,
    ];
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);

    // A column wallet_outbox's own format has no key for: every command still runs.
    db.exec("ALTER TABLE wallet_outbox ADD COLUMN region VARCHAR(8) NULL DEFAULT 'eu'")
        .await;
    db.exec("UPDATE wallet_outbox SET region = 'us' WHERE app_code = 'a1' AND event_id = 'e7'")
        .await;
    for command in [
        vec!["status", "--app", "a1"],
        vec!["verify", "--app", "a1", "--cutoff", CUTOFF],
        vec!["find", "--event-id", "e3"],
        vec!["restore", "--app", "a1", "--drill"],
    ] {
        let run = run_cli(&command, &envs).await;
        assert_eq!(run.code, 0, "{command:?}: {}", run.all_output);
    }
    // New rows are archived whole: the column after the table's own, whatever it holds.
    let mut late = row("a1", "late1", T0 + DAY);
    late[at("payload")] = Value::Text("{\"late\":1}".into());
    db.insert(&[late, row("a1", "late2", T0 + DAY + 1)]).await;
    db.exec("UPDATE wallet_outbox SET region = 'apac' WHERE event_id = 'late2'")
        .await;
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&["find", "--event-id", "late2"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        run.summary["found"][0]["row"]["region"], "apac",
        "{}",
        run.summary
    );
    let run = run_cli(&["schema"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    // The table's own keys are in every line; the added column is described, and lines
    // written before it was added lack it.
    assert_eq!(run.summary["required"].as_array().unwrap().len(), 18);
    assert_eq!(
        run.summary["properties"]["region"]["type"],
        serde_json::json!(["string", "null"]),
        "{}",
        run.summary
    );

    // Purge deletes late1 and late2, archived with the column, and keeps the 30 rows archived
    // before it — 'eu' or 'us', no object holds what they hold there — saying why; the next
    // archive run archives them again as they are now, and purge deletes them.
    let run = run_cli(&["purge", "--app", "a1", "--grace", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let details = purge_app(&run);
    assert_eq!(details["purged_rows"], 2, "{}", run.summary);
    assert_eq!(
        details["kept_changed"].as_array().map(Vec::len),
        Some(30),
        "{}",
        run.summary
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_added_values")
            .await,
        0,
        "nothing recorded in the database alone"
    );
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        run.summary["apps"][0]["kept_rows_archived_again"], 30,
        "{}",
        run.summary
    );
    let run = run_cli(&["purge", "--app", "a1", "--grace", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(purge_app(&run)["purged_rows"], 30, "{}", run.summary);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    let run = run_cli(&["find", "--event-id", "e7"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    // Both batches hold e7 at its version: the first without region, the one that archived it
    // again with it, which holds it now; the first says so.
    let found = run.summary["found"].as_array().unwrap();
    assert_eq!(found.len(), 2, "{}", run.summary);
    let current: Vec<&serde_json::Value> = found
        .iter()
        .filter(|f| f.get("superseded_by").is_none())
        .collect();
    assert_eq!(current.len(), 1, "{}", run.summary);
    assert_eq!(current[0]["row"]["region"], "us", "{}", run.summary);
    let older = found
        .iter()
        .find(|f| f.get("superseded_by").is_some())
        .unwrap();
    assert_eq!(
        older["superseded_by"], current[0]["batch_id"],
        "{}",
        run.summary
    );
    assert!(older["row"].get("region").is_none(), "{}", run.summary);

    // A rollout's later step changes the default: restore brings every row back as it was.
    db.exec("ALTER TABLE wallet_outbox ALTER COLUMN region SET DEFAULT 'apac'")
        .await;
    let run = run_cli(&["verify", "--app", "a1", "--cutoff", CUTOFF], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&["restore", "--app", "a1", "--into-source"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        ids(&db, "SELECT CONCAT(event_id, '=', region) FROM wallet_outbox WHERE event_id IN ('e6', 'e7', 'late2') ORDER BY event_id").await,
        ["e6=eu", "e7=us", "late2=apac"]
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox WHERE region = 'eu' AND event_id LIKE 'e%'")
            .await,
        29
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 32);
}

/// A column dropped after batches held it (issue 58) wedges nothing: archive records the drop
/// once, with a warning, and goes on; status, verify, find and purge read those batches by their
/// own columns (purge deletes a row whose every remaining column is what its batch holds — the
/// batch keeps the dropped column's values); a restore into the table without the column is
/// refused, naming it and its type, until `--without-column` says to leave it out — then every
/// row comes back equal in every column the table has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_dropped_after_batches_held_it_wedges_nothing() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let envs = cli_envs(&db, &s3);
    db.exec("ALTER TABLE wallet_outbox ADD COLUMN region VARCHAR(8) NULL DEFAULT 'eu'")
        .await;
    db.insert(&rows("a1", 20)).await;
    db.exec("UPDATE wallet_outbox SET region = 'us' WHERE event_id = 'e3'")
        .await;
    let archive = [
        "archive",
        "--app",
        "a1",
        "--batch-rows",
        "10",
        "--cutoff",
        CUTOFF,
    ];
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(run.summary["apps"][0]["batches"], 2, "{}", run.summary);

    db.exec("ALTER TABLE wallet_outbox DROP COLUMN region")
        .await;
    db.insert(&[row("a1", "late1", T0 + DAY)]).await;
    let whole = table_rows(&db, "wallet_outbox", "a1").await;
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert!(
        run.all_output
            .contains("column region was dropped from wallet_outbox"),
        "the drop is said: {}",
        run.all_output
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_columns WHERE column_name = 'region' AND dropped_at_ms IS NOT NULL").await,
        1,
        "and recorded"
    );
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert!(
        !run.all_output.contains("was dropped"),
        "said once: {}",
        run.all_output
    );
    for command in [
        vec!["status", "--app", "a1"],
        vec!["verify", "--app", "a1", "--cutoff", CUTOFF],
        vec!["purge", "--app", "a1", "--grace", "0s", "--dry-run"],
    ] {
        let run = run_cli(&command, &envs).await;
        assert_eq!(run.code, 0, "{command:?}: {}", run.all_output);
    }
    let run = run_cli(&["find", "--event-id", "e3"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        run.summary["found"][0]["row"]["region"], "us",
        "{}",
        run.summary
    );
    // doctor says so (its other checks are the S3 server's to pass).
    let run = run_cli(&["doctor"], &envs).await;
    let columns = run.summary["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "columns")
        .unwrap();
    assert_eq!(columns["status"], "ok", "{}", run.summary);
    assert!(
        columns["detail"]
            .as_str()
            .unwrap()
            .contains("dropped since earlier batches archived them: region"),
        "{}",
        run.summary
    );

    // Whatever the flags say, a batch that holds the dropped column is read in full: its member
    // rows' fingerprints are of lines with the column, which no row of the table can match.
    let run = run_cli(
        &[
            "purge",
            "--app",
            "a1",
            "--grace",
            "0s",
            "--dry-run",
            "--trust-receipts",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(purge_app(&run)["would_purge_rows"], 21, "{}", run.summary);
    let run = run_cli(&["purge", "--app", "a1", "--grace", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(purge_app(&run)["purged_rows"], 21, "{}", run.summary);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    let run = run_cli(&["verify", "--app", "a1", "--cutoff", CUTOFF], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);

    // Into a table without the column: refused, naming it, its type and the way out.
    for command in [
        vec!["restore", "--app", "a1", "--into-source"],
        vec!["restore", "--app", "a1", "--drill"],
    ] {
        let run = run_cli(&command, &envs).await;
        assert_eq!(run.code, 1, "{command:?}: {}", run.all_output);
        let error = run.summary["apps"][0]["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("holds column(s) region that")
                && error.contains("region varchar(8)")
                && error.contains("--without-column region"),
            "{command:?}: {}",
            run.summary
        );
    }
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox").await,
        1,
        "nothing of the batches that hold the column loaded (late1's, written after the drop, is)"
    );
    let run = run_cli(
        &[
            "restore",
            "--app",
            "a1",
            "--drill",
            "--without-column",
            "region",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(
        &[
            "restore",
            "--app",
            "a1",
            "--into-source",
            "--without-column",
            "region",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(table_rows(&db, "wallet_outbox", "a1").await, whole);
}

/// FLOAT and DOUBLE values as the server holds them, by event id: their bits (issue 58).
async fn float_bits(db: &TestDb) -> Vec<(String, Option<u64>, Option<u32>)> {
    let rows: Vec<(String, Option<f64>, Option<f32>)> =
        sqlx::query_as("SELECT event_id, rate, ratio FROM wallet_outbox ORDER BY event_id")
            .fetch_all(&db.db.pool)
            .await
            .unwrap();
    rows.into_iter()
        .map(|(id, rate, ratio)| (id, rate.map(f64::to_bits), ratio.map(f32::to_bits)))
        .collect()
}

/// A FLOAT and a DOUBLE column added to a built-in table (issue 58: every command exited 2,
/// doctor said `tables ok`): every command runs; each value is archived as the shortest decimal
/// that reads back to its bits, verified, purged and restored bit for bit — the edges included
/// (a negative zero, the smallest subnormal, the largest finite value, 2^24 in a FLOAT).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn float_and_double_columns_are_archived_and_restored_bit_for_bit() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let envs = cli_envs(&db, &s3);
    db.exec("ALTER TABLE wallet_outbox ADD COLUMN rate DOUBLE NULL, ADD COLUMN ratio FLOAT NULL")
        .await;
    db.insert(&rows("a1", 10)).await;
    let doubles: [Option<f64>; 10] = [
        Some(0.1),
        Some(-0.0),
        Some(5e-324),
        Some(f64::MAX),
        Some(1e21),
        Some(123_456.789),
        Some(-2.5e-10),
        Some(0.30000000000000004),
        Some(1.0),
        None,
    ];
    let floats: [Option<f32>; 10] = [
        Some(0.1),
        Some(16_777_216.0),
        Some(f32::MAX),
        Some(1e-7),
        Some(-0.0),
        Some(f32::from_bits(1)),
        Some(-3.5),
        None,
        Some(2.0),
        Some(0.333_333_34),
    ];
    for (i, (rate, ratio)) in doubles.iter().zip(&floats).enumerate() {
        sqlx::query("UPDATE wallet_outbox SET rate = ?, ratio = ? WHERE event_id = ?")
            .bind(rate)
            .bind(ratio)
            .bind(format!("e{i}"))
            .execute(&db.db.pool)
            .await
            .unwrap();
    }
    let held = float_bits(&db).await;

    for command in [
        vec!["status", "--app", "a1"],
        vec!["history"],
        vec!["find", "--event-id", "e3"],
    ] {
        let run = run_cli(&command, &envs).await;
        assert_eq!(
            run.code,
            if command[0] == "find" { 1 } else { 0 },
            "{command:?}: {}",
            run.all_output
        );
    }
    let run = run_cli(&["doctor"], &envs).await;
    let tables = run.summary["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "tables")
        .cloned()
        .unwrap();
    assert_eq!(tables["status"], "ok", "{}", run.summary);
    let columns = run.summary["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "columns")
        .cloned()
        .unwrap();
    assert_eq!(columns["status"], "ok", "{}", run.summary);
    assert!(
        columns["detail"]
            .as_str()
            .unwrap()
            .contains("rate (double, archived as double), ratio (float, archived as float)"),
        "{columns}"
    );

    let run = run_cli(
        &[
            "archive",
            "--app",
            "a1",
            "--batch-rows",
            "4",
            "--cutoff",
            CUTOFF,
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&["verify", "--app", "a1", "--cutoff", CUTOFF], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&["find", "--event-id", "e3"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);

    // Each line holds the shortest decimal of the value's bits, as a JSON number.
    let store = s3.store().await;
    let mut lines = String::new();
    for key in batch_keys(store.as_ref()).await {
        if key.ends_with("data.ndjson.gz") {
            lines.push_str(&String::from_utf8(ndjson_of(store.as_ref(), &key).await).unwrap());
        }
    }
    for (id, rate, ratio) in &held {
        let rate = rate.map_or("null".to_string(), |b| {
            ryu::Buffer::new().format(f64::from_bits(b)).to_string()
        });
        let ratio = ratio.map_or("null".to_string(), |b| {
            ryu::Buffer::new().format(f32::from_bits(b)).to_string()
        });
        let line = lines
            .lines()
            .find(|l| l.contains(&format!("\"event_id\":\"{id}\"")))
            .unwrap();
        assert!(
            line.ends_with(&format!(",\"rate\":{rate},\"ratio\":{ratio}}}")),
            "{line}"
        );
    }
    // (MariaDB keeps no negative zero in a DOUBLE column, MySQL does: what it holds is archived.)
    assert!(
        lines.contains("\"rate\":1.7976931348623157e308,")
            && lines.contains("\"ratio\":3.4028235e38}"),
        "{lines}"
    );

    let run = run_cli(&["purge", "--app", "a1", "--grace", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(purge_app(&run)["purged_rows"], 10, "{}", run.summary);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    let run = run_cli(&["restore", "--app", "a1", "--into-source"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(float_bits(&db).await, held, "every value back, bit for bit");
}

/// A column no command can archive exactly (a BIT): doctor names it — every one — where it said
/// `tables ok` while every command refused to start (issue 58).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_every_column_a_command_would_refuse() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let envs = cli_envs(&db, &s3);
    db.exec("ALTER TABLE wallet_outbox ADD COLUMN flags BIT(8) NULL, ADD COLUMN opens TIME NULL")
        .await;
    let run = run_cli(&["status"], &envs).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let run = run_cli(&["doctor"], &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    let columns = run.summary["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "columns")
        .cloned()
        .unwrap();
    assert_eq!(columns["status"], "problem", "{columns}");
    let detail = columns["detail"].as_str().unwrap();
    assert!(
        detail.contains("column flags is bit(8)") && detail.contains("column opens is time"),
        "{detail}"
    );
}
