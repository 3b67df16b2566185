//! The receipt transaction (SPEC §5.2): receipt and members together or nothing; a retry of the
//! same batch is a no-op; a member owned by another batch or a control value that differs fails
//! it; and a batch whose receipt exists is never written again.

use bytes::Bytes;
use outbox_archiver::format::Key;
use outbox_archiver::testing::FailPoints;
use outbox_archiver::Member;
use outbox_archiver::ObjectDigest;
use outbox_archiver::Outcome;
use outbox_archiver::PutMode;
use outbox_archiver::Receipts;
use outbox_archiver::WALLET_OUTBOX;
use outbox_archiver::{
    format::object_keys, format::ContentFacts, format::Cursor, format::TotalValue,
};
use outbox_archiver::{lock_name, AppLock};
use outbox_archiver::{Cut, Lifecycle, Objects, Receipt, RecordError, Recorder};

use crate::support::*;

fn receipt(batch_id: &str, members: &[Member], verified_at_ms: i64) -> Receipt {
    let first = members.first().unwrap();
    let last = members.last().unwrap();
    Receipt {
        app_code: "a1".into(),
        recorded_app_code: "a1".into(),
        batch_id: batch_id.into(),
        keys: object_keys(
            &outbox_archiver::format::Prefix::parse("p").unwrap(),
            "wallet_outbox",
            "a1",
            first.updated_at_ms,
            batch_id,
        ),
        content: ContentFacts {
            row_count: members.len() as u64,
            first: Cursor {
                updated_at_ms: first.updated_at_ms,
                event_id: first.event_id.clone(),
            },
            last: Cursor {
                updated_at_ms: last.updated_at_ms,
                event_id: last.event_id.clone(),
            },
            min_created_at_ms: 1,
            max_created_at_ms: 2,
            totals: vec![
                (
                    "available_delta_total",
                    TotalValue::Sum(18_446_744_073_709_551_614),
                ),
                ("frozen_delta_total", TotalValue::Sum(-3)),
            ],
            ndjson_sha256: "a".repeat(64),
            uncompressed_bytes: 1000,
        },
        members_proof: None,
        objects: Objects {
            data: ObjectDigest {
                sha256: "b".repeat(64),
                crc64: u64::MAX,
                size: 100,
            },
            data_crc64nvme: None,
            manifest_sha256: format!("{batch_id:0<64}"),
            manifest_crc64: 7,
            success_crc64: 8,
            stored: Default::default(),
        },
        protection: Default::default(),
        link: None,
        log_index: None,
        columns: None,
        life: Lifecycle {
            verified_at_ms,
            ..Lifecycle::default()
        },
    }
}

