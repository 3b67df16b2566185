//! `history`'s reading of the runs table: the runs recorded, newest first, of an app — as the
//! data spells it — and of a command. By key only (the runs table's own indexes), whatever its
//! size.

use crate::db::runs::Runs;
use crate::db::DbError;
use crate::pipeline::report::details::HistoryRun;
use crate::pipeline::DbContext;

/// Which runs `history` reads.
#[derive(Debug, Clone)]
pub(crate) struct HistoryOptions {
    pub app: Option<String>,
    pub command: Option<String>,
    pub last: u32,
}

/// The last `opts.last` runs of the app and command asked for; an error when the database
/// cannot be read or `--app` names an app nothing knows (a typo, not "no run yet").
pub(crate) async fn recent(ctx: &DbContext, opts: &HistoryOptions) -> Result<HistoryRun, DbError> {
    // The app as the data spells it, where it is given: its runs are recorded so.
    let app = match &opts.app {
        Some(typed) => Some(known_app(ctx, typed).await?),
        None => None,
    };
    let runs = Runs::new(ctx.spec)
        .recent(
            &ctx.db.pool,
            app.as_deref(),
            opts.command.as_deref(),
            opts.last,
        )
        .await?;
    Ok(HistoryRun { runs })
}

/// `typed` as the data spells it: an app of the source, the receipts or the runs; else an
/// error naming the closest known apps.
async fn known_app(ctx: &DbContext, typed: &str) -> Result<String, DbError> {
    let pool = &ctx.db.pool;
    if let Some(found) = crate::db::apps::canonical(pool, ctx.spec, typed).await? {
        return Ok(found);
    }
    let runs = Runs::new(ctx.spec);
    if runs.knows_app(pool, typed).await? {
        return Ok(typed.to_string());
    }
    Err(crate::pipeline::apps::unknown_app(ctx, typed).await)
}
