//! No run may fail the same way forever (SPEC §5.10), found by an adversarial review: a NO PAD
//! binary event id beside the archiver's PAD SPACE tables (`x` and `x ` are two rows there, one
//! key here), stragglers that re-form a batch that already has a receipt, and a drill of a batch
//! whose event ids sort one way by bytes and another by the table's collation.

use outbox_archiver::purge;
use outbox_archiver::Value;
use outbox_archiver::{restore, restore::RestoreOptions};

use crate::support::*;

/// The server's NO PAD binary collation of utf8mb4.
fn no_pad_bin() -> &'static str {
    match flavour() {
        Flavour::MariaDb => "utf8mb4_nopad_bin",
        Flavour::MySql => "utf8mb4_0900_bin",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_pad_event_id_is_refused_with_the_alters_that_fix_it_then_works() {
    let db = TestDb::new().await;
    db.exec(&format!(
        "ALTER TABLE wallet_outbox MODIFY event_id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE {} NOT NULL",
        no_pad_bin()
    ))
    .await;
    // Two rows a NO PAD collation tells apart and a PAD SPACE one holds equal.
    db.insert(&[
        row("a1", "x", T0),
        row("a1", "x ", T0 + 1),
        row("a1", "y", T0 + 2),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let envs = vec![
        ("DATABASE_URL", db.url.clone()),
        (
            "OUTBOX_ARCHIVER_STORE",
            format!("file://{}", dir.path().display()),
        ),
        ("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()),
    ];
    let archive_args = ["archive", "--app", "a1", "--cutoff", "2026-01-02T00:00:00Z"];
    let refused = run_cli(&archive_args, &envs).await;
    assert_eq!(refused.code, 2, "{}", refused.all_output);
    let error = refused.summary["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("NO PAD") && error.contains("ALTER TABLE"),
        "{error}"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_receipts")
            .await,
        0
    );
    // The fix, as the message gives it.
    let fix = error
        .split("fix it with: ")
        .nth(1)
        .expect("the statements")
        .to_string();
    for statement in fix.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        db.exec(statement).await;
    }
    let archived = run_cli(&archive_args, &envs).await;
    assert_eq!(archived.code, 0, "{}", archived.all_output);
    assert_eq!(archived.summary["apps"][0]["rows"], 3);
    let purged = run_cli(&["purge", "--app", "a1", "--grace", "0s"], &envs).await;
    assert_eq!(purged.code, 0, "{}", purged.all_output);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stragglers_that_re_form_a_recorded_batch_get_their_member_rows_back() {
    let (db, _s3, _store, env) = archived_env(&rows("a1", 10), &["a1"], 100).await;
    // The batch's member rows are gone (as compaction leaves a batch whose rows left the source)
    // and its rows are back in the source as they were (put back by hand): stragglers that
    // form exactly the recorded batch.
    db.exec("DELETE FROM wallet_outbox_archive_members").await;
    let mut opts = options(&db, &["a1"], ARCHIVED_CUTOFF);
    opts.stragglers = true;
    for attempt in 0..2 {
        let archived = archive(&env, &opts).await;
        assert!(archived.ok, "attempt {attempt}: {}", archived.to_json());
    }
    assert_eq!(
        db.members("a1").await.len(),
        10,
        "their member rows are back"
    );
    assert_eq!(db.receipts("a1").await.len(), 1, "no second receipt");
    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert!(purged.ok, "{}", purged.to_json());
    assert_eq!(purge_of(&purged, "a1").purged_rows, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_of_ids_that_sort_otherwise_by_collation_passes() {
    // `x\t` sorts before `x` under a PAD SPACE collation (`x` is padded with spaces, and a tab
    // is below a space), after it by bytes.
    let mut rows = vec![row("a1", "x", T0), row("a1", "x\t", T0 + 1)];
    rows[1][at("event_id")] = Value::Text("x\t".into());
    let (_db, _s3, _store, env) = archived_env(&rows, &["a1"], 100).await;
    let drilled = restore::run(
        &env,
        &RestoreOptions {
            drill: true,
            ..Default::default()
        },
    )
    .await;
    assert!(drilled.ok, "{}", drilled.to_json());
}
