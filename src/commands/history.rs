//! `history` — what the last runs did, and why one failed or did nothing: the runs table,
//! newest first — every run of the commands that work on the archive, per app (lock skips and
//! dry runs included), and the runs of a command as a whole (app code empty: it could not
//! start, worked no app, or works none, as `find`) — each with its run id, store, why it ended,
//! its error and what it found.
//!
//! Exit status: 0, also when there is no run yet; 2 when the database cannot be read or an
//! `--app` names no app (no run, no row and no receipt of it).

use crate::db::runs::{Run, Runs};
use crate::model::command::CommandName;
use crate::model::timespec;
use crate::pipeline::report::details::HistoryRun;
use crate::pipeline::report::{RunDetails, Summary};
use crate::pipeline::DbContext;

#[derive(Debug, Clone)]
pub(crate) struct HistoryOptions {
    pub app: Option<String>,
    pub command: Option<String>,
    pub last: u32,
    /// A table for a terminal, or the JSON summary.
    pub table: bool,
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
    if opts.table {
        summary.text = Some(table(&runs, (ctx.now_ms)()));
    }
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

/// One line per run: when it ended, what, which app, how, how much, how long; then its run id
/// and store, why it ended where that is news, its error and what it found.
fn table(runs: &[Run], now: i64) -> String {
    if runs.is_empty() {
        return "no run recorded yet\n".into();
    }
    let mut out = String::new();
    for r in runs {
        let ago = (now - r.finished_at_ms).max(0) / 1000;
        let took = (r.finished_at_ms - r.started_at_ms).max(0) as f64 / 1000.0;
        out.push_str(&format!(
            "{}  {:<8} {:<14} {:<20} {:>9} rows {:>5} batches {:>7.1}s ({} ago){}\n",
            timespec::rfc3339(r.finished_at_ms),
            r.command,
            if r.app_code.is_empty() {
                "(run)"
            } else {
                r.app_code.as_str()
            },
            if r.dry_run {
                format!("{} (dry run)", r.outcome)
            } else {
                r.outcome.clone()
            },
            r.row_count,
            r.batches,
            took,
            short_age(ago),
            r.run_id
                .as_deref()
                .map(|id| format!("  run {id}"))
                .unwrap_or_default(),
        ));
        if let Some(store) = &r.store {
            out.push_str(&format!("    store: {store}\n"));
        }
        if let Some(reason) = r.stop_reason.as_deref().filter(|r| !is_plain_end(r)) {
            out.push_str(&format!("    ended: {reason}\n"));
        }
        if let Some(error) = &r.error {
            out.push_str(&format!("    error: {error}\n"));
        }
        out.push_str(&findings(r));
    }
    out
}

/// A stop reason that says no more than the outcome.
fn is_plain_end(reason: &str) -> bool {
    matches!(reason, "done" | "caught up" | "error")
}

/// The findings a run recorded: how many, and the first few, one a line.
fn findings(run: &Run) -> String {
    let Some(recorded) = run
        .findings
        .as_deref()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
    else {
        return String::new();
    };
    let count = recorded["count"].as_u64().unwrap_or(0);
    let mut out = format!("    {count} findings:\n");
    let first = recorded["first"].as_array().cloned().unwrap_or_default();
    for f in first.iter().take(5) {
        let what = [
            f["kind"].as_str(),
            f["batch_id"].as_str(),
            f["event_id"].as_str(),
        ];
        let words: Vec<&str> = what.into_iter().flatten().collect();
        out.push_str(&format!("      {}\n", words.join(" ")));
    }
    if count > 5 {
        out.push_str(&format!(
            "      … and {} more (history --format json lists the first {})\n",
            count - 5,
            crate::db::runs::FINDINGS_KEPT
        ));
    }
    out
}

fn short_age(s: i64) -> String {
    match s {
        _ if s < 120 => format!("{s}s"),
        _ if s < 7200 => format!("{}m", s / 60),
        _ if s < 172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}
