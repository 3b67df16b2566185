//! Outbox tables other than wallet_outbox (issue 15): room_outbox, whose envelope is a protobuf
//! BLOB, through every command; and the owned tables derived from a table's spec, held to the
//! migrations wallet_outbox's are made by.

use bytes::Bytes;
use outbox_archiver::codec::{Row, Value};
use outbox_archiver::commands::purge;
use outbox_archiver::commands::restore::{self, RestoreOptions};
use outbox_archiver::commands::verify::{self, VerifyOptions};
use outbox_archiver::db::owned::{create_owned_tables, owned_tables};
use outbox_archiver::seed::Rng;
use outbox_archiver::store::PutMode;
use outbox_archiver::table::{ROOM_OUTBOX, WALLET_OUTBOX};
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
        5,
        "all five owned tables are compared"
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
    migrated.drop().await;
    generated.drop().await;
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
            "--innodb-log-file-size=256M".into(),
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
        .count("SELECT COUNT(*) FROM room_outbox s JOIN room_outbox_archive_members m ON m.app_code = s.app_code AND m.event_id = s.event_id WHERE s.status <> 'DELIVERED'")
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
        .put(&data, Bytes::from(bad), PutMode::Overwrite)
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
        .put(&data, Bytes::from(good), PutMode::Overwrite)
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
    db.drop().await;
}
