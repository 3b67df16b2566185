//! `verify` — scrubs the archive (SPEC §6): every app in scope through the driver, its receipts
//! re-read and its stragglers looked for by [`crate::pipeline::verify`], then the orphans of the
//! run's prefix.
//!
//! Findings are data: exit 0 when clean, 1 when anything was found, 2 when it could not run.
//! Orphans are listed as information (an interrupted run leaves them) and do not fail the run.

use crate::model::command::CommandName;
use crate::model::format;
use crate::output::progress::Progress;
use crate::pipeline::apps::{self, Apps, Driver, Gate, Population};
use crate::pipeline::report::{RunDetails, Summary};
use crate::pipeline::verify::{orphans_under, Verify};
use crate::pipeline::RunContext;

pub use crate::pipeline::verify::{sampled, VerifyOptions};

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
    // An app whose receipts and rows are all gone still has its log in the store: its
    // log is audited too (every leaf a gap).
    if matches!(which, Apps::All) && opts.selection.batch_ids.is_empty() {
        let case_matters = match ctx.app_case_matters().await {
            Ok(matters) => matters,
            Err(e) => return summary.without_apps(e),
        };
        match crate::pipeline::log::apps_in_store(ctx).await {
            Ok(anchored) => apps::add_missing(&mut apps, anchored, case_matters),
            Err(e) => return summary.without_apps(format!("listing the apps' logs: {e}")),
        }
    }
    let progress = Progress::new(CommandName::Verify);
    let verify = Verify::new(ctx, opts, &progress);
    let driver = Driver::new(ctx, CommandName::Verify, Gate::Open).noting_runs();
    // Orphans are looked for under the apps' own spellings (what their keys hold).
    let listed = apps.clone();
    summary.apps = driver.run(apps, &verify).await;
    let mut run = verify.run_details();
    // Orphans: under each listed app's prefix, or under the whole table's prefix (not when the
    // run was stopped: a stopped run starts nothing more).
    let stopped = ctx.stop_reason(None).is_some();
    if opts.selection.whole_apps() && opts.sample_percent.is_none() && !stopped {
        let table = format::table_prefix(ctx.store.location().prefix(), ctx.spec.name);
        let prefixes = match &which {
            Apps::Listed(_) => listed
                .iter()
                .map(|app| format::app_prefix(&table, app))
                .collect(),
            _ => vec![table.clone()],
        };
        for prefix in prefixes {
            if let Err(e) = orphans_under(ctx, &table, &prefix, &mut run.orphans).await {
                summary.error = Some(format!("listing {prefix}: {e}"));
            }
        }
    }
    if let Some(error) = wrong_location(ctx, &run).await {
        // Not data loss to escalate: a store setting that points elsewhere.
        run.findings.clear();
        summary.error = Some(error);
    }
    summary.details = Some(RunDetails::Verify(run));
    summary.store_requests = ctx.store_activity(&before);
    summary.settle()
}

/// When every batch checked is missing its objects and nothing at all lies under the table's
/// prefix, `--store` points elsewhere (another bucket, a prefix one level off): one error that
/// names the setting, instead of a `missing_object` finding per object.
async fn wrong_location(
    ctx: &RunContext,
    run: &crate::pipeline::report::details::VerifyRun,
) -> Option<String> {
    use crate::pipeline::verifier::FindingKind;
    if run.checked_batches.is_empty()
        || run
            .findings
            .iter()
            .any(|f| f.kind != FindingKind::MissingObject)
    {
        return None;
    }
    let missing: std::collections::HashSet<&str> = run
        .findings
        .iter()
        .filter_map(|f| f.batch_id.as_deref())
        .collect();
    if missing.len() as u64 != run.checked_batch_count {
        return None;
    }
    let table = format::table_prefix(ctx.store.location().prefix(), ctx.spec.name);
    use futures_util::StreamExt;
    let first = ctx.store.list_pages(&table).next().await;
    let empty = match first {
        None => true,
        Some(Ok(keys)) => keys.is_empty(),
        Some(Err(_)) => false,
    };
    if !empty {
        return None;
    }
    Some(format!(
        "none of the {} batches checked has an object in the store, and nothing lies under {table} at {}: --store / OUTBOX_ARCHIVER_STORE most likely names another bucket or prefix than the archive was written to (the receipts' keys look like {}). If it is the right one, the archive is gone: escalate",
        run.checked_batch_count,
        ctx.store.location(),
        run.findings.first().and_then(|f| f.key.as_deref()).unwrap_or("?")
    ))
}
