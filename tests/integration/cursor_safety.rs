//! SPEC §5.10: no wedge, no skip. The cursor moves only over rows a batch was cut from — a
//! straggler is re-read by its exact `(event_id, updated_at_ms)` — and a row that is already a
//! member and comes back delivered with a new `updated_at_ms` (an operator replayed the event)
//! never stops its app.

use outbox_archiver::format::Cursor;
use outbox_archiver::purge;
use outbox_archiver::FindingKind;
use outbox_archiver::Outcome;
use outbox_archiver::SourceTable;
use outbox_archiver::WALLET_OUTBOX;
use outbox_archiver::{verify, verify::VerifyOptions};

use crate::support::*;

const CUTOFF: i64 = T0 + DAY;

async fn set_updated_at(db: &TestDb, event_id: &str, updated_at_ms: i64) {
    sqlx::query("UPDATE wallet_outbox SET updated_at_ms = ? WHERE event_id = ?")
        .bind(updated_at_ms)
        .bind(event_id)
        .execute(&db.db.pool)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_straggler_is_reread_by_its_exact_key_not_by_event_id() {
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 10)).await;
    let env = env(&db, store, CUTOFF);
    assert!(archive(&env, &options(&db, &["a1"], CUTOFF)).await.ok);
    // A delivery that committed late, below the cursor (e9 at T0 + 9).
    db.insert(&[row("a1", "late", T0 + 4)]).await;
    let pages = SourceTable::new(&db.db.pool, &WALLET_OUTBOX);
    let upto = Cursor {
        updated_at_ms: T0 + 9,
        event_id: "e9".into(),
    };
    let (keys, _) = pages
        .straggler_page("a1", "DELIVERED", &upto, None, CUTOFF)
        .await
        .unwrap();
    assert_eq!(
        keys,
        vec![Cursor {
            updated_at_ms: T0 + 4,
            event_id: "late".into()
        }]
    );
    // Between the key scan and the re-read the row is delivered again, above the cursor: the
    // straggler batch must not take it (its last cursor would land above the app's cursor and
    // the next run's cursor would jump over every unarchived row in between).
    set_updated_at(&db, "late", T0 + 500).await;
    let reread = pages
        .rows_by_keys("a1", "DELIVERED", CUTOFF, &keys)
        .await
        .unwrap();
    assert!(
        reread.is_empty(),
        "the straggler key no longer matches a row: {reread:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_delivered_again_never_wedges_its_app() {
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 10)).await;
    let env = env(&db, store, CUTOFF);
    assert!(archive(&env, &options(&db, &["a1"], CUTOFF)).await.ok);
    // An operator replays e3: the relay delivers it again, later.
    set_updated_at(&db, "e3", T0 + 100).await;
    db.insert(&[row("a1", "e10", T0 + 200)]).await;
    let first_batch = db.receipts("a1").await.remove(0).0;
    for run in 0..2 {
        let again = archive(&env, &options(&db, &["a1"], CUTOFF)).await;
        assert!(again.ok, "run {run}: {}", again.to_json());
        if run == 0 {
            assert_eq!(again.apps[0].outcome, Outcome::Archived);
            assert_eq!(again.apps[0].rows, 2, "the new version and the new row");
            // Reported: which row, which version, which batch had it.
            let archived = archive_of(&again, "a1");
            assert_eq!(archived.superseded_rows, 1);
            let superseded = &archived.superseded;
            assert_eq!(superseded.len(), 1, "{superseded:?}");
            assert_eq!(
                (
                    superseded[0].event_id.as_str(),
                    superseded[0].updated_at_ms,
                    superseded[0].batch_id.as_str()
                ),
                ("e3", T0 + 3, first_batch.as_str())
            );
        } else {
            assert_eq!(again.apps[0].outcome, Outcome::UpToDate);
        }
    }
    // The member row is the new version's; the old version stays its batch's.
    let members = db.members("a1").await;
    let e3 = members.iter().find(|m| m.0 == "e3").unwrap();
    assert_eq!(e3.1, T0 + 100);
    assert_ne!(e3.2, first_batch);
    let verified = verify::run(&env, &VerifyOptions::everything(CUTOFF, "DELIVERED")).await;
    assert!(verified.ok, "{}", verified.to_json());
    let status = outbox_archiver::status::run(
        &db_context(&db, CUTOFF),
        &outbox_archiver::status::StatusOptions {
            grace_ms: 86_400_000,
            apps: outbox_archiver::Apps::Listed(vec!["a1".into()]),
            cutoff_ms: CUTOFF,
            delivered_status: "DELIVERED".into(),
        },
    )
    .await;
    let figures = status_of(&status, "a1");
    assert_eq!(figures.superseded_rows, 1, "{}", status.to_json());
    assert_eq!(figures.awaiting_purge_rows, 11, "{}", status.to_json());
    // Restore brings back each row once, as it is now.
    let restored =
        outbox_archiver::restore::run(&env, &outbox_archiver::restore::RestoreOptions::default())
            .await;
    assert!(restored.ok, "{}", restored.to_json());
    assert_eq!(restore_of(&restored, "a1").restored_rows, 11);
    assert_eq!(restore_of(&restored, "a1").superseded_rows, 1);
    let restored_e3: i64 = sqlx::query_scalar(
        "SELECT updated_at_ms FROM wallet_outbox_restored WHERE event_id = 'e3'",
    )
    .fetch_one(&db.db.pool)
    .await
    .unwrap();
    assert_eq!(restored_e3, T0 + 100);
    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert!(purged.ok, "{}", purged.to_json());
    assert_eq!(purge_of(&purged, "a1").purged_rows, 11);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_delivered_again_below_the_cursor_is_a_straggler() {
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 10)).await;
    let env = env(&db, store, CUTOFF);
    assert!(archive(&env, &options(&db, &["a1"], CUTOFF)).await.ok);
    // Delivered again by a relay whose clock is behind: a new version below the cursor.
    set_updated_at(&db, "e3", T0 + 5).await;
    let verified = verify::run(&env, &VerifyOptions::everything(CUTOFF, "DELIVERED")).await;
    assert_eq!(verified.exit_code, 1, "{}", verified.to_json());
    let found = &verify_run(&verified).findings;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].kind, FindingKind::Straggler);
    assert_eq!(found[0].event_id.as_deref(), Some("e3"));
    // The command the finding calls for takes the new version, superseding the old one.
    let mut opts = options(&db, &["a1"], CUTOFF);
    opts.stragglers = true;
    let taken = archive(&env, &opts).await;
    assert!(taken.ok, "{}", taken.to_json());
    assert_eq!(taken.apps[0].rows, 1);
    assert_eq!(archive_of(&taken, "a1").superseded_rows, 1);
    let clean = verify::run(&env, &VerifyOptions::everything(CUTOFF, "DELIVERED")).await;
    assert!(clean.ok, "{}", clean.to_json());
    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert!(purged.ok, "{}", purged.to_json());
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_straggler_delivered_again_mid_run_never_moves_the_cursor_over_a_row() {
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 10)).await;
    let env = env(&db, store, CUTOFF);
    assert!(archive(&env, &options(&db, &["a1"], CUTOFF)).await.ok);
    // A late delivery below the cursor, and a row above it not archived yet.
    db.insert(&[row("a1", "late", T0 + 4), row("a1", "gap", T0 + 300)])
        .await;
    let mut opts = options(&db, &["a1"], CUTOFF);
    opts.stragglers = true;
    let url = db.url.clone();
    // Between the straggler key scan and the re-read, the late row is delivered again, above
    // the row not archived yet.
    opts.failpoints = outbox_archiver::testing::FailPoints::new(move |point| {
        if point == "after-straggler-scan" {
            execute_from_failpoint(
                &url,
                format!(
                    "UPDATE wallet_outbox SET updated_at_ms = {} WHERE event_id = 'late'",
                    T0 + 500
                ),
            );
        }
        false
    });
    let stragglers = archive(&env, &opts).await;
    assert!(stragglers.ok, "{}", stragglers.to_json());
    assert_eq!(stragglers.apps[0].rows, 0, "{}", stragglers.to_json());
    let cursor = outbox_archiver::Receipts::new(&db.db.pool, &WALLET_OUTBOX)
        .latest_cursor("a1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cursor.event_id, "e9", "the cursor did not move");

    let rest = archive(&env, &options(&db, &["a1"], CUTOFF)).await;
    assert!(rest.ok, "{}", rest.to_json());
    assert_eq!(
        rest.apps[0].rows, 2,
        "the gap row and the late row, once each"
    );
    let mut members: Vec<String> = db.members("a1").await.into_iter().map(|m| m.0).collect();
    members.sort();
    let mut want: Vec<String> = (0..10).map(|i| format!("e{i}")).collect();
    want.extend(["gap".to_string(), "late".to_string()]);
    want.sort();
    assert_eq!(members, want, "every row archived, none skipped");
    let verified = verify::run(&env, &VerifyOptions::everything(CUTOFF, "DELIVERED")).await;
    assert!(verified.ok, "{}", verified.to_json());
}
