//! The members table clustered by batch (migration 9, issue 26): an archive an older build wrote
//! is carried over by `migrate`, member row for member row, and every command goes on from it;
//! a profile's owned tables of the older layout are brought over the same way; and a table left
//! in the older layout is refused at start-up with the command that fixes it.

use outbox_archiver::create_owned_tables;
use outbox_archiver::format::Key;
use outbox_archiver::purge;
use outbox_archiver::{verify, verify::VerifyOptions};
use outbox_archiver::{ROOM_OUTBOX, WALLET_OUTBOX};
use sqlx::AssertSqlSafe;

use crate::support::*;

/// Applies the first `n` of `migrations/` (an older build's database), as `migrate` would.
async fn first_migrations(db: &TestDb, n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut files: Vec<_> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();
    for file in &files[..n] {
        std::fs::copy(file, dir.path().join(file.file_name().unwrap())).unwrap();
    }
    sqlx::migrate::Migrator::new(dir.path())
        .await
        .unwrap()
        .run(&db.db.pool)
        .await
        .unwrap();
}

/// Every member row of `db`: (app, event id, version, batch, fingerprint), in one order.
async fn member_rows(db: &TestDb) -> Vec<(String, String, i64, String, Option<Vec<u8>>)> {
    sqlx::query_as(
        "SELECT app_code, event_id, updated_at_ms, batch_id, row_sha256 \
         FROM wallet_outbox_archive_members ORDER BY app_code, event_id",
    )
    .fetch_all(&db.db.pool)
    .await
    .unwrap()
}

/// The columns of the members table's primary key, in order.
async fn primary_key(db: &TestDb, table: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT CAST(column_name AS CHAR) FROM information_schema.statistics \
         WHERE table_schema = DATABASE() AND table_name = ? AND index_name = 'PRIMARY' ORDER BY seq_in_index",
    )
    .bind(table)
    .fetch_all(&db.db.pool)
    .await
    .unwrap()
}

const CUT1: i64 = T0 + 2 * DAY;
const CUT2: i64 = T0 + 4 * DAY;

