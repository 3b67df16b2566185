//! A routine schema change of the source strands no archived row (SPEC §5.14, issues 34 and 42),
//! through the binary: a column added with a default to a profile's table and to a built-in
//! table. Rows archived after the change hold the column (the archive holds the whole row); a
//! batch written before it lacks the column, and purge records with the batch what its deleted
//! rows held there — one value per batch, compared byte for byte — deleting only the rows that
//! hold it; a row holding anything else is kept and said. Restore writes the recorded value back.
//! verify, find and restore follow; a widened column changes nothing.

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

    // Purge: every archived row goes but the two whose region is not what the other rows of
    // their batch held ('eu', recorded with the batch); they are kept and the summary says which
    // column kept them.
    let run = run_cli(&["purge", "--all-apps", "--grace", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let details = purge_app(&run);
    assert_eq!(details["purged_rows"], 30, "{}", run.summary);
    assert_eq!(details["kept_changed"], serde_json::json!(["m03", "m11"]));
    assert_eq!(
        details["kept_for_columns"],
        serde_json::json!([
            "region (holds other than the batch's deleted rows held, which restore writes back)"
        ]),
        "{}",
        run.summary
    );
    assert_eq!(
        ids(
            &db,
            "SELECT message_id FROM ledger_outbox ORDER BY message_id"
        )
        .await,
        ["m03", "m11"]
    );

    // Restored: the rows come back, each column as it was — the value recorded with the batch
    // where the line lacks the column, the archived value where it holds it; the kept rows are
    // there as they are.
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
    let mut envs = s3.binary_env();
    envs.push(("DATABASE_URL", db.url.clone()));
    envs.push(("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()));
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

    // Purge deletes every archived row but e7, which it keeps, saying why: its batch's other
    // rows held 'eu' when they were deleted, which is recorded with the batch.
    let run = run_cli(&["purge", "--app", "a1", "--grace", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let details = purge_app(&run);
    assert_eq!(details["purged_rows"], 31, "{}", run.summary);
    assert_eq!(details["kept_changed"], serde_json::json!(["e7"]));
    assert_eq!(
        details["kept_for_columns"],
        serde_json::json!([
            "region (holds other than the batch's deleted rows held, which restore writes back)"
        ])
    );
    let run = run_cli(&["restore", "--app", "a1", "--into-source"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        ids(&db, "SELECT CONCAT(event_id, '=', region) FROM wallet_outbox WHERE event_id IN ('e6', 'e7', 'late2') ORDER BY event_id").await,
        ["e6=eu", "e7=us", "late2=apac"]
    );

    // A column with no default (NOT NULL: the ALTER filled in 0) needs none: what the rows hold
    // is recorded with each batch as its rows are deleted, and written back on restore.
    db.exec("ALTER TABLE wallet_outbox ADD COLUMN flag INT NOT NULL")
        .await;
    db.exec("ALTER TABLE wallet_outbox ALTER COLUMN region SET DEFAULT 'sg'")
        .await;
    let run = run_cli(
        &[
            "purge",
            "--app",
            "a1",
            "--grace",
            "0s",
            "--include-restored",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let details = purge_app(&run);
    assert_eq!(details["purged_rows"], 31, "{}", run.summary);
    assert_eq!(details["kept_changed"], serde_json::json!(["e7"]));
    let run = run_cli(&["restore", "--app", "a1", "--into-source"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        ids(&db, "SELECT CONCAT(event_id, '=', region, '/', flag) FROM wallet_outbox WHERE event_id IN ('e6', 'e7', 'late2') ORDER BY event_id").await,
        ["e6=eu/0", "e7=us/0", "late2=apac/0"]
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 32);
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
