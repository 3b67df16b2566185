//! Writes paced by a real replica: a private primary with a binary log and a private replica
//! of it (MariaDB by binary log position, MySQL by GTID). Lag is injected by stopping the replica's
//! SQL thread: purge waits before its next chunk and goes on when the thread runs again; a
//! replica still stopped after `--replica-wait-timeout` stops purge with exit 1, naming it —
//! and across all of it nothing is deleted twice or lost. archive waits the same way before a
//! receipt transaction, by a pt-heartbeat table, and the replicas can be found on the primary.

use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_archiver::purge;
use outbox_archiver::Replica;
use outbox_archiver::ReplicaGate;
use outbox_archiver::Stops;

use crate::support::*;

const CUTOFF: i64 = T0 + DAY;

fn gate(url: &str, max_lag: Duration, timeout: Duration) -> Stops {
    Stops {
        replicas: Some(Arc::new(ReplicaGate::new(
            vec![Replica::new(url).unwrap()],
            max_lag,
            timeout,
            None,
        ))),
        ..Stops::default()
    }
}

/// A primary and its replica, a database on the primary holding 1,200 archived rows of a1 (three
/// purge chunks) that the replica has applied, and the store.
async fn archived_on_a_replicated_primary() -> (
    Replicated,
    TestDb,
    TestS3,
    Arc<dyn outbox_archiver::ObjectStore>,
) {
    let pair = Replicated::start().await;
    let db = TestDb::on(&pair.primary.url()).await;
    let (s3, store) = {
        let s3 = TestS3::new().await;
        let store = s3.store().await;
        (s3, store)
    };
    db.insert(&rows("a1", 1_200)).await;
    let archived = archive(
        &env(&db, store.clone(), CUTOFF + DAY),
        &options(&db, &["a1"], CUTOFF),
    )
    .await;
    assert!(archived.ok, "{}", archived.to_json());
    pair.caught_up().await;
    (pair, db, s3, store)
}

