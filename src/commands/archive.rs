//! `archive` — the CronJob (SPEC §6): every app through the driver's gate (safe code, lock),
//! the store probed once for write-once, then each app's batches archived by
//! [`crate::pipeline::archive`].

use crate::model::command::CommandName;
use std::time::Instant;

use crate::output::progress::Progress;
use crate::pipeline::apps::{self, Driver, Gate, Population};
use crate::pipeline::archive::Archiver;
use crate::pipeline::publish::probe_write_once;
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
    if !opts.dry_run && !apps.is_empty() {
        if let Err(e) = ctx
            .db
            .record_archived_columns(ctx.spec, (ctx.now_ms)())
            .await
        {
            summary.error = Some(e.to_string());
            return summary.settle();
        }
        match probe_write_once(ctx).await {
            Ok(found) => summary.conditional_put = found,
            Err(e) => {
                let error = format!(
                    "probing whether the store refuses create-only puts (If-None-Match): {e} \
                     (a store that rejects the header: set --s3-conditional-put false)"
                );
                if e.is_configuration() {
                    return Summary::unusable(CommandName::Archive, error);
                }
                summary.error = Some(error);
                return summary.settle();
            }
        }
    }
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
    // A built-in table's format is fixed: a column added to the table is held to its default.
    let unarchived = match ctx.db.unarchived(ctx.spec).await {
        Ok(unarchived) => unarchived,
        Err(e) => return summary.without_apps(e),
    };
    if !unarchived.is_empty() {
        tracing::warn!(
            table = ctx.spec.name,
            columns = unarchived
                .columns
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            "the table has columns its built-in format has no key for: rows are archived only while each holds its default (describe the table with --table-profile to archive them)"
        );
    }
    let archiver = Archiver::new(ctx, opts, &progress, deadline).holding(unarchived);
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
