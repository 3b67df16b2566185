//! `purge` — deletes source rows that are exact members of VERIFIED receipts older than the
//! grace period (SPEC §6), under the same per-app lock as `archive`, after looking at each
//! batch's objects (SPEC §5.9): every app through the driver, each by
//! [`crate::pipeline::purge`].

use crate::model::command::CommandName;
use crate::output::progress::Progress;
use std::time::Instant;

use crate::pipeline::apps::{self, Driver, Gate, Population};
use crate::pipeline::purge::Purger;
use crate::pipeline::report::details::PurgeRun;
use crate::pipeline::report::{RunDetails, Summary};
use crate::pipeline::RunContext;

pub use crate::pipeline::purge::PurgeOptions;
pub use crate::pipeline::report::details::ObjectCheck;

pub async fn run(ctx: &RunContext, opts: &PurgeOptions) -> Summary {
    let before = ctx.store_stats();
    let mut summary = Summary::new(CommandName::Purge);
    summary.table = Some(ctx.spec.name.to_string());
    summary.dry_run = Some(opts.dry_run);
    summary.details = Some(RunDetails::Purge(PurgeRun {
        object_check: opts.objects,
    }));
    let population = Population::Unpurged {
        include_restored: opts.include_restored,
    };
    let apps = match apps::resolve(ctx, &opts.apps, &population).await {
        Ok(apps) => apps,
        Err(e) => return summary.without_apps(e),
    };
    if opts.include_restored {
        tracing::warn!(
            "--include-restored: batches restored into the source are purged again like any other"
        );
    }
    if opts.objects == ObjectCheck::Trusted {
        tracing::warn!(
            "--trust-receipts: rows are deleted on the strength of their receipts alone; the \
             batches' objects are not looked at before deleting (scrub the archive with verify)"
        );
    }
    let started = Instant::now();
    let deadline = opts.max_runtime.map(|d| started + d);
    let progress = Progress::new(CommandName::Purge);
    let purger = Purger::new(ctx, opts, started, deadline, &progress);
    let gate = Gate::Lock {
        prefix: &opts.lock_prefix,
        dry_run: opts.dry_run,
    };
    let driver = Driver::new(ctx, CommandName::Purge, gate)
        .retries(opts.db_retries)
        .until(deadline)
        .noting_runs()
        .parallel(opts.parallel_apps);
    summary.apps = driver.run(apps, &purger).await;
    summary.store_requests = ctx.store_activity(&before);
    summary.settle()
}
