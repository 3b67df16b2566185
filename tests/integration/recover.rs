//! A database restored from a backup (SPEC §5.19; issue 58): every table copied, more archive and
//! purge runs, the copy put back — the store then holds batches (and log leaves) the database no
//! longer knows, and the source holds again the rows purged since. Through the binary: archive
//! and purge notice the database is behind the store and do nothing (on today's main archive
//! recorded batches of rows the store already held, a second time); `recover` — killed at each of
//! its named points, then run again — records every lost batch from the store's bytes; afterwards
//! archive, purge and verify exit 0, no event is in two batches, no row is lost, and the store
//! holds one data object per receipt.

use crate::support::*;

const HOUR: i64 = 3_600_000;
const APPS: [&str; 3] = ["a1", "a2", "a3"];

/// The stored columns of `table` (generated ones are the server's to compute).
async fn stored_columns(db: &TestDb, table: &str) -> String {
    let columns: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(column_name AS CHAR) FROM information_schema.columns \
         WHERE table_schema = DATABASE() AND table_name = ? AND extra NOT LIKE '%GENERATED%' \
         ORDER BY ordinal_position",
    )
    .bind(table)
    .fetch_all(&db.db.pool)
    .await
    .unwrap();
    columns.join(", ")
}

/// Every table of the database, as a backup would hold it.
async fn tables(db: &TestDb) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
         WHERE table_schema = DATABASE() AND table_name NOT LIKE 'bak\\_%' ORDER BY table_name",
    )
    .fetch_all(&db.db.pool)
    .await
    .unwrap()
}

/// Last night's backup: a copy of every table, `bak_{table}`.
async fn back_up(db: &TestDb) {
    for table in tables(db).await {
        let columns = stored_columns(db, &table).await;
        db.exec(&format!("CREATE TABLE bak_{table} LIKE {table}"))
            .await;
        db.exec(&format!(
            "INSERT INTO bak_{table} ({columns}) SELECT {columns} FROM {table}"
        ))
        .await;
    }
}

/// The database restored from that backup: every table as the copy holds it.
async fn restore_backup(db: &TestDb) {
    for table in tables(db).await {
        let columns = stored_columns(db, &table).await;
        db.exec(&format!("DELETE FROM {table}")).await;
        db.exec(&format!(
            "INSERT INTO {table} ({columns}) SELECT {columns} FROM bak_{table}"
        ))
        .await;
    }
}

async fn count(db: &TestDb, sql: &str) -> i64 {
    db.count(sql).await
}

