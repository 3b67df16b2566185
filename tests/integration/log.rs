//! The log of an app's batches (README, "The log of batches"), through the real servers: a
//! batch deleted with its receipt, a receipt's totals edited, two archivers racing on one app
//! with the lock out of the way, a database restored from an older backup and archived on, a
//! tile or checkpoint rewritten in the store, receipts recorded before the log and a linear
//! chain carried over, signed checkpoints checked by Go's own tlog and note packages, and a
//! purge after thousands of batches that reads what one batch needs. Each problem is named by
//! `verify` with its leaf, refused by `attest`, and kept from `purge` — only the batches it
//! touches. A batch whose latest check found it damaged is named in every statement of its day
//! until a full verify finds it whole again.

use outbox_archiver::format::Key;
use outbox_archiver::Apps;
use outbox_archiver::RunContext;
use outbox_archiver::Summary;
use outbox_archiver::{attest, attest::AttestOptions, Format};
use outbox_archiver::{migrate, purge};
use outbox_archiver::{verify, verify::VerifyOptions};
use outbox_archiver::{ObjectStore, PutMode};

use crate::support::*;

/// The day the test clock records receipts on: [`ARCHIVED_CUTOFF`] + a day, 2026-01-05.
const RECORDED_DAY: &str = "2026-01-05";

/// A run context the day after [`RECORDED_DAY`]: a statement covers whole days that are over.
fn day_after(db: &TestDb, store: &std::sync::Arc<dyn ObjectStore>) -> RunContext {
    env(db, store.clone(), ARCHIVED_CUTOFF + 2 * DAY)
}

fn attest_options(apps: &[&str]) -> AttestOptions {
    AttestOptions {
        apps: match apps {
            [] => Apps::All,
            apps => Apps::Listed(apps.iter().map(|a| a.to_string()).collect()),
        },
        from: RECORDED_DAY.into(),
        to: RECORDED_DAY.into(),
        previous: None,
    }
}

/// The statement as the binary prints it in `format`, where the run made one.
fn printed(summary: &Summary, format: Format) -> Option<String> {
    summary
        .document
        .as_ref()
        .map(|_| outbox_archiver::render(summary, format, std::time::Duration::ZERO, 0))
}

async fn verify_metadata(env: &RunContext) -> Summary {
    verify::run(
        env,
        &VerifyOptions {
            metadata_only: true,
            ..VerifyOptions::everything(ARCHIVED_CUTOFF, "DELIVERED")
        },
    )
    .await
}

/// The log findings of a verify run: (kind, leaf).
fn log_findings(summary: &Summary) -> Vec<(String, Option<u64>)> {
    verify_run(summary)
        .findings
        .iter()
        .filter(|f| kind(f).starts_with("log_"))
        .map(|f| (kind(f), f.seq))
        .collect()
}

/// The app's receipts in the order they were recorded: (leaf, batch id).
async fn log_of(db: &TestDb, app: &str) -> Vec<(Option<i64>, String)> {
    sqlx::query_as(
        "SELECT log_index, CAST(batch_id AS CHAR) FROM wallet_outbox_archive_receipts \
         WHERE app_code = ? ORDER BY chain_seq",
    )
    .bind(app)
    .fetch_all(&db.db.pool)
    .await
    .unwrap()
}

/// The key of `path` in the app's log.
pub(crate) fn log_key(store: &dyn ObjectStore, folder: &str, path: &str) -> String {
    let table = outbox_archiver::format::table_prefix(store.location().prefix(), "wallet_outbox");
    format!("{table}_log/app_code={folder}/{path}")
}

/// Deletes a batch the way a privileged role could: its three objects, its member rows and its
/// receipt.
pub(crate) async fn delete_batch(db: &TestDb, store: &dyn ObjectStore, batch_id: &str) {
    let keys: (String, String, String) = sqlx::query_as(
        "SELECT data_object_key, manifest_object_key, success_object_key \
         FROM wallet_outbox_archive_receipts WHERE batch_id = ?",
    )
    .bind(batch_id)
    .fetch_one(&db.db.pool)
    .await
    .unwrap();
    for key in [keys.0, keys.1, keys.2] {
        store.delete(&Key::stored(key.clone())).await.unwrap();
    }
    forget_batch(db, batch_id).await;
}

