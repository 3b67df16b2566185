//! The chain of an app's batches (README, "The chain of batches"), through the real servers: a
//! batch deleted with its receipt, a receipt's totals edited, two archivers racing on one app
//! with the lock out of the way, a database restored from an older backup and archived on, and
//! the genesis that links receipts recorded before the chain. Each is named by `verify` with the
//! seq, refused by `attest`, and kept from `purge`.

use outbox_archiver::commands::attest::{self, AttestOptions, Format};
use outbox_archiver::commands::verify::{self, VerifyOptions};
use outbox_archiver::commands::{migrate, purge};
use outbox_archiver::pipeline::apps::Apps;
use outbox_archiver::pipeline::report::Summary;
use outbox_archiver::pipeline::RunContext;
use outbox_archiver::store::ObjectStore;

use crate::support::*;

/// The day the test clock records receipts on: [`ARCHIVED_CUTOFF`] + a day, 2026-01-05.
const RECORDED_DAY: &str = "2026-01-05";

/// A run context the day after [`RECORDED_DAY`]: a statement covers whole days that are over.
fn day_after(db: &TestDb, store: &std::sync::Arc<dyn ObjectStore>) -> RunContext {
    env(db, store.clone(), ARCHIVED_CUTOFF + 2 * DAY)
}

