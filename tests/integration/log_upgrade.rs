//! The linear chain an older build left (issue 43), at the edges of the upgrade: a purge run
//! between `migrate` and the new build's first archive, a break the older build accepted, and a
//! fork it reported — each through the binary, on a store and database laid out as the build of
//! 2d518d8 left them (receipts linked, `_chain/` checkpoints, no log).

use outbox_archiver::format::Key;
use outbox_archiver::{chain, ObjectStore, PutMode};

use crate::log_rollback::{binary_env, ARCHIVE, CUTOFF, VERIFY};
use crate::support::*;

/// Turns what this build archived for a1 into what the build of 2d518d8 left: the receipts
/// linked but in no log, the chain anchored by a checkpoint of links `1..=n` under `_chain/`
/// (`links` of them: all, by default), no log, no log identity, no heads.
async fn as_an_older_build_left(
    db: &TestDb,
    store: &dyn ObjectStore,
    links: Option<u64>,
) -> String {
    db.exec("UPDATE wallet_outbox_archive_receipts SET log_index = NULL")
        .await;
    for key in keys(store).await {
        if key.contains("/_log/") {
            store.delete(&Key::stored(key.clone())).await.unwrap();
        }
    }
    db.exec("DELETE FROM wallet_outbox_archive_log_heads").await;
    db.exec("DELETE FROM wallet_outbox_archive_logs").await;
    let n = match links {
        Some(n) => n,
        None => {
            db.count("SELECT COUNT(*) FROM wallet_outbox_archive_receipts WHERE app_code = 'a1'")
                .await as u64
        }
    };
    let links = outbox_archiver::Receipts::new(&db.db.pool, db.spec)
        .links("a1", 1, n)
        .await
        .unwrap();
    let table = outbox_archiver::format::table_prefix(store.location().prefix(), "wallet_outbox");
    let legacy = chain::Checkpoint::new("wallet_outbox", "a1", chain::GENESIS, links);
    let key = chain::checkpoint_key(table.as_str(), "a1", legacy.head().unwrap());
    store
        .put(
            &Key::stored(key.clone()),
            legacy.to_bytes().into(),
            PutMode::Create,
        )
        .await
        .unwrap();
    key
}

