//! Members compaction against the real servers: receipts purged long enough ago keep a digest
//! of their `(event_id, updated_at_ms)` pairs instead of member rows; verify still proves every
//! batch (and finds a flipped byte), restore and drill still come back exact, a restore into the
//! source gives its rows their member rows back, a kill at any point converges, and a receipt not
//! fully purged — or whose members disagree with its data object — is never compacted.

use bytes::Bytes;
use outbox_archiver::format;
use outbox_archiver::format::Key;
use outbox_archiver::purge;
use outbox_archiver::Apps;
use outbox_archiver::CompactApp;
use outbox_archiver::PutMode;
use outbox_archiver::{compact, compact::CompactOptions};
use outbox_archiver::{restore, restore::RestoreOptions};
use outbox_archiver::{verify, verify::VerifyOptions};
use outbox_archiver::{AppDetails, Summary};

use crate::support::*;

const CUTOFF: i64 = T0 + DAY;

fn compact_opts(db: &TestDb, apps: &[&str]) -> CompactOptions {
    let mut opts = CompactOptions::new(
        Apps::Listed(apps.iter().map(|a| a.to_string()).collect()),
        0,
    );
    opts.lock_prefix = db.lock_prefix();
    opts
}

fn compact_of<'s>(summary: &'s Summary, app: &str) -> &'s CompactApp {
    match &report(summary, app).details {
        Some(AppDetails::Compact(details)) => details,
        other => panic!(
            "{app}: no compact figures but {other:?}: {}",
            summary.to_json()
        ),
    }
}

/// The receipts' digest columns, by batch, in cursor order.
async fn digests(db: &TestDb, app: &str) -> Vec<(String, Option<String>, Option<i64>, i64)> {
    sqlx::query_as(
        "SELECT batch_id, members_digest_sha256, members_digest_rows, compacted_member_rows \
         FROM wallet_outbox_archive_receipts WHERE app_code = ? ORDER BY last_updated_at_ms",
    )
    .bind(app)
    .fetch_all(&db.db.pool)
    .await
    .unwrap()
}

