//! `deploy/mysql-grants.sql`, applied to the real server, gives each role what its commands need
//! and no more: the archive role archives, verifies and reports status but cannot delete a row;
//! the purge role purges but cannot write a receipt; the compaction role compacts; the restore
//! role restores into a table of its own and, with the grants the file names, into the source.
//! Each refusal is a clean failure.

use sqlx::{AssertSqlSafe, Executor};

use crate::support::*;

const PASSWORD: &str = "role-password-1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_least_privilege_roles_can_do_their_jobs_and_no_more() {
    let db = TestDb::new().await;
    db.insert(&rows("a1", 30)).await;
    let suffix = db.name.trim_start_matches("oat_");
    let (archiver, purger) = (format!("oa_{suffix}"), format!("op_{suffix}"));
    let compactor = format!("oc_{suffix}");
    let url_of = apply_grants(&db, [&archiver, &purger, &compactor], PASSWORD).await;
    let grants = grants_sql(&db, [&archiver, &purger, &compactor], PASSWORD);
    let mut admin = admin_connection().await;
    let dir = tempfile::tempdir().unwrap();
    let as_role = |user: &str| {
        vec![
            ("DATABASE_URL", url_of(user)),
            (
                "OUTBOX_ARCHIVER_STORE",
                format!("file://{}", dir.path().display()),
            ),
            ("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()),
        ]
    };

    // The archive role: archive, verify, status.
    for args in [
        vec![
            "archive",
            "--app",
            "a1",
            "--batch-rows",
            "10",
            "--older-than",
            "1s",
        ],
        vec!["verify", "--app", "a1", "--older-than", "1s"],
        vec!["status", "--format", "json"],
    ] {
        let run = run_cli(&args, &as_role(&archiver)).await;
        assert_eq!(
            run.code, 0,
            "{args:?} as the archive role: {}",
            run.all_output
        );
    }
    assert_eq!(db.members("a1").await.len(), 30);

    // ... but not purge: refused by the server, cleanly, nothing deleted (MariaDB refuses the
    // DELETE; MySQL already the locking read of the rows before it).
    let run = run_cli(
        &["purge", "--app", "a1", "--grace", "1ms"],
        &as_role(&archiver),
    )
    .await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output.contains("DELETE command denied")
            || run
                .all_output
                .contains("SELECT with locking clause command denied"),
        "{}",
        run.all_output
    );
    assert!(!run.all_output.contains(PASSWORD));
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 30);

    // The purge role purges, and cannot archive.
    let run = run_cli(
        &["purge", "--app", "a1", "--grace", "1ms"],
        &as_role(&purger),
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
    db.insert(&rows("a2", 5)).await;
    let run = run_cli(
        &["archive", "--app", "a2", "--older-than", "1s"],
        &as_role(&purger),
    )
    .await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output.contains("INSERT command denied"),
        "{}",
        run.all_output
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_receipts WHERE app_code = 'a2'")
            .await,
        0
    );

    // The compaction role compacts; the purge role, which may delete outbox rows, may not delete
    // the proof of what it deleted. (MariaDB refuses the DELETE; MySQL already the locking read
    // before it, which needs DELETE or UPDATE on the members too.)
    let compact = ["compact", "--app", "a1", "--older-than", "0s"];
    let run = run_cli(&compact, &as_role(&purger)).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output.contains("DELETE command denied")
            || run
                .all_output
                .contains("SELECT with locking clause command denied"),
        "{}",
        run.all_output
    );
    assert_eq!(db.members("a1").await.len(), 30, "no member row went");
    let run = run_cli(&compact, &as_role(&compactor)).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(run.summary["apps"][0]["compacted_member_rows"], 30);
    assert!(db.members("a1").await.is_empty());

    // The restore role, as the file shows it (commented out: it is created for an incident):
    // restores into a table of its own.
    let restorer = format!("or_{suffix}");
    for line in grants.lines().filter(|l| l.contains("'outbox_restorer'")) {
        let statement = line
            .trim_start_matches("-- ")
            .trim_end_matches(';')
            .replace("'outbox_restorer'", &format!("'{restorer}'"));
        if statement.starts_with("CREATE USER") || statement.starts_with("GRANT") {
            admin
                .execute(AssertSqlSafe(statement.clone()))
                .await
                .unwrap_or_else(|e| panic!("{statement}: {e}"));
        }
    }
    let run = run_cli(&["restore", "--app", "a1"], &as_role(&restorer)).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        run.summary["apps"][0]["restored_rows"], 30,
        "{}",
        run.all_output
    );
    // Into the live table, with what the file says that needs besides (a1's batches were
    // compacted: their rows get member rows again).
    for statement in [
        format!(
            "GRANT UPDATE ON `{}`.wallet_outbox_archive_receipts TO '{restorer}'@'%'",
            db.name
        ),
        format!(
            "GRANT INSERT, UPDATE ON `{}`.wallet_outbox_archive_members TO '{restorer}'@'%'",
            db.name
        ),
    ] {
        admin.execute(AssertSqlSafe(statement)).await.unwrap();
    }
    let run = run_cli(
        &["restore", "--app", "a1", "--into-source"],
        &as_role(&restorer),
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox WHERE app_code = 'a1'")
            .await,
        30
    );

    for user in [&archiver, &purger, &compactor, &restorer] {
        admin
            .execute(AssertSqlSafe(format!("DROP USER '{user}'@'%'")))
            .await
            .unwrap();
    }
}