/// A nightly purge on the new image before its first archive: the batches wait for the log —
/// outcome stopped, exit 0, one line for the app, no error per batch — and the purge after the
/// first archive takes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_before_the_first_archive_of_a_new_build_waits_and_alerts_for_nothing() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let envs = binary_env(&db, &s3);
    db.insert(&rows("a1", 50)).await;
    let run = run_cli(&ARCHIVE, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    as_an_older_build_left(&db, store.as_ref(), None).await;
    let run = run_cli(&["migrate"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);

    let purge = ["purge", "--app", "a1", "--grace", "0s"];
    let run = run_cli(&purge, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let app = &run.summary["apps"][0];
    assert_eq!(app["outcome"], "stopped", "{}", run.all_output);
    assert!(
        app["stop_reason"]
            .as_str()
            .unwrap()
            .starts_with("5 batch(es) wait for the next `outbox-archiver archive` of the app"),
        "{}",
        run.all_output
    );
    assert_eq!(app["waiting_for_log"].as_array().unwrap().len(), 5, "{app}");
    assert_eq!(app["failed_batches"], serde_json::json!([]), "{app}");
    assert!(
        !run.all_output.contains("is not proven"),
        "no line per batch: {}",
        run.all_output
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 50);

    let run = run_cli(&["archive", "--app", "a1", "--cutoff", CUTOFF], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&purge, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        run.summary["apps"][0]["outcome"], "done",
        "{}",
        run.all_output
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
}

/// A break the older build accepted (a database restored: the checkpoint of the lost branch at
/// seq 15 abandoned, the chain gone on from seq 10): the new build carries the chain that went
/// on — all ten sound links — instead of refusing it, and verify, the statement and the
/// auditor's script name the old break.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_break_the_older_build_accepted_is_honoured_when_its_chain_is_carried_over() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let envs = binary_env(&db, &s3);
    db.insert(&rows("a1", 100)).await;
    let run = run_cli(&ARCHIVE, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let live = as_an_older_build_left(&db, store.as_ref(), None).await;
    assert!(live.contains("/00000000000000000010-"), "{live}");
    // The lost branch: a checkpoint at seq 15 the database never had, abandoned by the break.
    let prefix = live.rsplit_once('/').unwrap().0;
    let head: String = sqlx::query_scalar(
        "SELECT CAST(chain_link AS CHAR) FROM wallet_outbox_archive_receipts WHERE chain_seq = 10",
    )
    .fetch_one(&db.db.pool)
    .await
    .unwrap();
    let lost = format!("{prefix}/00000000000000000015-0123456789abcdef.json");
    store
        .put(
            &Key::stored(lost.clone()),
            b"{\"lost\":true}\n".to_vec().into(),
            PutMode::Create,
        )
        .await
        .unwrap();
    let old_break = format!("{prefix}/00000000000000000011-break-{}.json", &head[..16]);
    let record = serde_json::json!({
        "schema": "outbox-archive-chain-break/v1", "table": "wallet_outbox", "app_code": "a1",
        "from_seq": 11, "prev_link": head, "abandoned": [lost], "head_seq": 10,
        "head_link": head, "reason": "restored from the 03:00 backup, INC-4711",
        "accepted_at_ms": T0,
    });
    store
        .put(
            &Key::stored(old_break.clone()),
            format!("{record}\n").into_bytes().into(),
            PutMode::Create,
        )
        .await
        .unwrap();
    let run = run_cli(&["archive", "--app", "a1", "--cutoff", CUTOFF], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let transition: serde_json::Value = serde_json::from_slice(
        &read(
            store.as_ref(),
            &crate::log::log_key(store.as_ref(), "a1", "transition.json"),
        )
        .await,
    )
    .unwrap();
    assert_eq!(transition["legacy_head_seq"], 10, "{transition}");
    assert_eq!(
        transition["legacy_checkpoint"],
        live.as_str(),
        "{transition}"
    );
    assert_eq!(
        transition["legacy_breaks"][0],
        old_break.as_str(),
        "{transition}"
    );
    let verify = VERIFY;
    let run = run_cli(&verify, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert!(
        run.summary["apps"][0]["log_breaks_accepted"][0]
            .as_str()
            .unwrap()
            .contains("carried over past a break that build accepted"),
        "{}",
        run.all_output
    );
    let copy_dir = tempfile::tempdir().unwrap();
    let copy = crate::log::copy_of(store.as_ref(), copy_dir.path()).await;
    let (code, out) = crate::log::audit_script(&copy);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("a1: carries on the linear chain to seq 10")
            && out.contains("past a break its older build accepted"),
        "{out}"
    );
}

/// A fork the older build reported and no one accepted (a receipt's link changed since its
/// checkpoint): the new verify reports it as the older build did, before any log carries the
/// chain; accepted, the log starts without the chain, and verify, the statement and the
/// auditor's script say what was not carried over and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_the_older_build_reported_is_reported_until_accepted_and_named_after() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let envs = binary_env(&db, &s3);
    db.insert(&rows("a1", 30)).await;
    let run = run_cli(&ARCHIVE, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    as_an_older_build_left(&db, store.as_ref(), None).await;
    db.exec(&format!(
        "UPDATE wallet_outbox_archive_receipts SET chain_link = '{}' WHERE chain_seq = 3",
        "f".repeat(64)
    ))
    .await;
    let verify = VERIFY;
    let run = run_cli(&verify, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output.contains("log_mismatch")
            && run
                .all_output
                .contains("continuing the linear chain of an older build"),
        "{}",
        run.all_output
    );
    let run = run_cli(&["archive", "--app", "a1", "--cutoff", CUTOFF], &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    let accept = [
        "archive",
        "--app",
        "a1",
        "--cutoff",
        CUTOFF,
        // The flag's name before 2026-12-05 (`--accept-log-break` now), read for one release.
        "--accept-chain-break",
        "receipt 3 rewritten by hand, INC-99",
    ];
    let run = run_cli(&accept, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&verify, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let accepted = run.summary["apps"][0]["log_breaks_accepted"].to_string();
    assert!(
        accepted.contains("was not carried over: receipt 3 rewritten by hand, INC-99"),
        "{}",
        run.all_output
    );
    crate::log::recorded_days_ago(&db, 1).await;
    let day = outbox_archiver::utc_date(chrono::Utc::now().timestamp_millis() - DAY);
    let (code, statement) = crate::log::run_cli_stdout(
        &["attest", "--app", "a1", "--from", &day, "--to", &day],
        &envs,
    )
    .await;
    assert_eq!(code, 0, "{statement}");
    assert!(
        statement.contains("was not carried over: receipt 3 rewritten by hand, INC-99"),
        "{statement}"
    );
    let copy_dir = tempfile::tempdir().unwrap();
    let copy = crate::log::copy_of(store.as_ref(), copy_dir.path()).await;
    let (code, out) = crate::log::audit_script(&copy);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("a1: the linear chain of an older build was NOT carried over (accepted): receipt 3 rewritten by hand, INC-99"),
        "{out}"
    );
}
