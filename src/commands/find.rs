//! `find` — where an archived event is, and what it said ([`crate::pipeline::find`]): by event
//! id, or by any column over a time range, with the batch, the object key, the line and the row
//! itself, and where the row stands now.
//!
//! Exit status: 0 every event id found (with `--where`: at least one row), 1 not found, 2 could
//! not look.

use crate::model::command::CommandName;
use crate::output::progress::Progress;
use crate::pipeline::report::Summary;
use crate::pipeline::RunContext;

pub(crate) use crate::pipeline::find::FindOptions;

pub(crate) async fn run(ctx: &RunContext, opts: &FindOptions) -> Summary {
    let progress = Progress::new(CommandName::Find);
    crate::pipeline::find::run(ctx, opts, &progress).await
}
