//! `history` — what the last runs did, and why one failed: the runs table, newest first, every
//! command's runs per app (archive, purge, verify, restore, compact) and the runs of a command
//! that could not start (app code empty) with its error.
//!
//! Exit status: 0, also when there is no run yet; 2 when the database cannot be read.

use crate::db::runs::{Run, Runs};
use crate::model::command::CommandName;
use crate::model::timespec;
use crate::pipeline::report::details::HistoryRun;
use crate::pipeline::report::{RunDetails, Summary};
use crate::pipeline::DbContext;

#[derive(Debug, Clone)]
pub struct HistoryOptions {
    pub app: Option<String>,
    pub command: Option<String>,
    pub last: u32,
    /// A table for a terminal, or the JSON summary.
    pub table: bool,
}

pub async fn run(ctx: &DbContext, opts: &HistoryOptions) -> Summary {
    let mut summary = Summary::new(CommandName::History);
    summary.table = Some(ctx.spec.name.to_string());
    // The app as the data spells it, where it is given (its runs are recorded so).
    let app = match &opts.app {
        Some(typed) => match crate::db::apps::canonical(&ctx.db.pool, ctx.spec, typed).await {
            Ok(found) => Some(found.unwrap_or_else(|| typed.clone())),
            Err(e) => return Summary::unusable(CommandName::History, e.to_string()),
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

/// One line per run: when it ended, what, which app, how, how much, how long, and its error.
fn table(runs: &[Run], now: i64) -> String {
    if runs.is_empty() {
        return "no run recorded yet\n".into();
    }
    let mut out = String::new();
    for r in runs {
        let ago = (now - r.finished_at_ms).max(0) / 1000;
        let took = (r.finished_at_ms - r.started_at_ms).max(0) as f64 / 1000.0;
        out.push_str(&format!(
            "{}  {:<8} {:<14} {:<14} {:>9} rows {:>5} batches {:>7.1}s ({} ago){}\n",
            timespec::rfc3339(r.finished_at_ms),
            r.command,
            if r.app_code.is_empty() {
                "(run)"
            } else {
                r.app_code.as_str()
            },
            r.outcome,
            r.row_count,
            r.batches,
            took,
            short_age(ago),
            r.error
                .as_deref()
                .map(|e| format!("\n    error: {e}"))
                .unwrap_or_default()
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
