//! Contention (issue 5, in part): sixteen archivers started together on the same apps — exactly one
//! works each app at a time, every row is archived exactly once, the others report skipped.

use outbox_archiver::Outcome;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_archivers_on_the_same_apps_archive_each_row_once() {
    let (db, _s3, store) = fixture().await;
    let apps = ["a1", "a2", "a3", "a4"];
    for app in apps {
        db.insert(
            &(0..300)
                .map(|i| row(app, &format!("{app}-{i:04}"), T0 + i * 100))
                .collect::<Vec<_>>(),
        )
        .await;
    }
    let env = env(&db, store.clone(), T0 + DAY);
    let mut opts = options(&db, &apps, T0 + DAY);
    opts.limits.max_rows = 40;
    let runs = futures_util::future::join_all((0..16).map(|_| archive(&env, &opts))).await;

    let mut archived_by_app = std::collections::HashMap::<&str, u64>::new();
    for summary in &runs {
        assert!(summary.ok, "{}", summary.to_json());
        for (app, report) in apps.iter().zip(&summary.apps) {
            assert!(
                matches!(
                    report.outcome,
                    Outcome::Archived | Outcome::SkippedLocked | Outcome::UpToDate
                ),
                "{}",
                summary.to_json()
            );
            *archived_by_app.entry(app).or_default() += report.rows;
        }
    }
    for app in apps {
        assert_eq!(
            archived_by_app[app], 300,
            "{app}: every row archived once across the sixteen runs"
        );
        let members = db.members(app).await;
        assert_eq!(members.len(), 300);
        assert_eq!(
            archived_rows(&db, store.as_ref(), app).await,
            db.expected_rows(app, T0 + DAY).await
        );
    }
    let skipped = runs
        .iter()
        .flat_map(|s| &s.apps)
        .filter(|a| a.outcome == Outcome::SkippedLocked)
        .count();
    assert!(
        skipped > 0,
        "with sixteen at once, some found the lock held"
    );
}
