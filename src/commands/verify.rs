//! `verify` — scrubs the archive (SPEC §6): every app in scope through the driver, its receipts
//! re-read and its stragglers looked for by [`crate::pipeline::verify`], then the orphans of the
//! run's prefix.
//!
//! Findings are data: exit 0 when clean, 1 when anything was found, 2 when it could not run.
//! Orphans are listed as information (an interrupted run leaves them) and do not fail the run.

use crate::model::command::CommandName;
use crate::output::progress::Progress;
use crate::pipeline::apps::{self, Apps, Driver, Gate, Population};
use crate::pipeline::report::{RunDetails, Summary};
use crate::pipeline::verify::{around, Verify};
use crate::pipeline::RunContext;

pub use crate::pipeline::verify::VerifyOptions;

pub async fn run(ctx: &RunContext, opts: &VerifyOptions) -> Summary {
    let before = ctx.store_stats();
    let mut summary = Summary::new(CommandName::Verify);
    summary.table = Some(ctx.spec.name.to_string());
    summary.store = Some(ctx.store.location().to_string());
    summary.cutoff_ms = Some(opts.cutoff_ms);
    let which = opts.selection.apps();
    let population = match opts.selection.batch_ids.is_empty() {
        true => Population::SourceAndReceipts,
        false => Population::Receipts(opts.selection.scope(None)),
    };
    if let Err(e) = opts.selection.check_batch_ids(ctx).await {
        return summary.without_apps(e);
    }
    let mut apps = match apps::resolve(ctx, &which, &population).await {
        Ok(apps) => apps,
        Err(e) => return summary.without_apps(e),
    };
    if matches!(which, Apps::All) && opts.selection.batch_ids.is_empty() {
        if let Err(e) = apps::add_logged(ctx, &mut apps).await {
            return summary.without_apps(e);
        }
    }
    let progress = Progress::new(CommandName::Verify);
    let verify = Verify::new(ctx, opts, &progress);
    let driver = Driver::new(ctx, CommandName::Verify, Gate::Open).noting_runs();
    // Orphans are looked for under the apps' own spellings (what their keys hold).
    let listed = apps.clone();
    summary.apps = driver.run(apps, &verify).await;
    let mut run = verify.run_details();
    if let Some(error) = around(ctx, opts, &which, &listed, &mut run).await {
        summary.error = Some(error);
    }
    summary.details = Some(RunDetails::Verify(run));
    summary.store_requests = ctx.store_activity(&before);
    summary.settle()
}
