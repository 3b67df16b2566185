//! `history` — what the last runs did, and why one failed or did nothing: the runs table,
//! newest first — every run of the commands that work on the archive, per app (lock skips and
//! dry runs included), and the runs of a command as a whole (app code empty: it could not
//! start, worked no app, or works none, as `find`) — each with its run id, store, why it ended,
//! its error and what it found.
//!
//! Exit status: 0, also when there is no run yet; 2 when the database cannot be read or an
//! `--app` names no app (no run, no row and no receipt of it).

use crate::db::runs::Runs;
use crate::model::command::CommandName;
use crate::pipeline::report::details::HistoryRun;
use crate::pipeline::report::{RunDetails, Summary};
use crate::pipeline::DbContext;

#[derive(Debug, Clone)]
pub(crate) struct HistoryOptions {
    pub app: Option<String>,
    pub command: Option<String>,
    pub last: u32,
}

pub(crate) async fn run(ctx: &DbContext, opts: &HistoryOptions) -> Summary {
    let mut summary = Summary::new(CommandName::History);
    summary.table = Some(ctx.spec.name.to_string());
    // The app as the data spells it, where it is given (its runs are recorded so); one that
    // nothing knows is a typo, not "no run yet".
    let app = match &opts.app {
        Some(typed) => match known_app(ctx, typed).await {
            Ok(app) => Some(app),
            Err(e) => return Summary::unusable(CommandName::History, e),
        },
        None => None,
    };
    let runs = match Runs::new(ctx.spec)
        .recent(
            &ctx.db.pool,
            app.as_deref(),
            opts.command.as_deref(),
            opts.last,
        )
        .await
    {
        Ok(runs) => runs,
        Err(e) => return Summary::unusable(CommandName::History, e.to_string()),
    };
    summary.details = Some(RunDetails::History(HistoryRun { runs }));
    summary.settle()
}

/// `typed` as the data spells it: an app of the source, the receipts or the runs; else an
/// error naming the closest known apps.
async fn known_app(ctx: &DbContext, typed: &str) -> Result<String, String> {
    let pool = &ctx.db.pool;
    if let Some(found) = crate::db::apps::canonical(pool, ctx.spec, typed)
        .await
        .map_err(|e| e.to_string())?
    {
        return Ok(found);
    }
    let runs = Runs::new(ctx.spec);
    if runs
        .knows_app(pool, typed)
        .await
        .map_err(|e| e.to_string())?
    {
        return Ok(typed.to_string());
    }
    Err(crate::pipeline::apps::unknown_app(ctx, typed)
        .await
        .to_string())
}
