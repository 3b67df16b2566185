//! A live outbox (issue 5, in part): a relay that behaves like the services' outbox workers —
//! producers insert PENDING rows; workers claim with `FOR UPDATE SKIP LOCKED`, lease them as
//! DELIVERING, then mark them DELIVERED, RETRYABLE (with backoff) or FAILED — runs while `archive`
//! and `purge` loop beside it. Nothing undelivered is archived or purged; after the relay drains
//! and the archiver catches up (stragglers included), every delivered row is archived exactly
//! once. The worst claim latency with and without the archiver is printed, not asserted. The same
//! relay runs over room_outbox with the room seed's claims (issue 15).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_archiver::testing::Rng;
use outbox_archiver::Apps;
use outbox_archiver::Value;
use outbox_archiver::{purge, purge::PurgeOptions};
use outbox_archiver::{TableSpec, ROOM_OUTBOX, WALLET_OUTBOX};
use sqlx::MySqlPool;

use crate::support::*;

const PRODUCERS: u64 = 2;
const ROWS_PER_PRODUCER: u64 = 600;
const WORKERS: u64 = 3;

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

async fn produce(pool: MySqlPool, spec: &'static TableSpec, producer: u64) {
    let at = |column: &str| at_in(spec, column);
    for chunk in 0..ROWS_PER_PRODUCER / 20 {
        let now = now_ms();
        let rows: Vec<_> = (0..20)
            .map(|i| {
                let (app, id) = (
                    format!("app{}", (chunk + i) % 2),
                    format!("p{producer}-{chunk:03}-{i:02}"),
                );
                let mut r = match spec.name {
                    "room_outbox" => room_row(&app, &id, now, vec![i as u8; i as usize * 7]),
                    _ => row(&app, &id, now),
                };
                r[at("status")] = Value::Text("PENDING".into());
                r[at("worker_id")] = Value::Text(String::new());
                r[at("next_retry_at_ms")] = Value::Int(0);
                r[at("created_at_ms")] = Value::Int(now);
                r
            })
            .collect();
        outbox_archiver::testing::insert_rows(&pool, spec, &rows)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// One claim-and-deliver round; returns the claim transaction's duration and how many rows.
async fn work_once(
    pool: &MySqlPool,
    spec: &TableSpec,
    worker: u64,
    rng: &mut Rng,
) -> (Duration, usize) {
    let table = spec.name;
    let started = Instant::now();
    let now = now_ms();
    // A claim the server chose as a deadlock's victim (two claims' next-key locks crossing) is
    // rolled back and tried again on the next round, as a relay does.
    let claimed = match claim(pool, table, worker, now).await {
        Ok(claimed) => claimed,
        Err(sqlx::Error::Database(e)) if matches!(e.code().as_deref(), Some("40001")) => Vec::new(),
        Err(e) => panic!("claiming: {e}"),
    };
    let claim = started.elapsed();
    for (app, id, retries) in &claimed {
        // Every 20th event always fails: retried with backoff, then dead (FAILED).
        let roll = if id.ends_with("-13") {
            99
        } else {
            rng.below(100)
        };
        let now = now_ms();
        let (sql, next) = if roll < 85 {
            ("SET status = 'DELIVERED', worker_id = '', lock_until_ms = NULL, last_error = NULL, updated_at_ms = ? WHERE app_code = ? AND event_id = ?", None)
        } else if *retries < 3 {
            ("SET status = 'RETRYABLE', worker_id = '', lock_until_ms = NULL, retry_count = retry_count + 1, next_retry_at_ms = ?, last_error = 'broker timeout', updated_at_ms = ? WHERE app_code = ? AND event_id = ?", Some(now + 30))
        } else {
            ("SET status = 'FAILED', worker_id = '', lock_until_ms = NULL, last_error = 'max retries', updated_at_ms = ? WHERE app_code = ? AND event_id = ?", None)
        };
        let sql = format!("UPDATE {table} {sql}");
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        if let Some(next) = next {
            q = q.bind(next);
        }
        q.bind(now).bind(app).bind(id).execute(pool).await.unwrap();
    }
    (claim, claimed.len())
}

/// One claim transaction of the room seed's relay: due pending and retryable rows and expired
/// leases, `FOR UPDATE SKIP LOCKED`, leased to `worker`.
async fn claim(
    pool: &MySqlPool,
    table: &str,
    worker: u64,
    now: i64,
) -> Result<Vec<(String, String, i64)>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let mut claimed: Vec<(String, String, i64)> = Vec::new();
    // The room seed's claims: pending and retryable rows due and not leased, expired leases.
    for (status, extra) in [
        ("PENDING", "lock_until_ms IS NULL AND next_retry_at_ms <= ?"),
        (
            "RETRYABLE",
            "lock_until_ms IS NULL AND next_retry_at_ms <= ?",
        ),
        ("DELIVERING", "lock_until_ms <= ?"),
    ] {
        let sql = format!(
            "SELECT app_code, event_id, retry_count FROM {table} WHERE status = '{status}' AND {extra} \
             ORDER BY created_at_ms, event_id LIMIT 20 FOR UPDATE SKIP LOCKED"
        );
        let q = sqlx::query_as::<_, (String, String, i64)>(sqlx::AssertSqlSafe(sql)).bind(now);
        claimed.extend(q.fetch_all(&mut *tx).await?);
    }
    for (app, id, _) in &claimed {
        sqlx::query(sqlx::AssertSqlSafe(format!("UPDATE {table} SET status = 'DELIVERING', worker_id = ?, lock_until_ms = ?, updated_at_ms = ? WHERE app_code = ? AND event_id = ?")))
            .bind(format!("w{worker}"))
            .bind(now + 5_000)
            .bind(now)
            .bind(app)
            .bind(id)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(claimed)
}

/// Runs producers and workers until every row is DELIVERED or FAILED; returns the worst claim.
async fn relay(pool: &MySqlPool, spec: &'static TableSpec) -> Duration {
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| tokio::spawn(produce(pool.clone(), spec, p)))
        .collect();
    let worst = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (pool, worst, done) = (pool.clone(), worst.clone(), done.clone());
            tokio::spawn(async move {
                let mut rng = Rng::new(w + 1);
                while !done.load(Ordering::SeqCst) {
                    let (claim, n) = work_once(&pool, spec, w, &mut rng).await;
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
        let open: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*) FROM {} WHERE status NOT IN ('DELIVERED', 'FAILED')",
            spec.name
        )))
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
        let worst = relay(&db.db.pool, &WALLET_OUTBOX).await;
        worst
    };
    live_outbox(TestDb::new().await, Some(baseline)).await;
}

