//! Outbox tables other than wallet_outbox (issue 15): room_outbox, whose envelope is a protobuf
//! BLOB, through every command; and the owned tables derived from a table's spec, held to the
//! migrations wallet_outbox's are made by.

use bytes::Bytes;
use outbox_archiver::format::Key;
use outbox_archiver::purge;
use outbox_archiver::testing::Rng;
use outbox_archiver::PutMode;
use outbox_archiver::{create_owned_tables, owned_tables};
use outbox_archiver::{restore, restore::RestoreOptions};
use outbox_archiver::{verify, verify::VerifyOptions};
use outbox_archiver::{Row, Value};
use outbox_archiver::{ROOM_OUTBOX, WALLET_OUTBOX};
use sha2::{Digest, Sha256};
use sqlx::{AssertSqlSafe, Row as _};

use crate::support::*;

type ColumnShape = (
    String,
    u32,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
);

/// Every column and index of `tables` in the database of `db`, as information_schema states them.
async fn shape(
    db: &TestDb,
    tables: &[String],
) -> (Vec<ColumnShape>, Vec<(String, String, u32, String, i64)>) {
    let list = tables
        .iter()
        .map(|t| format!("'{t}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let columns = sqlx::query_as(AssertSqlSafe(format!(
        "SELECT CAST(table_name AS CHAR), CAST(ordinal_position AS UNSIGNED), CAST(column_name AS CHAR), \
         CAST(column_type AS CHAR), CAST(column_default AS CHAR), CAST(character_set_name AS CHAR), \
         CAST(collation_name AS CHAR), CAST(CONCAT(is_nullable, ' ', extra) AS CHAR) \
         FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name IN ({list}) \
         ORDER BY table_name, ordinal_position"
    )))
    .fetch_all(&db.db.pool)
    .await
    .unwrap();
    let indexes = sqlx::query_as(AssertSqlSafe(format!(
        "SELECT CAST(table_name AS CHAR), CAST(index_name AS CHAR), CAST(seq_in_index AS UNSIGNED), \
         CAST(column_name AS CHAR), CAST(non_unique AS SIGNED) \
         FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name IN ({list}) \
         ORDER BY table_name, index_name, seq_in_index"
    )))
    .fetch_all(&db.db.pool)
    .await
    .unwrap();
    (columns, indexes)
}

/// wallet_outbox's owned tables made from its spec are the tables its migrations make, column for
/// column (name, position, type, default, collation, nullability) and index for index: a
/// migration added without its twin in `db::owned` fails here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owned_tables_from_the_spec_are_the_migrated_tables() {
    let migrated = TestDb::new().await;
    let generated = TestDb::empty(&server_url().await).await;
    create_owned_tables(&generated.db.pool, &WALLET_OUTBOX)
        .await
        .unwrap();
    let names: Vec<String> = owned_tables(&WALLET_OUTBOX)
        .into_iter()
        .map(|t| t.name)
        .collect();
    let (columns, indexes) = shape(&migrated, &names).await;
    assert_eq!(
        columns
            .iter()
            .map(|c| c.0.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        names.len(),
        "every owned table is compared"
    );
    assert_eq!(shape(&generated, &names).await, (columns, indexes));
    // A second run is a no-op, and the tables pass the start-up check.
    create_owned_tables(&generated.db.pool, &WALLET_OUTBOX)
        .await
        .unwrap();
    generated
        .db
        .check_owned_tables(&WALLET_OUTBOX)
        .await
        .unwrap();
}

/// A pseudo-random envelope of `len` bytes (every byte value occurs).
fn envelope(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    out.truncate(len);
    out
}

/// SHA-256 over `envelopes` as room_outbox's `envelope_sha256` total defines it.
fn envelopes_sha256<'a>(envelopes: impl Iterator<Item = &'a [u8]>) -> String {
    let mut h = Sha256::new();
    for e in envelopes {
        h.update((e.len() as u64).to_be_bytes());
        h.update(e);
    }
    hex::encode(h.finalize())
}