fn sum(run: &Run, field: &str) -> u64 {
    run.summary["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a[field].as_u64().unwrap_or(0))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restored_from_a_backup_is_carried_on_from_the_store() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let envs = cli_envs(&db, &s3);
    for app in APPS {
        db.insert(&spaced_rows(app, 90, HOUR)).await;
    }
    let total = count(&db, "SELECT COUNT(*) FROM wallet_outbox").await;
    let (night, now) = ((T0 + 2 * DAY).to_string(), (T0 + 4 * DAY).to_string());
    let archive = |cutoff: &str| {
        [
            "archive",
            "--all-apps",
            "--batch-rows",
            "10",
            "--cutoff",
            cutoff,
        ]
        .map(str::to_string)
    };
    let purge = ["purge", "--all-apps", "--grace", "0s"];
    let run = |args: Vec<String>| {
        let envs = envs.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run_cli(&args, &envs).await
        }
    };

    // Up to last night: archived and purged; then the backup.
    let ran = run(archive(&night).to_vec()).await;
    assert_eq!(ran.code, 0, "{}", ran.all_output);
    let ran = run_cli(&purge, &envs).await;
    assert_eq!(ran.code, 0, "{}", ran.all_output);
    back_up(&db).await;
    let receipts_at_backup =
        count(&db, "SELECT COUNT(*) FROM wallet_outbox_archive_receipts").await;
    let source_at_backup = count(&db, "SELECT COUNT(*) FROM wallet_outbox").await;

    // Today: more archived and purged — then the database is restored from last night's backup.
    let ran = run(archive(&now).to_vec()).await;
    assert_eq!(ran.code, 0, "{}", ran.all_output);
    let since = sum(&ran, "batches");
    assert!(since >= 15, "{}", ran.summary);
    let ran = run_cli(&purge, &envs).await;
    assert_eq!(ran.code, 0, "{}", ran.all_output);
    let store = s3.store().await;
    let data_objects = || async {
        batch_keys(store.as_ref())
            .await
            .into_iter()
            .filter(|k| k.ends_with("data.ndjson.gz"))
            .count() as i64
    };
    let objects = data_objects().await;
    restore_backup(&db).await;
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM wallet_outbox").await,
        source_at_backup
    );

    // Archive and purge see the database behind the store, and do nothing. (`purge --all-apps`
    // works the apps with receipts left to purge — none here, every receipt the backup holds is
    // purged — so it has nothing to do, and does nothing; an app it would work is refused.)
    let ran = run_cli(&purge, &envs).await;
    assert_eq!(ran.code, 0, "{}", ran.all_output);
    let purge_apps: Vec<String> = ["purge", "--grace", "0s"]
        .into_iter()
        .chain(APPS.iter().flat_map(|a| ["--app", a]))
        .map(str::to_string)
        .collect();
    // (Batches of 7: cut otherwise than the lost ones of 10, as rows delivered since or another
    // setting would cut them — the same rows in other batches, other objects.)
    let mut other_cut = archive(&now).to_vec();
    other_cut[3] = "7".into();
    for args in [other_cut, purge_apps] {
        let ran = run(args.clone()).await;
        assert_eq!(ran.code, 1, "{args:?}: {}", ran.all_output);
        for app in ran.summary["apps"].as_array().unwrap() {
            let error = app["error"].as_str().unwrap_or_default();
            assert!(
                error.contains("the database is behind the store")
                    && error.contains(&format!(
                        "run `outbox-archiver recover --app {} --reason TEXT`",
                        app["app_code"].as_str().unwrap()
                    )),
                "{args:?}: {app}"
            );
            assert!(!error.contains("log_rollback"), "{app}");
        }
    }
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM wallet_outbox_archive_receipts").await,
        receipts_at_backup,
        "nothing archived a second time"
    );
    assert_eq!(data_objects().await, objects, "no second object");
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM wallet_outbox").await,
        source_at_backup
    );

    // recover, killed at each of its named points, then run to its end.
    let reason = "restored from last night's backup, INC-7";
    let recover = ["recover", "--all-apps", "--reason", reason];
    for point in outbox_archiver::testing::RECOVER_FAIL_POINTS {
        let mut killed = envs.clone();
        killed.push(("OUTBOX_ARCHIVER_FAILPOINT", point.to_string()));
        let out = run_cli_output(&recover, &killed).await;
        assert!(!out.status.success(), "{point}: {out:?}");
    }
    let ran = run_cli(&recover, &envs).await;
    assert_eq!(ran.code, 0, "{}", ran.all_output);
    assert_eq!(
        sum(&ran, "recovered_batches") + sum(&ran, "taken_leaves"),
        since - 2,
        "the two batches the killed runs recorded are taken, the rest recovered: {}",
        ran.summary
    );
    for app in ran.summary["apps"].as_array().unwrap() {
        assert_eq!(app["outcome"], "done", "{app}");
        let record = app["recovery_record"].as_str().unwrap_or_default();
        if app["recovered_batches"].as_u64() > Some(0) {
            assert!(record.contains("/recoveries/"), "{app}");
            let bytes = read(store.as_ref(), record).await;
            assert!(String::from_utf8(bytes).unwrap().contains(reason));
        }
    }
    // A second run finds nothing to do.
    let ran = run_cli(&recover, &envs).await;
    assert_eq!(ran.code, 0, "{}", ran.all_output);
    assert_eq!(sum(&ran, "recovered_batches"), 0, "{}", ran.summary);

    // The archive goes on: nothing to cut again, the rows that came back purged, all verified.
    let ran = run(archive(&now).to_vec()).await;
    assert_eq!(ran.code, 0, "{}", ran.all_output);
    assert_eq!(sum(&ran, "batches"), 0, "{}", ran.summary);
    let ran = run_cli(&purge, &envs).await;
    assert_eq!(ran.code, 0, "{}", ran.all_output);
    let ran = run_cli(&["verify", "--all-apps", "--cutoff", &now], &envs).await;
    assert_eq!(ran.code, 0, "{}", ran.all_output);

    // No event in two batches, none lost, one object a receipt.
    assert_eq!(count(&db, "SELECT COUNT(*) FROM wallet_outbox").await, 0);
    let archived = count(
        &db,
        "SELECT CAST(SUM(row_count) AS SIGNED) FROM wallet_outbox_archive_receipts",
    )
    .await;
    assert_eq!(archived, total, "every row in exactly one batch");
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(DISTINCT app_code, event_id) FROM wallet_outbox_archive_members"
        )
        .await,
        total
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM wallet_outbox_archive_receipts").await,
        data_objects().await
    );
    for app in APPS {
        let rows = archived_rows(&db, store.as_ref(), app).await;
        assert_eq!(rows.len(), 90, "{app}");
    }
    let ran = run_cli(&["history", "--command", "recover"], &envs).await;
    assert_eq!(ran.code, 0, "{}", ran.all_output);
}
