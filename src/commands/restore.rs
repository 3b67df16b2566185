//! `restore` — loads archived batches back into a table (SPEC §6): every app with receipts in
//! scope through the driver (under the app's lock with `--into-source`), each batch verified
//! and loaded by [`crate::pipeline::restore`]; `--drill` restores into scratch tables and
//! records the results.

use crate::model::command::CommandName;
use crate::output::progress::Progress;
use crate::pipeline::apps::{self, Driver, Gate, Population};
use crate::pipeline::report::details::RestoreRun;
use crate::pipeline::report::{RunDetails, Summary};
use crate::pipeline::restore::{create_target, Restorer};
use crate::pipeline::RunContext;

pub use crate::pipeline::restore::RestoreOptions;

pub async fn run(ctx: &RunContext, opts: &RestoreOptions) -> Summary {
    let before = ctx.store_stats();
    let mut summary = Summary::new(CommandName::Restore);
    summary.table = Some(ctx.spec.name.to_string());
    let target = match opts.target(ctx.spec) {
        Ok(target) => target,
        Err(e) => return Summary::unusable(CommandName::Restore, e),
    };
    summary.details = Some(RunDetails::Restore(RestoreRun {
        into: (!opts.drill).then(|| target.clone()),
        drill: opts.drill,
    }));
    let which = opts.selection.apps();
    let population = Population::Receipts(opts.selection.scope(None));
    if let Err(e) = opts.selection.check_batch_ids(ctx).await {
        return summary.without_apps(e);
    }
    let apps = match apps::resolve(ctx, &which, &population).await {
        Ok(apps) => apps,
        Err(e) => return summary.without_apps(e),
    };
    if let Err(e) = create_target(ctx, opts, &target).await {
        return Summary::unusable(CommandName::Restore, e);
    }
    let progress = Progress::new(CommandName::Restore);
    let restorer = Restorer::new(ctx, opts, target, &progress);
    // Into the source table, restore writes where archive reads: under the app's lock.
    let gate = match opts.into_source {
        true => Gate::Lock {
            prefix: &opts.lock_prefix,
            dry_run: false,
        },
        false => Gate::Open,
    };
    let driver = Driver::new(ctx, CommandName::Restore, gate)
        .noting_runs()
        .parallel(opts.parallel_apps);
    summary.apps = driver.run(apps, &restorer).await;
    summary.store_requests = ctx.store_activity(&before);
    summary.settle()
}
