//! `history`'s reading of the runs table: the runs recorded, newest first, of an app — as the
//! data spells it — and of a command. By key only (the runs table's own indexes), whatever its
//! size.

use super::command::Command;
use crate::db::runs::{Run, RunFilter, FINDINGS_KEPT};
use crate::db::DbError;
use crate::model::command::CommandName;
use crate::pipeline::report::details::HistoryRun;
use crate::pipeline::report::{RunDetails, Summary};
use crate::pipeline::DbContext;

/// Which runs `history` reads.
#[derive(Debug, Clone)]
pub(crate) struct HistoryOptions {
    pub app: Option<String>,
    pub command: Option<String>,
    pub last: u32,
    /// Runs started at or after this instant (epoch ms).
    pub since_ms: Option<i64>,
    /// Runs started before this instant (epoch ms).
    pub until_ms: Option<i64>,
}

/// `history` — what the last runs did, and why one failed or did nothing: the runs table,
/// newest first — every run of the commands that work on the archive, per app (lock skips and
/// dry runs included), and the runs of a command as a whole (app code empty: it could not
/// start, worked no app, or works none, as `find`) — each with its run id, store, why it ended,
/// its error and what it found. Exit status 0, also when there is no run yet; 2 when the
/// database cannot be read or an `--app` names no app (no run, no row and no receipt of it).
pub(crate) async fn run(ctx: &DbContext, opts: &HistoryOptions) -> Summary {
    let mut summary = Summary::new(CommandName::History);
    summary.table = Some(ctx.spec.name.to_string());
    match recent(ctx, opts).await {
        Ok(run) => summary.details = Some(RunDetails::History(run)),
        Err(e) => return Summary::unusable(CommandName::History, e.to_string()),
    }
    summary.settle()
}

#[async_trait::async_trait]
impl Command for HistoryOptions {
    const NAME: CommandName = CommandName::History;
    type Context = DbContext;
    async fn run(&self, ctx: &DbContext, _: &dyn super::Observer) -> Summary {
        run(ctx, self).await
    }
}

/// The last `opts.last` runs of the app and command asked for; an error when the database
/// cannot be read or `--app` names an app nothing knows (a typo, not "no run yet").
pub(crate) async fn recent(ctx: &DbContext, opts: &HistoryOptions) -> Result<HistoryRun, DbError> {
    // The app as the data spells it, where it is given: its runs are recorded so.
    let app = match &opts.app {
        Some(typed) => Some(known_app(ctx, typed).await?),
        None => None,
    };
    let filter = RunFilter {
        app: app.as_deref(),
        command: opts.command.as_deref(),
        since_ms: opts.since_ms,
        until_ms: opts.until_ms,
        limit: opts.last,
    };
    let mut runs = ctx.tables.runs.recent(&filter).await?;
    with_recorded_versions(ctx, &mut runs).await?;
    Ok(HistoryRun { runs })
}

/// The object versions each run of `relocate` or `verify` recorded anew (SPEC §5.17), with their
/// evidence: the count and the first [`FINDINGS_KEPT`] of each, two dives into their table's
/// run key per run shown — never a read that grows with the archive's history.
async fn with_recorded_versions(ctx: &DbContext, runs: &mut [Run]) -> Result<(), DbError> {
    let versions = &ctx.tables.versions;
    for run in runs.iter_mut() {
        let Some(run_id) = run.run_id.as_deref() else {
            continue;
        };
        let recording = [CommandName::Relocate, CommandName::Verify]
            .into_iter()
            .any(|c| run.command.is(c));
        if !recording || run.dry_run {
            continue;
        }
        // A run as a whole (relocate's) recorded for every app; an app's, for that app.
        let app = Some(run.app_code.as_str()).filter(|a| !a.is_empty());
        let recorded = versions.of_run(run_id, app, FINDINGS_KEPT as u32).await?;
        run.recorded_versions = (recorded.count > 0).then_some(recorded);
    }
    Ok(())
}

/// `typed` as the data spells it: an app of the source, the receipts or the runs; else an
/// error naming the closest known apps.
async fn known_app(ctx: &DbContext, typed: &str) -> Result<String, DbError> {
    if let Some(found) = ctx.tables.canonical_app(typed).await? {
        return Ok(found);
    }
    let runs = &ctx.tables.runs;
    if runs.knows_app(typed).await? {
        return Ok(typed.to_string());
    }
    Err(crate::pipeline::apps::unknown_app(ctx, typed).await)
}
