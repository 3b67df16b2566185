//! `status` — per app, where it stands ([`crate::pipeline::status`]): the typed report, which
//! `output` prints as JSON or as a table on a terminal.

use crate::model::command::CommandName;
use crate::pipeline::apps::{self, Apps, Driver, Gate, Population};
use crate::pipeline::report::Summary;
use crate::pipeline::status::Status;
use crate::pipeline::DbContext;

#[derive(Debug, Clone)]
pub struct StatusOptions {
    pub apps: Apps,
    pub cutoff_ms: i64,
    /// Purge's `--grace`, to tell rows purge takes next from rows that still wait.
    pub grace_ms: i64,
    pub delivered_status: String,
}

pub async fn run(ctx: &DbContext, opts: &StatusOptions) -> Summary {
    let mut summary = Summary::new(CommandName::Status);
    summary.table = Some(ctx.spec.name.to_string());
    summary.cutoff_ms = Some(opts.cutoff_ms);
    let apps = match apps::resolve(ctx, &opts.apps, &Population::SourceAndReceipts).await {
        Ok(apps) => apps,
        Err(e) => return summary.without_apps(e),
    };
    let status = Status::new(ctx, opts.cutoff_ms, opts.grace_ms, &opts.delivered_status);
    let driver = Driver::new(ctx, CommandName::Status, Gate::Open);
    summary.apps = driver.run(apps, &status).await;
    summary.settle()
}
