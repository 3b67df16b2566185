//! `archive` — the CronJob (SPEC §6): the run prepared once (the store probed for write-once,
//! the table's columns read), then every app through the driver's gate (safe code, lock), each
//! app's batches archived by [`crate::pipeline::archive`].

use crate::model::command::CommandName;
use std::time::Instant;

use crate::output::progress::Progress;
use crate::pipeline::apps::{self, Driver, Gate, Population};
use crate::pipeline::archive::{prepare, Archiver, Unprepared};
use crate::pipeline::report::Summary;
use crate::pipeline::RunContext;

pub use crate::pipeline::archive::ArchiveOptions;

pub async fn run(ctx: &RunContext, opts: &ArchiveOptions) -> Summary {
    let before = ctx.store_stats();
    let mut summary = Summary::new(CommandName::Archive);
    summary.table = Some(ctx.spec.name.to_string());
    summary.store = Some(ctx.store.location().to_string());
    summary.dry_run = Some(opts.dry_run);
    summary.cutoff_ms = Some(opts.cutoff_ms);
    let apps = match apps::resolve(ctx, &opts.apps, &Population::Source).await {
        Ok(apps) => apps,
        Err(e) => return summary.without_apps(e),
    };
    let prepared = match prepare(ctx, opts, &apps).await {
        Ok(prepared) => prepared,
        Err(Unprepared::Unusable(e)) => return Summary::unusable(CommandName::Archive, e),
        Err(Unprepared::Failed(e)) => {
            summary.error = Some(e);
            return summary.settle();
        }
        Err(Unprepared::WithoutApps(e, conditional_put)) => {
            summary.conditional_put = conditional_put;
            return summary.without_apps(e);
        }
    };
    summary.conditional_put = prepared.conditional_put;
    if !apps.is_empty() {
        tracing::info!(
            apps = apps.len(),
            at_once = opts.parallel_apps.min(apps.len()),
            memory_budget_mib = opts.memory_budget >> 20,
            "archiving"
        );
    }
    let deadline = opts.max_runtime.map(|d| Instant::now() + d);
    let progress = Progress::new(CommandName::Archive);
    let archiver = Archiver::new(ctx, opts, &progress, deadline).on(prepared.definition);
    let gate = Gate::Lock {
        prefix: &opts.lock_prefix,
        dry_run: opts.dry_run,
    };
    let driver = Driver::new(ctx, CommandName::Archive, gate)
        .retries(opts.db_retries)
        .until(deadline)
        .noting_runs()
        .parallel(opts.parallel_apps);
    summary.apps = driver.run(apps, &archiver).await;
    summary.store_requests = ctx.store_activity(&before);
    summary.settle()
}