fn attest_options(apps: &[&str], format: Format) -> AttestOptions {
    AttestOptions {
        apps: match apps {
            [] => Apps::All,
            apps => Apps::Listed(apps.iter().map(|a| a.to_string()).collect()),
        },
        from: RECORDED_DAY.into(),
        to: RECORDED_DAY.into(),
        format,
    }
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

/// The chain findings of a verify run: (kind, seq).
fn chain_findings(summary: &Summary) -> Vec<(String, Option<u64>)> {
    verify_run(summary)
        .findings
        .iter()
        .filter(|f| kind(f).starts_with("chain_"))
        .map(|f| (kind(f), f.seq))
        .collect()
}

/// The app's receipts by seq: (seq, batch id).
async fn chain_of(db: &TestDb, app: &str) -> Vec<(Option<i64>, String)> {
    sqlx::query_as(
        "SELECT chain_seq, CAST(batch_id AS CHAR) FROM wallet_outbox_archive_receipts \
         WHERE app_code = ? ORDER BY chain_seq",
    )
    .bind(app)
    .fetch_all(&db.db.pool)
    .await
    .unwrap()
}

async fn checkpoints(store: &dyn ObjectStore) -> Vec<String> {
    keys(store)
        .await
        .into_iter()
        .filter(|k| k.contains("/_chain/"))
        .collect()
}

/// Deletes a batch the way a privileged role could: its three objects, its member rows and its
/// receipt.
async fn delete_batch(db: &TestDb, store: &dyn ObjectStore, batch_id: &str) {
    let keys: (String, String, String) = sqlx::query_as(
        "SELECT data_object_key, manifest_object_key, success_object_key \
         FROM wallet_outbox_archive_receipts WHERE batch_id = ?",
    )
    .bind(batch_id)
    .fetch_one(&db.db.pool)
    .await
    .unwrap();
    for key in [keys.0, keys.1, keys.2] {
        store.delete(&key).await.unwrap();
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
async fn a_whole_chain_is_anchored_and_attested_as_canonical_json_and_csv() {
    let (db, _s3, store, env) = archived_env(&rows("a1", 300), &["a1"], 100).await;
    let chain = chain_of(&db, "a1").await;
    assert_eq!(
        chain.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        [Some(1), Some(2), Some(3)]
    );
    // One checkpoint for the run, named by its head.
    let anchored = checkpoints(store.as_ref()).await;
    assert_eq!(anchored.len(), 1, "{anchored:?}");
    assert!(
        anchored[0].contains("/wallet_outbox/_chain/app_code=a1/00000000000000000003-"),
        "{anchored:?}"
    );
    let verified = verify_metadata(&env).await;
    assert_eq!(verified.exit_code, 0, "{}", verified.to_json());

    // The day the receipts were recorded on is not over yet at their clock: no statement of it.
    let early = attest::run(&env, &attest_options(&["a1"], Format::Json)).await;
    assert_eq!(early.exit_code, 2, "{}", early.to_json());
    assert!(
        early.to_json().contains("has not ended yet"),
        "{}",
        early.to_json()
    );
    let statement = attest::run(
        &day_after(&db, &store),
        &attest_options(&["a1"], Format::Json),
    )
    .await;
    assert_eq!(statement.exit_code, 0, "{}", statement.to_json());
    let text = statement.text.clone().expect("a statement");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    // Canonical: re-encoding with sorted keys gives the same bytes.
    assert_eq!(
        outbox_archiver::pipeline::attest::canonical(&doc),
        text,
        "keys sorted, compact, one newline"
    );
    let app = &doc["apps"][0];
    assert_eq!(app["app_code"], "a1");
    assert_eq!(app["chain_head_at_end"]["seq"], 3);
    assert_eq!(
        app["chain_head_at_end"]["anchored_in"],
        anchored[0].as_str()
    );
    let day = &app["days"][0];
    assert_eq!(day["day"], RECORDED_DAY);
    assert_eq!(day["rows"], 300);
    assert_eq!(day["batches"], 3);
    assert_eq!(day["first_cursor"]["event_id"], "e0");
    assert_eq!(day["last_cursor"]["event_id"], "e299");
    let batch = &day["batch_list"][0];
    assert_eq!(batch["seq"], 1);
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
    let statement = attest::run(&day_after(&db, &store), &attest_options(&[], Format::Csv)).await;
    assert_eq!(statement.exit_code, 0, "{}", statement.to_json());
    let csv = statement.text.unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 2, "{csv}");
    assert!(lines[0].starts_with("app_code,day,rows,batches,"), "{csv}");
    assert!(
        lines[1].starts_with(&format!("a1,{RECORDED_DAY},300,3,")),
        "{csv}"
    );
    assert!(lines[1].contains(",verify (read_back),"), "{csv}");
    // A day with nothing archived is an empty statement, not a refusal.
    let mut other = attest_options(&["a1"], Format::Json);
    other.from = "2025-06-01".into();
    other.to = "2025-06-30".into();
    let empty = attest::run(&day_after(&db, &store), &other).await;
    assert_eq!(empty.exit_code, 0, "{}", empty.to_json());
    let doc: serde_json::Value = serde_json::from_str(&empty.text.unwrap()).unwrap();
    assert_eq!(doc["apps"][0]["days"], serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_deleted_with_its_receipt_is_a_gap_that_verify_names_and_attest_refuses() {
    let mut both = rows("a1", 300);
    both.extend(rows("a2", 100));
    let (db, _s3, store, env) = archived_env(&both, &["a1", "a2"], 100).await;
    let chain = chain_of(&db, "a1").await;
    delete_batch(&db, store.as_ref(), &chain[1].1).await;
    // And an app of which nothing is left in the database: its rows purged, then its one batch
    // and receipt deleted. Only its checkpoint tells.
    let a2 = chain_of(&db, "a2").await;
    delete_batch(&db, store.as_ref(), &a2[0].1).await;
    db.exec("DELETE FROM wallet_outbox WHERE app_code = 'a2'")
        .await;
    let everything = verify_metadata(&env).await;
    let gone: Vec<_> = verify_run(&everything)
        .findings
        .iter()
        .filter(|f| {
            kind(f) == "chain_gap" && f.expected.as_deref().unwrap_or_default().contains("app a2")
        })
        .collect();
    assert_eq!(gone.len(), 1, "{}", everything.to_json());
    assert_eq!(gone[0].seq, Some(1));
    let all = attest::run(&day_after(&db, &store), &attest_options(&[], Format::Json)).await;
    assert_eq!(all.exit_code, 1, "{}", all.to_json());
    assert!(
        all.to_json()
            .contains(r#""app_code":"a2","outcome":"failed""#),
        "{}",
        all.to_json()
    );

    let verified = verify::run(
        &env,
        &VerifyOptions {
            metadata_only: true,
            selection: outbox_archiver::pipeline::apps::Selection {
                apps: Some(Apps::Listed(vec!["a1".into()])),
                ..Default::default()
            },
            ..VerifyOptions::everything(ARCHIVED_CUTOFF, "DELIVERED")
        },
    )
    .await;
    assert_eq!(verified.exit_code, 1, "{}", verified.to_json());
    assert_eq!(
        chain_findings(&verified),
        [("chain_gap".to_string(), Some(2))],
        "{}",
        verified.to_json()
    );
    let gap = verify_run(&verified)
        .findings
        .iter()
        .find(|f| kind(f) == "chain_gap")
        .unwrap();
    assert_eq!(gap.batch_id.as_deref(), Some(chain[1].1.as_str()));
    assert!(
        gap.actual
            .as_deref()
            .unwrap()
            .contains("a batch deleted with its receipt"),
        "{gap:?}"
    );

    let statement = attest::run(
        &day_after(&db, &store),
        &attest_options(&["a1"], Format::Json),
    )
    .await;
    assert_eq!(statement.exit_code, 1, "{}", statement.to_json());
    assert!(statement.text.is_none(), "no statement for a broken period");
    let json = statement.to_json();
    assert!(json.contains("not attested"), "{json}");
    assert!(json.contains("chain_gap at seq 2"), "{json}");

    // Purge takes the batch before the gap, and none after it.
    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    let purge = purge_of(&purged, "a1");
    assert_eq!(purge.purged_rows, 100, "{}", purged.to_json());
    assert_eq!(purge.failed_batches, [chain[2].1.clone()]);
    assert_eq!(kind(&purge.findings[0]), "chain_gap");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipts_totals_edited_is_a_chain_mismatch_and_its_rows_are_kept() {
    let (db, _s3, store, env) = archived_env(&rows("a1", 300), &["a1"], 100).await;
    let chain = chain_of(&db, "a1").await;
    // A control total edited in the database: the receipt no longer implies the manifest its
    // link binds.
    db.exec(&format!(
        "UPDATE wallet_outbox_archive_receipts SET available_delta_total = '999999' WHERE batch_id = '{}'",
        chain[1].1
    ))
    .await;
    let verified = verify_metadata(&env).await;
    assert_eq!(verified.exit_code, 1, "{}", verified.to_json());
    assert_eq!(
        chain_findings(&verified),
        [("chain_mismatch".to_string(), Some(2))],
        "{}",
        verified.to_json()
    );
    let statement = attest::run(
        &day_after(&db, &store),
        &attest_options(&["a1"], Format::Json),
    )
    .await;
    assert_eq!(statement.exit_code, 1, "{}", statement.to_json());

    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    let purge = purge_of(&purged, "a1");
    assert_eq!(
        purge.purged_rows,
        100,
        "only the batch before: {}",
        purged.to_json()
    );
    assert_eq!(
        purge.failed_batches,
        [chain[1].1.clone(), chain[2].1.clone()]
    );
    assert_eq!(kind(&purge.findings[0]), "chain_mismatch");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox").await,
        200,
        "the rows of the edited batch and of the one after it are all still there"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archivers_racing_on_one_app_never_fork_its_chain() {
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 2_000)).await;
    let env = env(&db, store.clone(), ARCHIVED_CUTOFF + DAY);
    // Each under a lock prefix of its own: the app's lock does not keep them apart, only the
    // database does.
    let mut first = options(&db, &["a1"], ARCHIVED_CUTOFF);
    first.limits.max_rows = 100;
    let mut second = first.clone();
    first.lock_prefix = format!("{}-first", db.lock_prefix());
    second.lock_prefix = format!("{}-second", db.lock_prefix());
    let (a, b) = tokio::join!(archive(&env, &first), archive(&env, &second));
    // Whatever each one's outcome (one may fail on the other's members), the chain is one.
    let linked = chain_of(&db, "a1").await;
    let seqs: Vec<i64> = linked.iter().map(|(s, _)| s.expect("linked")).collect();
    assert_eq!(
        seqs,
        (1..=linked.len() as i64).collect::<Vec<_>>(),
        "seqs 1..n, each once: {}\n{}",
        a.to_json(),
        b.to_json()
    );
    // Finish whatever one of them left, then every link is anchored and verify is clean.
    let done = archive(&env, &options(&db, &["a1"], ARCHIVED_CUTOFF)).await;
    assert!(done.ok, "{}", done.to_json());
    let verified = verify_metadata(&env).await;
    assert_eq!(chain_findings(&verified), [], "{}", verified.to_json());
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
    let chain = chain_of(&db, "a1").await;
    assert_eq!(chain.len(), 4);
    // The backup was taken after the second batch: the third and fourth receipts are lost.
    forget_batch(&db, &chain[2].1).await;
    forget_batch(&db, &chain[3].1).await;
    let verified = verify_metadata(&env).await;
    assert_eq!(
        chain_findings(&verified),
        [("chain_gap".to_string(), Some(3))],
        "{}",
        verified.to_json()
    );
    // Archived on — in other batches than before (another batch size): seqs 3 and 4 again,
    // other links. The rows are archived and recorded; the chain is not anchored over the
    // store's, and the run fails saying why.
    let mut on = options(&db, &["a1"], ARCHIVED_CUTOFF);
    on.limits.max_rows = 150;
    let archived = archive(&env, &on).await;
    assert_eq!(archived.exit_code, 1, "{}", archived.to_json());
    let details = archive_of(&archived, "a1");
    assert!(
        details
            .chain_disagreement
            .as_deref()
            .is_some_and(|d| d.contains("does not continue") && d.contains("--accept-chain-break")),
        "{}",
        archived.to_json()
    );
    assert_eq!(
        db.count("SELECT CAST(SUM(row_count) AS SIGNED) FROM wallet_outbox_archive_receipts")
            .await,
        400,
        "every row archived all the same"
    );
    assert_eq!(
        checkpoints(store.as_ref()).await.len(),
        1,
        "nothing anchored over it"
    );
    let verified = verify_metadata(&env).await;
    let found = chain_findings(&verified);
    assert!(
        found.contains(&("chain_fork".to_string(), Some(3))),
        "{found:?}: {}",
        verified.to_json()
    );
    assert_eq!(verified.exit_code, 1);
    let statement = attest::run(
        &day_after(&db, &store),
        &attest_options(&["a1"], Format::Json),
    )
    .await;
    assert_eq!(statement.exit_code, 1, "{}", statement.to_json());
    assert!(
        statement.to_json().contains("chain_fork at seq 3"),
        "{}",
        statement.to_json()
    );
    // Purge keeps the batches from the fork on.
    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    let purge = purge_of(&purged, "a1");
    assert_eq!(purge.purged_rows, 200, "{}", purged.to_json());
    assert_eq!(purge.failed_batches.len(), 2, "{}", purged.to_json());

    // Investigated: the operator accepts the break. It is recorded, write-once, and the
    // database's chain anchored again; the old checkpoint stays.
    let mut accept = options(&db, &["a1"], ARCHIVED_CUTOFF);
    accept.accept_chain_break = Some("restored from the 03:00 backup, INC-4711".into());
    let accepted = archive(&env, &accept).await;
    assert!(accepted.ok, "{}", accepted.to_json());
    let key = archive_of(&accepted, "a1")
        .chain_break
        .clone()
        .expect("a break written");
    assert!(
        key.contains("/_chain/app_code=a1/00000000000000000001-break-"),
        "{key}"
    );
    assert_eq!(
        checkpoints(store.as_ref()).await.len(),
        3,
        "old checkpoint, break, new one"
    );
    let verified = verify_metadata(&env).await;
    assert_eq!(chain_findings(&verified), [], "{}", verified.to_json());
    assert!(
        verified.to_json().contains("INC-4711"),
        "the break stays in sight: {}",
        verified.to_json()
    );
    let statement = attest::run(
        &day_after(&db, &store),
        &attest_options(&["a1"], Format::Json),
    )
    .await;
    assert_eq!(statement.exit_code, 0, "{}", statement.to_json());
    let doc: serde_json::Value = serde_json::from_str(&statement.text.unwrap()).unwrap();
    assert_eq!(
        doc["apps"][0]["chain_breaks_accepted"][0]["reason"],
        "restored from the 03:00 backup, INC-4711"
    );
    let purged = purge::run(&env, &purge_options(&db, &["a1"])).await;
    assert!(purged.ok, "{}", purged.to_json());
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_genesis_links_every_receipt_recorded_before_the_chain() {
    let (db, _s3, store, env) = archived_env(&rows("a1", 500), &["a1"], 100).await;
    let before = chain_of(&db, "a1").await;
    // An archive as a build before the chain left it: no links, no checkpoints.
    db.exec("UPDATE wallet_outbox_archive_receipts SET chain_seq = NULL, chain_link = NULL")
        .await;
    for key in checkpoints(store.as_ref()).await {
        store.delete(&key).await.unwrap();
    }
    let verified = verify_metadata(&env).await;
    let found = chain_findings(&verified);
    assert_eq!(
        found.len(),
        5,
        "each receipt not linked is named: {found:?}"
    );
    assert!(found.iter().all(|(k, s)| k == "chain_gap" && s.is_none()));
    // Purge keeps every batch whose link is not anchored.
    let dry = purge::PurgeOptions {
        dry_run: true,
        ..purge_options(&db, &["a1"])
    };
    let planned = purge::run(&env, &dry).await;
    assert_eq!(purge_of(&planned, "a1").failed_batches.len(), 5);

    let migrated = migrate::run(&db.db, db.spec, &Default::default()).await;
    assert!(migrated.ok, "{}", migrated.to_json());
    assert!(
        migrated.to_json().contains(r#""chain_linked":5"#),
        "{}",
        migrated.to_json()
    );
    // In the order they were recorded: the same chain as archive made.
    assert_eq!(chain_of(&db, "a1").await, before);
    // Linked, not anchored yet: the next archive run anchors them, with nothing to archive.
    let archived = archive(&env, &options(&db, &["a1"], ARCHIVED_CUTOFF)).await;
    assert!(archived.ok, "{}", archived.to_json());
    assert!(archive_of(&archived, "a1").chain_checkpoint.is_some());
    let verified = verify_metadata(&env).await;
    assert_eq!(verified.exit_code, 0, "{}", verified.to_json());
    let statement = attest::run(
        &day_after(&db, &store),
        &attest_options(&["a1"], Format::Json),
    )
    .await;
    assert_eq!(statement.exit_code, 0, "{}", statement.to_json());
    let again = migrate::run(&db.db, db.spec, &Default::default()).await;
    assert!(
        again.to_json().contains(r#""chain_linked":0"#),
        "{}",
        again.to_json()
    );
}

/// What `aws s3 sync` makes of the store: every object at its key under `dir`.
async fn copy_of(store: &dyn ObjectStore, dir: &std::path::Path) -> std::path::PathBuf {
    for key in keys(store).await {
        let path = dir.join(&key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, read(store, &key).await).unwrap();
    }
    dir.join(store.location().prefix())
}

fn audit_script(copy: &std::path::Path) -> (i32, String) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/audit-chain.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(copy)
        .arg("wallet_outbox")
        .output()
        .expect("python3 runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auditor_recomputes_the_chain_from_a_copy_of_the_store_alone() {
    let (db, _s3, store, _env) = archived_env(&rows("a1", 300), &["a1"], 100).await;
    let head: String = sqlx::query_scalar(
        "SELECT CAST(chain_link AS CHAR) FROM wallet_outbox_archive_receipts WHERE chain_seq = 3",
    )
    .fetch_one(&db.db.pool)
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let copy = copy_of(store.as_ref(), dir.path()).await;
    let (code, out) = audit_script(&copy);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("a1: anchored head seq 3 link {head} (3 links)")),
        "{out}"
    );

    // A manifest changed in the copy: the link that binds it no longer holds.
    let chain = chain_of(&db, "a1").await;
    let manifest: String = sqlx::query_scalar(
        "SELECT manifest_object_key FROM wallet_outbox_archive_receipts WHERE batch_id = ?",
    )
    .bind(&chain[0].1)
    .fetch_one(&db.db.pool)
    .await
    .unwrap();
    let path = dir.path().join(&manifest);
    let edited = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"row_count\":100", "\"row_count\":99");
    std::fs::write(&path, edited).unwrap();
    // A batch gone from the copy: the seq that binds it points at nothing.
    let data: String = sqlx::query_scalar(
        "SELECT data_object_key FROM wallet_outbox_archive_receipts WHERE batch_id = ?",
    )
    .bind(&chain[1].1)
    .fetch_one(&db.db.pool)
    .await
    .unwrap();
    std::fs::remove_dir_all(dir.path().join(&data).parent().unwrap()).unwrap();
    let (code, out) = audit_script(&copy);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("PROBLEM chain_mismatch: a1 seq 1"), "{out}");
    assert!(out.contains("PROBLEM chain_gap: a1 seq 2"), "{out}");
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
/// lock names case-insensitively), two chains in two folders — on both servers, through the
/// binary, with as many apps at once as the machine has cores: every run archives both, verify
/// and the auditor's script find both chains whole, and purge deletes exactly both apps' rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_that_differ_only_in_case_are_two_apps_with_two_chains() {
    let db = TestDb::new().await;
    case_sensitive_apps(&db).await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let mut envs = s3.binary_env();
    envs.push(("DATABASE_URL", db.url.clone()));
    envs.push(("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()));
    let batch = |app: &str, from: i64| -> Vec<outbox_archiver::model::codec::Row> {
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
    let prefix =
        outbox_archiver::model::format::table_prefix(store.location().prefix(), "wallet_outbox");
    for folder in ["Pay", "pay"] {
        let checkpoints = store
            .list(&format!("{prefix}_chain/app_code={folder}/"))
            .await
            .unwrap();
        assert_eq!(checkpoints.len(), 2, "{folder}: {checkpoints:?}");
    }
    let run = run_cli(
        &["verify", "--all-apps", "--cutoff", "2026-01-04T00:00:00Z"],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    for app in run.summary["apps"].as_array().unwrap() {
        assert_eq!(app["chain_head"], 6, "{}", run.summary);
        assert_eq!(app["chain_anchored_to"], 6, "{}", run.summary);
    }
    let dir = tempfile::tempdir().unwrap();
    let copy = copy_of(store.as_ref(), dir.path()).await;
    let (code, out) = audit_script(&copy);
    assert_eq!(code, 0, "{out}");
    for app in ["Pay", "pay"] {
        assert!(
            out.contains(&format!("{app}: anchored head seq 6 ")),
            "{out}"
        );
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
/// names it, purge keeps every batch after it and says how to accept it; `archive
/// --accept-chain-break REASON` records it, write-once, beside the checkpoints; then verify
/// lists it, purge takes every later batch and the rows archived again, and the auditor's
/// script honours it from a copy of the store. A receipt removed before its run anchored it
/// cannot be accepted (its link is gone with it): refused, naming the backup to restore it from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_removed_on_purpose_is_accepted_once_and_the_chain_goes_on() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let mut envs = s3.binary_env();
    envs.push(("DATABASE_URL", db.url.clone()));
    envs.push(("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()));
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
    let later = |from: i64, n: i64| -> Vec<outbox_archiver::model::codec::Row> {
        (from..from + n)
            .map(|i| row("a1", &format!("e{i:04}"), T0 + i))
            .collect()
    };
    db.insert(&later(0, 300)).await;
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let chain = chain_of(&db, "a1").await;
    assert_eq!(chain.len(), 3);
    let dropped = chain[1].1.clone();
    delete_batch(&db, store.as_ref(), &dropped).await;
    db.insert(&later(1000, 100)).await;
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);

    // A gap until accepted: verify names it, purge keeps every batch after it.
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
    assert!(run.all_output.contains("chain_gap"), "{}", run.all_output);
    let purge = ["purge", "--app", "a1", "--grace", "0s"];
    let run = run_cli(&purge, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    let app = &run.summary["apps"][0];
    assert_eq!(
        app["purged_rows"], 100,
        "only the batch before the gap: {}",
        run.summary
    );
    assert_eq!(app["failed_batches"].as_array().unwrap().len(), 2);
    assert!(
        run.all_output.contains("--accept-chain-break"),
        "says the way out: {}",
        run.all_output
    );

    // Accepted, with the operator's reason: one write-once record.
    let mut accept = archive.to_vec();
    accept.extend([
        "--accept-chain-break",
        "INC-7: batch 2's objects lost, re-archived",
    ]);
    let run = run_cli(&accept, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let record = run.summary["apps"][0]["chain_break"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(record.contains("-break-"), "{record}");
    let bytes = read(store.as_ref(), &record).await;
    let accepted: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(accepted["dropped"][0]["seq"], 2, "{accepted}");
    assert_eq!(accepted["dropped"][0]["batch_id"], dropped.as_str());
    // A second acceptance records nothing new.
    let run = run_cli(&accept, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert!(
        run.summary["apps"][0]["chain_break"].is_null(),
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
    let breaks = run.summary["apps"][0]["chain_breaks_accepted"][0]
        .as_str()
        .unwrap();
    assert!(
        breaks.contains(&format!("removed on purpose at seq 2 (batch {dropped})"))
            && breaks.contains("INC-7"),
        "{breaks}"
    );
    // purge takes every batch after the gap, and the rows archived again.
    let run = run_cli(&purge, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        run.summary["apps"][0]["purged_rows"], 300,
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
            "receipt removed on purpose at seq 2 (batch {dropped})"
        )),
        "{out}"
    );

    // Removed before its run anchored it: no link to go on from — refused, naming the backup.
    db.insert(&later(2000, 200)).await;
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let checkpoint = run.summary["apps"][0]["chain_checkpoint"]
        .as_str()
        .unwrap()
        .to_string();
    store.delete(&checkpoint).await.unwrap();
    let chain = chain_of(&db, "a1").await;
    forget_batch(&db, &chain[chain.len() - 2].1).await;
    let run = run_cli(&accept, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output
            .contains("restore that receipt row from a backup"),
        "{}",
        run.all_output
    );
}