fn members(range: std::ops::Range<i64>) -> Vec<Member> {
    range
        .map(|i| Member::new(format!("e{i:05}"), T0 + i))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recording_is_atomic_idempotent_and_refuses_conflicts() {
    let db = TestDb::new().await;
    let pool = &db.db.pool;
    let q = Receipts::new(pool, &WALLET_OUTBOX);
    let recorder = Recorder::new(pool, &WALLET_OUTBOX);
    let lock = AppLock::try_acquire(&db.db, &lock_name(&db.lock_prefix(), "wallet_outbox", "a1"))
        .await
        .unwrap()
        .unwrap();
    let none = FailPoints::default();
    let m1 = members(0..1_100); // three chunks of ≤ 500
    let r1 = receipt("b1", &m1, T0 + DAY);
    recorder
        .record(&r1, &m1, Cut::AfterCursor, &lock, &none)
        .await
        .unwrap();
    assert_eq!(db.members("a1").await.len(), 1_100);

    // A retry whose first commit's answer was lost: same controls, a later verification time.
    recorder
        .record(
            &receipt("b1", &m1, T0 + 2 * DAY),
            &m1,
            Cut::AfterCursor,
            &lock,
            &none,
        )
        .await
        .unwrap();
    assert_eq!(db.receipts("a1").await.len(), 1);
    let kept: i64 = sqlx::query_scalar(
        "SELECT verified_at_ms FROM wallet_outbox_archive_receipts WHERE batch_id = 'b1'",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(
        kept,
        T0 + DAY,
        "the receipt keeps its first verification time"
    );
    let member_rows: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM wallet_outbox_archive_members WHERE batch_id = 'b1'",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(
        member_rows,
        m1.len() as i64,
        "the retry added no member row"
    );

    // Same batch id, a control value that differs.
    let mut changed = receipt("b1", &m1, T0 + DAY);
    changed.objects.data.sha256 = "0".repeat(64);
    match recorder
        .record(&changed, &m1, Cut::AfterCursor, &lock, &none)
        .await
    {
        Err(RecordError::ReceiptConflict { field, .. }) => assert_eq!(field, "gzip_sha256"),
        other => panic!("expected a receipt conflict, got {other:?}"),
    }

    // A second batch that claims a member of the first: nothing of it is recorded.
    let m2 = members(1_099..1_300);
    match recorder
        .record(
            &receipt("b2", &m2, T0 + DAY),
            &m2,
            Cut::AfterCursor,
            &lock,
            &none,
        )
        .await
    {
        Err(RecordError::MemberConflict {
            event_id,
            other_batch,
            ..
        }) => {
            assert_eq!((event_id.as_str(), other_batch.as_str()), ("e01099", "b1"));
        }
        other => panic!("expected a member conflict, got {other:?}"),
    }
    assert_eq!(db.receipts("a1").await.len(), 1, "no receipt for b2");
    assert_eq!(db.members("a1").await.len(), 1_100, "no member of b2");

    // A fail point after the members are written rolls everything back.
    let m3 = members(2_000..2_010);
    let err = recorder
        .record(
            &receipt("b3", &m3, T0 + DAY),
            &m3,
            Cut::AfterCursor,
            &lock,
            &FailPoints::at("before-commit"),
        )
        .await;
    assert!(matches!(err, Err(RecordError::Failpoint(_))));
    assert_eq!(db.members("a1").await.len(), 1_100);

    // The cursor is the greatest last cursor among VERIFIED receipts.
    recorder
        .record(
            &receipt("b3", &m3, T0 + DAY),
            &m3,
            Cut::AfterCursor,
            &lock,
            &none,
        )
        .await
        .unwrap();
    let cursor = q.latest_cursor("a1").await.unwrap().unwrap();
    assert_eq!(
        cursor,
        Cursor {
            updated_at_ms: T0 + 2_009,
            event_id: "e02009".into()
        }
    );
    assert_eq!(q.latest_cursor("a2").await.unwrap(), None);
    lock.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_a_receipt_is_never_written_again() {
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 10)).await;
    let env = env(&db, store.clone(), T0 + DAY);
    let opts = options(&db, &["a1"], T0 + DAY);
    assert!(archive(&env, &opts).await.ok);
    let data_key = db.receipts("a1").await[0].1.clone();
    // Make the cursor regress (as a hand-edited table or a bug would), and mark the object so a
    // rewrite would show.
    sqlx::query(
        "UPDATE wallet_outbox_archive_receipts SET last_updated_at_ms = 0, last_event_id = ''",
    )
    .execute(&db.db.pool)
    .await
    .unwrap();
    store
        .put(
            &Key::stored(data_key.clone()),
            Bytes::from_static(b"marker"),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let rerun = archive(&env, &opts).await;
    assert_eq!(rerun.apps[0].outcome, Outcome::Failed);
    assert!(rerun.apps[0]
        .error
        .as_deref()
        .unwrap()
        .contains("already has a VERIFIED receipt"));
    assert_eq!(
        read(store.as_ref(), &data_key).await,
        b"marker",
        "never written again"
    );
}

/// Commands read receipts a page at a time, in (app, cursor) order, never the whole list: every
/// receipt comes exactly once across page boundaries and apps, whatever the page size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_stream_in_pages_in_cursor_order() {
    use futures_util::TryStreamExt;
    use outbox_archiver::ReceiptScope;
    let db = TestDb::new().await;
    let pool = &db.db.pool;
    let q = Receipts::new(pool, &WALLET_OUTBOX);
    let recorder = Recorder::new(pool, &WALLET_OUTBOX);
    let none = FailPoints::default();
    let mut want = Vec::new();
    for app in ["a1", "a2"] {
        let lock =
            AppLock::try_acquire(&db.db, &lock_name(&db.lock_prefix(), "wallet_outbox", app))
                .await
                .unwrap()
                .unwrap();
        for i in 0..11 {
            let m = members(i * 3..i * 3 + 3);
            let mut r = receipt(&format!("{app}b{i:02}"), &m, T0 + DAY);
            r.app_code = app.into();
            recorder
                .record(&r, &m, Cut::AfterCursor, &lock, &none)
                .await
                .unwrap();
            want.push(format!("{app}b{i:02}"));
        }
        lock.release().await;
    }
    for page in [1, 4, 11, 500] {
        let got: Vec<String> = q
            .stream_in_pages(ReceiptScope::default(), page)
            .map_ok(|r| r.batch_id)
            .try_collect()
            .await
            .unwrap();
        assert_eq!(got, want, "pages of {page}");
    }
}

