//! A live outbox (issue 5, in part): a relay that behaves like the services' outbox workers —
//! producers insert PENDING rows; workers claim with `FOR UPDATE SKIP LOCKED`, lease them as
//! DELIVERING, then mark them DELIVERED, RETRYABLE (with backoff) or FAILED — runs while `archive`
//! and `purge` loop beside it. Nothing undelivered is archived or purged; after the relay drains
//! and the archiver catches up (stragglers included), every delivered row is archived exactly
//! once. The worst claim latency with and without the archiver is printed, not asserted.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_archiver::codec::Value;
use outbox_archiver::commands::purge::{self, PurgeOptions};
use outbox_archiver::pipeline::apps::Apps;
use outbox_archiver::seed::Rng;
use sqlx::MySqlPool;

use crate::support::*;

const PRODUCERS: u64 = 2;
const ROWS_PER_PRODUCER: u64 = 600;
const WORKERS: u64 = 3;

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

async fn produce(pool: MySqlPool, producer: u64) {
    for chunk in 0..ROWS_PER_PRODUCER / 20 {
        let now = now_ms();
        let rows: Vec<_> = (0..20)
            .map(|i| {
                let mut r = row(
                    &format!("app{}", (chunk + i) % 2),
                    &format!("p{producer}-{chunk:03}-{i:02}"),
                    now,
                );
                r[at("status")] = Value::Text("PENDING".into());
                r[at("worker_id")] = Value::Text(String::new());
                r[at("next_retry_at_ms")] = Value::Int(0);
                r[at("created_at_ms")] = Value::Int(now);
                r
            })
            .collect();
        outbox_archiver::seed::insert_rows(&pool, &outbox_archiver::table::WALLET_OUTBOX, &rows)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// One claim-and-deliver round; returns the claim transaction's duration and how many rows.
async fn work_once(pool: &MySqlPool, worker: u64, rng: &mut Rng) -> (Duration, usize) {
    let started = Instant::now();
    let now = now_ms();
    let mut tx = pool.begin().await.unwrap();
    let mut claimed: Vec<(String, String, i64)> = Vec::new();
    for (status, extra) in [
        ("PENDING", "lock_until_ms IS NULL"),
        ("RETRYABLE", "next_retry_at_ms <= ?"),
        ("DELIVERING", "lock_until_ms <= ?"),
    ] {
        let sql = format!(
            "SELECT app_code, event_id, retry_count FROM wallet_outbox WHERE status = '{status}' AND {extra} \
             ORDER BY created_at_ms, event_id LIMIT 20 FOR UPDATE SKIP LOCKED"
        );
        let mut q = sqlx::query_as::<_, (String, String, i64)>(sqlx::AssertSqlSafe(sql));
        if status != "PENDING" {
            q = q.bind(now);
        }
        claimed.extend(q.fetch_all(&mut *tx).await.unwrap());
    }
    for (app, id, _) in &claimed {
        sqlx::query("UPDATE wallet_outbox SET status = 'DELIVERING', worker_id = ?, lock_until_ms = ?, updated_at_ms = ? WHERE app_code = ? AND event_id = ?")
            .bind(format!("w{worker}"))
            .bind(now + 5_000)
            .bind(now)
            .bind(app)
            .bind(id)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    let claim = started.elapsed();
    for (app, id, retries) in &claimed {
        let roll = rng.below(100);
        let now = now_ms();
        let (sql, next) = if roll < 85 {
            ("UPDATE wallet_outbox SET status = 'DELIVERED', worker_id = '', lock_until_ms = NULL, last_error = NULL, updated_at_ms = ? WHERE app_code = ? AND event_id = ?", None)
        } else if *retries < 3 {
            ("UPDATE wallet_outbox SET status = 'RETRYABLE', worker_id = '', lock_until_ms = NULL, retry_count = retry_count + 1, next_retry_at_ms = ?, last_error = 'broker timeout', updated_at_ms = ? WHERE app_code = ? AND event_id = ?", Some(now + 30))
        } else {
            ("UPDATE wallet_outbox SET status = 'FAILED', worker_id = '', lock_until_ms = NULL, last_error = 'max retries', updated_at_ms = ? WHERE app_code = ? AND event_id = ?", None)
        };
        let mut q = sqlx::query(sql);
        if let Some(next) = next {
            q = q.bind(next);
        }
        q.bind(now).bind(app).bind(id).execute(pool).await.unwrap();
    }
    (claim, claimed.len())
}

/// Runs producers and workers until every row is DELIVERED or FAILED; returns the worst claim.
async fn relay(pool: &MySqlPool) -> Duration {
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| tokio::spawn(produce(pool.clone(), p)))
        .collect();
    let worst = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (pool, worst, done) = (pool.clone(), worst.clone(), done.clone());
            tokio::spawn(async move {
                let mut rng = Rng::new(w + 1);
                while !done.load(Ordering::SeqCst) {
                    let (claim, n) = work_once(&pool, w, &mut rng).await;
                    worst.fetch_max(claim.as_micros() as u64, Ordering::SeqCst);
                    if n == 0 {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.await.unwrap();
    }
    loop {
        let open: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM wallet_outbox WHERE status NOT IN ('DELIVERED', 'FAILED')",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if open == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.unwrap();
    }
    Duration::from_micros(worst.load(Ordering::SeqCst))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_live_outbox_archives_every_delivered_row_once_and_nothing_else() {
    // Without the archiver: the baseline claim latency.
    let baseline = {
        let db = TestDb::new().await;
        let worst = relay(&db.db.pool).await;
        db.drop().await;
        worst
    };

    let (db, _s3, store) = fixture().await;
    let stop = Arc::new(AtomicBool::new(false));
    let archiver = {
        let (stop, env, db_opts) = (
            stop.clone(),
            env(&db, store.clone(), 0),
            options(&db, &[], 0),
        );
        let purge_opts = PurgeOptions {
            apps: Apps::All,
            parallel_apps: 2,
            ..purge_options(&db, &[])
        };
        tokio::spawn(async move {
            let mut runs = 0;
            while !stop.load(Ordering::SeqCst) {
                let mut env = env.clone();
                env.base.now_ms = Arc::new(now_ms);
                let mut opts = db_opts.clone();
                opts.apps = Apps::All;
                opts.cutoff_ms = now_ms() - 50;
                opts.limits.max_rows = 100;
                let summary = archive(&env, &opts).await;
                assert!(summary.ok, "{}", summary.to_json());
                let purged = purge::run(&env, &purge_opts).await;
                assert!(purged.ok, "{}", purged.to_json());
                runs += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            runs
        })
    };
    let with_archiver = relay(&db.db.pool).await;
    stop.store(true, Ordering::SeqCst);
    let runs = archiver.await.unwrap();

    // Catch up, stragglers included (deliveries that committed late with an older updated_at_ms).
    let mut opts = options(&db, &[], now_ms() + 1);
    opts.apps = Apps::All;
    let env = env(&db, store.clone(), now_ms());
    assert!(archive(&env, &opts).await.ok);
    opts.stragglers = true;
    let stragglers = archive(&env, &opts).await;
    assert!(stragglers.ok, "{}", stragglers.to_json());
    let straggler_rows: u64 = stragglers.apps.iter().map(|a| a.rows).sum();

    let produced = (PRODUCERS * ROWS_PER_PRODUCER) as i64;
    let failed = db
        .count("SELECT COUNT(*) FROM wallet_outbox WHERE status = 'FAILED'")
        .await;
    let members = db
        .count("SELECT COUNT(*) FROM wallet_outbox_archive_members")
        .await;
    let delivered_left = db
        .count("SELECT COUNT(*) FROM wallet_outbox WHERE status = 'DELIVERED'")
        .await;
    let delivered_unarchived = db
        .count("SELECT COUNT(*) FROM wallet_outbox s WHERE s.status = 'DELIVERED' AND NOT EXISTS (SELECT 1 FROM wallet_outbox_archive_members m WHERE m.app_code = s.app_code AND m.event_id = s.event_id)")
        .await;
    assert_eq!(delivered_unarchived, 0, "every delivered row is archived");
    let purged = produced - db.count("SELECT COUNT(*) FROM wallet_outbox").await;
    assert_eq!(
        members,
        produced - failed,
        "every delivered row is a member, exactly once (the members key is unique)"
    );
    assert_eq!(
        purged + delivered_left,
        members,
        "purge deleted only members"
    );
    let failed_archived = db
        .count("SELECT COUNT(*) FROM wallet_outbox s JOIN wallet_outbox_archive_members m ON m.app_code = s.app_code AND m.event_id = s.event_id WHERE s.status <> 'DELIVERED'")
        .await;
    assert_eq!(failed_archived, 0, "nothing undelivered was archived");
    for app in ["app0", "app1"] {
        let archived = archived_rows(&db, store.as_ref(), app).await;
        assert!(archived
            .iter()
            .all(|r| r[at("status")] == Value::Text("DELIVERED".into())));
        assert_eq!(
            archived.len() as i64,
            db.count(&format!(
                "SELECT COUNT(*) FROM wallet_outbox_archive_members WHERE app_code = '{app}'"
            ))
            .await
        );
    }
    eprintln!(
        "relay: {produced} rows, {failed} failed, {members} archived ({straggler_rows} as stragglers), {purged} purged during the run; \
         {runs} archive+purge rounds; worst claim {:.1} ms without the archiver, {:.1} ms with it",
        baseline.as_secs_f64() * 1e3,
        with_archiver.as_secs_f64() * 1e3
    );
    db.drop().await;
}