/// 60 rows of app a1 archived in three batches of 20 and purged, through the binary into a
/// `file://` store in `dir`; the settings that reach them.
async fn archived_and_purged(db: &TestDb, dir: &std::path::Path) -> Vec<(&'static str, String)> {
    db.insert(&rows("a1", 60)).await;
    let base = vec![
        ("DATABASE_URL", db.url.clone()),
        ("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()),
        ("OUTBOX_ARCHIVER_STORE", format!("file://{}", dir.display())),
    ];
    for args in [
        vec![
            "archive",
            "--app",
            "a1",
            "--batch-rows",
            "20",
            "--cutoff",
            "2026-01-02T00:00:00Z",
        ],
        vec!["purge", "--app", "a1", "--grace", "0s"],
    ] {
        let run = run_cli(&args, &base).await;
        assert_eq!(run.code, 0, "{args:?}: {}", run.all_output);
    }
    base
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacted_receipts_keep_a_digest_and_every_batch_stays_provable() {
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 1_200)).await;
    let ctx = env(&db, store.clone(), CUTOFF + DAY);
    let mut opts = options(&db, &["a1"], CUTOFF);
    opts.limits.max_rows = 500;
    assert!(archive(&ctx, &opts).await.ok);
    let archived = archived_rows(&db, store.as_ref(), "a1").await;
    // One row changes after it was archived: purge keeps it, and so does compaction.
    sqlx::query(
        "UPDATE wallet_outbox SET status = 'FAILED' WHERE app_code = 'a1' AND event_id = 'e7'",
    )
    .execute(&db.db.pool)
    .await
    .unwrap();
    assert!(purge::run(&ctx, &purge_options(&db, &["a1"])).await.ok);
    // A later batch that is not purged yet.
    db.insert(&[row("a1", "late", T0 + 2 * DAY)]).await;
    let later = env(&db, store.clone(), CUTOFF + 3 * DAY);
    assert!(
        archive(&later, &options(&db, &["a1"], CUTOFF + 2 * DAY))
            .await
            .ok
    );

    let compacted = compact::run(&later, &compact_opts(&db, &["a1"])).await;
    assert!(compacted.ok, "{}", compacted.to_json());
    let figures = compact_of(&compacted, "a1");
    assert_eq!(figures.compacted_batches, 3);
    assert_eq!(
        figures.compacted_member_rows, 1_199,
        "e7 is still in the source"
    );
    assert_eq!(
        report(&compacted, "a1")
            .stop_reason
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("done")
    );
    let members = db.members("a1").await;
    let left: Vec<&str> = members.iter().map(|m| m.0.as_str()).collect();
    assert_eq!(
        left,
        vec!["e7", "late"],
        "the kept row and the unpurged batch keep theirs"
    );
    // Each digest is the documented function of the batch's pairs.
    let recorded = digests(&db, "a1").await;
    assert_eq!(recorded.len(), 4);
    let mut start = 0;
    for (batch, sha, rows, _) in &recorded[..3] {
        let n = rows.unwrap() as usize;
        let pairs = archived[start..start + n].iter().map(|r| {
            (
                r[at("event_id")].as_str().unwrap(),
                r[at("updated_at_ms")].as_i64().unwrap(),
            )
        });
        assert_eq!(
            sha.as_deref(),
            Some(format::members_digest(pairs).sha256.as_str()),
            "{batch}"
        );
        start += n;
    }
    assert_eq!(start, 1_200);
    assert_eq!(
        recorded[3].1, None,
        "a receipt not fully purged is never compacted"
    );

    // verify proves the compacted batches from their data objects, in full and by HEAD.
    let everything = VerifyOptions::everything(CUTOFF + 2 * DAY, "DELIVERED");
    for metadata_only in [false, true] {
        let verified = verify::run(
            &later,
            &VerifyOptions {
                metadata_only,
                ..everything.clone()
            },
        )
        .await;
        assert!(verified.ok, "{}", verified.to_json());
        assert_eq!(verify_run(&verified).checked_batches.len(), 4);
    }
    // status counts them and what they saved.
    let status = outbox_archiver::status::run(
        &db_context(&db, CUTOFF + 3 * DAY),
        &outbox_archiver::status::StatusOptions {
            grace_ms: 86_400_000,
            apps: Apps::Listed(vec!["a1".into()]),
            cutoff_ms: CUTOFF + 2 * DAY,
            delivered_status: "DELIVERED".into(),
        },
    )
    .await;
    let s = status_of(&status, "a1");
    assert_eq!((s.compacted_receipts, s.compacted_member_rows), (3, 1_199));
    assert!(s.compacted_bytes_saved.unwrap() > 0, "{}", status.to_json());

    // restore and drill bring every compacted batch back exact.
    let restored = restore::run(&later, &RestoreOptions::default()).await;
    assert!(restored.ok, "{}", restored.to_json());
    assert_eq!(restore_of(&restored, "a1").restored_rows, 1_201);
    let drilled = restore::run(
        &later,
        &RestoreOptions {
            drill: true,
            ..RestoreOptions::default()
        },
    )
    .await;
    assert!(drilled.ok, "{}", drilled.to_json());
    assert!(restore_of(&drilled, "a1")
        .drills
        .as_ref()
        .unwrap()
        .iter()
        .all(|d| d.ok));

    // A digest that does not match its data object's pairs is found.
    let tampered = &recorded[0].0;
    sqlx::query("UPDATE wallet_outbox_archive_receipts SET members_digest_rows = members_digest_rows - 1 WHERE batch_id = ?")
        .bind(tampered)
        .execute(&db.db.pool)
        .await
        .unwrap();
    let verified = verify::run(&later, &everything).await;
    assert_eq!(verified.exit_code, 1, "{}", verified.to_json());
    let kinds: Vec<String> = verify_run(&verified).findings.iter().map(kind).collect();
    assert_eq!(
        kinds,
        vec!["members_digest_mismatch"],
        "{}",
        verified.to_json()
    );
    sqlx::query("UPDATE wallet_outbox_archive_receipts SET members_digest_rows = members_digest_rows + 1 WHERE batch_id = ?")
        .bind(tampered)
        .execute(&db.db.pool)
        .await
        .unwrap();

    // A flipped byte in a compacted batch's data object is found.
    let key = db.receipts("a1").await[1].1.clone();
    let mut bytes = read(store.as_ref(), &key).await;
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    store
        .put(
            &Key::stored(key.clone()),
            Bytes::from(bytes),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let verified = verify::run(&later, &everything).await;
    assert_eq!(verified.exit_code, 1, "{}", verified.to_json());
    assert!(
        verify_run(&verified)
            .findings
            .iter()
            .any(|f| kind(f) == "sha256_mismatch" && f.key.as_deref() == Some(key.as_str())),
        "{}",
        verified.to_json()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_batch_restored_into_the_source_gets_its_member_rows_back() {
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 40)).await;
    let ctx = env(&db, store.clone(), CUTOFF + DAY);
    assert!(archive(&ctx, &options(&db, &["a1"], CUTOFF)).await.ok);
    assert!(purge::run(&ctx, &purge_options(&db, &["a1"])).await.ok);
    assert!(compact::run(&ctx, &compact_opts(&db, &["a1"])).await.ok);
    assert!(db.members("a1").await.is_empty());

    let mut into_source = RestoreOptions {
        into_source: true,
        lock_prefix: db.lock_prefix(),
        ..RestoreOptions::default()
    };
    into_source.selection.apps = Some(Apps::Listed(vec!["a1".into()]));
    let restored = restore::run(&ctx, &into_source).await;
    assert!(restored.ok, "{}", restored.to_json());
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 40);
    assert_eq!(
        db.members("a1").await.len(),
        40,
        "members back with the rows"
    );
    // Not stragglers: verify is clean; and purge --include-restored can take them again.
    let verified = verify::run(&ctx, &VerifyOptions::everything(CUTOFF, "DELIVERED")).await;
    assert!(verified.ok, "{}", verified.to_json());
    let mut again = purge_options(&db, &["a1"]);
    again.include_restored = true;
    let purged = purge::run(&ctx, &again).await;
    assert!(purged.ok, "{}", purged.to_json());
    assert_eq!(purge_of(&purged, "a1").purged_rows, 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_that_disagree_with_the_data_object_are_never_compacted() {
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 30)).await;
    let ctx = env(&db, store.clone(), CUTOFF + DAY);
    assert!(archive(&ctx, &options(&db, &["a1"], CUTOFF)).await.ok);
    assert!(purge::run(&ctx, &purge_options(&db, &["a1"])).await.ok);
    sqlx::query(
        "DELETE FROM wallet_outbox_archive_members WHERE app_code = 'a1' AND event_id = 'e3'",
    )
    .execute(&db.db.pool)
    .await
    .unwrap();
    let compacted = compact::run(&ctx, &compact_opts(&db, &["a1"])).await;
    assert_eq!(compacted.exit_code, 1, "{}", compacted.to_json());
    let figures = compact_of(&compacted, "a1");
    assert_eq!(figures.compacted_batches, 0);
    assert_eq!(figures.failed_batches.len(), 1);
    assert!(figures.findings.iter().any(|f| kind(f) == "member_missing"));
    assert_eq!(db.members("a1").await.len(), 29, "nothing more deleted");
    assert_eq!(digests(&db, "a1").await[0].1, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_compaction_leaves_the_members_or_the_digest_and_a_rerun_converges() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let base = archived_and_purged(&db, dir.path()).await;
    for point in ["compact-after-delete", "compact-before-commit"] {
        let mut envs = base.clone();
        envs.push(("OUTBOX_ARCHIVER_FAILPOINT", point.to_string()));
        let mut command = tokio::process::Command::new(binary());
        command
            .args(["compact", "--app", "a1", "--older-than", "0s"])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(envs.iter().map(|(k, v)| (*k, v.as_str())));
        let out = command.output().await.unwrap();
        assert!(!out.status.success(), "{point}: the process dies there");
        // The first batch's transaction died: its members are all there, no digest anywhere.
        assert_eq!(db.members("a1").await.len(), 60, "{point}");
        assert!(
            digests(&db, "a1").await.iter().all(|d| d.1.is_none()),
            "{point}"
        );
    }
    let run = run_cli(&["compact", "--app", "a1", "--older-than", "0s"], &base).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(run.summary["apps"][0]["compacted_batches"], 3);
    assert_eq!(run.summary["apps"][0]["compacted_member_rows"], 60);
    assert!(db.members("a1").await.is_empty());
    let run = run_cli(
        &["verify", "--app", "a1", "--cutoff", "2026-01-02T00:00:00Z"],
        &base,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    // Compacting again finds nothing left to do.
    let run = run_cli(&["compact", "--app", "a1", "--older-than", "0s"], &base).await;
    assert_eq!(run.summary["apps"][0]["compacted_batches"], 0);
}

/// `compact --max-batches N` through the binary: each app stops after N batches, says why,
/// exits 0 (a limit, not a failure), and the next run takes the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_batches_bounds_a_compaction_run_and_the_next_run_takes_the_rest() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let base = archived_and_purged(&db, dir.path()).await;
    let compact = [
        "compact",
        "--app",
        "a1",
        "--older-than",
        "0s",
        "--max-batches",
        "2",
    ];
    let run = run_cli(&compact, &base).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let app = &run.summary["apps"][0];
    assert_eq!(app["compacted_batches"], 2, "{}", run.summary);
    assert_eq!(app["compacted_member_rows"], 40, "{}", run.summary);
    assert_eq!(
        app["stop_reason"], "--max-batches reached",
        "{}",
        run.summary
    );
    assert_eq!(db.members("a1").await.len(), 20);
    // The rest on the next run, which ends because nothing is left, not on the limit.
    let run = run_cli(&compact, &base).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let app = &run.summary["apps"][0];
    assert_eq!(app["compacted_batches"], 1, "{}", run.summary);
    assert_ne!(
        app["stop_reason"], "--max-batches reached",
        "{}",
        run.summary
    );
    assert!(db.members("a1").await.is_empty());
    // `-h` lists it among compact's first options.
    let (code, help) = run_cli_text(&["compact", "-h"], &[]).await;
    assert_eq!(code, 0, "{help}");
    assert!(help.contains("--max-batches"), "{help}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_written_again_after_compaction_is_restored_in_its_newer_version_only() {
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 20)).await;
    let ctx = env(&db, store.clone(), CUTOFF + DAY);
    assert!(archive(&ctx, &options(&db, &["a1"], CUTOFF)).await.ok);
    assert!(purge::run(&ctx, &purge_options(&db, &["a1"])).await.ok);
    assert!(compact::run(&ctx, &compact_opts(&db, &["a1"])).await.ok);
    // The service writes event e5 again, delivered a day later; it is archived in a new batch.
    db.insert(&[row("a1", "e5", T0 + DAY + 5)]).await;
    let later = env(&db, store.clone(), CUTOFF + 3 * DAY);
    assert!(
        archive(&later, &options(&db, &["a1"], CUTOFF + 2 * DAY))
            .await
            .ok
    );
    let restored = restore::run(&later, &RestoreOptions::default()).await;
    assert!(restored.ok, "{}", restored.to_json());
    let figures = restore_of(&restored, "a1");
    assert_eq!(figures.restored_rows, 20);
    assert_eq!(
        figures.superseded_rows, 1,
        "the old e5 is the new batch's to restore"
    );
    assert!(figures.conflicts.is_empty(), "{}", restored.to_json());
    let rows = table_rows(&db, "wallet_outbox_restored", "a1").await;
    let e5 = rows
        .iter()
        .find(|r| r[at("event_id")].as_str() == Some("e5"))
        .unwrap();
    assert_eq!(e5[at("updated_at_ms")].as_i64(), Some(T0 + DAY + 5));
}