/// What a database restored from a backup taken before the batch no longer has: its receipt
/// and member rows (its objects stay in the store).
async fn forget_batch(db: &TestDb, batch_id: &str) {
    db.exec(&format!(
        "DELETE FROM wallet_outbox_archive_members WHERE batch_id = '{batch_id}'"
    ))
    .await;
    db.exec(&format!(
        "DELETE FROM wallet_outbox_archive_receipts WHERE batch_id = '{batch_id}'"
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_log_is_proven_and_attested_as_canonical_json_and_csv() {
    let (db, _s3, store, env) = archived_env(&rows("a1", 300), &["a1"], 100).await;
    let log = log_of(&db, "a1").await;
    assert_eq!(
        log.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        [Some(0), Some(1), Some(2)]
    );
    // The tree in the store: its head (and its write-once copy under its size), one partial
    // tile and one partial entry bundle.
    assert_eq!(log_size(store.as_ref(), "a1").await, 3);
    let logged: Vec<String> = keys(store.as_ref())
        .await
        .into_iter()
        .filter(|k| k.contains("/_log/"))
        .collect();
    assert_eq!(
        logged,
        [
            log_key(store.as_ref(), "a1", "checkpoint"),
            log_key(store.as_ref(), "a1", "heads/99999999999999996"),
            log_key(store.as_ref(), "a1", "tile/0/000.p/3"),
            log_key(store.as_ref(), "a1", "tile/entries/000.p/3"),
        ]
    );
    let verified = verify_metadata(&env).await;
    assert_eq!(verified.exit_code, 0, "{}", verified.to_json());
    let json = verified.to_json();
    assert!(json.contains(r#""log_size":3"#), "{json}");
    assert!(json.contains(r#""log_appended_to":3"#), "{json}");
    // The names builds before 2026-12-05 gave them, kept for one release (README, Upgrading).
    assert!(json.contains(r#""chain_head":3"#), "{json}");
    assert!(json.contains(r#""chain_anchored_to":3"#), "{json}");

    // The day the receipts were recorded on is not over yet at their clock: no statement of it.
    let early = attest::run(&env, &attest_options(&["a1"])).await;
    assert_eq!(early.exit_code, 2, "{}", early.to_json());
    assert!(
        early.to_json().contains("has not ended yet"),
        "{}",
        early.to_json()
    );
    let statement = attest::run(&day_after(&db, &store), &attest_options(&["a1"])).await;
    assert_eq!(statement.exit_code, 0, "{}", statement.to_json());
    let text = printed(&statement, Format::Json).expect("a statement");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    // Canonical: re-encoding with sorted keys gives the same bytes.
    assert_eq!(
        outbox_archiver::attest::canonical(&doc),
        text,
        "keys sorted, compact, one newline"
    );
    let app = &doc["apps"][0];
    assert_eq!(app["app_code"], "a1");
    assert_eq!(app["log"]["size"], 3);
    assert_eq!(app["log"]["at_start"]["size"], 0);
    assert_eq!(app["log"]["at_end"]["size"], 3);
    assert!(app["log"]["checkpoint"]
        .as_str()
        .unwrap()
        .starts_with("outbox-archive/wallet_outbox/app_code=a1\n3\n"));
    let day = &app["days"][0];
    assert_eq!(day["day"], RECORDED_DAY);
    assert_eq!(day["rows"], 300);
    assert_eq!(day["batches"], 3);
    assert_eq!(day["first_cursor"]["event_id"], "e0");
    assert_eq!(day["last_cursor"]["event_id"], "e299");
    let batch = &day["batch_list"][0];
    assert_eq!(batch["leaf_index"], 0);
    assert_eq!(batch["inclusion_proof"].as_array().unwrap().len(), 2);
    assert_eq!(
        batch["last_full_verification"]["how"],
        "archive (read_back)"
    );
    assert_eq!(batch["storage_class"], "STANDARD");
    // The control totals of the day are the sums of its batches'.
    let sum: i128 = day["batch_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            b["totals"]["available_delta_total"]
                .as_str()
                .unwrap()
                .parse::<i128>()
                .unwrap()
        })
        .sum();
    assert_eq!(day["totals"]["available_delta_total"], sum.to_string());

    // A verify that reads the batches in full is what attest reports as their last check.
    let full = verify::run(
        &env,
        &VerifyOptions::everything(ARCHIVED_CUTOFF, "DELIVERED"),
    )
    .await;
    assert_eq!(full.exit_code, 0, "{}", full.to_json());
    let statement = attest::run(&day_after(&db, &store), &attest_options(&[])).await;
    assert_eq!(statement.exit_code, 0, "{}", statement.to_json());
    let csv = printed(&statement, Format::Csv).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 2, "{csv}");
    assert!(lines[0].starts_with("app_code,day,rows,batches,"), "{csv}");
    assert!(
        lines[0].contains(",log_size_at_end,log_root_at_end,log_checkpoint_size,"),
        "{csv}"
    );
    assert!(
        lines[1].starts_with(&format!("a1,{RECORDED_DAY},300,3,")),
        "{csv}"
    );
    assert!(lines[1].contains(",verify (read_back),"), "{csv}");
    // A day with nothing archived is an empty statement, not a refusal.
    let mut other = attest_options(&["a1"]);
    other.from = "2025-06-01".into();
    other.to = "2025-06-30".into();
    let empty = attest::run(&day_after(&db, &store), &other).await;
    assert_eq!(empty.exit_code, 0, "{}", empty.to_json());
    let doc: serde_json::Value =
        serde_json::from_str(&printed(&empty, Format::Json).unwrap()).unwrap();
    assert_eq!(doc["apps"][0]["days"], serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_deleted_with_its_receipt_is_a_gap_at_its_leaf_and_its_neighbours_purge() {
    let mut both = rows("a1", 300);
    both.extend(rows("a2", 100));
    let (db, _s3, store, env) = archived_env(&both, &["a1", "a2"], 100).await;
    let log = log_of(&db, "a1").await;
    delete_batch(&db, store.as_ref(), &log[1].1).await;
    // And an app of which nothing is left in the database: its rows purged, then its one batch
    // and receipt deleted. Only its log tells.
    let a2 = log_of(&db, "a2").await;
    delete_batch(&db, store.as_ref(), &a2[0].1).await;
    db.exec("DELETE FROM wallet_outbox WHERE app_code = 'a2'")
        .await;
    let everything = verify_metadata(&env).await;
    let gone: Vec<_> = verify_run(&everything)
        .findings
        .iter()
        .filter(|f| {
            kind(f) == "log_gap" && f.expected.as_deref().unwrap_or_default().contains("app a2")
        })
        .collect();
    assert_eq!(gone.len(), 1, "{}", everything.to_json());
    assert_eq!(gone[0].seq, Some(0));
    let all = attest::run(&day_after(&db, &store), &attest_options(&[])).await;
    assert_eq!(all.exit_code, 1, "{}", all.to_json());

    let verified = verify::run(
        &env,
        &VerifyOptions {
            metadata_only: true,
            selection: outbox_archiver::Selection {
                apps: Some(Apps::Listed(vec!["a1".into()])),
                ..Default::default()
            },
            ..VerifyOptions::everything(ARCHIVED_CUTOFF, "DELIVERED")
        },
    )
    .await;
    assert_eq!(verified.exit_code, 1, "{}", verified.to_json());
    assert_eq!(
        log_findings(&verified),
        [("log_gap".to_string(), Some(1))],
        "{}",
        verified.to_json()
    );
    let gap = verify_run(&verified)
        .findings
        .iter()
        .find(|f| kind(f) == "log_gap")
        .unwrap();
    assert_eq!(gap.batch_id.as_deref(), Some(log[1].1.as_str()));
    assert!(
        gap.actual
            .as_deref()
            .unwrap()
            .contains("--accept-log-break"),
        "{gap:?}"
    );

    let statement = attest::run(&day_after(&db, &store), &attest_options(&["a1"])).await;
    assert_eq!(statement.exit_code, 1, "{}", statement.to_json());
    assert!(
        statement.document.is_none(),
        "no statement for a broken period"
    );
    let json = statement.to_json();
    assert!(json.contains("not attested"), "{json}");
    assert!(
        json.contains("log_gap (formerly chain_gap) at leaf 1"),
        "{json}"
    );

    // Each batch is proven on its own: purge takes both neighbours of the gap.
    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert!(purged.ok, "{}", purged.to_json());
    let purge = purge_of(&purged, "a1");
    assert_eq!(purge.purged_rows, 200, "{}", purged.to_json());
    assert!(purge.failed_batches.is_empty(), "{}", purged.to_json());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipts_totals_edited_is_a_mismatch_at_its_leaf_and_only_its_rows_are_kept() {
    let (db, _s3, store, env) = archived_env(&rows("a1", 300), &["a1"], 100).await;
    let log = log_of(&db, "a1").await;
    // A control total edited in the database: the receipt no longer implies the manifest its
    // leaf binds.
    db.exec(&format!(
        "UPDATE wallet_outbox_archive_receipts SET available_delta_total = '999999' WHERE batch_id = '{}'",
        log[1].1
    ))
    .await;
    let verified = verify_metadata(&env).await;
    assert_eq!(verified.exit_code, 1, "{}", verified.to_json());
    assert!(
        log_findings(&verified).contains(&("log_mismatch".to_string(), Some(1))),
        "{}",
        verified.to_json()
    );
    let statement = attest::run(&day_after(&db, &store), &attest_options(&["a1"])).await;
    assert_eq!(statement.exit_code, 1, "{}", statement.to_json());
    assert!(
        statement
            .to_json()
            .contains("log_mismatch (formerly chain_mismatch) at leaf 1"),
        "{}",
        statement.to_json()
    );

    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    let purge = purge_of(&purged, "a1");
    assert_eq!(purge.purged_rows, 200, "{}", purged.to_json());
    assert_eq!(purge.failed_batches, [log[1].1.clone()]);
    assert_eq!(kind(&purge.findings[0]), "log_mismatch");
    assert_eq!(purge.findings[0].seq, Some(1));
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox").await,
        100,
        "the rows of the edited batch are all still there"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archivers_racing_on_one_app_never_fork_its_log() {
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 2_000)).await;
    let env = env(&db, store.clone(), ARCHIVED_CUTOFF + DAY);
    // Each under a lock prefix of its own: the app's lock does not keep them apart, only the
    // database and the store's create-only writes do.
    let mut first = options(&db, &["a1"], ARCHIVED_CUTOFF);
    first.limits.max_rows = 100;
    let mut second = first.clone();
    first.lock_prefix = format!("{}-first", db.lock_prefix());
    second.lock_prefix = format!("{}-second", db.lock_prefix());
    let (a, b) = tokio::join!(archive(&env, &first), archive(&env, &second));
    // Finish whatever one of them left, then every receipt is a leaf, once, and verify is
    // clean.
    let done = archive(&env, &options(&db, &["a1"], ARCHIVED_CUTOFF)).await;
    let mut leaves: Vec<i64> = log_of(&db, "a1")
        .await
        .iter()
        .map(|(l, _)| l.expect("logged"))
        .collect();
    leaves.sort();
    assert_eq!(
        leaves,
        (0..leaves.len() as i64).collect::<Vec<_>>(),
        "leaves 0..n, each once: {}\n{}\n{}",
        a.to_json(),
        b.to_json(),
        done.to_json()
    );
    assert_eq!(log_size(store.as_ref(), "a1").await, leaves.len() as u64);
    let verified = verify_metadata(&env).await;
    assert_eq!(log_findings(&verified), [], "{}", verified.to_json());
    assert_eq!(verified.exit_code, 0, "{}", verified.to_json());
    assert_eq!(
        db.count("SELECT CAST(SUM(row_count) AS SIGNED) FROM wallet_outbox_archive_receipts")
            .await,
        2_000
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restored_from_an_older_backup_is_reported_not_papered_over() {
    let (db, _s3, store, env) = archived_env(&rows("a1", 400), &["a1"], 100).await;
    let log = log_of(&db, "a1").await;
    assert_eq!(log.len(), 4);
    // The backup was taken after the second batch: the third and fourth receipts are lost.
    forget_batch(&db, &log[2].1).await;
    forget_batch(&db, &log[3].1).await;
    let verified = verify_metadata(&env).await;
    assert_eq!(
        log_findings(&verified),
        [
            ("log_gap".to_string(), Some(2)),
            ("log_gap".to_string(), Some(3))
        ],
        "{}",
        verified.to_json()
    );
    // Archive and purge notice it before they work: nothing is cut again from the older
    // cursor, nothing purged on the older picture, and the run says what to do.
    let mut on = options(&db, &["a1"], ARCHIVED_CUTOFF);
    on.limits.max_rows = 150;
    let archived = archive(&env, &on).await;
    assert_eq!(archived.exit_code, 1, "{}", archived.to_json());
    let said = archived.to_json();
    assert!(
        said.contains("the database is behind the store")
            && said.contains("outbox-archiver recover --app a1"),
        "{said}"
    );
    assert_eq!(
        db.count("SELECT CAST(SUM(row_count) AS SIGNED) FROM wallet_outbox_archive_receipts")
            .await,
        200,
        "nothing archived again"
    );
    assert_eq!(log_size(store.as_ref(), "a1").await, 4, "nothing appended");
    let statement = attest::run(&day_after(&db, &store), &attest_options(&["a1"])).await;
    assert_eq!(statement.exit_code, 1, "{}", statement.to_json());
    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert_eq!(purged.exit_code, 1, "{}", purged.to_json());
    assert!(
        purged
            .to_json()
            .contains("the database is behind the store"),
        "{}",
        purged.to_json()
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox").await,
        400,
        "nothing purged"
    );

    // Investigated: the operator accepts the break rather than `recover` (tests/integration/
    // recover.rs). It is recorded, write-once; the rows are archived again in other batches and
    // their receipts appended after the store's leaves, which stay.
    let mut accept = options(&db, &["a1"], ARCHIVED_CUTOFF);
    accept.limits.max_rows = 150;
    accept.accept_log_break = Some("restored from the 03:00 backup, INC-4711".into());
    let accepted = archive(&env, &accept).await;
    assert!(accepted.ok, "{}", accepted.to_json());
    let key = archive_of(&accepted, "a1")
        .log
        .break_record
        .clone()
        .expect("a break written");
    assert_eq!(
        key,
        log_key(store.as_ref(), "a1", "breaks/00000000000000000002-2.json")
    );
    let record: serde_json::Value =
        serde_json::from_slice(&read(store.as_ref(), &key).await).unwrap();
    assert_eq!(
        record["leaves"],
        serde_json::json!([[2, log[2].1], [3, log[3].1]])
    );
    assert_eq!(log_size(store.as_ref(), "a1").await, 6);
    let verified = verify_metadata(&env).await;
    assert_eq!(log_findings(&verified), [], "{}", verified.to_json());
    assert!(
        verified.to_json().contains("INC-4711"),
        "the break stays in sight: {}",
        verified.to_json()
    );
    let statement = attest::run(&day_after(&db, &store), &attest_options(&["a1"])).await;
    assert_eq!(statement.exit_code, 0, "{}", statement.to_json());
    let doc: serde_json::Value =
        serde_json::from_str(&printed(&statement, Format::Json).unwrap()).unwrap();
    assert_eq!(
        doc["apps"][0]["chain_breaks_accepted"][0]["reason"],
        "restored from the 03:00 backup, INC-4711"
    );
    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert!(purged.ok, "{}", purged.to_json());
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
}

/// A tile rewritten in the store (a hash replaced, as someone with write access could), and
/// then the checkpoint: verify names each, purge deletes only the batches it can still prove.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_tile_or_checkpoint_is_found_and_purge_keeps_what_it_cannot_prove() {
    let (db, _s3, store, env) = archived_env(&rows("a1", 300), &["a1"], 100).await;
    let tile = log_key(store.as_ref(), "a1", "tile/0/000.p/3");
    let original = read(store.as_ref(), &tile).await;
    let mut forged = original.clone();
    forged[64..96].copy_from_slice(&outbox_archiver::tlog::leaf_hash(b"a forged entry"));
    store
        .put(
            &Key::stored(tile.clone()),
            forged.into(),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let verified = verify_metadata(&env).await;
    let found = log_findings(&verified);
    assert!(
        found.contains(&("log_mismatch".to_string(), Some(2))),
        "{found:?}: {}",
        verified.to_json()
    );
    assert!(
        found.contains(&("log_fork".to_string(), Some(3))),
        "{found:?}"
    );
    // Dry run: leaf 2's proof does not need its own hash from the tile; leaves 0 and 1 need
    // it, and fail.
    let dry = purge::PurgeOptions {
        dry_run: true,
        ..purge_options(&db, &["a1"])
    };
    let planned = purge::run(&env, &dry).await;
    let log = log_of(&db, "a1").await;
    assert_eq!(
        purge_of(&planned, "a1").failed_batches,
        [log[0].1.clone(), log[1].1.clone()],
        "{}",
        planned.to_json()
    );

    // The tile back, the checkpoint rewritten to another tree: nothing can be proven.
    store
        .put(
            &Key::stored(tile.clone()),
            original.into(),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let checkpoint = log_key(store.as_ref(), "a1", "checkpoint");
    let text = String::from_utf8(read(store.as_ref(), &checkpoint).await).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let other = format!(
        "{}\n{}\n{}\n",
        lines[0], lines[1], "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
    );
    store
        .put(
            &Key::stored(checkpoint.clone()),
            other.into_bytes().into(),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let verified = verify_metadata(&env).await;
    // Not the tree of its tiles, and not the head of 3 leaves the log was published at (which
    // names where the good one is kept).
    assert_eq!(
        log_findings(&verified),
        [
            ("log_rollback".to_string(), Some(3)),
            ("log_fork".to_string(), Some(3))
        ],
        "{}",
        verified.to_json()
    );
    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    let purge = purge_of(&purged, "a1");
    assert_eq!(purge.purged_rows, 0, "{}", purged.to_json());
    assert_eq!(purge.failed_batches.len(), 3);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 300);
    // And back: every batch proven, every row purged.
    store
        .put(
            &Key::stored(checkpoint.clone()),
            text.into_bytes().into(),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert!(purged.ok, "{}", purged.to_json());
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_recorded_before_the_log_are_appended_by_the_next_archive_run() {
    let (db, _s3, store, env) = archived_env(&rows("a1", 500), &["a1"], 100).await;
    let before = log_of(&db, "a1").await;
    // An archive as a build before the chain left it: no links, no leaves, no log.
    db.exec("UPDATE wallet_outbox_archive_receipts SET chain_seq = NULL, chain_link = NULL, log_index = NULL")
        .await;
    for key in keys(store.as_ref()).await {
        if key.contains("/_log/") {
            store.delete(&Key::stored(key.clone())).await.unwrap();
        }
    }
    // An older build recorded no tree heads either.
    db.exec("DELETE FROM wallet_outbox_archive_log_heads").await;
    // Purge keeps every batch not in the log: they wait for it (not a failure).
    let dry = purge::PurgeOptions {
        dry_run: true,
        ..purge_options(&db, &["a1"])
    };
    let planned = purge::run(&env, &dry).await;
    assert_eq!(purge_of(&planned, "a1").waiting_for_log.len(), 5);
    assert!(purge_of(&planned, "a1").failed_batches.is_empty());
    assert_eq!(kind(&purge_of(&planned, "a1").findings[0]), "log_pending");

    let migrated = migrate::run(&db.db, db.spec, &Default::default()).await;
    assert!(migrated.ok, "{}", migrated.to_json());
    assert!(
        migrated.to_json().contains(r#""chain_linked":5"#),
        "{}",
        migrated.to_json()
    );
    // Linked, not logged yet: the next archive run appends them, in the order they were
    // recorded, with nothing to archive.
    let archived = archive(&env, &options(&db, &["a1"], ARCHIVED_CUTOFF)).await;
    assert!(archived.ok, "{}", archived.to_json());
    assert!(archive_of(&archived, "a1").log.checkpoint.is_some());
    assert_eq!(log_of(&db, "a1").await, before);
    let verified = verify_metadata(&env).await;
    assert_eq!(verified.exit_code, 0, "{}", verified.to_json());
    let statement = attest::run(&day_after(&db, &store), &attest_options(&["a1"])).await;
    assert_eq!(statement.exit_code, 0, "{}", statement.to_json());
}

/// What `aws s3 sync` makes of the store: every object at its key under `dir`.
pub(crate) async fn copy_of(store: &dyn ObjectStore, dir: &std::path::Path) -> std::path::PathBuf {
    for key in keys(store).await {
        let path = dir.join(&key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, read(store, &key).await).unwrap();
    }
    dir.join(store.location().prefix().trimmed())
}

pub(crate) fn audit_script(copy: &std::path::Path) -> (i32, String) {
    audit_script_with(copy, &[])
}

/// The auditor's script on `copy`, with arguments before it (`--seen STATEMENT`).
pub(crate) fn audit_script_with(copy: &std::path::Path, extra: &[&str]) -> (i32, String) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/audit-chain.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .args(extra)
        .arg(copy)
        .arg("wallet_outbox")
        .output()
        .expect("python3 runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// A linear chain of an older build (issue 27's checkpoints, receipts linked) carried over:
/// the first archive run writes the transition record, write-once, and the log's first leaves
/// recompute the chain's head link — the auditor's script checks it from a copy of the store;
/// a legacy checkpoint the database's chain does not end at is refused, then accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linear_chain_of_an_older_build_is_carried_over_and_checked() {
    use outbox_archiver::chain;
    let (db, _s3, store, env) = archived_env(&rows("a1", 300), &["a1"], 100).await;
    // The store as the older build left it: its checkpoint of the chain, no log.
    db.exec("UPDATE wallet_outbox_archive_receipts SET log_index = NULL")
        .await;
    for key in keys(store.as_ref()).await {
        if key.contains("/_log/") {
            store.delete(&Key::stored(key.clone())).await.unwrap();
        }
    }
    // An older build recorded no tree heads either.
    db.exec("DELETE FROM wallet_outbox_archive_log_heads").await;
    let links = outbox_archiver::Receipts::new(&db.db.pool, db.spec)
        .links("a1", 1, 3)
        .await
        .unwrap();
    let table = outbox_archiver::format::table_prefix(store.location().prefix(), "wallet_outbox");
    let legacy = chain::Checkpoint::new("wallet_outbox", "a1", chain::GENESIS, links.clone());
    let legacy_key = chain::checkpoint_key(table.as_str(), "a1", legacy.head().unwrap());
    store
        .put(
            &Key::stored(legacy_key.clone()),
            legacy.to_bytes().into(),
            PutMode::Create,
        )
        .await
        .unwrap();
    assert!(legacy_key.contains("/_chain/app_code=a1/"), "{legacy_key}");
    // Issue 43: a copy of the store made before the new build's first archive holds only the
    // chain, which the script does not check: it said "a1: no log" and exited 0 having checked
    // nothing. It names the chain no log carries over, as a problem.
    let before = tempfile::tempdir().unwrap();
    let (code, out) = audit_script(&copy_of(store.as_ref(), before.path()).await);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("log_pending (formerly chain_unanchored): a1:")
            && out.contains("nothing of it was checked"),
        "{out}"
    );
    let archived = archive(&env, &options(&db, &["a1"], ARCHIVED_CUTOFF)).await;
    assert!(archived.ok, "{}", archived.to_json());
    let transition: serde_json::Value = serde_json::from_slice(
        &read(
            store.as_ref(),
            &log_key(store.as_ref(), "a1", "transition.json"),
        )
        .await,
    )
    .unwrap();
    assert_eq!(transition["legacy_head_seq"], 3);
    assert_eq!(transition["legacy_head_link"], links[2].link.as_str());
    assert_eq!(transition["legacy_checkpoint"], legacy_key.as_str());
    let verified = verify_metadata(&env).await;
    assert_eq!(verified.exit_code, 0, "{}", verified.to_json());
    let dir = tempfile::tempdir().unwrap();
    let copy = copy_of(store.as_ref(), dir.path()).await;
    let (code, out) = audit_script(&copy);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "a1: carries on the linear chain to seq 3 link {}",
            links[2].link
        )),
        "{out}"
    );

    // A log whose first leaves are not the chain's (a transition record naming another head,
    // as a forger would write it): verify and the script name it.
    let forged = dir
        .path()
        .join(log_key(store.as_ref(), "a1", "transition.json"));
    let text = std::fs::read_to_string(&forged)
        .unwrap()
        .replace(&links[2].link, &"f".repeat(64));
    std::fs::write(&forged, &text).unwrap();
    let (code, out) = audit_script(&copy);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("chain seq 3: ffff") && out.contains("is not the log's leaf 2"),
        "{out}"
    );

    // Another app whose database does not end the legacy chain where its checkpoint does: not
    // carried over unless accepted.
    db.insert(&rows("b1", 100)).await;
    let mut b1 = options(&db, &["b1"], ARCHIVED_CUTOFF);
    b1.limits.max_rows = 100;
    let forged = chain::Checkpoint::new(
        "wallet_outbox",
        "b1",
        chain::GENESIS,
        vec![chain::Link {
            seq: 1,
            batch_id: "b1-elsewhere".into(),
            manifest_sha256: "0".repeat(64),
            link: chain::link(
                "wallet_outbox",
                "b1",
                1,
                chain::GENESIS,
                "b1-elsewhere",
                &"0".repeat(64),
            ),
        }],
    );
    store
        .put(
            &Key::stored(chain::checkpoint_key(
                table.as_str(),
                "b1",
                forged.head().unwrap(),
            )),
            forged.to_bytes().into(),
            PutMode::Create,
        )
        .await
        .unwrap();
    let refused = archive(&env, &b1).await;
    assert_eq!(refused.exit_code, 1, "{}", refused.to_json());
    assert!(
        refused.to_json().contains("cannot carry it over"),
        "{}",
        refused.to_json()
    );
    b1.accept_log_break = Some("INC-9: the old chain of b1 was a test".into());
    let accepted = archive(&env, &b1).await;
    assert!(accepted.ok, "{}", accepted.to_json());
    let transition: serde_json::Value = serde_json::from_slice(
        &read(
            store.as_ref(),
            &log_key(store.as_ref(), "b1", "transition.json"),
        )
        .await,
    )
    .unwrap();
    assert_eq!(transition["legacy_head_seq"], 0);
    assert!(transition["reason"].as_str().unwrap().contains("INC-9"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auditor_recomputes_the_log_from_a_copy_of_the_store_alone() {
    let (db, _s3, store, env) = archived_env(&rows("a1", 300), &["a1"], 100).await;
    let verified = verify_metadata(&env).await;
    let root = serde_json::to_value(&verified).unwrap()["apps"][0]["log_root"]
        .as_str()
        .unwrap()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let copy = copy_of(store.as_ref(), dir.path()).await;
    let (code, out) = audit_script(&copy);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("a1: tree of 3 leaves, root {root}")),
        "the script's root is verify's: {out}"
    );

    // A manifest changed in the copy: the leaf that binds it no longer holds.
    let log = log_of(&db, "a1").await;
    let manifest: String = sqlx::query_scalar(
        "SELECT manifest_object_key FROM wallet_outbox_archive_receipts WHERE batch_id = ?",
    )
    .bind(&log[0].1)
    .fetch_one(&db.db.pool)
    .await
    .unwrap();
    let path = dir.path().join(&manifest);
    let edited = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"row_count\":100", "\"row_count\":99");
    std::fs::write(&path, edited).unwrap();
    // A batch gone from the copy: the leaf that names it points at nothing.
    let data: String = sqlx::query_scalar(
        "SELECT data_object_key FROM wallet_outbox_archive_receipts WHERE batch_id = ?",
    )
    .bind(&log[1].1)
    .fetch_one(&db.db.pool)
    .await
    .unwrap();
    std::fs::remove_dir_all(dir.path().join(&data).parent().unwrap()).unwrap();
    // A tile rewritten in the copy.
    let tile = dir
        .path()
        .join(log_key(store.as_ref(), "a1", "tile/0/000.p/3"));
    let mut bytes = std::fs::read(&tile).unwrap();
    bytes[64] ^= 1;
    std::fs::write(&tile, bytes).unwrap();
    let (code, out) = audit_script(&copy);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("PROBLEM log_mismatch (formerly chain_mismatch): a1 leaf 0: manifest"),
        "{out}"
    );
    assert!(
        out.contains("PROBLEM log_gap (formerly chain_gap): a1 leaf 1"),
        "{out}"
    );
    assert!(
        out.contains(
            "PROBLEM log_mismatch (formerly chain_mismatch): a1 leaf 2: its hash in the tile"
        ),
        "{out}"
    );
    assert!(
        out.contains("PROBLEM log_fork (formerly chain_fork): a1: the checkpoint's root"),
        "{out}"
    );
}

/// The source's and the archiver's app codes made case-sensitive (a `_bin` collation): `Pay`
/// and `pay` are then two apps (the members table's app code is `ascii_bin` already).
async fn case_sensitive_apps(db: &TestDb) {
    for table in [
        "wallet_outbox",
        "wallet_outbox_archive_receipts",
        "wallet_outbox_archive_superseded",
    ] {
        db.exec(&format!(
            "ALTER TABLE {table} MODIFY app_code VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"
        ))
        .await;
    }
}

/// Two apps whose codes differ only in case, on a table whose app codes compare
/// case-sensitively (issue 34): two locks that never find each other held (MySQL compares
/// lock names case-insensitively), two logs in two folders — on both servers, through the
/// binary, with as many apps at once as the machine has cores: every run archives both, verify
/// and the auditor's script find both logs whole, and purge deletes exactly both apps' rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_that_differ_only_in_case_are_two_apps_with_two_logs() {
    let db = TestDb::new().await;
    case_sensitive_apps(&db).await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let envs = cli_envs(&db, &s3);
    let batch = |app: &str, from: i64| -> Vec<outbox_archiver::Row> {
        (from..from + 25)
            .map(|i| row(app, &format!("e{i:03}"), T0 + i))
            .collect()
    };
    for app in ["Pay", "pay"] {
        db.insert(&batch(app, 0)).await;
    }
    let archive = [
        "archive",
        "--all-apps",
        "--parallel-apps",
        "2",
        "--batch-rows",
        "10",
        "--cutoff",
        "2026-01-04T00:00:00Z",
    ];
    for round in 0..2 {
        if round == 1 {
            for app in ["Pay", "pay"] {
                db.insert(&batch(app, 100)).await;
            }
        }
        let run = run_cli(&archive, &envs).await;
        assert_eq!(run.code, 0, "round {round}: {}", run.all_output);
        let apps = run.summary["apps"].as_array().unwrap();
        assert_eq!(apps.len(), 2, "{}", run.summary);
        for app in apps {
            assert_eq!(app["outcome"], "archived", "round {round}: {}", run.summary);
            assert_eq!(app["rows"], 25, "round {round}: {}", run.summary);
        }
    }
    for folder in ["Pay", "pay"] {
        assert_eq!(log_size(store.as_ref(), folder).await, 6, "{folder}");
    }
    let run = run_cli(
        &["verify", "--all-apps", "--cutoff", "2026-01-04T00:00:00Z"],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    for app in run.summary["apps"].as_array().unwrap() {
        assert_eq!(app["log_size"], 6, "{}", run.summary);
        assert_eq!(app["log_appended_to"], 6, "{}", run.summary);
    }
    let dir = tempfile::tempdir().unwrap();
    let copy = copy_of(store.as_ref(), dir.path()).await;
    let (code, out) = audit_script(&copy);
    assert_eq!(code, 0, "{out}");
    for app in ["Pay", "pay"] {
        assert!(out.contains(&format!("{app}: tree of 6 leaves")), "{out}");
    }
    let run = run_cli(&["purge", "--all-apps", "--grace", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    for app in run.summary["apps"].as_array().unwrap() {
        assert_eq!(app["purged_rows"], 50, "{}", run.summary);
    }
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    // status tells each app its own runs.
    let run = run_cli(&["status", "--all-apps"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    for app in run.summary["apps"].as_array().unwrap() {
        for last in ["last_run", "last_purge"] {
            assert_eq!(app[last]["app_code"], app["app_code"], "{}", run.summary);
        }
    }
}

/// A batch removed on purpose (issue 34): its objects lost, an operator deletes its receipt and
/// member rows so that its rows are archived again. Until someone says so it is a gap — verify
/// names it (every other batch is still proven and purged); `archive --accept-log-break
/// REASON` records it, write-once, beside the log; then verify lists it, and the auditor's
/// script honours it from a copy of the store. Through the binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_removed_on_purpose_is_accepted_once_and_the_log_goes_on() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let envs = cli_envs(&db, &s3);
    let cutoff = "2026-01-04T00:00:00Z";
    let archive = [
        "archive",
        "--app",
        "a1",
        "--batch-rows",
        "100",
        "--cutoff",
        cutoff,
    ];
    let later = |from: i64, n: i64| -> Vec<outbox_archiver::Row> {
        (from..from + n)
            .map(|i| row("a1", &format!("e{i:04}"), T0 + i))
            .collect()
    };
    db.insert(&later(0, 300)).await;
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let log = log_of(&db, "a1").await;
    assert_eq!(log.len(), 3);
    let dropped = log[1].1.clone();
    delete_batch(&db, store.as_ref(), &dropped).await;
    db.insert(&later(1000, 100)).await;
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);

    // A gap until accepted: verify names it; purge proves and takes every other batch.
    let verify = [
        "verify",
        "--app",
        "a1",
        "--metadata-only",
        "--cutoff",
        cutoff,
    ];
    let run = run_cli(&verify, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(run.all_output.contains("log_gap"), "{}", run.all_output);
    assert!(
        run.all_output.contains("--accept-log-break"),
        "says the way out: {}",
        run.all_output
    );
    let purge = ["purge", "--app", "a1", "--grace", "0s"];
    let run = run_cli(&purge, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        run.summary["apps"][0]["purged_rows"], 300,
        "{}",
        run.summary
    );

    // Accepted, with the operator's reason: one write-once record.
    let mut accept = archive.to_vec();
    accept.extend([
        "--accept-log-break",
        "INC-7: batch 2's objects lost, re-archived",
    ]);
    let run = run_cli(&accept, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let record = run.summary["apps"][0]["log_break"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        record.ends_with("/breaks/00000000000000000001-1.json"),
        "{record}"
    );
    let bytes = read(store.as_ref(), &record).await;
    let accepted: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(accepted["leaves"], serde_json::json!([[1, dropped]]));
    // A second acceptance records nothing new.
    let run = run_cli(&accept, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert!(
        run.summary["apps"][0]["log_break"].is_null(),
        "{}",
        run.summary
    );

    // The dropped batch's rows are archived again (stragglers below the cursor, which verify
    // reports until then).
    let mut stragglers = archive.to_vec();
    stragglers.push("--stragglers");
    let run = run_cli(&stragglers, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(run.summary["apps"][0]["rows"], 100, "{}", run.summary);
    let run = run_cli(&verify, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let breaks = run.summary["apps"][0]["log_breaks_accepted"][0]
        .as_str()
        .unwrap();
    assert!(
        breaks.contains(&format!("leaves 1 (batch {dropped}) accepted as gone"))
            && breaks.contains("INC-7"),
        "{breaks}"
    );
    let run = run_cli(&purge, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        run.summary["apps"][0]["purged_rows"], 100,
        "{}",
        run.summary
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);

    // The auditor's script, from a copy of the store alone, honours the record.
    let dir = tempfile::tempdir().unwrap();
    let copy = copy_of(store.as_ref(), dir.path()).await;
    let (code, out) = audit_script(&copy);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "a1: leaves 1 (batch {dropped}) accepted as gone: INC-7"
        )),
        "{out}"
    );
}

/// Runs Go's own tlog and note packages (deploy/verify-log.go) on a statement.
pub(crate) fn go_verifier(statement: &std::path::Path, args: &[&str]) -> (i32, String) {
    let cache = tempfile::tempdir().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/verify-log.go");
    let out = std::process::Command::new("go")
        .args(["run", script])
        .args(args)
        .arg(statement)
        .env("GO111MODULE", "off")
        .env("GOPATH", "/usr/share/gocode")
        .env("GOCACHE", cache.path())
        .env("GOFLAGS", "-mod=mod")
        .output()
        .expect("go runs (.ci/test installs golang-go and golang-golang-x-mod-dev)");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// A statement of the binary's, written to `dir/name`.
async fn statement_to(
    envs: &[(&str, String)],
    day: &str,
    dir: &std::path::Path,
    name: &str,
) -> std::path::PathBuf {
    let (code, text) =
        run_cli_stdout(&["attest", "--app", "a1", "--from", day, "--to", day], envs).await;
    assert_eq!(code, 0, "{text}");
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The binary's stdout alone (a statement), and its exit status.
pub(crate) async fn run_cli_stdout(args: &[&str], envs: &[(&str, String)]) -> (i32, String) {
    let out = tokio::process::Command::new(binary())
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AWS_CONFIG_FILE", "/nonexistent")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_REGION", "us-east-1")
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        out.status.code().unwrap(),
        match out.status.success() {
            true => stdout,
            false => format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr)),
        },
    )
}

/// Moves the receipts recorded so far back by `days` (the binary's clock is the system's, and a
/// statement covers whole days that are over).
pub(crate) async fn recorded_days_ago(db: &TestDb, days: i64) {
    db.exec(&format!(
        "UPDATE wallet_outbox_archive_receipts SET verified_at_ms = verified_at_ms - {} \
         WHERE verified_at_ms > UNIX_TIMESTAMP(NOW() - INTERVAL 1 HOUR) * 1000",
        days * DAY
    ))
    .await;
}

/// Signed checkpoints, through the binary: `log-key` makes the key, `archive --log-key-file`
/// signs each checkpoint with it, `verify --log-verifier` holds the store to it; two days'
/// statements are checked by Go's own tlog and note packages — every batch's inclusion, the
/// consistency from the first statement's head to the second's, the signature — and a
/// checkpoint rewritten by someone without the key is refused by verify and purge alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_checkpoints_and_statements_check_with_gos_own_tlog_verifier() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let dir = tempfile::tempdir().unwrap();
    let (key_file, verifier) = crate::log_keys::new_key(dir.path(), "log.key").await;
    assert!(
        verifier.starts_with("archive.example.com/wallet+"),
        "{verifier}"
    );
    let mut envs = cli_envs(&db, &s3);
    envs.push(("OUTBOX_ARCHIVER_LOG_VERIFIER", verifier.clone()));
    let mut signing = envs.clone();
    signing.push(("OUTBOX_ARCHIVER_LOG_KEY_FILE", key_file));
    let archive = [
        "archive",
        "--app",
        "a1",
        "--batch-rows",
        "10",
        "--cutoff",
        "2026-01-04T00:00:00Z",
    ];
    let day =
        |ago: i64| outbox_archiver::utc_date(chrono::Utc::now().timestamp_millis() - ago * DAY);
    // Two days' runs: 30 rows the day before yesterday, 50 more yesterday.
    db.insert(&rows("a1", 30)).await;
    let run = run_cli(&archive, &signing).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    recorded_days_ago(&db, 2).await;
    let more: Vec<_> = (100..150)
        .map(|i| row("a1", &format!("f{i}"), T0 + i))
        .collect();
    db.insert(&more).await;
    let run = run_cli(&archive, &signing).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    recorded_days_ago(&db, 1).await;
    let checkpoint = log_key(store.as_ref(), "a1", "checkpoint");
    let signed = String::from_utf8(read(store.as_ref(), &checkpoint).await).unwrap();
    assert!(
        signed.contains("\n8\n") && signed.contains("\n\n\u{2014} archive.example.com/wallet "),
        "{signed}"
    );
    let verify = [
        "verify",
        "--app",
        "a1",
        "--metadata-only",
        "--cutoff",
        "2026-01-04T00:00:00Z",
    ];
    let run = run_cli(&verify, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);

    let first = statement_to(&envs, &day(2), dir.path(), "first.json").await;
    let second = statement_to(&envs, &day(1), dir.path(), "second.json").await;
    let (code, out) = go_verifier(&first, &["-verifier", &verifier]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("a1: 3 batches proven in the tree of 3 leaves")
            && out.contains("its signature by archive.example.com/wallet checked"),
        "{out}"
    );
    // Issue 43: the success line says whether the signature was checked — without -verifier it
    // was not — and a checkpoint with no signature at all, given -verifier, says so plainly
    // (Go's note package said only "malformed note").
    let (code, out) = go_verifier(&first, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("its signature not checked (no -verifier)"),
        "{out}"
    );
    let unsigned = dir.path().join("unsigned.json");
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&first).unwrap()).unwrap();
    let text = doc["apps"][0]["log"]["checkpoint"].as_str().unwrap();
    let body = text.split("\n\n").next().unwrap().to_string() + "\n";
    doc["apps"][0]["log"]["checkpoint"] = serde_json::Value::String(body);
    std::fs::write(&unsigned, doc.to_string()).unwrap();
    let (code, out) = go_verifier(&unsigned, &["-verifier", &verifier]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("the checkpoint carries no signature at all, and -verifier was given"),
        "{out}"
    );
    let (code, out) = go_verifier(
        &second,
        &["-verifier", &verifier, "-previous", first.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("a1: 5 batches proven in the tree of 8 leaves")
            && out.contains("the previous statement's end is this one's start"),
        "{out}"
    );
    // Another key's verifier: Go's note package refuses the signature.
    let (_, other) = outbox_archiver::Signer::generate("archive.example.com/wallet").unwrap();
    let (code, out) = go_verifier(&second, &["-verifier", &other]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("signature does not verify"), "{out}");
    // A statement whose batch was edited: its inclusion proof fails.
    let edited = dir.path().join("edited.json");
    let text = std::fs::read_to_string(&second).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let batch = doc["apps"][0]["days"][0]["batch_list"][0]["batch_id"]
        .as_str()
        .unwrap();
    std::fs::write(&edited, text.replace(batch, &format!("{batch}x"))).unwrap();
    let (code, out) = go_verifier(&edited, &["-verifier", &verifier]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("is not leaf"), "{out}");

    // The checkpoint rewritten without the key (the same tree, unsigned): refused.
    let body = signed.split("\n\n").next().unwrap().to_string() + "\n";
    store
        .put(
            &Key::stored(checkpoint.clone()),
            body.into_bytes().into(),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let run = run_cli(&verify, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(run.all_output.contains("log_fork"), "{}", run.all_output);
    assert!(
        run.all_output
            .contains("carries no valid signature by archive.example.com/wallet"),
        "{}",
        run.all_output
    );
    let purge = ["purge", "--app", "a1", "--grace", "0s"];
    let run = run_cli(&purge, &envs).await;
    assert_ne!(run.code, 0, "{}", run.all_output);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 80);
    // The signed one back: purge proves every batch and takes every row.
    store
        .put(
            &Key::stored(checkpoint.clone()),
            signed.into_bytes().into(),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let run = run_cli(&purge, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    // A bad key file is refused naming the setting, never printing the key.
    let bad = dir.path().join("bad.key");
    std::fs::write(&bad, "PRIVATE+KEY+x+00000000+AAAA").unwrap();
    let mut broken = envs.clone();
    broken.push((
        "OUTBOX_ARCHIVER_LOG_KEY_FILE",
        bad.to_str().unwrap().to_string(),
    ));
    let run = run_cli(&archive, &broken).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    assert!(
        run.all_output.contains("--log-key-file"),
        "{}",
        run.all_output
    );
    assert!(!run.all_output.contains("AAAA"), "{}", run.all_output);
}

/// Thousands of batches of history (made directly: receipts copied in the database, the log
/// appended from them), then one more archive run and one purge: each costs what one batch
/// costs — the same S3 requests as after a dozen batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_after_thousands_of_runs_reads_what_one_batch_needs() {
    let mut requests = Vec::new();
    for history in [10u64, 3_000] {
        let (db, _s3, store, env) = archived_env(&rows("a1", 100), &["a1"], 100).await;
        let made = outbox_archiver::testing::synthesize(&env, "a1", history)
            .await
            .unwrap();
        assert_eq!(made, history);
        assert_eq!(log_size(store.as_ref(), "a1").await, history + 1);
        let more: Vec<_> = (500..600)
            .map(|i| row("a1", &format!("n{i}"), T0 + i))
            .collect();
        db.insert(&more).await;
        let archived = archive(&env, &options(&db, &["a1"], ARCHIVED_CUTOFF)).await;
        assert!(archived.ok, "{}", archived.to_json());
        let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
        assert!(purged.ok, "{}", purged.to_json());
        assert_eq!(
            purge_of(&purged, "a1").purged_rows,
            200,
            "{}",
            purged.to_json()
        );
        let ops = |s: &Summary| s.store_requests.unwrap().by_operation;
        requests.push((history, ops(&archived), ops(&purged)));
    }
    let (_, archive_small, purge_small) = requests[0];
    let (_, archive_large, purge_large) = requests[1];
    // The same work: the same requests, whatever the history (a level more of tiles at most).
    assert!(
        archive_large.get <= archive_small.get + 1 && archive_large.list == archive_small.list,
        "{requests:?}"
    );
    assert!(
        purge_large.get <= purge_small.get + 2 && purge_large.list == purge_small.list,
        "{requests:?}"
    );
}

/// App a1's 30 rows archived in three batches into a `file://` store (its root returned) and
/// recorded yesterday: the run's environment and yesterday's day, for a statement of it.
async fn three_batches_of_yesterday() -> (
    TestDb,
    tempfile::TempDir,
    std::path::PathBuf,
    Vec<(&'static str, String)>,
    String,
) {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    std::fs::create_dir(&root).unwrap();
    let envs = vec![
        ("DATABASE_URL", db.url.clone()),
        (
            "OUTBOX_ARCHIVER_STORE",
            format!("file://{}", root.display()),
        ),
        ("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()),
    ];
    db.insert(&rows("a1", 30)).await;
    let archive = [
        "archive",
        "--app",
        "a1",
        "--batch-rows",
        "10",
        "--cutoff",
        "2026-01-04T00:00:00Z",
    ];
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    recorded_days_ago(&db, 1).await;
    let day = outbox_archiver::utc_date(chrono::Utc::now().timestamp_millis() - DAY);
    (db, dir, root, envs, day)
}

/// A statement of `day`, as the binary prints it (`--format`), with its exit status: stdout
/// alone, whatever the exit status (a statement that names damage exits 1).
async fn statement_of(envs: &[(&str, String)], day: &str, format: &str) -> (i32, String) {
    let args = [
        "attest", "--app", "a1", "--from", day, "--to", day, "--format", format,
    ];
    let out = run_cli_output(&args, envs).await;
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Issue 42, "attest vouches for damage": after `verify` found a batch's data object corrupt,
/// `attest` over its day exited 0 and showed the archive's read-back as the batch's last full
/// verification. The latest check of each batch is what a statement says: one that found the
/// batch other than recorded is named — in the batch, in the statement's list, in the CSV and
/// by Go's verifier — and the run exits 1; a full verify that finds the repaired object whole
/// makes it vouch again; a check that finds it damaged again (a metadata-only one: the object
/// gone) names it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_names_a_batch_its_latest_check_found_damaged_until_it_is_found_whole() {
    let (db, dir, root, envs, day) = three_batches_of_yesterday().await;
    let cutoff = ["--cutoff", "2026-01-04T00:00:00Z"];
    let (batch, key): (String, String) = sqlx::query_as(
        "SELECT CAST(batch_id AS CHAR), CAST(data_object_key AS CHAR) \
         FROM wallet_outbox_archive_receipts ORDER BY log_index LIMIT 1 OFFSET 1",
    )
    .fetch_one(&db.db.pool)
    .await
    .unwrap();
    let path = root.join(&key);
    let whole = std::fs::read(&path).unwrap();
    let mut corrupt = whole.clone();
    let middle = corrupt.len() / 2;
    corrupt[middle] ^= 0xff;
    std::fs::write(&path, &corrupt).unwrap();
    let mut verify = vec!["verify", "--app", "a1"];
    verify.extend(cutoff);
    let run = run_cli(&verify, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output.contains("sha256_mismatch"),
        "{}",
        run.all_output
    );

    // The statement names the batch and what its latest check found, and the run exits 1.
    let (code, text) = statement_of(&envs, &day, "json").await;
    assert_eq!(code, 1, "attest vouched for a damaged batch: {text}");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let named = &doc["batches_with_unresolved_findings"];
    assert_eq!(named.as_array().map(Vec::len), Some(1), "{named}");
    assert_eq!(named[0]["batch_id"], batch.as_str(), "{named}");
    assert!(
        named[0]["kinds"]
            .as_array()
            .unwrap()
            .contains(&"sha256_mismatch".into()),
        "{named}"
    );
    let batches = doc["apps"][0]["days"][0]["batch_list"].as_array().unwrap();
    assert_eq!(batches.len(), 3);
    for b in batches {
        let found = &b["unresolved_findings"];
        if b["batch_id"] == batch.as_str() {
            let first = found["first"].as_array().unwrap();
            assert!(
                first
                    .iter()
                    .any(|f| f["kind"] == "sha256_mismatch" && f["key"] == key.as_str()),
                "{found}"
            );
        } else {
            assert!(found.is_null(), "{b}");
            assert_eq!(b["last_full_verification"]["how"], "verify (read_back)");
        }
    }
    let file = dir.path().join("damaged.json");
    std::fs::write(&file, &text).unwrap();
    let (code, out) = go_verifier(&file, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("a1: batch {batch} is NOT vouched for"))
            && out.contains(&format!("sha256_mismatch at {key}"))
            && out.contains("a1: 3 batches proven"),
        "{out}"
    );
    let (code, csv) = statement_of(&envs, &day, "csv").await;
    assert_eq!(code, 1, "{csv}");
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .ends_with(",unresolved_findings"),
        "{csv}"
    );
    assert!(csv.contains(&format!("{batch}: ")), "{csv}");

    // Repaired and read whole again by a full verify: the statement vouches for it again.
    std::fs::write(&path, &whole).unwrap();
    let run = run_cli(&["verify", "--batch-id", &batch], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let (code, text) = statement_of(&envs, &day, "json").await;
    assert_eq!(code, 0, "{text}");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        doc["batches_with_unresolved_findings"],
        serde_json::json!([])
    );
    std::fs::write(&file, &text).unwrap();
    let (code, out) = go_verifier(&file, &[]);
    assert_eq!(code, 0, "{out}");

    // Found damaged again after that clean check: named again.
    std::fs::remove_file(&path).unwrap();
    let mut heads = verify.clone();
    heads.push("--metadata-only");
    let run = run_cli(&heads, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    let (code, text) = statement_of(&envs, &day, "json").await;
    assert_eq!(code, 1, "{text}");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let named = &doc["batches_with_unresolved_findings"];
    assert_eq!(named[0]["batch_id"], batch.as_str(), "{named}");
    assert_eq!(named[0]["kinds"], serde_json::json!(["missing_object"]));
}

/// The same rule for the checks purge and compact make before they act: a batch either found
/// damaged is named by the statements of its day (a dry run, which writes nothing, notes
/// nothing), until a full verify finds it whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_names_a_batch_purge_or_compact_found_damaged() {
    let (db, _dir, root, envs, day) = three_batches_of_yesterday().await;
    let batches: Vec<(String, String)> = sqlx::query_as(
        "SELECT CAST(batch_id AS CHAR), CAST(data_object_key AS CHAR) \
         FROM wallet_outbox_archive_receipts ORDER BY log_index",
    )
    .fetch_all(&db.db.pool)
    .await
    .unwrap();
    let flip = |key: &str| {
        let path = root.join(key);
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
    };
    let named = |text: &str| -> Vec<(String, Vec<String>)> {
        let doc: serde_json::Value = serde_json::from_str(text).unwrap();
        doc["batches_with_unresolved_findings"]
            .as_array()
            .unwrap_or_else(|| panic!("no list of unresolved findings: {text}"))
            .iter()
            .map(|b| {
                let kinds = b["kinds"].as_array().unwrap();
                let kinds = kinds.iter().map(|k| k.as_str().unwrap().to_string());
                (b["batch_id"].as_str().unwrap().to_string(), kinds.collect())
            })
            .collect()
    };

    // Purge reads batch 1 in full and finds it damaged: not purged, and named from then on.
    flip(&batches[1].1);
    let purge = ["purge", "--app", "a1", "--grace", "0s", "--reverify"];
    let run = run_cli(&[&purge[..], &["--dry-run"]].concat(), &envs).await;
    assert!(
        run.all_output.contains("sha256_mismatch"),
        "{}",
        run.all_output
    );
    let (code, text) = statement_of(&envs, &day, "json").await;
    assert_eq!(code, 0, "a dry run noted what it found: {text}");
    let run = run_cli(&purge, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert_eq!(
        run.summary["apps"][0]["purged_rows"], 20,
        "{}",
        run.all_output
    );
    let (code, text) = statement_of(&envs, &day, "json").await;
    assert_eq!(
        code, 1,
        "attest vouched for a batch purge found damaged: {text}"
    );
    let found = named(&text);
    assert_eq!(found.len(), 1, "{text}");
    assert_eq!(found[0].0, batches[1].0, "{text}");
    assert!(
        found[0].1.contains(&"sha256_mismatch".to_string()),
        "{text}"
    );

    // Compact reads batch 2 (purged) in full and finds it damaged: named as well.
    flip(&batches[2].1);
    let run = run_cli(&["compact", "--app", "a1", "--older-than", "0s"], &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    let (code, text) = statement_of(&envs, &day, "json").await;
    assert_eq!(
        code, 1,
        "attest vouched for a batch compact found damaged: {text}"
    );
    let found: Vec<String> = named(&text).into_iter().map(|(b, _)| b).collect();
    assert_eq!(
        found,
        [batches[1].0.clone(), batches[2].0.clone()],
        "{text}"
    );

    // Repaired and verified whole: vouched for again.
    flip(&batches[1].1);
    flip(&batches[2].1);
    let ids = format!("{},{}", batches[1].0, batches[2].0);
    let run = run_cli(&["verify", "--batch-id", &ids], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let (code, text) = statement_of(&envs, &day, "json").await;
    assert_eq!(code, 0, "{text}");
    assert!(named(&text).is_empty(), "{text}");
}