/// room_outbox through archive, verify (clean, then with planted faults), purge, restore and a
/// drill: envelopes empty, all-zero, ordinary and 16 MiB come back byte for byte, the receipts'
/// totals are the rooms' ids summed and the envelopes hashed, and nothing undelivered is archived.
/// On a private server that takes 64 MiB packets, as a service storing 16 MiB envelopes must.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn room_outbox_round_trips_its_envelopes_through_every_command() {
    let server = PrivateServer::start_with(|_| {
        vec![
            "--max-allowed-packet=64M".into(),
            // Room in the redo log for 16 MiB rows (MySQL 8.0.30+ sizes it by capacity).
            match flavour() {
                Flavour::MariaDb => "--innodb-log-file-size=256M".into(),
                Flavour::MySql => "--innodb-redo-log-capacity=512M".into(),
            },
        ]
    })
    .await;
    let db = TestDb::for_table_on(&server.url(), &ROOM_OUTBOX).await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let status = at_in(&ROOM_OUTBOX, "status");
    let env_at = at_in(&ROOM_OUTBOX, "envelope");
    let mut rng = Rng::new(15);
    let mut rows: Vec<Row> = Vec::new();
    let special = [
        Vec::new(),
        vec![0u8],
        vec![0u8; 4096],
        envelope(&mut rng, 16 << 20),
        vec![0xFF; 3],
    ];
    for (i, e) in special.into_iter().enumerate() {
        rows.push(room_row("r1", &format!("s{i}"), T0 + i as i64, e));
    }
    for i in 0..60 {
        let len = rng.below(3_000) as usize;
        rows.push(room_row(
            "r1",
            &format!("e{i:03}"),
            T0 + 100 + i,
            envelope(&mut rng, len),
        ));
    }
    for i in 0..8 {
        rows.push(room_row(
            "r2",
            &format!("o{i}"),
            T0 + i,
            envelope(&mut rng, 10),
        ));
    }
    // The relay's other states: never archived.
    for (i, state) in ["PENDING", "DELIVERING", "RETRYABLE", "FAILED"]
        .iter()
        .enumerate()
    {
        let mut r = room_row("r1", &format!("u{i}"), T0 + 50, envelope(&mut rng, 20));
        r[status] = Value::Text(state.to_string());
        rows.push(r);
    }
    db.insert(&rows).await;
    let originals = db.expected_rows("r1", ARCHIVED_CUTOFF).await;
    assert_eq!(originals.len(), 65);

    let env = env(&db, store.clone(), ARCHIVED_CUTOFF + DAY);
    let mut opts = options(&db, &["r1", "r2"], ARCHIVED_CUTOFF);
    opts.limits.max_rows = 20;
    let archived = archive(&env, &opts).await;
    assert!(archived.ok, "{}", archived.to_json());
    let r1 = archived.apps.iter().find(|a| a.app_code == "r1").unwrap();
    assert_eq!(r1.rows, 65);
    assert_eq!(archived_rows(&db, store.as_ref(), "r1").await, originals);

    // The receipts' totals, from the rows as the database holds them.
    let receipts = sqlx::query(
        "SELECT first_updated_at_ms, first_event_id, last_updated_at_ms, last_event_id, row_count, room_id_total, envelope_sha256 \
         FROM room_outbox_archive_receipts WHERE app_code = 'r1' ORDER BY last_updated_at_ms, last_event_id",
    )
    .fetch_all(&db.db.pool)
    .await
    .unwrap();
    assert!(receipts.len() >= 4, "several batches: {}", receipts.len());
    let mut seen = 0;
    for r in &receipts {
        let count: i64 = r.get("row_count");
        let batch = &originals[seen..seen + count as usize];
        seen += count as usize;
        let room_sum: i64 = batch
            .iter()
            .map(|row| match row[at_in(&ROOM_OUTBOX, "room_id")] {
                Value::Int(v) => v,
                _ => unreachable!(),
            })
            .sum();
        assert_eq!(r.get::<String, _>("room_id_total"), room_sum.to_string());
        let hash = envelopes_sha256(batch.iter().map(|row| match &row[env_at] {
            Value::Bytes(b) => b.as_slice(),
            _ => unreachable!(),
        }));
        assert_eq!(r.get::<String, _>("envelope_sha256"), hash);
    }
    assert_eq!(seen, 65);
    let undelivered = db
        .count("SELECT COUNT(*) FROM room_outbox s JOIN room_outbox_archive_members m ON CAST(m.app_code AS BINARY) = CAST(s.app_code AS BINARY) AND m.event_id = s.event_id WHERE s.status <> 'DELIVERED'")
        .await;
    assert_eq!(undelivered, 0, "nothing undelivered is archived");

    let verify_opts = VerifyOptions {
        parallel: 2,
        ..VerifyOptions::everything(ARCHIVED_CUTOFF, "DELIVERED")
    };
    let clean = verify::run(&env, &verify_opts).await;
    assert!(clean.ok, "{}", clean.to_json());
    assert!(verify_run(&clean).findings.is_empty());

    // Planted faults: a receipt whose envelope total was changed, and a flipped byte in a data object.
    let (batch, data, _, _) = db.receipts("r1").await.remove(0);
    let honest: String = sqlx::query_scalar(
        "SELECT envelope_sha256 FROM room_outbox_archive_receipts WHERE batch_id = ?",
    )
    .bind(&batch)
    .fetch_one(&db.db.pool)
    .await
    .unwrap();
    sqlx::query("UPDATE room_outbox_archive_receipts SET envelope_sha256 = ? WHERE batch_id = ?")
        .bind("0".repeat(64))
        .bind(&batch)
        .execute(&db.db.pool)
        .await
        .unwrap();
    let tampered = verify::run(&env, &verify_opts).await;
    assert_eq!(tampered.exit_code, 1, "{}", tampered.to_json());
    let findings = &verify_run(&tampered).findings;
    assert!(
        findings
            .iter()
            .any(|f| f.batch_id.as_deref() == Some(batch.as_str())),
        "{}",
        tampered.to_json()
    );
    sqlx::query("UPDATE room_outbox_archive_receipts SET envelope_sha256 = ? WHERE batch_id = ?")
        .bind(&honest)
        .bind(&batch)
        .execute(&db.db.pool)
        .await
        .unwrap();
    let good = read(store.as_ref(), &data).await;
    let mut bad = good.clone();
    let at = bad.len() / 2;
    bad[at] ^= 0x04;
    store
        .put(
            &Key::stored(data.clone()),
            Bytes::from(bad),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let flipped = verify::run(&env, &verify_opts).await;
    assert_eq!(flipped.exit_code, 1);
    assert!(
        verify_run(&flipped)
            .findings
            .iter()
            .any(|f| kind(f) == "sha256_mismatch" && f.batch_id.as_deref() == Some(batch.as_str())),
        "{}",
        flipped.to_json()
    );
    store
        .put(
            &Key::stored(data.clone()),
            Bytes::from(good),
            PutMode::Overwrite,
        )
        .await
        .unwrap();

    let purged = purge::run(&env, &purge_options(&db, &["r1", "r2"])).await;
    assert!(purged.ok, "{}", purged.to_json());
    assert_eq!(purge_of(&purged, "r1").purged_rows, 65);
    assert!(db.expected_rows("r1", ARCHIVED_CUTOFF).await.is_empty());
    assert_eq!(
        db.count("SELECT COUNT(*) FROM room_outbox WHERE app_code = 'r1'")
            .await,
        4,
        "the undelivered rows stay"
    );

    let restored = restore::run(&env, &RestoreOptions::default()).await;
    assert!(restored.ok, "{}", restored.to_json());
    assert_eq!(restore_of(&restored, "r1").restored_rows, 65);
    let back = table_rows(&db, "room_outbox_restored", "r1").await;
    assert!(back == originals, "every column and every envelope byte");
    let sizes: Vec<usize> = back
        .iter()
        .take(5)
        .map(|r| match &r[env_at] {
            Value::Bytes(b) => b.len(),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(sizes, [0, 1, 4096, 16 << 20, 3]);

    let drill = restore::run(
        &env,
        &RestoreOptions {
            drill: true,
            ..Default::default()
        },
    )
    .await;
    assert!(drill.ok, "{}", drill.to_json());
    let drilled = db
        .count("SELECT COUNT(*) FROM room_outbox_archive_drills WHERE ok")
        .await;
    assert_eq!(
        drilled as usize,
        db.receipts("r1").await.len() + db.receipts("r2").await.len()
    );
}

/// The third table's profile and DDL, test fixtures: no Rust code knows ledger_outbox.
pub(crate) const LEDGER_PROFILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/ledger_outbox.toml"
);
const LEDGER_DDL: &str = include_str!("../fixtures/ledger_outbox.sql");

/// A database with ledger_outbox (no owned tables yet).
pub(crate) async fn ledger_db() -> TestDb {
    let db = TestDb::empty(&server_url().await).await;
    db.exec(LEDGER_DDL).await;
    db
}

/// The binary's environment for `db` with `profile` as --table-profile.
pub(crate) fn ledger_env(db: &TestDb, s3: &TestS3, profile: &str) -> Vec<(&'static str, String)> {
    let mut env = cli_envs(db, s3);
    env.push(("OUTBOX_ARCHIVER_TABLE_PROFILE", profile.to_string()));
    env
}

/// A delivered (`SENT`) ledger_outbox row, in the table's column order.
#[allow(clippy::too_many_arguments)]
pub(crate) fn ledger_row(
    tenant: &str,
    id: &str,
    amount: &str,
    fee: Option<&str>,
    settled_at: Option<&str>,
    signature: Option<Vec<u8>>,
    memo: &str,
    changed_ms: i64,
) -> Row {
    let text = |s: Option<&str>| s.map_or(Value::Null, |s| Value::Text(s.into()));
    vec![
        Value::Text(tenant.into()),
        Value::Text(id.into()),
        Value::Text(amount.into()),
        text(fee),
        Value::Text("2026-01-02T03:04:05.678".into()),
        text(settled_at),
        signature.map_or(Value::Null, Value::Bytes),
        Value::Text(memo.into()),
        Value::Int(4_294_967_295 - changed_ms % 1_000),
        Value::Text("18446744073709551615".into()),
        Value::Text("SENT".into()),
        Value::Int(changed_ms - 5),
        Value::Int(changed_ms),
    ]
}

/// The data object of app l1's first (`ASC`) or last (`DESC`) ledger_outbox batch.
async fn ledger_data_key(db: &TestDb, order: &str) -> String {
    sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT data_object_key FROM ledger_archive_receipts WHERE app_code = 'l1' ORDER BY last_updated_at_ms {order} LIMIT 1"
    )))
    .fetch_one(&db.db.pool)
    .await
    .unwrap()
}