/// A receipt set by hand to a state this tool never writes (issue 34): the app's cursor counts
/// only VERIFIED receipts, so when it is the app's newest the next run builds that batch again.
/// Every run then stops the app there with the state named and the way out — not "already has a
/// VERIFIED receipt" — and writes nothing; verify reports the receipt (exit 1); set back to
/// VERIFIED, the app goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_set_to_another_state_by_hand_is_named_and_stops_only_its_app() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let envs = cli_envs(&db, &s3);
    db.insert(&rows("a1", 30)).await;
    db.insert(&rows("a2", 10)).await;
    let cutoff = "2026-01-04T00:00:00Z";
    let archive = [
        "archive",
        "--all-apps",
        "--batch-rows",
        "10",
        "--cutoff",
        cutoff,
    ];
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let newest: String = sqlx::query_scalar(
        "SELECT CAST(batch_id AS CHAR) FROM wallet_outbox_archive_receipts WHERE app_code = 'a1' \
         ORDER BY last_updated_at_ms DESC LIMIT 1",
    )
    .fetch_one(&db.db.pool)
    .await
    .unwrap();
    db.exec(&format!(
        "UPDATE wallet_outbox_archive_receipts SET state = 'WITHDRAWN' WHERE batch_id = '{newest}'"
    ))
    .await;
    let before = keys(s3.store().await.as_ref()).await;
    for _ in 0..2 {
        let run = run_cli(&archive, &envs).await;
        assert_eq!(run.code, 1, "{}", run.all_output);
        let a1 = &run.summary["apps"][0];
        assert_eq!(a1["outcome"], "failed", "{}", run.summary);
        let error = a1["error"].as_str().unwrap();
        assert!(
            error.contains(&format!("batch {newest} has a receipt in state WITHDRAWN"))
                && error.contains("set its state back to VERIFIED"),
            "{error}"
        );
        assert_eq!(
            run.summary["apps"][1]["outcome"], "up_to_date",
            "a2 goes on"
        );
    }
    assert_eq!(
        keys(s3.store().await.as_ref()).await,
        before,
        "nothing written"
    );
    let verify = [
        "verify",
        "--all-apps",
        "--metadata-only",
        "--cutoff",
        cutoff,
    ];
    let run = run_cli(&verify, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    let finding = &run.summary["findings"][0];
    assert_eq!(finding["kind"], "receipt_not_verified", "{}", run.summary);
    assert_eq!(finding["batch_id"], newest.as_str());
    assert!(finding["actual"]
        .as_str()
        .unwrap()
        .contains("state WITHDRAWN"));
    db.exec(&format!(
        "UPDATE wallet_outbox_archive_receipts SET state = 'VERIFIED' WHERE batch_id = '{newest}'"
    ))
    .await;
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&verify, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
}