async fn rows_on(url: &str) -> i64 {
    let db = outbox_archiver::Db::connect(url, 1).await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM wallet_outbox")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    db.close().await;
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_waits_for_a_stopped_replica_and_goes_on_when_it_runs_again() {
    let (pair, db, _s3, store) = archived_on_a_replicated_primary().await;
    let replica_url = pair.replica_url(&db.name);
    assert_eq!(rows_on(&replica_url).await, 1_200);
    pair.on_replica("STOP REPLICA SQL_THREAD").await;

    let ctx = env(&db, store.clone(), CUTOFF + DAY).with_stops(gate(
        &replica_url,
        Duration::from_secs(1),
        Duration::from_secs(120),
    ));
    let opts = purge_options(&db, &["a1"]);
    let started = Instant::now();
    let purging = tokio::spawn(async move { purge::run(&ctx, &opts).await });
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox").await,
        1_200,
        "nothing is deleted while the replica does not apply"
    );
    assert!(!purging.is_finished(), "purge waits");
    pair.on_replica("START REPLICA SQL_THREAD").await;
    let summary = purging.await.unwrap();
    assert!(summary.ok, "{}", summary.to_json());
    let purged = purge_of(&summary, "a1");
    assert_eq!(purged.purged_rows, 1_200);
    assert!(
        purged.replica_wait.replica_wait_ms >= 2_500,
        "the wait is counted: {}",
        summary.to_json()
    );
    assert!(purged.replica_wait.replica_waits >= 1);
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert_eq!(
        report(&summary, "a1")
            .stop_reason
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("done")
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    pair.caught_up().await;
    assert_eq!(
        rows_on(&replica_url).await,
        0,
        "the replica deleted them too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_waits_while_a_replica_is_seconds_behind() {
    // A delayed replica (MASTER_DELAY / SOURCE_DELAY) reports a number of seconds above the limit.
    let (pair, db, _s3, store) = archived_on_a_replicated_primary().await;
    let replica_url = pair.replica_url(&db.name);
    pair.delay_replica(5).await;
    sqlx::query("CREATE TABLE nudge (id INT PRIMARY KEY)")
        .execute(&db.db.pool)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let lag = Replica::new(&replica_url).unwrap().lag(None).await;
    assert!(
        matches!(lag, outbox_archiver::Lag::Behind(d) if d >= Duration::from_secs(1)),
        "{lag}"
    );
    let ctx = env(&db, store.clone(), CUTOFF + DAY).with_stops(gate(
        &replica_url,
        Duration::from_secs(1),
        Duration::from_secs(60),
    ));
    let summary = purge::run(&ctx, &purge_options(&db, &["a1"])).await;
    assert!(summary.ok, "{}", summary.to_json());
    let purged = purge_of(&summary, "a1");
    assert_eq!(purged.purged_rows, 1_200);
    assert!(
        purged.replica_wait.replica_wait_ms >= 1_500,
        "waited for the delayed replica: {}",
        summary.to_json()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_stopped_beyond_the_timeout_stops_purge_and_nothing_is_lost() {
    let (pair, db, s3, _store) = archived_on_a_replicated_primary().await;
    let replica_url = pair.replica_url(&db.name);
    pair.on_replica("STOP REPLICA").await;
    // Through the binary, as the CronJob runs it.
    let s3_env = s3.binary_env();
    let mut envs = vec![
        ("DATABASE_URL", db.url.clone()),
        ("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()),
        ("OUTBOX_ARCHIVER_REPLICAS", replica_url.clone()),
    ];
    envs.extend(s3_env);
    let run = run_cli(
        &[
            "purge",
            "--app",
            "a1",
            "--grace",
            "0s",
            "--max-replica-lag",
            "1s",
            "--replica-wait-timeout",
            "2s",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    let app = &run.summary["apps"][0];
    let error = app["error"].as_str().unwrap();
    let name = format!("127.0.0.1:{}", pair.replica.port());
    assert!(error.contains(&name), "the replica is named: {error}");
    assert!(error.contains("--replica-wait-timeout"), "{error}");
    assert!(
        app["stop_reason"]
            .as_str()
            .unwrap()
            .starts_with("replica lag"),
        "{app}"
    );
    assert_eq!(app["purged_rows"], 0);
    assert!(
        !run.all_output
            .contains(crate::support::private_server::PASSWORD),
        "no secret"
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 1_200);

    // The replica comes back: the next run purges everything, once.
    pair.on_replica("START REPLICA").await;
    let run = run_cli(
        &[
            "purge",
            "--app",
            "a1",
            "--grace",
            "0s",
            "--max-replica-lag",
            "1s",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(run.summary["apps"][0]["purged_rows"], 1_200);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    assert_eq!(
        db.count("SELECT CAST(COALESCE(SUM(purged_rows), 0) AS SIGNED) FROM wallet_outbox_archive_receipts")
            .await,
        1_200,
        "every row counted once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_waits_by_a_heartbeat_and_replicas_are_found_on_the_primary() {
    let pair = Replicated::start().await;
    let db = TestDb::on(&pair.primary.url()).await;
    let s3 = TestS3::new().await;
    db.insert(&rows("a1", 30)).await;
    // pt-heartbeat's table, kept fresh on the primary (as `pt-heartbeat --update --utc` does).
    sqlx::query(
        "CREATE TABLE heartbeat (ts VARCHAR(26) NOT NULL, server_id INT UNSIGNED NOT NULL PRIMARY KEY)",
    )
    .execute(&db.db.pool)
    .await
    .unwrap();
    let beating = {
        let pool = db.db.pool.clone();
        tokio::spawn(async move {
            loop {
                let _ = sqlx::query(
                    "REPLACE INTO heartbeat (ts, server_id) VALUES (DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%dT%H:%i:%s.%f'), 1)",
                )
                .execute(&pool)
                .await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    pair.caught_up().await;
    pair.on_replica("STOP REPLICA SQL_THREAD").await;
    // The replica's newest heartbeat grows older than --max-replica-lag.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut envs = vec![
        ("DATABASE_URL", db.url.clone()),
        ("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()),
    ];
    envs.extend(s3.binary_env());
    let args = [
        "archive",
        "--app",
        "a1",
        "--cutoff",
        "2026-01-02T00:00:00Z",
        "--replicas-from",
        "hosts",
        "--heartbeat-table",
        "heartbeat",
        "--max-replica-lag",
        "1s",
        "--replica-wait-timeout",
        "3s",
    ];
    let run = run_cli(&args, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    let error = run.summary["apps"][0]["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        error.contains(&format!("127.0.0.1:{}", pair.replica.port())),
        "found by SHOW REPLICA HOSTS and named: {error}"
    );
    assert_eq!(
        db.receipts("a1").await.len(),
        0,
        "no receipt while the replica lags"
    );

    pair.on_replica("START REPLICA SQL_THREAD").await;
    let run = run_cli(&args, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let app = &run.summary["apps"][0];
    assert_eq!(app["rows"], 30);
    assert_eq!(app["stop_reason"], "caught up");
    assert!(
        app.get("replaced_objects").is_none(),
        "the objects written before the wait are accepted as they are: {app}"
    );
    beating.abort();
}

/// A shutdown (SIGTERM) while compact waits for a stopped replica stops the app cleanly — Stopped,
/// exit 0, as archive and purge do — and compacts nothing; a later run compacts it all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_while_compact_waits_for_a_replica_is_a_clean_stop() {
    use outbox_archiver::Apps;
    use outbox_archiver::Outcome;
    use outbox_archiver::{compact, compact::CompactOptions};

    let (pair, db, _s3, store) = archived_on_a_replicated_primary().await;
    let purged = purge::run(
        &env(&db, store.clone(), CUTOFF + DAY),
        &purge_options(&db, &["a1"]),
    )
    .await;
    assert!(purged.ok, "{}", purged.to_json());
    pair.caught_up().await;
    let replica_url = pair.replica_url(&db.name);
    pair.on_replica("STOP REPLICA SQL_THREAD").await;

    let mut opts = CompactOptions::new(Apps::Listed(vec!["a1".into()]), 0);
    opts.lock_prefix = db.lock_prefix();
    let ctx = env(&db, store.clone(), CUTOFF + 2 * DAY).with_stops(gate(
        &replica_url,
        Duration::from_secs(1),
        Duration::from_secs(120),
    ));
    let shutdown = ctx.shutdown.clone();
    let compacting = {
        let opts = opts.clone();
        tokio::spawn(async move { compact::run(&ctx, &opts).await })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!compacting.is_finished(), "compact waits for the replica");
    shutdown.cancel();
    let summary = compacting.await.unwrap();
    let a1 = report(&summary, "a1");
    assert_eq!(a1.outcome, Outcome::Stopped, "{}", summary.to_json());
    assert!(
        summary.ok,
        "a SIGTERM is a clean stop: {}",
        summary.to_json()
    );
    assert_eq!(summary.exit_code, 0);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_members")
            .await,
        1_200,
        "nothing compacted"
    );

    pair.on_replica("START REPLICA SQL_THREAD").await;
    let again = compact::run(&env(&db, store.clone(), CUTOFF + 2 * DAY), &opts).await;
    assert!(again.ok, "{}", again.to_json());
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_members")
            .await,
        0,
        "the next run compacts it all"
    );
}
