//! `history` — what the last runs did, and why one failed or did nothing: the runs table,
//! newest first — every run of the commands that work on the archive, per app (lock skips and
//! dry runs included), and the runs of a command as a whole (app code empty: it could not
//! start, worked no app, or works none, as `find`) — each with its run id, store, why it ended,
//! its error and what it found.
//!
//! Exit status: 0, also when there is no run yet; 2 when the database cannot be read or an
//! `--app` names no app (no run, no row and no receipt of it).

use crate::model::command::CommandName;
use crate::pipeline::history::recent;
use crate::pipeline::report::{RunDetails, Summary};
use crate::pipeline::DbContext;

pub(crate) use crate::pipeline::history::HistoryOptions;

pub(crate) async fn run(ctx: &DbContext, opts: &HistoryOptions) -> Summary {
    let mut summary = Summary::new(CommandName::History);
    summary.table = Some(ctx.spec.name.to_string());
    match recent(ctx, opts).await {
        Ok(run) => summary.details = Some(RunDetails::History(run)),
        Err(e) => return Summary::unusable(CommandName::History, e.to_string()),
    }
    summary.settle()
}
