//! `status`: the figures per app, as JSON and as a table, from index range counts.

use outbox_archiver::Apps;
use outbox_archiver::SourceTable;
use outbox_archiver::WALLET_OUTBOX;
use outbox_archiver::{status, status::StatusOptions};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_cursor_backlog_and_last_run() {
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 50)).await;
    db.insert(
        &(0..7)
            .map(|i| row("a2", &format!("b{i}"), T0 + DAY + i))
            .collect::<Vec<_>>(),
    )
    .await;
    let now = T0 + 3 * DAY;
    let env = env(&db, store, now);
    let mut opts = options(&db, &["a1"], T0 + 40);
    opts.limits.max_rows = 15;
    assert!(archive(&env, &opts).await.ok);

    let options = StatusOptions {
        grace_ms: 86_400_000,
        apps: Apps::All,
        cutoff_ms: T0 + 2 * DAY,
        delivered_status: "DELIVERED".into(),
    };
    let summary = status::run(&db_context(&db, now), &options).await;
    assert!(summary.ok, "{}", summary.to_json());
    let json = serde_json::to_value(&summary).unwrap();
    let apps = json["apps"].as_array().unwrap();
    let a1 = &apps[0];
    assert_eq!(a1["app_code"], "a1");
    assert_eq!(a1["receipts"], 3, "{a1}");
    assert_eq!(a1["archived_rows"], 40);
    assert_eq!(a1["awaiting_purge_rows"], 40);
    assert_eq!(a1["cursor"]["event_id"], "e39");
    assert_eq!(a1["cursor_age_ms"], now - (T0 + 39));
    assert_eq!(
        a1["backlog_rows"], 10,
        "rows after the cursor and below the cutoff"
    );
    assert_eq!(a1["oldest_backlog_ms"], T0 + 40);
    assert_eq!(a1["last_run"]["outcome"], "archived");
    assert_eq!(a1["last_run"]["row_count"], 40);
    let a2 = &apps[1];
    assert_eq!(
        (
            a2["app_code"].as_str(),
            a2["receipts"].as_i64(),
            a2["backlog_rows"].as_i64()
        ),
        (Some("a2"), Some(0), Some(7))
    );
    assert!(a2["cursor"].is_null() && a2["last_run"].is_null());

    let table = status::run(
        &db_context(&db, now),
        &StatusOptions {
            grace_ms: 86_400_000,
            ..options
        },
    )
    .await;
    let text = outbox_archiver::render(
        &table,
        outbox_archiver::Format::Table,
        std::time::Duration::ZERO,
        now,
    );
    assert!(text.starts_with("APP "), "{text}");
    assert!(text.lines().nth(1).unwrap().starts_with("a1 "), "{text}");
    assert!(text.contains("archived"), "{text}");
}

/// The backlog is an index range on the retention index, never a table scan. Other apps' rows
/// around a1's make the range the cheaper plan on both servers (on a table of one app, MySQL
/// rightly scans the whole index: it is the range).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backlog_count_is_an_index_range() {
    let db = TestDb::new().await;
    db.insert(&rows("a0", 2_000)).await;
    db.insert(&rows("a1", 200)).await;
    db.insert(&rows("a2", 2_000)).await;
    db.exec("ANALYZE TABLE wallet_outbox").await;
    let pages = SourceTable::new(&db.db.pool, &WALLET_OUTBOX);
    for after in [false, true] {
        // FORMAT=JSON: MySQL 9's default EXPLAIN is a tree of text, MariaDB's a table.
        let sql = format!("EXPLAIN FORMAT=JSON {}", pages.backlog_count_sql(after));
        let mut q = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql))
            .bind("a1")
            .bind("DELIVERED")
            .bind(T0 + DAY);
        if after {
            q = q.bind(T0 + 5).bind(T0 + 5).bind(T0 + 5).bind("e5");
        }
        let plan: serde_json::Value =
            serde_json::from_str(&q.fetch_one(&db.db.pool).await.unwrap()).unwrap();
        let (key, access) = index_access(&plan).unwrap_or_else(|| panic!("an index in {plan}"));
        assert_eq!(key, "idx_wallet_outbox_retention", "after={after}: {plan}");
        assert!(
            ["range", "ref", "index_range_scan", "index_lookup"].contains(&access.as_str()),
            "after={after}: {access} in {plan}"
        );
    }
}

/// The index a JSON plan reads and how: MariaDB's and MySQL's JSON version 1 put it in a
/// `table` object (`key`, `access_type`), MySQL 9's version 2 in an access node (`index_name`,
/// `index_access_type`).
fn index_access(plan: &serde_json::Value) -> Option<(String, String)> {
    match plan {
        serde_json::Value::Object(map) => {
            let text = |k: &str| map.get(k).and_then(|v| v.as_str()).map(str::to_string);
            if let (Some(key), Some(access)) = (text("key"), text("access_type")) {
                return Some((key, access));
            }
            if let (Some(key), Some(access)) = (text("index_name"), text("index_access_type")) {
                return Some((key, access));
            }
            map.values().find_map(index_access)
        }
        serde_json::Value::Array(items) => items.iter().find_map(index_access),
        _ => None,
    }
}
