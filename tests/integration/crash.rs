//! Process crashes: the archiver is SIGKILLed at 50 seeded moments of a multi-batch
//! run (two-row batches over 3 apps, rows arriving in blocks of 500 per app), and rerun each time. In the end no row is lost or duplicated,
//! every receipt's objects verify, and no object a receipt references was ever rewritten.

use std::collections::HashMap;
use std::sync::Arc;

use outbox_archiver::testing::Rng;
use outbox_archiver::{verify, verify::VerifyOptions};
use outbox_archiver::{LocalStore, Location, ObjectStore};

use crate::support::*;

/// Rows per app added at a time.
const BLOCK: i64 = 500;

async fn add_block(db: &TestDb, inserted: &mut i64) {
    for app in ["a1", "a2", "a3"] {
        db.insert(
            &(*inserted..*inserted + BLOCK)
                .map(|i| row(app, &format!("{app}-{i:05}"), T0 + i * 50))
                .collect::<Vec<_>>(),
        )
        .await;
    }
    *inserted += BLOCK;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_fifty_moments_loses_and_duplicates_nothing() {
    let db = TestDb::new().await;
    // Rows arrive in blocks, as a live outbox's would: a new block whenever the archiver is
    // close to catching up, so every one of the 50 moments finds it at work however fast it is.
    let mut inserted = 0;
    add_block(&db, &mut inserted).await;
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("file://{}", dir.path().display());
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::new(Location::Local {
        root: dir.path().to_path_buf(),
    }));
    let prefix = db.lock_prefix();
    let archiver = || {
        let mut command = archive_in_two_row_batches(&store_url);
        command
            .args(["--lock-prefix", &prefix])
            .env("DATABASE_URL", &db.url);
        command
    };
    let mut rng = Rng::new(20261129);
    let mut killed = 0;
    // Kills that landed while the run was recording batches (it recorded some before dying),
    // not before it got going. Whether a kill lands mid-run must not depend on how fast the
    // machine is: four kills in five wait until the run has recorded a batch, then a seeded
    // moment more; the fifth comes at a seeded moment of start-up. The test goes on until 50
    // kills hit a running archiver and at least 25 of them mid-run, bounded in runs and time.
    let mut mid_run = 0;
    let mut recorded: HashMap<String, (u64, i128, u64)> = HashMap::new();
    let mut attempts = 0;
    let started = std::time::Instant::now();
    const MAX_ATTEMPTS: u32 = 400;
    const MAX_TIME: std::time::Duration = std::time::Duration::from_secs(600);
    while killed < 50 || mid_run < 25 {
        attempts += 1;
        assert!(
            attempts <= MAX_ATTEMPTS && started.elapsed() < MAX_TIME,
            "bound reached ({MAX_ATTEMPTS} runs or {} s): {killed} kills, {mid_run} mid-run, in {attempts} runs and {} s",
            MAX_TIME.as_secs(),
            started.elapsed().as_secs()
        );
        let members = db
            .count("SELECT COUNT(*) FROM wallet_outbox_archive_members")
            .await;
        if members > 3 * (inserted - BLOCK / 2) {
            add_block(&db, &mut inserted).await;
        }
        let members_before = members;
        let mut child = archiver()
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        if rng.below(5) == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(rng.below(300))).await;
        } else {
            let waiting = std::time::Instant::now();
            while child.try_wait().unwrap().is_none()
                && waiting.elapsed() < std::time::Duration::from_secs(60)
                && db
                    .count("SELECT COUNT(*) FROM wallet_outbox_archive_members")
                    .await
                    == members_before
            {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            tokio::time::sleep(std::time::Duration::from_millis(rng.below(200))).await;
        }
        let running = child.try_wait().unwrap().is_none();
        if running {
            child.start_kill().unwrap();
            killed += 1;
        }
        child.wait().await.unwrap();
        if running
            && db
                .count("SELECT COUNT(*) FROM wallet_outbox_archive_members")
                .await
                > members_before
        {
            mid_run += 1;
        }
        // Objects that receipts reference never change once recorded.
        for app in ["a1", "a2", "a3"] {
            for (_, data_key, _, _) in db.receipts(app).await {
                let dir_key = data_key.trim_end_matches("data.ndjson.gz").to_string();
                for key in [
                    data_key.clone(),
                    format!("{dir_key}manifest.json"),
                    format!("{dir_key}_SUCCESS"),
                ] {
                    // A put never modifies a file in place (it links or renames a new one), so
                    // inode, mtime and size identify the bytes cheaply.
                    use std::os::unix::fs::MetadataExt;
                    let meta = std::fs::metadata(dir.path().join(&key)).unwrap();
                    let id = (
                        meta.ino(),
                        meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
                        meta.size(),
                    );
                    let before = recorded.entry(key.clone()).or_insert(id);
                    assert_eq!(
                        *before, id,
                        "{key} was rewritten after its receipt was recorded"
                    );
                }
            }
        }
    }
    let last = archiver().output().await.unwrap();
    assert!(
        last.status.success(),
        "{}",
        String::from_utf8_lossy(&last.stdout)
    );

    for app in ["a1", "a2", "a3"] {
        let expected = db.expected_rows(app, T0 + DAY).await;
        assert_eq!(
            archived_rows(&db, store.as_ref(), app).await,
            expected,
            "{app}: nothing lost, nothing twice"
        );
        assert_eq!(db.members(app).await.len() as i64, inserted);
    }
    let env = env(&db, store.clone(), T0 + DAY);
    let verified = verify::run(&env, &VerifyOptions::everything(T0 + DAY, "DELIVERED")).await;
    let run = verify_run(&verified);
    assert!(
        run.findings.is_empty(),
        "every receipt's objects verify: {}",
        verified.to_json()
    );
    eprintln!(
        "crash test: {killed} kills in {attempts} runs ({} s) hit a running archiver, {mid_run} of them mid-run; {inserted} rows per app; {} orphans left by interrupted batches",
        started.elapsed().as_secs(),
        run.orphans.len()
    );
}

