//! One exit-status rule for every command: a run that cannot list the apps it is to work on
//! (`--all-apps`, `--shard`, or every app with receipts) has done nothing and exits 2, as a run
//! that could not start does. (Until issue 11, archive and purge exited 1 here, and verify,
//! status and restore 2.) Here the database goes away between opening the run and listing the
//! apps: the run's own pool to the real server, closed.

use std::sync::Arc;

use outbox_archiver::Apps;
use outbox_archiver::Db;
use outbox_archiver::RunContext;
use outbox_archiver::Shard;
use outbox_archiver::WALLET_OUTBOX;
use outbox_archiver::{archive, archive::ArchiveOptions};
use outbox_archiver::{purge, purge::PurgeOptions};
use outbox_archiver::{restore, restore::RestoreOptions};
use outbox_archiver::{status, status::StatusOptions};
use outbox_archiver::{verify, verify::VerifyOptions};
use tokio_util::sync::CancellationToken;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_that_cannot_list_its_apps_exits_2_having_done_nothing() {
    let (db, _s3, store) = fixture().await;
    db.insert(&rows("a1", 10)).await;
    let cutoff = T0 + DAY;
    let archived = archive(
        &env(&db, store.clone(), cutoff),
        &options(&db, &["a1"], cutoff),
    )
    .await;
    assert!(archived.ok, "{}", archived.to_json());
    let runs_before = db
        .count("SELECT COUNT(*) FROM wallet_outbox_archive_runs")
        .await;

    let gone = Db::connect(&db.url, 2).await.unwrap();
    gone.close().await;
    let ctx = RunContext::new(
        &WALLET_OUTBOX,
        gone,
        store,
        CancellationToken::new(),
        Arc::new(move || cutoff),
    );
    let shard = Apps::Shard("0/2".parse::<Shard>().unwrap());
    let summaries = [
        archive::run(
            &ctx,
            &ArchiveOptions {
                apps: Apps::All,
                ..options(&db, &[], cutoff)
            },
        )
        .await,
        archive::run(
            &ctx,
            &ArchiveOptions {
                apps: shard.clone(),
                ..options(&db, &[], cutoff)
            },
        )
        .await,
        purge::run(
            &ctx,
            &PurgeOptions {
                apps: Apps::All,
                ..purge_options(&db, &[])
            },
        )
        .await,
        verify::run(&ctx, &VerifyOptions::everything(cutoff, "DELIVERED")).await,
        restore::run(&ctx, &RestoreOptions::default()).await,
        status::run(
            &ctx.base,
            &StatusOptions {
                grace_ms: 86_400_000,
                apps: Apps::All,
                cutoff_ms: cutoff,
                delivered_status: "DELIVERED".into(),
            },
        )
        .await,
    ];
    for summary in summaries {
        let json = summary.to_json();
        assert_eq!(summary.exit_code, 2, "{json}");
        assert!(!summary.ok, "{json}");
        assert!(summary.apps.is_empty(), "{json}");
        let error = summary.error.as_deref().unwrap_or_default();
        assert!(
            error.starts_with("could not list the apps to work on: ") && error.contains("closed"),
            "names what failed and why: {json}"
        );
    }

    // Nothing was done: the rows, the receipt and the run history are as they were.
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 10);
    assert_eq!(db.receipts("a1").await.len(), 1);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_runs")
            .await,
        runs_before
    );
}