/// Every delivered row of ledger_outbox as the server prints it — not through the archiver's
/// codec: texts cast, binaries in hex, NULL as None.
async fn ledger_as_printed(db: &TestDb) -> Vec<Vec<Option<String>>> {
    let rows = sqlx::query(
        "SELECT tenant, message_id, CAST(amount AS CHAR), CAST(fee AS CHAR), CAST(booked_at AS CHAR), \
         CAST(settled_at AS CHAR), HEX(signature), HEX(memo), CAST(sequence_no AS CHAR), \
         CAST(ledger_counter AS CHAR), state, CAST(created_ms AS CHAR), CAST(changed_ms AS CHAR) \
         FROM ledger_outbox WHERE state = 'SENT' ORDER BY tenant, message_id",
    )
    .fetch_all(&db.db.pool)
    .await
    .unwrap();
    rows.iter()
        .map(|r| (0..13).map(|i| r.get::<Option<String>, _>(i)).collect())
        .collect()
}

/// A third table, defined only by a profile file in a test fixture — DECIMAL, DATETIME(3), a
/// nullable TIMESTAMP(3), a nullable VARBINARY, a utf8mb4 TEXT with 4-byte characters, unsigned
/// integers, role columns with other names, a delivered status of its own — through the real
/// binary: migrate, archive, verify, purge, restore into the source. Every value comes back
/// exactly as the server held it; the NDJSON carries each in its documented form; a column added
/// to the table later is archived from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_described_only_by_a_profile_round_trips_exactly() {
    let mut db = ledger_db().await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let envs = ledger_env(&db, &s3, LEDGER_PROFILE);
    let run = run_cli(&["migrate"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let profile = outbox_archiver::Profile::load(LEDGER_PROFILE.as_ref()).unwrap();
    db.spec = db.db.resolve_profile(&profile).await.unwrap();
    db.delivered_status = "SENT";
    db.db.require_tables(db.spec).await.unwrap();

    let mut rows = vec![
        ledger_row(
            "l1",
            "m-first",
            "-12345678901234.5678",
            None,
            Some("2026-01-02T03:04:05.678"),
            None,
            "💸 paid 𝄞 «ok»",
            T0,
        ),
        ledger_row(
            "l1",
            "m-zero",
            "0.0000",
            Some("0.00"),
            None,
            Some(vec![]),
            "",
            T0 + 1,
        ),
        ledger_row(
            "l1",
            "m-bin",
            "99999999999999.9999",
            Some("-0.01"),
            Some("1970-01-01T00:00:01.000"),
            Some((0..=63).collect()),
            "line\nbreak \"quoted\" \\ tab\t",
            T0 + 2,
        ),
    ];
    for i in 0..20 {
        rows.push(ledger_row(
            if i % 2 == 0 { "l1" } else { "l2" },
            &format!("m{i:02}"),
            &format!("{i}.{i:04}"),
            Some("1.50"),
            None,
            Some(vec![i as u8; i]),
            &"😀".repeat(i),
            T0 + 10 + i as i64,
        ));
    }
    let mut pending = ledger_row("l1", "m-pending", "1.0000", None, None, None, "", T0 + 3);
    pending[10] = Value::Text("PENDING".into());
    rows.push(pending);
    db.insert(&rows).await;
    let before = ledger_as_printed(&db).await;
    assert_eq!(before.len(), 23);
    let originals = db.expected_rows("l1", ARCHIVED_CUTOFF).await;
    assert_eq!(originals.len(), 13);

    let run = run_cli(
        &[
            "archive",
            "--all-apps",
            "--batch-rows",
            "5",
            "--cutoff",
            "2026-01-04T00:00:00Z",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(archived_rows(&db, store.as_ref(), "l1").await, originals);
    let members = db
        .count("SELECT COUNT(*) FROM ledger_archive_members WHERE app_code = 'l1'")
        .await;
    assert_eq!(members, 13, "the pending row is not archived");

    // The first batch's NDJSON line, byte for byte: each SQL type in its documented form.
    let first = ledger_data_key(&db, "ASC").await;
    let text = String::from_utf8(ndjson_of(store.as_ref(), &first).await).unwrap();
    assert_eq!(
        text.lines().next().unwrap(),
        concat!(
            r#"{"tenant":"l1","message_id":"m-first","amount":"-12345678901234.5678","fee":null,"#,
            r#""booked_at":"2026-01-02T03:04:05.678","settled_at":"2026-01-02T03:04:05.678Z","#,
            r#""signature_base64":null,"memo":"💸 paid 𝄞 «ok»","sequence_no":4294967295,"#,
            r#""ledger_counter":"18446744073709551615","state":"SENT","created_ms":1767225599995,"#,
            r#""changed_ms":1767225600000}"#
        )
    );
    let manifest = read(
        store.as_ref(),
        &first.replace("data.ndjson.gz", "manifest.json"),
    )
    .await;
    let manifest: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    assert_eq!(manifest["table"], "ledger_outbox");
    assert!(manifest["sequence_no_total"].is_string(), "{manifest}");
    assert_eq!(manifest["amounts_sha256"].as_str().map(str::len), Some(64));

    let run = run_cli(
        &["verify", "--all-apps", "--cutoff", "2026-01-04T00:00:00Z"],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&["purge", "--all-apps", "--grace", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM ledger_outbox").await,
        1,
        "only the pending row stays"
    );
    let run = run_cli(&["restore", "--all-apps", "--into-source"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        ledger_as_printed(&db).await,
        before,
        "every value exactly as it was"
    );

    // A column added later: archived from then on (a new row, archived in its own batch).
    db.exec("ALTER TABLE ledger_outbox ADD COLUMN region VARCHAR(8) NULL AFTER memo")
        .await;
    sqlx::query(
        "INSERT INTO ledger_outbox (tenant, message_id, amount, booked_at, memo, region, sequence_no, ledger_counter, state, created_ms, changed_ms) \
         VALUES ('l1', 'm-late', 1, '2026-01-03 00:00:00', '', 'eu', 1, 1, 'SENT', ?, ?)",
    )
    .bind(T0 + 2 * DAY)
    .bind(T0 + 2 * DAY)
    .execute(&db.db.pool)
    .await
    .unwrap();
    let run = run_cli(
        &["archive", "--app", "l1", "--cutoff", "2026-01-04T00:00:00Z"],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let last = ledger_data_key(&db, "DESC").await;
    let text = String::from_utf8(ndjson_of(store.as_ref(), &last).await).unwrap();
    assert!(
        text.contains(r#""memo":"","region":"eu","sequence_no":1"#),
        "{text}"
    );
    // The batches written before the column was added still verify and restore.
    let run = run_cli(
        &["verify", "--all-apps", "--cutoff", "2026-01-04T00:00:00Z"],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&["restore", "--all-apps", "--drill"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    // A column archived before and then dropped from the table (issue 58): the runs go on,
    // reading the batch that holds it by its own columns; its row is purged (the batch keeps
    // the column's value), and restored without it only when told to.
    db.exec("ALTER TABLE ledger_outbox DROP COLUMN region")
        .await;
    for command in ["archive", "verify"] {
        let run = run_cli(
            &[command, "--all-apps", "--cutoff", "2026-01-04T00:00:00Z"],
            &envs,
        )
        .await;
        assert_eq!(run.code, 0, "{command}: {}", run.all_output);
    }
    let run = run_cli(&["purge", "--all-apps", "--grace", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM ledger_outbox WHERE message_id = 'm-late'")
            .await,
        0
    );
    let run = run_cli(&["restore", "--all-apps", "--into-source"], &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output.contains("--without-column region"),
        "{}",
        run.all_output
    );
    let run = run_cli(
        &[
            "restore",
            "--all-apps",
            "--into-source",
            "--without-column",
            "region",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM ledger_outbox WHERE message_id = 'm-late' AND memo = ''")
            .await,
        1
    );
}

/// Start-up refusals, each exit 2 with a message that names the column or index and the fix,
/// nothing written: a profile naming a column the table lacks, a case-insensitive event id, a
/// missing retention index, owned tables made for another profile, and a built-in table with a
/// column removed or one it would not archive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_that_does_not_fit_its_description_is_refused_at_start_up() {
    let db = ledger_db().await;
    let s3 = TestS3::new().await;
    let dir = tempfile::tempdir().unwrap();
    let profile = std::fs::read_to_string(LEDGER_PROFILE).unwrap();
    let variant = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let archive = ["archive", "--all-apps", "--cutoff", "2026-01-04T00:00:00Z"];
    let refused = |run: &Run, needle: &str| {
        assert_eq!(run.code, 2, "{}", run.all_output);
        let error = run.summary["error"].as_str().unwrap_or_default();
        assert!(error.contains(needle), "{needle:?} not in {error}");
    };

    // Owned tables made for another profile: room_outbox's receipts have no sequence_no_total.
    let room = TestDb::for_table_on(&server_url().await, &ROOM_OUTBOX).await;
    room.exec(LEDGER_DDL).await;
    let shared = variant(
        "shared.toml",
        profile.replace(
            "owned_prefix = \"ledger_archive\"",
            "owned_prefix = \"room_outbox_archive\"",
        ),
    );
    let run = run_cli(&archive, &ledger_env(&room, &s3, &shared)).await;
    refused(
        &run,
        "room_outbox_archive_receipts has no column sequence_no_total",
    );
    // A built-in table with a column removed, or with one it would not archive.
    room.exec("ALTER TABLE room_outbox DROP COLUMN last_error")
        .await;
    let mut envs = s3.binary_env();
    envs.push(("DATABASE_URL", room.url.clone()));
    envs.push(("OUTBOX_ARCHIVER_TABLE", "room_outbox".into()));
    let run = run_cli(&archive, &envs).await;
    refused(&run, "room_outbox has no column last_error");
    room.exec("ALTER TABLE room_outbox ADD COLUMN last_error TEXT NULL, ADD COLUMN region VARCHAR(8) NULL").await;
    // A column added to a built-in table is not refused: it is archived too, after the table's
    // own (tests/integration/schema_change.rs).
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    // The same check archive makes before recording each receipt: a column added mid-run.
    let e = room
        .db
        .check_columns_unchanged(&ROOM_OUTBOX)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("columns of room_outbox changed while this run"),
        "{e}"
    );

    let envs = ledger_env(&db, &s3, LEDGER_PROFILE);
    let run = run_cli(&archive, &envs).await;
    refused(&run, "ledger_archive_receipts does not exist");
    let run = run_cli(&["migrate"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(
        &[
            "archive",
            "--all-apps",
            "--dry-run",
            "--cutoff",
            "2026-01-04T00:00:00Z",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);

    // A column the profile names that the table does not have.
    let missing = variant(
        "missing.toml",
        profile.replace("status = \"state\"", "status = \"delivery_state\""),
    );
    let run = run_cli(&archive, &ledger_env(&db, &s3, &missing)).await;
    refused(
        &run,
        "roles.status names column delivery_state, which ledger_outbox does not have",
    );
    // A total named like one of the receipts table's own columns (it would be a second column of
    // that name): refused when the profile is read, naming the field — not by the server.
    for field in ["purged_rows", "state", "manifest_sha256"] {
        let clash = variant(
            "clash.toml",
            profile.replace(
                "field = \"amounts_sha256\"",
                &format!("field = \"{field}\""),
            ),
        );
        let run = run_cli(&archive, &ledger_env(&db, &s3, &clash)).await;
        refused(&run, &format!("total field {field:?}"));
    }
    // A case-insensitive event id.
    db.exec("ALTER TABLE ledger_outbox MODIFY message_id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL").await;
    let run = run_cli(&archive, &envs).await;
    refused(
        &run,
        "ledger_outbox.message_id compares with collation utf8mb4_unicode_ci",
    );
    refused(&run, "ALTER TABLE ledger_outbox MODIFY message_id");
    db.exec("ALTER TABLE ledger_outbox MODIFY message_id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL").await;
    // The retention index gone.
    db.exec("ALTER TABLE ledger_outbox DROP INDEX idx_ledger_outbox_archive_scan")
        .await;
    let run = run_cli(&archive, &envs).await;
    refused(
        &run,
        "ledger_outbox has no index on (tenant, state, changed_ms, message_id)",
    );
    refused(
        &run,
        "ALTER TABLE ledger_outbox ADD INDEX idx_ledger_outbox_archive_scan",
    );
    let run = run_cli(&["doctor", "--format", "json"], &envs).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM ledger_archive_receipts")
            .await,
        0
    );
}