/// Rows of three apps over four days (random-looking event ids, so member rows do not arrive
/// in event-id order), a few not delivered.
fn dataset() -> Vec<outbox_archiver::Row> {
    let mut rows = Vec::new();
    for app in ["a1", "a2", "a3"] {
        for i in 0..400i64 {
            let id = format!(
                "{app}-{:016x}",
                (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            );
            let mut r = row(app, &id, T0 + i * (4 * DAY / 400));
            if i % 37 == 0 {
                r[10] = outbox_archiver::Value::Text("PENDING".into());
            }
            rows.push(r);
        }
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_9_carries_an_older_builds_members_over_and_every_command_goes_on() {
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let rows = dataset();
    let apps = ["a1", "a2", "a3"];

    // The archive below CUT1 as it stands in the store, and its receipts and member rows as
    // today's code records them.
    let today = TestDb::new().await;
    today.insert(&rows).await;
    let mut opts = options(&today, &apps, CUT1);
    opts.limits.max_rows = 90;
    let archived = archive(&env(&today, store.clone(), CUT2 + DAY), &opts).await;
    assert!(archived.ok, "{}", archived.to_json());
    let before = member_rows(&today).await;
    assert!(before.len() > 500, "{}", before.len());

    // The same archive in a database an older build keeps: migrations 1-8, its member rows with
    // the receipt's manifest hash and verification time on each, keyed by event id — app a2's
    // under another spelling than its receipts' (an archiver from before apps had one spelling
    // took the one typed; the table's collation held them one app).
    let older = TestDb::empty(&server_url().await).await;
    first_migrations(&older, 8).await;
    outbox_archiver::create_source_table(&older.db.pool, &WALLET_OUTBOX)
        .await
        .unwrap();
    older.insert(&rows).await;
    // The receipts as that build recorded them: the columns its migrations made, no chain.
    let columns: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(column_name AS CHAR) FROM information_schema.columns \
         WHERE table_schema = DATABASE() AND table_name = 'wallet_outbox_archive_receipts' \
         ORDER BY ordinal_position",
    )
    .fetch_all(&older.db.pool)
    .await
    .unwrap();
    older
        .exec(&format!(
            "INSERT INTO wallet_outbox_archive_receipts ({columns}) SELECT {columns} FROM `{db}`.wallet_outbox_archive_receipts",
            columns = columns.join(", "),
            db = today.name
        ))
        .await;
    older
        .exec(&format!(
            "INSERT INTO wallet_outbox_archive_members \
             (app_code, event_id, updated_at_ms, batch_id, manifest_sha256, receipt_verified_at_ms, row_sha256) \
             SELECT IF(m.app_code = 'a2', 'A2', m.app_code), m.event_id, m.updated_at_ms, m.batch_id, r.manifest_sha256, r.verified_at_ms, m.row_sha256 \
             FROM `{db}`.wallet_outbox_archive_members m JOIN `{db}`.wallet_outbox_archive_receipts r \
             ON r.app_code = m.app_code AND r.batch_id = m.batch_id",
            db = today.name
        ))
        .await;
    assert_eq!(
        primary_key(&older, "wallet_outbox_archive_members").await,
        ["app_code", "event_id"]
    );
    // And the store as that build left it: no marker (the archive's home came with issue 33).
    let marker = outbox_archiver::format::home_marker_key(&outbox_archiver::format::table_prefix(
        store.location().prefix(),
        "wallet_outbox",
    ));
    store.delete(&marker).await.unwrap();
    let envs = vec![("DATABASE_URL", older.url.clone())];

    // Before migrate: every command refuses the database, naming the fix.
    let refused = run_cli(&["status", "--all-apps"], &envs).await;
    assert_eq!(refused.code, 2, "{}", refused.all_output);
    assert!(
        refused.all_output.contains("outbox-archiver migrate"),
        "{}",
        refused.all_output
    );

    // migrate applies migrations 9, 10 and those after, every member row is there as it was,
    // and every receipt is linked into its app's chain from the genesis (issue 27).
    let migrated = run_cli(&["migrate"], &envs).await;
    assert_eq!(migrated.code, 0, "{}", migrated.all_output);
    name_columns_as_written(&older, &today).await;
    let applied = migrated.summary["applied"].as_array().unwrap();
    assert_eq!(applied.len(), migrations() - 8, "{}", migrated.all_output);
    assert!(applied[0].as_str().unwrap().starts_with("20260101000009 "));
    assert!(applied[1].as_str().unwrap().starts_with("20260101000010 "));
    let receipts = older
        .count("SELECT COUNT(*) FROM wallet_outbox_archive_receipts")
        .await;
    assert_eq!(
        migrated.summary["receipts_numbered"], receipts,
        "{}",
        migrated.all_output
    );
    assert_eq!(
        older
            .count("SELECT COUNT(*) FROM wallet_outbox_archive_receipts WHERE chain_seq IS NULL")
            .await,
        0
    );
    assert_eq!(
        primary_key(&older, "wallet_outbox_archive_members").await,
        ["app_code", "batch_id", "updated_at_ms", "event_id"]
    );
    assert_eq!(
        member_rows(&older).await,
        before,
        "every member row, as it was"
    );
    let spellings: Vec<Vec<u8>> = sqlx::query_scalar(
        "SELECT DISTINCT CAST(app_code AS BINARY) FROM wallet_outbox_archive_members ORDER BY 1",
    )
    .fetch_all(&older.db.pool)
    .await
    .unwrap();
    assert_eq!(
        spellings,
        [b"a1".to_vec(), b"a2".to_vec(), b"a3".to_vec()],
        "a2's rows spelled as its receipts"
    );
    let collation: String = sqlx::query_scalar(
        "SELECT CAST(collation_name AS CHAR) FROM information_schema.columns \
         WHERE table_schema = DATABASE() AND table_name = 'wallet_outbox_archive_members' AND column_name = 'app_code'",
    )
    .fetch_one(&older.db.pool)
    .await
    .unwrap();
    assert_eq!(collation, "ascii_bin");

    // verify finds the archive whole; archive goes on from its cursor; verify, then purge of
    // exactly the archived rows.
    let env = env(&older, store.clone(), CUT2 + DAY);
    let verify_opts = VerifyOptions {
        parallel: 2,
        ..VerifyOptions::everything(CUT1, "DELIVERED")
    };
    let clean = verify::run(&env, &verify_opts).await;
    assert_eq!(clean.exit_code, 0, "{}", clean.to_json());
    let mut on = options(&older, &apps, CUT2);
    on.limits.max_rows = 90;
    let more = archive(&env, &on).await;
    assert!(more.ok, "{}", more.to_json());
    for app in apps {
        let r = report(&more, app);
        assert!(r.batches > 0, "{app}: {}", more.to_json());
        let last_before = before
            .iter()
            .filter(|m| m.0 == app)
            .map(|m| m.2)
            .max()
            .unwrap();
        assert!(
            r.cursor_before.as_ref().unwrap().updated_at_ms == last_before,
            "{app} resumed from the carried-over cursor"
        );
    }
    let archived_rows = older
        .count("SELECT COUNT(*) FROM wallet_outbox WHERE status = 'DELIVERED' AND updated_at_ms < 1767571200000")
        .await;
    assert_eq!(member_rows(&older).await.len() as i64, archived_rows);
    let whole = verify::run(
        &env,
        &VerifyOptions {
            cutoff_ms: CUT2,
            ..verify_opts.clone()
        },
    )
    .await;
    assert_eq!(whole.exit_code, 0, "{}", whole.to_json());
    let purged = purge::run(&env, &purge_options(&older, &apps)).await;
    assert!(purged.ok, "{}", purged.to_json());
    let gone: u64 = apps.iter().map(|a| purge_of(&purged, a).purged_rows).sum();
    assert_eq!(gone as i64, archived_rows);
    assert_eq!(
        older.count("SELECT COUNT(*) FROM wallet_outbox").await,
        rows.len() as i64 - archived_rows,
        "exactly the archived rows went"
    );
}

/// A profile's owned tables (room_outbox's come from its spec) made by an older build: the
/// start-up check refuses them naming `migrate`; `migrate` brings the members table over online,
/// keeping its rows; the check passes; a second `migrate` changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profiles_older_members_table_is_brought_over_by_migrate() {
    let db = TestDb::for_table(&ROOM_OUTBOX).await;
    let members = ROOM_OUTBOX.members_table();
    let prefix = ROOM_OUTBOX.owned_prefix;
    db.exec(&format!("DROP TABLE {members}")).await;
    db.exec(&format!(
        "CREATE TABLE {members} (
            app_code VARCHAR(32) NOT NULL,
            event_id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            updated_at_ms BIGINT NOT NULL,
            batch_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            manifest_sha256 CHAR(64) CHARACTER SET ascii NOT NULL,
            receipt_verified_at_ms BIGINT NOT NULL,
            row_sha256 BINARY(16) NULL,
            PRIMARY KEY (app_code, event_id),
            KEY idx_{prefix}_members_batch_version (app_code, batch_id, updated_at_ms)
        ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci"
    ))
    .await;
    db.exec(&format!(
        "INSERT INTO {members} VALUES ('r1', 'e2', 5, '{b}', '{m}', 9, NULL), ('r1', 'e1', 7, '{b}', '{m}', 9, NULL)",
        b = "b".repeat(32),
        m = "0".repeat(64)
    ))
    .await;
    let refused = db.db.check_owned_tables(&ROOM_OUTBOX).await.unwrap_err();
    let said = refused.to_string();
    assert!(
        said.contains(&members) && said.contains("outbox-archiver migrate --table room_outbox"),
        "{said}"
    );
    create_owned_tables(&db.db.pool, &ROOM_OUTBOX)
        .await
        .unwrap();
    assert_eq!(
        primary_key(&db, &members).await,
        ["app_code", "batch_id", "updated_at_ms", "event_id"]
    );
    db.db.check_owned_tables(&ROOM_OUTBOX).await.unwrap();
    let kept: Vec<(String, i64)> = sqlx::query_as(AssertSqlSafe(format!(
        "SELECT event_id, updated_at_ms FROM {members} ORDER BY event_id"
    )))
    .fetch_all(&db.db.pool)
    .await
    .unwrap();
    assert_eq!(kept, [("e1".to_string(), 7), ("e2".to_string(), 5)]);
    // Another row for e1 in another batch: the unique key refuses it.
    let twice = sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO {members} (app_code, event_id, updated_at_ms, batch_id) VALUES ('r1', 'e1', 8, '{}')",
        "c".repeat(32)
    )))
    .execute(&db.db.pool)
    .await;
    assert!(twice.is_err(), "a row is a member of one batch at most");
    create_owned_tables(&db.db.pool, &ROOM_OUTBOX)
        .await
        .unwrap();
}