/// A fail point, the commands run cleanly before it, and the command killed there.
type Point<'a> = (&'a str, &'a [&'a [&'a str]], &'a [&'a str]);

/// The orphans verify reports: objects no receipt references (an interrupted batch's).
fn orphans(run: &Run) -> usize {
    run.summary["orphans"].as_array().map_or(0, Vec::len)
}

/// The process killed at each named fail point of archive, purge, compact and restore
/// (`OUTBOX_ARCHIVER_FAILPOINT`: it aborts there, as a SIGKILL would leave it), on an S3 server,
/// then the same command run again: it converges — every row archived exactly once, purged
/// exactly once, restored exactly once, every batch verified — and the objects an interrupted
/// batch left behind are written over by the rerun's identical ones (no orphan stays). Each
/// point reproduces alone: `cargo test --test integration each_named_fail_point`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_named_fail_point_of_a_run_converges_when_run_again() {
    let archive = [
        "archive",
        "--all-apps",
        "--batch-rows",
        "7",
        "--cutoff",
        "2026-01-02T00:00:00Z",
    ];
    let purge = ["purge", "--all-apps", "--grace", "0s"];
    let compact = ["compact", "--all-apps", "--older-than", "0s"];
    let restore = ["restore", "--all-apps", "--into-source"];
    let verify = ["verify", "--all-apps", "--cutoff", "2026-01-02T00:00:00Z"];
    let archived: &[&[&str]] = &[];
    let points: &[Point] = &[
        ("after-page", archived, &archive),
        ("after-data-put", archived, &archive),
        ("after-manifest-put", archived, &archive),
        ("after-success-put", archived, &archive),
        ("after-members", archived, &archive),
        ("before-commit", archived, &archive),
        ("after-purge-chunk", &[&archive], &purge),
        ("before-purge-commit", &[&archive], &purge),
        ("compact-after-delete", &[&archive, &purge], &compact),
        ("compact-before-commit", &[&archive, &purge], &compact),
        ("before-restore-chunk", &[&archive, &purge], &restore),
        ("restore-before-mark", &[&archive, &purge], &restore),
    ];
    for (point, before, killed) in points {
        let db = TestDb::new().await;
        let s3 = TestS3::new().await;
        let envs = cli_envs(&db, &s3);
        for app in ["a1", "a2"] {
            db.insert(&rows(app, 30)).await;
        }
        let expected: Vec<Vec<outbox_archiver::Row>> = vec![
            table_rows(&db, "wallet_outbox", "a1").await,
            table_rows(&db, "wallet_outbox", "a2").await,
        ];
        for command in *before {
            let run = run_cli(command, &envs).await;
            assert_eq!(run.code, 0, "{point}: {command:?}: {}", run.all_output);
        }
        let mut failing = envs.clone();
        failing.push(("OUTBOX_ARCHIVER_FAILPOINT", point.to_string()));
        let out = run_cli_output(killed, &failing).await;
        let output = String::from_utf8_lossy(&out.stderr);
        assert!(
            output.contains(&format!("fail point {point}: aborting")),
            "{point}: the run never reached it: {output}"
        );
        assert!(
            out.status.code().is_none(),
            "{point}: killed, not ended: {output}"
        );
        let run = run_cli(killed, &envs).await;
        assert_eq!(run.code, 0, "{point}: run again: {}", run.all_output);
        let run = run_cli(&verify, &envs).await;
        assert_eq!(run.code, 0, "{point}: {}", run.all_output);
        assert_eq!(orphans(&run), 0, "{point}: {}", run.summary);
        for (app, expected) in ["a1", "a2"].iter().zip(&expected) {
            let store = s3.store().await;
            assert_eq!(
                &archived_rows(&db, store.as_ref(), app).await,
                expected,
                "{point}: {app}: every row archived once"
            );
            // Compaction replaces a batch's member rows by a digest on its receipt.
            let members = if *killed == compact { 0 } else { 30 };
            assert_eq!(db.members(app).await.len(), members, "{point}: {app}");
        }
        let left = db.count("SELECT COUNT(*) FROM wallet_outbox").await;
        match *killed == restore || before.is_empty() {
            // Archived only, or restored: every row in the source, as it was.
            true => {
                assert_eq!(left, 60, "{point}");
                for (app, expected) in ["a1", "a2"].iter().zip(&expected) {
                    assert_eq!(
                        &table_rows(&db, "wallet_outbox", app).await,
                        expected,
                        "{point}: {app}: the source as it was"
                    );
                }
            }
            false if *killed == purge || *killed == compact => assert_eq!(left, 0, "{point}"),
            false => unreachable!(),
        }
    }
}

/// relocate killed at its fail point — every batch re-read at the new home, the move written in
/// its one transaction, not committed: the home has not moved (every command still runs at the
/// old one); run again, it moves, and the archive verifies at the new home.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relocate_killed_before_its_commit_moves_nothing_and_moves_when_run_again() {
    use crate::home::{copy_tree, with_store};
    let db = TestDb::new().await;
    let s3 = TestS3::in_process().await;
    let envs = cli_envs(&db, &s3);
    db.insert(&rows("a1", 30)).await;
    let run = run_cli(
        &[
            "archive",
            "--all-apps",
            "--batch-rows",
            "7",
            "--cutoff",
            "2026-01-02T00:00:00Z",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let outbox_archiver::Location::S3 { bucket, prefix } = &s3.location else {
        unreachable!()
    };
    let server = s3.server.as_ref().unwrap();
    let new_bucket = format!("{bucket}-dr");
    server.create_bucket(&new_bucket).unwrap();
    copy_tree(&server.root.join(bucket), &server.root.join(&new_bucket));
    let new_home = format!("s3://{new_bucket}/{}", prefix.trimmed());
    let relocate = ["relocate", "--to", &new_home, "--reason", "drill"];

    let mut failing = envs.clone();
    failing.push(("OUTBOX_ARCHIVER_FAILPOINT", "relocate-before-commit".into()));
    let out = run_cli_output(&relocate, &failing).await;
    let output = String::from_utf8_lossy(&out.stderr);
    assert!(
        output.contains("fail point relocate-before-commit: aborting"),
        "{output}"
    );
    assert!(out.status.code().is_none(), "killed, not ended: {output}");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_home WHERE reason = 'drill'")
            .await,
        0,
        "nothing moved"
    );
    let run = run_cli(&["verify"], &envs).await;
    assert_eq!(
        run.code, 0,
        "the old home is still the home: {}",
        run.all_output
    );

    let run = run_cli(&relocate, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&["verify"], &with_store(&envs, &new_home)).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(orphans(&run), 0, "{}", run.summary);
    let run = run_cli(&["verify"], &envs).await;
    assert_eq!(
        run.code, 2,
        "the old home is refused now: {}",
        run.all_output
    );
}