/// room_outbox with the room seed's lifecycle beside the archiver: envelopes of every size,
/// claims, leases, retries and dead (FAILED) rows; nothing undelivered is archived or purged.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_live_room_outbox_archives_every_delivered_row_once_and_nothing_else() {
    live_outbox(TestDb::for_table(&ROOM_OUTBOX).await, None).await;
}

async fn live_outbox(db: TestDb, baseline: Option<Duration>) {
    let spec = db.spec;
    let (table, members_table) = (spec.name, spec.members_table());
    let s3 = TestS3::new().await;
    let store = s3.store().await;
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
            let (mut runs, mut purged_live) = (0, 0);
            while !stop.load(Ordering::SeqCst) {
                let mut env = env.clone();
                env.base.clock = Arc::new(now_ms);
                let mut opts = db_opts.clone();
                opts.apps = Apps::All;
                opts.cutoff_ms = now_ms() - 50;
                opts.limits.max_rows = 100;
                let summary = archive(&env, &opts).await;
                assert!(summary.ok, "{}", summary.to_json());
                let purged = purge::run(&env, &purge_opts).await;
                assert!(purged.ok, "{}", purged.to_json());
                // Rows deleted by a round that ended before the relay did: purged beside it.
                if !stop.load(Ordering::SeqCst) {
                    purged_live += purged.apps.iter().map(|a| a.rows).sum::<u64>();
                }
                runs += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (runs, purged_live)
        })
    };
    let with_archiver = relay(&db.db.pool, spec).await;
    stop.store(true, Ordering::SeqCst);
    let (runs, purged_live) = archiver.await.unwrap();
    assert!(
        purged_live > 0,
        "purge deleted rows while the relay was still claiming and delivering ({runs} rounds)"
    );

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
        .count(&format!(
            "SELECT COUNT(*) FROM {table} WHERE status = 'FAILED'"
        ))
        .await;
    let members = db
        .count(&format!("SELECT COUNT(*) FROM {members_table}"))
        .await;
    let delivered_left = db
        .count(&format!(
            "SELECT COUNT(*) FROM {table} WHERE status = 'DELIVERED'"
        ))
        .await;
    let delivered_unarchived = db
        .count(&format!("SELECT COUNT(*) FROM {table} s WHERE s.status = 'DELIVERED' AND NOT EXISTS (SELECT 1 FROM {members_table} m WHERE CAST(m.app_code AS BINARY) = CAST(s.app_code AS BINARY) AND m.event_id = s.event_id)"))
        .await;
    assert_eq!(delivered_unarchived, 0, "every delivered row is archived");
    let purged = produced - db.count(&format!("SELECT COUNT(*) FROM {table}")).await;
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
        .count(&format!("SELECT COUNT(*) FROM {table} s JOIN {members_table} m ON CAST(m.app_code AS BINARY) = CAST(s.app_code AS BINARY) AND m.event_id = s.event_id WHERE s.status <> 'DELIVERED'"))
        .await;
    assert_eq!(failed_archived, 0, "nothing undelivered was archived");
    for app in ["app0", "app1"] {
        let archived = archived_rows(&db, store.as_ref(), app).await;
        assert!(archived
            .iter()
            .all(|r| r[at_in(spec, "status")] == Value::Text("DELIVERED".into())));
        assert_eq!(
            archived.len() as i64,
            db.count(&format!(
                "SELECT COUNT(*) FROM {members_table} WHERE app_code = '{app}'"
            ))
            .await
        );
    }
    eprintln!(
        "relay over {table}: {produced} rows, {failed} failed, {members} archived ({straggler_rows} as stragglers), {purged} purged during the run; \
         {runs} archive+purge rounds ({purged_live} rows purged while the relay ran); worst claim {} ms without the archiver, {:.1} ms with it",
        baseline.map_or("(not measured)".into(), |b| format!("{:.1}", b.as_secs_f64() * 1e3)),
        with_archiver.as_secs_f64() * 1e3
    );
}