/// 200 rows of `app` spelled as given, over the two days from `from_ms` (batches never span a
/// UTC date), event ids `{tag}-…` in no particular order, every 37th not delivered.
fn rows_spelled(app: &str, tag: &str, from_ms: i64) -> Vec<outbox_archiver::Row> {
    (0..200i64)
        .map(|i| {
            let id = format!(
                "{tag}-{:016x}",
                (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            );
            let mut r = row(app, &id, from_ms + i * (2 * DAY / 200));
            if i % 37 == 0 {
                r[at("status")] = outbox_archiver::Value::Text("PENDING".into());
            }
            r
        })
        .collect()
}

/// The store as a build from before the home and the log left it: no marker, no log.
async fn without_marker_and_checkpoints(store: &dyn outbox_archiver::ObjectStore) {
    let marker = outbox_archiver::format::home_marker_key(&outbox_archiver::format::table_prefix(
        store.location().prefix(),
        "wallet_outbox",
    ));
    store.delete(&marker).await.unwrap();
    for key in keys(store).await.into_iter().filter(|k| is_log_key(k)) {
        store.delete(&Key::stored(key.clone())).await.unwrap();
    }
    assert!(checkpoint_keys(store).await.is_empty());
}

/// The distinct spellings (bytes) of app_code in `table` of `db`, in byte order.
async fn spellings_in(db: &TestDb, table: &str) -> Vec<Vec<u8>> {
    sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT DISTINCT CAST(app_code AS BINARY) FROM {table} ORDER BY 1"
    )))
    .fetch_all(&db.db.pool)
    .await
    .unwrap()
}

