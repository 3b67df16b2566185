//! `compact` — replaces the member rows of receipts fully purged longer ago than `--older-than`
//! by a digest on the receipt (README, "Compaction"), under each app's lock, after reading every
//! batch back in full: every app with receipts through the driver, each by
//! [`crate::pipeline::compact`].

use crate::model::command::CommandName;
use crate::output::progress::Progress;
use std::time::Instant;

use crate::pipeline::apps::{self, Driver, Gate, Population};
use crate::pipeline::compact::Compactor;
use crate::pipeline::report::Summary;
use crate::pipeline::RunContext;

pub use crate::pipeline::compact::CompactOptions;

pub async fn run(ctx: &RunContext, opts: &CompactOptions) -> Summary {
    let before = ctx.store_stats();
    let mut summary = Summary::new(CommandName::Compact);
    summary.table = Some(ctx.spec.name.to_string());
    summary.store = Some(ctx.store.location().to_string());
    summary.dry_run = Some(opts.dry_run);
    let population = Population::Receipts(Default::default());
    let apps = match apps::resolve(ctx, &opts.apps, &population).await {
        Ok(apps) => apps,
        Err(e) => return summary.without_apps(e),
    };
    let deadline = opts.max_runtime.map(|d| Instant::now() + d);
    let progress = Progress::new(CommandName::Compact);
    let compactor = Compactor::new(ctx, opts, deadline, &progress);
    let gate = Gate::Lock {
        prefix: &opts.lock_prefix,
        dry_run: opts.dry_run,
    };
    let driver = Driver::new(ctx, CommandName::Compact, gate)
        .retries(opts.db_retries)
        .until(deadline)
        .noting_runs();
    summary.apps = driver.run(apps, &compactor).await;
    summary.store_requests = ctx.store_activity(&before);
    summary.settle()
}