/// Copies `from`'s receipts (the `columns` an older build's migrations made) and member rows
/// (each under its own receipt's spelling, with the receipt's manifest hash and verification
/// time, as migrations 1-8 kept them) into `older`.
async fn copy_as_an_older_build_recorded(older: &TestDb, columns: &[String], from: &TestDb) {
    older
        .exec(&format!(
            "INSERT INTO wallet_outbox_archive_receipts ({columns}) SELECT {columns} FROM `{db}`.wallet_outbox_archive_receipts",
            columns = columns.join(", "),
            db = from.name
        ))
        .await;
    older
        .exec(&format!(
            "INSERT INTO wallet_outbox_archive_members \
             (app_code, event_id, updated_at_ms, batch_id, manifest_sha256, receipt_verified_at_ms, row_sha256) \
             SELECT m.app_code, m.event_id, m.updated_at_ms, m.batch_id, r.manifest_sha256, r.verified_at_ms, m.row_sha256 \
             FROM `{db}`.wallet_outbox_archive_members m JOIN `{db}`.wallet_outbox_archive_receipts r \
             ON r.app_code = m.app_code AND r.batch_id = m.batch_id",
            db = from.name
        ))
        .await;
}

/// An older build took the app code as typed after `--app`, and the receipts table's
/// case-insensitive collation held `A2` and `a2` one app: one archive, its receipts (and their
/// object keys and manifests) under two spellings. Migration 9 gives the member rows the app's
/// first spelling and makes them compare by bytes; the receipts keep their own. After
/// `migrate` nothing is damaged, and every command says so and goes on: verify (library and
/// binary) is clean, every restore drill is ok, and purge deletes exactly the archived rows —
/// every member row is found under the app's one spelling, whichever spelling its receipt has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_an_older_build_left_under_two_spellings_are_one_app_after_migrate() {
    use outbox_archiver::{restore, restore::RestoreOptions};

    let s3 = TestS3::new().await;
    let store = s3.store().await;

    // Days 1-2 archived by one run typed `--app A2`, days 3-4 by one typed `--app a2`: each is
    // today's code on a database holding only that spelling, so each records what it archived
    // under that spelling (receipts, keys, manifests), into the one store.
    let upper = rows_spelled("A2", "up", T0);
    let lower = rows_spelled("a2", "low", T0 + 2 * DAY);
    let x = TestDb::new().await;
    x.insert(&upper).await;
    let mut opts = options(&x, &["A2"], CUT1);
    opts.limits.max_rows = 90;
    let first = archive(&env(&x, store.clone(), CUT2 + DAY), &opts).await;
    assert!(first.ok, "{}", first.to_json());
    without_marker_and_checkpoints(store.as_ref()).await;
    let y = TestDb::new().await;
    y.insert(&lower).await;
    let mut opts = options(&y, &["a2"], CUT2);
    opts.limits.max_rows = 90;
    let second = archive(&env(&y, store.clone(), CUT2 + DAY), &opts).await;
    assert!(second.ok, "{}", second.to_json());
    without_marker_and_checkpoints(store.as_ref()).await;
    for (db, spelling) in [(&x, "A2"), (&y, "a2")] {
        assert_eq!(
            spellings_in(db, "wallet_outbox_archive_receipts").await,
            [spelling.as_bytes().to_vec()],
            "{spelling}"
        );
        let receipts = db.receipts(spelling).await;
        assert!(receipts.len() > 2, "{spelling}: several batches");
        for (_, data_key, _, _) in &receipts {
            assert!(
                data_key.contains(&format!("/app_code={spelling}/")),
                "{data_key}"
            );
        }
    }
    let x_members = x
        .count("SELECT COUNT(*) FROM wallet_outbox_archive_members")
        .await;
    let y_members = y
        .count("SELECT COUNT(*) FROM wallet_outbox_archive_members")
        .await;
    let archived_rows = x_members + y_members;
    let all_rows = (upper.len() + lower.len()) as i64;

    // The database an older build keeps: migrations 1-8, both runs' rows, receipts and member
    // rows, each as it was recorded.
    let older = TestDb::empty(&server_url().await).await;
    first_migrations(&older, 8).await;
    outbox_archiver::create_source_table(&older.db.pool, &WALLET_OUTBOX)
        .await
        .unwrap();
    older.insert(&upper).await;
    older.insert(&lower).await;
    let columns: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(column_name AS CHAR) FROM information_schema.columns \
         WHERE table_schema = DATABASE() AND table_name = 'wallet_outbox_archive_receipts' \
         ORDER BY ordinal_position",
    )
    .fetch_all(&older.db.pool)
    .await
    .unwrap();
    copy_as_an_older_build_recorded(&older, &columns, &x).await;
    copy_as_an_older_build_recorded(&older, &columns, &y).await;
    let receipts = older
        .count("SELECT COUNT(*) FROM wallet_outbox_archive_receipts")
        .await;
    assert_eq!(
        older
            .count("SELECT COUNT(*) FROM wallet_outbox_archive_members")
            .await,
        archived_rows
    );
    assert_eq!(
        older
            .count("SELECT COUNT(*) FROM wallet_outbox WHERE status = 'DELIVERED'")
            .await,
        archived_rows,
        "every delivered row is archived"
    );

    // migrate: the member rows take the app's first spelling, the receipts keep both.
    let migrated = run_cli(&["migrate"], &[("DATABASE_URL", older.url.clone())]).await;
    assert_eq!(migrated.code, 0, "{}", migrated.all_output);
    name_columns_as_written(&older, &x).await;
    name_columns_as_written(&older, &y).await;
    assert_eq!(
        migrated.summary["receipts_numbered"], receipts,
        "{}",
        migrated.all_output
    );
    assert_eq!(
        spellings_in(&older, "wallet_outbox_archive_receipts").await,
        [b"A2".to_vec(), b"a2".to_vec()]
    );
    assert_eq!(
        spellings_in(&older, "wallet_outbox_archive_members").await,
        [b"A2".to_vec()]
    );
    assert_eq!(
        older
            .count("SELECT COUNT(*) FROM wallet_outbox_archive_members")
            .await,
        archived_rows,
        "every member row kept"
    );

    // The next archive run (nothing new below the cutoff) appends to the log the receipts
    // migrate linked.
    let env = env(&older, store.clone(), CUT2 + DAY);
    let anchored = archive(&env, &options(&older, &["a2"], CUT2)).await;
    assert!(anchored.ok, "{}", anchored.to_json());
    assert_eq!(anchored.apps.len(), 1, "{}", anchored.to_json());
    assert_eq!(anchored.apps[0].rows, 0, "{}", anchored.to_json());
    let one = anchored.apps[0].app_code.clone();
    assert_eq!(
        archive_of(&anchored, &one).log.size,
        Some(receipts as u64),
        "{}",
        anchored.to_json()
    );

    // verify: every batch whole, its member rows found and matching its proof, no straggler.
    let clean = verify::run(
        &env,
        &VerifyOptions {
            parallel: 2,
            ..VerifyOptions::everything(CUT2, "DELIVERED")
        },
    )
    .await;
    assert_eq!(clean.exit_code, 0, "{}", clean.to_json());
    assert_eq!(
        verify_run(&clean).checked_batches.len() as i64,
        receipts,
        "{}",
        clean.to_json()
    );
    // And through the binary, as the operator runs it.
    let envs = cli_envs(&older, &s3);
    let verified = run_cli(
        &["verify", "--all-apps", "--cutoff", "2026-01-05T00:00:00Z"],
        &envs,
    )
    .await;
    assert_eq!(verified.code, 0, "{}", verified.all_output);

    // Every batch's restore drill is ok.
    let drilled = restore::run(
        &env,
        &RestoreOptions {
            drill: true,
            lock_prefix: older.lock_prefix(),
            ..RestoreOptions::default()
        },
    )
    .await;
    assert!(drilled.ok, "{}", drilled.to_json());
    let mut drills = 0;
    for app in &drilled.apps {
        let restored = restore_of(&drilled, &app.app_code);
        assert!(restored.failed_batches.is_empty(), "{}", drilled.to_json());
        let each = restored.drills.as_ref().expect("drills");
        assert!(each.iter().all(|d| d.ok), "{}", drilled.to_json());
        drills += each.len() as i64;
    }
    assert_eq!(drills, receipts, "{}", drilled.to_json());

    // purge deletes every archived row, of both spellings' batches, and nothing else.
    let purged = purge::run(&env, &purge_options(&older, &["a2"])).await;
    assert!(purged.ok, "{}", purged.to_json());
    assert_eq!(purged.apps.len(), 1, "{}", purged.to_json());
    let figures = purge_of(&purged, &purged.apps[0].app_code);
    assert!(figures.failed_batches.is_empty(), "{}", purged.to_json());
    assert_eq!(
        figures.purged_rows as i64,
        archived_rows,
        "{}",
        purged.to_json()
    );
    assert_eq!(
        older.count("SELECT COUNT(*) FROM wallet_outbox").await,
        all_rows - archived_rows,
        "exactly the archived rows went"
    );
    assert_eq!(
        older
            .count("SELECT COUNT(*) FROM wallet_outbox WHERE status = 'DELIVERED'")
            .await,
        0,
        "only the rows never delivered stay"
    );
}

/// The store in these tests is written by today's build, whose manifests name their batches'
/// columns (layout 2): once migrated, the receipts copied as an older build recorded them name
/// the same lists, as today's receipts of those batches do. (An older build's own manifests
/// hold no list, and its receipts name none: upgrade.rs runs one.)
async fn name_columns_as_written(older: &TestDb, today: &TestDb) {
    older
        .exec(&format!(
            "INSERT IGNORE INTO wallet_outbox_archive_column_sets \
             SELECT * FROM `{db}`.wallet_outbox_archive_column_sets",
            db = today.name
        ))
        .await;
    older
        .exec(&format!(
            "UPDATE wallet_outbox_archive_receipts r JOIN `{db}`.wallet_outbox_archive_receipts t \
             ON t.batch_id = r.batch_id SET r.columns_sha256 = t.columns_sha256",
            db = today.name
        ))
        .await;
}
